/* informer: client-go's reflector on one worker thread. LIST (RV "0" first,
 * unset after a 410), then WATCH from the list's RV with bookmarks and a
 * random timeoutSeconds; every event advances the RV; a clean end re-watches
 * from it; 410 (ERROR event, HTTP 410 on the watch or on the LIST) relists and
 * the relist's diff emits the deletes the watch missed; other failures back off
 * (0.8 s doubling to 30 s, at least what the server asked, reset after 2 min
 * healthy) and re-watch from the same RV. The cache is a map by key of shared
 * read-only objects (informer_object.c) with a namespace index, a label index
 * and the caller's indexes, read under the informer's lock from any thread;
 * an object is built, transformed and indexed before the lock is taken, and
 * callbacks run on the worker with no lock held. A watch that brings
 * neither an event nor a bookmark for two bookmark intervals is dropped and
 * the cache relisted at once (a silent stream may have lost events, and its
 * bytes, if any, prove nothing). */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "kube_internal.h"
#include "smap.h"

/* the handle's log sink (never sees secrets) */
#define TF_INF__LOG(h, level, ...) tf_log__emit((h)->o.log, (h)->o.log_payload, (h)->o.log_level, level, __VA_ARGS__)

typedef struct tf_inf__iv {
  size_t index; /* into tf_informer.idx */
  char *value;
} tf_inf__iv;

typedef struct tf_inf__obj {
  tf_informer_object *obj; /* the cache's reference */
  char *ns;      /* or NULL */
  char **labels; /* "k=v" */
  size_t nlabels;
  tf_inf__iv *ivs; /* its values in the caller's indexes */
  size_t nivs;
} tf_inf__obj;

typedef struct tf_inf__indexer {
  char *name;
  tf_informer_index_cb fn;
  void *payload;
  tf_smap *map; /* value -> set of keys */
} tf_inf__indexer;

struct tf_informer_values {
  char **v;
  size_t n, cap;
};

struct tf_informer_edit {
  cJSON *tree;
};

struct tf_informer {
  tf_kube *k;
  tf_informer_options o;
  char *path, *label_selector, *field_selector;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  tf_smap *cache;    /* key -> tf_inf__obj */
  tf_smap *by_ns;    /* ns -> set of keys (tf_smap, values unused) */
  tf_smap *by_label; /* "k=v" -> set of keys */
  tf_inf__indexer *idx; /* the caller's, fixed once started */
  size_t nidx;
  size_t bytes;      /* the cached objects' sizes */
  char *last_rv;     /* "" before the first list */
  int synced;
  /* worker */
  pthread_t th;
  int started;
  volatile int stop;
  long backoff_ms;
  int64_t last_fail;
  int64_t next_resync;
  unsigned seed;
  long events; /* events of the current watch */
  long lists;  /* LISTs that filled the cache (under mu) */
  int64_t last_event; /* the current watch's start, then its last event or bookmark */
};

static void tf_inf__obj_free(void *p)
{
  tf_inf__obj *o = p;
  if (!o) return;
  tf_informer_object_release(o->obj);
  free(o->ns);
  for (size_t i = 0; i < o->nlabels; i++) free(o->labels[i]);
  free(o->labels);
  for (size_t i = 0; i < o->nivs; i++) free(o->ivs[i].value);
  free(o->ivs);
  free(o);
}

static void tf_inf__set_free(void *p) { tf_smap__free(p); }


size_t tf_informer__options_size(unsigned int version)
{
  return version <= 1   ? offsetof(tf_informer_options, bookmark_interval_ms)
         : version == 2 ? offsetof(tf_informer_options, transform)
                        : sizeof(tf_informer_options);
}

tf_err tf_informer_options_init(tf_informer_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_INFORMER_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_informer_options: unknown version %u", version);
  tf_informer_options d = TF_INFORMER_OPTIONS_INIT;
  memcpy(opts, &d, tf_informer__options_size(version)); /* the caller's */
  opts->version = version;
  return TF_OK;
}

