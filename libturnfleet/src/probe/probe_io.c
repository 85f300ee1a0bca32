/* probe I/O: a leg's socket. Every Allocate gets a new socket, a new 5-tuple;
 * in a loop that hands out UDP source ports (sets), a port comes back only
 * after the relay has forgotten its last 5-tuple. Running out of descriptors,
 * buffers or ports is this machine's problem (TF_ERESOURCE), not the relay's. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "probe_internal.h"

#define PORT_BIND_TRIES 64
#define PORT_SKIP_MAX 4096

static int local_shortage(int err)
{
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM || err == EADDRNOTAVAIL;
}

static void leg_fail_resource(leg *l, int err, const char *what)
{
  probe *p = l->p;
  tf_probe__fail(p, TF_ERESOURCE, 0, NULL, "%s%s %s over %s: %s (local resources exhausted)", l->who, what,
                 p->server, tf_probe__transport_name(p->mode), strerror(err));
}

void tf_probe__leg_fail_net(leg *l, int err, const char *what)
{
  probe *p = l->p;
  if (local_shortage(err)) {
    leg_fail_resource(l, err, what);
    return;
  }
  tf_probe__fail(p, TF_ENET, 0, NULL, "%s%s %s over %s: %s", l->who, what, p->server,
                 tf_probe__transport_name(p->mode), strerror(err));
}

/* The round's clock: a port's quarantine is seconds long, a round milliseconds. */
static uint32_t port_stamp(const ploop *L) { return (uint32_t)(uint64_t)L->now | 1u; }

/* The loop's next UDP source port that no recent socket of the loop used, as the wildcard
 * address in @p ss (*len): the port, or 0 when the loop does not hand out ports or none is
 * free (nothing is bound: the kernel picks at connect). */
static uint16_t next_port(leg *l, struct sockaddr_storage *ss, socklen_t *len)
{
  ploop *L = l->p->loop;
  if (!L || !L->recent || l->p->mode != TF_URI_MODE_UDP) return 0;
  l->walk = L->walk;
  uint32_t stamp = port_stamp(L);
  for (int skips = 0; skips < PORT_SKIP_MAX; skips++) {
    uint16_t port = L->port_next;
    L->port_next = port >= L->port_hi ? L->port_lo : (uint16_t)(port + 1);
    if (L->recent[port] && (uint32_t)(stamp - L->recent[port]) < L->quarantine) continue;
    memset(ss, 0, sizeof(*ss));
    if (l->p->sa.ss_family == AF_INET6) {
      struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
      s6->sin6_family = AF_INET6;
      s6->sin6_addr = in6addr_any;
      s6->sin6_port = htons(port);
      *len = sizeof(*s6);
    } else {
      struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
      s4->sin_family = AF_INET;
      s4->sin_addr.s_addr = htonl(INADDR_ANY);
      s4->sin_port = htons(port);
      *len = sizeof(*s4);
    }
    return port;
  }
  return 0;
}

/* Bind @p fd to a fresh port (next_port), trying the next while one is taken. */
static void bind_fresh_port(leg *l, int fd)
{
  l->port = 0;
  struct sockaddr_storage ss;
  socklen_t len = 0;
  for (int binds = 0; binds < PORT_BIND_TRIES; binds++) {
    uint16_t port = next_port(l, &ss, &len);
    if (!port) return;
    if (bind(fd, (struct sockaddr *)&ss, len) == 0) {
      l->port = port;
      return;
    }
    if (errno != EADDRINUSE) return;
  }
}

/* The ring makes, binds (the @p binds-th port tried; none after PORT_BIND_TRIES) and connects
 * the leg's socket, which is connecting till the ring says: 0, or -1 (system calls then). */
static int leg_open_in_ring(leg *l, int binds)
{
  struct sockaddr_storage ss;
  socklen_t len = 0;
  uint16_t port = binds < PORT_BIND_TRIES ? next_port(l, &ss, &len) : 0;
  l->gen = ++l->p->loop->gen;
  if (tf_probe__ring_connect(l, port ? &ss : NULL, len) < 0) return -1;
  l->port = port;
  l->binds = binds;
  l->conn = CONN_CONNECTING;
  return 0;
}

