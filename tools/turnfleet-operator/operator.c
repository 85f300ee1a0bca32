/* The operator's controller (operator.h): informers on TURNPools, relay
 * Pods, Nodes, its own Secrets and ConfigMaps and the API servers' Endpoints feed a work queue keyed by
 * pool; each key taken is reconciled by the library's Kubernetes adapter (adapter.h), which caches the
 * Secrets the pools reference itself (one informer per referenced name). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <time.h>

#include <turnfleet.h>

#include "operator.h"

struct op_controller {
  op_config cfg;
  tf_kube *kube;
  tf_informer *pools, *pods, *nodes, *secrets, *configmaps, *endpoints;
  tf_workqueue *queue;
  tf_recorder *recorder;
  tf_adapter *adapter;  /* made after the informers, which start only once it is there */
  pthread_mutex_t mu;     /* the metrics_ fields: the loop's thread makes the text, the metrics thread reads it */
  pthread_cond_t made;    /* signalled when metrics_text is made anew */
  char *metrics_text;     /* every pool's samples, as of the last scrape that found them out of date */
  int metrics_dirty;      /* a reconcile ran since metrics_text was made */
  int metrics_wanted;     /* a scrape waits for it to be made anew */
  unsigned long metrics_seq; /* how often it was made */
  int64_t trimmed_at;     /* when the heap was last trimmed (monotonic ms; the loop's thread) */
  int busy;               /* a reconcile ran since */
};

/* each informer's changes, forwarded: the adapter queues the pools they concern */
#define FORWARD(fn, cache)                                                            \
  static void fn(tf_informer_op op, const char *key, const char *object, void *payload) \
  {                                                                                   \
    (void)tf_adapter_changed(((op_controller *)payload)->adapter, cache, op, key, object); \
  }
FORWARD(on_pool, TF_ADAPTER_POOLS)
FORWARD(on_pod, TF_ADAPTER_PODS)
FORWARD(on_node, TF_ADAPTER_NODES)
FORWARD(on_secret, TF_ADAPTER_SECRETS)
FORWARD(on_configmap, TF_ADAPTER_CONFIGMAPS)

/* every informer's knobs, the adapter's own ones on the referenced Secrets included */
static tf_informer_options knobs(const op_controller *c)
{
  tf_informer_options io = TF_INFORMER_OPTIONS_INIT;
  io.resync_ms = c->cfg.resync_ms;
  io.log = c->cfg.adapter.log;
  io.log_payload = c->cfg.adapter.log_payload;
  io.backoff_initial_ms = 200;
  io.backoff_max_ms = 5000;
  io.bookmark_interval_ms = c->cfg.bookmark_interval_ms;
  return io;
}

static int informer(op_controller *c, tf_informer **out, const char *prefix, const char *resource, const char *ns,
                    const char *labels, const char *fields, tf_informer_cb cb)
{
  tf_informer_options io = knobs(c);
  char *path = NULL;
  if (tf_kube_path(&path, prefix, resource, ns, NULL, NULL) < 0) return -1;
  io.path = path;
  io.label_selector = labels;
  io.field_selector = fields;
  io.on_change = cb;
  io.payload = c;
  tf_err rc = tf_informer_new(out, c->kube, &io);
  if (rc < 0 && c->cfg.adapter.log) {
    char line[512];
    snprintf(line, sizeof(line), "informer %s: %s", path, tf_error_last()->message);
    c->cfg.adapter.log(TF_LOG_ERROR, line, c->cfg.adapter.log_payload);
  }
  tf_free(path);
  return rc < 0 ? -1 : 0;
}

