/* probe: a TURN client that proves a relay with a real Allocate.
 *
 * One non-blocking state machine per probe, driven by one poll() loop that
 * serves tf_probe_run() (a set of one), tf_probe_set_run() (many at once, at
 * most `concurrency` in flight) and tf_allocation (one held allocation).
 *
 * A probe has one or two legs: leg A is the allocation under test; with
 * peer_check, leg B is a second allocation on its own socket that serves as
 * A's peer. Each leg owns a socket (a fresh 5-tuple), its credentials and at
 * most one outstanding transaction. The probe walks the phases below and
 * records the time spent in each stage.
 *
 * Names in URIs are resolved with getaddrinfo(), which blocks: a probe set
 * resolves each name as its probe starts. IP literals never block.
 *
 * STUN encoding and validation come from the stun module; credentials from
 * cred. Error numbers decide, never reason text.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define PROBE_SOFTWARE "turnfleet-probe/" TF_VERSION_STRING
#define PROBE_DEFAULT_USER "turnfleet-probe"
#define PROBE_PEER_SUFFIX "-peer"
#define PROBE_CHANNEL 0x4000
#define PROBE_RC 7          /* RFC 8489 §6.2.1: sends per transaction */
#define PROBE_RM 16         /* wait Rm * RTO after the last send */
#define PROBE_MAX_SOCKETS 3 /* 437 on Allocate: a new 5-tuple, at most 3 in all */
#define PROBE_MAX_STALE 2   /* 438 retries per transaction */
#define PROBE_PAYLOAD 32
#define PROBE_RX_CAP (2 * TF_STUN_MAX_MESSAGE + 64)
#define PROBE_TX_CAP (4 * TF_STUN_MAX_MESSAGE)
#define PROBE_POLL_MAX_MS 1000
#define PROBE_PORT_QUARANTINE_MS 2500u /* coturn holds a released 5-tuple ~1 s (up to 2.5 s seen) */

/* ---- results ---- */

struct tf_probe_result {
  char *uri;
  tf_probe_stage stage;
  tf_err status;
  int error_code;
  char *error_reason;
  char *message;
  int draining;
  int has_relayed, has_mapped;
  tf_addr relayed, mapped;
  uint16_t relayed_port, mapped_port;
  uint32_t lifetime;
  double rtt[TF_PROBE_STAGE_COUNT]; /* -1: did not run */
};

static const char *const stage_names[TF_PROBE_STAGE_COUNT] = {
    "resolve", "connect", "tls", "allocate", "verify", "permission", "channel", "data", "release", "done"};

const char *tf_probe_stage_name(tf_probe_stage stage)
{
  if ((int)stage < 0 || (int)stage >= TF_PROBE_STAGE_COUNT) return "unknown";
  return stage_names[stage];
}

static tf_probe_result *result_new(const char *uri)
{
  tf_probe_result *r = calloc(1, sizeof(*r));
  if (!r) return NULL;
  r->uri = tf_strdup__(uri ? uri : "");
  r->error_reason = tf_strdup__("");
  r->message = tf_strdup__("");
  if (!r->uri || !r->error_reason || !r->message) {
    tf_probe_result_free(r);
    return NULL;
  }
  r->stage = TF_PROBE_STAGE_RESOLVE;
  r->status = TF_OK;
  for (int i = 0; i < TF_PROBE_STAGE_COUNT; i++) r->rtt[i] = -1.0;
  return r;
}

void tf_probe_result_free(tf_probe_result *result)
{
  if (!result) return;
  free(result->uri);
  free(result->error_reason);
  free(result->message);
  free(result);
}

int tf_probe_result_ok(const tf_probe_result *result)
{
  return result && result->status == TF_OK && result->stage == TF_PROBE_STAGE_DONE;
}

tf_probe_stage tf_probe_result_stage(const tf_probe_result *result)
{
  return result ? result->stage : TF_PROBE_STAGE_RESOLVE;
}

tf_err tf_probe_result_status(const tf_probe_result *result) { return result ? result->status : TF_EINVALID; }

int tf_probe_result_error_code(const tf_probe_result *result) { return result ? result->error_code : 0; }

const char *tf_probe_result_error_reason(const tf_probe_result *result)
{
  return result ? result->error_reason : "";
}

const char *tf_probe_result_message(const tf_probe_result *result) { return result ? result->message : ""; }

int tf_probe_result_draining(const tf_probe_result *result) { return result ? result->draining : 0; }

const char *tf_probe_result_uri(const tf_probe_result *result) { return result ? result->uri : ""; }

tf_err tf_probe_result_relayed(const tf_probe_result *result, tf_addr *addr, uint16_t *port)
{
  TF_ASSERT_ARG(result);
  if (!result->has_relayed) return tf_error__set(TF_ENOTFOUND, "the probe made no allocation");
  if (addr) *addr = result->relayed;
  if (port) *port = result->relayed_port;
  return TF_OK;
}

tf_err tf_probe_result_mapped(const tf_probe_result *result, tf_addr *addr, uint16_t *port)
{
  TF_ASSERT_ARG(result);
  if (!result->has_mapped) return tf_error__set(TF_ENOTFOUND, "the probe got no mapped address");
  if (addr) *addr = result->mapped;
  if (port) *port = result->mapped_port;
  return TF_OK;
}

uint32_t tf_probe_result_lifetime(const tf_probe_result *result) { return result ? result->lifetime : 0; }

double tf_probe_result_rtt_ms(const tf_probe_result *result, tf_probe_stage stage)
{
  if (!result || (int)stage < 0 || (int)stage >= TF_PROBE_STAGE_COUNT) return -1.0;
  return result->rtt[stage];
}

int tf_probe_result_exit_code(const tf_probe_result *result)
{
  if (!result) return 2;
  if (tf_probe_result_ok(result)) return 0;
  if (result->status == TF_ETIMEOUT || result->status == TF_ENET) return 3;
  return 1;
}

static int json_add_addr(cJSON *o, const char *name, int has, const tf_addr *a)
{
  char text[TF_ADDR_STRLEN];
  if (!has || tf_addr_format(text, sizeof(text), a) < 0) return cJSON_AddNullToObject(o, name) != NULL;
  return cJSON_AddStringToObject(o, name, text) != NULL;
}

tf_err tf_probe_result_to_json(char **out, const tf_probe_result *result)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(result);
  cJSON *o = cJSON_CreateObject();
  int ok = o != NULL;
  ok = ok && cJSON_AddStringToObject(o, "uri", result->uri);
  ok = ok && cJSON_AddBoolToObject(o, "ok", tf_probe_result_ok(result));
  ok = ok && cJSON_AddStringToObject(o, "stage", tf_probe_stage_name(result->stage));
  ok = ok && cJSON_AddNumberToObject(o, "errorCode", result->error_code);
  ok = ok && cJSON_AddStringToObject(o, "errorReason", result->error_reason);
  ok = ok && json_add_addr(o, "relayedAddress", result->has_relayed, &result->relayed);
  if (ok && result->has_relayed) ok = cJSON_AddNumberToObject(o, "relayedPort", result->relayed_port) != NULL;
  else if (ok) ok = cJSON_AddNullToObject(o, "relayedPort") != NULL;
  ok = ok && json_add_addr(o, "mappedAddress", result->has_mapped, &result->mapped);
  ok = ok && cJSON_AddNumberToObject(o, "lifetime", result->lifetime);
  cJSON *rtt = ok ? cJSON_AddObjectToObject(o, "rttMs") : NULL;
  ok = ok && rtt;
  for (int i = 0; ok && i < TF_PROBE_STAGE_COUNT; i++) {
    if (result->rtt[i] < 0) continue;
    /* microsecond resolution is plenty and keeps the text short */
    ok = cJSON_AddNumberToObject(rtt, stage_names[i], round(result->rtt[i] * 1000.0) / 1000.0) != NULL;
  }
  ok = ok && cJSON_AddBoolToObject(o, "draining", result->draining);
  ok = ok && cJSON_AddStringToObject(o, "message", result->message);
  char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (!text) return tf_error__nomem();
  /* cJSON allocates with malloc: tf_free() releases it */
  *out = text;
  return TF_OK;
}

/* ---- options ---- */

tf_err tf_probe_options_init(tf_probe_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_PROBE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_probe_options version (1-%d)", version,
                         TF_PROBE_OPTIONS_VERSION);
  tf_probe_options init = TF_PROBE_OPTIONS_INIT;
  *opts = init;
  opts->version = version;
  return TF_OK;
}

/* A private copy of the options: strings duplicated, the secret wiped on free. */
typedef struct popts {
  tf_probe_options o;
  size_t secret_len;
  tf_addr expect;
  int has_expect;
} popts;

static void popts_free(popts *c)
{
  if (!c) return;
  if (c->o.secret) {
    tf_crypto__wipe((void *)c->o.secret, c->secret_len);
    free((void *)c->o.secret);
  }
  free((void *)c->o.uri);
  free((void *)c->o.user);
  free((void *)c->o.expect_address);
  free((void *)c->o.ca_file);
  free(c);
}

