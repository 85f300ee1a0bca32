/**
 * @file turnfleet/issuer.h
 * @brief TURN credentials for WebRTC clients, pure: a pool's published relays
 * (the turn-uris `iceServers.json`) and its status, a shared secret, a request
 * and the time → an answer in the WebRTC `RTCConfiguration` form
 * (`{"iceServers":[…],"ttl":S}`) or the TURN REST API form of
 * draft-uberti-behave-turn-rest-00 (`{"username","password","ttl","uris"}`).
 *
 * Which relays an answer names:
 * - only relays that are published (in `iceServers.json`) and, in the status,
 *   `ready` and not `draining`, with at least one free port when the count is
 *   known, and with a URI that passes the transport and family filters;
 * - at most `max_relays`: chosen by weighted rendezvous hashing of (user,
 *   relay name), weighted by the relay's ports, so a user keeps the same
 *   relays while they stay eligible, and another relay appears only when one
 *   of them leaves; relays under pressure (ports in use ≥ `pressure` of the
 *   total) are taken only when there are not enough others;
 * - in the answer, least loaded first (most free ports; unknown counts last,
 *   then by name).
 *
 * Credentials are `<expiry>:<user>` / base64(HMAC-SHA1(secret, username))
 * (cred.h), minted with the one secret given (the current one during a
 * rotation: coturn accepts it as soon as a relay runs it).
 */
#ifndef TURNFLEET_ISSUER_H
#define TURNFLEET_ISSUER_H

#include "common.h"
#include "errors.h"

TF_BEGIN_DECL

/** A pool's relays as an issuer sees them (parsed once, answered from many times). */
typedef struct tf_issuer_pool tf_issuer_pool;
/** One answer: the chosen relays and the credential. */
typedef struct tf_issuer_answer tf_issuer_answer;

/** Transport filter bits (tf_issuer_request.transports). */
#define TF_ISSUER_UDP 0x1u  /**< turn:…?transport=udp (or no transport) */
#define TF_ISSUER_TCP 0x2u  /**< turn:…?transport=tcp */
#define TF_ISSUER_TLS 0x4u  /**< turns:… over TCP */
#define TF_ISSUER_DTLS 0x8u /**< turns:…?transport=udp: only when asked (browsers have none) */
/** The default filter: everything a browser can use. */
#define TF_ISSUER_TRANSPORTS_DEFAULT (TF_ISSUER_UDP | TF_ISSUER_TCP | TF_ISSUER_TLS)

/** Answer forms. */
typedef enum tf_issuer_form {
  TF_ISSUER_FORM_ICE = 0, /**< `{"iceServers":[{"urls":[…],"username","credential"}…],"ttl":S}` */
  TF_ISSUER_FORM_REST = 1 /**< `{"username","password","ttl","uris":[…]}` (draft-uberti-behave-turn-rest-00) */
} tf_issuer_form;

/** Knobs of the issuer (versioned: fields are only appended). */
typedef struct tf_issuer_options {
  unsigned int version; /**< TF_ISSUER_OPTIONS_VERSION */
  size_t max_relays;    /**< most relays per answer (≥ 1); 0: TF_ISSUER_MAX_RELAYS_DEFAULT */
  int64_t ttl_default_s; /**< lifetime when the request asks none; 0: TF_ISSUER_TTL_DEFAULT_S */
  int64_t ttl_min_s;     /**< shortest lifetime a request may ask; 0: TF_ISSUER_TTL_MIN_S */
  int64_t ttl_max_s;     /**< longest lifetime a request may ask; 0: TF_ISSUER_TTL_MAX_S */
  double pressure;       /**< fraction of ports in use from which a relay is a last resort (0-1]; 0: 0.9 */
} tf_issuer_options;

#define TF_ISSUER_OPTIONS_VERSION 1
#define TF_ISSUER_MAX_RELAYS_DEFAULT 2
#define TF_ISSUER_TTL_DEFAULT_S 3600
#define TF_ISSUER_TTL_MIN_S 60
#define TF_ISSUER_TTL_MAX_S 86400
#define TF_ISSUER_PRESSURE_DEFAULT 0.9
#define TF_ISSUER_OPTIONS_INIT                                                                               \
  {TF_ISSUER_OPTIONS_VERSION, TF_ISSUER_MAX_RELAYS_DEFAULT, TF_ISSUER_TTL_DEFAULT_S, TF_ISSUER_TTL_MIN_S, \
   TF_ISSUER_TTL_MAX_S, TF_ISSUER_PRESSURE_DEFAULT}

/**
 * Initialise @p opts to the defaults of @p version.
 * @param[out] opts the caller's
 * @param version TF_ISSUER_OPTIONS_VERSION (or older)
 * @return 0; TF_EINVALID for an unknown version
 */
TF_EXTERN(tf_err) tf_issuer_options_init(tf_issuer_options *opts, unsigned int version);

