/* See serve.h. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool_http.h"

#define PROG "turnfleet-webhook"

struct wh_server {
  wh_server_options o;
  struct MHD_Daemon *mhd;
};

typedef struct wh_request {
  int kind; /* -1: not a review endpoint */
  char *body;
  size_t len, cap;
  int too_big;
  struct timespec start;
} wh_request;

static double ms_since(const struct timespec *t)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t->tv_sec) * 1e3 + (double)(now.tv_nsec - t->tv_nsec) / 1e6;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
  (void)cls, (void)conn, (void)toe;
  wh_request *r = *con_cls;
  if (!r) return;
  free(r->body);
  free(r);
  *con_cls = NULL;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned int code, const char *text)
{
  return tool_http_reply(conn, code, "text/plain; charset=utf-8", text);
}

static enum MHD_Result review(wh_server *s, struct MHD_Connection *conn, wh_request *r)
{
  tf_admission *rev = NULL;
  const char *what = r->kind == TF_ADMISSION_MUTATE ? "mutate" : "validate";
  if (tf_admission_decode(&rev, r->body ? r->body : "", r->len, &s->o.admission) < 0) {
    char msg[600];
    snprintf(msg, sizeof(msg), "%s\n", tf_error_last()->message);
    /* the reason goes back to the caller; the log gets its class only (it may quote the body) */
    if (s->o.log_reviews)
      fprintf(stderr, "%s: %s: refused a malformed review (%s, %zu bytes)\n", PROG, what,
              tf_error_name(tf_error_last()->code), r->len);
    return reply_text(conn, MHD_HTTP_BAD_REQUEST, msg);
  }
  wh_snapshot *snap = s->o.cache ? wh_cache_get(s->o.cache) : NULL;
  char *out = NULL;
  int allowed = 0;
  tf_err rc = tf_admission_respond(&out, &allowed, rev, (tf_admission_kind)r->kind, snap ? snap->nodes : NULL,
                                   snap ? (const tf_pool *const *)snap->pools : NULL, snap ? snap->pool_count : 0,
                                   &s->o.admission);
  if (s->o.cache) wh_cache_release(s->o.cache, snap);
  enum MHD_Result ret;
  if (rc < 0) {
    fprintf(stderr, "%s: %s: uid %s: %s\n", PROG, what, tf_admission_uid(rev), tf_error_name(rc));
    ret = reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal error\n");
  } else {
    if (s->o.log_reviews)
      fprintf(stderr, "%s: %s: uid %s %s %s%s%s: %s in %.2f ms\n", PROG, what, tf_admission_uid(rev),
              tf_admission_operation(rev), tf_admission_resource(rev), *tf_admission_sub_resource(rev) ? "/" : "",
              tf_admission_sub_resource(rev), allowed ? "allowed" : "denied", ms_since(&r->start));
    ret = tool_http_reply(conn, MHD_HTTP_OK, "application/json", out);
  }
  tf_free(out);
  tf_admission_free(rev);
  return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
  (void)version;
  wh_server *s = cls;
  wh_request *r = *con_cls;
  if (!r) {
    int is_post = strcmp(method, "POST") == 0, is_get = strcmp(method, "GET") == 0;
    if (!strcmp(url, "/healthz")) return is_get ? reply_text(conn, MHD_HTTP_OK, "ok\n") : reply_text(conn, 405, "GET\n");
    if (!strcmp(url, "/readyz")) {
      if (!is_get) return reply_text(conn, 405, "GET\n");
      int ready = !s->o.cache || wh_cache_synced(s->o.cache);
      return reply_text(conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, ready ? "ok\n" : "caches not synced\n");
    }
    int kind = !strcmp(url, "/validate") ? TF_ADMISSION_VALIDATE : !strcmp(url, "/mutate") ? TF_ADMISSION_MUTATE : -1;
    if (kind < 0) return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    if (!is_post) return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "POST\n");
    const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (type && strncmp(type, "application/json", 16) != 0)
      return reply_text(conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json\n");
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->o.max_body) {
      if (s->o.log_reviews) fprintf(stderr, "%s: refused a %s-byte body (limit %zu)\n", PROG, cl, s->o.max_body);
      return reply_text(conn, MHD_HTTP_CONTENT_TOO_LARGE, "body too large\n");
    }
    r = calloc(1, sizeof(*r));
    if (!r) return MHD_NO;
    r->kind = kind;
    clock_gettime(CLOCK_MONOTONIC, &r->start);
    *con_cls = r;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (ms_since(&r->start) > (double)s->o.body_ms) {
      if (s->o.log_reviews) fprintf(stderr, "%s: cut a body still arriving after %ld ms\n", PROG, s->o.body_ms);
      return MHD_NO; /* closes the connection */
    }
    if (r->too_big || r->len + n > s->o.max_body) {
      /* chunked bodies have no Content-Length: count and drop, answer 413 at the end */
      r->too_big = 1;
      free(r->body);
      r->body = NULL;
      r->len = r->cap = 0;
      return MHD_YES;
    }
    if (r->len + n + 1 > r->cap) {
      size_t cap = r->cap ? r->cap : 16384;
      while (cap < r->len + n + 1) cap *= 2;
      char *b = realloc(r->body, cap);
      if (!b) return MHD_NO;
      r->body = b;
      r->cap = cap;
    }
    memcpy(r->body + r->len, upload, n);
    r->len += n;
    r->body[r->len] = '\0';
    return MHD_YES;
  }
  if (r->too_big) {
    if (s->o.log_reviews) fprintf(stderr, "%s: refused a body over %zu bytes\n", PROG, s->o.max_body);
    return reply_text(conn, MHD_HTTP_CONTENT_TOO_LARGE, "body too large\n");
  }
  return review(s, conn, r);
}

wh_server *wh_server_start(const wh_server_options *opts)
{
  wh_server *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->o = *opts;
  s->o.limits.completed = completed;
  s->o.limits.completed_cls = s;
  s->mhd = tool_https_start(s->o.listen, handle, s, &s->o.limits);
  if (!s->mhd) {
    free(s);
    return NULL;
  }
  return s;
}

void wh_server_stop(wh_server *s)
{
  if (!s) return;
  MHD_stop_daemon(s->mhd);
  free(s);
}