tf_err tf_informer_new(tf_informer **out, tf_kube *kube, const tf_informer_options *opts)
{
  TF_ASSERT_ARG(out && kube && opts);
  *out = NULL;
  if (opts->version == 0 || opts->version > TF_INFORMER_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_informer_options: unknown version %u", opts->version);
  tf_informer_options o = TF_INFORMER_OPTIONS_INIT;
  /* version 1: every field */
  o.path = opts->path;
  o.label_selector = opts->label_selector;
  o.field_selector = opts->field_selector;
  o.resync_ms = opts->resync_ms;
  o.watch_min_seconds = opts->watch_min_seconds;
  o.watch_max_seconds = opts->watch_max_seconds;
  o.stall_seconds = opts->stall_seconds;
  o.backoff_initial_ms = opts->backoff_initial_ms;
  o.backoff_max_ms = opts->backoff_max_ms;
  o.backoff_reset_ms = opts->backoff_reset_ms;
  o.on_change = opts->on_change;
  o.payload = opts->payload;
  o.log = opts->log;
  o.log_payload = opts->log_payload;
  o.log_level = opts->log_level;
  if (opts->version >= 2) o.bookmark_interval_ms = opts->bookmark_interval_ms;
  if (opts->version >= 3) {
    o.transform = opts->transform;
    o.transform_payload = opts->transform_payload;
  }
  if (o.bookmark_interval_ms < 0) return tf_error__set(TF_EINVALID, "bookmark_interval_ms: must be >= 0");
  if (!o.path || o.path[0] != '/' || strchr(o.path, '?'))
    return tf_error__set(TF_EINVALID, "path: a collection path is required");
  if (o.watch_min_seconds < 1 || o.watch_max_seconds < o.watch_min_seconds)
    return tf_error__set(TF_EINVALID, "watch_min_seconds/watch_max_seconds: need 1 <= min <= max");
  if (o.backoff_initial_ms < 1 || o.backoff_max_ms < o.backoff_initial_ms || o.backoff_reset_ms < 0 ||
      o.resync_ms < 0 || o.stall_seconds < 0)
    return tf_error__set(TF_EINVALID, "backoff/resync/stall: out of range");
  tf_informer *inf = calloc(1, sizeof(*inf));
  if (!inf) return tf_error__nomem();
  inf->k = kube;
  inf->o = o;
  pthread_mutex_init(&inf->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&inf->cv, &ca);
  pthread_condattr_destroy(&ca);
  inf->path = tf_strdup__(o.path);
  inf->label_selector = o.label_selector ? tf_strdup__(o.label_selector) : NULL;
  inf->field_selector = o.field_selector ? tf_strdup__(o.field_selector) : NULL;
  inf->cache = tf_smap__new(tf_inf__obj_free);
  inf->by_ns = tf_smap__new(tf_inf__set_free);
  inf->by_label = tf_smap__new(tf_inf__set_free);
  inf->last_rv = tf_strdup__("");
  inf->backoff_ms = o.backoff_initial_ms;
  inf->seed = (unsigned)tf_kube__now_ms() ^ (unsigned)(uintptr_t)inf;
  if (!inf->path || (o.label_selector && !inf->label_selector) || (o.field_selector && !inf->field_selector) ||
      !inf->cache || !inf->by_ns || !inf->by_label || !inf->last_rv) {
    tf_informer_free(inf);
    return tf_error__nomem();
  }
  inf->o.path = inf->path;
  inf->o.label_selector = inf->label_selector;
  inf->o.field_selector = inf->field_selector;
  *out = inf;
  return TF_OK;
}

/* ---- entries (built with no lock held) ---- */

static char *tf_inf__key(const cJSON *obj)
{
  const char *name = tf_kube__meta_str(obj, "name"), *ns = tf_kube__meta_str(obj, "namespace");
  if (!name || !*name) return NULL;
  return ns && *ns ? tf_asprintf__("%s/%s", ns, name) : tf_strdup__(name);
}

static cJSON *tf_inf__walk(cJSON *tree, const char *const *path, size_t n)
{
  for (size_t i = 0; tree && i < n; i++) tree = cJSON_GetObjectItemCaseSensitive(tree, path[i]);
  return tree;
}

const char *tf_informer_edit_string(const tf_informer_edit *edit, const char *const *path)
{
  size_t n = 0;
  while (path && path[n]) n++;
  return edit ? cJSON_GetStringValue(tf_inf__walk(edit->tree, path, n)) : NULL;
}

int tf_informer_edit_remove(tf_informer_edit *edit, const char *const *path)
{
  size_t n = 0;
  while (path && path[n]) n++;
  cJSON *parent = edit && n ? tf_inf__walk(edit->tree, path, n - 1) : NULL;
  cJSON *gone = cJSON_IsObject(parent) ? cJSON_DetachItemFromObjectCaseSensitive(parent, path[n - 1]) : NULL;
  cJSON_Delete(gone);
  return gone != NULL;
}

tf_err tf_informer_values_add(tf_informer_values *out, const char *value)
{
  TF_ASSERT_ARG(out && value);
  for (size_t i = 0; i < out->n; i++)
    if (strcmp(out->v[i], value) == 0) return TF_OK;
  if (out->n == out->cap) {
    size_t cap = out->cap ? out->cap * 2 : 4;
    char **v = realloc(out->v, cap * sizeof(*v));
    if (!v) return tf_error__nomem();
    out->v = v;
    out->cap = cap;
  }
  if (!(out->v[out->n] = tf_strdup__(value))) return tf_error__nomem();
  out->n++;
  return TF_OK;
}

/* @p tree (changed: the transform, managedFields) as a cache entry, indexed; NULL on no memory. */
static tf_inf__obj *tf_inf__entry(tf_informer *inf, cJSON *tree, const char *key)
{
  tf_inf__obj *o = calloc(1, sizeof(*o));
  if (!o) return NULL;
  if (inf->o.transform) {
    tf_informer_edit edit = {tree};
    inf->o.transform(&edit, key, inf->o.transform_payload);
  }
  const char *ns = tf_kube__meta_str(tree, "namespace");
  o->ns = ns && *ns ? tf_strdup__(ns) : NULL;
  const cJSON *labels = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tree, "metadata"), "labels");
  int n = cJSON_IsObject(labels) ? cJSON_GetArraySize(labels) : 0;
  if (n > 0 && (o->labels = calloc((size_t)n, sizeof(char *)))) {
    const cJSON *l;
    cJSON_ArrayForEach(l, labels)
    {
      if (cJSON_IsString(l) && l->string) {
        char *kv = tf_asprintf__("%s=%s", l->string, l->valuestring);
        if (kv) o->labels[o->nlabels++] = kv;
      }
    }
  }
  if ((ns && *ns && !o->ns) || !(o->obj = tf_inf__object_build(tree, key))) {
    tf_inf__obj_free(o);
    return NULL;
  }
  for (size_t i = 0; i < inf->nidx; i++) {
    tf_informer_values vals = {0};
    inf->idx[i].fn(o->obj, &vals, inf->idx[i].payload);
    tf_inf__iv *ivs = vals.n ? realloc(o->ivs, (o->nivs + vals.n) * sizeof(*ivs)) : o->ivs;
    for (size_t j = 0; j < vals.n; j++) {
      if (ivs) ivs[o->nivs++] = (tf_inf__iv){i, vals.v[j]};
      else free(vals.v[j]);
    }
    free(vals.v);
    if (!ivs && vals.n) {
      tf_inf__obj_free(o);
      return NULL;
    }
    o->ivs = ivs;
  }
  return o;
}

