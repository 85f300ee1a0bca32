/* The Kubernetes adapter (adapter.h): one pool at a time, the facts of the
 * caches into the pool's engine, the engine's actions as Kubernetes writes
 * (expectations hold back a second create or delete the caches do not show
 * yet), then the owned objects and the status written only where they
 * differ (adapter_objects.c). Probes and scrapes run on adapter_work.c's
 * loop. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "adapter_internal.h"
#include "internal.h"
#include "kube_internal.h"
#include "model.h"
#include "smap.h"

#define GROUP_API "/apis/turnfleet.hzmi.dev/v1alpha1"
#define STATE_DIR "/var/lib/turnfleet"
#define PROBE_TIMEOUT_MS 3000
#define SCRAPE_TIMEOUT_MS 2000
/* a pool being deleted stays while its relays drain (the seed's finalizer) */
#define FINALIZER "turnfleet.hzmi.dev/drain"
/* a create or delete not yet in the pod cache is believed sent for this long (then the cache is) */
#define EXPECT_TTL_MS 30000

typedef enum { PEND_STOP = 0, PEND_RESTART = 1 } pend_kind;

typedef struct pending {
  pend_kind kind;
  uint64_t id;
  char *relay, *old_uid;
  int64_t delete_due_ms; /* restart: the old pod is to go (the engine waited the publication delay); 0: sent */
} pending;

typedef struct pool_state {
  char *key; /* ns/name */
  char *uid; /* the TURNPool's metadata.uid: a pool made anew gets a new state */
  uint64_t epoch;
  tf_engine *engine;
  char *pool_text, *nodes_text;
  char *endpoints_text; /* the API servers' Endpoints the engine's nodes reserve (NULL: none) */
  unsigned char secret_digest[32];
  char tls_digest[65]; /* the certificate the engine renders with; "" none */
  int shutting;        /* the pool is being deleted: its engine drains every relay (tf_engine_shutdown()) */
  pending *pend;
  size_t pend_count;
  char **seen; /* relay pods observed by the last reconcile */
  size_t seen_count;
  char *collision;            /* the CLI port collision last reported (NULL: none) */
  tf_adapter__expect *expect; /* its creates and deletes the pod cache does not show yet (by relay name) */
  char *metrics_token;        /* its agents' /metrics token (secret): kept in <pool>-relay-config */
  tf_adapter__sites sites;    /* where its planner may place relays: which other pools' relays are its claims */
  unsigned char claims_digest[32]; /* of the claims its engine holds (zeros: none known) */
} pool_state;

struct tf_adapter {
  tf_adapter_options o;
  tf_kube *kube;
  tf_informer *pools, *pods, *nodes, *secrets, *configmaps;
  tf_adapter__refs *refs; /* the Secrets the pools reference (version 4; NULL: `secrets` holds them) */
  tf_workqueue *queue;
  tf_recorder *recorder;
  tf_adapter__work *work;
  pool_state **states;
  size_t state_count;
  uint64_t next_epoch;
  tf_addr api_addr; /* the API server's, when its URL names an address (api_port not 0) */
  uint16_t api_port;
  tf_budget *budget;    /* writes per pool (tf_adapter_write_gate()) */
  tf_adapter__views *views; /* what its writes taught it, ahead of the caches ("ns/pool|what") */
  const char *charging; /* the pool being reconciled: its writes are charged to its budget */
  long over_budget_ms;  /* set by the gate: the pool's budget was spent, free again in this long */
  tf_adapter__index *index; /* the pools, relay pods and nodes as the changes forwarded them (any thread) */
  tf_smap *reconciles;      /* ns/name -> uint64_t: reconciles per pool (the loop's) */
};

/* ---- small helpers ---- */

static void say(const tf_adapter *c, tf_log_level level, const char *fmt, ...) TF__PRINTF(3, 4);
static void say(const tf_adapter *c, tf_log_level level, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  tf_log__emitv(c->o.log, c->o.log_payload, TF_LOG_DEBUG, level, fmt, ap);
  va_end(ap);
}

static int64_t wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void now_text(char *out, size_t n)
{
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static char *join3(const char *a, const char *b, const char *c)
{
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s%s", a, b, c);
  return s;
}

static void wipe_free(char *s)
{
  if (!s) return;
  OPENSSL_cleanse(s, strlen(s));
  free(s);
}

/* A Secret's data[key], base64-decoded (secret material: wipe_free()). NULL when absent or malformed. */
static char *secret_value(const char *secret_json, const char *key)
{
  cJSON *root = cJSON_Parse(secret_json);
  const char *b64 = cJSON_GetStringValue(
    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "data"), key));
  char *out = NULL;
  size_t len = b64 ? strlen(b64) : 0;
  if (b64 && len % 4 == 0 && (out = malloc(len / 4 * 3 + 1))) {
    int n = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)b64, (int)len);
    if (n < 0) {
      free(out);
      out = NULL;
    } else {
      while (n > 0 && len && b64[len - 1] == '=') n--, len--;
      out[n] = '\0';
      if (strlen(out) != (size_t)n) { /* a NUL inside: not a usable secret */
        wipe_free(out);
        out = NULL;
      }
    }
  }
  if (root) {
    cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "data");
    cJSON *v = cJSON_GetObjectItemCaseSensitive(d, key);
    if (cJSON_IsString(v)) OPENSSL_cleanse(v->valuestring, strlen(v->valuestring));
  }
  cJSON_Delete(root);
  return out;
}

static void state_free(pool_state *s)
{
  if (!s) return;
  tf_engine_free(s->engine);
  free(s->key);
  free(s->uid);
  free(s->pool_text);
  free(s->nodes_text);
  free(s->endpoints_text);
  for (size_t i = 0; i < s->pend_count; i++) {
    free(s->pend[i].relay);
    free(s->pend[i].old_uid);
  }
  free(s->pend);
  for (size_t i = 0; i < s->seen_count; i++) free(s->seen[i]);
  free(s->seen);
  free(s->collision);
  tf_adapter__expect_free(s->expect);
  wipe_free(s->metrics_token);
  tf_adapter__sites_clear(&s->sites);
  free(s);
}

static pool_state *state_find(tf_adapter *c, const char *key, size_t *at)
{
  for (size_t i = 0; i < c->state_count; i++)
    if (strcmp(c->states[i]->key, key) == 0) {
      if (at) *at = i;
      return c->states[i];
    }
  return NULL;
}

static void state_drop(tf_adapter *c, const char *key)
{
  size_t at;
  pool_state *s = state_find(c, key, &at);
  if (s) c->states[at] = c->states[--c->state_count];
  if (s) (void)tf_adapter__index_set_sites(c->index, key, s->uid, NULL);
  state_free(s);
  char *prefix = join3(key, "|", "");
  if (prefix) tf_adapter__views_forget(c->views, prefix);
  free(prefix);
}

/* The views key of pool @p pool's object @p what (an API path, or "pool"): malloc'd, NULL on no memory. */
static char *view_key(const char *pool, const char *what) { return join3(pool, "|", what); }

/* Keep what the server answered for @p what of pool @p pool (`ns/name`; tf_adapter__views_keep()). */
static void view_keep(tf_adapter *c, const char *pool, const char *what, const char *seen, const char *answer)
{
  char *key = view_key(pool, what);
  if (key && tf_adapter__views_keep(c->views, key, seen, answer, tf_kube__now_ms()) < 0) say(c, TF_LOG_DEBUG, "%s: not kept", key);
  free(key);
}

/* The same for the pool object itself (its status, its finalizers). */
static void pool_view_keep(tf_adapter *c, const char *ns, const char *name, const char *seen, const char *answer)
{
  char *pool = join3(ns, "/", name);
  if (pool) view_keep(c, pool, "pool", seen, answer);
  free(pool);
}

/* ---- writes ---- */

static void event(tf_adapter *c, const char *pool_json, const char *type, const char *reason, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (tf_recorder_event(c->recorder, pool_json, type, reason, msg) < 0)
    say(c, TF_LOG_WARN, "event %s: %s", reason, tf_error_last()->message);
}

/* Create or update one owned object so it has what @p desired says (tf_adapter__apply(): nothing sent when
 * nothing differs, one retry after a 409). 0 (also when nothing was written), -1. */
/* Someone else's object @p other of the name the pool needs: never taken over (nor could it be: no delete). */
static int not_owned(tf_adapter *c, const char *pool_json, const char *coll, const char *name, const char *other)
{
  const char *kind = strstr(coll, "/secrets") ? "Secret" : "ConfigMap";
  char *ns = tf_adapter__meta_string(other, "namespace");
  event(c, pool_json, "Warning", "NotOwned", "%s %s/%s exists and is not this pool's (its ownerReferences differ): "
        "not overwritten; delete or rename it", kind, ns ? ns : "", name);
  say(c, TF_LOG_WARN, "%s/%s: not this pool's (its ownerReferences differ): not overwritten", coll, name);
  free(ns);
  return -1;
}

static int write_object(tf_adapter *c, const pool_state *s, const char *pool_json, const char *coll,
                        const char *name, const char *desired, const char *observed)
{
  if (observed && tf_adapter__same_owners(desired, observed) != 1) return not_owned(c, pool_json, coll, name, observed);
  char *what = NULL, *learnt = NULL, *objpath = join3(coll, "/", name), *key = objpath ? view_key(s->key, objpath) : NULL;
  if (!key) {
    free(objpath);
    return -1;
  }
  /* a cache that has not caught up with our last write is not written from again */
  const char *seen = tf_adapter__views_pick(c->views, key, observed);
  tf_err rc = tf_adapter__apply(c->kube, coll, name, desired, seen, NULL, &what, &learnt);
  if (what) say(c, rc ? TF_LOG_WARN : TF_LOG_INFO, "%s", what);
  /* someone else's, which the cache does not show (it holds ours by label): said, and not kept as a view (the
   * cache would not show its going) */
  const int foreign = rc == TF_ECONFLICT && learnt && tf_adapter__same_owners(desired, learnt) != 1;
  if (foreign) (void)not_owned(c, pool_json, coll, name, learnt);
  if (learnt || rc == TF_ECONFLICT) (void)tf_adapter__views_keep(c->views, key, seen, foreign ? NULL : learnt, tf_kube__now_ms());
  if (learnt) OPENSSL_cleanse(learnt, strlen(learnt));
  free(learnt);
  free(what);
  free(key);
  free(objpath);
  return rc ? -1 : 0;
}

