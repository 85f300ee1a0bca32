/* plan: identities per addressing mode, stable names, scale-down, conflicts,
 * stable JSON, fleets; property tests over random inventories. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "tf_test.h"

/* ---- helpers ---- */

/* A pool from a printf-formatted YAML text. */
static tf_pool *pool_fmt(const char *fmt, ...) TF__PRINTF(1, 2);
static tf_pool *pool_fmt(const char *fmt, ...)
{
  char text[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  return tf_test_pool(text);
}

#define POOL_TAIL "  auth: {realm: plan.turnfleet.test, secretRef: {name: plan-secret}}\n"

/* A pool NAME with REPLICAS, the ADDRESSING flow mapping and relay range START-END. */
static tf_pool *pool_of(const char *name, int replicas, const char *addressing, int start, int end)
{
  return pool_fmt("metadata: {name: %s}\nspec:\n  replicas: %d\n  addressing: %s\n"
                  "  relayPortRange: {start: %d, end: %d}\n" POOL_TAIL,
                  name, replicas, addressing, start, end);
}

static tf_plan *plan_of(const tf_pool *pool, const tf_nodes *nodes, const tf_existing *fleet)
{
  tf_plan *plan = NULL;
  TF_OK_OR_FAIL(tf_plan_new(&plan, pool, nodes, fleet));
  ck_assert_ptr_nonnull(plan);
  return plan;
}

static char *plan_json(const tf_plan *plan)
{
  char *json = NULL;
  TF_OK_OR_FAIL(tf_plan_to_json(&json, plan));
  return json;
}

/* "node identity slice" of every relay, one a line. */
static char *plan_summary(const tf_plan *plan)
{
  tf_buf b;
  tf_buf__init(&b);
  for (size_t i = 0; i < tf_plan_relay_count(plan); i++) {
    const tf_relay *r = tf_plan_relay(plan, i);
    tf_buf__printf(&b, "%s %s %u\n", tf_relay_node(r), tf_relay_identity(r), tf_relay_slice(r));
  }
  char *out = NULL;
  tf_buf__puts(&b, "");
  TF_OK_OR_FAIL(tf_buf__detach(&b, &out));
  return out;
}

static void assert_summary(const tf_plan *plan, const char *expected)
{
  char *got = plan_summary(plan);
  ck_assert_msg(strcmp(got, expected) == 0, "plan:\n%swant:\n%s", got, expected);
  free(got);
}

static void assert_condition(const tf_plan *plan, size_t i, const char *type, const char *status, const char *reason,
                             const char *message)
{
  const char *t, *s, *r, *m;
  TF_OK_OR_FAIL(tf_plan_condition(plan, i, &t, &s, &r, &m));
  ck_assert_str_eq(t, type);
  ck_assert_str_eq(s, status);
  ck_assert_str_eq(r, reason);
  if (message) ck_assert_str_eq(m, message);
}

static const char *name_for(const char *pool, const char *identity)
{
  static char buf[TF_RELAY_NAME_MAX];
  TF_OK_OR_FAIL(tf_relay_name_for(buf, sizeof(buf), pool, identity));
  return buf;
}

/* Node description for building NodeList JSON in tests. */
typedef struct tnode {
  const char *name;
  const char *internal; /* comma list of InternalIP */
  const char *external; /* comma list of ExternalIP */
  const char *relay_address;
  const char *external_addresses;
  const char *pod_addresses;
  const char *ready; /* "True" | "False" | "Unknown" | NULL (no condition) */
  int unschedulable;
  int unlabelled;
  int production; /* without TF_LABEL_DEVELOPMENT: its loopback addresses are refused */
} tnode;

static void put_addresses(tf_buf *b, const char *list, const char *type, int *first)
{
  if (!list) return;
  char copy[1024];
  snprintf(copy, sizeof(copy), "%s", list);
  for (char *save = NULL, *a = strtok_r(copy, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
    tf_buf__printf(b, "%s{\"type\": \"%s\", \"address\": \"%s\"}", *first ? "" : ", ", type, a);
    *first = 0;
  }
}

/* A NodeList with nodes[order[i]] as item i (order may be NULL). */
static char *nodes_json(const tnode *nodes, size_t n, const size_t *order)
{
  tf_buf b;
  tf_buf__init(&b);
  tf_buf__puts(&b, "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [");
  for (size_t k = 0; k < n; k++) {
    const tnode *t = &nodes[order ? order[k] : k];
    tf_buf__printf(&b, "%s\n {\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"%s\", \"labels\": {"
                       "\"kubernetes.io/hostname\": \"%s\"%s%s}, \"annotations\": {\"node.alpha.kubernetes.io/ttl\": \"0\"",
                   k ? "," : "", t->name, t->name, t->unlabelled ? "" : ", \"turnfleet.hzmi.dev/relay-node\": \"true\"",
                   t->production ? "" : ", \"" TF_LABEL_DEVELOPMENT "\": \"true\"");
    if (t->relay_address) tf_buf__printf(&b, ", \"" TF_ANNOTATION_RELAY_ADDRESS "\": \"%s\"", t->relay_address);
    if (t->external_addresses)
      tf_buf__printf(&b, ", \"" TF_ANNOTATION_EXTERNAL_ADDRESSES "\": \"%s\"", t->external_addresses);
    if (t->pod_addresses) tf_buf__printf(&b, ", \"" TF_ANNOTATION_RELAY_POD_ADDRESSES "\": \"%s\"", t->pod_addresses);
    tf_buf__printf(&b, "}}, \"spec\": {\"unschedulable\": %s}, \"status\": {\"conditions\": [",
                   t->unschedulable ? "true" : "false");
    if (t->ready) tf_buf__printf(&b, "{\"type\": \"Ready\", \"status\": \"%s\"}", t->ready);
    tf_buf__puts(&b, "], \"addresses\": [");
    int first = 1;
    put_addresses(&b, t->external, "ExternalIP", &first);
    put_addresses(&b, t->internal, "InternalIP", &first);
    tf_buf__printf(&b, "%s{\"type\": \"Hostname\", \"address\": \"%s\"}]}}", first ? "" : ", ", t->name);
  }
  tf_buf__puts(&b, "\n]}\n");
  char *out = NULL;
  TF_OK_OR_FAIL(tf_buf__detach(&b, &out));
  return out;
}

static tf_nodes *nodes_of(const tnode *nodes, size_t n)
{
  char *json = nodes_json(nodes, n, NULL);
  tf_nodes *out = tf_test_nodes(json);
  free(json);
  return out;
}

static tf_existing *fleet_new(void)
{
  tf_existing *f = NULL;
  TF_OK_OR_FAIL(tf_existing_new(&f));
  return f;
}

static const tnode LOOP3[] = {
    {"relay-a", "127.0.0.11", NULL, NULL, NULL, NULL, "True", 0, 0},
    {"relay-b", "127.0.0.12", NULL, NULL, NULL, NULL, "True", 0, 0},
    {"relay-c", "127.0.0.13", NULL, NULL, NULL, NULL, "True", 0, 0},
};

#define LOOP_HN "{mode: HostNetwork, family: IPv4}"

/* ---- names and identities ---- */

START_TEST(test_plan__name_examples)
{
  char buf[TF_RELAY_NAME_MAX];
  TF_OK_OR_FAIL(tf_relay_name_for(buf, sizeof(buf), "demo", "203.0.113.7/49152-49200"));
  ck_assert_str_eq(buf, "demo-relay-mb7l6");
  TF_OK_OR_FAIL(tf_relay_name_for(buf, sizeof(buf), "demo", "198.51.100.10/49152-49175"));
  ck_assert_str_eq(buf, "demo-relay-kf77m");
  ck_assert_uint_eq(tf_fnv1a32__("203.0.113.7/49152-49200", 23), 0x8994b100u);
  ck_assert_int_eq(tf_relay_name_for(buf, 16, "demo", "203.0.113.7/49152-49200"), TF_EBUFS);
  TF_OK_OR_FAIL(tf_relay_name_for(buf, 17, "demo", "203.0.113.7/49152-49200"));
  ck_assert_int_eq(tf_relay_name_for(buf, sizeof(buf), "", "x"), TF_EINVALID);
  ck_assert_int_eq(tf_relay_name_for(buf, sizeof(buf), "demo", NULL), TF_EINVALID);
  ck_assert_int_eq(tf_relay_name_for(NULL, 64, "demo", "x"), TF_EINVALID);
  /* 51 characters fit in 63, 52 do not */
  char pool[60];
  memset(pool, 'p', 52);
  pool[52] = '\0';
  ck_assert_int_eq(tf_relay_name_for(buf, sizeof(buf), pool, "x"), TF_EINVALID);
  pool[51] = '\0';
  TF_OK_OR_FAIL(tf_relay_name_for(buf, sizeof(buf), pool, "x"));
  ck_assert_uint_eq(strlen(buf), 63);

  /* the planner names a fresh relay the same way */
  static const tnode edge[] = {{"edge-1", "10.0.0.1", "203.0.113.7", NULL, NULL, NULL, "True", 0, 0}};
  tf_nodes *nodes = nodes_of(edge, 1);
  tf_pool *p = pool_of("demo", 1, LOOP_HN, 49152, 49200);
  tf_plan *plan = plan_of(p, nodes, NULL);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 1);
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 0)), "demo-relay-mb7l6");
  tf_plan_free(plan);
  tf_pool_free(p);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__identity_parse_and_format)
{
  tf_addr a[2];
  size_t n;
  tf_port_range r;
  char buf[128];
  TF_OK_OR_FAIL(tf_identity__parse("2001:0db8::7,203.0.113.7/49152-49200", a, &n, &r));
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(a[0].family, TF_AF_INET);
  TF_OK_OR_FAIL(tf_identity__format(buf, sizeof(buf), a, n, r));
  ck_assert_str_eq(buf, "203.0.113.7,2001:db8::7/49152-49200");
  ck_assert_int_eq(tf_identity__format(buf, 10, a, n, r), TF_EBUFS);
  TF_OK_OR_FAIL(tf_identity__parse("::1/1024-1024", a, &n, &r));
  TF_OK_OR_FAIL(tf_identity__format(buf, sizeof(buf), a, n, r));
  ck_assert_str_eq(buf, "::1/1024-1024");

  static const struct {
    const char *identity, *message;
  } bad[] = {
      {"203.0.113.7", "\"203.0.113.7\" is not a relay identity ADDR[,ADDR]/START-END"},
      {"/1-2", "\"/1-2\" is not a relay identity ADDR[,ADDR]/START-END"},
      {"203.0.113.7,/1-2", "\"203.0.113.7,/1-2\" is not a relay identity ADDR[,ADDR]/START-END"},
      {"203.0.113/1-2", "\"203.0.113\" is not an IPv4 or IPv6 address"},
      {"203.0.113.7/50-40", "\"50-40\": end 40 is below start 50"},
      {"203.0.113.7/49152", "\"49152\" is not a port range START-END (ports 1-65535)"},
      {"198.51.100.1,198.51.100.2/1-2", "\"198.51.100.1,198.51.100.2/1-2\": two IPv4 addresses"},
      {"::1,::2/1-2", "\"::1,::2/1-2\": two IPv6 addresses"},
      {"1.1.1.1,::1,2.2.2.2/1-2", "\"1.1.1.1,::1,2.2.2.2/1-2\": a relay has at most two addresses"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ck_assert_msg(tf_identity__parse(bad[i].identity, a, &n, &r) == TF_EINVALID, "%s", bad[i].identity);
    ck_assert_str_eq(tf_error_last()->message, bad[i].message);
  }
}
END_TEST

/* ---- modes x families ---- */

START_TEST(test_plan__host_network_families)
{
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  tf_pool *pool = pool_of("hn", 5, "{mode: HostNetwork, family: IPv4}", 49152, 49200);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 203.0.113.11/49152-49200 0\n"
                       "worker-4 198.51.100.14/49152-49200 0\n"
                       "worker-5 10.0.0.15/49152-49200 0\n");
  const tf_relay *r = tf_plan_relay(plan, 0);
  ck_assert_str_eq(tf_relay_name(r), name_for("hn", "203.0.113.11/49152-49200"));
  ck_assert_uint_eq(tf_relay_ports_total(r), 49);
  ck_assert_uint_eq(tf_relay_address_count(r), 1);
  ck_assert_uint_eq(tf_plan_placeable_count(plan), 3);
  assert_condition(plan, 0, "Placed", "False", "InsufficientAddresses",
                   "3 of 5 replicas placed: 3 relay identities on 3 of 7 nodes (one per eligible node address of the family); "
                   "not eligible: control-plane (nodeSelector turnfleet.hzmi.dev/relay-node=true), worker-2 (NotReady), worker-3 (cordoned), worker-6 (nodeSelector turnfleet.hzmi.dev/relay-node=true)");
  assert_condition(plan, 1, "AddressConflict", "False", "NoConflict", NULL);
  tf_plan_free(plan);
  tf_pool_free(pool);

  pool = pool_of("hn", 3, "{mode: HostNetwork, family: IPv6}", 49152, 49200);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 2001:db8::11/49152-49200 0\n"
                       "worker-4 2001:db8:1::14/49152-49200 0\n"
                       "worker-5 fd00::15/49152-49200 0\n");
  assert_condition(plan, 0, "Placed", "True", "AllPlaced", "3 of 3 replicas placed");
  tf_plan_free(plan);
  tf_pool_free(pool);

  pool = pool_of("hn", 3, "{mode: HostNetwork, family: DualStack}", 49152, 49200);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 203.0.113.11,2001:db8::11/49152-49200 0\n"
                       "worker-4 198.51.100.14,2001:db8:1::14/49152-49200 0\n"
                       "worker-5 10.0.0.15,fd00::15/49152-49200 0\n");
  r = tf_plan_relay(plan, 1);
  ck_assert_uint_eq(tf_relay_address_count(r), 2);
  ck_assert_uint_eq(tf_relay_ports_total(r), 98);
  tf_addr a;
  char buf[TF_ADDR_STRLEN];
  TF_OK_OR_FAIL(tf_relay_address(&a, r, 1));
  TF_OK_OR_FAIL(tf_addr_format(buf, sizeof(buf), &a));
  ck_assert_str_eq(buf, "2001:db8:1::14");
  ck_assert_int_eq(tf_relay_address(&a, r, 2), TF_ENOTFOUND);
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__dual_stack_needs_both_families)
{
  /* only relay-a has an IPv6 address */
  tf_nodes *nodes = tf_test_nodes_file("nodes/loopback.json");
  tf_pool *pool = pool_of("dual", 3, "{mode: HostNetwork, family: DualStack}", 50000, 50099);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "relay-a 127.0.0.11,::1/50000-50099 0\n");
  ck_assert_uint_eq(tf_plan_placeable_count(plan), 1);
  assert_condition(plan, 0, "Placed", "False", "InsufficientAddresses",
                   "1 of 3 replicas placed: 1 relay identity on 3 of 3 nodes (one per eligible node address of the family)");
  tf_plan_free(plan);
  tf_pool_free(pool);
  /* the same for PartitionedIP */
  pool = pool_of("dual", 3, "{mode: PartitionedIP, family: DualStack, partitionedIP: {relaysPerNode: 2}}", 50000,
                 50099);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "relay-a 127.0.0.11,::1/50000-50049 0\nrelay-a 127.0.0.11,::1/50050-50099 1\n");
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__external_ip_pool_families)
{
  /* worker-1 carries 203.0.113.100, 203.0.113.101 and 2001:db8::100 */
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  tf_pool *pool = pool_of("ext", 4, "{mode: ExternalIPPool, family: IPv4, externalIPPool: {addresses: [203.0.113.96/28]}}",
                          49152, 49200);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 203.0.113.100/49152-49200 0\nworker-1 203.0.113.101/49152-49200 0\n");
  assert_condition(plan, 0, "Placed", "False", "InsufficientAddresses",
                   "2 of 4 replicas placed: 2 relay identities on 3 of 7 nodes (too few spec.addressing.externalIPPool addresses "
                   "on eligible nodes); not eligible: control-plane (nodeSelector turnfleet.hzmi.dev/relay-node=true), worker-2 (NotReady), worker-3 (cordoned), worker-6 (nodeSelector turnfleet.hzmi.dev/relay-node=true)");
  tf_plan_free(plan);
  tf_pool_free(pool);

  /* only the addresses inside the pool's prefixes */
  pool = pool_of("ext", 4, "{mode: ExternalIPPool, externalIPPool: {addresses: [203.0.113.101, 198.51.100.0/24]}}",
                 49152, 49200);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 203.0.113.101/49152-49200 0\n");
  tf_plan_free(plan);
  tf_pool_free(pool);

  pool = pool_of("ext", 4, "{mode: ExternalIPPool, family: IPv6, externalIPPool: {addresses: [\"2001:db8::100/120\"]}}",
                 49152, 49200);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 2001:db8::100/49152-49200 0\n");
  tf_plan_free(plan);
  tf_pool_free(pool);

  /* DualStack pairs the first IPv4 with the first IPv6; 203.0.113.101 has no partner */
  pool = pool_of("ext", 4,
                 "{mode: ExternalIPPool, family: DualStack, externalIPPool: {addresses: [203.0.113.0/24, "
                 "\"2001:db8::/64\"]}}",
                 49152, 49200);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 203.0.113.100,2001:db8::100/49152-49200 0\n");
  ck_assert_uint_eq(tf_plan_placeable_count(plan), 1);
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);

  /* addresses in sorted order within a node, nodes in name order */
  static const tnode two[] = {
      {"b", "10.0.0.2", NULL, NULL, "203.0.113.9, 203.0.113.3", NULL, "True", 0, 0},
      {"a", "10.0.0.1", NULL, NULL, "2001:db8::2,203.0.113.5,2001:db8::1,203.0.113.4", NULL, "True", 0, 0},
  };
  nodes = nodes_of(two, 2);
  pool = pool_of("ext", 9,
                 "{mode: ExternalIPPool, family: DualStack, externalIPPool: {addresses: [203.0.113.0/24, "
                 "\"2001:db8::/64\"]}}",
                 49152, 49200);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "a 203.0.113.4,2001:db8::1/49152-49200 0\na 203.0.113.5,2001:db8::2/49152-49200 0\n");
  tf_plan_free(plan);
  tf_pool_free(pool);
  pool = pool_of("ext", 9, "{mode: ExternalIPPool, externalIPPool: {addresses: [203.0.113.0/24]}}", 49152, 49200);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "a 203.0.113.4/49152-49200 0\na 203.0.113.5/49152-49200 0\n"
                       "b 203.0.113.3/49152-49200 0\nb 203.0.113.9/49152-49200 0\n");
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__pod_ip_families)
{
  /* worker-1 lets relay pods take 192.0.2.10, 192.0.2.11 and 2001:db8:2::10 */
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  tf_pool *pool = pool_of("pods", 5, "{mode: PodIP, family: IPv4}", 40000, 40999);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 192.0.2.10/40000-40999 0\nworker-1 192.0.2.11/40000-40999 0\n");
  tf_plan_free(plan);
  tf_pool_free(pool);
  pool = pool_of("pods", 5, "{mode: PodIP, family: IPv6, podIP: {network: default/relay-net}}", 40000, 40999);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 2001:db8:2::10/40000-40999 0\n");
  tf_plan_free(plan);
  tf_pool_free(pool);
  pool = pool_of("pods", 5, "{mode: PodIP, family: DualStack}", 40000, 40999);
  plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 192.0.2.10,2001:db8:2::10/40000-40999 0\n");
  ck_assert_uint_eq(tf_relay_ports_total(tf_plan_relay(plan, 0)), 2000);
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__partitioned_slices_with_remainder)
{
  /* 49 ports in 4 slices: 13, 12, 12, 12 */
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  tf_pool *pool = pool_fmt("metadata: {name: part}\nspec:\n  replicas: 12\n"
                           "  addressing: {mode: PartitionedIP, family: IPv4, partitionedIP: {relaysPerNode: 4}}\n"
                           "  relayPortRange: {start: 49152, end: 49200}\n"
                           "  listeners:\n"
                           "    - {name: turn, protocol: udp, port: 3478}\n"
                           "    - {name: turn-tcp, protocol: tcp, port: 3478}\n"
                           "    - {name: turns, protocol: tls, port: 5349, tlsSecretRef: {name: part-tls}}\n" POOL_TAIL);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "worker-1 203.0.113.11/49152-49164 0\n"
                       "worker-1 203.0.113.11/49165-49176 1\n"
                       "worker-1 203.0.113.11/49177-49188 2\n"
                       "worker-1 203.0.113.11/49189-49200 3\n"
                       "worker-4 198.51.100.14/49152-49164 0\n"
                       "worker-4 198.51.100.14/49165-49176 1\n"
                       "worker-4 198.51.100.14/49177-49188 2\n"
                       "worker-4 198.51.100.14/49189-49200 3\n"
                       "worker-5 10.0.0.15/49152-49164 0\n"
                       "worker-5 10.0.0.15/49165-49176 1\n"
                       "worker-5 10.0.0.15/49177-49188 2\n"
                       "worker-5 10.0.0.15/49189-49200 3\n");
  const tf_relay *r = tf_plan_relay(plan, 2);
  ck_assert_uint_eq(tf_relay_slice(r), 2);
  ck_assert_uint_eq(tf_relay_listener_port(r, 0), 3480);
  ck_assert_uint_eq(tf_relay_listener_port(r, 1), 3480);
  ck_assert_uint_eq(tf_relay_listener_port(r, 2), 5351);
  ck_assert_uint_eq(tf_relay_listener_port(r, 3), 0);
  ck_assert_uint_eq(tf_relay_ports_total(tf_plan_relay(plan, 0)), 13);
  ck_assert_uint_eq(tf_relay_ports_total(r), 12);
  ck_assert_uint_eq(plan->ports_per_address, 49);
  /* every slice has its own name */
  for (size_t i = 1; i < tf_plan_relay_count(plan); i++)
    ck_assert_str_ne(tf_relay_name(tf_plan_relay(plan, i)), tf_relay_name(tf_plan_relay(plan, i - 1)));
  assert_condition(plan, 0, "Placed", "True", "AllPlaced", "12 of 12 replicas placed");
  tf_plan_free(plan);
  tf_pool_free(pool);

  pool = pool_of("part", 2, "{mode: PartitionedIP, family: IPv6, partitionedIP: {relaysPerNode: 3}}", 50000, 50009);
  plan = plan_of(pool, nodes, NULL);
  /* replicas 2: the first two in (node, address, range) order */
  assert_summary(plan, "worker-1 2001:db8::11/50000-50003 0\nworker-1 2001:db8::11/50004-50006 1\n");
  ck_assert_uint_eq(tf_plan_placeable_count(plan), 9);
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