/* ---- cache (mu held) ---- */

static void tf_inf__index(tf_smap *idx, const char *val, const char *key, int add)
{
  tf_smap *set = tf_smap__get(idx, val);
  if (add) {
    if (!set) {
      if (!(set = tf_smap__new(NULL)) || tf_smap__put(idx, val, set) < 0) {
        tf_smap__free(set);
        return;
      }
    }
    tf_smap__put(set, key, (void *)1);
  } else if (set) {
    tf_smap__del(set, key);
    if (tf_smap__count(set) == 0) tf_smap__del(idx, val);
  }
}

static void tf_inf__link(tf_informer *inf, const char *key, const tf_inf__obj *o, int add)
{
  if (o->ns) tf_inf__index(inf->by_ns, o->ns, key, add);
  for (size_t i = 0; i < o->nlabels; i++) tf_inf__index(inf->by_label, o->labels[i], key, add);
  for (size_t i = 0; i < o->nivs; i++) tf_inf__index(inf->idx[o->ivs[i].index].map, o->ivs[i].value, key, add);
  size_t size = tf_informer_object_size(o->obj);
  inf->bytes = add ? inf->bytes + size : inf->bytes - size;
}

/* Take entry @p o into the cache under @p key (owned from here on). */
static void tf_inf__store(tf_informer *inf, const char *key, tf_inf__obj *o)
{
  tf_inf__obj *old = tf_smap__get(inf->cache, key);
  if (old) tf_inf__link(inf, key, old, 0);
  if (tf_smap__put(inf->cache, key, o) < 0) {
    if (old) tf_smap__del(inf->cache, key); /* what it had is stale now */
    tf_inf__obj_free(o);
    return;
  }
  tf_inf__link(inf, key, o, 1);
}

/* Drop @p key; the cache's reference to its last state goes to @p last (or is released). */
static void tf_inf__remove(tf_informer *inf, const char *key, tf_informer_object **last)
{
  tf_inf__obj *old = tf_smap__get(inf->cache, key);
  if (!old) return;
  tf_inf__link(inf, key, old, 0);
  if (last) {
    *last = old->obj;
    old->obj = NULL;
  }
  tf_smap__del(inf->cache, key);
}

