/* probe TURN: the state machine of one probe. Requests (with a new
 * transaction id each, retransmitted on the UDP schedule), answers (401
 * challenge, 438 nonce, 437 new socket), the phases from Allocate through the
 * peer check to the release, the timers and the deadline.
 *
 * Names in URIs are resolved with getaddrinfo(), which blocks: a probe set
 * resolves each name as its probe starts. IP literals never block.
 * STUN encoding and validation come from the stun module; credentials from
 * cred. Error numbers decide, never reason text. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_internal.h"

double tf_probe__now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

const char *tf_probe__transport_name(int mode)
{
  return mode == TF_URI_MODE_UDP ? "udp" : mode == TF_URI_MODE_TCP ? "tcp" : "tls";
}

const char *tf_probe__method_name(int req)
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

void tf_probe__log(probe *p, tf_log_level level, const char *fmt, ...) TF__PRINTF(3, 4);
void tf_probe__log(probe *p, tf_log_level level, const char *fmt, ...)
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

void tf_probe__fmt_addr(char *buf, size_t size, const tf_addr *a, uint16_t port)
{
  char t[TF_ADDR_STRLEN] = "?";
  tf_addr_format(t, sizeof(t), a);
  if (a->family == TF_AF_INET6) snprintf(buf, size, "[%s]:%u", t, port);
  else snprintf(buf, size, "%s:%u", t, port);
}

/* ---- stage accounting ---- */

/* When a stage ends: @p now when the caller has just read the clock (a socket connected)
 * or is handling a round's datagrams (the round's clock, when epoll_wait() returned with
 * them: their arrival as the probe can know it, the same instant for all of them rather than
 * later for each by the handling of the ones before it); else a fresh clock. */
static void stage_end_at(probe *p, double now)
{
  if (p->res->rtt[p->stage] < 0) p->res->rtt[p->stage] = 0;
  if (now <= p->stage_t0) return; /* the round began before this stage did */
  p->res->rtt[p->stage] += now - p->stage_t0;
  p->stage_t0 = now;
}

static double stage_clock(const probe *p) { return p->loop && p->loop->hold ? p->loop->now : tf_probe__now_ms(); }

static void stage_end(probe *p) { stage_end_at(p, stage_clock(p)); }

static void stage_begin_at(probe *p, tf_probe_stage st, double now)
{
  if (p->stage != st) {
    stage_end_at(p, now);
    p->stage = st;
  }
  if (p->res->rtt[st] < 0) p->res->rtt[st] = 0;
  p->res->stage = st;
}

void tf_probe__stage_begin(probe *p, tf_probe_stage st) { stage_begin_at(p, st, stage_clock(p)); }


static void leg_forget_key(leg *l)
{
  l->have_key = 0;
  tf_probe__mac_unref(l->mac);
  l->mac = NULL;
}

static void leg_text_free(char **slot, char *small)
{
  if (*slot != small) free(*slot);
  *slot = NULL;
}

static void leg_wipe(leg *l)
{
  tf_probe__user_unref(l->user);
  leg_text_free(&l->realm, l->realm_small);
  leg_text_free(&l->nonce, l->nonce_small);
  l->user = NULL;
  l->username = l->password = NULL;
  l->realm = l->nonce = NULL;
  leg_forget_key(l);
  if (l->msg != l->msg_small) free(l->msg); /* what was sent: no secret, only the key's MAC */
  l->msg_cap = 0;
  free(l->rx);
  free(l->tx);
  l->msg = l->rx = l->tx = NULL;
}

/* A leg as new: what it holds zeroed, its buffers left as they are. */
static void leg_reset(probe *p, leg *l)
{
  memset(l, 0, offsetof(leg, malformed));
  l->malformed[0] = '\0';
  l->p = p;
  l->fd = -1;
  l->who = l == &p->legs[0] ? "" : "peer ";
}

void tf_probe__dispose(probe *p)
{
  for (int i = 0; i < p->nlegs; i++) {
    tf_probe__leg_close(&p->legs[i]);
    leg_wipe(&p->legs[i]);
  }
  if (p->ctx) SSL_CTX_free(p->ctx);
  tf_probe__opts_unref(p->opts);
  tf_probe_result_free(p->res);
  if (p->payload_used) tf_crypto__wipe(p->payload, sizeof(p->payload));
}

void tf_probe__free(probe *p)
{
  if (!p) return;
  tf_probe__dispose(p);
  free(p);
}

/* A failed probe's end: its allocations released as far as they were, its sockets closed. */
static void probe_cleanup_end(probe *p)
{
  p->finished = 1;
  tf_probe__release_all(p);
  p->phase = PH_DONE;
}

/* Does @p l hold a UDP allocation (or may: an authenticated Allocate went unanswered) whose
 * release has not been tried as a transaction yet? */
static int leg_needs_release(const leg *l)
{
  if (l->fd < 0 || l->conn != CONN_READY || !l->have_key || l->released) return 0;
  if (l->req == REQ_REFRESH && l->req_lifetime == 0) return 0; /* its release is what failed */
  return l->allocated || (l->req == REQ_ALLOCATE && l->authed);
}

/* A failure that leaves a UDP allocation on the relay releases it as a success does: a
 * Refresh(0) retransmitted on the UDP schedule until answered, for at most PROBE_CLEANUP_RTOS
 * RTOs, so one lost datagram leaves nothing behind for the allocation's lifetime. The result is
 * set already and only handed over after. Over TCP and TLS closing the connection ends the
 * allocation. 1: the probe is cleaning up. */
