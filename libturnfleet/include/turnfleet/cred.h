/**
 * @file turnfleet/cred.h
 * @brief TURN REST API credentials (draft-uberti-behave-turn-rest-00, coturn
 * `use-auth-secret`): username `<expiry><sep><user>`, password
 * base64(HMAC-SHA1(secret, username)). Secrets are wiped after use.
 */
#ifndef TURNFLEET_CRED_H
#define TURNFLEET_CRED_H

#include "common.h"
#include "errors.h"

TF_BEGIN_DECL

/**
 * Mint a credential valid until @p expiry (Unix seconds).
 * @param[out] username `<expiry><separator><user>`, release with tf_free()
 * @param[out] password base64 HMAC-SHA1, release with tf_secret_free() (secret)
 * @param secret the shared secret (not empty)
 * @param user the user part; must not contain the separator; empty gives the bare
 *        `<expiry>` (coturn reads the whole name as the timestamp)
 * @param expiry Unix time at which the credential stops working (>= 0)
 * @param separator the separator character; 0 means ':'
 * @return 0; TF_EINVALID naming the argument (never its value); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_cred_mint(char **username, char **password, const char *secret, const char *user,
                               int64_t expiry, int separator);

/**
 * The password for an existing username: base64(HMAC-SHA1(secret, username)).
 * @param[out] password release with tf_secret_free() (secret)
 */
TF_EXTERN(tf_err) tf_cred_password(char **password, const char *secret, const char *username);

/**
 * Verify a credential as coturn would: the password matches (constant time) and
 * the expiry in the username is not in the past at @p now.
 * @param separator 0 means ':'
 * @return 0 valid; TF_EAUTH wrong password or expired (the message says which);
 *         TF_EINVALID for a username without an expiry
 */
TF_EXTERN(tf_err) tf_cred_verify(const char *secret, const char *username, const char *password, int64_t now,
                                 int separator);

/** Longest secret tf_cred_secret_read() accepts (bytes). */
#define TF_CRED_SECRET_MAX 4096

/**
 * Read a shared secret from a file: its one line, without the line ending
 * (LF or CRLF). Tools use it so that a secret never comes from argv.
 * @param[out] out the secret, release with tf_secret_free()
 * @param path the file
 * @return 0; TF_EIO naming the path when it cannot be read; TF_EINVALID when
 *         the file is empty, holds more than one line or more than
 *         TF_CRED_SECRET_MAX bytes (the message never quotes the content); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_cred_secret_read(char **out, const char *path);

TF_END_DECL

#endif
