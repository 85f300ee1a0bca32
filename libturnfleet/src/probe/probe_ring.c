/* probe ring: a set's UDP datagrams through io_uring. Everything a UDP probe does with its socket
 * goes through the ring: one multishot receive per socket, the sends, and the cancel and close at
 * the end; where the kernel binds through io_uring too (Linux 6.11), also the making, binding
 * (the loop chooses the port) and connecting of the socket, into a slot of the ring's file table
 * rather than a descriptor. A round of the loop, every socket it opens, every datagram it receives
 * and every request it sends, is then one io_uring_enter() rather than a system call each. Each
 * system call costs user time too where the kernel isolates its page tables without PCID (every
 * return to user space starts with an empty TLB), so this is the probe's largest saving there
 * (docs/probe.md). On older kernels the socket is made, bound and connected with system calls.
 *
 * Under load (eight or more probes in flight) a round waits, where the kernel has a minimum wait
 * (Linux 6.12), for a quarter of the probes' completions but at most RING_COALESCE_US while it
 * has any: as a network card coalesces its interrupts. Fewer, fuller rounds cost less, in
 * system calls, wake-ups and their user time; a stage's time can read up to that much long.
 *
 * Datagrams land in buffers the kernel takes from a ring of them (a provided-buffer ring),
 * never in a probe's memory: the memory of a probe that ended serves the next one, and no late
 * datagram of the old socket can reach it. A send is copied into the ring's arena and goes out
 * when it is submitted (MSG_DONTWAIT: sent or failed then, never held by the kernel), so the
 * arena is free again after each submit. The epoll set, where TCP and TLS legs are, is polled
 * through the ring. Without io_uring (an older kernel, a seccomp policy that refuses it, or
 * TURNFLEET_PROBE_IO=epoll) the loop runs on epoll alone; TURNFLEET_PROBE_IO=ring keeps the ring
 * but makes sockets with system calls.
 *
 * A ring-made socket's slot is the leg's own (two per probe slot of the loop). It is made,
 * bound and connected by one chain of linked requests whose later steps run only when the ring
 * is next asked for completions, so a slot whose chain has not completed (its connect's
 * completion not seen) is not closed or made again: a leg closed then leaves it to be closed
 * when the connect completes, and its next socket is made with system calls. */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "probe_internal.h"

#define RING_SQ 512                /* submission entries: a fuller queue is submitted early */
#define RING_ARENA (64 * 1024)     /* sends copied until the next submit */
#define RING_BUF (((size_t)PROBE_DGRAM_CAP + 7) & ~(size_t)7)
#define RING_BGID 1
#define RING_FREE_WAIT_MS 1000
#define RING_COALESCE_US 200

/* A completion's user data: its kind (low three bits), the leg (bit 3), the slot, and the
 * socket's generation (high 32 bits), so a completion of a closed socket is known. */
enum { UD_RECV, UD_SEND, UD_QUIET, UD_STREAMS, UD_SOCKET, UD_BIND, UD_CONNECT };
#define UD_CANCEL_ALL ((uint64_t)1 << 31 | UD_QUIET)
/* IORING_OP_BIND (Linux 6.11): newer than the liburing this builds with, and the kernel is asked
 * whether it has it */
#define RING_OP_BIND 56
/* IORING_FEAT_MIN_TIMEOUT (Linux 6.12), and the wait's argument with its min_wait_usec (which
 * liburing 2.3 calls pad): newer than the liburing this builds with too */
#define RING_FEAT_MIN_TIMEOUT (1U << 15)
struct ring_wait_arg {
  uint64_t sigmask;
  uint32_t sigmask_sz, min_wait_usec;
  uint64_t ts;
};

/* A file-table slot of a ring-made socket. */
enum { FILE_FREE, FILE_OPENING, FILE_OPEN, FILE_ORPHAN /* closed while opening */ };

typedef struct pring {
  struct io_uring ring;
  struct io_uring_buf_ring *br;
  uint8_t *bufs;
  unsigned nbufs, given; /* buffers given back since the last advance */
  size_t br_len, bufs_len;
  uint8_t *arena;
  size_t arena_used;
  int streams_armed;
  uint8_t *files; /* FILE_* per file-table slot, NULL: sockets made with system calls */
  unsigned nfiles;
  leg **rearm; /* legs whose receive the kernel ended, armed again after the round */
  uint32_t *rearm_gen;
  size_t nrearm;
  int min_wait; /* the kernel has a minimum wait: rounds coalesce under load */
} pring;

