/* Reading the JSON-lines vector files of tests/data/vectors (header only:
 * '#' lines and blank lines skipped, one flat cJSON object per line). */
#ifndef TF_VECTORS_H
#define TF_VECTORS_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_test.h"

typedef struct tf_vectors {
  cJSON **items;
  size_t count;
} tf_vectors;

/* Load tests/data/vectors/<name>; every data line must parse. */
static inline tf_vectors tf_vectors_load(const char *name)
{
  char rel[256];
  snprintf(rel, sizeof(rel), "vectors/%s", name);
  char *text = tf_test_read(tf_test_data(rel), NULL);
  tf_vectors v = {NULL, 0};
  size_t cap = 0, lineno = 0;
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (*p && *p != '#') {
      cJSON *obj = cJSON_Parse(p);
      ck_assert_msg(obj && cJSON_IsObject(obj), "%s:%zu: not a JSON object", name, lineno);
      if (v.count == cap) {
        cap = cap ? cap * 2 : 64;
        v.items = realloc(v.items, cap * sizeof(*v.items));
        ck_assert_ptr_nonnull(v.items);
      }
      v.items[v.count++] = obj;
    }
    line = nl ? nl + 1 : NULL;
  }
  free(text);
  return v;
}

static inline void tf_vectors_free(tf_vectors *v)
{
  for (size_t i = 0; i < v->count; i++) cJSON_Delete(v->items[i]);
  free(v->items);
  v->items = NULL;
  v->count = 0;
}

/* A string field, or NULL when absent or null. */
static inline const char *tf_vec_str(const cJSON *o, const char *key)
{
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* The "id" (or "uri") of a vector, for messages. */
static inline const char *tf_vec_id(const cJSON *o)
{
  const char *id = tf_vec_str(o, "id");
  return id ? id : tf_vec_str(o, "uri") ? tf_vec_str(o, "uri") : "?";
}

/* Decode lowercase hex into a malloc'ed buffer of exactly the decoded size
 * (at least 1 byte allocated, so ASan sees every overread). */
static inline uint8_t *tf_vec_unhex(const char *hex, size_t *len)
{
  size_t n = strlen(hex);
  ck_assert_msg(n % 2 == 0, "odd hex length");
  uint8_t *out = malloc(n / 2 ? n / 2 : 1);
  ck_assert_ptr_nonnull(out);
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v = 0;
    ck_assert_msg(sscanf(hex + 2 * i, "%2x", &v) == 1, "bad hex");
    out[i] = (uint8_t)v;
  }
  *len = n / 2;
  return out;
}

/* Lowercase hex of @p n bytes; malloc'ed. */
static inline char *tf_vec_hex(const uint8_t *p, size_t n)
{
  char *s = malloc(2 * n + 1);
  ck_assert_ptr_nonnull(s);
  for (size_t i = 0; i < n; i++) snprintf(s + 2 * i, 3, "%02x", p[i]);
  s[2 * n] = '\0';
  return s;
}

#endif
