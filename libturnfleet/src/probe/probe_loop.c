/* probe loop: one epoll instance runs the probes of tf_probe_run() (a loop of
 * one), tf_probe_set_run() (at most `concurrency` in flight, started as slots
 * free up, so a set of a million repeated probes holds only the ones in flight)
 * and tf_allocation (one held allocation). Sockets are registered once and
 * leave the set when closed; only a stream with bytes waiting asks for EPOLLOUT.
 * A set's UDP datagrams go through an io_uring where the kernel has one
 * (probe_ring.c): a round is then one system call, not one per datagram. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <openssl/rand.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "probe_internal.h"

#define LOOP_EVENTS 128
/* a round's datagram in the arena: at most PROBE_DGRAM_CAP bytes, the next one 8-aligned */
#define LOOP_RX_SLOT (((size_t)PROBE_DGRAM_CAP + 7) & ~(size_t)7)
#define PORT_LO_DEFAULT 32768
#define PORT_HI_DEFAULT 60999

int tf_probe__random(void *buf, size_t n)
{
  /* the kernel's CSPRNG (what OpenSSL seeds from): a load test that never needs OpenSSL's own
   * generator does not pay for instantiating it; OpenSSL's when getrandom() is unavailable */
  uint8_t *p = buf;
  size_t got = 0;
  while (got < n) {
    ssize_t k = getrandom(p + got, n - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return RAND_bytes(p + got, (int)(n - got)) == 1 ? 0 : -1;
    got += (size_t)k;
  }
  return 0;
}

/* The kernel's ephemeral range, where the loop hands out UDP source ports. */
static void loop_port_range(ploop *L)
{
  unsigned lo = PORT_LO_DEFAULT, hi = PORT_HI_DEFAULT;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
  if (f) {
    unsigned a = 0, b = 0;
    if (fscanf(f, "%u %u", &a, &b) == 2 && a >= 1024 && b <= 65535 && a < b) {
      lo = a;
      hi = b;
    }
    fclose(f);
  }
  uint16_t r = 0;
  if (tf_probe__random(&r, sizeof(r)) < 0) r = (uint16_t)getpid();
  L->quarantine = PROBE_PORT_QUARANTINE_MS;
  L->port_lo = (uint16_t)lo;
  L->port_hi = (uint16_t)hi;
  L->port_next = (uint16_t)(lo + r % (hi - lo + 1)); /* another run starts elsewhere */
}

static void loop_free(ploop *L)
{
  if (L->ring) tf_probe__ring_free(L); /* its sockets closed, nothing left armed */
  if (L->epfd >= 0) close(L->epfd);
  free(L->slots);
  free(L->recent);
  free(L->txq);
  free(L->rx_arena);
  L->txq = NULL;
  L->rx_arena = NULL;
  L->epfd = -1;
  L->slots = NULL;
  L->recent = NULL;
}

/* @p set: hand out UDP source ports; @p ring: take an io_uring for the datagrams where there is one. */
static tf_err loop_init(ploop *L, size_t nslots, int set, int ring)
{
  memset(L, 0, sizeof(*L));
  L->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (L->epfd < 0) L->ep_errno = errno;
  L->slots = calloc(nslots, sizeof(*L->slots));
  L->nslots = nslots;
  /* 256 KiB of stamps, zero pages until a port is used */
  if (set) L->recent = calloc(65536, sizeof(*L->recent));
  L->txq = malloc(2 * nslots * sizeof(*L->txq));
  if (set && ring && L->epfd >= 0) tf_probe__ring_open(L);
  /* room for a whole round's datagrams (one per leg at most, and at most LOOP_EVENTS): only
   * the bytes they fill are ever touched; a ring receives into buffers of its own */
  if (!L->ring) L->rx_arena = malloc((2 * nslots < LOOP_EVENTS ? 2 * nslots : LOOP_EVENTS) * LOOP_RX_SLOT);
  if (!L->slots || (set && !L->recent) || !L->txq || (!L->ring && !L->rx_arena)) {
    loop_free(L);
    return tf_error__nomem();
  }
  if (set) loop_port_range(L);
  L->now = tf_probe__now_ms();
  return TF_OK;
}

const uint8_t *tf_probe__tid(probe *p)
{
  ploop *L = p->loop;
  if (L->tids_used == 0 || L->tids_used >= PROBE_TIDS) {
    if (tf_probe__random(L->tids, sizeof(L->tids)) < 0) {
      L->tids_used = 0;
      tf_probe__fail(p, TF_ERROR, 0, NULL, "transaction id: the CSPRNG failed (getrandom and OpenSSL RAND_bytes)");
      return NULL;
    }
    L->tids_used = 0;
  }
  return L->tids + TF_STUN_TID_SIZE * L->tids_used++;
}

int tf_probe__loop_watch(leg *l)
{
  probe *p = l->p;
  ploop *L = p->loop;
  uint32_t want = EPOLLIN;
  if (l->conn == CONN_CONNECTING || l->tx_len > 0 || tf_probe__tls_wants_write(l)) want |= EPOLLOUT;
  if (l->events == want) return 0;
  int err = L->ep_errno;
  if (tf_probe__leg_ring(l)) {
    err = -tf_probe__ring_watch(l);
    if (!err) return 0;
  } else if (L->epfd >= 0) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = want;
    ev.data.u64 = ((uint64_t)l->gen << 32) | ((uint64_t)p->slot << 1) | (uint64_t)(l == &p->legs[1]);
    if (epoll_ctl(L->epfd, l->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, l->fd, &ev) == 0) {
      l->events = want;
      return 0;
    }
    err = errno;
  }
  tf_probe__fail(p, TF_ERESOURCE, 0, NULL, "%scannot watch the socket towards %s: %s (local resources exhausted)",
                 l->who, p->server, strerror(err));
  return -1;
}

