/**
 * @file turnfleet/manifest.h
 * @brief Pure builders of the Kubernetes bodies the operator writes for a
 * pool: one relay Pod per planned relay, the `<pool>-relay-config` Secret,
 * the `<pool>-turn-uris` ConfigMap, the TURNPool status body and core/v1
 * Events; and tf_manifest_matches(), which says whether an observed object
 * already has what a desired body asks for, so a driver writes only what
 * differs.
 *
 * Every builder is a function of its arguments (no clock, no I/O): the same
 * inputs give the same bytes, keys in a fixed order. The bodies are JSON
 * (cJSON's formatted print). Only the Secret body holds secret material
 * (the rendered configs, base64 under `data`); no other body carries a
 * secret, a config or a password.
 *
 * Fixed layout of a relay Pod (docs/operator.md says why):
 *  - the config Secret key `<relay>.conf` is mounted as
 *    TF_MANIFEST_CONFIG_PATH (mode 0400) in both containers;
 *  - with a tls or dtls listener, the first such listener's tlsSecretRef is
 *    mounted in the coturn container at TF_MANIFEST_TLS_CERT_PATH and
 *    TF_MANIFEST_TLS_KEY_PATH (keys tls.crt, tls.key; one certificate per
 *    relay, as coturn has one);
 *  - one emptyDir (memory) is mounted in both containers at
 *    `<state_dir>/<relay>`: coturn's pidfile and userdb (tf_coturn_render()
 *    puts them there) and the agent's drained marker
 *    `<state_dir>/<relay>/drained`, which the coturn container's preStop
 *    waits for.
 *
 * Thread safety: reentrant.
 */
#ifndef TURNFLEET_MANIFEST_H
#define TURNFLEET_MANIFEST_H

#include "common.h"
#include "errors.h"
#include "pool.h"
#include "reconcile.h"

TF_BEGIN_DECL

/** Where both containers of a relay Pod read the relay's config. */
#define TF_MANIFEST_CONFIG_PATH "/etc/turnfleet/turnserver.conf"
/** The readiness gate of a relay Pod, set by the operator after a real Allocate. */
#define TF_MANIFEST_READINESS_GATE "turnfleet.hzmi.dev/allocate-ready"
/** Where the coturn container reads the certificate and key of a pool's tls/dtls listeners: the keys
 *  `tls.crt` and `tls.key` of the listener's tlsSecretRef (a kubernetes.io/tls Secret), read-only, mode
 *  0440 for the pod's group. Render with these as tf_coturn_options.cert_file and key_file. */
#define TF_MANIFEST_TLS_CERT_PATH "/etc/turnfleet-tls/tls.crt"
#define TF_MANIFEST_TLS_KEY_PATH "/etc/turnfleet-tls/tls.key"

/** Knobs for the builders. Fields are only appended; read up to the caller's version. */
typedef struct tf_manifest_options {
  unsigned int version;    /**< TF_MANIFEST_OPTIONS_VERSION */
  const char *pool_uid;    /**< the TURNPool's metadata.uid, for the owner references (required) */
  const char *agent_image; /**< the project's image, running `turnfleet agent` (required for Pods) */
  uint16_t agent_port;     /**< the agent's /metrics and /healthz port on the relay's address
                                (default 9700); PartitionedIP adds the slice */
  const char *state_dir;   /**< absolute; the tf_coturn_options.state_dir the configs were rendered with
                                (default /var/lib/turnfleet) */
  /* version 2 */
  const char *metrics_token; /**< the pool's token for its agents' /metrics: 64 lowercase hex digits, secret
                                  (a driver makes it once, from 32 random bytes, and keeps it: the
                                  operator reads it back from the observed Secret). The relay-config Secret carries it as
                                  TF_MANIFEST_METRICS_TOKEN_KEY; a Pod mounts that key for its agent alone
                                  at TF_MANIFEST_METRICS_TOKEN_PATH and passes `--metrics-token-file`.
                                  NULL: none (the Secret keeps the key it was observed with) */
} tf_manifest_options;

#define TF_MANIFEST_OPTIONS_VERSION 2
#define TF_MANIFEST_OPTIONS_INIT {TF_MANIFEST_OPTIONS_VERSION, NULL, NULL, 9700, NULL, NULL}

/** The key of the relay-config Secret that holds the pool's metrics token. */
#define TF_MANIFEST_METRICS_TOKEN_KEY "metrics-token"
/** Where a relay Pod's agent container (only) reads the metrics token. */
#define TF_MANIFEST_METRICS_TOKEN_PATH "/etc/turnfleet-agent/metrics-token"

/**
 * Fill @p opts with the defaults of @p version.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_manifest_options_init(tf_manifest_options *opts, unsigned int version);

/**
 * The Pod of planned relay @p relay of @p rec (docs/operator.md: named after the
 * relay, pinned to its node with spec.nodeName, hostNetwork except PodIP,
 * which takes the pod network and asks Multus for the relay's address on
 * spec.addressing.podIP.network; annotations relay-address, port-range,
 * config-hash; the readiness gate; grace = drainTimeout + 30 s; containers
 * `coturn` and `agent` with their preStop hooks; non-root, every capability
 * dropped but NET_BIND_SERVICE where a port below 1024 is bound; no
 * service-account token; owned by the pool).
 * @param[out] out the body, release with tf_free()
 * @param pool the pool @p rec was made from (borrowed)
 * @param rec the reconcile result (borrowed)
 * @param relay an index for the tf_reconcile_relay_* accessors
 * @param opts borrowed for the call
 * @return 0; TF_ENOTFOUND when @p relay is out of range or not planned (a
 *         leaving relay keeps the Pod it has); TF_EINVALID naming the field
 *         (`options.agent_image: required`, `options.agent_port: ...`);
 *         TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_manifest_relay_pod(char **out, const tf_pool *pool, const tf_reconcile *rec, size_t relay,
                                        const tf_manifest_options *opts);

/**
 * The Secret `<pool>-relay-config`: one key `<relay>.conf` per planned relay
 * of @p rec, its rendered config. A relay that is leaving has no config in
 * @p rec; its key is copied from @p observed (the Secret as read from the
 * API) so that its draining Pod keeps its file. With opts->metrics_token
 * (version 2) also the key TF_MANIFEST_METRICS_TOKEN_KEY; without it, that key
 * as observed.
 * @param[out] out the body, secret material: release with tf_secret_free()
 * @param observed the observed Secret's JSON, or NULL (borrowed)
 * @param observed_len bytes in @p observed
 * @return 0; TF_EPROTO for malformed @p observed; TF_EINVALID naming the
 *         field; TF_ENOMEM. Buffers that held a config are wiped.
 */
