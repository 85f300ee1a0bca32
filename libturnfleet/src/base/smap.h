/* A string-keyed map over map.c with owned keys. Private; not thread-safe:
 * the owner locks. Keys are copied; values are owned when free_val is set. */
#ifndef TF_SMAP_H
#define TF_SMAP_H

#include <stddef.h>

typedef struct tf_smap tf_smap;

tf_smap *tf_smap__new(void (*free_val)(void *));
void tf_smap__free(tf_smap *m);
/* Insert or replace (the old value is freed). 0, or -1 on memory. */
int tf_smap__put(tf_smap *m, const char *key, void *val);
void *tf_smap__get(const tf_smap *m, const char *key);
int tf_smap__has(const tf_smap *m, const char *key);
/* Remove (the value is freed); 1 when the key was there. */
int tf_smap__del(tf_smap *m, const char *key);
size_t tf_smap__count(const tf_smap *m);
/* Iterate: start with *pos = 0; returns 0 at the end. The map must not change meanwhile. */
int tf_smap__next(const tf_smap *m, size_t *pos, const char **key, void **val);

#endif