/* ---- names kept, salted, scaled down ---- */

START_TEST(test_plan__salted_name_on_clash)
{
  static const tnode edge[] = {{"edge-1", "10.0.0.1", "203.0.113.7", NULL, NULL, NULL, "True", 0, 0}};
  tf_nodes *nodes = nodes_of(edge, 1);
  tf_pool *pool = pool_of("demo", 1, LOOP_HN, 49152, 49200);
  /* demo-relay-mb7l6 is held by another identity of this pool (a relay still draining) */
  tf_existing *fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "demo-relay-mb7l6", "203.0.113.8/49152-49200", 3, NULL, 0));
  tf_plan *plan = plan_of(pool, nodes, fleet);
  const tf_relay *r = tf_plan_relay(plan, 0);
  ck_assert_str_eq(tf_relay_identity(r), "203.0.113.7/49152-49200");
  ck_assert_str_eq(tf_relay_name(r), name_for("demo", "203.0.113.7/49152-49200#1"));
  ck_assert_str_ne(tf_relay_name(r), "demo-relay-mb7l6");
  ck_assert_int_eq(r->is_new, 1);
  tf_plan_free(plan);
  tf_existing_free(fleet);

  /* the same when the record names its pool; another pool's name is no clash */
  fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, "demo", "demo-relay-mb7l6", "203.0.113.8/49152-49200", 3, NULL, 0));
  plan = plan_of(pool, nodes, fleet);
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 0)), name_for("demo", "203.0.113.7/49152-49200#1"));
  tf_plan_free(plan);
  tf_existing_free(fleet);
  fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, "other", "demo-relay-mb7l6", "203.0.113.8/49152-49200", 3, NULL, 0));
  plan = plan_of(pool, nodes, fleet);
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 0)), "demo-relay-mb7l6");
  tf_plan_free(plan);
  tf_existing_free(fleet);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

