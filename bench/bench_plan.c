/* bench_plan: planning time against the time to parse the same inventory.
 *
 * Generates a 10,000-node NodeList in memory, shaped like `kubectl get nodes
 * -o json` (labels, annotations, conditions, capacity, nodeInfo, an InternalIP
 * and an ExternalIP each), then measures in one run, best of several
 * repetitions on CLOCK_MONOTONIC:
 *   parse    cJSON_Parse of the text alone (the yardstick)
 *   nodes    tf_nodes_parse (cJSON plus reading the nodes)
 *   plan     tf_plan_new, HostNetwork, replicas = nodes, no fleet
 *   replan   the same with the previous plan as fleet (every name kept)
 *   part     tf_plan_new, PartitionedIP x4, with the HostNetwork relays as
 *            another pool's claims on the same addresses
 * and prints each time with its ratio to `parse`. The goal: planning costs no
 * more than parsing (ratio <= 1). */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "turnfleet.h"

#define NODES_DEFAULT 10000
#define REPS 7

typedef struct text {
  char *p;
  size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...)
{
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) abort();
    if (t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    t->cap = t->cap ? t->cap * 2 : 1 << 20;
    t->p = realloc(t->p, t->cap);
    if (!t->p) abort();
  }
}

static void node(text *t, unsigned i, int last)
{
  const char *zone = (i % 3 == 0) ? "a" : (i % 3 == 1) ? "b" : "c";
  put(t,
      "        {\n"
      "            \"apiVersion\": \"v1\",\n"
      "            \"kind\": \"Node\",\n"
      "            \"metadata\": {\n"
      "                \"annotations\": {\n"
      "                    \"kubeadm.alpha.kubernetes.io/cri-socket\": \"unix:///run/containerd/containerd.sock\",\n"
      "                    \"node.alpha.kubernetes.io/ttl\": \"0\",\n"
      "                    \"turnfleet.hzmi.dev/relay-address\": \"198.18.%u.%u\",\n"
      "                    \"volumes.kubernetes.io/controller-managed-attach-detach\": \"true\"\n"
      "                },\n"
      "                \"creationTimestamp\": \"2024-04-30T07:59:50Z\",\n"
      "                \"labels\": {\n"
      "                    \"beta.kubernetes.io/arch\": \"amd64\",\n"
      "                    \"beta.kubernetes.io/os\": \"linux\",\n"
      "                    \"kubernetes.io/arch\": \"amd64\",\n"
      "                    \"kubernetes.io/hostname\": \"node-%05u\",\n"
      "                    \"kubernetes.io/os\": \"linux\",\n"
      "                    \"node.kubernetes.io/instance-type\": \"c6i.2xlarge\",\n"
      "                    \"topology.kubernetes.io/region\": \"eu-west-1\",\n"
      "                    \"topology.kubernetes.io/zone\": \"eu-west-1%s\",\n"
      "                    \"turnfleet.hzmi.dev/relay-node\": \"%s\"\n"
      "                },\n"
      "                \"name\": \"node-%05u\",\n"
      "                \"resourceVersion\": \"%u\",\n"
      "                \"uid\": \"6b0e8a4c-1d2f-4c55-9b1a-%012u\"\n"
      "            },\n"
      "            \"spec\": {\n"
      "                \"podCIDR\": \"10.%u.%u.0/24\",\n"
      "                \"podCIDRs\": [\"10.%u.%u.0/24\"],\n"
      "                \"providerID\": \"aws:///eu-west-1%s/i-0%015x\"\n"
      "            },\n"
      "            \"status\": {\n"
      "                \"addresses\": [\n"
      "                    {\"address\": \"100.%u.%u.%u\", \"type\": \"InternalIP\"},\n"
      "                    {\"address\": \"203.%u.%u.%u\", \"type\": \"ExternalIP\"},\n"
      "                    {\"address\": \"node-%05u\", \"type\": \"Hostname\"}\n"
      "                ],\n"
      "                \"allocatable\": {\"cpu\": \"8\", \"ephemeral-storage\": \"95500736Ki\", \"memory\": \"15928356Ki\", \"pods\": \"110\"},\n"
      "                \"capacity\": {\"cpu\": \"8\", \"ephemeral-storage\": \"103609Mi\", \"memory\": \"16030756Ki\", \"pods\": \"110\"},\n"
      "                \"conditions\": [\n"
      "                    {\"lastHeartbeatTime\": \"2024-05-02T10:11:12Z\", \"lastTransitionTime\": \"2024-04-30T08:00:00Z\", \"message\": \"kubelet has sufficient memory available\", \"reason\": \"KubeletHasSufficientMemory\", \"status\": \"False\", \"type\": \"MemoryPressure\"},\n"
      "                    {\"lastHeartbeatTime\": \"2024-05-02T10:11:12Z\", \"lastTransitionTime\": \"2024-04-30T08:00:00Z\", \"message\": \"kubelet has no disk pressure\", \"reason\": \"KubeletHasNoDiskPressure\", \"status\": \"False\", \"type\": \"DiskPressure\"},\n"
      "                    {\"lastHeartbeatTime\": \"2024-05-02T10:11:12Z\", \"lastTransitionTime\": \"2024-04-30T08:00:00Z\", \"message\": \"kubelet has sufficient PID available\", \"reason\": \"KubeletHasSufficientPID\", \"status\": \"False\", \"type\": \"PIDPressure\"},\n"
      "                    {\"lastHeartbeatTime\": \"2024-05-02T10:11:12Z\", \"lastTransitionTime\": \"2024-04-30T08:00:10Z\", \"message\": \"kubelet is posting ready status\", \"reason\": \"KubeletReady\", \"status\": \"%s\", \"type\": \"Ready\"}\n"
      "                ],\n"
      "                \"daemonEndpoints\": {\"kubeletEndpoint\": {\"Port\": 10250}},\n"
      "                \"nodeInfo\": {\"architecture\": \"amd64\", \"bootID\": \"3f1c5d7e-%08u\", \"containerRuntimeVersion\": \"containerd://1.7.13\", \"kernelVersion\": \"6.1.0-21-amd64\", \"kubeProxyVersion\": \"v1.29.4\", \"kubeletVersion\": \"v1.29.4\", \"machineID\": \"ec2%029u\", \"operatingSystem\": \"linux\", \"osImage\": \"Debian GNU/Linux 12 (bookworm)\", \"systemUUID\": \"ec2f1a2b-%08u\"}\n"
      "            }\n"
      "        }%s\n",
      /* relay-address */ i / 250, i % 250 + 1,
      /* labels */ i, zone, "true",
      /* name, rv, uid */ i, 100000 + i, i,
      /* podCIDR */ (i >> 8) & 255, i & 255, (i >> 8) & 255, i & 255, zone, i,
      /* addresses */ (i >> 16) + 64, (i >> 8) & 255, i & 255, (i >> 16) & 255, (i >> 8) & 255, i & 255, i,
      /* Ready */ (i % 97 == 0) ? "Unknown" : "True",
      /* nodeInfo */ i, i, i, last ? "" : ",");
}

