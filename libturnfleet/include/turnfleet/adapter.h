/**
 * @file turnfleet/adapter.h
 * @brief The Kubernetes adapter: the library half of the operator. Given the
 * caches of TURNPools, relay Pods, Nodes, the pools' own Secrets and ConfigMaps
 * (informers the caller runs) and of the Secrets the pools reference (informers
 * the adapter runs, one per referenced name, only while a pool references it),
 * tf_adapter_reconcile() reconciles one pool: its facts into the
 * pool's engine (engine.h, the same engine `turnfleet up` runs), the engine's
 * actions as Kubernetes writes (pods created and deleted, readiness gates), then
 * the `<pool>-relay-config` Secret, the `<pool>-turn-uris` ConfigMap and the
 * pool's status written only where they differ (manifest.h builds them).
 *
 * What it holds to (docs/operator.md):
 *  - a relay Pod is read back by the parser beside its builder: one contract
 *    for its labels and annotations;
 *  - an owned object is written only when it differs from the cache, with the
 *    resourceVersion read; a 409 gets one fresh read and one retry, never a loop;
 *  - a create or delete that the pod cache does not show yet is expected: the
 *    relay is not created again, nor its pod deleted again, until the cache
 *    shows it (or 30 s passed, when the cache is believed);
 *  - the status is not written when only the relays' order or the times of
 *    unchanged probe outcomes changed;
 *  - each pool's relays take CLI ports from its slot (FNV-1a of `ns/name`),
 *    passing over the ports other pools' host-network relays hold on their node
 *    (tf_engine_add_cli_claim()); a CLI port two relays on one node still share
 *    is reported as a `CLIPortCollision` Warning Event on the pool, once per
 *    collision;
 *  - the writes made while a pool is reconciled are charged to that pool's write
 *    budget (tf_adapter_write_gate()): a stale cache never drives a write loop.
 *
 * Thread safety: one adapter is used by one thread (the caller's loop), but for
 * tf_adapter_changed() and tf_adapter_write_metrics() (any thread); probes and
 * agent scrapes run on its own worker threads, and its referenced Secrets'
 * informers on theirs, which wake the loop by adding the pool's key to the work
 * queue.
 */
#ifndef TURNFLEET_ADAPTER_H
#define TURNFLEET_ADAPTER_H

#include "common.h"
#include "errors.h"
#include "informer.h"
#include "kube.h"
#include "log.h"
#include "metrics.h"

TF_BEGIN_DECL

/** A Kubernetes adapter (the pools' engines and their books). */
typedef struct tf_adapter tf_adapter;

/** Knobs for tf_adapter_new(). Fields are only appended; read up to the caller's version. */
typedef struct tf_adapter_options {
  unsigned int version;     /**< TF_ADAPTER_OPTIONS_VERSION */
  tf_informer *pools;       /**< TURNPools (required; borrowed, as every handle here: outlives the adapter) */
  tf_informer *pods;        /**< relay Pods, labelled turnfleet.hzmi.dev/pool (required) */
  tf_informer *nodes;       /**< Nodes (required) */
  tf_informer *secrets;     /**< the pools' own `<pool>-relay-config` Secrets, labelled turnfleet.hzmi.dev/pool
                                 (required); before version 4 also the Secrets the pools reference (then: every
                                 Secret of the pools' namespaces) */
  tf_informer *configmaps;  /**< ConfigMaps labelled turnfleet.hzmi.dev/pool (required) */
  tf_workqueue *queue;      /**< a finished probe or scrape adds its pool's key (required) */
  tf_recorder *recorder;    /**< the pools' Events (required) */
  const char *agent_image;  /**< the relay pods' agent container (required; borrowed) */
  uint16_t agent_port;      /**< the agent's port on the relay address (default 9700) */
  long probe_interval_ms;   /**< between a relay's probe result and its next probe (default 5000) */
  long publish_delay_ms;    /**< from a relay leaving turn-uris to its pod's deletion (default 2000) */
  uint16_t cli_port_base;   /**< the first CLI port of the first slot (default 15800) */
  unsigned int cli_slots;   /**< slots of cli_stride ports, one per pool by hash (default 10) */
  unsigned int cli_stride;  /**< ports per slot: the most relays of one pool on one node (default 10) */
  int allow_loopback_peers; /**< render coturn's allow-loopback-peers (test clusters on loopback only) */
  size_t workers;           /**< unused since probes and scrapes run on one loop of their own (every job at
                                 once, none waiting for another); kept for the layout */
  tf_log_cb log;            /**< or NULL (silent) */
  void *log_payload;
  /** version 2: the `kubernetes` Endpoints of namespace `default` (an informer on
   * /api/v1/namespaces/default/endpoints, field selector metadata.name=kubernetes), or NULL: no relay
   * takes an API server's address and port (tf_nodes_reserve_endpoints()), besides the API server URL's */
  tf_informer *api_endpoints;
  long budget_writes;       /**< (version 3) writes per pool ... (default 100; tf_budget) */
  long budget_interval_ms;  /**< (version 3) ... in any window of this length (default 10000) */
  /** version 4: the knobs of the informers the adapter runs itself, one per Secret a pool references (auth
   * secretRef and previousSecretRef, listeners' tlsSecretRef), each on that one name (field selector
   * metadata.name=NAME), made when a pool first references the name and dropped when no pool does: a Secret
   * no pool references is never read. Their path, selectors and callback are the adapter's; strings copied;
   * NULL: the informer defaults. (A version-3 caller's `secrets` serves the references instead.) */
  const tf_informer_options *referenced_secrets;
} tf_adapter_options;

