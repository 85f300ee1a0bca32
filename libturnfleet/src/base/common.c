/* common: errors, version, tf_free, string buffers, problem lists. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TF__ERRMSG_MAX 1024

static _Thread_local char tf__errmsg[TF__ERRMSG_MAX];
static _Thread_local tf_error tf__err = {0, NULL};

tf_err tf_error__set(tf_err code, const char *fmt, ...)
{
  /* callers prefix the last message ("uri: %s", tf_error_last()->message):
   * format aside, since vsnprintf into its own argument is undefined */
  char msg[TF__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  memcpy(tf__errmsg, msg, strlen(msg) + 1);
  tf__err.code = code;
  tf__err.message = tf__errmsg;
  return code;
}

void tf_log__emitv(tf_log_cb cb, void *payload, tf_log_level min, tf_log_level level, const char *fmt, va_list ap)
{
  if (!cb || level < min) return;
  char msg[512];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  cb(level, msg, payload);
}

void tf_log__emit(tf_log_cb cb, void *payload, tf_log_level min, tf_log_level level, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  tf_log__emitv(cb, payload, min, level, fmt, ap);
  va_end(ap);
}

tf_err tf_error__nomem(void) { return tf_error__set(TF_ENOMEM, "out of memory"); }

const tf_error *tf_error_last(void)
{
  if (!tf__err.message) {
    tf__errmsg[0] = '\0';
    tf__err.message = tf__errmsg;
  }
  return &tf__err;
}

const char *tf_strerror(tf_err code)
{
  switch (code) {
#define TF__ERR_TEXT(name, value, text) \
  case value:                           \
    return text;
    TF_ERROR_MAP(TF__ERR_TEXT)
#undef TF__ERR_TEXT
  default:
    return "unknown error";
  }
}

const char *tf_error_name(tf_err code)
{
  switch (code) {
#define TF__ERR_NAME(name, value, text) \
  case value:                           \
    return "TF_" #name;
    TF_ERROR_MAP(TF__ERR_NAME)
#undef TF__ERR_NAME
  default:
    return "TF_UNKNOWN";
  }
}

void tf_version(int *major, int *minor, int *patch)
{
  if (major) *major = TF_VERSION_MAJOR;
  if (minor) *minor = TF_VERSION_MINOR;
  if (patch) *patch = TF_VERSION_PATCH;
}

const char *tf_version_string(void) { return TF_VERSION_STRING; }

void tf_free(void *ptr) { free(ptr); }

int tf_crypto__memeq(const void *a, const void *b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

void tf_crypto__wipe(void *p, size_t n)
{
  if (p && n) OPENSSL_cleanse(p, n);
}

char *tf_strdup__(const char *s) { return s ? strdup(s) : NULL; }

char *tf_strndup__(const char *s, size_t n) { return s ? strndup(s, n) : NULL; }

char *tf_asprintf__(const char *fmt, ...)
{
  va_list ap;
  char *out = NULL;
  va_start(ap, fmt);
  if (vasprintf(&out, fmt, ap) < 0) out = NULL;
  va_end(ap);
  return out;
}

uint32_t tf_fnv1a32__(const char *s, size_t n)
{
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (uint8_t)s[i];
    h *= 16777619u;
  }
  return h;
}

/* ---- versions ---- */

static int tf_version__component(const char **p, unsigned *out)
{
  const char *s = *p;
  unsigned v = 0;
  size_t n = 0;
  while (s[n] >= '0' && s[n] <= '9') {
    if (n == 3) return -1;
    v = v * 10u + (unsigned)(s[n] - '0');
    n++;
  }
  if (n == 0 || v > 255u) return -1;
  *out = v;
  *p = s + n;
  return 0;
}