/* Whether cached @p o has resourceVersion @p rv. */
static int tf_inf__same_rv(const tf_informer_object *o, const char *rv)
{
  const char *v;
  size_t n;
  if (!rv || tf_informer_object_find(o, (const char *const[]){"metadata", "resourceVersion", NULL}, &v, &n) < 0)
    return 0;
  return n >= 2 && n - 2 == strlen(rv) && memcmp(v + 1, rv, n - 2) == 0;
}

static void tf_inf__set_rv(tf_informer *inf, const char *rv)
{
  if (!rv || !*rv) return;
  char *c = tf_strdup__(rv);
  if (!c) return;
  pthread_mutex_lock(&inf->mu);
  free(inf->last_rv);
  inf->last_rv = c;
  pthread_mutex_unlock(&inf->mu);
}

static void tf_inf__notify(tf_informer *inf, tf_informer_op op, const char *key, const tf_informer_object *obj)
{
  if (inf->o.on_change && obj) inf->o.on_change(op, key, tf_informer_object_json(obj, NULL), inf->o.payload);
}

/* A watch event (on the worker). */
static int tf_inf__on_event(int type, cJSON *object, void *arg)
{
  tf_informer *inf = arg;
  inf->events++;
  inf->last_event = tf_kube__now_ms();
  if (type == TF_KUBE_EVENT_ERROR) return 0;
  const char *rv = tf_kube__meta_str(object, "resourceVersion");
  if (type == TF_KUBE_EVENT_BOOKMARK) {
    tf_inf__set_rv(inf, rv);
    return 0;
  }
  char *key = tf_inf__key(object);
  if (!key) {
    TF_INF__LOG(inf, TF_LOG_DEBUG, "watch %.200s: an event object without a name", inf->path);
    return 0;
  }
  tf_informer_op op;
  tf_inf__obj *e = type == TF_KUBE_EVENT_DELETED ? NULL : tf_inf__entry(inf, object, key);
  tf_informer_object *note = NULL; /* what the callback sees: the new state, or the last one */
  pthread_mutex_lock(&inf->mu);
  int had = tf_smap__has(inf->cache, key);
  if (type == TF_KUBE_EVENT_DELETED) {
    tf_inf__remove(inf, key, &note);
    op = TF_INFORMER_DELETED;
  } else {
    if (e) {
      note = tf_informer_object_ref(e->obj);
      tf_inf__store(inf, key, e);
    } else {
      tf_inf__remove(inf, key, NULL); /* no memory: better absent than stale */
    }
    op = had ? TF_INFORMER_UPDATED : TF_INFORMER_ADDED;
  }
  if (rv && *rv) {
    char *c = tf_strdup__(rv);
    if (c) {
      free(inf->last_rv);
      inf->last_rv = c;
    }
  }
  pthread_mutex_unlock(&inf->mu);
  if (op != TF_INFORMER_DELETED || had) tf_inf__notify(inf, op, key, note);
  tf_informer_object_release(note);
  free(key);
  return 0;
}

