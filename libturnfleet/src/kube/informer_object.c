/* informer_object: a cached object in its compact read-only form. One
 * allocation holds the header, an offset tape (one entry per JSON value: where
 * it starts in the text, and the entry past its subtree), the minified JSON
 * text and the key. Built once per watch event or listed item from the tree
 * the watch already parsed (managedFields and the caller's transform applied
 * first); never changed afterwards, so readers on any thread share it by
 * reference count: a watch update puts a new object in the cache and only
 * unrefs the old one, which lives on while a reader holds it. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kube_internal.h"

typedef struct tf_inf__tape {
  uint32_t off;  /* the value's first byte in text */
  uint32_t next; /* the entry after its subtree (its next sibling, if any) */
} tf_inf__tape;

struct tf_informer_object {
  long refs; /* __atomic */
  uint32_t len, nvals;
  const char *text; /* into this allocation, NUL-terminated */
  const char *key;  /* into this allocation */
  tf_inf__tape tape[];
};

/* ---- the tape over valid minified JSON (what cJSON printed) ---- */

typedef struct tape_build {
  const char *s;
  size_t len, pos;
  tf_inf__tape *t;
  size_t n, cap;
} tape_build;

static size_t skip_string(const char *s, size_t len, size_t pos) /* pos at the opening quote */
{
  for (pos++; pos < len && s[pos] != '"'; pos++)
    if (s[pos] == '\\') pos++;
  return pos + 1;
}

static int tape_value(tape_build *b)
{
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    tf_inf__tape *t = realloc(b->t, cap * sizeof(*t));
    if (!t) return -1;
    b->t = t;
    b->cap = cap;
  }
  size_t me = b->n++;
  b->t[me].off = (uint32_t)b->pos;
  char c = b->pos < b->len ? b->s[b->pos] : '\0';
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    b->pos++;
    while (b->pos < b->len && b->s[b->pos] != close) {
      if (c == '{') b->pos = skip_string(b->s, b->len, b->pos) + 1; /* the key and ':' */
      if (tape_value(b) < 0) return -1;
      if (b->pos < b->len && b->s[b->pos] == ',') b->pos++;
    }
    b->pos++;
  } else if (c == '"') {
    b->pos = skip_string(b->s, b->len, b->pos);
  } else {
    while (b->pos < b->len && !strchr(",}]", b->s[b->pos])) b->pos++;
  }
  b->t[me].next = (uint32_t)b->n;
  return 0;
}

/* ---- building ---- */

/* The object form of @p tree (changed in place: managedFields go), keyed @p key. NULL on no memory. */
tf_informer_object *tf_inf__object_build(cJSON *tree, const char *key)
{
  cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(tree, "metadata"), "managedFields");
  char *text = cJSON_PrintUnformatted(tree);
  if (!text) return NULL;
  size_t len = strlen(text), klen = strlen(key);
  tape_build b = {.s = text, .len = len};
  tf_informer_object *o = NULL;
  if (len < UINT32_MAX && tape_value(&b) == 0 && b.n < UINT32_MAX &&
      (o = malloc(sizeof(*o) + b.n * sizeof(tf_inf__tape) + len + 1 + klen + 1))) {
    o->refs = 1;
    o->len = (uint32_t)len;
    o->nvals = (uint32_t)b.n;
    memcpy(o->tape, b.t, b.n * sizeof(tf_inf__tape));
    char *t = (char *)(o->tape + b.n);
    memcpy(t, text, len + 1);
    memcpy(t + len + 1, key, klen + 1);
    o->text = t;
    o->key = t + len + 1;
  }
  free(b.t);
  cJSON_free(text);
  return o;
}

tf_err tf_informer_object_parse(tf_informer_object **out, const char *json, size_t len)
{
  TF_ASSERT_ARG(out && json);
  *out = NULL;
  cJSON *tree = cJSON_ParseWithLength(json, len);
  if (!cJSON_IsObject(tree)) {
    cJSON_Delete(tree);
    return tf_error__set(TF_EINVALID, "object: not a JSON object");
  }
  const char *name = tf_kube__meta_str(tree, "name"), *ns = tf_kube__meta_str(tree, "namespace");
  char *key = !name || !*name ? NULL : ns && *ns ? tf_asprintf__("%s/%s", ns, name) : tf_strdup__(name);
  if (!key) {
    cJSON_Delete(tree);
    return name && *name ? tf_error__nomem() : tf_error__set(TF_EINVALID, "metadata.name: required");
  }
  *out = tf_inf__object_build(tree, key);
  free(key);
  cJSON_Delete(tree);
  return *out ? TF_OK : tf_error__nomem();
}

/* ---- sharing ---- */

tf_informer_object *tf_informer_object_ref(tf_informer_object *o)
{
  if (o) __atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
  return o;
}

void tf_informer_object_release(tf_informer_object *o)
{
  if (o && __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) == 0) free(o);
}

void tf_informer_objects_release(tf_informer_object **objs, size_t n)
{
  for (size_t i = 0; objs && i < n; i++) tf_informer_object_release(objs[i]);
  free(objs);
}

/* ---- reading ---- */

