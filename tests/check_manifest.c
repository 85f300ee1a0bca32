/* manifest: the Kubernetes bodies of a pool against golden files (every
 * addressing mode, a listener below 1024, PodIP's Multus annotation,
 * PartitionedIP slices), no secret outside the Secret, desired vs observed,
 * bad input named by field. Pure: no socket, no process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "adapter_internal.h"
#include "tf_test.h"

#define NODE(name, addrs, ann)                                                                               \
  "{\"metadata\":{\"name\":\"" name "\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"},"            \
  "\"annotations\":{" ann "}},"                                                                              \
  "\"status\":{\"addresses\":[" addrs "],\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"
#define IP(type, a) "{\"type\":\"" type "\",\"address\":\"" a "\"}"
#define NODELIST(items) "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[" items "]}"

/* Distinctive secrets: a leak anywhere is easy to grep. */
#define SECRET "MANIFEST-SEKRIT-4b1d"
#define CLI_PW "MANIFEST-CLIPW-93aa"
#define UID "0b4e6f0e-5a47-4c3b-9d2e-6a3c1f5e7d21"
#define T0 1714564800000LL /* 2024-05-01T12:00:00Z */

#define POOL_HEAD(name, ns)                                   \
  "apiVersion: turnfleet.hzmi.dev/v1alpha1\n"                 \
  "kind: TURNPool\n"                                          \
  "metadata: {name: " name ", namespace: " ns "}\n"           \
  "spec:\n"                                                   \
  "  auth: {realm: example.com, secretRef: {name: s}}\n"

static const char host_pool[] = POOL_HEAD("edge", "media")
    "  replicas: 2\n"
    "  dataplane: {image: \"coturn/coturn:4.18.0-r0\", coturnVersion: \"4.18.0\"}\n"
    "  relayPortRange: {start: 49152, end: 49200}\n"
    "  listeners:\n"
    "    - {name: turn, protocol: udp, port: 443}\n"
    "    - {name: turn-tcp, protocol: tcp, port: 443}\n"
    "  drainTimeout: 600s\n";
static const char host_nodes[] = NODELIST(NODE("node-a", IP("ExternalIP", "203.0.113.7"), "") ","
                                          NODE("node-b", IP("ExternalIP", "203.0.113.8"), ""));

static const char external_pool[] = POOL_HEAD("ext", "default")
    "  replicas: 1\n"
    "  dataplane: {coturnVersion: \"4.6.1\"}\n"
    "  addressing: {mode: ExternalIPPool, externalIPPool: {addresses: [\"198.51.100.0/28\"]}}\n"
    "  relayPortRange: {start: 50000, end: 50999}\n"
    "  drainTimeout: 90s\n";
static const char external_nodes[] =
    NODELIST(NODE("node-x", IP("InternalIP", "10.0.0.9"), "\"turnfleet.hzmi.dev/external-addresses\": \"198.51.100.4\""));

static const char podip_pool[] = POOL_HEAD("pods", "media")
    "  replicas: 1\n"
    "  dataplane: {coturnVersion: \"4.18.0\"}\n"
    "  addressing: {mode: PodIP, podIP: {network: \"net-ns/relay-net\"}}\n"
    "  relayPortRange: {start: 40000, end: 40999}\n"
    "  listeners:\n"
    "    - {name: turn, protocol: udp, port: 3478}\n";
static const char podip_nodes[] =
    NODELIST(NODE("node-p", IP("InternalIP", "10.0.0.5"), "\"turnfleet.hzmi.dev/relay-pod-addresses\": \"10.1.0.5\""));

static const char part_pool[] = POOL_HEAD("part", "media")
    "  replicas: 2\n"
    "  dataplane: {coturnVersion: \"4.18.0\"}\n"
    "  addressing: {mode: PartitionedIP, partitionedIP: {relaysPerNode: 2}}\n"
    "  relayPortRange: {start: 49152, end: 49251}\n"
    "  listeners:\n"
    "    - {name: turn, protocol: udp, port: 3478}\n"
    "  drainTimeout: 30s\n";
static const char part_nodes[] = NODELIST(NODE("node-q", IP("ExternalIP", "198.51.100.10"), ""));

static const char dual_pool[] = POOL_HEAD("dual", "media")
    "  replicas: 1\n"
    "  dataplane: {coturnVersion: \"4.6.1\"}\n"
    "  addressing: {mode: HostNetwork, family: DualStack}\n"
    "  relayPortRange: {start: 49152, end: 49200}\n";
static const char dual_nodes[] =
    NODELIST(NODE("node-d", IP("ExternalIP", "2001:db8::7") "," IP("ExternalIP", "203.0.113.9"), ""));

/* ---- a reconcile in which every planned relay runs and passed its probe ---- */

typedef struct fx {
  tf_pool *pool;
  tf_nodes *nodes;
  tf_reconcile *rec;
} fx;

static tf_reconcile *reconcile(const fx *f, const tf_observed *obs)
{
  const char *secrets[] = {SECRET};
  tf_coturn_options copt = TF_COTURN_OPTIONS_INIT;
  copt.secrets = secrets;
  copt.secrets_count = 1;
  copt.cli_port = 47700;
  copt.cli_password = CLI_PW;
  if (tf_manifest_tls_secret(f->pool)) { /* as the operator renders a pool with tls listeners */
    copt.cert_file = TF_MANIFEST_TLS_CERT_PATH;
    copt.key_file = TF_MANIFEST_TLS_KEY_PATH;
  }
  tf_reconcile_options ropt = TF_RECONCILE_OPTIONS_INIT;
  ropt.coturn = &copt;
  tf_reconcile *rec = NULL;
  TF_OK_OR_FAIL(tf_reconcile_new(&rec, f->pool, f->nodes, obs, T0, &ropt));
  return rec;
}

/* Observe every planned relay of @p first as running, probed and ready (plus @p extra, may be NULL). */
static tf_observed *all_ready(const tf_reconcile *first, const tf_relay_observation *extra)
{
  tf_observed *obs = NULL;
  TF_OK_OR_FAIL(tf_observed_new(&obs));
  const tf_plan *plan = tf_reconcile_plan(first);
  for (size_t i = 0; i < tf_reconcile_relay_count(first); i++) {
    const char *name = tf_reconcile_relay_name(first, i);
    const char *uris[16];
    size_t n = tf_reconcile_relay_uri_count(first, i);
    ck_assert_uint_le(n, 16);
    for (size_t j = 0; j < n; j++) uris[j] = tf_reconcile_relay_uri(first, i, j);
    tf_relay_observation o = TF_RELAY_OBSERVATION_INIT;
    o.name = name;
    o.identity = tf_relay_identity(tf_plan_find(plan, name));
    o.config_hash = tf_reconcile_relay_config_hash(first, i);
    o.cli_port = tf_reconcile_relay_cli_port(first, i);
    o.running = 1;
    o.started_ms = T0 - 60000;
    o.allocations = (int64_t)i + 2;
    o.probe_ms = T0 - 1000;
    o.probe_ok = 1;
    o.uris = uris;
    o.uri_count = n;
    TF_OK_OR_FAIL(tf_observed_add_relay(obs, &o));
  }
  if (extra) TF_OK_OR_FAIL(tf_observed_add_relay(obs, extra));
  return obs;
}