/* Delete pod @p name (uid @p uid) unless its delete was sent and the cache does not show it yet (the
 * expectations of @p s; NULL: none). 0, -1. */
static int delete_pod(tf_adapter *c, pool_state *s, const char *ns, const char *name, const char *uid, long grace)
{
  char *path = NULL;
  const int64_t now = tf_kube__now_ms();
  if (s && uid && *uid && tf_adapter__expect_deleting(s->expect, name, uid, now)) {
    say(c, TF_LOG_DEBUG, "pod %s/%s: its delete is sent, not seen yet: not sent again", ns, name);
    return 0;
  }
  if (tf_kube_path(&path, "/api/v1", "pods", ns, name, NULL) < 0) return -1;
  tf_kube_delete_options d = TF_KUBE_DELETE_OPTIONS_INIT;
  d.precondition_uid = uid && *uid ? uid : NULL;
  d.grace_period_seconds = grace;
  d.propagation = TF_KUBE_PROPAGATION_BACKGROUND;
  tf_kube_status *st = NULL;
  tf_err rc = tf_kube_delete(c->kube, path, &d, NULL, &st);
  say(c, TF_LOG_INFO, "delete pod %s/%s (grace %lds)%s%s", ns, name, grace, rc && rc != TF_ENOTFOUND ? ": " : "",
      rc && rc != TF_ENOTFOUND ? tf_kube_status_message(st) : "");
  if (s && rc == 0 && uid && *uid) (void)tf_adapter__expect_delete(s->expect, name, uid, now);
  tf_kube_status_free(st);
  tf_free(path);
  return rc == 0 || rc == TF_ENOTFOUND ? 0 : -1;
}

/* ---- one pool ---- */

typedef struct pods_view {
  tf_adapter__pod *pods;
  const char **json;         /* borrowed from objs, or from own */
  tf_informer_object **objs; /* the cache's objects, held for the reconcile */
  char **own;                /* a newer copy than the cache's (our last write's answer), or NULL */
  size_t n, nobjs;
} pods_view;

static void pods_clear(pods_view *v)
{
  for (size_t i = 0; i < v->n; i++) {
    tf_adapter__pod_clear(&v->pods[i]);
    free(v->own[i]);
  }
  tf_informer_objects_release(v->objs, v->nobjs);
  free(v->pods);
  free(v->json);
  free(v->own);
  memset(v, 0, sizeof(*v));
}

/* The relay pods of pool @p name in @p ns that @p pool_uid owns (another owner's pods are not ours to act on). */
static int pods_read(tf_adapter *c, pods_view *v, const char *ns, const char *name, const char *pool_uid)
{
  memset(v, 0, sizeof(*v));
  char *label = join3(TF_POD__LABEL_POOL, "=", name);
  int rc = label && tf_informer_list_objects(c->pods, ns, label, &v->objs, &v->nobjs) == 0 ? 0 : -1;
  free(label);
  v->pods = calloc(v->nobjs + 1, sizeof(tf_adapter__pod));
  v->json = calloc(v->nobjs + 1, sizeof(char *));
  v->own = calloc(v->nobjs + 1, sizeof(char *));
  if (!v->pods || !v->json || !v->own) rc = -1;
  char *pool = join3(ns, "/", name);
  if (!pool) rc = -1;
  for (size_t i = 0; rc == 0 && i < v->nobjs; i++) {
    const char *text = tf_informer_object_json(v->objs[i], NULL), *slash = strchr(tf_informer_object_key(v->objs[i]), '/');
    char *copy = NULL;
    /* a pod whose cached copy is older than what our last write of it was answered */
    char *path = NULL, *key = NULL;
    if (slash && tf_kube_path(&path, "/api/v1", "pods", ns, slash + 1, NULL) == 0 && (key = view_key(pool, path))) {
      const char *better = tf_adapter__views_pick(c->views, key, text);
      if (better != text && (copy = strdup(better))) text = copy;
    }
    free(key);
    tf_free(path);
    tf_adapter__pod pod;
    if (tf_adapter__pod_parse(&pod, text) == 0) {
      if (strcmp(pod.owner_uid, pool_uid) == 0) {
        v->pods[v->n] = pod;
        v->json[v->n] = text;
        v->own[v->n] = copy;
        v->n++;
        continue;
      }
      tf_adapter__pod_clear(&pod);
    }
    free(copy);
  }
  free(pool);
  return rc;
}

static const tf_adapter__pod *pod_find(const pods_view *v, const char *relay)
{
  for (size_t i = 0; i < v->n; i++)
    if (strcmp(v->pods[i].name, relay) == 0) return &v->pods[i];
  return NULL;
}

static void pend_add(pool_state *s, pend_kind kind, uint64_t id, const char *relay, const char *old_uid,
                     int64_t delete_due_ms)
{
  pending *grown = realloc(s->pend, (s->pend_count + 1) * sizeof(*grown));
  if (!grown) return;
  s->pend = grown;
  pending *p = &s->pend[s->pend_count++];
  p->kind = kind;
  p->id = id;
  p->relay = strdup(relay);
  p->old_uid = old_uid ? strdup(old_uid) : NULL;
  p->delete_due_ms = delete_due_ms;
}

static void pend_remove(pool_state *s, size_t i)
{
  free(s->pend[i].relay);
  free(s->pend[i].old_uid);
  s->pend[i] = s->pend[--s->pend_count];
}

static const pending *pend_for(const pool_state *s, const char *relay)
{
  for (size_t i = 0; i < s->pend_count; i++)
    if (s->pend[i].relay && strcmp(s->pend[i].relay, relay) == 0) return &s->pend[i];
  return NULL;
}

/* The Node cache as a List for tf_nodes_parse(). */
static int same_text(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static char *nodes_list(tf_adapter *c)
{
  char *arr = NULL; /* the cached texts joined: nothing parsed or printed */
  if (tf_informer_list(c->nodes, NULL, NULL, &arr) < 0) return NULL;
  char *text = join3("{\"kind\":\"List\",\"items\":", arr, "}");
  tf_free(arr);
  return text;
}

/* Other pools' relay pods as claims on the engine: their addresses and ports where this pool's planner may place
 * relays, their CLI ports on the nodes it may place them on (the index: no pod is read here). A CLI port this
 * pool's relays still share with another relay on their node (host networking: one 127.0.0.1; two pools
 * creating relays at once) is reported once, as a Warning Event and in the log. */
static void claims(tf_adapter *c, pool_state *s, const char *key, const char *pool_json, const char *pool_uid)
{
  size_t refused = 0, collisions = 0;
  char why[1024];
  if (tf_adapter__index_claims(c->index, s->engine, key, pool_uid, &s->sites, s->claims_digest, &refused, why,
                               sizeof(why), &collisions) < 0) {
    say(c, TF_LOG_WARN, "%s: claims: no memory", key);
    return;
  }
  if (refused) say(c, TF_LOG_WARN, "%s: %zu claims refused: %s", key, refused, tf_error_last()->message);
  if (collisions == 0) {
    free(s->collision);
    s->collision = NULL;
  } else if (!s->collision || strcmp(s->collision, why) != 0) {
    free(s->collision);
    s->collision = strdup(why);
    say(c, TF_LOG_WARN, "%s: CLI port collision: %s", key, why);
    event(c, pool_json, "Warning", "CLIPortCollision", "%s: only one coturn on a node can listen on a CLI "
          "port (the operator's --cli-port-slots and --cli-ports-per-pool)", why);
  }
}

/* The CLI port a relay's running config has (from the observed relay-config Secret); 0: unknown. */
static uint16_t observed_cli_port(const char *config_secret, const char *relay)
{
  if (!config_secret) return 0;
  char *k = join3(relay, ".conf", "");
  char *conf = k ? secret_value(config_secret, k) : NULL;
  free(k);
  uint16_t port = 0;
  tf_relayctl_config *rc = NULL;
  if (conf && tf_relayctl_config_parse(&rc, conf, strlen(conf)) == 0) port = tf_relayctl_config_cli_port(rc);
  tf_relayctl_config_free(rc);
  wipe_free(conf);
  return port;
}

/* The pool's metrics token: the one its relay-config Secret holds (so that every leader keeps the one the
 * agents mount), else the one made before, else a new one from 32 random bytes. -1 without one. */
static int metrics_token(pool_state *s, const char *config_secret)
{
  char *seen = config_secret ? secret_value(config_secret, TF_MANIFEST_METRICS_TOKEN_KEY) : NULL;
  if (seen && strlen(seen) == 64 && strspn(seen, "0123456789abcdef") == 64) {
    if (!s->metrics_token || strcmp(s->metrics_token, seen) != 0) {
      wipe_free(s->metrics_token);
      s->metrics_token = seen;
      return 0;
    }
  }
  wipe_free(seen);
  if (s->metrics_token) return 0;
  unsigned char raw[32];
  char *hex = malloc(65);
  if (!hex || RAND_bytes(raw, sizeof(raw)) != 1) {
    free(hex);
    return -1;
  }
  for (size_t i = 0; i < sizeof(raw); i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
  OPENSSL_cleanse(raw, sizeof(raw));
  s->metrics_token = hex;
  return 0;
}

/* Merge-patch the pool's /status with @p body unless @p pool_json already says it.
 * 1 written, 0 nothing to write, -1 failed. */
static int patch_status(tf_adapter *c, const char *pool_json, const char *ns, const char *name, const char *body)
{
  int matches = 0;
  if (tf_manifest_matches(&matches, NULL, body, strlen(body), pool_json, strlen(pool_json)) == 0 && matches) return 0;
  char *path = NULL, *answer = NULL;
  tf_kube_status *st = NULL;
  int rc = 1;
  if (tf_kube_path(&path, GROUP_API, "turnpools", ns, name, "status") < 0 ||
      tf_kube_patch(c->kube, path, TF_KUBE_PATCH_MERGE, body, &answer, &st) < 0) {
    say(c, TF_LOG_WARN, "%s/%s: status: %s", ns, name, st ? tf_kube_status_message(st) : "no memory");
    rc = -1;
  } else {
    pool_view_keep(c, ns, name, pool_json, answer); /* the pool as it is now, till the cache shows it */
  }
  tf_kube_status_free(st);
  tf_free(answer);
  tf_free(path);
  return rc;
}

static int refuse(tf_adapter *c, const char *pool_json, const char *ns, const char *name, const char *reason,
                  const char *message)
{
  char now[32];
  now_text(now, sizeof(now));
  char *body = tf_adapter__refused_status(pool_json, tf_adapter__generation(pool_json), reason, message, now);
  int rc = body ? patch_status(c, pool_json, ns, name, body) : -1;
  if (rc > 0) {
    event(c, pool_json, "Warning", reason, "%s", message);
    say(c, TF_LOG_WARN, "%s/%s refused (%s): %s", ns, name, reason, message);
  }
  free(body);
  return rc < 0 ? -1 : 0;
}

/* The API server this adapter talks to, where its URL names an address (read once, at start):
 * no relay may take that address with a range or listener holding its port (a relay there would
 * shadow the API server for the node's pods, or be shadowed by it). Through libcurl's URL parser. */
static void find_api_server(tf_adapter *c)
{
  const char *url = tf_kube_server(c->kube);
  CURLU *u = url ? curl_url() : NULL;
  char *host = NULL, *port = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK && curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
    size_t n = strlen(host);
    if (n > 2 && host[0] == '[' && host[n - 1] == ']') { /* an IPv6 literal */
      memmove(host, host + 1, n - 2);
      host[n - 2] = '\0';
    }
    long p = strtol(port, NULL, 10);
    if (p > 0 && p <= 65535 && tf_addr_parse(&c->api_addr, host) == 0) c->api_port = (uint16_t)p;
  }
  curl_free(host);
  curl_free(port);
  curl_url_cleanup(u);
}

/* The conditions the status just written turned bad: a Warning Event each, named by its reason. A
 * transition is one Event: the old status is the pool's as read, so a leader that takes over and
 * writes the same status sends none. */
static void condition_events(tf_adapter *c, const char *pool_json, const char *body)
{
  char *list = tf_adapter__condition_troubles(body, pool_json);
  cJSON *a = list ? cJSON_Parse(list) : NULL;
  const cJSON *t;
  cJSON_ArrayForEach(t, a)
  {
    const char *reason = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "reason"));
    const char *message = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "message"));
    if (reason && message) event(c, pool_json, "Warning", reason, "%s", message);
  }
  cJSON_Delete(a);
  cJSON_free(list);
}

