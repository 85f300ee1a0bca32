/* See cache.h. The informers call on_change on their own threads; that only
 * bumps a counter, so the informers never wait on request threads. */
#include "cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct wh_cache {
  tf_informer *pools, *nodes, *endpoints; /* endpoints: the API servers', which no relay may take */
  pthread_mutex_t lock;
  unsigned long changes;  /* bumped by every informer change */
  unsigned long built_at; /* changes the snapshot was built from */
  int built_synced;
  wh_snapshot *current;
};

static void on_change(tf_informer_op op, const char *key, const char *object, void *payload)
{
  (void)op, (void)key, (void)object;
  wh_cache *c = payload;
  pthread_mutex_lock(&c->lock);
  c->changes++;
  pthread_mutex_unlock(&c->lock);
}

static int informer(tf_informer **out, tf_kube *kube, const char *api, const char *resource, const char *ns,
                    const char *fields, wh_cache *c, tf_log_cb log, char *err, size_t errlen)
{
  char *path = NULL;
  tf_informer_options o;
  tf_informer_options_init(&o, TF_INFORMER_OPTIONS_VERSION);
  if (tf_kube_path(&path, api, resource, ns, NULL, NULL) < 0) goto fail;
  o.path = path;
  o.field_selector = fields;
  o.on_change = on_change;
  o.payload = c;
  o.log = log;
  o.log_level = TF_LOG_WARN;
  if (tf_informer_new(out, kube, &o) < 0 || tf_informer_start(*out) < 0) goto fail;
  tf_free(path);
  return 0;
fail:
  snprintf(err, errlen, "%s informer: %s", resource, tf_error_last()->message);
  tf_free(path);
  return -1;
}

int wh_cache_start(wh_cache **out, tf_kube *kube, tf_log_cb log, char *err, size_t errlen)
{
  wh_cache *c = calloc(1, sizeof(*c));
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  pthread_mutex_init(&c->lock, NULL);
  c->built_at = (unsigned long)-1;
  if (informer(&c->pools, kube, "/apis/turnfleet.hzmi.dev/v1alpha1", "turnpools", NULL, NULL, c, log, err, errlen) < 0 ||
      informer(&c->nodes, kube, "/api/v1", "nodes", NULL, NULL, c, log, err, errlen) < 0 ||
      informer(&c->endpoints, kube, "/api/v1", "endpoints", "default", "metadata.name=kubernetes", c, log, err,
               errlen) < 0) {
    wh_cache_stop(c);
    return -1;
  }
  *out = c;
  return 0;
}

int wh_cache_synced(wh_cache *c)
{
  return tf_informer_has_synced(c->pools) && tf_informer_has_synced(c->nodes) && tf_informer_has_synced(c->endpoints);
}

static void snapshot_free(wh_snapshot *s)
{
  if (!s) return;
  tf_nodes_free(s->nodes);
  for (size_t i = 0; i < s->pool_count; i++) tf_pool_free(s->pools[i]);
  free(s->pools);
  free(s);
}

static wh_snapshot *build(wh_cache *c)
{
  wh_snapshot *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  char *list = NULL;
  if (tf_informer_has_synced(c->nodes) && tf_informer_list(c->nodes, NULL, NULL, &list) == 0) {
    size_t n = strlen(list) + 32;
    char *doc = malloc(n);
    if (doc) {
      snprintf(doc, n, "{\"kind\":\"List\",\"items\":%s}", list);
      /* a node the parser refuses leaves the inventory out: no placement warnings, no conflict check */
      if (tf_nodes_parse(&s->nodes, doc, strlen(doc)) < 0) s->nodes = NULL;
      free(doc);
    }
    /* the API servers' endpoints, as the operator's planner reserves them */
    tf_informer_object *ep = NULL;
    if (s->nodes && tf_informer_get_object(c->endpoints, "default/kubernetes", &ep) == 0) {
      size_t len;
      const char *text = tf_informer_object_json(ep, &len);
      (void)tf_nodes_reserve_endpoints(s->nodes, text, len, "the Kubernetes API server");
    }
    tf_informer_object_release(ep);
    tf_free(list);
    list = NULL;
  }
  /* each cached pool's own text, borrowed: parsed once into its tf_pool, never printed again */
  tf_informer_object **objs = NULL;
  size_t n = 0;
  if (tf_informer_list_objects(c->pools, NULL, NULL, &objs, &n) == 0) {
    s->pools = calloc(n + 1, sizeof(tf_pool *));
    for (size_t i = 0; i < n && s->pools; i++) {
      size_t len;
      const char *text = tf_informer_object_json(objs[i], &len);
      tf_pool *p = NULL;
      if (tf_pool_parse(&p, text, len, TF_FORMAT_JSON) == 0) s->pools[s->pool_count++] = p;
    }
    tf_informer_objects_release(objs, n);
  }
  return s;
}

wh_snapshot *wh_cache_get(wh_cache *c)
{
  pthread_mutex_lock(&c->lock);
  int synced = wh_cache_synced(c);
  if (!c->current || c->built_at != c->changes || c->built_synced != synced) {
    unsigned long at = c->changes;
    /* built under the lock: requests after a change wait for one build, not one each */
    wh_snapshot *s = build(c);
    if (s) {
      if (c->current && c->current->refs == 0) snapshot_free(c->current);
      else if (c->current) c->current->refs |= 1UL << (sizeof(unsigned long) * 8 - 1); /* orphaned */
      c->current = s;
      c->built_at = at;
      c->built_synced = synced;
    }
  }
  wh_snapshot *s = c->current;
  if (s) s->refs++;
  pthread_mutex_unlock(&c->lock);
  return s;
}

void wh_cache_release(wh_cache *c, wh_snapshot *s)
{
  if (!s) return;
  const unsigned long orphan = 1UL << (sizeof(unsigned long) * 8 - 1);
  pthread_mutex_lock(&c->lock);
  s->refs--;
  int drop = s->refs == orphan;
  pthread_mutex_unlock(&c->lock);
  if (drop) snapshot_free(s);
}

void wh_cache_stop(wh_cache *c)
{
  if (!c) return;
  tf_informer_free(c->pools);
  tf_informer_free(c->nodes);
  tf_informer_free(c->endpoints);
  snapshot_free(c->current);
  pthread_mutex_destroy(&c->lock);
  free(c);
}