static fx fx_new(const char *pool_text, const char *nodes_json, const tf_relay_observation *extra)
{
  fx f = {tf_test_pool(pool_text), tf_test_nodes(nodes_json), NULL};
  tf_reconcile *first = reconcile(&f, NULL);
  tf_observed *obs = all_ready(first, extra);
  f.rec = reconcile(&f, obs);
  tf_observed_free(obs);
  tf_reconcile_free(first);
  return f;
}

static void fx_free(fx *f)
{
  tf_reconcile_free(f->rec);
  tf_nodes_free(f->nodes);
  tf_pool_free(f->pool);
}

static tf_manifest_options opts(void)
{
  tf_manifest_options o = TF_MANIFEST_OPTIONS_INIT;
  o.pool_uid = UID;
  o.agent_image = "registry.test/turnfleet:0.3.0";
  return o;
}

/* Index of the @p nth planned relay. */
static size_t planned(const tf_reconcile *rec, size_t nth)
{
  for (size_t i = 0; i < tf_reconcile_relay_count(rec); i++)
    if ((tf_reconcile_relay_flags(rec, i) & TF_RELAY_PLANNED) && nth-- == 0) return i;
  ck_abort_msg("fewer planned relays than asked");
  return 0;
}

static char *pod_of(const fx *f, size_t nth)
{
  tf_manifest_options o = opts();
  char *pod = NULL;
  TF_OK_OR_FAIL(tf_manifest_relay_pod(&pod, f->pool, f->rec, planned(f->rec, nth), &o));
  return pod;
}

/* ---- golden files: tests/data/manifest/<name>.json; TF_UPDATE_GOLDEN=1 rewrites them ---- */

static void golden(const char *name, const char *actual)
{
  char rel[128];
  snprintf(rel, sizeof(rel), "manifest/%s.json", name);
  char *path = strdup(tf_test_data(rel));
  ck_assert_ptr_nonnull(path);
  const char *update = getenv("TF_UPDATE_GOLDEN");
  if (update && !strcmp(update, "1")) tf_test_write(path, actual, 0644);
  char *expected = tf_test_read(path, NULL);
  if (strcmp(expected, actual) != 0) {
    const char *e = expected, *a = actual;
    int line = 1;
    while (*e && *e == *a) {
      if (*e == '\n') line++;
      e++;
      a++;
    }
    while (e > expected && e[-1] != '\n') e--;
    while (a > actual && a[-1] != '\n') a--;
    ck_abort_msg("%s differs at line %d:\n  expected: %.*s\n  actual:   %.*s\n(run with TF_UPDATE_GOLDEN=1 to "
                 "rewrite after checking the change)",
                 rel, line, (int)strcspn(e, "\n"), e, (int)strcspn(a, "\n"), a);
  }
  free(expected);
  free(path);
}

START_TEST(test_manifest__pod_hostnetwork_with_a_port_below_1024)
{
  fx f = fx_new(host_pool, host_nodes, NULL);
  char *pod = pod_of(&f, 0);
  golden("pod-hostnetwork", pod);
  /* the bits the contract names, asserted directly as well */
  ck_assert_ptr_nonnull(strstr(pod, "\"hostNetwork\":\ttrue"));
  ck_assert_ptr_nonnull(strstr(pod, "\"NET_BIND_SERVICE\""));
  ck_assert_ptr_nonnull(strstr(pod, "\"terminationGracePeriodSeconds\":\t630"));
  ck_assert_ptr_nonnull(strstr(pod, "\"automountServiceAccountToken\":\tfalse"));
  ck_assert_ptr_nonnull(strstr(pod, "\"conditionType\":\t\"turnfleet.hzmi.dev/allocate-ready\""));
  /* the drain handshake's ground (docs/operator.md): the coturn container has no probe the kubelet
   * could kill it for, so its preStop, which writes the stop request, runs only for a pod being
   * deleted; the one probe of the pod is the agent's liveness, after the coturn container */
  const char *agent = strstr(pod, "\"name\":\t\"agent\"");
  ck_assert_ptr_nonnull(agent);
  ck_assert_ptr_null(strstr(pod, "startupProbe"));
  ck_assert_ptr_null(strstr(pod, "readinessProbe"));
  const char *live = strstr(pod, "livenessProbe");
  ck_assert_ptr_nonnull(live);
  ck_assert(live > agent);
  ck_assert_ptr_null(strstr(live + 1, "livenessProbe"));
  /* an exec of the heartbeat check: no connection to the agent's public port, which a flood could fill */
  ck_assert_ptr_nonnull(strstr(live, "[\"turnfleet\", \"agent\", \"healthz\", \"--config\", \"/etc/turnfleet/turnserver.conf\"]"));
  ck_assert_ptr_null(strstr(pod, "httpGet"));
  ck_assert_ptr_nonnull(strstr(pod, "> '/var/lib/turnfleet/"));
  ck_assert_ptr_nonnull(strstr(pod, "until grep -qx \\\"request=$id\\\""));
  tf_free(pod);
  fx_free(&f);
}
END_TEST

START_TEST(test_manifest__pod_external_ip_pool_has_no_extra_capability)
{
  fx f = fx_new(external_pool, external_nodes, NULL);
  char *pod = pod_of(&f, 0);
  golden("pod-external", pod);
  ck_assert_ptr_null(strstr(pod, "NET_BIND_SERVICE"));
  ck_assert_ptr_nonnull(strstr(pod, "\"nodeName\":\t\"node-x\""));
  ck_assert_ptr_nonnull(strstr(pod, "\"terminationGracePeriodSeconds\":\t120"));
  tf_free(pod);
  fx_free(&f);
}
END_TEST