void tf_probe__loop_due(probe *p, double t)
{
  if (p->loop && t < p->loop->due) p->loop->due = t;
}

/* A finished probe of a set goes on the done list once, to be handed over in order. */
static void loop_check_done(ploop *L, probe *p)
{
  if (!p->finished || p->listed || !L->done) return;
  p->listed = 1;
  L->done[L->ndone++] = p->slot;
}

/* Run every probe's timers and find when the next one fires (at most a poll interval away). */
static void loop_timers(ploop *L, double now)
{
  double due = now + PROBE_POLL_MAX_MS;
  for (size_t i = 0; i < L->nslots; i++) {
    probe *p = L->slots[i];
    if (!p) continue;
    tf_probe__timers(p, now);
    loop_check_done(L, p);
    if (p->fatal) L->fatal = 1;
    if (p->finished) continue;
    double t = tf_probe__next_timer(p);
    if (t < due) due = t;
  }
  L->due = due;
}

/* Handle what the round brought with the UDP sends it causes held, then send them. */
static void loop_handle(ploop *L, const rxrec *rx, size_t nrx, double now)
{
  L->hold = 1;
  for (size_t i = 0; i < nrx; i++) {
    leg *l = rx[i].l;
    probe *p = l->p;
    if (p->finished || l->fd < 0 || l->gen != rx[i].gen) continue; /* an earlier one ended it */
    tf_probe__leg_input(l, &rx[i], now);
    loop_check_done(L, p);
    if (p->fatal) L->fatal = 1;
  }
  L->hold = 0;
  for (size_t i = 0; i < L->ntx; i++) {
    leg *l = L->txq[i];
    l->queued = 0;
    if (l->fd < 0 || l->p->finished) continue;
    tf_probe__leg_write(l, l->msg, l->msg_len);
    loop_check_done(L, l->p);
  }
  L->ntx = 0;
}

/* The epoll set's events (every socket's, or with a ring the streams'): streams handled,
 * datagrams read into the round's arena and recorded in @p rx. */
static tf_err loop_events(ploop *L, int timeout, rxrec *rx, size_t *nrx, double *now)
{
  struct epoll_event ev[LOOP_EVENTS];
  int n = 0;
  if (L->epfd >= 0) n = epoll_wait(L->epfd, ev, LOOP_EVENTS, timeout);
  if (n < 0 && errno != EINTR) return tf_error__set(TF_EIO, "epoll_wait: %s", strerror(errno));
  if (!L->ring) *now = L->now = tf_probe__now_ms();
  /* the ring hears of the epoll set only when an event arrives: one a stream left unread
   * (level-triggered here) is asked for again next round */
  if (L->ring) L->streams_more = n > 0;
  size_t used = 0;
  for (int i = 0; i < n && *nrx < LOOP_EVENTS; i++) {
    uint64_t d = ev[i].data.u64;
    size_t slot = (size_t)((d & 0xFFFFFFFFu) >> 1);
    probe *p = slot < L->nslots ? L->slots[slot] : NULL;
    if (!p || p->finished) continue;
    leg *l = &p->legs[d & 1];
    if (l->fd < 0 || l->gen != (uint32_t)(d >> 32)) continue; /* a socket closed since */
    if (p->mode != TF_URI_MODE_UDP) {
      tf_probe__leg_event(l, ev[i].events, *now);
    } else if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
      ssize_t len = tf_probe__leg_recv(l, L->rx_arena + used);
      if (len != INT_MIN) {
        rxrec *r = &rx[(*nrx)++];
        *r = (rxrec){l, l->gen, 0, L->rx_arena + used, 0, 0, -1, OPEN_NONE};
        if (len < 0) r->err = (int)-len;
        else r->len = (uint32_t)len;
        if (len > 0) used += ((size_t)(len < PROBE_DGRAM_CAP ? len : PROBE_DGRAM_CAP) + 7) & ~(size_t)7;
      }
    }
    loop_check_done(L, p);
    if (p->fatal) L->fatal = 1;
  }
  return TF_OK;
}

