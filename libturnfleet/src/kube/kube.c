/* kube: the client handle, the token source and requests on libcurl easy
 * handles (a small pool per client keeps connections alive between requests
 * and lets several threads share one client). */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube_internal.h"

#define TF_KUBE__POOL 8
#define TF_KUBE__MAX_BODY ((size_t)64 << 20)
#define TF_KUBE__MAX_LINE ((size_t)16 << 20)
#define TF_KUBE__TOKEN_PERIOD_MS 60000
#define TF_KUBE__MAX_TOKEN 65536

struct tf_kube {
  tf_kube__config cfg;
  long timeout_ms, connect_timeout_ms;
  char *field_manager, *user_agent;
  tf_log_cb log;
  void *log_payload;
  tf_log_level log_level;
  char *connect_to; /* tls-server-name: "sni:port:host:port" */
  char *url_base;   /* server, with the host replaced by tls-server-name when set */
  pthread_mutex_t mu;
  CURL *idle[TF_KUBE__POOL];
  int nidle;
  char *token;     /* current bearer token (secret) */
  int64_t token_at; /* when the token file was read */
  tf_kube_write_gate_cb gate; /* consulted before every write (under mu) */
  void *gate_payload;
  int64_t not_before[2]; /* Retry-After: no request of the lane before this (under mu); lane 1: the Lease */
};

#define TF_KUBE__MAX_RETRY_AFTER_S 300
#define TF_KUBE__RETRIES_429 2

static pthread_once_t tf_kube__once = PTHREAD_ONCE_INIT;
static void tf_kube__global_init(void)
{
  const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
  if (v && (v->features & CURL_VERSION_THREADSAFE)) curl_global_init(CURL_GLOBAL_DEFAULT);
}

int64_t tf_kube__now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int tf_kube__wait(pthread_mutex_t *mu, pthread_cond_t *cv, int64_t ms, volatile int *stop)
{
  if (stop && *stop) return 1;
  if (ms <= 0) return 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  /* one wait: a signal, a timeout or a spurious wake-up all return; callers loop */
  pthread_cond_timedwait(cv, mu, &ts);
  return stop && *stop;
}

void tf_kube__log(const tf_kube *k, tf_log_level level, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  tf_log__emitv(k->log, k->log_payload, k->log_level, level, fmt, ap);
  va_end(ap);
}

tf_err tf_kube_options_init(tf_kube_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_KUBE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_kube_options: unknown version %u", version);
  tf_kube_options d = TF_KUBE_OPTIONS_INIT;
  *opts = d;
  opts->version = version;
  return TF_OK;
}

tf_err tf_kube_list_options_init(tf_kube_list_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_KUBE_LIST_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_kube_list_options: unknown version %u", version);
  tf_kube_list_options d = TF_KUBE_LIST_OPTIONS_INIT;
  memcpy(opts, &d, version == 1 ? offsetof(tf_kube_list_options, silence_ms) : sizeof(d)); /* the caller's */
  opts->version = version;
  return TF_OK;
}

tf_err tf_kube_delete_options_init(tf_kube_delete_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_KUBE_DELETE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "tf_kube_delete_options: unknown version %u", version);
  tf_kube_delete_options d = TF_KUBE_DELETE_OPTIONS_INIT;
  *opts = d;
  opts->version = version;
  return TF_OK;
}

static void tf_kube__secret_free(char *s)
{
  if (s) tf_crypto__wipe(s, strlen(s));
  free(s);
}

/* Re-open the token file (never kept open); whitespace trimmed. On failure the
 * old token stays (client-go's cached file token source does the same). */
static void tf_kube__token_reread(tf_kube *k)
{
  tf_kube__blob b = {0};
  k->token_at = tf_kube__now_ms();
  if (tf_kube__read_file(k->cfg.token_file, TF_KUBE__MAX_TOKEN, &b) < 0) {
    tf_kube__log(k, TF_LOG_WARN, "token file %.200s: %s; keeping the previous token", k->cfg.token_file,
                 tf_error_last()->message);
    return;
  }
  char *s = b.ptr, *e = b.ptr + b.len;
  while (s < e && strchr(" \t\r\n", *s)) s++;
  while (e > s && strchr(" \t\r\n", e[-1])) e--;
  if (e == s) {
    tf_kube__log(k, TF_LOG_WARN, "token file %.200s: empty; keeping the previous token", k->cfg.token_file);
  } else {
    char *t = tf_strndup__(s, (size_t)(e - s));
    if (t) {
      if (k->token && strcmp(k->token, t) != 0) tf_kube__log(k, TF_LOG_INFO, "token file re-read: the token changed");
      tf_kube__secret_free(k->token);
      k->token = t;
    }
  }
  tf_crypto__wipe(b.ptr, b.len);
  free(b.ptr);
}

/* "Authorization: Bearer <token>" (secret; caller wipes and frees), or NULL. */
static char *tf_kube__auth_header(tf_kube *k, int force)
{
  pthread_mutex_lock(&k->mu);
  if (k->cfg.token_file && (force || !k->token || tf_kube__now_ms() - k->token_at >= TF_KUBE__TOKEN_PERIOD_MS))
    tf_kube__token_reread(k);
  char *h = k->token ? tf_asprintf__("Authorization: Bearer %s", k->token) : NULL;
  pthread_mutex_unlock(&k->mu);
  return h;
}

static char *tf_kube__host_of(const char *url, const char **host_end, const char **host_start)
{
  const char *p = strstr(url, "://");
  p = p ? p + 3 : url;
  *host_start = p;
  const char *e = p;
  if (*e == '[') {
    e = strchr(e, ']');
    e = e ? e + 1 : p + strlen(p);
  } else {
    e += strcspn(e, ":/");
  }
  *host_end = e;
  return tf_strndup__(p, (size_t)(e - p));
}

