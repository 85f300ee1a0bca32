/* recorder: core/v1 Events with client-side dedupe. The first occurrence of
 * (object, type, reason, message) is a POST of an Event named
 * `<object>.<hex unix nanos>`; a repeat is a merge PATCH of count and
 * lastTimestamp on that Event (a new one when it has gone). The dedupe table
 * is bounded: past TF_REC__MAX entries it starts over. An Event the server
 * could not take now (429/5xx, a timeout, the network, the write gate) waits
 * in a bounded queue, in order, and is sent again no sooner than the server's
 * Retry-After (else a doubling backoff); an overflow drops the oldest and
 * counts it, never silently. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube_internal.h"
#include "smap.h"

#define TF_REC__MAX 4096
#define TF_REC__QUEUE 256
#define TF_REC__BACKOFF_MS 500
#define TF_REC__BACKOFF_MAX_MS 30000

typedef struct tf_rec__pending {
  char *involved, *type, *reason, *message;
} tf_rec__pending;

typedef struct tf_rec__seen {
  char *event; /* the Event's name */
  char *ns;
  long count;
} tf_rec__seen;

struct tf_recorder {
  tf_kube *k;
  char *component;
  pthread_mutex_t mu;
  tf_smap *seen;
  pthread_mutex_t send_mu; /* one sender at a time: the queue keeps its order */
  tf_rec__pending q[TF_REC__QUEUE]; /* a ring, under mu */
  size_t qhead, qn;
  int64_t retry_at; /* monotonic ms: no retry before */
  long backoff_ms;
  uint64_t dropped;
};

static void tf_rec__pending_dispose(tf_rec__pending *p)
{
  free(p->involved);
  free(p->type);
  free(p->reason);
  free(p->message);
  memset(p, 0, sizeof(*p));
}

static void tf_rec__seen_free(void *p)
{
  tf_rec__seen *s = p;
  if (!s) return;
  free(s->event);
  free(s->ns);
  free(s);
}

tf_err tf_recorder_new(tf_recorder **out, tf_kube *kube, const char *component)
{
  TF_ASSERT_ARG(out && kube && component && *component);
  *out = NULL;
  tf_recorder *r = calloc(1, sizeof(*r));
  if (!r) return tf_error__nomem();
  r->k = kube;
  r->component = tf_strdup__(component);
  r->seen = tf_smap__new(tf_rec__seen_free);
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->send_mu, NULL);
  r->backoff_ms = TF_REC__BACKOFF_MS;
  if (!r->component || !r->seen) {
    tf_recorder_free(r);
    return tf_error__nomem();
  }
  *out = r;
  return TF_OK;
}