/* The Secret @p name of @p ns as cached (tf_free(); secret material): 0, TF_ENOTFOUND, or TF_EUNAVAILABLE
 * while its cache has not synced (the pool is retried: it is not refused for a Secret not read yet). */
static tf_err read_secret(const tf_adapter *c, const char *ns, const char *name, char **out)
{
  *out = NULL;
  char *key = join3(ns, "/", name);
  if (!key) return tf_error__set(TF_ENOMEM, "Secret %s/%s", ns, name);
  tf_err rc = c->refs ? tf_adapter__refs_get(c->refs, key, out) : tf_informer_get(c->secrets, key, out);
  if (rc < 0 && rc != TF_ENOTFOUND) say(c, TF_LOG_DEBUG, "%s", tf_error_last()->message);
  free(key);
  return rc;
}

/* Cache the Secrets @p pool references (auth secretRef, previousSecretRef, the listeners' tlsSecretRef), and
 * no others (@p pool NULL: none). 0, -1 when a cache could not be made (retry). */
static int reference_secrets(tf_adapter *c, const char *ns, const char *name, const tf_pool *pool)
{
  if (!c->refs) return 0;
  char *key = join3(ns, "/", name);
  const char *names[2 + 64] = {NULL};
  size_t n = 0;
  for (int prev = 0; pool && prev < 2; prev++) {
    const char *sname = NULL, *skey = NULL;
    if (tf_pool_secret_ref(pool, prev, &sname, &skey) == 0) names[n++] = sname;
  }
  for (size_t i = 0; pool && i < tf_pool_listener_count(pool) && n < sizeof(names) / sizeof(names[0]); i++)
    names[n++] = tf_pool_listener_tls_secret(pool, i);
  int rc = key ? tf_adapter__refs_set(c->refs, key, ns, names, n) : -1;
  if (rc < 0) say(c, TF_LOG_WARN, "%s/%s: cannot cache its Secrets (retry)", ns, name);
  free(key);
  return rc;
}

typedef struct pool_inputs {
  tf_pool *pool;
  char tls_digest[65];      /* the tls/dtls listeners' certificate and key (SHA-256); "" without such listeners */
  char *secret, *previous;  /* secret material */
  char *cli_master;         /* secret material */
  char *nodes_text;
  char *endpoints_text;     /* the `kubernetes` Endpoints of `default`, or NULL */
} pool_inputs;

static void inputs_clear(pool_inputs *in)
{
  tf_pool_free(in->pool);
  wipe_free(in->secret);
  wipe_free(in->previous);
  wipe_free(in->cli_master);
  free(in->nodes_text);
  free(in->endpoints_text);
  memset(in, 0, sizeof(*in));
}

/* Whether @p crt and @p key (PEM) are a certificate and its key: 0 with @p digest the hex SHA-256 of both;
 * -1 with @p why naming the key that is wrong (`tls.crt: no PEM certificate`). */
static int tls_pair_check(const char *crt, const char *key, char digest[65], char *why, size_t why_len)
{
  digest[0] = '\0';
  BIO *cb = crt ? BIO_new_mem_buf(crt, -1) : NULL, *kb = key ? BIO_new_mem_buf(key, -1) : NULL;
  X509 *cert = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
  EVP_PKEY *pk = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
  int rc = -1;
  if (!cert) snprintf(why, why_len, "tls.crt: %s", crt ? "no PEM certificate" : "missing");
  else if (!pk) snprintf(why, why_len, "tls.key: %s", key ? "no PEM private key (or one with a passphrase)" : "missing");
  else if (X509_check_private_key(cert, pk) != 1) snprintf(why, why_len, "tls.key: not the key of tls.crt");
  else rc = 0;
  if (rc == 0) {
    unsigned char md[32];
    unsigned int n = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, crt, strlen(crt)) &&
        EVP_DigestUpdate(ctx, key, strlen(key)) && EVP_DigestFinal_ex(ctx, md, &n) && n == 32) {
      for (unsigned int i = 0; i < 32; i++) snprintf(digest + 2 * i, 3, "%02x", md[i]);
    } else {
      snprintf(why, why_len, "tls: cannot hash the certificate");
      rc = -1;
    }
    EVP_MD_CTX_free(ctx);
  }
  X509_free(cert);
  EVP_PKEY_free(pk);
  BIO_free(cb);
  BIO_free(kb);
  return rc;
}

/* Parse, validate, read the secrets. 0; 1 refused (status and Event written); -1 retry. */
static int read_inputs(tf_adapter *c, pool_inputs *in, const char *pool_json, const char *ns, const char *name)
{
  memset(in, 0, sizeof(*in));
  if (tf_pool_parse(&in->pool, pool_json, strlen(pool_json), TF_FORMAT_JSON) < 0) {
    refuse(c, pool_json, ns, name, "InvalidSpec", tf_error_last()->message);
    (void)reference_secrets(c, ns, name, NULL);
    return 1;
  }
  /* the Secrets it names are cached (and watched: one that appears later queues it) from now on */
  if (reference_secrets(c, ns, name, in->pool) < 0) return -1;
  tf_problems *pr = NULL;
  tf_err vr = tf_pool_validate(&pr, in->pool);
  if (vr < 0 && !tf_problems_count(pr)) {
    tf_problems_free(pr);
    return -1;
  }
  if (tf_problems_count(pr)) {
    char msg[1024] = "";
    for (size_t i = 0; i < tf_problems_count(pr); i++) {
      size_t used = strlen(msg);
      snprintf(msg + used, sizeof(msg) - used, "%s%s: %s", i ? "; " : "", tf_problems_path(pr, i),
               tf_problems_message(pr, i));
    }
    tf_problems_free(pr);
    refuse(c, pool_json, ns, name, "InvalidSpec", msg);
    return 1;
  }
  tf_problems_free(pr);
  for (int prev = 0; prev < 2; prev++) {
    const char *sname = NULL, *skey = NULL;
    if (tf_pool_secret_ref(in->pool, prev, &sname, &skey) < 0 || !sname || !*sname) {
      if (!prev) {
        refuse(c, pool_json, ns, name, "SecretMissing", "spec.auth.secretRef: required");
        return 1;
      }
      continue;
    }
    char *sj = NULL, *value = NULL;
    tf_err sg = read_secret(c, ns, sname, &sj);
    if (sg < 0 && sg != TF_ENOTFOUND) return -1;
    int found = sg == 0;
    if (found) value = secret_value(sj, skey);
    if (sj) OPENSSL_cleanse(sj, strlen(sj));
    tf_free(sj);
    int bad = value && tf_pool_check_secret(in->pool, prev, value, strlen(value)) < 0; /* names Secret and key */
    if (!value || bad) {
      wipe_free(value);
      char msg[512];
      if (bad) snprintf(msg, sizeof(msg), "%s", tf_error_last()->message);
      else if (!found)
        snprintf(msg, sizeof(msg), "spec.auth.%s: Secret %s/%s not found", prev ? "previousSecretRef" : "secretRef", ns,
                 sname);
      else snprintf(msg, sizeof(msg), "spec.auth.%s: Secret %s/%s has no key %s", prev ? "previousSecretRef" : "secretRef",
                    ns, sname, skey);
      if (!prev) {
        refuse(c, pool_json, ns, name, bad ? "SecretInvalid" : "SecretMissing", msg);
        return 1;
      }
      say(c, TF_LOG_WARN, "%s/%s: %s (the previous secret is optional)", ns, name, msg);
      continue;
    }
    if (prev) in->previous = value;
    else in->secret = value;
  }
  if (in->previous && strcmp(in->previous, in->secret) == 0) {
    wipe_free(in->previous);
    in->previous = NULL;
  }
  /* the certificate of its tls/dtls listeners, which its relay pods mount */
  const char *tls = tf_manifest_tls_secret(in->pool);
  if (tls) {
    char *tj = NULL, why[256];
    tf_err tg = read_secret(c, ns, tls, &tj);
    if (tg < 0 && tg != TF_ENOTFOUND) return -1;
    char *crt = tg == 0 ? secret_value(tj, "tls.crt") : NULL, *key = tg == 0 ? secret_value(tj, "tls.key") : NULL;
    if (tj) OPENSSL_cleanse(tj, strlen(tj));
    tf_free(tj);
    int bad = tg == TF_ENOTFOUND ? (snprintf(why, sizeof(why), "not found"), 1)
                                 : tls_pair_check(crt, key, in->tls_digest, why, sizeof(why)) < 0;
    wipe_free(crt);
    wipe_free(key);
    if (bad) {
      char msg[512];
      snprintf(msg, sizeof(msg), "spec.listeners: tlsSecretRef Secret %s/%s: %s", ns, tls, why);
      refuse(c, pool_json, ns, name, "TLSSecretInvalid", msg);
      return 1;
    }
  }
  /* each pool's CLI master password from its own secret and name (the engine derives one per relay) */
  char *ns_slash = join3("cli/", ns, "/"), *cli_for = ns_slash ? join3(ns_slash, name, "") : NULL;
  free(ns_slash);
  if (!cli_for || tf_reconcile_cli_password(&in->cli_master, in->secret, cli_for) < 0) {
    free(cli_for);
    return -1;
  }
  free(cli_for);
  in->nodes_text = nodes_list(c);
  if (!in->nodes_text) return -1;
  if (c->o.version >= 2 && c->o.api_endpoints &&
      tf_informer_get(c->o.api_endpoints, "default/kubernetes", &in->endpoints_text) == TF_ENOMEM)
    return -1;
  return 0;
}

