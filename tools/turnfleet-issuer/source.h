/* What turnfleet-issuer answers from, re-read when it changes: a `turnfleet up` state directory
 * (iceServers.json, status.json) with its secret file, and the bearer tokens file. Each file is
 * checked (stat: inode, size, mtime) at most once per request, so an answer never lags a change
 * the files already show. Thread-safe. */
#ifndef TURNFLEET_ISSUER_SOURCE_H
#define TURNFLEET_ISSUER_SOURCE_H

#include <stddef.h>

#include "turnfleet.h"

typedef struct is_source is_source;

/* @p tokens_file may be NULL (no authentication). NULL with the reason in @p err. */
is_source *is_source_new(const char *state_dir, const char *secret_file, const char *tokens_file, char *err,
                         size_t errlen);
void is_source_free(is_source *s);

/* The pool view and the current secret for one answer; NULL (and the reason in @p why) when the files
 * cannot be used. Release with is_source_release(). */
typedef struct is_snapshot {
  tf_issuer_pool *pool;
  char *secret;
  unsigned long refs; /* private */
} is_snapshot;
is_snapshot *is_source_get(is_source *s, char *why, size_t whylen);
void is_source_release(is_source *s, is_snapshot *snap);

/* 1 when @p token (may be NULL) is one of the tokens file's, compared in constant time; always 1
 * without a tokens file. -1 when the tokens file cannot be read (nobody is let in). */
int is_source_token_ok(is_source *s, const char *token);

#endif