static int probe_cleanup_begin(probe *p)
{
  if (p->mode != TF_URI_MODE_UDP) return 0;
  int need[2] = {0, 0}, n = 0;
  for (int i = 0; i < p->nlegs; i++) n += need[i] = leg_needs_release(&p->legs[i]);
  if (!n) return 0;
  double now = p->loop ? p->loop->now : tf_probe__now_ms();
  p->phase = PH_CLEANUP;
  p->finished = 0;
  p->deadline = now + (double)PROBE_CLEANUP_RTOS * p->opts->o.rto_ms;
  tf_probe__loop_due(p, p->deadline);
  for (int i = 0; i < p->nlegs && !p->finished; i++) {
    leg *l = &p->legs[i];
    if (!need[i]) {
      l->req = REQ_NONE;
      continue;
    }
    l->req_lifetime = 0;
    tf_probe__leg_request(l, REQ_REFRESH, now);
  }
  return 1;
}

/* Record the failure, release what it leaves allocated, finish. Reason and message
 * are kept printable: they may carry the relay's bytes. */
void tf_probe__fail(probe *p, tf_err status, int code, const char *reason, const char *fmt, ...)
{
  if (p->phase == PH_CLEANUP) { /* the release after a failure: as far as it got */
    probe_cleanup_end(p);
    return;
  }
  if (p->finished) return;
  stage_end(p);
  tf_probe_result *r = p->res;
  r->stage = p->stage == TF_PROBE_STAGE_DONE ? TF_PROBE_STAGE_RELEASE : p->stage;
  r->status = status;
  r->error_code = code;
  char *rs = tf_probe__printable(reason ? reason : "");
  if (rs) {
    free(r->error_reason);
    r->error_reason = rs;
  }
  char *raw = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&raw, fmt, ap) < 0) raw = NULL;
  va_end(ap);
  char *m = raw ? tf_probe__printable(raw) : NULL;
  free(raw);
  if (m) {
    free(r->message);
    r->message = m;
  }
  if (!rs || !m) p->fatal = TF_ENOMEM;
  tf_probe__log(p, TF_LOG_INFO, "failed in stage %s: %s", tf_probe_stage_name(r->stage), tf_probe_result_message(r));
  p->finished = 1;
  if (p->phase == PH_REFRESH) {
    /* a failed refresh leaves the held allocation as it is: the caller may retry or release */
    p->legs[0].req = REQ_NONE;
    p->phase = PH_HELD;
    return;
  }
  if (probe_cleanup_begin(p)) return;
  tf_probe__release_all(p);
  p->phase = PH_DONE;
}

/* An answer that arrived but cannot be used: dropped, and remembered as the last
 * reason in case nothing better comes (then the probe fails with it, not with a timeout). */
void tf_probe__unusable(leg *l, const char *fmt, ...)
{
  char why[sizeof(l->malformed)];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  tf_probe__log(l->p, TF_LOG_DEBUG, "%sdropped an answer to %s: %s", l->who, tf_probe__method_name(l->req), why);
  if (l->req != REQ_NONE && l->req != REQ_DATA) memcpy(l->malformed, why, sizeof(why));
}

/* ---- requests ---- */

/* The username and password for @p l: minted, or the ones the same options minted
 * for the same user and expiry a moment ago. */
static int leg_mint(leg *l)
{
  probe *p = l->p;
  if (l->user) return 0;
  popts *c = p->opts;
  const tf_probe_options *o = &c->o;
  int b = l == &p->legs[1];
  int64_t expiry = (o->now ? o->now : (int64_t)time(NULL)) + o->ttl_s;
  pcred *k = o->user_numbered ? NULL : &c->cred[b];
  if (k && k->user && k->expiry == expiry) {
    l->user = tf_probe__user_ref(k->user);
  } else {
    char user[PROBE_NUMBER_MAX + 512];
    /* the peer allocation uses its own user, so a per-user quota of 1 does not refuse it */
    if (o->user_numbered)
      snprintf(user, sizeof(user), "%s%llu%s", o->user, (unsigned long long)p->number, b ? PROBE_PEER_SUFFIX : "");
    else snprintf(user, sizeof(user), "%s%s", o->user, b ? PROBE_PEER_SUFFIX : "");
    char *username = NULL, *password = NULL;
    tf_err rc = tf_cred_mint(&username, &password, o->secret, user, expiry, o->separator);
    if (rc < 0) {
      if (rc == TF_ENOMEM) p->fatal = TF_ENOMEM;
      tf_probe__fail(p, TF_ERROR, 0, NULL, "%scannot mint the credential: %s", l->who, tf_error_last()->message);
      return -1;
    }
    l->user = tf_probe__user_new(username, password);
    tf_crypto__wipe(password, strlen(password));
    free(password);
    free(username);
    if (!l->user) {
      p->fatal = TF_ENOMEM;
      tf_probe__fail(p, TF_ERROR, 0, NULL, "out of memory");
      return -1;
    }
    if (k) {
      tf_probe__cred_clear(k);
      k->expiry = expiry;
      k->user = tf_probe__user_ref(l->user);
    }
  }
  l->username = l->user->username;
  l->password = l->user->password;
  return 0;
}

/* The long-term key of @p l and its keyed HMAC context, made once per key: the
 * probes of one options share it while username and realm stay the same. */
