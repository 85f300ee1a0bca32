/* turnfleet-issuer's HTTP(S) face on libmicrohttpd: GET /ice (RTCConfiguration fragment),
 * GET /?service=turn (TURN REST API form), /healthz, /readyz, /metrics; bearer tokens, a CORS
 * allow-list, a per-client rate limit. Answers come from the library's issuer module. */
#ifndef TURNFLEET_ISSUER_SERVE_H
#define TURNFLEET_ISSUER_SERVE_H

#include <stddef.h>

#include "source.h"
#include "tool_tls.h"
#include "turnfleet.h"

typedef struct is_server is_server;

typedef struct is_server_options {
  const char *listen;
  int tls;                       /* 1: HTTPS with tool_tls's pair */
  tool_https_limits limits;      /* HTTPS only */
  is_source *source;             /* borrowed */
  is_tokens *tokens;             /* borrowed; NULL: no authentication */
  const char *default_ns;        /* the namespace of a `pool=NAME` without one */
  const char *const *origins;    /* CORS allow-list */
  size_t origin_count;
  double rate, burst;            /* answers per second per client, and the burst */
  tf_issuer_options issuer;
  int log_requests;
} is_server_options;

is_server *is_server_start(const is_server_options *opts);
void is_server_stop(is_server *s);

#endif
