/* The probe's private parts, shared by its files:
 *   probe_options.c  options: defaults, checks, the private copy (read up to the caller's version)
 *   probe_result.c   results and their JSON
 *   probe_tls.c      TLS over the probe's own socket I/O (memory BIOs)
 *   probe_turn.c     the TURN state machine: requests, answers, phases, timers
 *   probe_io.c       sockets: open (a fresh 5-tuple), write, read, events
 *   probe_loop.c     the loop: tf_probe_run, probe sets, held allocations
 *   probe_ring.c     a set's UDP datagrams through io_uring, a round's in one system call
 *
 * One non-blocking state machine per probe, driven by one epoll loop. A probe
 * has one or two legs: leg A is the allocation under test; with peer_check,
 * leg B is a second allocation on its own socket that serves as A's peer. Each
 * leg owns a socket (a fresh 5-tuple), its credentials and at most one
 * outstanding transaction. */
#ifndef TF_PROBE_INTERNAL_H
#define TF_PROBE_INTERNAL_H

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "internal.h"

#define PROBE_SOFTWARE "turnfleet-probe/" TF_VERSION_STRING
#define PROBE_DEFAULT_USER "turnfleet-probe"
#define PROBE_PEER_SUFFIX "-peer"
#define PROBE_CHANNEL 0x4000
#define PROBE_RC 7          /* RFC 8489 §6.2.1: sends per transaction */
#define PROBE_RM 16         /* wait Rm * RTO after the last send */
#define PROBE_CLEANUP_RTOS 16 /* a failed probe's release: at most this many RTOs (sends at 0, 1, 3, 7, 15) */
#define PROBE_MAX_SOCKETS 8 /* 437 on Allocate: a new 5-tuple (on a cold port), at most 8 in all */
#define PROBE_MAX_STALE 2   /* 438 retries per transaction */
#define PROBE_PAYLOAD 32
#define PROBE_RX_CAP (2 * TF_STUN_MAX_MESSAGE + 64) /* a stream's receive buffer */
#define PROBE_TX_CAP (4 * TF_STUN_MAX_MESSAGE)      /* a stream's send buffer */
#define PROBE_DGRAM_CAP (TF_STUN_MAX_MESSAGE + 4)   /* one datagram (bigger ones are measured, not kept) */
#define PROBE_TEXT_SMALL 64 /* a leg keeps a REALM or NONCE shorter than this in itself */
#define PROBE_POLL_MAX_MS 1000
#define PROBE_PORT_QUARANTINE_MS 2500u /* coturn holds a released 5-tuple ~1 s (up to 2.5 s seen): the first quarantine */
#define PROBE_PORT_COLD_MS 60000u      /* after a 437 the walk jumps to a port unused this long (or never) */
#define PROBE_TIDS 512             /* transaction ids drawn at once */
#define PROBE_NUMBER_MAX 20            /* decimal digits of a probe number (user_numbered) */

/* ---- results ---- */

struct tf_probe_result {
  char *uri; /* in the same allocation, after the struct */
  tf_probe_stage stage;
  tf_err status;
  int error_code;
  char *error_reason; /* NULL: "" */
  char *message;      /* NULL: "" */
  int draining;
  int has_relayed, has_mapped;
  tf_addr relayed, mapped;
  uint16_t relayed_port, mapped_port;
  uint32_t lifetime;
  double rtt[TF_PROBE_STAGE_COUNT]; /* -1: did not run */
};

tf_probe_result *tf_probe__result_new(const char *uri);
/* @p text with every byte that is not printable UTF-8 written as \xNN (a relay's bytes are
 * untrusted: the copy is valid in JSON and harmless on a terminal). NULL when out of memory. */
char *tf_probe__printable(const char *text);

/* ---- options ---- */

/* Credentials minted for one user at one expiry, kept for the next probe of the same
 * options (the same second gives the same username): password and, per realm, the key
 * and its keyed HMAC context. */
typedef struct pmac {
  tf_mac mac; /* keyed once, copied per message */
  unsigned refs;
  uint8_t key[TF_STUN_KEY_SIZE];
} pmac;

pmac *tf_probe__mac_ref(pmac *m);
void tf_probe__mac_unref(pmac *m);

/* A minted username and password in one block, shared by the legs that use them. */
typedef struct puser {
  unsigned refs;
  char *username, *password; /* after the struct; the password is wiped on release */
} puser;

/* A copy of @p username and @p password with one reference, or NULL when out of memory. */
puser *tf_probe__user_new(const char *username, const char *password);
puser *tf_probe__user_ref(puser *u);
void tf_probe__user_unref(puser *u);

typedef struct pcred {
  int64_t expiry;
  puser *user;
  char *realm;
  pmac *mac; /* the key for realm, shared with the legs that use it */
} pcred;

