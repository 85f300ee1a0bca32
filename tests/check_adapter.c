/* adapter: the Kubernetes adapter's object helpers (adapter_objects.c): the
 * steady status, the refused status, the finalizer, what to write and the one
 * retry after a 409 (against the API stand-in), the expectations, the CLI
 * port slots and their collisions; which pools a cache change queues, the
 * write gate and the writes' counters. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "adapter_internal.h"
#include "tf_kube_test.h"
#include "tf_test.h"




/* A condition that turns bad is one Warning Event, named by its reason; the same status again, a pool
 * only starting, or a good condition, none. */
START_TEST(test_adapter__conditions_turning_bad_are_named_once)
{
  const char was[] = "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"RelaysNotReady\"},"
                     "{\"type\":\"AddressConflict\",\"status\":\"False\",\"reason\":\"NoConflict\"},"
                     "{\"type\":\"CapacityPressure\",\"status\":\"True\",\"reason\":\"PortsNearlyExhausted\"}]}}";
  const char now[] = "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"RelaysNotReady\","
                     "\"message\":\"1/2\"},{\"type\":\"AddressConflict\",\"status\":\"True\",\"reason\":\"UnusableAddress\","
                     "\"message\":\"node n: 0.0.0.0 is refused\"},{\"type\":\"CapacityPressure\",\"status\":\"True\","
                     "\"reason\":\"PortsNearlyExhausted\",\"message\":\"r: 9/10\"},{\"type\":\"ProbeSucceeded\","
                     "\"status\":\"True\",\"reason\":\"ProbesSucceeded\"}]}}";
  char *t = tf_adapter__condition_troubles(now, was);
  ck_assert_str_eq(t, "[{\"reason\":\"UnusableAddress\",\"message\":\"AddressConflict: node n: 0.0.0.0 is refused\"}]");
  free(t);
  /* written again over itself: nothing new */
  t = tf_adapter__condition_troubles(now, now);
  ck_assert_str_eq(t, "[]");
  free(t);
  /* a first status (nothing observed): every bad one but the starting pool */
  t = tf_adapter__condition_troubles(now, NULL);
  ck_assert_str_eq(t, "[{\"reason\":\"UnusableAddress\",\"message\":\"AddressConflict: node n: 0.0.0.0 is refused\"},"
                      "{\"reason\":\"PortsNearlyExhausted\",\"message\":\"CapacityPressure: r: 9/10\"}]");
  free(t);
  ck_assert_ptr_null(tf_adapter__condition_troubles("{", was));
  /* a ready pool whose relay cannot be counted: Ready turns False with RelaysUncounted, one Event */
  const char counted[] = "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                         "\"reason\":\"AllRelaysReady\"}]}}";
  const char uncounted[] = "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
                           "\"reason\":\"RelaysUncounted\",\"message\":\"1/1 relays ready; 1 uncounted (r)\"}]}}";
  t = tf_adapter__condition_troubles(uncounted, counted);
  ck_assert_str_eq(t, "[{\"reason\":\"RelaysUncounted\",\"message\":\"Ready: 1/1 relays ready; 1 uncounted (r)\"}]");
  free(t);
}
END_TEST

START_TEST(test_adapter__status_keeps_the_probe_time_while_the_outcome_holds)
{
  const char seen[] = "{\"status\":{\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T1\",\"ok\":true,"
                      "\"errorCode\":0,\"message\":\"\"}},{\"name\":\"b\",\"lastProbe\":{\"time\":\"T1\",\"ok\":true,"
                      "\"errorCode\":0,\"message\":\"\"}}]}}";
  const char want[] = "{\"status\":{\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T2\",\"ok\":true,"
                      "\"errorCode\":0,\"message\":\"\"}},{\"name\":\"b\",\"lastProbe\":{\"time\":\"T2\",\"ok\":false,"
                      "\"errorCode\":508,\"message\":\"full\"}},{\"name\":\"c\",\"lastProbe\":null}]}}";
  char *out = tf_adapter__status_stable(want, seen);
  ck_assert_ptr_nonnull(out);
  cJSON *root = cJSON_Parse(out);
  cJSON *st = cJSON_GetObjectItem(root, "status");
  cJSON *relays = cJSON_GetObjectItem(st, "relays");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(relays, 0),
                                                                                "lastProbe"), "time")), "T1");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(relays, 1),
                                                                                "lastProbe"), "time")), "T2");
  cJSON_Delete(root);
  free(out);
  ck_assert_ptr_null(tf_adapter__status_stable("not json", seen));
}
END_TEST

START_TEST(test_adapter__a_failure_keeps_its_time_and_says_the_current_error)
{
  /* failing since T1 with a start-up message; failing still, otherwise: the time stays, the message is today's */
  const char seen[] = "{\"status\":{\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T1\",\"ok\":false,"
                      "\"errorCode\":0,\"message\":\"connection refused\"}}]}}";
  const char want[] = "{\"status\":{\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T2\",\"ok\":false,"
                      "\"errorCode\":0,\"message\":\"timed out after 3000 ms\"}}]}}";
  char *out = tf_adapter__status_stable(want, seen);
  cJSON *root = cJSON_Parse(out);
  cJSON *lp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "status"), "relays"), 0),
                                  "lastProbe");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(lp, "time")), "T1");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(lp, "message")), "timed out after 3000 ms");
  cJSON_Delete(root);
  free(out);
}
END_TEST


START_TEST(test_adapter__times_parse_as_rfc3339)
{
  ck_assert_int_eq(tf_adapter__time_parse("1970-01-01T00:00:01Z"), 1000);
  ck_assert_int_eq(tf_adapter__time_parse("1970-01-01T00:00:01.25Z"), 1250);
  ck_assert_int_eq(tf_adapter__time_parse("1970-01-01T01:00:00+01:00"), 0);
  ck_assert_int_eq(tf_adapter__time_parse("2024-05-01T12:00:00Z"), 1714564800000LL);
  ck_assert_int_eq(tf_adapter__time_parse("2024-05-01 12:00:00Z"), -1);
  ck_assert_int_eq(tf_adapter__time_parse("2024-13-01T12:00:00Z"), -1);
  ck_assert_int_eq(tf_adapter__time_parse("2024-05-01T12:00:00"), -1);
  ck_assert_int_eq(tf_adapter__time_parse("2024-05-01T12:00:00.Z"), -1);
  ck_assert_int_eq(tf_adapter__time_parse(NULL), -1);
}
END_TEST

START_TEST(test_adapter__a_refused_pool_keeps_its_transition_time)
{
  const char seen[] = "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"InvalidSpec\","
                      "\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"}]}}";
  char *out = tf_adapter__refused_status(seen, 4, "InvalidSpec", "spec.x: bad", "2024-05-01T12:00:00Z");
  ck_assert_ptr_nonnull(strstr(out, "2024-01-01T00:00:00Z"));
  ck_assert_ptr_nonnull(strstr(out, "\"observedGeneration\":\t4"));
  free(out);
  out = tf_adapter__refused_status(seen, 4, "SecretMissing", "spec.auth.secretRef: no key", "2024-05-01T12:00:00Z");
  ck_assert_ptr_nonnull(strstr(out, "2024-05-01T12:00:00Z"));
  ck_assert_ptr_null(strstr(out, "2024-01-01T00:00:00Z"));
  free(out);
}
END_TEST

/* The drain finalizer: added once, removed once, other finalizers kept, the status never in the PUT. */
START_TEST(test_adapter__the_drain_finalizer_is_added_and_removed_once)
{
  const char *fin = "turnfleet.hzmi.dev/drain";
  const char pool[] = "{\"metadata\":{\"name\":\"edge\",\"resourceVersion\":\"7\"},\"spec\":{},\"status\":{\"x\":1}}";
  int err = 1;
  char *with = tf_adapter__with_finalizer(pool, fin, 1, &err);
  ck_assert_int_eq(err, 0);
  ck_assert_str_eq(with, "{\"metadata\":{\"name\":\"edge\",\"resourceVersion\":\"7\",\"finalizers\":"
                         "[\"turnfleet.hzmi.dev/drain\"]},\"spec\":{}}");
  ck_assert_ptr_null(tf_adapter__with_finalizer(with, fin, 1, &err));
  ck_assert_int_eq(err, 0);
  const char two[] = "{\"metadata\":{\"finalizers\":[\"a/b\",\"turnfleet.hzmi.dev/drain\"],"
                     "\"deletionTimestamp\":\"2026-12-03T06:00:00Z\"}}";
  char *without = tf_adapter__with_finalizer(two, fin, 0, &err);
  ck_assert_str_eq(without, "{\"metadata\":{\"finalizers\":[\"a/b\"],\"deletionTimestamp\":\"2026-12-03T06:00:00Z\"}}");
  ck_assert_ptr_null(tf_adapter__with_finalizer(pool, fin, 0, &err));
  ck_assert_int_eq(err, 0);
  ck_assert_ptr_null(tf_adapter__with_finalizer("{\"metadata\":{\"finalizers\":3}}", fin, 1, &err));
  ck_assert_int_eq(err, 1);
  ck_assert_ptr_null(tf_adapter__with_finalizer("not json", fin, 1, &err));
  ck_assert_int_eq(err, 1);
  /* the deletion's time */
  ck_assert_int_eq(tf_adapter__deletion_ms(two), tf_adapter__time_parse("2026-12-03T06:00:00Z"));
  ck_assert_int_eq(tf_adapter__deletion_ms(pool), 0);
  ck_assert_int_eq(tf_adapter__deletion_ms("{\"metadata\":{\"deletionTimestamp\":\"soon\"}}"), 1);
  ck_assert_int_eq(tf_adapter__deletion_ms("{\"metadata\":{\"deletionTimestamp\":null}}"), 0);
  ck_assert_int_eq(tf_adapter__status_says(pool, "x"), 0);
  ck_assert_int_eq(tf_adapter__status_says("{\"status\":{\"stopping\":true}}", "stopping"), 1);
  free(with);
  free(without);
}
END_TEST

/* ReachableFromVantage joins the status: one of its type, the transition time kept while the status holds. */
START_TEST(test_adapter__vantage_condition_in_the_status)
{
  const char body[] = "{\"status\":{\"replicas\":2,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
                      "{\"type\":\"ReachableFromVantage\",\"status\":\"Unknown\"}]}}";
  const char seen[] = "{\"status\":{\"conditions\":[{\"type\":\"ReachableFromVantage\",\"status\":\"True\","
                      "\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"}]}}";
  char *out = tf_adapter__with_condition(body, seen, "ReachableFromVantage", "True", "AllReachable", "3 of 3", "2024-05-01T12:00:00Z");
  ck_assert_ptr_nonnull(out);
  ck_assert_ptr_nonnull(strstr(out, "2024-01-01T00:00:00Z"));
  ck_assert_ptr_nonnull(strstr(out, "\"Ready\""));
  ck_assert_ptr_nonnull(strstr(out, "AllReachable"));
  ck_assert_ptr_null(strstr(out, "Unknown"));               /* replaced, not added */
  ck_assert_ptr_null(strstr(strstr(out, "ReachableFromVantage") + 1, "ReachableFromVantage")); /* once */
  free(out);
  out = tf_adapter__with_condition(body, seen, "ReachableFromVantage", "False", "Unreachable", "turn:x failed", "2024-05-01T12:00:00Z");
  ck_assert_ptr_nonnull(strstr(out, "2024-05-01T12:00:00Z"));
  ck_assert_ptr_null(strstr(out, "2024-01-01T00:00:00Z"));
  free(out);
  ck_assert_ptr_null(tf_adapter__with_condition("{\"no\":1}", NULL, "ReachableFromVantage", "True", "r", "m", "t"));
}
END_TEST

START_TEST(test_adapter__writes_only_what_differs)
{
  const char desired[] = "{\"metadata\":{\"name\":\"c\"},\"data\":{\"k\":\"v\"}}";
  char *update = NULL, *path = NULL;
  ck_assert_int_eq(tf_adapter__diff(&update, &path, desired, NULL), TF_ADAPTER__CREATE);
  ck_assert_int_eq(tf_adapter__diff(&update, &path, desired,
                                   "{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"7\",\"uid\":\"x\"},"
                                   "\"data\":{\"k\":\"v\"}}"),
                   TF_ADAPTER__NONE);
  ck_assert_ptr_null(update);
  ck_assert_int_eq(tf_adapter__diff(&update, &path, desired,
                                   "{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"7\"},\"data\":{\"k\":\"w\"}}"),
                   TF_ADAPTER__UPDATE);
  ck_assert_str_eq(path, "data.k");
  ck_assert_ptr_nonnull(strstr(update, "\"resourceVersion\":\t\"7\""));
  ck_assert_ptr_null(strstr(update, "\"w\""));
  free(update);
  free(path);
  ck_assert_int_eq(tf_adapter__diff(&update, &path, desired, "{"), -1);
}
END_TEST

