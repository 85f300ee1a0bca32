/* informer: client-go's reflector on one worker thread. LIST (RV "0" first,
 * unset after a 410), then WATCH from the list's RV with bookmarks and a
 * random timeoutSeconds; every event advances the RV; a clean end re-watches
 * from it; 410 (ERROR event, HTTP 410 on the watch or on the LIST) relists and
 * the relist's diff emits the deletes the watch missed; other failures back off
 * (0.8 s doubling to 30 s, at least what the server asked, reset after 2 min
 * healthy) and re-watch from the same RV. The cache is a map by key with a
 * namespace index and a label index, read under the informer's lock from any
 * thread; callbacks run on the worker with no lock held. A watch that brings
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

#include "kube_internal.h"
#include "smap.h"

/* the handle's log sink (never sees secrets) */
#define TF_INF__LOG(h, level, ...) tf_log__emit((h)->o.log, (h)->o.log_payload, (h)->o.log_level, level, __VA_ARGS__)

typedef struct tf_inf__obj {
  cJSON *obj;
  char *ns;      /* or NULL */
  char **labels; /* "k=v" */
  size_t nlabels;
} tf_inf__obj;

struct tf_informer {
  tf_kube *k;
  tf_informer_options o;
  char *path, *label_selector, *field_selector;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  tf_smap *cache;    /* key -> tf_inf__obj */
  tf_smap *by_ns;    /* ns -> set of keys (tf_smap, values unused) */
  tf_smap *by_label; /* "k=v" -> set of keys */
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
  cJSON_Delete(o->obj);
  free(o->ns);
  for (size_t i = 0; i < o->nlabels; i++) free(o->labels[i]);
  free(o->labels);
  free(o);
}

static void tf_inf__set_free(void *p) { tf_smap__free(p); }


tf_err tf_informer_options_init(tf_informer_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_INFORMER_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_informer_options: unknown version %u", version);
  tf_informer_options d = TF_INFORMER_OPTIONS_INIT;
  memcpy(opts, &d, version == 1 ? offsetof(tf_informer_options, bookmark_interval_ms) : sizeof(d)); /* the caller's */
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

/* ---- cache (mu held) ---- */

static char *tf_inf__key(const cJSON *obj)
{
  const char *name = tf_kube__meta_str(obj, "name"), *ns = tf_kube__meta_str(obj, "namespace");
  if (!name || !*name) return NULL;
  return ns && *ns ? tf_asprintf__("%s/%s", ns, name) : tf_strdup__(name);
}

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

static void tf_inf__unindex(tf_informer *inf, const char *key, const tf_inf__obj *o)
{
  if (o->ns) tf_inf__index(inf->by_ns, o->ns, key, 0);
  for (size_t i = 0; i < o->nlabels; i++) tf_inf__index(inf->by_label, o->labels[i], key, 0);
}

/* Take @p obj into the cache under @p key (obj is owned from here on). */
static void tf_inf__store(tf_informer *inf, const char *key, cJSON *obj)
{
  tf_inf__obj *old = tf_smap__get(inf->cache, key);
  if (old) tf_inf__unindex(inf, key, old);
  tf_inf__obj *o = calloc(1, sizeof(*o));
  if (!o) {
    cJSON_Delete(obj);
    return;
  }
  o->obj = obj;
  const char *ns = tf_kube__meta_str(obj, "namespace");
  o->ns = ns && *ns ? tf_strdup__(ns) : NULL;
  const cJSON *labels = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "labels");
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
  if (tf_smap__put(inf->cache, key, o) < 0) {
    tf_inf__obj_free(o);
    return;
  }
  if (o->ns) tf_inf__index(inf->by_ns, o->ns, key, 1);
  for (size_t i = 0; i < o->nlabels; i++) tf_inf__index(inf->by_label, o->labels[i], key, 1);
}