tf_err tf_kube_new(tf_kube **out, const tf_kube_options *opts)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  tf_kube_options o = TF_KUBE_OPTIONS_INIT;
  if (opts) {
    if (opts->version == 0 || opts->version > TF_KUBE_OPTIONS_VERSION)
      return tf_error__set(TF_EINVALID, "tf_kube_options: unknown version %u", opts->version);
    /* version 1 is every field; later versions append */
    o.source = opts->source;
    o.kubeconfig = opts->kubeconfig;
    o.context = opts->context;
    o.sa_dir = opts->sa_dir;
    o.server = opts->server;
    o.ca_file = opts->ca_file;
    o.token_file = opts->token_file;
    o.namespace_ = opts->namespace_;
    o.insecure_skip_tls_verify = opts->insecure_skip_tls_verify;
    o.timeout_ms = opts->timeout_ms;
    o.connect_timeout_ms = opts->connect_timeout_ms;
    o.field_manager = opts->field_manager;
    o.user_agent = opts->user_agent;
    o.log = opts->log;
    o.log_payload = opts->log_payload;
    o.log_level = opts->log_level;
  }
  if (o.timeout_ms < 0 || o.connect_timeout_ms < 0) return tf_error__set(TF_EINVALID, "timeouts: must be >= 0");
  pthread_once(&tf_kube__once, tf_kube__global_init);
  tf_kube *k = calloc(1, sizeof(*k));
  if (!k) return tf_error__nomem();
  pthread_mutex_init(&k->mu, NULL);
  tf_err rc = TF_OK;
  switch (o.source) {
  case TF_KUBE_SOURCE_EXPLICIT: break;
  case TF_KUBE_SOURCE_KUBECONFIG:
    if (!o.kubeconfig) rc = tf_error__set(TF_EINVALID, "kubeconfig: no path given");
    else rc = tf_kube__config_load(&k->cfg, o.kubeconfig, o.context);
    break;
  case TF_KUBE_SOURCE_IN_CLUSTER: rc = tf_kube__config_in_cluster(&k->cfg, o.sa_dir); break;
  default: rc = tf_error__set(TF_EINVALID, "source: unknown value %d", (int)o.source);
  }
  if (rc < 0) goto fail;
  if (o.server) {
    if (strncmp(o.server, "https://", 8) != 0 && strncmp(o.server, "http://", 7) != 0) {
      rc = tf_error__set(TF_EINVALID, "server: must be an http(s) URL");
      goto fail;
    }
    free(k->cfg.server);
    if (!(k->cfg.server = tf_strdup__(o.server))) goto nomem;
  }
  if (o.ca_file) {
    tf_kube__blob ca = {0};
    if ((rc = tf_kube__read_file(o.ca_file, 4u << 20, &ca)) < 0) goto fail;
    free(k->cfg.ca.ptr);
    k->cfg.ca = ca;
  }
  if (o.token_file) {
    free(k->cfg.token_file);
    tf_kube__secret_free(k->cfg.token);
    k->cfg.token = NULL;
    if (!(k->cfg.token_file = tf_strdup__(o.token_file))) goto nomem;
  }
  if (o.namespace_) {
    free(k->cfg.ns);
    if (!(k->cfg.ns = tf_strdup__(o.namespace_))) goto nomem;
  }
  if (o.insecure_skip_tls_verify) k->cfg.insecure = 1;
  if (!k->cfg.server) {
    rc = tf_error__set(TF_EINVALID, "server: none configured");
    goto fail;
  }
  if (!k->cfg.ns && !(k->cfg.ns = tf_strdup__("default"))) goto nomem;
  k->timeout_ms = o.timeout_ms;
  k->connect_timeout_ms = o.connect_timeout_ms;
  k->log = o.log;
  k->log_payload = o.log_payload;
  k->log_level = o.log_level;
  k->field_manager = tf_strdup__(o.field_manager ? o.field_manager : "turnfleet");
  k->user_agent = o.user_agent ? tf_strdup__(o.user_agent) : tf_asprintf__("libturnfleet/%s", tf_version_string());
  if (!k->field_manager || !k->user_agent) goto nomem;
  if (k->cfg.token && !(k->token = tf_strdup__(k->cfg.token))) goto nomem;
  if (k->cfg.token_file) {
    /* the first read must work: a client without its credential is a configuration error */
    tf_kube__blob b = {0};
    if ((rc = tf_kube__read_file(k->cfg.token_file, TF_KUBE__MAX_TOKEN, &b)) < 0) goto fail;
    tf_crypto__wipe(b.ptr, b.len);
    free(b.ptr);
    tf_kube__token_reread(k);
  }
  if (k->cfg.tls_server_name) {
    /* connect to the configured host but verify (and send SNI for) tls-server-name */
    const char *hs, *he;
    char *host = tf_kube__host_of(k->cfg.server, &he, &hs);
    const char *port = *he == ':' ? he + 1 : (strncmp(k->cfg.server, "https", 5) == 0 ? "443" : "80");
    long portn = strtol(port, NULL, 10);
    k->connect_to = host ? tf_asprintf__("%s:%ld:%s:%ld", k->cfg.tls_server_name, portn, host, portn) : NULL;
    k->url_base = tf_asprintf__("%.*s%s%s", (int)(hs - k->cfg.server), k->cfg.server, k->cfg.tls_server_name, he);
    free(host);
    if (!k->connect_to || !k->url_base) goto nomem;
  } else if (!(k->url_base = tf_strdup__(k->cfg.server))) {
    goto nomem;
  }
  *out = k;
  return TF_OK;
