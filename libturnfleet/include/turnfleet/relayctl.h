/**
 * @file turnfleet/relayctl.h
 * @brief Talking to one running coturn: its telnet CLI on 127.0.0.1 (count
 * with `pu`, drain per version, the session list) and, on builds with
 * Prometheus, its `/metrics` (through libcurl). Every call is bounded by a
 * deadline; the CLI password is copied only into memory that is wiped, and
 * never logged or put in an error message.
 *
 * Two forms:
 *  - blocking calls (tf_relayctl_run()), for an agent or a script;
 *  - a worker pool (tf_relayctl_workers) for a driver's event loop, so that
 *    asking N relays never stalls the loop N timeouts: requests are queued,
 *    run on the pool's threads, and results come back through a file
 *    descriptor the loop polls.
 *
 * Thread contract of tf_relayctl_workers: one owner thread calls
 * tf_relayctl_workers_submit(), tf_relayctl_workers_next() and
 * tf_relayctl_workers_free(); the pool's own threads only run requests and
 * never call back into the owner. tf_relayctl_workers_fd() is readable while
 * a result waits. tf_relayctl_run() is reentrant (thread-safe).
 */
#ifndef TURNFLEET_RELAYCTL_H
#define TURNFLEET_RELAYCTL_H

#include "addr.h"
#include "common.h"
#include "errors.h"

TF_BEGIN_DECL

/** What to ask a relay. */
typedef enum tf_relayctl_op {
  TF_RELAYCTL_COUNT = 0,         /**< allocations through the CLI's `pu` (`Total sessions: N`, exact) */
  TF_RELAYCTL_COUNT_METRICS = 1, /**< allocations from http://address:port/metrics (`turn_total_allocations`) */
  TF_RELAYCTL_DRAIN = 2,         /**< the CLI's `drain` (coturn >= 4.6.3: new Allocates get 403, it exits at zero) */
  TF_RELAYCTL_REFUSE = 3,        /**< the CLI's `cc total-quota -1` (older coturn: new Allocates get 486) */
  TF_RELAYCTL_SESSIONS = 4       /**< the CLI's `ps`: the session list as coturn prints it, and the count */
} tf_relayctl_op;

/** One request. Fields are only appended; read up to the caller's version. */
typedef struct tf_relayctl_request {
  unsigned int version;  /**< TF_RELAYCTL_REQUEST_VERSION */
  tf_relayctl_op op;     /**< what to ask */
  const char *address;   /**< TF_RELAYCTL_COUNT_METRICS: the exporter's address; the CLI is always 127.0.0.1 */
  uint16_t port;         /**< the CLI port, or the exporter's port */
  const char *password;  /**< the CLI password (secret; copied and wiped); unused for /metrics */
  int timeout_ms;        /**< the whole exchange's deadline (> 0) */
  /* version 2 */
  int owner_pid;         /**< > 0: the CLI's listening socket must belong to this process (Linux /proc),
                              checked before the password is sent, so a listener that is not the relay's
                              never receives it; 0: no check (another network or PID namespace) */
} tf_relayctl_request;

#define TF_RELAYCTL_REQUEST_VERSION 2
#define TF_RELAYCTL_REQUEST_INIT {TF_RELAYCTL_REQUEST_VERSION, TF_RELAYCTL_COUNT, NULL, 0, NULL, 1000, 0}

/**
 * Fill @p req with the defaults of @p version (TF_RELAYCTL_REQUEST_INIT's), writing no field past it.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_relayctl_request_init(tf_relayctl_request *req, unsigned int version);

/**
 * Ask one relay and wait (at most the request's timeout).
 * @param[out] count COUNT, COUNT_METRICS, SESSIONS: the allocations; may be NULL
 * @param[out] text COUNT, SESSIONS: coturn's output (release with tf_free()); may be NULL
 * @param req borrowed for the call
 * @return 0; TF_EINVALID naming the field (never the password); TF_ETIMEOUT
 *         past the deadline; TF_ENET when the relay cannot be reached or
 *         closes; TF_EAUTH when the CLI refuses the password or its listener is
 *         not @p req->owner_pid's (nothing was sent then); TF_EPROTO when
 *         the answer is not what the op expects (an HTTP status other than 200,
 *         no count in it); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_relayctl_run(int64_t *count, char **text, const tf_relayctl_request *req);

/** A pool of worker threads running requests for one owner thread (see the file comment). */
typedef struct tf_relayctl_workers tf_relayctl_workers;

/**
 * @param[out] out release with tf_relayctl_workers_free()
 * @param threads how many requests run at once (1-64)
 * @return 0, TF_EINVALID, TF_ENOMEM, TF_EIO (no thread or no descriptor)
 */
TF_EXTERN(tf_err) tf_relayctl_workers_new(tf_relayctl_workers **out, size_t threads);

/** Stop the threads (waiting for the requests that run, at most their timeouts) and release. NULL does nothing. */
TF_EXTERN(void) tf_relayctl_workers_free(tf_relayctl_workers *workers);

/**
 * Queue a request; it runs as soon as a thread is free.
 * @param req borrowed for the call (copied; the password into wiped memory)
 * @param tag the caller's, given back with the result
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_relayctl_workers_submit(tf_relayctl_workers *workers, const tf_relayctl_request *req,
                                             uint64_t tag);

/** A descriptor that is readable while a result waits (poll it with POLLIN); owned by @p workers. */
TF_EXTERN(int) tf_relayctl_workers_fd(const tf_relayctl_workers *workers);

