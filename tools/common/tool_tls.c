/* See tool_tls.h. The pair in use is handed to GnuTLS per handshake through
 * MHD_OPTION_HTTPS_CERT_CALLBACK, so a reload swaps one pointer under a lock.
 * GnuTLS does not copy what the callback returns and a session may use it
 * until it ends, so a replaced pair is kept (not freed) until tool_tls_stop():
 * a rotation costs a few kilobytes, and certificates rotate every few weeks. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tool_tls.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tool_http.h"
#include "tool_io.h"

#define TOOL_TLS_CHAIN_MAX 8
#define TOOL_TLS_FILE_MAX ((size_t)1 << 20)

typedef struct tool_tls_pair {
  gnutls_pcert_st certs[TOOL_TLS_CHAIN_MAX];
  unsigned int count;
  gnutls_privkey_t key;
  struct tool_tls_pair *retired; /* older pairs, freed at stop */
} tool_tls_pair;

typedef struct tool_tls_stamp {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  int ok;
} tool_tls_stamp;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  int running, stopping;
  char *cert_path, *key_path;
  long poll_ms;
  tool_tls_pair *current;
  unsigned long generation;
  char last_error[256];
  tool_tls_stamp cert_stamp, key_stamp;
} tls = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void pair_free(tool_tls_pair *p)
{
  while (p) {
    tool_tls_pair *next = p->retired;
    for (unsigned int i = 0; i < p->count; i++) gnutls_pcert_deinit(&p->certs[i]);
    if (p->key) gnutls_privkey_deinit(p->key);
    free(p);
    p = next;
  }
}

static void say(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t n, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

/* Same public key in the certificate and the private key? */
static int pair_matches(const tool_tls_pair *p)
{
  gnutls_pubkey_t pub = NULL;
  gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
  int same = 0;
  if (gnutls_pubkey_init(&pub) == 0 && gnutls_pubkey_import_privkey(pub, p->key, 0, 0) == 0 &&
      gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a) == 0 &&
      gnutls_pubkey_export2(p->certs[0].pubkey, GNUTLS_X509_FMT_DER, &b) == 0)
    same = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
  gnutls_free(a.data);
  gnutls_free(b.data);
  if (pub) gnutls_pubkey_deinit(pub);
  return same;
}

static tool_tls_pair *pair_load(const char *cert, const char *key, char *err, size_t errlen)
{
  size_t clen = 0, klen = 0;
  char *ctext = tool_read_file(cert, &clen, TOOL_TLS_FILE_MAX);
  if (!ctext) {
    say(err, errlen, "%s: %s", cert, strerror(errno));
    return NULL;
  }
  char *ktext = tool_read_file(key, &klen, TOOL_TLS_FILE_MAX);
  if (!ktext) {
    say(err, errlen, "%s: %s", key, strerror(errno));
    free(ctext);
    return NULL;
  }
  tool_tls_pair *p = calloc(1, sizeof(*p));
  int rc = p ? 0 : GNUTLS_E_MEMORY_ERROR;
  if (clen > TOOL_TLS_FILE_MAX || klen > TOOL_TLS_FILE_MAX) {
    say(err, errlen, "%s: larger than %zu bytes", clen > TOOL_TLS_FILE_MAX ? cert : key, TOOL_TLS_FILE_MAX);
    rc = -1;
  }
  if (rc == 0) {
    gnutls_datum_t d = {(unsigned char *)ctext, (unsigned int)clen};
    p->count = TOOL_TLS_CHAIN_MAX;
    rc = gnutls_pcert_list_import_x509_raw(p->certs, &p->count, &d, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
      p->count = 0;
      say(err, errlen, "%s: not a PEM certificate chain (%s)", cert, gnutls_strerror(rc));
    } else if (p->count == 0) {
      rc = -1;
      say(err, errlen, "%s: no certificate", cert);
    }
  }
  if (rc >= 0) {
    gnutls_datum_t d = {(unsigned char *)ktext, (unsigned int)klen};
    rc = gnutls_privkey_init(&p->key);
    if (rc == 0) rc = gnutls_privkey_import_x509_raw(p->key, &d, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0) say(err, errlen, "%s: not a PEM private key (%s)", key, gnutls_strerror(rc));
  }
  if (rc >= 0 && !pair_matches(p)) {
    rc = -1;
    say(err, errlen, "%s does not belong to the certificate in %s", key, cert);
  }
  gnutls_memset(ktext, 0, klen);
  free(ktext);
  free(ctext);
  if (rc < 0) {
    if (rc == GNUTLS_E_MEMORY_ERROR) say(err, errlen, "out of memory");
    pair_free(p);
    return NULL;
  }
  return p;
}

static tool_tls_stamp stamp_of(const char *path)
{
  tool_tls_stamp s;
  memset(&s, 0, sizeof(s));
  struct stat st;
  if (stat(path, &st) == 0) {
    s.dev = st.st_dev;
    s.ino = st.st_ino;
    s.size = st.st_size;
    s.mtime = st.st_mtim;
    s.ok = 1;
  }
  return s;
}