typedef struct named {
  char name[TF_RELAY_NAME_MAX];
  uint32_t i;
} named;

static int named_cmp(const void *a, const void *b)
{
  const named *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->i < y->i ? -1 : x->i > y->i);
}

START_TEST(test_plan__salted_name_when_two_identities_hash_alike)
{
  /* find two addresses whose identities get the same 5 characters */
  enum { N = 20000 };
  named *names = malloc(N * sizeof(*names));
  ck_assert_ptr_nonnull(names);
  for (uint32_t i = 0; i < N; i++) {
    char identity[64];
    snprintf(identity, sizeof(identity), "10.%u.%u.%u/49152-49200", (i + 1) >> 16, ((i + 1) >> 8) & 255, (i + 1) & 255);
    TF_OK_OR_FAIL(tf_relay_name_for(names[i].name, sizeof(names[i].name), "coll", identity));
    names[i].i = i + 1;
  }
  qsort(names, N, sizeof(*names), named_cmp);
  uint32_t first = 0, second = 0;
  for (size_t k = 1; k < N && !first; k++)
    if (strcmp(names[k].name, names[k - 1].name) == 0) {
      first = names[k - 1].i;
      second = names[k].i;
    }
  free(names);
  ck_assert_uint_ne(first, 0);
  char a1[32], a2[32], id2[64];
  snprintf(a1, sizeof(a1), "10.%u.%u.%u", first >> 16, (first >> 8) & 255, first & 255);
  snprintf(a2, sizeof(a2), "10.%u.%u.%u", second >> 16, (second >> 8) & 255, second & 255);
  snprintf(id2, sizeof(id2), "%s/49152-49200", a2);
  /* node "a" carries the first address, so it is named first */
  tnode two[] = {{"a", a1, NULL, NULL, NULL, NULL, "True", 0, 0}, {"b", a2, NULL, NULL, NULL, NULL, "True", 0, 0}};
  tf_nodes *nodes = nodes_of(two, 2);
  tf_pool *pool = pool_of("coll", 2, LOOP_HN, 49152, 49200);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 2);
  const tf_relay *rb = tf_plan_relay(plan, 1);
  ck_assert_str_eq(tf_relay_identity(rb), id2);
  ck_assert_str_eq(tf_relay_name(rb), name_for("coll", strcat(id2, "#1")));
  ck_assert_str_ne(tf_relay_name(tf_plan_relay(plan, 0)), tf_relay_name(rb));
  ck_assert_ptr_eq(tf_plan_find(plan, tf_relay_name(rb)), rb);
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__kept_names)
{
  tf_nodes *nodes = nodes_of(LOOP3, 3);
  tf_pool *pool = pool_of("loop", 3, LOOP_HN, 50000, 50099);
  tf_existing *fleet = fleet_new();
  /* kept whatever the name; the identity is compared in canonical form */
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-first", "127.0.0.12/50000-50099", 4, NULL, 0));
  /* gone from the inventory: not planned */
  TF_OK_OR_FAIL(tf_existing_add(fleet, "loop", "loop-relay-gone", "127.0.0.99/50000-50099", 0, NULL, 0));
  /* same address, other range: no longer this pool's identity */
  TF_OK_OR_FAIL(tf_existing_add(fleet, "", "loop-relay-oldrange", "127.0.0.13/50000-50049", 0, NULL, 0));
  tf_plan *plan = plan_of(pool, nodes, fleet);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 3);
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 0)), name_for("loop", "127.0.0.11/50000-50099"));
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 1)), "loop-relay-first");
  ck_assert_int_eq(tf_plan_relay(plan, 1)->is_new, 0);
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 2)), name_for("loop", "127.0.0.13/50000-50099"));
  ck_assert_ptr_null(tf_plan_find(plan, "loop-relay-gone"));
  ck_assert_ptr_null(tf_plan_find(plan, "loop-relay-oldrange"));
  ck_assert_ptr_eq(tf_plan_find(plan, "loop-relay-first"), tf_plan_relay(plan, 1));
  tf_plan_free(plan);
  tf_existing_free(fleet);

  /* two records of one identity: the one with more allocations keeps its name */
  fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-aaaaa", "127.0.0.11/50000-50099", 1, NULL, 0));
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-bbbbb", "127.0.0.11/50000-50099", 9, NULL, 0));
  plan = plan_of(pool, nodes, fleet);
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 0)), "loop-relay-bbbbb");
  tf_plan_free(plan);
  tf_existing_free(fleet);

  /* one name on two identities: one keeps it, the other gets a fresh (salted if needed) name */
  fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-ccccc", "127.0.0.11/50000-50099", 1, NULL, 0));
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-ccccc", "127.0.0.12/50000-50099", 2, NULL, 0));
  plan = plan_of(pool, nodes, fleet);
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 1)), "loop-relay-ccccc");
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 0)), name_for("loop", "127.0.0.11/50000-50099"));
  tf_plan_free(plan);
  tf_existing_free(fleet);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__scale_down_fewest_allocations_first)
{
  tf_nodes *nodes = nodes_of(LOOP3, 3);
  tf_existing *fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-one", "127.0.0.11/50000-50099", 2, NULL, 0));
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-two", "127.0.0.12/50000-50099", 7, NULL, 0));
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-three", "127.0.0.13/50000-50099", -1, NULL, 0));
  static const char *const want[] = {"", "loop-relay-two\n", "loop-relay-one\nloop-relay-two\n",
                                     "loop-relay-one\nloop-relay-two\nloop-relay-three\n"};
  for (int replicas = 0; replicas <= 3; replicas++) {
    tf_pool *pool = pool_of("loop", replicas, LOOP_HN, 50000, 50099);
    tf_plan *plan = plan_of(pool, nodes, fleet);
    char got[256] = "";
    for (size_t i = 0; i < tf_plan_relay_count(plan); i++) {
      strcat(got, tf_relay_name(tf_plan_relay(plan, i)));
      strcat(got, "\n");
    }
    ck_assert_str_eq(got, want[replicas]);
    tf_plan_free(plan);
    tf_pool_free(pool);
  }
  tf_existing_free(fleet);

  /* unknown (-1) counts as 0; a tie drops the larger name first */
  fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-one", "127.0.0.11/50000-50099", 0, NULL, 0));
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-two", "127.0.0.12/50000-50099", 1, NULL, 0));
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, "loop-relay-three", "127.0.0.13/50000-50099", -1, NULL, 0));
  tf_pool *pool = pool_of("loop", 2, LOOP_HN, 50000, 50099);
  tf_plan *plan = plan_of(pool, nodes, fleet);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 2);
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 0)), "loop-relay-one");
  ck_assert_str_eq(tf_relay_name(tf_plan_relay(plan, 1)), "loop-relay-two");
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_existing_free(fleet);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__insufficient_addresses)
{
  tf_nodes *nodes = nodes_of(LOOP3, 3);
  tf_pool *pool = pool_of("loop", 5, LOOP_HN, 50000, 50099);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 3);
  assert_condition(plan, 0, "Placed", "False", "InsufficientAddresses",
                   "3 of 5 replicas placed: 3 relay identities on 3 of 3 nodes (one per eligible node address of the family)");
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
  /* no eligible node at all */
  static const tnode none[] = {{"n1", "10.0.0.1", NULL, NULL, NULL, NULL, "False", 0, 0},
                               {"n2", "10.0.0.2", NULL, NULL, NULL, NULL, "True", 1, 0},
                               {"n3", "10.0.0.3", NULL, NULL, NULL, NULL, "True", 0, 1}};
  nodes = nodes_of(none, 3);
  pool = pool_of("loop", 1, LOOP_HN, 50000, 50099);
  plan = plan_of(pool, nodes, NULL);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 0);
  assert_condition(plan, 0, "Placed", "False", "InsufficientAddresses",
                   "0 of 1 replicas placed: 0 relay identities on 0 of 3 nodes (no node is eligible); not eligible: n1 (NotReady), "
                   "n2 (cordoned), n3 (nodeSelector turnfleet.hzmi.dev/relay-node=true)");
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

