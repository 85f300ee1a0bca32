/* The operator's wiring: informers on TURNPools, relay Pods, Nodes, Secrets
 * and ConfigMaps feed a work queue keyed by pool; one thread takes a key
 * (op_controller_run_once()) and has the library's Kubernetes adapter
 * (adapter.h) reconcile that pool, its writes charged to the pool's write
 * budget. Every decision is the library's. */
#ifndef TURNFLEET_OPERATOR_H
#define TURNFLEET_OPERATOR_H

#include <stdint.h>

#include <turnfleet.h>

typedef struct op_config {
  const char *namespace_;   /* only this namespace's pools; NULL: all */
  const char *agent_image;  /* the relay pods' agent container (required) */
  long probe_interval_ms;   /* between a relay's probe result and its next probe */
  long publish_delay_ms;    /* from a relay leaving the turn-uris ConfigMap to its pod's deletion */
  long resync_ms;           /* informer resync (every pool reconciled again); 0: never */
  uint16_t cli_port_base;   /* the first CLI port of the first slot */
  unsigned cli_slots;       /* slots of cli_stride ports from cli_port_base, one per pool by hash */
  unsigned cli_stride;      /* ports per slot (the most relays of one pool on one node) */
  uint16_t agent_port;      /* the agent's port on the relay address */
  int allow_loopback_peers; /* render coturn's allow-loopback-peers (test clusters on loopback only) */
  int no_api_endpoints;     /* no informer on the kubernetes Endpoints of default (a namespaced install) */
  long bookmark_interval_ms; /* the server's bookmark interval: a watch silent for two is relisted; 0: no check */
  long budget_writes;       /* writes per pool ... (0: the library's default) */
  long budget_interval_ms;  /* ... per window of this length */
  tf_log_cb log;
  void *log_payload;
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
/* The turnfleet_* metrics of every pool as Prometheus text (malloc'd; NULL on no memory). */
char *op_controller_metrics(op_controller *c);
/* The controller's half of the client's write gate (tf_kube_write_gate_cb, @p controller the
 * op_controller): a write made while a pool is reconciled is charged to that pool's write budget
 * and refused (0) when the budget is spent; Events are not charged (the recorder bounds them).
 * > 0 otherwise. */
long op_controller_write_gate(const char *method, const char *path, void *controller);
/* Stop the informers and workers and release everything. Never touches the cluster. */
void op_controller_free(op_controller *c);

#endif