/* Hand the inputs to the pool's engine (making it when new). 0; 1 refused; -1 retry. */
static int feed_engine(tf_adapter *c, pool_state *s, pool_inputs *in, const char *pool_json, const char *ns,
                       const char *name)
{
  const char *secrets[2] = {in->secret, in->previous};
  tf_coturn_options co = TF_COTURN_OPTIONS_INIT;
  co.secrets = secrets;
  co.secrets_count = in->previous ? 2 : 1;
  co.state_dir = STATE_DIR;
  co.cli_port = tf_adapter__cli_port_base(ns, name, c->o.cli_port_base, c->o.cli_slots, c->o.cli_stride);
  co.cli_password = in->cli_master;
  co.allow_loopback_peers = c->o.allow_loopback_peers;
  if (in->tls_digest[0]) {
    co.cert_file = TF_MANIFEST_TLS_CERT_PATH;
    co.key_file = TF_MANIFEST_TLS_KEY_PATH;
    co.cert_digest = in->tls_digest; /* a new certificate is a new config: the relays roll */
  }
  unsigned char digest[32];
  unsigned int dl = 0;
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) && EVP_DigestUpdate(md, in->secret, strlen(in->secret) + 1) &&
           (!in->previous || EVP_DigestUpdate(md, in->previous, strlen(in->previous) + 1)) &&
           EVP_DigestFinal_ex(md, digest, &dl);
  EVP_MD_CTX_free(md);
  if (!ok) return -1;
  char *pool_text = NULL;
  if (tf_pool_to_json(&pool_text, in->pool) < 0) return -1;
  const int pool_moved = !s->pool_text || strcmp(s->pool_text, pool_text) != 0;
  const int nodes_moved = !s->nodes_text || strcmp(s->nodes_text, in->nodes_text) != 0 ||
                          !same_text(s->endpoints_text, in->endpoints_text);
  /* the nodes parsed only when the engine, its sites or its nodes need them (at 100 pools every reconcile
   * parsed every node again for nothing) */
  tf_nodes *nodes = NULL;
  if (!s->engine || pool_moved || nodes_moved || !s->sites.known) {
    if (tf_nodes_parse(&nodes, in->nodes_text, strlen(in->nodes_text)) < 0) {
      say(c, TF_LOG_ERROR, "nodes: %s", tf_error_last()->message);
      tf_free(pool_text);
      return -1;
    }
    if (c->api_port) (void)tf_nodes_reserve_endpoint(nodes, &c->api_addr, c->api_port, "the Kubernetes API server");
    if (in->endpoints_text &&
        tf_nodes_reserve_endpoints(nodes, in->endpoints_text, strlen(in->endpoints_text), "the Kubernetes API server") < 0)
      say(c, TF_LOG_WARN, "endpoints default/kubernetes: %s", tf_error_last()->message);
  }
  int rc = 0, sites_moved = 0;
  if (!s->engine) {
    tf_engine_options eo = TF_ENGINE_OPTIONS_INIT;
    eo.coturn = &co;
    eo.probe_interval_ms = c->o.probe_interval_ms;
    eo.count_interval_ms = c->o.probe_interval_ms;
    eo.publish_delay_ms = c->o.publish_delay_ms;
    eo.probe_timeout_ms = PROBE_TIMEOUT_MS;
    eo.count_timeout_ms = SCRAPE_TIMEOUT_MS;
    eo.probe_first_delay_ms = 500;
    eo.count_first_delay_ms = 1000;
    tf_pool *pool = in->pool;
    in->pool = NULL;
    sites_moved = 1;
    if (tf_adapter__sites_plan(&s->sites, pool, nodes) < 0) say(c, TF_LOG_WARN, "%s: sites: no memory", s->key);
    memset(s->claims_digest, 0, sizeof(s->claims_digest)); /* a new engine holds no claims */
    if (tf_engine_new(&s->engine, pool, nodes, &eo) < 0) {
      refuse(c, pool_json, ns, name, "InvalidSpec", tf_error_last()->message);
      rc = 1;
    } else {
      (void)tf_engine_set_status(s->engine, pool_json, strlen(pool_json));
      s->epoch = ++c->next_epoch;
    }
    nodes = NULL;
  } else {
    if (pool_moved) {
      tf_pool *pool = in->pool;
      in->pool = NULL;
      if (tf_engine_set_pool(s->engine, pool) < 0) {
        event(c, pool_json, "Warning", "ChangeRefused", "the pool change is refused, the running pool stays: %s",
              tf_error_last()->message);
        tf_free(pool_text);
        pool_text = NULL;
      } else {
        sites_moved = 1;
      }
    }
    /* where the engine's pool may go on these nodes: before the engine takes them */
    if (sites_moved || nodes_moved || !s->sites.known) {
      sites_moved = 1;
      if (tf_adapter__sites_plan(&s->sites, tf_engine_pool(s->engine), nodes) < 0)
        say(c, TF_LOG_WARN, "%s: sites: no memory", s->key);
    }
    if (nodes_moved) {
      tf_nodes *n = nodes;
      nodes = NULL;
      if (tf_engine_set_nodes(s->engine, n) < 0) {
        say(c, TF_LOG_WARN, "%s: nodes refused: %s", s->key, tf_error_last()->message);
        tf_adapter__sites_clear(&s->sites); /* the engine keeps nodes these sites are not of: every claim */
      }
    }
    int rotated = memcmp(digest, s->secret_digest, sizeof(digest)) != 0;
    if (rotated || strcmp(in->tls_digest, s->tls_digest) != 0) {
      if (tf_engine_set_coturn_options(s->engine, &co) < 0)
        event(c, pool_json, "Warning", "ChangeRefused", "the %s change is refused: %s",
              rotated ? "secret" : "certificate", tf_error_last()->message);
      else if (rotated) /* the engine probes every relay with the secret all of them take, and rolls them */
        event(c, pool_json, "Normal", "SecretRotated", "the shared secret changed: the relays roll one at a time%s",
              in->previous ? "" : " (no previousSecretRef: a relay that takes only the old one leaves the turn "
                                  "URIs on its next probe)");
    }
  }
  tf_nodes_free(nodes);
  if (rc == 0) {
    if (pool_text) {
      free(s->pool_text);
      s->pool_text = strdup(pool_text);
    }
    if (nodes_moved) {
      free(s->nodes_text);
      s->nodes_text = strdup(in->nodes_text);
      free(s->endpoints_text);
      s->endpoints_text = in->endpoints_text ? strdup(in->endpoints_text) : NULL;
    }
    memcpy(s->secret_digest, digest, sizeof(digest));
    memcpy(s->tls_digest, in->tls_digest, sizeof(s->tls_digest));
    if (sites_moved && tf_adapter__index_set_sites(c->index, s->key, s->uid, &s->sites) < 0)
      say(c, TF_LOG_WARN, "%s: sites: no memory", s->key);
  }
  tf_free(pool_text);
  OPENSSL_cleanse(digest, sizeof(digest));
  return rc;
}

static size_t rec_index(const tf_reconcile *rec, const char *relay)
{
  for (size_t i = 0; i < tf_reconcile_relay_count(rec); i++)
    if (strcmp(tf_reconcile_relay_name(rec, i), relay) == 0) return i;
  return (size_t)-1;
}

static const tf_engine_relay *view_of(const tf_engine *e, const char *relay)
{
  for (size_t i = 0; i < tf_engine_relay_count(e); i++)
    if (strcmp(tf_engine_relay_at(e, i)->name, relay) == 0) return tf_engine_relay_at(e, i);
  return NULL;
}

