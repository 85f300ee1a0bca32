/* What turnfleet-issuer answers from, always current:
 * - files: one pool run by `turnfleet up`, its state directory (iceServers.json, status.json) and its
 *   secret file, each checked (stat: inode, size, mtime) on every request and re-read when changed;
 * - kube: every pool the informers see (TURNPools, the `<pool>-turn-uris` ConfigMaps, the pools' auth
 *   Secrets), read from the informers' caches on every request, so an answer after a watch event
 *   reflects it.
 * And the bearer tokens file, checked the same way as the state files. Thread-safe. */
#ifndef TURNFLEET_ISSUER_SOURCE_H
#define TURNFLEET_ISSUER_SOURCE_H

#include <stddef.h>

#include "turnfleet.h"

typedef struct is_source is_source;

/* NULL with the reason in @p err. */
is_source *is_source_files(const char *state_dir, const char *secret_file, const char *ns, const char *pool,
                           char *err, size_t errlen);
/* Informers on @p kube, in @p ns (NULL: every namespace). */
is_source *is_source_kube(tf_kube *kube, const char *ns, tf_log_cb log, char *err, size_t errlen);
void is_source_free(is_source *s);

/* The pool view and the current secret of pool @p ns/@p name for one answer. */
typedef struct is_snapshot {
  tf_issuer_pool *pool;
  char *secret;
  unsigned long refs; /* private */
} is_snapshot;
/* 200 with *out set; 404 (no such pool) or 503 (it cannot be answered for now) with the reason in @p why. */
int is_source_get(is_source *s, const char *ns, const char *name, is_snapshot **out, char *why, size_t whylen);
void is_source_release(is_source *s, is_snapshot *snap);

/* 1 when ready to answer (files: the pool has an eligible relay; kube: the caches are synced), else 0
 * with the reason in @p why. */
int is_source_ready(is_source *s, char *why, size_t whylen);

/* The bearer tokens of a file. */
typedef struct is_tokens is_tokens;
/* NULL with the reason in @p err. */
is_tokens *is_tokens_new(const char *path, char *err, size_t errlen);
void is_tokens_free(is_tokens *t);
/* 1 when @p token (may be NULL) is one of the file's, compared in constant time; 0 when not; -1 when the
 * file cannot be read (nobody is let in). */
int is_tokens_check(is_tokens *t, const char *token);

#endif