/* One round: what the kernel has for us (epoll_wait(), or the ring), then the timers that are
 * due. Only the probes with events are touched, and all of them only when a timer may fire. A
 * round runs in three phases, each one kind of code back to back so it finds its instructions
 * and shared data still in the cache: every UDP datagram is read (the kernel's receive path),
 * then handled (the probe's), then the requests they lead to are sent (the kernel's send path;
 * with a ring, at the next round's one system call). */
static tf_err loop_once(ploop *L, int may_wait)
{
  double now = tf_probe__now_ms();
  if (now >= L->due) loop_timers(L, now);
  double wait = L->due - now;
  int timeout = !may_wait || wait <= 0 || L->streams_more ? 0 : (int)ceil(wait);
  rxrec rx[LOOP_EVENTS];
  size_t nrx = 0;
  tf_err rc;
  if (L->ring) {
    int streams = 0;
    rc = tf_probe__ring_round(L, timeout, rx, LOOP_EVENTS, &nrx, &streams);
    now = L->now = tf_probe__now_ms(); /* one clock for the batch: timers, port stamps, the stages its answers end */
    if (rc == TF_OK && (streams || L->streams_more)) rc = loop_events(L, 0, rx, &nrx, &now);
  } else {
    rc = loop_events(L, timeout, rx, &nrx, &now);
  }
  if (rc < 0) return rc;
  if (nrx) loop_handle(L, rx, nrx, now);
  if (L->ring) tf_probe__ring_release(L, rx, nrx);
  now = L->now = tf_probe__now_ms();
  if (now >= L->due) loop_timers(L, now);
  if (L->fatal) return tf_error__nomem();
  return TF_OK;
}

/* Run @p p (in slot 0, already started) until it finishes. */
static tf_err loop_drive(ploop *L, probe *p)
{
  tf_err rc = TF_OK;
  L->fatal = 0;
  while (!p->finished && rc == TF_OK) rc = loop_once(L, 1);
  if (rc == TF_OK && p->fatal) rc = tf_error__nomem();
  return rc;
}

tf_err tf_probe_run(tf_probe_result **out, const tf_probe_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(opts);
  popts *c = NULL;
  tf_err rc = tf_probe__opts_new(&c, opts);
  if (rc < 0) return rc;
  ploop L;
  rc = loop_init(&L, 1, 0, 0);
  if (rc < 0) {
    tf_probe__opts_unref(c);
    return rc;
  }
  probe *p = NULL;
  rc = tf_probe__new(&p, c, NULL);
  if (rc == TF_OK) {
    p->loop = &L;
    L.slots[0] = p;
    tf_probe__start(p);
    rc = loop_drive(&L, p);
  }
  if (rc == TF_OK) {
    *out = p->res;
    p->res = NULL;
  }
  tf_probe__free(p);
  loop_free(&L);
  return rc;
}

/* ---- sets ---- */

/* Probes queued by one tf_probe_set_add() (count 1, result kept) or
 * tf_probe_set_add_repeated() (count n, results to the callback only). */
typedef struct pentry {
  popts *c;
  uint64_t count, started, first;
  int keep;
  tf_probe_result *result;
} pentry;

