/* elector: Lease leader election as client-go's tryAcquireOrRenew. Every
 * decision uses the local monotonic clock only: a Lease spec that changed is
 * "observed" at local now, and another holder's lease is treated as expired
 * leaseDurationSeconds after that, whatever its timestamps say. A leader
 * renews every retry period and gives up (on_change(0), the elector ends)
 * when it could not renew within the renew deadline; requests are abandoned
 * at that deadline so a slow server cannot stretch it. The held time counts
 * from when the successful attempt started (its request may have reached
 * the server at any point after), and a write gate (tf_elector_write_gate)
 * reads it from the clock at every write, so a process that was paused
 * refuses its writes at once on waking, before its thread noticed. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube_internal.h"

/* the handle's log sink (never sees secrets) */
#define TF_EL__LOG(h, level, ...) tf_log__emit((h)->o.log, (h)->o.log_payload, (h)->o.log_level, level, __VA_ARGS__)

struct tf_elector {
  tf_kube *k;
  tf_elector_options o;
  char *ns, *name, *identity, *coll, *path;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t th;
  int started;
  volatile int stop;
  int leader;        /* under mu */
  int finished;      /* under mu */
  int64_t renewed;   /* local time the last successful renew attempt started (under mu) */
  cJSON *lease;      /* the last Lease object read or written */
  char *observed;    /* the spec last seen, printed */
  int64_t observed_at;
  unsigned seed;
};


tf_err tf_elector_options_init(tf_elector_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_ELECTOR_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_elector_options: unknown version %u", version);
  tf_elector_options d = TF_ELECTOR_OPTIONS_INIT;
  *opts = d;
  opts->version = version;
  return TF_OK;
}

tf_err tf_elector_new(tf_elector **out, tf_kube *kube, const tf_elector_options *opts)
{
  TF_ASSERT_ARG(out && kube && opts);
  *out = NULL;
  if (opts->version == 0 || opts->version > TF_ELECTOR_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_elector_options: unknown version %u", opts->version);
  tf_elector_options o = TF_ELECTOR_OPTIONS_INIT;
  o.lease_namespace = opts->lease_namespace;
  o.lease_name = opts->lease_name;
  o.identity = opts->identity;
  o.lease_seconds = opts->lease_seconds;
  o.renew_deadline_ms = opts->renew_deadline_ms;
  o.retry_ms = opts->retry_ms;
  o.release_on_stop = opts->release_on_stop;
  o.on_change = opts->on_change;
  o.payload = opts->payload;
  o.log = opts->log;
  o.log_payload = opts->log_payload;
  o.log_level = opts->log_level;
  if (!o.identity || !*o.identity) return tf_error__set(TF_EINVALID, "identity: required");
  if (o.lease_seconds < 1 || o.retry_ms < 1) return tf_error__set(TF_EINVALID, "lease_seconds/retry_ms: must be > 0");
  if (!(o.lease_seconds * 1000 > o.renew_deadline_ms))
    return tf_error__set(TF_EINVALID, "lease_seconds: must be longer than renew_deadline_ms");
  if (!(o.renew_deadline_ms * 10 > o.retry_ms * 12))
    return tf_error__set(TF_EINVALID, "renew_deadline_ms: must be longer than 1.2 x retry_ms");
  tf_elector *e = calloc(1, sizeof(*e));
  if (!e) return tf_error__nomem();
  tf_err rc = tf_kube_path(&e->coll, "/apis/coordination.k8s.io/v1", "leases", o.lease_namespace, NULL, NULL);
  if (rc == TF_OK) rc = tf_kube_path(&e->path, "/apis/coordination.k8s.io/v1", "leases", o.lease_namespace,
                                     o.lease_name, NULL);
  if (rc < 0) {
    free(e->coll);
    free(e);
    return rc;
  }
  e->k = kube;
  e->o = o;
  e->ns = tf_strdup__(o.lease_namespace);
  e->name = tf_strdup__(o.lease_name);
  e->identity = tf_strdup__(o.identity);
  pthread_mutex_init(&e->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&e->cv, &ca);
  pthread_condattr_destroy(&ca);
  e->seed = (unsigned)tf_kube__now_ms() ^ (unsigned)(uintptr_t)e;
  if (!e->ns || !e->name || !e->identity) {
    tf_elector_free(e);
    return tf_error__nomem();
  }
  *out = e;
  return TF_OK;
}

/* RFC 3339 with microseconds, UTC (MicroTime). Written for humans and other
 * clients; never read back for a decision. */
static void tf_el__microtime(char *buf, size_t n)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char sec[24];
  strftime(sec, sizeof(sec), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, n, "%.20s.%06uZ", sec, (unsigned)(ts.tv_nsec / 1000) % 1000000u);
}

