/* The adapter's index of its caches (tf_adapter__index): each TURNPool, relay
 * Pod and Node parsed once, when its change is forwarded (tf_adapter_changed()),
 * and looked up by owning pool, by node and by claimed address. It answers two
 * questions: which pools a change concerns (the keys queued, so that one
 * relay pod's event reconciles its pool and only the pools whose claims it
 * meets), and which of the other pools' relays a reconcile hands its engine
 * as claims (only those on its planner's addresses and nodes, never every pod
 * of every pool). Any thread: one lock, held only while the index is read or
 * changed (never during a request). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "adapter_internal.h"
#include "internal.h"
#include "model.h"
#include "smap.h"

/* ---- string sets: a few members each (the pods on one address, the pools of one change) ---- */

typedef struct ix_set {
  char **v;
  size_t n, cap;
} ix_set;

static int set_has(const ix_set *s, const char *item)
{
  for (size_t i = 0; s && i < s->n; i++)
    if (strcmp(s->v[i], item) == 0) return 1;
  return 0;
}

static int set_add(ix_set *s, const char *item)
{
  if (!item || set_has(s, item)) return 0;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 4;
    char **v = realloc(s->v, cap * sizeof(*v));
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  if (!(s->v[s->n] = strdup(item))) return -1;
  s->n++;
  return 0;
}

static void set_del(ix_set *s, const char *item)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i], item) == 0) {
      free(s->v[i]);
      s->v[i] = s->v[--s->n];
      return;
    }
}

static void set_clear(ix_set *s)
{
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof(*s));
}

static void set_free(void *p)
{
  set_clear(p);
  free(p);
}

/* A multimap: @p key's set in @p m gets @p item / loses it (an empty set goes). */
static int multi_add(tf_smap *m, const char *key, const char *item)
{
  ix_set *s = tf_smap__get(m, key);
  if (!s) {
    if (!(s = calloc(1, sizeof(*s))) || tf_smap__put(m, key, s) < 0) {
      free(s);
      return -1;
    }
  }
  return set_add(s, item);
}

static void multi_del(tf_smap *m, const char *key, const char *item)
{
  ix_set *s = tf_smap__get(m, key);
  if (!s) return;
  set_del(s, item);
  if (s->n == 0) tf_smap__del(m, key);
}

/* ---- the entries ---- */

typedef struct ix_pod {
  char *key;  /* ns/name */
  char *pool; /* ns/<its pool label> */
  tf_adapter__pod p;
  ix_set addrs;       /* its identity's addresses, canonical */
  tf_port_range range; /* its identity's ports */
} ix_pod;

typedef struct ix_pool {
  char *ns, *name, *uid;
  uint16_t ports[16]; /* its listener ports: part of its relays' claims */
  size_t nports;
  int parsed;          /* its spec parsed: range, rpn and ports are known */
  tf_port_range range; /* its relay port range */
  uint32_t rpn;        /* PartitionedIP: relays per node (a listener port is shifted by the slice) */
  ix_set selector;    /* "key=value" (the default when it names none); empty: it did not parse */
  ix_set secrets;     /* the Secrets it reads, by name in its namespace */
  ix_set sites;       /* the addresses its planner may place relays on (tf_adapter__index_set_sites()) */
} ix_pool;

struct tf_adapter__index {
  pthread_mutex_t mu;
  tf_smap *pools;   /* ns/name -> ix_pool */
  tf_smap *uids;    /* a pool's uid -> its ns/name */
  tf_smap *pods;    /* ns/name -> ix_pod (relay pods only) */
  tf_smap *nodes;   /* name -> ix_set of its "key=value" labels */
  tf_smap *by_pool; /* ns/<pool label> -> pod keys */
  tf_smap *by_node; /* node -> pod keys */
  tf_smap *by_addr; /* address -> pod keys */
  tf_smap *at_site; /* address -> keys of the pools that may place a relay there */
};

static void pod_free(void *v)
{
  ix_pod *e = v;
  if (!e) return;
  free(e->key);
  free(e->pool);
  tf_adapter__pod_clear(&e->p);
  set_clear(&e->addrs);
  free(e);
}

static void pool_free(void *v)
{
  ix_pool *e = v;
  if (!e) return;
  free(e->ns);
  free(e->name);
  free(e->uid);
  set_clear(&e->selector);
  set_clear(&e->secrets);
  set_clear(&e->sites);
  free(e);
}

