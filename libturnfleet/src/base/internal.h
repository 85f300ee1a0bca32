/* Private helpers shared by the library's modules. Never installed. */
#ifndef TF_INTERNAL_H
#define TF_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "turnfleet.h"

#if defined(__GNUC__)
#define TF__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TF__WARN_UNUSED __attribute__((warn_unused_result))
#else
#define TF__PRINTF(a, b)
#define TF__WARN_UNUSED
#endif
#include "private.h"

/* Set the thread-local error and return @p code. */
TF__PRIVATE tf_err tf_error__set(tf_err code, const char *fmt, ...) TF__PRINTF(2, 3);
/* Format and pass a message to a per-handle log sink when @p level >= @p min
 * (nothing when @p cb is NULL). Callers never pass secrets. */
TF__PRIVATE void tf_log__emit(tf_log_cb cb, void *payload, tf_log_level min, tf_log_level level, const char *fmt, ...)
    TF__PRINTF(5, 6);
TF__PRIVATE void tf_log__emitv(tf_log_cb cb, void *payload, tf_log_level min, tf_log_level level, const char *fmt, va_list ap)
    TF__PRINTF(5, 0);

/* Out-of-memory error. */
TF__PRIVATE tf_err tf_error__nomem(void);

/* Argument check: never crashes, sets TF_EINVALID. */
#define TF_ASSERT_ARG(expr)                                                        \
  do {                                                                             \
    if (!(expr)) return tf_error__set(TF_EINVALID, "invalid argument: %s", #expr); \
  } while (0)

/* Growable string buffer. On allocation failure it latches `failed`. */
typedef struct tf_buf {
  char *ptr;
  size_t len;
  size_t cap;
  int failed;
} tf_buf;

TF__PRIVATE void tf_buf__init(tf_buf *b);
TF__PRIVATE void tf_buf__puts(tf_buf *b, const char *s);
TF__PRIVATE void tf_buf__putn(tf_buf *b, const char *s, size_t n);
TF__PRIVATE void tf_buf__printf(tf_buf *b, const char *fmt, ...) TF__PRINTF(2, 3);
/* Append @p s as a JSON string literal (quoted, escaped). */
void tf_buf__json_str(tf_buf *b, const char *s);
/* Hand the text to *out (caller frees with tf_free); returns TF_ENOMEM if any append failed. */
TF__PRIVATE tf_err tf_buf__detach(tf_buf *b, char **out);
/* Release, wiping the contents first when @p secret. */
TF__PRIVATE void tf_buf__dispose(tf_buf *b, int secret);

TF__PRIVATE char *tf_strdup__(const char *s);
TF__PRIVATE char *tf_strndup__(const char *s, size_t n);
TF__PRIVATE char *tf_asprintf__(const char *fmt, ...) TF__PRINTF(1, 2);

/* Constant-time equality of two buffers; 1 when equal. */
int tf_crypto__memeq(const void *a, const void *b, size_t n) TF__WARN_UNUSED;
/* Wipe secret memory. */
TF__PRIVATE void tf_crypto__wipe(void *p, size_t n);

/* Problem lists (pool validation). */
struct tf_problems {
  size_t count;
  size_t cap;
  struct tf_problem {
    char *path;
    char *message;
  } *items;
};
TF__PRIVATE tf_problems *tf_problems__new(void);
/* Append a problem; returns TF_ENOMEM on failure. */
tf_err tf_problems__add(tf_problems *p, const char *path, const char *fmt, ...) TF__PRINTF(3, 4);
TF__PRIVATE tf_err tf_problems__addv(tf_problems *p, const char *path, const char *fmt, va_list ap) TF__PRINTF(3, 0);

/* Parse JSON or YAML text into a cJSON tree (YAML via libyaml, core schema).
 * On malformed input returns TF_EPROTO with line, column and byte offset. */
struct cJSON;
/* Duplicate keys, NUL and invalid UTF-8 are refused (TF_EPROTO, with the field
 * path and positions); @p opts (NULL: the defaults) bounds size and values. */
TF__PRIVATE tf_err tf_doc__parse_json(struct cJSON **out, const char *text, size_t len, const tf_parse_options *opts);
TF__PRIVATE tf_err tf_doc__parse_yaml(struct cJSON **out, const char *text, size_t len, const tf_parse_options *opts);
/* @p root (taken: deleted here, NULL allowed) as compact JSON in *out, memory tf_free() releases
 * whatever allocator cJSON uses. TF_OK, TF_ENOMEM (also for a NULL root: a build that ran out). */
TF__PRIVATE tf_err tf_doc__print(char **out, struct cJSON *root);
/* The limits @p opts asks for, read up to its version (NULL: the defaults). */
typedef struct tf_doc__limit {
  size_t max_bytes;
  size_t max_values;
} tf_doc__limit;
tf_err tf_doc__limits(tf_doc__limit *out, const tf_parse_options *opts);
/* Length of the valid UTF-8 sequence starting at @p s (at most @p n bytes); 0 when invalid. */
size_t tf_doc__utf8_len(const unsigned char *s, size_t n);

/* Parse "MAJOR.MINOR.PATCH[-SUFFIX]" (components 0-255) into
 * (major << 16) | (minor << 8) | patch. Returns 0, or -1 when malformed (no error set). */
int tf_version__parse(const char *text, uint32_t *out);

/* RFC 3339 UTC seconds ("2024-05-01T12:00:00Z") of a Unix time in ms (proleptic Gregorian, no libc time zone). */
TF__PRIVATE void tf_time__format(char buf[48], int64_t ms);
/* "YYYY-MM-DDTHH:MM:SS[.frac](Z|+hh:mm|-hh:mm)" (metav1.Time as the API server writes it) into Unix ms
 * (@p ms may be NULL: a check only). 0, or -1 when malformed or out of range (no error set). */
TF__PRIVATE int tf_time__parse(const char *s, int64_t *ms);

/* relayctl: one CLI session that reads the default total-quota (`pc`) and, when it is the
 * refusal (-1), sets it to @p quota; *undone says whether it did. See tf_relayctl_config_unrefuse(). */
struct tf_relayctl_request;
tf_err tf_relayctl__unrefuse(int *undone, const struct tf_relayctl_request *req, int64_t quota);
/* relayctl: the coturn version the CLI's banner names (`Coturn-4.18.0 'Gorst'`), no password sent. */
tf_err tf_relayctl__version(uint32_t *version, const struct tf_relayctl_request *req);

/* FNV-1a 32-bit. */
uint32_t tf_fnv1a32__(const char *s, size_t n);

/* The one string-keyed hash table (map.c). Keys are borrowed: they must
 * outlive the table. @p scope is part of the key (0 when unused). */
typedef struct tf_map__slot {
  const char *key; /* NULL: empty slot */
  uint64_t scope;
  uint64_t value;
  uint32_t len;
  uint32_t hash;
} tf_map__slot;
typedef struct tf_map {
  tf_map__slot *slots;
  size_t mask;
  size_t used;
} tf_map;
void tf_map__init(tf_map *m);
void tf_map__dispose(tf_map *m);
/* The value stored for (scope, key), or NULL. Keys are shorter than 4 GiB. */
uint64_t *tf_map__find(const tf_map *m, uint64_t scope, const char *key, size_t len);
/* Room for @p n keys without growing (a table that grows by doubling rehashes every key
 * each time: reserving when the count is known saves those passes). TF_OK, TF_ENOMEM. */
tf_err tf_map__reserve(tf_map *m, size_t n);
/* Insert unless present: 1 when inserted, 0 when the key was there (its
 * value unchanged), TF_ENOMEM. *found (optional) points at the stored value. */
int tf_map__insert(tf_map *m, uint64_t scope, const char *key, size_t len, uint64_t value, uint64_t **found);
/* Remove (scope, key): 1 and *value (optional) when it was there, else 0. Other
 * entries may move: pointers from find/insert are void afterwards. */
int tf_map__remove(tf_map *m, uint64_t scope, const char *key, size_t len, uint64_t *value);

/* ---- mac: HMAC-SHA1 keyed once per key, and MD5, on OpenSSL's SHA-1 and MD5 without the
 * EVP layer (no allocation per message, no provider tables loaded) ---- */
#include <openssl/sha.h>

#define TF_MAC_SIZE 20
typedef struct tf_mac {
  SHA_CTX inner, outer; /* the states after the key's inner and outer pad blocks */
} tf_mac;

/* Key @p m with @p len bytes of @p key (any length). */
void tf_mac__init(tf_mac *m, const void *key, size_t len);
/* HMAC-SHA1 of the bytes of @p a then of @p b (@p blen 0: none) with the key of @p m. */
void tf_mac__sign(const tf_mac *m, const void *a, size_t alen, const void *b, size_t blen, uint8_t out[TF_MAC_SIZE]);
void tf_mac__wipe(tf_mac *m);
/* MD5 of the @p n strings of @p parts, one after the other (hashed piecewise: never copied). */
void tf_mac__md5(uint8_t out[16], const char *const *parts, size_t n);

/* ---- stun internals for the probe: messages on the caller's storage (no
 * allocation, no zeroing of the buffer), signed and checked with a tf_mac ---- */
struct tf_stun__attr {
  uint16_t type;
  uint16_t len;
  uint16_t off; /* offset of the TLV header in buf */
};

struct tf_stun_msg {
  uint8_t buf[TF_STUN_MAX_MESSAGE];
  size_t len;
  size_t nattrs;
  struct tf_stun__attr attrs[TF_STUN_MAX_ATTRIBUTES];
  int has_mi;   /* only FINGERPRINT may follow */
  int has_fp;   /* complete */
  char *reason; /* ERROR-CODE reason, NUL-terminated, trailing NULs stripped: in reason_buf when it fits */
  char reason_buf[764]; /* RFC 8489: a reason of up to 763 bytes, and the NUL */
};

/* Start a message in @p m (tid NULL: a random one). tf_stun__msg_dispose() releases what it holds. */
tf_err tf_stun__msg_begin(tf_stun_msg *m, int method, int cls, const uint8_t *tid);
void tf_stun__msg_dispose(tf_stun_msg *m);
/* MESSAGE-INTEGRITY with the keyed state @p key. */
tf_err tf_stun__msg_add_integrity_mac(tf_stun_msg *msg, const tf_mac *key);
/* tf_stun_decode() / tf_stun_validate_response() into @p m; @p key NULL: no key check. */
tf_err tf_stun__msg_decode(tf_stun_msg *m, const void *data, size_t len);
tf_err tf_stun__response_decode(tf_stun_msg *m, const void *data, size_t len, const uint8_t *tid, int method,
                                const tf_mac *key);

#endif
