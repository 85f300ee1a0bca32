/* Probes and agent scrapes off the operator's loop: a few worker threads
 * take jobs, run them (blocking, each bounded by its timeout) and leave the
 * result for the pool's next reconcile, which they wake through the work
 * queue. Thread contract: submit and take from any thread; results are
 * taken by the loop that owns the pool's engine. */
#ifndef TURNFLEET_OPERATOR_WORK_H
#define TURNFLEET_OPERATOR_WORK_H

#include <stddef.h>
#include <stdint.h>

#include <turnfleet.h>

typedef struct op_work op_work;

typedef enum { OP_JOB_PROBE = 0, OP_JOB_SCRAPE = 1 } op_job_kind;

typedef struct op_result {
  op_job_kind kind;
  uint64_t id;         /* the engine action's id */
  uint64_t epoch;      /* the engine it belongs to (a pool's engine made anew has another) */
  int ok;              /* probe: every URI passed */
  int error_code;      /* probe: the TURN error code that failed it, 0: none */
  int on_allocate;     /* probe: it failed on the Allocate */
  char *message;       /* probe: what failed (never a secret); NULL when it passed */
  int64_t allocations; /* scrape: turnfleet_agent_ports_in_use; -1: unreadable */
} op_result;

/* @p threads workers; a finished job adds its key to @p queue. NULL on failure. */
op_work *op_work_new(size_t threads, tf_workqueue *queue);
/* Stop the workers (running jobs finish first) and release what is left. */
void op_work_free(op_work *w);

/* Allocate through each of the @p n probes @p po describes (tf_engine_probe_options() filled them: URI,
 * expected address and family, port range, timeout; the secret of the first serves all: copied, wiped after
 * use). 0, -1 on no memory. */
int op_work_probe(op_work *w, const char *key, uint64_t epoch, uint64_t id, const tf_probe_options *po, size_t n);
/* GET @p url (an agent's /metrics) and sum turnfleet_agent_ports_in_use. 0, -1 on no memory. */
int op_work_scrape(op_work *w, const char *key, uint64_t epoch, uint64_t id, const char *url, int timeout_ms);

/* The finished results of @p key, in the order they finished; *out is
 * malloc'd (release each with op_result_clear(), then free()). Returns the count. */
size_t op_work_take(op_work *w, const char *key, op_result **out);
void op_result_clear(op_result *r);

#endif