START_TEST(test_manifest__pod_podip_asks_multus_for_the_address)
{
  fx f = fx_new(podip_pool, podip_nodes, NULL);
  char *pod = pod_of(&f, 0);
  golden("pod-podip", pod);
  ck_assert_ptr_null(strstr(pod, "hostNetwork"));
  /* the liveness probe is an exec: it needs no route from the node to the Multus address */
  ck_assert_ptr_nonnull(strstr(pod, "\"livenessProbe\""));
  ck_assert_ptr_null(strstr(pod, "httpGet"));
  ck_assert_ptr_nonnull(strstr(pod, "\"k8s.v1.cni.cncf.io/networks\":\t\"[{\\\"name\\\":\\\"relay-net\\\","
                                    "\\\"namespace\\\":\\\"net-ns\\\",\\\"ips\\\":[\\\"10.1.0.5/32\\\"]}]\""));
  tf_free(pod);
  fx_free(&f);
}
END_TEST

START_TEST(test_manifest__pod_partitioned_slices_get_their_own_agent_port)
{
  fx f = fx_new(part_pool, part_nodes, NULL);
  char *a = pod_of(&f, 0), *b = pod_of(&f, 1);
  /* which of the two is slice 0 depends on the names: golden them by slice */
  const tf_plan *plan = tf_reconcile_plan(f.rec);
  uint32_t slice_a = tf_relay_slice(tf_plan_find(plan, tf_reconcile_relay_name(f.rec, planned(f.rec, 0))));
  golden("pod-partitioned-slice0", slice_a == 0 ? a : b);
  golden("pod-partitioned-slice1", slice_a == 0 ? b : a);
  ck_assert_ptr_nonnull(strstr(slice_a == 0 ? a : b, "\"198.51.100.10:9700\""));
  ck_assert_ptr_nonnull(strstr(slice_a == 0 ? b : a, "\"198.51.100.10:9701\""));
  tf_free(a);
  tf_free(b);
  fx_free(&f);
}
END_TEST

START_TEST(test_manifest__pod_dualstack_annotates_both_addresses)
{
  fx f = fx_new(dual_pool, dual_nodes, NULL);
  char *pod = pod_of(&f, 0);
  golden("pod-dualstack", pod);
  ck_assert_ptr_nonnull(strstr(pod, "\"turnfleet.hzmi.dev/relay-address\":\t\"203.0.113.9,2001:db8::7\""));
  tf_free(pod);
  fx_free(&f);
}
END_TEST

/* A tls listener's Secret is mounted read-only in the coturn container, at the rendered paths, in a directory
 * of its own: never inside another volume's mount (a mount nested in the config volume would be hidden by it
 * or need a mount point inside a read-only volume). */
START_TEST(test_manifest__pod_mounts_the_tls_secret_beside_the_config)
{
  static const char tls_pool[] = POOL_HEAD("edge", "media")
    "  replicas: 1\n"
    "  relayPortRange: {start: 49152, end: 49200}\n"
    "  listeners:\n"
    "    - {name: turn, protocol: udp, port: 3478}\n"
    "    - {name: turns, protocol: tls, port: 5349, tlsSecretRef: {name: edge-tls}}\n"
    "  drainTimeout: 600s\n";
  fx f = fx_new(tls_pool, host_nodes, NULL);
  char *pod = pod_of(&f, 0);
  cJSON *doc = cJSON_Parse(pod);
  const cJSON *c, *m, *v;
  int mounted = 0, volume = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "spec"), "containers"))
  {
    const cJSON *mounts = cJSON_GetObjectItem(c, "volumeMounts");
    cJSON_ArrayForEach(m, mounts)
    {
      const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(m, "mountPath"));
      const cJSON *o;
      cJSON_ArrayForEach(o, mounts)
      {
        const char *other = cJSON_GetStringValue(cJSON_GetObjectItem(o, "mountPath"));
        size_t n = strlen(other);
        ck_assert_msg(o == m || !(strncmp(path, other, n) == 0 && path[n] == '/'), "%s is inside %s", path, other);
      }
      if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "name")), "tls") != 0) continue;
      ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")), "coturn");
      ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(m, "readOnly")));
      char want[64];
      snprintf(want, sizeof(want), "%s/tls.crt", path);
      ck_assert_str_eq(want, TF_MANIFEST_TLS_CERT_PATH);
      mounted++;
    }
  }
  cJSON_ArrayForEach(v, cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "spec"), "volumes"))
  {
    const cJSON *sv = cJSON_GetObjectItem(v, "secret");
    if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(v, "name")), "tls") != 0) continue;
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(sv, "secretName")), "edge-tls");
    ck_assert_int_eq(cJSON_GetObjectItem(sv, "defaultMode")->valueint, 0440);
    volume++;
  }
  ck_assert_int_eq(mounted, 1);
  ck_assert_int_eq(volume, 1);
  ck_assert_ptr_nonnull(strstr(tf_reconcile_relay_config(f.rec, planned(f.rec, 0)), TF_MANIFEST_TLS_KEY_PATH));
  cJSON_Delete(doc);
  tf_free(pod);
  fx_free(&f);
}
END_TEST

START_TEST(test_manifest__secret_configmap_status_event)
{
  fx f = fx_new(host_pool, host_nodes, NULL);
  tf_manifest_options o = opts();
  char *secret = NULL, *cm = NULL, *st = NULL, *status = NULL, *ev = NULL;
  TF_OK_OR_FAIL(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, NULL, 0, &o));
  TF_OK_OR_FAIL(tf_manifest_turn_uris(&cm, f.pool, f.rec, &o));
  TF_OK_OR_FAIL(tf_reconcile_status_json(&st, f.rec));
  TF_OK_OR_FAIL(tf_manifest_status(&status, f.pool, st, strlen(st), 7));
  tf_manifest_event e = TF_MANIFEST_EVENT_INIT;
  e.reason = "ScaleUp";
  e.message = "relay edge-relay-xxxxx started on node-a";
  e.first_time = "2024-05-01T12:00:00Z";
  TF_OK_OR_FAIL(tf_manifest_event_body(&ev, f.pool, &e, &o));
  golden("secret", secret);
  golden("configmap", cm);
  golden("status", status);
  golden("event", ev);
  ck_assert_ptr_nonnull(strstr(status, "\"readyRelays\":\t2"));
  ck_assert_ptr_nonnull(strstr(status, "\"observedGeneration\":\t7"));
  ck_assert_ptr_null(strstr(status, "stopping"));
  /* a pool whose relays all drain says what is left */
  char *stopping = NULL;
  const char drain[] = "{\"relays\":[],\"conditions\":[],\"stopping\":true,"
                       "\"shutdown\":{\"relays\":2,\"allocations\":5,\"deadline\":\"2026-12-03T06:00:00Z\"}}";
  TF_OK_OR_FAIL(tf_manifest_status(&stopping, f.pool, drain, strlen(drain), 7));
  ck_assert_ptr_nonnull(strstr(stopping, "\"stopping\":\ttrue"));
  ck_assert_ptr_nonnull(strstr(stopping, "\"deadline\":\t\"2026-12-03T06:00:00Z\""));
  tf_free(stopping);
  tf_secret_free(secret);
  tf_free(cm);
  tf_free(st);
  tf_free(status);
  tf_free(ev);
  fx_free(&f);
}
END_TEST

