/* The Secrets the pools reference (adapter_internal.h, tf_adapter__refs):
 * one informer per referenced name (field selector metadata.name=NAME in the
 * pool's namespace), made when the first pool references the name and
 * dropped when the last stops, so that no Secret nobody references is ever
 * listed, watched or cached. A change of one queues the pools that reference
 * it. The table is locked: the informers' threads read it, the adapter's loop
 * changes it (and stops a dropped informer outside the lock: its callback may
 * be waiting for it). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter_internal.h"
#include "internal.h"
#include "kube_internal.h"

typedef struct ref {
  char *key;  /* ns/name */
  tf_informer *inf;
  char **pools; /* the pools (ns/name) that reference it */
  size_t pool_count;
} ref;

struct tf_adapter__refs {
  tf_kube *kube;
  tf_informer_options tmpl; /* path, selectors and callback are ours */
  tf_workqueue *queue;
  pthread_mutex_t mu;
  ref **refs;
  size_t count;
};

static void ref_free(ref *r)
{
  if (!r) return;
  tf_informer_free(r->inf); /* stops it first: no callback runs past here */
  for (size_t i = 0; i < r->pool_count; i++) free(r->pools[i]);
  free(r->pools);
  free(r->key);
  free(r);
}

static ref *find(const tf_adapter__refs *t, const char *key)
{
  for (size_t i = 0; i < t->count; i++)
    if (strcmp(t->refs[i]->key, key) == 0) return t->refs[i];
  return NULL;
}

/* 1 when @p key is `@p ns/@p name` */
static int is_key(const char *key, const char *ns, const char *name)
{
  size_t l = strlen(ns);
  return strncmp(key, ns, l) == 0 && key[l] == '/' && strcmp(key + l + 1, name) == 0;
}

static int references(const ref *r, const char *pool)
{
  for (size_t i = 0; i < r->pool_count; i++)
    if (strcmp(r->pools[i], pool) == 0) return 1;
  return 0;
}

static void on_change(tf_informer_op op, const char *key, const char *object, void *payload)
{
  (void)op;
  (void)object;
  tf_adapter__refs_changed(payload, key);
}

tf_adapter__refs *tf_adapter__refs_new(tf_kube *kube, const tf_informer_options *tmpl, tf_workqueue *queue)
{
  tf_adapter__refs *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->kube = kube;
  t->queue = queue;
  tf_informer_options io = TF_INFORMER_OPTIONS_INIT;
  if (tmpl) {
    /* the caller's knobs, up to its version (a version-1 struct has no bookmark interval) */
    memcpy(&io, tmpl, tf_informer__options_size(tmpl->version > TF_INFORMER_OPTIONS_VERSION ? TF_INFORMER_OPTIONS_VERSION
                                                                                             : tmpl->version));
    io.version = TF_INFORMER_OPTIONS_VERSION;
  }
  io.path = io.label_selector = io.field_selector = NULL;
  io.on_change = on_change;
  io.payload = t;
  t->tmpl = io;
  pthread_mutex_init(&t->mu, NULL);
  return t;
}

