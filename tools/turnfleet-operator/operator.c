/* The operator's controller (operator.h): informers on TURNPools, relay
 * Pods, Nodes, Secrets and ConfigMaps feed a work queue keyed by pool; each
 * key taken is reconciled by the library's Kubernetes adapter (adapter.h),
 * charged to the pool's write budget. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <turnfleet.h>

#include "operator.h"

#define GROUP_API "/apis/turnfleet.hzmi.dev/v1alpha1"
#define POOL_LABEL "turnfleet.hzmi.dev/pool"

struct op_controller {
  op_config cfg;
  tf_kube *kube;
  tf_informer *pools, *pods, *nodes, *secrets, *configmaps, *endpoints;
  tf_workqueue *queue;
  tf_recorder *recorder;
  tf_adapter *adapter;
  pthread_mutex_t mu;   /* metrics_text, read by the metrics thread */
  char *pools_path;
  char *metrics_text;   /* every pool's samples (op_controller_metrics()), under mu */
  tf_budget *budget;    /* writes per pool (op_controller_write_gate()) */
  const char *charging; /* the pool being reconciled (loop thread only) */
  long over_budget_ms;  /* set by the gate: the pool's budget was spent, free again in this long */
};

static void say(const op_controller *c, tf_log_level level, const char *fmt, ...)
{
  if (!c->cfg.log) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  c->cfg.log(level, line, c->cfg.log_payload);
}

static int64_t mono_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *join3(const char *a, const char *b, const char *c)
{
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s%s", a, b, c);
  return s;
}

/* ---- informer callbacks: every change queues the pools it concerns ---- */

static void enqueue_ns(op_controller *c, const char *ns)
{
  char *list = NULL;
  if (tf_informer_list(c->pools, ns, NULL, &list) < 0) return;
  cJSON *arr = cJSON_Parse(list);
  const cJSON *p;
  cJSON_ArrayForEach(p, arr)
  {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "metadata");
    const char *pns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "namespace"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name"));
    if (!pns || !name) continue;
    char *key = join3(pns, "/", name);
    if (key) (void)tf_workqueue_add(c->queue, key);
    free(key);
  }
  cJSON_Delete(arr);
  tf_free(list);
}

static void on_pool(tf_informer_op op, const char *key, const char *object, void *payload)
{
  (void)object;
  op_controller *c = payload;
  (void)tf_workqueue_add(c->queue, key);
  /* another pool's addresses may be free now, or taken */
  if (op != TF_INFORMER_UPDATED) enqueue_ns(c, NULL);
}

/* Queue the pool an object belongs to (its turnfleet.hzmi.dev/pool label, in its namespace). */
static void enqueue_owner(op_controller *c, const char *object)
{
  cJSON *root = cJSON_Parse(object);
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "metadata");
  const char *ns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "namespace"));
  const char *pool =
    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "labels"), POOL_LABEL));
  if (ns && pool) {
    char *k = join3(ns, "/", pool);
    if (k) (void)tf_workqueue_add(c->queue, k);
    free(k);
  }
  cJSON_Delete(root);
}

static void on_pod(tf_informer_op op, const char *key, const char *object, void *payload)
{
  (void)key;
  enqueue_owner(payload, object);
  /* a relay pod appearing or going changes the claims of every other pool */
  if (op != TF_INFORMER_UPDATED) enqueue_ns(payload, NULL);
}

static void on_configmap(tf_informer_op op, const char *key, const char *object, void *payload)
{
  (void)op;
  (void)key;
  enqueue_owner(payload, object);
}

static void on_node(tf_informer_op op, const char *key, const char *object, void *payload)
{
  (void)op;
  (void)key;
  (void)object;
  enqueue_ns(payload, NULL);
}

static void on_secret(tf_informer_op op, const char *key, const char *object, void *payload)
{
  (void)op;
  (void)object;
  char *ns = strdup(key);
  char *slash = ns ? strchr(ns, '/') : NULL;
  if (slash) {
    *slash = '\0';
    enqueue_ns(payload, ns);
  }
  free(ns);
}

/* ---- life cycle ---- */

