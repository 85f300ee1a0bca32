/* tools/common/secure.c: what a core dump of a tool that holds secrets can
 * carry (nothing), and how secret files are written (0600, atomically, never
 * through a symlink). Plain C: exits 1 naming the first failed check. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secure.h"

static int failures;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: FAIL: %s (errno %d)\n", __FILE__, __LINE__, #cond, errno); \
      failures++;                                                           \
    }                                                                       \
  } while (0)

static char *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += r;
    if (n + 1 == cap) {
      char *b = realloc(buf, cap * 2);
      if (!b) break;
      buf = b;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

/* The VmFlags of the /proc/self/smaps mapping that holds @p p. */
static int mapping_has_flag(const void *p, const char *flag)
{
  char *smaps = slurp("/proc/self/smaps", NULL);
  if (!smaps) return -1;
  uintptr_t a = (uintptr_t)p;
  int in = 0, found = -1;
  for (char *line = strtok(smaps, "\n"); line && found < 0; line = strtok(NULL, "\n")) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      in = a >= lo && a < hi;
    } else if (in && !strncmp(line, "VmFlags:", 8)) {
      char want[8];
      snprintf(want, sizeof(want), " %s", flag);
      found = strstr(line, want) != NULL;
    }
  }
  free(smaps);
  return found;
}

static void test_no_dumps(void)
{
  CHECK(secure_no_dumps() == 0);
  CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0);
  struct rlimit r;
  CHECK(getrlimit(RLIMIT_CORE, &r) == 0 && r.rlim_cur == 0 && r.rlim_max == 0);
  /* the hard limit cannot come back */
  struct rlimit more = {1 << 20, 1 << 20};
  if (geteuid() != 0) CHECK(setrlimit(RLIMIT_CORE, &more) != 0);
  char *filter = slurp("/proc/self/coredump_filter", NULL);
  CHECK(filter && strtoul(filter, NULL, 16) == 0);
  free(filter);
}

static void test_dontdump(void)
{
  size_t n = 3 * 4096 + 17;
  char *secret = malloc(n);
  CHECK(secret != NULL);
  if (!secret) return;
  memset(secret, 'x', n);
  CHECK(mapping_has_flag(secret, "dd") == 0);
  CHECK(secure_dontdump(secret, n) == 0);
  CHECK(mapping_has_flag(secret, "dd") == 1);
  CHECK(mapping_has_flag(secret + n - 1, "dd") == 1);
  CHECK(secure_dontdump(NULL, 0) == 0);
  free(secret);
}

static void test_write_file(const char *dir)
{
  char path[4096], target[4096], link[4096], fifo[4096];
  snprintf(path, sizeof(path), "%s/relay.conf", dir);
  snprintf(target, sizeof(target), "%s/elsewhere", dir);
  snprintf(link, sizeof(link), "%s/link.conf", dir);
  snprintf(fifo, sizeof(fifo), "%s/fifo.conf", dir);
  umask(022);

  /* a new file: 0600 whatever the umask */
  CHECK(secure_write_file(path, "secret one\n", 11) == 0);
  struct stat st, before;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600 && st.st_size == 11);

  /* an existing, wider file is replaced by a new one (a new inode: readers never see half) */
  CHECK(chmod(path, 0644) == 0 && stat(path, &before) == 0);
  CHECK(secure_write_file(path, "secret two, longer\n", 19) == 0);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600 && st.st_size == 19 && st.st_ino != before.st_ino);
  char *text = slurp(path, NULL);
  CHECK(text && !strcmp(text, "secret two, longer\n"));
  free(text);

  /* a symlink is refused and what it points to is untouched */
  FILE *f = fopen(target, "w");
  CHECK(f != NULL);
  if (f) fclose(f);
  CHECK(symlink(target, link) == 0);
  errno = 0;
  CHECK(secure_write_file(link, "secret\n", 7) == -1 && errno == ELOOP);
  CHECK(stat(target, &st) == 0 && st.st_size == 0);
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));

  /* not a regular file */
  CHECK(mkfifo(fifo, 0600) == 0);
  errno = 0;
  CHECK(secure_write_file(fifo, "secret\n", 7) == -1 && errno == EINVAL);

  /* no temporary file is left behind */
  char cmd[4200];
  snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 4", dir);
  CHECK(system(cmd) == 0);
  unlink(path);
  unlink(target);
  unlink(link);
  unlink(fifo);
}

int main(void)
{
  char dir[] = "/tmp/tf-secure-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  test_write_file(dir);
  test_dontdump();
  test_no_dumps(); /* last: the process is not dumpable afterwards */
  rmdir(dir);
  if (failures) fprintf(stderr, "test_secure: %d failures\n", failures);
  else printf("test_secure: ok\n");
  return failures ? 1 : 0;
}