nomem:
  rc = tf_error__nomem();
fail:
  tf_kube_free(k);
  return rc;
}

void tf_kube_free(tf_kube *k)
{
  if (!k) return;
  for (int i = 0; i < k->nidle; i++) curl_easy_cleanup(k->idle[i]);
  tf_kube__config_dispose(&k->cfg);
  tf_kube__secret_free(k->token);
  free(k->field_manager);
  free(k->user_agent);
  free(k->connect_to);
  free(k->url_base);
  pthread_mutex_destroy(&k->mu);
  free(k);
}

tf_err tf_kube_set_write_gate(tf_kube *k, tf_kube_write_gate_cb gate, void *payload)
{
  TF_ASSERT_ARG(k);
  pthread_mutex_lock(&k->mu);
  k->gate = gate;
  k->gate_payload = payload;
  pthread_mutex_unlock(&k->mu);
  return TF_OK;
}

const char *tf_kube_namespace(const tf_kube *k) { return k && k->cfg.ns ? k->cfg.ns : "default"; }
const char *tf_kube_server(const tf_kube *k) { return k ? k->cfg.server : NULL; }

static int tf_kube__segment_ok(const char *s)
{
  return s && *s && !strpbrk(s, "/?#%") && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

tf_err tf_kube_path(char **out, const char *api, const char *resource, const char *ns, const char *name,
                    const char *sub)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  if (!api || (strncmp(api, "/api/", 5) != 0 && strncmp(api, "/apis/", 6) != 0) || strpbrk(api, "?#%"))
    return tf_error__set(TF_EINVALID, "api: must be /api/<version> or /apis/<group>/<version>");
  if (!tf_kube__segment_ok(resource)) return tf_error__set(TF_EINVALID, "resource: not a path segment");
  if (ns && !tf_kube__segment_ok(ns)) return tf_error__set(TF_EINVALID, "namespace: not a path segment");
  if (name && !tf_kube__segment_ok(name)) return tf_error__set(TF_EINVALID, "name: not a path segment");
  if (sub && (!name || !tf_kube__segment_ok(sub)))
    return tf_error__set(TF_EINVALID, "subresource: needs a name and one path segment");
  tf_buf b;
  tf_buf__init(&b);
  tf_buf__puts(&b, api);
  if (ns) tf_buf__printf(&b, "/namespaces/%s", ns);
  tf_buf__printf(&b, "/%s", resource);
  if (name) tf_buf__printf(&b, "/%s", name);
  if (sub) tf_buf__printf(&b, "/%s", sub);
  return tf_buf__detach(&b, out);
}

/* ---- requests ---- */

typedef struct tf_kube__req {
  tf_kube *k;
  CURL *h;
  tf_buf body;        /* answer body (not for a 200 watch) */
  int too_big;
  char retry_after[32];
  /* watch */
  int watch;
  tf_kube__lines lines;
  tf_kube__event_fn fn;
  void *fn_arg;
  int fn_rc;          /* what stopped the stream: callback, parse error */
  int64_t last_byte;
  long stall_ms;
  int64_t last_event; /* the last event or bookmark (or the start) */
  long silence_ms;
  int stalled, silent, cancelled, past_deadline, refused;
  /* write gate, asked again when the connection is up */
  tf_kube_write_gate_cb gate;
  void *gate_payload;
  const char *method, *path;
  tf_kube__tick_fn tick;
  void *tick_arg;
  int64_t deadline;
  tf_kube_status *ev_status; /* from an ERROR event */
} tf_kube__req;

static CURL *tf_kube__take(tf_kube *k)
{
  CURL *h = NULL;
  pthread_mutex_lock(&k->mu);
  if (k->nidle > 0) h = k->idle[--k->nidle];
  pthread_mutex_unlock(&k->mu);
  if (h) curl_easy_reset(h); /* keeps the live connection */
  else h = curl_easy_init();
  return h;
}

static void tf_kube__give(tf_kube *k, CURL *h)
{
  if (!h) return;
  pthread_mutex_lock(&k->mu);
  if (k->nidle < TF_KUBE__POOL) {
    k->idle[k->nidle++] = h;
    h = NULL;
  }
  pthread_mutex_unlock(&k->mu);
  if (h) curl_easy_cleanup(h);
}

static int tf_kube__on_line(char *line, size_t len, void *arg)
{
  tf_kube__req *r = arg;
  cJSON *root, *obj;
  int type;
  if (tf_kube__event_parse(line, len, &root, &type, &obj) < 0) {
    tf_kube__log(r->k, TF_LOG_DEBUG, "watch: %s", tf_error_last()->message);
    return TF_EPROTO;
  }
  int rc = 0;
  r->last_event = tf_kube__now_ms();
  if (type == TF_KUBE_EVENT_ERROR) {
    char *txt = cJSON_PrintUnformatted(obj);
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
    int c = cJSON_IsNumber(code) ? (int)code->valuedouble : 500;
    r->ev_status = txt ? tf_kube__status_parse(c, txt, strlen(txt), NULL) : NULL;
    free(txt);
  }
  if (r->fn && (r->fn(type, obj, r->fn_arg)) != 0) rc = TF_EUSER;
  if (type == TF_KUBE_EVENT_ERROR && rc == 0) rc = 1; /* the stream ends after an ERROR */
  cJSON_Delete(root);
  return rc;
}

