/* See vantage.h. */
#include "vantage.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tool_io.h"

#define PROG "turnfleet-probe"
#define VANTAGE_URIS_MAX 4096
#define VANTAGE_CONCURRENCY 64

static int api_error(const char *what, tf_kube_status *st)
{
  tool_say(PROG, what, "%s", st ? tf_kube_status_message(st) : tf_error_last()->message);
  tf_kube_status_free(st);
  return 1;
}

/* The `uris` of <pool>-turn-uris, one a line (blank lines skipped); NULL after saying why. */
static char **read_uris(tf_kube *kube, const char *ns, const char *pool, size_t *count, int *code)
{
  char name[96], *path = NULL, *body = NULL;
  snprintf(name, sizeof(name), "%s-turn-uris", pool);
  tf_kube_status *st = NULL;
  *count = 0;
  *code = 1;
  if (tf_kube_path(&path, "/api/v1", "configmaps", ns, name, NULL) < 0) {
    tool_say(PROG, "--vantage", "%s", tf_error_last()->message);
    *code = 2;
    return NULL;
  }
  tf_err rc = tf_kube_get(kube, path, &body, &st);
  tf_free(path);
  if (rc < 0) {
    char what[160];
    snprintf(what, sizeof(what), "configmap %s/%s", ns, name);
    api_error(what, st);
    return NULL;
  }
  cJSON *cm = cJSON_Parse(body);
  tf_free(body);
  const cJSON *uris = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cm, "data"), "uris");
  char **out = NULL;
  if (!cJSON_IsString(uris)) {
    /* no key: the pool has published nothing yet; an empty result list says so */
    cJSON_Delete(cm);
    *code = 0;
    return calloc(1, sizeof(char *));
  }
  out = calloc(VANTAGE_URIS_MAX + 1, sizeof(char *));
  const char *p = uris->valuestring;
  unsigned line = 0;
  while (out && *p) {
    line++;
    size_t n = strcspn(p, "\n");
    const char *s = p, *e = p + n;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    if (e > s) {
      char *u = strndup(s, (size_t)(e - s));
      tf_uri *parsed = NULL;
      if (!u || tf_uri_parse(&parsed, u) < 0) {
        tool_say(PROG, name, "uris line %u: %s", line, u ? tf_error_last()->message : "out of memory");
        free(u);
        *code = 2;
        goto fail;
      }
      tf_uri_free(parsed);
      if (*count == VANTAGE_URIS_MAX) {
        tool_say(PROG, name, "more than %d URIs", VANTAGE_URIS_MAX);
        free(u);
        *code = 2;
        goto fail;
      }
      out[(*count)++] = u;
    }
    p += n + (p[n] == '\n');
  }
  cJSON_Delete(cm);
  *code = 0;
  return out;
fail:
  for (size_t i = 0; i < *count; i++) free(out[i]);
  free(out);
  cJSON_Delete(cm);
  *count = 0;
  return NULL;
}

/* Merge-patch the ConfigMap (every key is written each time), or create it. */
static int write_results(tf_kube *kube, const char *ns, const char *pool, const char *body)
{
  char name[96], *item = NULL, *coll = NULL;
  snprintf(name, sizeof(name), "%s-vantage", pool);
  tf_kube_status *st = NULL;
  int code = 1;
  if (tf_kube_path(&item, "/api/v1", "configmaps", ns, name, NULL) < 0 ||
      tf_kube_path(&coll, "/api/v1", "configmaps", ns, NULL, NULL) < 0) {
    tool_say(PROG, name, "%s", tf_error_last()->message);
    goto done;
  }
  tf_err rc = tf_kube_patch(kube, item, TF_KUBE_PATCH_MERGE, body, NULL, &st);
  if (rc == TF_ENOTFOUND) {
    tf_kube_status_free(st);
    st = NULL;
    rc = tf_kube_create(kube, coll, body, NULL, &st);
  }
  if (rc < 0) {
    char what[160];
    snprintf(what, sizeof(what), "configmap %s/%s", ns, name);
    api_error(what, st);
    goto done;
  }
  code = 0;
done:
  tf_free(item);
  tf_free(coll);
  return code;
}

int vantage_run(const probe_vantage *v, const tf_probe_options *base, vantage_print_fn print, void *arg)
{
  tf_kube_options ko;
  tf_kube_options_init(&ko, TF_KUBE_OPTIONS_VERSION);
  ko.source = v->kubeconfig ? TF_KUBE_SOURCE_KUBECONFIG : TF_KUBE_SOURCE_IN_CLUSTER;
  ko.kubeconfig = v->kubeconfig;
  ko.user_agent = "turnfleet-probe";
  tf_kube *kube = NULL;
  if (tf_kube_new(&kube, &ko) < 0) {
    tool_say(PROG, v->kubeconfig ? v->kubeconfig : "in-cluster configuration", "%s", tf_error_last()->message);
    return 2;
  }
  const char *ns = v->ns ? v->ns : tf_kube_namespace(kube);
  char host[256] = "";
  const char *runner = v->runner;
  if (!runner) {
    if (gethostname(host, sizeof(host) - 1) < 0 || !*host) snprintf(host, sizeof(host), "unknown-host");
    runner = host;
  }
  size_t n = 0;
  int code;
  char **uris = read_uris(kube, ns, v->pool, &n, &code);
  tf_probe_set *set = NULL;
  const tf_probe_result **results = NULL;
  char *body = NULL;
  if (!uris) goto done;
  code = 1;
  if (tf_probe_set_new(&set, n < VANTAGE_CONCURRENCY ? (unsigned)(n ? n : 1) : VANTAGE_CONCURRENCY) < 0) goto fail;
  for (size_t i = 0; i < n; i++) {
    tf_probe_options o = *base;
    o.uri = uris[i];
    if (tf_probe_set_add(set, &o) < 0) goto fail;
  }
  if (n && tf_probe_set_run(set, NULL, NULL) < 0) goto fail;
  results = calloc(n ? n : 1, sizeof(*results));
  if (!results) goto fail;
  for (size_t i = 0; i < n; i++) {
    results[i] = tf_probe_set_result(set, i);
    print(results[i], arg);
  }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  if (tf_vantage_configmap(&body, v->pool, ns, runner, now_ms, results, n) < 0) {
    tool_say(PROG, tf_error_last()->code == TF_EINVALID ? "--vantage/--runner" : "vantage", "%s",
             tf_error_last()->message);
    code = 2;
    goto done;
  }
  code = write_results(kube, ns, v->pool, body);
  if (code == 0) fprintf(stderr, "%s: wrote %zu results to configmap %s/%s-vantage\n", PROG, n, ns, v->pool);
  goto done;
fail:
  tool_say(PROG, "probe", "%s", tf_error_last()->message);
done:
  tf_free(body);
  free(results);
  tf_probe_set_free(set);
  for (size_t i = 0; uris && i < n; i++) free(uris[i]);
  free(uris);
  tf_kube_free(kube);
  return code;
}