int op_controller_new(op_controller **out, tf_kube *kube, const op_config *cfg)
{
  op_controller *c = calloc(1, sizeof(*c));
  *out = NULL;
  if (!c) return -1;
  c->cfg = *cfg;
  c->kube = kube;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->made, NULL);
  tf_workqueue_options qo = TF_WORKQUEUE_OPTIONS_INIT;
  qo.base_delay_ms = 200;
  qo.max_delay_ms = 10000;
  const char *ns = cfg->namespace_, *label = "turnfleet.hzmi.dev/pool";
  int ok = tf_workqueue_new(&c->queue, &qo) == 0 &&
           informer(c, &c->pools, "/apis/turnfleet.hzmi.dev/v1alpha1", "turnpools", ns, NULL, NULL, on_pool) == 0 &&
           informer(c, &c->pods, "/api/v1", "pods", ns, label, NULL, on_pod) == 0 &&
           informer(c, &c->nodes, "/api/v1", "nodes", NULL, NULL, NULL, on_node) == 0 &&
           /* its own <pool>-relay-config (pool label); the Secrets pools reference are the adapter's */
           informer(c, &c->secrets, "/api/v1", "secrets", ns, label, NULL, on_secret) == 0 &&
           /* its own <pool>-turn-uris and the vantage runners' <pool>-vantage: both carry the pool label */
           informer(c, &c->configmaps, "/api/v1", "configmaps", ns, label, NULL, on_configmap) == 0 &&
           /* the API servers' addresses, which no relay may take: as a node change, every pool */
           (cfg->no_api_endpoints || informer(c, &c->endpoints, "/api/v1", "endpoints", "default", NULL,
                                              "metadata.name=kubernetes", on_node) == 0) &&
           tf_recorder_new(&c->recorder, kube, "turnfleet-operator") == 0;
  tf_adapter_options ao = cfg->adapter;
  const tf_informer_options referenced = knobs(c);
  ao.referenced_secrets = &referenced;
  ao.pools = c->pools;
  ao.pods = c->pods;
  ao.nodes = c->nodes;
  ao.secrets = c->secrets;
  ao.configmaps = c->configmaps;
  ao.queue = c->queue;
  ao.recorder = c->recorder;
  ao.api_endpoints = c->endpoints;
  if (ok && tf_adapter_new(&c->adapter, kube, &ao) < 0) {
    if (ao.log) ao.log(TF_LOG_ERROR, tf_error_last()->message, ao.log_payload);
    ok = 0;
  }
  if (!ok) {
    op_controller_free(c);
    return -1;
  }
  *out = c;
  return 0;
}

int op_controller_start(op_controller *c)
{
  tf_informer *all[] = {c->endpoints, c->nodes, c->secrets, c->configmaps, c->pods, c->pools};
  for (size_t i = 0; i < 6; i++)
    if (all[i] && tf_informer_start(all[i]) < 0) return -1;
  return 0;
}

int op_controller_synced(const op_controller *c)
{
  return tf_informer_has_synced(c->pools) && tf_informer_has_synced(c->pods) && tf_informer_has_synced(c->nodes) &&
         tf_informer_has_synced(c->secrets) && tf_informer_has_synced(c->configmaps) &&
         (!c->endpoints || tf_informer_has_synced(c->endpoints));
}

void op_controller_enqueue_all(op_controller *c) { (void)tf_adapter_changed(c->adapter, TF_ADAPTER_POOLS, TF_INFORMER_UPDATED, NULL, NULL); }

tf_adapter *op_controller_adapter(op_controller *c) { return c->adapter; }