START_TEST(test_adapter__cli_port_slots)
{
  /* FNV-1a("tfe2e/edge") mod 10 = 9, ("tfe2e/rival") mod 10 = 8 */
  ck_assert_uint_eq(tf_adapter__cli_port_base("tfe2e", "edge", 15800, 10, 10), 15890);
  ck_assert_uint_eq(tf_adapter__cli_port_base("tfe2e", "rival", 15800, 10, 10), 15880);
  ck_assert_uint_eq(tf_adapter__cli_port_base("tfe2e", "edge", 15800, 1, 10), 15800);
  ck_assert_int_eq(tf_adapter__generation("{\"metadata\":{\"generation\":3}}"), 3);
  ck_assert_int_eq(tf_adapter__generation("{}"), 0);
  char *uid = tf_adapter__meta_string("{\"metadata\":{\"uid\":\"u\"}}", "uid");
  ck_assert_str_eq(uid, "u");
  free(uid);
}
END_TEST


/* A status whose relays only changed their order, and whose probes only their times, is no change. */
START_TEST(test_adapter__status_order_and_times_alone_are_no_change)
{
  const char seen[] = "{\"status\":{\"readyRelays\":2,\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T1\","
                      "\"ok\":true,\"errorCode\":0,\"message\":\"\"}},{\"name\":\"b\",\"lastProbe\":{\"time\":\"T1\","
                      "\"ok\":true,\"errorCode\":0,\"message\":\"\"}}]}}";
  const char want[] = "{\"status\":{\"readyRelays\":2,\"relays\":[{\"name\":\"b\",\"lastProbe\":{\"time\":\"T3\","
                      "\"ok\":true,\"errorCode\":0,\"message\":\"\"}},{\"name\":\"a\",\"lastProbe\":{\"time\":\"T2\","
                      "\"ok\":true,\"errorCode\":0,\"message\":\"\"}}]}}";
  char *out = tf_adapter__status_stable(want, seen);
  ck_assert_ptr_nonnull(out);
  int matches = 0;
  TF_OK_OR_FAIL(tf_manifest_matches(&matches, NULL, out, strlen(out), seen, strlen(seen)));
  ck_assert_int_eq(matches, 1);
  free(out);
  /* a changed count is a change */
  const char fewer[] = "{\"status\":{\"readyRelays\":1,\"relays\":[{\"name\":\"b\",\"lastProbe\":{\"time\":\"T3\","
                       "\"ok\":true,\"errorCode\":0,\"message\":\"\"}},{\"name\":\"a\",\"lastProbe\":{\"time\":\"T2\","
                       "\"ok\":true,\"errorCode\":0,\"message\":\"\"}}]}}";
  out = tf_adapter__status_stable(fewer, seen);
  char *path = NULL;
  TF_OK_OR_FAIL(tf_manifest_matches(&matches, &path, out, strlen(out), seen, strlen(seen)));
  ck_assert_int_eq(matches, 0);
  ck_assert_str_eq(path, "status.readyRelays");
  tf_free(path);
  free(out);
}
END_TEST

/* Expectations on a synthetic clock: a create is expected until its pod is seen, a delete until the pod is
 * seen going or gone; each lapses after its TTL, when the cache is believed. */
START_TEST(test_adapter__expectations)
{
  tf_adapter__expect *e = tf_adapter__expect_new(1000);
  ck_assert_ptr_nonnull(e);
  ck_assert_ptr_null(tf_adapter__expect_creating(e, "r1", 0));
  ck_assert_int_eq(tf_adapter__expect_create(e, "r1", "u1", 0), 0);
  /* the cache shows no pod yet: still expected (no second create) */
  tf_adapter__expect_observe(e, "r1", NULL, 0, 100);
  ck_assert_str_eq(tf_adapter__expect_creating(e, "r1", 100), "u1");
  ck_assert_ptr_null(tf_adapter__expect_creating(e, "r2", 100));
  /* another relay's pod seen changes nothing for r1 */
  tf_adapter__expect_observe(e, "r2", "u9", 0, 200);
  ck_assert_str_eq(tf_adapter__expect_creating(e, "r1", 200), "u1");
  /* the old pod of that name, being deleted, is no answer */
  tf_adapter__expect_observe(e, "r1", "u0", 1, 250);
  ck_assert_str_eq(tf_adapter__expect_creating(e, "r1", 250), "u1");
  /* seen: settled */
  tf_adapter__expect_observe(e, "r1", "u1", 0, 300);
  ck_assert_ptr_null(tf_adapter__expect_creating(e, "r1", 300));
  /* a create never seen lapses after the TTL */
  ck_assert_int_eq(tf_adapter__expect_create(e, "r3", "u3", 400), 0);
  ck_assert_str_eq(tf_adapter__expect_creating(e, "r3", 1399), "u3");
  ck_assert_ptr_null(tf_adapter__expect_creating(e, "r3", 1400));

  /* a delete: expected while the cache shows that pod, not deleting */
  ck_assert_int_eq(tf_adapter__expect_delete(e, "r1", "u1", 2000), 0);
  tf_adapter__expect_observe(e, "r1", "u1", 0, 2100);
  ck_assert_int_eq(tf_adapter__expect_deleting(e, "r1", "u1", 2100), 1);
  ck_assert_int_eq(tf_adapter__expect_deleting(e, "r1", "other", 2100), 0); /* another pod of that name: not */
  tf_adapter__expect_observe(e, "r1", "u1", 1, 2200);                       /* its deletionTimestamp seen */
  ck_assert_int_eq(tf_adapter__expect_deleting(e, "r1", "u1", 2200), 0);
  ck_assert_int_eq(tf_adapter__expect_delete(e, "r1", "u1", 3000), 0);
  tf_adapter__expect_observe(e, "r1", NULL, 0, 3100); /* gone */
  ck_assert_int_eq(tf_adapter__expect_deleting(e, "r1", "u1", 3100), 0);
  ck_assert_int_eq(tf_adapter__expect_delete(e, "r1", "u1", 4000), 0);
  ck_assert_int_eq(tf_adapter__expect_deleting(e, "r1", "u1", 5000), 0); /* lapsed */
  tf_adapter__expect_free(e);
}
END_TEST

static tf_adapter__pod pod_at(const char *name, const char *owner, const char *node, uint16_t cli, int host)
{
  tf_adapter__pod p;
  memset(&p, 0, sizeof(p));
  p.name = (char *)name;
  p.owner_uid = (char *)owner;
  p.node = (char *)node;
  p.cli_port = cli;
  p.host_network = host;
  return p;
}

/* CLI ports: a pool's slot; two relays on one node with one CLI port (host networking) are a collision,
 * named with both relays and the node; other nodes, pod networks and finished pods are not. */
START_TEST(test_adapter__cli_port_collisions)
{
  tf_adapter__pod pods[6];
  pods[0] = pod_at("edge-a", "pool-1", "n1", 15890, 1);
  pods[1] = pod_at("edge-b", "pool-1", "n2", 15890, 1);  /* another node */
  pods[2] = pod_at("rival-a", "pool-2", "n2", 15891, 1); /* another port */
  pods[3] = pod_at("podip-a", "pool-3", "n1", 15890, 0); /* its own network namespace */
  pods[4] = pod_at("old-a", "pool-4", "n1", 15890, 1);
  pods[4].finished = 1;
  pods[5] = pod_at("rival-b", "pool-2", "n2", 15892, 1);
  char why[256];
  ck_assert_uint_eq(tf_adapter__cli_collisions(pods, 6, "pool-1", why, sizeof(why)), 0);
  ck_assert_str_eq(why, "");
  pods[5].cli_port = 15890; /* now rival-b shares edge-b's node and port */
  ck_assert_uint_eq(tf_adapter__cli_collisions(pods, 6, "pool-1", why, sizeof(why)), 1);
  ck_assert_str_eq(why, "relay edge-b and relay rival-b on node n2 share CLI port 15890");
  ck_assert_uint_eq(tf_adapter__cli_collisions(pods, 6, "pool-2", why, sizeof(why)), 1);
  ck_assert_str_eq(why, "relay rival-b and relay edge-b on node n2 share CLI port 15890");
  /* within a pool: one pair, named once */
  pods[1].node = "n1";
  pods[5].cli_port = 15892;
  ck_assert_uint_eq(tf_adapter__cli_collisions(pods, 6, "pool-1", why, sizeof(why)), 1);
  ck_assert_str_eq(why, "relay edge-a and relay edge-b on node n1 share CLI port 15890");
  /* a short buffer is cut, never overrun */
  char tiny[8];
  ck_assert_uint_eq(tf_adapter__cli_collisions(pods, 6, "pool-1", tiny, sizeof(tiny)), 1);
  ck_assert_uint_eq(strlen(tiny), 7);
}
END_TEST


/* ---- one fact sequence, both runtimes ---- */

#define PT0 100000 /* the synthetic monotonic clock starts here */
#define PWALL 1715000000000LL
#define POOL_UID "pool-uid-1"

typedef struct fake_pod {
  char *json; /* as built by tf_manifest_relay_pod, with the API server's and the kubelet's fields */
  char uid[16];
  int gate, full, deleting, gone; /* full: the gate is True with reason RelayFull, as the adapter patches it */
} fake_pod;

static tf_engine *parity_engine(int replicas)
{
  char text[1024];
  snprintf(text, sizeof(text),
           "metadata: {name: demo, namespace: media}\n"
           "spec:\n"
           "  replicas: %d\n"
           "  dataplane: {coturnVersion: \"4.6.1\"}\n"
           "  relayPortRange: {start: 49152, end: 49159}\n"
           "  auth: {realm: demo.example.com, secretRef: {name: s}}\n"
           "  drainTimeout: 30s\n",
           replicas);
  static const char *secrets[] = {"s3cr3t"};
  tf_coturn_options co = TF_COTURN_OPTIONS_INIT;
  co.secrets = secrets;
  co.secrets_count = 1;
  co.state_dir = "/var/lib/turnfleet";
  co.cli_port = 15890;
  co.cli_password = "clipw";
  tf_engine_options eo = TF_ENGINE_OPTIONS_INIT;
  eo.coturn = &co;
  eo.probe_interval_ms = 1000;
  eo.publish_delay_ms = 500;
  tf_engine *e = NULL;
  TF_OK_OR_FAIL(tf_engine_new(&e, tf_test_pool(text), tf_test_relay_nodes(3), &eo));
  return e;
}

/* What the API server and the kubelet add to a built pod: its uid, phase, the Ready condition (True once
 * the readiness gate is), the gate as the adapter patches it, a deletionTimestamp once deleted. */
static void pod_status(fake_pod *fp, int64_t now)
{
  cJSON *root = cJSON_Parse(fp->json);
  cJSON *md = cJSON_GetObjectItem(root, "metadata");
  cJSON_DeleteItemFromObject(md, "uid");
  cJSON_AddStringToObject(md, "uid", fp->uid);
  if (fp->deleting && !cJSON_GetObjectItem(md, "deletionTimestamp")) {
    char ts[32];
    time_t t = (time_t)((PWALL + now) / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(md, "deletionTimestamp", ts);
    cJSON_AddNumberToObject(md, "deletionGracePeriodSeconds", 0);
  }
  cJSON_DeleteItemFromObject(root, "status");
  cJSON *st = cJSON_AddObjectToObject(root, "status");
  cJSON_AddStringToObject(st, "phase", "Running");
  cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
  cJSON *ready = cJSON_CreateObject();
  cJSON_AddStringToObject(ready, "type", "Ready");
  cJSON_AddStringToObject(ready, "status", fp->gate == 1 && !fp->deleting ? "True" : "False");
  cJSON_AddItemToArray(conds, ready);
  if (fp->gate >= 0) {
    cJSON *g = cJSON_CreateObject();
    cJSON_AddStringToObject(g, "type", TF_MANIFEST_READINESS_GATE);
    cJSON_AddStringToObject(g, "status", fp->gate ? "True" : "False");
    cJSON_AddStringToObject(g, "reason", fp->full ? "RelayFull" : fp->gate ? "AllocateSucceeded" : "AllocateFailed");
    cJSON_AddStringToObject(g, "message", "");
    cJSON_AddStringToObject(g, "lastTransitionTime", "2024-05-01T12:00:00Z");
    cJSON_AddItemToArray(conds, g);
  }
  free(fp->json);
  fp->json = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
}

static size_t rec_at(const tf_reconcile *rec, const char *name)
{
  for (size_t i = 0; i < tf_reconcile_relay_count(rec); i++)
    if (strcmp(tf_reconcile_relay_name(rec, i), name) == 0) return i;
  ck_abort_msg("relay %s not in the reconcile", name);
  return 0;
}

static fake_pod *pod_named(fake_pod *pods, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++) {
    tf_adapter__pod p;
    if (pods[i].gone || tf_adapter__pod_parse(&p, pods[i].json) < 0) continue;
    int same = strcmp(p.name, name) == 0;
    tf_adapter__pod_clear(&p);
    if (same) return &pods[i];
  }
  return NULL;
}