static int leg_key(leg *l)
{
  probe *p = l->p;
  leg_forget_key(l);
  pcred *k = p->opts->o.user_numbered ? NULL : &p->opts->cred[l == &p->legs[1]];
  if (k && k->mac && k->realm && k->user && (k->user == l->user || !strcmp(k->user->username, l->username)) &&
      !strcmp(k->realm, l->realm)) {
    l->mac = tf_probe__mac_ref(k->mac);
    l->have_key = 1;
    return 0;
  }
  pmac *m = calloc(1, sizeof(*m));
  if (!m) {
    p->fatal = TF_ENOMEM;
    tf_probe__fail(p, TF_ERROR, 0, NULL, "out of memory");
    return -1;
  }
  m->refs = 1;
  tf_err rc = tf_stun_long_term_key(m->key, l->username, l->realm, l->password);
  if (rc == TF_OK) tf_mac__init(&m->mac, m->key, sizeof(m->key));
  if (rc < 0) {
    tf_probe__mac_unref(m);
    tf_probe__fail(p, TF_ERROR, 0, NULL, "%scannot compute the key: %s", l->who, tf_error_last()->message);
    return -1;
  }
  l->mac = m;
  l->have_key = 1;
  if (k && k->user && (k->user == l->user || !strcmp(k->user->username, l->username))) {
    char *realm = tf_strdup__(l->realm);
    if (realm) {
      tf_probe__mac_unref(k->mac);
      free(k->realm);
      k->mac = tf_probe__mac_ref(m);
      k->realm = realm;
    }
  }
  return 0;
}

/* The buffer a leg (re)sends from, room for @p need bytes. */
static uint8_t *leg_msg(leg *l, size_t need)
{
  if (!l->msg) {
    l->msg = l->msg_small;
    l->msg_cap = sizeof(l->msg_small);
  }
  if (need > l->msg_cap) {
    size_t cap = need < 512 ? 512 : need;
    uint8_t *m = malloc(cap);
    if (!m) {
      l->p->fatal = TF_ENOMEM;
      tf_probe__fail(l->p, TF_ERROR, 0, NULL, "out of memory");
      return NULL;
    }
    if (l->msg != l->msg_small) free(l->msg);
    l->msg = m;
    l->msg_cap = cap;
  }
  return l->msg;
}

/* The text attribute @p type of @p m into *@p slot: in @p small (PROBE_TEXT_SMALL bytes) when it fits. */
static int leg_set_text(char **slot, char *small, const tf_stun_msg *m, uint16_t type)
{
  const uint8_t *v = NULL;
  size_t n = 0;
  if (tf_stun_msg_find(m, type, &v, &n) < 0) return -1;
  const char *end = n ? memchr(v, '\0', n) : NULL;
  if (end) n = (size_t)(end - (const char *)v); /* as strndup() reads it */
  char *copy = n < PROBE_TEXT_SMALL ? small : tf_strndup__((const char *)v, n);
  if (!copy) return -1;
  if (*slot != small) free(*slot);
  if (copy == small) {
    memcpy(small, v, n);
    small[n] = '\0';
  }
  *slot = copy;
  return 0;
}

/* Build the request of kind l->req with a new transaction id and send it. */
static void leg_send_request(leg *l, double now)
{
  probe *p = l->p;
  const tf_probe_options *o = &p->opts->o;
  tf_stun_msg msg, *m = &msg; /* on the stack: nothing allocated, nothing zeroed */
  memcpy(l->prev_tid, l->tid, TF_STUN_TID_SIZE);
  const uint8_t *tid = tf_probe__tid(p);
  if (!tid) return;
  tf_err rc = tf_stun__msg_begin(m, method_of(l->req), TF_STUN_REQUEST, tid);
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
    if (rc == TF_OK) rc = tf_stun__msg_add_integrity_mac(m, &l->mac->mac);
  }
  if (rc == TF_OK) rc = tf_stun_msg_add_fingerprint(m);
  tf_stun__msg_dispose(m);
  if (rc == TF_OK && !leg_msg(l, m->len)) return;
  if (rc < 0) {
    if (rc == TF_ENOMEM) p->fatal = TF_ENOMEM;
    tf_probe__fail(p, TF_ERROR, 0, NULL, "%scannot encode %s: %s", l->who, tf_probe__method_name(l->req),
                   tf_error_last()->message);
    return;
  }
  memcpy(l->msg, m->buf, m->len);
  l->msg_len = m->len;
  memcpy(l->tid, m->buf + 8, TF_STUN_TID_SIZE);
  l->sends = 1;
  l->rto = o->rto_ms;
  l->next_send = now + l->rto;
  l->give_up = 0;
  l->malformed[0] = '\0';
  tf_probe__loop_due(p, l->next_send);
  tf_probe__leg_write(l, l->msg, l->msg_len);
}

/* Start a transaction of @p kind (l->peer / l->req_lifetime set by the caller). */
void tf_probe__leg_request(leg *l, int kind, double now)
{
  l->req = kind;
  l->stale = 0;
  leg_send_request(l, now);
}

/* Send bytes that are not a transaction (ChannelData, Send): resent on the
 * UDP schedule until the other leg sees them. */