/* base64 decode of the first "<relay>.conf" value after @p key in @p body. */
static char *decoded_value(const char *body, const char *key)
{
  const char *at = strstr(body, key);
  ck_assert_ptr_nonnull(at);
  at = strchr(at + strlen(key) + 1, '"');
  ck_assert_ptr_nonnull(at);
  at++;
  size_t n = strcspn(at, "\"");
  unsigned char *out = calloc(1, n + 1);
  int len = EVP_DecodeBlock(out, (const unsigned char *)at, (int)n);
  ck_assert_int_ge(len, 0);
  return (char *)out;
}

START_TEST(test_manifest__no_secret_outside_the_secret)
{
  const char *pools[] = {host_pool, external_pool, podip_pool, part_pool, dual_pool};
  const char *nodes[] = {host_nodes, external_nodes, podip_nodes, part_nodes, dual_nodes};
  for (size_t p = 0; p < 5; p++) {
    fx f = fx_new(pools[p], nodes[p], NULL);
    tf_manifest_options o = opts();
    char *bodies[8] = {0};
    size_t nb = 0;
    for (size_t i = 0; i < tf_reconcile_relay_count(f.rec); i++)
      if (tf_reconcile_relay_flags(f.rec, i) & TF_RELAY_PLANNED)
        TF_OK_OR_FAIL(tf_manifest_relay_pod(&bodies[nb++], f.pool, f.rec, i, &o));
    char *st = NULL;
    TF_OK_OR_FAIL(tf_reconcile_status_json(&st, f.rec));
    TF_OK_OR_FAIL(tf_manifest_status(&bodies[nb++], f.pool, st, strlen(st), 1));
    TF_OK_OR_FAIL(tf_manifest_turn_uris(&bodies[nb++], f.pool, f.rec, &o));
    tf_manifest_event e = TF_MANIFEST_EVENT_INIT;
    e.reason = "Rendered";
    e.message = "configs rendered";
    e.first_time = "2024-05-01T12:00:00Z";
    TF_OK_OR_FAIL(tf_manifest_event_body(&bodies[nb++], f.pool, &e, &o));
    char *secret = NULL;
    TF_OK_OR_FAIL(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, NULL, 0, &o));
    for (size_t i = 0; i < nb; i++) {
      ck_assert_msg(!strstr(bodies[i], SECRET), "pool %zu body %zu holds the shared secret", p, i);
      ck_assert_msg(!strstr(bodies[i], CLI_PW), "pool %zu body %zu holds the CLI password", p, i);
      ck_assert_msg(!strstr(bodies[i], "static-auth-secret"), "pool %zu body %zu holds a config", p, i);
      ck_assert_msg(!strstr(bodies[i], "cli-password"), "pool %zu body %zu holds a config", p, i);
      tf_free(bodies[i]);
    }
    /* the Secret holds each relay's config, exactly */
    for (size_t i = 0; i < tf_reconcile_relay_count(f.rec); i++) {
      const char *config = tf_reconcile_relay_config(f.rec, i);
      if (!config) continue;
      char key[96];
      snprintf(key, sizeof(key), "\"%s.conf\"", tf_reconcile_relay_name(f.rec, i));
      char *dec = decoded_value(secret, key);
      ck_assert_str_eq(dec, config);
      ck_assert_ptr_nonnull(strstr(dec, SECRET));
      free(dec);
    }
    ck_assert_ptr_null(strstr(secret, SECRET));
    tf_secret_free(secret);
    tf_free(st);
    fx_free(&f);
  }
}
END_TEST

START_TEST(test_manifest__secret_keeps_a_leaving_relays_key)
{
  /* an observed relay on an address the inventory no longer has: it drains */
  const char *gone_uri = "turn:203.0.113.99:443?transport=udp";
  tf_relay_observation gone = TF_RELAY_OBSERVATION_INIT;
  gone.name = "edge-relay-zzzzz";
  gone.identity = "203.0.113.99/49152-49200";
  gone.cli_port = 47709;
  gone.running = 1;
  gone.started_ms = T0 - 60000;
  gone.allocations = 1;
  gone.uris = &gone_uri;
  gone.uri_count = 1;
  fx f = fx_new(host_pool, host_nodes, &gone);
  size_t leaving = tf_reconcile_relay_count(f.rec);
  for (size_t i = 0; i < tf_reconcile_relay_count(f.rec); i++)
    if (!strcmp(tf_reconcile_relay_name(f.rec, i), gone.name)) leaving = i;
  ck_assert_uint_lt(leaving, tf_reconcile_relay_count(f.rec));
  ck_assert(!(tf_reconcile_relay_flags(f.rec, leaving) & TF_RELAY_PLANNED));
  tf_manifest_options o = opts();
  char *pod = NULL;
  ck_assert_int_eq(tf_manifest_relay_pod(&pod, f.pool, f.rec, leaving, &o), TF_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "edge-relay-zzzzz: not planned"));
  ck_assert_int_eq(tf_manifest_relay_pod(&pod, f.pool, f.rec, 99, &o), TF_ENOTFOUND);

  const char observed[] = "{\"data\":{\"edge-relay-zzzzz.conf\":\"b2xkLWNvbmZpZw==\",\"edge-relay-qqqqq.conf\":\"eA==\"}}";
  char *secret = NULL;
  TF_OK_OR_FAIL(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, observed, strlen(observed), &o));
  ck_assert_ptr_nonnull(strstr(secret, "\"edge-relay-zzzzz.conf\":\t\"b2xkLWNvbmZpZw==\""));
  ck_assert_ptr_null(strstr(secret, "edge-relay-qqqqq")); /* neither planned nor leaving: dropped */
  tf_secret_free(secret);
  TF_OK_OR_FAIL(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, NULL, 0, &o));
  ck_assert_ptr_null(strstr(secret, "edge-relay-zzzzz"));
  tf_secret_free(secret);
  ck_assert_int_eq(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, "{\"data\":[]}", 11, &o), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "observed.data"));
  ck_assert_int_eq(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, "{\"data\":", 8, &o), TF_EPROTO);

  /* the leaving relay is not in the URIs */
  char *cm = NULL;
  TF_OK_OR_FAIL(tf_manifest_turn_uris(&cm, f.pool, f.rec, &o));
  ck_assert_ptr_null(strstr(cm, "203.0.113.99"));
  ck_assert_ptr_nonnull(strstr(cm, "203.0.113.7"));
  tf_free(cm);
  fx_free(&f);
}
END_TEST

