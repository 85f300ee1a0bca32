/* See serve.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "serve.h"

#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "tool_http.h"

#define PROG "turnfleet-issuer"
#define IS_BUCKETS 4096 /* clients tracked by the rate limit; the least recent of a probe window is evicted */
#define IS_PROBE 8
#define IS_SERIES 4096 /* counter series kept (pools × forms, pools × relays); more are not counted */

enum { D_UNAUTHORIZED, D_ORIGIN, D_RATE, D_BAD_REQUEST, D_NOT_FOUND, D_UNAVAILABLE, D_COUNT };
static const char *const denial_names[D_COUNT] = {"unauthorized", "origin", "rate_limited",
                                                  "bad_request",  "not_found", "unavailable"};

typedef struct is_bucket {
  unsigned char key[17]; /* family byte + address; all zero: empty */
  double tokens;
  int64_t last_ms;
} is_bucket;

/* One counter series: answers (kind 0: a = form) or relays handed out (kind 1: a = relay), per pool. */
typedef struct is_series {
  int kind;
  char *ns, *pool, *a;
  unsigned long long n;
} is_series;

struct is_server {
  is_server_options o;
  struct MHD_Daemon *mhd;
  pthread_mutex_t mu; /* buckets and counters */
  is_bucket *buckets;
  unsigned long long denials[D_COUNT];
  is_series series[IS_SERIES];
  size_t series_count;
};

static int64_t now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* 0: allowed; else the seconds to wait (Retry-After). */
static unsigned int rate_take(is_server *s, struct MHD_Connection *conn)
{
  if (s->o.rate <= 0) return 0;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  unsigned char key[17] = {0};
  if (ci && ci->client_addr) {
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) {
      key[0] = 4;
      memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
      key[0] = 6;
      memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
  }
  if (!key[0]) key[0] = 1; /* unknown peers share one bucket */
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < sizeof(key); i++) h = (h ^ key[i]) * 16777619u;
  int64_t now = now_ms();
  unsigned int wait = 0;
  pthread_mutex_lock(&s->mu);
  is_bucket *b = NULL, *oldest = NULL;
  for (size_t i = 0; i < IS_PROBE && !b; i++) {
    is_bucket *c = &s->buckets[(h + i) % IS_BUCKETS];
    if (!memcmp(c->key, key, sizeof(key))) b = c;
    else if (!oldest || !c->key[0] || (oldest->key[0] && c->last_ms < oldest->last_ms)) oldest = c;
  }
  if (!b) {
    b = oldest;
    memcpy(b->key, key, sizeof(key));
    b->tokens = s->o.burst;
    b->last_ms = now;
  }
  b->tokens += (double)(now - b->last_ms) / 1000.0 * s->o.rate;
  if (b->tokens > s->o.burst) b->tokens = s->o.burst;
  b->last_ms = now;
  if (b->tokens >= 1) b->tokens -= 1;
  else wait = (unsigned int)ceil((1 - b->tokens) / s->o.rate);
  pthread_mutex_unlock(&s->mu);
  return wait ? wait : 0;
}

static void count_denial(is_server *s, int d)
{
  pthread_mutex_lock(&s->mu);
  s->denials[d]++;
  pthread_mutex_unlock(&s->mu);
}

/* With mu held: the series, made when new (NULL when the table is full). */
static is_series *series_of(is_server *s, int kind, const char *ns, const char *pool, const char *a)
{
  for (size_t i = 0; i < s->series_count; i++) {
    is_series *e = &s->series[i];
    if (e->kind == kind && !strcmp(e->ns, ns) && !strcmp(e->pool, pool) && !strcmp(e->a, a)) return e;
  }
  if (s->series_count == IS_SERIES) return NULL;
  is_series *e = &s->series[s->series_count];
  e->kind = kind;
  e->ns = strdup(ns);
  e->pool = strdup(pool);
  e->a = strdup(a);
  if (!e->ns || !e->pool || !e->a) {
    free(e->ns), free(e->pool), free(e->a);
    return NULL;
  }
  s->series_count++;
  return e;
}