/* Check @p o (naming the field, never the secret's value) and copy it. */
static tf_err popts_new(popts **out, const tf_probe_options *o, tf_uri **uri_out)
{
  TF_ASSERT_ARG(o);
  if (o->version == 0 || o->version > TF_PROBE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_probe_options version (1-%d)", o->version,
                         TF_PROBE_OPTIONS_VERSION);
  if (!o->uri || !*o->uri) return tf_error__set(TF_EINVALID, "uri: required");
  tf_uri *uri = NULL;
  if (tf_uri_parse(&uri, o->uri) < 0) {
    const tf_error *e = tf_error_last();
    return tf_error__set(e->code == TF_ENOMEM ? TF_ENOMEM : TF_EINVALID, "uri: %s", e->message);
  }
  tf_err rc = TF_OK;
  tf_uri_mode mode = tf_uri_open_mode(uri);
  const char *user = o->user ? o->user : PROBE_DEFAULT_USER;
  tf_addr expect;
  memset(&expect, 0, sizeof(expect));
  if (mode == TF_URI_MODE_DTLS)
    rc = tf_error__set(TF_EINVALID, "uri: turns: over udp (DTLS) is not supported by the probe");
  else if (mode != TF_URI_MODE_UDP && mode != TF_URI_MODE_TCP && mode != TF_URI_MODE_TLS)
    rc = tf_error__set(TF_EINVALID, "uri: transport \"%s\" is not supported (udp or tcp)", tf_uri_transport(uri));
  else if (!o->secret || !*o->secret)
    rc = tf_error__set(TF_EINVALID, "secret: required");
  else if (o->ttl_s <= 0 || o->ttl_s > 10L * 365 * 86400)
    rc = tf_error__set(TF_EINVALID, "ttl_s: %lld is not a lifetime in seconds (1 to 10 years)", (long long)o->ttl_s);
  else if (o->separator < 0 || o->separator > 0x7e || (o->separator && o->separator < 0x21))
    rc = tf_error__set(TF_EINVALID, "separator: must be 0 or a printable ASCII character");
  else if (o->family != 0 && o->family != TF_AF_INET && o->family != TF_AF_INET6)
    rc = tf_error__set(TF_EINVALID, "family: %d is not 0, TF_AF_INET or TF_AF_INET6", o->family);
  else if (o->expect_address && tf_addr_parse(&expect, o->expect_address) < 0)
    rc = tf_error__set(TF_EINVALID, "expect_address: %s", tf_error_last()->message);
  else if (o->expect_port_start == 0 && o->expect_port_end != 0)
    rc = tf_error__set(TF_EINVALID, "expect_port_start: required with expect_port_end");
  else if (o->expect_port_start != 0 && o->expect_port_end < o->expect_port_start)
    rc = tf_error__set(TF_EINVALID, "expect_port_end: %u is below start %u", o->expect_port_end,
                       o->expect_port_start);
  else if (o->timeout_ms <= 0)
    rc = tf_error__set(TF_EINVALID, "timeout_ms: %d is not positive", o->timeout_ms);
  else if (o->rto_ms <= 0)
    rc = tf_error__set(TF_EINVALID, "rto_ms: %d is not positive", o->rto_ms);
  else if (o->now < 0)
    rc = tf_error__set(TF_EINVALID, "now: %lld is negative", (long long)o->now);
  else if (o->release != 0 && o->release != 1)
    rc = tf_error__set(TF_EINVALID, "release: %d is not 0 or 1", o->release);
  else if (o->peer_check != 0 && o->peer_check != 1)
    rc = tf_error__set(TF_EINVALID, "peer_check: %d is not 0 or 1", o->peer_check);
  else if (o->insecure != 0 && o->insecure != 1)
    rc = tf_error__set(TF_EINVALID, "insecure: %d is not 0 or 1", o->insecure);
  else if (o->ca_file && !o->insecure && access(o->ca_file, R_OK) != 0)
    rc = tf_error__set(TF_EINVALID, "ca_file: %.200s: %s", o->ca_file, strerror(errno));
  else if ((int)o->log_level < (int)TF_LOG_DEBUG || (int)o->log_level > (int)TF_LOG_ERROR)
    rc = tf_error__set(TF_EINVALID, "log_level: %d is not a tf_log_level", (int)o->log_level);
  if (rc == TF_OK) {
    /* the user part must make a valid credential (cred owns those rules) */
    char *u = NULL, *p = NULL;
    tf_err mrc = tf_cred_mint(&u, &p, o->secret, user, 1, o->separator);
    if (mrc < 0)
      rc = tf_error__set(mrc == TF_ENOMEM ? TF_ENOMEM : TF_EINVALID, "user: %s", tf_error_last()->message);
    if (p) tf_crypto__wipe(p, strlen(p));
    tf_free(u);
    tf_free(p);
  }
  if (rc < 0) {
    tf_uri_free(uri);
    return rc;
  }
  popts *c = calloc(1, sizeof(*c));
  if (!c) {
    tf_uri_free(uri);
    return tf_error__nomem();
  }
  c->o = *o;
  c->o.version = TF_PROBE_OPTIONS_VERSION;
  c->o.uri = tf_strdup__(o->uri);
  c->secret_len = strlen(o->secret);
  c->o.secret = tf_strndup__(o->secret, c->secret_len);
  c->o.user = tf_strdup__(user);
  c->o.expect_address = o->expect_address ? tf_strdup__(o->expect_address) : NULL;
  c->o.ca_file = o->ca_file ? tf_strdup__(o->ca_file) : NULL;
  c->expect = expect;
  c->has_expect = o->expect_address != NULL;
  if (!c->o.uri || !c->o.secret || !c->o.user || (o->expect_address && !c->o.expect_address) ||
      (o->ca_file && !c->o.ca_file)) {
    popts_free(c);
    tf_uri_free(uri);
    return tf_error__nomem();
  }
  *out = c;
  if (uri_out) *uri_out = uri;
  else tf_uri_free(uri);
  return TF_OK;
}

/* ---- probes ---- */

enum conn_state { CONN_CLOSED = 0, CONN_CONNECTING, CONN_TLS, CONN_READY };
enum req_kind { REQ_NONE = 0, REQ_ALLOCATE, REQ_REFRESH, REQ_PERMISSION, REQ_CHANNEL, REQ_DATA };
enum phase {
  PH_A_OPEN,
  PH_A_ALLOC,
  PH_B_OPEN,
  PH_B_ALLOC,
  PH_A_PERM,
  PH_B_PERM,
  PH_A_CHAN,
  PH_DATA_AB,
  PH_DATA_BA,
  PH_RELEASE_B,
  PH_RELEASE_A,
  PH_HELD,    /* tf_allocation: allocated, waiting for the next operation */
  PH_REFRESH, /* tf_allocation_refresh() */
  PH_DONE
};

struct probe;

typedef struct leg {
  struct probe *p;
  const char *who; /* "" for A, "peer " for B: prefixes messages */
  int fd;
  unsigned gen; /* bumped on every new socket, so stale poll events are ignored */
  int conn;
  SSL *ssl;
  BIO *rbio, *wbio; /* memory BIOs owned by ssl: we do the socket I/O ourselves */
  uint8_t rx[PROBE_RX_CAP];
  size_t rx_len;
  uint8_t tx[PROBE_TX_CAP];
  size_t tx_len;
  /* the outstanding transaction (or data send, REQ_DATA) */
  int req;
  uint8_t tid[TF_STUN_TID_SIZE];
  uint8_t msg[TF_STUN_MAX_MESSAGE];
  size_t msg_len;
  int authed;
  int sends;
  int rto;
  double next_send, give_up;
  int stale;
  char malformed[160]; /* the last malformed answer to this transaction (UDP) */
  uint32_t req_lifetime;
  tf_addr peer;
  uint16_t peer_port;
  /* credentials (the password and key are secret) */
  char *username, *password, *realm, *nonce;
  uint8_t key[TF_STUN_KEY_SIZE];
  int have_key;
  int sockets; /* sockets opened for this Allocate (437 handling) */
  /* the allocation */
  int allocated, released;
  tf_addr relayed, mapped;
  uint16_t relayed_port, mapped_port;
  int has_mapped;
  uint32_t lifetime;
} leg;

typedef struct probe {
  popts *opts;
  tf_uri *uri;
  int mode; /* TF_URI_MODE_UDP, _TCP, _TLS */
  struct sockaddr_storage sa;
  socklen_t salen;
  char server[TF_ADDR_STRLEN + 16]; /* "addr:port" for messages */
  SSL_CTX *ctx;
  leg legs[2];
  int nlegs;
  int phase;
  int finished;
  double deadline;
  tf_probe_stage stage;
  double stage_t0;
  tf_probe_result *res;
  uint8_t payload[2][PROBE_PAYLOAD];
  int keep; /* tf_allocation: leave A allocated at the end */
  size_t index;
  tf_err fatal;      /* TF_ENOMEM met while running */
  uint32_t *recent;  /* a set's recently closed UDP source ports (borrowed), or NULL */
} probe;

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static const char *transport_name(int mode)
{
  return mode == TF_URI_MODE_UDP ? "udp" : mode == TF_URI_MODE_TCP ? "tcp" : "tls";
}

static const char *method_name(int req)
{
  switch (req) {
  case REQ_ALLOCATE: return "Allocate";
  case REQ_REFRESH: return "Refresh";
  case REQ_PERMISSION: return "CreatePermission";
  case REQ_CHANNEL: return "ChannelBind";
  default: return "data";
  }
}

static int method_of(int req)
{
  switch (req) {
  case REQ_ALLOCATE: return TF_STUN_ALLOCATE;
  case REQ_REFRESH: return TF_STUN_REFRESH;
  case REQ_PERMISSION: return TF_STUN_CREATE_PERMISSION;
  case REQ_CHANNEL: return TF_STUN_CHANNEL_BIND;
  default: return 0;
  }
}

static void plog(probe *p, tf_log_level level, const char *fmt, ...) TF__PRINTF(3, 4);
static void plog(probe *p, tf_log_level level, const char *fmt, ...)
{
  if (!p->opts->o.log_cb || level < p->opts->o.log_level) return;
  char line[512];
  int n = snprintf(line, sizeof(line), "%s: ", p->opts->o.uri);
  if (n < 0 || (size_t)n >= sizeof(line)) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  p->opts->o.log_cb(level, line, p->opts->o.log_payload);
}

static void fmt_addr(char *buf, size_t size, const tf_addr *a, uint16_t port)
{
  char t[TF_ADDR_STRLEN] = "?";
  tf_addr_format(t, sizeof(t), a);
  if (a->family == TF_AF_INET6) snprintf(buf, size, "[%s]:%u", t, port);
  else snprintf(buf, size, "%s:%u", t, port);
}

/* ---- stage accounting ---- */

/* Stage times use a fresh clock: callers' `now` may predate work done since. */
static void stage_end(probe *p)
{
  double now = now_ms();
  if (p->res->rtt[p->stage] < 0) p->res->rtt[p->stage] = 0;
  if (now > p->stage_t0) p->res->rtt[p->stage] += now - p->stage_t0;
  p->stage_t0 = now;
}

static void stage_begin(probe *p, tf_probe_stage st)
{
  if (p->stage != st) {
    stage_end(p);
    p->stage = st;
  }
  if (p->res->rtt[st] < 0) p->res->rtt[st] = 0;
  p->res->stage = st;
}

/* ---- sockets ---- */

/* The local port of a socket, 0 when unknown. */
static uint16_t local_port(int fd)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  return 0;
}

static uint32_t port_stamp(void) { return (uint32_t)(uint64_t)now_ms() | 1u; }

static int port_quarantined(const probe *p, uint16_t port)
{
  if (!p->recent || !port || !p->recent[port]) return 0;
  return (uint32_t)(port_stamp() - p->recent[port]) < PROBE_PORT_QUARANTINE_MS;
}

static void leg_close(leg *l)
{
  if (l->ssl) {
    SSL_free(l->ssl); /* frees the BIOs too */
    l->ssl = NULL;
    l->rbio = l->wbio = NULL;
  }
  if (l->fd >= 0) {
    if (l->p->recent && l->p->mode == TF_URI_MODE_UDP) {
      uint16_t port = local_port(l->fd);
      if (port) l->p->recent[port] = port_stamp();
    }
    close(l->fd);
  }
  l->fd = -1;
  l->conn = CONN_CLOSED;
  l->rx_len = l->tx_len = 0;
  l->req = REQ_NONE;
}

