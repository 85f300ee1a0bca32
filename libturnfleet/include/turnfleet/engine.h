/**
 * @file turnfleet/engine.h
 * @brief The runtime-neutral fleet engine: the bookkeeping a runtime keeps
 * between reconciles (relays and their processes or pods, probe and count
 * schedules and results, drain timing, restart backoff, shutdown, the next
 * wake-up), on top of the pure reconcile core (reconcile.h). No I/O, no clock.
 *
 * A driver (the local `turnfleet up`, a Kubernetes operator) loops:
 *  1. tells the engine what it saw: tf_engine_observe() for a relay's process
 *     or pod (started, died, found at startup), tf_engine_set_pool() and
 *     tf_engine_set_nodes() when its inputs change;
 *  2. calls tf_engine_step() with the current time;
 *  3. carries out the actions (tf_engine_action_count(), tf_engine_action_at())
 *     and reports each one with tf_engine_done(), tf_engine_probe_done() or
 *     tf_engine_count_done(), now or later (probes and counts may run in the
 *     background; the engine never hands out a second probe or count of a
 *     relay while one is out);
 *  4. publishes tf_engine_status_json(), the URIs and tf_engine_metrics();
 *  5. sleeps until tf_engine_next_ms() or an event (a process exited, a result
 *     came back, an input file changed).
 *
 * Times: every `now_ms` and every time in a struct is on the driver's
 * monotonic clock (CLOCK_MONOTONIC ms: differences only). The wall clock is
 * given to tf_engine_step() for the timestamps of the status only.
 *
 * Timing rules (each unit-tested with synthetic facts):
 *  - probe: a running relay that is not draining is probed
 *    probe_first_delay_ms after its start, then probe_interval_ms after each
 *    result; never while its count is out (the probe's own allocation would
 *    be counted);
 *  - count: a running relay (draining ones too) whose coturn can be asked is
 *    counted count_first_delay_ms after its start, then count_interval_ms after
 *    each result; never while its probe is out, nor within half a probe
 *    interval after a probe's result (coturn lists a released allocation's
 *    session a moment longer);
 *  - drain: a relay leaving the plan leaves the URIs at once (state Draining);
 *    publish_delay_ms later the engine asks the driver to make coturn refuse
 *    new allocations (TF_ENGINE_DRAIN); it is stopped when a count made after
 *    that reads 0, when its process is gone, or drainTimeout after it left;
 *  - restart: a relay whose config changed leaves the URIs at once, and its
 *    RESTART goes publish_delay_ms later (one relay at a time, only while
 *    every other planned relay is ready and not held back; one not serving
 *    anyway goes first);
 *  - secret change: every relay is probed at once with the secret all of
 *    them take (the previous one while it is rendered);
 *  - restart backoff: a relay whose process died is started again after
 *    min(backoff_initial_ms x 2^restarts, backoff_max_ms) from its exit, at
 *    once when it had run at least backoff_max_ms (a pod deleted, not a crash);
 *  - shutdown: tf_engine_shutdown() drains every relay as above and stops what
 *    is left drainTimeout + stop_grace_ms later (at once when asked again).
 *
 * Thread safety: one engine is used by one thread at a time (the driver's
 * loop); results computed elsewhere are handed back on that thread.
 */
#ifndef TURNFLEET_ENGINE_H
#define TURNFLEET_ENGINE_H

#include "common.h"
#include "coturn.h"
#include "errors.h"
#include "inventory.h"
#include "metrics.h"
#include "pool.h"
#include "probe.h"
#include "reconcile.h"

TF_BEGIN_DECL

/** The engine: one pool's relays. Holds secret material (render options); see tf_engine_free(). */
typedef struct tf_engine tf_engine;

