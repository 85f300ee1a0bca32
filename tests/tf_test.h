/* Helpers shared by the check suites. */
#ifndef TF_TEST_H
#define TF_TEST_H

#include <check.h>
#include <stddef.h>
#include <sys/types.h>

#include "turnfleet.h"

/* Path under tests/data (TF_TEST_DATA); static buffer, copy if kept. */
const char *tf_test_data(const char *rel);
/* Read a whole file; NUL-terminated; *len may be NULL. Fails the test on error. */
char *tf_test_read(const char *path, size_t *len);
/* Parse a pool from a string / from tests/data/<rel>; fails the test on error. */
tf_pool *tf_test_pool(const char *text);
tf_pool *tf_test_pool_file(const char *rel);
/* Parse nodes from a string / from tests/data/<rel>; fails the test on error. */
tf_nodes *tf_test_nodes(const char *json);
tf_nodes *tf_test_nodes_file(const char *rel);
/* @p n Ready relay nodes n1..n<n>, labelled turnfleet.hzmi.dev/relay-node=true, node k at ExternalIP
 * 203.0.113.k; fails the test on error. */
tf_nodes *tf_test_relay_nodes(int n);
/* A fresh private directory (mkdtemp under $TMPDIR or /tmp); caller frees with free(). */
char *tf_test_tmpdir(void);
/* Remove a directory tree made by tf_test_tmpdir(). */
void tf_test_rmtree(const char *dir);
/* Write a file with mode. Fails the test on error. */
void tf_test_write(const char *path, const char *text, int mode);
/* Assert a tf_err call succeeded, showing tf_error_last() otherwise. */
#define TF_OK_OR_FAIL(call)                                                                   \
  do {                                                                                        \
    tf_err tf__rc = (call);                                                                   \
    ck_assert_msg(tf__rc == 0, "%s -> %d (%s)", #call, tf__rc, tf_error_last()->message);     \
  } while (0)

#endif
