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

/* Set the thread-local error and return @p code. */
tf_err tf_error__set(tf_err code, const char *fmt, ...) TF__PRINTF(2, 3);
/* Format and pass a message to a per-handle log sink when @p level >= @p min
 * (nothing when @p cb is NULL). Callers never pass secrets. */
void tf_log__emit(tf_log_cb cb, void *payload, tf_log_level min, tf_log_level level, const char *fmt, ...)
    TF__PRINTF(5, 6);
void tf_log__emitv(tf_log_cb cb, void *payload, tf_log_level min, tf_log_level level, const char *fmt, va_list ap)
    TF__PRINTF(5, 0);

/* Out-of-memory error. */
tf_err tf_error__nomem(void);

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

void tf_buf__init(tf_buf *b);
void tf_buf__puts(tf_buf *b, const char *s);
void tf_buf__putn(tf_buf *b, const char *s, size_t n);
void tf_buf__printf(tf_buf *b, const char *fmt, ...) TF__PRINTF(2, 3);
/* Append @p s as a JSON string literal (quoted, escaped). */
void tf_buf__json_str(tf_buf *b, const char *s);
/* Hand the text to *out (caller frees with tf_free); returns TF_ENOMEM if any append failed. */
tf_err tf_buf__detach(tf_buf *b, char **out);
/* Release, wiping the contents first when @p secret. */
void tf_buf__dispose(tf_buf *b, int secret);

char *tf_strdup__(const char *s);
char *tf_strndup__(const char *s, size_t n);
char *tf_asprintf__(const char *fmt, ...) TF__PRINTF(1, 2);

/* Constant-time equality of two buffers; 1 when equal. */
int tf_crypto__memeq(const void *a, const void *b, size_t n) TF__WARN_UNUSED;
/* Wipe secret memory. */
void tf_crypto__wipe(void *p, size_t n);

/* Problem lists (pool validation). */
struct tf_problems {
  size_t count;
  size_t cap;
  struct tf_problem {
    char *path;
    char *message;
  } *items;
};
tf_problems *tf_problems__new(void);
/* Append a problem; returns TF_ENOMEM on failure. */
tf_err tf_problems__add(tf_problems *p, const char *path, const char *fmt, ...) TF__PRINTF(3, 4);
tf_err tf_problems__addv(tf_problems *p, const char *path, const char *fmt, va_list ap) TF__PRINTF(3, 0);

/* Parse JSON or YAML text into a cJSON tree (YAML via libyaml, core schema).
 * On malformed input returns TF_EPROTO with line, column and byte offset. */
struct cJSON;
tf_err tf_doc__parse_json(struct cJSON **out, const char *text, size_t len);
tf_err tf_doc__parse_yaml(struct cJSON **out, const char *text, size_t len);

/* Parse "MAJOR.MINOR.PATCH[-SUFFIX]" (components 0-255) into
 * (major << 16) | (minor << 8) | patch. Returns 0, or -1 when malformed (no error set). */
int tf_version__parse(const char *text, uint32_t *out);

/* FNV-1a 32-bit. */
uint32_t tf_fnv1a32__(const char *s, size_t n);

#endif