/**
 * Take one finished request, without blocking.
 * @param[out] tag the request's tag
 * @param[out] rc what tf_relayctl_run() returned for it
 * @param[out] count its count (-1 when it failed)
 * @return 1 when a result was taken, 0 when none waits, TF_EINVALID
 */
TF_EXTERN(int) tf_relayctl_workers_next(tf_relayctl_workers *workers, uint64_t *tag, tf_err *rc, int64_t *count);

/* ---- the relay's own config: where its CLI is (the agent's input) ---- */

/**
 * What a relay's rendered turnserver.conf says about reaching it: the CLI
 * port and password, its listening addresses and its relay port range. The
 * agent reads these from the config file, never from argv or the
 * environment. Opaque because it holds the CLI password (wiped on free).
 */
typedef struct tf_relayctl_config tf_relayctl_config;

/**
 * Read a turnserver.conf in coturn's syntax (a name, then any run of spaces,
 * tabs and `=`, then the value; quotes stripped; `#` comments). It must have
 * `cli-port` and a non-empty `cli-password`, `cli-ip` (if any) 127.0.0.1, no
 * `no-cli`, and at least one `listening-ip`; `min-port`/`max-port` default
 * to coturn's 49152/65535; `pidfile`, if any, is absolute.
 * @param[out] out release with tf_relayctl_config_free()
 * @param text the config (secret material), borrowed; need not be NUL-terminated
 * @param len bytes in @p text
 * @return 0; TF_EINVALID naming the line and option (`line 12: cli-port: ...`,
 *         `cli-password: missing`), never a value; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_relayctl_config_parse(tf_relayctl_config **out, const char *text, size_t len);

/** Release, wiping the password. NULL does nothing. */
TF_EXTERN(void) tf_relayctl_config_free(tf_relayctl_config *config);

/** The CLI port (on 127.0.0.1); 0 for NULL. */
TF_EXTERN(uint16_t) tf_relayctl_config_cli_port(const tf_relayctl_config *config);

/**
 * The `pidfile` coturn writes its PID to (absolute), NULL when the config has
 * none: where a caller finds the PID for tf_relayctl_request.owner_pid, so the
 * password only goes to the relay's own listener. Borrowed from @p config.
 */
TF_EXTERN(const char *) tf_relayctl_config_pidfile(const tf_relayctl_config *config);

/** Number of `listening-ip` addresses, in the config's order. */
TF_EXTERN(size_t) tf_relayctl_config_address_count(const tf_relayctl_config *config);

/**
 * Listening address @p i.
 * @return 0, TF_ENOTFOUND when out of range, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_relayctl_config_address(tf_addr *out, const tf_relayctl_config *config, size_t i);

/** The relay port range (`min-port`-`max-port`). */
TF_EXTERN(tf_port_range) tf_relayctl_config_port_range(const tf_relayctl_config *config);

/**
 * A CLI request to this relay.
 * @param[out] req filled (version TF_RELAYCTL_REQUEST_VERSION); its password is
 *             borrowed from @p config: use it before tf_relayctl_config_free()
 * @param op a CLI op (not TF_RELAYCTL_COUNT_METRICS)
 * @param timeout_ms > 0
 * @return 0, TF_EINVALID naming the argument
 */
TF_EXTERN(tf_err) tf_relayctl_config_request(tf_relayctl_request *req, const tf_relayctl_config *config,
                                             tf_relayctl_op op, int timeout_ms);

/**
 * Undo a refusal (TF_RELAYCTL_REFUSE, `cc total-quota -1`) on a relay that is
 * not being stopped: one CLI session reads the default total-quota with `pc`
 * and, when it is the refusal (coturn prints -1 as 18446744073709551615), sets
 * it back to the config's `total-quota` (0, unlimited, when it has none). New
 * Allocates are then served again within coturn's 5 s quota refresh. coturn
 * >= 4.6.3's `drain` cannot be undone and `pc` does not show it: this only
 * concerns the older drain.
 * @param[out] undone 1 when the relay was refusing and was set back, else 0
 * @param owner_pid as tf_relayctl_request.owner_pid (0: unchecked)
 * @param timeout_ms the whole exchange's deadline (> 0)
 * @return 0; TF_EPROTO when `pc` shows no `Default total-quota:` line or the
 *         CLI did not confirm the change; as tf_relayctl_run() otherwise
 */
TF_EXTERN(tf_err) tf_relayctl_config_unrefuse(int *undone, const tf_relayctl_config *config, int owner_pid,
                                              int timeout_ms);

/**
 * The version of the coturn that runs, from its CLI's banner (`Coturn-4.18.0
 * 'Gorst'`, printed before the password prompt): the password is never sent.
 * @param[out] version tf_coturn_version_parse() form (0 on failure)
 * @param timeout_ms the exchange's deadline (> 0)
 * @return 0; TF_EPROTO when the banner names no version; as tf_relayctl_run() otherwise
 */
TF_EXTERN(tf_err) tf_relayctl_config_running_version(uint32_t *version, const tf_relayctl_config *config,
                                                     int timeout_ms);

/**
 * The drain of a coturn version: TF_RELAYCTL_DRAIN on coturn >= 4.6.3 (new
 * Allocates get 403 and the process exits by itself at zero allocations),
 * TF_RELAYCTL_REFUSE below (`cc total-quota -1`: 486; the process must be
 * stopped at zero).
 * @param version tf_coturn_version_parse() form
 */
TF_EXTERN(tf_relayctl_op) tf_relayctl_drain_op(uint32_t version);

TF_END_DECL

#endif