/** Knobs for tf_engine_new(). Fields are only appended; read up to the caller's version. */
typedef struct tf_engine_options {
  unsigned int version;            /**< TF_ENGINE_OPTIONS_VERSION */
  const tf_coturn_options *coturn; /**< how to render (required, with at least one secret); copied, the
                                        secrets and CLI password wiped by tf_engine_free() */
  const char *log_dir;             /**< see tf_reconcile_options.log_dir; copied; may be NULL */
  int64_t probe_interval_ms;       /**< between a probe's result and the relay's next probe (default 5000) */
  int64_t probe_first_delay_ms;    /**< from a start to its first probe (default 200) */
  int64_t probe_timeout_ms;        /**< a probe's deadline, in TF_ENGINE_PROBE; 0: the interval
                                        clamped to 1000-4000 ms */
  int64_t count_interval_ms;       /**< between a count's result and the next; 0: the probe interval */
  int64_t count_first_delay_ms;    /**< from a start to its first count (default 500) */
  int64_t count_timeout_ms;        /**< a count's (and a CLI drain's) deadline (default 1000) */
  int64_t publish_delay_ms;        /**< from leaving the URIs to TF_ENGINE_DRAIN (default 2000) */
  int64_t stop_grace_ms;           /**< shutdown: stop what is left drainTimeout + this after it began
                                        (default 30000) */
  double pressure_threshold;       /**< see tf_reconcile_options (default 0.9) */
  int64_t backoff_initial_ms;      /**< see tf_reconcile_options (default 1000) */
  int64_t backoff_max_ms;          /**< see tf_reconcile_options (default 60000) */
} tf_engine_options;

#define TF_ENGINE_OPTIONS_VERSION 1
#define TF_ENGINE_OPTIONS_INIT \
  {TF_ENGINE_OPTIONS_VERSION, NULL, NULL, 5000, 200, 0, 0, 500, 1000, 2000, 30000, 0.9, 1000, 60000}

/**
 * Fill @p opts with the defaults of @p version.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_engine_options_init(tf_engine_options *opts, unsigned int version);

/**
 * A new engine for @p pool on @p nodes.
 * @param[out] out release with tf_engine_free()
 * @param pool a valid pool; the engine takes it over (freed by the engine, also on failure)
 * @param nodes the inventory; taken over likewise
 * @param opts knobs (borrowed for the call; what they point to is copied)
 * @return 0; TF_EINVALID naming the field (`opts.probe_interval_ms: ...`, an
 *         invalid pool, options the renderer refuses); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_new(tf_engine **out, tf_pool *pool, tf_nodes *nodes, const tf_engine_options *opts);

/** Release an engine, wiping the secrets it holds. NULL does nothing. */
TF_EXTERN(void) tf_engine_free(tf_engine *engine);

/**
 * Replace the pool (a TURNPool edit). The new pool is tried first: one that
 * validates but cannot be rendered is refused as a whole and the running
 * pool stays managed.
 * @param pool taken over (freed by the engine, also on failure)
 * @return 0; TF_EINVALID naming the problem (the pool is refused; also while
 *         shutting down); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_set_pool(tf_engine *engine, tf_pool *pool);

/**
 * Replace the inventory, tried like tf_engine_set_pool().
 * @param nodes taken over (freed by the engine, also on failure)
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_set_nodes(tf_engine *engine, tf_nodes *nodes);

/**
 * Replace the pool and the inventory together (a local runtime whose nodes
 * follow from the pool), tried and refused as a whole like tf_engine_set_pool():
 * on failure neither changes.
 * @param pool, nodes taken over (freed by the engine, also on failure)
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_set_inputs(tf_engine *engine, tf_pool *pool, tf_nodes *nodes);

/**
 * Record an input change the driver refused itself (a pool edit whose replicas
 * cannot all be placed, a turnserver it cannot run): the status's
 * `refusedChange` says @p why until a change is accepted. Nothing else changes.
 * @param why copied; never a secret
 * @return 0, TF_EINVALID (NULL or empty), TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_refuse(tf_engine *engine, const char *why);

/**
 * Replace the render options (a secret rotation): relays whose config changes
 * are restarted one at a time by the next steps.
 * @param coturn copied as in tf_engine_new(); the old copy is wiped
 * @return 0; TF_EINVALID when the renderer refuses them (the old ones are kept); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_set_coturn_options(tf_engine *engine, const tf_coturn_options *coturn);

/**
 * The status written before (status.json of an earlier run, the TURNPool's
 * status), so that conditions keep their lastTransitionTime.
 * @return 0, or what tf_observed_set_status() returns
 */
