/* The webhook's read-only view of the cluster: informers on TURNPools (all
 * namespaces) and Nodes, turned into an immutable snapshot (a node inventory
 * and the parsed pools) that requests share; rebuilt on the first request after
 * a change. */
#ifndef TURNFLEET_WEBHOOK_CACHE_H
#define TURNFLEET_WEBHOOK_CACHE_H

#include <stddef.h>

#include "turnfleet.h"

typedef struct wh_cache wh_cache;

typedef struct wh_snapshot {
  tf_nodes *nodes;      /* NULL until the Node informer has synced */
  tf_pool **pools;      /* the TURNPools that parse (others cannot run relays) */
  size_t pool_count;
  unsigned long refs;   /* owned by the cache */
} wh_snapshot;

/* Start both informers on @p kube (borrowed, must outlive the cache). 0, or -1 with @p err. */
int wh_cache_start(wh_cache **out, tf_kube *kube, tf_log_cb log, char *err, size_t errlen);
/* 1 once both informers have listed. */
int wh_cache_synced(wh_cache *c);
/* The current snapshot, held until wh_cache_release(); NULL when out of memory. Any thread. */
wh_snapshot *wh_cache_get(wh_cache *c);
void wh_cache_release(wh_cache *c, wh_snapshot *s);
/* Stop the informers and free everything (no snapshot may be held). NULL does nothing. */
void wh_cache_stop(wh_cache *c);

#endif