static void leg_send_data(leg *l, const uint8_t *data, size_t len, double now)
{
  if (!leg_msg(l, len)) return;
  memcpy(l->msg, data, len);
  l->msg_len = len;
  l->req = REQ_DATA;
  l->sends = 1;
  l->rto = l->p->opts->o.rto_ms;
  l->next_send = now + l->rto;
  l->give_up = 0;
  tf_probe__loop_due(l->p, l->next_send);
  tf_probe__leg_write(l, l->msg, l->msg_len);
}

static void leg_allocate(leg *l, double now)
{
  if (leg_mint(l) < 0) return;
  l->req_lifetime = 0;
  tf_probe__leg_request(l, REQ_ALLOCATE, now);
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
  tf_stun_msg msg, *m = &msg;
  const uint8_t *tid = tf_probe__tid(l->p);
  if (!tid) return;
  tf_err rc = tf_stun__msg_begin(m, TF_STUN_REFRESH, TF_STUN_REQUEST, tid);
  if (rc == TF_OK) rc = tf_stun_msg_add_u32(m, TF_STUN_ATTR_LIFETIME, 0);
  if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_USERNAME, l->username, strlen(l->username));
  if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_REALM, l->realm, strlen(l->realm));
  if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_NONCE, l->nonce, strlen(l->nonce));
  if (rc == TF_OK) rc = tf_stun__msg_add_integrity_mac(m, &l->mac->mac);
  if (rc == TF_OK) rc = tf_stun_msg_add_fingerprint(m);
  /* through the ring where the leg is (a socket the ring made has no descriptor); a failure
   * is not news */
  if (rc == TF_OK && (l->p->mode == TF_URI_MODE_UDP || (l->p->mode == TF_URI_MODE_TCP && l->tx_len == 0)) &&
      (!tf_probe__leg_ring(l) || tf_probe__ring_send(l, m->buf, m->len) < 0) && !l->ring_made) {
    ssize_t n = send(l->fd, m->buf, m->len, MSG_NOSIGNAL);
    (void)n;
  }
  tf_stun__msg_dispose(m);
  l->req = REQ_NONE;
}

