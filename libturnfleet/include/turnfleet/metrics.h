/**
 * @file turnfleet/metrics.h
 * @brief Prometheus text exposition (format 0.0.4): a writer with a
 * deterministic output order, and a bounded parser (for coturn's `/metrics`).
 *
 * One handle type serves both: a writer adds families and samples and
 * renders them; the parser returns the same kind of handle, read through the
 * sample accessors. Pure: no I/O, no clock, locale-independent numbers.
 * A handle must not be used by two threads at once.
 */
#ifndef TURNFLEET_METRICS_H
#define TURNFLEET_METRICS_H

#include "common.h"
#include "errors.h"

TF_BEGIN_DECL

/**
 * @name Series names
 * The names of the series Turnfleet exports, shared by the exporters and the
 * readers (the operator scrapes the agents' count). One component exports
 * each name: `turnfleet agent` (in every relay pod) exports the
 * `turnfleet_agent_*` series of its relay; the engine's drivers
 * (`turnfleet-operator`, `turnfleet up`) export the relay and pool series of
 * every pool they run (tf_reconcile_metrics()), and the operator its
 * `turnfleet_operator_leader`. Relay series are labelled exactly `namespace,
 * pool, relay`, pool series `namespace, pool`.
 * @{
 */
/** Agent gauge: ports held by allocations (coturn CLI `pu`); absent while the count fails. */
#define TF_METRIC_AGENT_PORTS_IN_USE "turnfleet_agent_ports_in_use"
/** Agent gauge: ports its relay owns (addresses x ports in its range). */
#define TF_METRIC_AGENT_PORTS_TOTAL "turnfleet_agent_ports_total"
/** Agent counter: counts through coturn's CLI that failed. */
#define TF_METRIC_AGENT_COUNT_FAILURES "turnfleet_agent_count_failures_total"
/** Agent counter: refusals of new Allocates (coturn < 4.6.3's drain) found while the pod was not being deleted, and undone. */
#define TF_METRIC_AGENT_DRAINS_UNDONE "turnfleet_agent_drains_undone_total"
/** Agent gauge: 1 when the running coturn is not the version its config was rendered for. */
#define TF_METRIC_AGENT_VERSION_MISMATCH "turnfleet_agent_coturn_version_mismatch"
/** Driver gauge: the relay's ports in use as the driver last counted them. */
#define TF_METRIC_RELAY_PORTS_IN_USE "turnfleet_relay_ports_in_use"
/** Driver gauge: ports the relay owns. */
#define TF_METRIC_RELAY_PORTS_TOTAL "turnfleet_relay_ports_total"
/** Driver counter: counts of the relay's allocations that could not be read. */
#define TF_METRIC_RELAY_COUNT_FAILURES "turnfleet_relay_count_failures_total"
/** Driver gauge: 1 while the relay drains, else 0. */
#define TF_METRIC_RELAY_DRAINING "turnfleet_relay_draining"
/** Driver gauge: 1 while the relay is Uncounted (TF_RELAY_UNCOUNTED: running, probed, no count for
 * TF_RECONCILE_UNCOUNTED_ROUNDS count rounds), else 0. */
#define TF_METRIC_RELAY_UNCOUNTED "turnfleet_relay_uncounted"
/** Driver gauge: when the relay's drain began, Unix seconds (draining relays only). */
#define TF_METRIC_RELAY_DRAIN_STARTED "turnfleet_relay_drain_started_timestamp_seconds"
/** Driver gauge: 1 when the relay's last Allocate probe passed, else 0. */
#define TF_METRIC_PROBE_SUCCESS "turnfleet_probe_success"
/** Driver gauge: how long the relay's last probe took, seconds. */
#define TF_METRIC_PROBE_DURATION "turnfleet_probe_duration_seconds"
/** Driver counter: Allocate failures seen by the probes, label `code`. */
#define TF_METRIC_ALLOCATION_FAILURES "turnfleet_allocation_failures_total"
/** Driver gauge: the pool's conditions, labels `type` and `status` (True, False, Unknown): 1 for the current status. */
#define TF_METRIC_POOL_CONDITION "turnfleet_pool_condition"
/** Driver gauge: the pool's drainTimeout, seconds. */
#define TF_METRIC_POOL_DRAIN_TIMEOUT "turnfleet_pool_drain_timeout_seconds"
/** Operator gauge: 1 while this replica holds the Lease (or runs without election), else 0. */
#define TF_METRIC_OPERATOR_LEADER "turnfleet_operator_leader"
/** Operator gauge: Events waiting to be sent again. */
#define TF_METRIC_OPERATOR_EVENTS_PENDING "turnfleet_operator_events_pending"
/** Operator counter: Events given up (queue full, or refused for good). */
#define TF_METRIC_OPERATOR_EVENTS_DROPPED "turnfleet_operator_events_dropped_total"
/** Operator counter: writes refused by the per-pool write budget. */
#define TF_METRIC_OPERATOR_WRITES_OVER_BUDGET "turnfleet_operator_writes_over_budget_total"
/** Operator counter: reconciles of each pool, labels `namespace` and `pool` (an event queues only the pools it
 *  concerns: one relay pod's event, its pool and the pools its address claims meet). */
