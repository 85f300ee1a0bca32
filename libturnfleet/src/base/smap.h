/* A string-keyed map over map.c with owned keys. Private; not thread-safe:
 * the owner locks. Keys are copied; values are owned when free_val is set. */
#ifndef TF_SMAP_H
#define TF_SMAP_H

#include <stddef.h>

#include "private.h"

typedef struct tf_smap tf_smap;

TF__PRIVATE tf_smap *tf_smap__new(void (*free_val)(void *));
TF__PRIVATE void tf_smap__free(tf_smap *m);
/* Insert or replace (the old value is freed). 0, or -1 on memory. */
TF__PRIVATE int tf_smap__put(tf_smap *m, const char *key, void *val);
TF__PRIVATE void *tf_smap__get(const tf_smap *m, const char *key);
TF__PRIVATE int tf_smap__has(const tf_smap *m, const char *key);
/* Remove (the value is freed); 1 when the key was there. */
TF__PRIVATE int tf_smap__del(tf_smap *m, const char *key);
TF__PRIVATE size_t tf_smap__count(const tf_smap *m);
/* Iterate: start with *pos = 0; returns 0 at the end. The map must not change meanwhile. */
TF__PRIVATE int tf_smap__next(const tf_smap *m, size_t *pos, const char **key, void **val);

#endif