static size_t tf_kube__write(char *data, size_t size, size_t n, void *arg)
{
  tf_kube__req *r = arg;
  size_t len = size * n;
  r->last_byte = tf_kube__now_ms();
  long code = 0;
  curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &code);
  if (r->watch && code == 200) {
    int rc = tf_kube__lines_feed(&r->lines, data, len, tf_kube__on_line, r);
    if (rc != 0) {
      r->fn_rc = rc;
      return CURL_WRITEFUNC_ERROR;
    }
    return len;
  }
  if (r->body.len + len > TF_KUBE__MAX_BODY) {
    r->too_big = 1;
    return CURL_WRITEFUNC_ERROR;
  }
  tf_buf__putn(&r->body, data, len);
  return r->body.failed ? CURL_WRITEFUNC_ERROR : len;
}

static size_t tf_kube__header(char *data, size_t size, size_t n, void *arg)
{
  tf_kube__req *r = arg;
  size_t len = size * n;
  r->last_byte = tf_kube__now_ms();
  if (len > 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
    size_t m = len - 12 < sizeof(r->retry_after) - 1 ? len - 12 : sizeof(r->retry_after) - 1;
    memcpy(r->retry_after, data + 12, m);
    r->retry_after[m] = '\0';
  }
  return len;
}

static int tf_kube__progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
  (void)dt, (void)dn, (void)ut, (void)un;
  tf_kube__req *r = arg;
  if (r->tick && r->tick(r->tick_arg)) {
    r->cancelled = 1;
    return 1;
  }
  if (r->deadline > 0 && tf_kube__now_ms() > r->deadline) {
    r->past_deadline = 1;
    return 1;
  }
  if (r->stall_ms > 0 && tf_kube__now_ms() - r->last_byte > r->stall_ms) {
    r->stalled = 1;
    return 1;
  }
  if (r->silence_ms > 0 && tf_kube__now_ms() - r->last_event > r->silence_ms) {
    r->silent = 1;
    return 1;
  }
  return 0;
}

/* Right before the request goes out on its connection: the write gate once more. */
static int tf_kube__prereq(void *arg, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                           int conn_local_port)
{
  (void)conn_primary_ip, (void)conn_local_ip, (void)conn_primary_port, (void)conn_local_port;
  tf_kube__req *r = arg;
  if (!r->gate) return CURL_PREREQFUNC_OK;
  long ms = r->gate(r->method, r->path, r->gate_payload);
  if (ms <= 0) {
    r->refused = 1;
    return CURL_PREREQFUNC_ABORT;
  }
  int64_t until = tf_kube__now_ms() + ms;
  if (r->deadline <= 0 || until < r->deadline) r->deadline = until;
  return CURL_PREREQFUNC_OK;
}

static void tf_kube__query_add(tf_buf *q, CURL *h, const char *key, const char *value)
{
  char *esc = curl_easy_escape(h, value, 0);
  if (!esc) {
    q->failed = 1;
    return;
  }
  tf_buf__printf(q, "%s%s=%s", q->len ? "&" : "", key, esc);
  curl_free(esc);
}

static void tf_kube__list_query(tf_buf *q, CURL *h, const tf_kube_list_options *o, int watch, const char *cont)
{
  if (watch) tf_kube__query_add(q, h, "watch", "1");
  if (!o) return;
  if (o->label_selector && *o->label_selector) tf_kube__query_add(q, h, "labelSelector", o->label_selector);
  if (o->field_selector && *o->field_selector) tf_kube__query_add(q, h, "fieldSelector", o->field_selector);
  if (o->resource_version) tf_kube__query_add(q, h, "resourceVersion", o->resource_version);
  char num[32];
  if (!watch && o->limit > 0) {
    snprintf(num, sizeof(num), "%ld", o->limit);
    tf_kube__query_add(q, h, "limit", num);
  }
  if (cont && *cont) tf_kube__query_add(q, h, "continue", cont);
  if (watch && o->allow_bookmarks) tf_kube__query_add(q, h, "allowWatchBookmarks", "true");
  if (watch && o->timeout_seconds > 0) {
    snprintf(num, sizeof(num), "%ld", o->timeout_seconds);
    tf_kube__query_add(q, h, "timeoutSeconds", num);
  }
}

/* One HTTP exchange. @p query_fn fills the query with the handle (for escaping).
 * On success *out gets the body (unless NULL). */
typedef struct tf_kube__call {
  const char *method;
  const char *path;
  const char *content_type;
  const char *body;
  int write;                         /* TF_KUBE__WRITE (fieldManager), TF_KUBE__LEASE */
  const tf_kube_list_options *list;  /* list/watch query */
  const char *cont;                  /* continue token */
  int watch;
  tf_kube__event_fn fn;
  tf_kube__tick_fn tick;
  void *fn_arg;        /* for fn and tick */
  int64_t deadline;    /* monotonic ms, 0 = none */
} tf_kube__call;

/* Ask for no request of @p lane before @p seconds from now (a server's Retry-After). */
static void tf_kube__defer(tf_kube *k, int lane, long seconds, const char *method, const char *path)
{
  if (seconds <= 0) return;
  if (seconds > TF_KUBE__MAX_RETRY_AFTER_S) seconds = TF_KUBE__MAX_RETRY_AFTER_S;
  int64_t until = tf_kube__now_ms() + (int64_t)seconds * 1000;
  pthread_mutex_lock(&k->mu);
  if (until > k->not_before[lane]) k->not_before[lane] = until;
  pthread_mutex_unlock(&k->mu);
  tf_kube__log(k, TF_LOG_INFO, "%s %.200s: the server asked to wait %ld s (Retry-After): %s held until then", method,
               path, seconds, lane ? "Lease requests are" : "every request is");
}

/* Wait out the lane's Retry-After before a request; refuse at once when the wait
 * is longer than the request may take. */