/* Replace the cache with a LIST; emit adds, updates (RV changed) and the deletes missed. */
static void tf_inf__replace(tf_informer *inf, cJSON *list)
{
  cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items");
  typedef struct {
    tf_informer_op op;
    char *key;
    cJSON *item;             /* in the list */
    int same;                /* the cache has its RV */
    tf_inf__obj *entry;       /* built with no lock held; NULL once stored or when unchanged */
    tf_informer_object *obj; /* referenced for the notification */
  } note;
  size_t nitems = (size_t)cJSON_GetArraySize(items), n = 0;
  tf_smap *seen = tf_smap__new(NULL);
  note *notes = calloc(nitems + 1, sizeof(*notes));
  if (!seen || !notes) {
    tf_smap__free(seen);
    free(notes);
    return;
  }
  cJSON *it;
  cJSON_ArrayForEach(it, items)
  {
    char *key = tf_inf__key(it);
    if (!key || tf_smap__has(seen, key) || tf_smap__put(seen, key, (void *)1) < 0) {
      free(key);
      continue;
    }
    notes[n].key = key;
    notes[n].item = it;
    n++;
  }
  /* which changed (RV), under the lock; then those built with none held (only this thread writes the cache) */
  pthread_mutex_lock(&inf->mu);
  for (size_t i = 0; i < n; i++) {
    const tf_inf__obj *old = tf_smap__get(inf->cache, notes[i].key);
    const char *rv = tf_kube__meta_str(notes[i].item, "resourceVersion");
    notes[i].op = old ? TF_INFORMER_UPDATED : TF_INFORMER_ADDED;
    notes[i].same = old && rv && tf_inf__same_rv(old->obj, rv); /* nothing to build */
  }
  pthread_mutex_unlock(&inf->mu);
  for (size_t i = 0; i < n; i++)
    if (!notes[i].same) notes[i].entry = tf_inf__entry(inf, notes[i].item, notes[i].key);
  /* the gone ones are found under the lock, so their notes are counted after it */
  note *gone = NULL;
  size_t ngone = 0;
  pthread_mutex_lock(&inf->mu);
  for (size_t i = 0; i < n; i++) {
    tf_inf__obj *cur = notes[i].entry;
    notes[i].entry = NULL;
    if (!cur) continue; /* unchanged, or no memory: keep what it had */
    notes[i].obj = tf_informer_object_ref(cur->obj);
    tf_inf__store(inf, notes[i].key, cur);
  }
  /* what vanished while we were not watching */
  size_t pos = 0;
  const char *k;
  void *v;
  gone = calloc(tf_smap__count(inf->cache) + 1, sizeof(*gone));
  char **keys = calloc(tf_smap__count(inf->cache) + 1, sizeof(char *));
  while (gone && keys && tf_smap__next(inf->cache, &pos, &k, &v))
    if (!tf_smap__has(seen, k)) keys[ngone++] = tf_strdup__(k);
  for (size_t i = 0; i < ngone; i++) {
    gone[i].op = TF_INFORMER_DELETED;
    gone[i].key = keys[i];
    if (keys[i]) tf_inf__remove(inf, keys[i], &gone[i].obj);
  }
  free(keys);
  const char *rv = tf_kube__meta_str(list, "resourceVersion");
  if (rv && *rv) {
    char *c = tf_strdup__(rv);
    if (c) {
      free(inf->last_rv);
      inf->last_rv = c;
    }
  }
  inf->synced = 1;
  inf->lists++;
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  tf_smap__free(seen);
  for (size_t i = 0; i < n + ngone; i++) {
    note *nt = i < n ? &notes[i] : &gone[i - n];
    if (nt->obj) tf_inf__notify(inf, nt->op, nt->key, nt->obj);
    tf_informer_object_release(nt->obj);
    free(nt->key);
  }
  free(notes);
  free(gone);
}

static void tf_inf__resync(tf_informer *inf)
{
  if (!inf->o.resync_ms || !inf->o.on_change) return;
  int64_t now = tf_kube__now_ms();
  if (now < inf->next_resync) return;
  inf->next_resync = now + inf->o.resync_ms;
  pthread_mutex_lock(&inf->mu);
  size_t n = tf_smap__count(inf->cache), i = 0, pos = 0;
  tf_informer_object **objs = calloc(n + 1, sizeof(*objs));
  const char *k;
  void *v;
  while (objs && tf_smap__next(inf->cache, &pos, &k, &v)) objs[i++] = tf_informer_object_ref(((tf_inf__obj *)v)->obj);
  pthread_mutex_unlock(&inf->mu);
  for (size_t j = 0; j < i; j++)
    inf->o.on_change(TF_INFORMER_UPDATED, tf_informer_object_key(objs[j]), tf_informer_object_json(objs[j], NULL),
                     inf->o.payload);
  tf_informer_objects_release(objs, i);
}

/* Polled during requests: stop, and the resync clock. */
static int tf_inf__tick(void *arg)
{
  tf_informer *inf = arg;
  if (inf->stop) return 1;
  tf_inf__resync(inf);
  return inf->stop;
}

/* Wait after a failure: the doubling backoff, at least the server's Retry-After. */
static void tf_inf__backoff(tf_informer *inf, const tf_kube_status *st)
{
  int64_t now = tf_kube__now_ms();
  if (inf->last_fail && now - inf->last_fail > inf->o.backoff_reset_ms) inf->backoff_ms = inf->o.backoff_initial_ms;
  long wait = inf->backoff_ms;
  long asked = tf_kube_status_retry_after(st) * 1000;
  if (asked > wait) wait = asked;
  inf->backoff_ms = inf->backoff_ms * 2 > inf->o.backoff_max_ms ? inf->o.backoff_max_ms : inf->backoff_ms * 2;
  TF_INF__LOG(inf, TF_LOG_INFO, "%.200s: waiting %ld ms before the next attempt", inf->path, wait);
  pthread_mutex_lock(&inf->mu);
  int64_t until = now + wait;
  while (!inf->stop) {
    int64_t left = until - tf_kube__now_ms();
    if (left <= 0) break;
    /* wake at least once a second for the resync clock */
    tf_kube__wait(&inf->mu, &inf->cv, left > 1000 ? 1000 : left, &inf->stop);
    pthread_mutex_unlock(&inf->mu);
    tf_inf__resync(inf);
    pthread_mutex_lock(&inf->mu);
  }
  pthread_mutex_unlock(&inf->mu);
  inf->last_fail = tf_kube__now_ms();
}