tf_adapter__index *tf_adapter__index_new(void)
{
  tf_adapter__index *x = calloc(1, sizeof(*x));
  if (!x) return NULL;
  pthread_mutex_init(&x->mu, NULL);
  x->pools = tf_smap__new(pool_free);
  x->uids = tf_smap__new(free);
  x->pods = tf_smap__new(pod_free);
  x->nodes = tf_smap__new(set_free);
  x->by_pool = tf_smap__new(set_free);
  x->by_node = tf_smap__new(set_free);
  x->by_addr = tf_smap__new(set_free);
  x->at_site = tf_smap__new(set_free);
  if (!x->pools || !x->uids || !x->pods || !x->nodes || !x->by_pool || !x->by_node || !x->by_addr || !x->at_site) {
    tf_adapter__index_free(x);
    return NULL;
  }
  return x;
}

void tf_adapter__index_free(tf_adapter__index *x)
{
  if (!x) return;
  tf_smap__free(x->pools);
  tf_smap__free(x->uids);
  tf_smap__free(x->pods);
  tf_smap__free(x->nodes);
  tf_smap__free(x->by_pool);
  tf_smap__free(x->by_node);
  tf_smap__free(x->by_addr);
  tf_smap__free(x->at_site);
  pthread_mutex_destroy(&x->mu);
  free(x);
}

static char *join(const char *a, const char *sep, const char *b)
{
  char *s = NULL;
  return a && b && asprintf(&s, "%s%s%s", a, sep, b) >= 0 ? s : NULL;
}

static const cJSON *meta(const cJSON *root, const char *field)
{
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"), field);
}

/* The pool an object belongs to: `ns/<its turnfleet.hzmi.dev/pool label>`, malloc'd; NULL without one. */
static char *owner_of(const cJSON *root)
{
  return join(cJSON_GetStringValue(meta(root, "namespace")), "/",
              cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta(root, "labels"), TF_POD__LABEL_POOL)));
}

/* The addresses of an identity ("a[,b]/start-end"), canonical. */
static int identity_addrs(ix_set *out, const char *identity)
{
  const char *slash = strchr(identity, '/');
  char *list = slash ? strndup(identity, (size_t)(slash - identity)) : NULL, *save = NULL;
  int rc = 0;
  for (char *t = list ? strtok_r(list, ",", &save) : NULL; t && rc == 0; t = strtok_r(NULL, ",", &save)) {
    tf_addr a;
    char text[TF_ADDR_STRLEN];
    if (tf_addr_parse(&a, t) == 0 && tf_addr_format(text, sizeof(text), &a) == 0) rc = set_add(out, text);
  }
  free(list);
  return rc;
}

/* The relay pod @p object as an entry; NULL when it is no relay pod of ours (or on no memory). */
static ix_pod *pod_entry(const char *key, const cJSON *root)
{
  ix_pod *e = calloc(1, sizeof(*e));
  if (!e) return NULL;
  if (tf_adapter__pod_from_tree(&e->p, root) < 0 || !(e->key = strdup(key)) || !(e->pool = owner_of(root)) ||
      identity_addrs(&e->addrs, e->p.identity) < 0) {
    pod_free(e);
    return NULL;
  }
  const char *slash = strchr(e->p.identity, '/');
  unsigned start = 0, end = 0;
  if (slash && sscanf(slash + 1, "%u-%u", &start, &end) == 2 && start <= end && end <= 65535)
    e->range = (tf_port_range){(uint16_t)start, (uint16_t)end};
  else
    e->range = (tf_port_range){0, 65535}; /* unreadable: it may meet anything */
  return e;
}

/* What of a relay pod makes it a claim (its addresses, node, CLI port, owner) is the same in both. */
static int same_claim(const ix_pod *a, const ix_pod *b)
{
  return strcmp(a->p.identity, b->p.identity) == 0 && strcmp(a->p.node, b->p.node) == 0 &&
         strcmp(a->p.owner_uid, b->p.owner_uid) == 0 && strcmp(a->pool, b->pool) == 0 &&
         a->p.host_network == b->p.host_network && a->p.cli_port == b->p.cli_port && a->p.finished == b->p.finished;
}

