/* map: the library's one string-keyed hash table (open addressing, linear
 * probing, load at most 1/2, deletion by backward shift so no tombstones).
 * Keys are borrowed: the caller keeps them alive as long as the table (smap.c
 * wraps it for owned keys). A 64-bit scope is part of the key, so one table can
 * hold the keys of every mapping of a document without clearing between them. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static uint32_t tf_map__hash(uint64_t scope, const char *key, size_t len)
{
  uint32_t h = tf_fnv1a32__(key, len);
  h ^= (uint32_t)scope * 0x9e3779b1u ^ (uint32_t)(scope >> 32);
  /* avalanche: keys that differ in their last bytes only spread over the table */
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

void tf_map__init(tf_map *m) { memset(m, 0, sizeof(*m)); }

void tf_map__dispose(tf_map *m)
{
  if (!m) return;
  free(m->slots);
  memset(m, 0, sizeof(*m));
}

static tf_map__slot *tf_map__probe(const tf_map *m, uint32_t h, uint64_t scope, const char *key, size_t len)
{
  size_t i = h & m->mask;
  for (;;) {
    tf_map__slot *s = &m->slots[i];
    if (!s->key) return s;
    if (s->hash == h && s->scope == scope && s->len == len && memcmp(s->key, key, len) == 0) return s;
    i = (i + 1) & m->mask;
  }
}

uint64_t *tf_map__find(const tf_map *m, uint64_t scope, const char *key, size_t len)
{
  if (!m || !m->slots || !key || len > UINT32_MAX) return NULL;
  tf_map__slot *s = tf_map__probe(m, tf_map__hash(scope, key, len), scope, key, len);
  return s->key ? &s->value : NULL;
}

static tf_err tf_map__grow(tf_map *m, size_t cap)
{
  tf_map__slot *slots = calloc(cap, sizeof(*slots));
  if (!slots) return tf_error__nomem();
  tf_map n = {slots, cap - 1, m->used};
  for (size_t i = 0; m->slots && i <= m->mask; i++) {
    const tf_map__slot *s = &m->slots[i];
    if (s->key) *tf_map__probe(&n, s->hash, s->scope, s->key, s->len) = *s;
  }
  free(m->slots);
  *m = n;
  return TF_OK;
}

tf_err tf_map__reserve(tf_map *m, size_t n)
{
  size_t cap = m->slots ? m->mask + 1 : 16;
  while (cap < 2 * (n + 1)) {
    if (cap > SIZE_MAX / 4 / sizeof(tf_map__slot)) return tf_error__nomem();
    cap *= 2;
  }
  return (m->slots && cap == m->mask + 1) ? TF_OK : tf_map__grow(m, cap);
}

int tf_map__insert(tf_map *m, uint64_t scope, const char *key, size_t len, uint64_t value, uint64_t **found)
{
  if (found) *found = NULL;
  if (!m || !key || len > UINT32_MAX) return tf_error__set(TF_EINVALID, "invalid argument: map key");
  if ((!m->slots || 2 * (m->used + 1) > m->mask + 1) && tf_map__grow(m, m->slots ? 2 * (m->mask + 1) : 16) < 0)
    return TF_ENOMEM;
  uint32_t h = tf_map__hash(scope, key, len);
  tf_map__slot *s = tf_map__probe(m, h, scope, key, len);
  if (s->key) {
    if (found) *found = &s->value;
    return 0;
  }
  s->key = key;
  s->len = (uint32_t)len;
  s->scope = scope;
  s->value = value;
  s->hash = h;
  m->used++;
  if (found) *found = &s->value;
  return 1;
}

int tf_map__remove(tf_map *m, uint64_t scope, const char *key, size_t len, uint64_t *value)
{
  if (!m || !m->slots || !key || len > UINT32_MAX) return 0;
  tf_map__slot *s = tf_map__probe(m, tf_map__hash(scope, key, len), scope, key, len);
  if (!s->key) return 0;
  if (value) *value = s->value;
  /* backward shift: pull each later entry of the run into the hole unless its home lies in (hole, entry] */
  size_t hole = (size_t)(s - m->slots);
  for (size_t j = (hole + 1) & m->mask; m->slots[j].key; j = (j + 1) & m->mask) {
    size_t home = m->slots[j].hash & m->mask;
    int stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (stays) continue;
    m->slots[hole] = m->slots[j];
    hole = j;
  }
  memset(&m->slots[hole], 0, sizeof(m->slots[hole]));
  m->used--;
  return 1;
}
