/* cred: TURN REST credentials against the reference vectors; verify as coturn does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_test.h"
#include "tf_vectors.h"

START_TEST(test_cred__rest_vectors)
{
  tf_vectors v = tf_vectors_load("turn_rest_credentials.jsonl");
  ck_assert_int_eq(v.count, 6);
  for (size_t i = 0; i < v.count; i++) {
    const cJSON *o = v.items[i];
    const char *secret = tf_vec_str(o, "secret"), *username = tf_vec_str(o, "username");
    const char *want_pw = tf_vec_str(o, "password"), *sep = tf_vec_str(o, "separator");
    int64_t expiry = (int64_t)cJSON_GetObjectItem(o, "expiry")->valuedouble;
    ck_assert_int_eq(strlen(sep), 1);

    char *pw = NULL;
    TF_OK_OR_FAIL(tf_cred_password(&pw, secret, username));
    ck_assert_str_eq(pw, want_pw);
    tf_free(pw);

    /* minting the same user and expiry gives the same username and password */
    char *user = NULL;
    pw = NULL;
    TF_OK_OR_FAIL(tf_cred_mint(&user, &pw, secret, tf_vec_str(o, "user"), expiry, sep[0] == ':' ? 0 : sep[0]));
    ck_assert_str_eq(user, username);
    ck_assert_str_eq(pw, want_pw);

    /* the long-term key built on it */
    uint8_t key[TF_STUN_KEY_SIZE];
    size_t kn = 0;
    uint8_t *want_key = tf_vec_unhex(tf_vec_str(o, "key_md5_hex"), &kn);
    TF_OK_OR_FAIL(tf_stun_long_term_key(key, user, tf_vec_str(o, "realm"), pw));
    ck_assert_int_eq(kn, sizeof(key));
    ck_assert_mem_eq(key, want_key, sizeof(key));
    free(want_key);

    /* verify: valid up to and including the expiry second */
    TF_OK_OR_FAIL(tf_cred_verify(secret, username, want_pw, expiry, sep[0]));
    TF_OK_OR_FAIL(tf_cred_verify(secret, username, want_pw, expiry - 3600, sep[0]));
    ck_assert_int_eq(tf_cred_verify(secret, username, want_pw, expiry + 1, sep[0]), TF_EAUTH);
    ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "expired"));
    tf_free(user);
    tf_crypto__wipe(pw, strlen(pw));
    tf_free(pw);
  }
  tf_vectors_free(&v);
}
END_TEST

START_TEST(test_cred__verify_wrong_password_and_secret)
{
  const char *secret = "fleet-shared-secret";
  TF_OK_OR_FAIL(tf_cred_verify(secret, "1735689600:probe", "DqaiUyzDtsRdvOQ+x10BxuhB21k=", 1735689000, 0));
  ck_assert_int_eq(tf_cred_verify(secret, "1735689600:probe", "DqaiUyzDtsRdvOQ+x10BxuhB21K=", 1735689000, 0), TF_EAUTH);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "password"));
  ck_assert_int_eq(tf_cred_verify(secret, "1735689600:probe", "DqaiUyzDtsRdvOQ+x10BxuhB21k", 1735689000, 0), TF_EAUTH);
  ck_assert_int_eq(tf_cred_verify(secret, "1735689600:probe", "", 1735689000, 0), TF_EAUTH);
  ck_assert_int_eq(tf_cred_verify("other-secret", "1735689600:probe", "DqaiUyzDtsRdvOQ+x10BxuhB21k=", 1735689000, 0),
                   TF_EAUTH);
  /* the username is signed: another user or expiry with the same password fails */
  ck_assert_int_eq(tf_cred_verify(secret, "1735689601:probe", "DqaiUyzDtsRdvOQ+x10BxuhB21k=", 1735689000, 0), TF_EAUTH);
}
END_TEST

START_TEST(test_cred__username_forms_like_coturn)
{
  const char *secret = "s3cr3t";
  const char *names[] = {"1700000000:alice", "alice:1700000000", "1700000000", "1700000000:al:ice"};
  for (size_t i = 0; i < 4; i++) {
    char *pw = NULL;
    TF_OK_OR_FAIL(tf_cred_password(&pw, secret, names[i]));
    TF_OK_OR_FAIL(tf_cred_verify(secret, names[i], pw, 1700000000, 0));
    ck_assert_int_eq(tf_cred_verify(secret, names[i], pw, 1700000001, 0), TF_EAUTH);
    tf_free(pw);
  }
  /* no expiry anywhere */
  const char *bad[] = {"alice", "alice:bob", ":1700000000x", "", "alice:", "17000000001700000000:x"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ck_assert_int_eq(tf_cred_verify(secret, bad[i], "x", 0, 0), TF_EINVALID);
    ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "username"));
  }
}
END_TEST