TF_EXTERN(tf_err) tf_engine_set_status(tf_engine *engine, const char *json, size_t len);

/**
 * Forget every claim of other pools given with tf_engine_add_claim() and
 * tf_engine_add_cli_claim() (before giving the current set again).
 * @return 0, TF_EINVALID for a NULL engine
 */
TF_EXTERN(tf_err) tf_engine_clear_claims(tf_engine *engine);

/**
 * A relay of another pool (tf_observed_add_claim()): its (address, port)
 * pairs are not used by this pool and make `AddressConflict` True where the
 * pool wanted them. Kept until tf_engine_clear_claims().
 * @param pool the other pool's name (required); copied
 * @param identity "ADDR[,ADDR]/START-END"; copied
 * @param listener_ports that pool's listener ports; may be NULL; copied
 * @param listener_ports_count entries in @p listener_ports
 * @return 0; TF_EINVALID naming the argument (`claims[0].identity: ...`), nothing kept; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_add_claim(tf_engine *engine, const char *pool, const char *identity,
                                      const uint16_t *listener_ports, size_t listener_ports_count);

/**
 * A CLI port another pool's relay listens on at @p node's 127.0.0.1 (tf_observed_add_cli_claim()): no new
 * relay of this pool on that node is given it. Kept until tf_engine_clear_claims().
 * @param node the node's name (required); copied
 * @param port the port (1-65535)
 * @return 0; TF_EINVALID naming the argument, nothing kept; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_add_cli_claim(tf_engine *engine, const char *node, uint16_t port);

/* ---- facts ---- */

/** What a driver saw of one relay's process or pod. Fields are only appended; read up to the caller's version. */
typedef struct tf_engine_relay_facts {
  unsigned int version;     /**< TF_ENGINE_RELAY_FACTS_VERSION */
  const char *name;         /**< relay name (required) */
  const char *id;           /**< the process or pod ("4242", a pod UID); NULL: keep the known one */
  int running;              /**< 1: it runs; 0: it is gone (died, deleted) */
  int64_t started_ms;       /**< when it started (monotonic); 0: keep the known one, or now for a new relay */
  int64_t exited_ms;        /**< when it went away (monotonic), with running 0; 0: now */
  const char *identity;     /**< "ADDR[,ADDR]/START-END" it runs with; required for a relay the engine
                                 does not know (an operator after its own restart), else NULL: keep */
  const char *config_hash;  /**< hash of the config it runs; NULL: keep (unknown counts as outdated) */
  uint16_t cli_port;        /**< its CLI port; 0: keep */
  int64_t restarts;         /**< restarts so far; -1: keep the engine's count */
  /* version 2: the facts a runtime keeps on its own objects, so that a driver that starts anew (a new
   * leader) continues from them rather than from nothing */
  int draining;             /**< 1: the runtime is already draining it (a pod being deleted: its preStop
                                 drains coturn), since @p draining_since_ms; the engine sends no DRAIN,
                                 keeps it out of the plan and the URIs and never starts a second drain
                                 for the same scale-down; 0: keep what the engine knows */
  int64_t draining_since_ms; /**< with @p draining: when the drain began (monotonic, <= now); 0: now */
  int probe_ok;             /**< the last probe outcome the runtime recorded (a readiness condition):
                                 1 passed, 0 failed, -1 none; taken only while the engine has no probe
                                 result of its own for the relay's current process or pod */
  int probe_error_code;     /**< with @p probe_ok 0: its TURN error code (508: full), 0: none */
  const char *probe_message; /**< with @p probe_ok: what it said; copied; may be NULL */
  int held_back;            /**< 1: its runtime does not serve it yet (a pod whose Ready condition is not
                                 True): counted ready when its probe passed, but not published (see
                                 tf_relay_observation.held_back); 0: served. Given with every fact */
  /* version 3 */
  int waiting;              /**< with @p running 1: it exists but its runtime has not started it yet (a pod
                                 the kubelet has not run, phase Pending): neither probed nor counted; its
                                 probe schedule begins when it starts (waiting 0). Given with every fact */
} tf_engine_relay_facts;

