/* kube watch lines: a buffer that hands out each complete '\n'-terminated
 * line once (the scan resumes where it stopped, so no byte is looked at
 * twice and one bad line cannot stall the stream), and the event parser. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"

void tf_kube__lines_init(tf_kube__lines *l, size_t max)
{
  memset(l, 0, sizeof(*l));
  l->max = max;
}

void tf_kube__lines_dispose(tf_kube__lines *l)
{
  free(l->buf);
  memset(l, 0, sizeof(*l));
}

int tf_kube__lines_feed(tf_kube__lines *l, const char *data, size_t n, int (*fn)(char *line, size_t len, void *arg),
                        void *arg)
{
  if (n == 0) return 0;
  if (l->len + n + 1 > l->cap) {
    size_t cap = l->cap ? l->cap : 4096;
    while (cap < l->len + n + 1) cap *= 2;
    char *nb = realloc(l->buf, cap);
    if (!nb) return tf_error__nomem();
    l->buf = nb;
    l->cap = cap;
  }
  memcpy(l->buf + l->len, data, n);
  l->len += n;
  size_t start = 0;
  int rc = 0;
  while (l->scan < l->len) {
    char *nl = memchr(l->buf + l->scan, '\n', l->len - l->scan);
    if (!nl) {
      l->scan = l->len;
      break;
    }
    size_t end = (size_t)(nl - l->buf);
    size_t len = end - start;
    l->scan = end + 1;
    if (len > l->max) {
      rc = tf_error__set(TF_EPROTO, "watch: a line of %zu bytes (limit %zu)", len, l->max);
      break;
    }
    *nl = '\0';
    if (len && l->buf[start + len - 1] == '\r') l->buf[start + --len] = '\0';
    int r = len ? fn(l->buf + start, len, arg) : 0;
    start = l->scan;
    if (r) {
      rc = r;
      break;
    }
  }
  if (rc == 0 && l->len - start > l->max)
    rc = tf_error__set(TF_EPROTO, "watch: a line over %zu bytes", l->max);
  /* drop what was handed out; the partial line moves to the front */
  if (start) {
    memmove(l->buf, l->buf + start, l->len - start);
    l->len -= start;
    l->scan -= start;
  }
  return rc;
}

static const char *const tf_kube__types[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

tf_err tf_kube__event_parse(const char *line, size_t len, cJSON **root, int *type, cJSON **object)
{
  *root = cJSON_ParseWithLength(line, len);
  *object = NULL;
  if (!*root) return tf_error__set(TF_EPROTO, "watch: a line is not JSON (%zu bytes)", len);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(*root, "type");
  cJSON *o = cJSON_GetObjectItemCaseSensitive(*root, "object");
  if (!cJSON_IsString(t) || !cJSON_IsObject(o)) {
    cJSON_Delete(*root);
    *root = NULL;
    return tf_error__set(TF_EPROTO, "watch: an event needs a string type and an object");
  }
  for (int i = 0; i < 5; i++) {
    if (strcmp(t->valuestring, tf_kube__types[i]) == 0) {
      *type = i;
      *object = o;
      return TF_OK;
    }
  }
  cJSON_Delete(*root);
  *root = NULL;
  return tf_error__set(TF_EPROTO, "watch: unknown event type");
}

const char *tf_kube__meta_str(const cJSON *obj, const char *field)
{
  const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(md, field);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}
