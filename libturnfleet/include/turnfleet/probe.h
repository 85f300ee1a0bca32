/**
 * @file turnfleet/probe.h
 * @brief The TURN probe: a real Allocate against a relay (UDP, TCP or TLS;
 * IPv4 or IPv6), with the 401 challenge, 438 nonce refresh and 437 retry on a
 * new socket; checks of the relayed address and port range; an optional data
 * path check through the relay; release with Refresh(0). Many probes run at
 * once on one epoll loop, with non-blocking sockets and no thread per probe.
 *
 * Error numbers decide, never reason text: 403 on Allocate = draining,
 * 486 = quota, 508 = capacity, 401 = credentials.
 */
#ifndef TURNFLEET_PROBE_H
#define TURNFLEET_PROBE_H

#include "addr.h"
#include "common.h"
#include "errors.h"
#include "log.h"

TF_BEGIN_DECL

/** Where a probe got to (or failed). */
typedef enum tf_probe_stage {
  TF_PROBE_STAGE_RESOLVE = 0,    /**< URI and address */
  TF_PROBE_STAGE_CONNECT = 1,    /**< socket / TCP connect */
  TF_PROBE_STAGE_TLS = 2,        /**< TLS handshake and certificate check */
  TF_PROBE_STAGE_ALLOCATE = 3,   /**< Allocate (401 challenge, 438, 437) */
  TF_PROBE_STAGE_VERIFY = 4,     /**< relayed address and port range checks */
  TF_PROBE_STAGE_PERMISSION = 5, /**< peer check: CreatePermission */
  TF_PROBE_STAGE_CHANNEL = 6,    /**< peer check: ChannelBind */
  TF_PROBE_STAGE_DATA = 7,       /**< peer check: ChannelData round trip */
  TF_PROBE_STAGE_RELEASE = 8,    /**< Refresh(lifetime 0) */
  TF_PROBE_STAGE_DONE = 9        /**< every stage passed */
} tf_probe_stage;

#define TF_PROBE_STAGE_COUNT 10

/** Knobs of one probe. Fields are only appended. Strings are copied. */
typedef struct tf_probe_options {
  unsigned int version;         /**< TF_PROBE_OPTIONS_VERSION */
  const char *uri;              /**< turn:/turns: URI (required) */
  const char *secret;           /**< the TURN REST shared secret (required; copied and wiped) */
  const char *user;             /**< user part of the REST username (default "turnfleet-probe") */
  int64_t ttl_s;                /**< credential lifetime in seconds (default 600) */
  int separator;                /**< REST username separator, 0 = ':' */
  int family;                   /**< relay family: 0 server default, TF_AF_INET or TF_AF_INET6 */
  const char *expect_address;   /**< the relayed address must be this one; NULL: no check */
  uint16_t expect_port_start;   /**< the relayed port must lie in start-end; 0: no check */
  uint16_t expect_port_end;
  int peer_check;               /**< 1: data path check through the relay (a second allocation is the peer) */
  int timeout_ms;               /**< the whole probe's deadline (default 5000) */
  int rto_ms;                   /**< initial UDP retransmission timeout (default 500, RFC 8489), doubled each send */
  const char *ca_file;          /**< TLS: CA file to verify the server certificate; NULL: the system's */
  int insecure;                 /**< TLS: 1 skips certificate verification */
  int64_t now;                  /**< Unix time used to mint the credential; 0: the clock */
  uint32_t lifetime_s;          /**< requested allocation LIFETIME; 0: the server's default */
  int release;                  /**< 1 (default): Refresh(0) at the end; 0: leave the allocation (tf_allocation) */
  tf_log_cb log_cb;             /**< optional log sink; never receives secrets */
  void *log_payload;
  tf_log_level log_level;       /**< threshold (default TF_LOG_INFO) */
  /* version 2 */
  int user_numbered; /**< 1: a distinct user per probe: `user` followed by the probe's index in its
                          set (0, 1, ...: the order of tf_probe_set_add*()); 0 outside a set */
} tf_probe_options;

#define TF_PROBE_OPTIONS_VERSION 2
#define TF_PROBE_OPTIONS_INIT                                                                            \
  {TF_PROBE_OPTIONS_VERSION, NULL, NULL, NULL, 600, 0, 0, NULL, 0, 0, 0, 5000, 500, NULL, 0, 0, 0, 1, \
   NULL, NULL, TF_LOG_INFO, 0}

/**
 * Fill @p opts with the defaults of @p version, writing only the fields of that
 * version (a caller built against an older header passes its own, shorter struct).
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_probe_options_init(tf_probe_options *opts, unsigned int version);

/** The outcome of one probe. Immutable. */
typedef struct tf_probe_result tf_probe_result;

