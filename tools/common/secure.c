/* Secret hygiene for the tools: no core dumps, secret pages out of dumps,
 * secret files written atomically, never through a symlink. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "secure.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int secure_no_dumps(void)
{
  int failed = 0, err = 0;
  /* before PR_SET_DUMPABLE: a process that is not dumpable may not write its own /proc files */
  int fd = open("/proc/self/coredump_filter", O_WRONLY | O_CLOEXEC);
  if ((fd < 0 && errno != ENOENT) || (fd >= 0 && write(fd, "0", 1) != 1)) { /* no /proc: the rest still holds */
    failed = 1;
    err = errno;
  }
  if (fd >= 0) close(fd);
  struct rlimit none = {0, 0};
  if (setrlimit(RLIMIT_CORE, &none) != 0 && !failed) {
    failed = 1;
    err = errno;
  }
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 && !failed) {
    failed = 1;
    err = errno;
  }
  if (failed) errno = err;
  return failed ? -1 : 0;
}

int secure_dontdump(const void *p, size_t n)
{
  if (!p || !n) return 0;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) page = 4096;
  uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
  uintptr_t end = ((uintptr_t)p + n + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
  return madvise((void *)start, end - start, MADV_DONTDUMP);
}

int secure_write_file(const char *path, const char *data, size_t len)
{
  /* O_NOFOLLOW: a symlink planted at path must not redirect the secret elsewhere */
  int old = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (old < 0 && errno != ENOENT) return -1;
  if (old >= 0) {
    struct stat st;
    int regular = fstat(old, &st) == 0 && S_ISREG(st.st_mode);
    close(old);
    if (!regular) {
      errno = EINVAL;
      return -1;
    }
  }
  const char *slash = strrchr(path, '/');
  size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
  size_t n = dir + strlen(slash ? slash + 1 : path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return -1;
  snprintf(tmp, n, "%.*s.%s.XXXXXX", (int)dir, path, slash ? slash + 1 : path);
  int fd = mkostemp(tmp, O_CLOEXEC); /* 0600, O_EXCL: a new file nobody else can hold open */
  if (fd < 0) {
    free(tmp);
    return -1;
  }
  int rc = 0;
  for (size_t off = 0; off < len && rc == 0;) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) rc = -1;
    else off += (size_t)w;
  }
  if (rc == 0 && (fchmod(fd, 0600) != 0 || fsync(fd) != 0)) rc = -1;
  int err = errno;
  if (close(fd) != 0 && rc == 0) {
    rc = -1;
    err = errno;
  }
  /* rename replaces the name itself, even if a symlink appeared there meanwhile */
  if (rc == 0 && rename(tmp, path) != 0) {
    rc = -1;
    err = errno;
  }
  if (rc != 0) {
    unlink(tmp);
  } else {
    /* the rename itself reaches the disk with its directory */
    snprintf(tmp, n, "%.*s", dir ? (int)dir : 1, dir ? path : ".");
    int d = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
      fsync(d);
      close(d);
    }
  }
  free(tmp);
  if (rc != 0) errno = err;
  return rc;
}
