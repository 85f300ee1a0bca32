/* doc: JSON and YAML text into one cJSON tree, so every reader walks one shape.
 * YAML scalars are resolved with the YAML 1.2 core schema; aliases, tags and
 * multi-document streams are refused. Both formats refuse the same things with
 * a field path and a position: duplicate keys (a hash set, so linear), NUL,
 * invalid UTF-8; and both are bounded: input size and value count
 * (tf_parse_options), checked before the tree grows. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "internal.h"

#define TF__DOC_MAX_DEPTH 64
#define TF__DOC_PATH_MAX 400

static void tf_doc__where(const char *text, size_t off, size_t *line, size_t *col)
{
  size_t l = 1, c = 1;
  for (size_t i = 0; i < off; i++) {
    if (text[i] == '\n') {
      l++;
      c = 1;
    } else {
      c++;
    }
  }
  *line = l;
  *col = c;
}

tf_err tf_parse_options_init(tf_parse_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_PARSE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_parse_options version (1-%d)", version,
                         TF_PARSE_OPTIONS_VERSION);
  tf_parse_options init = TF_PARSE_OPTIONS_INIT;
  *opts = init;
  opts->version = version;
  return TF_OK;
}

tf_err tf_doc__limits(tf_doc__limit *out, const tf_parse_options *opts)
{
  out->max_bytes = TF_PARSE_MAX_BYTES_DEFAULT;
  out->max_values = TF_PARSE_MAX_VALUES_DEFAULT;
  if (!opts) return TF_OK;
  if (opts->version == 0 || opts->version > TF_PARSE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "opts.version: %u is not a tf_parse_options version (1-%d)", opts->version,
                         TF_PARSE_OPTIONS_VERSION);
  /* version 1: max_bytes, max_values (0 keeps the default) */
  if (opts->max_bytes) out->max_bytes = opts->max_bytes;
  if (opts->max_values) out->max_values = opts->max_values;
  return TF_OK;
}

static tf_err tf_doc__check_size(size_t len, const tf_doc__limit *lim)
{
  if (len <= lim->max_bytes) return TF_OK;
  return tf_error__set(TF_EINVALID, "input is larger than the limit of %zu bytes (tf_parse_options.max_bytes)",
                       lim->max_bytes);
}

static tf_err tf_doc__too_many(size_t max)
{
  return tf_error__set(TF_EINVALID, "document has more than %zu values, the limit (tf_parse_options.max_values)",
                       max);
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF (RFC 3629). */
size_t tf_doc__utf8_len(const unsigned char *s, size_t n)
{
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t need;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    need = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < need) return 0;
  for (size_t i = 1; i < need; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3fu);
  }
  if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return need;
}

/* ---- JSON ----
 * cJSON parses; two linear passes over the text before it do what cJSON does
 * not: the first bounds the number of values (so memory is bounded before
 * cJSON allocates), the second refuses NUL and control characters, invalid
 * UTF-8 and duplicate keys with the field path and the positions. On text
 * that is not JSON the second pass finds nothing or a problem at a position
 * that is one; cJSON then names the syntax error. */

/* Whether JSON text ends inside a string or an open array/object, and an
 * upper bound on its values (every value but the first follows a ',' or an
 * opening bracket). cJSON points at the last byte for a truncated text,
 * which would name the wrong place. */
static int tf_doc__json_prescan(const char *text, size_t len, size_t *values, size_t *keys)
{
  long depth = 0;
  int in_string = 0;
  size_t n = 1, k = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = text[i];
    if (in_string) {
      if (ch == '\\') i++;
      else if (ch == '"') in_string = 0;
    } else if (ch == '"') {
      in_string = 1;
    } else if (ch == '{' || ch == '[') {
      depth++;
      n++;
    } else if (ch == '}' || ch == ']') {
      depth--;
    } else if (ch == ',') {
      n++;
    } else if (ch == ':') {
      k++; /* every key is followed by one */
    }
  }
  *values = n;
  *keys = k;
  return in_string || depth > 0 || len == 0;
}

typedef struct tf_doc__jframe {
  int object;
  size_t index;    /* array: the current element */
  const char *key; /* object: the current key (raw between its quotes, or decoded) */
  size_t key_len;
  uint64_t scope;  /* object: its number, the scope of its keys */
} tf_doc__jframe;

