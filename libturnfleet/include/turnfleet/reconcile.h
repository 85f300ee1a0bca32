/**
 * @file turnfleet/reconcile.h
 * @brief The controller core shared by the local runtime and the Kubernetes
 * operator: one pure function from (pool, inventory, observations, time) to
 * (desired relays with their configs, actions, pool status, turn URIs,
 * metric samples).
 *
 * A runtime loops: gather observations into a tf_observed, call
 * tf_reconcile_new(), carry out the actions in order, write the status, URIs
 * and metrics, sleep until the next probe or tf_reconcile_next_ms(). The core
 * keeps no state between calls; everything it needs comes back in the next
 * observations (what was started, when draining began, the previous status).
 * Same inputs, same output, byte for byte: no clock, no I/O, no randomness.
 *
 * Thread safety: reentrant; a tf_observed must not be filled by two threads
 * at once; a finished tf_reconcile is immutable and may be shared.
 */
#ifndef TURNFLEET_RECONCILE_H
#define TURNFLEET_RECONCILE_H

#include "common.h"
#include "coturn.h"
#include "errors.h"
#include "inventory.h"
#include "metrics.h"
#include "plan.h"
#include "pool.h"

TF_BEGIN_DECL

/* ---- observations ---- */

/**
 * What a runtime knows about one relay of the pool. Strings and arrays are
 * borrowed for tf_observed_add_relay() and copied. Fields are only appended.
 */
typedef struct tf_relay_observation {
  unsigned int version;        /**< TF_RELAY_OBSERVATION_VERSION */
  const char *name;            /**< relay name (required) */
  const char *identity;        /**< "ADDR[,ADDR]/START-END" it was started with (required) */
  const char *config_hash;     /**< hash of the config its process runs (from tf_reconcile_relay_config_hash()
                                    when it was started); NULL: unknown, which counts as outdated */
  uint16_t cli_port;           /**< the CLI port it was started with (tf_reconcile_relay_cli_port()); 0: none */
  int running;                 /**< 1: its process is alive (a pod: its container runs) */
  int64_t started_ms;          /**< when the current (or last) process started, Unix ms; 0: unknown */
  int64_t exited_ms;           /**< when the process last exited, Unix ms; 0: unknown (backoff from now) */
  int64_t restarts;            /**< restarts after the process died, so far (a runtime may reset it) */
  int draining;                /**< 1: a DRAIN action was carried out for it */
  int64_t draining_since_ms;   /**< when that DRAIN was carried out, Unix ms (required with @p draining) */
  int64_t allocations;         /**< current allocations (`pc` or `/metrics`); -1: unknown */
  int64_t probe_ms;            /**< when the last probe finished, Unix ms; 0: never probed */
  int probe_ok;                /**< 1: the last probe passed every stage (ready = running, not draining,
                                    and a passed probe with probe_ms >= started_ms) */
  int probe_error_code;        /**< TURN error code of the last probe (401, 508, ...), 0: none */
  const char *probe_message;   /**< what the last probe said (tf_probe_result_message()); may be NULL */
  int saw_508;                 /**< 1: a probe got 508 (no relay port free) since the last good probe */
  const int *failure_codes;    /**< TURN error codes seen on Allocate by the probes ... */
  const int64_t *failure_counts; /**< ... and how many times each, cumulative */
  size_t failure_count;        /**< entries in both arrays */
  const char *const *uris;     /**< the turn URIs it serves (tf_reconcile_relay_uri() when it was started):
                                    kept published while it waits, ready, to be replaced in place */
  size_t uri_count;            /**< entries in @p uris */
  /* version 2 */
  int held_back;               /**< 1: ready, but its runtime does not serve it yet (a pod whose Ready condition
                                    is not True: the kubelet has not seen the readiness gate): counted ready,
                                    not published */
  /* version 3 */
  int64_t probe_duration_ms;   /**< how long the last probe took, from its action to its result, ms; -1: unknown */
  int64_t count_failures;      /**< counts that could not be read (the CLI, an agent's /metrics), cumulative */
  /* version 4 */
  int64_t count_misses;        /**< count rounds in a row, since the last good count (or its process started),
                                    that gave no count: a running relay that passed its probe is Uncounted
                                    (TF_RELAY_UNCOUNTED) from TF_RECONCILE_UNCOUNTED_ROUNDS on */
} tf_relay_observation;