static ix_pool *pool_entry(const cJSON *root)
{
  ix_pool *e = calloc(1, sizeof(*e));
  if (!e) return NULL;
  e->ns = strdup(cJSON_GetStringValue(meta(root, "namespace")) ? cJSON_GetStringValue(meta(root, "namespace")) : "");
  e->name = strdup(cJSON_GetStringValue(meta(root, "name")) ? cJSON_GetStringValue(meta(root, "name")) : "");
  e->uid = strdup(cJSON_GetStringValue(meta(root, "uid")) ? cJSON_GetStringValue(meta(root, "uid")) : "");
  int ok = e->ns && e->name && e->uid;
  tf_pool *pool = NULL;
  if (ok && tf_pool__from_tree(&pool, root) == 0) {
    e->parsed = 1;
    e->range = tf_pool_relay_port_range(pool);
    e->rpn = tf_pool_relays_per_node(pool);
    for (size_t i = 0; i < tf_pool_listener_count(pool) && e->nports < 16; i++)
      e->ports[e->nports++] = tf_pool_listener_port(pool, i);
    for (size_t i = 0; ok && i < tf_pool_node_selector_count(pool); i++) {
      char *kv = join(tf_pool_node_selector_key(pool, i), "=", tf_pool_node_selector_value(pool, i));
      ok = kv && set_add(&e->selector, kv) == 0;
      free(kv);
    }
    for (int prev = 0; ok && prev < 2; prev++) {
      const char *name = NULL;
      if (tf_pool_secret_ref(pool, prev, &name, NULL) == 0 && name && *name) ok = set_add(&e->secrets, name) == 0;
    }
    for (size_t i = 0; ok && i < tf_pool_listener_count(pool); i++)
      if (tf_pool_listener_tls_secret(pool, i)) ok = set_add(&e->secrets, tf_pool_listener_tls_secret(pool, i)) == 0;
  }
  tf_pool_free(pool);
  if (!ok) {
    pool_free(e);
    return NULL;
  }
  return e;
}

static int labels_of(ix_set *out, const cJSON *root)
{
  const cJSON *l;
  cJSON_ArrayForEach(l, meta(root, "labels"))
  {
    char *kv = cJSON_IsString(l) ? join(l->string, "=", l->valuestring) : NULL;
    int rc = kv ? set_add(out, kv) : 0;
    free(kv);
    if (rc < 0) return -1;
  }
  return 0;
}

/* A pool whose nodeSelector @p labels (a node's) satisfy; a pool that did not parse selects none. */
static int selects(const ix_pool *p, const ix_set *labels)
{
  if (!labels || p->selector.n == 0) return 0;
  for (size_t i = 0; i < p->selector.n; i++)
    if (!set_has(labels, p->selector.v[i])) return 0;
  return 1;
}

/* ---- index updates (the lock held) ---- */

static void pod_unlink(tf_adapter__index *x, const ix_pod *e)
{
  multi_del(x->by_pool, e->pool, e->key);
  if (*e->p.node) multi_del(x->by_node, e->p.node, e->key);
  for (size_t i = 0; i < e->addrs.n; i++) multi_del(x->by_addr, e->addrs.v[i], e->key);
}

static int pod_link(tf_adapter__index *x, const ix_pod *e)
{
  int rc = multi_add(x->by_pool, e->pool, e->key);
  if (rc == 0 && *e->p.node) rc = multi_add(x->by_node, e->p.node, e->key);
  for (size_t i = 0; rc == 0 && i < e->addrs.n; i++) rc = multi_add(x->by_addr, e->addrs.v[i], e->key);
  return rc;
}

static void sites_unlink(tf_adapter__index *x, const char *key, const ix_pool *e)
{
  for (size_t i = 0; i < e->sites.n; i++) multi_del(x->at_site, e->sites.v[i], key);
}

/* ---- which pools a change concerns (the lock held) ---- */

static int overlap(uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) { return a0 <= b1 && b0 <= a1; }

/* Whether a claim (@p range and its pool's listener @p ports) may meet pool @p p's ports: its relay range, its
 * listener ports (shifted by up to relays-per-node slices). A superset of the planner's test (any of its
 * candidates' ranges is within its relay range); a pool not parsed (NULL: not cached) may meet anything. */