typedef struct tf_doc__jscan {
  const char *text;
  size_t len;
  tf_doc__jframe *stack;
  size_t depth, cap;
  tf_map keys;
  char **decoded; /* keys with escapes, decoded by cJSON */
  size_t decoded_count, decoded_cap;
} tf_doc__jscan;

/* Append a key to a path: `.name`, or `["odd key"]` when it is not a plain name. */
static void tf_doc__path_key(tf_buf *b, const char *k, size_t n)
{
  int plain = n > 0;
  for (size_t i = 0; i < n && plain; i++) {
    char c = k[i];
    plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }
  if (plain) {
    if (b->len) tf_buf__puts(b, ".");
    tf_buf__putn(b, k, n);
    return;
  }
  tf_buf__puts(b, "[\"");
  for (size_t i = 0; i < n && i < 100; i++) {
    unsigned char c = (unsigned char)k[i];
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') tf_buf__printf(b, "\\x%02x", c);
    else tf_buf__putn(b, k + i, 1);
  }
  tf_buf__puts(b, n > 100 ? "...\"]" : "\"]");
}

/* The path of the value being scanned; @p with_key adds the top object's key. */
static void tf_doc__jpath(const tf_doc__jscan *s, tf_buf *b, int with_key)
{
  for (size_t i = 0; i < s->depth; i++) {
    const tf_doc__jframe *f = &s->stack[i];
    if (!f->object) tf_buf__printf(b, "[%zu]", f->index);
    else if (f->key && (i + 1 < s->depth || with_key)) tf_doc__path_key(b, f->key, f->key_len);
  }
  if (!b->len) tf_buf__puts(b, "document");
}

static tf_err tf_doc__jerror(const tf_doc__jscan *s, size_t off, int with_key, const char *fmt, ...)
  TF__PRINTF(4, 5);
static tf_err tf_doc__jerror(const tf_doc__jscan *s, size_t off, int with_key, const char *fmt, ...)
{
  tf_buf path;
  tf_buf__init(&path);
  tf_doc__jpath(s, &path, with_key);
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  size_t line, col;
  tf_doc__where(s->text, off, &line, &col);
  tf_err rc = tf_error__set(TF_EPROTO, "line %zu, column %zu (byte %zu): %.*s: %s", line, col, off,
                            TF__DOC_PATH_MAX, path.ptr ? path.ptr : "document", why);
  tf_buf__dispose(&path, 0);
  return rc;
}

/* The string at s->text[*i] (the opening quote): refuse NUL and control
 * characters and invalid UTF-8; *i ends on the closing quote. */
static tf_err tf_doc__jstring(tf_doc__jscan *s, size_t *i, int is_key, int *escaped)
{
  const unsigned char *t = (const unsigned char *)s->text;
  size_t k = *i + 1;
  *escaped = 0;
  for (; k < s->len && t[k] != '"'; k++) {
    if (t[k] == '\\') {
      *escaped = 1;
      if (k + 1 < s->len && t[k + 1] == 'u' && k + 5 < s->len && !memcmp(t + k + 2, "0000", 4))
        return tf_doc__jerror(s, k, !is_key, "%s contains a NUL character (\\u0000)", is_key ? "a key" : "the string");
      k++;
    } else if (t[k] < 0x20) {
      return tf_doc__jerror(s, k, !is_key, "%s contains the control character 0x%02x", is_key ? "a key" : "the string",
                            t[k]);
    } else if (t[k] >= 0x80) {
      size_t n = tf_doc__utf8_len(t + k, s->len - k);
      if (!n) return tf_doc__jerror(s, k, !is_key, "%s is not valid UTF-8", is_key ? "a key" : "the string");
      k += n - 1;
    }
  }
  *i = k;
  return TF_OK;
}