/* The pool's metrics token: in the relay-config Secret (base64) when given, kept as observed when not; the
 * Pod mounts that key for its agent alone and passes the file, never the token, in argv; a malformed token
 * is refused without being shown. */
START_TEST(test_manifest__metrics_token_in_the_secret_and_mounted_for_the_agent_only)
{
  static const char token[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  fx f = fx_new(host_pool, host_nodes, NULL);
  tf_manifest_options o = opts();
  o.metrics_token = token;
  char *secret = NULL;
  TF_OK_OR_FAIL(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, NULL, 0, &o));
  cJSON *doc = cJSON_Parse(secret);
  const char *enc = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "data"), "metrics-token"));
  ck_assert_ptr_nonnull(enc);
  ck_assert_ptr_null(strstr(secret, token)); /* base64, as every data value */
  char observed[512], kept[128];
  snprintf(observed, sizeof(observed), "{\"data\":{\"metrics-token\":\"%s\"}}", enc);
  snprintf(kept, sizeof(kept), "%s", enc);
  cJSON_Delete(doc);
  tf_secret_free(secret);
  /* without a token given, the observed key is kept, byte for byte */
  tf_manifest_options plain = opts();
  TF_OK_OR_FAIL(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, observed, strlen(observed), &plain));
  doc = cJSON_Parse(secret);
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "data"), "metrics-token")), kept);
  cJSON_Delete(doc);
  tf_secret_free(secret);

  char *pod = NULL;
  TF_OK_OR_FAIL(tf_manifest_relay_pod(&pod, f.pool, f.rec, planned(f.rec, 0), &o));
  ck_assert_ptr_null(strstr(pod, token));
  doc = cJSON_Parse(pod);
  const cJSON *c, *m, *v;
  int agent_mounts = 0, coturn_mounts = 0, volumes = 0, flag = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "spec"), "containers"))
  {
    int agent = strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")), "agent") == 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(c, "volumeMounts"))
    if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "name")), "metrics-token") == 0) {
      char want[128];
      snprintf(want, sizeof(want), "%s/metrics-token", cJSON_GetStringValue(cJSON_GetObjectItem(m, "mountPath")));
      ck_assert_str_eq(want, TF_MANIFEST_METRICS_TOKEN_PATH);
      ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(m, "readOnly")));
      agent ? agent_mounts++ : coturn_mounts++;
    }
    const cJSON *arg, *prev = NULL;
    cJSON_ArrayForEach(arg, cJSON_GetObjectItem(c, "command"))
    {
      if (prev && strcmp(cJSON_GetStringValue(prev), "--metrics-token-file") == 0 &&
          strcmp(cJSON_GetStringValue(arg), TF_MANIFEST_METRICS_TOKEN_PATH) == 0)
        flag += agent;
      prev = arg;
    }
  }
  cJSON_ArrayForEach(v, cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "spec"), "volumes"))
  {
    if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(v, "name")), "metrics-token") != 0) continue;
    const cJSON *sv = cJSON_GetObjectItem(v, "secret");
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(sv, "secretName")), "edge-relay-config");
    ck_assert_int_eq(cJSON_GetObjectItem(sv, "defaultMode")->valueint, 0400);
    const cJSON *item = cJSON_GetArrayItem(cJSON_GetObjectItem(sv, "items"), 0);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(item, "key")), TF_MANIFEST_METRICS_TOKEN_KEY);
    volumes++;
  }
  ck_assert_int_eq(agent_mounts, 1);
  ck_assert_int_eq(coturn_mounts, 0);
  ck_assert_int_eq(volumes, 1);
  ck_assert_int_eq(flag, 1);
  cJSON_Delete(doc);
  tf_free(pod);
  /* without a token: no flag, no mount (the agent's /metrics is open) */
  pod = pod_of(&f, 0);
  ck_assert_ptr_null(strstr(pod, "metrics-token"));
  tf_free(pod);
  /* malformed: refused, the value not in the message */
  o.metrics_token = "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef";
  ck_assert_int_eq(tf_manifest_relay_config_secret(&secret, f.pool, f.rec, NULL, 0, &o), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "options.metrics_token"));
  ck_assert_ptr_null(strstr(tf_error_last()->message, "0123"));
  o.metrics_token = "abc";
  ck_assert_int_eq(tf_manifest_relay_pod(&pod, f.pool, f.rec, planned(f.rec, 0), &o), TF_EINVALID);
  fx_free(&f);
}
END_TEST

static int matches(const char *desired, const char *observed, char **path)
{
  int m = -1;
  TF_OK_OR_FAIL(tf_manifest_matches(&m, path, desired, strlen(desired), observed, strlen(observed)));
  return m;
}

/* @p s with the first @p from replaced by @p to (malloc'd). */
static char *replaced(const char *s, const char *from, const char *to)
{
  const char *at = strstr(s, from);
  ck_assert_msg(at != NULL, "no \"%s\" to replace", from);
  char *r = NULL;
  ck_assert_int_ge(asprintf(&r, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from)), 0);
  return r;
}