void tf_probe__release_all(probe *p)
{
  for (int i = 0; i < p->nlegs; i++) {
    leg *l = &p->legs[i];
    leg_abandon(l);
    tf_probe__leg_close(l);
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
  tf_probe__stage_begin(p, TF_PROBE_STAGE_VERIFY);
  char got[TF_ADDR_STRLEN] = "?", want[TF_ADDR_STRLEN] = "?";
  if (c->has_expect && tf_addr_compare(&a->relayed, &c->expect) != 0) {
    tf_addr_format(got, sizeof(got), &a->relayed); /* text only for the message: the check compares addresses */
    tf_addr_format(want, sizeof(want), &c->expect);
    tf_probe__fail(p, TF_ERROR, 0, NULL, "relayed address %s is not the expected %s", got, want);
    return;
  }
  if (c->o.expect_port_start &&
      (a->relayed_port < c->o.expect_port_start || a->relayed_port > c->o.expect_port_end)) {
    tf_probe__fail(p, TF_ERROR, 0, NULL, "relayed port %u is outside %u-%u", a->relayed_port, c->o.expect_port_start,
               c->o.expect_port_end);
    return;
  }
  if (c->o.family && a->relayed.family != c->o.family) {
    tf_addr_format(got, sizeof(got), &a->relayed);
    tf_probe__fail(p, TF_ERROR, 0, NULL, "relayed address %s is not %s as requested", got,
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
    stage_begin_at(p, TF_PROBE_STAGE_ALLOCATE, now); /* now: the socket just connected */
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
    if (p->finished || p->phase == PH_CLEANUP) return;
    if (p->opts->o.peer_check) {
      p->phase = PH_B_OPEN;
      leg_reset(p, b);
      p->nlegs = 2;
      tf_probe__stage_begin(p, TF_PROBE_STAGE_CONNECT);
      tf_probe__leg_open(b);
      return;
    }
    probe_after_data(p, now);
    return;
  case PH_B_OPEN:
    p->phase = PH_B_ALLOC;
    stage_begin_at(p, TF_PROBE_STAGE_ALLOCATE, now);
    leg_allocate(b, now);
    return;
  case PH_B_ALLOC:
    if (b->relayed.family != a->relayed.family) {
      tf_probe__stage_begin(p, TF_PROBE_STAGE_PERMISSION);
      tf_probe__fail(p, TF_ERROR, 0, NULL, "the peer allocation got a relayed address of another family");
      return;
    }
    p->phase = PH_A_PERM;
    tf_probe__stage_begin(p, TF_PROBE_STAGE_PERMISSION);
    a->peer = b->relayed;
    a->peer_port = b->relayed_port;
    tf_probe__leg_request(a, REQ_PERMISSION, now);
    return;
  case PH_A_PERM:
    p->phase = PH_B_PERM;
    b->peer = a->relayed;
    b->peer_port = a->relayed_port;
    tf_probe__leg_request(b, REQ_PERMISSION, now);
    return;
  case PH_B_PERM:
    p->phase = PH_A_CHAN;
    tf_probe__stage_begin(p, TF_PROBE_STAGE_CHANNEL);
    a->peer = b->relayed;
    a->peer_port = b->relayed_port;
    tf_probe__leg_request(a, REQ_CHANNEL, now);
    return;
  case PH_A_CHAN: {
    p->phase = PH_DATA_AB;
    tf_probe__stage_begin(p, TF_PROBE_STAGE_DATA);
    p->payload_used = 1;
    if (tf_probe__random(p->payload, sizeof(p->payload)) < 0) {
      tf_probe__fail(p, TF_ERROR, 0, NULL, "no random bytes for the data check");
      return;
    }
    uint8_t frame[PROBE_PAYLOAD + 8];
    size_t n = 0;
    if (tf_stun_channel_data_encode(frame, sizeof(frame), &n, PROBE_CHANNEL, p->payload[0], PROBE_PAYLOAD,
                                    p->mode != TF_URI_MODE_UDP) < 0) {
      tf_probe__fail(p, TF_ERROR, 0, NULL, "cannot encode ChannelData: %s", tf_error_last()->message);
      return;
    }
    leg_send_data(a, frame, n, now);
    return;
  }
  case PH_DATA_AB: {
    p->phase = PH_DATA_BA;
    a->req = REQ_NONE; /* stop resending the ChannelData */
    tf_stun_msg msg, *m = &msg;
    const uint8_t *tid = tf_probe__tid(p);
    if (!tid) return;
    tf_err rc = tf_stun__msg_begin(m, TF_STUN_SEND, TF_STUN_INDICATION, tid);
    if (rc == TF_OK) rc = tf_stun_msg_add_xor_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, &a->relayed, a->relayed_port);
    if (rc == TF_OK) rc = tf_stun_msg_add(m, TF_STUN_ATTR_DATA, p->payload[1], PROBE_PAYLOAD);
    if (rc == TF_OK) rc = tf_stun_msg_add_fingerprint(m);
    tf_stun__msg_dispose(m);
    if (rc < 0) {
      tf_probe__fail(p, TF_ERROR, 0, NULL, "cannot encode a Send indication: %s", tf_error_last()->message);
      return;
    }
    leg_send_data(b, m->buf, m->len, now);
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
      tf_probe__leg_request(a, REQ_REFRESH, now);
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
  case PH_CLEANUP:
    for (int i = 0; i < p->nlegs; i++)
      if (p->legs[i].req != REQ_NONE) return;
    probe_cleanup_end(p);
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
    tf_probe__stage_begin(p, TF_PROBE_STAGE_RELEASE);
    b->req_lifetime = 0;
    tf_probe__leg_request(b, REQ_REFRESH, now);
    return;
  }
  if (p->opts->o.release && !p->keep) {
    p->phase = PH_RELEASE_A;
    tf_probe__stage_begin(p, TF_PROBE_STAGE_RELEASE);
    a->req_lifetime = 0;
    tf_probe__leg_request(a, REQ_REFRESH, now);
    return;
  }
  p->phase = PH_HELD;
  probe_succeed(p);
}

void tf_probe__leg_ready(probe *p, leg *l, double now)
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
      tf_probe__fail(p, TF_EPROTO, 0, NULL, "%sthe Allocate success has no usable XOR-RELAYED-ADDRESS: %s", l->who,
                 tf_error_last()->message);
      return;
    }
    l->has_mapped = tf_stun_msg_address(m, TF_STUN_ATTR_XOR_MAPPED_ADDRESS, 0, &l->mapped, &l->mapped_port) == 0;
    uint32_t lt = 0;
    if (tf_stun_msg_u32(m, TF_STUN_ATTR_LIFETIME, &lt) == 0) l->lifetime = lt;
    l->allocated = 1;
    l->released = 0;
    if (p->opts->o.log_cb && p->opts->o.log_level <= TF_LOG_DEBUG) { /* no formatting unless asked */
      char ra[TF_ADDR_STRLEN + 8];
      tf_probe__fmt_addr(ra, sizeof(ra), &l->relayed, l->relayed_port);
      tf_probe__log(p, TF_LOG_DEBUG, "%sallocated %s, lifetime %u s", l->who, ra, l->lifetime);
    }
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
  const char *method = tf_probe__method_name(l->req);
  if (code == 401 && !l->authed) {
    /* the challenge: REALM and NONCE, then the same request with credentials */
    if (leg_set_text(&l->realm, l->realm_small, m, TF_STUN_ATTR_REALM) < 0 ||
        leg_set_text(&l->nonce, l->nonce_small, m, TF_STUN_ATTR_NONCE) < 0) {
      tf_probe__fail(p, TF_EPROTO, code, reason, "%s%s: 401 without a usable REALM and NONCE", l->who, method);
      return;
    }
    if (leg_mint(l) < 0 || leg_key(l) < 0) return;
    tf_probe__log(p, TF_LOG_DEBUG, "%s%s: 401 challenge, retrying with credentials", l->who, method);
    leg_send_request(l, now);
    return;
  }
  if (code == 438) {
    if (++l->stale > PROBE_MAX_STALE) {
      tf_probe__fail(p, TF_ERROR, code, reason, "%s%s failed: 438 (stale nonce) %d times in a row", l->who, method,
                 l->stale);
      return;
    }
    int realm_changed = 0;
    char *old_realm = l->realm ? strdup(l->realm) : NULL;
    if (leg_set_text(&l->nonce, l->nonce_small, m, TF_STUN_ATTR_NONCE) < 0) {
      free(old_realm);
      tf_probe__fail(p, TF_EPROTO, code, reason, "%s%s: 438 without a usable NONCE", l->who, method);
      return;
    }
    if (tf_stun_msg_find(m, TF_STUN_ATTR_REALM, NULL, NULL) == 0) {
      if (leg_set_text(&l->realm, l->realm_small, m, TF_STUN_ATTR_REALM) < 0) {
        free(old_realm);
        tf_probe__fail(p, TF_EPROTO, code, reason, "%s%s: 438 with an unusable REALM", l->who, method);
        return;
      }
      realm_changed = !old_realm || strcmp(old_realm, l->realm) != 0;
    }
    free(old_realm);
    if (!l->realm) {
      tf_probe__fail(p, TF_EPROTO, code, reason, "%s%s: 438 without a REALM", l->who, method);
      return;
    }
    if (leg_mint(l) < 0) return;
    if ((!l->have_key || realm_changed) && leg_key(l) < 0) return;
    tf_probe__log(p, TF_LOG_DEBUG, "%s%s: 438, retrying with the new nonce", l->who, method);
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
    uint32_t held = tf_probe__leg_port_held(l);
    if (l->sockets >= PROBE_MAX_SOCKETS) {
      char last[64] = "";
      if (held != UINT32_MAX) snprintf(last, sizeof(last), ", closed by this run %u ms before", held);
      tf_probe__fail(p, TF_ERROR, code, reason,
                     "%sAllocate failed: 437 (allocation mismatch) on %d sockets (the last on port %u%s: \"%s\")", l->who,
                     l->sockets, l->port, last, reason);
      return;
    }
    tf_probe__log(p, TF_LOG_DEBUG, "%sAllocate: 437 (\"%s\") on port %u, starting again on a new socket", l->who,
                  reason, l->port);
    /* from scratch: the nonce belongs to the old 5-tuple */
    leg_text_free(&l->nonce, l->nonce_small);
    leg_forget_key(l);
    tf_probe__leg_jump_ports(l); /* someone else walks the ports just ahead: leave their way */
    tf_probe__leg_open(l);
    return;
  }
  if (code == 401) {
    tf_probe__fail(p, TF_EAUTH, code, reason,
               "%s%s failed: 401 after credentials: wrong secret, expired username or clock skew", l->who, method);
    return;
  }
  if (code == 403 && l->req == REQ_ALLOCATE) {
    p->res->draining = 1;
    tf_probe__fail(p, TF_ERROR, code, reason, "%sAllocate refused with 403: the relay is draining", l->who);
    return;
  }
  tf_probe__fail(p, TF_ERROR, code, reason, "%s%s failed: %d (%s)", l->who, method, code, code_meaning(code));
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
  tf_stun_msg msg, *m = &msg;
  tf_err rc = tf_stun__response_decode(m, data, len, l->tid, method_of(l->req), l->authed ? &l->mac->mac : NULL);
  if (rc == TF_EAUTH && raw_class(data) == TF_STUN_ERROR) {
    /* an error without a valid MI: report its code, never act on a success without one */
    tf_probe__log(p, TF_LOG_DEBUG, "%s%s: error response without valid MESSAGE-INTEGRITY: %s", l->who,
                  tf_probe__method_name(l->req), tf_error_last()->message);
    tf_stun__msg_dispose(m);
    rc = tf_stun__response_decode(m, data, len, l->tid, method_of(l->req), NULL);
  }
  if (rc == TF_ENOMEM) {
    tf_stun__msg_dispose(m);
    p->fatal = TF_ENOMEM;
    tf_probe__fail(p, TF_ERROR, 0, NULL, "out of memory");
    return;
  }
  if (rc < 0) {
    tf_stun__msg_dispose(m);
    const char *why = tf_error_last()->message;
    if (rc != TF_EAUTH && p->mode != TF_URI_MODE_UDP) {
      /* no retransmission on a stream: this was the answer */
      tf_probe__fail(p, TF_EPROTO, 0, NULL, "%smalformed answer to %s: %s", l->who, tf_probe__method_name(l->req),
                     why);
      return;
    }
    /* UDP, or without a valid MESSAGE-INTEGRITY: as if never received, keep waiting */
    tf_probe__unusable(l, "%s", why);
    return;
  }
  if (tf_stun_msg_class(m) == TF_STUN_SUCCESS) leg_on_success(l, m, now);
  else leg_on_error(l, m, now);
  tf_stun__msg_dispose(m);
}