#define TF_ENGINE_RELAY_FACTS_VERSION 3
#define TF_ENGINE_RELAY_FACTS_INIT \
  {TF_ENGINE_RELAY_FACTS_VERSION, NULL, NULL, 0, 0, 0, NULL, NULL, 0, -1, 0, 0, -1, 0, NULL, 0, 0}

/**
 * Fill @p facts with the defaults of @p version.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_engine_relay_facts_init(tf_engine_relay_facts *facts, unsigned int version);

/**
 * Record what the driver saw of a relay. A relay that died (running 0) is
 * started again after its backoff; one that the engine stopped is forgotten
 * by tf_engine_done() and needs no fact.
 * @param facts borrowed for the call; copied
 * @param now_ms monotonic
 * @return 0; TF_EINVALID naming the field (`facts.identity: required for an unknown relay`); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_observe(tf_engine *engine, const tf_engine_relay_facts *facts, int64_t now_ms);

/* ---- steps and actions ---- */

/**
 * Decide: reconcile the pool with everything known, schedule probes, counts
 * and drains. Replaces the previous step's actions and relay views.
 * @param now_ms monotonic (>= 0, never going back)
 * @param wall_ms the wall clock, Unix ms: only for the timestamps of the status
 * @return 0; TF_EINVALID (time going back, or what tf_reconcile_new() refuses); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_step(tf_engine *engine, int64_t now_ms, int64_t wall_ms);

/** What the engine asks a driver to do. */
typedef enum tf_engine_action_kind {
  TF_ENGINE_START = 0,   /**< write `config` (0600, secret) and start the relay's process or pod */
  TF_ENGINE_RESTART = 1, /**< stop `relay_id`, then start as above (coturn cannot reload) */
  TF_ENGINE_DRAIN = 2,   /**< make coturn refuse new allocations, per `drain` */
  TF_ENGINE_STOP = 3,    /**< stop `relay_id` (SIGTERM, delete the pod) and forget the relay */
  TF_ENGINE_PROBE = 4,   /**< Allocate through each of `probe_uris`; report with tf_engine_probe_done()
                              (ok only when every one passed) */
  TF_ENGINE_COUNT = 5    /**< read the relay's allocations, per `count`; report with tf_engine_count_done() */
} tf_engine_action_kind;

/** How to drain one relay's coturn (TF_ENGINE_DRAIN). */
typedef enum tf_engine_drain_method {
  TF_ENGINE_DRAIN_MODE = 0,  /**< coturn >= 4.6.3: the CLI `drain` (or SIGUSR1); it exits at zero allocations */
  TF_ENGINE_DRAIN_QUOTA = 1  /**< older: the CLI `cc total-quota -1` (486 to new Allocates); the engine stops it */
} tf_engine_drain_method;

/** How to count one relay's allocations (TF_ENGINE_COUNT). */
typedef enum tf_engine_count_method {
  TF_ENGINE_COUNT_CLI = 0,    /**< the CLI's `pu` on 127.0.0.1:`cli_port` */
  TF_ENGINE_COUNT_METRICS = 1 /**< `turn_total_allocations` of http://`address`:`metrics_port`/metrics */
} tf_engine_count_method;

/**
 * One action. Allocated by the engine (so fields can be appended); strings
 * and arrays are borrowed from the engine until the next tf_engine_step().
 */
