#include "tf_test.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tf_test_data(const char *rel)
{
  static char path[4096];
  const char *dir = getenv("TF_TEST_DATA");
  ck_assert_msg(dir != NULL, "TF_TEST_DATA is not set (run through ctest)");
  snprintf(path, sizeof(path), "%s/%s", dir, rel);
  return path;
}

char *tf_test_read(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  ck_assert_ptr_nonnull(buf);
  for (;;) {
    if (n + 1 >= cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      ck_assert_ptr_nonnull(buf);
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    if (r == 0) break;
    n += r;
  }
  fclose(f);
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

tf_pool *tf_test_pool(const char *text)
{
  tf_pool *p = NULL;
  TF_OK_OR_FAIL(tf_pool_parse(&p, text, strlen(text), TF_FORMAT_AUTO));
  return p;
}

tf_pool *tf_test_pool_file(const char *rel)
{
  char *text = tf_test_read(tf_test_data(rel), NULL);
  tf_pool *p = tf_test_pool(text);
  free(text);
  return p;
}

tf_nodes *tf_test_nodes(const char *json)
{
  tf_nodes *n = NULL;
  TF_OK_OR_FAIL(tf_nodes_parse(&n, json, strlen(json)));
  return n;
}

tf_nodes *tf_test_nodes_file(const char *rel)
{
  char *text = tf_test_read(tf_test_data(rel), NULL);
  tf_nodes *n = tf_test_nodes(text);
  free(text);
  return n;
}

char *tf_test_tmpdir(void)
{
  const char *base = getenv("TMPDIR");
  char *path = malloc(4096);
  ck_assert_ptr_nonnull(path);
  snprintf(path, 4096, "%s/turnfleet-test-XXXXXX", base && *base ? base : "/tmp");
  ck_assert_msg(mkdtemp(path) != NULL, "mkdtemp: %s", strerror(errno));
  return path;
}

static int tf_test__rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void tf_test_rmtree(const char *dir)
{
  if (dir) nftw(dir, tf_test__rm, 16, FTW_DEPTH | FTW_PHYS);
}

void tf_test_write(const char *path, const char *text, int mode)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  ck_assert_msg(fd >= 0, "cannot write %s: %s", path, strerror(errno));
  size_t n = strlen(text);
  ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
  close(fd);
}

tf_nodes *tf_test_relay_nodes(int n)
{
  char json[8192] = "{\"kind\":\"List\",\"items\":[";
  for (int k = 1; k <= n; k++) {
    char item[512];
    snprintf(item, sizeof(item),
             "%s{\"metadata\":{\"name\":\"n%d\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}},"
             "\"status\":{\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"203.0.113.%d\"}],"
             "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
             k > 1 ? "," : "", k, k);
    ck_assert_uint_lt(strlen(json) + strlen(item) + 3, sizeof(json));
    strcat(json, item);
  }
  strcat(json, "]}");
  return tf_test_nodes(json);
}