static int stamp_eq(const tool_tls_stamp *a, const tool_tls_stamp *b)
{
  return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Kubernetes updates a mounted Secret by swapping a symlink: stat() follows it, so
 * a new inode shows the change; an in-place write changes mtime and size. */
static void *watch(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&tls.lock);
  while (!tls.stopping) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += tls.poll_ms / 1000;
    until.tv_nsec += (tls.poll_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&tls.wake, &tls.lock, &until);
    if (tls.stopping) break;
    tool_tls_stamp c = stamp_of(tls.cert_path), k = stamp_of(tls.key_path);
    if (stamp_eq(&c, &tls.cert_stamp) && stamp_eq(&k, &tls.key_stamp)) continue;
    pthread_mutex_unlock(&tls.lock);
    char err[256] = "";
    tool_tls_pair *p = pair_load(tls.cert_path, tls.key_path, err, sizeof(err));
    pthread_mutex_lock(&tls.lock);
    if (!p) {
      /* a rotation may be half written: keep serving the old pair, look again next time */
      snprintf(tls.last_error, sizeof(tls.last_error), "%s", err);
      continue;
    }
    p->retired = tls.current;
    tls.current = p;
    tls.generation++;
    tls.last_error[0] = '\0';
    tls.cert_stamp = c;
    tls.key_stamp = k;
  }
  pthread_mutex_unlock(&tls.lock);
  return NULL;
}

static int cert_callback(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                         unsigned int *pcert_length, gnutls_privkey_t *key)
{
  (void)session, (void)req_ca_dn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
  pthread_mutex_lock(&tls.lock);
  tool_tls_pair *p = tls.current;
  pthread_mutex_unlock(&tls.lock);
  if (!p) return -1;
  *pcert = p->certs;
  *pcert_length = p->count;
  *key = p->key;
  return 0;
}

int tool_tls_start(const char *cert, const char *key, long poll_ms, char *err, size_t errlen)
{
  if (tls.running) {
    say(err, errlen, "one certificate source per process");
    return -1;
  }
  tool_tls_stamp c = stamp_of(cert), k = stamp_of(key);
  tool_tls_pair *p = pair_load(cert, key, err, errlen);
  if (!p) return -1;
  tls.cert_path = strdup(cert);
  tls.key_path = strdup(key);
  if (!tls.cert_path || !tls.key_path) {
    say(err, errlen, "out of memory");
    goto fail;
  }
  tls.current = p;
  tls.generation = 1;
  tls.cert_stamp = c;
  tls.key_stamp = k;
  tls.poll_ms = poll_ms > 0 ? poll_ms : 1000;
  tls.stopping = 0;
  if (pthread_create(&tls.thread, NULL, watch, NULL) != 0) {
    say(err, errlen, "cannot start the certificate watcher");
    tls.current = NULL;
    goto fail;
  }
  tls.running = 1;
  return 0;
fail:
  pair_free(p);
  free(tls.cert_path);
  free(tls.key_path);
  tls.cert_path = tls.key_path = NULL;
  return -1;
}

unsigned long tool_tls_generation(void)
{
  pthread_mutex_lock(&tls.lock);
  unsigned long g = tls.generation;
  pthread_mutex_unlock(&tls.lock);
  return g;
}

void tool_tls_last_error(char *buf, size_t size)
{
  pthread_mutex_lock(&tls.lock);
  snprintf(buf, size, "%s", tls.last_error);
  pthread_mutex_unlock(&tls.lock);
}

void tool_tls_stop(void)
{
  if (!tls.running) return;
  pthread_mutex_lock(&tls.lock);
  tls.stopping = 1;
  pthread_cond_signal(&tls.wake);
  pthread_mutex_unlock(&tls.lock);
  pthread_join(tls.thread, NULL);
  pair_free(tls.current);
  tls.current = NULL;
  free(tls.cert_path);
  free(tls.key_path);
  tls.cert_path = tls.key_path = NULL;
  tls.running = 0;
}

struct MHD_Daemon *tool_https_start(const char *addr_port, MHD_AccessHandlerCallback handler, void *cls,
                                    const tool_https_limits *limits)
{
  struct sockaddr_storage ss;
  int v6;
  if (!tls.running || tool_http_sockaddr(addr_port, &ss, &v6) < 0) return NULL;
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TLS | (v6 ? MHD_USE_IPv6 : 0);
  return MHD_start_daemon(flags, 0, NULL, NULL, handler, cls, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                          MHD_OPTION_HTTPS_CERT_CALLBACK, cert_callback, MHD_OPTION_CONNECTION_LIMIT,
                          limits->connections, MHD_OPTION_CONNECTION_TIMEOUT, limits->idle_s,
                          MHD_OPTION_THREAD_POOL_SIZE, limits->threads, MHD_OPTION_NOTIFY_COMPLETED,
                          limits->completed, limits->completed_cls, MHD_OPTION_END);
}