static tf_err tf_kube__hold(tf_kube *k, const tf_kube__call *c, int lane, tf_kube_status **status)
{
  for (;;) {
    pthread_mutex_lock(&k->mu);
    int64_t nb = k->not_before[lane];
    pthread_mutex_unlock(&k->mu);
    int64_t now = tf_kube__now_ms();
    if (nb <= now) return TF_OK;
    int64_t left = nb - now;
    if ((c->deadline > 0 && nb > c->deadline) || (!c->watch && k->timeout_ms > 0 && left > k->timeout_ms)) {
      tf_err rc = tf_error__set(TF_EUNAVAILABLE, "%s %.200s: not sent: the server asked to wait %lld ms more (Retry-After)",
                                c->method, c->path, (long long)left);
      if (status && (*status = tf_kube__status_local(429, "TooManyRequests", tf_error_last()->message)))
        (*status)->retry_after = (long)((left + 999) / 1000);
      return rc;
    }
    if (c->tick && c->tick(c->fn_arg)) return tf_error__set(TF_EUSER, "%s %.200s: cancelled", c->method, c->path);
    struct timespec ts = {0, (long)(left < 100 ? left : 100) * 1000000L};
    nanosleep(&ts, NULL);
  }
}

static tf_err tf_kube__perform(tf_kube *k, const tf_kube__call *c, char **out, tf_kube_status **status)
{
  if (status) *status = NULL;
  if (out) *out = NULL;
  tf_err rc = TF_OK;
  int lane = (c->write & TF_KUBE__LEASE) ? 1 : 0;
  int gated = !lane && strcmp(c->method, "GET") != 0;
  int token_retried = 0, retries_429 = 0;
  for (int attempt = 0;; attempt++) {
    if ((rc = tf_kube__hold(k, c, lane, status)) < 0) return rc;
    tf_kube_write_gate_cb gate = NULL;
    void *gate_payload = NULL;
    int64_t deadline = c->deadline;
    if (gated) {
      pthread_mutex_lock(&k->mu);
      gate = k->gate;
      gate_payload = k->gate_payload;
      pthread_mutex_unlock(&k->mu);
    }
    if (gate) {
      long ms = gate(c->method, c->path, gate_payload);
      if (ms <= 0) {
        rc = tf_error__set(TF_EREFUSED, "%s %.200s: refused by the write gate (not leading, or over budget): not sent",
                           c->method, c->path);
        if (status) *status = tf_kube__status_local(0, "Refused", tf_error_last()->message);
        tf_kube__log(k, TF_LOG_DEBUG, "%s", tf_error_last()->message);
        return rc;
      }
      int64_t until = tf_kube__now_ms() + ms;
      if (deadline <= 0 || until < deadline) deadline = until;
    }
    tf_kube__req r;
    memset(&r, 0, sizeof(r));
    r.k = k;
    tf_buf__init(&r.body);
    if (!(r.h = tf_kube__take(k))) return tf_error__nomem();
    r.watch = c->watch;
    r.fn = c->fn;
    r.fn_arg = c->fn_arg;
    r.tick = c->tick;
    r.tick_arg = c->fn_arg;
    r.deadline = deadline;
    r.gate = gate;
    r.gate_payload = gate_payload;
    r.method = c->method;
    r.path = c->path;
    r.last_byte = r.last_event = tf_kube__now_ms();
    if (c->watch) {
      tf_kube__lines_init(&r.lines, TF_KUBE__MAX_LINE);
      long stall = c->list && c->list->stall_seconds > 0 ? c->list->stall_seconds
                   : c->list && c->list->timeout_seconds > 0 ? c->list->timeout_seconds + 60 : 0;
      r.stall_ms = stall * 1000;
      r.silence_ms = c->list && c->list->version >= 2 && c->list->silence_ms > 0 ? c->list->silence_ms : 0;
    }
    tf_buf q, url;
    tf_buf__init(&q);
    tf_buf__init(&url);
    tf_kube__list_query(&q, r.h, c->list, c->watch, c->cont);
    if (c->write & TF_KUBE__WRITE) tf_kube__query_add(&q, r.h, "fieldManager", k->field_manager);
    tf_buf__printf(&url, "%s%s%s%s", k->url_base, c->path, q.len ? "?" : "", q.len ? q.ptr : "");
    char errbuf[CURL_ERROR_SIZE] = "";
    char *auth = tf_kube__auth_header(k, token_retried && attempt > 0);
    struct curl_slist *hdr = NULL, *ct = NULL;
    hdr = curl_slist_append(hdr, "Accept: application/json");
    if (c->content_type) {
      char line[128];
      snprintf(line, sizeof(line), "Content-Type: %s", c->content_type);
      hdr = curl_slist_append(hdr, line);
    }
    hdr = curl_slist_append(hdr, "Expect:");
    if (auth) hdr = curl_slist_append(hdr, auth);
    if (k->connect_to) ct = curl_slist_append(NULL, k->connect_to);
    CURL *h = r.h;
    if (!hdr || url.failed || q.failed || (k->connect_to && !ct)) {
      rc = tf_error__nomem();
      goto done;
    }
    curl_easy_setopt(h, CURLOPT_URL, url.ptr);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_USERAGENT, k->user_agent);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, k->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->watch ? 0L : k->timeout_ms);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tf_kube__write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, tf_kube__header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
    if (gate) {
      curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, tf_kube__prereq);
      curl_easy_setopt(h, CURLOPT_PREREQDATA, &r);
    }
    if (c->watch || c->tick || r.deadline > 0) {
      curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, tf_kube__progress);
      curl_easy_setopt(h, CURLOPT_XFERINFODATA, &r);
    }
    if (ct) curl_easy_setopt(h, CURLOPT_CONNECT_TO, ct);
    if (k->cfg.insecure) {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    }
    if (k->cfg.ca.ptr) {
      struct curl_blob b = {k->cfg.ca.ptr, k->cfg.ca.len, CURL_BLOB_NOCOPY};
      curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    }
    if (k->cfg.cert.ptr) {
      struct curl_blob cb = {k->cfg.cert.ptr, k->cfg.cert.len, CURL_BLOB_NOCOPY};
      struct curl_blob kb = {k->cfg.key.ptr, k->cfg.key.len, CURL_BLOB_NOCOPY};
      curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
      curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
      curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (strcmp(c->method, "GET") != 0) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
    if (c->body) {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body);
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(c->body));
    }
    CURLcode cc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    int again = 0;
    if (cc != CURLE_OK && !(c->watch && code == 200 && r.fn_rc != 0)) {
      int timeout = cc == CURLE_OPERATION_TIMEDOUT || r.stalled || r.silent || r.past_deadline;
      if (r.refused) {
        rc = tf_error__set(TF_EREFUSED, "%s %.200s: refused by the write gate (not leading, or over budget): not sent",
                           c->method, c->path);
      } else if (r.cancelled) {
        rc = tf_error__set(TF_EUSER, "%s %.200s: cancelled", c->method, c->path);
      } else if (r.too_big) {
        rc = tf_error__set(TF_EPROTO, "%s %.200s: answer over %zu bytes", c->method, c->path, TF_KUBE__MAX_BODY);
      } else if (r.past_deadline) {
        rc = tf_error__set(TF_ETIMEOUT, "%s %.200s: past the caller's deadline", c->method, c->path);
      } else if (r.silent) {
        rc = tf_error__set(TF_ETIMEOUT, "watch %.200s: neither an event nor a bookmark for %ld ms", c->path,
                           r.silence_ms);
      } else if (r.stalled) {
        rc = tf_error__set(TF_ETIMEOUT, "%s %.200s: no data for %ld s (watchdog)", c->method, c->path,
                           r.stall_ms / 1000);
      } else if (c->watch && code == 200 && r.lines.len > 0) {
        rc = tf_error__set(TF_EPROTO, "watch %.200s: the stream ended inside a line (%zu bytes): %s", c->path,
                           r.lines.len, errbuf[0] ? errbuf : curl_easy_strerror(cc));
      } else {
        rc = tf_error__set(timeout ? TF_ETIMEOUT : TF_ENET, "%s %.200s: %s", c->method, c->path,
                           errbuf[0] ? errbuf : curl_easy_strerror(cc));
      }
      if (status)
        *status = tf_kube__status_local(0, r.refused ? "Refused" : timeout ? "Timeout" : "Transport",
                                        tf_error_last()->message);
      tf_kube__log(k, TF_LOG_DEBUG, "%s", tf_error_last()->message);
    } else if (c->watch && code == 200) {
      if (r.fn_rc == TF_EUSER) {
        rc = tf_error__set(TF_EUSER, "watch %.200s: stopped by the callback", c->path);
      } else if (r.fn_rc == 1 && r.ev_status) {
        rc = tf_kube__code_err(r.ev_status->code);
        if (rc == TF_OK) rc = TF_ERROR;
        tf_error__set(rc, "watch %.200s: ERROR event %d %s: %.200s", c->path, r.ev_status->code, r.ev_status->reason,
                      r.ev_status->message);
        if (status) {
          *status = r.ev_status;
          r.ev_status = NULL;
        }
      } else if (r.fn_rc < 0) {
        rc = r.fn_rc;
        if (status) *status = tf_kube__status_local(200, "Malformed", tf_error_last()->message);
      } else if (r.lines.len > 0) {
        rc = tf_error__set(TF_EPROTO, "watch %.200s: the stream ended inside a line (%zu bytes)", c->path, r.lines.len);
        if (status) *status = tf_kube__status_local(200, "Truncated", tf_error_last()->message);
      }
    } else if (code >= 200 && code < 300) {
      /* an answer that is not JSON is an error, not an object (cut short, wrong content type) */
      cJSON *doc = r.body.len ? cJSON_ParseWithLength(r.body.ptr, r.body.len) : NULL;
      if (r.body.len && !doc) {
        rc = tf_error__set(TF_EPROTO, "%s %.200s: %ld with a body that is not JSON (%zu bytes)", c->method, c->path,
                           code, r.body.len);
        if (status) *status = tf_kube__status_local((int)code, "Malformed", tf_error_last()->message);
      } else if (out) {
        if (!r.body.ptr) tf_buf__puts(&r.body, "");
        rc = tf_buf__detach(&r.body, out);
      }
      cJSON_Delete(doc);
    } else {
      tf_kube_status *st = tf_kube__status_parse((int)code, r.body.ptr, r.body.len, r.retry_after[0] ? r.retry_after : NULL);
      rc = tf_kube__code_err((int)code);
      long ra = st ? st->retry_after : 0;
      if ((code == 429 || code == 503) && ra > 0) tf_kube__defer(k, lane, ra, c->method, c->path);
      if (code == 401 && !token_retried && k->cfg.token_file) {
        tf_kube__log(k, TF_LOG_INFO, "%s %.200s: 401, re-reading the token file and retrying once", c->method, c->path);
        again = token_retried = 1;
      } else if (code == 429 && ra > 0 && !c->watch && retries_429 < TF_KUBE__RETRIES_429) {
        tf_kube__log(k, TF_LOG_INFO, "%s %.200s: 429, sending it again after the wait", c->method, c->path);
        retries_429++;
        again = 1;
      } else {
        tf_error__set(rc, "%s %.200s: %ld %s: %.300s", c->method, c->path, code, st ? st->reason : "",
                      st ? st->message : "");
        tf_kube__log(k, code >= 500 ? TF_LOG_WARN : TF_LOG_DEBUG, "%s", tf_error_last()->message);
      }
      if (status && !again) *status = st;
      else tf_kube_status_free(st);
    }
  done:
    if (auth) {
      tf_crypto__wipe(auth, strlen(auth));
      free(auth);
    }
    /* libcurl copied the Authorization line into the list: wipe that copy too */
    for (struct curl_slist *n = hdr; n; n = n->next) tf_crypto__wipe(n->data, strlen(n->data));
    curl_slist_free_all(hdr);
    curl_slist_free_all(ct);
    tf_buf__dispose(&q, 0);
    tf_buf__dispose(&url, 0);
    tf_buf__dispose(&r.body, 0);
    tf_kube__lines_dispose(&r.lines);
    tf_kube_status_free(r.ev_status);
    tf_kube__give(k, r.h);
    if (!again) break;
  }
  return rc;
}

