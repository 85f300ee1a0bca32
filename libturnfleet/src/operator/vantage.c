/* vantage: the `<pool>-vantage` ConfigMap and the ReachableFromVantage condition. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "model.h"

#define TF__VAN_LIST_MAX 8
#define TF__VAN_MAX_BYTES ((size_t)1 << 20) /* a ConfigMap holds at most 1 MiB */

static int tf_van__printable(const char *s, size_t max)
{
  size_t n = strlen(s);
  if (n == 0 || n > max) return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
  return 1;
}

tf_err tf_vantage_configmap(char **out, const char *pool, const char *ns, const char *runner, int64_t now_ms,
                            const tf_probe_result *const *results, size_t count)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(results || count == 0);
  if (!pool || !tf_inventory__valid_name(pool, 63) || strchr(pool, '.'))
    return tf_error__set(TF_EINVALID, "pool: must be a DNS-1123 label");
  if (!ns || !tf_inventory__valid_name(ns, 63) || strchr(ns, '.'))
    return tf_error__set(TF_EINVALID, "ns: must be a DNS-1123 label");
  if (!runner || !tf_van__printable(runner, 253))
    return tf_error__set(TF_EINVALID, "runner: 1-253 printable characters");
  if (now_ms < 0) return tf_error__set(TF_EINVALID, "now_ms: negative");
  tf_buf b;
  tf_buf__init(&b);
  tf_buf__puts(&b, "[");
  for (size_t i = 0; i < count; i++) {
    char *one = NULL;
    tf_err rc = results[i] ? tf_probe_result_to_json(&one, results[i]) : tf_error__set(TF_EINVALID, "results[%zu]: NULL", i);
    if (rc < 0) {
      tf_buf__dispose(&b, 0);
      return rc;
    }
    tf_buf__printf(&b, "%s%s", i ? "," : "", one);
    tf_free(one);
  }
  tf_buf__puts(&b, "]");
  char *list = NULL;
  tf_err rc = tf_buf__detach(&b, &list);
  if (rc < 0) return rc;
  char when[48], name[80];
  tf_time__format(when, now_ms);
  snprintf(name, sizeof(name), "%s-vantage", pool);
  cJSON *root = cJSON_CreateObject(), *meta = NULL, *labels = NULL, *data = NULL;
  int ok = root && cJSON_AddStringToObject(root, "apiVersion", "v1") && cJSON_AddStringToObject(root, "kind", "ConfigMap") &&
           (meta = cJSON_AddObjectToObject(root, "metadata")) && cJSON_AddStringToObject(meta, "name", name) &&
           cJSON_AddStringToObject(meta, "namespace", ns) && (labels = cJSON_AddObjectToObject(meta, "labels")) &&
           cJSON_AddStringToObject(labels, "app.kubernetes.io/managed-by", "turnfleet-probe") &&
           cJSON_AddStringToObject(labels, "turnfleet.hzmi.dev/pool", pool) &&
           (data = cJSON_AddObjectToObject(root, "data")) && cJSON_AddStringToObject(data, "runner", runner) &&
           cJSON_AddStringToObject(data, "time", when) && cJSON_AddStringToObject(data, "results.json", list);
  tf_free(list);
  if (!ok) {
    cJSON_Delete(root);
    return tf_error__nomem();
  }
  return tf_doc__print(out, root);
}

typedef struct tf_van__verdict {
  const char *status, *reason;
  tf_buf msg;
} tf_van__verdict;

static void tf_van__set(tf_van__verdict *v, const char *status, const char *reason)
{
  v->status = status;
  v->reason = reason;
}

