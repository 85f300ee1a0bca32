/* See source.h: the state-directory source, the tokens file, and what both sources share. */
#include "source.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "source_internal.h"
#include "tool_io.h"

#define IS_TOKENS_MAX 4096         /* tokens in the file */
#define IS_TOKENS_BYTES (1u << 20) /* the file */
#define IS_STATE_BYTES (16u << 20) /* iceServers.json, status.json */

typedef struct is_stamp {
  int ok;
  ino_t ino;
  off_t size;
  struct timespec mtime;
} is_stamp;

struct is_files {
  char *ice_path, *status_path, *secret_path, *ns, *pool;
  is_stamp ice_st, status_st, secret_st;
  is_snapshot *snap; /* the current one; NULL while the files cannot be used */
  char why[512];     /* why snap is NULL */
  int tried;
};

struct is_tokens {
  pthread_mutex_t mu;
  char *path;
  is_stamp st;
  unsigned char (*digests)[SHA256_DIGEST_LENGTH];
  size_t count;
  int bad;
};

static is_stamp stamp_of(const char *path)
{
  is_stamp s = {0};
  struct stat st;
  if (stat(path, &st) == 0) {
    s.ok = 1;
    s.ino = st.st_ino;
    s.size = st.st_size;
    s.mtime = st.st_mtim;
  }
  return s;
}

static int stamp_same(const is_stamp *a, const is_stamp *b)
{
  return a->ok == b->ok && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
         a->mtime.tv_nsec == b->mtime.tv_nsec;
}

is_snapshot *is__snapshot_new(const char *ice, size_t il, const char *status, size_t sl, char *secret, char *why,
                              size_t whylen)
{
  tf_issuer_pool *pool = NULL;
  is_snapshot *snap = NULL;
  if (tf_issuer_pool_new(&pool, ice, il, status, sl) < 0) snprintf(why, whylen, "%s", tf_error_last()->message);
  else if (!(snap = calloc(1, sizeof(*snap)))) snprintf(why, whylen, "out of memory");
  if (!snap) {
    tf_issuer_pool_free(pool);
    tf_secret_free(secret);
    return NULL;
  }
  snap->pool = pool;
  snap->secret = secret;
  snap->refs = 1;
  return snap;
}

void is__snapshot_unref(is_snapshot *snap)
{
  if (!snap || --snap->refs) return;
  tf_issuer_pool_free(snap->pool);
  tf_secret_free(snap->secret);
  free(snap);
}

/* With mu held: build a new snapshot from the files. */
static void files_reload(is_files *f)
{
  size_t il = 0, sl = 0;
  char *ice = tool_read_file(f->ice_path, &il, IS_STATE_BYTES);
  char *status = ice ? tool_read_file(f->status_path, &sl, IS_STATE_BYTES) : NULL;
  char *secret = NULL;
  is_snapshot *snap = NULL;
  if (!ice || !status) {
    snprintf(f->why, sizeof(f->why), "%s: %s", ice ? f->status_path : f->ice_path, strerror(errno));
  } else if (il > IS_STATE_BYTES || sl > IS_STATE_BYTES) {
    snprintf(f->why, sizeof(f->why), "%s: larger than %u bytes", il > IS_STATE_BYTES ? f->ice_path : f->status_path,
             IS_STATE_BYTES);
  } else if (tf_cred_secret_read(&secret, f->secret_path) < 0) {
    snprintf(f->why, sizeof(f->why), "%s", tf_error_last()->message); /* names the path, never the content */
  } else if ((snap = is__snapshot_new(ice, il, status, sl, secret, f->why, sizeof(f->why)))) {
    f->why[0] = '\0';
  }
  free(ice);
  free(status);
  is__snapshot_unref(f->snap);
  f->snap = snap;
}