#define TF_RELAY_OBSERVATION_VERSION 4
#define TF_RELAY_OBSERVATION_INIT \
  {TF_RELAY_OBSERVATION_VERSION, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, NULL, 0, NULL, NULL, 0, NULL, 0, 0, -1, 0, 0}

/** Count rounds in a row without a count after which a running, probed relay is Uncounted. */
#define TF_RECONCILE_UNCOUNTED_ROUNDS 3

/**
 * Fill @p obs with the defaults of @p version (allocations unknown, the rest empty).
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_relay_observation_init(tf_relay_observation *obs, unsigned int version);

/** Everything observed for one reconcile: the pool's relays, other pools' claims, the previous status. */
typedef struct tf_observed tf_observed;

/**
 * An empty observation (a fresh pool: no relay, no status).
 * @param[out] out release with tf_observed_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_observed_new(tf_observed **out);

/** Release an observation. NULL does nothing. */
TF_EXTERN(void) tf_observed_free(tf_observed *observed);

/**
 * Add one of the pool's relays: every relay with a process or pod, draining
 * ones included, and ones whose process died and was not restarted yet.
 * @param observed the observation
 * @param relay borrowed for the call; copied
 * @return 0; TF_EINVALID naming the field as `relays[N].field` (N: the
 *         number of relays added before), e.g. a duplicate name, a malformed
 *         identity, draining without draining_since_ms; TF_ENOMEM. Nothing is
 *         added on failure.
 */
TF_EXTERN(tf_err) tf_observed_add_relay(tf_observed *observed, const tf_relay_observation *relay);

/**
 * Add a relay of another pool: its (address, port) pairs are not used and
 * make `AddressConflict` True where this pool wanted them.
 * @param pool the other pool's name (required)
 * @param identity "ADDR[,ADDR]/START-END"
 * @param listener_ports that pool's listener ports; may be NULL
 * @param listener_ports_count entries in @p listener_ports
 * @return 0, TF_EINVALID naming the argument, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_observed_add_claim(tf_observed *observed, const char *pool, const char *identity,
                                        const uint16_t *listener_ports, size_t listener_ports_count);

/**
 * A coturn CLI port that a relay of another pool listens on at a node's 127.0.0.1: a new relay of this pool
 * on that node is not given it, unless the pool's relays have a network of their own (PodIP). Relays on host
 * networking share their node's loopback, so two there could not both listen. A relay keeps the CLI port it
 * runs with.
 * @param observed the observation
 * @param node the node's name (required); copied
 * @param port the port (1-65535)
 * @return 0, TF_EINVALID naming the argument (`cli_claims[N].node: required`), TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_observed_add_cli_claim(tf_observed *observed, const char *node, uint16_t port);

/**
 * The status written after the previous reconcile (what tf_reconcile_status_json()
 * returned, or a whole TURNPool object with a `status`). Only the conditions'
 * `type`, `status` and `lastTransitionTime` are read, so that a condition
 * keeps its lastTransitionTime while its status does not change.
 * @param json the text, borrowed for the call
 * @param len bytes in @p json
 * @return 0; TF_EPROTO for malformed JSON; TF_EINVALID naming the field
 *         (`status.conditions[1].lastTransitionTime: ...`); TF_ENOMEM.
 *         On failure the previous status given before (if any) is kept.
 */
TF_EXTERN(tf_err) tf_observed_set_status(tf_observed *observed, const char *json, size_t len);

/* ---- options ---- */

/** Knobs for tf_reconcile_new(). Fields are only appended. */
typedef struct tf_reconcile_options {
  unsigned int version;            /**< TF_RECONCILE_OPTIONS_VERSION */
  const tf_coturn_options *coturn; /**< how to render (required: at least the secrets). Borrowed for the
                                        call. Its cli_port is the FIRST CLI port: a relay keeps the port it
                                        was started with, a new relay takes the lowest free one from there
                                        (outside the pool's relay range and listener ports); its
                                        cli_password is every relay's (the CLI listens on 127.0.0.1 only);
                                        0 keeps the CLI off */
  const char *log_dir;             /**< absolute; each relay logs to <log_dir>/<relay>.log. NULL: every
                                        relay uses coturn->log_file (NULL: stdout) */
  double pressure_threshold;       /**< CapacityPressure when portsInUse/portsTotal >= this (default 0.9) */
  int64_t backoff_initial_ms;      /**< first delay before a dead relay is started again (default 1000) */
  int64_t backoff_max_ms;          /**< the delay doubles with each restart up to this (default 60000) */
  /* version 2 */
  int cli_password_per_relay;      /**< 1: each relay's CLI password is derived from coturn->cli_password
                                        and the relay's name (tf_reconcile_cli_password()), so that no
                                        two relays share one; 0 (version 1): every relay has it as given */
} tf_reconcile_options;