static const char *tf_van__str(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void tf_van__judge(tf_van__verdict *v, const char *configmap, size_t len, int64_t now_ms, int64_t stale_ms)
{
  cJSON *root = NULL, *list = NULL;
  tf_parse_options po = TF_PARSE_OPTIONS_INIT;
  po.max_bytes = TF__VAN_MAX_BYTES + 65536;
  tf_van__set(v, "Unknown", "BadVantageResults");
  if (tf_doc__parse_json(&root, configmap, len, &po) < 0) {
    tf_buf__printf(&v->msg, "the vantage ConfigMap: %s", tf_error_last()->message);
    return;
  }
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
  const char *runner = tf_van__str(data, "runner"), *when = tf_van__str(data, "time");
  const char *results = tf_van__str(data, "results.json");
  int64_t at = 0;
  if (!cJSON_IsObject(data)) tf_buf__puts(&v->msg, "data: required");
  else if (!runner || !tf_van__printable(runner, 253)) tf_buf__puts(&v->msg, "data.runner: required (1-253 printable characters)");
  else if (!when || tf_time__parse(when, &at) < 0) tf_buf__puts(&v->msg, "data.time: required (an RFC 3339 time)");
  else if (!results) tf_buf__puts(&v->msg, "data.results.json: required");
  else if (tf_doc__parse_json(&list, results, strlen(results), &po) < 0)
    tf_buf__printf(&v->msg, "data.results.json: %s", tf_error_last()->message);
  else if (!cJSON_IsArray(list)) tf_buf__puts(&v->msg, "data.results.json: must be a JSON array");
  if (v->msg.len) goto done;
  size_t n = 0, failed = 0, i = 0;
  for (const cJSON *r = list->child; r; r = r->next, i++) {
    const cJSON *okv = cJSON_GetObjectItemCaseSensitive(r, "ok");
    if (!cJSON_IsObject(r) || !tf_van__str(r, "uri") || !cJSON_IsBool(okv)) {
      tf_buf__printf(&v->msg, "data.results.json[%zu]: an object with uri (string) and ok (boolean)", i);
      goto done;
    }
    n++;
    failed += !cJSON_IsTrue(okv);
  }
  if (now_ms - at > stale_ms || at - now_ms > stale_ms) {
    tf_van__set(v, "Unknown", "StaleVantageResults");
    tf_buf__printf(&v->msg, "the results of %s at %s are older than %lld s", runner, when,
                   (long long)(stale_ms / 1000));
    goto done;
  }
  if (n == 0) {
    tf_van__set(v, "Unknown", "NoURIsProbed");
    tf_buf__printf(&v->msg, "%s at %s probed no URI (the pool published none)", runner, when);
    goto done;
  }
  if (failed == 0) {
    tf_van__set(v, "True", "AllReachable");
    tf_buf__printf(&v->msg, "%zu of %zu URIs reachable from %s at %s", n, n, runner, when);
    goto done;
  }
  tf_van__set(v, "False", "Unreachable");
  tf_buf__printf(&v->msg, "%zu of %zu URIs unreachable from %s at %s: ", failed, n, runner, when);
  size_t listed = 0;
  for (const cJSON *r = list->child; r; r = r->next) {
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"))) continue;
    if (listed == TF__VAN_LIST_MAX) {
      tf_buf__printf(&v->msg, "; and %zu more", failed - listed);
      break;
    }
    const char *stage = tf_van__str(r, "stage");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(r, "errorCode");
    const char *why = tf_van__str(r, "errorReason");
    if (!why || !*why) why = tf_van__str(r, "message");
    tf_buf__printf(&v->msg, "%s%.300s (%s", listed++ ? "; " : "", tf_van__str(r, "uri"), stage ? stage : "failed");
    if (cJSON_IsNumber(code) && code->valuedouble > 0) tf_buf__printf(&v->msg, " %d", (int)code->valuedouble);
    if (why && *why) tf_buf__printf(&v->msg, ": %.120s", why);
    tf_buf__puts(&v->msg, ")");
  }
done:
  cJSON_Delete(list);
  cJSON_Delete(root);
}

tf_err tf_vantage_condition(const char **status, const char **reason, char **message, const char *configmap,
                            size_t len, int64_t now_ms, int64_t stale_ms)
{
  TF_ASSERT_ARG(status && reason && message);
  *message = NULL;
  TF_ASSERT_ARG(stale_ms >= 0);
  if (stale_ms == 0) stale_ms = TF_VANTAGE_STALE_MS_DEFAULT;
  tf_van__verdict v;
  tf_buf__init(&v.msg);
  if (!configmap) {
    tf_van__set(&v, "Unknown", "NoVantageResults");
    tf_buf__puts(&v.msg, "no vantage runner has written results (turnfleet-probe --vantage)");
  } else {
    tf_van__judge(&v, configmap, len, now_ms, stale_ms);
  }
  tf_err rc = tf_buf__detach(&v.msg, message);
  if (rc < 0) return rc;
  *status = v.status;
  *reason = v.reason;
  return TF_OK;
}

tf_err tf_vantage_metrics(tf_metrics *metrics, const char *ns, const char *pool, const char *configmap, size_t len,
                          int64_t now_ms, int64_t stale_ms)
{
  TF_ASSERT_ARG(metrics);
  TF_ASSERT_ARG(ns);
  TF_ASSERT_ARG(pool);
  const char *status = NULL, *reason = NULL;
  char *message = NULL;
  tf_err rc = tf_vantage_condition(&status, &reason, &message, configmap, len, now_ms, stale_ms);
  tf_free(message);
  if (rc < 0) return rc;
  int type = tf_metrics_family_type(metrics, TF_METRIC_POOL_CONDITION);
  if (type < 0)
    rc = tf_metrics_declare(metrics, TF_METRIC_POOL_CONDITION, TF_METRIC_GAUGE,
                            "The pool's status conditions: 1 for the current status of each type, 0 for the others");
  else if (type != TF_METRIC_GAUGE)
    return tf_error__set(TF_EINVALID, "metrics: %s is declared with another type", TF_METRIC_POOL_CONDITION);
  static const char *const names[] = {"namespace", "pool", "type", "status"};
  static const char *const statuses[] = {"True", "False", "Unknown"};
  for (size_t k = 0; rc == TF_OK && k < 3; k++) {
    const char *values[] = {ns, pool, "ReachableFromVantage", statuses[k]};
    rc = tf_metrics_add(metrics, TF_METRIC_POOL_CONDITION, names, values, 4, strcmp(status, statuses[k]) == 0 ? 1 : 0);
  }
  return rc;
}