TF_EXTERN(tf_err) tf_manifest_relay_config_secret(char **out, const tf_pool *pool, const tf_reconcile *rec,
                                                  const char *observed, size_t observed_len,
                                                  const tf_manifest_options *opts);

/**
 * The ConfigMap `<pool>-turn-uris`: `iceServers.json` (tf_reconcile_ice_servers_json(),
 * no credentials) and `uris` (one URI a line, each ending in a newline): the
 * published URIs of @p rec, i.e. the ready relays that are not draining.
 * @param[out] out the body, release with tf_free()
 * @return 0, TF_EINVALID naming the field, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_manifest_turn_uris(char **out, const tf_pool *pool, const tf_reconcile *rec,
                                        const tf_manifest_options *opts);

/**
 * The body for the TURNPool's `/status` subresource: `{"status":
 * {observedGeneration, replicas (the desired count: spec.replicas),
 * readyRelays, turnURIs (the published URIs: the status JSON's), selector, relays,
 * conditions}}`, every condition with its
 * observedGeneration; while every relay drains (tf_engine_shutdown()) also
 * `stopping: true` and `shutdown: {relays, allocations, deadline}`.
 * @param status_json tf_engine_status_json() or tf_reconcile_status_json() text (borrowed)
 * @param len bytes in @p status_json
 * @param generation the pool's metadata.generation this status was computed for (>= 0)
 * @param[out] out the body, release with tf_free()
 * @return 0; TF_EPROTO for malformed JSON; TF_EINVALID naming the field
 *         (`status.relays: must be an array`, `generation: ...`); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_manifest_status(char **out, const tf_pool *pool, const char *status_json, size_t len,
                                     int64_t generation);

/** One Event about a pool. Fields are only appended; read up to the caller's version. */
typedef struct tf_manifest_event {
  unsigned int version;      /**< TF_MANIFEST_EVENT_VERSION */
  const char *type;          /**< "Normal" or "Warning" */
  const char *reason;        /**< CamelCase, letters and digits, 1-128 characters (`ScaleDown`) */
  const char *message;       /**< at most 1024 bytes, never a secret */
  int64_t count;             /**< how many times it happened (>= 1) */
  const char *first_time;    /**< RFC 3339 in UTC, seconds (`2024-05-01T12:00:00Z`) */
  const char *last_time;     /**< as @p first_time; NULL: the same */
} tf_manifest_event;

#define TF_MANIFEST_EVENT_VERSION 1
#define TF_MANIFEST_EVENT_INIT {TF_MANIFEST_EVENT_VERSION, "Normal", NULL, NULL, 1, NULL, NULL}

/**
 * Fill @p ev with the defaults of @p version (TF_MANIFEST_EVENT_INIT's), writing no field past it.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_manifest_event_init(tf_manifest_event *ev, unsigned int version);

/**
 * A core/v1 Event on the pool (involvedObject = the TURNPool). Its name is
 * `<pool>.<16 hex digits>` from the pool's uid, type, reason and message, so
 * the same event again has the same name: the driver PATCHes its count and
 * lastTimestamp instead of creating another.
 * @param[out] out the body, release with tf_free()
 * @param ev borrowed for the call
 * @return 0; TF_EINVALID naming the field (`event.reason: ...`); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_manifest_event_body(char **out, const tf_pool *pool, const tf_manifest_event *ev,
                                         const tf_manifest_options *opts);

/**
 * The Secret whose `tls.crt` and `tls.key` the relay pods of @p pool mount for its tls/dtls listeners:
 * the tlsSecretRef of its first tls or dtls listener.
 * @return the name, borrowed from @p pool; NULL when the pool has no such listener (or @p pool is NULL)
 */
TF_EXTERN(const char *) tf_manifest_tls_secret(const tf_pool *pool);

/**
 * Whether @p observed already has everything @p desired says: every member
 * of a desired object is in the observed one with a matching value (the API
 * server's defaults and other writers' extra labels and annotations are
 * ignored), arrays match element by element with the same length, scalars
 * are equal; a `data` or `stringData` object must have exactly the desired
 * keys. Values are compared as JSON (numbers by value), never printed. The
 * top-level `apiVersion` and `kind` are the type, not content, and are not
 * compared (the items of a list carry neither).
 * @param[out] matches 1 when nothing differs, else 0
 * @param[out] path where the first difference is, as a field path
 *             (`spec.containers[1].image`); NULL when they match. Release
 *             with tf_free(); may be NULL. Never holds a value.
 * @param desired a builder's output (borrowed)
 * @param observed the object as read from the API (borrowed)
 * @return 0; TF_EPROTO for malformed JSON (naming which); TF_EINVALID; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_manifest_matches(int *matches, char **path, const char *desired, size_t desired_len,
                                      const char *observed, size_t observed_len);

TF_END_DECL

#endif