/* Record the key of the top object; refuse it when the object has it already. */
static tf_err tf_doc__jkey(tf_doc__jscan *s, size_t open, size_t close, int escaped)
{
  tf_doc__jframe *f = &s->stack[s->depth - 1];
  const char *key = s->text + open + 1;
  size_t klen = close - open - 1;
  if (escaped) {
    /* "a" and "\u0061" are the same key: compare what cJSON decodes */
    cJSON *str = cJSON_ParseWithLength(s->text + open, close - open + 1);
    if (!cJSON_IsString(str)) {
      /* a malformed escape: not a key to compare, cJSON names the syntax error next */
      cJSON_Delete(str);
      return TF_OK;
    }
    char *d = tf_strdup__(str->valuestring);
    cJSON_Delete(str);
    if (s->decoded_count == s->decoded_cap) {
      size_t cap = s->decoded_cap ? 2 * s->decoded_cap : 16;
      char **n = realloc(s->decoded, cap * sizeof(*n));
      if (!n) {
        free(d);
        return tf_error__nomem();
      }
      s->decoded = n;
      s->decoded_cap = cap;
    }
    if (!d) return tf_error__nomem();
    s->decoded[s->decoded_count++] = d;
    key = d;
    klen = strlen(d);
  }
  f->key = key;
  f->key_len = klen;
  uint64_t *first = NULL;
  int rc = tf_map__insert(&s->keys, f->scope, key, klen, open, &first);
  if (rc < 0) return rc;
  if (rc == 0) {
    size_t line, col;
    tf_doc__where(s->text, (size_t)*first, &line, &col);
    return tf_doc__jerror(s, open, 1, "duplicate key (first at line %zu, column %zu)", line, col);
  }
  return TF_OK;
}

static tf_err tf_doc__json_check(const char *text, size_t len, size_t keys)
{
  tf_doc__jscan s;
  memset(&s, 0, sizeof(s));
  s.text = text;
  s.len = len;
  tf_map__init(&s.keys);
  tf_err rc = tf_map__reserve(&s.keys, keys);
  uint64_t objects = 0;
  int expect_key = 0;
  for (size_t i = 0; i < len && rc == TF_OK; i++) {
    char ch = text[i];
    switch (ch) {
    case '{':
    case '[':
      /* deeper than cJSON goes: nothing to check, cJSON refuses the text */
      if (s.depth == CJSON_NESTING_LIMIT) {
        i = len;
        break;
      }
      if (s.depth == s.cap) {
        size_t cap = s.cap ? 2 * s.cap : 32;
        tf_doc__jframe *n = realloc(s.stack, cap * sizeof(*n));
        if (!n) {
          rc = tf_error__nomem();
          break;
        }
        s.stack = n;
        s.cap = cap;
      }
      memset(&s.stack[s.depth], 0, sizeof(s.stack[0]));
      s.stack[s.depth].object = ch == '{';
      s.stack[s.depth].scope = ++objects;
      s.depth++;
      expect_key = ch == '{';
      break;
    case '}':
    case ']':
      if (s.depth) s.depth--;
      expect_key = 0;
      break;
    case ',':
      if (s.depth && s.stack[s.depth - 1].object) expect_key = 1;
      else if (s.depth) s.stack[s.depth - 1].index++;
      break;
    case '"': {
      size_t open = i;
      int escaped;
      int is_key = expect_key && s.depth && s.stack[s.depth - 1].object;
      if ((rc = tf_doc__jstring(&s, &i, is_key, &escaped)) < 0) break;
      if (is_key) rc = tf_doc__jkey(&s, open, i, escaped);
      expect_key = 0;
      break;
    }
    default:
      /* cJSON skips every byte <= 0x20 as whitespace; RFC 8259 allows space, tab, LF and CR only */
      if ((unsigned char)ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
        rc = tf_doc__jerror(&s, i, 0, "control character 0x%02x outside a string (only space, tab, LF and CR "
                                      "may stand between tokens)",
                            (unsigned char)ch);
      break;
    }
  }
  for (size_t k = 0; k < s.decoded_count; k++) free(s.decoded[k]);
  free(s.decoded);
  free(s.stack);
  tf_map__dispose(&s.keys);
  return rc;
}

tf_err tf_doc__parse_json(struct cJSON **out, const char *text, size_t len, const tf_parse_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  *out = NULL;
  tf_doc__limit lim;
  tf_err rc = tf_doc__limits(&lim, opts);
  if (rc < 0 || (rc = tf_doc__check_size(len, &lim)) < 0) return rc;
  if (!text) text = "";
  size_t values = 0, keys = 0;
  int truncated = tf_doc__json_prescan(text, len, &values, &keys);
  if (!truncated && values > lim.max_values) return tf_doc__too_many(lim.max_values);
  /* the key set is gone before cJSON builds the tree: peak memory is the larger of the two */
  if (!truncated && (rc = tf_doc__json_check(text, len, keys)) < 0) return rc;
  const char *end = NULL;
  cJSON *root = truncated ? NULL : cJSON_ParseWithLengthOpts(text, len, &end, 0);
  size_t off;
  const char *why = "invalid JSON";
  if (root) {
    off = (size_t)(end - text);
    while (off < len && (text[off] == ' ' || text[off] == '\t' || text[off] == '\n' || text[off] == '\r'))
      off++;
    if (off == len) {
      *out = root;
      return TF_OK;
    }
    cJSON_Delete(root);
    why = "unexpected data after the JSON value";
  } else if (truncated) {
    off = len;
    why = "unexpected end of JSON";
  } else {
    /* on failure cJSON sets `end` to the error position (cJSON_GetErrorPtr() is a global) */
    off = (end && end >= text && end <= text + len) ? (size_t)(end - text) : len;
  }
  size_t line, col;
  tf_doc__where(text, off, &line, &col);
  return tf_error__set(TF_EPROTO, "line %zu, column %zu (byte %zu): %s", line, col, off, why);
}

static int tf_doc__all(const char *s, size_t n, const char *set)
{
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (!strchr(set, s[i])) return 0;
  return 1;
}

/* YAML 1.2 core schema resolution of a plain scalar. */
static cJSON *tf_doc__plain_scalar(const char *s, size_t n)
{
  if (n == 0 || (n == 1 && s[0] == '~') || (n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4))))
    return cJSON_CreateNull();
  if ((n == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "True", 4) || !memcmp(s, "TRUE", 4))))
    return cJSON_CreateTrue();
  if ((n == 5 && (!memcmp(s, "false", 5) || !memcmp(s, "False", 5) || !memcmp(s, "FALSE", 5))))
    return cJSON_CreateFalse();
  const char *d = s;
  size_t dn = n;
  if (*d == '-' || *d == '+') {
    d++;
    dn--;
  }
  if (tf_doc__all(d, dn, "0123456789")) {
    char buf[64];
    if (n < sizeof(buf)) {
      memcpy(buf, s, n);
      buf[n] = '\0';
      return cJSON_CreateNumber(strtod(buf, NULL));
    }
  }
  /* floats: digits with at most one '.', optional exponent */
  if (dn > 0 && tf_doc__all(d, dn, "0123456789.eE+-") && n < 64) {
    char buf[64];
    char *end = NULL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    double v = strtod(buf, &end);
    if (end && *end == '\0' && isfinite(v) && strpbrk(buf, "0123456789")) return cJSON_CreateNumber(v);
  }
  return NULL; /* a string: the caller makes it */
}