static void leg_wipe(leg *l)
{
  if (l->password) {
    tf_crypto__wipe(l->password, strlen(l->password));
    free(l->password);
  }
  free(l->username);
  free(l->realm);
  free(l->nonce);
  l->username = l->password = l->realm = l->nonce = NULL;
  tf_crypto__wipe(l->key, sizeof(l->key));
  l->have_key = 0;
  /* the sent messages carry the key's MAC only, but tidy up */
  tf_crypto__wipe(l->msg, sizeof(l->msg));
}

static void probe_release_all(probe *p);

static void probe_free(probe *p)
{
  if (!p) return;
  for (int i = 0; i < 2; i++) {
    leg_close(&p->legs[i]);
    leg_wipe(&p->legs[i]);
  }
  if (p->ctx) SSL_CTX_free(p->ctx);
  tf_uri_free(p->uri);
  popts_free(p->opts);
  tf_probe_result_free(p->res);
  tf_crypto__wipe(p->payload, sizeof(p->payload));
  free(p);
}

/* Record the failure, tidy up (best-effort release), finish. */
static void probe_fail(probe *p, tf_err status, int code, const char *reason, const char *fmt, ...)
    TF__PRINTF(5, 6);
static void probe_fail(probe *p, tf_err status, int code, const char *reason, const char *fmt, ...)
{
  if (p->finished) return;
  stage_end(p);
  tf_probe_result *r = p->res;
  r->stage = p->stage == TF_PROBE_STAGE_DONE ? TF_PROBE_STAGE_RELEASE : p->stage;
  r->status = status;
  r->error_code = code;
  char *rs = tf_strdup__(reason ? reason : "");
  if (rs) {
    free(r->error_reason);
    r->error_reason = rs;
  }
  char *m = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&m, fmt, ap) < 0) m = NULL;
  va_end(ap);
  if (m) {
    free(r->message);
    r->message = m;
  }
  if (!rs || !m) p->fatal = TF_ENOMEM;
  plog(p, TF_LOG_INFO, "failed in stage %s: %s", tf_probe_stage_name(r->stage), r->message);
  p->finished = 1;
  if (p->phase == PH_REFRESH) {
    /* a failed refresh leaves the held allocation as it is: the caller may retry or release */
    p->legs[0].req = REQ_NONE;
    p->phase = PH_HELD;
    return;
  }
  probe_release_all(p);
  p->phase = PH_DONE;
}

static void leg_fail_net(leg *l, int err, const char *what)
{
  probe *p = l->p;
  probe_fail(p, TF_ENET, 0, NULL, "%s%s %s over %s: %s", l->who, what, p->server, transport_name(p->mode),
             strerror(err));
}

/* Queue bytes for the socket (streams) or send a datagram (UDP). */
static void leg_flush(leg *l);

static void leg_write(leg *l, const uint8_t *data, size_t len)
{
  probe *p = l->p;
  if (p->mode == TF_URI_MODE_UDP) {
    ssize_t n = send(l->fd, data, len, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS) {
      if (errno == ECONNREFUSED) {
        probe_fail(p, TF_ENET, 0, NULL, "%s%s over udp is unreachable: connection refused (nothing listens there)",
                   l->who, p->server);
        return;
      }
      leg_fail_net(l, errno, "cannot send to");
    }
    /* EAGAIN: lost like any datagram; retransmission covers it */
    return;
  }
  if (p->mode == TF_URI_MODE_TLS) {
    ERR_clear_error();
    int n = SSL_write(l->ssl, data, (int)len);
    if (n <= 0) {
      probe_fail(p, TF_EPROTO, 0, NULL, "%sTLS write to %s failed", l->who, p->server);
      return;
    }
    /* the ciphertext is in wbio: leg_flush moves it to tx */
  } else {
    if (l->tx_len + len > sizeof(l->tx)) {
      probe_fail(p, TF_EPROTO, 0, NULL, "%sthe connection to %s does not drain (send buffer full)", l->who,
                 p->server);
      return;
    }
    memcpy(l->tx + l->tx_len, data, len);
    l->tx_len += len;
  }
  leg_flush(l);
}

static void leg_flush(leg *l)
{
  for (;;) {
    /* top up tx with the ciphertext TLS produced */
    while (l->wbio && l->tx_len < sizeof(l->tx) && BIO_ctrl_pending(l->wbio) > 0) {
      int n = BIO_read(l->wbio, l->tx + l->tx_len, (int)(sizeof(l->tx) - l->tx_len));
      if (n <= 0) break;
      l->tx_len += (size_t)n;
    }
    if (l->tx_len == 0) return;
    ssize_t n = send(l->fd, l->tx, l->tx_len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return; /* POLLOUT brings us back */
      leg_fail_net(l, errno, "connection to");
      return;
    }
    memmove(l->tx, l->tx + n, l->tx_len - (size_t)n);
    l->tx_len -= (size_t)n;
  }
}

static int leg_wants_write(const leg *l)
{
  return l->conn == CONN_CONNECTING || l->tx_len > 0 || (l->wbio && BIO_ctrl_pending(l->wbio) > 0);
}

static void probe_leg_ready(probe *p, leg *l, double now);
static void tls_step(leg *l);
static int probe_tls_context(probe *p);

static void leg_connected(leg *l)
{
  probe *p = l->p;
  if (p->mode != TF_URI_MODE_TLS) {
    l->conn = CONN_READY;
    probe_leg_ready(p, l, now_ms());
    return;
  }
  if (p->phase == PH_A_OPEN || p->phase == PH_B_OPEN) stage_begin(p, TF_PROBE_STAGE_TLS);
  if (!p->ctx && probe_tls_context(p) < 0) return;
  ERR_clear_error();
  l->ssl = SSL_new(p->ctx);
  BIO *r = BIO_new(BIO_s_mem());
  BIO *w = BIO_new(BIO_s_mem());
  if (!l->ssl || !r || !w) {
    BIO_free(r);
    BIO_free(w);
    p->fatal = TF_ENOMEM;
    probe_fail(p, TF_ERROR, 0, NULL, "out of memory");
    return;
  }
  BIO_set_mem_eof_return(r, -1);
  SSL_set_bio(l->ssl, r, w);
  l->rbio = r;
  l->wbio = w;
  const char *host = tf_uri_host(p->uri);
  if (tf_uri_host_kind(p->uri) == TF_URI_HOST_NAME) SSL_set_tlsext_host_name(l->ssl, host);
  if (!p->opts->o.insecure) {
    X509_VERIFY_PARAM *vp = SSL_get0_param(l->ssl);
    int ok = tf_uri_host_kind(p->uri) == TF_URI_HOST_NAME ? X509_VERIFY_PARAM_set1_host(vp, host, 0)
                                                          : X509_VERIFY_PARAM_set1_ip_asc(vp, host);
    if (!ok) {
      probe_fail(p, TF_ERROR, 0, NULL, "%scannot check the certificate against host %s", l->who, host);
      return;
    }
    SSL_set_verify(l->ssl, SSL_VERIFY_PEER, NULL);
  } else {
    SSL_set_verify(l->ssl, SSL_VERIFY_NONE, NULL);
  }
  SSL_set_connect_state(l->ssl);
  l->conn = CONN_TLS;
  tls_step(l);
}

