/* kube Status: the API's error body, read into a small owned struct, and the
 * mapping from HTTP codes to tf_err. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"

tf_err tf_kube__code_err(int c)
{
  if (c >= 200 && c < 300) return TF_OK;
  switch (c) {
  case 400:
  case 415:
  case 422: return TF_EINVALID;
  case 401:
  case 403: return TF_EAUTH;
  case 404: return TF_ENOTFOUND;
  case 409: return TF_ECONFLICT;
  case 410: return TF_EEXPIRED;
  case 429:
  case 500:
  case 502:
  case 503:
  case 504: return TF_EUNAVAILABLE;
  default: return TF_ERROR;
  }
}

static const char *tf_kube__default_reason(int c)
{
  switch (c) {
  case 400: return "BadRequest";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "NotFound";
  case 405: return "MethodNotAllowed";
  case 409: return "Conflict";
  case 410: return "Expired";
  case 415: return "UnsupportedMediaType";
  case 422: return "Invalid";
  case 429: return "TooManyRequests";
  case 500: return "InternalError";
  case 503: return "ServiceUnavailable";
  case 504: return "Timeout";
  default: return "Unknown";
  }
}

static char *tf_kube__jstr(const cJSON *o, const char *k)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return tf_strdup__(cJSON_IsString(v) ? v->valuestring : "");
}

tf_kube_status *tf_kube__status_local(int code, const char *reason, const char *message)
{
  tf_kube_status *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->code = code;
  s->reason = tf_strdup__(reason ? reason : "");
  s->message = tf_strdup__(message ? message : "");
  if (!s->reason || !s->message) {
    tf_kube_status_free(s);
    return NULL;
  }
  return s;
}

/* Retry-After in delay-seconds form only (the API server never sends dates); capped at an hour. */
static long tf_kube__retry_after(const char *h)
{
  if (!h) return 0;
  while (*h == ' ' || *h == '\t') h++;
  long v = 0;
  int digits = 0;
  for (; *h >= '0' && *h <= '9'; h++, digits++) {
    v = v * 10 + (*h - '0');
    if (v > 3600) v = 3600;
  }
  while (*h == ' ' || *h == '\t' || *h == '\r' || *h == '\n') h++;
  return digits && !*h ? v : 0;
}

tf_kube_status *tf_kube__status_parse(int http_code, const char *body, size_t len, const char *retry_after_header)
{
  cJSON *root = body && len ? cJSON_ParseWithLength(body, len) : NULL;
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
  tf_kube_status *s = NULL;
  if (cJSON_IsObject(root) && cJSON_IsString(kind) && strcmp(kind->valuestring, "Status") == 0) {
    s = calloc(1, sizeof(*s));
    if (!s) goto out;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(root, "code");
    s->code = cJSON_IsNumber(code) && code->valuedouble >= 0 && code->valuedouble < 1000 ? (int)code->valuedouble
                                                                                          : http_code;
    if (http_code >= 300 && s->code != http_code && s->code < 300) s->code = http_code;
    s->reason = tf_kube__jstr(root, "reason");
    s->message = tf_kube__jstr(root, "message");
    if (!s->reason || !s->message) goto fail;
    if (!*s->reason) {
      free(s->reason);
      if (!(s->reason = tf_strdup__(tf_kube__default_reason(s->code)))) goto fail;
    }
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(root, "details");
    const cJSON *ra = cJSON_GetObjectItemCaseSensitive(details, "retryAfterSeconds");
    if (cJSON_IsNumber(ra) && ra->valuedouble > 0) s->retry_after = ra->valuedouble > 3600 ? 3600 : (long)ra->valuedouble;
    const cJSON *causes = cJSON_GetObjectItemCaseSensitive(details, "causes");
    int n = cJSON_IsArray(causes) ? cJSON_GetArraySize(causes) : 0;
    if (n > 0) {
      if (!(s->causes = calloc((size_t)n, sizeof(*s->causes)))) goto fail;
      const cJSON *c;
      cJSON_ArrayForEach(c, causes)
      {
        struct tf_kube__cause *k = &s->causes[s->ncauses++];
        k->type = tf_kube__jstr(c, "reason");
        k->message = tf_kube__jstr(c, "message");
        k->field = tf_kube__jstr(c, "field");
        if (!k->type || !k->message || !k->field) goto fail;
      }
    }
  } else {
    char msg[64];
    snprintf(msg, sizeof(msg), "the server answered HTTP %d", http_code);
    s = tf_kube__status_local(http_code, tf_kube__default_reason(http_code), msg);
    if (!s) goto out;
  }
  long h = tf_kube__retry_after(retry_after_header);
  if (h > 0) s->retry_after = h;
  goto out;
fail:
  tf_kube_status_free(s);
  s = NULL;
out:
  cJSON_Delete(root);
  return s;
}

void tf_kube_status_free(tf_kube_status *s)
{
  if (!s) return;
  free(s->reason);
  free(s->message);
  for (size_t i = 0; i < s->ncauses; i++) {
    free(s->causes[i].type);
    free(s->causes[i].message);
    free(s->causes[i].field);
  }
  free(s->causes);
  free(s);
}

int tf_kube_status_code(const tf_kube_status *s) { return s ? s->code : 0; }
const char *tf_kube_status_reason(const tf_kube_status *s) { return s && s->reason ? s->reason : ""; }
const char *tf_kube_status_message(const tf_kube_status *s) { return s && s->message ? s->message : ""; }
long tf_kube_status_retry_after(const tf_kube_status *s) { return s ? s->retry_after : 0; }
size_t tf_kube_status_cause_count(const tf_kube_status *s) { return s ? s->ncauses : 0; }

tf_err tf_kube_status_cause(const tf_kube_status *s, size_t i, const char **type, const char **message,
                            const char **field)
{
  TF_ASSERT_ARG(s);
  if (i >= s->ncauses) return tf_error__set(TF_EINVALID, "cause %zu: out of range (%zu causes)", i, s->ncauses);
  if (type) *type = s->causes[i].type;
  if (message) *message = s->causes[i].message;
  if (field) *field = s->causes[i].field;
  return TF_OK;
}