int tf_version__parse(const char *text, uint32_t *out)
{
  const char *p = text;
  unsigned ma, mi, pa;
  if (!text || tf_version__component(&p, &ma) < 0 || *p++ != '.' || tf_version__component(&p, &mi) < 0 ||
      *p++ != '.' || tf_version__component(&p, &pa) < 0)
    return -1;
  if (*p == '-') {
    /* a packaging suffix such as "-r0" or "-alpine": ignored, but kept printable */
    if (*++p == '\0') return -1;
    for (; *p; p++) {
      char ch = *p;
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
            ch == '-' || ch == '_' || ch == '+' || ch == '~'))
        return -1;
    }
  }
  if (*p != '\0') return -1;
  *out = ((uint32_t)ma << 16) | ((uint32_t)mi << 8) | (uint32_t)pa;
  return 0;
}

/* ---- string buffer ---- */

void tf_buf__init(tf_buf *b) { memset(b, 0, sizeof(*b)); }

static int tf_buf__grow(tf_buf *b, size_t extra)
{
  if (b->failed) return -1;
  if (b->len + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *p = malloc(cap);
  if (!p) {
    b->failed = 1;
    return -1;
  }
  if (b->ptr) {
    memcpy(p, b->ptr, b->len);
    /* the old block may hold secrets (rendered configs): wipe before release */
    tf_crypto__wipe(b->ptr, b->cap);
    free(b->ptr);
  }
  b->ptr = p;
  b->cap = cap;
  b->ptr[b->len] = '\0';
  return 0;
}

void tf_buf__putn(tf_buf *b, const char *s, size_t n)
{
  if (tf_buf__grow(b, n) < 0) return;
  memcpy(b->ptr + b->len, s, n);
  b->len += n;
  b->ptr[b->len] = '\0';
}

void tf_buf__puts(tf_buf *b, const char *s) { tf_buf__putn(b, s, strlen(s)); }

void tf_buf__printf(tf_buf *b, const char *fmt, ...)
{
  va_list ap;
  char small[256];
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if ((size_t)n < sizeof(small)) {
    tf_buf__putn(b, small, (size_t)n);
    tf_crypto__wipe(small, sizeof(small));
    return;
  }
  if (tf_buf__grow(b, (size_t)n) < 0) return;
  va_start(ap, fmt);
  vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void tf_buf__json_str(tf_buf *b, const char *s)
{
  tf_buf__putn(b, "\"", 1);
  const char *run = s;
  for (const char *p = s; *p; p++) {
    unsigned char ch = (unsigned char)*p;
    if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
    tf_buf__putn(b, run, (size_t)(p - run));
    run = p + 1;
    switch (ch) {
    case '"': tf_buf__puts(b, "\\\""); break;
    case '\\': tf_buf__puts(b, "\\\\"); break;
    case '\n': tf_buf__puts(b, "\\n"); break;
    case '\t': tf_buf__puts(b, "\\t"); break;
    case '\r': tf_buf__puts(b, "\\r"); break;
    default: tf_buf__printf(b, "\\u%04x", ch); break;
    }
  }
  tf_buf__puts(b, run);
  tf_buf__putn(b, "\"", 1);
}

tf_err tf_buf__detach(tf_buf *b, char **out)
{
  if (b->failed || tf_buf__grow(b, 0) < 0) {
    tf_buf__dispose(b, 1);
    *out = NULL;
    return tf_error__nomem();
  }
  /* kept texts (rendered configs, bodies) hold what they say, not up to twice that: a copy of the exact
   * size (the block wiped, not realloc'd: it may hold secrets) when more than a little is spare */
  char *exact = b->cap - b->len - 1 > 64 ? malloc(b->len + 1) : NULL;
  if (exact) {
    memcpy(exact, b->ptr, b->len + 1);
    tf_crypto__wipe(b->ptr, b->cap);
    free(b->ptr);
    b->ptr = exact;
  }
  *out = b->ptr;
  b->ptr = NULL;
  b->len = b->cap = 0;
  return TF_OK;
}

void tf_buf__dispose(tf_buf *b, int secret)
{
  if (b->ptr && secret) tf_crypto__wipe(b->ptr, b->cap);
  free(b->ptr);
  tf_buf__init(b);
}

/* ---- problem lists ---- */

tf_problems *tf_problems__new(void) { return calloc(1, sizeof(tf_problems)); }

tf_err tf_problems__addv(tf_problems *p, const char *path, const char *fmt, va_list ap)
{
  if (p->count == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 8;
    struct tf_problem *items = realloc(p->items, cap * sizeof(*items));
    if (!items) return tf_error__nomem();
    p->items = items;
    p->cap = cap;
  }
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) return tf_error__nomem();
  char *pth = strdup(path);
  if (!pth) {
    free(msg);
    return tf_error__nomem();
  }
  p->items[p->count].path = pth;
  p->items[p->count].message = msg;
  p->count++;
  return TF_OK;
}

tf_err tf_problems__add(tf_problems *p, const char *path, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  tf_err rc = tf_problems__addv(p, path, fmt, ap);
  va_end(ap);
  return rc;
}

size_t tf_problems_count(const tf_problems *p) { return p ? p->count : 0; }

const char *tf_problems_path(const tf_problems *p, size_t i)
{
  return (p && i < p->count) ? p->items[i].path : NULL;
}

const char *tf_problems_message(const tf_problems *p, size_t i)
{
  return (p && i < p->count) ? p->items[i].message : NULL;
}

void tf_problems_free(tf_problems *p)
{
  if (!p) return;
  for (size_t i = 0; i < p->count; i++) {
    free(p->items[i].path);
    free(p->items[i].message);
  }
  free(p->items);
  free(p);
}

void tf_secret_free(char *secret)
{
  if (!secret) return;
  tf_crypto__wipe(secret, strlen(secret));
  free(secret);
}

/* ---- RFC 3339 times (civil_from_days / days_from_civil, H. Hinnant) ---- */

void tf_time__format(char buf[48], int64_t ms)
{
  int64_t s = ms / 1000;
  int64_t days = s / 86400, rem = s % 86400;
  if (rem < 0) rem += 86400, days--;
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1;
  int64_t m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) y++;
  snprintf(buf, 48, "%04d-%02d-%02dT%02d:%02d:%02dZ", (int)y, (int)m, (int)d, (int)(rem / 3600),
           (int)(rem % 3600 / 60), (int)(rem % 60));
}

