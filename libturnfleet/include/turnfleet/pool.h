/**
 * @file turnfleet/pool.h
 * @brief TURNPool spec: parse (JSON or YAML, whole object or just `spec`),
 * defaults, and validation that reports every problem with its field path.
 */
#ifndef TURNFLEET_POOL_H
#define TURNFLEET_POOL_H

#include "addr.h"
#include "common.h"
#include "errors.h"

TF_BEGIN_DECL

/** A parsed TURNPool with defaults applied. Immutable once parsed, except its name. */
typedef struct tf_pool tf_pool;

/** A list of (field path, message) problems. */
typedef struct tf_problems tf_problems;

/** Input formats for tf_pool_parse(). */
typedef enum tf_format {
  TF_FORMAT_AUTO = 0, /**< JSON if the text starts with '{', else YAML */
  TF_FORMAT_JSON = 1,
  TF_FORMAT_YAML = 2
} tf_format;

/** spec.addressing.mode */
typedef enum tf_mode {
  TF_MODE_HOST_NETWORK = 0,
  TF_MODE_EXTERNAL_IP_POOL = 1,
  TF_MODE_POD_IP = 2,
  TF_MODE_PARTITIONED_IP = 3
} tf_mode;

/** spec.addressing.family */
typedef enum tf_family {
  TF_FAMILY_IPV4 = 0,
  TF_FAMILY_IPV6 = 1,
  TF_FAMILY_DUAL_STACK = 2
} tf_family;

/** spec.listeners[].protocol */
typedef enum tf_protocol {
  TF_PROTOCOL_UDP = 0,
  TF_PROTOCOL_TCP = 1,
  TF_PROTOCOL_TLS = 2,
  TF_PROTOCOL_DTLS = 3
} tf_protocol;

/**
 * Parse a TURNPool. The text is a whole Kubernetes object (`apiVersion`,
 * `kind`, `metadata`, `spec`) or just its spec. Only malformed text fails
 * here; wrong field types and values are kept as problems and reported by
 * tf_pool_validate(), so every problem can be reported at once.
 * @param[out] out the pool, release with tf_pool_free()
 * @param text the document, borrowed for the call
 * @param len bytes in @p text
 * @param format TF_FORMAT_AUTO, TF_FORMAT_JSON or TF_FORMAT_YAML
 * @return 0; TF_EPROTO for malformed JSON/YAML (message gives line, column
 *         and byte offset), a duplicate key (both positions), a NUL
 *         character or invalid UTF-8 in a string (with the field path), or a
 *         document that is not a mapping; TF_EINVALID for bad arguments or an
 *         input over the default limits (see tf_parse_options); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_pool_parse(tf_pool **out, const char *text, size_t len, tf_format format);

/**
 * Input limits of the document parsers (tf_pool_parse_with(),
 * tf_nodes_parse_with(), tf_existing_parse_with(); the functions without `_with`
 * use the defaults). Both limits are checked before the document tree grows,
 * so a parse holds about 2 x the input plus 200 bytes per value at most.
 * Fields are only appended; they are read up to @ref version.
 */
typedef struct tf_parse_options {
  unsigned int version; /**< TF_PARSE_OPTIONS_VERSION */
  size_t max_bytes;     /**< longest input in bytes; 0: TF_PARSE_MAX_BYTES_DEFAULT */
  size_t max_values;    /**< most values (scalars, lists, mappings) in one document; 0: TF_PARSE_MAX_VALUES_DEFAULT */
} tf_parse_options;

#define TF_PARSE_OPTIONS_VERSION 1
#define TF_PARSE_MAX_BYTES_DEFAULT ((size_t)16 << 20) /**< 16 MiB */
#define TF_PARSE_MAX_VALUES_DEFAULT ((size_t)1000000) /**< one million values */
#define TF_PARSE_OPTIONS_INIT {TF_PARSE_OPTIONS_VERSION, TF_PARSE_MAX_BYTES_DEFAULT, TF_PARSE_MAX_VALUES_DEFAULT}

/**
 * Initialise @p opts to the defaults of @p version.
 * @param[out] opts the options to fill, the caller's
 * @param version TF_PARSE_OPTIONS_VERSION (or an older version)
 * @return 0; TF_EINVALID for an unknown version
 */
TF_EXTERN(tf_err) tf_parse_options_init(tf_parse_options *opts, unsigned int version);