/* How the relays answer the probes of one round: each passes, but @p full (its ports all in use: 508 on the
 * Allocate) and @p failing (no answer); NULL: none. */
typedef struct parity_probes {
  const char *full, *failing;
} parity_probes;

static void parity_probe_done(tf_engine *e, const tf_engine_action *a, const parity_probes *pp, int64_t now)
{
  int full = pp && pp->full && strcmp(a->relay, pp->full) == 0;
  int failing = pp && pp->failing && strcmp(a->relay, pp->failing) == 0;
  TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, !full && !failing, full ? 508 : 0, full,
                                     full ? "Allocation Quota Reached" : failing ? "timed out" : NULL, now));
}

/* The acknowledgements both runtimes give the same actions: started, drained, stopped, probed as @p pp
 * says, counted @p count. The operator's START is a pod built from its own reconcile; its DRAIN a deletion;
 * its STOP done once the pod is gone; its gates follow its engine's relay states. */
static void parity_ack(tf_engine *up, tf_engine *op, fake_pod *pods, size_t *npods, int64_t now,
                       const parity_probes *pp, int64_t count)
{
  ck_assert_uint_eq(tf_engine_action_count(up), tf_engine_action_count(op));
  for (size_t k = 0; k < tf_engine_action_count(up); k++) {
    const tf_engine_action *a = tf_engine_action_at(up, k), *b = tf_engine_action_at(op, k);
    ck_assert_str_eq(tf_engine_action_name(a->kind), tf_engine_action_name(b->kind));
    ck_assert_str_eq(a->relay, b->relay);
    char pid[16];
    snprintf(pid, sizeof(pid), "%zu", 4000 + *npods);
    switch (a->kind) {
    case TF_ENGINE_START:
    case TF_ENGINE_RESTART: {
      TF_OK_OR_FAIL(tf_engine_done(up, a->id, 1, pid, now));
      tf_manifest_options mo = TF_MANIFEST_OPTIONS_INIT;
      mo.pool_uid = POOL_UID;
      mo.agent_image = "registry.test/turnfleet:0.3.0";
      fake_pod *fp = &pods[(*npods)++];
      memset(fp, 0, sizeof(*fp));
      fp->gate = -1;
      snprintf(fp->uid, sizeof(fp->uid), "uid-%zu", *npods);
      char *body = NULL;
      const tf_reconcile *rec = tf_engine_reconcile(op);
      TF_OK_OR_FAIL(tf_manifest_relay_pod(&body, tf_engine_pool(op), rec, rec_at(rec, b->relay), &mo));
      fp->json = strdup(body);
      tf_free(body);
      pod_status(fp, now);
      TF_OK_OR_FAIL(tf_engine_done(op, b->id, 1, fp->uid, now));
      break;
    }
    case TF_ENGINE_DRAIN: {
      TF_OK_OR_FAIL(tf_engine_done(up, a->id, 1, NULL, now));
      fake_pod *fp = pod_named(pods, *npods, b->relay);
      ck_assert_ptr_nonnull(fp);
      fp->deleting = 1;
      pod_status(fp, now);
      TF_OK_OR_FAIL(tf_engine_done(op, b->id, 1, NULL, now));
      break;
    }
    case TF_ENGINE_STOP: {
      TF_OK_OR_FAIL(tf_engine_done(up, a->id, 1, NULL, now));
      fake_pod *fp = pod_named(pods, *npods, b->relay);
      if (fp) fp->gone = 1;
      TF_OK_OR_FAIL(tf_engine_done(op, b->id, 1, NULL, now));
      break;
    }
    case TF_ENGINE_PROBE:
      parity_probe_done(up, a, pp, now);
      parity_probe_done(op, b, pp, now);
      break;
    case TF_ENGINE_COUNT:
      TF_OK_OR_FAIL(tf_engine_count_done(up, a->id, count, now));
      TF_OK_OR_FAIL(tf_engine_count_done(op, b->id, count, now));
      break;
    }
  }
  /* the adapter's gates: True for a ready relay, True with RelayFull for a full one, False after a failed probe */
  for (size_t i = 0; i < tf_engine_relay_count(op); i++) {
    const tf_engine_relay *v = tf_engine_relay_at(op, i);
    fake_pod *fp = pod_named(pods, *npods, v->name);
    if (!fp || fp->deleting || !v->probe_ms) continue;
    int full = v->state == TF_ENGINE_RELAY_FULL;
    int gate = v->state == TF_ENGINE_RELAY_READY || full;
    if (gate != fp->gate || full != fp->full) {
      fp->gate = gate;
      fp->full = full;
      pod_status(fp, now);
    }
  }
}

/* The operator's round: every pod in its cache read back into facts. */
static void parity_observe(tf_engine *op, fake_pod *pods, size_t npods, int64_t now)
{
  for (size_t i = 0; i < npods; i++) {
    if (pods[i].gone) continue; /* its STOP was done when it went, as the adapter does */
    tf_adapter__pod p;
    ck_assert_int_eq(tf_adapter__pod_parse(&p, pods[i].json), 0);
    tf_engine_relay_facts f;
    tf_adapter__pod_facts(&f, &p, PWALL + now, now);
    TF_OK_OR_FAIL(tf_engine_observe(op, &f, now));
    tf_adapter__pod_clear(&p);
  }
}

/* The same relay states and conditions; the operator's URIs are up's (@p same_uris) or among them: it
 * publishes a relay one round later, once the kubelet made its pod Ready after the gate went True (so that
 * turn-uris never lists a pod that is not Ready). */
static void parity_same(const tf_engine *up, const tf_engine *op, const char *when, int same_uris)
{
  ck_assert_uint_eq(tf_engine_relay_count(up), tf_engine_relay_count(op));
  for (size_t i = 0; i < tf_engine_relay_count(up); i++) {
    const tf_engine_relay *a = tf_engine_relay_at(up, i), *b = NULL;
    for (size_t j = 0; j < tf_engine_relay_count(op); j++)
      if (strcmp(tf_engine_relay_at(op, j)->name, a->name) == 0) b = tf_engine_relay_at(op, j);
    ck_assert_msg(b, "%s: relay %s only under up", when, a->name);
    ck_assert_msg(a->state == b->state, "%s: relay %s is %s under up, %s under the operator", when, a->name,
                  tf_engine_relay_state_name(a->state), tf_engine_relay_state_name(b->state));
  }
  const tf_reconcile *ra = tf_engine_reconcile(up), *rb = tf_engine_reconcile(op);
  if (same_uris) ck_assert_msg(tf_reconcile_uri_count(ra) == tf_reconcile_uri_count(rb), "%s: %zu URIs under up, "
                               "%zu under the operator", when, tf_reconcile_uri_count(ra), tf_reconcile_uri_count(rb));
  for (size_t i = 0; i < tf_reconcile_uri_count(rb); i++) {
    int found = 0;
    for (size_t j = 0; j < tf_reconcile_uri_count(ra); j++) found |= strcmp(tf_reconcile_uri(ra, j), tf_reconcile_uri(rb, i)) == 0;
    ck_assert_msg(found, "%s: %s published by the operator only", when, tf_reconcile_uri(rb, i));
  }
  ck_assert_uint_eq(tf_reconcile_condition_count(ra), tf_reconcile_condition_count(rb));
  for (size_t i = 0; i < tf_reconcile_condition_count(ra); i++) {
    const char *ta, *sa, *rsa, *tb, *sb, *rsb;
    TF_OK_OR_FAIL(tf_reconcile_condition(ra, i, &ta, &sa, &rsa, NULL, NULL));
    TF_OK_OR_FAIL(tf_reconcile_condition(rb, i, &tb, &sb, &rsb, NULL, NULL));
    ck_assert_str_eq(ta, tb);
    ck_assert_msg(strcmp(sa, sb) == 0 && strcmp(rsa, rsb) == 0, "%s: %s is %s/%s under up, %s/%s under the operator",
                  when, ta, sa, rsa, sb, rsb);
  }
}

/* One fact sequence through both runtimes: `turnfleet up` acknowledges its processes and probes directly;
 * the operator reads the same facts back from the relay pods it built (tf_manifest_relay_pod, the kubelet's
 * status, tf_adapter__pod_parse, tf_adapter__pod_facts). Start, probe, publish, a full relay and a failing
 * one and their return, scale down with a drain, stop: the same actions (whose Events each runtime reports),
 * relay states, published URIs and conditions at every step. */