/* Drive the handshake as far as the bytes at hand allow. */
static void tls_step(leg *l)
{
  probe *p = l->p;
  ERR_clear_error();
  int r = SSL_do_handshake(l->ssl);
  leg_flush(l);
  if (p->finished) return;
  if (r == 1) {
    l->conn = CONN_READY;
    plog(p, TF_LOG_DEBUG, "%sTLS: %s %s", l->who, SSL_get_version(l->ssl), SSL_get_cipher_name(l->ssl));
    probe_leg_ready(p, l, now_ms());
    return;
  }
  int e = SSL_get_error(l->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
  long vr = SSL_get_verify_result(l->ssl);
  if (!p->opts->o.insecure && vr != X509_V_OK) {
    probe_fail(p, TF_ERROR, 0, NULL, "%sthe certificate of %s was not accepted: %s", l->who, p->server,
               X509_verify_cert_error_string(vr));
    return;
  }
  char buf[256] = "no detail";
  unsigned long ec = ERR_peek_last_error();
  if (ec) ERR_error_string_n(ec, buf, sizeof(buf));
  ERR_clear_error();
  probe_fail(p, TF_EPROTO, 0, NULL, "%sTLS handshake with %s failed: %s", l->who, p->server, buf);
}

/* A new socket (a new 5-tuple) towards the server. */
static void leg_open(leg *l)
{
  probe *p = l->p;
  leg_close(l);
  l->gen++;
  int type = p->mode == TF_URI_MODE_UDP ? SOCK_DGRAM : SOCK_STREAM;
  int aside[8], naside = 0, fd = -1, rc = -1, err = 0;
  for (;;) {
    fd = socket(p->sa.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    if (type == SOCK_STREAM) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    rc = connect(fd, (struct sockaddr *)&p->sa, p->salen);
    err = errno;
    /* UDP: a source port this set released a moment ago still names a live
     * 5-tuple at the relay (coturn keeps it ~1 s after Refresh 0: 437). Keep
     * such a socket open while drawing another, so the kernel moves on. */
    if (rc == 0 && type == SOCK_DGRAM && naside < (int)(sizeof(aside) / sizeof(aside[0])) &&
        port_quarantined(p, local_port(fd))) {
      aside[naside++] = fd;
      continue;
    }
    break;
  }
  for (int i = 0; i < naside; i++) close(aside[i]);
  if (fd < 0) {
    leg_fail_net(l, errno, "cannot open a socket towards");
    return;
  }
  l->fd = fd;
  l->sockets++;
  if (rc == 0) {
    leg_connected(l);
    return;
  }
  if (err == EINPROGRESS) {
    l->conn = CONN_CONNECTING;
    return;
  }
  if (err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH) {
    probe_fail(p, TF_ENET, 0, NULL, "%s%s over %s is unreachable: %s", l->who, p->server, transport_name(p->mode),
               strerror(err));
    return;
  }
  leg_fail_net(l, err, "cannot connect to");
}

/* ---- requests ---- */

static int leg_mint(leg *l)
{
  probe *p = l->p;
  if (l->username) return 0;
  const tf_probe_options *o = &p->opts->o;
  int64_t now = o->now ? o->now : (int64_t)time(NULL);
  char user[512];
  /* the peer allocation uses its own user, so a per-user quota of 1 does not refuse it */
  snprintf(user, sizeof(user), "%s%s", o->user, l == &p->legs[1] ? PROBE_PEER_SUFFIX : "");
  tf_err rc = tf_cred_mint(&l->username, &l->password, o->secret, user, now + o->ttl_s, o->separator);
  if (rc < 0) {
    if (rc == TF_ENOMEM) p->fatal = TF_ENOMEM;
    probe_fail(p, TF_ERROR, 0, NULL, "%scannot mint the credential: %s", l->who, tf_error_last()->message);
    return -1;
  }
  return 0;
}

static int leg_set_text(char **slot, const tf_stun_msg *m, uint16_t type)
{
  char *v = NULL;
  if (tf_stun_msg_text(&v, m, type) < 0) return -1;
  free(*slot);
  *slot = strdup(v);
  tf_free(v);
  return *slot ? 0 : -1;
}

/* Build the request of kind l->req with a new transaction id and send it. */
static void leg_send_request(leg *l, double now)
{
  probe *p = l->p;
  const tf_probe_options *o = &p->opts->o;
  tf_stun_msg *m = NULL;
  tf_err rc = tf_stun_msg_new(&m, method_of(l->req), TF_STUN_REQUEST, NULL);
  if (rc == TF_OK && l->req == REQ_ALLOCATE) {
    rc = tf_stun_msg_add_u32(m, TF_STUN_ATTR_REQUESTED_TRANSPORT, 17u << 24);
    if (rc == TF_OK && o->family)
      rc = tf_stun_msg_add_u32(m, TF_STUN_ATTR_REQUESTED_ADDRESS_FAMILY,
                               (o->family == TF_AF_INET6 ? 0x02u : 0x01u) << 24);
    if (rc == TF_OK && o->lifetime_s) rc = tf_stun_msg_add_u32(m, TF_STUN_ATTR_LIFETIME, o->lifetime_s);
  } else if (rc == TF_OK && l->req == REQ_REFRESH) {
    rc = tf_stun_msg_add_u32(m, TF_STUN_ATTR_LIFETIME, l->req_lifetime);
  } else if (rc == TF_OK && l->req == REQ_CHANNEL) {
    rc = tf_stun_msg_add_u32(m, TF_STUN_ATTR_CHANNEL_NUMBER, (uint32_t)PROBE_CHANNEL << 16);
    if (rc == TF_OK) rc = tf_stun_msg_add_xor_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, &l->peer, l->peer_port);
  } else if (rc == TF_OK && l->req == REQ_PERMISSION) {
    rc = tf_stun_msg_add_xor_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, &l->peer, l->peer_port);
  }
  if (rc == TF_OK && (l->req == REQ_ALLOCATE || l->req == REQ_REFRESH))
    rc = tf_stun_msg_add(m, TF_STUN_ATTR_SOFTWARE, PROBE_SOFTWARE, strlen(PROBE_SOFTWARE));
  l->authed = l->have_key;
  if (rc == TF_OK && l->authed) {
    rc = tf_stun_msg_add(m, TF_STUN_ATTR_USERNAME, l->username, strlen(l->username));
    if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_REALM, l->realm, strlen(l->realm));
    if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_NONCE, l->nonce, strlen(l->nonce));
    if (rc == TF_OK) rc = tf_stun_msg_add_integrity(m, l->key, sizeof(l->key));
  }
  if (rc == TF_OK) rc = tf_stun_msg_add_fingerprint(m);
  if (rc < 0) {
    if (rc == TF_ENOMEM) p->fatal = TF_ENOMEM;
    probe_fail(p, TF_ERROR, 0, NULL, "%scannot encode %s: %s", l->who, method_name(l->req),
               tf_error_last()->message);
    tf_stun_msg_free(m);
    return;
  }
  size_t len = 0;
  const uint8_t *bytes = tf_stun_msg_bytes(m, &len);
  memcpy(l->msg, bytes, len);
  l->msg_len = len;
  memcpy(l->tid, tf_stun_msg_tid(m), TF_STUN_TID_SIZE);
  tf_stun_msg_free(m);
  l->sends = 1;
  l->rto = o->rto_ms;
  l->next_send = now + l->rto;
  l->give_up = 0;
  l->malformed[0] = '\0';
  leg_write(l, l->msg, l->msg_len);
}

/* Start a transaction of @p kind (l->peer / l->req_lifetime set by the caller). */
static void leg_request(leg *l, int kind, double now)
{
  l->req = kind;
  l->stale = 0;
  leg_send_request(l, now);
}

/* Send bytes that are not a transaction (ChannelData, Send): resent on the
 * UDP schedule until the other leg sees them. */
static void leg_send_data(leg *l, const uint8_t *data, size_t len, double now)
{
  memcpy(l->msg, data, len);
  l->msg_len = len;
  l->req = REQ_DATA;
  l->sends = 1;
  l->rto = l->p->opts->o.rto_ms;
  l->next_send = now + l->rto;
  l->give_up = 0;
  leg_write(l, l->msg, l->msg_len);
}

static void leg_allocate(leg *l, double now)
{
  if (leg_mint(l) < 0) return;
  l->req_lifetime = 0;
  leg_request(l, REQ_ALLOCATE, now);
}

/* Fire-and-forget Refresh(0) when a failure leaves an allocation behind
 * (on TCP/TLS closing the connection ends it anyway). */
static void leg_abandon(leg *l)
{
  if (!l->allocated || l->released || l->conn != CONN_READY || !l->have_key) return;
  l->released = 1;
  l->req_lifetime = 0;
  l->req = REQ_REFRESH;
  l->authed = 0;
  tf_stun_msg *m = NULL;
  tf_err rc = tf_stun_msg_new(&m, TF_STUN_REFRESH, TF_STUN_REQUEST, NULL);
  if (rc == TF_OK) rc = tf_stun_msg_add_u32(m, TF_STUN_ATTR_LIFETIME, 0);
  if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_USERNAME, l->username, strlen(l->username));
  if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_REALM, l->realm, strlen(l->realm));
  if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_NONCE, l->nonce, strlen(l->nonce));
  if (rc == TF_OK) rc = tf_stun_msg_add_integrity(m, l->key, sizeof(l->key));
  if (rc == TF_OK) rc = tf_stun_msg_add_fingerprint(m);
  if (rc == TF_OK) {
    size_t len = 0;
    const uint8_t *bytes = tf_stun_msg_bytes(m, &len);
    if (l->p->mode == TF_URI_MODE_UDP) {
      ssize_t n = send(l->fd, bytes, len, MSG_NOSIGNAL);
      (void)n;
    } else if (l->p->mode == TF_URI_MODE_TCP && l->tx_len == 0) {
      ssize_t n = send(l->fd, bytes, len, MSG_NOSIGNAL);
      (void)n;
    }
  }
  tf_stun_msg_free(m);
  l->req = REQ_NONE;
}

static void probe_release_all(probe *p)
{
  for (int i = 0; i < p->nlegs; i++) {
    leg *l = &p->legs[i];
    leg_abandon(l);
    leg_close(l);
  }
}

/* ---- the phases ---- */

static void probe_succeed(probe *p)
{
  stage_end(p);
  p->res->stage = TF_PROBE_STAGE_DONE;
  p->stage = TF_PROBE_STAGE_DONE;
  p->res->status = TF_OK;
  p->finished = 1;
}

static void probe_verify(probe *p)
{
  const popts *c = p->opts;
  leg *a = &p->legs[0];
  stage_begin(p, TF_PROBE_STAGE_VERIFY);
  char got[TF_ADDR_STRLEN] = "?", want[TF_ADDR_STRLEN] = "?";
  tf_addr_format(got, sizeof(got), &a->relayed);
  if (c->has_expect && tf_addr_compare(&a->relayed, &c->expect) != 0) {
    tf_addr_format(want, sizeof(want), &c->expect);
    probe_fail(p, TF_ERROR, 0, NULL, "relayed address %s is not the expected %s", got, want);
    return;
  }
  if (c->o.expect_port_start &&
      (a->relayed_port < c->o.expect_port_start || a->relayed_port > c->o.expect_port_end)) {
    probe_fail(p, TF_ERROR, 0, NULL, "relayed port %u is outside %u-%u", a->relayed_port, c->o.expect_port_start,
               c->o.expect_port_end);
    return;
  }
  if (c->o.family && a->relayed.family != c->o.family) {
    probe_fail(p, TF_ERROR, 0, NULL, "relayed address %s is not %s as requested", got,
               c->o.family == TF_AF_INET6 ? "IPv6" : "IPv4");
    return;
  }
}

static void probe_after_data(probe *p, double now);