START_TEST(test_cred__dash_separator)
{
  char *user = NULL, *pw = NULL;
  TF_OK_OR_FAIL(tf_cred_mint(&user, &pw, "turnfleet-test-secret", "dashuser", 1827486454, '-'));
  ck_assert_str_eq(user, "1827486454-dashuser");
  ck_assert_str_eq(pw, "Z5hwKZ+d9jtTX69QON7++qBN2yU=");
  TF_OK_OR_FAIL(tf_cred_verify("turnfleet-test-secret", user, pw, 1827486454, '-'));
  /* with ':' as the separator the name has no expiry */
  ck_assert_int_eq(tf_cred_verify("turnfleet-test-secret", user, pw, 0, 0), TF_EINVALID);
  tf_free(user);
  tf_free(pw);
  /* user "<name>-<expiry>" */
  TF_OK_OR_FAIL(tf_cred_password(&pw, "k", "probe-1700000000"));
  TF_OK_OR_FAIL(tf_cred_verify("k", "probe-1700000000", pw, 1600000000, '-'));
  tf_free(pw);
}
END_TEST

START_TEST(test_cred__bad_arguments_name_the_argument)
{
  char *user = (char *)1, *pw = (char *)1;
  const char *secret = "very-secret-value-42";
  ck_assert_int_eq(tf_cred_mint(&user, &pw, "", "probe", 1, 0), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "secret"));
  ck_assert_int_eq(tf_cred_mint(&user, &pw, NULL, "probe", 1, 0), TF_EINVALID);
  ck_assert_int_eq(tf_cred_mint(&user, &pw, secret, NULL, 1, 0), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "user"));
  ck_assert_int_eq(tf_cred_mint(&user, &pw, secret, "probe", -1, 0), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "expiry"));
  ck_assert_int_eq(tf_cred_mint(&user, &pw, secret, "probe", 1, '7'), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "separator"));
  ck_assert_int_eq(tf_cred_mint(&user, &pw, secret, "a:b", 1, 0), TF_EINVALID);
  ck_assert_int_eq(tf_cred_mint(NULL, &pw, secret, "probe", 1, 0), TF_EINVALID);
  ck_assert_int_eq(tf_cred_password(&pw, secret, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_cred_verify(secret, "1:x", NULL, 0, 0), TF_EINVALID);
  /* outputs untouched on failure */
  ck_assert_ptr_eq(user, (char *)1);
  ck_assert_ptr_eq(pw, (char *)1);
  /* the secret never appears in an error message */
  ck_assert_int_eq(tf_cred_verify(secret, "1:x", "wrong", 0, 0), TF_EAUTH);
  ck_assert_ptr_null(strstr(tf_error_last()->message, secret));
  ck_assert_int_eq(tf_cred_verify(secret, "no-expiry", "wrong", 0, 0), TF_EINVALID);
  ck_assert_ptr_null(strstr(tf_error_last()->message, secret));
  ck_assert_int_eq(tf_cred_mint(&user, &pw, secret, "probe", -5, 0), TF_EINVALID);
  ck_assert_ptr_null(strstr(tf_error_last()->message, secret));
  /* the empty user gives the bare timestamp */
  TF_OK_OR_FAIL(tf_cred_mint(&user, &pw, "fleet-shared-secret", "", 1735689600, 0));
  ck_assert_str_eq(user, "1735689600");
  ck_assert_str_eq(pw, "PWREsKl8aT5g+3JsUik0RqYbiYw=");
  tf_free(user);
  tf_free(pw);
}
END_TEST

START_TEST(test_cred__secret_read_one_line)
{
  char *dir = tf_test_tmpdir();
  char path[4200];
  char *secret = NULL;
  snprintf(path, sizeof(path), "%s/secret", dir);

  tf_test_write(path, "s3cr3t with spaces\r\n", 0600);
  TF_OK_OR_FAIL(tf_cred_secret_read(&secret, path));
  ck_assert_str_eq(secret, "s3cr3t with spaces");
  tf_secret_free(secret);

  tf_test_write(path, "no-newline", 0600);
  TF_OK_OR_FAIL(tf_cred_secret_read(&secret, path));
  ck_assert_str_eq(secret, "no-newline");
  tf_secret_free(secret);

  secret = NULL;
  tf_test_write(path, "line-one\nline-two\n", 0600);
  ck_assert_int_eq(tf_cred_secret_read(&secret, path), TF_EINVALID);
  ck_assert_ptr_null(secret);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "holds more than one line"));
  ck_assert_ptr_null(strstr(tf_error_last()->message, "line-one"));

  tf_test_write(path, "\n", 0600);
  ck_assert_int_eq(tf_cred_secret_read(&secret, path), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "is empty"));

  char big[TF_CRED_SECRET_MAX + 2];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  tf_test_write(path, big, 0600);
  ck_assert_int_eq(tf_cred_secret_read(&secret, path), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "longer than 4096 bytes"));

  snprintf(path, sizeof(path), "%s/missing", dir);
  ck_assert_int_eq(tf_cred_secret_read(&secret, path), TF_EIO);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "No such file or directory"));
  ck_assert_ptr_null(secret);
  tf_secret_free(NULL);
  tf_test_rmtree(dir);
  free(dir);
}
END_TEST

Suite *tf_test_cred_suite(void)
{
  Suite *s = suite_create("cred");
  TCase *tc = tcase_create("cred");
  tcase_add_test(tc, test_cred__rest_vectors);
  tcase_add_test(tc, test_cred__verify_wrong_password_and_secret);
  tcase_add_test(tc, test_cred__username_forms_like_coturn);
  tcase_add_test(tc, test_cred__dash_separator);
  tcase_add_test(tc, test_cred__bad_arguments_name_the_argument);
  tcase_add_test(tc, test_cred__secret_read_one_line);
  suite_add_tcase(s, tc);
  return s;
}