static uint64_t ud_of(const leg *l, int kind)
{
  return (uint64_t)l->gen << 32 | (uint64_t)l->p->slot << 4 | (uint64_t)(l == &l->p->legs[1]) << 3 | (uint64_t)kind;
}

/* The file-table slot of a leg, and of a completion's leg. */
static unsigned leg_file(const leg *l) { return 2 * (unsigned)l->p->slot + (l == &l->p->legs[1]); }
static unsigned ud_file(uint64_t ud) { return (unsigned)((ud & 0xFFFFFFFFu) >> 3); }

/* The leg a completion is for, NULL when its socket is closed since. */
static leg *ud_leg(const ploop *L, uint64_t ud)
{
  size_t slot = (size_t)((ud & 0xFFFFFFFFu) >> 4);
  probe *p = slot < L->nslots ? L->slots[slot] : NULL;
  if (!p || p->finished) return NULL;
  leg *l = &p->legs[(ud >> 3) & 1];
  return l->fd >= 0 && l->gen == (uint32_t)(ud >> 32) ? l : NULL;
}

/* After a submit: once the kernel took every entry, every send is done (sent or failed) and the
 * arena free again. */
static void ring_submitted(pring *R)
{
  if (io_uring_sq_ready(&R->ring) == 0) R->arena_used = 0;
}

static void ring_submit(pring *R)
{
  io_uring_submit(&R->ring);
  ring_submitted(R);
}

/* @p n free submission entries (submitting what is queued when there are fewer), the first
 * returned; NULL when the ring takes nothing. */
static struct io_uring_sqe *ring_sqe(pring *R, unsigned n)
{
  if (io_uring_sq_space_left(&R->ring) < n) ring_submit(R);
  return io_uring_sq_space_left(&R->ring) < n ? NULL : io_uring_get_sqe(&R->ring);
}

static void ring_give(pring *R, int bid)
{
  io_uring_buf_ring_add(R->br, R->bufs + (size_t)bid * RING_BUF, PROBE_DGRAM_CAP, (unsigned short)bid,
                        io_uring_buf_ring_mask(R->nbufs), (int)R->given++);
}

static void ring_give_done(pring *R)
{
  if (!R->given) return;
  io_uring_buf_ring_advance(R->br, (int)R->given);
  R->given = 0;
}

static void ring_unmap(pring *R)
{
  if (R->br) munmap(R->br, R->br_len);
  if (R->bufs) munmap(R->bufs, R->bufs_len);
  free(R->arena);
  free(R->rearm);
  free(R->rearm_gen);
  free(R->files);
  free(R);
}

static void *ring_map(size_t len)
{
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return m == MAP_FAILED ? NULL : m;
}

/* A file table of @p n slots where the kernel binds through io_uring; otherwise sockets are
 * made with system calls. The table stays within RLIMIT_NOFILE, as the descriptors would: the
 * set meets the limit it was given either way (and liburing, refused, would raise the limit). */
static void ring_files(pring *R, unsigned n)
{
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) < 0 || lim.rlim_cur < n) return;
  struct io_uring_probe *pr = io_uring_get_probe_ring(&R->ring);
  int bind = pr && io_uring_opcode_supported(pr, RING_OP_BIND);
  if (pr) io_uring_free_probe(pr);
  if (!bind) return;
  R->files = calloc(n, 1);
  if (R->files && io_uring_register_files_sparse(&R->ring, n) == 0) {
    R->nfiles = n;
    return;
  }
  free(R->files);
  R->files = NULL;
}