/* Create relay @p relay's pod from the current reconcile. The pod's uid (malloc'd), or NULL. */
static char *create_pod(tf_adapter *c, pool_state *s, const char *pool_json, const char *ns, const char *uid,
                        const char *relay)
{
  const tf_reconcile *rec = tf_engine_reconcile(s->engine);
  size_t i = rec ? rec_index(rec, relay) : (size_t)-1;
  if (i == (size_t)-1) return NULL;
  /* made already, and not in the pod cache yet: that pod is the relay's (no second create) */
  const char *made_uid = tf_adapter__expect_creating(s->expect, relay, tf_kube__now_ms());
  if (made_uid) return strdup(made_uid);
  tf_manifest_options mo = TF_MANIFEST_OPTIONS_INIT;
  mo.pool_uid = uid;
  mo.agent_image = c->o.agent_image;
  mo.agent_port = c->o.agent_port;
  mo.state_dir = STATE_DIR;
  mo.metrics_token = s->metrics_token;
  char *body = NULL, *coll = NULL, *made = NULL, *out = NULL;
  tf_kube_status *st = NULL;
  if (tf_manifest_relay_pod(&body, tf_engine_pool(s->engine), rec, i, &mo) < 0) {
    event(c, pool_json, "Warning", "PodRefused", "relay %s: %s", relay, tf_error_last()->message);
    return NULL;
  }
  if (tf_kube_path(&coll, "/api/v1", "pods", ns, NULL, NULL) == 0) {
    tf_err rc = tf_kube_create(c->kube, coll, body, &made, &st);
    if (rc == TF_ECONFLICT) {
      /* made before (an operator killed after the create): ours when we own it and it runs this config */
      char *path = join3(coll, "/", relay);
      tf_free(made);
      made = NULL;
      tf_adapter__pod seen;
      if (path && tf_kube_get(c->kube, path, &made, NULL) == 0 && tf_adapter__pod_parse(&seen, made) == 0) {
        if (strcmp(seen.owner_uid, uid) == 0 && !seen.deleting &&
            strcmp(seen.config_hash, tf_reconcile_relay_config_hash(rec, i)) == 0)
          out = strdup(seen.uid);
        tf_adapter__pod_clear(&seen);
      }
      free(path);
      if (!out) event(c, pool_json, "Warning", "PodExists", "relay %s: a pod of that name exists and is not ours", relay);
    } else if (rc == 0) {
      out = tf_adapter__meta_string(made, "uid");
      if (out) (void)tf_adapter__expect_create(s->expect, relay, out, tf_kube__now_ms());
      say(c, TF_LOG_INFO, "create pod %s/%s", ns, relay);
      const tf_engine_relay *v = view_of(s->engine, relay);
      event(c, pool_json, "Normal", "RelayCreated", "relay %s on %s/%u-%u", relay, v ? v->address : "?",
            v ? v->ports.start : 0, v ? v->ports.end : 0);
    } else {
      event(c, pool_json, "Warning", "CreateFailed", "relay %s: pod: %s", relay, tf_kube_status_message(st));
    }
  }
  tf_kube_status_free(st);
  tf_free(made);
  tf_free(coll);
  tf_free(body);
  return out;
}

/* Feed the facts: the pool's pods, results of probes and scrapes, pods that went. */
static void observe(tf_adapter *c, pool_state *s, const pods_view *pv, const char *config_secret, int64_t now)
{
  const int64_t wall = wall_ms();
  tf_adapter__result *res = NULL;
  size_t nr = tf_adapter__work_take(c->work, s->key, &res);
  for (size_t i = 0; i < nr; i++) {
    if (res[i].epoch == s->epoch) {
      if (res[i].kind == TF_ADAPTER__PROBE)
        (void)tf_engine_probe_done(s->engine, res[i].id, res[i].ok, res[i].error_code, res[i].on_allocate,
                                   res[i].message, now);
      else
        (void)tf_engine_count_done(s->engine, res[i].id, res[i].allocations, now);
    }
    tf_adapter__result_clear(&res[i]);
  }
  free(res);
  /* a stop is done when the pod is gone; a restart's old pod going lets the new one be made */
  for (size_t i = 0; i < s->pend_count;) {
    const tf_adapter__pod *p = pod_find(pv, s->pend[i].relay);
    if (s->pend[i].kind == PEND_STOP && !p) {
      (void)tf_engine_done(s->engine, s->pend[i].id, 1, NULL, now);
      pend_remove(s, i);
      continue;
    }
    i++;
  }
  char **seen = calloc(pv->n + 1, sizeof(char *));
  size_t ns = 0;
  for (size_t i = 0; i < pv->n; i++) {
    const tf_adapter__pod *p = &pv->pods[i];
    if (seen) seen[ns++] = strdup(p->name);
    tf_adapter__expect_observe(s->expect, p->name, p->uid, p->deleting, now);
    if (pend_for(s, p->name)) continue;
    tf_engine_relay_facts f;
    tf_adapter__pod_facts(&f, p, wall, now);
    /* a pod made before the cli-port annotation: the port its config in <pool>-relay-config has */
    if (!f.cli_port) f.cli_port = observed_cli_port(config_secret, p->name);
    if (tf_engine_observe(s->engine, &f, now) < 0)
      say(c, TF_LOG_WARN, "%s: pod %s: %s", s->key, p->name, tf_error_last()->message);
  }
  /* a relay without a pod in the cache: its delete is seen done; a create stays expected until its pod is seen */
  for (size_t i = 0; i < tf_engine_relay_count(s->engine); i++) {
    const char *relay = tf_engine_relay_at(s->engine, i)->name;
    if (!pod_find(pv, relay)) tf_adapter__expect_observe(s->expect, relay, NULL, 0, now);
  }
  for (size_t i = 0; i < s->seen_count; i++) {
    if (!pod_find(pv, s->seen[i]) && !pend_for(s, s->seen[i]) && view_of(s->engine, s->seen[i])) {
      tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
      f.name = s->seen[i];
      f.running = 0;
      (void)tf_engine_observe(s->engine, &f, now);
    }
    free(s->seen[i]);
  }
  free(s->seen);
  s->seen = seen;
  s->seen_count = seen ? ns : 0;
}

static void act(tf_adapter *c, pool_state *s, const pods_view *pv, const char *pool_json, const char *ns,
                char ***starts, uint64_t **start_ids, size_t *start_count, int64_t now)
{
  const tf_engine *e = s->engine;
  long grace = (long)((tf_pool_drain_timeout_ms(tf_engine_pool(e)) + 999) / 1000) + 30;
  for (size_t k = 0; k < tf_engine_action_count(e); k++) {
    const tf_engine_action *a = tf_engine_action_at(e, k);
    const tf_adapter__pod *p = pod_find(pv, a->relay);
    switch (a->kind) {
    case TF_ENGINE_START:
    case TF_ENGINE_RESTART: {
      /* a new config (the engine took the relay out of the URIs a publication delay ago): its pod goes now,
       * and the new pod is made once the old one is gone (one name, one relay address) */
      if (a->kind == TF_ENGINE_RESTART || (p && p->deleting)) {
        int due = a->kind == TF_ENGINE_RESTART && p && !p->deleting;
        pend_add(s, PEND_RESTART, a->id, a->relay, p ? p->uid : NULL, due ? now : 0);
        if (due) event(c, pool_json, "Normal", "RelayRolling", "relay %s: replacing its pod (%s)", a->relay, a->reason);
        break;
      }
      char **sg = realloc(*starts, (*start_count + 1) * sizeof(char *));
      uint64_t *ig = sg ? realloc(*start_ids, (*start_count + 1) * sizeof(uint64_t)) : NULL;
      if (sg) *starts = sg;
      if (ig) *start_ids = ig;
      if (!sg || !ig) break;
      (*starts)[*start_count] = strdup(a->relay);
      (*start_ids)[*start_count] = a->id;
      (*start_count)++;
      break;
    }
    case TF_ENGINE_DRAIN: {
      /* out of the turn URIs since the publication delay: now the pod goes, its agent's preStop drains coturn */
      int ok = !p || p->deleting || delete_pod(c, s, ns, a->relay, p->uid, grace) == 0;
      (void)tf_engine_done(s->engine, a->id, ok, NULL, now);
      if (ok) event(c, pool_json, "Normal", "RelayDraining", "relay %s: draining (pod deleted with grace %lds)",
                    a->relay, grace);
      break;
    }
    case TF_ENGINE_STOP:
      if (!p) {
        (void)tf_engine_done(s->engine, a->id, 1, NULL, now);
      } else {
        if (!p->deleting) (void)delete_pod(c, s, ns, a->relay, p->uid, grace);
        pend_add(s, PEND_STOP, a->id, a->relay, p->uid, 0);
      }
      event(c, pool_json, "Normal", "RelayRemoved", "relay %s: removed (%s)", a->relay, a->reason);
      break;
    case TF_ENGINE_PROBE: {
      /* the engine's probe options: each URI in its address's family (both halves of DualStack), the secret
       * every relay takes */
      tf_probe_options *po = calloc(a->probe_count + 1, sizeof(*po));
      int ok = po != NULL;
      for (size_t j = 0; ok && j < a->probe_count; j++) {
        tf_probe_options init = TF_PROBE_OPTIONS_INIT;
        po[j] = init;
        ok = tf_engine_probe_options(s->engine, a, j, &po[j]) == 0;
        /* a turns: listener is proven by a TLS handshake and an Allocate through it; the pool names no CA
         * (its certificate is the client's to trust), so the chain is not verified here */
        po[j].insecure = 1;
        if (!po[j].timeout_ms) po[j].timeout_ms = PROBE_TIMEOUT_MS;
      }
      if (!ok || tf_adapter__work_probe(c->work, s->key, s->epoch, a->id, po, a->probe_count) < 0)
        (void)tf_engine_probe_done(s->engine, a->id, 0, 0, 0, ok ? "no memory" : tf_error_last()->message, now);
      free(po);
      break;
    }
    case TF_ENGINE_COUNT: {
      char url[128];
      uint16_t port = p && p->agent_port ? p->agent_port : c->o.agent_port;
      int v6 = a->address && strchr(a->address, ':') != NULL;
      snprintf(url, sizeof(url), "http://%s%s%s:%u/metrics", v6 ? "[" : "", a->address ? a->address : "",
               v6 ? "]" : "", port);
      if (!p ||
          tf_adapter__work_scrape(c->work, s->key, s->epoch, a->id, url, s->metrics_token, SCRAPE_TIMEOUT_MS) < 0)
        (void)tf_engine_count_done(s->engine, a->id, -1, now);
      break;
    }
    }
  }
}

