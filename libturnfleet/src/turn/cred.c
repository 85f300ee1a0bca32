/* cred: TURN REST API credentials (coturn use-auth-secret). The secret is
 * never copied by this module; every HMAC output is wiped after use. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* base64 of 20 bytes: 28 characters and a NUL */
#define TF_CRED__PASSWORD_SIZE 29

static int tf_cred__separator(int separator) { return separator == 0 ? ':' : separator; }

/* A separator coturn can use (-C): printable ASCII, not a digit. */
static int tf_cred__separator_ok(int sep) { return sep > 0x20 && sep < 0x7F && !(sep >= '0' && sep <= '9'); }

/* base64(HMAC-SHA1(secret, username)) into @p out (TF_CRED__PASSWORD_SIZE bytes). */
static tf_err tf_cred__compute(char out[TF_CRED__PASSWORD_SIZE], const char *secret, const char *username)
{
  uint8_t mac[TF_MAC_SIZE];
  tf_mac key;
  tf_mac__init(&key, secret, strlen(secret));
  tf_mac__sign(&key, username, strlen(username), NULL, 0, mac);
  tf_mac__wipe(&key);
  EVP_EncodeBlock((unsigned char *)out, mac, TF_MAC_SIZE);
  tf_crypto__wipe(mac, sizeof(mac));
  return TF_OK;
}

tf_err tf_cred_password(char **password, const char *secret, const char *username)
{
  TF_ASSERT_ARG(password);
  if (!secret || !*secret) return tf_error__set(TF_EINVALID, "secret: required (not empty)");
  if (!username) return tf_error__set(TF_EINVALID, "username: required");
  char pw[TF_CRED__PASSWORD_SIZE];
  tf_err rc = tf_cred__compute(pw, secret, username);
  if (rc < 0) return rc;
  char *copy = tf_strdup__(pw);
  tf_crypto__wipe(pw, sizeof(pw));
  if (!copy) return tf_error__nomem();
  *password = copy;
  return TF_OK;
}

tf_err tf_cred_mint(char **username, char **password, const char *secret, const char *user, int64_t expiry,
                    int separator)
{
  TF_ASSERT_ARG(username);
  TF_ASSERT_ARG(password);
  if (!secret || !*secret) return tf_error__set(TF_EINVALID, "secret: required (not empty)");
  if (!user) return tf_error__set(TF_EINVALID, "user: required (may be empty)");
  if (expiry < 0) return tf_error__set(TF_EINVALID, "expiry: must be >= 0");
  int sep = tf_cred__separator(separator);
  if (!tf_cred__separator_ok(sep))
    return tf_error__set(TF_EINVALID, "separator: must be a printable ASCII character other than a digit");
  if (strchr(user, sep)) return tf_error__set(TF_EINVALID, "user: must not contain the separator '%c'", sep);
  /* an empty user gives the bare timestamp, which coturn reads as the expiry */
  char *name =
      *user ? tf_asprintf__("%lld%c%s", (long long)expiry, sep, user) : tf_asprintf__("%lld", (long long)expiry);
  if (!name) return tf_error__nomem();
  char *pw = NULL;
  tf_err rc = tf_cred_password(&pw, secret, name);
  if (rc < 0) {
    free(name);
    return rc;
  }
  *username = name;
  *password = pw;
  return TF_OK;
}

/* Parse 1-18 decimal digits (no int64 overflow) [s, s+n); -1 when not all digits or empty. */
static int tf_cred__digits(const char *s, size_t n, int64_t *out)
{
  int64_t v = 0;
  if (n == 0 || n > 18) return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

/* The expiry in a REST username as coturn reads it: "<expiry><sep><user>",
 * "<user><sep><expiry>" or "<expiry>" alone. */
static int tf_cred__expiry(const char *username, int sep, int64_t *out)
{
  const char *col = strchr(username, sep);
  if (!col) return tf_cred__digits(username, strlen(username), out);
  if (tf_cred__digits(username, (size_t)(col - username), out) == 0) return 0;
  return tf_cred__digits(col + 1, strlen(col + 1), out);
}

tf_err tf_cred_verify(const char *secret, const char *username, const char *password, int64_t now, int separator)
{
  if (!secret || !*secret) return tf_error__set(TF_EINVALID, "secret: required (not empty)");
  if (!username) return tf_error__set(TF_EINVALID, "username: required");
  if (!password) return tf_error__set(TF_EINVALID, "password: required");
  int sep = tf_cred__separator(separator);
  if (!tf_cred__separator_ok(sep))
    return tf_error__set(TF_EINVALID, "separator: must be a printable ASCII character other than a digit");
  int64_t expiry = 0;
  if (tf_cred__expiry(username, sep, &expiry) < 0)
    return tf_error__set(TF_EINVALID,
                         "username: no expiry timestamp (\"<expiry>%c<user>\", \"<user>%c<expiry>\" or "
                         "\"<expiry>\")",
                         sep, sep);
  char want[TF_CRED__PASSWORD_SIZE];
  tf_err rc = tf_cred__compute(want, secret, username);
  if (rc < 0) return rc;
  size_t plen = strlen(password);
  int ok = plen == TF_CRED__PASSWORD_SIZE - 1 && tf_crypto__memeq(want, password, TF_CRED__PASSWORD_SIZE - 1);
  tf_crypto__wipe(want, sizeof(want));
  if (!ok) return tf_error__set(TF_EAUTH, "password: does not match the username and secret");
  if (expiry < now)
    return tf_error__set(TF_EAUTH, "username: expired at %lld (now %lld)", (long long)expiry, (long long)now);
  return TF_OK;
}

tf_err tf_cred_secret_read(char **out, const char *path)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(path);
  FILE *f = fopen(path, "rb");
  if (!f) return tf_error__set(TF_EIO, "%.200s: %s", path, strerror(errno));
  char *buf = malloc(TF_CRED_SECRET_MAX + 2);
  size_t n = buf ? fread(buf, 1, TF_CRED_SECRET_MAX + 1, f) : 0;
  int failed = ferror(f);
  fclose(f);
  if (!buf) return tf_error__nomem();
  tf_err rc = TF_OK;
  buf[n] = '\0';
  /* one line: a trailing LF or CRLF is not part of the secret */
  size_t len = strcspn(buf, "\r\n");
  if (failed)
    rc = tf_error__set(TF_EIO, "%.200s: cannot read", path);
  else if (n > TF_CRED_SECRET_MAX)
    rc = tf_error__set(TF_EINVALID, "%.200s: longer than %d bytes", path, TF_CRED_SECRET_MAX);
  else if (memchr(buf, '\0', n))
    rc = tf_error__set(TF_EINVALID, "%.200s: holds a NUL byte", path);
  else if (buf[len] && buf[len + strspn(buf + len, "\r\n")])
    rc = tf_error__set(TF_EINVALID, "%.200s: holds more than one line", path);
  else if (len == 0)
    rc = tf_error__set(TF_EINVALID, "%.200s: is empty", path);
  if (rc < 0) {
    tf_crypto__wipe(buf, TF_CRED_SECRET_MAX + 2);
    free(buf);
    return rc;
  }
  tf_crypto__wipe(buf + len, n - len);
  buf[len] = '\0';
  *out = buf;
  return TF_OK;
}