/* ---- conflicts ---- */

/* Plan loop (LOOP3, 50000-50099, udp/tcp 3478) against one claim; return the relay nodes. */
static char *conflict_case(const char *pool_name, const char *identity, const uint16_t *ports, size_t nports,
                           const char *status, const char *message)
{
  tf_nodes *nodes = nodes_of(LOOP3, 3);
  tf_pool *pool = pool_of("loop", 3, LOOP_HN, 50000, 50099);
  tf_existing *fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, pool_name, pool_name ? NULL : "loop-relay-x", identity, 0, ports, nports));
  tf_plan *plan = plan_of(pool, nodes, fleet);
  assert_condition(plan, 1, "AddressConflict", status, strcmp(status, "True") ? "NoConflict" : "AddressInUse",
                   message);
  char got[256] = "";
  for (size_t i = 0; i < tf_plan_relay_count(plan); i++) {
    strcat(got, tf_relay_node(tf_plan_relay(plan, i)));
    strcat(got, " ");
  }
  tf_plan_free(plan);
  tf_existing_free(fleet);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
  return strdup(got);
}

#define CONFLICT(pool, identity, ports, n, status, message, relays)                 \
  do {                                                                              \
    char *got = conflict_case(pool, identity, ports, n, status, message);           \
    ck_assert_msg(strcmp(got, relays) == 0, "%s: relays %s", identity, got);        \
    free(got);                                                                      \
  } while (0)

START_TEST(test_plan__address_conflict_with_other_pools)
{
  static const uint16_t p3479[] = {3479}, p3478[] = {3478}, p50010[] = {50010};
  /* overlapping relay range on the same address */
  CONFLICT("blue", "127.0.0.12/50050-50150", NULL, 0, "True", "127.0.0.12 is in use by pool blue", "relay-a relay-c ");
  /* our listener port inside the other's relay range */
  CONFLICT("green", "127.0.0.13/3000-4000", NULL, 0, "True", "127.0.0.13 is in use by pool green", "relay-a relay-b ");
  /* the other's listener port inside our range */
  CONFLICT("blue", "127.0.0.11/40000-40099", p50010, 1, "True", "127.0.0.11 is in use by pool blue",
           "relay-b relay-c ");
  /* the same listener port */
  CONFLICT("blue", "127.0.0.11/40000-40099", p3478, 1, "True", "127.0.0.11 is in use by pool blue",
           "relay-b relay-c ");
  /* disjoint ranges and listeners on the same address: no conflict */
  CONFLICT("blue", "127.0.0.11/40000-40099", p3479, 1, "False", NULL, "relay-a relay-b relay-c ");
  CONFLICT("blue", "127.0.0.11/50100-50199", NULL, 0, "False", NULL, "relay-a relay-b relay-c ");
  /* another address: no conflict */
  CONFLICT("blue", "127.0.0.14/50000-50099", p3478, 1, "False", NULL, "relay-a relay-b relay-c ");
  /* this pool's own record is no claim */
  CONFLICT("loop", "127.0.0.12/50050-50150", NULL, 0, "False", NULL, "relay-a relay-b relay-c ");
  CONFLICT(NULL, "127.0.0.12/50050-50150", NULL, 0, "False", NULL, "relay-a relay-b relay-c ");

  /* several pools and addresses, listed in address order; placeable excludes them */
  tf_nodes *nodes = nodes_of(LOOP3, 3);
  tf_pool *pool = pool_of("loop", 3, LOOP_HN, 50000, 50099);
  tf_existing *fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, "green", NULL, "127.0.0.13/50000-50000", 0, NULL, 0));
  TF_OK_OR_FAIL(tf_existing_add(fleet, "blue", "blue-relay-1", "127.0.0.13,::1/50099-50200", 0, NULL, 0));
  TF_OK_OR_FAIL(tf_existing_add(fleet, "blue", "blue-relay-2", "127.0.0.12/50099-50200", 0, NULL, 0));
  tf_plan *plan = plan_of(pool, nodes, fleet);
  assert_summary(plan, "relay-a 127.0.0.11/50000-50099 0\n");
  ck_assert_uint_eq(tf_plan_placeable_count(plan), 1);
  assert_condition(plan, 0, "Placed", "False", "InsufficientAddresses",
                   "1 of 3 replicas placed: 1 relay identity on 3 of 3 nodes (one per eligible node address of the family)");
  assert_condition(plan, 1, "AddressConflict", "True", "AddressInUse",
                   "127.0.0.12 is in use by pool blue; 127.0.0.13 is in use by pools blue, green");
  tf_plan_free(plan);
  tf_existing_free(fleet);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__address_conflict_partitioned_listener_shift)
{
  /* slice 1 serves its listeners on 3479: only it meets a claim of 3479 */
  tf_nodes *nodes = nodes_of(LOOP3, 3);
  tf_pool *pool = pool_of("part", 6, "{mode: PartitionedIP, partitionedIP: {relaysPerNode: 2}}", 50000, 50099);
  tf_existing *fleet = fleet_new();
  TF_OK_OR_FAIL(tf_existing_add(fleet, "blue", NULL, "127.0.0.11/3479-3479", 0, NULL, 0));
  tf_plan *plan = plan_of(pool, nodes, fleet);
  assert_summary(plan, "relay-a 127.0.0.11/50000-50049 0\n"
                       "relay-b 127.0.0.12/50000-50049 0\nrelay-b 127.0.0.12/50050-50099 1\n"
                       "relay-c 127.0.0.13/50000-50049 0\nrelay-c 127.0.0.13/50050-50099 1\n");
  ck_assert_uint_eq(tf_plan_placeable_count(plan), 5);
  tf_plan_free(plan);
  tf_existing_free(fleet);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__address_offered_by_two_nodes)
{
  static const tnode dup[] = {{"n2", "10.0.0.5", NULL, NULL, NULL, NULL, "True", 0, 0},
                              {"n1", "10.0.0.5", NULL, NULL, NULL, NULL, "True", 0, 0},
                              {"n3", "10.0.0.6", NULL, NULL, NULL, NULL, "True", 0, 0},
                              {"n4", "10.0.0.7", NULL, "10.0.0.5", NULL, NULL, "True", 0, 0}};
  tf_nodes *nodes = nodes_of(dup, 4);
  tf_pool *pool = pool_of("loop", 4, LOOP_HN, 50000, 50099);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  assert_summary(plan, "n1 10.0.0.5/50000-50099 0\nn3 10.0.0.6/50000-50099 0\n");
  ck_assert_uint_eq(tf_plan_placeable_count(plan), 2);
  assert_condition(plan, 1, "AddressConflict", "True", "AddressInUse",
                   "10.0.0.5 is offered by nodes n1, n2, n4 (only n1 uses it)");
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__conflict_message_is_bounded)
{
  tnode many[14];
  char names[14][16], addrs[14][24];
  tf_existing *fleet = fleet_new();
  for (unsigned i = 0; i < 14; i++) {
    snprintf(names[i], sizeof(names[i]), "n%02u", i);
    snprintf(addrs[i], sizeof(addrs[i]), "10.0.1.%u", i + 1);
    many[i] = (tnode){names[i], addrs[i], NULL, NULL, NULL, NULL, "True", 0, 0};
    char identity[64];
    snprintf(identity, sizeof(identity), "10.0.1.%u/50000-50000", i + 1);
    TF_OK_OR_FAIL(tf_existing_add(fleet, "blue", NULL, identity, 0, NULL, 0));
  }
  tf_nodes *nodes = nodes_of(many, 14);
  tf_pool *pool = pool_of("loop", 1, LOOP_HN, 50000, 50099);
  tf_plan *plan = plan_of(pool, nodes, fleet);
  const char *msg;
  TF_OK_OR_FAIL(tf_plan_condition(plan, 1, NULL, NULL, NULL, &msg));
  ck_assert_msg(strncmp(msg, "10.0.1.1 is in use by pool blue; 10.0.1.2 is in use by pool blue; ", 66) == 0, "%s", msg);
  ck_assert_msg(strstr(msg, "10.0.1.10 is in use by pool blue; and 4 more") != NULL, "%s", msg);
  ck_assert_ptr_null(strstr(msg, "10.0.1.11 "));
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
  tf_existing_free(fleet);
}
END_TEST