static void leg_on_channel_data(leg *l, const uint8_t *data, size_t len, double now)
{
  probe *p = l->p;
  uint16_t ch = 0;
  const uint8_t *d = NULL;
  size_t dl = 0;
  if (tf_stun_channel_data_decode(data, len, &ch, &d, &dl) < 0) {
    tf_probe__unusable(l, "malformed ChannelData: %s", tf_error_last()->message);
    return;
  }
  if (p->phase != PH_DATA_BA || l != &p->legs[0]) {
    tf_probe__log(p, TF_LOG_DEBUG, "%signored ChannelData on channel 0x%04x", l->who, ch);
    return;
  }
  if (ch != PROBE_CHANNEL) {
    tf_probe__fail(p, TF_ERROR, 0, NULL, "data from the peer arrived on channel 0x%04x, not 0x%04x", ch, PROBE_CHANNEL);
    return;
  }
  if (dl != PROBE_PAYLOAD || memcmp(d, p->payload[1], PROBE_PAYLOAD) != 0) {
    tf_probe__fail(p, TF_ERROR, 0, NULL, "ChannelData from the peer carried %zu bytes that are not the payload sent", dl);
    return;
  }
  probe_next(p, now);
}

static void leg_on_indication(leg *l, const tf_stun_msg *m, double now)
{
  probe *p = l->p;
  if (tf_stun_msg_method(m) != TF_STUN_DATA) {
    tf_probe__log(p, TF_LOG_DEBUG, "%signored an indication of method 0x%03x", l->who, tf_stun_msg_method(m));
    return;
  }
  if (p->phase != PH_DATA_AB || l != &p->legs[1]) {
    tf_probe__log(p, TF_LOG_DEBUG, "%signored a Data indication", l->who);
    return;
  }
  leg *a = &p->legs[0];
  tf_addr from;
  uint16_t from_port = 0;
  const uint8_t *d = NULL;
  size_t dl = 0;
  if (tf_stun_msg_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, 0, &from, &from_port) < 0 ||
      tf_stun_msg_find(m, TF_STUN_ATTR_DATA, &d, &dl) < 0) {
    tf_probe__fail(p, TF_EPROTO, 0, NULL, "a Data indication without XOR-PEER-ADDRESS or DATA");
    return;
  }
  if (tf_addr_compare(&from, &a->relayed) != 0 || from_port != a->relayed_port) {
    char got[TF_ADDR_STRLEN + 8], want[TF_ADDR_STRLEN + 8];
    tf_probe__fmt_addr(got, sizeof(got), &from, from_port);
    tf_probe__fmt_addr(want, sizeof(want), &a->relayed, a->relayed_port);
    tf_probe__fail(p, TF_ERROR, 0, NULL, "the Data indication came from %s, not from the relayed address %s", got,
               want);
    return;
  }
  if (dl != PROBE_PAYLOAD || memcmp(d, p->payload[0], PROBE_PAYLOAD) != 0) {
    tf_probe__fail(p, TF_ERROR, 0, NULL, "the Data indication carried %zu bytes that are not the payload sent", dl);
    return;
  }
  probe_next(p, now);
}