tf_err tf_kube_get(tf_kube *k, const char *path, char **out, tf_kube_status **status)
{
  TF_ASSERT_ARG(k && path && out);
  tf_kube__call c = {.method = "GET", .path = path};
  return tf_kube__perform(k, &c, out, status);
}

tf_err tf_kube__list(tf_kube *k, const char *path, const tf_kube_list_options *o, tf_kube__tick_fn tick, void *arg,
                     cJSON **out, tf_kube_status **status)
{
  TF_ASSERT_ARG(k && path && out);
  *out = NULL;
  if (status) *status = NULL;
  cJSON *all = NULL;
  char *cont = NULL;
  tf_err rc = TF_OK;
  for (int page = 0;; page++) {
    tf_kube__call c = {.method = "GET", .path = path, .list = o, .cont = cont, .tick = tick, .fn_arg = arg};
    char *text = NULL;
    rc = tf_kube__perform(k, &c, &text, status);
    if (rc < 0) break;
    cJSON *doc = cJSON_Parse(text);
    free(text);
    cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items");
    if (!cJSON_IsObject(doc) || !(cJSON_IsArray(items) || cJSON_IsNull(items))) {
      cJSON_Delete(doc);
      rc = tf_error__set(TF_EPROTO, "list %.200s: the answer is not a list", path);
      if (status) *status = tf_kube__status_local(200, "Malformed", tf_error_last()->message);
      break;
    }
    if (cJSON_IsNull(items)) cJSON_ReplaceItemInObjectCaseSensitive(doc, "items", cJSON_CreateArray());
    const char *next = NULL;
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive(md, "continue");
    if (cJSON_IsString(cv) && *cv->valuestring) next = cv->valuestring;
    if (!all) {
      all = doc;
    } else {
      /* later pages: move their items over, keep the last page's metadata */
      cJSON *dst = cJSON_GetObjectItemCaseSensitive(all, "items");
      cJSON *src = cJSON_GetObjectItemCaseSensitive(doc, "items");
      while (src->child) cJSON_AddItemToArray(dst, cJSON_DetachItemViaPointer(src, src->child));
      cJSON_ReplaceItemInObjectCaseSensitive(all, "metadata", cJSON_DetachItemFromObjectCaseSensitive(doc, "metadata"));
      md = cJSON_GetObjectItemCaseSensitive(all, "metadata");
      cv = cJSON_GetObjectItemCaseSensitive(md, "continue");
      next = cJSON_IsString(cv) && *cv->valuestring ? cv->valuestring : NULL;
      cJSON_Delete(doc);
    }
    free(cont);
    cont = NULL;
    if (!next || !o || o->limit <= 0) break;
    if (page > 100000) {
      rc = tf_error__set(TF_EPROTO, "list %.200s: too many pages", path);
      break;
    }
    if (!(cont = tf_strdup__(next))) {
      rc = tf_error__nomem();
      break;
    }
  }
  free(cont);
  if (rc < 0) {
    cJSON_Delete(all);
    return rc;
  }
  cJSON *md = cJSON_GetObjectItemCaseSensitive(all, "metadata");
  if (md) cJSON_DeleteItemFromObjectCaseSensitive(md, "continue");
  *out = all;
  return TF_OK;
}