int tf_probe__ring_open(ploop *L)
{
  const char *io = getenv("TURNFLEET_PROBE_IO");
  if (io && strcmp(io, "epoll") == 0) return -1;
  int made = !io || strcmp(io, "ring") != 0;
  pring *R = calloc(1, sizeof(*R));
  if (!R) return -1;
  struct io_uring_params prm;
  memset(&prm, 0, sizeof(prm));
  /* Linux 6.1: one thread submits, and completions run only when it waits (a round's at once) */
  prm.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL;
  if (io_uring_queue_init_params(RING_SQ, &R->ring, &prm) < 0) {
    free(R);
    return -1;
  }
  /* a buffer per datagram a round may hold back, four per probe: past that a socket's
   * receive ends (ENOBUFS) and is armed again once the round gave its buffers back */
  unsigned want = L->nslots > 1024 ? 4096 : 4 * (unsigned)L->nslots;
  R->nbufs = 16;
  while (R->nbufs < want) R->nbufs *= 2;
  R->br_len = R->nbufs * sizeof(struct io_uring_buf);
  R->bufs_len = R->nbufs * RING_BUF;
  /* mapped, not allocated: page-aligned as the kernel wants the ring, and only the pages
   * datagrams fill are ever touched */
  R->br = ring_map(R->br_len);
  R->bufs = ring_map(R->bufs_len);
  R->arena = malloc(RING_ARENA);
  R->rearm = malloc(2 * L->nslots * sizeof(*R->rearm));
  R->rearm_gen = malloc(2 * L->nslots * sizeof(*R->rearm_gen));
  struct io_uring_buf_reg reg;
  memset(&reg, 0, sizeof(reg));
  reg.ring_addr = (uint64_t)(uintptr_t)R->br;
  reg.ring_entries = R->nbufs;
  reg.bgid = RING_BGID;
  if (!R->br || !R->bufs || !R->arena || !R->rearm || !R->rearm_gen ||
      io_uring_register_buf_ring(&R->ring, &reg, 0) < 0) {
    io_uring_queue_exit(&R->ring);
    ring_unmap(R);
    return -1;
  }
  R->min_wait = (prm.features & RING_FEAT_MIN_TIMEOUT) != 0;
  io_uring_buf_ring_init(R->br);
  for (unsigned i = 0; i < R->nbufs; i++) ring_give(R, (int)i);
  ring_give_done(R);
  if (made) ring_files(R, 2 * (unsigned)L->nslots);
  L->ring = R;
  return 0;
}

void tf_probe__ring_free(ploop *L)
{
  pring *R = L->ring;
  L->ring = NULL;
  /* the queued closes go out, and every receive still armed is cancelled and seen to end, so
   * the kernel writes into none of the buffers once they are unmapped */
  struct io_uring_sqe *q = ring_sqe(R, 1);
  if (q) {
    io_uring_prep_cancel64(q, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(q, UD_CANCEL_ALL);
  }
  for (int done = !q, waits = 0; !done && waits < 16; waits++) {
    struct __kernel_timespec ts = {0, (long long)RING_FREE_WAIT_MS * 1000000 / 16};
    struct io_uring_cqe *cqe = NULL;
    io_uring_submit_and_wait_timeout(&R->ring, &cqe, 1, &ts, NULL);
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&R->ring, head, cqe)
    {
      seen++;
      if (cqe->user_data == UD_CANCEL_ALL) done = 1;
    }
    io_uring_cq_advance(&R->ring, seen);
  }
  io_uring_queue_exit(&R->ring);
  ring_unmap(R);
}

int tf_probe__ring_watch(leg *l)
{
  pring *R = l->p->loop->ring;
  struct io_uring_sqe *q = ring_sqe(R, 1);
  if (!q) return -EBUSY;
  /* MSG_TRUNC: a datagram larger than its buffer reports its whole length */
  io_uring_prep_recv_multishot(q, l->fd, NULL, 0, MSG_TRUNC);
  q->flags |= IOSQE_BUFFER_SELECT | (l->ring_made ? IOSQE_FIXED_FILE : 0);
  q->buf_group = RING_BGID;
  io_uring_sqe_set_data64(q, ud_of(l, UD_RECV));
  l->events = EPOLLIN;
  return 0;
}

/* @p n free submission entries, the first returned, and @p len bytes of @p data copied into the
 * arena (*copy), where the kernel reads them when the entries are submitted; NULL when the
 * ring has no room for both (submitting what is queued first). */
static struct io_uring_sqe *ring_sqe_with(pring *R, unsigned n, const void *data, size_t len, uint8_t **copy)
{
  size_t room = (len + 7) & ~(size_t)7;
  if (room > RING_ARENA) return NULL;
  if (R->arena_used + room > RING_ARENA) ring_submit(R);
  struct io_uring_sqe *q = ring_sqe(R, n); /* may submit, which frees the arena too */
  if (!q || R->arena_used + room > RING_ARENA) return NULL;
  *copy = R->arena + R->arena_used;
  R->arena_used += room;
  if (len) memcpy(*copy, data, len);
  return q;
}

