/* capacity: ports owned per relay and pool, full scale, sizing and the bandwidth
 * bound, for every addressing mode (docs/capacity-model.md). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "tf_test.h"

#define NODE(name, addrs, ann)                                                                          \
  "{\"metadata\":{\"name\":\"" name "\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}"        \
  ",\"annotations\":{" ann "}},"                                                                        \
  "\"status\":{\"addresses\":[" addrs "],\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"
#define IP(type, a) "{\"type\":\"" type "\",\"address\":\"" a "\"}"
#define EXT_ADDRS "\"turnfleet.hzmi.dev/external-addresses\": "
#define NODELIST(items) "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[" items "]}"

/* Three nodes with one IPv4 and one IPv6 address each. */
static const char three_nodes[] = NODELIST(
    NODE("n1", IP("ExternalIP", "203.0.113.1") "," IP("ExternalIP", "2001:db8::1"), "") ","
    NODE("n2", IP("ExternalIP", "203.0.113.2") "," IP("ExternalIP", "2001:db8::2"), "") ","
    NODE("n3", IP("ExternalIP", "203.0.113.3") "," IP("ExternalIP", "2001:db8::3"), ""));

static tf_pool *pool_with(const char *head, const char *addressing, const char *range)
{
  char text[2048];
  snprintf(text, sizeof(text),
           "metadata: {name: cap}\n"
           "spec:\n"
           "%s"
           "  addressing: %s\n"
           "  relayPortRange: %s\n"
           "  auth: {realm: cap.example.com, secretRef: {name: s}}\n",
           head, addressing, range);
  return tf_test_pool(text);
}

static tf_plan *plan_of(const tf_pool *pool, const char *nodes_json)
{
  tf_nodes *nodes = tf_test_nodes(nodes_json);
  tf_plan *plan = NULL;
  TF_OK_OR_FAIL(tf_plan_new(&plan, pool, nodes, NULL));
  tf_nodes_free(nodes);
  return plan;
}

static tf_capacity *capacity_of(const tf_pool *pool, const tf_plan *plan, const tf_capacity_options *o)
{
  tf_capacity *c = NULL;
  TF_OK_OR_FAIL(tf_capacity_new(&c, pool, plan, o));
  ck_assert_ptr_nonnull(c);
  return c;
}

static cJSON *json_of(const tf_capacity *c)
{
  char *text = NULL;
  TF_OK_OR_FAIL(tf_capacity_to_json(&text, c));
  cJSON *j = cJSON_Parse(text);
  ck_assert_msg(j != NULL, "not JSON: %s", text);
  tf_free(text);
  return j;
}

static double num(const cJSON *obj, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  ck_assert_msg(cJSON_IsNumber(v), "no number \"%s\"", key);
  return v->valuedouble;
}

static const char *str(const cJSON *obj, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  ck_assert_msg(cJSON_IsString(v), "no string \"%s\"", key);
  return v->valuestring;
}

/* Addresses needed for @p n allocations on @p ports per address at @p headroom. */
static int64_t addresses_for(int64_t n, double headroom, const char *range)
{
  tf_pool *pool = pool_with("  replicas: 1\n", "{mode: HostNetwork}", range);
  tf_plan *plan = plan_of(pool, three_nodes);
  tf_capacity_options o = TF_CAPACITY_OPTIONS_INIT;
  o.target_allocations = n;
  o.headroom = headroom;
  tf_capacity *c = capacity_of(pool, plan, &o);
  int64_t a = tf_capacity_addresses_needed(c);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);
  return a;
}

START_TEST(test_capacity__options_init)
{
  tf_capacity_options o;
  memset(&o, 0xa5, sizeof(o));
  TF_OK_OR_FAIL(tf_capacity_options_init(&o, TF_CAPACITY_OPTIONS_VERSION));
  ck_assert_uint_eq(o.version, TF_CAPACITY_OPTIONS_VERSION);
  ck_assert_int_eq(o.target_allocations, 0);
  ck_assert_double_eq(o.headroom, 0.2);
  ck_assert_double_eq(o.session_kbps, 0.0);
  ck_assert_double_eq(o.node_mbps, 0.0);
  ck_assert_int_eq(tf_capacity_options_init(&o, 0), TF_EINVALID);
  ck_assert_int_eq(tf_capacity_options_init(&o, TF_CAPACITY_OPTIONS_VERSION + 1), TF_EINVALID);
  ck_assert_int_eq(tf_capacity_options_init(NULL, 1), TF_EINVALID);
}
END_TEST