/* One datagram or one stream frame from the server. */
void tf_probe__on_packet(leg *l, const uint8_t *data, size_t len, double now)
{
  probe *p = l->p;
  if (len >= 4 && (data[0] & 0xC0) == 0x40) {
    leg_on_channel_data(l, data, len, now);
    return;
  }
  if (len < 20 || (data[0] & 0xC0) != 0) {
    tf_probe__unusable(l, "%zu bytes that are neither STUN (%s) nor ChannelData", len,
                       len < 20 ? "shorter than the 20-byte header" : "the top bits are not zero");
    return;
  }
  int answer = l->req != REQ_NONE && l->req != REQ_DATA;
  if (answer && memcmp(data + 8, l->tid, TF_STUN_TID_SIZE) == 0) {
    leg_on_response(l, data, len, now);
    return;
  }
  tf_stun_msg msg, *m = &msg;
  tf_err rc = tf_stun__msg_decode(m, data, len);
  if (rc < 0) {
    tf_stun__msg_dispose(m);
    if (rc == TF_ENOMEM) p->fatal = TF_ENOMEM;
    tf_probe__unusable(l, "%s", tf_error_last()->message);
    return;
  }
  int cls = tf_stun_msg_class(m);
  if (cls == TF_STUN_INDICATION) leg_on_indication(l, m, now);
  else if (answer && memcmp(data + 8, l->prev_tid, TF_STUN_TID_SIZE) == 0)
    tf_probe__log(p, TF_LOG_DEBUG, "%sdropped a late answer to the transaction before", l->who);
  else
    tf_probe__unusable(l, "TRANSACTION_ID_MISMATCH at byte 8: a %s for another transaction",
                       cls == TF_STUN_REQUEST ? "request" : "response");
  tf_stun__msg_dispose(m);
}

/* Hand every complete frame in rx to tf_probe__on_packet. */
void tf_probe__frames(leg *l, double now)
{
  probe *p = l->p;
  size_t off = 0;
  uint32_t gen = l->gen;
  while (!p->finished && l->gen == gen && off < l->rx_len) {
    size_t fl = 0;
    tf_err rc = tf_stun_frame_length(l->rx + off, l->rx_len - off, &fl);
    if (rc == TF_EBUFS) break;
    if (rc < 0) {
      tf_probe__fail(p, TF_EPROTO, 0, NULL, "%sframing error on the stream from %s: %s", l->who, p->server,
                 tf_error_last()->message);
      return;
    }
    if (fl > TF_STUN_MAX_MESSAGE + 4) {
      tf_probe__fail(p, TF_EPROTO, 0, NULL, "%sa frame of %zu bytes from %s is over the limit of %d", l->who, fl,
                 p->server, TF_STUN_MAX_MESSAGE);
      return;
    }
    if (fl > l->rx_len - off) break;
    /* several frames may come in one read, with our answers sent in between: a fresh clock for each */
    now = tf_probe__now_ms();
    tf_probe__on_packet(l, l->rx + off, fl, now);
    off += fl;
  }
  if (p->finished || l->gen != gen) return;
  memmove(l->rx, l->rx + off, l->rx_len - off);
  l->rx_len -= off;
}

