/**
 * @file turnfleet/errors.h
 * @brief Error codes (`tf_err`) and the per-thread detail message.
 *
 * Codes are negative and append-only: their values never change, and future
 * versions may return codes this header does not list yet.
 */
#ifndef TURNFLEET_ERRORS_H
#define TURNFLEET_ERRORS_H

#include "common.h"

TF_BEGIN_DECL

/** Status returned by libturnfleet functions: 0 on success, a negative TF_E* code on failure. */
typedef int tf_err;

/** X-macro table: name, value, description. Values are pinned. */
#define TF_ERROR_MAP(XX)                                                  \
  XX(OK, 0, "success")                                                    \
  XX(ERROR, -1, "generic error")                                          \
  XX(EINVALID, -2, "invalid argument or input")                           \
  XX(ENOTFOUND, -3, "not found")                                          \
  XX(ETIMEOUT, -4, "timed out")                                           \
  XX(EAUTH, -5, "authentication failed")                                  \
  XX(EPROTO, -6, "malformed data")                                        \
  XX(EBUFS, -7, "buffer too small")                                       \
  XX(ENOMEM, -8, "out of memory")                                         \
  XX(ENET, -9, "network error")                                           \
  XX(EUSER, -10, "callback asked to stop")                                \
  XX(EIO, -11, "input/output error")                                      \
  XX(ERESOURCE, -12, "local resources exhausted")                          \
  XX(ECONFLICT, -13, "conflict: changed or exists already")               \
  XX(EEXPIRED, -14, "resource version expired")                           \
  XX(EUNAVAILABLE, -15, "server busy or unavailable: retry later")        \
  XX(EREFUSED, -16, "write refused by the client: not leading, or over budget")

/** Error codes. */
enum tf_error_code {
#define TF__ERR_ENUM(name, value, text) TF_##name = value,
  TF_ERROR_MAP(TF__ERR_ENUM)
#undef TF__ERR_ENUM
  TF__ERR_PLACEHOLDER = -10000
};

/** The detail of the last failure on this thread. */
typedef struct tf_error {
  tf_err code;         /**< the code the failing call returned */
  const char *message; /**< names the field or byte offset; never NULL */
} tf_error;

/**
 * The last error set on the calling thread. Never NULL; owned by the library
 * and valid until the next failing call on this thread. It is only set on
 * failure: use return codes, not this, to detect errors.
 */
TF_EXTERN(const tf_error *) tf_error_last(void);

/** A static description of @p code ("invalid argument or input"); never NULL. */
TF_EXTERN(const char *) tf_strerror(tf_err code);

/** The symbolic name of @p code ("TF_EINVALID"); never NULL. */
TF_EXTERN(const char *) tf_error_name(tf_err code);

TF_END_DECL

#endif
