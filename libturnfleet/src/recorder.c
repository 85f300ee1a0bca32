/* recorder: core/v1 Events with client-side dedupe. The first occurrence of
 * (object, type, reason, message) is a POST of an Event named
 * `<object>.<hex unix nanos>`; a repeat is a merge PATCH of count and
 * lastTimestamp on that Event (a new one when it has gone). The dedupe table
 * is bounded: past TF_REC__MAX entries it starts over. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube_internal.h"
#include "smap.h"

#define TF_REC__MAX 4096

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
};

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

tf_err tf_recorder_event(tf_recorder *r, const char *involved, const char *type, const char *reason,
                         const char *message)
{
  TF_ASSERT_ARG(r && involved && type && reason && message);
  if (strcmp(type, "Normal") != 0 && strcmp(type, "Warning") != 0)
    return tf_error__set(TF_EINVALID, "type: must be Normal or Warning");
  if (!*reason) return tf_error__set(TF_EINVALID, "reason: required");
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
    if (rc == TF_OK) rc = tf_kube_patch(r->k, path, TF_KUBE_PATCH_MERGE, patch, NULL, NULL);
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
    if (rc == TF_OK) rc = tf_kube_create(r->k, coll, body, NULL, NULL);
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
  free(key);
  cJSON_Delete(obj);
  return rc;
}