/**
 * tf_pool_parse() with input limits.
 * @param[out] out the pool, release with tf_pool_free()
 * @param text the document, borrowed for the call
 * @param len bytes in @p text
 * @param format TF_FORMAT_AUTO, TF_FORMAT_JSON or TF_FORMAT_YAML
 * @param opts the limits, borrowed; NULL for the defaults
 * @return as tf_pool_parse(); TF_EINVALID for an input over a limit (the
 *         message names the limit and the tf_parse_options field that raises it)
 */
TF_EXTERN(tf_err) tf_pool_parse_with(tf_pool **out, const char *text, size_t len, int format,
                                     const tf_parse_options *opts);

/** Release a pool. NULL does nothing. */
TF_EXTERN(void) tf_pool_free(tf_pool *pool);

/**
 * Set the pool's name (for a spec given without metadata). Validated by tf_pool_validate().
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_pool_set_name(tf_pool *pool, const char *name);

/**
 * Validate a pool and list every problem, in document order.
 * @param[out] out the problems (possibly none), release with tf_problems_free(); may be NULL
 * @return 0 if the pool is valid; TF_EINVALID if not (tf_error_last() names the first problem)
 */
TF_EXTERN(tf_err) tf_pool_validate(tf_problems **out, const tf_pool *pool);

/**
 * The pool with defaults applied, as canonical JSON (a whole TURNPool object).
 * @param[out] out release with tf_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_pool_to_json(char **out, const tf_pool *pool);

/**
 * A copy of @p pool with another spec.replicas (a scale, a shutdown to zero), without JSON editing.
 * @param[out] out release with tf_pool_free()
 * @param pool the pool, borrowed for the call
 * @param replicas >= 0
 * @return 0, TF_EINVALID naming `replicas`, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_pool_with_replicas(tf_pool **out, const tf_pool *pool, int64_t replicas);

/** metadata.name ("" when unset). Borrowed from @p pool. */
TF_EXTERN(const char *) tf_pool_name(const tf_pool *pool);
/** metadata.namespace (default "default"). Borrowed from @p pool. */
TF_EXTERN(const char *) tf_pool_namespace(const tf_pool *pool);
/** spec.replicas (default 1). */
TF_EXTERN(int64_t) tf_pool_replicas(const tf_pool *pool);
/** spec.addressing.mode (default HostNetwork). */
TF_EXTERN(tf_mode) tf_pool_mode(const tf_pool *pool);
/** spec.addressing.family (default IPv4). */
TF_EXTERN(tf_family) tf_pool_family(const tf_pool *pool);
/** spec.relayPortRange (default 49152-65535). */
TF_EXTERN(tf_port_range) tf_pool_relay_port_range(const tf_pool *pool);
/** spec.addressing.partitionedIP.relaysPerNode (1 for other modes). */
TF_EXTERN(uint32_t) tf_pool_relays_per_node(const tf_pool *pool);
/** Number of spec.listeners (default: udp and tcp on 3478). */
TF_EXTERN(size_t) tf_pool_listener_count(const tf_pool *pool);
/** spec.listeners[i].name, NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_pool_listener_name(const tf_pool *pool, size_t i);
/** spec.listeners[i].protocol, -1 when out of range. */
TF_EXTERN(int) tf_pool_listener_protocol(const tf_pool *pool, size_t i);
/** spec.listeners[i].port, 0 when out of range. */
TF_EXTERN(uint16_t) tf_pool_listener_port(const tf_pool *pool, size_t i);
/** spec.auth.realm. Borrowed. */
TF_EXTERN(const char *) tf_pool_realm(const tf_pool *pool);
/** spec.dataplane.coturnVersion (default "4.6.1"). Borrowed. */
TF_EXTERN(const char *) tf_pool_coturn_version(const tf_pool *pool);
/** spec.drainTimeout in milliseconds (default 600 s). */
TF_EXTERN(int64_t) tf_pool_drain_timeout_ms(const tf_pool *pool);

