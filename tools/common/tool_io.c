/* See tool_io.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tool_io.h"

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void tool_say(const char *prog, const char *what, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "%s: ", prog);
  if (what) fprintf(stderr, "%s: ", what);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

char *tool_read_file(const char *path, size_t *len, size_t max)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf && n <= max) {
    if (n + 1 >= cap) {
      char *bigger = realloc(buf, cap * 2);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    size_t want = cap - n - 1;
    if (want > max + 1 - n) want = max + 1 - n;
    size_t r = fread(buf + n, 1, want, f);
    if (r == 0) break;
    n += r;
  }
  int err = !buf ? ENOMEM : ferror(f) ? EIO : 0;
  fclose(f);
  if (err) {
    free(buf);
    errno = err;
    return NULL;
  }
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

int tool_write_atomic(const char *dir, const char *name, const char *data, size_t len, mode_t mode)
{
  char tmp[4096], path[4096];
  if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name) >= sizeof(tmp) ||
      (size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return -1;
  size_t off = 0;
  int ok = fchmod(fd, mode) == 0;
  while (ok && off < len) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) ok = 0;
    else off += (size_t)w;
  }
  if (ok && fsync(fd) < 0) ok = 0;
  int saved = errno;
  if (close(fd) < 0 && ok) ok = 0, saved = errno;
  if (ok && rename(tmp, path) < 0) ok = 0, saved = errno;
  if (!ok) {
    unlink(tmp);
    errno = saved;
    return -1;
  }
  return 0;
}

char *tool_join(const char *dir, const char *name)
{
  char *p = NULL;
  return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

int tool_stop_signalfd(void)
{
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &stop, NULL) != 0) return -1;
  return signalfd(-1, &stop, SFD_CLOEXEC);
}

int tool_number(const char *prog, const char *flag, const char *text, long long min, long long max, long long *out)
{
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || *end || v < min || v > max) {
    tool_say(prog, flag, "\"%s\" is not a whole number from %lld to %lld", text, min, max);
    return -1;
  }
  *out = v;
  return 0;
}