int tf_probe__ring_send(leg *l, const uint8_t *data, size_t len)
{
  pring *R = l->p->loop->ring;
  uint8_t *copy;
  struct io_uring_sqe *q = ring_sqe_with(R, 1, data, len, &copy);
  if (!q) return -1;
  io_uring_prep_send(q, l->fd, copy, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  q->flags |= IOSQE_CQE_SKIP_SUCCESS | (l->ring_made ? IOSQE_FIXED_FILE : 0); /* a completion only when it failed */
  io_uring_sqe_set_data64(q, ud_of(l, UD_SEND));
  return 0;
}

int tf_probe__ring_connect(leg *l, const struct sockaddr_storage *local, socklen_t local_len)
{
  pring *R = l->p->loop->ring;
  unsigned file = leg_file(l);
  if (!R->files || file >= R->nfiles || (R->files[file] != FILE_FREE && R->files[file] != FILE_OPEN)) return -1;
  uint8_t *copy; /* the bind's address, which the kernel copies when the request is submitted */
  struct io_uring_sqe *q = ring_sqe_with(R, local ? 3 : 2, local, local ? local_len : 0, &copy);
  if (!q) return -1;
  probe *p = l->p;
  /* the chain: the connect always completes; a step before it only when it failed, and then
   * the steps after it are cancelled without a completion */
  io_uring_prep_socket_direct(q, p->sa.ss_family, SOCK_DGRAM | SOCK_NONBLOCK, 0, file, 0);
  q->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
  io_uring_sqe_set_data64(q, ud_of(l, UD_SOCKET));
  if (local) {
    q = io_uring_get_sqe(&R->ring);
    io_uring_prep_rw(RING_OP_BIND, q, (int)file, copy, 0, local_len);
    q->flags |= IOSQE_FIXED_FILE | IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(q, ud_of(l, UD_BIND));
  }
  q = io_uring_get_sqe(&R->ring);
  io_uring_prep_connect(q, (int)file, (const struct sockaddr *)&p->sa, p->salen);
  q->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(q, ud_of(l, UD_CONNECT));
  R->files[file] = FILE_OPENING;
  l->fd = (int)file;
  l->ring_made = 1;
  l->events = 0;
  return 0;
}

/* A ring-made socket's slot: its receive cancelled (when armed) and the slot closed. */
static void ring_close_file(pring *R, unsigned file, uint64_t recv_ud)
{
  struct io_uring_sqe *q = ring_sqe(R, recv_ud ? 2 : 1);
  R->files[file] = FILE_FREE;
  if (!q) return; /* the ring takes nothing: the next socket made in the slot replaces it */
  if (recv_ud) {
    io_uring_prep_cancel64(q, recv_ud, 0);
    q->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(q, UD_QUIET);
    q = io_uring_get_sqe(&R->ring);
  }
  io_uring_prep_close_direct(q, file);
  q->flags |= IOSQE_CQE_SKIP_SUCCESS;
  io_uring_sqe_set_data64(q, UD_QUIET);
}

void tf_probe__ring_drop(leg *l, int fd)
{
  pring *R = l->p->loop->ring;
  int armed = l->events != 0;
  if (l->ring_made) {
    l->ring_made = 0;
    if (R->files[fd] == FILE_OPENING) R->files[fd] = FILE_ORPHAN; /* closed once its connect completes */
    else ring_close_file(R, (unsigned)fd, armed ? ud_of(l, UD_RECV) : 0);
    return;
  }
  struct io_uring_sqe *q = ring_sqe(R, armed ? 2 : 1);
  if (!q) {
    close(fd); /* the ring takes nothing: its receive keeps the socket until the ring ends */
    return;
  }
  if (armed) { /* the receive holds the socket open: cancelled first, the close runs either way */
    io_uring_prep_cancel_fd(q, fd, IORING_ASYNC_CANCEL_ALL);
    q->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(q, UD_QUIET);
    q = io_uring_get_sqe(&R->ring);
  }
  io_uring_prep_close(q, fd);
  q->flags |= IOSQE_CQE_SKIP_SUCCESS;
  io_uring_sqe_set_data64(q, UD_QUIET);
}

void tf_probe__ring_flush(ploop *L)
{
  /* and run the completions: a close linked behind a cancel is issued only once the cancel
   * completed, which (DEFER_TASKRUN) is when the ring is asked for events */
  io_uring_submit_and_get_events(&L->ring->ring);
  ring_submitted(L->ring);
}

static void ring_arm_streams(pring *R, int epfd)
{
  struct io_uring_sqe *q = ring_sqe(R, 1);
  if (!q) return;
  io_uring_prep_poll_multishot(q, epfd, POLLIN);
  io_uring_sqe_set_data64(q, UD_STREAMS);
  R->streams_armed = 1;
}

/* Submit what is queued and wait for @p nr completions, or, past the first, once RING_COALESCE_US
 * passed, for any (the minimum wait; zero, as older kernels want it, for one). liburing 2.3 has
 * no call that passes a minimum wait, so the queue is handed over here as its io_uring_submit()
 * does. */
static int ring_enter(pring *R, unsigned nr, struct __kernel_timespec *ts)
{
  struct io_uring_sq *sq = &R->ring.sq;
  if (sq->sqe_head != sq->sqe_tail) {
    sq->sqe_head = sq->sqe_tail;
    __atomic_store_n(sq->ktail, sq->sqe_tail, __ATOMIC_RELEASE);
  }
  unsigned queued = sq->sqe_tail - __atomic_load_n(sq->khead, __ATOMIC_ACQUIRE);
  struct ring_wait_arg arg = {0, 0, nr > 1 ? RING_COALESCE_US : 0, (uint64_t)(uintptr_t)ts};
  return io_uring_enter2((unsigned)R->ring.ring_fd, queued, nr, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                         (sigset_t *)(void *)&arg, sizeof(arg));
}

tf_err tf_probe__ring_round(ploop *L, int timeout_ms, rxrec *rx, size_t cap, size_t *nrx, int *streams)
{
  pring *R = L->ring;
  if (!R->streams_armed) ring_arm_streams(R, L->epfd);
  struct __kernel_timespec ts = {timeout_ms / 1000, (long long)(timeout_ms % 1000) * 1000000};
  size_t running = L->nslots - L->nfree;
  int rc = ring_enter(R, R->min_wait && timeout_ms > 0 && running >= 8 ? (unsigned)(running / 4) : 1, &ts);
  ring_submitted(R);
  if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN)
    return tf_error__set(TF_EIO, "io_uring_enter: %s", strerror(-rc));
  struct io_uring_cqe *cqe;
  unsigned head, seen = 0;
  io_uring_for_each_cqe(&R->ring, head, cqe)
  {
    if (*nrx == cap) break; /* the rest next round */
    seen++;
    uint64_t ud = cqe->user_data;
    int kind = (int)(ud & 7), more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    int bid = cqe->flags & IORING_CQE_F_BUFFER ? (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT) : -1;
    if (kind == UD_STREAMS) {
      *streams = 1;
      if (!more) R->streams_armed = 0;
      continue;
    }
    if (kind >= UD_SOCKET) {
      /* a step of a ring-made socket: the connect, or one that failed (the steps after it are
       * then cancelled without completions, as it skipped its own success): the chain is done */
      unsigned file = ud_file(ud);
      if (file < R->nfiles) {
        if (R->files[file] == FILE_ORPHAN) ring_close_file(R, file, 0);
        else if (R->files[file] == FILE_OPENING) R->files[file] = FILE_OPEN;
      }
      leg *l = cqe->res == -ECANCELED ? NULL : ud_leg(L, ud);
      if (l) rx[(*nrx)++] = (rxrec){l, l->gen, 0, NULL, cqe->res < 0 ? -cqe->res : 0, 0, -1, kind - UD_SOCKET + OPEN_SOCKET};
      continue;
    }
    leg *l = kind == UD_QUIET ? NULL : ud_leg(L, ud);
    if (!l) { /* a closed socket's, or a cancel's or close's failure: nothing to do */
      if (bid >= 0) ring_give(R, bid);
      continue;
    }
    if (kind == UD_SEND) {
      rx[(*nrx)++] = (rxrec){l, l->gen, 0, NULL, -cqe->res, 1, -1, OPEN_NONE};
      continue;
    }
    if (!more) { /* the kernel ended this receive (no buffer free, an error): armed again after the round */
      l->events = 0;
      R->rearm[R->nrearm] = l;
      R->rearm_gen[R->nrearm++] = l->gen;
    }
    if (cqe->res < 0) {
      if (cqe->res != -ENOBUFS && cqe->res != -ECANCELED) rx[(*nrx)++] = (rxrec){l, l->gen, 0, NULL, -cqe->res, 0, -1, OPEN_NONE};
      continue;
    }
    if (bid >= 0) rx[(*nrx)++] = (rxrec){l, l->gen, (uint32_t)cqe->res, R->bufs + (size_t)bid * RING_BUF, 0, 0, bid, OPEN_NONE};
  }
  io_uring_cq_advance(&R->ring, seen);
  ring_give_done(R);
  return TF_OK;
}

void tf_probe__ring_release(ploop *L, const rxrec *rx, size_t nrx)
{
  pring *R = L->ring;
  for (size_t i = 0; i < nrx; i++)
    if (rx[i].bid >= 0) ring_give(R, rx[i].bid);
  ring_give_done(R);
  for (size_t i = 0; i < R->nrearm; i++) {
    leg *l = R->rearm[i];
    if (l->fd >= 0 && l->gen == R->rearm_gen[i] && !l->events && !l->p->finished) tf_probe__loop_watch(l);
  }
  R->nrearm = 0;
}