struct tf_probe_set {
  unsigned concurrency;
  pentry *e;
  size_t n, cap;
  uint64_t total;
  size_t cursor; /* the first entry with probes not started */
  /* a run (tf_probe_set_run(), or tf_probe_set_start() to the last tf_probe_set_process()) */
  ploop *L;          /* NULL: not running */
  tf_probe_cb cb;
  void *payload;
  int stop, drained; /* the callback stopped it; every queued probe started */
  size_t active;     /* probes in flight (in a slot, not yet handed over) */
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

static void set_end(tf_probe_set *set);

static tf_err set_push(tf_probe_set *set, const tf_probe_options *opts, uint64_t count, int keep)
{
  if (set->L) return tf_error__set(TF_EINVALID, "set: probes are added before it runs, not while it runs");
  if (count == 0) return tf_error__set(TF_EINVALID, "count: must be at least 1");
  if (count > UINT64_MAX - set->total) return tf_error__set(TF_EINVALID, "count: the set would hold too many probes");
  if (set->n == set->cap) {
    size_t cap = set->cap ? set->cap * 2 : 16;
    pentry *e = realloc(set->e, cap * sizeof(*e));
    if (!e) return tf_error__nomem();
    set->e = e;
    set->cap = cap;
  }
  popts *c = NULL;
  tf_err rc = tf_probe__opts_new(&c, opts);
  if (rc < 0) return rc;
  pentry *e = &set->e[set->n++];
  memset(e, 0, sizeof(*e));
  e->c = c;
  e->count = count;
  e->first = set->total;
  e->keep = keep;
  set->total += count;
  return TF_OK;
}

tf_err tf_probe_set_add(tf_probe_set *set, const tf_probe_options *opts)
{
  TF_ASSERT_ARG(set);
  TF_ASSERT_ARG(opts);
  return set_push(set, opts, 1, 1);
}

tf_err tf_probe_set_add_repeated(tf_probe_set *set, const tf_probe_options *opts, uint64_t count)
{
  TF_ASSERT_ARG(set);
  TF_ASSERT_ARG(opts);
  return set_push(set, opts, count, 0);
}

size_t tf_probe_set_count(const tf_probe_set *set)
{
  if (!set) return 0;
  return set->total > SIZE_MAX ? SIZE_MAX : (size_t)set->total;
}

const tf_probe_result *tf_probe_set_result(const tf_probe_set *set, size_t i)
{
  if (!set || (uint64_t)i >= set->total) return NULL;
  size_t lo = 0, hi = set->n; /* the entry with first <= i */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (set->e[mid].first <= (uint64_t)i) lo = mid;
    else hi = mid;
  }
  return set->e[lo].keep ? set->e[lo].result : NULL;
}

void tf_probe_set_free(tf_probe_set *set)
{
  if (!set) return;
  set_end(set);
  for (size_t i = 0; i < set->n; i++) {
    tf_probe__opts_unref(set->e[i].c);
    tf_probe_result_free(set->e[i].result);
  }
  free(set->e);
  free(set);
}

/* Start the next queued probe in slot @p slot. 0 started, 1 none left, <0 error. */
static int set_start_next(tf_probe_set *set, ploop *L, size_t slot)
{
  while (set->cursor < set->n && set->e[set->cursor].started >= set->e[set->cursor].count) set->cursor++;
  if (set->cursor >= set->n) return 1;
  pentry *e = &set->e[set->cursor];
  e->c->refs++;
  probe *p = NULL;
  probe *reuse = L->nspare ? L->spare[--L->nspare] : NULL;
  tf_err rc = tf_probe__new(&p, e->c, reuse); /* takes the reference, even on failure */
  if (rc < 0) return rc;
  p->number = e->first + e->started; /* distinct across the set's entries */
  p->index = (size_t)p->number;
  p->entry = set->cursor;
  e->started++;
  p->loop = L;
  p->slot = slot;
  L->slots[slot] = p;
  tf_probe__start(p); /* may finish at once (unresolvable, refused) */
  return 0;
}

/* The run's end: probes still in flight released (best effort), the loop freed. */
static void set_end(tf_probe_set *set)
{
  ploop *L = set->L;
  if (!L) return;
  for (size_t s = 0; s < L->nslots; s++) {
    if (!L->slots[s]) continue;
    tf_probe__release_all(L->slots[s]);
    tf_probe__free(L->slots[s]);
  }
  for (size_t i = 0; i < L->nspare; i++) free(L->spare[i]);
  free(L->spare);
  free(L->free_slots);
  free(L->done);
  loop_free(L);
  free(L);
  set->L = NULL;
  set->active = 0;
}

/* Hand over the finished probes in the order they finished and fill free slots with queued ones,
 * until neither is left to do. */