typedef struct tf_doc__frame {
  cJSON *node;
  char *pending_key;    /* mapping: key waiting for its value */
  const char *last_key; /* mapping: the key of the last value added (owned by the tree) */
  uint64_t key_mark;    /* mapping: where the pending key is */
  size_t index;         /* sequence: the next element */
  uint64_t scope;       /* mapping: its number, the scope of its keys */
} tf_doc__frame;

/* The path of the value at the top of the stack, then @p key when given. */
static void tf_doc__yaml_path(tf_buf *path, const tf_doc__frame *stack, size_t depth, const char *key, size_t klen)
{
  for (size_t i = 0; i < depth; i++) {
    /* a frame below the top holds the value above it as its last item */
    const tf_doc__frame *f = &stack[i];
    int top = i + 1 == depth;
    const char *k = top ? f->pending_key : f->last_key;
    if (cJSON_IsArray(f->node)) tf_buf__printf(path, "[%zu]", top || !f->index ? f->index : f->index - 1);
    else if (k) tf_doc__path_key(path, k, strlen(k));
  }
  if (key) tf_doc__path_key(path, key, klen);
}

/* "line L, column C (byte B): PATH: why", the path of the value at the top of the stack. */
static tf_err tf_doc__yaml_error_at(const tf_doc__frame *stack, size_t depth, const char *why, const yaml_mark_t *m)
{
  tf_buf path;
  tf_buf__init(&path);
  tf_doc__yaml_path(&path, stack, depth, NULL, 0);
  if (!path.len) tf_buf__puts(&path, "document");
  tf_err rc = tf_error__set(TF_EPROTO, "line %zu, column %zu (byte %zu): %.*s: %s", m->line + 1, m->column + 1,
                            m->index, TF__DOC_PATH_MAX, path.ptr ? path.ptr : "document", why);
  tf_buf__dispose(&path, 0);
  return rc;
}

static tf_err tf_doc__yaml_error(const char *why, const yaml_mark_t *m)
{
  return tf_error__set(TF_EPROTO, "line %zu, column %zu (byte %zu): %s", m->line + 1, m->column + 1,
                       m->index, why);
}

