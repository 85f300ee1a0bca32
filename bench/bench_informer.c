/* The informer cache's memory against the JSON it holds: N relay pods (the
 * operator's own body, tests/data/manifest/pod-hostnetwork.json, made unique
 * and given what the API server adds: uid, resourceVersion, managedFields, a
 * status) fed to an informer as watch events. Printed, all from this run:
 * the JSON bytes as served (managedFields included) and as held (minified,
 * managedFields dropped), the cache's own count of its bytes
 * (tf_informer_bytes), and the resident-size growth of the process for the
 * cache, beside the same growth for the form it replaced (one cJSON tree per
 * object). Each form is measured in a child of its own, so one's heap does not
 * hide the other's. usage: bench_informer TEMPLATE_JSON [N] */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kube_internal.h"

static long rss_bytes(void)
{
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  if (f) fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

/* Pod @p i of the run: the template, named and numbered, with what the server adds. */
static cJSON *pod(const cJSON *tmpl, int i)
{
  cJSON *p = cJSON_Duplicate(tmpl, 1);
  cJSON *md = cJSON_GetObjectItemCaseSensitive(p, "metadata");
  char buf[128];
  snprintf(buf, sizeof(buf), "demo%02d-relay-%05d", i / 10, i);
  cJSON_ReplaceItemInObjectCaseSensitive(md, "name", cJSON_CreateString(buf));
  snprintf(buf, sizeof(buf), "5f0c%04x-1a2b-4c3d-8e9f-%012x", i & 0xffff, i);
  cJSON_AddStringToObject(md, "uid", buf);
  snprintf(buf, sizeof(buf), "%d", 100000 + i);
  cJSON_AddStringToObject(md, "resourceVersion", buf);
  cJSON_AddStringToObject(md, "creationTimestamp", "2026-12-07T18:00:00Z");
  cJSON *mf = cJSON_Parse(
    "[{\"manager\":\"turnfleet-operator\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-12-07T18:00:00Z\","
    "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:annotations\":{\".\":{},\"f:turnfleet.hzmi.dev/config-hash\":{},"
    "\"f:turnfleet.hzmi.dev/port-range\":{},\"f:turnfleet.hzmi.dev/relay-address\":{}},\"f:labels\":{\".\":{},"
    "\"f:app.kubernetes.io/instance\":{},\"f:app.kubernetes.io/managed-by\":{},\"f:app.kubernetes.io/name\":{},"
    "\"f:turnfleet.hzmi.dev/pool\":{}},\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":\\\"x\\\"}\":{}}},\"f:spec\":{"
    "\"f:containers\":{\"k:{\\\"name\\\":\\\"agent\\\"}\":{\".\":{},\"f:args\":{},\"f:image\":{},\"f:name\":{}},"
    "\"k:{\\\"name\\\":\\\"coturn\\\"}\":{\".\":{},\"f:args\":{},\"f:image\":{},\"f:name\":{}}},\"f:hostNetwork\":{},"
    "\"f:nodeName\":{},\"f:readinessGates\":{},\"f:terminationGracePeriodSeconds\":{},\"f:volumes\":{}}}},"
    "{\"manager\":\"kubelet\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-12-07T18:00:02Z\","
    "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:status\":{\"f:conditions\":{},\"f:containerStatuses\":{},"
    "\"f:hostIP\":{},\"f:phase\":{},\"f:podIP\":{},\"f:podIPs\":{},\"f:startTime\":{}}},\"subresource\":\"status\"}]");
  cJSON_AddItemToObject(md, "managedFields", mf);
  cJSON_DeleteItemFromObjectCaseSensitive(p, "status");
  cJSON_AddItemToObject(
    p, "status",
    cJSON_Parse("{\"phase\":\"Running\",\"hostIP\":\"203.0.113.7\",\"podIP\":\"203.0.113.7\",\"startTime\":"
                "\"2026-12-07T18:00:01Z\",\"conditions\":[{\"type\":\"Initialized\",\"status\":\"True\"},{\"type\":"
                "\"Ready\",\"status\":\"True\"},{\"type\":\"turnfleet.hzmi.dev/allocate-ready\",\"status\":\"True\","
                "\"reason\":\"AllocateSucceeded\",\"lastTransitionTime\":\"2026-12-07T18:00:05Z\"}]}"));
  return p;
}

/* In a child: grow the heap by the form @p cache (1: the informer; 0: cJSON trees); print its line. */
static void measure(const cJSON *tmpl, int n, int cache)
{
  fflush(stdout);
  pid_t pid = fork();
  if (pid != 0) {
    waitpid(pid, NULL, 0);
    return;
  }
  /* the events, made before the first figure: what the watch delivers is not the cache */
  cJSON **events = calloc((size_t)n, sizeof(*events));
  size_t bytes = 0;
  for (int i = 0; i < n; i++) {
    events[i] = pod(tmpl, i);
    char *t = cJSON_PrintUnformatted(events[i]);
    bytes += strlen(t);
    free(t);
  }
  tf_kube *kube = NULL;
  tf_kube_options ko = TF_KUBE_OPTIONS_INIT;
  ko.server = "https://127.0.21.1:41101"; /* never contacted */
  tf_informer *inf = NULL;
  tf_informer_options io = TF_INFORMER_OPTIONS_INIT;
  io.path = "/api/v1/pods";
  if (tf_kube_new(&kube, &ko) < 0 || tf_informer_new(&inf, kube, &io) < 0) exit(1);
  cJSON **trees = cache ? NULL : calloc((size_t)n, sizeof(*trees));
  malloc_trim(0);
  long before = rss_bytes();
  for (int i = 0; i < n; i++) {
    if (cache) tf_informer__feed(inf, TF_KUBE_EVENT_ADDED, events[i]); /* parsed once: this tree is the watch's */
    else trees[i] = cJSON_Duplicate(events[i], 1);                   /* what the cache held before */
  }
  malloc_trim(0);
  long grown = rss_bytes() - before;
  if (cache) {
    size_t kept = 0;
    tf_informer_object **objs = NULL;
    size_t m = 0;
    tf_informer_list_objects(inf, NULL, NULL, &objs, &m);
    for (size_t i = 0; i < m; i++) kept += strlen(tf_informer_object_json(objs[i], NULL));
    tf_informer_objects_release(objs, m);
    printf("objects                 %zu\n", m);
    printf("JSON served             %zu bytes (managedFields included)\n", bytes);
    printf("JSON held               %zu bytes (minified, managedFields dropped)\n", kept);
    printf("cache (its own count)   %zu bytes = %.2fx the JSON held, %.2fx the JSON served\n", tf_informer_bytes(inf),
           (double)tf_informer_bytes(inf) / (double)kept, (double)tf_informer_bytes(inf) / (double)bytes);
    printf("RSS growth, cache       %ld bytes = %.2fx the JSON held, %.2fx the JSON served\n", grown,
           (double)grown / (double)kept, (double)grown / (double)bytes);
  } else {
    printf("RSS growth, cJSON trees %ld bytes = %.2fx the JSON served (the form cached before)\n", grown,
           (double)grown / (double)bytes);
  }
  fflush(stdout);
  _exit(0);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench_informer TEMPLATE_JSON [N]\n");
    return 2;
  }
  int n = argc > 2 ? atoi(argv[2]) : 1000;
  if (n < 1) {
    fprintf(stderr, "bench_informer: N: must be >= 1\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "r");
  static char text[1 << 20];
  size_t len = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
  if (f) fclose(f);
  text[len] = '\0';
  cJSON *tmpl = cJSON_Parse(text);
  if (!cJSON_IsObject(tmpl)) {
    fprintf(stderr, "bench_informer: %s: not a JSON object\n", argv[1]);
    return 2;
  }
  measure(tmpl, n, 1);
  measure(tmpl, n, 0);
  cJSON_Delete(tmpl);
  return 0;
}