static void probe_next(probe *p, double now)
{
  leg *a = &p->legs[0], *b = &p->legs[1];
  switch (p->phase) {
  case PH_A_OPEN:
    p->phase = PH_A_ALLOC;
    stage_begin(p, TF_PROBE_STAGE_ALLOCATE);
    leg_allocate(a, now);
    return;
  case PH_A_ALLOC:
    p->res->has_relayed = 1;
    p->res->relayed = a->relayed;
    p->res->relayed_port = a->relayed_port;
    p->res->has_mapped = a->has_mapped;
    p->res->mapped = a->mapped;
    p->res->mapped_port = a->mapped_port;
    p->res->lifetime = a->lifetime;
    probe_verify(p);
    if (p->finished) return;
    if (p->opts->o.peer_check) {
      p->phase = PH_B_OPEN;
      p->nlegs = 2;
      stage_begin(p, TF_PROBE_STAGE_CONNECT);
      leg_open(b);
      return;
    }
    probe_after_data(p, now);
    return;
  case PH_B_OPEN:
    p->phase = PH_B_ALLOC;
    stage_begin(p, TF_PROBE_STAGE_ALLOCATE);
    leg_allocate(b, now);
    return;
  case PH_B_ALLOC:
    if (b->relayed.family != a->relayed.family) {
      stage_begin(p, TF_PROBE_STAGE_PERMISSION);
      probe_fail(p, TF_ERROR, 0, NULL, "the peer allocation got a relayed address of another family");
      return;
    }
    p->phase = PH_A_PERM;
    stage_begin(p, TF_PROBE_STAGE_PERMISSION);
    a->peer = b->relayed;
    a->peer_port = b->relayed_port;
    leg_request(a, REQ_PERMISSION, now);
    return;
  case PH_A_PERM:
    p->phase = PH_B_PERM;
    b->peer = a->relayed;
    b->peer_port = a->relayed_port;
    leg_request(b, REQ_PERMISSION, now);
    return;
  case PH_B_PERM:
    p->phase = PH_A_CHAN;
    stage_begin(p, TF_PROBE_STAGE_CHANNEL);
    a->peer = b->relayed;
    a->peer_port = b->relayed_port;
    leg_request(a, REQ_CHANNEL, now);
    return;
  case PH_A_CHAN: {
    p->phase = PH_DATA_AB;
    stage_begin(p, TF_PROBE_STAGE_DATA);
    if (RAND_bytes(p->payload[0], PROBE_PAYLOAD) != 1 || RAND_bytes(p->payload[1], PROBE_PAYLOAD) != 1) {
      probe_fail(p, TF_ERROR, 0, NULL, "no random bytes for the data check");
      return;
    }
    uint8_t frame[PROBE_PAYLOAD + 8];
    size_t n = 0;
    if (tf_stun_channel_data_encode(frame, sizeof(frame), &n, PROBE_CHANNEL, p->payload[0], PROBE_PAYLOAD,
                                    p->mode != TF_URI_MODE_UDP) < 0) {
      probe_fail(p, TF_ERROR, 0, NULL, "cannot encode ChannelData: %s", tf_error_last()->message);
      return;
    }
    leg_send_data(a, frame, n, now);
    return;
  }
  case PH_DATA_AB: {
    p->phase = PH_DATA_BA;
    a->req = REQ_NONE; /* stop resending the ChannelData */
    tf_stun_msg *m = NULL;
    tf_err rc = tf_stun_msg_new(&m, TF_STUN_SEND, TF_STUN_INDICATION, NULL);
    if (rc == TF_OK) rc = tf_stun_msg_add_xor_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, &a->relayed, a->relayed_port);
    if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_DATA, p->payload[1], PROBE_PAYLOAD);
    if (rc == TF_OK) rc = tf_stun_msg_add_fingerprint(m);
    if (rc < 0) {
      tf_stun_msg_free(m);
      probe_fail(p, TF_ERROR, 0, NULL, "cannot encode a Send indication: %s", tf_error_last()->message);
      return;
    }
    size_t len = 0;
    const uint8_t *bytes = tf_stun_msg_bytes(m, &len);
    uint8_t copy[TF_STUN_MAX_MESSAGE];
    memcpy(copy, bytes, len);
    tf_stun_msg_free(m);
    leg_send_data(b, copy, len, now);
    return;
  }
  case PH_DATA_BA:
    b->req = REQ_NONE;
    probe_after_data(p, now);
    return;
  case PH_RELEASE_B:
    if (p->opts->o.release && !p->keep) {
      p->phase = PH_RELEASE_A;
      a->req_lifetime = 0;
      leg_request(a, REQ_REFRESH, now);
      return;
    }
    p->phase = PH_HELD;
    probe_succeed(p);
    return;
  case PH_RELEASE_A:
    a->released = 1;
    p->phase = PH_DONE;
    probe_succeed(p);
    return;
  case PH_REFRESH:
    p->phase = PH_HELD;
    p->finished = 1;
    return;
  default:
    return;
  }
}

/* After the data check (or without it): release B, then A unless kept. */
static void probe_after_data(probe *p, double now)
{
  leg *a = &p->legs[0], *b = &p->legs[1];
  if (p->nlegs == 2 && b->allocated && !b->released) {
    p->phase = PH_RELEASE_B;
    stage_begin(p, TF_PROBE_STAGE_RELEASE);
    b->req_lifetime = 0;
    leg_request(b, REQ_REFRESH, now);
    return;
  }
  if (p->opts->o.release && !p->keep) {
    p->phase = PH_RELEASE_A;
    stage_begin(p, TF_PROBE_STAGE_RELEASE);
    a->req_lifetime = 0;
    leg_request(a, REQ_REFRESH, now);
    return;
  }
  p->phase = PH_HELD;
  probe_succeed(p);
}

static void probe_leg_ready(probe *p, leg *l, double now)
{
  if (p->phase == PH_A_OPEN || p->phase == PH_B_OPEN) {
    probe_next(p, now);
    return;
  }
  /* a new socket after 437: start the Allocate from scratch */
  if (p->phase == PH_A_ALLOC || p->phase == PH_B_ALLOC) leg_allocate(l, now);
}

/* ---- answers ---- */

static const char *code_meaning(int code)
{
  switch (code) {
  case 300: return "try alternate server (not followed)";
  case 400: return "bad request";
  case 401: return "unauthenticated";
  case 403: return "forbidden";
  case 420: return "unknown attribute";
  case 437: return "allocation mismatch";
  case 438: return "stale nonce";
  case 440: return "address family not supported";
  case 441: return "wrong credentials";
  case 442: return "unsupported transport protocol";
  case 443: return "peer address family mismatch";
  case 486: return "allocation quota reached";
  case 500: return "server error";
  case 508: return "insufficient capacity";
  default: return "error";
  }
}

static void leg_done(leg *l, double now)
{
  l->req = REQ_NONE;
  probe_next(l->p, now);
}

static void leg_on_success(leg *l, const tf_stun_msg *m, double now)
{
  probe *p = l->p;
  if (l->req == REQ_ALLOCATE) {
    if (tf_stun_msg_address(m, TF_STUN_ATTR_XOR_RELAYED_ADDRESS, 0, &l->relayed, &l->relayed_port) < 0) {
      probe_fail(p, TF_EPROTO, 0, NULL, "%sthe Allocate success has no usable XOR-RELAYED-ADDRESS: %s", l->who,
                 tf_error_last()->message);
      return;
    }
    l->has_mapped = tf_stun_msg_address(m, TF_STUN_ATTR_XOR_MAPPED_ADDRESS, 0, &l->mapped, &l->mapped_port) == 0;
    uint32_t lt = 0;
    if (tf_stun_msg_u32(m, TF_STUN_ATTR_LIFETIME, &lt) == 0) l->lifetime = lt;
    l->allocated = 1;
    l->released = 0;
    char ra[TF_ADDR_STRLEN + 8];
    fmt_addr(ra, sizeof(ra), &l->relayed, l->relayed_port);
    plog(p, TF_LOG_DEBUG, "%sallocated %s, lifetime %u s", l->who, ra, l->lifetime);
    leg_done(l, now);
    return;
  }
  if (l->req == REQ_REFRESH) {
    uint32_t lt = 0;
    if (l->req_lifetime == 0) {
      l->released = 1;
      l->lifetime = 0;
    } else if (tf_stun_msg_u32(m, TF_STUN_ATTR_LIFETIME, &lt) == 0) {
      l->lifetime = lt;
    }
    leg_done(l, now);
    return;
  }
  leg_done(l, now);
}

static void leg_on_error(leg *l, const tf_stun_msg *m, double now)
{
  probe *p = l->p;
  int code = 0;
  const char *reason = "";
  tf_stun_msg_error(m, &code, &reason);
  if (!reason) reason = "";
  const char *method = method_name(l->req);
  if (code == 401 && !l->authed) {
    /* the challenge: REALM and NONCE, then the same request with credentials */
    if (leg_set_text(&l->realm, m, TF_STUN_ATTR_REALM) < 0 || leg_set_text(&l->nonce, m, TF_STUN_ATTR_NONCE) < 0) {
      probe_fail(p, TF_EPROTO, code, reason, "%s%s: 401 without a usable REALM and NONCE", l->who, method);
      return;
    }
    if (leg_mint(l) < 0) return;
    if (tf_stun_long_term_key(l->key, l->username, l->realm, l->password) < 0) {
      probe_fail(p, TF_ERROR, 0, NULL, "%scannot compute the key: %s", l->who, tf_error_last()->message);
      return;
    }
    l->have_key = 1;
    plog(p, TF_LOG_DEBUG, "%s%s: 401 challenge, retrying with credentials", l->who, method);
    leg_send_request(l, now);
    return;
  }
  if (code == 438) {
    if (++l->stale > PROBE_MAX_STALE) {
      probe_fail(p, TF_ERROR, code, reason, "%s%s failed: 438 (stale nonce) %d times in a row", l->who, method,
                 l->stale);
      return;
    }
    int realm_changed = 0;
    char *old_realm = l->realm ? strdup(l->realm) : NULL;
    if (leg_set_text(&l->nonce, m, TF_STUN_ATTR_NONCE) < 0) {
      free(old_realm);
      probe_fail(p, TF_EPROTO, code, reason, "%s%s: 438 without a usable NONCE", l->who, method);
      return;
    }
    if (tf_stun_msg_find(m, TF_STUN_ATTR_REALM, NULL, NULL) == 0) {
      if (leg_set_text(&l->realm, m, TF_STUN_ATTR_REALM) < 0) {
        free(old_realm);
        probe_fail(p, TF_EPROTO, code, reason, "%s%s: 438 with an unusable REALM", l->who, method);
        return;
      }
      realm_changed = !old_realm || strcmp(old_realm, l->realm) != 0;
    }
    free(old_realm);
    if (!l->realm) {
      probe_fail(p, TF_EPROTO, code, reason, "%s%s: 438 without a REALM", l->who, method);
      return;
    }
    if (leg_mint(l) < 0) return;
    if (!l->have_key || realm_changed) {
      if (tf_stun_long_term_key(l->key, l->username, l->realm, l->password) < 0) {
        probe_fail(p, TF_ERROR, 0, NULL, "%scannot compute the key: %s", l->who, tf_error_last()->message);
        return;
      }
      l->have_key = 1;
    }
    plog(p, TF_LOG_DEBUG, "%s%s: 438, retrying with the new nonce", l->who, method);
    leg_send_request(l, now);
    return;
  }
  if (code == 437 && l->req == REQ_REFRESH && l->req_lifetime == 0) {
    /* already gone: released */
    l->released = 1;
    leg_done(l, now);
    return;
  }
  if (code == 437 && l->req == REQ_ALLOCATE) {
    if (l->sockets >= PROBE_MAX_SOCKETS) {
      probe_fail(p, TF_ERROR, code, reason, "%sAllocate failed: 437 (allocation mismatch) on %d sockets", l->who,
                 l->sockets);
      return;
    }
    plog(p, TF_LOG_DEBUG, "%sAllocate: 437, starting again on a new socket", l->who);
    /* from scratch: the nonce belongs to the old 5-tuple */
    free(l->nonce);
    l->nonce = NULL;
    l->have_key = 0;
    tf_crypto__wipe(l->key, sizeof(l->key));
    leg_open(l);
    return;
  }
  if (code == 401) {
    probe_fail(p, TF_EAUTH, code, reason,
               "%s%s failed: 401 after credentials: wrong secret, expired username or clock skew", l->who, method);
    return;
  }
  if (code == 403 && l->req == REQ_ALLOCATE) {
    p->res->draining = 1;
    probe_fail(p, TF_ERROR, code, reason, "%sAllocate refused with 403: the relay is draining", l->who);
    return;
  }
  probe_fail(p, TF_ERROR, code, reason, "%s%s failed: %d (%s)", l->who, method, code, code_meaning(code));
}