/**
 * Run one probe to completion (blocking; bounded by timeout_ms).
 * @param[out] out the result, release with tf_probe_result_free()
 * @return 0 when the probe ran (see tf_probe_result_ok()); TF_EINVALID for bad
 *         options (naming the field, never the secret); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_probe_run(tf_probe_result **out, const tf_probe_options *opts);

/** 1 when every stage passed. */
TF_EXTERN(int) tf_probe_result_ok(const tf_probe_result *result);
/** The stage reached: TF_PROBE_STAGE_DONE on success, else the one that failed. */
TF_EXTERN(tf_probe_stage) tf_probe_result_stage(const tf_probe_result *result);
/** The stage's name ("allocate"). */
TF_EXTERN(const char *) tf_probe_stage_name(tf_probe_stage stage);
/**
 * Why it failed: TF_OK; TF_ETIMEOUT (no answer in time) or TF_ENET (unreachable,
 * refused) — the relay did not answer; TF_EAUTH (401), TF_EPROTO (malformed or
 * unauthenticated answer, or only unusable answers), TF_ERROR (a TURN error code or
 * a failed check) — the relay answered wrongly; TF_ERESOURCE — this machine ran out
 * of something (file descriptors, buffers, ports), the relay is not to blame.
 */
TF_EXTERN(tf_err) tf_probe_result_status(const tf_probe_result *result);
/** The TURN/STUN error code (401, 403, 437, 438, 486, 508, ...), 0 when none. */
TF_EXTERN(int) tf_probe_result_error_code(const tf_probe_result *result);
/** The server's reason phrase (diagnostics only), "" when none. Borrowed. */
TF_EXTERN(const char *) tf_probe_result_error_reason(const tf_probe_result *result);
/** A sentence on what happened, naming the failed check ("" on success). Borrowed. */
TF_EXTERN(const char *) tf_probe_result_message(const tf_probe_result *result);
/** 1 when the relay refused the Allocate with 403: it is draining, not broken. */
TF_EXTERN(int) tf_probe_result_draining(const tf_probe_result *result);
/** The URI probed. Borrowed. */
TF_EXTERN(const char *) tf_probe_result_uri(const tf_probe_result *result);
/** XOR-RELAYED-ADDRESS. @return 0, TF_ENOTFOUND before an allocation */
TF_EXTERN(tf_err) tf_probe_result_relayed(const tf_probe_result *result, tf_addr *addr, uint16_t *port);
/** XOR-MAPPED-ADDRESS. @return 0, TF_ENOTFOUND */
TF_EXTERN(tf_err) tf_probe_result_mapped(const tf_probe_result *result, tf_addr *addr, uint16_t *port);
/** Granted LIFETIME in seconds, 0 when none. */
TF_EXTERN(uint32_t) tf_probe_result_lifetime(const tf_probe_result *result);
/** Round-trip time of a stage in milliseconds, -1 when it did not run. */
TF_EXTERN(double) tf_probe_result_rtt_ms(const tf_probe_result *result, tf_probe_stage stage);
/** The probe CLI's exit code for this result: 0 success, 1 answered wrongly, 2 local resources
 *  exhausted (TF_ERESOURCE), 3 unreachable or timed out. */
TF_EXTERN(int) tf_probe_result_exit_code(const tf_probe_result *result);
/**
 * The result as the probe CLI's JSON object: uri, ok, stage, errorCode,
 * errorReason, relayedAddress, relayedPort, mappedAddress, lifetime, rttMs, draining, message.
 * Always valid JSON: the bytes a relay sent that are not printable UTF-8 are kept as text `\xNN`.
 * @param[out] out release with tf_free()
 */
TF_EXTERN(tf_err) tf_probe_result_to_json(char **out, const tf_probe_result *result);
/** Release a result. NULL does nothing. */
TF_EXTERN(void) tf_probe_result_free(tf_probe_result *result);

/** Many probes on one event loop. */
typedef struct tf_probe_set tf_probe_set;

/**
 * Called as each probe of a set finishes (on the thread running the set).
 * @param index the probe's index (order of tf_probe_set_add())
 * @param result borrowed for the call
 * @return 0 to go on, nonzero to stop the set (tf_probe_set_run() then returns TF_EUSER)
 */
typedef int (*tf_probe_cb)(size_t index, const tf_probe_result *result, void *payload);

/**
 * A set that runs at most @p concurrency probes at a time.
 * @param[out] out release with tf_probe_set_free()
 */