static int meets(const ix_pool *p, tf_port_range range, const uint16_t *ports, size_t nports)
{
  if (!p || !p->parsed) return 1;
  uint32_t shift = p->rpn > 1 ? p->rpn - 1 : 0;
  if (overlap(p->range.start, p->range.end, range.start, range.end)) return 1;
  for (size_t j = 0; j < nports; j++)
    if (overlap(p->range.start, p->range.end, ports[j], ports[j])) return 1;
  for (size_t i = 0; i < p->nports; i++) {
    uint32_t lo = p->ports[i], hi = lo + shift;
    if (overlap(lo, hi, range.start, range.end)) return 1;
    for (size_t j = 0; j < nports; j++)
      if (overlap(lo, hi, ports[j], ports[j])) return 1;
  }
  return 0;
}

/* The pools a claim (@p range, listener @p ports) coming or going on @p addr concerns: those with a relay there
 * or that may place one there, whose ports it may meet. */
static int want_claimers(const tf_adapter__index *x, ix_set *out, const char *addr, tf_port_range range,
                         const uint16_t *ports, size_t nports)
{
  const ix_set *pods = tf_smap__get(x->by_addr, addr), *pools = tf_smap__get(x->at_site, addr);
  for (size_t i = 0; pods && i < pods->n; i++) {
    const ix_pod *e = tf_smap__get(x->pods, pods->v[i]);
    if (e && meets(tf_smap__get(x->pools, e->pool), range, ports, nports) && set_add(out, e->pool) < 0) return -1;
  }
  for (size_t i = 0; pools && i < pools->n; i++)
    if (meets(tf_smap__get(x->pools, pools->v[i]), range, ports, nports) && set_add(out, pools->v[i]) < 0) return -1;
  return 0;
}

/* The pools with a relay on @p node (@p cli_port not 0: one that listens on that CLI port there). */
static int want_on_node(const tf_adapter__index *x, ix_set *out, const char *node, uint16_t cli_port)
{
  const ix_set *pods = *node ? tf_smap__get(x->by_node, node) : NULL;
  for (size_t i = 0; pods && i < pods->n; i++) {
    const ix_pod *e = tf_smap__get(x->pods, pods->v[i]);
    if (e && (!cli_port || (e->p.host_network && e->p.cli_port == cli_port)) && set_add(out, e->pool) < 0) return -1;
  }
  return 0;
}

/* A relay pod's claims concern: the pools its address and ports meet, and (its CLI port on its node's
 * 127.0.0.1) the pools with a relay on that port there: their collision comes or goes. */
static int want_pod_claims(const tf_adapter__index *x, ix_set *out, const ix_pod *e)
{
  const ix_pool *owner = tf_smap__get(x->pools, e->pool);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < e->addrs.n; i++)
    rc = want_claimers(x, out, e->addrs.v[i], e->range, owner ? owner->ports : NULL, owner ? owner->nports : 0);
  if (rc == 0 && e->p.host_network && e->p.cli_port) rc = want_on_node(x, out, e->p.node, e->p.cli_port);
  return rc;
}

/* @p cur (NULL: none) in place of what the index holds under @p key. 0; -1 on no memory (nothing kept). */
static int pod_replace(tf_adapter__index *x, const char *key, ix_pod *cur)
{
  ix_pod *old = tf_smap__get(x->pods, key);
  if (old) {
    pod_unlink(x, old);
    tf_smap__del(x->pods, key);
  }
  if (!cur) return 0;
  if (tf_smap__put(x->pods, key, cur) < 0) {
    pod_free(cur);
    return -1;
  }
  if (pod_link(x, cur) == 0) return 0;
  pod_unlink(x, cur);
  tf_smap__del(x->pods, key);
  return -1;
}

static int pod_changed(tf_adapter__index *x, ix_set *out, tf_informer_op op, const char *key, const cJSON *root)
{
  char *owner = owner_of(root);
  int rc = owner ? set_add(out, owner) : 0;
  free(owner);
  const ix_pod *old = tf_smap__get(x->pods, key);
  ix_pod *cur = op == TF_INFORMER_DELETED || !root ? NULL : pod_entry(key, root);
  /* claims that stay (a status, a gate, a label-free annotation) concern nobody else */
  if (!(old && cur && same_claim(old, cur))) {
    if (rc == 0 && old) rc = want_pod_claims(x, out, old);
    if (rc == 0 && cur) rc = want_pod_claims(x, out, cur);
  }
  return pod_replace(x, key, cur) < 0 ? -1 : rc;
}