/* A private copy of the options: strings duplicated, the secret wiped on free.
 * Shared (refcounted) by every probe of a tf_probe_set_add_repeated(). */
typedef struct popts {
  tf_probe_options o;
  size_t secret_len;
  tf_addr expect;
  int has_expect;
  unsigned refs;
  tf_uri *uri;                      /* parsed o.uri */
  struct sockaddr_storage sa;       /* the server, when the URI names it by address */
  socklen_t salen;                  /* 0: not yet, or a name (resolved per probe) */
  char server[TF_ADDR_STRLEN + 16]; /* "addr:port" */
  pcred cred[2]; /* leg A, leg B (its own user); unused with user_numbered */
} popts;

/* Check @p o (naming the field, never the secret's value) and copy it, reading the
 * caller's struct only up to its version. One reference; tf_probe__opts_unref(). */
tf_err tf_probe__opts_new(popts **out, const tf_probe_options *o);
void tf_probe__opts_unref(popts *c);
/* Forget what a pcred holds (wiping the secret parts). */
void tf_probe__cred_clear(pcred *k);

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
  PH_CLEANUP, /* failed (the result is set): its UDP allocations released before it is handed over */
  PH_DONE
};

struct probe;
struct ploop;

/* Fields in the order a datagram's handling reads them: a probe's memory is cold when its answer
 * comes (the kernel ran in between), and each cache line touched is a miss. */
typedef struct leg {
  /* the socket and the outstanding transaction (or data send, REQ_DATA) */
  struct probe *p;
  int fd;          /* with ring_made: a slot of the ring's file table, no descriptor */
  int ring_made;   /* the ring made, binds and connects the socket (CONN_CONNECTING until it says) */
  int binds;       /* ports tried for this socket (ring_made) */
  uint32_t gen;    /* new on every socket, so stale events are ignored */
  uint32_t events; /* epoll interest registered for fd (a UDP leg of a ring: EPOLLIN while its receive is armed) */
  int conn;
  int req;
  int authed;
  int sends;
  int rto;
  int stale;
  int queued; /* its message waits in the loop's batch of sends */
  uint32_t req_lifetime;
  double next_send, give_up;
  uint8_t tid[TF_STUN_TID_SIZE];
  uint8_t prev_tid[TF_STUN_TID_SIZE]; /* the transaction before: late duplicates of its answers are not news */
  pmac *mac;    /* the long-term key and its keyed HMAC context */
  uint8_t *msg; /* what is (re)sent: msg_small, or a block when it does not fit */
  size_t msg_len, msg_cap;
  int have_key;
  int allocated, released;
  int has_mapped;
  uint32_t lifetime;
  uint16_t port; /* local UDP port, once bound (0: not yet, or not a UDP leg of a set) */
  uint32_t walk; /* the loop's walk the port came from (ploop.walk then) */
  uint16_t relayed_port, mapped_port;
  tf_addr relayed, mapped;
  /* credentials (the password and key are secret) */
  puser *user; /* holds username and password */
  const char *username, *password;
  char *realm, *nonce; /* in realm_small / nonce_small when they fit */
  int sockets;     /* sockets opened for this Allocate (437 handling) */
  const char *who; /* "" for A, "peer " for B: prefixes messages */
  tf_addr peer;
  uint16_t peer_port;
  /* streams */
  SSL *ssl;
  BIO *rbio, *wbio; /* memory BIOs owned by ssl: we do the socket I/O ourselves */
  uint8_t *rx;      /* streams only (PROBE_RX_CAP); datagrams land in the loop's buffer */
  size_t rx_len;
  uint8_t *tx; /* streams only (PROBE_TX_CAP) */
  size_t tx_len;
  /* buffers last: a leg is reset up to here (leg_reset) */
  char malformed[200]; /* the last unusable answer to this transaction */
  char realm_small[PROBE_TEXT_SMALL], nonce_small[PROBE_TEXT_SMALL];
  uint8_t msg_small[256];
} leg;

typedef struct probe {
  /* what every event reads first */
  int finished;
  int mode; /* TF_URI_MODE_UDP, _TCP, _TLS */
  int phase;
  int nlegs;
  tf_probe_stage stage;
  int keep;    /* tf_allocation: leave A allocated at the end */
  int listed;  /* on the loop's done list */
  tf_err fatal; /* TF_ENOMEM met while running */
  double stage_t0;
  double deadline;
  tf_probe_result *res;
  popts *opts;
  struct ploop *loop; /* the loop that runs it */
  size_t slot;        /* in the loop */
  tf_uri *uri; /* borrowed from opts */
  uint64_t number; /* the probe's index in its set (user_numbered) */
  size_t index;    /* in the set */
  size_t entry;    /* the set's entry it came from */
  SSL_CTX *ctx;
  struct sockaddr_storage sa;
  socklen_t salen;
  char server[TF_ADDR_STRLEN + 16]; /* "addr:port" for messages */
  int payload_used; /* payload holds random bytes (wiped at the end) */
  uint8_t payload[2][PROBE_PAYLOAD];
  /* legs last: a probe's memory used again is cleared only up to here, and leg B (the peer
   * check's) only when it opens; until then it is as its last probe's dispose left it */
  leg legs[2];
} probe;