START_TEST(test_manifest__matches_owned_fields_only)
{
  fx f = fx_new(host_pool, host_nodes, NULL);
  char *pod = pod_of(&f, 0);
  char *path = NULL;
  ck_assert_int_eq(matches(pod, pod, &path), 1);
  ck_assert_ptr_null(path);
  /* what the API server adds: uid, resourceVersion, defaults, status, a label someone else set */
  char *served = replaced(pod, "\"metadata\":\t{",
                          "\"metadata\":\t{\"uid\":\"u1\",\"resourceVersion\":\"42\",\"creationTimestamp\":\"2024-05-01T12:00:00Z\",");
  char *s2 = replaced(served, "\"labels\":\t{", "\"labels\":\t{\"team\":\"media\",");
  char *s3 = replaced(s2, "\"name\":\t\"coturn\",", "\"name\":\t\"coturn\",\"terminationMessagePath\":\"/dev/termination-log\",\"imagePullPolicy\":\"IfNotPresent\",");
  char *s4 = replaced(s3, "\"spec\":\t{", "\"status\":{\"phase\":\"Running\"},\"spec\":\t{\"schedulerName\":\"default-scheduler\",");
  ck_assert_int_eq(matches(pod, s4, &path), 1);
  /* an item of a list (an informer's cache) has no apiVersion or kind: the type is not content */
  char *untyped = replaced(s4, "\"apiVersion\":\t\"v1\",", "");
  char *untyped2 = replaced(untyped, "\"kind\":\t\"Pod\",", "");
  ck_assert_ptr_null(strstr(untyped2, "\"kind\":\t\"Pod\""));
  ck_assert_int_eq(matches(pod, untyped2, &path), 1);
  free(untyped);
  free(untyped2);
  /* an owned field changed */
  char *other = replaced(s4, "coturn/coturn:4.18.0-r0", "coturn/coturn:4.17.1");
  ck_assert_int_eq(matches(pod, other, &path), 0);
  ck_assert_str_eq(path, "spec.containers[0].image");
  tf_free(path);
  char *hash = replaced(s4, "\"turnfleet.hzmi.dev/config-hash\":\t\"", "\"turnfleet.hzmi.dev/config-hash\":\t\"0");
  ck_assert_int_eq(matches(pod, hash, &path), 0);
  ck_assert_str_eq(path, "metadata.annotations.turnfleet.hzmi.dev/config-hash");
  tf_free(path);
  /* a ConfigMap with a key nobody asked for, or one missing */
  tf_manifest_options o = opts();
  char *cm = NULL;
  TF_OK_OR_FAIL(tf_manifest_turn_uris(&cm, f.pool, f.rec, &o));
  char *extra = replaced(cm, "\"data\":\t{", "\"data\":\t{\"stale\":\"x\",");
  ck_assert_int_eq(matches(cm, extra, &path), 0);
  ck_assert_str_eq(path, "data.stale");
  tf_free(path);
  char *missing = replaced(cm, "\"uris\":", "\"urls\":");
  ck_assert_int_eq(matches(cm, missing, &path), 0);
  ck_assert_str_eq(path, "data.uris");
  tf_free(path);
  free(missing);
  /* numbers compare by value, arrays by length */
  ck_assert_int_eq(matches("{\"a\":[1,2]}", "{\"a\":[1.0,2]}", NULL), 1);
  ck_assert_int_eq(matches("{\"a\":[1,2]}", "{\"a\":[1,2,3]}", &path), 0);
  ck_assert_str_eq(path, "a");
  tf_free(path);
  int m = 5;
  ck_assert_int_eq(tf_manifest_matches(&m, NULL, "{", 1, "{}", 2), TF_EPROTO);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "desired"));
  ck_assert_int_eq(tf_manifest_matches(&m, NULL, "{}", 2, "[", 1), TF_EPROTO);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "observed"));
  free(served);
  free(s2);
  free(s3);
  free(s4);
  free(other);
  free(hash);
  free(extra);
  tf_free(cm);
  tf_free(pod);
  fx_free(&f);
}
END_TEST

#define EXPECT_FIELD(call, code, field)                                                                  \
  do {                                                                                                   \
    ck_assert_int_eq((call), (code));                                                                    \
    ck_assert_msg(strstr(tf_error_last()->message, field) != NULL, "\"%s\" does not name %s",            \
                  tf_error_last()->message, field);                                                      \
  } while (0)

START_TEST(test_manifest__bad_input_is_named)
{
  fx f = fx_new(host_pool, host_nodes, NULL);
  size_t r = planned(f.rec, 0);
  char *out = NULL;
  tf_manifest_options o = opts();
  o.pool_uid = NULL;
  EXPECT_FIELD(tf_manifest_relay_pod(&out, f.pool, f.rec, r, &o), TF_EINVALID, "options.pool_uid");
  o.pool_uid = "bad uid\"";
  EXPECT_FIELD(tf_manifest_turn_uris(&out, f.pool, f.rec, &o), TF_EINVALID, "options.pool_uid");
  o = opts();
  o.agent_image = NULL;
  EXPECT_FIELD(tf_manifest_relay_pod(&out, f.pool, f.rec, r, &o), TF_EINVALID, "options.agent_image");
  o = opts();
  o.agent_port = 49160;
  EXPECT_FIELD(tf_manifest_relay_pod(&out, f.pool, f.rec, r, &o), TF_EINVALID, "options.agent_port");
  o.agent_port = 443;
  EXPECT_FIELD(tf_manifest_relay_pod(&out, f.pool, f.rec, r, &o), TF_EINVALID, "spec.listeners[0].port");
  o = opts();
  o.state_dir = "relative";
  EXPECT_FIELD(tf_manifest_relay_pod(&out, f.pool, f.rec, r, &o), TF_EINVALID, "options.state_dir");
  o = opts();
  o.version = 0;
  EXPECT_FIELD(tf_manifest_relay_pod(&out, f.pool, f.rec, r, &o), TF_EINVALID, "options.version");
  EXPECT_FIELD(tf_manifest_relay_pod(&out, f.pool, f.rec, r, NULL), TF_EINVALID, "options");
  ck_assert_int_eq(tf_manifest_options_init(&o, 9), TF_EINVALID);

  o = opts();
  tf_manifest_event e = TF_MANIFEST_EVENT_INIT;
  e.reason = "ScaleUp";
  e.message = "m";
  e.first_time = "2024-05-01T12:00:00Z";
  e.type = "Info";
  EXPECT_FIELD(tf_manifest_event_body(&out, f.pool, &e, &o), TF_EINVALID, "event.type");
  e.type = "Warning";
  e.reason = "scale down";
  EXPECT_FIELD(tf_manifest_event_body(&out, f.pool, &e, &o), TF_EINVALID, "event.reason");
  e.reason = "ScaleDown";
  e.count = 0;
  EXPECT_FIELD(tf_manifest_event_body(&out, f.pool, &e, &o), TF_EINVALID, "event.count");
  e.count = 1;
  e.first_time = "2024-05-01 12:00:00";
  EXPECT_FIELD(tf_manifest_event_body(&out, f.pool, &e, &o), TF_EINVALID, "event.first_time");
  e.first_time = "2024-05-01T12:00:00Z";
  e.last_time = "yesterday";
  EXPECT_FIELD(tf_manifest_event_body(&out, f.pool, &e, &o), TF_EINVALID, "event.last_time");
  e.last_time = NULL;
  e.message = NULL;
  EXPECT_FIELD(tf_manifest_event_body(&out, f.pool, &e, &o), TF_EINVALID, "event.message");

  EXPECT_FIELD(tf_manifest_status(&out, f.pool, "{\"relays\":{},\"conditions\":[]}", 29, 1), TF_EINVALID,
               "status.relays");
  EXPECT_FIELD(tf_manifest_status(&out, f.pool, "{\"relays\":[{}],\"conditions\":[]}", 31, 1), TF_EINVALID,
               "status.relays[0].name");
  EXPECT_FIELD(tf_manifest_status(&out, f.pool, "{\"relays\":[],\"conditions\":[1]}", 30, 1), TF_EINVALID,
               "status.conditions[0].type");
  EXPECT_FIELD(tf_manifest_status(&out, f.pool, "{\"relays\":[],\"conditions\":[]}", 29, -1), TF_EINVALID,
               "generation");
  ck_assert_int_eq(tf_manifest_status(&out, f.pool, "{\"relays\":", 10, 1), TF_EPROTO);
  ck_assert_ptr_null(out);

  /* a pool that does not validate is refused with its field */
  tf_pool *bad = tf_test_pool(POOL_HEAD("bad", "media") "  relayPortRange: {start: 50000, end: 40000}\n");
  EXPECT_FIELD(tf_manifest_turn_uris(&out, bad, f.rec, &o), TF_EINVALID, "spec.relayPortRange");
  tf_pool_free(bad);
  fx_free(&f);
}
END_TEST

