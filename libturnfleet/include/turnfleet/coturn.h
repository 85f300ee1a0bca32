/**
 * @file turnfleet/coturn.h
 * @brief Render one coturn `turnserver.conf` per relay, gated by coturn version;
 * read a relay's allocation count from its `/metrics` or its telnet CLI; the
 * CLI lines a runtime sends. All pure functions, no I/O.
 *
 * A rendered config contains the shared secrets (coturn cannot read them from
 * a file): callers must treat it as secret material (0600 file, Kubernetes
 * Secret) and never log it.
 */
#ifndef TURNFLEET_COTURN_H
#define TURNFLEET_COTURN_H

#include "common.h"
#include "errors.h"
#include "plan.h"
#include "pool.h"

TF_BEGIN_DECL

/** The oldest coturn the renderer supports. */
#define TF_COTURN_MIN_VERSION "4.6.1"

/** Feature bits of a coturn version, from tf_coturn_features(). */
#define TF_COTURN_GRACEFUL_SIGTERM 0x01u   /**< >= 4.6.2: SIGTERM/SIGINT stop cleanly */
#define TF_COTURN_ALLOCATIONS_BY_TYPE 0x02u /**< >= 4.6.2: turn_total_allocations{type} */
#define TF_COTURN_DRAIN 0x04u              /**< >= 4.6.3: SIGUSR1 drains (403 to new Allocates) */
#define TF_COTURN_PROMETHEUS_ADDRESS 0x08u /**< >= 4.6.3: prometheus-address */
#define TF_COTURN_DTLS_OPT_IN 0x10u        /**< >= 4.17.0: DTLS only with `dtls` */
#define TF_COTURN_CLI_OPT_IN 0x20u         /**< >= 4.10.0: the CLI only with `cli` (`no-cli` logs an ERROR) */

/** What a turnserver build has beyond its version, from tf_coturn_build_features(). */
#define TF_COTURN_BUILD_PROMETHEUS 0x01u /**< the Prometheus exporter is compiled in (Debian's builds: no) */

/**
 * Parse a coturn version "MAJOR.MINOR.PATCH" (a suffix such as "-r0" is ignored).
 * @param[out] out (major << 16) | (minor << 8) | patch
 * @return 0, TF_EINVALID naming the text
 */
TF_EXTERN(tf_err) tf_coturn_version_parse(uint32_t *out, const char *text);

/** Feature bits (TF_COTURN_*) of a version from tf_coturn_version_parse(). */
TF_EXTERN(uint32_t) tf_coturn_features(uint32_t version);

/**
 * What a turnserver build has (TF_COTURN_BUILD_* bits), read from its own
 * `turnserver -h` text: a version number alone does not tell (Debian's 4.18
 * has no Prometheus, the coturn/coturn images have it).
 * @param[out] out the bits
 * @param text the output of `turnserver -h` (stdout and stderr), borrowed; need not be NUL-terminated
 * @param len bytes in @p text
 * @return 0; TF_EPROTO when the text is not coturn's usage (no `--listening-port`); TF_EINVALID
 */
TF_EXTERN(tf_err) tf_coturn_build_features(uint32_t *out, const char *text, size_t len);

/** Knobs for tf_coturn_render(). Fields are only appended. */
typedef struct tf_coturn_options {
  unsigned int version;          /**< TF_COTURN_OPTIONS_VERSION */
  const char *coturn_version;    /**< NULL: the pool's spec.dataplane.coturnVersion */
  const char *const *secrets;    /**< active shared secrets, current first (at least one) */
  size_t secrets_count;          /**< entries in @p secrets */
  const char *state_dir;         /**< absolute; pidfile and userdb go in <state_dir>/<relay>/ (default /var/lib/turnfleet) */
  const char *log_file;          /**< absolute path; NULL logs to stdout */
  uint16_t cli_port;             /**< 0: `no-cli`; else the CLI on 127.0.0.1:cli_port */
  const char *cli_password;      /**< required with cli_port (secret, like the config) */
  uint16_t prometheus_port;      /**< base exporter port (default 9641); PartitionedIP adds the slice */
  const char *cert_file;         /**< absolute; required with tls/dtls listeners */
  const char *key_file;          /**< absolute; required with tls/dtls listeners */
  int allow_loopback_peers;      /**< tests only: render `allow-loopback-peers` */
  /* version 2 */
  int prometheus;                /**< 1: render coturn's Prometheus exporter on the relay's address (coturn >= 4.6.3
                                      and a build that has it, see tf_coturn_build_features()); 0: none. A version 1
                                      struct renders it for every coturn >= 4.6.3, as 0.1 did */
  /* version 3 */
  const char *cert_digest;       /**< with tls/dtls listeners: an identity of the certificate and key in
                                      cert_file/key_file (hex, e.g. their SHA-256), rendered as a comment so
                                      that a new certificate changes the config hash and the relays roll;
                                      NULL: none */
} tf_coturn_options;

#define TF_COTURN_OPTIONS_VERSION 3
#define TF_COTURN_OPTIONS_INIT {TF_COTURN_OPTIONS_VERSION, NULL, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, NULL, 0, 0, NULL}

