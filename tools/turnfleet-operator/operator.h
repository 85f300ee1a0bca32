/* The operator's wiring: informers on TURNPools, relay Pods, Nodes, Secrets
 * and ConfigMaps feed a work queue keyed by pool (tf_adapter_changed() says
 * which pools a change concerns); one thread takes a key
 * (op_controller_run_once()) and has the library's Kubernetes adapter
 * (adapter.h) reconcile that pool. Every decision is the library's. */
#ifndef TURNFLEET_OPERATOR_H
#define TURNFLEET_OPERATOR_H

#include <turnfleet.h>

typedef struct op_config {
  const char *namespace_;      /* only this namespace's pools; NULL: all */
  long resync_ms;              /* informer resync (every pool reconciled again); 0: never */
  long bookmark_interval_ms;   /* the server's bookmark interval: a watch silent for two is relisted; 0: no check */
  tf_adapter_options adapter;  /* the adapter's knobs; its caches, queue and recorder are the controller's */
  int no_api_endpoints;        /* no informer on the kubernetes Endpoints of default (a namespaced install) */
} op_config;

typedef struct op_controller op_controller;

/* 0, or -1 with the reason logged. @p kube is borrowed and must outlive the controller. */
int op_controller_new(op_controller **out, tf_kube *kube, const op_config *cfg);
/* Start the informers. 0 or -1. */
int op_controller_start(op_controller *c);
/* 1 once every informer has listed. */
int op_controller_synced(const op_controller *c);
/* Queue every known pool (on becoming the leader). */
void op_controller_enqueue_all(op_controller *c);
/* Take one pool from the queue (waiting up to @p timeout_ms) and reconcile it. */
void op_controller_run_once(op_controller *c, long timeout_ms);
/* The adapter (its write gate: tf_adapter_write_gate()). */
tf_adapter *op_controller_adapter(op_controller *c);
/* Every turnfleet_* metric of the pools and the writes, and turnfleet_operator_leader at @p leading, as
 * Prometheus text (malloc'd; NULL on no memory). Any thread. */
char *op_controller_metrics(op_controller *c, int leading);
/* Stop the informers and workers and release everything. Never touches the cluster. */
void op_controller_free(op_controller *c);

#endif