START_TEST(test_capacity__host_network_ipv4)
{
  /* 49 ports per address; 2 of 3 placeable identities planned */
  tf_pool *pool = pool_with("  replicas: 2\n", "{mode: HostNetwork, family: IPv4}", "{start: 49152, end: 49200}");
  tf_plan *plan = plan_of(pool, three_nodes);
  tf_capacity *c = capacity_of(pool, plan, NULL);
  ck_assert_int_eq(tf_capacity_allocations(c), 98);
  ck_assert_int_eq(tf_capacity_full_scale_allocations(c), 147);
  ck_assert_int_eq(tf_capacity_addresses_needed(c), 0);
  ck_assert_int_eq(tf_capacity_nodes_for_bandwidth(c), 0);
  cJSON *j = json_of(c);
  ck_assert_str_eq(str(j, "pool"), "cap");
  ck_assert_str_eq(str(j, "namespace"), "default");
  ck_assert_str_eq(str(j, "mode"), "HostNetwork");
  ck_assert_str_eq(str(j, "family"), "IPv4");
  ck_assert_double_eq(num(j, "portsPerAddress"), 49);
  ck_assert_double_eq(num(j, "allocations"), 98);
  ck_assert_double_eq(num(j, "placeable"), 3);
  ck_assert_double_eq(num(j, "fullScaleAllocations"), 147);
  ck_assert_ptr_null(cJSON_GetObjectItem(j, "sizing"));
  ck_assert_ptr_null(cJSON_GetObjectItem(j, "partitionedNote"));
  ck_assert_ptr_null(cJSON_GetObjectItem(j, "relaysPerNode"));
  const cJSON *relays = cJSON_GetObjectItem(j, "relays");
  ck_assert_int_eq(cJSON_GetArraySize(relays), 2);
  const cJSON *r0 = cJSON_GetArrayItem(relays, 0);
  ck_assert_str_eq(str(r0, "name"), tf_relay_name(tf_plan_relay(plan, 0)));
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(r0, "addresses")), 1);
  ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(r0, "addresses"), 0)->valuestring, "203.0.113.1");
  ck_assert_double_eq(num(cJSON_GetObjectItem(r0, "portRange"), "start"), 49152);
  ck_assert_double_eq(num(cJSON_GetObjectItem(r0, "portRange"), "end"), 49200);
  ck_assert_double_eq(num(r0, "portsTotal"), 49);
  cJSON_Delete(j);
  tf_capacity_free(c);

  /* sizing: 1000 allocations at 20 % headroom: 1000 / (49 x 0.8) = 25.5 -> 26 */
  tf_capacity_options o = TF_CAPACITY_OPTIONS_INIT;
  o.target_allocations = 1000;
  c = capacity_of(pool, plan, &o);
  ck_assert_int_eq(tf_capacity_addresses_needed(c), 26);
  j = json_of(c);
  const cJSON *s = cJSON_GetObjectItem(j, "sizing");
  ck_assert_double_eq(num(s, "targetAllocations"), 1000);
  ck_assert_double_eq(num(s, "headroom"), 0.2);
  ck_assert_double_eq(num(s, "addressesNeeded"), 26);
  ck_assert_double_eq(num(s, "relaysNeeded"), 26);
  ck_assert_str_eq(str(s, "limitedBy"), "ports");
  ck_assert_ptr_null(cJSON_GetObjectItem(s, "nodesForBandwidth"));
  ck_assert_ptr_null(cJSON_GetObjectItem(s, "nodeAddressesNeeded"));
  cJSON_Delete(j);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_capacity__ceilings_are_exact)
{
  /* 1000 ports per address */
  const char *k = "{start: 40000, end: 40999}";
  ck_assert_int_eq(addresses_for(1600, 0.2, k), 2); /* exactly 2 x 800 */
  ck_assert_int_eq(addresses_for(1601, 0.2, k), 3);
  ck_assert_int_eq(addresses_for(1599, 0.2, k), 2);
  ck_assert_int_eq(addresses_for(1, 0.2, k), 1);
  /* headroom 0: the whole range is usable */
  ck_assert_int_eq(addresses_for(1000, 0.0, k), 1);
  ck_assert_int_eq(addresses_for(1001, 0.0, k), 2);
  ck_assert_int_eq(addresses_for(3000, 0.0, k), 3);
  ck_assert_int_eq(addresses_for(900, 0.1, k), 1);
  ck_assert_int_eq(addresses_for(300, 0.7, k), 1);
  ck_assert_int_eq(addresses_for(301, 0.7, k), 2);
  /* where floating point would round up: 49 / (49 x (1 - 0.8)) is 5.000000000000002 in doubles */
  const char *k49 = "{start: 49152, end: 49200}";
  ck_assert_int_eq(addresses_for(49, 0.8, k49), 5);
  ck_assert_int_eq(addresses_for(98, 0.8, k49), 10);
  ck_assert_int_eq(addresses_for(49, 0.9, k49), 10);
  /* 33 / (50 x 0.66) is 1.0000000000000002 in doubles */
  ck_assert_int_eq(addresses_for(33, 0.34, "{start: 50000, end: 50049}"), 1);
  ck_assert_int_eq(addresses_for(34, 0.34, "{start: 50000, end: 50049}"), 2);
  volatile double h = 0.8; /* the trap is real */
  ck_assert(ceil(49.0 / (49.0 * (1.0 - h))) != 5.0);
  /* the largest target with the smallest range */
  ck_assert_int_eq(addresses_for(1000000000000LL, 0.0, "{start: 50000, end: 50000}"), 1000000000000LL);
}
END_TEST