static int informer(op_controller *c, tf_informer **out, const char *path, const char *labels, const char *fields,
                    tf_informer_cb cb)
{
  tf_informer_options io = TF_INFORMER_OPTIONS_INIT;
  io.path = path;
  io.label_selector = labels;
  io.field_selector = fields;
  io.resync_ms = c->cfg.resync_ms;
  io.on_change = cb;
  io.payload = c;
  io.log = c->cfg.log;
  io.log_payload = c->cfg.log_payload;
  io.backoff_initial_ms = 200;
  io.backoff_max_ms = 5000;
  io.bookmark_interval_ms = c->cfg.bookmark_interval_ms;
  if (tf_informer_new(out, c->kube, &io) < 0) {
    say(c, TF_LOG_ERROR, "informer %s: %s", path, tf_error_last()->message);
    return -1;
  }
  return 0;
}

int op_controller_new(op_controller **out, tf_kube *kube, const op_config *cfg)
{
  op_controller *c = calloc(1, sizeof(*c));
  *out = NULL;
  if (!c) return -1;
  c->cfg = *cfg;
  c->kube = kube;
  pthread_mutex_init(&c->mu, NULL);
  const char *ns = cfg->namespace_;
  char *pods = NULL, *secrets = NULL, *nodes = NULL, *configmaps = NULL, *endpoints = NULL;
  int ok = tf_kube_path(&c->pools_path, GROUP_API, "turnpools", ns, NULL, NULL) == 0 &&
           tf_kube_path(&pods, "/api/v1", "pods", ns, NULL, NULL) == 0 &&
           tf_kube_path(&secrets, "/api/v1", "secrets", ns, NULL, NULL) == 0 &&
           tf_kube_path(&nodes, "/api/v1", "nodes", NULL, NULL, NULL) == 0 &&
           tf_kube_path(&configmaps, "/api/v1", "configmaps", ns, NULL, NULL) == 0 &&
           tf_kube_path(&endpoints, "/api/v1", "endpoints", "default", NULL, NULL) == 0;
  tf_workqueue_options qo = TF_WORKQUEUE_OPTIONS_INIT;
  qo.base_delay_ms = 200;
  qo.max_delay_ms = 10000;
  ok = ok && tf_workqueue_new(&c->queue, &qo) == 0;
  ok = ok && informer(c, &c->pools, c->pools_path, NULL, NULL, on_pool) == 0 &&
       informer(c, &c->pods, pods, POOL_LABEL, NULL, on_pod) == 0 &&
       informer(c, &c->nodes, nodes, NULL, NULL, on_node) == 0 &&
       informer(c, &c->secrets, secrets, NULL, NULL, on_secret) == 0 &&
       /* its own <pool>-turn-uris and the vantage runners' <pool>-vantage: both carry the pool label */
       informer(c, &c->configmaps, configmaps, POOL_LABEL, NULL, on_configmap) == 0 &&
       /* the API servers' addresses, which no relay may take: as a node change, every pool */
       informer(c, &c->endpoints, endpoints, NULL, "metadata.name=kubernetes", on_node) == 0;
  ok = ok && tf_recorder_new(&c->recorder, kube, "turnfleet-operator") == 0;
  tf_budget_options bo = TF_BUDGET_OPTIONS_INIT;
  if (cfg->budget_writes > 0) bo.writes = cfg->budget_writes;
  if (cfg->budget_interval_ms > 0) bo.interval_ms = cfg->budget_interval_ms;
  ok = ok && tf_budget_new(&c->budget, &bo) == 0;
  tf_adapter_options ao = TF_ADAPTER_OPTIONS_INIT;
  ao.pools = c->pools;
  ao.pods = c->pods;
  ao.nodes = c->nodes;
  ao.secrets = c->secrets;
  ao.configmaps = c->configmaps;
  ao.api_endpoints = c->endpoints;
  ao.queue = c->queue;
  ao.recorder = c->recorder;
  ao.agent_image = cfg->agent_image;
  ao.agent_port = cfg->agent_port;
  ao.probe_interval_ms = cfg->probe_interval_ms;
  ao.publish_delay_ms = cfg->publish_delay_ms;
  ao.cli_port_base = cfg->cli_port_base;
  ao.cli_slots = cfg->cli_slots;
  ao.cli_stride = cfg->cli_stride;
  ao.allow_loopback_peers = cfg->allow_loopback_peers;
  ao.log = cfg->log;
  ao.log_payload = cfg->log_payload;
  if (ok && tf_adapter_new(&c->adapter, kube, &ao) < 0) {
    say(c, TF_LOG_ERROR, "adapter: %s", tf_error_last()->message);
    ok = 0;
  }
  tf_free(pods);
  tf_free(secrets);
  tf_free(nodes);
  tf_free(configmaps);
  tf_free(endpoints);
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
    if (tf_informer_start(all[i]) < 0) return -1;
  return 0;
}