START_TEST(test_manifest__event_names_are_stable)
{
  fx f = fx_new(host_pool, host_nodes, NULL);
  tf_manifest_options o = opts();
  tf_manifest_event e = TF_MANIFEST_EVENT_INIT;
  e.reason = "DrainStarted";
  e.message = "edge-relay-a drains: scale-down";
  e.first_time = "2024-05-01T12:00:00Z";
  char *a = NULL, *b = NULL, *c = NULL;
  TF_OK_OR_FAIL(tf_manifest_event_body(&a, f.pool, &e, &o));
  e.count = 3;
  e.last_time = "2024-05-01T12:05:00Z";
  TF_OK_OR_FAIL(tf_manifest_event_body(&b, f.pool, &e, &o));
  e.message = "edge-relay-b drains: scale-down";
  TF_OK_OR_FAIL(tf_manifest_event_body(&c, f.pool, &e, &o));
  char na[64], nb[64], nc[64];
  ck_assert_int_eq(sscanf(strstr(a, "\"name\":") + 7, " \"%63[^\"]", na), 1);
  ck_assert_int_eq(sscanf(strstr(b, "\"name\":") + 7, " \"%63[^\"]", nb), 1);
  ck_assert_int_eq(sscanf(strstr(c, "\"name\":") + 7, " \"%63[^\"]", nc), 1);
  ck_assert_str_eq(na, nb);
  ck_assert_str_ne(na, nc);
  ck_assert_int_eq(strncmp(na, "edge.", 5), 0);
  ck_assert_ptr_nonnull(strstr(b, "\"count\":\t3"));
  tf_free(a);
  tf_free(b);
  tf_free(c);
  fx_free(&f);
}
END_TEST

static const char pod_json[] =
  "{\"metadata\":{\"name\":\"edge-relay-mb7l6\",\"namespace\":\"media\",\"uid\":\"u-1\","
  "\"labels\":{\"turnfleet.hzmi.dev/pool\":\"edge\",\"turnfleet.hzmi.dev/relay\":\"edge-relay-mb7l6\"},"
  "\"annotations\":{\"turnfleet.hzmi.dev/relay-address\":\"203.0.113.7\",\"turnfleet.hzmi.dev/port-range\":"
  "\"49152-49200\",\"turnfleet.hzmi.dev/config-hash\":\"abc\"},"
  "\"ownerReferences\":[{\"kind\":\"TURNPool\",\"name\":\"edge\",\"uid\":\"pool-uid\",\"controller\":true}]},"
  "\"spec\":{\"containers\":[{\"name\":\"coturn\"},{\"name\":\"agent\",\"ports\":[{\"name\":\"agent\","
  "\"containerPort\":9701}]}]},"
  "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"},"
  "{\"type\":\"turnfleet.hzmi.dev/allocate-ready\",\"status\":\"False\"}]}}";