/* ---- JSON, fleets, arguments ---- */

static const char DEMO_JSON[] =
    "{\n"
    "  \"pool\": \"demo\",\n"
    "  \"namespace\": \"turn\",\n"
    "  \"replicas\": 2,\n"
    "  \"placeable\": 1,\n"
    "  \"relays\": [\n"
    "    {\n"
    "      \"name\": \"demo-relay-mb7l6\",\n"
    "      \"identity\": \"203.0.113.7/49152-49200\",\n"
    "      \"node\": \"edge-1\",\n"
    "      \"addresses\": [\"203.0.113.7\"],\n"
    "      \"portRange\": {\"start\": 49152, \"end\": 49200},\n"
    "      \"portsTotal\": 49,\n"
    "      \"listeners\": [\n"
    "        {\"name\": \"turn\", \"protocol\": \"udp\", \"port\": 3478},\n"
    "        {\"name\": \"turn-tcp\", \"protocol\": \"tcp\", \"port\": 3478}\n"
    "      ]\n"
    "    }\n"
    "  ],\n"
    "  \"conditions\": [\n"
    "    {\"type\": \"Placed\", \"status\": \"False\", \"reason\": \"InsufficientAddresses\", \"message\": "
    "\"1 of 2 replicas placed: 1 relay identity on 1 of 1 nodes (one per eligible node address of the family)\"},\n"
    "    {\"type\": \"AddressConflict\", \"status\": \"False\", \"reason\": \"NoConflict\", \"message\": "
    "\"no relay address is claimed by another pool or offered by two nodes\"}\n"
    "  ]\n"
    "}";