TF_EXTERN(tf_err) tf_probe_set_new(tf_probe_set **out, unsigned int concurrency);
/** Queue a probe (options copied). @return 0, TF_EINVALID, TF_ENOMEM */
TF_EXTERN(tf_err) tf_probe_set_add(tf_probe_set *set, const tf_probe_options *opts);
/**
 * Queue @p count probes of the same options (copied once, shared), started one
 * after the other as slots free up: memory stays constant in @p count. Their
 * results go to the callback of tf_probe_set_run() only (tf_probe_set_result()
 * returns NULL for them). With opts->user_numbered each gets its own user:
 * `user` followed by its index in the set.
 * @return 0, TF_EINVALID (bad options, or @p count 0), TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_probe_set_add_repeated(tf_probe_set *set, const tf_probe_options *opts, uint64_t count);
/**
 * Run every queued probe on one epoll loop, waiting inside (a loop over the
 * rounds tf_probe_set_process() runs, with the set's UDP datagrams through an
 * io_uring where the kernel has one).
 * @param cb optional, called as each finishes
 * @return 0; TF_EUSER when @p cb stopped it; TF_EINVALID when the set runs
 *         already (tf_probe_set_start()); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_probe_set_run(tf_probe_set *set, tf_probe_cb cb, void *payload);

/*
 * The same run on the caller's own loop, in the style of libcurl's multi
 * interface: tf_probe_set_start() starts the queued probes that fit, then the
 * caller waits for tf_probe_set_fd() to be readable (POLLIN / EPOLLIN) or for
 * tf_probe_set_timeout() to pass, whichever comes first, and calls
 * tf_probe_set_process(), until it reports nothing running. Nothing of these
 * blocks. One thread drives a set; probes are added before it starts.
 *
 *   tf_probe_set_start(set, cb, payload);
 *   for (size_t running = 1; running;) {
 *     struct pollfd p = {tf_probe_set_fd(set), POLLIN, 0};
 *     poll(&p, 1, tf_probe_set_timeout(set));
 *     tf_probe_set_process(set, &running);
 *   }
 */

/**
 * Start a run on the caller's loop: the queued probes that fit the concurrency
 * are started (their first requests sent), nothing is waited for. A set whose
 * probes have all run has nothing to start (tf_probe_set_running() is 0).
 * @param cb optional, called as each finishes (from tf_probe_set_process())
 * @return 0; TF_EINVALID when the set runs already; TF_EUSER when @p cb stopped
 *         it (a probe may finish at once); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_probe_set_start(tf_probe_set *set, tf_probe_cb cb, void *payload);
/**
 * The one descriptor to wait on while the set runs: readable (POLLIN) when a
 * socket of the set has something. It is an epoll instance (its sockets come
 * and go as probes start and end, the descriptor stays for the run), so a
 * caller adds it once to its own poll() or epoll set. -1 when not running.
 * Owned by the set: closed when the run ends.
 */
TF_EXTERN(int) tf_probe_set_fd(const tf_probe_set *set);
/**
 * Milliseconds until tf_probe_set_process() is due even when the descriptor
 * stays quiet (the next retransmission or deadline): 0 now, -1 when not running.
 */
TF_EXTERN(int) tf_probe_set_timeout(const tf_probe_set *set);
/**
 * One non-blocking round: what the sockets have, the timers that are due, the
 * finished probes handed to the callback (in the order they finished) and
 * their slots given to queued probes. When nothing is left the run ends (the
 * descriptor is closed; tf_probe_set_result() holds the results).
 * @param[out] running probes not yet handed over (in flight or queued), 0 when
 *             the run ended; may be NULL
 * @return 0; TF_EUSER when the callback stopped the set (in-flight probes are
 *         abandoned with a best-effort release, the run ends); TF_ENOMEM (the run ends)
 */
TF_EXTERN(tf_err) tf_probe_set_process(tf_probe_set *set, size_t *running);
/** Probes of a running set not yet handed over (in flight or queued); 0 when not running. */
TF_EXTERN(size_t) tf_probe_set_running(const tf_probe_set *set);
/** Number of probes queued (saturates at SIZE_MAX). */
TF_EXTERN(size_t) tf_probe_set_count(const tf_probe_set *set);
/** Result of probe @p i after tf_probe_set_run(); NULL before. Borrowed from @p set. */
TF_EXTERN(const tf_probe_result *) tf_probe_set_result(const tf_probe_set *set, size_t i);
/** Release a set (a run still going is ended as the callback's stop ends it). NULL does nothing. */
TF_EXTERN(void) tf_probe_set_free(tf_probe_set *set);

/** One allocation kept open (the probe's --hold). */
typedef struct tf_allocation tf_allocation;

/**
 * Allocate and keep the allocation (and its socket) open.
 * @param[out] out release with tf_allocation_free()
 * @param[out] result the Allocate's result, release with tf_probe_result_free(); may be NULL
 * @return 0 allocated; TF_ERROR / TF_EAUTH / TF_ETIMEOUT / TF_ENET when the Allocate
 *         failed (*out NULL; see @p result); TF_EINVALID; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_allocation_new(tf_allocation **out, tf_probe_result **result, const tf_probe_options *opts);
/** Refresh with the allocation's lifetime (438 handled). @return 0, or the failure */
TF_EXTERN(tf_err) tf_allocation_refresh(tf_allocation *alloc);
/** Seconds granted by the last Allocate or Refresh. */
TF_EXTERN(uint32_t) tf_allocation_lifetime(const tf_allocation *alloc);
/** The relayed address. */
TF_EXTERN(tf_err) tf_allocation_relayed(const tf_allocation *alloc, tf_addr *addr, uint16_t *port);
/** Release now: Refresh(lifetime 0); 437 counts as released. */
TF_EXTERN(tf_err) tf_allocation_release(tf_allocation *alloc);
/** Release (best effort, if not yet released), close the socket and free. NULL does nothing. */
TF_EXTERN(void) tf_allocation_free(tf_allocation *alloc);

TF_END_DECL

#endif