int op_controller_synced(const op_controller *c)
{
  return tf_informer_has_synced(c->pools) && tf_informer_has_synced(c->pods) && tf_informer_has_synced(c->nodes) &&
         tf_informer_has_synced(c->secrets) && tf_informer_has_synced(c->configmaps) &&
         tf_informer_has_synced(c->endpoints);
}

void op_controller_enqueue_all(op_controller *c) { enqueue_ns(c, NULL); }
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
  tf_budget_free(c->budget);
  tf_workqueue_free(c->queue);
  free(c->pools_path);
  free(c->metrics_text);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* Every pool's samples in one text, made on the loop's thread (the adapter is the loop's). */
static void keep_metrics(op_controller *c)
{
  tf_metrics *m = NULL;
  char *text = NULL;
  if (tf_metrics_new(&m) == 0 && tf_adapter_metrics(c->adapter, m) == 0) (void)tf_metrics_to_text(&text, m);
  tf_metrics_free(m);
  pthread_mutex_lock(&c->mu);
  free(c->metrics_text);
  c->metrics_text = text ? strdup(text) : NULL;
  pthread_mutex_unlock(&c->mu);
  tf_free(text);
}

void op_controller_run_once(op_controller *c, long timeout_ms)
{
  char *key = NULL;
  (void)tf_recorder_flush(c->recorder); /* Events the server could not take before, when due */
  if (tf_workqueue_get(c->queue, &key, timeout_ms) != 0) return;
  long spent = tf_budget_wait(c->budget, key, mono_ms());
  if (spent > 0) {
    /* its budget is spent (said when it was): nothing to do but wait for it, quietly */
    (void)tf_workqueue_add_after(c->queue, key, spent);
    tf_workqueue_done(c->queue, key);
    tf_free(key);
    return;
  }
  c->charging = key;
  c->over_budget_ms = 0;
  long requeue = 0;
  tf_err rc = tf_adapter_reconcile(c->adapter, key, &requeue);
  c->charging = NULL;
  if (rc < 0) say(c, TF_LOG_DEBUG, "%s", tf_error_last()->message);
  else if (requeue > 0) (void)tf_workqueue_add_after(c->queue, key, requeue);
  keep_metrics(c);
  if (c->over_budget_ms > 0) {
    /* a stale view must not drive a write loop: the pool waits for its budget */
    say(c, TF_LOG_WARN, "%s: write budget spent; writes resume in %ld ms", key, c->over_budget_ms);
    (void)tf_workqueue_add_after(c->queue, key, c->over_budget_ms);
  } else if (rc < 0) {
    (void)tf_workqueue_add_rate_limited(c->queue, key);
  } else {
    tf_workqueue_forget(c->queue, key);
  }
  tf_workqueue_done(c->queue, key);
  tf_free(key);
}

long op_controller_write_gate(const char *method, const char *path, void *controller)
{
  (void)method;
  op_controller *c = controller;
  if (!c->charging || strstr(path, "/events")) return 1L << 30;
  long wait = 0;
  if (tf_budget_take(c->budget, c->charging, mono_ms(), &wait) == 0) return 1L << 30;
  c->over_budget_ms = wait > 0 ? wait : 1;
  return 0;
}

char *op_controller_metrics(op_controller *c)
{
  pthread_mutex_lock(&c->mu);
  const char *pools = c->metrics_text ? c->metrics_text : "";
  char *out = NULL;
  if (asprintf(&out,
               "%s# HELP turnfleet_operator_events_pending Events waiting to be sent again.\n"
               "# TYPE turnfleet_operator_events_pending gauge\nturnfleet_operator_events_pending %zu\n"
               "# HELP turnfleet_operator_events_dropped_total Events given up (queue full, or refused for good).\n"
               "# TYPE turnfleet_operator_events_dropped_total counter\nturnfleet_operator_events_dropped_total %llu\n"
               "# HELP turnfleet_operator_writes_over_budget_total Writes refused by the per-pool write budget.\n"
               "# TYPE turnfleet_operator_writes_over_budget_total counter\n"
               "turnfleet_operator_writes_over_budget_total %llu\n",
               pools, tf_recorder_pending(c->recorder), (unsigned long long)tf_recorder_dropped(c->recorder),
               (unsigned long long)tf_budget_refused(c->budget)) < 0)
    out = NULL;
  pthread_mutex_unlock(&c->mu);
  return out;
}