/* Retransmissions (UDP) and the deadline. */
void tf_probe__timers(probe *p, double now)
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
        tf_probe__fail(p, TF_ERROR, 0, NULL, "%sthe data sent through the relay did not arrive: %d sends", l->who,
                   l->sends);
      else if (l->malformed[0])
        tf_probe__fail(p, TF_EPROTO, 0, NULL, "%s%s: only unusable answers from %s after %d sends (last: %s)", l->who,
                   tf_probe__method_name(l->req), p->server, l->sends, l->malformed);
      else
        tf_probe__fail(p, TF_ETIMEOUT, 0, NULL, "%sno answer to %s from %s over udp: timed out after %d sends", l->who,
                   tf_probe__method_name(l->req), p->server, l->sends);
      return;
    }
    if (l->give_up == 0 && now >= l->next_send) {
      int phase = p->phase;
      tf_probe__leg_write(l, l->msg, l->msg_len);
      if (p->finished || p->phase != phase) return; /* it failed: a cleanup sends its own */
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
    tf_probe__fail(p, TF_ERROR, 0, NULL, "the data sent through the relay did not arrive within %d ms",
               p->opts->o.timeout_ms);
  } else if (busy && busy->malformed[0]) {
    tf_probe__fail(p, TF_EPROTO, 0, NULL, "%s%s: only unusable answers from %s in %d ms (last: %s)", busy->who,
               tf_probe__method_name(busy->req), p->server, p->opts->o.timeout_ms, busy->malformed);
  } else if (busy && p->mode == TF_URI_MODE_UDP) {
    tf_probe__fail(p, TF_ETIMEOUT, 0, NULL, "%sno answer to %s from %s over udp: timed out after %d sends (%d ms)",
               busy->who, tf_probe__method_name(busy->req), p->server, busy->sends, p->opts->o.timeout_ms);
  } else if (busy) {
    tf_probe__fail(p, TF_ETIMEOUT, 0, NULL, "%sno answer to %s from %s over %s: timed out after %d ms", busy->who,
               tf_probe__method_name(busy->req), p->server, tf_probe__transport_name(p->mode), p->opts->o.timeout_ms);
  } else {
    tf_probe__fail(p, TF_ETIMEOUT, 0, NULL, "%s over %s: stage %s timed out after %d ms", p->server,
               tf_probe__transport_name(p->mode), tf_probe_stage_name(p->stage), p->opts->o.timeout_ms);
  }
}

/* Earliest time any timer of @p p fires. */
double tf_probe__next_timer(const probe *p)
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

tf_err tf_probe__new(probe **out, popts *c, probe *reuse)
{
  probe *p = reuse ? reuse : malloc(sizeof(*p));
  if (!p) {
    tf_probe__opts_unref(c);
    return tf_error__nomem();
  }
  /* cleared only as far as a probe of one leg uses it: of a load test's 2 KiB probes, the
   * cache lines a new one writes are the ones it goes on to use */
  memset(p, 0, offsetof(probe, legs));
  if (!reuse) leg_reset(p, &p->legs[1]); /* as a dispose leaves it */
  leg_reset(p, &p->legs[0]);
  p->nlegs = 1;
  p->opts = c;
  p->uri = c->uri;
  p->mode = tf_uri_open_mode(c->uri);
  p->res = tf_probe__result_new(c->o.uri);
  if (!p->res) {
    tf_probe__free(p);
    return tf_error__nomem();
  }
  *out = p;
  return TF_OK;
}

/* Resolve the host (IP literals directly; names with getaddrinfo, which blocks). */
static int probe_resolve(probe *p)
{
  const char *host = tf_uri_host(p->uri);
  uint16_t port = tf_uri_port(p->uri);
  tf_uri_host_type kind = tf_uri_host_kind(p->uri);
  popts *c = p->opts;
  if (c->salen) {
    /* an IP literal: parsed once for every probe of these options */
    memcpy(&p->sa, &c->sa, c->salen);
    p->salen = c->salen;
    memcpy(p->server, c->server, sizeof(p->server));
    return 0;
  }
  memset(&p->sa, 0, sizeof(p->sa));
  if (kind == TF_URI_HOST_IPV4 || kind == TF_URI_HOST_IPV6) {
    tf_addr a;
    if (tf_addr_parse(&a, host) < 0) {
      tf_probe__fail(p, TF_ENET, 0, NULL, "cannot use the address %s", host);
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
    tf_probe__fmt_addr(p->server, sizeof(p->server), &a, port);
    memcpy(&c->sa, &p->sa, p->salen);
    memcpy(c->server, p->server, sizeof(c->server));
    c->salen = p->salen;
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
    tf_probe__fail(p, TF_ENET, 0, NULL, "cannot resolve %s: %s", host,
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
  tf_probe__fmt_addr(at, sizeof(at), &a, port);
  snprintf(p->server, sizeof(p->server), "%s", at);
  return 0;
}


void tf_probe__start(probe *p)
{
  double now = tf_probe__now_ms();
  p->deadline = now + p->opts->o.timeout_ms;
  tf_probe__loop_due(p, p->deadline);
  p->stage = TF_PROBE_STAGE_RESOLVE;
  p->stage_t0 = now;
  stage_begin_at(p, TF_PROBE_STAGE_RESOLVE, now);
  tf_uri_host_type host = tf_uri_host_kind(p->uri);
  int literal = host == TF_URI_HOST_IPV4 || host == TF_URI_HOST_IPV6; /* nothing to resolve, no time spent */
  if (probe_resolve(p) < 0) return;
  p->phase = PH_A_OPEN;
  stage_begin_at(p, TF_PROBE_STAGE_CONNECT, literal ? now : tf_probe__now_ms());
  tf_probe__leg_open(&p->legs[0]);
}

