/* smap: the one private string map (informer cache and indexes, work queue
 * sets, event dedupe). */
#include "smap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct tf_smap__ent {
  struct tf_smap__ent *next;
  void *val;
  char key[];
} tf_smap__ent;

struct tf_smap {
  tf_smap__ent **b;
  size_t nb, n;
  void (*free_val)(void *);
};

tf_smap *tf_smap__new(void (*free_val)(void *))
{
  tf_smap *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->nb = 16;
  m->b = calloc(m->nb, sizeof(*m->b));
  if (!m->b) {
    free(m);
    return NULL;
  }
  m->free_val = free_val;
  return m;
}

void tf_smap__free(tf_smap *m)
{
  if (!m) return;
  for (size_t i = 0; i < m->nb; i++) {
    for (tf_smap__ent *e = m->b[i], *nx; e; e = nx) {
      nx = e->next;
      if (m->free_val) m->free_val(e->val);
      free(e);
    }
  }
  free(m->b);
  free(m);
}

static size_t tf_smap__slot(const tf_smap *m, const char *key)
{
  return tf_fnv1a32__(key, strlen(key)) & (m->nb - 1);
}

static tf_smap__ent **tf_smap__find(const tf_smap *m, const char *key)
{
  tf_smap__ent **p = &m->b[tf_smap__slot(m, key)];
  while (*p && strcmp((*p)->key, key) != 0) p = &(*p)->next;
  return p;
}

static void tf_smap__grow(tf_smap *m)
{
  size_t nb = m->nb * 2;
  tf_smap__ent **b = calloc(nb, sizeof(*b));
  if (!b) return; /* stays correct, only slower */
  for (size_t i = 0; i < m->nb; i++) {
    for (tf_smap__ent *e = m->b[i], *nx; e; e = nx) {
      nx = e->next;
      size_t s = tf_fnv1a32__(e->key, strlen(e->key)) & (nb - 1);
      e->next = b[s];
      b[s] = e;
    }
  }
  free(m->b);
  m->b = b;
  m->nb = nb;
}

int tf_smap__put(tf_smap *m, const char *key, void *val)
{
  tf_smap__ent **p = tf_smap__find(m, key);
  if (*p) {
    if (m->free_val && (*p)->val != val) m->free_val((*p)->val);
    (*p)->val = val;
    return 0;
  }
  size_t kl = strlen(key);
  tf_smap__ent *e = malloc(sizeof(*e) + kl + 1);
  if (!e) return -1;
  memcpy(e->key, key, kl + 1);
  e->val = val;
  e->next = NULL;
  *p = e;
  if (++m->n > m->nb && m->nb < ((size_t)1 << 30)) tf_smap__grow(m);
  return 0;
}

void *tf_smap__get(const tf_smap *m, const char *key)
{
  tf_smap__ent *e = *tf_smap__find(m, key);
  return e ? e->val : NULL;
}

int tf_smap__has(const tf_smap *m, const char *key) { return *tf_smap__find(m, key) != NULL; }

int tf_smap__del(tf_smap *m, const char *key)
{
  tf_smap__ent **p = tf_smap__find(m, key);
  if (!*p) return 0;
  tf_smap__ent *e = *p;
  *p = e->next;
  if (m->free_val) m->free_val(e->val);
  free(e);
  m->n--;
  return 1;
}

size_t tf_smap__count(const tf_smap *m) { return m ? m->n : 0; }

int tf_smap__next(const tf_smap *m, size_t *pos, const char **key, void **val)
{
  /* *pos encodes (bucket << 16 | depth) so iteration needs no extra state */
  size_t bucket = *pos >> 16, depth = *pos & 0xffff;
  for (; bucket < m->nb; bucket++, depth = 0) {
    tf_smap__ent *e = m->b[bucket];
    for (size_t d = 0; e && d < depth; d++) e = e->next;
    if (e) {
      *key = e->key;
      if (val) *val = e->val;
      *pos = bucket << 16 | (depth + 1);
      return 1;
    }
  }
  *pos = bucket << 16;
  return 0;
}