START_TEST(test_capacity__dual_stack_counts_both_families)
{
  tf_pool *pool = pool_with("  replicas: 2\n", "{mode: HostNetwork, family: DualStack}", "{start: 49152, end: 49200}");
  tf_plan *plan = plan_of(pool, three_nodes);
  tf_capacity_options o = TF_CAPACITY_OPTIONS_INIT;
  o.target_allocations = 98;
  o.headroom = 0.0;
  tf_capacity *c = capacity_of(pool, plan, &o);
  /* each relay owns 2 x 49 ports */
  ck_assert_int_eq(tf_capacity_allocations(c), 196);
  ck_assert_int_eq(tf_capacity_full_scale_allocations(c), 294);
  /* sizing is per family: one family must hold the whole target */
  ck_assert_int_eq(tf_capacity_addresses_needed(c), 2);
  cJSON *j = json_of(c);
  ck_assert_str_eq(str(j, "family"), "DualStack");
  const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "relays"), 0);
  ck_assert_double_eq(num(r0, "portsTotal"), 98);
  const cJSON *addrs = cJSON_GetObjectItem(r0, "addresses");
  ck_assert_int_eq(cJSON_GetArraySize(addrs), 2);
  ck_assert_str_eq(cJSON_GetArrayItem(addrs, 0)->valuestring, "203.0.113.1");
  ck_assert_str_eq(cJSON_GetArrayItem(addrs, 1)->valuestring, "2001:db8::1");
  ck_assert_double_eq(num(cJSON_GetObjectItem(j, "sizing"), "relaysNeeded"), 2);
  cJSON_Delete(j);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_capacity__partitioned_ip_adds_no_capacity)
{
  /* 49 ports split in 4 slices: 13, 12, 12, 12 */
  tf_pool *pool = pool_with("  replicas: 8\n", "{mode: PartitionedIP, partitionedIP: {relaysPerNode: 4}}",
                            "{start: 49152, end: 49200}");
  tf_plan *plan = plan_of(pool, NODELIST(NODE("n1", IP("ExternalIP", "203.0.113.1"), "") ","
                                                 NODE("n2", IP("ExternalIP", "203.0.113.2"), "")));
  ck_assert_uint_eq(tf_plan_relay_count(plan), 8);
  tf_capacity *c = capacity_of(pool, plan, NULL);
  /* 8 slices of 2 addresses: the same as 2 whole addresses */
  ck_assert_int_eq(tf_capacity_allocations(c), 98);
  ck_assert_int_eq(tf_capacity_full_scale_allocations(c), 98);
  cJSON *j = json_of(c);
  ck_assert_str_eq(str(j, "mode"), "PartitionedIP");
  ck_assert_double_eq(num(j, "relaysPerNode"), 4);
  ck_assert_double_eq(num(j, "placeable"), 8);
  ck_assert_str_eq(str(j, "partitionedNote"), "PartitionedIP adds no capacity: its relays split each address's ports");
  double sum = 0;
  const cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "relays")) sum += num(r, "portsTotal");
  ck_assert_double_eq(sum, 98);
  ck_assert_double_eq(num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "relays"), 0), "portsTotal"), 13);
  cJSON_Delete(j);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);

  /* 3 of 8 slices planned: 13 + 12 + 12; full scale still 2 addresses */
  pool = pool_with("  replicas: 3\n", "{mode: PartitionedIP, partitionedIP: {relaysPerNode: 4}}",
                   "{start: 49152, end: 49200}");
  plan = plan_of(pool, NODELIST(NODE("n1", IP("ExternalIP", "203.0.113.1"), "") ","
                                        NODE("n2", IP("ExternalIP", "203.0.113.2"), "")));
  tf_capacity_options o = TF_CAPACITY_OPTIONS_INIT;
  o.target_allocations = 100;
  o.headroom = 0.0;
  c = capacity_of(pool, plan, &o);
  ck_assert_int_eq(tf_capacity_allocations(c), 37);
  ck_assert_int_eq(tf_capacity_full_scale_allocations(c), 98);
  /* 100 / 49 -> 3 node addresses, each split in 4 relays */
  ck_assert_int_eq(tf_capacity_addresses_needed(c), 3);
  j = json_of(c);
  const cJSON *s = cJSON_GetObjectItem(j, "sizing");
  ck_assert_double_eq(num(s, "addressesNeeded"), 3);
  ck_assert_double_eq(num(s, "nodeAddressesNeeded"), 3);
  ck_assert_double_eq(num(s, "relaysNeeded"), 12);
  cJSON_Delete(j);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_capacity__external_ip_pool_and_pod_ip)
{
  tf_pool *pool = pool_with("  replicas: 5\n",
                            "{mode: ExternalIPPool, externalIPPool: {addresses: [\"198.51.100.0/28\"]}}",
                            "{start: 40000, end: 40999}");
  static const char ext_nodes[] =
      NODELIST(NODE("n1", IP("InternalIP", "10.0.0.1"), EXT_ADDRS "\"198.51.100.1,198.51.100.2\"") ","
               NODE("n2", IP("InternalIP", "10.0.0.2"), EXT_ADDRS "\"198.51.100.3,192.0.2.9\""));
  tf_plan *plan = plan_of(pool, ext_nodes);
  /* 192.0.2.9 is outside the declared pool: 3 placeable, 3 planned */
  ck_assert_uint_eq(tf_plan_relay_count(plan), 3);
  tf_capacity *c = capacity_of(pool, plan, NULL);
  ck_assert_int_eq(tf_capacity_allocations(c), 3000);
  ck_assert_int_eq(tf_capacity_full_scale_allocations(c), 3000);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);

  pool = pool_with("  replicas: 1\n", "{mode: PodIP}", "{start: 40000, end: 40999}");
  plan = plan_of(pool, NODELIST(NODE("n1", IP("InternalIP", "10.0.0.1"),
                                     "\"turnfleet.hzmi.dev/relay-pod-addresses\": \"10.1.0.5,10.1.0.6\"")));
  c = capacity_of(pool, plan, NULL);
  ck_assert_int_eq(tf_capacity_allocations(c), 1000);
  ck_assert_int_eq(tf_capacity_full_scale_allocations(c), 2000);
  cJSON *j = json_of(c);
  ck_assert_str_eq(str(j, "mode"), "PodIP");
  cJSON_Delete(j);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_capacity__bandwidth_bound)
{
  tf_pool *pool = pool_with("  replicas: 1\n", "{mode: HostNetwork}", "{start: 49152, end: 49200}");
  tf_plan *plan = plan_of(pool, three_nodes);
  tf_capacity_options o = TF_CAPACITY_OPTIONS_INIT;
  /* 1000 x 2.5 Mbit/s = 2500 Mbit/s: 25 nodes of 100 Mbit/s; ports need 26 addresses */
  o.target_allocations = 1000;
  o.session_kbps = 2500;
  o.node_mbps = 100;
  tf_capacity *c = capacity_of(pool, plan, &o);
  ck_assert_int_eq(tf_capacity_nodes_for_bandwidth(c), 25);
  ck_assert_int_eq(tf_capacity_addresses_needed(c), 26);
  cJSON *j = json_of(c);
  const cJSON *s = cJSON_GetObjectItem(j, "sizing");
  ck_assert_double_eq(num(s, "nodesForBandwidth"), 25);
  ck_assert_double_eq(num(s, "sessionKbps"), 2500);
  ck_assert_double_eq(num(s, "nodeMbps"), 100);
  ck_assert_str_eq(str(s, "limitedBy"), "ports");
  cJSON_Delete(j);
  tf_capacity_free(c);

  /* half the node bandwidth: 50 nodes, bandwidth is the bound */
  o.node_mbps = 50;
  c = capacity_of(pool, plan, &o);
  ck_assert_int_eq(tf_capacity_nodes_for_bandwidth(c), 50);
  j = json_of(c);
  ck_assert_str_eq(str(cJSON_GetObjectItem(j, "sizing"), "limitedBy"), "bandwidth");
  cJSON_Delete(j);
  tf_capacity_free(c);

  /* exact multiples and fractional rates: 1000 x 1000 kbit/s on 1000 Mbit/s nodes = 1; one more = 2 */
  o.session_kbps = 1000;
  o.node_mbps = 1000;
  c = capacity_of(pool, plan, &o);
  ck_assert_int_eq(tf_capacity_nodes_for_bandwidth(c), 1);
  tf_capacity_free(c);
  o.target_allocations = 1001;
  c = capacity_of(pool, plan, &o);
  ck_assert_int_eq(tf_capacity_nodes_for_bandwidth(c), 2);
  tf_capacity_free(c);
  /* 3 x 0.1 kbit/s = 0.3 kbit/s on 0.0003 Mbit/s nodes: exactly 1 (in doubles 3 x 0.1 is 0.30000000000000004) */
  o.target_allocations = 3;
  o.session_kbps = 0.1;
  o.node_mbps = 0.0003;
  c = capacity_of(pool, plan, &o);
  ck_assert_int_eq(tf_capacity_nodes_for_bandwidth(c), 1);
  tf_capacity_free(c);

  /* one of the two rates missing: no bandwidth bound */
  o.target_allocations = 1000;
  o.session_kbps = 2500;
  o.node_mbps = 0;
  c = capacity_of(pool, plan, &o);
  ck_assert_int_eq(tf_capacity_nodes_for_bandwidth(c), 0);
  j = json_of(c);
  ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "sizing"), "nodesForBandwidth"));
  cJSON_Delete(j);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

