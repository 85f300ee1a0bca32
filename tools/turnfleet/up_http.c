/* /metrics and /healthz of `turnfleet up`, served by libmicrohttpd on its own
 * thread (connection limit and idle timeout in tool_http), so no client can
 * stall the runtime and a stalled runtime is still seen. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_http.h"
#include "up.h"

void up_loop_alive(up *u)
{
  pthread_mutex_lock(&u->mu);
  u->loop_ms = up_now_ms();
  pthread_mutex_unlock(&u->mu);
}

/* With u->mu held. A step may block for stopping a relay (the grace), never for a probe round (the
 * rounds run on the loop, up_probes()); quiet longer than that, three intervals and a second more,
 * is a stall. */
static const char *health_locked(up *u)
{
  int64_t interval = (int64_t)(u->probe_interval * 1000);
  int64_t quiet = up_now_ms() - u->loop_ms, limit = 3 * interval + u->grace_ms + 1000;
  if (up_stop_signals) return "stopping";
  if (quiet > limit) return "the runtime loop is stalled";
  for (int k = 0; k < UP_H_COUNT; k++)
    if (u->unhealthy[k]) return u->unhealthy[k];
  return NULL;
}

const char *up_health(up *u)
{
  pthread_mutex_lock(&u->mu);
  const char *why = health_locked(u);
  pthread_mutex_unlock(&u->mu);
  return why;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **ctx)
{
  (void)version, (void)upload, (void)upload_size, (void)ctx;
  up *u = cls;
  if (strcmp(method, "GET") && strcmp(method, "HEAD"))
    return tool_http_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "method not allowed\n");
  pthread_mutex_lock(&u->mu);
  char *body = NULL;
  unsigned int code = MHD_HTTP_OK;
  const char *type = "text/plain; charset=utf-8";
  if (!strcmp(url, "/healthz")) {
    const char *why = health_locked(u);
    code = why ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK;
    if (asprintf(&body, "%s\n", why ? why : "ok") < 0) body = NULL;
  } else if (!strcmp(url, "/metrics")) {
    type = "text/plain; version=0.0.4; charset=utf-8";
    body = strdup(u->metrics_text ? u->metrics_text : "");
  }
  pthread_mutex_unlock(&u->mu);
  enum MHD_Result rc = body ? tool_http_reply(conn, code, type, body)
                            : tool_http_reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
  free(body);
  return rc;
}

int up_http_start(up *u)
{
  up_loop_alive(u);
  if ((u->mhd = tool_http_start(u->metrics_addr, handler, u))) return 0;
  up_say("--metrics-addr", "cannot serve on %s", u->metrics_addr);
  return -1;
}