is_files *is__files_new(const char *state_dir, const char *secret_file, const char *ns, const char *pool, char *err,
                        size_t errlen)
{
  is_files *f = calloc(1, sizeof(*f));
  if (!f) return snprintf(err, errlen, "out of memory"), NULL;
  f->ice_path = tool_join(state_dir, "iceServers.json");
  f->status_path = tool_join(state_dir, "status.json");
  f->secret_path = strdup(secret_file);
  f->ns = strdup(ns);
  f->pool = strdup(pool);
  if (!f->ice_path || !f->status_path || !f->secret_path || !f->ns || !f->pool) {
    is__files_free(f);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  /* the secret file must be readable at start (bad input); the state directory may still be empty */
  char *secret = NULL;
  if (tf_cred_secret_read(&secret, secret_file) < 0) {
    snprintf(err, errlen, "%s", tf_error_last()->message);
    is__files_free(f);
    return NULL;
  }
  tf_secret_free(secret);
  return f;
}

void is__files_free(is_files *f)
{
  if (!f) return;
  is__snapshot_unref(f->snap);
  free(f->ice_path);
  free(f->status_path);
  free(f->secret_path);
  free(f->ns);
  free(f->pool);
  free(f);
}

/* With the source's lock held. */
int is__files_get(is_files *f, const char *ns, const char *name, is_snapshot **out, char *why, size_t whylen)
{
  if (strcmp(name, f->pool) != 0 || strcmp(ns, f->ns) != 0) {
    snprintf(why, whylen, "pool: no pool %s/%s here (this issuer serves %s/%s)", ns, name, f->ns, f->pool);
    return 404;
  }
  is_stamp ice = stamp_of(f->ice_path), status = stamp_of(f->status_path), secret = stamp_of(f->secret_path);
  if (!f->tried || !stamp_same(&ice, &f->ice_st) || !stamp_same(&status, &f->status_st) ||
      !stamp_same(&secret, &f->secret_st)) {
    f->tried = 1;
    f->ice_st = ice;
    f->status_st = status;
    f->secret_st = secret;
    files_reload(f);
  }
  if (!f->snap) {
    snprintf(why, whylen, "%s", f->why);
    return 503;
  }
  f->snap->refs++;
  *out = f->snap;
  return 200;
}

int is__files_ready(is_files *f, char *why, size_t whylen)
{
  is_snapshot *snap = NULL;
  if (is__files_get(f, f->ns, f->pool, &snap, why, whylen) != 200) return 0;
  size_t eligible = tf_issuer_pool_eligible(snap->pool);
  is__snapshot_unref(snap);
  if (!eligible) snprintf(why, whylen, "no relay of the pool is ready, published and not draining");
  return eligible > 0;
}

/* ---- the tokens file ---- */

/* With mu held: the token digests from the file. */
static void tokens_reload(is_tokens *t)
{
  size_t len = 0;
  char *text = tool_read_file(t->path, &len, IS_TOKENS_BYTES);
  free(t->digests);
  t->digests = NULL;
  t->count = 0;
  t->bad = 1;
  if (!text || len > IS_TOKENS_BYTES) {
    if (text) OPENSSL_cleanse(text, len), free(text);
    return;
  }
  t->digests = calloc(IS_TOKENS_MAX, sizeof(*t->digests));
  if (t->digests) {
    t->bad = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && t->count < IS_TOKENS_MAX; line = strtok_r(NULL, "\n", &save)) {
      size_t n = strlen(line);
      while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
      while (n && (*line == ' ' || *line == '\t')) line++, n--;
      if (!n || *line == '#') continue;
      SHA256((const unsigned char *)line, n, t->digests[t->count++]);
    }
  }
  OPENSSL_cleanse(text, len);
  free(text);
}

is_tokens *is_tokens_new(const char *path, char *err, size_t errlen)
{
  is_tokens *t = calloc(1, sizeof(*t));
  if (!t || !(t->path = strdup(path))) {
    free(t);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&t->mu, NULL);
  t->st = stamp_of(path);
  errno = 0;
  tokens_reload(t);
  if (t->bad) {
    snprintf(err, errlen, "%s: cannot be read: %s", path, strerror(errno ? errno : EIO));
    is_tokens_free(t);
    return NULL;
  }
  return t;
}

void is_tokens_free(is_tokens *t)
{
  if (!t) return;
  free(t->digests);
  free(t->path);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

int is_tokens_check(is_tokens *t, const char *token)
{
  unsigned char want[SHA256_DIGEST_LENGTH];
  if (token) SHA256((const unsigned char *)token, strlen(token), want);
  is_stamp st = stamp_of(t->path);
  pthread_mutex_lock(&t->mu);
  if (!stamp_same(&st, &t->st)) {
    t->st = st;
    tokens_reload(t);
  }
  int ok = t->bad ? -1 : 0;
  /* every digest compared, in constant time: no early exit tells which one matched */
  for (size_t i = 0; token && !t->bad && i < t->count; i++) ok |= CRYPTO_memcmp(want, t->digests[i], sizeof(want)) == 0;
  pthread_mutex_unlock(&t->mu);
  OPENSSL_cleanse(want, sizeof(want));
  return ok;
}

/* ---- the source: one of the two ---- */

struct is_source {
  pthread_mutex_t mu;
  is_files *files;
  is_kube *kube;
};

static is_source *source_of(is_files *f, is_kube *k)
{
  is_source *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  pthread_mutex_init(&s->mu, NULL);
  s->files = f;
  s->kube = k;
  return s;
}

is_source *is_source_files(const char *state_dir, const char *secret_file, const char *ns, const char *pool,
                           char *err, size_t errlen)
{
  is_files *f = is__files_new(state_dir, secret_file, ns, pool, err, errlen);
  is_source *s = f ? source_of(f, NULL) : NULL;
  if (f && !s) is__files_free(f), snprintf(err, errlen, "out of memory");
  return s;
}

is_source *is_source_kube(tf_kube *kube, const char *ns, tf_log_cb log, char *err, size_t errlen)
{
  is_kube *k = is__kube_new(kube, ns, log, err, errlen);
  is_source *s = k ? source_of(NULL, k) : NULL;
  if (k && !s) is__kube_free(k), snprintf(err, errlen, "out of memory");
  return s;
}

void is_source_free(is_source *s)
{
  if (!s) return;
  is__files_free(s->files);
  is__kube_free(s->kube);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

int is_source_get(is_source *s, const char *ns, const char *name, is_snapshot **out, char *why, size_t whylen)
{
  *out = NULL;
  if (s->kube) return is__kube_get(s->kube, ns, name, out, why, whylen); /* the informers lock themselves */
  pthread_mutex_lock(&s->mu);
  int code = is__files_get(s->files, ns, name, out, why, whylen);
  pthread_mutex_unlock(&s->mu);
  return code;
}

void is_source_release(is_source *s, is_snapshot *snap)
{
  if (!snap) return;
  pthread_mutex_lock(&s->mu);
  is__snapshot_unref(snap);
  pthread_mutex_unlock(&s->mu);
}

int is_source_ready(is_source *s, char *why, size_t whylen)
{
  if (s->kube) return is__kube_ready(s->kube, why, whylen);
  pthread_mutex_lock(&s->mu);
  int ok = is__files_ready(s->files, why, whylen);
  pthread_mutex_unlock(&s->mu);
  return ok;
}