START_TEST(test_adapter__both_runtimes_decide_the_same)
{
  tf_engine *up = parity_engine(3), *op = parity_engine(3);
  fake_pod pods[16];
  size_t npods = 0;
  int64_t t = PT0;
  const char *steps[] = {"start", "probe", "ready (the gates go True)", "published", "counted"};
  for (size_t k = 0; k < 5; k++, t += 600) {
    parity_observe(op, pods, npods, t);
    TF_OK_OR_FAIL(tf_engine_step(up, t, PWALL + t));
    TF_OK_OR_FAIL(tf_engine_step(op, t, PWALL + t));
    parity_same(up, op, steps[k], k != 2);
    if (k == 2) { /* up serves its relays at once; the operator's pods are not Ready yet */
      ck_assert_uint_gt(tf_reconcile_uri_count(tf_engine_reconcile(up)), 0);
      ck_assert_uint_eq(tf_reconcile_uri_count(tf_engine_reconcile(op)), 0);
    }
    if (k == 4) {
      /* a new leader: an engine made anew from the pods alone (no probe of its own yet) decides as up does */
      tf_engine *fresh = parity_engine(3);
      parity_observe(fresh, pods, npods, t);
      TF_OK_OR_FAIL(tf_engine_step(fresh, t, PWALL + t));
      parity_same(up, fresh, "a new leader's first step", 1);
      for (size_t i = 0; i < tf_engine_action_count(fresh); i++) /* nothing started, drained or stopped again */
        ck_assert_msg(tf_engine_action_at(fresh, i)->kind == TF_ENGINE_PROBE ||
                      tf_engine_action_at(fresh, i)->kind == TF_ENGINE_COUNT, "a new leader's %s",
                      tf_engine_action_name(tf_engine_action_at(fresh, i)->kind));
      tf_engine_free(fresh);
    }
    parity_ack(up, op, pods, &npods, t, NULL, 0);
  }
  const size_t uris = tf_reconcile_uri_count(tf_engine_reconcile(up)); /* each relay's listeners */
  ck_assert_uint_eq(uris % 3, 0);
  ck_assert_uint_gt(uris, 0);
  /* one relay full (508), then a port frees; then another stops answering, then answers again: the same
   * states (Full is healthy: out of the URIs, CapacityPressure, Ready not lowered; Failing is not), the same
   * conditions, and a new leader that finds the full relay's pod takes it as Full before its own probe */
  char *first = strdup(tf_engine_relay_at(up, 0)->name), *second = strdup(tf_engine_relay_at(up, 1)->name);
  const struct {
    const char *when;
    parity_probes pp;
  } rounds[] = {
    {"full", {first, NULL}},     {"still full", {first, NULL}}, {"a port freed", {NULL, NULL}},
    {"back", {NULL, NULL}},      {"failing", {NULL, second}},   {"still failing", {NULL, second}},
    {"answers again", {NULL, NULL}}, {"published again", {NULL, NULL}},
  };
  int was_full = 0, was_failing = 0;
  for (size_t k = 0; k < sizeof(rounds) / sizeof(rounds[0]); k++, t += 600) {
    parity_observe(op, pods, npods, t);
    TF_OK_OR_FAIL(tf_engine_step(up, t, PWALL + t));
    TF_OK_OR_FAIL(tf_engine_step(op, t, PWALL + t));
    /* the operator publishes a relay coming back one round later (its pod Ready after its gate) */
    parity_same(up, op, rounds[k].when, 0);
    const tf_reconcile *rec = tf_engine_reconcile(up);
    for (size_t i = 0; i < tf_engine_relay_count(up); i++) {
      const tf_engine_relay *v = tf_engine_relay_at(up, i);
      if (v->state == TF_ENGINE_RELAY_FULL) {
        was_full = 1;
        const char *type, *status, *reason;
        for (size_t j = 0; j < tf_reconcile_condition_count(rec); j++) {
          TF_OK_OR_FAIL(tf_reconcile_condition(rec, j, &type, &status, &reason, NULL, NULL));
          if (strcmp(type, "Ready") == 0) ck_assert_msg(strcmp(status, "True") == 0, "%s: Ready %s (%s) for a full relay",
                                                        rounds[k].when, status, reason);
          if (strcmp(type, "CapacityPressure") == 0) ck_assert_str_eq(status, "True");
        }
        ck_assert_uint_eq(tf_reconcile_uri_count(rec), uris / 3 * 2);
      }
      was_failing |= v->state == TF_ENGINE_RELAY_FAILING;
    }
    char *full_now = NULL;
    for (size_t i = 0; i < tf_engine_relay_count(op); i++)
      if (tf_engine_relay_at(op, i)->state == TF_ENGINE_RELAY_FULL) full_now = strdup(tf_engine_relay_at(op, i)->name);
    parity_ack(up, op, pods, &npods, t, &rounds[k].pp, 0);
    if (full_now) { /* its gate says so now (RelayFull): a new leader reads it from the pod */
      tf_engine *fresh = parity_engine(3);
      parity_observe(fresh, pods, npods, t);
      TF_OK_OR_FAIL(tf_engine_step(fresh, t, PWALL + t));
      for (size_t j = 0; j < tf_engine_relay_count(fresh); j++)
        if (strcmp(tf_engine_relay_at(fresh, j)->name, full_now) == 0)
          ck_assert_msg(tf_engine_relay_at(fresh, j)->state == TF_ENGINE_RELAY_FULL, "%s: a new leader takes %s as %s",
                        rounds[k].when, full_now, tf_engine_relay_state_name(tf_engine_relay_at(fresh, j)->state));
      tf_engine_free(fresh);
      free(full_now);
    }
  }
  ck_assert_int_eq(was_full, 1);
  ck_assert_int_eq(was_failing, 1);
  free(first);
  free(second);
  parity_observe(op, pods, npods, t);
  TF_OK_OR_FAIL(tf_engine_step(up, t, PWALL + t));
  TF_OK_OR_FAIL(tf_engine_step(op, t, PWALL + t));
  parity_same(up, op, "every relay back", 1);
  ck_assert_uint_eq(tf_reconcile_uri_count(tf_engine_reconcile(up)), uris);
  parity_ack(up, op, pods, &npods, t, NULL, 0);
  t += 600;
  /* scale down to 2: one relay drains (its URI first, then its pod), then stops */
  char *pool_json = NULL;
  TF_OK_OR_FAIL(tf_pool_to_json(&pool_json, tf_engine_pool(up)));
  char *smaller = strdup(pool_json);
  char *at = strstr(smaller, "\"replicas\":");
  ck_assert_ptr_nonnull(at);
  at[strlen("\"replicas\":")] = '2';
  tf_pool *pa = NULL, *pb = NULL;
  TF_OK_OR_FAIL(tf_pool_parse(&pa, smaller, strlen(smaller), TF_FORMAT_JSON));
  TF_OK_OR_FAIL(tf_pool_parse(&pb, smaller, strlen(smaller), TF_FORMAT_JSON));
  TF_OK_OR_FAIL(tf_engine_set_pool(up, pa));
  TF_OK_OR_FAIL(tf_engine_set_pool(op, pb));
  int drained = 0, stopped = 0;
  for (size_t k = 0; k < 12; k++, t += 600) {
    parity_observe(op, pods, npods, t);
    TF_OK_OR_FAIL(tf_engine_step(up, t, PWALL + t));
    TF_OK_OR_FAIL(tf_engine_step(op, t, PWALL + t));
    parity_same(up, op, "scale-down", 1);
    for (size_t i = 0; i < tf_engine_action_count(up); i++) {
      drained += tf_engine_action_at(up, i)->kind == TF_ENGINE_DRAIN;
      stopped += tf_engine_action_at(up, i)->kind == TF_ENGINE_STOP;
    }
    parity_ack(up, op, pods, &npods, t, NULL, 0);
  }
  ck_assert_int_eq(drained, 1);
  ck_assert_int_eq(stopped, 1);
  ck_assert_uint_eq(tf_reconcile_uri_count(tf_engine_reconcile(up)), uris / 3 * 2);
  for (size_t i = 0; i < npods; i++) free(pods[i].json);
  tf_free(pool_json);
  free(smaller);
  tf_engine_free(up);
  tf_engine_free(op);
}
END_TEST

/* A view learnt from a write stands in for the cache while the cache still shows the resourceVersion it
 * showed then (or still lacks the object); anything else in the cache, and the cache is believed again. */
START_TEST(test_adapter__a_lagging_cache_is_read_through_what_the_writes_learnt)
{
  tf_adapter__views *v = tf_adapter__views_new();
  ck_assert_ptr_nonnull(v);
  const char *r1 = "{\"metadata\":{\"resourceVersion\":\"1\"},\"data\":{\"k\":\"old\"}}";
  const char *r2 = "{\"metadata\":{\"resourceVersion\":\"2\"},\"data\":{\"k\":\"new\"}}";
  const char *r3 = "{\"metadata\":{\"resourceVersion\":\"3\"},\"data\":{\"k\":\"newer\"}}";
  const char *r4 = "{\"metadata\":{\"resourceVersion\":\"4\"},\"data\":{\"k\":\"theirs\"}}";
  /* nothing learnt: the cache */
  ck_assert_ptr_eq(tf_adapter__views_pick(v, "media/demo|cm", r1), r1);
  /* written from r1, answered r2: while the cache shows r1, r2 is the view */
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo|cm", r1, r2, 1000), 0);
  ck_assert_str_eq(tf_adapter__views_pick(v, "media/demo|cm", r1), r2);
  /* written again from that view (a copy of it), answered r3: still against the cache's r1 */
  char *copy = strdup(tf_adapter__views_pick(v, "media/demo|cm", r1));
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo|cm", copy, r3, 1000), 0);
  free(copy);
  ck_assert_str_eq(tf_adapter__views_pick(v, "media/demo|cm", r1), r3);
  /* the cache caught up (r3), or moved past (someone else's r4): the cache, and the view is gone */
  ck_assert_ptr_eq(tf_adapter__views_pick(v, "media/demo|cm", r4), r4);
  ck_assert_ptr_eq(tf_adapter__views_pick(v, "media/demo|cm", r1), r1);
  /* created while the cache lacked it: the view until the cache holds any copy */
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo|new", NULL, r2, 1000), 0);
  ck_assert_str_eq(tf_adapter__views_pick(v, "media/demo|new", NULL), r2);
  ck_assert_ptr_eq(tf_adapter__views_pick(v, "media/demo|new", r2), r2);
  ck_assert_ptr_null(tf_adapter__views_pick(v, "media/demo|new", NULL));
  /* a view found wrong (a conflict) is forgotten; a pool gone forgets its views, not another pool's */
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo|cm", r1, r2, 1000), 0);
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo|cm", r1, NULL, 1000), 0);
  ck_assert_ptr_eq(tf_adapter__views_pick(v, "media/demo|cm", r1), r1);
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo|a", r1, r2, 1000), 0);
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo|b", r1, r2, 1000), 0);
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo2|a", r1, r3, 1000), 0);
  tf_adapter__views_forget(v, "media/demo|");
  ck_assert_ptr_eq(tf_adapter__views_pick(v, "media/demo|a", r1), r1);
  ck_assert_ptr_eq(tf_adapter__views_pick(v, "media/demo|b", r1), r1);
  ck_assert_str_eq(tf_adapter__views_pick(v, "media/demo2|a", r1), r3);
  /* a view older than the caller's limit is forgotten (the cache believed), a younger one kept */
  ck_assert_int_eq(tf_adapter__views_keep(v, "media/demo3|a", r1, r2, 5000), 0);
  tf_adapter__views_expire(v, 2000);
  ck_assert_ptr_eq(tf_adapter__views_pick(v, "media/demo2|a", r1), r1);
  ck_assert_str_eq(tf_adapter__views_pick(v, "media/demo3|a", r1), r2);
  tf_adapter__views_free(v);
  ck_assert_ptr_eq(tf_adapter__views_pick(NULL, "x", r1), r1);
}
END_TEST

/* ---- the wiring's library half: which pools a change concerns, the write gate, the writes' counters ---- */

static char *next_key(tf_workqueue *q)
{
  char *key = NULL;
  if (tf_workqueue_get(q, &key, 0) != 0) return NULL;
  tf_workqueue_done(q, key);
  tf_workqueue_forget(q, key);
  return key;
}

/* A relay pod or a ConfigMap queues the pool of its label in its namespace, a pool itself; what carries no
 * pool label queues nothing; the budget charges only writes made while a pool is reconciled, never Events;
 * a version 1 options struct is filled and read only to its own end. (No server: the caches stay empty.) */