void tf_adapter__refs_free(tf_adapter__refs *t)
{
  if (!t) return;
  for (size_t i = 0; i < t->count; i++) tf_informer_stop(t->refs[i]->inf);
  for (size_t i = 0; i < t->count; i++) ref_free(t->refs[i]);
  free(t->refs);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* A started informer on Secret @p name of @p ns. NULL on failure (logged by the caller's informer log). */
static tf_informer *watch_one(tf_adapter__refs *t, const char *ns, const char *name)
{
  char *path = NULL, *fields = NULL;
  tf_informer *inf = NULL;
  tf_informer_options io = t->tmpl;
  if (tf_kube_path(&path, "/api/v1", "secrets", ns, NULL, NULL) == 0 &&
      asprintf(&fields, "metadata.name=%s", name) >= 0) {
    io.path = path;
    io.field_selector = fields;
    if (tf_informer_new(&inf, t->kube, &io) == 0 && tf_informer_start(inf) < 0) {
      tf_informer_free(inf);
      inf = NULL;
    }
  } else {
    fields = NULL;
  }
  tf_free(path);
  free(fields);
  return inf;
}

int tf_adapter__refs_set(tf_adapter__refs *t, const char *pool, const char *ns, const char *const *names, size_t n)
{
  int rc = 0;
  /* the new names first (made outside the lock: an informer's start is a thread) */
  for (size_t i = 0; i < n; i++) {
    if (!names[i] || !*names[i]) continue;
    char *key = NULL;
    if (asprintf(&key, "%s/%s", ns, names[i]) < 0) return -1;
    pthread_mutex_lock(&t->mu);
    ref *r = find(t, key);
    int have = r && references(r, pool);
    pthread_mutex_unlock(&t->mu);
    if (have) {
      free(key);
      continue;
    }
    ref *made = NULL;
    if (!r) {
      made = calloc(1, sizeof(*made));
      if (!made || !(made->inf = watch_one(t, ns, names[i]))) {
        free(made);
        free(key);
        rc = -1;
        continue;
      }
      made->key = key;
      key = NULL;
    }
    pthread_mutex_lock(&t->mu);
    if (made) {
      ref **grown = realloc(t->refs, (t->count + 1) * sizeof(*grown));
      if (grown) {
        t->refs = grown;
        t->refs[t->count++] = r = made;
        made = NULL;
      }
    }
    char *who = r && !made ? strdup(pool) : NULL;
    char **pools = who ? realloc(r->pools, (r->pool_count + 1) * sizeof(*pools)) : NULL;
    if (pools) {
      r->pools = pools;
      r->pools[r->pool_count++] = who;
      who = NULL;
    } else {
      rc = -1;
    }
    pthread_mutex_unlock(&t->mu);
    free(who);
    free(key);
    ref_free(made);
  }
  /* then the names it no longer references; a name nobody references goes, with its informer */
  ref **gone = NULL;
  size_t gone_count = 0;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < t->count;) {
    ref *r = t->refs[i];
    int wanted = 0;
    for (size_t j = 0; !wanted && j < n; j++) wanted = names[j] && is_key(r->key, ns, names[j]);
    for (size_t j = 0; !wanted && j < r->pool_count;) {
      if (strcmp(r->pools[j], pool) == 0) {
        free(r->pools[j]);
        r->pools[j] = r->pools[--r->pool_count];
        continue;
      }
      j++;
    }
    if (r->pool_count == 0) {
      ref **more = realloc(gone, (gone_count + 1) * sizeof(*more));
      if (more) {
        gone = more;
        gone[gone_count++] = r;
        t->refs[i] = t->refs[--t->count];
        continue;
      }
    }
    i++;
  }
  pthread_mutex_unlock(&t->mu);
  for (size_t i = 0; i < gone_count; i++) ref_free(gone[i]);
  free(gone);
  return rc;
}

tf_err tf_adapter__refs_get(tf_adapter__refs *t, const char *key, char **out)
{
  *out = NULL;
  pthread_mutex_lock(&t->mu);
  ref *r = find(t, key);
  tf_err rc = !r ? tf_error__set(TF_EUNAVAILABLE, "Secret %s: not referenced (no cache)", key)
              : !tf_informer_has_synced(r->inf) ? tf_error__set(TF_EUNAVAILABLE, "Secret %s: its cache has not "
                                                                "synced yet", key)
                                                : tf_informer_get(r->inf, key, out);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

size_t tf_adapter__refs_count(tf_adapter__refs *t)
{
  pthread_mutex_lock(&t->mu);
  size_t n = t->count;
  pthread_mutex_unlock(&t->mu);
  return n;
}

void tf_adapter__refs_changed(tf_adapter__refs *t, const char *key)
{
  if (!key) return;
  pthread_mutex_lock(&t->mu);
  const ref *r = find(t, key);
  for (size_t i = 0; r && i < r->pool_count; i++) (void)tf_workqueue_add(t->queue, r->pools[i]);
  pthread_mutex_unlock(&t->mu);
}
