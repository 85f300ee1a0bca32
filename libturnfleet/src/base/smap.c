/* smap: map.c with owned keys and pointer values, for the long-lived maps
 * (informer cache and indexes, work queue sets, event dedupe). */
#include "smap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct tf_smap {
  tf_map m;                  /* keys borrowed from the entries below */
  void (*free_val)(void *);
};

typedef struct tf_smap__ent {
  void *val;
  char key[];
} tf_smap__ent;

tf_smap *tf_smap__new(void (*free_val)(void *))
{
  tf_smap *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  tf_map__init(&m->m);
  m->free_val = free_val;
  return m;
}

static tf_smap__ent *tf_smap__ent_of(uint64_t v) { return (tf_smap__ent *)(uintptr_t)v; }

static void tf_smap__drop(tf_smap *m, tf_smap__ent *e)
{
  if (m->free_val) m->free_val(e->val);
  free(e);
}

void tf_smap__free(tf_smap *m)
{
  if (!m) return;
  for (size_t i = 0; m->m.slots && i <= m->m.mask; i++)
    if (m->m.slots[i].key) tf_smap__drop(m, tf_smap__ent_of(m->m.slots[i].value));
  tf_map__dispose(&m->m);
  free(m);
}

static tf_smap__ent *tf_smap__find(const tf_smap *m, const char *key)
{
  const uint64_t *v = tf_map__find(&m->m, 0, key, strlen(key));
  return v ? tf_smap__ent_of(*v) : NULL;
}

int tf_smap__put(tf_smap *m, const char *key, void *val)
{
  tf_smap__ent *e = tf_smap__find(m, key);
  if (e) {
    if (m->free_val && e->val != val) m->free_val(e->val);
    e->val = val;
    return 0;
  }
  size_t kl = strlen(key);
  e = malloc(sizeof(*e) + kl + 1);
  if (!e) return -1;
  memcpy(e->key, key, kl + 1);
  e->val = val;
  if (tf_map__insert(&m->m, 0, e->key, kl, (uint64_t)(uintptr_t)e, NULL) < 0) {
    free(e);
    return -1;
  }
  return 0;
}

void *tf_smap__get(const tf_smap *m, const char *key)
{
  tf_smap__ent *e = tf_smap__find(m, key);
  return e ? e->val : NULL;
}

int tf_smap__has(const tf_smap *m, const char *key) { return tf_smap__find(m, key) != NULL; }

int tf_smap__del(tf_smap *m, const char *key)
{
  uint64_t v;
  if (!tf_map__remove(&m->m, 0, key, strlen(key), &v)) return 0;
  tf_smap__drop(m, tf_smap__ent_of(v));
  return 1;
}

size_t tf_smap__count(const tf_smap *m) { return m ? m->m.used : 0; }

int tf_smap__next(const tf_smap *m, size_t *pos, const char **key, void **val)
{
  /* *pos is the next slot to look at */
  for (size_t i = *pos; m->m.slots && i <= m->m.mask; i++) {
    if (!m->m.slots[i].key) continue;
    tf_smap__ent *e = tf_smap__ent_of(m->m.slots[i].value);
    *key = e->key;
    if (val) *val = e->val;
    *pos = i + 1;
    return 1;
  }
  return 0;
}