static int write_config(tf_adapter *c, pool_state *s, const char *pool_json, const char *ns, const char *name,
                        const char *uid, const char *config_secret)
{
  const tf_reconcile *rec = tf_engine_reconcile(s->engine);
  const tf_pool *pool = tf_engine_pool(s->engine);
  tf_manifest_options mo = TF_MANIFEST_OPTIONS_INIT;
  mo.pool_uid = uid;
  mo.agent_image = c->o.agent_image;
  mo.agent_port = c->o.agent_port;
  mo.state_dir = STATE_DIR;
  mo.metrics_token = s->metrics_token;
  int rc = 0;
  char *coll = NULL, *body = NULL;
  /* the relay configs first: a pod made next mounts its key */
  if (tf_kube_path(&coll, "/api/v1", "secrets", ns, NULL, NULL) == 0 &&
      tf_manifest_relay_config_secret(&body, pool, rec, config_secret, config_secret ? strlen(config_secret) : 0,
                                      &mo) == 0) {
    char *sname = join3(name, "-relay-config", "");
    if (!sname || write_object(c, s, pool_json, coll, sname, body, config_secret) < 0) rc = -1;
    free(sname);
    OPENSSL_cleanse(body, strlen(body));
  } else {
    rc = -1;
  }
  tf_free(body);
  tf_free(coll);
  return rc;
}

static int write_uris(tf_adapter *c, pool_state *s, const char *pool_json, const char *ns, const char *name,
                      const char *uid)
{
  const tf_reconcile *rec = tf_engine_reconcile(s->engine);
  tf_manifest_options mo = TF_MANIFEST_OPTIONS_INIT;
  mo.pool_uid = uid;
  mo.agent_image = c->o.agent_image;
  char *coll = NULL, *body = NULL;
  tf_informer_object *observed = NULL;
  int rc = -1;
  if (tf_kube_path(&coll, "/api/v1", "configmaps", ns, NULL, NULL) == 0 &&
      tf_manifest_turn_uris(&body, tf_engine_pool(s->engine), rec, &mo) == 0) {
    char *cname = join3(name, "-turn-uris", ""), *key = join3(ns, "/", cname ? cname : "");
    /* from the cache of the ConfigMaps the operator manages: a steady state makes no request */
    tf_err g = key ? tf_informer_get_object(c->configmaps, key, &observed) : TF_ENOMEM;
    if (cname && (g == 0 || g == TF_ENOTFOUND))
      rc = write_object(c, s, pool_json, coll, cname, body, g == 0 ? tf_informer_object_json(observed, NULL) : NULL);
    free(cname);
    free(key);
  }
  tf_informer_object_release(observed);
  tf_free(body);
  tf_free(coll);
  return rc;
}

/* The readiness gates that go to @p want_ready (1: to True, before the turn URIs list them; 0: to False, after
 * the URIs dropped them), so that turn-uris never lists a relay whose pod is not Ready. A gate changes only on
 * this process's own probe result: a new leader keeps what it found until it probed. */
static int write_gates(tf_adapter *c, pool_state *s, const pods_view *pv, const char *ns, int want_ready)
{
  char now[32];
  now_text(now, sizeof(now));
  int rc = 0;
  for (size_t i = 0; i < pv->n; i++) {
    const tf_adapter__pod *p = &pv->pods[i];
    const tf_engine_relay *v = view_of(s->engine, p->name);
    if (!v || p->deleting || !v->probe_ms || (v->id && strcmp(v->id, p->uid) != 0)) continue;
    int full = v->state == TF_ENGINE_RELAY_FULL;
    int ready = v->state == TF_ENGINE_RELAY_READY || full;
    if (ready != want_ready) continue;
    if (!ready && p->gate != 1) continue; /* absent counts as not ready: no write for it */
    int err = 0;
    char *patch = tf_adapter__gate_patch(p, ready, full ? TF_POD__GATE_FULL : ready ? "AllocateSucceeded" : tf_engine_relay_state_name(v->state),
                                full    ? "it answers, and every relay port is in use (508)" :
                                ready   ? "a TURN Allocate through the relay passed" :
                                          (v->probe_message ? v->probe_message : ""),
                                now, &err);
    if (!patch) continue;
    char *path = NULL, *answer = NULL, *pod_path = NULL;
    tf_kube_status *st = NULL;
    if (tf_kube_path(&path, "/api/v1", "pods", ns, p->name, "status") < 0 ||
        tf_kube_patch(c->kube, path, TF_KUBE_PATCH_JSON, patch, &answer, &st) < 0) {
      say(c, TF_LOG_WARN, "pod %s/%s: readiness: %s", ns, p->name, st ? tf_kube_status_message(st) : "no memory");
      rc = -1;
    } else {
      /* the pod as the server has it now: a pod cache that lags does not have the gate patched again */
      if (tf_kube_path(&pod_path, "/api/v1", "pods", ns, p->name, NULL) == 0)
        view_keep(c, s->key, pod_path, pv->json[i], answer);
      say(c, TF_LOG_INFO, "pod %s/%s: %s=%s%s", ns, p->name, TF_MANIFEST_READINESS_GATE, ready ? "True" : "False",
          full ? " (full)" : "");
    }
    tf_kube_status_free(st);
    tf_free(answer);
    tf_free(pod_path);
    tf_free(path);
    free(patch);
  }
  return rc;
}

/* The status with ReachableFromVantage from the pool's <pool>-vantage ConfigMap (the cache; absent: Unknown). */
static char *with_vantage(tf_adapter *c, const char *body, const char *pool_json, const char *ns, const char *name)
{
  char *cname = join3(name, "-vantage", ""), *key = cname ? join3(ns, "/", cname) : NULL, *msg = NULL;
  char *out = NULL, now[32];
  const char *status = NULL, *reason = NULL, *cm = NULL;
  size_t cm_len = 0;
  tf_informer_object *obj = NULL;
  tf_err g = key ? tf_informer_get_object(c->configmaps, key, &obj) : TF_ENOMEM;
  if (g == 0) cm = tf_informer_object_json(obj, &cm_len);
  if ((g == 0 || g == TF_ENOTFOUND) && tf_vantage_condition(&status, &reason, &msg, cm, cm_len, wall_ms(), 0) == 0) {
    now_text(now, sizeof(now));
    out = tf_adapter__with_condition(body, pool_json, "ReachableFromVantage", status, reason, msg, now);
  }
  tf_free(msg);
  tf_informer_object_release(obj);
  free(key);
  free(cname);
  return out;
}

static int write_status(tf_adapter *c, pool_state *s, const char *pool_json, const char *ns, const char *name)
{
  char *status = NULL, *body = NULL, *stable = NULL, *full = NULL;
  int rc = -1;
  if (tf_engine_status_json(&status, s->engine) == 0 &&
      tf_manifest_status(&body, tf_engine_pool(s->engine), status, strlen(status), tf_adapter__generation(pool_json)) == 0 &&
      (stable = tf_adapter__status_stable(body, pool_json)) != NULL &&
      (full = with_vantage(c, stable, pool_json, ns, name)) != NULL) {
    int w = patch_status(c, pool_json, ns, name, full);
    if (w > 0) condition_events(c, pool_json, full);
    rc = w < 0 ? -1 : 0;
  }
  free(full);
  free(stable);
  tf_free(body);
  tf_free(status);
  return rc;
}

/* The pool's ReachableFromVantage as samples, from the same cached ConfigMap as with_vantage(). */
static int vantage_metrics(tf_adapter *c, tf_metrics *m, const tf_pool *pool)
{
  const char *ns = tf_pool_namespace(pool), *name = tf_pool_name(pool);
  char *cname = join3(name, "-vantage", ""), *key = cname ? join3(ns, "/", cname) : NULL;
  const char *cm = NULL;
  size_t cm_len = 0;
  tf_informer_object *obj = NULL;
  tf_err g = key ? tf_informer_get_object(c->configmaps, key, &obj) : TF_ENOMEM;
  if (g == 0) cm = tf_informer_object_json(obj, &cm_len);
  int rc = (g == 0 || g == TF_ENOTFOUND) && tf_vantage_metrics(m, ns, name, cm, cm_len, wall_ms(), 0) == 0 ? 0 : -1;
  tf_informer_object_release(obj);
  free(key);
  free(cname);
  return rc;
}

/* PUT the pool with the drain finalizer added (@p want 1) or removed, against the resourceVersion read; a 409
 * (the status was written since, say) gets one fresh read and one more PUT, never a loop.
 * 1 written, 0 nothing to do, -1 retry. */
static int put_finalizer(tf_adapter *c, const char *pool_json, const char *ns, const char *name, int want)
{
  int err = 0;
  char *body = tf_adapter__with_finalizer(pool_json, FINALIZER, want, &err), *path = NULL, *fresh = NULL;
  char *answer = NULL;
  if (!body) return err ? -1 : 0;
  tf_kube_status *st = NULL;
  tf_err rc = tf_kube_path(&path, GROUP_API, "turnpools", ns, name, NULL);
  if (rc == 0) rc = tf_kube_update(c->kube, path, body, &answer, &st);
  if (rc == TF_ECONFLICT && tf_kube_get(c->kube, path, &fresh, NULL) == 0) {
    free(body);
    tf_kube_status_free(st);
    st = NULL;
    body = tf_adapter__with_finalizer(fresh, FINALIZER, want, &err);
    rc = body ? tf_kube_update(c->kube, path, body, &answer, &st) : err ? TF_ENOMEM : TF_OK;
  }
  if (rc == 0 && answer) pool_view_keep(c, ns, name, pool_json, answer);
  tf_free(answer);
  int gone = !want && rc == TF_ENOTFOUND; /* removed already (the cache had not seen it): nothing written */
  if (gone) rc = 0;
  if (!gone) say(c, rc ? TF_LOG_WARN : TF_LOG_INFO, "%s/%s: finalizer %s %s%s%s", ns, name, FINALIZER,
      rc ? (want ? "not added" : "not removed") : want ? "added" : "removed", rc ? ": " : "",
      rc ? (st ? tf_kube_status_message(st) : tf_error_last()->message) : "");
  tf_kube_status_free(st);
  tf_free(fresh);
  tf_free(path);
  free(body);
  return rc != 0 ? -1 : gone ? 0 : 1;
}

/* A pool being deleted whose inputs are refused (its Secret went first, say) and that has no engine in this
 * process: its pods are deleted (each drains in its preStop, within its own grace) and the finalizer goes
 * with the last of them. 0; -1 retry. */