/* The first two bits of a STUN type give the class: 0b10 success, 0b11 error. */
static int raw_class(const uint8_t *data)
{
  unsigned type = ((unsigned)data[0] << 8) | data[1];
  return (int)(((type >> 7) & 2u) | ((type >> 4) & 1u));
}

static void leg_on_response(leg *l, const uint8_t *data, size_t len, double now)
{
  probe *p = l->p;
  const uint8_t *key = l->authed ? l->key : NULL;
  tf_stun_msg *m = NULL;
  tf_err rc = tf_stun_validate_response(&m, data, len, l->tid, method_of(l->req), key, key ? sizeof(l->key) : 0);
  if (rc == TF_EAUTH && raw_class(data) == TF_STUN_ERROR) {
    /* an error without a valid MI: report its code, never act on a success without one */
    plog(p, TF_LOG_DEBUG, "%s%s: error response without valid MESSAGE-INTEGRITY: %s", l->who,
         method_name(l->req), tf_error_last()->message);
    rc = tf_stun_validate_response(&m, data, len, l->tid, method_of(l->req), NULL, 0);
  }
  if (rc == TF_ENOMEM) {
    p->fatal = TF_ENOMEM;
    probe_fail(p, TF_ERROR, 0, NULL, "out of memory");
    return;
  }
  if (rc < 0) {
    const char *why = tf_error_last()->message;
    plog(p, TF_LOG_DEBUG, "%sdropped an answer to %s: %s", l->who, method_name(l->req), why);
    if (rc == TF_EAUTH) {
      /* as if never received: keep waiting (and retransmitting on UDP) */
      snprintf(l->malformed, sizeof(l->malformed), "%s", why);
      return;
    }
    if (p->mode != TF_URI_MODE_UDP) {
      /* no retransmission on a stream: this was the answer */
      probe_fail(p, TF_EPROTO, 0, NULL, "%smalformed answer to %s: %s", l->who, method_name(l->req), why);
      return;
    }
    snprintf(l->malformed, sizeof(l->malformed), "%s", why);
    return;
  }
  if (tf_stun_msg_class(m) == TF_STUN_SUCCESS) leg_on_success(l, m, now);
  else leg_on_error(l, m, now);
  tf_stun_msg_free(m);
}

static void leg_on_channel_data(leg *l, const uint8_t *data, size_t len, double now)
{
  probe *p = l->p;
  uint16_t ch = 0;
  const uint8_t *d = NULL;
  size_t dl = 0;
  if (tf_stun_channel_data_decode(data, len, &ch, &d, &dl) < 0) {
    plog(p, TF_LOG_DEBUG, "%sdropped malformed ChannelData: %s", l->who, tf_error_last()->message);
    return;
  }
  if (p->phase != PH_DATA_BA || l != &p->legs[0]) {
    plog(p, TF_LOG_DEBUG, "%signored ChannelData on channel 0x%04x", l->who, ch);
    return;
  }
  if (ch != PROBE_CHANNEL) {
    probe_fail(p, TF_ERROR, 0, NULL, "data from the peer arrived on channel 0x%04x, not 0x%04x", ch, PROBE_CHANNEL);
    return;
  }
  if (dl != PROBE_PAYLOAD || memcmp(d, p->payload[1], PROBE_PAYLOAD) != 0) {
    probe_fail(p, TF_ERROR, 0, NULL, "ChannelData from the peer carried %zu bytes that are not the payload sent", dl);
    return;
  }
  probe_next(p, now);
}

static void leg_on_indication(leg *l, const tf_stun_msg *m, double now)
{
  probe *p = l->p;
  if (tf_stun_msg_method(m) != TF_STUN_DATA) {
    plog(p, TF_LOG_DEBUG, "%signored an indication of method 0x%03x", l->who, tf_stun_msg_method(m));
    return;
  }
  if (p->phase != PH_DATA_AB || l != &p->legs[1]) {
    plog(p, TF_LOG_DEBUG, "%signored a Data indication", l->who);
    return;
  }
  leg *a = &p->legs[0];
  tf_addr from;
  uint16_t from_port = 0;
  const uint8_t *d = NULL;
  size_t dl = 0;
  if (tf_stun_msg_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, 0, &from, &from_port) < 0 ||
      tf_stun_msg_find(m, TF_STUN_ATTR_DATA, &d, &dl) < 0) {
    probe_fail(p, TF_EPROTO, 0, NULL, "a Data indication without XOR-PEER-ADDRESS or DATA");
    return;
  }
  if (tf_addr_compare(&from, &a->relayed) != 0 || from_port != a->relayed_port) {
    char got[TF_ADDR_STRLEN + 8], want[TF_ADDR_STRLEN + 8];
    fmt_addr(got, sizeof(got), &from, from_port);
    fmt_addr(want, sizeof(want), &a->relayed, a->relayed_port);
    probe_fail(p, TF_ERROR, 0, NULL, "the Data indication came from %s, not from the relayed address %s", got,
               want);
    return;
  }
  if (dl != PROBE_PAYLOAD || memcmp(d, p->payload[0], PROBE_PAYLOAD) != 0) {
    probe_fail(p, TF_ERROR, 0, NULL, "the Data indication carried %zu bytes that are not the payload sent", dl);
    return;
  }
  probe_next(p, now);
}

/* One datagram or one stream frame from the server. */
static void leg_on_packet(leg *l, const uint8_t *data, size_t len, double now)
{
  probe *p = l->p;
  /* several frames may come in one read, with our answers sent in between: a fresh clock for each */
  now = now_ms();
  if (len >= 4 && (data[0] & 0xC0) == 0x40) {
    leg_on_channel_data(l, data, len, now);
    return;
  }
  if (len < 20 || (data[0] & 0xC0) != 0) {
    plog(p, TF_LOG_DEBUG, "%sdropped %zu bytes that are neither STUN nor ChannelData", l->who, len);
    return;
  }
  if (l->req != REQ_NONE && l->req != REQ_DATA && memcmp(data + 8, l->tid, TF_STUN_TID_SIZE) == 0) {
    leg_on_response(l, data, len, now);
    return;
  }
  tf_stun_msg *m = NULL;
  tf_err rc = tf_stun_decode(&m, data, len);
  if (rc < 0) {
    if (rc == TF_ENOMEM) p->fatal = TF_ENOMEM;
    plog(p, TF_LOG_DEBUG, "%sdropped a malformed message: %s", l->who, tf_error_last()->message);
    return;
  }
  if (tf_stun_msg_class(m) == TF_STUN_INDICATION) leg_on_indication(l, m, now);
  else plog(p, TF_LOG_DEBUG, "%sdropped a message for another transaction", l->who);
  tf_stun_msg_free(m);
}

/* Hand every complete frame in rx to leg_on_packet. */
static void leg_frames(leg *l, double now)
{
  probe *p = l->p;
  size_t off = 0;
  unsigned gen = l->gen;
  while (!p->finished && l->gen == gen && off < l->rx_len) {
    size_t fl = 0;
    tf_err rc = tf_stun_frame_length(l->rx + off, l->rx_len - off, &fl);
    if (rc == TF_EBUFS) break;
    if (rc < 0) {
      probe_fail(p, TF_EPROTO, 0, NULL, "%sframing error on the stream from %s: %s", l->who, p->server,
                 tf_error_last()->message);
      return;
    }
    if (fl > TF_STUN_MAX_MESSAGE + 4) {
      probe_fail(p, TF_EPROTO, 0, NULL, "%sa frame of %zu bytes from %s is over the limit of %d", l->who, fl,
                 p->server, TF_STUN_MAX_MESSAGE);
      return;
    }
    if (fl > l->rx_len - off) break;
    leg_on_packet(l, l->rx + off, fl, now);
    off += fl;
  }
  if (p->finished || l->gen != gen) return;
  memmove(l->rx, l->rx + off, l->rx_len - off);
  l->rx_len -= off;
}

static void leg_read(leg *l, double now)
{
  probe *p = l->p;
  unsigned gen = l->gen;
  if (p->mode == TF_URI_MODE_UDP) {
    for (int i = 0; i < 64 && !p->finished && l->gen == gen; i++) {
      ssize_t n = recv(l->fd, l->rx, sizeof(l->rx), MSG_TRUNC);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == ECONNREFUSED) {
          probe_fail(p, TF_ENET, 0, NULL,
                     "%s%s over udp is unreachable: connection refused (nothing listens there)", l->who, p->server);
          return;
        }
        leg_fail_net(l, errno, "cannot receive from");
        return;
      }
      if ((size_t)n > sizeof(l->rx)) {
        plog(p, TF_LOG_DEBUG, "%sdropped a datagram of %zd bytes (too large)", l->who, n);
        continue;
      }
      leg_on_packet(l, l->rx, (size_t)n, now);
    }
    return;
  }
  for (int i = 0; i < 64 && !p->finished && l->gen == gen; i++) {
    uint8_t buf[4096];
    uint8_t *dst = l->ssl ? buf : l->rx + l->rx_len;
    size_t room = l->ssl ? sizeof(buf) : sizeof(l->rx) - l->rx_len;
    if (room == 0) {
      probe_fail(p, TF_EPROTO, 0, NULL, "%sthe stream from %s holds a frame too large", l->who, p->server);
      return;
    }
    ssize_t n = recv(l->fd, dst, room, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      leg_fail_net(l, errno, "connection to");
      return;
    }
    if (n == 0) {
      probe_fail(p, TF_ENET, 0, NULL, "%s%s closed the connection", l->who, p->server);
      return;
    }
    if (!l->ssl) {
      l->rx_len += (size_t)n;
      leg_frames(l, now);
      continue;
    }
    if (BIO_write(l->rbio, buf, (int)n) != (int)n) {
      p->fatal = TF_ENOMEM;
      probe_fail(p, TF_ERROR, 0, NULL, "out of memory");
      return;
    }
    if (l->conn == CONN_TLS) {
      tls_step(l);
      if (p->finished || l->gen != gen || l->conn != CONN_READY) continue;
    }
    /* plaintext: as much as the rx buffer takes, frame by frame */
    for (;;) {
      size_t space = sizeof(l->rx) - l->rx_len;
      if (space == 0) {
        probe_fail(p, TF_EPROTO, 0, NULL, "%sthe stream from %s holds a frame too large", l->who, p->server);
        return;
      }
      ERR_clear_error();
      int r = SSL_read(l->ssl, l->rx + l->rx_len, (int)space);
      if (r <= 0) {
        int e = SSL_get_error(l->ssl, r);
        leg_flush(l);
        if (p->finished) return;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
        if (e == SSL_ERROR_ZERO_RETURN) {
          probe_fail(p, TF_ENET, 0, NULL, "%s%s closed the TLS connection", l->who, p->server);
          return;
        }
        char ebuf[256] = "no detail";
        unsigned long ec = ERR_peek_last_error();
        if (ec) ERR_error_string_n(ec, ebuf, sizeof(ebuf));
        ERR_clear_error();
        probe_fail(p, TF_EPROTO, 0, NULL, "%sTLS error on the connection to %s: %s", l->who, p->server, ebuf);
        return;
      }
      l->rx_len += (size_t)r;
      leg_frames(l, now);
      if (p->finished || l->gen != gen) return;
    }
  }
}