START_TEST(test_plan__json_output)
{
  static const tnode edge[] = {{"edge-1", "10.0.0.1", "203.0.113.7", NULL, NULL, NULL, "True", 0, 0}};
  tf_nodes *nodes = nodes_of(edge, 1);
  tf_pool *pool = pool_fmt("metadata: {name: demo, namespace: turn}\nspec:\n  replicas: 2\n"
                           "  relayPortRange: {start: 49152, end: 49200}\n" POOL_TAIL);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  char *json = plan_json(plan);
  ck_assert_str_eq(json, DEMO_JSON);
  ck_assert_str_eq(tf_plan_pool_name(plan), "demo");
  tf_free(json);
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);

  /* an empty plan */
  nodes = tf_test_nodes("{\"kind\": \"List\", \"items\": []}");
  pool = pool_of("none", 0, LOOP_HN, 50000, 50099);
  plan = plan_of(pool, nodes, NULL);
  json = plan_json(plan);
  ck_assert_msg(strstr(json, "\"relays\": [],\n  \"conditions\": [\n") != NULL, "%s", json);
  tf_free(json);
  tf_plan_free(plan);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__fleet_parses_plan_output)
{
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  tf_pool *pool = tf_test_pool_file("pools/partitioned.yaml");
  tf_plan *plan = plan_of(pool, nodes, NULL);
  char *json = plan_json(plan);
  tf_existing *fleet = NULL;
  TF_OK_OR_FAIL(tf_existing_parse(&fleet, json, strlen(json)));
  ck_assert_uint_eq(tf_existing_count(fleet), tf_plan_relay_count(plan));
  ck_assert_str_eq(fleet->items[1].pool, "part");
  ck_assert_str_eq(fleet->items[1].name, tf_relay_name(tf_plan_relay(plan, 1)));
  ck_assert_int_eq(fleet->items[1].allocations, -1);
  /* listener ports come from `listeners`, shifted per slice */
  ck_assert_uint_eq(fleet->items[1].listener_port_count, 3);
  ck_assert_uint_eq(fleet->items[1].listener_ports[0], 3479);
  ck_assert_uint_eq(fleet->items[1].listener_ports[2], 5350);
  /* replanning with the plan as fleet gives the same plan */
  tf_plan *again = plan_of(pool, nodes, fleet);
  char *json2 = plan_json(again);
  ck_assert_str_eq(json2, json);
  /* the plan, as another pool's claims, blocks every identity on those addresses */
  tf_pool *other = pool_of("other", 3, LOOP_HN, 49152, 49200);
  tf_plan *blocked = plan_of(other, nodes, fleet);
  ck_assert_uint_eq(tf_plan_relay_count(blocked), 1);
  ck_assert_str_eq(tf_relay_node(tf_plan_relay(blocked, 0)), "worker-5");
  tf_plan_free(blocked);
  tf_pool_free(other);
  tf_free(json);
  tf_free(json2);
  tf_plan_free(again);
  tf_plan_free(plan);
  tf_existing_free(fleet);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_plan__fleet_parse_errors)
{
  static const struct {
    const char *json;
    tf_err code;
    const char *message;
  } cases[] = {
      {"[{\"name\": \"x-relay-aaaaa\"}]", TF_EINVALID, "[0].identity: required"},
      {"[{\"identity\": \"203.0.113.7/1-2\"}]", TF_EINVALID, "[0].name: required for a relay of the planned pool"},
      {"{\"pool\": \"loop\", \"relays\": [{\"name\": \"a\", \"identity\": \"1.2.3.4/1-2\"}, {\"name\": \"b\", "
       "\"identity\": \"1.2.3/1-2\"}]}",
       TF_EINVALID, "relays[1].identity: \"1.2.3\" is not an IPv4 or IPv6 address"},
      {"{\"relays\": [{}, {}, {\"pool\": \"p\", \"identity\": \"198.51.100.1,198.51.100.2/1-2\"}]}", TF_EINVALID,
       "relays[0].identity: required"},
      {"{\"relays\": [{\"pool\": \"p\", \"identity\": \"198.51.100.1,198.51.100.2/1-2\"}]}", TF_EINVALID,
       "relays[0].identity: \"198.51.100.1,198.51.100.2/1-2\": two IPv4 addresses"},
      {"{\"relays\": [{\"pool\": \"p\", \"identity\": \"1.2.3.4/50-40\"}]}", TF_EINVALID,
       "relays[0].identity: \"50-40\": end 40 is below start 50"},
      {"[{\"pool\": \"p\", \"identity\": \"1.2.3.4/5-6\", \"allocations\": -2}]", TF_EINVALID,
       "[0].allocations: must be an integer >= -1"},
      {"[{\"pool\": \"p\", \"identity\": \"1.2.3.4/5-6\", \"allocations\": 1.5}]", TF_EINVALID,
       "[0].allocations: must be an integer >= -1"},
      {"[{\"pool\": \"p\", \"identity\": \"1.2.3.4/5-6\", \"listenerPorts\": [3478, 0]}]", TF_EINVALID,
       "[0].listenerPorts[1]: must be a port 1-65535"},
      {"[{\"pool\": \"p\", \"identity\": \"1.2.3.4/5-6\", \"listeners\": [{\"port\": 70000}]}]", TF_EINVALID,
       "[0].listeners[0].port: must be a port 1-65535"},
      {"[{\"pool\": \"P Q\", \"identity\": \"1.2.3.4/5-6\"}]", TF_EINVALID, "[0].pool: \"P Q\" is not a valid pool name"},
      {"[{\"name\": 5, \"identity\": \"1.2.3.4/5-6\"}]", TF_EINVALID, "[0].name: must be a string"},
      {"[7]", TF_EINVALID, "[0]: must be an object"},
      {"{\"pool\": \"p\"}", TF_EINVALID, "relays: required"},
      {"{\"relays\": {}}", TF_EINVALID, "relays: must be a list"},
      {"{\"pool\": 3, \"relays\": []}", TF_EINVALID, "pool: must be a string"},
      {"\"relays\"", TF_EINVALID, "document: must be a list of relay records or an object with `relays`"},
      {"[{\"pool\": \"p\",", TF_EPROTO, NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_existing *fleet = (tf_existing *)&fleet;
    tf_err rc = tf_existing_parse(&fleet, cases[i].json, strlen(cases[i].json));
    ck_assert_msg(rc == cases[i].code, "case %zu: %d (%s)", i, rc, tf_error_last()->message);
    if (cases[i].message) ck_assert_str_eq(tf_error_last()->message, cases[i].message);
    ck_assert_ptr_null(fleet);
  }
  tf_existing *fleet = NULL;
  TF_OK_OR_FAIL(tf_existing_parse(&fleet, "[]", 2));
  ck_assert_uint_eq(tf_existing_count(fleet), 0);
  TF_OK_OR_FAIL(tf_existing_add(fleet, "p", NULL, "2001:db8::1,203.0.113.1/1-2", -1, NULL, 0));
  ck_assert_str_eq(fleet->items[0].identity, "203.0.113.1,2001:db8::1/1-2");
  ck_assert_int_eq(tf_existing_add(fleet, NULL, "x", NULL, 0, NULL, 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "identity: required");
  ck_assert_int_eq(tf_existing_add(fleet, NULL, "x", "1.2.3.4/9-8", 0, NULL, 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "identity: \"9-8\": end 8 is below start 9");
  ck_assert_int_eq(tf_existing_add(fleet, NULL, "x", "1.2.3.4/1-2", -5, NULL, 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "allocations: -5 is not -1 (unknown) or a count");
  ck_assert_int_eq(tf_existing_add(fleet, NULL, "Bad_Name", "1.2.3.4/1-2", 0, NULL, 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "name: \"Bad_Name\" is not a valid relay name");
  ck_assert_int_eq(tf_existing_add(fleet, "p", NULL, "1.2.3.4/1-2", 0, NULL, 2), TF_EINVALID);
  static const uint16_t zero[] = {0};
  ck_assert_int_eq(tf_existing_add(fleet, "p", NULL, "1.2.3.4/1-2", 0, zero, 1), TF_EINVALID);
  ck_assert_int_eq(tf_existing_add(NULL, "p", NULL, "1.2.3.4/1-2", 0, NULL, 0), TF_EINVALID);
  ck_assert_uint_eq(tf_existing_count(fleet), 1);
  tf_existing_free(fleet);
  tf_existing_free(NULL);
  ck_assert_uint_eq(tf_existing_count(NULL), 0);
}
END_TEST

START_TEST(test_plan__invalid_pool_and_arguments)
{
  tf_nodes *nodes = nodes_of(LOOP3, 3);
  tf_pool *bad = NULL;
  const char *text = "metadata: {name: loop}\nspec:\n  relayPortRange: {start: 49300, end: 49200}\n" POOL_TAIL;
  TF_OK_OR_FAIL(tf_pool_parse(&bad, text, strlen(text), TF_FORMAT_YAML));
  tf_plan *plan = (tf_plan *)&plan;
  ck_assert_int_eq(tf_plan_new(&plan, bad, nodes, NULL), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "spec.relayPortRange.end: 49200 is below start 49300");
  ck_assert_ptr_null(plan);
  tf_pool_free(bad);

  tf_pool *pool = pool_of("loop", 1, LOOP_HN, 50000, 50099);
  ck_assert_int_eq(tf_plan_new(NULL, pool, nodes, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_plan_new(&plan, NULL, nodes, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_plan_new(&plan, pool, NULL, NULL), TF_EINVALID);
  plan = plan_of(pool, nodes, NULL);
  ck_assert_ptr_null(tf_plan_relay(plan, 1));
  ck_assert_ptr_null(tf_plan_find(plan, "nope"));
  ck_assert_ptr_null(tf_plan_find(plan, NULL));
  ck_assert_uint_eq(tf_plan_condition_count(plan), 2);
  ck_assert_int_eq(tf_plan_condition(plan, 2, NULL, NULL, NULL, NULL), TF_ENOTFOUND);
  ck_assert_int_eq(tf_plan_condition(NULL, 0, NULL, NULL, NULL, NULL), TF_EINVALID);
  char *json = NULL;
  ck_assert_int_eq(tf_plan_to_json(&json, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_plan_to_json(NULL, plan), TF_EINVALID);
  ck_assert_ptr_null(tf_relay_name(NULL));
  ck_assert_uint_eq(tf_relay_ports_total(NULL), 0);
  ck_assert_uint_eq(tf_relay_listener_port(NULL, 0), 0);
  ck_assert_uint_eq(tf_relay_address_count(NULL), 0);
  ck_assert_uint_eq(tf_plan_relay_count(NULL), 0);
  ck_assert_uint_eq(tf_plan_placeable_count(NULL), 0);
  ck_assert_ptr_null(tf_plan_pool_name(NULL));
  tf_plan_free(plan);
  tf_plan_free(NULL);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

/* ---- properties over random inventories ---- */

typedef struct rng {
  uint64_t s;
} rng;

static uint32_t rng_next(rng *r)
{
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return (uint32_t)((r->s * 2685821657736338717ull) >> 32);
}

static uint32_t rng_below(rng *r, uint32_t n) { return n ? rng_next(r) % n : 0; }

/* A random comma list of up to max addresses: PREFIX4<n> or PREFIX6<hex n>, n in 1..span. */
static void random_list(rng *r, char *out, size_t size, const char *prefix4, const char *prefix6, uint32_t span,
                        uint32_t max)
{
  out[0] = '\0';
  uint32_t n = rng_below(r, max + 1);
  uint32_t used[16] = {0};
  size_t len = 0;
  for (uint32_t k = 0; k < n && k < 16; k++) {
    int v6 = rng_below(r, 3) == 0;
    uint32_t v = 1 + rng_below(r, span) + (v6 ? 1000 : 0);
    int dup = 0;
    for (uint32_t j = 0; j < k; j++) dup |= used[j] == v;
    if (dup) continue;
    used[k] = v;
    if (v6) len += (size_t)snprintf(out + len, size - len, "%s%s%x", len ? "," : "", prefix6, v - 1000);
    else len += (size_t)snprintf(out + len, size - len, "%s%s%u", len ? "," : "", prefix4, v);
  }
}

typedef struct rnode {
  char name[16];
  char internal[64];
  char external[64];
  char relay_address[64];
  char ext_addrs[256];
  char pod_addrs[256];
  tnode t;
} rnode;

static void random_node(rng *r, rnode *n, uint32_t id)
{
  memset(n, 0, sizeof(*n));
  snprintf(n->name, sizeof(n->name), "node-%03u", id);
  /* small address spaces so that nodes sometimes share an address */
  uint32_t a = 1 + rng_below(r, 40);
  if (rng_below(r, 4)) snprintf(n->internal, sizeof(n->internal), "10.0.0.%u", a);
  if (rng_below(r, 2)) {
    size_t l = strlen(n->internal);
    snprintf(n->internal + l, sizeof(n->internal) - l, "%sfd00::%x", l ? "," : "", a);
  }
  if (rng_below(r, 3) == 0) snprintf(n->external, sizeof(n->external), "198.51.100.%u", 1 + rng_below(r, 40));
  if (rng_below(r, 5) == 0)
    snprintf(n->relay_address, sizeof(n->relay_address), "192.0.2.%u,2001:db8:1::%x", 1 + rng_below(r, 40),
             1 + rng_below(r, 40));
  random_list(r, n->ext_addrs, sizeof(n->ext_addrs), "203.0.113.", "2001:db8::", 31, 5);
  random_list(r, n->pod_addrs, sizeof(n->pod_addrs), "100.64.0.", "fd01::", 60, 4);
  static const char *const ready[] = {"True", "True", "True", "False", "Unknown", NULL};
  n->t = (tnode){n->name,
                 n->internal[0] ? n->internal : NULL,
                 n->external[0] ? n->external : NULL,
                 n->relay_address[0] ? n->relay_address : NULL,
                 n->ext_addrs,
                 n->pod_addrs,
                 ready[rng_below(r, 6)],
                 rng_below(r, 10) == 0,
                 rng_below(r, 8) == 0};
}

static tf_pool *random_pool(rng *r)
{
  static const char *const modes[] = {"HostNetwork", "ExternalIPPool", "PodIP", "PartitionedIP"};
  static const char *const families[] = {"IPv4", "IPv6", "DualStack"};
  uint32_t mode = rng_below(r, 4), family = rng_below(r, 3);
  uint32_t size = 1 + rng_below(r, rng_below(r, 2) ? 50 : 3000);
  uint32_t start = 10000 + rng_below(r, 55536 - size);
  uint32_t rpn = 1 + rng_below(r, size < 8 ? size : 8);
  char addressing[256];
  const char *ext = family == 0 ? "[203.0.113.0/27]" : family == 1 ? "[\"2001:db8::/120\"]"
                                                                   : "[203.0.113.0/27, \"2001:db8::/120\"]";
  if (mode == 1)
    snprintf(addressing, sizeof(addressing), "{mode: %s, family: %s, externalIPPool: {addresses: %s}}", modes[mode],
             families[family], ext);
  else if (mode == 3)
    snprintf(addressing, sizeof(addressing), "{mode: %s, family: %s, partitionedIP: {relaysPerNode: %u}}",
             modes[mode], families[family], rpn);
  else
    snprintf(addressing, sizeof(addressing), "{mode: %s, family: %s}", modes[mode], families[family]);
  int tls = rng_below(r, 2);
  return pool_fmt("metadata: {name: prop}\nspec:\n  replicas: %u\n  addressing: %s\n"
                  "  relayPortRange: {start: %u, end: %u}\n  listeners:\n"
                  "    - {name: turn, protocol: udp, port: 3478}\n    - {name: turn-tcp, protocol: tcp, port: 3478}\n"
                  "%s" POOL_TAIL,
                  rng_below(r, 40), addressing, start, start + size - 1,
                  tls ? "    - {name: turns, protocol: tls, port: 5349, tlsSecretRef: {name: t}}\n" : "");
}

/* The ports a relay holds on each of its addresses, as a sorted range list check. */
static int relay_holds(const tf_plan *plan, const tf_relay *r, uint32_t port)
{
  tf_port_range range = tf_relay_port_range(r);
  if (port >= range.start && port <= range.end) return 1;
  for (size_t l = 0; l < plan->listener_count; l++)
    if (tf_relay_listener_port(r, l) == port) return 1;
  return 0;
}

static int share_address(const tf_relay *a, const tf_relay *b)
{
  for (size_t i = 0; i < a->addr_count; i++)
    for (size_t j = 0; j < b->addr_count; j++)
      if (tf_addr_compare(&a->addrs[i], &b->addrs[j]) == 0) return 1;
  return 0;
}

static void check_plan_properties(const tf_plan *plan, const tf_pool *pool, const tf_existing *claims, uint32_t seed)
{
  tf_port_range whole = tf_pool_relay_port_range(pool);
  size_t n = tf_plan_relay_count(plan);
  int64_t replicas = tf_pool_replicas(pool);
  ck_assert_msg(n == (size_t)(replicas < (int64_t)plan->placeable ? replicas : (int64_t)plan->placeable),
                "seed %u: %zu relays, replicas %lld, placeable %zu", seed, n, (long long)replicas, plan->placeable);
  for (size_t i = 0; i < n; i++) {
    const tf_relay *a = tf_plan_relay(plan, i);
    tf_port_range ra = tf_relay_port_range(a);
    ck_assert_msg(ra.start >= whole.start && ra.end <= whole.end && ra.start <= ra.end, "seed %u: range", seed);
    ck_assert_msg(strncmp(tf_relay_name(a), "prop-relay-", 11) == 0 && strlen(tf_relay_name(a)) == 16,
                  "seed %u: name %s", seed, tf_relay_name(a));
    ck_assert_ptr_eq(tf_plan_find(plan, tf_relay_name(a)), a);
    for (size_t l = 0; l < plan->listener_count; l++) {
      uint16_t p = tf_relay_listener_port(a, l);
      ck_assert_msg(p != 0 && (p < ra.start || p > ra.end), "seed %u: listener in own range", seed);
    }
    for (size_t j = i + 1; j < n; j++) {
      const tf_relay *b = tf_plan_relay(plan, j);
      ck_assert_msg(strcmp(tf_relay_name(a), tf_relay_name(b)) != 0, "seed %u: duplicate name", seed);
      if (!share_address(a, b)) continue;
      tf_port_range rb = tf_relay_port_range(b);
      ck_assert_msg(ra.end < rb.start || rb.end < ra.start, "seed %u: %s and %s overlap", seed, tf_relay_identity(a),
                    tf_relay_identity(b));
      for (size_t l = 0; l < plan->listener_count; l++) {
        ck_assert_msg(!relay_holds(plan, b, tf_relay_listener_port(a, l)), "seed %u: listener shared", seed);
        ck_assert_msg(!relay_holds(plan, a, tf_relay_listener_port(b, l)), "seed %u: listener shared", seed);
      }
    }
    /* nothing meets another pool's claim */
    for (size_t c = 0; claims && c < claims->count; c++) {
      const tf_existing_record *rec = &claims->items[c];
      int shared = 0;
      for (size_t x = 0; x < rec->addr_count; x++)
        for (size_t y = 0; y < a->addr_count; y++) shared |= tf_addr_compare(&rec->addrs[x], &a->addrs[y]) == 0;
      if (!shared) continue;
      ck_assert_msg(ra.end < rec->range.start || rec->range.end < ra.start, "seed %u: claim overlap", seed);
      for (size_t l = 0; l < rec->listener_port_count; l++)
        ck_assert_msg(!relay_holds(plan, a, rec->listener_ports[l]), "seed %u: claim listener", seed);
      for (size_t l = 0; l < plan->listener_count; l++) {
        uint16_t p = tf_relay_listener_port(a, l);
        ck_assert_msg(p < rec->range.start || p > rec->range.end, "seed %u: listener in claim", seed);
      }
    }
  }
}

static void random_claims(rng *r, tf_existing *fleet)
{
  uint32_t n = rng_below(r, 6);
  for (uint32_t i = 0; i < n; i++) {
    char identity[96];
    uint32_t start = 3000 + rng_below(r, 60000);
    uint32_t end = start + rng_below(r, 2000);
    if (end > 65535) end = 65535;
    static const char *const nets[] = {"10.0.0.", "203.0.113.", "198.51.100."};
    snprintf(identity, sizeof(identity), "%s%u/%u-%u", nets[rng_below(r, 3)], 1 + rng_below(r, 40), start, end);
    uint16_t ports[2] = {(uint16_t)(3478 + rng_below(r, 4)), (uint16_t)(5349 + rng_below(r, 4))};
    TF_OK_OR_FAIL(tf_existing_add(fleet, rng_below(r, 2) ? "blue" : "green", NULL, identity, 0, ports, rng_below(r, 3)));
  }
}

START_TEST(test_plan__properties_over_random_inventories)
{
  /* what the random cases exercised: relays per mode, conflicts, kept names */
  size_t relays_by_mode[4] = {0}, conflicted = 0, kept = 0, salted_or_grown = 0;
  for (uint32_t iter = 0; iter < 200; iter++) {
    uint32_t seed = 0x9e3779b9u * (iter + 1);
    rng r = {seed | 1ull << 40};
    uint32_t count = rng_below(&r, 25);
    rnode *nodes = calloc(count + 1, sizeof(*nodes));
    tnode *t = calloc(count + 1, sizeof(*t));
    size_t *order = calloc(count + 1, sizeof(*order));
    ck_assert(nodes && t && order);
    /* distinct names in random order */
    uint32_t ids[64];
    for (uint32_t i = 0; i < 64; i++) ids[i] = i;
    for (uint32_t i = 63; i > 0; i--) {
      uint32_t j = rng_below(&r, i + 1), x = ids[i];
      ids[i] = ids[j];
      ids[j] = x;
    }
    for (uint32_t i = 0; i <= count; i++) {
      random_node(&r, &nodes[i], ids[i]);
      t[i] = nodes[i].t;
      order[i] = i;
    }
    tf_pool *pool = random_pool(&r);
    tf_existing *claims = fleet_new();
    random_claims(&r, claims);

    char *json = nodes_json(t, count, NULL);
    tf_nodes *inv = tf_test_nodes(json);
    free(json);
    tf_plan *plan = plan_of(pool, inv, claims);
    check_plan_properties(plan, pool, claims, seed);
    char *pj = plan_json(plan);
    relays_by_mode[pool->mode] += tf_plan_relay_count(plan);
    conflicted += strcmp(plan->conditions[1].status, "True") == 0;

    /* the same nodes in another order, the same claims in another order: the same plan */
    for (uint32_t i = count; i > 1; i--) {
      uint32_t j = rng_below(&r, i);
      size_t x = order[i - 1];
      order[i - 1] = order[j];
      order[j] = x;
    }
    json = nodes_json(t, count, order);
    tf_nodes *shuffled = tf_test_nodes(json);
    free(json);
    tf_existing *reversed = fleet_new();
    for (size_t c = claims->count; c > 0; c--) {
      const tf_existing_record *rec = &claims->items[c - 1];
      TF_OK_OR_FAIL(tf_existing_add(reversed, rec->pool, rec->name, rec->identity, rec->allocations, rec->listener_ports,
                                 rec->listener_port_count));
    }
    tf_plan *plan2 = plan_of(pool, shuffled, reversed);
    char *pj2 = plan_json(plan2);
    ck_assert_msg(strcmp(pj, pj2) == 0, "seed %u: plans differ\n%s\n%s", seed, pj, pj2);

    /* one more node, the previous plan (and the claims) as fleet: no relay is renamed */
    tf_existing *fleet = NULL;
    TF_OK_OR_FAIL(tf_existing_parse(&fleet, pj, strlen(pj)));
    for (size_t c = 0; c < claims->count; c++) {
      const tf_existing_record *rec = &claims->items[c];
      TF_OK_OR_FAIL(tf_existing_add(fleet, rec->pool, rec->name, rec->identity, rec->allocations, rec->listener_ports,
                                 rec->listener_port_count));
    }
    json = nodes_json(t, count + 1, NULL);
    tf_nodes *grown = tf_test_nodes(json);
    free(json);
    tf_plan *plan3 = plan_of(pool, grown, fleet);
    check_plan_properties(plan3, pool, claims, seed);
    /* ... whatever the order of the fleet's records */
    tf_existing *fleet_rev = fleet_new();
    for (size_t c = fleet->count; c > 0; c--) {
      const tf_existing_record *rec = &fleet->items[c - 1];
      TF_OK_OR_FAIL(tf_existing_add(fleet_rev, rec->pool, rec->name, rec->identity, rec->allocations, rec->listener_ports,
                                 rec->listener_port_count));
    }
    tf_plan *plan4 = plan_of(pool, grown, fleet_rev);
    char *pj3 = plan_json(plan3), *pj4 = plan_json(plan4);
    ck_assert_msg(strcmp(pj3, pj4) == 0, "seed %u: fleet order changed the plan", seed);
    tf_free(pj3);
    tf_free(pj4);
    tf_plan_free(plan4);
    tf_existing_free(fleet_rev);
    for (size_t i = 0; i < tf_plan_relay_count(plan); i++) {
      const tf_relay *old = tf_plan_relay(plan, i);
      const tf_relay *same = tf_plan_find(plan3, tf_relay_name(old));
      if (same) ck_assert_msg(strcmp(tf_relay_identity(same), tf_relay_identity(old)) == 0, "seed %u: %s moved", seed,
                              tf_relay_name(old));
      for (size_t k = 0; k < tf_plan_relay_count(plan3); k++) {
        const tf_relay *now = tf_plan_relay(plan3, k);
        if (strcmp(tf_relay_identity(now), tf_relay_identity(old)) == 0) {
          ck_assert_msg(strcmp(tf_relay_name(now), tf_relay_name(old)) == 0, "seed %u: %s renamed to %s", seed,
                        tf_relay_name(old), tf_relay_name(now));
          kept++;
        }
      }
    }
    for (size_t k = 0; k < tf_plan_relay_count(plan3); k++) salted_or_grown += tf_plan_relay(plan3, k)->is_new;

    tf_free(pj);
    tf_free(pj2);
    tf_plan_free(plan);
    tf_plan_free(plan2);
    tf_plan_free(plan3);
    tf_existing_free(fleet);
    tf_existing_free(reversed);
    tf_existing_free(claims);
    tf_nodes_free(inv);
    tf_nodes_free(shuffled);
    tf_nodes_free(grown);
    tf_pool_free(pool);
    free(nodes);
    free(t);
    free(order);
  }
  for (int m = 0; m < 4; m++) ck_assert_msg(relays_by_mode[m] >= 20, "mode %d: %zu relays", m, relays_by_mode[m]);
  ck_assert_uint_ge(conflicted, 10);
  ck_assert_uint_ge(kept, 100);
  ck_assert_uint_ge(salted_or_grown, 5);
}
END_TEST

/* A node address no relay can use is refused, naming the node, the address and why: unspecified,
 * link-local (the cloud metadata address), multicast, broadcast and reserved, IPv6's too; and an
 * address whose reserved endpoint (the API server's) lies in the pool's ports. The webhook warns
 * with the same AddressConflict message. */
START_TEST(test_plan__unusable_and_reserved_addresses_are_refused)
{
  static const tnode bad[] = {
      {"n-any", NULL, "0.0.0.0", NULL, NULL, NULL, "True", 0, 0},
      {"n-api", NULL, "198.51.100.10", NULL, NULL, NULL, "True", 0, 0},
      {"n-bcast", NULL, "255.255.255.255", NULL, NULL, NULL, "True", 0, 0},
      {"n-dev", NULL, "127.0.0.21", NULL, NULL, NULL, "True", 0, 0},
      {"n-good", NULL, "203.0.113.7", NULL, NULL, NULL, "True", 0, 0, 1},
      {"n-loop", NULL, "127.0.0.22", NULL, NULL, NULL, "True", 0, 0, 1},
      {"n-meta", NULL, "169.254.169.254", NULL, NULL, NULL, "True", 0, 0},
      {"n-mcast", "224.0.0.1", NULL, NULL, NULL, NULL, "True", 0, 0},
      {"n-resv", NULL, "240.0.0.9", NULL, NULL, NULL, "True", 0, 0},
  };
  tf_nodes *nodes = nodes_of(bad, sizeof(bad) / sizeof(*bad));
  tf_addr api;
  TF_OK_OR_FAIL(tf_addr_parse(&api, "198.51.100.10"));
  /* outside the pool's ports: no matter */
  TF_OK_OR_FAIL(tf_nodes_reserve_endpoint(nodes, &api, 6443, "the Kubernetes API server"));
  tf_pool *pool = pool_of("p", 9, "{mode: HostNetwork, family: IPv4}", 49152, 49200);
  tf_plan *plan = plan_of(pool, nodes, NULL);
  /* a loopback address on a development node relays, on any other is refused */
  ck_assert_uint_eq(tf_plan_relay_count(plan), 3);
  ck_assert_str_eq(tf_relay_node(tf_plan_relay(plan, 0)), "n-api");
  ck_assert_str_eq(tf_relay_node(tf_plan_relay(plan, 1)), "n-dev");
  ck_assert_str_eq(tf_relay_node(tf_plan_relay(plan, 2)), "n-good");
  assert_condition(plan, 1, "AddressConflict", "True", "UnusableAddress",
                   "node n-any: 0.0.0.0 is refused: unspecified (0.0.0.0/8, \"this network\"); "
                   "node n-bcast: 255.255.255.255 is refused: the limited broadcast address; "
                   "node n-loop: 127.0.0.22 is refused: loopback (127.0.0.0/8), which hosts relays only on a node "
                   "labelled node-restriction.kubernetes.io/turnfleet-development=true; "
                   "node n-mcast: 224.0.0.1 is refused: multicast; "
                   "node n-meta: 169.254.169.254 is refused: link-local (169.254.0.0/16, with the cloud metadata "
                   "address); node n-resv: 240.0.0.9 is refused: reserved (240.0.0.0/4)");
  tf_plan_free(plan);
  /* inside them (a relay port, or a listener's): refused */
  TF_OK_OR_FAIL(tf_nodes_reserve_endpoint(nodes, &api, 49160, "the Kubernetes API server"));
  plan = plan_of(pool, nodes, NULL);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 2);
  const char *t, *st, *r, *m;
  TF_OK_OR_FAIL(tf_plan_condition(plan, 1, &t, &st, &r, &m));
  ck_assert_msg(strstr(m, "node n-api: 198.51.100.10 is refused: the Kubernetes API server listens on port 49160 "
                          "there, within the pool's ports") != NULL, "%s", m);
  tf_plan_free(plan);
  tf_pool_free(pool);
  /* IPv6: unspecified, link-local, multicast */
  static const tnode bad6[] = {
      {"v-any", NULL, "::", NULL, NULL, NULL, "True", 0, 0},
      {"v-good", NULL, "2001:db8::7", NULL, NULL, NULL, "True", 0, 0},
      {"v-link", NULL, "fe80::1", NULL, NULL, NULL, "True", 0, 0},
      {"v-loop", NULL, "::1", NULL, NULL, NULL, "True", 0, 0, 1},
      {"v-mcast", NULL, "ff02::1", NULL, NULL, NULL, "True", 0, 0},
  };
  tf_nodes *nodes6 = nodes_of(bad6, 5);
  pool = pool_of("p", 5, "{mode: HostNetwork, family: IPv6}", 49152, 49200);
  plan = plan_of(pool, nodes6, NULL);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 1);
  assert_condition(plan, 1, "AddressConflict", "True", "UnusableAddress",
                   "node v-any: :: is refused: unspecified (::); node v-link: fe80::1 is refused: link-local "
                   "(fe80::/10); node v-loop: ::1 is refused: loopback (::1), which hosts relays only on a node "
                   "labelled node-restriction.kubernetes.io/turnfleet-development=true; "
                   "node v-mcast: ff02::1 is refused: multicast");
  tf_plan_free(plan);
  tf_pool_free(pool);
  /* the API servers of a `kubernetes` Endpoints object: n-good's address is one (port 49170, in the range);
   * bad objects name the field and reserve nothing */
  static const struct {
    const char *json, *error;
  } bad_eps[] = {
      {"[]", "endpoints: must be an object"},
      {"{\"subsets\": {}}", "subsets: must be a list"},
      {"{\"subsets\": [{\"addresses\": [{\"ip\": \"203.0.113.7\"}, {\"ip\": \"nope\"}]}]}",
       "subsets[0].addresses[1].ip: must be an IP address"},
      {"{\"subsets\": [{\"addresses\": [{\"ip\": \"203.0.113.7\"}], \"ports\": [{\"port\": 0}]}]}",
       "subsets[0].ports[0].port: must be an integer 1-65535"},
      {"{\"subsets\": [{\"notReadyAddresses\": 1}]}", "subsets[0].notReadyAddresses: must be a list"},
  };
  for (size_t i = 0; i < sizeof(bad_eps) / sizeof(*bad_eps); i++) {
    ck_assert_int_eq(tf_nodes_reserve_endpoints(nodes, bad_eps[i].json, strlen(bad_eps[i].json), "x"), TF_EINVALID);
    ck_assert_str_eq(tf_error_last()->message, bad_eps[i].error);
  }
  ck_assert_int_eq(tf_nodes_reserve_endpoints(nodes, "{", 1, "x"), TF_EPROTO);
  const char *eps = "{\"kind\": \"Endpoints\", \"subsets\": [{\"addresses\": [{\"ip\": \"198.51.100.10\"}], "
                    "\"notReadyAddresses\": [{\"ip\": \"203.0.113.7\"}], \"ports\": [{\"name\": \"https\", \"port\": 49170}]}]}";
  TF_OK_OR_FAIL(tf_nodes_reserve_endpoints(nodes, eps, strlen(eps), "the Kubernetes API server"));
  /* the same again reserves nothing more */
  TF_OK_OR_FAIL(tf_nodes_reserve_endpoints(nodes, eps, strlen(eps), "the Kubernetes API server"));
  pool = pool_of("p", 9, "{mode: HostNetwork, family: IPv4}", 49152, 49200);
  plan = plan_of(pool, nodes, NULL);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 1);
  ck_assert_str_eq(tf_relay_node(tf_plan_relay(plan, 0)), "n-dev");
  TF_OK_OR_FAIL(tf_plan_condition(plan, 1, &t, &st, &r, &m));
  ck_assert_msg(strstr(m, "node n-good: 203.0.113.7 is refused: the Kubernetes API server listens on port 49170 "
                          "there, within the pool's ports") != NULL, "%s", m);
  tf_plan_free(plan);
  tf_pool_free(pool);
  /* bad arguments */
  ck_assert_int_eq(tf_nodes_reserve_endpoint(nodes, &api, 0, "x"), TF_EINVALID);
  uint16_t port = 1;
  while (tf_nodes_reserve_endpoint(nodes, &api, port, "x") == TF_OK) ck_assert_uint_lt(port++, TF_NODES_RESERVED_MAX);
  ck_assert_int_eq(tf_error_last()->code, TF_ERESOURCE);
  TF_OK_OR_FAIL(tf_nodes_reserve_endpoint(nodes, &api, 1, "x")); /* held already: no new one */
  ck_assert_int_eq(tf_nodes_reserve_endpoints(nodes, eps, strlen(eps), "x"), TF_OK); /* the same */
  const char *more = "{\"subsets\": [{\"addresses\": [{\"ip\": \"192.0.2.1\"}], \"ports\": [{\"port\": 1}]}]}";
  ck_assert_int_eq(tf_nodes_reserve_endpoints(nodes, more, strlen(more), "x"), TF_ERESOURCE);
  tf_nodes_free(nodes);
  tf_nodes_free(nodes6);
}
END_TEST

Suite *tf_test_plan_suite(void)
{
  Suite *s = suite_create("plan");
  TCase *tc = tcase_create("plan");
  tcase_add_test(tc, test_plan__name_examples);
  tcase_add_test(tc, test_plan__identity_parse_and_format);
  tcase_add_test(tc, test_plan__host_network_families);
  tcase_add_test(tc, test_plan__dual_stack_needs_both_families);
  tcase_add_test(tc, test_plan__external_ip_pool_families);
  tcase_add_test(tc, test_plan__pod_ip_families);
  tcase_add_test(tc, test_plan__partitioned_slices_with_remainder);
  tcase_add_test(tc, test_plan__salted_name_on_clash);
  tcase_add_test(tc, test_plan__salted_name_when_two_identities_hash_alike);
  tcase_add_test(tc, test_plan__kept_names);
  tcase_add_test(tc, test_plan__scale_down_fewest_allocations_first);
  tcase_add_test(tc, test_plan__insufficient_addresses);
  tcase_add_test(tc, test_plan__address_conflict_with_other_pools);
  tcase_add_test(tc, test_plan__address_conflict_partitioned_listener_shift);
  tcase_add_test(tc, test_plan__address_offered_by_two_nodes);
  tcase_add_test(tc, test_plan__conflict_message_is_bounded);
  tcase_add_test(tc, test_plan__json_output);
  tcase_add_test(tc, test_plan__fleet_parses_plan_output);
  tcase_add_test(tc, test_plan__fleet_parse_errors);
  tcase_add_test(tc, test_plan__unusable_and_reserved_addresses_are_refused);
  tcase_add_test(tc, test_plan__invalid_pool_and_arguments);
  tcase_add_test(tc, test_plan__properties_over_random_inventories);
  suite_add_tcase(s, tc);
  return s;
}