START_TEST(test_adapter__changes_queue_the_pools_they_concern)
{
  tf_kube_options ko = TF_KUBE_OPTIONS_INIT;
  ko.source = TF_KUBE_SOURCE_EXPLICIT;
  ko.server = "https://127.0.15.1:35999"; /* never asked: nothing here starts an informer */
  tf_kube *k = NULL;
  TF_OK_OR_FAIL(tf_kube_new(&k, &ko));
  tf_informer *inf[5] = {NULL};
  static const char *paths[] = {"/apis/turnfleet.hzmi.dev/v1alpha1/turnpools", "/api/v1/pods", "/api/v1/nodes",
                                "/api/v1/secrets", "/api/v1/configmaps"};
  for (size_t i = 0; i < 5; i++) {
    tf_informer_options io = TF_INFORMER_OPTIONS_INIT;
    io.path = paths[i];
    TF_OK_OR_FAIL(tf_informer_new(&inf[i], k, &io));
  }
  tf_workqueue *q = NULL;
  tf_workqueue_options qo = TF_WORKQUEUE_OPTIONS_INIT;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, &qo));
  tf_recorder *rec = NULL;
  TF_OK_OR_FAIL(tf_recorder_new(&rec, k, "turnfleet-operator"));
  tf_adapter_options ao = TF_ADAPTER_OPTIONS_INIT;
  ao.pools = inf[0];
  ao.pods = inf[1];
  ao.nodes = inf[2];
  ao.secrets = inf[3];
  ao.configmaps = inf[4];
  ao.queue = q;
  ao.recorder = rec;
  ao.agent_image = "registry.test/turnfleet:0.3.0";
  ao.budget_writes = 0;
  tf_adapter *a = NULL;
  ck_assert_int_eq(tf_adapter_new(&a, k, &ao), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "options.budget_writes: must be positive");
  /* a version 2 struct has no budget: the defaults, not what lies past its end */
  ao.version = 2;
  TF_OK_OR_FAIL(tf_adapter_new(&a, k, &ao));

  TF_OK_OR_FAIL(tf_adapter_changed(a, TF_ADAPTER_POOLS, TF_INFORMER_UPDATED, "media/demo", "{}"));
  char *key = next_key(q);
  ck_assert_str_eq(key, "media/demo");
  tf_free(key);
  const char *pod = "{\"metadata\":{\"namespace\":\"media\",\"name\":\"demo-relay-bcdfg\","
                    "\"labels\":{\"turnfleet.hzmi.dev/pool\":\"demo\"}}}";
  TF_OK_OR_FAIL(tf_adapter_changed(a, TF_ADAPTER_PODS, TF_INFORMER_UPDATED, "media/demo-relay-bcdfg", pod));
  key = next_key(q);
  ck_assert_str_eq(key, "media/demo");
  tf_free(key);
  TF_OK_OR_FAIL(tf_adapter_changed(a, TF_ADAPTER_CONFIGMAPS, TF_INFORMER_ADDED, "media/demo-vantage", pod));
  key = next_key(q);
  ck_assert_str_eq(key, "media/demo");
  tf_free(key);
  TF_OK_OR_FAIL(tf_adapter_changed(a, TF_ADAPTER_CONFIGMAPS, TF_INFORMER_UPDATED, "media/other",
                                   "{\"metadata\":{\"namespace\":\"media\",\"name\":\"other\"}}"));
  TF_OK_OR_FAIL(tf_adapter_changed(a, TF_ADAPTER_PODS, TF_INFORMER_UPDATED, "media/x", "not json"));
  ck_assert_uint_eq(tf_workqueue_len(q), 0);
  ck_assert_int_eq(tf_adapter_changed(a, (tf_adapter_cache)9, TF_INFORMER_UPDATED, "media/demo", "{}"), TF_EINVALID);
  TF_OK_OR_FAIL(tf_adapter_changed(NULL, TF_ADAPTER_POOLS, TF_INFORMER_UPDATED, "media/demo", "{}"));

  /* outside a reconcile nothing is charged: as many writes as asked */
  for (int i = 0; i < 200; i++) {
    ck_assert_int_gt(tf_adapter_write_gate("PATCH", "/api/v1/namespaces/media/pods/p/status", a), 0);
    ck_assert_int_gt(tf_adapter_write_gate("POST", "/api/v1/namespaces/media/events", a), 0);
  }
  tf_metrics *m = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_adapter_write_metrics(a, m));
  char *text = NULL;
  TF_OK_OR_FAIL(tf_metrics_to_text(&text, m));
  ck_assert_ptr_nonnull(strstr(text, "\nturnfleet_operator_events_pending 0\n"));
  ck_assert_ptr_nonnull(strstr(text, "# TYPE turnfleet_operator_events_dropped_total counter\n"
                                     "turnfleet_operator_events_dropped_total 0\n"));
  ck_assert_ptr_nonnull(strstr(text, "\nturnfleet_operator_writes_over_budget_total 0\n"));
  tf_free(text);
  tf_metrics_free(m);
  /* before version 4 too, a Secret of the pool label queues that pool (and the pools that name it: none here) */
  TF_OK_OR_FAIL(tf_adapter_changed(a, TF_ADAPTER_SECRETS, TF_INFORMER_UPDATED, "media/demo-relay-config", pod));
  key = next_key(q);
  ck_assert_str_eq(key, "media/demo");
  tf_free(key);
  ck_assert_uint_eq(tf_workqueue_len(q), 0);
  tf_adapter_free(a);
  /* from version 4 the `secrets` cache holds the pools' own relay-config Secrets: each queues its pool */
  ao.version = TF_ADAPTER_OPTIONS_VERSION;
  ao.budget_writes = 100;
  TF_OK_OR_FAIL(tf_adapter_new(&a, k, &ao));
  TF_OK_OR_FAIL(tf_adapter_changed(a, TF_ADAPTER_SECRETS, TF_INFORMER_UPDATED, "media/demo-relay-config", pod));
  key = next_key(q);
  ck_assert_str_eq(key, "media/demo");
  tf_free(key);
  TF_OK_OR_FAIL(tf_adapter_changed(a, TF_ADAPTER_SECRETS, TF_INFORMER_ADDED, "media/other",
                                   "{\"metadata\":{\"namespace\":\"media\",\"name\":\"other\"}}"));
  ck_assert_uint_eq(tf_workqueue_len(q), 0);
  tf_adapter_free(a);

  /* options_init of an older version stops where that version's struct ends */
  unsigned char raw[sizeof(tf_adapter_options)];
  static const size_t ends[] = {offsetof(tf_adapter_options, api_endpoints),
                                offsetof(tf_adapter_options, budget_writes),
                                offsetof(tf_adapter_options, referenced_secrets)};
  for (unsigned v = 1; v <= 3; v++) {
    memset(raw, 0xA5, sizeof(raw));
    TF_OK_OR_FAIL(tf_adapter_options_init((tf_adapter_options *)raw, v));
    for (size_t i = ends[v - 1]; i < sizeof(raw); i++) ck_assert_uint_eq(raw[i], 0xA5);
    ck_assert_uint_eq(((tf_adapter_options *)raw)->version, v);
    ck_assert_uint_eq(((tf_adapter_options *)raw)->agent_port, 9700);
  }

  tf_recorder_free(rec);
  for (size_t i = 0; i < 5; i++) tf_informer_free(inf[i]);
  tf_workqueue_free(q);
  tf_kube_free(k);
}
END_TEST

/* ---- the index: which pools a change concerns, and which claims a reconcile reads ---- */

static char *ix_pool_json_at(const char *ns, const char *name, const char *uid, const char *secret, unsigned start,
                             const char *more)
{
  char *s = NULL;
  ck_assert_int_ge(asprintf(&s, "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"uid\":\"%s\"},\"spec\":{"
                                "\"replicas\":1,\"dataplane\":{\"coturnVersion\":\"4.6.1\"},"
                                "\"relayPortRange\":{\"start\":%u,\"end\":%u},"
                                "\"auth\":{\"realm\":\"r.example.com\",\"secretRef\":{\"name\":\"%s\"}}%s}}",
                   ns, name, uid, start, start + 7, secret, more ? more : ""), 0);
  return s;
}

static char *ix_pool_json(const char *ns, const char *name, const char *uid, const char *secret, const char *more)
{
  return ix_pool_json_at(ns, name, uid, secret, 49152, more);
}

static char *ix_pod_json(const char *ns, const char *name, const char *pool, const char *owner, const char *node,
                         const char *addr, unsigned cli_port, const char *phase)
{
  char *s = NULL;
  ck_assert_int_ge(asprintf(&s, "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"uid\":\"u-%s\","
                                "\"labels\":{\"turnfleet.hzmi.dev/pool\":\"%s\",\"turnfleet.hzmi.dev/relay\":\"%s\"},"
                                "\"annotations\":{\"turnfleet.hzmi.dev/relay-address\":\"%s\","
                                "\"turnfleet.hzmi.dev/port-range\":\"49152-49159\",\"turnfleet.hzmi.dev/cli-port\":\"%u\"},"
                                "\"ownerReferences\":[{\"controller\":true,\"uid\":\"%s\"}]},"
                                "\"spec\":{\"nodeName\":\"%s\",\"hostNetwork\":true},\"status\":{\"phase\":\"%s\"}}",
                   ns, name, name, pool, name, addr, cli_port, owner, node, phase), 0);
  return s;
}

/* Every key in @p q, sorted and ','-joined ("" when none): what one change queued. */
static char *queued(tf_workqueue *q)
{
  char *keys[64], *out = calloc(1, 2048);
  size_t n = 0;
  while (n < 64 && (keys[n] = next_key(q)) != NULL) n++;
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (strcmp(keys[j], keys[i]) < 0) {
        char *t = keys[i];
        keys[i] = keys[j];
        keys[j] = t;
      }
  for (size_t i = 0; i < n; i++) {
    if (i) strcat(out, ",");
    strcat(out, keys[i]);
    tf_free(keys[i]);
  }
  return out;
}

#define IX_EXPECT(q, want)                        \
  do {                                            \
    char *got_ = queued(q);                       \
    ck_assert_str_eq(got_, want);                 \
    free(got_);                                   \
  } while (0)

static void ix_change(tf_adapter__index *x, tf_workqueue *q, tf_adapter_cache cache, tf_informer_op op,
                      const char *key, char *object)
{
  TF_OK_OR_FAIL(tf_adapter__enqueue(x, NULL, q, cache, op, key, object));
  free(object);
}

/* Each kind of change queues exactly the pools it concerns: a pool itself (and, coming, going or changing its
 * listener ports, the pools its relays' addresses meet); a relay pod its pool, and when its claim moves the pools
 * with a relay or a site on its addresses and, with a host-network CLI port, those with relays on its node; a
 * Node the pools its old or new labels select and those with relays on it; a Secret the pools that name it and
 * its owner; a ConfigMap its owner. */
START_TEST(test_adapter__each_change_queues_exactly_the_pools_it_concerns)
{
  tf_adapter__index *x = tf_adapter__index_new();
  ck_assert_ptr_nonnull(x);
  tf_workqueue *q = NULL;
  tf_workqueue_options qo = TF_WORKQUEUE_OPTIONS_INIT;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, &qo));
  const char *tls = ",\"listeners\":[{\"name\":\"turn\",\"protocol\":\"udp\",\"port\":3478},"
                    "{\"name\":\"turns\",\"protocol\":\"tls\",\"port\":5349,\"tlsSecretRef\":{\"name\":\"a-tls\"}}]";
  const char *east = ",\"nodeSelector\":{\"zone\":\"east\"}";
  /* pools: each itself (none has relays yet) */
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_ADDED, "media/a", ix_pool_json("media", "a", "ua", "a-secret", tls));
  IX_EXPECT(q, "media/a");
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_ADDED, "media/b", ix_pool_json("media", "b", "ub", "shared", east));
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_ADDED, "media/c", ix_pool_json("media", "c", "uc", "shared", NULL));
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_ADDED, "other/d", ix_pool_json("other", "d", "ud", "shared", NULL));
  IX_EXPECT(q, "media/b,media/c,other/d");
  /* relay pods: b's on n2, c's on n1 (host network, a CLI port): each its pool, nobody else there yet */
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_ADDED, "media/b-relay-1",
            ix_pod_json("media", "b-relay-1", "b", "ub", "n2", "10.0.0.2", 15810, "Running"));
  IX_EXPECT(q, "media/b");
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_ADDED, "media/c-relay-1",
            ix_pod_json("media", "c-relay-1", "c", "uc", "n1", "10.0.0.3", 15800, "Running"));
  IX_EXPECT(q, "media/c");
  /* b and e may place a relay on 10.0.0.1 (their planners' site): a's relay coming there concerns b (its ports
   * meet b's), not e (other relay and listener ports); its CLI port on n1 concerns c (its relay on n1 listens on
   * that port: a collision); the other namespace's d nothing */
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_ADDED, "media/e",
            ix_pool_json_at("media", "e", "ue", "e-secret", 40000,
                            ",\"listeners\":[{\"name\":\"turn\",\"protocol\":\"udp\",\"port\":3490}]"));
  IX_EXPECT(q, "media/e");
  tf_adapter__sites sites = {1, NULL, 0, NULL, 0};
  char *addrs[] = {"10.0.0.1"};
  sites.addrs = addrs;
  sites.naddrs = 1;
  ck_assert_int_eq(tf_adapter__index_set_sites(x, "media/b", "ub", &sites), 0);
  ck_assert_int_eq(tf_adapter__index_set_sites(x, "media/e", "ue", &sites), 0);
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_ADDED, "media/a-relay-1",
            ix_pod_json("media", "a-relay-1", "a", "ua", "n1", "10.0.0.1", 15800, "Running"));
  IX_EXPECT(q, "media/a,media/b,media/c");
  /* its status, a gate, a resync: its claim stays, only its pool */
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_UPDATED, "media/a-relay-1",
            ix_pod_json("media", "a-relay-1", "a", "ua", "n1", "10.0.0.1", 15800, "Running"));
  IX_EXPECT(q, "media/a");
  /* it moves to b's relay's address: the pools on the old address and on the new one (and c, on n1) */
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_UPDATED, "media/a-relay-1",
            ix_pod_json("media", "a-relay-1", "a", "ua", "n1", "10.0.0.2", 15800, "Running"));
  IX_EXPECT(q, "media/a,media/b,media/c");
  /* finished: its CLI port is free (a claim change) */
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_UPDATED, "media/a-relay-1",
            ix_pod_json("media", "a-relay-1", "a", "ua", "n1", "10.0.0.2", 15800, "Failed"));
  IX_EXPECT(q, "media/a,media/b,media/c");
  /* gone */
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_DELETED, "media/a-relay-1",
            ix_pod_json("media", "a-relay-1", "a", "ua", "n1", "10.0.0.2", 15800, "Failed"));
  IX_EXPECT(q, "media/a,media/b,media/c");
  /* a pod without the relay annotations: its pool's own business */
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_ADDED, "media/stray",
            strdup("{\"metadata\":{\"namespace\":\"media\",\"name\":\"stray\",\"labels\":{\"turnfleet.hzmi.dev/pool\":\"c\"}}}"));
  IX_EXPECT(q, "media/c");
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_UPDATED, "media/x", strdup("not json"));
  IX_EXPECT(q, "");

  /* nodes: the pools its labels select (before or after) and the pools with relays on it */
  ix_change(x, q, TF_ADAPTER_NODES, TF_INFORMER_ADDED, "n3", strdup("{\"metadata\":{\"name\":\"n3\"}}"));
  IX_EXPECT(q, "");
  ix_change(x, q, TF_ADAPTER_NODES, TF_INFORMER_UPDATED, "n3",
            strdup("{\"metadata\":{\"name\":\"n3\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}}}"));
  IX_EXPECT(q, "media/a,media/c,media/e,other/d");
  ix_change(x, q, TF_ADAPTER_NODES, TF_INFORMER_UPDATED, "n3",
            strdup("{\"metadata\":{\"name\":\"n3\",\"labels\":{\"zone\":\"east\"}}}"));
  IX_EXPECT(q, "media/a,media/b,media/c,media/e,other/d");
  ix_change(x, q, TF_ADAPTER_NODES, TF_INFORMER_DELETED, "n3",
            strdup("{\"metadata\":{\"name\":\"n3\",\"labels\":{\"zone\":\"east\"}}}"));
  IX_EXPECT(q, "media/b");
  ix_change(x, q, TF_ADAPTER_NODES, TF_INFORMER_UPDATED, "n2", strdup("{\"metadata\":{\"name\":\"n2\"}}"));
  IX_EXPECT(q, "media/b"); /* selects none of them, but b's relay runs there */
  ix_change(x, q, TF_ADAPTER_NODES, TF_INFORMER_UPDATED, "default/kubernetes", strdup("{}"));
  IX_EXPECT(q, "media/a,media/b,media/c,media/e,other/d"); /* the API servers' endpoints: every pool */

  /* secrets: the pools of its namespace that name it, and the pool that owns it */
  ix_change(x, q, TF_ADAPTER_SECRETS, TF_INFORMER_UPDATED, "media/shared", strdup("{}"));
  IX_EXPECT(q, "media/b,media/c");
  ix_change(x, q, TF_ADAPTER_SECRETS, TF_INFORMER_UPDATED, "other/shared", strdup("{}"));
  IX_EXPECT(q, "other/d");
  ix_change(x, q, TF_ADAPTER_SECRETS, TF_INFORMER_ADDED, "media/a-tls", strdup("{}"));
  IX_EXPECT(q, "media/a");
  ix_change(x, q, TF_ADAPTER_SECRETS, TF_INFORMER_DELETED, "media/a-secret", strdup("{}"));
  IX_EXPECT(q, "media/a");
  ix_change(x, q, TF_ADAPTER_SECRETS, TF_INFORMER_UPDATED, "media/c-relay-config",
            strdup("{\"metadata\":{\"namespace\":\"media\",\"labels\":{\"turnfleet.hzmi.dev/pool\":\"c\"}}}"));
  IX_EXPECT(q, "media/c");
  ix_change(x, q, TF_ADAPTER_SECRETS, TF_INFORMER_UPDATED, "media/unrelated", strdup("{}"));
  IX_EXPECT(q, "");
  /* configmaps: their pool */
  ix_change(x, q, TF_ADAPTER_CONFIGMAPS, TF_INFORMER_UPDATED, "media/b-vantage",
            strdup("{\"metadata\":{\"namespace\":\"media\",\"labels\":{\"turnfleet.hzmi.dev/pool\":\"b\"}}}"));
  IX_EXPECT(q, "media/b");

  /* a pool's status: itself; its listener ports (part of its relays' claims), or its going: the pools its
   * relays meet (c's relay on 10.0.0.3, where b may now place one) */
  ck_assert_int_eq(tf_adapter__index_set_sites(x, "media/b", "ub", NULL), 0);
  sites.addrs[0] = "10.0.0.3";
  ck_assert_int_eq(tf_adapter__index_set_sites(x, "media/b", "ub", &sites), 0);
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_UPDATED, "media/c", ix_pool_json("media", "c", "uc", "shared", NULL));
  IX_EXPECT(q, "media/c");
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_UPDATED, "media/c",
            ix_pool_json("media", "c", "uc", "shared", ",\"listeners\":[{\"name\":\"t\",\"protocol\":\"udp\",\"port\":3479}]"));
  IX_EXPECT(q, "media/b,media/c");
  /* a pool made anew under its name forgets the old one's sites: b's sites go with its uid */
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_UPDATED, "media/b", ix_pool_json("media", "b", "ub2", "shared", east));
  IX_EXPECT(q, "media/b");
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_DELETED, "media/c", ix_pool_json("media", "c", "uc", "shared", NULL));
  IX_EXPECT(q, "media/c");
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_DELETED, "media/b", ix_pool_json("media", "b", "ub2", "shared", east));
  IX_EXPECT(q, "media/b");
  /* no pool left to name it: a Secret concerns only the pools that are */
  ix_change(x, q, TF_ADAPTER_SECRETS, TF_INFORMER_UPDATED, "media/shared", strdup("{}"));
  IX_EXPECT(q, "");
  ck_assert_int_eq(tf_adapter__enqueue(x, NULL, q, (tf_adapter_cache)9, TF_INFORMER_UPDATED, "media/a", "{}"),
                   TF_EINVALID);
  tf_adapter__index_free(x);
  tf_workqueue_free(q);
}
END_TEST

