/* workqueue: client-go's rate-limited work queue. Keys are deduplicated
 * (`queued`), a key being worked on (`processing`) is never handed to a second
 * worker and, when added meanwhile (`dirty`), is queued again at done().
 * Delayed keys wait in a list that get() moves over when due. Rate-limited
 * adds wait the larger of the per-key exponential backoff and the global token
 * bucket. One mutex, one condition variable (monotonic clock). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"
#include "smap.h"

typedef struct tf_wq__delayed {
  char *key;
  int64_t due;
} tf_wq__delayed;

struct tf_workqueue {
  tf_workqueue_options o;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char **fifo; /* ring of queued keys */
  size_t head, n, cap;
  tf_smap *queued;     /* in fifo */
  tf_smap *dirty;      /* added while processing */
  tf_smap *processing;
  tf_smap *failures;   /* key -> (int)(intptr_t) count */
  tf_wq__delayed *delayed;
  size_t ndelayed, capdelayed;
  double tokens;
  int64_t tokens_at;
  int shutdown;
};

tf_err tf_workqueue_options_init(tf_workqueue_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_WORKQUEUE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_workqueue_options: unknown version %u", version);
  tf_workqueue_options d = TF_WORKQUEUE_OPTIONS_INIT;
  *opts = d;
  opts->version = version;
  return TF_OK;
}

tf_err tf_workqueue_new(tf_workqueue **out, const tf_workqueue_options *opts)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  tf_workqueue_options o = TF_WORKQUEUE_OPTIONS_INIT;
  if (opts) {
    if (opts->version == 0 || opts->version > TF_WORKQUEUE_OPTIONS_VERSION)
      return tf_error__set(TF_EINVALID, "tf_workqueue_options: unknown version %u", opts->version);
    o.base_delay_ms = opts->base_delay_ms;
    o.max_delay_ms = opts->max_delay_ms;
    o.qps = opts->qps;
    o.burst = opts->burst;
  }
  if (o.base_delay_ms < 1 || o.max_delay_ms < o.base_delay_ms)
    return tf_error__set(TF_EINVALID, "base_delay_ms/max_delay_ms: need 1 <= base <= max");
  if (!(o.qps > 0) || o.burst < 1) return tf_error__set(TF_EINVALID, "qps/burst: must be > 0");
  tf_workqueue *q = calloc(1, sizeof(*q));
  if (!q) return tf_error__nomem();
  q->o = o;
  pthread_mutex_init(&q->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&q->cv, &ca);
  pthread_condattr_destroy(&ca);
  q->queued = tf_smap__new(NULL);
  q->dirty = tf_smap__new(NULL);
  q->processing = tf_smap__new(NULL);
  q->failures = tf_smap__new(NULL);
  q->tokens = (double)o.burst;
  q->tokens_at = tf_kube__now_ms();
  if (!q->queued || !q->dirty || !q->processing || !q->failures) {
    tf_workqueue_free(q);
    return tf_error__nomem();
  }
  *out = q;
  return TF_OK;
}

void tf_workqueue_free(tf_workqueue *q)
{
  if (!q) return;
  for (size_t i = 0; i < q->n; i++) free(q->fifo[(q->head + i) % q->cap]);
  free(q->fifo);
  for (size_t i = 0; i < q->ndelayed; i++) free(q->delayed[i].key);
  free(q->delayed);
  tf_smap__free(q->queued);
  tf_smap__free(q->dirty);
  tf_smap__free(q->processing);
  tf_smap__free(q->failures);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
}

/* mu held */
static tf_err tf_wq__push(tf_workqueue *q, const char *key)
{
  if (tf_smap__has(q->queued, key)) return TF_OK;
  if (tf_smap__has(q->processing, key)) return tf_smap__put(q->dirty, key, (void *)1) < 0 ? TF_ENOMEM : TF_OK;
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 16;
    char **f = malloc(cap * sizeof(char *));
    if (!f) return TF_ENOMEM;
    for (size_t i = 0; i < q->n; i++) f[i] = q->fifo[(q->head + i) % q->cap];
    free(q->fifo);
    q->fifo = f;
    q->cap = cap;
    q->head = 0;
  }
  char *c = tf_strdup__(key);
  if (!c || tf_smap__put(q->queued, key, (void *)1) < 0) {
    free(c);
    return TF_ENOMEM;
  }
  q->fifo[(q->head + q->n++) % q->cap] = c;
  pthread_cond_broadcast(&q->cv);
  return TF_OK;
}

tf_err tf_workqueue_add(tf_workqueue *q, const char *key)
{
  TF_ASSERT_ARG(q && key);
  pthread_mutex_lock(&q->mu);
  tf_err rc = q->shutdown ? TF_OK : tf_wq__push(q, key);
  pthread_mutex_unlock(&q->mu);
  return rc == TF_ENOMEM ? tf_error__nomem() : rc;
}

/* mu held */
static tf_err tf_wq__delay(tf_workqueue *q, const char *key, long ms)
{
  if (ms <= 0) return tf_wq__push(q, key);
  int64_t due = tf_kube__now_ms() + ms;
  for (size_t i = 0; i < q->ndelayed; i++) {
    if (strcmp(q->delayed[i].key, key) == 0) {
      if (due < q->delayed[i].due) q->delayed[i].due = due;
      pthread_cond_broadcast(&q->cv);
      return TF_OK;
    }
  }
  if (q->ndelayed == q->capdelayed) {
    size_t cap = q->capdelayed ? q->capdelayed * 2 : 16;
    tf_wq__delayed *d = realloc(q->delayed, cap * sizeof(*d));
    if (!d) return TF_ENOMEM;
    q->delayed = d;
    q->capdelayed = cap;
  }
  char *c = tf_strdup__(key);
  if (!c) return TF_ENOMEM;
  q->delayed[q->ndelayed].key = c;
  q->delayed[q->ndelayed].due = due;
  q->ndelayed++;
  pthread_cond_broadcast(&q->cv);
  return TF_OK;
}

