/* doc: JSON and YAML text into one cJSON tree, so every reader walks one shape.
 * YAML scalars are resolved with the YAML 1.2 core schema; aliases, tags and
 * multi-document streams are refused. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "internal.h"

#define TF__DOC_MAX_DEPTH 64

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

/* Whether JSON text ends inside a string or an open array/object. cJSON
 * points at the last byte in that case, which would name the wrong place. */
static int tf_doc__json_truncated(const char *text, size_t len)
{
  long depth = 0;
  int in_string = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = text[i];
    if (in_string) {
      if (ch == '\\') i++;
      else if (ch == '"') in_string = 0;
    } else if (ch == '"') {
      in_string = 1;
    } else if (ch == '{' || ch == '[') {
      depth++;
    } else if (ch == '}' || ch == ']') {
      depth--;
    }
  }
  return in_string || depth > 0 || len == 0;
}

tf_err tf_doc__parse_json(struct cJSON **out, const char *text, size_t len)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  *out = NULL;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
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
  } else {
    /* on failure cJSON sets `end` to the error position (cJSON_GetErrorPtr() is a global) */
    off = (end && end >= text && end <= text + len) ? (size_t)(end - text) : len;
    if (tf_doc__json_truncated(text, len)) {
      off = len;
      why = "unexpected end of JSON";
    }
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
  char *pending_key; /* mapping: key waiting for its value */
} tf_doc__frame;

static tf_err tf_doc__yaml_error(const char *why, const yaml_mark_t *m)
{
  return tf_error__set(TF_EPROTO, "line %zu, column %zu (byte %zu): %s", m->line + 1, m->column + 1,
                       m->index, why);
}

tf_err tf_doc__parse_yaml(struct cJSON **out, const char *text, size_t len)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  *out = NULL;
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return tf_error__nomem();
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);

  tf_doc__frame stack[TF__DOC_MAX_DEPTH];
  size_t depth = 0;
  cJSON *root = NULL;
  int docs = 0;
  tf_err rc = TF_OK;
  int done = 0;

  while (!done) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&parser, &ev)) {
      const char *why = parser.problem ? parser.problem : "invalid YAML";
      if (parser.context) {
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
      if (memchr(s, '\0', n)) {
        rc = tf_doc__yaml_error("NUL character in a scalar", &ev.start_mark);
        break;
      }
      if (depth > 0 && cJSON_IsObject(stack[depth - 1].node) && !stack[depth - 1].pending_key) {
        stack[depth - 1].pending_key = tf_strndup__(s, n);
        if (!stack[depth - 1].pending_key) rc = tf_error__nomem();
        else if (cJSON_GetObjectItemCaseSensitive(stack[depth - 1].node, stack[depth - 1].pending_key)) {
          char msg[160];
          snprintf(msg, sizeof(msg), "duplicate key \"%.100s\"", stack[depth - 1].pending_key);
          rc = tf_doc__yaml_error(msg, &ev.start_mark);
        }
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
          cJSON_AddItemToObject(f->node, f->pending_key, value);
          free(f->pending_key);
          f->pending_key = NULL;
        } else {
          cJSON_AddItemToArray(f->node, value);
        }
      }
      if (opens) {
        stack[depth].node = value;
        stack[depth].pending_key = NULL;
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
  if (rc != TF_OK) {
    cJSON_Delete(root);
    return rc;
  }
  if (!root) root = cJSON_CreateNull();
  if (!root) return tf_error__nomem();
  *out = root;
  return TF_OK;
}
