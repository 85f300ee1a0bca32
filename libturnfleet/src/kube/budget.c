/* budget: per key, the times of the last `writes` writes in a ring; one more
 * is allowed when the ring is not full or its oldest entry has left the
 * window. Keys whose writes all left the window are forgotten now and then,
 * so a controller that saw many pools keeps no memory for the gone ones. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"
#include "smap.h"

#define TF_BUDGET__PRUNE_EVERY 1024

typedef struct tf_budget__ring {
  size_t head, n;
  int64_t at[]; /* writes entries */
} tf_budget__ring;

struct tf_budget {
  long writes, interval_ms;
  pthread_mutex_t mu;
  tf_smap *keys; /* key -> ring */
  uint64_t refused;
  unsigned long takes;
};

tf_err tf_budget_options_init(tf_budget_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_BUDGET_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_budget_options: unknown version %u", version);
  tf_budget_options d = TF_BUDGET_OPTIONS_INIT;
  *opts = d;
  opts->version = version;
  return TF_OK;
}

tf_err tf_budget_new(tf_budget **out, const tf_budget_options *opts)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  tf_budget_options o = TF_BUDGET_OPTIONS_INIT;
  if (opts) {
    if (opts->version == 0 || opts->version > TF_BUDGET_OPTIONS_VERSION)
      return tf_error__set(TF_EINVALID, "tf_budget_options: unknown version %u", opts->version);
    o.writes = opts->writes;
    o.interval_ms = opts->interval_ms;
  }
  if (o.writes < 1 || o.writes > 100000) return tf_error__set(TF_EINVALID, "writes: must be 1..100000");
  if (o.interval_ms < 1 || o.interval_ms > 86400000L)
    return tf_error__set(TF_EINVALID, "interval_ms: must be 1..86400000");
  tf_budget *b = calloc(1, sizeof(*b));
  if (!b) return tf_error__nomem();
  b->writes = o.writes;
  b->interval_ms = o.interval_ms;
  pthread_mutex_init(&b->mu, NULL);
  if (!(b->keys = tf_smap__new(free))) {
    tf_budget_free(b);
    return tf_error__nomem();
  }
  *out = b;
  return TF_OK;
}

void tf_budget_free(tf_budget *b)
{
  if (!b) return;
  tf_smap__free(b->keys);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

/* Drop the rings whose every write has left the window (mu held). */
static void tf_budget__prune(tf_budget *b, int64_t now)
{
  size_t pos = 0, n = 0;
  const char *k;
  void *v;
  char **idle = calloc(tf_smap__count(b->keys) + 1, sizeof(char *));
  if (!idle) return;
  while (tf_smap__next(b->keys, &pos, &k, &v)) {
    tf_budget__ring *r = v;
    size_t newest = (r->head + r->n + (size_t)b->writes - 1) % (size_t)b->writes;
    if (r->n == 0 || r->at[newest] <= now - b->interval_ms) idle[n++] = tf_strdup__(k);
  }
  for (size_t i = 0; i < n; i++) {
    if (idle[i]) tf_smap__del(b->keys, idle[i]);
    free(idle[i]);
  }
  free(idle);
}

tf_err tf_budget_take(tf_budget *b, const char *key, int64_t now, long *wait_ms)
{
  TF_ASSERT_ARG(b && key);
  if (wait_ms) *wait_ms = 0;
  tf_err rc = TF_OK;
  pthread_mutex_lock(&b->mu);
  if (++b->takes % TF_BUDGET__PRUNE_EVERY == 0) tf_budget__prune(b, now);
  tf_budget__ring *r = tf_smap__get(b->keys, key);
  if (!r) {
    r = calloc(1, sizeof(*r) + (size_t)b->writes * sizeof(int64_t));
    if (!r || tf_smap__put(b->keys, key, r) < 0) {
      free(r);
      pthread_mutex_unlock(&b->mu);
      return tf_error__nomem();
    }
  }
  /* writes that left the window no longer count */
  while (r->n && r->at[r->head] <= now - b->interval_ms) {
    r->head = (r->head + 1) % (size_t)b->writes;
    r->n--;
  }
  if (r->n < (size_t)b->writes) {
    r->at[(r->head + r->n) % (size_t)b->writes] = now;
    r->n++;
  } else {
    b->refused++;
    if (wait_ms) *wait_ms = (long)(r->at[r->head] + b->interval_ms - now);
    rc = tf_error__set(TF_EREFUSED, "budget %.200s: %ld writes in the last %ld ms already", key, b->writes,
                       b->interval_ms);
  }
  pthread_mutex_unlock(&b->mu);
  return rc;
}

long tf_budget_wait(tf_budget *b, const char *key, int64_t now)
{
  if (!b || !key) return 0;
  pthread_mutex_lock(&b->mu);
  tf_budget__ring *r = tf_smap__get(b->keys, key);
  long wait = 0;
  if (r && r->n == (size_t)b->writes) {
    /* the oldest write of a full ring leaves the window at at + interval */
    int64_t free_at = r->at[r->head] + b->interval_ms;
    if (free_at > now) wait = (long)(free_at - now);
  }
  pthread_mutex_unlock(&b->mu);
  return wait;
}

uint64_t tf_budget_refused(const tf_budget *b)
{
  if (!b) return 0;
  tf_budget *m = (tf_budget *)b;
  pthread_mutex_lock(&m->mu);
  uint64_t n = m->refused;
  pthread_mutex_unlock(&m->mu);
  return n;
}
