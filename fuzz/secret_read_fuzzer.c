/* Fuzz target: the secret-file reader. The input is the file's content (a
 * memfd); an accepted secret is its first line, non-empty, at most
 * TF_CRED_SECRET_MAX bytes, with nothing but a line end after it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  int fd = memfd_create("tf-fuzz-secret", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size && write(fd, data, size) != (ssize_t)size) {
    close(fd);
    return 0;
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  char *secret = NULL;
  tf_err rc = tf_cred_secret_read(&secret, path);
  close(fd);
  if (rc < 0) {
    TF_FUZZ_CHECK((rc == TF_EINVALID || rc == TF_EIO) && secret == NULL);
    /* the message never quotes the content */
    TF_FUZZ_CHECK(strncmp(tf_error_last()->message, path, strlen(path)) == 0);
    return 0;
  }
  size_t n = strlen(secret);
  TF_FUZZ_CHECK(n > 0 && n <= TF_CRED_SECRET_MAX && n <= size);
  TF_FUZZ_CHECK(memcmp(secret, data, n) == 0);
  TF_FUZZ_CHECK(!strpbrk(secret, "\r\n"));
  for (size_t i = n; i < size; i++) TF_FUZZ_CHECK(data[i] == '\r' || data[i] == '\n');
  tf_secret_free(secret);
  return 0;
}