/* The loop: one epoll instance (and for a set, an io_uring for its datagrams, where the kernel has
 * one) and the probes it runs, one per slot. */
typedef struct ploop {
  int epfd;      /* -1: epoll_create1() failed with ep_errno (every probe fails with TF_ERESOURCE) */
  int ep_errno;
  probe **slots;
  size_t nslots;
  /* no timer of any probe fires before this (a lower bound: lowered whenever a timer is set,
   * recomputed when the probes' timers run), so a round touches only the probes with events */
  double due;
  /* sets: slots free for the next probe, and finished probes not yet handed over (in order) */
  size_t *free_slots, nfree;
  size_t *done, ndone;
  probe **spare; /* disposed probes of the set, their memory kept for the next ones */
  size_t nspare;
  int fatal; /* a probe met TF_ENOMEM */
  double now; /* ms, read after each epoll_wait() */
  uint32_t gen;
  /* UDP source ports: the loop hands them out in turn and keeps, for each, when its
   * socket closed, so no port comes back while the relay may remember its 5-tuple */
  uint32_t *recent; /* 65536 stamps, or NULL: the kernel picks ports */
  uint16_t port_lo, port_hi, port_next;
  uint32_t walk; /* counts the walk's jumps (a 437 on a port of an earlier walk moves it no more) */
  /* how long a closed port waits (ms): PROBE_PORT_QUARANTINE_MS, doubled past the age of any port
   * the relay still held (a 437), up to PROBE_PORT_COLD_MS: a loaded relay forgets slower */
  uint32_t quarantine;
  /* transaction ids drawn from the CSPRNG in bulk: one RAND_bytes() per PROBE_TIDS */
  uint8_t tids[PROBE_TIDS * TF_STUN_TID_SIZE];
  size_t tids_used;
  /* a round in three phases (loop_once): the datagrams read, then handled with their UDP
   * sends held, then the sends */
  int hold;          /* UDP sends go to txq */
  leg **txq;         /* legs whose message is to be sent, each once: room for every leg */
  size_t ntx;
  uint8_t *rx_arena; /* the round's datagrams, one after the other (epoll; a ring has its own buffers) */
  struct pring *ring; /* NULL: every socket through epoll */
  int streams_more;   /* with a ring: the last epoll_wait() had events, so it is asked again */
} ploop;

/* The ring a leg's datagrams go through; NULL: epoll (no ring, or a stream). */
static inline struct pring *tf_probe__leg_ring(const leg *l)
{
  return l->p->loop && l->p->mode == TF_URI_MODE_UDP ? l->p->loop->ring : NULL;
}

/* A step of a socket the ring makes (ring_made), as a round reports it. */
enum { OPEN_NONE, OPEN_SOCKET, OPEN_BIND, OPEN_CONNECT };

/* What a round brought one leg: a datagram (data, len: its whole length, which may be over
 * PROBE_DGRAM_CAP, the bytes kept), a failed receive or send (err), or the end of a
 * ring-made socket's opening (open: the step that failed with err, or OPEN_CONNECT done). */
typedef struct rxrec {
  leg *l;
  uint32_t gen;
  uint32_t len;
  const uint8_t *data;
  int err;  /* an errno: the receive (or with sent, the send) failed */
  int sent; /* err is a send's */
  int bid;  /* the ring's buffer holding data, -1: none */
  int open; /* OPEN_*: what this record reports of a ring-made socket */
} rxrec;

double tf_probe__now_ms(void);
const char *tf_probe__transport_name(int mode);
const char *tf_probe__method_name(int req);
void tf_probe__log(probe *p, tf_log_level level, const char *fmt, ...) TF__PRINTF(3, 4);
void tf_probe__fmt_addr(char *buf, size_t size, const tf_addr *a, uint16_t port);

/* probe_turn.c */
/* A probe of @p c, taking one reference to it (even on failure), in @p reuse (a disposed
 * probe's memory) or newly allocated when NULL. */