/* Every relay pod of pool @p key (by its label), with @p p's listener ports, concerns the pools it meets. */
static int want_pool_claims(const tf_adapter__index *x, ix_set *out, const char *key, const ix_pool *p)
{
  const ix_set *pods = p ? tf_smap__get(x->by_pool, key) : NULL;
  int rc = 0;
  for (size_t i = 0; rc == 0 && pods && i < pods->n; i++) {
    const ix_pod *e = tf_smap__get(x->pods, pods->v[i]);
    for (size_t k = 0; rc == 0 && e && k < e->addrs.n; k++)
      rc = want_claimers(x, out, e->addrs.v[k], e->range, p->ports, p->nports);
  }
  return rc;
}

static int pool_changed(tf_adapter__index *x, ix_set *out, tf_informer_op op, const char *key, const cJSON *root)
{
  int rc = set_add(out, key);
  if (op != TF_INFORMER_DELETED && !root) return rc; /* not an object: the index keeps what it had */
  ix_pool *old = tf_smap__get(x->pools, key);
  ix_pool *cur = op == TF_INFORMER_DELETED ? NULL : pool_entry(root);
  if (op != TF_INFORMER_DELETED && !cur) rc = -1;
  /* its relays are claims only while it exists, and carry its listener ports: a pool coming or going, or
   * its ports changing, concerns the pools its relays meet */
  int claims_move = !old || !cur || strcmp(old->uid, cur->uid) != 0 || old->nports != cur->nports ||
                    memcmp(old->ports, cur->ports, old->nports * sizeof(uint16_t)) != 0;
  if (rc == 0 && claims_move) rc = want_pool_claims(x, out, key, old);
  if (rc == 0 && claims_move) rc = want_pool_claims(x, out, key, cur);
  if (old) {
    if (cur && strcmp(old->uid, cur->uid) == 0) { /* its planner's addresses stay until it is planned again */
      cur->sites = old->sites;
      memset(&old->sites, 0, sizeof(old->sites));
    } else {
      sites_unlink(x, key, old);
    }
    const char *mapped = tf_smap__get(x->uids, old->uid);
    if (mapped && strcmp(mapped, key) == 0) tf_smap__del(x->uids, old->uid);
    tf_smap__del(x->pools, key);
  }
  if (cur) {
    char *k = strdup(key);
    if (!k || tf_smap__put(x->uids, cur->uid, k) < 0 || tf_smap__put(x->pools, key, cur) < 0) {
      if (!tf_smap__has(x->uids, cur->uid)) free(k);
      if (tf_smap__get(x->pools, key) != cur) pool_free(cur);
      rc = -1;
    }
  }
  return rc;
}

static int every_pool(const tf_adapter__index *x, ix_set *out)
{
  size_t pos = 0;
  const char *k;
  void *v;
  while (tf_smap__next(x->pools, &pos, &k, &v))
    if (set_add(out, k) < 0) return -1;
  return 0;
}

static int node_changed(tf_adapter__index *x, ix_set *out, tf_informer_op op, const char *key, const cJSON *root)
{
  if (strchr(key, '/')) return every_pool(x, out); /* the API servers' Endpoints: every pool's reserved addresses */
  ix_set *old = tf_smap__get(x->nodes, key), *cur = NULL;
  if (op != TF_INFORMER_DELETED && root) {
    if (!(cur = calloc(1, sizeof(*cur))) || labels_of(cur, root) < 0) {
      set_free(cur);
      return -1;
    }
  }
  /* the pools it may host (before or after: its labels may have changed), and those with relays on it */
  size_t pos = 0;
  const char *k;
  void *v;
  int rc = 0;
  while (rc == 0 && tf_smap__next(x->pools, &pos, &k, &v))
    if (selects(v, old) || selects(v, cur)) rc = set_add(out, k);
  if (rc == 0) rc = want_on_node(x, out, key, 0);
  if (cur) {
    if (tf_smap__put(x->nodes, key, cur) < 0) {
      set_free(cur);
      rc = -1;
    }
  } else {
    tf_smap__del(x->nodes, key);
  }
  return rc;
}