static void tf_inf__remove(tf_informer *inf, const char *key)
{
  tf_inf__obj *old = tf_smap__get(inf->cache, key);
  if (!old) return;
  tf_inf__unindex(inf, key, old);
  tf_smap__del(inf->cache, key);
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

static void tf_inf__notify(tf_informer *inf, tf_informer_op op, const char *key, const cJSON *obj)
{
  if (!inf->o.on_change) return;
  char *txt = cJSON_PrintUnformatted(obj);
  if (!txt) return;
  inf->o.on_change(op, key, txt, inf->o.payload);
  free(txt);
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
  cJSON *copy = NULL;
  pthread_mutex_lock(&inf->mu);
  int had = tf_smap__has(inf->cache, key);
  if (type == TF_KUBE_EVENT_DELETED) {
    tf_inf__remove(inf, key);
    op = TF_INFORMER_DELETED;
  } else {
    copy = cJSON_Duplicate(object, 1);
    if (copy) tf_inf__store(inf, key, copy);
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
  if (op != TF_INFORMER_DELETED || had) tf_inf__notify(inf, op, key, object);
  free(key);
  return 0;
}

/* Replace the cache with a LIST; emit adds, updates (RV changed) and the deletes missed. */
static void tf_inf__replace(tf_informer *inf, cJSON *list)
{
  cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items");
  tf_smap *seen = tf_smap__new(NULL);
  typedef struct {
    tf_informer_op op;
    char *key;
    cJSON *obj; /* a copy for the notification */
  } note;
  size_t cap = (size_t)cJSON_GetArraySize(items) + tf_smap__count(inf->cache) + 1, n = 0;
  note *notes = calloc(cap, sizeof(*notes));
  if (!seen || !notes) {
    tf_smap__free(seen);
    free(notes);
    return;
  }
  pthread_mutex_lock(&inf->mu);
  cJSON *it;
  cJSON_ArrayForEach(it, items)
  {
    char *key = tf_inf__key(it);
    if (!key) continue;
    tf_smap__put(seen, key, (void *)1);
    tf_inf__obj *old = tf_smap__get(inf->cache, key);
    const char *nrv = tf_kube__meta_str(it, "resourceVersion");
    const char *orv = old ? tf_kube__meta_str(old->obj, "resourceVersion") : NULL;
    int changed = !old || !nrv || !orv || strcmp(nrv, orv) != 0;
    if (changed) {
      cJSON *copy = cJSON_Duplicate(it, 1);
      if (copy) {
        tf_inf__store(inf, key, copy);
        notes[n].op = old ? TF_INFORMER_UPDATED : TF_INFORMER_ADDED;
        notes[n].key = key;
        notes[n].obj = cJSON_Duplicate(it, 1);
        n++;
        continue;
      }
    }
    free(key);
  }
  /* what vanished while we were not watching */
  size_t pos = 0;
  const char *k;
  void *v;
  char **gone = calloc(tf_smap__count(inf->cache) + 1, sizeof(char *));
  size_t ngone = 0;
  while (gone && tf_smap__next(inf->cache, &pos, &k, &v))
    if (!tf_smap__has(seen, k)) gone[ngone++] = tf_strdup__(k);
  for (size_t i = 0; i < ngone; i++) {
    if (!gone[i]) continue;
    tf_inf__obj *old = tf_smap__get(inf->cache, gone[i]);
    notes[n].op = TF_INFORMER_DELETED;
    notes[n].key = gone[i];
    notes[n].obj = cJSON_Duplicate(old->obj, 1);
    n++;
    tf_inf__remove(inf, gone[i]);
  }
  free(gone);
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
  for (size_t i = 0; i < n; i++) {
    if (notes[i].obj) tf_inf__notify(inf, notes[i].op, notes[i].key, notes[i].obj);
    cJSON_Delete(notes[i].obj);
    free(notes[i].key);
  }
  free(notes);
}

static void tf_inf__resync(tf_informer *inf)
{
  if (!inf->o.resync_ms || !inf->o.on_change) return;
  int64_t now = tf_kube__now_ms();
  if (now < inf->next_resync) return;
  inf->next_resync = now + inf->o.resync_ms;
  pthread_mutex_lock(&inf->mu);
  size_t n = tf_smap__count(inf->cache), i = 0, pos = 0;
  char **keys = calloc(n + 1, sizeof(char *));
  char **texts = calloc(n + 1, sizeof(char *));
  const char *k;
  void *v;
  while (keys && texts && tf_smap__next(inf->cache, &pos, &k, &v)) {
    keys[i] = tf_strdup__(k);
    texts[i] = cJSON_PrintUnformatted(((tf_inf__obj *)v)->obj);
    i++;
  }
  pthread_mutex_unlock(&inf->mu);
  for (size_t j = 0; j < i; j++) {
    if (keys[j] && texts[j]) inf->o.on_change(TF_INFORMER_UPDATED, keys[j], texts[j], inf->o.payload);
    free(keys[j]);
    free(texts[j]);
  }
  free(keys);
  free(texts);
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

tf_err tf_informer_get(const tf_informer *inf, const char *key, char **out)
{
  TF_ASSERT_ARG(inf && key && out);
  *out = NULL;
  tf_informer *m = (tf_informer *)inf;
  pthread_mutex_lock(&m->mu);
  tf_inf__obj *o = tf_smap__get(m->cache, key);
  char *txt = o ? cJSON_PrintUnformatted(o->obj) : NULL;
  pthread_mutex_unlock(&m->mu);
  if (!o) return tf_error__set(TF_ENOTFOUND, "informer: no object %.200s", key);
  if (!txt) return tf_error__nomem();
  *out = txt;
  return TF_OK;
}

static int tf_inf__cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

tf_err tf_informer_list(const tf_informer *inf, const char *ns, const char *label, char **out)
{
  TF_ASSERT_ARG(inf && out);
  *out = NULL;
  if (label && !strchr(label, '=')) return tf_error__set(TF_EINVALID, "label: must be key=value");
  tf_informer *m = (tf_informer *)inf;
  tf_err rc = TF_OK;
  cJSON *arr = cJSON_CreateArray();
  if (!arr) return tf_error__nomem();
  pthread_mutex_lock(&m->mu);
  /* the smaller index picks the candidates; the other filter checks them */
  tf_smap *cand = label ? tf_smap__get(m->by_label, label) : ns ? tf_smap__get(m->by_ns, ns) : m->cache;
  size_t n = tf_smap__count(cand), i = 0, pos = 0;
  const char **keys = n ? calloc(n, sizeof(char *)) : NULL;
  const char *k;
  void *v;
  if (n && !keys) rc = tf_error__nomem();
  while (keys && tf_smap__next(cand, &pos, &k, &v)) keys[i++] = k;
  if (keys) qsort(keys, i, sizeof(char *), tf_inf__cmp);
  for (size_t j = 0; keys && j < i; j++) {
    tf_inf__obj *o = tf_smap__get(m->cache, keys[j]);
    if (!o) continue;
    if (ns && (!o->ns || strcmp(o->ns, ns) != 0)) continue;
    cJSON_AddItemToArray(arr, cJSON_Duplicate(o->obj, 1));
  }
  pthread_mutex_unlock(&m->mu);
  free(keys);
  if (rc == TF_OK) {
    *out = cJSON_PrintUnformatted(arr);
    if (!*out) rc = tf_error__nomem();
  }
  cJSON_Delete(arr);
  return rc;
}

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