tf_err tf_kube_list(tf_kube *k, const char *path, const tf_kube_list_options *o, char **out, tf_kube_status **status)
{
  TF_ASSERT_ARG(k && path && out);
  *out = NULL;
  cJSON *doc = NULL;
  if (o && (o->version == 0 || o->version > TF_KUBE_LIST_OPTIONS_VERSION))
    return tf_error__set(TF_EINVALID, "tf_kube_list_options: unknown version %u", o->version);
  tf_err rc = tf_kube__list(k, path, o, NULL, NULL, &doc, status);
  if (rc < 0) return rc;
  *out = cJSON_PrintUnformatted(doc);
  cJSON_Delete(doc);
  return *out ? TF_OK : tf_error__nomem();
}

static tf_err tf_kube__check_json(const char *body, int need_rv)
{
  cJSON *doc = cJSON_Parse(body);
  if (!doc) return tf_error__set(TF_EINVALID, "body: not JSON");
  tf_err rc = TF_OK;
  if (need_rv) {
    const char *rv = tf_kube__meta_str(doc, "resourceVersion");
    if (!rv || !*rv) rc = tf_error__set(TF_EINVALID, "body: metadata.resourceVersion is required for an update");
  }
  cJSON_Delete(doc);
  return rc;
}

tf_err tf_kube_create(tf_kube *k, const char *path, const char *body, char **out, tf_kube_status **status)
{
  TF_ASSERT_ARG(k && path && body);
  if (status) *status = NULL;
  tf_err rc = tf_kube__check_json(body, 0);
  if (rc < 0) return rc;
  tf_kube__call c = {.method = "POST", .path = path, .content_type = "application/json", .body = body, .write = 1};
  return tf_kube__perform(k, &c, out, status);
}

