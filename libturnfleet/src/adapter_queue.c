/* Which pools a change of one cached object concerns (tf_adapter_changed()):
 * the informers' callbacks, forwarded, become keys in the adapter's work
 * queue. Runs on the informers' threads: it reads the pools' cache and adds
 * to the queue, both thread-safe, and nothing of the adapter's own books. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "adapter_internal.h"
#include "internal.h"

#define POOL_LABEL "turnfleet.hzmi.dev/pool"

static void add(tf_workqueue *queue, const char *ns, const char *name)
{
  char *key = NULL;
  if (ns && name && asprintf(&key, "%s/%s", ns, name) >= 0) (void)tf_workqueue_add(queue, key);
  free(key);
}

/* Every pool in the cache (of namespace @p ns; NULL: all). */
static void add_every_pool(tf_informer *pools, tf_workqueue *queue, const char *ns)
{
  char *list = NULL;
  if (tf_informer_list(pools, ns, NULL, &list) < 0) return;
  cJSON *arr = cJSON_Parse(list);
  const cJSON *p;
  cJSON_ArrayForEach(p, arr)
  {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "metadata");
    add(queue, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "namespace")),
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name")));
  }
  cJSON_Delete(arr);
  tf_free(list);
}

/* The pool an object belongs to: its turnfleet.hzmi.dev/pool label, in its namespace. */
static void add_owner(tf_workqueue *queue, const char *object)
{
  cJSON *root = object ? cJSON_Parse(object) : NULL;
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "metadata");
  add(queue, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "namespace")),
      cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "labels"), POOL_LABEL)));
  cJSON_Delete(root);
}

void tf_adapter__enqueue_owner(tf_workqueue *queue, const char *object) { add_owner(queue, object); }

tf_err tf_adapter__enqueue(tf_informer *pools, tf_workqueue *queue, tf_adapter_cache cache, tf_informer_op op,
                           const char *key, const char *object)
{
  if (!key) {
    add_every_pool(pools, queue, NULL);
    return TF_OK;
  }
  /* a pool or a relay pod appearing or going frees or takes addresses: every other pool's claims change */
  const int came_or_went = op != TF_INFORMER_UPDATED;
  switch (cache) {
  case TF_ADAPTER_POOLS:
    (void)tf_workqueue_add(queue, key);
    if (came_or_went) add_every_pool(pools, queue, NULL);
    return TF_OK;
  case TF_ADAPTER_PODS:
    add_owner(queue, object);
    if (came_or_went) add_every_pool(pools, queue, NULL);
    return TF_OK;
  case TF_ADAPTER_CONFIGMAPS: /* its own <pool>-turn-uris, or a vantage runner's <pool>-vantage */
    add_owner(queue, object);
    return TF_OK;
  case TF_ADAPTER_NODES:
    add_every_pool(pools, queue, NULL);
    return TF_OK;
  case TF_ADAPTER_SECRETS: { /* any pool of its namespace may read it (auth, TLS) */
    const char *slash = strchr(key, '/');
    char *ns = slash ? strndup(key, (size_t)(slash - key)) : NULL;
    if (ns) add_every_pool(pools, queue, ns);
    free(ns);
    return TF_OK;
  }
  }
  return tf_error__set(TF_EINVALID, "cache: %d is not a tf_adapter_cache", (int)cache);
}