static void count_answer(is_server *s, const char *ns, const char *pool, tf_issuer_form form, const tf_issuer_answer *a)
{
  pthread_mutex_lock(&s->mu);
  is_series *e = series_of(s, 0, ns, pool, form == TF_ISSUER_FORM_REST ? "rest" : "ice");
  if (e) e->n++;
  for (size_t i = 0; i < tf_issuer_answer_relay_count(a); i++)
    if ((e = series_of(s, 1, ns, pool, tf_issuer_answer_relay_name(a, i)))) e->n++;
  pthread_mutex_unlock(&s->mu);
}

/* Is @p origin on the allow-list? */
static int origin_listed(const is_server *s, const char *origin)
{
  for (size_t i = 0; i < s->o.origin_count; i++)
    if (strcmp(s->o.origins[i], origin) == 0) return 1;
  return 0;
}

/* Queue @p body with the CORS grant for a listed @p origin (NULL: none) and one extra header. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int code, const char *type, const char *body,
                             const char *origin, const char *hname, const char *hvalue)
{
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  MHD_add_response_header(r, "Cache-Control", "no-store");
  MHD_add_response_header(r, "Vary", "Origin");
  if (origin) {
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "Retry-After");
  }
  if (hname) MHD_add_response_header(r, hname, hvalue);
  enum MHD_Result rc = MHD_queue_response(conn, code, r);
  MHD_destroy_response(r);
  return rc;
}

static enum MHD_Result text(struct MHD_Connection *conn, unsigned int code, const char *body, const char *origin)
{
  return reply(conn, code, "text/plain; charset=utf-8", body, origin, NULL, NULL);
}

static enum MHD_Result metrics(is_server *s, struct MHD_Connection *conn)
{
  tf_metrics *m = NULL;
  char *out = NULL;
  if (tf_metrics_new(&m) < 0) return MHD_NO;
  tf_metrics_declare(m, "turnfleet_issuer_answers_total", TF_METRIC_COUNTER, "Answers with credentials, by form");
  tf_metrics_declare(m, "turnfleet_issuer_denials_total", TF_METRIC_COUNTER, "Requests refused, by reason");
  tf_metrics_declare(m, "turnfleet_issuer_relays_handed_out_total", TF_METRIC_COUNTER,
                     "Times a relay was in an answer");
  static const char *const answer_labels[] = {"namespace", "pool", "form"};
  static const char *const denial_labels[] = {"reason"};
  static const char *const relay_labels[] = {"namespace", "pool", "relay"};
  pthread_mutex_lock(&s->mu);
  for (int d = 0; d < D_COUNT; d++) {
    const char *v[] = {denial_names[d]};
    tf_metrics_add(m, "turnfleet_issuer_denials_total", denial_labels, v, 1, (double)s->denials[d]);
  }
  for (size_t i = 0; i < s->series_count; i++) {
    const is_series *e = &s->series[i];
    const char *v[] = {e->ns, e->pool, e->a};
    tf_metrics_add(m, e->kind ? "turnfleet_issuer_relays_handed_out_total" : "turnfleet_issuer_answers_total",
                   e->kind ? relay_labels : answer_labels, v, 3, (double)e->n);
  }
  pthread_mutex_unlock(&s->mu);
  enum MHD_Result rc = MHD_NO;
  if (tf_metrics_to_text(&out, m) == 0) rc = reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4", out, NULL, NULL, NULL);
  tf_free(out);
  tf_metrics_free(m);
  return rc;
}

/* The bearer token of the request, or the REST form's `key`; NULL when none. */
static const char *token_of(struct MHD_Connection *conn, int rest)
{
  const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
    auth += 7;
    while (*auth == ' ') auth++;
    return *auth ? auth : NULL;
  }
  if (rest) return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "key");
  return NULL;
}