#define TF_ADAPTER_OPTIONS_VERSION 4
#define TF_ADAPTER_OPTIONS_INIT                                                                             \
  {TF_ADAPTER_OPTIONS_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 9700, 5000, 2000, 15800, 10, \
   10, 0, 4, NULL, NULL, NULL, 100, 10000, NULL}

/** The cache an informer change comes from (tf_adapter_changed()). */
typedef enum tf_adapter_cache {
  TF_ADAPTER_POOLS = 0,     /**< tf_adapter_options.pools */
  TF_ADAPTER_PODS = 1,      /**< tf_adapter_options.pods */
  TF_ADAPTER_NODES = 2,     /**< tf_adapter_options.nodes (and the API servers' Endpoints: every pool) */
  TF_ADAPTER_SECRETS = 3,   /**< tf_adapter_options.secrets */
  TF_ADAPTER_CONFIGMAPS = 4 /**< tf_adapter_options.configmaps */
} tf_adapter_cache;

/**
 * Fill @p opts with the defaults of @p version.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_adapter_options_init(tf_adapter_options *opts, unsigned int version);

/**
 * An adapter writing through @p kube (borrowed; its write gate, tf_kube_set_write_gate(), decides whether a
 * write is sent), its workers started.
 * @return 0; TF_EINVALID naming the option (`options.agent_image: required`); TF_ENOMEM; TF_ERESOURCE
 */
TF_EXTERN(tf_err) tf_adapter_new(tf_adapter **out, tf_kube *kube, const tf_adapter_options *opts);

/**
 * Reconcile the pool @p key (`namespace/name`) from the caches. A pool gone from the cache has its books
 * dropped (what it owned goes with it through owner references); a pool being deleted keeps the
 * turnfleet.hzmi.dev/drain finalizer until every relay drained.
 * @param[out] requeue_ms when to reconcile it again (its engine's next wake-up, or when an expected write should
 *             show in the caches; at most 5 s while someone else deletes one of its pods; or when its spent
 *             write budget is free again, tf_adapter_write_gate()); 0: not needed (the watches queue it)
 * @return 0; TF_EUNAVAILABLE (or the cache's error) when it should be retried with backoff, the reason logged
 */
TF_EXTERN(tf_err) tf_adapter_reconcile(tf_adapter *adapter, const char *key, long *requeue_ms);

/**
 * Queue the pools that a change of one cached object concerns: the caches' tf_informer_cb, forwarded. The
 * adapter keeps an index of the pools, relay pods and nodes from these changes (each parsed once per change;
 * its reconciles read other pools' claims from it), so forward every change of those caches, from before the
 * informers start. A TURNPool: itself, and when it appears, goes or changes its listener ports the pools its
 * relays meet; a relay pod: its pool (label turnfleet.hzmi.dev/pool), and when its claim changes (it appears
 * or goes, its address, ports, node, CLI port or phase changes) the pools with a relay on its address or that
 * may place one there whose ports it may meet, and the pools with a relay on its CLI port on its node; a Node:
 * the pools whose nodeSelector its old or new labels match and the pools with relays on it (a namespaced key,
 * the API servers' Endpoints: every pool); a Secret: the pools of its namespace that name it (secretRef,
 * previousSecretRef, tlsSecretRef) and the pool of its label; a ConfigMap: the pool of its label. Any thread
 * (the informers'). From version 4 the secrets cache holds only the pools' own relay-config Secrets: the
 * adapter's own informers on the referenced Secrets queue the pools that name them.
 * @param adapter the adapter (NULL: nothing queued, 0)
 * @param cache   which cache @p object is from
 * @param op      what happened to it
 * @param key     its `namespace/name` (or `name`); NULL: every pool is queued (e.g. on becoming the leader)
 * @param object  its JSON
 * @return 0; TF_EINVALID for an unknown @p cache
 */
TF_EXTERN(tf_err) tf_adapter_changed(tf_adapter *adapter, tf_adapter_cache cache, tf_informer_op op, const char *key,
                                     const char *object);

/**
 * The adapter's half of a client's write gate (a tf_kube_write_gate_cb, @p adapter the adapter): a write made
 * while tf_adapter_reconcile() reconciles a pool is charged to that pool's write budget and refused (0) when
 * the budget is spent (the pool is then queued again once it is free, and not reconciled before); writes
 * made outside a reconcile and Events are not charged (the recorder bounds those). Combine it with the
 * Lease's gate (tf_elector_write_gate()) in the caller's own gate. Called on the thread that writes (the loop's).
 * @return > 0: the write may go; 0: refused
 */
TF_EXTERN(long) tf_adapter_write_gate(const char *method, const char *path, void *adapter);

/**
 * The writes' own counters into @p m: turnfleet_operator_events_pending (Events queued to be sent again),
 * turnfleet_operator_events_dropped_total (given up) and turnfleet_operator_writes_over_budget_total (writes
 * the budget refused). Any thread.
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_adapter_write_metrics(const tf_adapter *adapter, tf_metrics *m);

/**
 * Every reconciled pool's samples (tf_reconcile_metrics() and ReachableFromVantage) into @p m, and
 * turnfleet_operator_reconciles_total{namespace,pool} (TF_METRIC_OPERATOR_RECONCILES: the reconciles of each
 * pool in the cache). Same thread as tf_adapter_reconcile().
 * @return 0, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_adapter_metrics(tf_adapter *adapter, tf_metrics *m);

/** Stop the workers and release everything; never touches the cluster. Stop the informers first. */
TF_EXTERN(void) tf_adapter_free(tf_adapter *adapter);

TF_END_DECL

#endif