static const char *conflict_of(const tf_engine *e, const char **message)
{
  const tf_reconcile *rec = tf_engine_reconcile(e);
  for (size_t i = 0; i < tf_reconcile_condition_count(rec); i++) {
    const char *type, *status;
    TF_OK_OR_FAIL(tf_reconcile_condition(rec, i, &type, &status, NULL, message, NULL));
    if (strcmp(type, "AddressConflict") == 0) return status;
  }
  return NULL;
}

/* A reconcile's claims come from the index: another existing pool's relay on an address the pool's planner may
 * use is an AddressConflict naming that pool, until that pool goes; a relay on another address concerns it not;
 * a CLI port its relay shares with another pool's relay on its node is a collision, named. */
START_TEST(test_adapter__claims_come_from_the_index)
{
  tf_adapter__index *x = tf_adapter__index_new();
  tf_workqueue *q = NULL;
  tf_workqueue_options qo = TF_WORKQUEUE_OPTIONS_INIT;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, &qo));
  tf_engine *e = parity_engine(1); /* media/demo on n1-n3, 203.0.113.1-3 */
  tf_nodes *nodes = tf_test_relay_nodes(3);
  tf_adapter__sites sites = {0};
  ck_assert_int_eq(tf_adapter__sites_plan(&sites, tf_engine_pool(e), nodes), 0);
  ck_assert_int_eq(sites.known, 1);
  ck_assert_uint_eq(sites.naddrs, 3);
  ck_assert_str_eq(sites.addrs[0], "203.0.113.1");
  ck_assert_uint_eq(sites.nnodes, 3);
  ck_assert_str_eq(sites.nodes[2], "n3");
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_ADDED, "media/demo", ix_pool_json("media", "demo", "udemo", "s", NULL));
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_ADDED, "media/rival", ix_pool_json("media", "rival", "urival", "s", NULL));
  ck_assert_int_eq(tf_adapter__index_set_sites(x, "media/demo", "udemo", &sites), 0);
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_ADDED, "media/demo-relay-1",
            ix_pod_json("media", "demo-relay-1", "demo", "udemo", "n1", "203.0.113.1", 15890, "Running"));
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_ADDED, "media/rival-far",
            ix_pod_json("media", "rival-far", "rival", "urival", "far", "198.51.100.9", 15890, "Running"));
  IX_EXPECT(q, "media/demo,media/rival");
  size_t refused = 9, collisions = 9;
  unsigned char digest[32] = {0}, was[32];
  char why[512];
  const char *msg = NULL;
  ck_assert_int_eq(tf_adapter__index_claims(x, e, "media/demo", "udemo", &sites, digest, &refused, why, sizeof(why), &collisions), 0);
  ck_assert_uint_eq(refused, 0);
  ck_assert_uint_eq(collisions, 0);
  TF_OK_OR_FAIL(tf_engine_step(e, PT0, PWALL));
  ck_assert_str_eq(conflict_of(e, &msg), "False");
  /* the rival's relay on n2's address, with the CLI port of demo's relay on n1 */
  ix_change(x, q, TF_ADAPTER_PODS, TF_INFORMER_ADDED, "media/rival-relay-1",
            ix_pod_json("media", "rival-relay-1", "rival", "urival", "n1", "203.0.113.2", 15890, "Running"));
  IX_EXPECT(q, "media/demo,media/rival"); /* on demo's site (and beside its relay on n1) */
  ck_assert_int_eq(tf_adapter__index_claims(x, e, "media/demo", "udemo", &sites, digest, &refused, why, sizeof(why), &collisions), 0);
  ck_assert_uint_eq(collisions, 1);
  ck_assert_str_eq(why, "relay demo-relay-1 and relay rival-relay-1 on node n1 share CLI port 15890");
  TF_OK_OR_FAIL(tf_engine_step(e, PT0 + 100, PWALL + 100));
  ck_assert_str_eq(conflict_of(e, &msg), "True");
  ck_assert_ptr_nonnull(strstr(msg, "203.0.113.2 is in use by pool rival"));
  /* nothing changed: the engine keeps the claims it holds (and the digest stays) */
  memcpy(was, digest, sizeof(was));
  ck_assert_int_eq(tf_adapter__index_claims(x, e, "media/demo", "udemo", &sites, digest, &refused, why, sizeof(why), &collisions), 0);
  ck_assert_mem_eq(was, digest, sizeof(was));
  ck_assert_uint_eq(collisions, 1);
  TF_OK_OR_FAIL(tf_engine_step(e, PT0 + 150, PWALL + 150));
  ck_assert_str_eq(conflict_of(e, &msg), "True");
  /* the same with the sites unknown (every claim): the same conflict */
  tf_adapter__sites unknown = {0};
  ck_assert_int_eq(tf_adapter__index_claims(x, e, "media/demo", "udemo", &unknown, digest, &refused, why, sizeof(why), &collisions), 0);
  TF_OK_OR_FAIL(tf_engine_step(e, PT0 + 200, PWALL + 200));
  ck_assert_str_eq(conflict_of(e, &msg), "True");
  /* the rival pool gone: its relays are no claims (their pods wait for the garbage collector) */
  ix_change(x, q, TF_ADAPTER_POOLS, TF_INFORMER_DELETED, "media/rival", ix_pool_json("media", "rival", "urival", "s", NULL));
  IX_EXPECT(q, "media/demo,media/rival"); /* demo: the rival's relay was on its site */
  ck_assert_int_eq(tf_adapter__index_claims(x, e, "media/demo", "udemo", &sites, digest, &refused, why, sizeof(why), &collisions), 0);
  TF_OK_OR_FAIL(tf_engine_step(e, PT0 + 300, PWALL + 300));
  ck_assert_str_eq(conflict_of(e, &msg), "False");
  tf_adapter__sites_clear(&sites);
  tf_nodes_free(nodes);
  tf_engine_free(e);
  tf_adapter__index_free(x);
  tf_workqueue_free(q);
}
END_TEST

/* ---- the referenced Secrets' caches (adapter_secrets.c) ---- */

/* Each referenced name has one cache, shared by the pools that reference it and dropped with the last of
 * them; a change of one queues exactly the pools that reference it; a name no pool references has no cache
 * (read: TF_EUNAVAILABLE, never another Secret's). (No server answers: the caches never sync.) */
START_TEST(test_adapter__referenced_secrets_are_cached_while_a_pool_references_them)
{
  tf_kube_options ko = TF_KUBE_OPTIONS_INIT;
  ko.source = TF_KUBE_SOURCE_EXPLICIT;
  ko.server = "https://127.0.19.1:39999"; /* nothing listens: the informers retry quietly */
  tf_kube *k = NULL;
  TF_OK_OR_FAIL(tf_kube_new(&k, &ko));
  tf_workqueue *q = NULL;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, NULL));
  tf_adapter__refs *t = tf_adapter__refs_new(k, NULL, q);
  ck_assert_ptr_nonnull(t);
  const char *a_names[] = {"shared", "a-only", "shared", NULL, ""};
  ck_assert_int_eq(tf_adapter__refs_set(t, "media/a", "media", a_names, 5), 0);
  ck_assert_uint_eq(tf_adapter__refs_count(t), 2);
  const char *b_names[] = {"shared"};
  ck_assert_int_eq(tf_adapter__refs_set(t, "media/b", "media", b_names, 1), 0);
  ck_assert_uint_eq(tf_adapter__refs_count(t), 2);
  /* a Secret of that name in another namespace is another Secret */
  ck_assert_int_eq(tf_adapter__refs_set(t, "other/c", "other", b_names, 1), 0);
  ck_assert_uint_eq(tf_adapter__refs_count(t), 3);
  char *json = NULL;
  ck_assert_int_eq(tf_adapter__refs_get(t, "media/shared", &json), TF_EUNAVAILABLE);
  ck_assert_ptr_null(json);
  ck_assert_int_eq(tf_adapter__refs_get(t, "media/unreferenced", &json), TF_EUNAVAILABLE);

  tf_adapter__refs_changed(t, "media/shared");
  char *k1 = next_key(q), *k2 = next_key(q);
  ck_assert_ptr_nonnull(k1);
  ck_assert_ptr_nonnull(k2);
  ck_assert_int_ne(strcmp(k1, k2), 0);
  ck_assert(strcmp(k1, "media/a") == 0 || strcmp(k1, "media/b") == 0);
  ck_assert(strcmp(k2, "media/a") == 0 || strcmp(k2, "media/b") == 0);
  tf_free(k1);
  tf_free(k2);
  ck_assert_uint_eq(tf_workqueue_len(q), 0);
  tf_adapter__refs_changed(t, "media/a-only");
  k1 = next_key(q);
  ck_assert_str_eq(k1, "media/a");
  tf_free(k1);
  tf_adapter__refs_changed(t, "media/unreferenced");
  tf_adapter__refs_changed(t, NULL);
  ck_assert_uint_eq(tf_workqueue_len(q), 0);

  /* pool a stops naming a-only: its cache goes, shared stays for b */
  ck_assert_int_eq(tf_adapter__refs_set(t, "media/a", "media", b_names, 1), 0);
  ck_assert_uint_eq(tf_adapter__refs_count(t), 2);
  tf_adapter__refs_changed(t, "media/a-only");
  ck_assert_uint_eq(tf_workqueue_len(q), 0);
  /* pool a gone (its namespace unknown then): what only it referenced goes */
  ck_assert_int_eq(tf_adapter__refs_set(t, "media/a", "", NULL, 0), 0);
  ck_assert_int_eq(tf_adapter__refs_set(t, "media/b", "media", NULL, 0), 0);
  ck_assert_uint_eq(tf_adapter__refs_count(t), 1);
  tf_adapter__refs_changed(t, "media/shared");
  ck_assert_uint_eq(tf_workqueue_len(q), 0);
  tf_adapter__refs_changed(t, "other/shared");
  k1 = next_key(q);
  ck_assert_str_eq(k1, "other/c");
  tf_free(k1);
  tf_adapter__refs_free(t);
  tf_workqueue_free(q);
  tf_kube_free(k);
}
END_TEST