static char *inventory(unsigned n, size_t *len)
{
  text t = {NULL, 0, 0};
  put(&t, "{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n");
  for (unsigned i = 0; i < n; i++) node(&t, i, i + 1 == n);
  put(&t, "    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n");
  *len = t.len;
  return t.p;
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
  fprintf(stderr, "bench_plan: %s: %s\n", what, tf_error_last()->message);
  exit(1);
}

static tf_pool *pool(const char *yaml)
{
  tf_pool *p = NULL;
  if (tf_pool_parse(&p, yaml, strlen(yaml), TF_FORMAT_YAML) < 0) die("pool");
  if (tf_pool_validate(NULL, p) < 0) die("pool");
  return p;
}

/* Best of REPS for one plan; returns the last plan. */
static tf_plan *time_plan(const tf_pool *p, const tf_nodes *nodes, const tf_existing *fleet, double *best)
{
  tf_plan *plan = NULL;
  *best = 1e9;
  for (int r = 0; r < REPS; r++) {
    tf_plan_free(plan);
    plan = NULL;
    double t0 = now();
    if (tf_plan_new(&plan, p, nodes, fleet) < 0) die("plan");
    double t = now() - t0;
    if (t < *best) *best = t;
  }
  return plan;
}

static void row(const char *what, double t, double base, const char *note)
{
  printf("%-8s %10.2f ms   %5.2fx parse   %s\n", what, t * 1e3, t / base, note);
}