static void tf_el__observe(tf_elector *e, const cJSON *spec)
{
  char *txt = spec ? cJSON_PrintUnformatted(spec) : tf_strdup__("");
  if (!txt) return;
  if (!e->observed || strcmp(e->observed, txt) != 0) {
    free(e->observed);
    e->observed = txt;
    e->observed_at = tf_kube__now_ms();
  } else {
    free(txt);
  }
}

static void tf_el__keep(tf_elector *e, char *json)
{
  cJSON *d = json ? cJSON_Parse(json) : NULL;
  if (d) {
    cJSON_Delete(e->lease);
    e->lease = d;
  }
}

static cJSON *tf_el__spec(const tf_elector *e, const char *now, const char *acquire, long transitions)
{
  cJSON *s = cJSON_CreateObject();
  if (!s) return NULL;
  cJSON_AddStringToObject(s, "holderIdentity", e->identity);
  cJSON_AddNumberToObject(s, "leaseDurationSeconds", (double)e->o.lease_seconds);
  cJSON_AddStringToObject(s, "acquireTime", acquire);
  cJSON_AddStringToObject(s, "renewTime", now);
  cJSON_AddNumberToObject(s, "leaseTransitions", (double)transitions);
  return s;
}

/* Send @p obj (consumed) with @p method to @p path; keep and observe what the
 * server answers. 1 on success. */
static int tf_el__write(tf_elector *e, const char *method, const char *path, cJSON *obj, int64_t deadline)
{
  char *body = obj ? cJSON_PrintUnformatted(obj) : NULL;
  cJSON_Delete(obj);
  if (!body) return 0;
  char *out = NULL;
  tf_err rc = tf_kube__request(e->k, method, path, "application/json", body, TF_KUBE__WRITE | TF_KUBE__LEASE,
                               deadline, &out, NULL);
  free(body);
  if (rc < 0) {
    TF_EL__LOG(e, TF_LOG_INFO, "lease %s/%s: %s failed: %s", e->ns, e->name, method, tf_error_last()->message);
    return 0;
  }
  tf_el__keep(e, out);
  free(out);
  tf_el__observe(e, cJSON_GetObjectItemCaseSensitive(e->lease, "spec"));
  return 1;
}

/* PUT the known Lease with @p spec (consumed); 1 on success. */
static int tf_el__put(tf_elector *e, cJSON *spec, int64_t deadline)
{
  cJSON *obj = cJSON_Duplicate(e->lease, 1);
  if (!obj || !spec) {
    cJSON_Delete(obj);
    cJSON_Delete(spec);
    return 0;
  }
  if (!cJSON_ReplaceItemInObjectCaseSensitive(obj, "spec", spec)) cJSON_AddItemToObject(obj, "spec", spec);
  return tf_el__write(e, "PUT", e->path, obj, deadline);
}