static void leg_on_event(leg *l, short revents, double now)
{
  probe *p = l->p;
  if (l->conn == CONN_CONNECTING) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return;
    int err = 0;
    socklen_t el = sizeof(err);
    if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
    if (err) {
      probe_fail(p, TF_ENET, 0, NULL, "%s%s over %s is unreachable: %s", l->who, p->server,
                 transport_name(p->mode), strerror(err));
      return;
    }
    leg_connected(l);
    return;
  }
  unsigned gen = l->gen;
  if (revents & POLLOUT) leg_flush(l);
  if (p->finished || l->gen != gen) return;
  if (revents & (POLLIN | POLLERR | POLLHUP)) leg_read(l, now);
}

/* Retransmissions (UDP) and the deadline. */
static void probe_timers(probe *p, double now)
{
  if (p->finished) return;
  leg *busy = NULL;
  for (int i = 0; i < p->nlegs; i++) {
    leg *l = &p->legs[i];
    if (l->req == REQ_NONE || l->fd < 0 || l->conn != CONN_READY) continue;
    busy = l;
    if (p->mode != TF_URI_MODE_UDP) continue;
    if (l->give_up > 0 && now >= l->give_up) {
      if (l->req == REQ_DATA)
        probe_fail(p, TF_ERROR, 0, NULL, "%sthe data sent through the relay did not arrive: %d sends", l->who,
                   l->sends);
      else if (l->malformed[0])
        probe_fail(p, TF_EPROTO, 0, NULL, "%s%s: only unusable answers from %s after %d sends (last: %s)", l->who,
                   method_name(l->req), p->server, l->sends, l->malformed);
      else
        probe_fail(p, TF_ETIMEOUT, 0, NULL, "%sno answer to %s from %s over udp: timed out after %d sends", l->who,
                   method_name(l->req), p->server, l->sends);
      return;
    }
    if (l->give_up == 0 && now >= l->next_send) {
      leg_write(l, l->msg, l->msg_len);
      if (p->finished) return;
      l->sends++;
      if (l->sends >= PROBE_RC) {
        l->give_up = now + (double)PROBE_RM * p->opts->o.rto_ms;
      } else {
        l->rto *= 2;
        l->next_send = now + l->rto;
      }
    }
  }
  if (now < p->deadline) return;
  if (busy && busy->req == REQ_DATA) {
    probe_fail(p, TF_ERROR, 0, NULL, "the data sent through the relay did not arrive within %d ms",
               p->opts->o.timeout_ms);
  } else if (busy && busy->malformed[0]) {
    probe_fail(p, TF_EPROTO, 0, NULL, "%s%s: only unusable answers from %s in %d ms (last: %s)", busy->who,
               method_name(busy->req), p->server, p->opts->o.timeout_ms, busy->malformed);
  } else if (busy && p->mode == TF_URI_MODE_UDP) {
    probe_fail(p, TF_ETIMEOUT, 0, NULL, "%sno answer to %s from %s over udp: timed out after %d sends (%d ms)",
               busy->who, method_name(busy->req), p->server, busy->sends, p->opts->o.timeout_ms);
  } else if (busy) {
    probe_fail(p, TF_ETIMEOUT, 0, NULL, "%sno answer to %s from %s over %s: timed out after %d ms", busy->who,
               method_name(busy->req), p->server, transport_name(p->mode), p->opts->o.timeout_ms);
  } else {
    probe_fail(p, TF_ETIMEOUT, 0, NULL, "%s over %s: stage %s timed out after %d ms", p->server,
               transport_name(p->mode), tf_probe_stage_name(p->stage), p->opts->o.timeout_ms);
  }
}

/* Earliest time any timer of @p p fires. */
static double probe_next_timer(const probe *p)
{
  double t = p->deadline;
  if (p->mode != TF_URI_MODE_UDP) return t;
  for (int i = 0; i < p->nlegs; i++) {
    const leg *l = &p->legs[i];
    if (l->req == REQ_NONE || l->fd < 0 || l->conn != CONN_READY) continue;
    double lt = l->give_up > 0 ? l->give_up : l->next_send;
    if (lt < t) t = lt;
  }
  return t;
}

/* ---- creating and starting probes ---- */

static tf_err probe_new(probe **out, popts *c, tf_uri *uri)
{
  probe *p = calloc(1, sizeof(*p));
  if (!p) {
    popts_free(c);
    tf_uri_free(uri);
    return tf_error__nomem();
  }
  p->opts = c;
  p->uri = uri;
  p->mode = tf_uri_open_mode(uri);
  p->res = result_new(c->o.uri);
  if (!p->res) {
    probe_free(p);
    return tf_error__nomem();
  }
  for (int i = 0; i < 2; i++) {
    p->legs[i].p = p;
    p->legs[i].fd = -1;
    p->legs[i].who = i == 0 ? "" : "peer ";
  }
  p->nlegs = 1;
  *out = p;
  return TF_OK;
}