uint32_t tf_probe__leg_port_held(leg *l)
{
  ploop *L = l->p->loop;
  if (!L || !L->recent || !l->port || !L->recent[l->port]) return UINT32_MAX;
  uint32_t age = port_stamp(L) - L->recent[l->port];
  if (age < PROBE_PORT_COLD_MS / 2 && 2 * age > L->quarantine) {
    L->quarantine = 2 * age;
    tf_probe__log(l->p, TF_LOG_DEBUG, "%sthe relay still held port %u, closed %u ms ago: ports now wait %u ms", l->who,
                  l->port, age, L->quarantine);
  }
  return age;
}

void tf_probe__leg_jump_ports(leg *l)
{
  ploop *L = l->p->loop;
  uint16_t r = 0;
  /* one jump per walk: the probes whose ports the old walk handed out meet their 437s after
   * it moved, and follow the new walk with their next socket */
  if (!L || !L->recent || l->walk != L->walk || tf_probe__random(&r, sizeof(r)) < 0) return;
  /* Another socket's 5-tuple the relay still holds (another process's, or a run's before it)
   * lies ahead: the walk goes on from the first port at or after a random place that this loop
   * left cold (never used, or PROBE_PORT_COLD_MS ago), else from the port it left longest ago.
   * Never into its own recent trail: the ports after such a place were all used within the
   * quarantine, and the walk would skip them all and leave the kernel to pick ports the relay
   * may still hold. The whole range is read, once per jump. */
  const unsigned span = (unsigned)L->port_hi - L->port_lo + 1;
  const uint32_t stamp = port_stamp(L);
  uint16_t best = L->port_next;
  uint32_t best_age = 0;
  for (unsigned k = 0; k < span; k++) {
    uint16_t port = (uint16_t)(L->port_lo + (r + k) % span);
    uint32_t age = L->recent[port] ? stamp - L->recent[port] : UINT32_MAX;
    if (age > best_age) {
      best = port;
      best_age = age;
    }
    if (age >= PROBE_PORT_COLD_MS) break;
  }
  L->port_next = best;
  L->walk++;
}

void tf_probe__leg_close(leg *l)
{
  if (l->ssl) {
    SSL_free(l->ssl); /* frees the BIOs too */
    l->ssl = NULL;
    l->rbio = l->wbio = NULL;
  }
  if (l->fd >= 0) {
    ploop *L = l->p->loop;
    if (l->port && L && L->recent) L->recent[l->port] = port_stamp(L);
    if (tf_probe__leg_ring(l)) tf_probe__ring_drop(l, l->fd);
    else close(l->fd); /* leaves the epoll set with it */
  }
  l->fd = -1;
  l->ring_made = 0;
  l->port = 0;
  l->events = 0;
  l->conn = CONN_CLOSED;
  l->rx_len = l->tx_len = 0;
  l->req = REQ_NONE;
}

/* The port the kernel picked when the loop had none to give (every one waiting, or a bind
 * refused): known, it waits its quarantine after the socket like any other. */
static void leg_learn_port(leg *l)
{
  ploop *L = l->p->loop;
  if (l->port || !L || !L->recent || l->p->mode != TF_URI_MODE_UDP) return;
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0) return;
  l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
}

static void leg_connected(leg *l)
{
  probe *p = l->p;
  leg_learn_port(l);
  if (p->mode != TF_URI_MODE_TLS) {
    l->conn = CONN_READY;
    tf_probe__leg_ready(p, l, tf_probe__now_ms());
    return;
  }
  tf_probe__tls_start(l);
}

static void leg_connect_failed(leg *l, int err)
{
  probe *p = l->p;
  if (err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH) {
    tf_probe__fail(p, TF_ENET, 0, NULL, "%s%s over %s is unreachable: %s", l->who, p->server,
                   tf_probe__transport_name(p->mode), strerror(err));
    return;
  }
  tf_probe__leg_fail_net(l, err, "cannot connect to");
}