void tf_recorder_free(tf_recorder *r)
{
  if (!r) return;
  tf_smap__free(r->seen);
  free(r->component);
  for (size_t i = 0; i < r->qn; i++) tf_rec__pending_dispose(&r->q[(r->qhead + i) % TF_REC__QUEUE]);
  pthread_mutex_destroy(&r->send_mu);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

static void tf_rec__time(char *buf, size_t n, struct timespec *ts)
{
  clock_gettime(CLOCK_REALTIME, ts);
  struct tm tm;
  gmtime_r(&ts->tv_sec, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *tf_rec__str(const cJSON *o, const char *k)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : "";
}

/* Send one Event now (POST, or PATCH of a repeat); @p retry_after gets the server's ask. */
static tf_err tf_rec__send(tf_recorder *r, const char *involved, const char *type, const char *reason,
                           const char *message, long *retry_after)
{
  *retry_after = 0;
  tf_kube_status *st = NULL;
  cJSON *obj = cJSON_Parse(involved);
  if (!cJSON_IsObject(obj)) {
    cJSON_Delete(obj);
    return tf_error__set(TF_EINVALID, "involved: not a JSON object");
  }
  const char *name = tf_kube__meta_str(obj, "name"), *ns = tf_kube__meta_str(obj, "namespace");
  const char *uid = tf_kube__meta_str(obj, "uid");
  if (!name || !*name) {
    cJSON_Delete(obj);
    return tf_error__set(TF_EINVALID, "involved: metadata.name required");
  }
  if (!ns || !*ns) ns = "default"; /* cluster-scoped objects: events go to default, as client-go does */
  char *key = tf_asprintf__("%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", tf_rec__str(obj, "kind"), ns, name,
                            uid ? uid : "", type, reason, message);
  char now[32];
  struct timespec ts;
  tf_rec__time(now, sizeof(now), &ts);
  tf_err rc = TF_OK;
  if (!key) {
    cJSON_Delete(obj);
    return tf_error__nomem();
  }
  pthread_mutex_lock(&r->mu);
  tf_rec__seen *seen = tf_smap__get(r->seen, key);
  char *event = seen ? tf_strdup__(seen->event) : NULL;
  long count = seen ? seen->count + 1 : 1;
  pthread_mutex_unlock(&r->mu);
  if (event) {
    char *path = NULL, *patch = tf_asprintf__("{\"count\":%ld,\"lastTimestamp\":\"%s\"}", count, now);
    rc = patch ? tf_kube_path(&path, "/api/v1", "events", ns, event, NULL) : tf_error__nomem();
    if (rc == TF_OK) rc = tf_kube_patch(r->k, path, TF_KUBE_PATCH_MERGE, patch, NULL, &st);
    free(path);
    free(patch);
    free(event);
    if (rc == TF_OK) {
      pthread_mutex_lock(&r->mu);
      tf_rec__seen *s = tf_smap__get(r->seen, key);
      if (s) s->count = count;
      pthread_mutex_unlock(&r->mu);
      goto out;
    }
    if (rc != TF_ENOTFOUND) goto out;
    count = 1; /* it went away (TTL): start a new one */
  }
  {
    char *ev_name = tf_asprintf__("%s.%llx", name, (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    cJSON *e = cJSON_CreateObject();
    if (!ev_name || !e) {
      free(ev_name);
      cJSON_Delete(e);
      rc = tf_error__nomem();
      goto out;
    }
    cJSON_AddStringToObject(e, "apiVersion", "v1");
    cJSON_AddStringToObject(e, "kind", "Event");
    cJSON *md = cJSON_AddObjectToObject(e, "metadata");
    cJSON_AddStringToObject(md, "name", ev_name);
    cJSON_AddStringToObject(md, "namespace", ns);
    cJSON *io = cJSON_AddObjectToObject(e, "involvedObject");
    cJSON_AddStringToObject(io, "apiVersion", tf_rec__str(obj, "apiVersion"));
    cJSON_AddStringToObject(io, "kind", tf_rec__str(obj, "kind"));
    cJSON_AddStringToObject(io, "name", name);
    cJSON_AddStringToObject(io, "namespace", ns);
    if (uid) cJSON_AddStringToObject(io, "uid", uid);
    cJSON_AddStringToObject(e, "reason", reason);
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(e, "source"), "component", r->component);
    cJSON_AddStringToObject(e, "firstTimestamp", now);
    cJSON_AddStringToObject(e, "lastTimestamp", now);
    cJSON_AddNumberToObject(e, "count", 1);
    char *body = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    char *coll = NULL;
    rc = body ? tf_kube_path(&coll, "/api/v1", "events", ns, NULL, NULL) : tf_error__nomem();
    tf_kube_status_free(st);
    st = NULL;
    if (rc == TF_OK) rc = tf_kube_create(r->k, coll, body, NULL, &st);
    free(coll);
    free(body);
    if (rc == TF_OK) {
      tf_rec__seen *s = calloc(1, sizeof(*s));
      if (s) {
        s->event = ev_name;
        s->ns = tf_strdup__(ns);
        s->count = 1;
        ev_name = NULL;
        pthread_mutex_lock(&r->mu);
        if (tf_smap__count(r->seen) >= TF_REC__MAX) {
          tf_smap__free(r->seen);
          r->seen = tf_smap__new(tf_rec__seen_free);
        }
        if (!r->seen || tf_smap__put(r->seen, key, s) < 0) tf_rec__seen_free(s);
        if (!r->seen) r->seen = tf_smap__new(tf_rec__seen_free);
        pthread_mutex_unlock(&r->mu);
      }
    }
    free(ev_name);
  }
out:
  *retry_after = tf_kube_status_retry_after(st);
  tf_kube_status_free(st);
  free(key);
  cJSON_Delete(obj);
  return rc;
}

/* Failures worth another try: the server is busy, slow or away, or this process may not write now. */
static int tf_rec__retriable(tf_err rc)
{
  return rc == TF_EUNAVAILABLE || rc == TF_ETIMEOUT || rc == TF_ENET || rc == TF_EREFUSED;
}

/* Keep an Event for later (mu held); the oldest goes when the queue is full, counted. */
static tf_err tf_rec__enqueue(tf_recorder *r, const char *involved, const char *type, const char *reason,
                              const char *message)
{
  tf_rec__pending p = {tf_strdup__(involved), tf_strdup__(type), tf_strdup__(reason), tf_strdup__(message)};
  if (!p.involved || !p.type || !p.reason || !p.message) {
    tf_rec__pending_dispose(&p);
    r->dropped++;
    return tf_error__nomem();
  }
  if (r->qn == TF_REC__QUEUE) {
    tf_rec__pending_dispose(&r->q[r->qhead]);
    r->qhead = (r->qhead + 1) % TF_REC__QUEUE;
    r->qn--;
    r->dropped++;
  }
  r->q[(r->qhead + r->qn) % TF_REC__QUEUE] = p;
  r->qn++;
  return TF_OK;
}

/* After a retriable failure: not again before the server's wait, else the backoff (mu held). */
static void tf_rec__defer(tf_recorder *r, long retry_after_s)
{
  long wait = r->backoff_ms;
  if (retry_after_s * 1000 > wait) wait = retry_after_s * 1000;
  r->retry_at = tf_kube__now_ms() + wait;
  r->backoff_ms = r->backoff_ms * 2 > TF_REC__BACKOFF_MAX_MS ? TF_REC__BACKOFF_MAX_MS : r->backoff_ms * 2;
}

/* Send what is queued, in order, while the server takes it (send_mu held). */
static void tf_rec__drain(tf_recorder *r)
{
  for (;;) {
    pthread_mutex_lock(&r->mu);
    if (r->qn == 0 || tf_kube__now_ms() < r->retry_at) {
      pthread_mutex_unlock(&r->mu);
      return;
    }
    tf_rec__pending p = r->q[r->qhead];
    memset(&r->q[r->qhead], 0, sizeof(r->q[r->qhead]));
    r->qhead = (r->qhead + 1) % TF_REC__QUEUE;
    r->qn--;
    pthread_mutex_unlock(&r->mu);
    long ra = 0;
    tf_err rc = tf_rec__send(r, p.involved, p.type, p.reason, p.message, &ra);
    pthread_mutex_lock(&r->mu);
    if (rc < 0 && tf_rec__retriable(rc)) {
      /* back at the front: the order stays */
      if (r->qn == TF_REC__QUEUE) {
        tf_rec__pending_dispose(&p);
        r->dropped++;
      } else {
        r->qhead = (r->qhead + TF_REC__QUEUE - 1) % TF_REC__QUEUE;
        r->q[r->qhead] = p;
        r->qn++;
      }
      tf_rec__defer(r, ra);
      pthread_mutex_unlock(&r->mu);
      return;
    }
    if (rc < 0) r->dropped++; /* refused for good (403, 422, ...): counted */
    else r->backoff_ms = TF_REC__BACKOFF_MS;
    pthread_mutex_unlock(&r->mu);
    tf_rec__pending_dispose(&p);
  }
}

tf_err tf_recorder_event(tf_recorder *r, const char *involved, const char *type, const char *reason,
                         const char *message)
{
  TF_ASSERT_ARG(r && involved && type && reason && message);
  if (strcmp(type, "Normal") != 0 && strcmp(type, "Warning") != 0)
    return tf_error__set(TF_EINVALID, "type: must be Normal or Warning");
  if (!*reason) return tf_error__set(TF_EINVALID, "reason: required");
  cJSON *obj = cJSON_Parse(involved);
  const char *name = cJSON_IsObject(obj) ? tf_kube__meta_str(obj, "name") : NULL;
  int ok = cJSON_IsObject(obj), named = name && *name;
  cJSON_Delete(obj);
  if (!ok) return tf_error__set(TF_EINVALID, "involved: not a JSON object");
  if (!named) return tf_error__set(TF_EINVALID, "involved: metadata.name required");
  pthread_mutex_lock(&r->send_mu);
  tf_rec__drain(r);
  pthread_mutex_lock(&r->mu);
  size_t waiting = r->qn;
  tf_err rc = TF_OK;
  if (waiting) {
    /* older Events wait for the server: this one queues behind them */
    rc = tf_rec__enqueue(r, involved, type, reason, message);
    if (rc == TF_OK) rc = tf_error__set(TF_EUNAVAILABLE, "event %s: queued behind %zu waiting for the server", reason,
                                        waiting);
  }
  pthread_mutex_unlock(&r->mu);
  if (!waiting) {
    long ra = 0;
    rc = tf_rec__send(r, involved, type, reason, message, &ra);
    if (rc < 0 && tf_rec__retriable(rc)) {
      tf_err saved = rc;
      char msg[300];
      snprintf(msg, sizeof(msg), "%s", tf_error_last()->message);
      pthread_mutex_lock(&r->mu);
      if (tf_rec__enqueue(r, involved, type, reason, message) == TF_OK) tf_rec__defer(r, ra);
      pthread_mutex_unlock(&r->mu);
      rc = tf_error__set(saved, "%s (queued: sent again later)", msg);
    } else if (rc < 0) {
      pthread_mutex_lock(&r->mu);
      r->dropped++;
      pthread_mutex_unlock(&r->mu);
    }
  }
  pthread_mutex_unlock(&r->send_mu);
  return rc;
}

size_t tf_recorder_flush(tf_recorder *r)
{
  if (!r) return 0;
  pthread_mutex_lock(&r->send_mu);
  tf_rec__drain(r);
  pthread_mutex_unlock(&r->send_mu);
  return tf_recorder_pending(r);
}

size_t tf_recorder_pending(const tf_recorder *r)
{
  if (!r) return 0;
  tf_recorder *m = (tf_recorder *)r;
  pthread_mutex_lock(&m->mu);
  size_t n = m->qn;
  pthread_mutex_unlock(&m->mu);
  return n;
}

uint64_t tf_recorder_dropped(const tf_recorder *r)
{
  if (!r) return 0;
  tf_recorder *m = (tf_recorder *)r;
  pthread_mutex_lock(&m->mu);
  uint64_t n = m->dropped;
  pthread_mutex_unlock(&m->mu);
  return n;
}