static void *tf_inf__run(void *arg)
{
  tf_informer *inf = arg;
  const char *list_rv = "0"; /* then the last synced RV; unset after a 410 */
  char *synced_rv = NULL;
  int need_list = 1;
  inf->next_resync = tf_kube__now_ms() + inf->o.resync_ms;
  while (!inf->stop) {
    tf_kube_status *st = NULL;
    tf_kube_list_options lo = TF_KUBE_LIST_OPTIONS_INIT;
    lo.label_selector = inf->label_selector;
    lo.field_selector = inf->field_selector;
    if (need_list) {
      lo.resource_version = list_rv;
      cJSON *doc = NULL;
      tf_err rc = tf_kube__list(inf->k, inf->path, &lo, tf_inf__tick, inf, &doc, &st);
      if (rc == TF_EUSER || inf->stop) {
        tf_kube_status_free(st);
        break;
      }
      if (rc < 0) {
        TF_INF__LOG(inf, TF_LOG_WARN, "list %.200s: %s", inf->path, tf_error_last()->message);
        if (rc == TF_EEXPIRED) list_rv = NULL; /* the next LIST is a consistent read */
        tf_inf__backoff(inf, st);
        tf_kube_status_free(st);
        continue;
      }
      tf_inf__replace(inf, doc);
      cJSON_Delete(doc);
#ifdef __GLIBC__
      (void)malloc_trim(0); /* the list's tree (several times its text) back to the system, not kept as free heap */
#endif
      need_list = 0;
      pthread_mutex_lock(&inf->mu);
      free(synced_rv);
      synced_rv = tf_strdup__(inf->last_rv);
      pthread_mutex_unlock(&inf->mu);
      list_rv = synced_rv;
    }
    long span = inf->o.watch_max_seconds - inf->o.watch_min_seconds + 1;
    lo.timeout_seconds = inf->o.watch_min_seconds + (long)(rand_r(&inf->seed) % (unsigned)span);
    lo.allow_bookmarks = 1;
    lo.stall_seconds = inf->o.stall_seconds ? inf->o.stall_seconds : lo.timeout_seconds + 60;
    lo.silence_ms = inf->o.bookmark_interval_ms * 2;
    pthread_mutex_lock(&inf->mu);
    char *rv = tf_strdup__(inf->last_rv);
    pthread_mutex_unlock(&inf->mu);
    lo.resource_version = rv;
    inf->events = 0;
    int64_t started = inf->last_event = tf_kube__now_ms();
    tf_err rc = tf_kube__watch(inf->k, inf->path, &lo, tf_inf__on_event, tf_inf__tick, inf, &st);
    free(rv);
    if (inf->stop) {
      tf_kube_status_free(st);
      break;
    }
    if (rc == TF_OK) {
      /* a clean end re-watches from the last RV at once, unless it was a "very short watch" */
      if (inf->events == 0 && tf_kube__now_ms() - started < 1000) {
        TF_INF__LOG(inf, TF_LOG_WARN, "watch %.200s: very short watch (no event in under 1 s)", inf->path);
        tf_inf__backoff(inf, NULL);
      }
    } else if (rc == TF_EEXPIRED) {
      TF_INF__LOG(inf, TF_LOG_INFO, "watch %.200s: %s; relisting", inf->path, tf_error_last()->message);
      need_list = 1;
      list_rv = NULL;
      tf_inf__backoff(inf, st);
    } else if (rc == TF_ETIMEOUT && lo.silence_ms > 0 && tf_kube__now_ms() - inf->last_event >= lo.silence_ms) {
      /* what the silent stream did not bring may be lost: a consistent LIST, now */
      TF_INF__LOG(inf, TF_LOG_WARN, "watch %.200s: %s; dropped, relisting", inf->path, tf_error_last()->message);
      need_list = 1;
      list_rv = NULL;
    } else {
      TF_INF__LOG(inf, TF_LOG_WARN, "watch %.200s: %s", inf->path, tf_error_last()->message);
      tf_inf__backoff(inf, st);
    }
    tf_kube_status_free(st);
  }
  free(synced_rv);
  return NULL;
}

tf_err tf_informer_start(tf_informer *inf)
{
  TF_ASSERT_ARG(inf);
  if (inf->started) return tf_error__set(TF_EINVALID, "informer: already started");
  inf->stop = 0;
  if (pthread_create(&inf->th, NULL, tf_inf__run, inf) != 0)
    return tf_error__set(TF_ERROR, "informer: cannot start a thread");
  inf->started = 1;
  return TF_OK;
}