typedef struct tf_engine_action {
  unsigned int version;        /**< TF_ENGINE_ACTION_VERSION of the library */
  uint64_t id;                 /**< give it back to tf_engine_done() / _probe_done() / _count_done() */
  tf_engine_action_kind kind;  /**< what to do */
  const char *relay;           /**< the relay's name */
  const char *reason;          /**< CamelCase: the reconcile reason (`ScaleUp`, `ConfigChanged`,
                                    `Drained`, ...), `ShutdownTimeout`, `Probe`, `Count`, `Drain` */
  const char *relay_id;        /**< the process or pod acted on (RESTART, DRAIN, STOP); NULL: none */
  const char *config;          /**< START/RESTART: the rendered turnserver.conf (secret: never log it) */
  const char *config_hash;     /**< START/RESTART: its hash */
  const char *address;         /**< the relay's first address, canonical text */
  tf_port_range ports;         /**< its relay port range */
  uint16_t cli_port;           /**< its CLI port (0: none) */
  uint16_t metrics_port;       /**< its Prometheus port (0: none) */
  const char *const *probe_uris;      /**< PROBE: every listener's URI of every address (both halves in
                                           DualStack, turns: too), DTLS ones left out (no DTLS probe) */
  const char *const *probe_addresses; /**< PROBE: the relay address each URI must be given */
  size_t probe_count;          /**< PROBE: entries in both arrays */
  int64_t timeout_ms;          /**< PROBE, COUNT, DRAIN: the deadline to give the operation */
  tf_engine_drain_method drain; /**< DRAIN: how */
  tf_engine_count_method count; /**< COUNT: how */
  const char *cli_password;    /**< COUNT through the CLI, DRAIN: the relay's own CLI password (each relay
                                    has its own, tf_reconcile_cli_password()); secret: never log it */
} tf_engine_action;

#define TF_ENGINE_ACTION_VERSION 1

/** "start", "restart", "drain", "stop", "probe", "count"; NULL for an unknown value. */
TF_EXTERN(const char *) tf_engine_action_name(tf_engine_action_kind kind);

/** Number of actions of the last step, in the order to carry them out. */
TF_EXTERN(size_t) tf_engine_action_count(const tf_engine *engine);

/** Action @p i of the last step; NULL when out of range. Borrowed until the next tf_engine_step(). */
TF_EXTERN(const tf_engine_action *) tf_engine_action_at(const tf_engine *engine, size_t i);

/**
 * Report a START, RESTART, DRAIN or STOP carried out (or not).
 * @param id the action's id
 * @param ok 1: done; 0: failed (a start failing counts as an exit, so it is retried after the backoff;
 *        a drain is asked again after count_interval_ms)
 * @param relay_id START/RESTART: the new process or pod ("4242"); else NULL
 * @param now_ms monotonic
 * @return 0; TF_ENOTFOUND for an id not out (already reported, or of a forgotten relay); TF_EINVALID
 */
TF_EXTERN(tf_err) tf_engine_done(tf_engine *engine, uint64_t id, int ok, const char *relay_id, int64_t now_ms);

/**
 * Report a probe's result.
 * @param ok 1: every stage passed through every URI
 * @param error_code the TURN error code that failed it (508: no relay port free), 0: none
 * @param on_allocate 1: it failed on the Allocate (counted in turnfleet_allocation_failures_total{code})
 * @param message what it said (tf_probe_result_message()); copied; may be NULL
 * @return 0, TF_ENOTFOUND as above, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_probe_done(tf_engine *engine, uint64_t id, int ok, int error_code, int on_allocate,
                                       const char *message, int64_t now_ms);

/**
 * Report a count.
 * @param allocations the relay's current allocations; -1: it could not be read (TF_RECONCILE_UNCOUNTED_ROUNDS
 *        of those in a row, and a relay that passes its probe is Uncounted until a count comes)
 * @return 0, TF_ENOTFOUND as above, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_engine_count_done(tf_engine *engine, uint64_t id, int64_t allocations, int64_t now_ms);

/**
 * When to step next (monotonic ms): the earliest probe, count, drain, backoff,
 * drain timeout or shutdown deadline. At most the last step's time when
 * something was reported since (step at once); 0 when nothing is scheduled.
 */