/* Resolve the host (IP literals directly; names with getaddrinfo, which blocks). */
static int probe_resolve(probe *p)
{
  const char *host = tf_uri_host(p->uri);
  uint16_t port = tf_uri_port(p->uri);
  tf_uri_host_type kind = tf_uri_host_kind(p->uri);
  memset(&p->sa, 0, sizeof(p->sa));
  if (kind == TF_URI_HOST_IPV4 || kind == TF_URI_HOST_IPV6) {
    tf_addr a;
    if (tf_addr_parse(&a, host) < 0) {
      probe_fail(p, TF_ENET, 0, NULL, "cannot use the address %s", host);
      return -1;
    }
    if (a.family == TF_AF_INET) {
      struct sockaddr_in *s4 = (struct sockaddr_in *)&p->sa;
      s4->sin_family = AF_INET;
      s4->sin_port = htons(port);
      memcpy(&s4->sin_addr, a.bytes, 4);
      p->salen = sizeof(*s4);
    } else {
      struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&p->sa;
      s6->sin6_family = AF_INET6;
      s6->sin6_port = htons(port);
      memcpy(&s6->sin6_addr, a.bytes, 16);
      p->salen = sizeof(*s6);
    }
    fmt_addr(p->server, sizeof(p->server), &a, port);
    return 0;
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = p->mode == TF_URI_MODE_UDP ? SOCK_DGRAM : SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  char service[8];
  snprintf(service, sizeof(service), "%u", port);
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0 || !res) {
    probe_fail(p, TF_ENET, 0, NULL, "cannot resolve %s: %s", host,
               rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    if (res) freeaddrinfo(res);
    return -1;
  }
  memcpy(&p->sa, res->ai_addr, res->ai_addrlen);
  p->salen = (socklen_t)res->ai_addrlen;
  tf_addr a;
  memset(&a, 0, sizeof(a));
  if (res->ai_family == AF_INET) {
    a.family = TF_AF_INET;
    memcpy(a.bytes, &((struct sockaddr_in *)res->ai_addr)->sin_addr, 4);
  } else {
    a.family = TF_AF_INET6;
    memcpy(a.bytes, &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr, 16);
  }
  freeaddrinfo(res);
  char at[TF_ADDR_STRLEN + 8];
  fmt_addr(at, sizeof(at), &a, port);
  snprintf(p->server, sizeof(p->server), "%s", at);
  return 0;
}

static int probe_tls_context(probe *p)
{
  ERR_clear_error();
  p->ctx = SSL_CTX_new(TLS_client_method());
  if (!p->ctx) {
    probe_fail(p, TF_ERROR, 0, NULL, "cannot create a TLS context");
    return -1;
  }
  /* coturn 4.6.1 speaks TLS 1.2 only; newer ones 1.3 */
  SSL_CTX_set_min_proto_version(p->ctx, TLS1_2_VERSION);
  if (!p->opts->o.insecure) {
    int ok = p->opts->o.ca_file ? SSL_CTX_load_verify_locations(p->ctx, p->opts->o.ca_file, NULL)
                                : SSL_CTX_set_default_verify_paths(p->ctx);
    if (!ok) {
      ERR_clear_error();
      probe_fail(p, TF_ERROR, 0, NULL, "cannot load the CA certificates%s%s", p->opts->o.ca_file ? " of " : "",
                 p->opts->o.ca_file ? p->opts->o.ca_file : "");
      return -1;
    }
  }
  return 0;
}

static void probe_start(probe *p)
{
  double now = now_ms();
  p->deadline = now + p->opts->o.timeout_ms;
  p->stage = TF_PROBE_STAGE_RESOLVE;
  p->stage_t0 = now;
  stage_begin(p, TF_PROBE_STAGE_RESOLVE);
  if (probe_resolve(p) < 0) return;
  p->phase = PH_A_OPEN;
  stage_begin(p, TF_PROBE_STAGE_CONNECT);
  leg_open(&p->legs[0]);
}

/* ---- the event loop ---- */

typedef struct loop {
  struct pollfd *pfd;
  struct {
    leg *l;
    unsigned gen;
  } *ref;
  size_t cap;
} loop;

static void loop_free(loop *L)
{
  free(L->pfd);
  free(L->ref);
  memset(L, 0, sizeof(*L));
}

/* One poll() round over @p n probes: events, then timers. */
static tf_err loop_once(loop *L, probe **ps, size_t n)
{
  size_t need = 2 * n;
  if (need > L->cap) {
    struct pollfd *pfd = realloc(L->pfd, need * sizeof(*pfd));
    if (!pfd) return tf_error__nomem();
    L->pfd = pfd;
    void *ref = realloc(L->ref, need * sizeof(*L->ref));
    if (!ref) return tf_error__nomem();
    L->ref = ref;
    L->cap = need;
  }
  double now = now_ms();
  double next = now + PROBE_POLL_MAX_MS;
  size_t nfds = 0;
  for (size_t i = 0; i < n; i++) {
    probe *p = ps[i];
    if (p->finished) continue;
    double t = probe_next_timer(p);
    if (t < next) next = t;
    for (int k = 0; k < p->nlegs; k++) {
      leg *l = &p->legs[k];
      if (l->fd < 0) continue;
      L->pfd[nfds].fd = l->fd;
      L->pfd[nfds].events = (short)(POLLIN | (leg_wants_write(l) ? POLLOUT : 0));
      L->pfd[nfds].revents = 0;
      L->ref[nfds].l = l;
      L->ref[nfds].gen = l->gen;
      nfds++;
    }
  }
  double wait = next - now;
  int timeout = wait <= 0 ? 0 : (int)ceil(wait);
  int r = poll(L->pfd, nfds, timeout);
  if (r < 0 && errno != EINTR) return tf_error__set(TF_EIO, "poll: %s", strerror(errno));
  now = now_ms();
  for (size_t i = 0; r > 0 && i < nfds; i++) {
    leg *l = L->ref[i].l;
    if (!L->pfd[i].revents || l->p->finished || l->gen != L->ref[i].gen || l->fd != L->pfd[i].fd) continue;
    leg_on_event(l, L->pfd[i].revents, now);
  }
  now = now_ms();
  for (size_t i = 0; i < n; i++) probe_timers(ps[i], now);
  for (size_t i = 0; i < n; i++)
    if (ps[i]->fatal) return tf_error__nomem();
  return TF_OK;
}

/* Run one probe (already started) until it finishes. */
static tf_err probe_drive(probe *p)
{
  loop L;
  memset(&L, 0, sizeof(L));
  tf_err rc = TF_OK;
  while (!p->finished && rc == TF_OK) rc = loop_once(&L, &p, 1);
  loop_free(&L);
  if (rc == TF_OK && p->fatal) rc = tf_error__nomem();
  return rc;
}

tf_err tf_probe_run(tf_probe_result **out, const tf_probe_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(opts);
  popts *c = NULL;
  tf_uri *uri = NULL;
  tf_err rc = popts_new(&c, opts, &uri);
  if (rc < 0) return rc;
  probe *p = NULL;
  rc = probe_new(&p, c, uri);
  if (rc < 0) return rc;
  probe_start(p);
  rc = probe_drive(p);
  if (rc < 0) {
    probe_free(p);
    return rc;
  }
  *out = p->res;
  p->res = NULL;
  probe_free(p);
  return TF_OK;
}

/* ---- sets ---- */

struct tf_probe_set {
  unsigned concurrency;
  popts **queued;
  tf_uri **uris;
  tf_probe_result **results;
  size_t count, cap;
};

tf_err tf_probe_set_new(tf_probe_set **out, unsigned int concurrency)
{
  TF_ASSERT_ARG(out);
  if (concurrency == 0) return tf_error__set(TF_EINVALID, "concurrency: must be at least 1");
  tf_probe_set *s = calloc(1, sizeof(*s));
  if (!s) return tf_error__nomem();
  s->concurrency = concurrency;
  *out = s;
  return TF_OK;
}

tf_err tf_probe_set_add(tf_probe_set *set, const tf_probe_options *opts)
{
  TF_ASSERT_ARG(set);
  TF_ASSERT_ARG(opts);
  if (set->count == set->cap) {
    size_t cap = set->cap ? set->cap * 2 : 16;
    popts **q = realloc(set->queued, cap * sizeof(*q));
    if (!q) return tf_error__nomem();
    set->queued = q;
    tf_uri **u = realloc(set->uris, cap * sizeof(*u));
    if (!u) return tf_error__nomem();
    set->uris = u;
    tf_probe_result **r = realloc(set->results, cap * sizeof(*r));
    if (!r) return tf_error__nomem();
    set->results = r;
    set->cap = cap;
  }
  popts *c = NULL;
  tf_uri *uri = NULL;
  tf_err rc = popts_new(&c, opts, &uri);
  if (rc < 0) return rc;
  set->queued[set->count] = c;
  set->uris[set->count] = uri;
  set->results[set->count] = NULL;
  set->count++;
  return TF_OK;
}

size_t tf_probe_set_count(const tf_probe_set *set) { return set ? set->count : 0; }

const tf_probe_result *tf_probe_set_result(const tf_probe_set *set, size_t i)
{
  return set && i < set->count ? set->results[i] : NULL;
}

void tf_probe_set_free(tf_probe_set *set)
{
  if (!set) return;
  for (size_t i = 0; i < set->count; i++) {
    popts_free(set->queued[i]);
    tf_uri_free(set->uris[i]);
    tf_probe_result_free(set->results[i]);
  }
  free(set->queued);
  free(set->uris);
  free(set->results);
  free(set);
}

tf_err tf_probe_set_run(tf_probe_set *set, tf_probe_cb cb, void *payload)
{
  TF_ASSERT_ARG(set);
  if (set->count == 0) return TF_OK;
  size_t slots = set->concurrency < set->count ? set->concurrency : set->count;
  probe **active = calloc(slots, sizeof(*active));
  if (!active) return tf_error__nomem();
  size_t nactive = 0, next = 0;
  loop L;
  memset(&L, 0, sizeof(L));
  tf_err rc = TF_OK;
  /* 256 KiB; only worth it when many UDP sockets come and go */
  uint32_t *recent = slots > 1 ? calloc(65536, sizeof(*recent)) : NULL;
  for (;;) {
    /* fill the free slots */
    while (nactive < slots && next < set->count) {
      size_t i = next++;
      if (!set->queued[i]) continue; /* ran in an earlier call */
      probe *p = NULL;
      rc = probe_new(&p, set->queued[i], set->uris[i]); /* takes both, even on failure */
      set->queued[i] = NULL;
      set->uris[i] = NULL;
      if (rc < 0) break;
      p->index = i;
      p->recent = recent;
      probe_start(p); /* may finish at once (unresolvable, refused) */
      active[nactive++] = p;
    }
    if (rc < 0) break;
    /* hand over the finished ones */
    size_t k = 0;
    int stop = 0;
    for (size_t i = 0; i < nactive; i++) {
      probe *p = active[i];
      if (!p->finished) {
        active[k++] = p;
        continue;
      }
      size_t index = p->index;
      set->results[index] = p->res;
      p->res = NULL;
      probe_free(p);
      if (!stop && cb && cb(index, set->results[index], payload) != 0) stop = 1;
    }
    nactive = k;
    if (stop) {
      rc = tf_error__set(TF_EUSER, "the callback stopped the probe set");
      break;
    }
    if (nactive == 0) {
      if (next >= set->count) break;
      continue;
    }
    rc = loop_once(&L, active, nactive);
    if (rc < 0) break;
  }
  for (size_t i = 0; i < nactive; i++) {
    probe_release_all(active[i]);
    probe_free(active[i]);
  }
  free(active);
  free(recent);
  loop_free(&L);
  return rc;
}

/* ---- held allocations ---- */

struct tf_allocation {
  probe *p;
};

tf_err tf_allocation_new(tf_allocation **out, tf_probe_result **result, const tf_probe_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(opts);
  *out = NULL;
  if (result) *result = NULL;
  popts *c = NULL;
  tf_uri *uri = NULL;
  tf_err rc = popts_new(&c, opts, &uri);
  if (rc < 0) return rc;
  probe *p = NULL;
  rc = probe_new(&p, c, uri);
  if (rc < 0) return rc;
  p->keep = 1;
  probe_start(p);
  rc = probe_drive(p);
  if (rc < 0) {
    probe_free(p);
    return rc;
  }
  tf_err status = p->res->status;
  tf_probe_result *res = p->res;
  p->res = NULL;
  if (status != TF_OK) {
    tf_error__set(status, "%s", res->message);
    if (result) *result = res;
    else tf_probe_result_free(res);
    probe_free(p);
    return status;
  }
  /* later operations record into a result of their own */
  p->res = result_new(c->o.uri);
  tf_allocation *a = calloc(1, sizeof(*a));
  if (!p->res || !a) {
    free(a);
    tf_probe_result_free(res);
    probe_free(p);
    return tf_error__nomem();
  }
  a->p = p;
  *out = a;
  if (result) *result = res;
  else tf_probe_result_free(res);
  return TF_OK;
}

/* Run one more transaction on the held allocation. */
static tf_err allocation_op(tf_allocation *alloc, int phase, uint32_t lifetime, tf_probe_stage stage)
{
  probe *p = alloc->p;
  leg *a = &p->legs[0];
  if (a->released || !a->allocated || a->fd < 0)
    return tf_error__set(TF_ENOTFOUND, "the allocation was released");
  tf_probe_result *fresh = result_new(p->opts->o.uri);
  if (!fresh) return tf_error__nomem();
  tf_probe_result_free(p->res);
  p->res = fresh;
  double now = now_ms();
  p->finished = 0;
  p->fatal = TF_OK;
  p->deadline = now + p->opts->o.timeout_ms;
  p->stage = stage;
  p->stage_t0 = now;
  stage_begin(p, stage);
  p->phase = phase;
  a->req_lifetime = lifetime;
  leg_request(a, REQ_REFRESH, now);
  tf_err rc = probe_drive(p);
  if (rc < 0) return rc;
  if (p->res->status != TF_OK) return tf_error__set(p->res->status, "%s", p->res->message);
  return TF_OK;
}

tf_err tf_allocation_refresh(tf_allocation *alloc)
{
  TF_ASSERT_ARG(alloc);
  uint32_t lt = alloc->p->legs[0].lifetime;
  return allocation_op(alloc, PH_REFRESH, lt ? lt : 600, TF_PROBE_STAGE_ALLOCATE);
}

uint32_t tf_allocation_lifetime(const tf_allocation *alloc) { return alloc ? alloc->p->legs[0].lifetime : 0; }

tf_err tf_allocation_relayed(const tf_allocation *alloc, tf_addr *addr, uint16_t *port)
{
  TF_ASSERT_ARG(alloc);
  const leg *a = &alloc->p->legs[0];
  if (!a->allocated) return tf_error__set(TF_ENOTFOUND, "no allocation");
  if (addr) *addr = a->relayed;
  if (port) *port = a->relayed_port;
  return TF_OK;
}

tf_err tf_allocation_release(tf_allocation *alloc)
{
  TF_ASSERT_ARG(alloc);
  if (alloc->p->legs[0].released) return TF_OK;
  return allocation_op(alloc, PH_RELEASE_A, 0, TF_PROBE_STAGE_RELEASE);
}

void tf_allocation_free(tf_allocation *alloc)
{
  if (!alloc) return;
  leg *a = &alloc->p->legs[0];
  if (a->allocated && !a->released && a->fd >= 0) tf_allocation_release(alloc);
  probe_free(alloc->p);
  free(alloc);
}