const char *tf_informer_object_json(const tf_informer_object *o, size_t *len)
{
  if (len) *len = o ? o->len : 0;
  return o ? o->text : NULL;
}

const char *tf_informer_object_key(const tf_informer_object *o) { return o ? o->key : NULL; }

size_t tf_informer_object_size(const tf_informer_object *o)
{
  return o ? sizeof(*o) + o->nvals * sizeof(tf_inf__tape) + o->len + 1 + strlen(o->key) + 1 : 0;
}

/* Decode the JSON string body @p s (@p n bytes, no quotes) into @p out (room for n + 1). Its length. */
static size_t unescape(const char *s, size_t n, char *out)
{
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\' || i + 1 >= n) {
      out[w++] = s[i];
      continue;
    }
    char c = s[++i];
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *p = strchr(from, c);
    if (c != 'u') {
      out[w++] = p && c ? to[p - from] : c;
      continue;
    }
    unsigned long cp = i + 4 < n ? strtoul((char[5]){s[i + 1], s[i + 2], s[i + 3], s[i + 4], 0}, NULL, 16) : 0;
    i += 4;
    if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < n && s[i + 1] == '\\' && s[i + 2] == 'u') {
      unsigned long lo = strtoul((char[5]){s[i + 3], s[i + 4], s[i + 5], s[i + 6], 0}, NULL, 16);
      if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00), i += 6;
    }
    if (cp < 0x80) out[w++] = (char)cp;
    else if (cp < 0x800) out[w++] = (char)(0xC0 | cp >> 6), out[w++] = (char)(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
      out[w++] = (char)(0xE0 | cp >> 12), out[w++] = (char)(0x80 | ((cp >> 6) & 0x3F)),
      out[w++] = (char)(0x80 | (cp & 0x3F));
    else
      out[w++] = (char)(0xF0 | cp >> 18), out[w++] = (char)(0x80 | ((cp >> 12) & 0x3F)),
      out[w++] = (char)(0x80 | ((cp >> 6) & 0x3F)), out[w++] = (char)(0x80 | (cp & 0x3F));
  }
  out[w] = '\0';
  return w;
}

/* Whether the member whose value is entry @p e is named @p name: its key ends just before the ':'. */
static int key_is(const tf_informer_object *o, uint32_t e, const char *name)
{
  const char *s = o->text;
  uint32_t end = o->tape[e].off - 2; /* the key's closing quote */
  uint32_t start = end;
  for (;;) { /* back to the opening quote: one preceded by an even run of backslashes */
    start--;
    if (s[start] != '"') continue;
    uint32_t bs = 0;
    while (start - bs > 0 && s[start - bs - 1] == '\\') bs++;
    if (bs % 2 == 0) break;
  }
  size_t n = end - start - 1, nl = strlen(name);
  if (!memchr(s + start + 1, '\\', n)) return n == nl && memcmp(s + start + 1, name, n) == 0;
  char *buf = malloc(n + 1);
  int same = buf && unescape(s + start + 1, n, buf) == nl && memcmp(buf, name, nl) == 0;
  free(buf);
  return same;
}

/* The entry at @p path (keys of nested objects, NULL-terminated) from the root; -1 when absent. */
static long find(const tf_informer_object *o, const char *const *path)
{
  uint32_t e = 0;
  for (size_t i = 0; path && path[i]; i++) {
    if (o->text[o->tape[e].off] != '{') return -1;
    uint32_t c = e + 1, end = o->tape[e].next;
    while (c < end && !key_is(o, c, path[i])) c = o->tape[c].next;
    if (c >= end) return -1;
    e = c;
  }
  return e;
}

tf_err tf_informer_object_find(const tf_informer_object *o, const char *const *path, const char **json, size_t *len)
{
  TF_ASSERT_ARG(o && json && len);
  long e = find(o, path);
  *json = NULL;
  *len = 0;
  if (e < 0) return tf_error__set(TF_ENOTFOUND, "object %.200s: no such field", o->key);
  const char *s = o->text;
  size_t start = o->tape[e].off, stop = start;
  if (s[start] == '"') {
    stop = skip_string(s, o->len, start);
  } else if (s[start] == '{' || s[start] == '[') {
    for (int depth = 0; stop < o->len;) { /* to the bracket that closes it, over strings */
      char c = s[stop];
      if (c == '"') {
        stop = skip_string(s, o->len, stop);
        continue;
      }
      stop++;
      if (c == '{' || c == '[') depth++;
      else if ((c == '}' || c == ']') && --depth == 0) break;
    }
  } else {
    while (stop < o->len && !strchr(",}]", s[stop])) stop++;
  }
  *json = s + start;
  *len = stop - start;
  return TF_OK;
}

tf_err tf_informer_object_string(const tf_informer_object *o, const char *const *path, char **out)
{
  TF_ASSERT_ARG(o && out);
  *out = NULL;
  const char *v;
  size_t n;
  tf_err rc = tf_informer_object_find(o, path, &v, &n);
  if (rc < 0) return rc;
  if (n < 2 || v[0] != '"') return tf_error__set(TF_EINVALID, "object %.200s: not a string", o->key);
  if (!(*out = malloc(n - 1))) return tf_error__nomem();
  unescape(v + 1, n - 2, *out);
  return TF_OK;
}