static void expect_bad(const tf_pool *pool, const tf_plan *plan, const tf_capacity_options *o, const char *field)
{
  tf_capacity *c = (tf_capacity *)(uintptr_t)0x1;
  tf_err rc = tf_capacity_new(&c, pool, plan, o);
  ck_assert_msg(rc == TF_EINVALID, "%s: expected TF_EINVALID, got %d", field, rc);
  ck_assert_ptr_eq(c, (tf_capacity *)(uintptr_t)0x1);
  ck_assert_msg(strncmp(tf_error_last()->message, field, strlen(field)) == 0, "message \"%s\" does not start with %s",
                tf_error_last()->message, field);
}

START_TEST(test_capacity__rejects_bad_options)
{
  tf_pool *pool = pool_with("  replicas: 1\n", "{mode: HostNetwork}", "{start: 49152, end: 49200}");
  tf_plan *plan = plan_of(pool, three_nodes);
  tf_capacity_options o = TF_CAPACITY_OPTIONS_INIT;
  o.headroom = 1.0;
  expect_bad(pool, plan, &o, "headroom");
  o.headroom = -0.1;
  expect_bad(pool, plan, &o, "headroom");
  o.headroom = NAN;
  expect_bad(pool, plan, &o, "headroom");
  o.headroom = 0.9999999;
  expect_bad(pool, plan, &o, "headroom");
  o.headroom = 0.999999;
  tf_capacity *c = capacity_of(pool, plan, &o);
  tf_capacity_free(c);
  o.headroom = 0.2;
  o.target_allocations = -1;
  expect_bad(pool, plan, &o, "target_allocations");
  o.target_allocations = 1000000000001LL;
  expect_bad(pool, plan, &o, "target_allocations");
  o.target_allocations = 10;
  o.session_kbps = -1;
  expect_bad(pool, plan, &o, "session_kbps");
  o.session_kbps = INFINITY;
  expect_bad(pool, plan, &o, "session_kbps");
  o.session_kbps = 0.0001;
  expect_bad(pool, plan, &o, "session_kbps");
  o.session_kbps = 100;
  o.node_mbps = -5;
  expect_bad(pool, plan, &o, "node_mbps");
  o.node_mbps = NAN;
  expect_bad(pool, plan, &o, "node_mbps");
  o.node_mbps = 100;
  o.version = 0;
  expect_bad(pool, plan, &o, "opts.version");
  o.version = TF_CAPACITY_OPTIONS_VERSION + 1;
  expect_bad(pool, plan, &o, "opts.version");
  o.version = TF_CAPACITY_OPTIONS_VERSION;
  c = capacity_of(pool, plan, &o);
  tf_capacity_free(c);

  /* a plan of another pool */
  tf_pool *other = tf_test_pool("metadata: {name: other}\nspec: {auth: {realm: r, secretRef: {name: s}}}\n");
  expect_bad(other, plan, NULL, "plan");
  tf_pool_free(other);

  ck_assert_int_eq(tf_capacity_new(NULL, pool, plan, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_capacity_new(&c, NULL, plan, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_capacity_new(&c, pool, NULL, NULL), TF_EINVALID);
  char *text = NULL;
  ck_assert_int_eq(tf_capacity_to_json(&text, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_capacity_to_json(NULL, c), TF_EINVALID);
  ck_assert_int_eq(tf_capacity_allocations(NULL), 0);
  ck_assert_int_eq(tf_capacity_full_scale_allocations(NULL), 0);
  ck_assert_int_eq(tf_capacity_addresses_needed(NULL), 0);
  ck_assert_int_eq(tf_capacity_nodes_for_bandwidth(NULL), 0);
  tf_capacity_free(NULL);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_capacity__json_is_stable)
{
  tf_pool *pool = pool_with("  replicas: 1\n", "{mode: HostNetwork}", "{start: 49152, end: 49200}");
  tf_plan *plan = plan_of(pool, three_nodes);
  tf_capacity_options o = TF_CAPACITY_OPTIONS_INIT;
  o.target_allocations = 1000;
  o.session_kbps = 2500;
  o.node_mbps = 100;
  tf_capacity *c = capacity_of(pool, plan, &o);
  char *text = NULL;
  TF_OK_OR_FAIL(tf_capacity_to_json(&text, c));
  ck_assert_str_eq(text,
                   "{\"pool\":\"cap\",\"namespace\":\"default\",\"mode\":\"HostNetwork\",\"family\":\"IPv4\","
                   "\"portsPerAddress\":49,\"relays\":[{\"name\":\"cap-relay-5rkx2\",\"addresses\":[\"203.0.113.1\"],"
                   "\"portRange\":{\"start\":49152,\"end\":49200},\"portsTotal\":49}],\"allocations\":49,"
                   "\"placeable\":3,\"fullScaleAllocations\":147,\"sizing\":{\"targetAllocations\":1000,"
                   "\"headroom\":0.2,\"addressesNeeded\":26,\"relaysNeeded\":26,\"sessionKbps\":2500,"
                   "\"nodeMbps\":100,\"nodesForBandwidth\":25,\"limitedBy\":\"ports\"}}");
  tf_free(text);
  tf_capacity_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

Suite *tf_test_capacity_suite(void)
{
  Suite *s = suite_create("capacity");
  TCase *tc = tcase_create("capacity");
  tcase_set_tags(tc, "normal");
  tcase_add_test(tc, test_capacity__options_init);
  tcase_add_test(tc, test_capacity__host_network_ipv4);
  tcase_add_test(tc, test_capacity__ceilings_are_exact);
  tcase_add_test(tc, test_capacity__dual_stack_counts_both_families);
  tcase_add_test(tc, test_capacity__partitioned_ip_adds_no_capacity);
  tcase_add_test(tc, test_capacity__external_ip_pool_and_pod_ip);
  tcase_add_test(tc, test_capacity__bandwidth_bound);
  tcase_add_test(tc, test_capacity__rejects_bad_options);
  tcase_add_test(tc, test_capacity__json_is_stable);
  suite_add_tcase(s, tc);
  return s;
}