/* The pools that read Secret @p key (auth, previous, TLS), and the pool that owns it (its relay configs). */
static int secret_changed(const tf_adapter__index *x, ix_set *out, const char *key, const cJSON *root)
{
  const char *slash = strchr(key, '/');
  char *owner = owner_of(root);
  int rc = owner ? set_add(out, owner) : 0;
  free(owner);
  if (!slash) return rc;
  size_t nslen = (size_t)(slash - key);
  size_t pos = 0;
  const char *k;
  void *v;
  while (rc == 0 && tf_smap__next(x->pools, &pos, &k, &v)) {
    const ix_pool *p = v;
    if (strlen(p->ns) == nslen && strncmp(p->ns, key, nslen) == 0 && set_has(&p->secrets, slash + 1))
      rc = set_add(out, k);
  }
  return rc;
}

/* ---- the queue ---- */

static void add_every_cached_pool(tf_informer *pools, tf_workqueue *queue)
{
  tf_informer_object **objs = NULL;
  size_t n = 0;
  if (tf_informer_list_objects(pools, NULL, NULL, &objs, &n) < 0) return;
  for (size_t i = 0; i < n; i++) (void)tf_workqueue_add(queue, tf_informer_object_key(objs[i]));
  tf_informer_objects_release(objs, n);
}

tf_err tf_adapter__enqueue(tf_adapter__index *x, tf_informer *pools, tf_workqueue *queue, tf_adapter_cache cache,
                           tf_informer_op op, const char *key, const char *object)
{
  if (cache < TF_ADAPTER_POOLS || cache > TF_ADAPTER_CONFIGMAPS)
    return tf_error__set(TF_EINVALID, "cache: %d is not a tf_adapter_cache", (int)cache);
  if (!key) {
    add_every_cached_pool(pools, queue);
    return TF_OK;
  }
  cJSON *root = object ? cJSON_Parse(object) : NULL;
  ix_set out = {0};
  int rc = 0;
  pthread_mutex_lock(&x->mu);
  switch (cache) {
  case TF_ADAPTER_POOLS: rc = pool_changed(x, &out, op, key, root); break;
  case TF_ADAPTER_PODS: rc = pod_changed(x, &out, op, key, root); break;
  case TF_ADAPTER_NODES: rc = node_changed(x, &out, op, key, root); break;
  case TF_ADAPTER_SECRETS: rc = secret_changed(x, &out, key, root); break;
  case TF_ADAPTER_CONFIGMAPS: { /* its own <pool>-turn-uris, or a vantage runner's <pool>-vantage */
    char *owner = owner_of(root);
    rc = owner ? set_add(&out, owner) : 0;
    free(owner);
    break;
  }
  }
  /* out of memory part way: every pool, so that none misses what it needed */
  if (rc < 0) (void)every_pool(x, &out);
  pthread_mutex_unlock(&x->mu);
  cJSON_Delete(root);
  for (size_t i = 0; i < out.n; i++) (void)tf_workqueue_add(queue, out.v[i]);
  if (rc < 0) add_every_cached_pool(pools, queue);
  set_clear(&out);
  return TF_OK;
}

/* ---- what the reconcile asks ---- */

void tf_adapter__sites_clear(tf_adapter__sites *s)
{
  for (size_t i = 0; i < s->naddrs; i++) free(s->addrs[i]);
  for (size_t i = 0; i < s->nnodes; i++) free(s->nodes[i]);
  free(s->addrs);
  free(s->nodes);
  memset(s, 0, sizeof(*s));
}

static int cmp_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int tf_adapter__sites_plan(tf_adapter__sites *out, const tf_pool *pool, const tf_nodes *nodes)
{
  tf_adapter__sites_clear(out);
  tf_plan__site *sites = NULL;
  size_t n = 0;
  if (tf_plan__sites(pool, nodes, &sites, &n) < 0) return -1;
  ix_set addrs = {0}, names = {0};
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    char text[TF_ADDR_STRLEN];
    rc = tf_addr_format(text, sizeof(text), &sites[i].addr) == 0 && set_add(&addrs, text) == 0 &&
                 set_add(&names, sites[i].node) == 0
             ? 0
             : -1;
  }
  free(sites);
  if (rc < 0) {
    set_clear(&addrs);
    set_clear(&names);
    return -1;
  }
  if (addrs.n) qsort(addrs.v, addrs.n, sizeof(char *), cmp_text);
  if (names.n) qsort(names.v, names.n, sizeof(char *), cmp_text);
  out->known = 1;
  out->addrs = addrs.v;
  out->naddrs = addrs.n;
  out->nodes = names.v;
  out->nnodes = names.n;
  return 0;
}

