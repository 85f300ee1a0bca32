/* The webhook's HTTPS endpoints: POST /validate and /mutate (AdmissionReview v1
 * through the library's admission module), GET /healthz and /readyz. Bodies are
 * capped and must arrive within a time budget; logs name the review's uid,
 * operation and verdict, never the object. */
#ifndef TURNFLEET_WEBHOOK_SERVE_H
#define TURNFLEET_WEBHOOK_SERVE_H

#include <stddef.h>

#include "cache.h"
#include "tool_tls.h"
#include "turnfleet.h"

typedef struct wh_server_options {
  const char *listen;               /* ADDR:PORT */
  tool_https_limits limits;         /* connections, idle timeout, threads */
  size_t max_body;                  /* bytes; larger bodies get 413 */
  long body_ms;                     /* a body still arriving after this gets the connection cut */
  tf_admission_options admission;   /* max_replicas, ... */
  wh_cache *cache;                  /* NULL: no nodes, no other pools (pool rules only) */
  int log_reviews;                  /* one stderr line per review */
} wh_server_options;

typedef struct wh_server wh_server;

/* Start serving; NULL with errno when the address cannot be bound. @p opts is copied. */
wh_server *wh_server_start(const wh_server_options *opts);
void wh_server_stop(wh_server *s);

#endif