/* One round of client-go's tryAcquireOrRenew; 1 when we hold the lease after it. */
static int tf_el__try(tf_elector *e, int leading, int64_t deadline)
{
  char now[40];
  tf_el__microtime(now, sizeof(now));
  const cJSON *spec = cJSON_GetObjectItemCaseSensitive(e->lease, "spec");
  /* 1. fast path: a leader whose lease has not run out renews with what it knows */
  if (leading && e->lease && e->observed_at + e->o.lease_seconds * 1000 > tf_kube__now_ms()) {
    const cJSON *acq = cJSON_GetObjectItemCaseSensitive(spec, "acquireTime");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
    if (tf_el__put(e, tf_el__spec(e, now, cJSON_IsString(acq) ? acq->valuestring : now,
                                  cJSON_IsNumber(tr) ? (long)tr->valuedouble : 0),
                   deadline))
      return 1;
    if (tf_kube__now_ms() >= deadline) return 0;
  }
  /* 2. read it; create it when absent */
  char *out = NULL;
  tf_kube_status *st = NULL;
  tf_err rc = tf_kube__request(e->k, "GET", e->path, NULL, NULL, TF_KUBE__LEASE, deadline, &out, &st);
  tf_kube_status_free(st);
  if (rc == TF_ENOTFOUND) {
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "apiVersion", "coordination.k8s.io/v1");
    cJSON_AddStringToObject(obj, "kind", "Lease");
    cJSON *md = cJSON_AddObjectToObject(obj, "metadata");
    cJSON_AddStringToObject(md, "name", e->name);
    cJSON_AddStringToObject(md, "namespace", e->ns);
    cJSON_AddItemToObject(obj, "spec", tf_el__spec(e, now, now, 0));
    return tf_el__write(e, "POST", e->coll, obj, deadline);
  }
  if (rc < 0) {
    TF_EL__LOG(e, TF_LOG_INFO, "lease %s/%s: %s", e->ns, e->name, tf_error_last()->message);
    return 0;
  }
  tf_el__keep(e, out);
  free(out);
  spec = cJSON_GetObjectItemCaseSensitive(e->lease, "spec");
  /* 3. a changed record is observed now, on our clock */
  tf_el__observe(e, spec);
  const cJSON *holder = cJSON_GetObjectItemCaseSensitive(spec, "holderIdentity");
  const cJSON *dur = cJSON_GetObjectItemCaseSensitive(spec, "leaseDurationSeconds");
  const char *h = cJSON_IsString(holder) ? holder->valuestring : "";
  long d = cJSON_IsNumber(dur) && dur->valuedouble > 0 ? (long)dur->valuedouble : e->o.lease_seconds;
  int mine = strcmp(h, e->identity) == 0;
  /* 4. someone else holds an unexpired lease */
  if (*h && !mine && e->observed_at + d * 1000 > tf_kube__now_ms()) return 0;
  /* 5. take it (or renew it) with the RV we read */
  const cJSON *acq = cJSON_GetObjectItemCaseSensitive(spec, "acquireTime");
  const cJSON *tr = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
  long transitions = cJSON_IsNumber(tr) ? (long)tr->valuedouble : 0;
  const char *acquire = mine && cJSON_IsString(acq) ? acq->valuestring : now;
  char acq_copy[40];
  snprintf(acq_copy, sizeof(acq_copy), "%s", acquire);
  return tf_el__put(e, tf_el__spec(e, now, acq_copy, mine ? transitions : transitions + 1), deadline);
}

static void tf_el__set(tf_elector *e, int leader, int finished, int64_t at)
{
  pthread_mutex_lock(&e->mu);
  e->leader = leader;
  if (leader) e->renewed = at;
  if (finished) e->finished = 1;
  pthread_mutex_unlock(&e->mu);
}

/* Sleep @p ms unless stopped; 1 when stopped. */
static int tf_el__sleep(tf_elector *e, int64_t ms)
{
  int64_t until = tf_kube__now_ms() + ms;
  pthread_mutex_lock(&e->mu);
  while (!e->stop && tf_kube__now_ms() < until) tf_kube__wait(&e->mu, &e->cv, until - tf_kube__now_ms(), &e->stop);
  int s = e->stop;
  pthread_mutex_unlock(&e->mu);
  return s;
}

static void tf_el__release(tf_elector *e)
{
  char now[40];
  tf_el__microtime(now, sizeof(now));
  const cJSON *spec = cJSON_GetObjectItemCaseSensitive(e->lease, "spec");
  const cJSON *tr = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
  cJSON *s = tf_el__spec(e, now, now, cJSON_IsNumber(tr) ? (long)tr->valuedouble : 0);
  if (!s) return;
  cJSON_ReplaceItemInObjectCaseSensitive(s, "holderIdentity", cJSON_CreateString(""));
  cJSON_ReplaceItemInObjectCaseSensitive(s, "leaseDurationSeconds", cJSON_CreateNumber(1));
  if (tf_el__put(e, s, tf_kube__now_ms() + e->o.renew_deadline_ms))
    TF_EL__LOG(e, TF_LOG_INFO, "lease %s/%s: released", e->ns, e->name);
}