TF_EXTERN(int64_t) tf_engine_next_ms(const tf_engine *engine);

/**
 * Begin the shutdown: the pool is reconciled to zero replicas (every relay
 * drains), and what is left is stopped drainTimeout + stop_grace_ms from now.
 * @param immediate 1: stop every relay at the next step (a second signal)
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_shutdown(tf_engine *engine, int64_t now_ms, int immediate);

/** 1 when shutting down and every relay has been stopped; 0 otherwise. */
TF_EXTERN(int) tf_engine_finished(const tf_engine *engine);

/**
 * Fill the options of the probe of URI @p j of a TF_ENGINE_PROBE action: `uri`,
 * `secret` (the one every relay takes: the previous secret while one is
 * rendered, as relays not restarted yet have only it; borrowed from the engine
 * until its render options change), `expect_address`, `family` (the relay
 * address's: IPv6 pools are probed over IPv6, both halves of DualStack), the
 * relay port range and `timeout_ms`. Every other field of @p po is left as the
 * driver set it (peer_check, ca_file, rto_ms, ...); only version 1 fields are written.
 * @return 0; TF_EINVALID for an action that is not a probe, @p j out of range, an unknown po->version
 */
TF_EXTERN(tf_err) tf_engine_probe_options(const tf_engine *engine, const tf_engine_action *action, size_t j,
                                          tf_probe_options *po);

/**
 * Report a PROBE action from the results of its URIs' probes: it passed when
 * every one did; else the first that failed gives the error code, whether it
 * failed on the Allocate and the message (a NULL result: a probe that did not run).
 * @param results borrowed for the call
 * @return what tf_engine_probe_done() returns
 */
TF_EXTERN(tf_err) tf_engine_probe_results_done(tf_engine *engine, uint64_t id, const tf_probe_result *const *results,
                                               size_t count, int64_t now_ms);

/* ---- what the last step says ---- */

/** A relay's state for people (status, tables, events). */
typedef enum tf_engine_relay_state {
  TF_ENGINE_RELAY_STARTING = 0, /**< no verdict yet: not started, or not probed since it started */
  TF_ENGINE_RELAY_READY = 1,    /**< its last probe passed */
  TF_ENGINE_RELAY_FULL = 2,     /**< it answers, but its last probe got 508: no relay port free */
  TF_ENGINE_RELAY_FAILING = 3,  /**< its last probe failed otherwise, or its process died */
  TF_ENGINE_RELAY_DRAINING = 4, /**< leaving: out of the URIs, going when its allocations are gone */
  TF_ENGINE_RELAY_UNCOUNTED = 5 /**< its last probe passed, but TF_RECONCILE_UNCOUNTED_ROUNDS counts in a row gave
                                     nothing (TF_RELAY_UNCOUNTED): still served, its load unknown */
} tf_engine_relay_state;

/** "Starting", "Ready", "Full", "Failing", "Draining", "Uncounted"; NULL for an unknown value. */
TF_EXTERN(const char *) tf_engine_relay_state_name(tf_engine_relay_state state);

/** One relay as the last step saw it. Allocated by the engine; borrowed until the next tf_engine_step(). */
typedef struct tf_engine_relay {
  unsigned int version;         /**< TF_ENGINE_RELAY_VERSION of the library */
  const char *name;             /**< relay name */
  tf_engine_relay_state state;  /**< its state */
  unsigned int flags;           /**< TF_RELAY_* of tf_reconcile_relay_flags() */
  const char *id;               /**< its process or pod; NULL: none */
  const char *address;          /**< its address(es), "," between the two of DualStack; "" when unknown */
  tf_port_range ports;          /**< its relay port range */
  int64_t restarts;             /**< restarts after its process died */
  int64_t allocations;          /**< last count; -1: unknown */
  int64_t probe_ms;             /**< when the last probe finished (monotonic); 0: never */
  int probe_ok;                 /**< the last probe passed */
  int probe_error_code;         /**< its TURN error code, 0: none */
  const char *probe_message;    /**< what it said; may be NULL */
} tf_engine_relay;