static tf_err set_fill(tf_probe_set *set)
{
  ploop *L = set->L;
  tf_err rc = TF_OK;
  int again = 1;
  while (again && !set->stop && rc == TF_OK) {
    again = 0;
    while (!set->drained && L->nfree > 0) {
      size_t s = L->free_slots[L->nfree - 1];
      int st = set_start_next(set, L, s);
      if (st < 0) rc = st;
      if (st != 0) {
        set->drained = 1;
        break;
      }
      L->nfree--;
      set->active++;
      loop_check_done(L, L->slots[s]); /* it may finish at once (unresolvable, refused) */
    }
    size_t ndone = L->ndone;
    L->ndone = 0;
    for (size_t i = 0; i < ndone && rc == TF_OK; i++) {
      size_t s = L->done[i];
      probe *p = L->slots[s];
      if (p->fatal) rc = tf_error__nomem();
      pentry *e = &set->e[p->entry];
      const tf_probe_result *r = p->res;
      if (e->keep) {
        e->result = p->res;
        p->res = NULL;
      }
      if (!set->stop && set->cb && set->cb(p->index, r, set->payload) != 0) set->stop = 1;
      tf_probe__dispose(p);
      L->spare[L->nspare++] = p; /* a probe is over 1 KiB: malloc's slow path, every probe */
      L->slots[s] = NULL;
      L->free_slots[L->nfree++] = s;
      set->active--;
      again = !set->drained;
    }
  }
  return rc;
}

/* A run's loop with the probes that fit started; @p ring: its datagrams through an io_uring where
 * the kernel has one (only when the library waits itself: see tf_probe_set_fd()). */
static tf_err set_begin(tf_probe_set *set, tf_probe_cb cb, void *payload, int ring)
{
  if (set->L) return tf_error__set(TF_EINVALID, "set: it is running already");
  set->cb = cb;
  set->payload = payload;
  set->stop = set->drained = 0;
  set->active = 0;
  uint64_t left = 0;
  for (size_t i = set->cursor; i < set->n; i++) left += set->e[i].count - set->e[i].started;
  if (left == 0) return TF_OK;
  size_t nslots = (uint64_t)set->concurrency < left ? set->concurrency : (size_t)left;
  ploop *L = malloc(sizeof(*L));
  if (!L) return tf_error__nomem();
  tf_err rc = loop_init(L, nslots, 1, ring);
  if (rc < 0) {
    free(L);
    return rc;
  }
  set->L = L;
  L->free_slots = malloc(nslots * sizeof(*L->free_slots));
  L->done = malloc(nslots * sizeof(*L->done));
  L->spare = malloc(nslots * sizeof(*L->spare));
  if (!L->free_slots || !L->done || !L->spare) rc = tf_error__nomem();
  for (size_t s = 0; rc == TF_OK && s < nslots; s++) L->free_slots[L->nfree++] = nslots - 1 - s; /* slot 0 first */
  if (rc == TF_OK) rc = set_fill(set);
  if (rc < 0 || set->stop || set->active == 0) {
    int stopped = set->stop;
    set_end(set);
    if (rc == TF_OK && stopped) rc = tf_error__set(TF_EUSER, "the callback stopped the probe set");
  }
  return rc;
}

/* One round of a running set (waiting at most until its next timer when @p may_wait), its
 * finished probes handed over and their slots filled; the run ended when none is left. */
static tf_err set_round(tf_probe_set *set, int may_wait)
{
  if (!set->L) return TF_OK;
  tf_err rc = loop_once(set->L, may_wait);
  if (rc == TF_OK) rc = set_fill(set);
  if (rc < 0 || set->stop || set->active == 0) {
    int stopped = set->stop;
    set_end(set);
    if (rc == TF_OK && stopped) rc = tf_error__set(TF_EUSER, "the callback stopped the probe set");
  }
  return rc;
}

tf_err tf_probe_set_run(tf_probe_set *set, tf_probe_cb cb, void *payload)
{
  TF_ASSERT_ARG(set);
  tf_err rc = set_begin(set, cb, payload, 1);
  while (rc == TF_OK && set->L) rc = set_round(set, 1);
  return rc;
}

tf_err tf_probe_set_start(tf_probe_set *set, tf_probe_cb cb, void *payload)
{
  TF_ASSERT_ARG(set);
  return set_begin(set, cb, payload, 0);
}

int tf_probe_set_fd(const tf_probe_set *set) { return set && set->L ? set->L->epfd : -1; }