/* The socket made, bound and connected with system calls. */
static void leg_open_sys(leg *l)
{
  probe *p = l->p;
  int type = p->mode == TF_URI_MODE_UDP ? SOCK_DGRAM : SOCK_STREAM;
  int fd = socket(p->sa.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  /* a ring closes sockets at its next round: those it holds first */
  if (fd < 0 && (errno == EMFILE || errno == ENFILE) && tf_probe__leg_ring(l)) {
    tf_probe__ring_flush(p->loop);
    fd = socket(p->sa.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) {
    tf_probe__leg_fail_net(l, errno, "cannot open a socket towards");
    return;
  }
  if (type == SOCK_STREAM) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  l->fd = fd;
  l->gen = p->loop ? ++p->loop->gen : l->gen + 1;
  bind_fresh_port(l, fd);
  int rc = connect(fd, (struct sockaddr *)&p->sa, p->salen);
  int err = errno;
  if (rc < 0 && err != EINPROGRESS) {
    leg_connect_failed(l, err);
    return;
  }
  l->conn = rc == 0 ? CONN_READY : CONN_CONNECTING;
  if (tf_probe__loop_watch(l) < 0) return;
  if (rc == 0) leg_connected(l);
}

/* A new socket (a new 5-tuple) towards the server. */
void tf_probe__leg_open(leg *l)
{
  probe *p = l->p;
  tf_probe__leg_close(l);
  if (p->mode != TF_URI_MODE_UDP && !l->rx) {
    l->rx = malloc(PROBE_RX_CAP);
    l->tx = malloc(PROBE_TX_CAP);
    if (!l->rx || !l->tx) {
      p->fatal = TF_ENOMEM;
      tf_probe__fail(p, TF_ERROR, 0, NULL, "out of memory");
      return;
    }
  }
  l->sockets++;
  if (!tf_probe__leg_ring(l) || leg_open_in_ring(l, 0) < 0) leg_open_sys(l);
}

/* A UDP leg's send or receive failed with @p err: a lost datagram (retransmission covers
 * it) or the end of the probe. */
static void leg_io_failed(leg *l, int err, int sent)
{
  if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR || (sent && err == ENOBUFS)) return;
  if (err == ECONNREFUSED) {
    tf_probe__fail(l->p, TF_ENET, 0, NULL,
                   "%s%s over udp is unreachable: connection refused (nothing listens there)", l->who, l->p->server);
    return;
  }
  tf_probe__leg_fail_net(l, err, sent ? "cannot send to" : "cannot receive from");
}

/* Send a datagram (UDP) or queue bytes for the stream. While the loop holds UDP sends (it
 * is handling a round's datagrams), the leg's message waits for the end of the round. */
void tf_probe__leg_write(leg *l, const uint8_t *data, size_t len)
{
  probe *p = l->p;
  if (p->mode == TF_URI_MODE_UDP) {
    ploop *L = p->loop;
    if (L && L->hold && data == l->msg) {
      if (!l->queued) L->txq[L->ntx++] = l;
      l->queued = 1;
      return;
    }
    if (tf_probe__leg_ring(l) && tf_probe__ring_send(l, data, len) == 0) return;
    if (l->ring_made) return; /* no descriptor to send on: lost, as a datagram may be */
    if (send(l->fd, data, len, MSG_NOSIGNAL) < 0) leg_io_failed(l, errno, 1);
    return;
  }
  if (p->mode == TF_URI_MODE_TLS) {
    tf_probe__tls_write(l, data, len);
    return;
  }
  if (l->tx_len + len > PROBE_TX_CAP) {
    tf_probe__fail(p, TF_EPROTO, 0, NULL, "%sthe connection to %s does not drain (send buffer full)", l->who,
                   p->server);
    return;
  }
  memcpy(l->tx + l->tx_len, data, len);
  l->tx_len += len;
  tf_probe__leg_flush(l);
}

void tf_probe__leg_flush(leg *l)
{
  for (;;) {
    tf_probe__tls_pending(l); /* top up tx with the ciphertext TLS produced */
    if (l->tx_len == 0) break;
    ssize_t n = send(l->fd, l->tx, l->tx_len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break; /* EPOLLOUT brings us back */
      tf_probe__leg_fail_net(l, errno, "connection to");
      return;
    }
    memmove(l->tx, l->tx + n, l->tx_len - (size_t)n);
    l->tx_len -= (size_t)n;
  }
  if (l->fd >= 0 && !l->p->finished) tf_probe__loop_watch(l);
}

/* One datagram per readiness: the loop comes back while more are queued. */
ssize_t tf_probe__leg_recv(leg *l, uint8_t *buf)
{
  ssize_t n = recv(l->fd, buf, PROBE_DGRAM_CAP, MSG_TRUNC);
  if (n >= 0) return n;
  if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return INT_MIN;
  return -errno;
}

/* A ring-made socket's opening ended: connected, or the step r->open failed, reported as
 * leg_open_sys() reports it. */
static void leg_opened(leg *l, const rxrec *r)
{
  if (l->conn != CONN_CONNECTING) return;
  int err = r->err;
  if (r->open == OPEN_BIND && err) {
    /* a port taken: the next one, as bind_fresh_port; another failure: the kernel picks */
    int binds = err == EADDRINUSE ? l->binds + 1 : PORT_BIND_TRIES;
    tf_probe__leg_close(l);
    if (leg_open_in_ring(l, binds) < 0) leg_open_sys(l);
    return;
  }
  if (r->open == OPEN_SOCKET) {
    tf_probe__leg_fail_net(l, err, "cannot open a socket towards");
    return;
  }
  if (err) {
    leg_connect_failed(l, err);
    return;
  }
  l->conn = CONN_READY;
  if (tf_probe__loop_watch(l) < 0) return;
  leg_connected(l);
}

void tf_probe__leg_input(leg *l, const rxrec *r, double now)
{
  if (r->open) {
    leg_opened(l, r);
    return;
  }
  if (r->err) {
    leg_io_failed(l, r->err, r->sent);
    return;
  }
  if (r->len > PROBE_DGRAM_CAP) {
    tf_probe__unusable(l, "a datagram of %u bytes, over the %d-byte message limit", r->len, TF_STUN_MAX_MESSAGE);
    return;
  }
  tf_probe__on_packet(l, r->data, r->len, now);
}

static void leg_read_stream(leg *l, double now)
{
  probe *p = l->p;
  uint32_t gen = l->gen;
  for (int i = 0; i < 64 && !p->finished && l->gen == gen; i++) {
    uint8_t buf[4096];
    uint8_t *dst = l->ssl ? buf : l->rx + l->rx_len;
    size_t room = l->ssl ? sizeof(buf) : PROBE_RX_CAP - l->rx_len;
    if (room == 0) {
      tf_probe__fail(p, TF_EPROTO, 0, NULL, "%sthe stream from %s holds a frame too large", l->who, p->server);
      return;
    }
    ssize_t n = recv(l->fd, dst, room, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      tf_probe__leg_fail_net(l, errno, "connection to");
      return;
    }
    if (n == 0) {
      tf_probe__fail(p, TF_ENET, 0, NULL, "%s%s closed the connection", l->who, p->server);
      return;
    }
    if (l->ssl) {
      tf_probe__tls_input(l, buf, (size_t)n, now);
      continue;
    }
    l->rx_len += (size_t)n;
    tf_probe__frames(l, now);
    if ((size_t)n < room) return; /* drained */
  }
}

void tf_probe__leg_event(leg *l, uint32_t events, double now)
{
  probe *p = l->p;
  if (l->conn == CONN_CONNECTING) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t el = sizeof(err);
    if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
    if (err) {
      if (local_shortage(err)) {
        leg_fail_resource(l, err, "cannot connect to");
        return;
      }
      tf_probe__fail(p, TF_ENET, 0, NULL, "%s%s over %s is unreachable: %s", l->who, p->server,
                     tf_probe__transport_name(p->mode), strerror(err));
      return;
    }
    leg_connected(l);
    if (!p->finished && l->fd >= 0) tf_probe__loop_watch(l);
    return;
  }
  uint32_t gen = l->gen;
  if (events & EPOLLOUT) tf_probe__leg_flush(l);
  if (p->finished || l->gen != gen) return;
  if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
  leg_read_stream(l, now); /* datagrams: the loop reads them (tf_probe__leg_recv) */
}