#define TF_RECONCILE_OPTIONS_VERSION 2
#define TF_RECONCILE_OPTIONS_INIT {TF_RECONCILE_OPTIONS_VERSION, NULL, NULL, 0.9, 1000, 60000, 0}

/**
 * The CLI password of relay @p relay when they are per relay: lowercase hex of
 * HMAC-SHA256(@p master, @p relay), 32 characters. Secret material.
 * @param[out] out release with tf_secret_free()
 * @return 0, TF_EINVALID (no master or relay), TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_reconcile_cli_password(char **out, const char *master, const char *relay);

/**
 * Fill @p opts with the defaults of @p version; only the fields of that
 * version are written, so an older caller's shorter struct is safe.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_reconcile_options_init(tf_reconcile_options *opts, unsigned int version);

/* ---- the reconcile ---- */

/** The outcome of one reconcile. Immutable; holds rendered configs (secret): see tf_reconcile_free(). */
typedef struct tf_reconcile tf_reconcile;

/**
 * Reconcile once.
 *
 * Placement is the planner's: tf_plan_new() over @p nodes with a fleet made
 * of the observed relays that are not draining (so names stay stable and a
 * scale-down drops the relay with the fewest allocations) plus the claims.
 * Draining relays are on their way out: they never come back into the plan,
 * and a planned relay that shares an address with an observed relay that is
 * not part of the plan waits until that one has stopped (two coturn processes
 * on one address would split the listener's clients between them).
 *
 * Actions, in the order a runtime must carry them out:
 *  - STOP a relay whose drain is over (allocations 0, its process gone, or
 *    drainTimeout passed since draining_since_ms), or a leaving relay whose
 *    process is not running;
 *  - DRAIN a running relay that left the plan (scale-down, its identity
 *    gone). It is out of the turn URIs from this result on. A relay replaced
 *    in place (a planned relay waits for its address: a range change) drains
 *    one at a time, like a restart, and keeps its observed URIs published
 *    while it waits and is ready;
 *  - RESTART a relay whose running config hash differs from the desired one
 *    (coturn cannot reload; the relay's allocations are dropped): at most one
 *    restart or in-place drain per call, and only while every planned relay
 *    is ready (a relay that is not ready itself may go first);
 *  - START a planned relay that has no process: a new one at once, one whose
 *    process died after min(backoff_initial_ms x 2^restarts, backoff_max_ms)
 *    from exited_ms; at once when that process had run at least
 *    backoff_max_ms (lost, as a pod deleted or evicted, not crashing).
 *
 * A relay is ready when its process runs, it is not draining and its last
 * probe, made after the process started, passed.
 *
 * @param[out] out the result, release with tf_reconcile_free()
 * @param pool a valid pool (borrowed for the call)
 * @param nodes the inventory (borrowed for the call)
 * @param observed the observations; NULL for none (borrowed for the call)
 * @param now_ms the current time, Unix ms (>= 0): the only clock the core knows
 * @param opts render options and knobs (borrowed for the call)
 * @return 0; TF_EINVALID for an invalid pool, bad options (naming the field,
 *         never a secret) or a negative time; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_reconcile_new(tf_reconcile **out, const tf_pool *pool, const tf_nodes *nodes,
                                   const tf_observed *observed, int64_t now_ms, const tf_reconcile_options *opts);

/** Release a result, wiping the configs it holds. NULL does nothing. */
TF_EXTERN(void) tf_reconcile_free(tf_reconcile *rec);

/** What a runtime does to a relay. */
typedef enum tf_action {
  TF_ACTION_START = 0,   /**< write the relay's config (0600) and start its process */
  TF_ACTION_DRAIN = 1,   /**< refuse new allocations (SIGUSR1 when tf_coturn_features() has
                              TF_COTURN_DRAIN, else the CLI's TF_COTURN_CLI_REFUSE_ALLOCATIONS) and
                              remember when (tf_relay_observation.draining_since_ms) */
  TF_ACTION_STOP = 2,    /**< stop the process (SIGTERM) and forget the relay */
  TF_ACTION_RESTART = 3  /**< stop the process, then start it with the relay's new config */
} tf_action;