tf_err tf_probe__new(probe **out, popts *c, probe *reuse);
/* Close, wipe and release what @p p holds, but not its memory; tf_probe__free() both. */
void tf_probe__dispose(probe *p);
void tf_probe__free(probe *p);
void tf_probe__start(probe *p);
void tf_probe__stage_begin(probe *p, tf_probe_stage st);
void tf_probe__fail(probe *p, tf_err status, int code, const char *reason, const char *fmt, ...) TF__PRINTF(5, 6);
void tf_probe__release_all(probe *p);
void tf_probe__leg_ready(probe *p, leg *l, double now);
void tf_probe__leg_request(leg *l, int kind, double now);
void tf_probe__on_packet(leg *l, const uint8_t *data, size_t len, double now);
void tf_probe__frames(leg *l, double now);
void tf_probe__unusable(leg *l, const char *fmt, ...) TF__PRINTF(2, 3);
void tf_probe__timers(probe *p, double now);
double tf_probe__next_timer(const probe *p);

/* probe_io.c */
void tf_probe__leg_open(leg *l);
/* After a 437 on the leg's port: how long ago the loop last closed it (ms; UINT32_MAX: never, or
 * not a port the loop handed out). A port the relay held that long lengthens the quarantine. */
uint32_t tf_probe__leg_port_held(leg *l);
/* After a 437: the loop's next UDP source port moves to a random place in the range. */
void tf_probe__leg_jump_ports(leg *l);
void tf_probe__leg_close(leg *l);
void tf_probe__leg_write(leg *l, const uint8_t *data, size_t len);
void tf_probe__leg_flush(leg *l);
void tf_probe__leg_event(leg *l, uint32_t events, double now);
/* One datagram of a UDP leg into @p buf (PROBE_DGRAM_CAP bytes): its whole length, -errno when
 * the receive failed, or INT_MIN when none was queued. */
ssize_t tf_probe__leg_recv(leg *l, uint8_t *buf);
/* A UDP leg's datagram (len: its whole length) or failed receive or send, as a round brought it. */
void tf_probe__leg_input(leg *l, const rxrec *r, double now);
void tf_probe__leg_fail_net(leg *l, int err, const char *what);

/* probe_ring.c: where the kernel has io_uring (Linux 6.1 and later, not refused by a seccomp
 * policy, not TURNFLEET_PROBE_IO=epoll), a set's UDP legs receive, send and close through it,
 * and where it binds through io_uring (Linux 6.11, not TURNFLEET_PROBE_IO=ring) open too. */
/* 0: L->ring set; -1: none (the loop stays on epoll). */
int tf_probe__ring_open(ploop *L);
/* Submits what is queued, cancels what is armed, waits for it, and frees the ring. */
void tf_probe__ring_free(ploop *L);
/* Arm the receive of a UDP leg (once per socket; again when the kernel ended it): 0 or -errno. */
int tf_probe__ring_watch(leg *l);
/* Queue a datagram (copied): 0, or -1 when the ring has no room for it (send it now). */
int tf_probe__ring_send(leg *l, const uint8_t *data, size_t len);
/* Queue the making of a UDP leg's socket, bound to @p local when not NULL and connected to the
 * server, all in the ring (Linux 6.11 and later): 0, and the leg is ring_made and connecting;
 * -1 when the ring cannot (make it with system calls). */
int tf_probe__ring_connect(leg *l, const struct sockaddr_storage *local, socklen_t local_len);
/* Cancel the leg's receive and close its socket (at the ring's next round, or a flush). */
void tf_probe__ring_drop(leg *l, int fd);
/* Submit now, and run what completed: the closes queued so far take effect. */
void tf_probe__ring_flush(ploop *L);
/* Submit what is queued and wait at most @p timeout_ms for completions; then up to @p cap of
 * them into @p rx (*nrx) and *streams set when the epoll set has events. */
tf_err tf_probe__ring_round(ploop *L, int timeout_ms, rxrec *rx, size_t cap, size_t *nrx, int *streams);
/* The round's buffers back to the kernel, and legs whose receive ended armed again. */
void tf_probe__ring_release(ploop *L, const rxrec *rx, size_t nrx);

/* probe_tls.c */
void tf_probe__tls_start(leg *l);
void tf_probe__tls_step(leg *l);
/* Ciphertext from the socket: on with the handshake, then plaintext frames into rx. */
void tf_probe__tls_input(leg *l, const uint8_t *data, size_t len, double now);
void tf_probe__tls_write(leg *l, const uint8_t *data, size_t len);
/* Move the ciphertext TLS produced into tx. */
void tf_probe__tls_pending(leg *l);
int tf_probe__tls_wants_write(const leg *l);

/* probe_loop.c */
/* @p n random bytes from a CSPRNG (the kernel's; OpenSSL's if that fails). 0, or -1. */
int tf_probe__random(void *buf, size_t n);
/* A fresh transaction id (from the CSPRNG), or NULL when it failed (the probe failed). */
const uint8_t *tf_probe__tid(probe *p);
/* Watch @p l's socket (new) or change what it waits for. 0, or -1 after failing the probe. */
int tf_probe__loop_watch(leg *l);
/* A timer of @p p fires at @p t (ms): the loop looks again by then. */
void tf_probe__loop_due(probe *p, double t);

#endif