static enum MHD_Result answer(is_server *s, struct MHD_Connection *conn, tf_issuer_form form, const char *origin)
{
  char msg[700];
  const char *arg = NULL;
#define ARG(name) MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, (name))
  unsigned int wait = rate_take(s, conn);
  if (wait) {
    char ra[16];
    snprintf(ra, sizeof(ra), "%u", wait);
    count_denial(s, D_RATE);
    return reply(conn, MHD_HTTP_TOO_MANY_REQUESTS, "text/plain; charset=utf-8", "too many requests\n", origin,
                 "Retry-After", ra);
  }
  int tok = s->o.tokens ? is_tokens_check(s->o.tokens, token_of(conn, form == TF_ISSUER_FORM_REST)) : 1;
  if (tok != 1) {
    count_denial(s, D_UNAUTHORIZED);
    if (tok < 0) fprintf(stderr, "%s: the tokens file cannot be read: refusing every request\n", PROG);
    return reply(conn, MHD_HTTP_UNAUTHORIZED, "text/plain; charset=utf-8", "a valid bearer token is required\n",
                 origin, "WWW-Authenticate", "Bearer");
  }
  tf_issuer_request req = TF_ISSUER_REQUEST_INIT;
  req.user = ARG(form == TF_ISSUER_FORM_REST ? "username" : "user");
  const char *pool = ARG("pool");
  if (form == TF_ISSUER_FORM_REST && (!(arg = ARG("service")) || strcmp(arg, "turn") != 0)) {
    count_denial(s, D_BAD_REQUEST);
    return text(conn, MHD_HTTP_BAD_REQUEST, "service: must be turn\n", origin);
  }
  if (!pool || !*pool) {
    count_denial(s, D_BAD_REQUEST);
    return text(conn, MHD_HTTP_BAD_REQUEST, "pool: is required ([NAMESPACE/]NAME)\n", origin);
  }
  char ns[254], name[254];
  const char *slash = strchr(pool, '/');
  size_t nl = slash ? (size_t)(slash - pool) : strlen(s->o.default_ns);
  const char *nm = slash ? slash + 1 : pool;
  if (nl == 0 || nl >= sizeof(ns) || !*nm || strlen(nm) >= sizeof(name) || strchr(nm, '/')) {
    count_denial(s, D_BAD_REQUEST);
    return text(conn, MHD_HTTP_BAD_REQUEST, "pool: must be [NAMESPACE/]NAME\n", origin);
  }
  memcpy(ns, slash ? pool : s->o.default_ns, nl);
  ns[nl] = '\0';
  snprintf(name, sizeof(name), "%s", nm);
  tf_err rc = 0;
  if ((arg = ARG("transport"))) rc = tf_issuer_transports_parse(&req.transports, arg);
  if (!rc && (arg = ARG("family"))) rc = tf_issuer_family_parse(&req.family, arg);
  if (rc < 0) {
    snprintf(msg, sizeof(msg), "%s\n", tf_error_last()->message);
    count_denial(s, D_BAD_REQUEST);
    return text(conn, MHD_HTTP_BAD_REQUEST, msg, origin);
  }
  if ((arg = ARG("ttl"))) {
    char *end;
    long long v = strtoll(arg, &end, 10);
    if (!*arg || *end || v <= 0) {
      count_denial(s, D_BAD_REQUEST);
      return text(conn, MHD_HTTP_BAD_REQUEST, "ttl: must be a whole number of seconds\n", origin);
    }
    req.ttl_s = v;
  }
  is_snapshot *snap = NULL;
  int code = is_source_get(s->o.source, ns, name, &snap, msg, sizeof(msg) - 1);
  if (code != 200) {
    count_denial(s, code == 404 ? D_NOT_FOUND : D_UNAVAILABLE);
    strcat(msg, "\n");
    return text(conn, code == 404 ? MHD_HTTP_NOT_FOUND : MHD_HTTP_SERVICE_UNAVAILABLE, msg, origin);
  }
  tf_issuer_answer *a = NULL;
  rc = tf_issuer_answer_new(&a, snap->pool, snap->secret, &req, &s->o.issuer, (int64_t)time(NULL));
  is_source_release(s->o.source, snap);
  if (rc < 0) {
    const char *m = tf_error_last()->message;
    /* the REST form calls the user `username` */
    if (form == TF_ISSUER_FORM_REST && !strncmp(m, "user:", 5)) snprintf(msg, sizeof(msg), "username:%s\n", m + 5);
    else snprintf(msg, sizeof(msg), "%s\n", m);
    int unavailable = rc == TF_ENOTFOUND;
    count_denial(s, unavailable ? D_UNAVAILABLE : D_BAD_REQUEST);
    return text(conn, unavailable ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_BAD_REQUEST, msg, origin);
  }
  char *json = NULL;
  enum MHD_Result ret = MHD_NO;
  if (tf_issuer_answer_json(&json, a, form) == 0) {
    count_answer(s, ns, name, form, a);
    ret = reply(conn, MHD_HTTP_OK, "application/json", json, origin, NULL, NULL);
    if (s->o.log_requests)
      fprintf(stderr, "%s: answered %s for pool %s/%s with %zu relays\n", PROG, form ? "rest" : "ice", ns, name,
              tf_issuer_answer_relay_count(a));
  }
  tf_secret_free(json);
  tf_issuer_answer_free(a);
  return ret;
#undef ARG
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
  (void)version, (void)upload;
  static int headers_seen;
  is_server *s = cls;
  /* answer on the second call, once the request is complete: a response queued with the headers makes
   * libmicrohttpd close the connection after it (no keep-alive, a TLS handshake per request) */
  if (!*con_cls) {
    *con_cls = &headers_seen;
    return MHD_YES;
  }
  if (*upload_size) return MHD_NO; /* nothing here takes a body: close */
  int is_get = strcmp(method, "GET") == 0, is_options = strcmp(method, "OPTIONS") == 0;
  if (!strcmp(url, "/healthz")) return is_get ? text(conn, MHD_HTTP_OK, "ok\n", NULL) : text(conn, 405, "GET\n", NULL);
  if (!strcmp(url, "/readyz")) {
    if (!is_get) return text(conn, 405, "GET\n", NULL);
    char why[600] = "";
    if (is_source_ready(s->o.source, why, sizeof(why) - 1)) return text(conn, MHD_HTTP_OK, "ok\n", NULL);
    strcat(why, "\n");
    return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, why, NULL);
  }
  if (!strcmp(url, "/metrics")) return is_get ? metrics(s, conn) : text(conn, 405, "GET\n", NULL);
  tf_issuer_form form;
  if (!strcmp(url, "/ice")) form = TF_ISSUER_FORM_ICE;
  else if (!strcmp(url, "/")) form = TF_ISSUER_FORM_REST;
  else return text(conn, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
  const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
  if (origin && !origin_listed(s, origin)) {
    count_denial(s, D_ORIGIN);
    return text(conn, MHD_HTTP_FORBIDDEN, "origin not allowed\n", NULL);
  }
  if (is_options) { /* a CORS preflight from a listed origin */
    if (!origin) return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET\n", NULL);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    MHD_add_response_header(r, "Vary", "Origin");
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_NO_CONTENT, r);
    MHD_destroy_response(r);
    return rc;
  }
  if (!is_get) return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET\n", origin);
  return answer(s, conn, form, origin);
}

is_server *is_server_start(const is_server_options *opts)
{
  is_server *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->o = *opts;
  s->buckets = calloc(IS_BUCKETS, sizeof(*s->buckets));
  pthread_mutex_init(&s->mu, NULL);
  if (s->buckets) s->mhd = s->o.tls ? tool_https_start(s->o.listen, handle, s, &s->o.limits)
                                    : tool_http_start(s->o.listen, handle, s);
  if (!s->mhd) {
    free(s->buckets);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
  }
  return s;
}

void is_server_stop(is_server *s)
{
  if (!s) return;
  MHD_stop_daemon(s->mhd);
  for (size_t i = 0; i < s->series_count; i++) free(s->series[i].ns), free(s->series[i].pool), free(s->series[i].a);
  free(s->buckets);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