/** "start", "drain", "stop", "restart"; NULL for an unknown value. */
TF_EXTERN(const char *) tf_action_name(tf_action action);

/** Number of actions. */
TF_EXTERN(size_t) tf_reconcile_action_count(const tf_reconcile *rec);

/**
 * Action @p i. Each output may be NULL.
 * @param[out] action what to do
 * @param[out] relay the relay's index for the tf_reconcile_relay_* accessors
 * @param[out] reason why, CamelCase (`ScaleUp`, `Exited`, `ConfigChanged`, `ScaleDown`,
 *             `Replaced`, `Drained`, `DrainTimeout`, `Removed`); borrowed from @p rec
 * @return 0, TF_ENOTFOUND when out of range, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_reconcile_action(const tf_reconcile *rec, size_t i, tf_action *action, size_t *relay,
                                      const char **reason);

/** Flags of a relay (tf_reconcile_relay_flags()). */
#define TF_RELAY_PLANNED 0x01u   /**< in the plan: it should run */
#define TF_RELAY_RUNNING 0x02u   /**< its process was observed running */
#define TF_RELAY_READY 0x04u     /**< ready (see tf_reconcile_new()) and not restarted by this result; or
                                      replaced in place and still serving */
#define TF_RELAY_DRAINING 0x08u  /**< observed draining, or drained by this result */
#define TF_RELAY_PUBLISHED 0x10u /**< its URIs are in tf_reconcile_uri() */
#define TF_RELAY_WAITING 0x20u   /**< planned, but its start waits (backoff, or its address is still in use) */
#define TF_RELAY_UNCOUNTED 0x40u /**< it runs and passed its probe, but TF_RECONCILE_UNCOUNTED_ROUNDS count rounds
                                      in a row gave no ports-in-use count (tf_relay_observation.count_misses):
                                      still served, and the pool's Ready is False (RelaysUncounted) */

/**
 * Number of relays: the planned ones and the observed ones leaving, sorted
 * by name (a planned relay waiting for a draining one of the same name is one
 * entry). Indexes are valid for this result only.
 */
TF_EXTERN(size_t) tf_reconcile_relay_count(const tf_reconcile *rec);
/** Name of relay @p i; NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_reconcile_relay_name(const tf_reconcile *rec, size_t i);
/** TF_RELAY_* flags of relay @p i; 0 when out of range. */
TF_EXTERN(unsigned int) tf_reconcile_relay_flags(const tf_reconcile *rec, size_t i);
/**
 * The rendered turnserver.conf of planned relay @p i; NULL for a relay that
 * is leaving or out of range. Secret material (it holds the shared secrets
 * and the CLI password): write it 0600, never log it. Borrowed from @p rec,
 * wiped by tf_reconcile_free().
 */
TF_EXTERN(const char *) tf_reconcile_relay_config(const tf_reconcile *rec, size_t i);
/** Hash of that config (tf_coturn_config_hash()); NULL as above. Borrowed. */
TF_EXTERN(const char *) tf_reconcile_relay_config_hash(const tf_reconcile *rec, size_t i);
/** The CLI port of relay @p i (`pc`, the drain of coturn < 4.6.3): rendered into a planned relay's
 * config, observed for a leaving one; 0: none. */
TF_EXTERN(uint16_t) tf_reconcile_relay_cli_port(const tf_reconcile *rec, size_t i);
/** The port of planned relay @p i's Prometheus exporter on its first address; 0: the coturn version
 * has none, or the relay is leaving. */
TF_EXTERN(uint16_t) tf_reconcile_relay_metrics_port(const tf_reconcile *rec, size_t i);
/** Number of turn URIs of relay @p i: per address, one per listener (what to probe); a leaving relay
 * has the ones it was observed with. */
TF_EXTERN(size_t) tf_reconcile_relay_uri_count(const tf_reconcile *rec, size_t i);
/** URI @p j of relay @p i (by address, then listener order); NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_reconcile_relay_uri(const tf_reconcile *rec, size_t i, size_t j);

/** The plan the result was made from (addresses, ranges, listener ports per relay). Borrowed from @p rec. */
TF_EXTERN(const tf_plan *) tf_reconcile_plan(const tf_reconcile *rec);