/* ---- the referenced Secrets' caches against the API stand-in (127.0.19.1:39000, control 39001) ---- */

static tf_test_cluster rs_kt;
/* bookmarks every 0.5 s: a watch its client closed ends (and is logged) at the next one */
static const char *const rs_flags[] = {"--bookmark-interval", "0.5", NULL};
static void rs_setup(void) { tf_test_cluster_start(&rs_kt, "127.0.19.1", 39000, rs_flags); }
static void rs_teardown(void) { tf_test_cluster_stop(&rs_kt); }

#define RS_COLL "/api/v1/namespaces/default/secrets"

/* A pool that names a Secret before it exists: the cache syncs empty (TF_ENOTFOUND, not refused before it
 * synced), the Secret's creation queues the pool and the cache holds it; a large Secret no pool names is never
 * listed, watched or read; every Secret request the caches make names one Secret. */
START_TEST(test_adapter__a_secret_made_after_its_pool_queues_it_and_no_other_is_read)
{
  tf_kube *k = tf_test_kube(&rs_kt, NULL);
  size_t big = 2u << 20;
  char *blob = malloc(big + 1);
  ck_assert_ptr_nonnull(blob);
  memset(blob, 'A', big);
  blob[big] = '\0';
  char *body = NULL;
  ck_assert_int_ge(asprintf(&body, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"unnamed\","
                                   "\"namespace\":\"default\"},\"data\":{\"blob\":\"%s\"}}", blob), 0);
  free(blob);
  TF_OK_OR_FAIL(tf_kube_create(k, RS_COLL, body, NULL, NULL));
  free(body);
  tf_workqueue *q = NULL;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, NULL));
  tf_adapter__refs *t = tf_adapter__refs_new(k, NULL, q);
  ck_assert_ptr_nonnull(t);
  const char *names[] = {"late"};
  ck_assert_int_eq(tf_adapter__refs_set(t, "default/demo", "default", names, 1), 0);
  char *json = NULL;
  tf_err g = TF_EUNAVAILABLE;
  for (int i = 0; i < 300 && (g = tf_adapter__refs_get(t, "default/late", &json)) == TF_EUNAVAILABLE; i++)
    tf_test_sleep_ms(100);
  ck_assert_int_eq(g, TF_ENOTFOUND);
  TF_OK_OR_FAIL(tf_kube_create(k, RS_COLL, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                               "\"late\",\"namespace\":\"default\"},\"data\":{\"secret\":\"czNjcjN0\"}}", NULL, NULL));
  char *key = NULL;
  TF_OK_OR_FAIL(tf_workqueue_get(q, &key, 30000)); /* the watch brought it */
  ck_assert_str_eq(key, "default/demo");
  tf_workqueue_done(q, key);
  tf_free(key);
  TF_OK_OR_FAIL(tf_adapter__refs_get(t, "default/late", &json));
  ck_assert_ptr_nonnull(strstr(json, "czNjcjN0"));
  tf_free(json);
  /* no pool names it any more: its cache and its watch go */
  ck_assert_int_eq(tf_adapter__refs_set(t, "default/demo", "default", NULL, 0), 0);
  ck_assert_uint_eq(tf_adapter__refs_count(t), 0);
  ck_assert_int_eq(tf_adapter__refs_get(t, "default/late", &json), TF_EUNAVAILABLE);
  /* a watch is logged once it ends (here: its informer stopped, the server's next bookmark finds it gone) */
  (void)tf_test_wait_count(&rs_kt, "GET", "/secrets", "watch", 1);
  cJSON *reqs = tf_test_requests(&rs_kt, NULL, "/secrets", NULL);
  int reads = 0;
  const cJSON *r;
  cJSON_ArrayForEach(r, reqs)
  {
    const char *method = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "method"));
    const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "path"));
    const char *query = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "query"));
    if (strcmp(method, "GET") != 0) continue; /* the test's own creates */
    ck_assert_msg(strstr(path, "unnamed") == NULL, "read the Secret no pool names: %s", path);
    if (strcmp(path, RS_COLL) != 0) continue; /* (another test's read of one object) */
    reads++;
    ck_assert_msg(query && strstr(query, "fieldSelector=metadata.name") && strstr(query, "late"), "a Secret list or watch without "
                  "the name: %s?%s", path, query ? query : "");
  }
  cJSON_Delete(reqs);
  ck_assert_int_ge(reads, 2); /* the list and the watch */
  tf_adapter__refs_free(t);
  tf_workqueue_free(q);
  (void)tf_kube_delete(k, RS_COLL "/late", NULL, NULL, NULL);
  (void)tf_kube_delete(k, RS_COLL "/unnamed", NULL, NULL, NULL);
  tf_kube_free(k);
}
END_TEST

/* A create answered 409 whose fresh read is someone else's object (other ownerReferences: one a cache by
 * label does not show) is not written: TF_ECONFLICT, that object learnt, no PUT. */
START_TEST(test_adapter__a_foreign_object_met_on_create_is_not_taken_over)
{
  tf_kube *k = tf_test_kube(&rs_kt, NULL);
  TF_OK_OR_FAIL(tf_kube_create(k, RS_COLL, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                               "\"demo-relay-config\",\"namespace\":\"default\"},\"data\":{\"mine\":\"eA==\"}}",
                               NULL, NULL));
  const char *desired = "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"demo-relay-config\","
                        "\"namespace\":\"default\",\"ownerReferences\":[{\"apiVersion\":\"turnfleet.hzmi.dev/v1alpha1\","
                        "\"kind\":\"TURNPool\",\"name\":\"demo\",\"uid\":\"u1\",\"controller\":true}]},"
                        "\"data\":{\"r.conf\":\"eQ==\"}}";
  int written = 1;
  char *what = NULL, *learnt = NULL;
  ck_assert_int_eq(tf_adapter__apply(k, RS_COLL, "demo-relay-config", desired, NULL, &written, &what, &learnt),
                   TF_ECONFLICT);
  ck_assert_int_eq(written, 0);
  ck_assert_ptr_nonnull(learnt);
  ck_assert_ptr_nonnull(strstr(learnt, "\"mine\""));
  ck_assert_int_eq(tf_adapter__same_owners(desired, learnt), 0);
  ck_assert_int_eq(tf_test_count(&rs_kt, "PUT", "/secrets/demo-relay-config", NULL), 0);
  free(learnt);
  free(what);
  (void)tf_kube_delete(k, RS_COLL "/demo-relay-config", NULL, NULL, NULL);
  tf_kube_free(k);
}
END_TEST

/* ---- the one write and its one retry, against the API stand-in (127.0.9.1:29000, control 29001) ---- */

static tf_test_cluster ad_kt;
static void ad_setup(void) { tf_test_cluster_start(&ad_kt, "127.0.9.1", 29000, NULL); }
static void ad_teardown(void) { tf_test_cluster_stop(&ad_kt); }
static void ad_each(void) { tf_test_reset(&ad_kt); }

#define AD_COLL "/api/v1/namespaces/default/configmaps"
#define AD_PATH AD_COLL "/applied"

static char *ad_cm(const char *value)
{
  char *s = NULL;
  ck_assert_int_ge(asprintf(&s, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"applied\","
                                "\"namespace\":\"default\"},\"data\":{\"k\":\"%s\"}}", value), 0);
  return s;
}

START_TEST(test_adapter__an_object_with_other_owners_is_not_the_pools)
{
  const char *mine = "{\"metadata\":{\"name\":\"p-turn-uris\",\"ownerReferences\":[{\"apiVersion\":"
                     "\"turnfleet.hzmi.dev/v1alpha1\",\"kind\":\"TURNPool\",\"name\":\"p\",\"uid\":\"u1\","
                     "\"controller\":true,\"blockOwnerDeletion\":true}]},\"data\":{\"k\":\"v\"}}";
  const char *older = "{\"metadata\":{\"name\":\"p-turn-uris\",\"ownerReferences\":[{\"apiVersion\":"
                      "\"turnfleet.hzmi.dev/v1alpha1\",\"kind\":\"TURNPool\",\"name\":\"p\",\"uid\":\"u0\","
                      "\"controller\":true,\"blockOwnerDeletion\":true}]}}";
  const char *nobody = "{\"metadata\":{\"name\":\"p-turn-uris\"},\"data\":{\"k\":\"other\"}}";
  /* the same owners, whatever else differs: the pool's own, updated in place */
  ck_assert_int_eq(tf_adapter__same_owners(mine, mine), 1);
  ck_assert_int_eq(tf_adapter__same_owners(nobody, nobody), 1);
  /* a user's object of that name, or one a former pool of that name owned: not the pool's */
  ck_assert_int_eq(tf_adapter__same_owners(mine, nobody), 0);
  ck_assert_int_eq(tf_adapter__same_owners(mine, older), 0);
  ck_assert_int_eq(tf_adapter__same_owners(nobody, mine), 0);
  ck_assert_int_eq(tf_adapter__same_owners(mine, "not json"), -1);
}
END_TEST