START_TEST(test_manifest__reads_a_relay_pod)
{
  tf_adapter__pod p;
  ck_assert_int_eq(tf_adapter__pod_parse(&p, pod_json), 0);
  ck_assert_str_eq(p.name, "edge-relay-mb7l6");
  ck_assert_str_eq(p.uid, "u-1");
  ck_assert_str_eq(p.identity, "203.0.113.7/49152-49200");
  ck_assert_str_eq(p.config_hash, "abc");
  ck_assert_str_eq(p.owner_uid, "pool-uid");
  ck_assert_int_eq(p.agent_port, 9701);
  ck_assert_int_eq(p.gate, 0);
  ck_assert_int_eq(p.gate_index, 1);
  ck_assert_int_eq(p.deleting, 0);
  ck_assert_int_eq(p.finished, 0);
  ck_assert_int_eq(p.started, 1);
  tf_engine_relay_facts f;
  tf_adapter__pod_facts(&f, &p, 0, 1);
  ck_assert_int_eq(f.running, 1);
  ck_assert_int_eq(f.waiting, 0);
  tf_adapter__pod_clear(&p);
  /* Pending (or no phase yet): it exists, but nothing of it runs to be probed */
  char *pending = replaced(pod_json, "\"phase\":\"Running\"", "\"phase\":\"Pending\"");
  ck_assert_int_eq(tf_adapter__pod_parse(&p, pending), 0);
  tf_adapter__pod_facts(&f, &p, 0, 1);
  ck_assert_int_eq(f.running, 1);
  ck_assert_int_eq(f.waiting, 1);
  tf_adapter__pod_clear(&p);
  free(pending);
  /* not a relay pod: no relay label, or no identity annotations, or not JSON */
  ck_assert_int_eq(tf_adapter__pod_parse(&p, "{\"metadata\":{\"name\":\"x\"}}"), -1);
  ck_assert_int_eq(tf_adapter__pod_parse(&p, "{\"metadata\":{\"name\":\"x\",\"labels\":{\"turnfleet.hzmi.dev/relay\":\"x\"}}}"),
                   -1);
  ck_assert_int_eq(tf_adapter__pod_parse(&p, "not json"), -1);
  ck_assert_int_eq(tf_adapter__pod_parse(&p, NULL), -1);
}
END_TEST
START_TEST(test_manifest__gate_patch_only_when_it_changes)
{
  tf_adapter__pod p;
  ck_assert_int_eq(tf_adapter__pod_parse(&p, pod_json), 0);
  int err = 1;
  ck_assert_ptr_null(tf_adapter__gate_patch(&p, 0, NULL, NULL, "2024-05-01T12:00:00Z", &err));
  ck_assert_int_eq(err, 0);
  char *patch = tf_adapter__gate_patch(&p, 1, "AllocateSucceeded", "ok", "2024-05-01T12:00:00Z", &err);
  ck_assert_ptr_nonnull(patch);
  cJSON *ops = cJSON_Parse(patch);
  ck_assert_int_eq(cJSON_GetArraySize(ops), 2);
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ops, 0), "op")), "test");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ops, 0), "path")),
                   "/status/conditions/1/type");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ops, 1), "path")),
                   "/status/conditions/1");
  cJSON *value = cJSON_GetObjectItem(cJSON_GetArrayItem(ops, 1), "value");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(value, "status")), "True");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(value, "lastTransitionTime")), "2024-05-01T12:00:00Z");
  cJSON_Delete(ops);
  free(patch);
  /* no gate condition yet: appended; no conditions at all: the list is made */
  p.gate = -1;
  p.gate_index = -1;
  patch = tf_adapter__gate_patch(&p, 1, NULL, NULL, "t", &err);
  ck_assert_ptr_nonnull(strstr(patch, "\"/status/conditions/-\""));
  free(patch);
  p.has_conditions = 0;
  patch = tf_adapter__gate_patch(&p, 1, NULL, NULL, "t", &err);
  ck_assert_ptr_nonnull(strstr(patch, "\"path\":\"/status/conditions\",\"value\":["));
  free(patch);
  tf_adapter__pod_clear(&p);
}
END_TEST
START_TEST(test_manifest__a_pod_being_deleted_and_its_gate_are_read)
{
  char *text = strdup(pod_json);
  /* deleted at 12:00:00 with a grace of 36 s: deletionTimestamp 12:00:36 */
  const char *at = "\"uid\":\"u-1\",";
  char *json = malloc(strlen(text) + 200);
  char *cut = strstr(text, at) + strlen(at);
  sprintf(json, "%.*s\"deletionTimestamp\":\"2024-05-01T12:00:36Z\",\"deletionGracePeriodSeconds\":36,%s",
          (int)(cut - text), text, cut);
  char *g = strstr(json, "{\"type\":\"turnfleet.hzmi.dev/allocate-ready\",\"status\":\"False\"}");
  ck_assert_ptr_nonnull(g);
  const char gate[] = "{\"type\":\"turnfleet.hzmi.dev/allocate-ready\",\"status\":\"True\",\"reason\":\"RelayFull\","
                      "\"message\":\"m\",\"lastTransitionTime\":\"2024-05-01T11:00:00Z\"}";
  char *json2 = malloc(strlen(json) + sizeof(gate));
  sprintf(json2, "%.*s%s%s", (int)(g - json), json, gate,
          g + strlen("{\"type\":\"turnfleet.hzmi.dev/allocate-ready\",\"status\":\"False\"}"));
  tf_adapter__pod p;
  ck_assert_int_eq(tf_adapter__pod_parse(&p, json2), 0);
  ck_assert_int_eq(p.deleting, 1);
  ck_assert_int_eq(p.deleting_since_ms, tf_adapter__time_parse("2024-05-01T12:00:00Z"));
  ck_assert_int_eq(p.gate, 1);
  ck_assert_str_eq(p.gate_reason, "RelayFull");
  ck_assert_str_eq(p.gate_since, "2024-05-01T11:00:00Z");
  /* the same status with another reason is a patch, and keeps the lastTransitionTime */
  int err = 0;
  ck_assert_ptr_null(tf_adapter__gate_patch(&p, 1, "RelayFull", "m", "2024-05-01T13:00:00Z", &err));
  char *patch = tf_adapter__gate_patch(&p, 1, "AllocateSucceeded", "ok", "2024-05-01T13:00:00Z", &err);
  ck_assert_ptr_nonnull(patch);
  ck_assert_ptr_nonnull(strstr(patch, "2024-05-01T11:00:00Z"));
  free(patch);
  tf_adapter__pod_clear(&p);
  free(json2);
  free(json);
  free(text);
}
END_TEST

/* The pod the builder makes is the pod the parser reads: one contract for its labels and annotations. */
START_TEST(test_manifest__the_built_pod_reads_back)
{
  const char *pools[] = {host_pool, podip_pool};
  const char *nodes[] = {host_nodes, podip_nodes};
  for (size_t k = 0; k < 2; k++) {
    fx f = fx_new(pools[k], nodes[k], NULL);
    size_t i = planned(f.rec, 0);
    char *pod = pod_of(&f, 0);
    tf_adapter__pod p;
    ck_assert_int_eq(tf_adapter__pod_parse(&p, pod), 0);
    const tf_relay *r = tf_plan_find(tf_reconcile_plan(f.rec), tf_reconcile_relay_name(f.rec, i));
    ck_assert_str_eq(p.name, tf_reconcile_relay_name(f.rec, i));
    ck_assert_str_eq(p.relay, p.name);
    ck_assert_str_eq(p.identity, tf_relay_identity(r));
    ck_assert_str_eq(p.config_hash, tf_reconcile_relay_config_hash(f.rec, i));
    ck_assert_str_eq(p.owner_uid, UID);
    ck_assert_str_eq(p.node, tf_relay_node(r));
    ck_assert_str_eq(p.ns, tf_pool_namespace(f.pool));
    ck_assert_uint_eq(p.cli_port, tf_reconcile_relay_cli_port(f.rec, i));
    ck_assert_uint_ne(p.cli_port, 0);
    ck_assert_int_eq(p.host_network, k == 0);
    ck_assert_int_eq(p.gate, -1);
    ck_assert_int_eq(p.deleting, 0);
    tf_adapter__pod_clear(&p);
    tf_free(pod);
    fx_free(&f);
  }
}
END_TEST

Suite *tf_test_manifest_suite(void)
{
  Suite *s = suite_create("manifest");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_manifest__pod_hostnetwork_with_a_port_below_1024);
  tcase_add_test(tc, test_manifest__pod_external_ip_pool_has_no_extra_capability);
  tcase_add_test(tc, test_manifest__pod_podip_asks_multus_for_the_address);
  tcase_add_test(tc, test_manifest__pod_mounts_the_tls_secret_beside_the_config);
  tcase_add_test(tc, test_manifest__pod_partitioned_slices_get_their_own_agent_port);
  tcase_add_test(tc, test_manifest__pod_dualstack_annotates_both_addresses);
  tcase_add_test(tc, test_manifest__secret_configmap_status_event);
  tcase_add_test(tc, test_manifest__no_secret_outside_the_secret);
  tcase_add_test(tc, test_manifest__secret_keeps_a_leaving_relays_key);
  tcase_add_test(tc, test_manifest__metrics_token_in_the_secret_and_mounted_for_the_agent_only);
  tcase_add_test(tc, test_manifest__matches_owned_fields_only);
  tcase_add_test(tc, test_manifest__bad_input_is_named);
  tcase_add_test(tc, test_manifest__event_names_are_stable);
  tcase_add_test(tc, test_manifest__reads_a_relay_pod);
  tcase_add_test(tc, test_manifest__gate_patch_only_when_it_changes);
  tcase_add_test(tc, test_manifest__a_pod_being_deleted_and_its_gate_are_read);
  tcase_add_test(tc, test_manifest__the_built_pod_reads_back);
  suite_add_tcase(s, tc);
  return s;
}