/** Number of published turn URIs: those of the relays flagged TF_RELAY_PUBLISHED. */
TF_EXTERN(size_t) tf_reconcile_uri_count(const tf_reconcile *rec);
/** Published URI @p i, by relay name, then address and listener order; NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_reconcile_uri(const tf_reconcile *rec, size_t i);

/**
 * The published URIs as an RTCIceServer array without credentials, one
 * object per relay: `[{"urls": ["turn:...", ...]}, ...]` (`[]` when none).
 * @param[out] out release with tf_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_reconcile_ice_servers_json(char **out, const tf_reconcile *rec);

/** Number of status conditions (Ready, ProbeSucceeded, CapacityPressure, AddressConflict, ReachableFromVantage). */
TF_EXTERN(size_t) tf_reconcile_condition_count(const tf_reconcile *rec);

/**
 * Condition @p i. Each output may be NULL; strings are borrowed from @p rec.
 * @param[out] last_transition_time RFC 3339 (`2024-05-01T12:00:00Z`): kept from
 *             the previous status while the status does not change
 * @return 0, TF_ENOTFOUND when out of range, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_reconcile_condition(const tf_reconcile *rec, size_t i, const char **type, const char **status,
                                         const char **reason, const char **message,
                                         const char **last_transition_time);

/**
 * The pool status (docs/architecture.md), what a runtime writes to status.json or the
 * TURNPool's status subresource: `{"replicas", "readyRelays", "relays": [{name,
 * relayAddress, portRange{start,end}, ready, draining, allocations,
 * portsInUse, portsTotal, lastProbe}], "conditions": [{type, status, reason,
 * message, lastTransitionTime}]}`. `replicas` counts the relays whose
 * process runs and that are not draining; `relayAddress` is the relay's
 * address (both, joined by ",", in DualStack); `portsInUse` = `allocations`
 * (each allocation holds one relay port); both are null when unknown;
 * `lastProbe` is null or `{time, ok, errorCode, message}`. Keys in that
 * order, indented by two spaces, no final newline. tf_observed_set_status()
 * reads it back.
 * @param[out] out release with tf_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_reconcile_status_json(char **out, const tf_reconcile *rec);

/**
 * The whole result without secrets, for logs and tests: `{"status",
 * "actions": [{action, relay, reason}], "relays": [{name, flags..., configHash,
 * cliPort, metricsPort, uris}], "uris", "nextMs"}`.
 * @param[out] out release with tf_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_reconcile_to_json(char **out, const tf_reconcile *rec);

/**
 * Add the pool's samples to @p metrics, declaring the families if needed
 * (names in metrics.h): gauges `turnfleet_relay_ports_in_use` (relays with a
 * known count), `turnfleet_relay_ports_total`, `turnfleet_relay_draining`, `turnfleet_relay_uncounted`,
 * `turnfleet_relay_drain_started_timestamp_seconds` (draining relays),
 * `turnfleet_probe_success` (relays probed since their process started),
 * `turnfleet_probe_duration_seconds` (relays whose last probe's duration is
 * known) and the counters `turnfleet_relay_count_failures_total` and
 * `turnfleet_allocation_failures_total`, labelled
 * exactly `namespace, pool, relay` (+ `code` on the counter); the pool gauges
 * `turnfleet_pool_condition` (labels `namespace, pool, type, status`: 1 for
 * each condition's current status, 0 for the other two; not
 * ReachableFromVantage, see tf_vantage_metrics()) and
 * `turnfleet_pool_drain_timeout_seconds` (`namespace, pool`). Several pools
 * may add to one set.
 * @return 0; TF_EINVALID (also when a family is declared with another type);
 *         TF_ENOMEM. On failure some samples may have been added.
 */
TF_EXTERN(tf_err) tf_reconcile_metrics(tf_metrics *metrics, const tf_reconcile *rec);

/**
 * The earliest time (Unix ms) at which this result would change without new
 * observations: a backoff ends or a drain times out. 0: none; a runtime then
 * reconciles on its next probe round.
 */
TF_EXTERN(int64_t) tf_reconcile_next_ms(const tf_reconcile *rec);

TF_END_DECL

#endif