static int drain_unrendered(tf_adapter *c, const char *pool_json, const char *ns, const char *name,
                            const char *uid, long *requeue_ms)
{
  pods_view pv;
  if (pods_read(c, &pv, ns, name, uid) < 0) return -1;
  int rc = 0;
  for (size_t i = 0; i < pv.n; i++)
    if (!pv.pods[i].deleting && delete_pod(c, NULL, ns, pv.pods[i].name, pv.pods[i].uid, -1) < 0) rc = -1;
  if (pv.n == 0) rc = put_finalizer(c, pool_json, ns, name, 0) < 0 ? -1 : 0;
  else *requeue_ms = 1000;
  pods_clear(&pv);
  return rc;
}

static tf_err reconcile(tf_adapter *c, const char *key, long *requeue_ms)
{
  tf_informer_object *pool_obj = NULL; /* the cache's, held for the reconcile: no copy */
  tf_err g = tf_informer_get_object(c->pools, key, &pool_obj);
  say(c, TF_LOG_DEBUG, "reconcile %s%s", key, g == TF_ENOTFOUND ? " (gone)" : "");
  if (g == TF_ENOTFOUND) {
    /* deleted: what it owned goes with it (owner references); its engine's books go now, and the
     * results of its last probes and scrapes with them */
    state_drop(c, key);
    if (c->refs) (void)tf_adapter__refs_set(c->refs, key, "", NULL, 0); /* its Secrets' caches, unless shared */
    tf_smap__del(c->reconciles, key);
    tf_adapter__result *res = NULL;
    size_t nr = tf_adapter__work_take(c->work, key, &res);
    for (size_t i = 0; i < nr; i++) tf_adapter__result_clear(&res[i]);
    free(res);
    return 0;
  }
  if (g < 0) return g;
  /* the pool as our last write of it was answered, while the cache has not caught up with it */
  char *vkey = view_key(key, "pool");
  const char *pool_json = tf_informer_object_json(pool_obj, NULL);
  const char *better = vkey ? tf_adapter__views_pick(c->views, vkey, pool_json) : pool_json;
  char *copy = better != pool_json ? strdup(better) : NULL;
  free(vkey);
  if (copy) pool_json = copy;
  char *ns = tf_adapter__meta_string(pool_json, "namespace"), *name = tf_adapter__meta_string(pool_json, "name");
  char *uid = tf_adapter__meta_string(pool_json, "uid");
  int rc = -1;
  pool_inputs in;
  memset(&in, 0, sizeof(in));
  pods_view pv;
  memset(&pv, 0, sizeof(pv));
  char *config_secret = NULL;
  char **starts = NULL;
  uint64_t *start_ids = NULL;
  size_t start_count = 0;
  if (!ns || !name || !uid) goto out;
  pool_state *s = state_find(c, key, NULL);
  if (s && strcmp(s->uid, uid) != 0) { /* deleted and made again under the same name */
    state_drop(c, key);
    s = NULL;
  }
  /* a pool being deleted keeps our finalizer until its relays drained; one without it is the garbage
   * collector's (it was deleted before we held it, or we let it go) */
  const int64_t deleted = tf_adapter__deletion_ms(pool_json);
  int fin_err = 0;
  char *fin_add = tf_adapter__with_finalizer(pool_json, FINALIZER, 1, &fin_err);
  const int held = !fin_add && !fin_err;
  free(fin_add);
  if (fin_err) goto out;
  if (deleted && !held) {
    state_drop(c, key);
    rc = 0;
    goto out;
  }
  if (!deleted && put_finalizer(c, pool_json, ns, name, 1) < 0) goto out;
  int r = s && s->shutting ? 0 : read_inputs(c, &in, pool_json, ns, name); /* a drain needs no new input */
  if (r != 0) {
    rc = r < 0 ? -1 : deleted && !(s && s->engine) ? drain_unrendered(c, pool_json, ns, name, uid, requeue_ms) : 0;
    goto out;
  }
  if (!s) {
    if (!(s = calloc(1, sizeof(*s))) || !(s->key = strdup(key)) || !(s->uid = strdup(uid)) ||
        !(s->expect = tf_adapter__expect_new(EXPECT_TTL_MS))) {
      state_free(s);
      goto out;
    }
    pool_state **grown = realloc(c->states, (c->state_count + 1) * sizeof(*grown));
    if (grown) {
      c->states = grown;
      c->states[c->state_count++] = s;
    }
    if (!grown) {
      state_free(s);
      goto out;
    }
  }
  r = s->shutting ? 0 : feed_engine(c, s, &in, pool_json, ns, name);
  if (r != 0) {
    if (r > 0 && !s->engine) state_drop(c, key);
    rc = r > 0 ? 0 : -1;
    goto out;
  }
  char *skey = join3(key, "-relay-config", "");
  if (!skey) goto out;
  g = tf_informer_get(c->secrets, skey, &config_secret);
  free(skey);
  if (g < 0 && g != TF_ENOTFOUND) goto out;
  if (metrics_token(s, config_secret) < 0) goto out;
  if (pods_read(c, &pv, ns, name, uid) < 0) goto out;
  claims(c, s, key, pool_json, uid);
  int64_t now = tf_kube__now_ms();
  observe(c, s, &pv, config_secret, now);
  if (deleted && !s->shutting) {
    /* every relay drains as in a scale to zero; what is left is stopped drainTimeout (+ the grace) after the
     * deletion was asked, whichever leader saw it first */
    int64_t ago = wall_ms() - deleted;
    if (tf_engine_shutdown(s->engine, ago <= 0 ? now : ago < now ? now - ago : 1, 0) < 0) goto out;
    s->shutting = 1;
    if (!tf_adapter__status_says(pool_json, "stopping"))
      event(c, pool_json, "Normal", "Deleting", "the pool is being deleted: its %zu relays leave the turn URIs and "
            "drain first (until their allocations are gone or drainTimeout)", pv.n);
  }
  if (tf_engine_step(s->engine, now, wall_ms()) < 0) {
    say(c, TF_LOG_ERROR, "%s: step: %s", key, tf_error_last()->message);
    goto out;
  }
  act(c, s, &pv, pool_json, ns, &starts, &start_ids, &start_count, now);
  rc = write_config(c, s, pool_json, ns, name, uid, config_secret);
  /* a gate that did not go True keeps the URIs as they are until it did (retried with backoff); the URIs
   * are written before any pod is made, so that a relay lost and made again at once at its address is out
   * of them before its new pod (not Ready yet) is there */
  if (write_gates(c, s, &pv, ns, 1) < 0) rc = -1;
  else if (write_uris(c, s, pool_json, ns, name, uid) < 0) rc = -1;
  else if (write_gates(c, s, &pv, ns, 0) < 0) rc = -1;
  /* the pods the engine asked for (its config and the URIs written), and the restarts whose old pod is gone */
  for (size_t i = 0; i < start_count; i++) {
    char *pod_uid = rc == 0 && !s->shutting ? create_pod(c, s, pool_json, ns, uid, starts[i]) : NULL;
    (void)tf_engine_done(s->engine, start_ids[i], pod_uid != NULL, pod_uid, now);
    free(pod_uid);
  }
  for (size_t i = 0; rc == 0 && i < s->pend_count;) {
    pending *p = &s->pend[i];
    const tf_adapter__pod *seen = pod_find(&pv, p->relay);
    if (p->kind == PEND_RESTART && p->delete_due_ms && now >= p->delete_due_ms && seen && !seen->deleting) {
      long grace = (long)((tf_pool_drain_timeout_ms(tf_engine_pool(s->engine)) + 999) / 1000) + 30;
      if (delete_pod(c, s, ns, p->relay, p->old_uid, grace) == 0) p->delete_due_ms = 0;
    }
    if (p->kind == PEND_RESTART && (!seen || (p->old_uid && strcmp(seen->uid, p->old_uid) != 0))) {
      char *pod_uid = s->shutting ? NULL : create_pod(c, s, pool_json, ns, uid, p->relay);
      (void)tf_engine_done(s->engine, p->id, pod_uid != NULL, pod_uid, now);
      free(pod_uid);
      pend_remove(s, i);
      continue;
    }
    i++;
  }
  if (s->shutting && pv.n == 0 && rc == 0) {
    /* every relay pod is gone: the pool goes, and what it owned with it (no last status for it) */
    int fin = put_finalizer(c, pool_json, ns, name, 0);
    if (fin > 0) event(c, pool_json, "Normal", "Drained", "every relay drained: the pool goes");
    if (fin < 0) rc = -1;
  } else if (write_status(c, s, pool_json, ns, name) < 0) {
    rc = -1;
  }
  /* again when the engine, a restart's delete or an expectation's lapse is next due; nothing else needs a
   * look (every change it waits on is a watch event or a finished job, and the resync is the safety net) */
  int64_t next = tf_engine_next_ms(s->engine), lapse = tf_adapter__expect_next_ms(s->expect, now);
  for (size_t i = 0; i < s->pend_count; i++)
    if (s->pend[i].delete_due_ms && (next <= 0 || s->pend[i].delete_due_ms < next)) next = s->pend[i].delete_due_ms;
  if (lapse && (next <= 0 || lapse < next)) next = lapse;
  long delay = next > 0 ? (long)(next - tf_kube__now_ms()) : 0;
  if (next > 0 && delay < 50) delay = 50;
  /* pods someone else is deleting are looked at again soon (their going is a watch event too) */
  for (size_t i = 0; i < pv.n; i++)
    if (pv.pods[i].deleting && (delay <= 0 || delay > 5000)) delay = 5000;
  *requeue_ms = delay;
out:
  for (size_t i = 0; i < start_count; i++) free(starts[i]);
  free(starts);
  free(start_ids);
  if (config_secret) OPENSSL_cleanse(config_secret, strlen(config_secret));
  tf_free(config_secret);
  pods_clear(&pv);
  inputs_clear(&in);
  free(ns);
  free(name);
  free(uid);
  free(copy);
  tf_informer_object_release(pool_obj);
  /* the reason was logged; the caller retries with backoff */
  return rc < 0 ? tf_error__set(TF_EUNAVAILABLE, "%s: not reconciled (retry)", key) : TF_OK;
}