tf_err tf_workqueue_add_after(tf_workqueue *q, const char *key, long delay_ms)
{
  TF_ASSERT_ARG(q && key);
  pthread_mutex_lock(&q->mu);
  tf_err rc = q->shutdown ? TF_OK : tf_wq__delay(q, key, delay_ms);
  pthread_mutex_unlock(&q->mu);
  return rc == TF_ENOMEM ? tf_error__nomem() : rc;
}

tf_err tf_workqueue_add_rate_limited(tf_workqueue *q, const char *key)
{
  TF_ASSERT_ARG(q && key);
  pthread_mutex_lock(&q->mu);
  int fails = (int)(intptr_t)tf_smap__get(q->failures, key);
  /* per key: base * 2^failures, capped */
  double per = (double)q->o.base_delay_ms;
  for (int i = 0; i < fails && per < (double)q->o.max_delay_ms; i++) per *= 2;
  if (per > (double)q->o.max_delay_ms) per = (double)q->o.max_delay_ms;
  tf_smap__put(q->failures, key, (void *)(intptr_t)(fails + 1));
  /* global: reserve one token (the wait is what it takes to earn it) */
  int64_t now = tf_kube__now_ms();
  q->tokens += (double)(now - q->tokens_at) * q->o.qps / 1000.0;
  if (q->tokens > (double)q->o.burst) q->tokens = (double)q->o.burst;
  q->tokens_at = now;
  q->tokens -= 1.0;
  double global = q->tokens >= 0 ? 0 : -q->tokens * 1000.0 / q->o.qps;
  long ms = (long)(per > global ? per : global);
  tf_err rc = q->shutdown ? TF_OK : tf_wq__delay(q, key, ms);
  pthread_mutex_unlock(&q->mu);
  return rc == TF_ENOMEM ? tf_error__nomem() : rc;
}

void tf_workqueue_forget(tf_workqueue *q, const char *key)
{
  if (!q || !key) return;
  pthread_mutex_lock(&q->mu);
  tf_smap__del(q->failures, key);
  pthread_mutex_unlock(&q->mu);
}

int tf_workqueue_failures(tf_workqueue *q, const char *key)
{
  if (!q || !key) return 0;
  pthread_mutex_lock(&q->mu);
  int n = (int)(intptr_t)tf_smap__get(q->failures, key);
  pthread_mutex_unlock(&q->mu);
  return n;
}

/* mu held: move due delayed keys over; returns the next due time (0 = none). */
static int64_t tf_wq__promote(tf_workqueue *q)
{
  int64_t now = tf_kube__now_ms(), next = 0;
  for (size_t i = 0; i < q->ndelayed;) {
    if (q->delayed[i].due <= now) {
      tf_wq__push(q, q->delayed[i].key);
      free(q->delayed[i].key);
      q->delayed[i] = q->delayed[--q->ndelayed];
    } else {
      if (!next || q->delayed[i].due < next) next = q->delayed[i].due;
      i++;
    }
  }
  return next;
}

tf_err tf_workqueue_get(tf_workqueue *q, char **key, long timeout_ms)
{
  TF_ASSERT_ARG(q && key);
  *key = NULL;
  int64_t until = timeout_ms >= 0 ? tf_kube__now_ms() + timeout_ms : 0;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    int64_t next = tf_wq__promote(q);
    if (q->n > 0) break;
    if (q->shutdown) {
      pthread_mutex_unlock(&q->mu);
      return tf_error__set(TF_ENOTFOUND, "work queue: shut down");
    }
    int64_t now = tf_kube__now_ms();
    if (timeout_ms >= 0 && now >= until) {
      pthread_mutex_unlock(&q->mu);
      return tf_error__set(TF_ETIMEOUT, "work queue: no key within %ld ms", timeout_ms);
    }
    int64_t wake = timeout_ms >= 0 ? until : now + 3600000;
    if (next && next < wake) wake = next;
    tf_kube__wait(&q->mu, &q->cv, wake - now, NULL);
  }
  char *k = q->fifo[q->head];
  q->head = (q->head + 1) % q->cap;
  q->n--;
  tf_smap__del(q->queued, k);
  tf_smap__put(q->processing, k, (void *)1);
  pthread_mutex_unlock(&q->mu);
  *key = k;
  return TF_OK;
}

void tf_workqueue_done(tf_workqueue *q, const char *key)
{
  if (!q || !key) return;
  pthread_mutex_lock(&q->mu);
  tf_smap__del(q->processing, key);
  if (tf_smap__del(q->dirty, key) && !q->shutdown) tf_wq__push(q, key);
  pthread_mutex_unlock(&q->mu);
}

size_t tf_workqueue_len(tf_workqueue *q)
{
  if (!q) return 0;
  pthread_mutex_lock(&q->mu);
  tf_wq__promote(q);
  size_t n = q->n;
  pthread_mutex_unlock(&q->mu);
  return n;
}

void tf_workqueue_shutdown(tf_workqueue *q)
{
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->shutdown = 1;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}