int tf_probe_set_timeout(const tf_probe_set *set)
{
  if (!set || !set->L) return -1;
  const ploop *L = set->L;
  if (L->epfd < 0) return 0; /* no descriptor: every probe fails with TF_ERESOURCE at its next round */
  double wait = L->due - tf_probe__now_ms();
  if (wait <= 0) return 0;
  return wait >= INT_MAX ? INT_MAX : (int)ceil(wait);
}

tf_err tf_probe_set_process(tf_probe_set *set, size_t *running)
{
  TF_ASSERT_ARG(set);
  tf_err rc = set_round(set, 0);
  if (running) *running = tf_probe_set_running(set);
  return rc;
}

size_t tf_probe_set_running(const tf_probe_set *set)
{
  if (!set || !set->L) return 0;
  uint64_t n = set->active;
  for (size_t i = set->cursor; i < set->n; i++) n += set->e[i].count - set->e[i].started;
  return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

/* ---- held allocations ---- */

/* A held allocation keeps its socket and nothing else: its epoll instance exists only
 * while an operation runs (--hold of many allocations: one descriptor each). */
static void loop_detach(ploop *L, probe *p)
{
  if (L->epfd >= 0) close(L->epfd);
  L->epfd = -1;
  L->ep_errno = EBADF;
  for (int i = 0; i < 2; i++) p->legs[i].events = 0; /* registered nowhere now */
}

static void loop_attach(ploop *L, probe *p)
{
  L->epfd = epoll_create1(EPOLL_CLOEXEC);
  L->ep_errno = L->epfd < 0 ? errno : 0;
  for (int i = 0; i < p->nlegs; i++)
    if (p->legs[i].fd >= 0 && tf_probe__loop_watch(&p->legs[i]) < 0) return;
}

struct tf_allocation {
  probe *p;
  ploop *loop;
};

tf_err tf_allocation_new(tf_allocation **out, tf_probe_result **result, const tf_probe_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(opts);
  *out = NULL;
  if (result) *result = NULL;
  popts *c = NULL;
  tf_err rc = tf_probe__opts_new(&c, opts);
  if (rc < 0) return rc;
  tf_allocation *a = calloc(1, sizeof(*a));
  ploop *L = malloc(sizeof(*L));
  rc = a && L ? loop_init(L, 1, 0, 0) : tf_error__nomem();
  if (rc < 0) {
    free(a);
    free(L);
    tf_probe__opts_unref(c);
    return rc;
  }
  a->loop = L;
  rc = tf_probe__new(&a->p, c, NULL);
  if (rc == TF_OK) {
    probe *p = a->p;
    p->loop = L;
    L->slots[0] = p;
    p->keep = 1;
    tf_probe__start(p);
    rc = loop_drive(L, p);
  }
  if (rc < 0) {
    tf_probe__free(a->p);
    loop_free(L);
    free(L);
    free(a);
    return rc;
  }
  probe *p = a->p;
  tf_err status = p->res->status;
  tf_probe_result *res = p->res;
  p->res = NULL;
  if (status != TF_OK) {
    tf_error__set(status, "%s", tf_probe_result_message(res));
    if (result) *result = res;
    else tf_probe_result_free(res);
    tf_probe__free(p);
    loop_free(L);
    free(L);
    free(a);
    return status;
  }
  loop_detach(L, p);
  /* later operations record into a result of their own */
  p->res = tf_probe__result_new(c->o.uri);
  if (!p->res) {
    tf_probe_result_free(res);
    a->p = p;
    tf_allocation_free(a);
    return tf_error__nomem();
  }
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
  tf_probe_result *fresh = tf_probe__result_new(p->opts->o.uri);
  if (!fresh) return tf_error__nomem();
  tf_probe_result_free(p->res);
  p->res = fresh;
  double now = tf_probe__now_ms();
  p->finished = 0;
  p->fatal = TF_OK;
  p->deadline = now + p->opts->o.timeout_ms;
  tf_probe__loop_due(p, p->deadline);
  p->stage = stage;
  p->stage_t0 = now;
  tf_probe__stage_begin(p, stage);
  p->phase = phase;
  loop_attach(alloc->loop, p);
  a->req_lifetime = lifetime;
  if (!p->finished) tf_probe__leg_request(a, REQ_REFRESH, now);
  tf_err rc = loop_drive(alloc->loop, p);
  loop_detach(alloc->loop, p);
  if (rc < 0) return rc;
  if (p->res->status != TF_OK) return tf_error__set(p->res->status, "%s", tf_probe_result_message(p->res));
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
  tf_probe__free(alloc->p);
  loop_free(alloc->loop);
  free(alloc->loop);
  free(alloc);
}