void tf_informer_stop(tf_informer *inf)
{
  if (!inf || !inf->started) return;
  pthread_mutex_lock(&inf->mu);
  inf->stop = 1;
  pthread_cond_broadcast(&inf->cv);
  pthread_mutex_unlock(&inf->mu);
  pthread_join(inf->th, NULL);
  inf->started = 0;
}

void tf_informer_free(tf_informer *inf)
{
  if (!inf) return;
  tf_informer_stop(inf);
  tf_smap__free(inf->cache);
  tf_smap__free(inf->by_ns);
  tf_smap__free(inf->by_label);
  for (size_t i = 0; i < inf->nidx; i++) {
    free(inf->idx[i].name);
    tf_smap__free(inf->idx[i].map);
  }
  free(inf->idx);
  free(inf->path);
  free(inf->label_selector);
  free(inf->field_selector);
  free(inf->last_rv);
  pthread_cond_destroy(&inf->cv);
  pthread_mutex_destroy(&inf->mu);
  free(inf);
}

int tf_informer_has_synced(const tf_informer *inf)
{
  if (!inf) return 0;
  tf_informer *m = (tf_informer *)inf;
  pthread_mutex_lock(&m->mu);
  int s = m->synced;
  pthread_mutex_unlock(&m->mu);
  return s;
}

size_t tf_informer_count(const tf_informer *inf)
{
  if (!inf) return 0;
  tf_informer *m = (tf_informer *)inf;
  pthread_mutex_lock(&m->mu);
  size_t n = tf_smap__count(m->cache);
  pthread_mutex_unlock(&m->mu);
  return n;
}

tf_err tf_informer_get_object(const tf_informer *inf, const char *key, tf_informer_object **out)
{
  TF_ASSERT_ARG(inf && key && out);
  tf_informer *m = (tf_informer *)inf;
  pthread_mutex_lock(&m->mu);
  tf_inf__obj *o = tf_smap__get(m->cache, key);
  *out = o ? tf_informer_object_ref(o->obj) : NULL;
  pthread_mutex_unlock(&m->mu);
  return *out ? TF_OK : tf_error__set(TF_ENOTFOUND, "informer: no object %.200s", key);
}

tf_err tf_informer_get(const tf_informer *inf, const char *key, char **out)
{
  TF_ASSERT_ARG(inf && key && out);
  *out = NULL;
  tf_informer_object *o = NULL;
  tf_err rc = tf_informer_get_object(inf, key, &o);
  if (rc < 0) return rc;
  *out = tf_strdup__(tf_informer_object_json(o, NULL));
  tf_informer_object_release(o);
  return *out ? TF_OK : tf_error__nomem();
}

static int tf_inf__cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The objects of @p cand (a set of keys, or the cache) in namespace @p ns (NULL: any), referenced, by key. */
static tf_err tf_inf__collect(tf_informer *m, const tf_smap *cand, const char *ns, tf_informer_object ***out,
                              size_t *count)
{
  size_t n = tf_smap__count(cand), i = 0, pos = 0, got = 0;
  const char **keys = n ? calloc(n, sizeof(char *)) : NULL;
  tf_informer_object **objs = n ? calloc(n, sizeof(*objs)) : NULL;
  const char *k;
  void *v;
  if (n && (!keys || !objs)) {
    free(keys);
    free(objs);
    return tf_error__nomem();
  }
  while (tf_smap__next(cand, &pos, &k, &v)) keys[i++] = k;
  if (i) qsort(keys, i, sizeof(char *), tf_inf__cmp);
  for (size_t j = 0; j < i; j++) {
    tf_inf__obj *o = tf_smap__get(m->cache, keys[j]);
    if (!o || (ns && (!o->ns || strcmp(o->ns, ns) != 0))) continue;
    objs[got++] = tf_informer_object_ref(o->obj);
  }
  free(keys);
  if (!got) {
    free(objs);
    objs = NULL;
  }
  *out = objs;
  *count = got;
  return TF_OK;
}

tf_err tf_informer_list_objects(const tf_informer *inf, const char *ns, const char *label, tf_informer_object ***out,
                                size_t *n)
{
  TF_ASSERT_ARG(inf && out && n);
  *out = NULL;
  *n = 0;
  if (label && !strchr(label, '=')) return tf_error__set(TF_EINVALID, "label: must be key=value");
  tf_informer *m = (tf_informer *)inf;
  pthread_mutex_lock(&m->mu);
  /* the smaller index picks the candidates; the other filter checks them */
  const tf_smap *cand = label ? tf_smap__get(m->by_label, label) : ns ? tf_smap__get(m->by_ns, ns) : m->cache;
  tf_err rc = cand ? tf_inf__collect(m, cand, ns, out, n) : TF_OK;
  pthread_mutex_unlock(&m->mu);
  return rc;
}

