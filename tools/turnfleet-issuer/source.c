/* See source.h. */
#include "source.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tool_io.h"

#define IS_TOKENS_MAX 4096           /* tokens in the file */
#define IS_TOKENS_BYTES (1u << 20)   /* the file */
#define IS_STATE_BYTES (16u << 20)   /* iceServers.json, status.json */

typedef struct is_stamp {
  int ok;
  ino_t ino;
  off_t size;
  struct timespec mtime;
} is_stamp;

struct is_source {
  pthread_mutex_t mu;
  char *ice_path, *status_path, *secret_path, *tokens_path;
  is_stamp ice_st, status_st, secret_st, tokens_st;
  is_snapshot *snap; /* the current one; NULL while the files cannot be used */
  char why[512];     /* why snap is NULL */
  unsigned char (*tokens)[SHA256_DIGEST_LENGTH];
  size_t token_count;
  int tokens_bad;
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

static void snap_unref(is_snapshot *snap)
{
  if (!snap || --snap->refs) return;
  tf_issuer_pool_free(snap->pool);
  tf_secret_free(snap->secret);
  free(snap);
}

/* With mu held: build a new snapshot from the files. */
static void reload_locked(is_source *s)
{
  size_t il = 0, sl = 0;
  char *ice = tool_read_file(s->ice_path, &il, IS_STATE_BYTES);
  char *status = ice ? tool_read_file(s->status_path, &sl, IS_STATE_BYTES) : NULL;
  char *secret = NULL;
  tf_issuer_pool *pool = NULL;
  is_snapshot *snap = NULL;
  if (!ice || !status) {
    snprintf(s->why, sizeof(s->why), "%s: %s", ice ? s->status_path : s->ice_path, strerror(errno));
  } else if (il > IS_STATE_BYTES || sl > IS_STATE_BYTES) {
    snprintf(s->why, sizeof(s->why), "%s: larger than %u bytes", il > IS_STATE_BYTES ? s->ice_path : s->status_path,
             IS_STATE_BYTES);
  } else if (tf_issuer_pool_new(&pool, ice, il, status, sl) < 0) {
    snprintf(s->why, sizeof(s->why), "%s", tf_error_last()->message);
  } else if (tf_cred_secret_read(&secret, s->secret_path) < 0) {
    snprintf(s->why, sizeof(s->why), "%s", tf_error_last()->message); /* names the path, never the content */
  } else if (!(snap = calloc(1, sizeof(*snap)))) {
    snprintf(s->why, sizeof(s->why), "out of memory");
  } else {
    snap->pool = pool;
    snap->secret = secret;
    snap->refs = 1;
    pool = NULL;
    secret = NULL;
    s->why[0] = '\0';
  }
  tf_issuer_pool_free(pool);
  tf_secret_free(secret);
  free(ice);
  free(status);
  snap_unref(s->snap);
  s->snap = snap;
}

/* With mu held: the token digests from the file. */
static void tokens_reload_locked(is_source *s)
{
  size_t len = 0;
  char *text = tool_read_file(s->tokens_path, &len, IS_TOKENS_BYTES);
  free(s->tokens);
  s->tokens = NULL;
  s->token_count = 0;
  s->tokens_bad = 1;
  if (!text || len > IS_TOKENS_BYTES) {
    if (text) OPENSSL_cleanse(text, len), free(text);
    return;
  }
  s->tokens = calloc(IS_TOKENS_MAX, sizeof(*s->tokens));
  if (s->tokens) {
    s->tokens_bad = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && s->token_count < IS_TOKENS_MAX;
         line = strtok_r(NULL, "\n", &save)) {
      size_t n = strlen(line);
      while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
      while (n && (*line == ' ' || *line == '\t')) line++, n--;
      if (!n || *line == '#') continue;
      SHA256((const unsigned char *)line, n, s->tokens[s->token_count++]);
    }
  }
  OPENSSL_cleanse(text, len);
  free(text);
}

is_source *is_source_new(const char *state_dir, const char *secret_file, const char *tokens_file, char *err,
                         size_t errlen)
{
  is_source *s = calloc(1, sizeof(*s));
  if (!s) return snprintf(err, errlen, "out of memory"), NULL;
  pthread_mutex_init(&s->mu, NULL);
  s->ice_path = tool_join(state_dir, "iceServers.json");
  s->status_path = tool_join(state_dir, "status.json");
  s->secret_path = strdup(secret_file);
  s->tokens_path = tokens_file ? strdup(tokens_file) : NULL;
  if (!s->ice_path || !s->status_path || !s->secret_path || (tokens_file && !s->tokens_path)) {
    is_source_free(s);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (tokens_file) {
    s->tokens_st = stamp_of(tokens_file);
    tokens_reload_locked(s);
    if (s->tokens_bad) {
      snprintf(err, errlen, "%s: cannot be read: %s", tokens_file, strerror(errno));
      is_source_free(s);
      return NULL;
    }
  }
  /* the secret file must be readable at start (bad input); the state directory may still be empty */
  char *secret = NULL;
  if (tf_cred_secret_read(&secret, secret_file) < 0) {
    snprintf(err, errlen, "%s", tf_error_last()->message);
    is_source_free(s);
    return NULL;
  }
  tf_secret_free(secret);
  return s;
}

void is_source_free(is_source *s)
{
  if (!s) return;
  snap_unref(s->snap);
  free(s->ice_path);
  free(s->status_path);
  free(s->secret_path);
  free(s->tokens_path);
  free(s->tokens);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

is_snapshot *is_source_get(is_source *s, char *why, size_t whylen)
{
  is_stamp ice = stamp_of(s->ice_path), status = stamp_of(s->status_path), secret = stamp_of(s->secret_path);
  pthread_mutex_lock(&s->mu);
  if (!stamp_same(&ice, &s->ice_st) || !stamp_same(&status, &s->status_st) || !stamp_same(&secret, &s->secret_st) ||
      (!s->snap && !*s->why)) {
    s->ice_st = ice;
    s->status_st = status;
    s->secret_st = secret;
    reload_locked(s);
  }
  is_snapshot *snap = s->snap;
  if (snap) snap->refs++;
  else snprintf(why, whylen, "%s", s->why);
  pthread_mutex_unlock(&s->mu);
  return snap;
}

void is_source_release(is_source *s, is_snapshot *snap)
{
  if (!snap) return;
  pthread_mutex_lock(&s->mu);
  snap_unref(snap);
  pthread_mutex_unlock(&s->mu);
}

int is_source_token_ok(is_source *s, const char *token)
{
  if (!s->tokens_path) return 1;
  unsigned char want[SHA256_DIGEST_LENGTH];
  if (token) SHA256((const unsigned char *)token, strlen(token), want);
  is_stamp st = stamp_of(s->tokens_path);
  pthread_mutex_lock(&s->mu);
  if (!stamp_same(&st, &s->tokens_st)) {
    s->tokens_st = st;
    tokens_reload_locked(s);
  }
  int ok = s->tokens_bad ? -1 : 0;
  /* every digest compared, in constant time: no early exit tells which one matched */
  for (size_t i = 0; token && !s->tokens_bad && i < s->token_count; i++)
    ok |= CRYPTO_memcmp(want, s->tokens[i], sizeof(want)) == 0;
  pthread_mutex_unlock(&s->mu);
  OPENSSL_cleanse(want, sizeof(want));
  return ok;
}