#define TF_METRIC_OPERATOR_RECONCILES "turnfleet_operator_reconciles_total"
/** @} */

/** A set of metric families and their samples. */
typedef struct tf_metrics tf_metrics;

/** A family's `# TYPE`. */
typedef enum tf_metric_type {
  TF_METRIC_UNTYPED = 0,
  TF_METRIC_COUNTER = 1,
  TF_METRIC_GAUGE = 2,
  TF_METRIC_HISTOGRAM = 3,
  TF_METRIC_SUMMARY = 4
} tf_metric_type;

/**
 * An empty set, to write.
 * @param[out] out release with tf_metrics_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_metrics_new(tf_metrics **out);

/** Release a set. NULL does nothing. */
TF_EXTERN(void) tf_metrics_free(tf_metrics *metrics);

/**
 * Declare a family: its `# HELP` and `# TYPE` lines are written even when it
 * has no sample.
 * @param metrics the set
 * @param name metric name, `[a-zA-Z_:][a-zA-Z0-9_:]*` (copied)
 * @param type its type
 * @param help one-line help text (copied; `\` and line breaks are escaped on output)
 * @return 0; TF_EINVALID for a bad name or type, or a name declared before; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_metrics_declare(tf_metrics *metrics, const char *name, tf_metric_type type, const char *help);

/**
 * Add a sample to a declared family. A histogram's `_bucket`, `_sum` and
 * `_count` samples (a summary's `_sum` and `_count`) belong to its family.
 * @param metrics the set
 * @param name the sample's metric name
 * @param label_names label names, `[a-zA-Z_][a-zA-Z0-9_]*` not starting with `__`,
 *        distinct; written in this order (copied)
 * @param label_values label values, any text (copied; `\`, `"` and line breaks escaped on output)
 * @param label_count entries in both arrays (may be 0, then the arrays may be NULL)
 * @param value the value (NaN and infinities are written as `NaN`, `+Inf`, `-Inf`)
 * @return 0; TF_ENOTFOUND when no family declares @p name; TF_EINVALID for a
 *         bad label or a sample with the same name and labels as an earlier one; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_metrics_add(tf_metrics *metrics, const char *name, const char *const *label_names,
                                 const char *const *label_values, size_t label_count, double value);

/**
 * The exposition text. Families are sorted by name, each as `# HELP`,
 * `# TYPE`, then its samples sorted by name and label text, so the output
 * does not depend on the order of the calls. Integral values are written
 * without exponent or fraction, others in the shortest form that reads back
 * exactly.
 * @param[out] out release with tf_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_metrics_to_text(char **out, const tf_metrics *metrics);

/**
 * Parse exposition text: blank lines, comments, `# HELP`/`# TYPE` in any
 * order, families without samples, samples with or without labels and with
 * an optional timestamp (ignored), `NaN`/`+Inf`/`-Inf`, CRLF line ends.
 * Reads at most @p len bytes and never past them; a NUL byte is an error.
 * @param[out] out the samples, release with tf_metrics_free()
 * @param text the exposition, borrowed for the call (need not be NUL-terminated)
 * @param len bytes in @p text
 * @return 0; TF_EPROTO with `line L, column C: why` for malformed text;
 *         TF_EINVALID; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_metrics_parse(tf_metrics **out, const char *text, size_t len);

/** Number of samples (in input or insertion order). */
TF_EXTERN(size_t) tf_metrics_sample_count(const tf_metrics *metrics);

/**
 * Sample @p i. Each output may be NULL; @p name is borrowed from @p metrics.
 * @return 0, TF_ENOTFOUND when out of range, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_metrics_sample(const tf_metrics *metrics, size_t i, const char **name, double *value);

/** The value of label @p label of sample @p i; NULL when absent or out of range. Borrowed. */
TF_EXTERN(const char *) tf_metrics_sample_label(const tf_metrics *metrics, size_t i, const char *label);

/** The declared type of family @p name, -1 when it has no `# TYPE` (parsed) or no declaration (written). */
TF_EXTERN(int) tf_metrics_family_type(const tf_metrics *metrics, const char *name);

/**
 * The sum of every sample named @p name (all label sets).
 * @param[out] out the sum; 0 when the family is declared but has no sample
 * @return 0; TF_ENOTFOUND when neither a sample nor a `# HELP`/`# TYPE` names it; TF_EINVALID
 */
TF_EXTERN(tf_err) tf_metrics_sum(double *out, const tf_metrics *metrics, const char *name);

TF_END_DECL

#endif