int main(int argc, char **argv)
{
  unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : NODES_DEFAULT;
  if (n == 0 || n > 60000) {
    fprintf(stderr, "usage: bench_plan [NODES (1-60000, default %d)]\n", NODES_DEFAULT);
    return 2;
  }
  size_t len;
  char *json = inventory(n, &len);

  double parse = 1e9, nodes_t = 1e9;
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    cJSON *doc = cJSON_ParseWithLength(json, len);
    double t = now() - t0;
    if (!doc) die("cJSON_Parse");
    cJSON_Delete(doc);
    if (t < parse) parse = t;
  }
  tf_nodes *nodes = NULL;
  for (int r = 0; r < REPS; r++) {
    tf_nodes_free(nodes);
    nodes = NULL;
    double t0 = now();
    if (tf_nodes_parse(&nodes, json, len) < 0) die("nodes");
    double t = now() - t0;
    if (t < nodes_t) nodes_t = t;
  }

  char yaml[1024];
  snprintf(yaml, sizeof(yaml),
           "metadata: {name: hn}\nspec:\n  replicas: %u\n  addressing: {mode: HostNetwork, family: IPv4}\n"
           "  relayPortRange: {start: 49152, end: 65535}\n"
           "  auth: {realm: bench.turnfleet.test, secretRef: {name: s}}\n",
           n);
  tf_pool *hn = pool(yaml);
  snprintf(yaml, sizeof(yaml),
           "metadata: {name: part}\nspec:\n  replicas: %u\n"
           "  addressing: {mode: PartitionedIP, family: IPv4, partitionedIP: {relaysPerNode: 4}}\n"
           "  relayPortRange: {start: 20000, end: 29999}\n"
           "  listeners: [{name: turn, protocol: udp, port: 3500}, {name: turn-tcp, protocol: tcp, port: 3500}]\n"
           "  auth: {realm: bench.turnfleet.test, secretRef: {name: s}}\n",
           4 * n);
  tf_pool *part = pool(yaml);

  double plan_t, replan_t, part_t;
  tf_plan *plan = time_plan(hn, nodes, NULL, &plan_t);
  char *out = NULL;
  double t0 = now();
  if (tf_plan_to_json(&out, plan) < 0) die("plan json");
  double json_t = now() - t0;
  tf_existing *fleet = NULL;
  if (tf_existing_parse(&fleet, out, strlen(out)) < 0) die("fleet");
  tf_plan *replan = time_plan(hn, nodes, fleet, &replan_t);
  tf_plan *pplan = time_plan(part, nodes, fleet, &part_t);

  /* the plans must be what we think we measured */
  size_t eligible = 0;
  for (size_t i = 0; i < tf_nodes_count(nodes); i++) eligible += (size_t)tf_nodes_eligible(nodes, i, hn);
  if (tf_plan_relay_count(plan) != eligible || tf_plan_relay_count(replan) != eligible ||
      tf_plan_relay_count(pplan) != 4 * eligible) {
    fprintf(stderr, "bench_plan: unexpected plans: %zu, %zu, %zu relays for %zu eligible nodes\n",
            tf_plan_relay_count(plan), tf_plan_relay_count(replan), tf_plan_relay_count(pplan), eligible);
    return 1;
  }
  for (size_t i = 0; i < tf_plan_relay_count(plan); i++)
    if (strcmp(tf_relay_name(tf_plan_relay(plan, i)), tf_relay_name(tf_plan_relay(replan, i))) != 0) {
      fprintf(stderr, "bench_plan: replan renamed a relay\n");
      return 1;
    }

  printf("inventory: %u nodes, %.1f MB of NodeList JSON; best of %d runs\n", n, (double)len / 1e6, REPS);
  row("parse", parse, parse, "cJSON_Parse of the text alone");
  row("nodes", nodes_t, parse, "tf_nodes_parse (cJSON + nodes)");
  char note[160];
  snprintf(note, sizeof(note), "tf_plan_new HostNetwork, %zu relays, no fleet", tf_plan_relay_count(plan));
  row("plan", plan_t, parse, note);
  snprintf(note, sizeof(note), "tf_plan_new HostNetwork, previous plan as fleet (%zu kept)", tf_existing_count(fleet));
  row("replan", replan_t, parse, note);
  snprintf(note, sizeof(note), "tf_plan_new PartitionedIP x4, %zu relays, %zu claims of another pool",
           tf_plan_relay_count(pplan), tf_existing_count(fleet));
  row("part", part_t, parse, note);
  row("json", json_t, parse, "tf_plan_to_json of the HostNetwork plan (once)");
  double worst = plan_t > replan_t ? plan_t : replan_t;
  if (part_t > worst) worst = part_t;
  printf("plan/parse: %.2f (plan), %.2f (replan), %.2f (part); goal <= 1: %s\n", plan_t / parse, replan_t / parse,
         part_t / parse, worst <= parse ? "met" : "NOT met");

  tf_free(out);
  tf_plan_free(plan);
  tf_plan_free(replan);
  tf_plan_free(pplan);
  tf_existing_free(fleet);
  tf_pool_free(hn);
  tf_pool_free(part);
  tf_nodes_free(nodes);
  free(json);
  return 0;
}