static void *tf_el__run(void *arg)
{
  tf_elector *e = arg;
  /* acquire: every retry period with jitter factor 1.2 */
  int64_t began = 0;
  while (!e->stop) {
    began = tf_kube__now_ms();
    if (tf_el__try(e, 0, began + e->o.renew_deadline_ms)) break;
    long jitter = (long)(rand_r(&e->seed) % (unsigned)(e->o.retry_ms / 5 + 1));
    if (tf_el__sleep(e, e->o.retry_ms + jitter)) break;
  }
  if (e->stop) {
    tf_el__set(e, 0, 1, 0);
    return NULL;
  }
  TF_EL__LOG(e, TF_LOG_INFO, "lease %s/%s: leading as %s", e->ns, e->name, e->identity);
  tf_el__set(e, 1, 0, began);
  if (e->o.on_change) e->o.on_change(1, e->o.payload);
  /* renew: every retry period; no success within the renew deadline = lost */
  int64_t last_ok = began;
  int lost = 0;
  while (!tf_el__sleep(e, e->o.retry_ms)) {
    int64_t deadline = last_ok + e->o.renew_deadline_ms;
    int ok = 0;
    while (!e->stop && (began = tf_kube__now_ms()) < deadline && !(ok = tf_el__try(e, 1, deadline))) {
      if (tf_el__sleep(e, e->o.retry_ms)) break;
    }
    if (e->stop) break;
    if (!ok) {
      lost = 1;
      break;
    }
    last_ok = began;
    pthread_mutex_lock(&e->mu);
    e->renewed = last_ok;
    pthread_mutex_unlock(&e->mu);
  }
  if (lost) {
    TF_EL__LOG(e, TF_LOG_WARN, "lease %s/%s: not renewed within %ld ms; leadership lost", e->ns, e->name,
               e->o.renew_deadline_ms);
  } else if (e->o.release_on_stop) {
    tf_el__release(e);
  }
  tf_el__set(e, 0, 1, 0);
  if (e->o.on_change) e->o.on_change(0, e->o.payload);
  return NULL;
}

tf_err tf_elector_start(tf_elector *e)
{
  TF_ASSERT_ARG(e);
  if (e->started) return tf_error__set(TF_EINVALID, "elector: already started");
  if (pthread_create(&e->th, NULL, tf_el__run, e) != 0) return tf_error__set(TF_ERROR, "elector: cannot start a thread");
  e->started = 1;
  return TF_OK;
}

int tf_elector_is_leader(const tf_elector *e)
{
  if (!e) return 0;
  tf_elector *m = (tf_elector *)e;
  pthread_mutex_lock(&m->mu);
  /* past the renew deadline we are not leader, even before the thread notices */
  int l = m->leader && tf_kube__now_ms() - m->renewed < m->o.renew_deadline_ms;
  pthread_mutex_unlock(&m->mu);
  return l;
}

long tf_elector_write_gate(const char *method, const char *path, void *elector)
{
  (void)method, (void)path;
  tf_elector *m = elector;
  if (!m) return 0;
  pthread_mutex_lock(&m->mu);
  int64_t left = m->leader ? m->renewed + m->o.renew_deadline_ms - tf_kube__now_ms() : 0;
  pthread_mutex_unlock(&m->mu);
  if (left <= 0) return 0;
  return left > 0x7fffffff ? 0x7fffffff : (long)left;
}

int tf_elector_finished(const tf_elector *e)
{
  if (!e) return 1;
  tf_elector *m = (tf_elector *)e;
  pthread_mutex_lock(&m->mu);
  int f = m->finished;
  pthread_mutex_unlock(&m->mu);
  return f;
}

void tf_elector_stop(tf_elector *e)
{
  if (!e || !e->started) return;
  pthread_mutex_lock(&e->mu);
  e->stop = 1;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  pthread_join(e->th, NULL);
  e->started = 0;
}

void tf_elector_free(tf_elector *e)
{
  if (!e) return;
  tf_elector_stop(e);
  cJSON_Delete(e->lease);
  free(e->observed);
  free(e->ns);
  free(e->name);
  free(e->identity);
  free(e->coll);
  free(e->path);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  free(e);
}
