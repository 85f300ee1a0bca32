/**
 * @file turnfleet/uri.h
 * @brief RFC 7065 `turn:` / `turns:` URIs: parse and format. Not a generic
 * hierarchical URI parser (as the RFC requires).
 */
#ifndef TURNFLEET_URI_H
#define TURNFLEET_URI_H

#include "addr.h"
#include "common.h"
#include "errors.h"

TF_BEGIN_DECL

/** A parsed URI. Immutable. */
typedef struct tf_uri tf_uri;

/** How to reach the server, from scheme and transport. */
typedef enum tf_uri_mode {
  TF_URI_MODE_UDP = 0,
  TF_URI_MODE_TCP = 1,
  TF_URI_MODE_TLS = 2,
  TF_URI_MODE_DTLS = 3,       /**< turns:...?transport=udp: parsed, not supported by the probe */
  TF_URI_MODE_UNSUPPORTED = 4 /**< a transport-ext value */
} tf_uri_mode;

/** Host kinds. */
typedef enum tf_uri_host_type { TF_URI_HOST_IPV4 = 0, TF_URI_HOST_IPV6 = 1, TF_URI_HOST_NAME = 2 } tf_uri_host_type;

/**
 * Parse a turn:/turns: URI.
 * @param[out] out release with tf_uri_free()
 * @return 0; TF_EINVALID with "REASON_CODE at byte N: why" (`BAD_SCHEME`, `BAD_HOST`,
 *         `BAD_IP_LITERAL`, `BAD_PORT`, `PORT_OUT_OF_RANGE`, `BAD_QUERY`, `BAD_TRANSPORT`,
 *         `EMPTY_HOST`, `BAD_HOSTPORT`, `FRAGMENT_NOT_ALLOWED`); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_uri_parse(tf_uri **out, const char *text);
/** Release a URI. NULL does nothing. */
TF_EXTERN(void) tf_uri_free(tf_uri *uri);
/** "turn" or "turns" (lower case). */
TF_EXTERN(const char *) tf_uri_scheme(const tf_uri *uri);
/** 1 for turns:. */
TF_EXTERN(int) tf_uri_secure(const tf_uri *uri);
/** The host as written, brackets removed. Borrowed. */
TF_EXTERN(const char *) tf_uri_host(const tf_uri *uri);
/** The kind of host. */
TF_EXTERN(tf_uri_host_type) tf_uri_host_kind(const tf_uri *uri);
/** The port: explicit, else 3478 (turn) or 5349 (turns). */
TF_EXTERN(uint16_t) tf_uri_port(const tf_uri *uri);
/** 1 when the port was written. */
TF_EXTERN(int) tf_uri_port_explicit(const tf_uri *uri);
/** The transport (lower case): explicit, else "udp" (turn) or "tcp" (turns). Borrowed. */
TF_EXTERN(const char *) tf_uri_transport(const tf_uri *uri);
/** 1 when ?transport= was written. */
TF_EXTERN(int) tf_uri_transport_explicit(const tf_uri *uri);
/** What to open. */
TF_EXTERN(tf_uri_mode) tf_uri_open_mode(const tf_uri *uri);

/**
 * Format a URI for an address: `turn:203.0.113.7:3478?transport=udp`,
 * `turns:[2001:db8::7]:5349?transport=tcp`.
 * @param[out] out release with tf_free()
 * @param secure 1 for turns:
 * @param transport "udp" or "tcp"
 */
TF_EXTERN(tf_err) tf_uri_format(char **out, int secure, const tf_addr *addr, uint16_t port, const char *transport);

TF_END_DECL

#endif