/** What a client asks for (versioned: fields are only appended). */
typedef struct tf_issuer_request {
  unsigned int version;    /**< TF_ISSUER_REQUEST_VERSION */
  const char *user;        /**< the user id: 1-128 printable ASCII bytes, no ':' */
  unsigned int transports; /**< TF_ISSUER_* bits; 0: TF_ISSUER_TRANSPORTS_DEFAULT */
  int family;              /**< 0 any, 4 IPv4 only, 6 IPv6 only */
  int64_t ttl_s;           /**< lifetime asked; 0: the options' default */
} tf_issuer_request;

#define TF_ISSUER_REQUEST_VERSION 1
#define TF_ISSUER_REQUEST_INIT {TF_ISSUER_REQUEST_VERSION, NULL, 0, 0, 0}

/**
 * Parse a transport filter as a query gives it: a comma list of `udp`, `tcp`,
 * `tls`, `dtls` (case-insensitive).
 * @param[out] out TF_ISSUER_* bits
 * @return 0; TF_EINVALID naming `transport` and the bad item
 */
TF_EXTERN(tf_err) tf_issuer_transports_parse(unsigned int *out, const char *text);

/**
 * Parse a family filter: `ipv4` or `ipv6` (case-insensitive).
 * @param[out] out 4 or 6
 * @return 0; TF_EINVALID naming `family`
 */
TF_EXTERN(tf_err) tf_issuer_family_parse(int *out, const char *text);

/**
 * Build a pool view from its published relays and its status.
 * @param[out] out release with tf_issuer_pool_free()
 * @param ice_servers the turn-uris `iceServers.json`: an array of
 *        `{"urls": ["turn:…", …]}`, one object per published relay (the
 *        ConfigMap's `data.iceServers.json`, or `turnfleet up`'s file)
 * @param ice_len bytes in @p ice_servers
 * @param status the pool status: `turnfleet up`'s `status.json`, a TURNPool's
 *        `status`, or a whole TURNPool object; its `relays[]` give `name`,
 *        `relayAddress`, `ready`, `draining`, `portsInUse` (number or null),
 *        `portsTotal`. A published relay is matched to the status relay that
 *        holds the addresses of its URIs; several status relays on one
 *        address (PartitionedIP) are matched in name order, the order both
 *        documents are written in.
 * @param status_len bytes in @p status
 * @return 0; TF_EPROTO for malformed JSON (with the offset); TF_EINVALID
 *         naming the field (`iceServers[1].urls[0]: …`, `relays[2].ready: …`); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_issuer_pool_new(tf_issuer_pool **out, const char *ice_servers, size_t ice_len,
                                     const char *status, size_t status_len);

/** Release a pool view. NULL does nothing. */
TF_EXTERN(void) tf_issuer_pool_free(tf_issuer_pool *pool);

/** Relays of @p pool that may be handed out (published, ready, not draining, not full). */
TF_EXTERN(size_t) tf_issuer_pool_eligible(const tf_issuer_pool *pool);

/**
 * Choose relays for @p req and mint the credential.
 * @param[out] out release with tf_issuer_answer_free() (it holds a credential)
 * @param pool borrowed; may be used from several threads at once
 * @param secret the pool's current shared secret (not empty); not kept
 * @param req the request
 * @param opts NULL for the defaults
 * @param now_s now, Unix seconds
 * @return 0; TF_EINVALID naming the field (`user`, `ttl`, `transport`,
 *         `family`, `secret`, `opts.max_relays`, …); TF_ENOTFOUND when no
 *         relay is eligible for this request (the message says why); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_issuer_answer_new(tf_issuer_answer **out, const tf_issuer_pool *pool, const char *secret,
                                       const tf_issuer_request *req, const tf_issuer_options *opts,
                                       int64_t now_s);

/** Release an answer, wiping its credential. NULL does nothing. */
TF_EXTERN(void) tf_issuer_answer_free(tf_issuer_answer *answer);

/**
 * The answer as JSON.
 * @param[out] out secret material: release with tf_secret_free()
 * @param form TF_ISSUER_FORM_ICE or TF_ISSUER_FORM_REST
 * @return 0; TF_EINVALID; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_issuer_answer_json(char **out, const tf_issuer_answer *answer, tf_issuer_form form);

/** Relays in @p answer, in answer order. */
TF_EXTERN(size_t) tf_issuer_answer_relay_count(const tf_issuer_answer *answer);
/** Name of relay @p i of @p answer (from the status); NULL out of range. Borrowed from the answer. */
TF_EXTERN(const char *) tf_issuer_answer_relay_name(const tf_issuer_answer *answer, size_t i);
/** The credential's lifetime in seconds. */
TF_EXTERN(int64_t) tf_issuer_answer_ttl(const tf_issuer_answer *answer);

TF_END_DECL

#endif