/* A position packed into a map value. */
static uint64_t tf_doc__mark_pack(const yaml_mark_t *m)
{
  return ((uint64_t)(m->line + 1) << 32) | (uint32_t)(m->column + 1);
}

static tf_err tf_doc__yaml_walk(struct cJSON **out, const char *text, size_t len, const tf_doc__limit *lim,
                                size_t find, tf_buf *found);

/* The field holding character @p at of @p text, whose bytes from @p byte on libyaml's reader
 * refused: the path of the last scalar that starts before it, read from the valid prefix. */
static void tf_doc__yaml_field_at(tf_buf *found, const char *text, size_t byte, const tf_doc__limit *lim)
{
  size_t chars = 0;
  for (size_t i = 0; i < byte; i++) chars += ((unsigned char)text[i] & 0xc0) != 0x80;
  cJSON *ignored = NULL;
  tf_doc__yaml_walk(&ignored, text, byte, lim, chars, found);
  cJSON_Delete(ignored);
}

tf_err tf_doc__parse_yaml(struct cJSON **out, const char *text, size_t len, const tf_parse_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  *out = NULL;
  tf_doc__limit lim;
  tf_err rc = tf_doc__limits(&lim, opts);
  if (rc < 0 || (rc = tf_doc__check_size(len, &lim)) < 0) return rc;
  return tf_doc__yaml_walk(out, text ? text : "", len, &lim, 0, NULL);
}

/* The event loop. With @p found, a path search instead (tf_doc__yaml_field_at):
 * errors end the walk quietly, and @p found gets the path of the last scalar that
 * starts at or before character @p find. */