static int tf_time__digits(const char *s, int n)
{
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

int tf_time__parse(const char *s, int64_t *ms)
{
  if (!s || strlen(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':') return -1;
  int y = tf_time__digits(s, 4), mo = tf_time__digits(s + 5, 2), d = tf_time__digits(s + 8, 2);
  int h = tf_time__digits(s + 11, 2), mi = tf_time__digits(s + 14, 2), se = tf_time__digits(s + 17, 2);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60)
    return -1;
  size_t i = 19;
  int64_t frac_ms = 0;
  if (s[i] == '.') {
    size_t n = 0;
    for (i++; s[i] >= '0' && s[i] <= '9'; i++, n++)
      if (n < 3) frac_ms = frac_ms * 10 + (s[i] - '0');
    if (n == 0 || n > 9) return -1;
    for (; n < 3; n++) frac_ms *= 10;
  }
  int64_t offset_s = 0;
  if (s[i] == 'Z') {
    if (s[i + 1]) return -1;
  } else if (s[i] == '+' || s[i] == '-') {
    int oh = tf_time__digits(s + i + 1, 2), om = s[i + 3] == ':' ? tf_time__digits(s + i + 4, 2) : -1;
    if (oh < 0 || oh > 23 || om < 0 || om > 59 || s[i + 6]) return -1;
    offset_s = (s[i] == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
  } else {
    return -1;
  }
  /* days_from_civil */
  int64_t yy = mo <= 2 ? y - 1 : y;
  int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
  int64_t yoe = yy - era * 400;
  int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  int64_t days = era * 146097 + doe - 719468;
  if (ms) *ms = ((days * 86400 + h * 3600 + mi * 60 + se) - offset_s) * 1000 + frac_ms;
  return 0;
}