tf_err tf_kube_update(tf_kube *k, const char *path, const char *body, char **out, tf_kube_status **status)
{
  TF_ASSERT_ARG(k && path && body);
  if (status) *status = NULL;
  tf_err rc = tf_kube__check_json(body, 1);
  if (rc < 0) return rc;
  tf_kube__call c = {.method = "PUT", .path = path, .content_type = "application/json", .body = body, .write = 1};
  return tf_kube__perform(k, &c, out, status);
}

tf_err tf_kube_patch(tf_kube *k, const char *path, tf_kube_patch_type type, const char *body, char **out,
                     tf_kube_status **status)
{
  TF_ASSERT_ARG(k && path && body);
  if (status) *status = NULL;
  if (type != TF_KUBE_PATCH_MERGE && type != TF_KUBE_PATCH_JSON)
    return tf_error__set(TF_EINVALID, "patch type: unknown value %d", (int)type);
  tf_err rc = tf_kube__check_json(body, 0);
  if (rc < 0) return rc;
  tf_kube__call c = {.method = "PATCH",
                     .path = path,
                     .content_type = type == TF_KUBE_PATCH_MERGE ? "application/merge-patch+json"
                                                                 : "application/json-patch+json",
                     .body = body,
                     .write = 1};
  return tf_kube__perform(k, &c, out, status);
}

tf_err tf_kube_delete(tf_kube *k, const char *path, const tf_kube_delete_options *opts, char **out,
                      tf_kube_status **status)
{
  TF_ASSERT_ARG(k && path);
  if (status) *status = NULL;
  tf_kube_delete_options o = TF_KUBE_DELETE_OPTIONS_INIT;
  if (opts) {
    if (opts->version == 0 || opts->version > TF_KUBE_DELETE_OPTIONS_VERSION)
      return tf_error__set(TF_EINVALID, "tf_kube_delete_options: unknown version %u", opts->version);
    o.precondition_uid = opts->precondition_uid;
    o.precondition_rv = opts->precondition_rv;
    o.propagation = opts->propagation;
    o.grace_period_seconds = opts->grace_period_seconds;
  }
  static const char *const prop[] = {NULL, "Background", "Foreground", "Orphan"};
  if ((int)o.propagation < 0 || (int)o.propagation > 3)
    return tf_error__set(TF_EINVALID, "propagation: unknown value %d", (int)o.propagation);
  cJSON *d = cJSON_CreateObject();
  if (!d) return tf_error__nomem();
  cJSON_AddStringToObject(d, "kind", "DeleteOptions");
  cJSON_AddStringToObject(d, "apiVersion", "v1");
  if (prop[o.propagation]) cJSON_AddStringToObject(d, "propagationPolicy", prop[o.propagation]);
  if (o.grace_period_seconds >= 0) cJSON_AddNumberToObject(d, "gracePeriodSeconds", (double)o.grace_period_seconds);
  if (o.precondition_uid || o.precondition_rv) {
    cJSON *p = cJSON_AddObjectToObject(d, "preconditions");
    if (p && o.precondition_uid) cJSON_AddStringToObject(p, "uid", o.precondition_uid);
    if (p && o.precondition_rv) cJSON_AddStringToObject(p, "resourceVersion", o.precondition_rv);
  }
  char *body = cJSON_PrintUnformatted(d);
  cJSON_Delete(d);
  if (!body) return tf_error__nomem();
  tf_kube__call c = {.method = "DELETE", .path = path, .content_type = "application/json", .body = body, .write = 1};
  tf_err rc = tf_kube__perform(k, &c, out, status);
  free(body);
  return rc;
}

tf_err tf_kube__watch(tf_kube *k, const char *path, const tf_kube_list_options *o, tf_kube__event_fn fn,
                      tf_kube__tick_fn tick, void *arg, tf_kube_status **status)
{
  tf_kube__call c = {.method = "GET", .path = path, .list = o, .watch = 1, .fn = fn, .tick = tick, .fn_arg = arg};
  return tf_kube__perform(k, &c, NULL, status);
}

tf_err tf_kube__request(tf_kube *k, const char *method, const char *path, const char *content_type, const char *body,
                        int write, int64_t deadline_ms, char **out, tf_kube_status **status)
{
  tf_kube__call c = {.method = method,
                     .path = path,
                     .content_type = content_type,
                     .body = body,
                     .write = write,
                     .deadline = deadline_ms};
  return tf_kube__perform(k, &c, out, status);
}

typedef struct tf_kube__pub_watch {
  tf_kube_event_cb cb;
  void *payload;
} tf_kube__pub_watch;

static int tf_kube__pub_event(int type, cJSON *object, void *arg)
{
  tf_kube__pub_watch *w = arg;
  char *txt = cJSON_PrintUnformatted(object);
  if (!txt) return 1;
  int r = w->cb((tf_kube_event_type)type, txt, w->payload);
  free(txt);
  return r;
}

tf_err tf_kube_watch(tf_kube *k, const char *path, const tf_kube_list_options *opts, tf_kube_event_cb cb,
                     tf_kube_status **status, void *payload)
{
  TF_ASSERT_ARG(k && path && cb);
  if (opts && (opts->version == 0 || opts->version > TF_KUBE_LIST_OPTIONS_VERSION))
    return tf_error__set(TF_EINVALID, "tf_kube_list_options: unknown version %u", opts->version);
  tf_kube__pub_watch w = {cb, payload};
  return tf_kube__watch(k, path, opts, tf_kube__pub_event, NULL, &w, status);
}