tf_err tf_adapter_reconcile(tf_adapter *c, const char *key, long *requeue_ms)
{
  TF_ASSERT_ARG(c);
  TF_ASSERT_ARG(key);
  TF_ASSERT_ARG(requeue_ms);
  *requeue_ms = 0;
  /* its budget is spent (said when it was): nothing to do but wait for it, quietly */
  long spent = tf_budget_wait(c->budget, key, tf_kube__now_ms());
  if (spent > 0) {
    *requeue_ms = spent;
    return TF_OK;
  }
  uint64_t *count = tf_smap__get(c->reconciles, key);
  if (!count && (count = calloc(1, sizeof(*count))) && tf_smap__put(c->reconciles, key, count) < 0) {
    free(count);
    count = NULL;
  }
  if (count) (*count)++;
  tf_adapter__views_expire(c->views, tf_kube__now_ms() - EXPECT_TTL_MS); /* what a cache lagging that long missed */
  c->charging = key;
  c->over_budget_ms = 0;
  tf_err rc = reconcile(c, key, requeue_ms);
  c->charging = NULL;
  if (c->over_budget_ms > 0) {
    /* a stale view must not drive a write loop: the pool waits for its budget */
    say(c, TF_LOG_WARN, "%s: write budget spent; writes resume in %ld ms", key, c->over_budget_ms);
    *requeue_ms = c->over_budget_ms;
    return TF_OK;
  }
  return rc;
}

long tf_adapter_write_gate(const char *method, const char *path, void *adapter)
{
  (void)method;
  tf_adapter *c = adapter;
  if (!c || !c->charging || !path || strstr(path, "/events")) return 1L << 30;
  long wait = 0;
  if (tf_budget_take(c->budget, c->charging, tf_kube__now_ms(), &wait) == 0) return 1L << 30;
  c->over_budget_ms = wait > 0 ? wait : 1;
  return 0;
}

tf_err tf_adapter_changed(tf_adapter *c, tf_adapter_cache cache, tf_informer_op op, const char *key,
                          const char *object)
{
  return c ? tf_adapter__enqueue(c->index, c->pools, c->queue, cache, op, key, object) : TF_OK;
}

tf_err tf_adapter_write_metrics(const tf_adapter *c, tf_metrics *m)
{
  TF_ASSERT_ARG(c);
  TF_ASSERT_ARG(m);
  const struct {
    const char *name, *help;
    tf_metric_type type;
    double value;
  } series[] = {
    {TF_METRIC_OPERATOR_EVENTS_PENDING, "Events waiting to be sent again.", TF_METRIC_GAUGE,
     (double)tf_recorder_pending(c->recorder)},
    {TF_METRIC_OPERATOR_EVENTS_DROPPED, "Events given up (queue full, or refused for good).", TF_METRIC_COUNTER,
     (double)tf_recorder_dropped(c->recorder)},
    {TF_METRIC_OPERATOR_WRITES_OVER_BUDGET, "Writes refused by the per-pool write budget.", TF_METRIC_COUNTER,
     (double)tf_budget_refused(c->budget)},
  };
  for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++) {
    tf_err rc = tf_metrics_declare(m, series[i].name, series[i].type, series[i].help);
    if (rc == 0) rc = tf_metrics_add(m, series[i].name, NULL, NULL, 0, series[i].value);
    if (rc < 0) return rc;
  }
  return TF_OK;
}

tf_err tf_adapter_metrics(tf_adapter *c, tf_metrics *m)
{
  TF_ASSERT_ARG(c);
  TF_ASSERT_ARG(m);
  tf_err rc = tf_metrics_declare(m, TF_METRIC_OPERATOR_RECONCILES, TF_METRIC_COUNTER,
                                 "Reconciles of each pool (an event queues only the pools it concerns).");
  size_t pos = 0;
  const char *key;
  void *v;
  while (rc == 0 && tf_smap__next(c->reconciles, &pos, &key, &v)) {
    const char *slash = strchr(key, '/');
    char *ns = slash ? strndup(key, (size_t)(slash - key)) : NULL;
    const char *names[] = {"namespace", "pool"}, *values[] = {ns, slash ? slash + 1 : NULL};
    rc = ns ? tf_metrics_add(m, TF_METRIC_OPERATOR_RECONCILES, names, values, 2, (double)*(uint64_t *)v) : TF_OK;
    free(ns);
  }
  if (rc < 0) return rc;
  for (size_t i = 0; i < c->state_count; i++) {
    const tf_reconcile *rec = c->states[i]->engine ? tf_engine_reconcile(c->states[i]->engine) : NULL;
    if (!rec) continue;
    rc = tf_reconcile_metrics(m, rec);
    if (rc < 0) return rc;
    if (vantage_metrics(c, m, tf_engine_pool(c->states[i]->engine)) < 0)
      return tf_error__set(TF_ENOMEM, "metrics: ReachableFromVantage of %s", c->states[i]->key);
  }
  return TF_OK;
}

/* How much of a tf_adapter_options struct of @p version there is. */
static size_t options_size(unsigned int version)
{
  return version == 1   ? offsetof(tf_adapter_options, api_endpoints)
         : version == 2 ? offsetof(tf_adapter_options, budget_writes)
         : version == 3 ? offsetof(tf_adapter_options, referenced_secrets)
                        : sizeof(tf_adapter_options);
}

tf_err tf_adapter_options_init(tf_adapter_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_ADAPTER_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_adapter_options version (1-%d)", version,
                         TF_ADAPTER_OPTIONS_VERSION);
  /* an older caller's struct is shorter */
  tf_adapter_options init = TF_ADAPTER_OPTIONS_INIT;
  init.version = version;
  memcpy(opts, &init, options_size(version));
  return TF_OK;
}

tf_err tf_adapter_new(tf_adapter **out, tf_kube *kube, const tf_adapter_options *opts)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(kube);
  TF_ASSERT_ARG(opts);
  if (opts->version == 0 || opts->version > TF_ADAPTER_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "options.version: %u is not a tf_adapter_options version (1-%d)",
                         opts->version, TF_ADAPTER_OPTIONS_VERSION);
  /* only the fields of the caller's version: the rest keep their defaults */
  tf_adapter_options o = TF_ADAPTER_OPTIONS_INIT;
  memcpy(&o, opts, options_size(opts->version));
  const unsigned int caller_version = opts->version;
  o.version = TF_ADAPTER_OPTIONS_VERSION;
  opts = &o;
  const char *missing = !opts->pools ? "pools" : !opts->pods ? "pods" : !opts->nodes ? "nodes"
                        : !opts->secrets ? "secrets" : !opts->configmaps ? "configmaps" : !opts->queue ? "queue"
                        : !opts->recorder ? "recorder" : !opts->agent_image || !*opts->agent_image ? "agent_image"
                        : NULL;
  if (missing) return tf_error__set(TF_EINVALID, "options.%s: required", missing);
  if (!opts->agent_port) return tf_error__set(TF_EINVALID, "options.agent_port: must be 1-65535");
  if (opts->probe_interval_ms <= 0 || opts->publish_delay_ms < 0)
    return tf_error__set(TF_EINVALID, "options.%s: must be positive",
                         opts->probe_interval_ms <= 0 ? "probe_interval_ms" : "publish_delay_ms");
  if ((unsigned long)opts->cli_port_base + (unsigned long)opts->cli_slots * opts->cli_stride > 65536)
    return tf_error__set(TF_EINVALID, "options.cli_port_base: %u + %u slots x %u ports is past 65535",
                         opts->cli_port_base, opts->cli_slots, opts->cli_stride);
  if (opts->budget_writes <= 0 || opts->budget_interval_ms <= 0)
    return tf_error__set(TF_EINVALID, "options.%s: must be positive",
                         opts->budget_writes <= 0 ? "budget_writes" : "budget_interval_ms");
  tf_adapter *c = calloc(1, sizeof(*c));
  if (!c) return tf_error__set(TF_ENOMEM, "adapter");
  c->o = o;
  tf_budget_options bo = TF_BUDGET_OPTIONS_INIT;
  bo.writes = o.budget_writes;
  bo.interval_ms = o.budget_interval_ms;
  if (tf_budget_new(&c->budget, &bo) < 0 || !(c->views = tf_adapter__views_new()) ||
      !(c->index = tf_adapter__index_new()) || !(c->reconciles = tf_smap__new(free))) {
    tf_budget_free(c->budget);
    tf_adapter__views_free(c->views);
    tf_adapter__index_free(c->index);
    free(c);
    return tf_error__set(TF_ENOMEM, "adapter: write budget");
  }
  c->kube = kube;
  c->pools = opts->pools;
  c->pods = opts->pods;
  c->nodes = opts->nodes;
  c->secrets = opts->secrets;
  c->configmaps = opts->configmaps;
  c->queue = opts->queue;
  c->recorder = opts->recorder;
  find_api_server(c);
  if (caller_version >= 4 && !(c->refs = tf_adapter__refs_new(kube, opts->referenced_secrets, opts->queue))) {
    tf_budget_free(c->budget);
    tf_adapter__views_free(c->views);
    tf_adapter__index_free(c->index);
    tf_smap__free(c->reconciles);
    free(c);
    return tf_error__set(TF_ENOMEM, "adapter: the referenced Secrets' caches");
  }
  if (!(c->work = tf_adapter__work_new(opts->queue))) {
    tf_adapter__refs_free(c->refs);
    tf_budget_free(c->budget);
    tf_adapter__views_free(c->views);
    tf_adapter__index_free(c->index);
    tf_smap__free(c->reconciles);
    free(c);
    return tf_error__set(TF_ERESOURCE, "adapter: cannot start the probe and scrape loop");
  }
  *out = c;
  return TF_OK;
}

void tf_adapter_free(tf_adapter *c)
{
  if (!c) return;
  tf_adapter__refs_free(c->refs); /* its informers stopped first: their callbacks queue pools */
  tf_adapter__work_free(c->work);
  for (size_t i = 0; i < c->state_count; i++) state_free(c->states[i]);
  free(c->states);
  tf_budget_free(c->budget);
  tf_adapter__views_free(c->views);
  tf_adapter__index_free(c->index);
  tf_smap__free(c->reconciles);
  free(c);
}