START_TEST(test_adapter__apply_writes_only_what_differs_and_retries_a_409_once)
{
  tf_kube *k = tf_test_kube(&ad_kt, NULL);
  (void)tf_kube_delete(k, AD_PATH, NULL, NULL, NULL);
  char *v1 = ad_cm("one"), *v2 = ad_cm("two"), *what = NULL, *seen = NULL, *learnt = NULL;
  int written = -1;
  /* absent: created, and the server's answer learnt (the object with its resourceVersion) */
  TF_OK_OR_FAIL(tf_adapter__apply(k, AD_COLL, "applied", v1, NULL, &written, &what, &learnt));
  ck_assert_int_eq(written, 1);
  ck_assert_str_eq(what, "create " AD_COLL "/applied");
  free(what);
  ck_assert_ptr_nonnull(learnt);
  ck_assert_ptr_nonnull(strstr(learnt, "\"resourceVersion\""));
  ck_assert_ptr_nonnull(strstr(learnt, "\"one\""));
  free(learnt);
  TF_OK_OR_FAIL(tf_kube_get(k, AD_PATH, &seen, NULL));
  /* as it is: nothing sent */
  tf_test_reset(&ad_kt);
  TF_OK_OR_FAIL(tf_adapter__apply(k, AD_COLL, "applied", v1, seen, &written, &what, &learnt));
  ck_assert_int_eq(written, 0);
  ck_assert_ptr_null(what);
  ck_assert_ptr_null(learnt); /* nothing asked, nothing learnt */
  ck_assert_int_eq(tf_test_count(&ad_kt, NULL, "/configmaps", NULL), 0);
  /* changed by someone else since `seen` was read: the PUT with seen's resourceVersion gets a 409, then
   * one GET and one PUT against the fresh resourceVersion */
  TF_OK_OR_FAIL(tf_kube_patch(k, AD_PATH, TF_KUBE_PATCH_MERGE, "{\"data\":{\"k\":\"three\"}}", NULL, NULL));
  tf_test_reset(&ad_kt);
  TF_OK_OR_FAIL(tf_adapter__apply(k, AD_COLL, "applied", v2, seen, &written, &what, &learnt));
  ck_assert_int_eq(written, 1);
  ck_assert_str_eq(what, "update " AD_COLL "/applied (data.k differs)");
  free(what);
  ck_assert_ptr_nonnull(learnt);
  ck_assert_ptr_nonnull(strstr(learnt, "\"two\""));
  free(learnt);
  ck_assert_int_eq(tf_test_count(&ad_kt, "PUT", "/configmaps/applied", NULL), 2);
  ck_assert_int_eq(tf_test_count(&ad_kt, "GET", "/configmaps/applied", NULL), 1);
  char *now = NULL;
  TF_OK_OR_FAIL(tf_kube_get(k, AD_PATH, &now, NULL));
  ck_assert_ptr_nonnull(strstr(now, "\"two\""));
  tf_free(now);
  /* a 409 on every PUT: two PUTs and one GET, then the conflict is the answer (never a loop) */
  tf_test_reset(&ad_kt);
  tf_test_fault(&ad_kt, "{\"method\":\"PUT\",\"path\":\"/configmaps/applied$\",\"status\":409,\"count\":100}");
  char *v4 = ad_cm("four");
  ck_assert_int_eq(tf_adapter__apply(k, AD_COLL, "applied", v4, seen, &written, &what, &learnt), TF_ECONFLICT);
  free(v4);
  ck_assert_ptr_null(learnt); /* the fresh read was outdated by the next conflict */
  ck_assert_int_eq(written, 0);
  ck_assert_ptr_nonnull(what);
  ck_assert_ptr_nonnull(strstr(what, "update " AD_COLL "/applied (data.k differs): "));
  free(what);
  ck_assert_int_eq(tf_test_count(&ad_kt, "PUT", "/configmaps/applied", NULL), 2);
  ck_assert_int_eq(tf_test_count(&ad_kt, "GET", "/configmaps/applied", NULL), 1);
  /* a create of an object that exists (a cache behind): one GET, and a PUT only if it differs */
  tf_test_reset(&ad_kt);
  TF_OK_OR_FAIL(tf_adapter__apply(k, AD_COLL, "applied", v2, NULL, &written, &what, &learnt));
  ck_assert_int_eq(written, 0);
  ck_assert_ptr_nonnull(learnt); /* the fresh read: as desired */
  ck_assert_ptr_nonnull(strstr(learnt, "\"two\""));
  free(learnt);
  ck_assert_int_eq(tf_test_count(&ad_kt, "POST", "/configmaps", NULL), 1);
  ck_assert_int_eq(tf_test_count(&ad_kt, "GET", "/configmaps/applied", NULL), 1);
  ck_assert_int_eq(tf_test_count(&ad_kt, "PUT", "/configmaps/applied", NULL), 0);
  free(what);
  (void)tf_kube_delete(k, AD_PATH, NULL, NULL, NULL);
  tf_free(seen);
  free(v1);
  free(v2);
  tf_kube_free(k);
}
END_TEST

/* ---- adapter_work.c: probes and scrapes on one loop ---- */

/* A stand-in agent on 127.0.20.20:40130: each connection gets the metrics with the right bearer token,
 * 401 without it; it counts what it served. */
typedef struct fake_agent {
  int fd;
  pthread_t thread;
  int served, refused;
} fake_agent;

static void *fake_agent_run(void *arg)
{
  fake_agent *a = arg;
  for (;;) {
    int c = accept(a->fd, NULL, NULL);
    if (c < 0) break;
    char req[4096];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof(req) - 1 && (k = recv(c, req + n, sizeof(req) - 1 - n, 0)) > 0) {
      n += (size_t)k;
      req[n] = '\0';
      if (strstr(req, "\r\n\r\n")) break;
    }
    req[n] = '\0';
    const char *body = "# TYPE turnfleet_agent_ports_in_use gauge\n"
                       "turnfleet_agent_ports_in_use{protocol=\"udp\"} 3\n"
                       "turnfleet_agent_ports_in_use{protocol=\"tcp\"} 4\n";
    char out[1024];
    int authed = strstr(req, "\r\nAuthorization: Bearer agent-token-20\r\n") != NULL;
    if (authed) {
      snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body),
               body);
      a->served++;
    } else {
      snprintf(out, sizeof(out), "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      a->refused++;
    }
    (void)send(c, out, strlen(out), MSG_NOSIGNAL);
    close(c);
  }
  return NULL;
}

static int bound_socket(int type, const char *ip, uint16_t port)
{
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, ip, &sa.sin_addr);
  ck_assert_msg(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s:%u: %s", ip, port,
                strerror(errno));
  return fd;
}

/* Wait on the work queue for @p key's results until @p want of them came back (or 20 s of quiet). */
static size_t work_wait(tf_adapter__work *w, tf_workqueue *q, const char *key, tf_adapter__result *got, size_t want)
{
  size_t n = 0;
  while (n < want) {
    char *k = NULL;
    tf_err rc = tf_workqueue_get(q, &k, 20000);
    ck_assert_msg(rc == TF_OK && k, "no result queued (%zu of %zu)", n, want);
    tf_workqueue_done(q, k);
    free(k);
    tf_adapter__result *res = NULL;
    size_t m = tf_adapter__work_take(w, key, &res);
    for (size_t i = 0; i < m; i++) {
      ck_assert_uint_lt(n, want);
      got[n++] = res[i];
    }
    free(res);
  }
  return n;
}

START_TEST(test_adapter__probes_and_scrapes_run_at_once_on_one_loop)
{
  fake_agent agent = {bound_socket(SOCK_STREAM, "127.0.20.20", 40130), 0, 0, 0};
  ck_assert_int_eq(listen(agent.fd, 16), 0);
  ck_assert_int_eq(pthread_create(&agent.thread, NULL, fake_agent_run, &agent), 0);
  int silent = bound_socket(SOCK_DGRAM, "127.0.20.21", 40131);
  tf_workqueue *q = NULL;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, NULL));
  tf_adapter__work *w = tf_adapter__work_new(q);
  ck_assert_ptr_nonnull(w);
  /* a probe of a relay that never answers (two URIs: both probed at once, the first failure decides) */
  tf_probe_options po[2] = {TF_PROBE_OPTIONS_INIT, TF_PROBE_OPTIONS_INIT};
  po[0].uri = "turn:127.0.20.21:40131";
  po[1].uri = "turn:127.0.20.21:40131?transport=udp";
  po[0].expect_address = po[1].expect_address = "127.0.20.21";
  po[0].secret = "work-secret";
  po[0].timeout_ms = 3000;
  ck_assert_int_eq(tf_adapter__work_probe(w, "ns/p", 7, 1, po, 2), 0);
  /* scrapes submitted after it: with and without the token, and of nobody (refused) */
  ck_assert_int_eq(tf_adapter__work_scrape(w, "ns/p", 7, 2, "http://127.0.20.20:40130/metrics", "agent-token-20", 3000), 0);
  ck_assert_int_eq(tf_adapter__work_scrape(w, "ns/p", 7, 3, "http://127.0.20.20:40130/metrics", NULL, 3000), 0);
  ck_assert_int_eq(tf_adapter__work_scrape(w, "ns/p", 7, 4, "http://127.0.20.20:40132/metrics", "agent-token-20", 3000), 0);
  tf_adapter__result got[4];
  work_wait(w, q, "ns/p", got, 4);
  /* the scrapes came back before the probe that waits for its timeout: nothing waits for another */
  ck_assert_uint_eq(got[3].id, 1);
  for (size_t i = 0; i < 3; i++) {
    ck_assert_int_eq(got[i].kind, TF_ADAPTER__SCRAPE);
    ck_assert_uint_eq(got[i].epoch, 7);
    ck_assert_int_eq(got[i].allocations, got[i].id == 2 ? 7 : -1);
  }
  ck_assert_int_eq(agent.served, 1);
  ck_assert_int_eq(agent.refused, 1);
  tf_adapter__result *pr = &got[3];
  ck_assert_int_eq(pr->kind, TF_ADAPTER__PROBE);
  ck_assert_int_eq(pr->ok, 0);
  ck_assert_int_eq(pr->on_allocate, 1);
  ck_assert_ptr_nonnull(pr->message);
  ck_assert_msg(strstr(pr->message, "127.0.20.21:40131") && !strstr(pr->message, "work-secret"), "%s", pr->message);
  /* the silent relay got both URIs' requests */
  char buf[1500];
  int dgrams = 0;
  while (recv(silent, buf, sizeof(buf), MSG_DONTWAIT) > 0) dgrams++;
  ck_assert_int_ge(dgrams, 2);
  for (size_t i = 0; i < 4; i++) tf_adapter__result_clear(&got[i]);
  /* options a probe refuses fail the job with the field named; a job in flight is abandoned at free */
  tf_probe_options bad = TF_PROBE_OPTIONS_INIT;
  bad.uri = "stun:127.0.20.21";
  bad.expect_address = "127.0.20.21";
  bad.secret = "work-secret";
  ck_assert_int_eq(tf_adapter__work_probe(w, "ns/q", 7, 5, &bad, 1), 0);
  work_wait(w, q, "ns/q", got, 1);
  ck_assert_int_eq(got[0].ok, 0);
  ck_assert_msg(got[0].message && strstr(got[0].message, "uri"), "%s", got[0].message ? got[0].message : "(null)");
  tf_adapter__result_clear(&got[0]);
  ck_assert_int_eq(tf_adapter__work_probe(w, "ns/r", 7, 6, po, 1), 0);
  tf_adapter__work_free(w);
  tf_workqueue_free(q);
  shutdown(agent.fd, SHUT_RDWR);
  close(agent.fd);
  pthread_join(agent.thread, NULL);
  close(silent);
}
END_TEST

Suite *tf_test_adapter_suite(void)
{
  Suite *s = suite_create("adapter");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_adapter__status_keeps_the_probe_time_while_the_outcome_holds);
  tcase_add_test(tc, test_adapter__conditions_turning_bad_are_named_once);
  tcase_add_test(tc, test_adapter__a_refused_pool_keeps_its_transition_time);
  tcase_add_test(tc, test_adapter__writes_only_what_differs);
  tcase_add_test(tc, test_adapter__vantage_condition_in_the_status);
  tcase_add_test(tc, test_adapter__cli_port_slots);
  tcase_add_test(tc, test_adapter__a_failure_keeps_its_time_and_says_the_current_error);
  tcase_add_test(tc, test_adapter__times_parse_as_rfc3339);
  tcase_add_test(tc, test_adapter__the_drain_finalizer_is_added_and_removed_once);
  tcase_add_test(tc, test_adapter__status_order_and_times_alone_are_no_change);
  tcase_add_test(tc, test_adapter__expectations);
  tcase_add_test(tc, test_adapter__cli_port_collisions);
  tcase_add_test(tc, test_adapter__an_object_with_other_owners_is_not_the_pools);
  tcase_add_test(tc, test_adapter__both_runtimes_decide_the_same);
  tcase_add_test(tc, test_adapter__changes_queue_the_pools_they_concern);
  tcase_add_test(tc, test_adapter__each_change_queues_exactly_the_pools_it_concerns);
  tcase_add_test(tc, test_adapter__claims_come_from_the_index);
  tcase_add_test(tc, test_adapter__a_lagging_cache_is_read_through_what_the_writes_learnt);
  tcase_add_test(tc, test_adapter__referenced_secrets_are_cached_while_a_pool_references_them);
  suite_add_tcase(s, tc);
  TCase *work = tcase_create("work");
  tcase_set_timeout(work, 60);
  tcase_add_test(work, test_adapter__probes_and_scrapes_run_at_once_on_one_loop);
  suite_add_tcase(s, work);
  TCase *live = tcase_create("live");
  tcase_add_unchecked_fixture(live, ad_setup, ad_teardown);
  tcase_add_checked_fixture(live, ad_each, NULL);
  tcase_set_timeout(live, 120);
  tcase_add_test(live, test_adapter__apply_writes_only_what_differs_and_retries_a_409_once);
  suite_add_tcase(s, live);
  TCase *refs = tcase_create("secrets");
  tcase_add_unchecked_fixture(refs, rs_setup, rs_teardown);
  tcase_set_timeout(refs, 120);
  tcase_add_test(refs, test_adapter__a_secret_made_after_its_pool_queues_it_and_no_other_is_read);
  tcase_add_test(refs, test_adapter__a_foreign_object_met_on_create_is_not_taken_over);
  suite_add_tcase(s, refs);
  return s;
}
