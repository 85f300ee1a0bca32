/* Between source.c and source_kube.c: the two backends of is_source. */
#ifndef TURNFLEET_ISSUER_SOURCE_INTERNAL_H
#define TURNFLEET_ISSUER_SOURCE_INTERNAL_H

#include "source.h"

typedef struct is_files is_files;
typedef struct is_kube is_kube;

/* A snapshot with one reference; takes @p secret (wiped and freed on failure too). NULL with @p why. */
is_snapshot *is__snapshot_new(const char *ice, size_t il, const char *status, size_t sl, char *secret, char *why,
                              size_t whylen);
/* Drop a reference; the last one frees. Under the source's lock (kube snapshots are never shared). */
void is__snapshot_unref(is_snapshot *snap);

is_files *is__files_new(const char *state_dir, const char *secret_file, const char *ns, const char *pool, char *err,
                        size_t errlen);
void is__files_free(is_files *f);
int is__files_get(is_files *f, const char *ns, const char *name, is_snapshot **out, char *why, size_t whylen);
int is__files_ready(is_files *f, char *why, size_t whylen);

is_kube *is__kube_new(tf_kube *kube, const char *ns, tf_log_cb log, char *err, size_t errlen);
void is__kube_free(is_kube *k);
int is__kube_get(is_kube *k, const char *ns, const char *name, is_snapshot **out, char *why, size_t whylen);
int is__kube_ready(is_kube *k, char *why, size_t whylen);

#endif