/**
 * Fill @p opts with the defaults of @p version; only the fields of that
 * version are written, so a caller's older, shorter struct is safe.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_coturn_options_init(tf_coturn_options *opts, unsigned int version);

/**
 * Render the turnserver.conf of relay @p relay_name of @p plan.
 * @param[out] out the config text, secret material: release with tf_secret_free()
 * @param pool the pool the plan was made from
 * @param plan the plan
 * @param relay_name a relay of @p plan
 * @param opts secrets and paths; see tf_coturn_options
 * @return 0; TF_ENOTFOUND for an unknown relay; TF_EINVALID naming the bad
 *         option (no secret, a secret with a newline or quote, relative path,
 *         unsupported coturn version, missing TLS files, Prometheus asked of a
 *         coturn older than 4.6.3); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_coturn_render(char **out, const tf_pool *pool, const tf_plan *plan,
                                   const char *relay_name, const tf_coturn_options *opts);

/**
 * The config hash: lowercase hex SHA-256 of @p text (64 characters).
 * @param[out] out release with tf_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_coturn_config_hash(char **out, const char *text);

/**
 * Current allocations from a coturn `/metrics` scrape: the sum of
 * `turn_total_allocations` over its `type` label (coturn >= 4.6.2) or its one
 * unlabelled sample (4.6.1 builds with Prometheus). A family with no sample
 * yet (a fresh relay) counts 0. Both serializers (libprom <= 4.13, the
 * vendored client >= 4.14) are read; see tf_metrics_parse().
 * @param[out] out the count
 * @param text the exposition, borrowed (need not be NUL-terminated)
 * @param len bytes in @p text
 * @return 0; TF_EPROTO for malformed text (line and column in the message) or
 *         a negative or fractional count; TF_ENOTFOUND when the scrape has no
 *         `turn_total_allocations` at all; TF_EINVALID; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_coturn_allocations_from_metrics(int64_t *out, const char *text, size_t len);

/**
 * Current allocations from the telnet CLI's output: the line `Total sessions: N`
 * of `pu` or `ps` (the sessions that hold an allocation: exact), or the line
 * `total-current-allocs: N` of `pc` (the realm's quota counter; coturn 4.6.1 also
 * counts every Allocate it refused with 508 there and never takes it back, so
 * prefer `pu`). Telnet IAC sequences are skipped (negotiation `FF FB..FE x`,
 * two-byte commands, subnegotiation `FF FA .. FF F0`, escaped `FF FF`), so
 * the raw bytes of the session can be given as they came. When the text holds
 * several `pc` replies the last complete line counts; give the bytes up to the
 * `> ` prompt that follows the reply, so the number is not cut short.
 * @param[out] out the count
 * @param text the bytes read from the CLI, borrowed (need not be NUL-terminated)
 * @param len bytes in @p text
 * @return 0; TF_ENOTFOUND when no `Total sessions:` or `total-current-allocs:` line is there (yet);
 *         TF_EPROTO naming the line when its value is not a count; TF_EINVALID
 */
TF_EXTERN(tf_err) tf_coturn_allocations_from_cli(int64_t *out, const char *text, size_t len);

/**
 * The sessions of one TURN REST user in the telnet CLI's `pu` output: the sum
 * of the lines `user: <NAME>, N sessions` whose NAME is @p user or ends in
 * `:` followed by @p user (a REST username is `expiry:user`). A driver that
 * probes with its own user subtracts this from the total, so its probes are
 * not counted as clients. Telnet IAC sequences are skipped as in
 * tf_coturn_allocations_from_cli().
 * @param[out] out the sessions (0 when the user has none)
 * @param text the bytes read from the CLI, borrowed (need not be NUL-terminated)
 * @param len bytes in @p text
 * @param user the user part, not empty (copied for the call)
 * @return 0; TF_EPROTO naming the line when a matching line's count is malformed; TF_EINVALID; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_coturn_user_sessions_from_cli(int64_t *out, const char *text, size_t len, const char *user);

/** Lines a runtime sends to coturn's telnet CLI (tf_coturn_cli_command()). */
typedef enum tf_coturn_cli_op {
  TF_COTURN_CLI_LOGIN = 0,           /**< `<password>`: the answer to `Enter password: ` */
  TF_COTURN_CLI_PRINT_CONFIG = 1,    /**< `pc`: prints `total-current-allocs: N` */
  TF_COTURN_CLI_REFUSE_ALLOCATIONS = 2, /**< `cc total-quota -1`: the drain of coturn < 4.6.3 (every
                                          new Allocate gets 486, refreshes still work; takes up to 5 s) */
  TF_COTURN_CLI_SET_TOTAL_QUOTA = 3, /**< `cc total-quota <quota>`: undo the above (0 = unlimited) */
  TF_COTURN_CLI_DRAIN = 4,           /**< `drain` (coturn >= 4.6.3, like SIGUSR1; irreversible) */
  TF_COTURN_CLI_STOP = 5,            /**< `stop`: shut the server down */
  TF_COTURN_CLI_PRINT_USERS = 6,     /**< `pu`: sessions per user and `Total sessions: N`, the exact count */
  TF_COTURN_CLI_PRINT_SESSIONS = 7   /**< `ps`: one block per session and `Total sessions: N` */
} tf_coturn_cli_op;

/**
 * One CLI line, terminated by CR LF.
 * @param[out] out the line; for TF_COTURN_CLI_LOGIN it holds the password
 *        (secret): release with tf_secret_free()
 * @param op what to send
 * @param password TF_COTURN_CLI_LOGIN only (borrowed): not empty, no CR, LF or NUL
 * @param quota TF_COTURN_CLI_SET_TOTAL_QUOTA only: 0-2147483647 (coturn's int)
 * @return 0; TF_EINVALID naming the bad argument (never the password); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_coturn_cli_command(char **out, tf_coturn_cli_op op, const char *password, int64_t quota);

TF_END_DECL

#endif