/** spec.dataplane.image (default: the coturn image of coturnVersion). Borrowed. */
TF_EXTERN(const char *) tf_pool_image(const tf_pool *pool);
/**
 * spec.auth.secretRef (@p previous 0) or spec.auth.previousSecretRef (@p previous 1).
 * @param[out] name the Secret's name; NULL when the ref is absent. Borrowed; may be NULL
 * @param[out] key its key (default "secret"). Borrowed; may be NULL
 * @return 0, TF_ENOTFOUND when the ref is absent, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_pool_secret_ref(const tf_pool *pool, int previous, const char **name, const char **key);
/** The largest shared secret accepted, in bytes (coturn reads a config line of at most 1023 bytes;
 *  a REST secret needs far less than this). */
#define TF_POOL_SECRET_MAX 512

/**
 * Check the shared secret read from the Secret of spec.auth.secretRef (@p previous 0) or
 * previousSecretRef (@p previous 1), before it is rendered: not empty, at most
 * TF_POOL_SECRET_MAX bytes, no line break, no double quote, no other control character.
 * The message names the ref, the Secret (namespace/name) and its key, never the value:
 * `spec.auth.secretRef: Secret media/s, key secret: 10485760 bytes, more than the cap of 512 bytes`.
 * @param value the decoded value (secret material, borrowed); NULL: the key is absent
 * @param len bytes in @p value (a NUL inside is refused)
 * @return 0; TF_EINVALID with that message; TF_ENOTFOUND when the ref is absent
 */
TF_EXTERN(tf_err) tf_pool_check_secret(const tf_pool *pool, int previous, const char *value, size_t len);
/** spec.listeners[i].tlsSecretRef.name; NULL when absent or out of range. Borrowed. */
TF_EXTERN(const char *) tf_pool_listener_tls_secret(const tf_pool *pool, size_t i);
/** Number of spec.nodeSelector entries (default: turnfleet.hzmi.dev/relay-node=true). */
TF_EXTERN(size_t) tf_pool_node_selector_count(const tf_pool *pool);
/** Key of nodeSelector entry @p i (in the order tf_pool_to_json() writes them); NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_pool_node_selector_key(const tf_pool *pool, size_t i);
/** Value of nodeSelector entry @p i; NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_pool_node_selector_value(const tf_pool *pool, size_t i);
/** spec.addressing.podIP.network (the Multus network); NULL when absent. Borrowed. */
TF_EXTERN(const char *) tf_pool_pod_network(const tf_pool *pool);
/** Number of spec.addressing.externalIPPool.addresses prefixes. */
TF_EXTERN(size_t) tf_pool_external_prefix_count(const tf_pool *pool);
/**
 * externalIPPool prefix @p i.
 * @param[out] out the prefix
 * @return 0, TF_ENOTFOUND when out of range, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_pool_external_prefix(tf_prefix *out, const tf_pool *pool, size_t i);
/** spec.quota.userQuota (@p total 0) or spec.quota.totalQuota (@p total 1); 0: unlimited. */
TF_EXTERN(int64_t) tf_pool_quota(const tf_pool *pool, int total);
/** spec.peerPolicy.denyPrivate (default 1). */
TF_EXTERN(int) tf_pool_peer_deny_private(const tf_pool *pool);
/** Number of spec.peerPolicy.allow (@p deny 0) or .deny (@p deny 1) prefixes. */
TF_EXTERN(size_t) tf_pool_peer_prefix_count(const tf_pool *pool, int deny);
/**
 * peerPolicy prefix @p i of the allow (@p deny 0) or deny (@p deny 1) list.
 * @param[out] out the prefix
 * @return 0, TF_ENOTFOUND when out of range, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_pool_peer_prefix(tf_prefix *out, const tf_pool *pool, int deny, size_t i);

/** Number of problems in @p problems. */
TF_EXTERN(size_t) tf_problems_count(const tf_problems *problems);
/** Field path of problem @p i ("spec.relayPortRange.end"); NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_problems_path(const tf_problems *problems, size_t i);
/** Message of problem @p i, without the path; NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_problems_message(const tf_problems *problems, size_t i);
/** Release a problem list. NULL does nothing. */
TF_EXTERN(void) tf_problems_free(tf_problems *problems);

/** Names of the enums as in the spec ("HostNetwork", "DualStack", "udp"); NULL when unknown. */
TF_EXTERN(const char *) tf_mode_name(tf_mode mode);
TF_EXTERN(const char *) tf_family_name(tf_family family);
TF_EXTERN(const char *) tf_protocol_name(tf_protocol protocol);

TF_END_DECL

#endif