static tf_err tf_doc__yaml_walk(struct cJSON **out, const char *text, size_t len, const tf_doc__limit *limits,
                                size_t find, tf_buf *found)
{
  tf_doc__limit lim = *limits;
  tf_err rc = TF_OK;
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return tf_error__nomem();
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);

  tf_doc__frame stack[TF__DOC_MAX_DEPTH];
  size_t depth = 0;
  cJSON *root = NULL;
  int docs = 0;
  int done = 0;
  size_t values = 0;
  uint64_t mappings = 0;
  tf_map keys; /* (mapping, key) -> where the key was first seen */
  tf_map__init(&keys);

  while (!done) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&parser, &ev)) {
      const char *why = parser.problem ? parser.problem : "invalid YAML";
      if (found) break; /* a path search ends at the prefix's end, an error as often as not */
      if (parser.error == YAML_READER_ERROR) {
        /* the reader (encoding: invalid UTF-8, control characters) gives a byte offset, no
         * mark, and decodes ahead of the parser: the field comes from a walk of the prefix */
        char msg[256];
        size_t at = parser.problem_offset < len ? parser.problem_offset : len;
        yaml_mark_t m = {at, 0, 0};
        tf_doc__where(text, at, &m.line, &m.column);
        m.line--;
        m.column--;
        if (at < len)
          snprintf(msg, sizeof(msg), "%s (byte 0x%02x)", why, (unsigned char)text[at]);
        else
          snprintf(msg, sizeof(msg), "%s", why);
        tf_buf path;
        tf_buf__init(&path);
        tf_doc__yaml_field_at(&path, text, at, &lim);
        if (path.len && !path.failed)
          rc = tf_error__set(TF_EPROTO, "line %zu, column %zu (byte %zu): %.*s: %s", m.line + 1, m.column + 1, at,
                             TF__DOC_PATH_MAX, path.ptr, msg);
        else
          rc = tf_doc__yaml_error(msg, &m);
        tf_buf__dispose(&path, 0);
      } else if (parser.context) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s %s", parser.context, why);
        rc = tf_doc__yaml_error(msg, &parser.problem_mark);
      } else {
        rc = tf_doc__yaml_error(why, &parser.problem_mark);
      }
      break;
    }
    cJSON *value = NULL;
    int opens = 0;
    switch (ev.type) {
    case YAML_STREAM_END_EVENT:
      done = 1;
      break;
    case YAML_DOCUMENT_START_EVENT:
      if (++docs > 1) rc = tf_doc__yaml_error("only one YAML document is allowed", &ev.start_mark);
      break;
    case YAML_ALIAS_EVENT:
      rc = tf_doc__yaml_error("YAML aliases are not supported", &ev.start_mark);
      break;
    case YAML_SCALAR_EVENT: {
      const char *s = (const char *)ev.data.scalar.value;
      size_t n = ev.data.scalar.length;
      tf_doc__frame *top = depth > 0 ? &stack[depth - 1] : NULL;
      int is_key = top && cJSON_IsObject(top->node) && !top->pending_key;
      if (found && ev.start_mark.index <= find) {
        found->len = 0;
        tf_doc__yaml_path(found, stack, depth, is_key ? s : NULL, is_key ? n : 0);
      }
      if (memchr(s, '\0', n)) {
        rc = tf_doc__yaml_error_at(stack, depth, is_key ? "a key contains a NUL character" :
                                   "the string contains a NUL character", &ev.start_mark);
        break;
      }
      if (is_key) {
        top->pending_key = tf_strndup__(s, n);
        if (!top->pending_key) {
          rc = tf_error__nomem();
          break;
        }
        uint64_t *first = tf_map__find(&keys, top->scope, top->pending_key, n);
        if (first) {
          char msg[96];
          snprintf(msg, sizeof(msg), "duplicate key (first at line %u, column %u)", (unsigned)(*first >> 32),
                   (unsigned)(*first & 0xffffffffu));
          rc = tf_doc__yaml_error_at(stack, depth, msg, &ev.start_mark);
        } else {
          /* the pending key becomes the item's key when its value comes; keep its mark until then */
          top->key_mark = tf_doc__mark_pack(&ev.start_mark);
        }
        break;
      }
      if (++values > lim.max_values) {
        rc = tf_doc__too_many(lim.max_values);
        break;
      }
      if (ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev.data.scalar.tag)
        value = tf_doc__plain_scalar(s, n);
      if (!value) {
        char *copy = tf_strndup__(s, n);
        value = copy ? cJSON_CreateString(copy) : NULL;
        free(copy);
      }
      if (!value) rc = tf_error__nomem();
      break;
    }
    case YAML_MAPPING_START_EVENT:
    case YAML_SEQUENCE_START_EVENT:
      if (depth > 0 && cJSON_IsObject(stack[depth - 1].node) && !stack[depth - 1].pending_key) {
        rc = tf_doc__yaml_error("mapping keys must be scalars", &ev.start_mark);
        break;
      }
      if (depth == TF__DOC_MAX_DEPTH) {
        rc = tf_doc__yaml_error("nested too deeply", &ev.start_mark);
        break;
      }
      if (++values > lim.max_values) {
        rc = tf_doc__too_many(lim.max_values);
        break;
      }
      value = ev.type == YAML_MAPPING_START_EVENT ? cJSON_CreateObject() : cJSON_CreateArray();
      if (!value) rc = tf_error__nomem();
      opens = 1;
      break;
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
      depth--;
      break;
    default:
      break;
    }
    if (rc == TF_OK && value) {
      if (depth == 0) {
        root = value;
      } else {
        tf_doc__frame *f = &stack[depth - 1];
        if (cJSON_IsObject(f->node)) {
          int added = cJSON_AddItemToObject(f->node, f->pending_key, value);
          free(f->pending_key);
          f->pending_key = NULL;
          /* the key's copy lives as long as the tree: the map borrows it */
          if (!added) {
            cJSON_Delete(value);
            value = NULL;
            opens = 0;
            rc = tf_error__nomem();
          } else if (tf_map__insert(&keys, f->scope, value->string, strlen(value->string), f->key_mark, NULL) < 0) {
            rc = tf_error__nomem();
          } else {
            f->last_key = value->string;
          }
        } else {
          cJSON_AddItemToArray(f->node, value);
          f->index++;
        }
      }
      if (opens && value) {
        stack[depth].node = value;
        stack[depth].pending_key = NULL;
        stack[depth].last_key = NULL;
        stack[depth].index = 0;
        stack[depth].scope = ++mappings;
        depth++;
      }
    } else if (value) {
      cJSON_Delete(value);
    }
    yaml_event_delete(&ev);
    if (rc != TF_OK) break;
  }
  for (size_t i = 0; i < depth; i++) free(stack[i].pending_key);
  yaml_parser_delete(&parser);
  tf_map__dispose(&keys);
  if (rc != TF_OK) {
    cJSON_Delete(root);
    return rc;
  }
  if (!root) root = cJSON_CreateNull();
  if (!root) return tf_error__nomem();
  *out = root;
  return TF_OK;
}

tf_err tf_doc__print(char **out, struct cJSON *root)
{
  *out = NULL;
  char *text = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!text) return tf_error__nomem();
  *out = tf_strdup__(text);
  cJSON_free(text);
  return *out ? TF_OK : tf_error__nomem();
}