int tf_adapter__index_set_sites(tf_adapter__index *x, const char *key, const char *uid, const tf_adapter__sites *s)
{
  int rc = 0;
  pthread_mutex_lock(&x->mu);
  ix_pool *p = tf_smap__get(x->pools, key);
  if (p && (!uid || strcmp(p->uid, uid) == 0)) {
    sites_unlink(x, key, p);
    set_clear(&p->sites);
    for (size_t i = 0; rc == 0 && s && i < s->naddrs; i++)
      rc = set_add(&p->sites, s->addrs[i]) < 0 || multi_add(x->at_site, s->addrs[i], key) < 0 ? -1 : 0;
  }
  pthread_mutex_unlock(&x->mu);
  return rc;
}

static int cmp_pod_key(const void *a, const void *b)
{
  return strcmp((*(const ix_pod *const *)a)->key, (*(const ix_pod *const *)b)->key);
}

/* The pods of the sets @p keys of @p m under @p names (NULL: every set), once each. */
static int gather(const tf_adapter__index *x, const tf_smap *m, char *const *names, size_t n, ix_pod ***out,
                  size_t *count)
{
  *out = NULL;
  *count = 0;
  size_t cap = 0, pos = 0;
  tf_smap *seen = tf_smap__new(NULL);
  if (!seen) return -1;
  for (size_t i = 0;; i++) {
    const ix_set *keys = NULL;
    if (names) {
      if (i == n) break;
      keys = tf_smap__get(m, names[i]);
    } else {
      const char *k;
      void *v;
      if (!tf_smap__next(m, &pos, &k, &v)) break;
      keys = v;
    }
    for (size_t j = 0; keys && j < keys->n; j++) {
      ix_pod *e = tf_smap__get(x->pods, keys->v[j]);
      if (!e || tf_smap__has(seen, e->key)) continue;
      if (tf_smap__put(seen, e->key, e) < 0) goto fail;
      if (*count == cap) {
        ix_pod **g = realloc(*out, (cap = cap ? cap * 2 : 16) * sizeof(*g));
        if (!g) goto fail;
        *out = g;
      }
      (*out)[(*count)++] = e;
    }
  }
  tf_smap__free(seen);
  return 0;
fail:
  tf_smap__free(seen);
  free(*out);
  *out = NULL;
  *count = 0;
  return -1;
}

/* One claim into the digest of a pool's claims: its fields, each with its length. */
static void digest_field(EVP_MD_CTX *ctx, const void *data, size_t len)
{
  uint32_t n = (uint32_t)len;
  (void)EVP_DigestUpdate(ctx, &n, sizeof(n));
  if (len) (void)EVP_DigestUpdate(ctx, data, len);
}