#define TF_ENGINE_RELAY_VERSION 1

/** Number of relays of the last step (as tf_reconcile_relay_count()). */
TF_EXTERN(size_t) tf_engine_relay_count(const tf_engine *engine);

/** Relay @p i of the last step, by name; NULL when out of range. Borrowed until the next tf_engine_step(). */
TF_EXTERN(const tf_engine_relay *) tf_engine_relay_at(const tf_engine *engine, size_t i);

/**
 * The last step's reconcile result: conditions, URIs (tf_reconcile_uri()),
 * iceServers (tf_reconcile_ice_servers_json()), metrics (tf_reconcile_metrics()),
 * the plan. Borrowed until the next tf_engine_step(); NULL before the first.
 */
TF_EXTERN(const tf_reconcile *) tf_engine_reconcile(const tf_engine *engine);

/**
 * The pool status of the last step: tf_reconcile_status_json() with, per
 * relay, `state` (tf_engine_relay_state_name()) and `restarts`, and at the top
 * `desiredReplicas` (the pool's replicas; 0 while shutting down),
 * `placedReplicas` (the relays the plan could place), `stopping`, and
 * `refusedChange` (why the last pool, nodes or render options change was
 * refused, the running pool kept; null once a change is accepted). While
 * shutting down the Ready condition is False (reason `Stopping`, then `Stopped`).
 * @param[out] out release with tf_free()
 * @return 0; TF_EINVALID (also before the first step); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_status_json(char **out, const tf_engine *engine);

/** The pool the engine manages (the last accepted one). Borrowed from @p engine. */
TF_EXTERN(const tf_pool *) tf_engine_pool(const tf_engine *engine);

/* ---- what a driver refuses at start (pure checks on its inputs) ---- */

/**
 * The inventory of one host for a local runtime, from the addresses it may
 * relay on: HostNetwork and PartitionedIP get one Ready node per address (in
 * DualStack, the i-th IPv4 address paired with the i-th IPv6 one); ExternalIPPool
 * and PodIP get one node offering every address (the planner keeps those inside
 * the pool's CIDRs). Every node carries the pool's nodeSelector labels and
 * TF_LABEL_DEVELOPMENT=true: the addresses are the user's own, so loopback ones may relay.
 * @param[out] out release with tf_nodes_free(); no node when @p count is 0
 * @param addrs the host's addresses (tf_addr_list_parse()), borrowed
 * @return 0, TF_EINVALID for NULL arguments, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_engine_local_nodes(tf_nodes **out, const tf_pool *pool, const tf_addr *addrs, size_t count);

/**
 * Whether every replica of @p pool can be placed on @p nodes.
 * @return 0; TF_EINVALID with the shortfall and the planner's reason
 *         ("1 of 3 replicas can be placed (HostNetwork IPv4): ..."), or what
 *         tf_plan_new() refuses
 */
TF_EXTERN(tf_err) tf_engine_check_placement(const tf_pool *pool, const tf_nodes *nodes);

/**
 * Whether the relays of @p pool can run on the coturn a driver has.
 * @param coturn_version what the driver's turnserver is (tf_coturn_version_parse())
 * @param have_tls 1 when the driver has a certificate and key for TLS and DTLS listeners
 * @return 0; TF_EINVALID naming the field (`spec.dataplane.coturnVersion: "4.18.0" contradicts
 *         the turnserver this runs: it is coturn 4.6.1`, `spec.listeners[1]: tls listener ...`)
 */
TF_EXTERN(tf_err) tf_engine_check_runtime(const tf_pool *pool, uint32_t coturn_version, int have_tls);

TF_END_DECL

#endif