void op_controller_free(op_controller *c)
{
  if (!c) return;
  if (c->queue) tf_workqueue_shutdown(c->queue);
  /* every informer stops before any is freed: one's callback reads another's cache */
  tf_informer *all[] = {c->pools, c->pods, c->nodes, c->secrets, c->configmaps, c->endpoints};
  for (size_t i = 0; i < 6; i++) tf_informer_stop(all[i]);
  tf_adapter_free(c->adapter);
  for (size_t i = 0; i < 6; i++) tf_informer_free(all[i]);
  tf_recorder_free(c->recorder);
  tf_workqueue_free(c->queue);
  free(c->metrics_text);
  pthread_cond_destroy(&c->made);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Every pool's samples in one text, made on the loop's thread (the adapter is the loop's) only when a scrape
 * asks for it after a reconcile: at 100 pools the text of all of them cost more than the reconciles, and it is
 * read once per scrape interval. */
static void keep_metrics(op_controller *c)
{
  pthread_mutex_lock(&c->mu);
  int make = c->metrics_wanted && c->metrics_dirty;
  c->metrics_dirty = make ? 0 : c->metrics_dirty;
  pthread_mutex_unlock(&c->mu);
  if (!make) return;
  tf_metrics *m = NULL;
  char *text = NULL;
  if (tf_metrics_new(&m) == 0 && tf_adapter_metrics(c->adapter, m) == 0) (void)tf_metrics_to_text(&text, m);
  tf_metrics_free(m);
  char *copy = text ? strdup(text) : NULL; /* tf_free()'s text, free()'s field */
  tf_free(text);
  pthread_mutex_lock(&c->mu);
  free(c->metrics_text);
  c->metrics_text = copy;
  c->metrics_wanted = 0;
  c->metrics_seq++;
  pthread_cond_broadcast(&c->made);
  pthread_mutex_unlock(&c->mu);
}

/* After reconciles, at most every TRIM_EVERY_MS: the free pages the reconciles' parsed
 * and rendered bodies left between long-lived objects (in every thread's malloc arena) go back to the system
 * instead of staying resident. */
#define TRIM_EVERY_MS 10000
static void trim_heap(op_controller *c)
{
#ifdef __GLIBC__
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  if (!c->busy || now - c->trimmed_at < TRIM_EVERY_MS) return;
  c->busy = 0;
  c->trimmed_at = now;
  (void)malloc_trim(0);
#else
  (void)c;
#endif
}

void op_controller_run_once(op_controller *c, long timeout_ms)
{
  char *key = NULL;
  (void)tf_recorder_flush(c->recorder); /* Events the server could not take before, when due */
  keep_metrics(c);                      /* the pools' samples, when a scrape waits for them */
  trim_heap(c);
  if (tf_workqueue_get(c->queue, &key, timeout_ms) != 0) return;
  c->busy = 1;
  long requeue = 0;
  if (tf_adapter_reconcile(c->adapter, key, &requeue) < 0) {
    if (c->cfg.adapter.log) c->cfg.adapter.log(TF_LOG_DEBUG, tf_error_last()->message, c->cfg.adapter.log_payload);
    (void)tf_workqueue_add_rate_limited(c->queue, key);
  } else {
    tf_workqueue_forget(c->queue, key);
    if (requeue > 0) (void)tf_workqueue_add_after(c->queue, key, requeue);
  }
  pthread_mutex_lock(&c->mu);
  c->metrics_dirty = 1;
  pthread_mutex_unlock(&c->mu);
  keep_metrics(c);
  tf_workqueue_done(c->queue, key);
  tf_free(key);
}

char *op_controller_metrics(op_controller *c, int leading)
{
  /* the writes' counters and the Lease as they are now; the pools' as the loop last made them */
  tf_metrics *m = NULL;
  char *live = NULL, *out = NULL;
  if (tf_metrics_new(&m) == 0 && tf_adapter_write_metrics(c->adapter, m) == 0 &&
      tf_metrics_declare(m, TF_METRIC_OPERATOR_LEADER, TF_METRIC_GAUGE,
                         "1 while this replica holds the Lease (or runs without --leader-elect), else 0") == 0 &&
      tf_metrics_add(m, TF_METRIC_OPERATOR_LEADER, NULL, NULL, 0, leading ? 1 : 0) == 0)
    (void)tf_metrics_to_text(&live, m);
  tf_metrics_free(m);
  pthread_mutex_lock(&c->mu);
  if (c->metrics_dirty) { /* the loop makes it anew between two reconciles; a loop that stopped: the last one */
    unsigned long seq = c->metrics_seq;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    c->metrics_wanted = 1;
    while (c->metrics_seq == seq && pthread_cond_timedwait(&c->made, &c->mu, &until) == 0) {
    }
  }
  if (live && asprintf(&out, "%s%s", c->metrics_text ? c->metrics_text : "", live) < 0) out = NULL;
  pthread_mutex_unlock(&c->mu);
  tf_free(live);
  return out;
}