int tf_adapter__index_claims(tf_adapter__index *x, tf_engine *engine, const char *key, const char *uid,
                             const tf_adapter__sites *sites, unsigned char digest[32], size_t *refused, char *why,
                             size_t why_len, size_t *collisions)
{
  *refused = 0;
  *collisions = 0;
  if (why && why_len) why[0] = '\0';
  const int all = !sites || !sites->known;
  ix_pod **pods = NULL, **addrs = NULL, **own = NULL, **near = NULL;
  const ix_pool **owners = NULL;
  size_t n = 0, naddrs = 0, nown = 0, nnear = 0, kept = 0;
  ix_set own_nodes = {0};
  int rc = -1;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char md[32];
  unsigned int mdlen = 0;
  if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
    EVP_MD_CTX_free(ctx);
    return -1;
  }
  pthread_mutex_lock(&x->mu);
  /* the CLI ports other pools' host-network relays listen on, on the nodes its relays may be planned on */
  if (gather(x, x->by_node, all ? NULL : sites->nodes, all ? 0 : sites->nnodes, &pods, &n) < 0) goto out;
  for (size_t i = 0; i < n; i++) {
    const tf_adapter__pod *p = &pods[i]->p;
    if (strcmp(p->owner_uid, uid) != 0 && p->host_network && !p->finished && p->cli_port && *p->node) {
      pods[kept++] = pods[i];
      digest_field(ctx, p->node, strlen(p->node));
      digest_field(ctx, &p->cli_port, sizeof(p->cli_port));
    }
  }
  n = kept;
  digest_field(ctx, &n, sizeof(n)); /* where the CLI claims end: no address claim reads as one */
  /* other existing pools' relays on the addresses it may place relays on, with their pools' listener ports,
   * where their ports may meet the engine's pool's (the others the planner would pass over) */
  const tf_pool *mine = tf_engine_pool(engine);
  ix_pool self = {.parsed = mine != NULL};
  if (mine) {
    self.range = tf_pool_relay_port_range(mine);
    self.rpn = tf_pool_relays_per_node(mine);
    for (size_t i = 0; i < tf_pool_listener_count(mine) && self.nports < 16; i++)
      self.ports[self.nports++] = tf_pool_listener_port(mine, i);
    self.parsed = tf_pool_listener_count(mine) <= 16;
  }
  if (gather(x, x->by_addr, all ? NULL : sites->addrs, all ? 0 : sites->naddrs, &addrs, &naddrs) < 0) goto out;
  if (naddrs && !(owners = calloc(naddrs, sizeof(*owners)))) goto out;
  kept = 0;
  for (size_t i = 0; i < naddrs; i++) {
    const tf_adapter__pod *p = &addrs[i]->p;
    const char *pkey = tf_smap__get(x->uids, p->owner_uid);
    const ix_pool *owner = pkey && strcmp(pkey, key) != 0 ? tf_smap__get(x->pools, pkey) : NULL;
    if (owner && strcmp(owner->ns, p->ns) == 0 && meets(&self, addrs[i]->range, owner->ports, owner->nports)) {
      owners[kept] = owner;
      addrs[kept++] = addrs[i];
      digest_field(ctx, owner->name, strlen(owner->name));
      digest_field(ctx, p->identity, p->identity ? strlen(p->identity) : 0);
      digest_field(ctx, owner->ports, owner->nports * sizeof(owner->ports[0]));
    }
  }
  naddrs = kept;
  /* the same claims as the engine holds from the last time: left as they are (nothing to rebuild) */
  if (!EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen != sizeof(md)) goto out;
  if (memcmp(md, digest, sizeof(md)) != 0) {
    (void)tf_engine_clear_claims(engine);
    for (size_t i = 0; i < n; i++)
      if (tf_engine_add_cli_claim(engine, pods[i]->p.node, pods[i]->p.cli_port) < 0) (*refused)++;
    for (size_t i = 0; i < naddrs; i++)
      if (tf_engine_add_claim(engine, owners[i]->name, addrs[i]->p.identity, owners[i]->ports, owners[i]->nports) < 0)
        (*refused)++;
    memcpy(digest, md, sizeof(md));
  }
  /* a CLI port its relays share with another relay on their node: every relay on those nodes, in key order */
  char *pool_key = (char *)key;
  if (gather(x, x->by_pool, &pool_key, 1, &own, &nown) < 0) goto out;
  for (size_t i = 0; i < nown; i++)
    if (strcmp(own[i]->p.owner_uid, uid) == 0 && own[i]->p.host_network && own[i]->p.cli_port && *own[i]->p.node &&
        set_add(&own_nodes, own[i]->p.node) < 0)
      goto out;
  if (gather(x, x->by_node, own_nodes.v, own_nodes.n, &near, &nnear) < 0) goto out;
  if (nnear) qsort(near, nnear, sizeof(*near), cmp_pod_key);
  tf_adapter__pod *flat = calloc(nnear + 1, sizeof(*flat));
  if (!flat) goto out;
  for (size_t i = 0; i < nnear; i++) flat[i] = near[i]->p; /* shallow: read under the lock */
  *collisions = tf_adapter__cli_collisions(flat, nnear, uid, why, why_len);
  free(flat);
  rc = 0;
out:
  pthread_mutex_unlock(&x->mu);
  if (rc < 0) memset(digest, 0, 32); /* not known to be what the engine holds */
  EVP_MD_CTX_free(ctx);
  free(pods);
  free(addrs);
  free(owners);
  free(own);
  free(near);
  set_clear(&own_nodes);
  return rc;
}