tf_err tf_informer_list(const tf_informer *inf, const char *ns, const char *label, char **out)
{
  TF_ASSERT_ARG(inf && out);
  *out = NULL;
  tf_informer_object **objs = NULL;
  size_t n = 0, len = 2;
  tf_err rc = tf_informer_list_objects(inf, ns, label, &objs, &n);
  if (rc < 0) return rc;
  for (size_t i = 0; i < n; i++) len += strlen(tf_informer_object_json(objs[i], NULL)) + 1;
  char *txt = malloc(len + 1), *w = txt;
  if (txt) {
    *w++ = '[';
    for (size_t i = 0; i < n; i++) {
      size_t l;
      const char *j = tf_informer_object_json(objs[i], &l);
      if (i) *w++ = ',';
      memcpy(w, j, l);
      w += l;
    }
    *w++ = ']';
    *w = '\0';
  }
  tf_informer_objects_release(objs, n);
  *out = txt;
  return txt ? TF_OK : tf_error__nomem();
}

tf_err tf_informer_add_indexer(tf_informer *inf, const char *name, tf_informer_index_cb fn, void *payload)
{
  TF_ASSERT_ARG(inf && name && fn);
  if (!*name) return tf_error__set(TF_EINVALID, "indexer name: must not be empty");
  if (inf->started || inf->lists || tf_smap__count(inf->cache))
    return tf_error__set(TF_EINVALID, "indexer %.100s: the informer has started", name);
  for (size_t i = 0; i < inf->nidx; i++)
    if (strcmp(inf->idx[i].name, name) == 0) return tf_error__set(TF_EINVALID, "indexer %.100s: already registered", name);
  tf_inf__indexer *idx = realloc(inf->idx, (inf->nidx + 1) * sizeof(*idx));
  if (!idx) return tf_error__nomem();
  inf->idx = idx;
  tf_inf__indexer *x = &idx[inf->nidx];
  x->name = tf_strdup__(name);
  x->fn = fn;
  x->payload = payload;
  x->map = tf_smap__new(tf_inf__set_free);
  if (!x->name || !x->map) {
    free(x->name);
    tf_smap__free(x->map);
    return tf_error__nomem();
  }
  inf->nidx++;
  return TF_OK;
}

tf_err tf_informer_by_index(const tf_informer *inf, const char *index, const char *value, tf_informer_object ***out,
                            size_t *n)
{
  TF_ASSERT_ARG(inf && index && value && out && n);
  *out = NULL;
  *n = 0;
  tf_informer *m = (tf_informer *)inf;
  for (size_t i = 0; i < m->nidx; i++) {
    if (strcmp(m->idx[i].name, index) != 0) continue;
    pthread_mutex_lock(&m->mu);
    const tf_smap *cand = tf_smap__get(m->idx[i].map, value);
    tf_err rc = cand ? tf_inf__collect(m, cand, NULL, out, n) : TF_OK;
    pthread_mutex_unlock(&m->mu);
    return rc;
  }
  return tf_error__set(TF_ENOTFOUND, "informer: no index %.100s", index);
}

size_t tf_informer_bytes(const tf_informer *inf)
{
  if (!inf) return 0;
  tf_informer *m = (tf_informer *)inf;
  pthread_mutex_lock(&m->mu);
  size_t n = m->bytes;
  pthread_mutex_unlock(&m->mu);
  return n;
}

/* Tests and benchmarks: feed a watch event as the worker would (type TF_KUBE_EVENT_*; @p object is changed). */
void tf_informer__feed(tf_informer *inf, int type, cJSON *object) { (void)tf_inf__on_event(type, object, inf); }

void tf_informer__feed_list(tf_informer *inf, cJSON *list) { tf_inf__replace(inf, list); }

long tf_informer_lists(const tf_informer *inf)
{
  if (!inf) return 0;
  tf_informer *m = (tf_informer *)inf;
  pthread_mutex_lock(&m->mu);
  long n = m->lists;
  pthread_mutex_unlock(&m->mu);
  return n;
}

tf_err tf_informer_resource_version(const tf_informer *inf, char **out)
{
  TF_ASSERT_ARG(inf && out);
  tf_informer *m = (tf_informer *)inf;
  pthread_mutex_lock(&m->mu);
  *out = tf_strdup__(m->last_rv);
  pthread_mutex_unlock(&m->mu);
  return *out ? TF_OK : tf_error__nomem();
}
