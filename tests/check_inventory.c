/* inventory: NodeLists as kubectl prints them, eligibility, address discovery, bad input. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "tf_test.h"

#define POOL_HEAD                  \
  "metadata: {name: inv}\n"        \
  "spec:\n"                        \
  "  auth:\n"                      \
  "    realm: inv.turnfleet.test\n" \
  "    secretRef: {name: inv-secret}\n"

static size_t node_index(const tf_nodes *nodes, const char *name)
{
  for (size_t i = 0; i < tf_nodes_count(nodes); i++)
    if (strcmp(tf_nodes_name(nodes, i), name) == 0) return i;
  ck_abort_msg("no node %s", name);
  return 0;
}

static const tf_node *node_named(const tf_nodes *nodes, const char *name)
{
  return &nodes->items[node_index(nodes, name)];
}

/* The node's host address of family af as text, or "none". */
static const char *host_address(const tf_nodes *nodes, const char *name, int af)
{
  static char buf[TF_ADDR_STRLEN];
  tf_addr a;
  tf_err rc = tf_nodes_host_address(&a, nodes, node_index(nodes, name), af);
  if (rc == TF_ENOTFOUND) return "none";
  ck_assert_int_eq(rc, 0);
  TF_OK_OR_FAIL(tf_addr_format(buf, sizeof(buf), &a));
  return buf;
}

static void assert_addrs(const tf_addr *addrs, size_t n, const char *expected)
{
  char got[512] = "";
  for (size_t i = 0; i < n; i++) {
    char a[TF_ADDR_STRLEN];
    TF_OK_OR_FAIL(tf_addr_format(a, sizeof(a), &addrs[i]));
    strcat(got, i ? "," : "");
    strcat(got, a);
  }
  ck_assert_str_eq(got, expected);
}

START_TEST(test_inventory__loopback_nodes)
{
  tf_nodes *nodes = tf_test_nodes_file("nodes/loopback.json");
  tf_pool *pool = tf_test_pool_file("pools/loopback.yaml");
  ck_assert_uint_eq(tf_nodes_count(nodes), 3);
  ck_assert_str_eq(tf_nodes_name(nodes, 0), "relay-a");
  ck_assert_str_eq(tf_nodes_name(nodes, 2), "relay-c");
  ck_assert_ptr_null(tf_nodes_name(nodes, 3));
  for (size_t i = 0; i < 3; i++) ck_assert_int_eq(tf_nodes_eligible(nodes, i, pool), 1);
  ck_assert_str_eq(host_address(nodes, "relay-a", TF_AF_INET), "127.0.0.11");
  ck_assert_str_eq(host_address(nodes, "relay-a", TF_AF_INET6), "::1");
  ck_assert_str_eq(host_address(nodes, "relay-b", TF_AF_INET), "127.0.0.12");
  ck_assert_str_eq(host_address(nodes, "relay-c", TF_AF_INET), "127.0.0.13");
  ck_assert_str_eq(host_address(nodes, "relay-b", TF_AF_INET6), "none");
  ck_assert_str_eq(tf_error_last()->message, "node \"relay-b\": no IPv6 address");
  /* the Hostname address is not an address we keep */
  const tf_node *a = node_named(nodes, "relay-a");
  ck_assert_uint_eq(a->internal_ip_count, 2);
  ck_assert_uint_eq(a->external_ip_count, 0);
  ck_assert_int_eq(a->ready, 1);
  ck_assert_uint_eq(a->label_count, 7);
  ck_assert_int_eq(tf_inventory__development(a), 1);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_inventory__nodes_sorted_by_name)
{
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  static const char *const names[] = {"control-plane", "worker-1", "worker-2", "worker-3",
                                      "worker-4",      "worker-5", "worker-6"};
  ck_assert_uint_eq(tf_nodes_count(nodes), 7);
  for (size_t i = 0; i < 7; i++) ck_assert_str_eq(tf_nodes_name(nodes, i), names[i]);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_inventory__eligibility)
{
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  /* default nodeSelector turnfleet.hzmi.dev/relay-node: "true" */
  tf_pool *pool = tf_test_pool(POOL_HEAD);
  ck_assert_int_eq(tf_nodes_eligible(nodes, node_index(nodes, "control-plane"), pool), 0); /* no label */
  ck_assert_int_eq(tf_nodes_eligible(nodes, node_index(nodes, "worker-1"), pool), 1);      /* Ready */
  ck_assert_int_eq(tf_nodes_eligible(nodes, node_index(nodes, "worker-2"), pool), 0);      /* Ready False */
  ck_assert_int_eq(tf_nodes_eligible(nodes, node_index(nodes, "worker-3"), pool), 0);      /* unschedulable */
  ck_assert_int_eq(tf_nodes_eligible(nodes, node_index(nodes, "worker-4"), pool), 1);      /* Ready */
  ck_assert_int_eq(tf_nodes_eligible(nodes, node_index(nodes, "worker-5"), pool), 1);      /* no Ready */
  ck_assert_int_eq(tf_nodes_eligible(nodes, node_index(nodes, "worker-6"), pool), 0);      /* label "false" */
  ck_assert_int_eq(node_named(nodes, "worker-2")->ready, 0);
  ck_assert_int_eq(node_named(nodes, "worker-4")->ready, 1);
  ck_assert_int_eq(node_named(nodes, "worker-5")->ready, -1);
  ck_assert_int_eq(node_named(nodes, "worker-3")->unschedulable, 1);
  ck_assert_int_eq(tf_nodes_eligible(nodes, 7, pool), 0);
  ck_assert_int_eq(tf_nodes_eligible(NULL, 0, pool), 0);
  ck_assert_int_eq(tf_nodes_eligible(nodes, 0, NULL), 0);
  tf_pool_free(pool);

  /* Ready Unknown (the node stopped reporting: kubectl's NotReady) is not eligible, so its relays drain */
  static const char unknown[] =
    "{\"kind\":\"List\",\"items\":[{\"metadata\":{\"name\":\"lost\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":"
    "\"true\"}},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\",\"reason\":"
    "\"NodeStatusUnknown\"}],\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.9\"}]}}]}";
  tf_nodes *lost = NULL;
  TF_OK_OR_FAIL(tf_nodes_parse(&lost, unknown, strlen(unknown)));
  pool = tf_test_pool(POOL_HEAD);
  ck_assert_int_eq(tf_nodes_eligible(lost, 0, pool), 0);
  tf_pool_free(pool);
  ck_assert_int_eq(node_named(lost, "lost")->ready, 0);
  tf_nodes_free(lost);

  /* every selector entry must match */
  pool = tf_test_pool(POOL_HEAD "  nodeSelector: {turnfleet.hzmi.dev/relay-node: \"true\", "
                                "topology.kubernetes.io/zone: zone-a}\n");
  for (size_t i = 0; i < tf_nodes_count(nodes); i++)
    ck_assert_int_eq(tf_nodes_eligible(nodes, i, pool), strcmp(tf_nodes_name(nodes, i), "worker-1") == 0);
  tf_pool_free(pool);

  /* an empty selector selects every schedulable node that is not NotReady */
  pool = tf_test_pool(POOL_HEAD "  nodeSelector: {}\n");
  static const int expect[] = {1, 1, 0, 0, 1, 1, 1};
  for (size_t i = 0; i < tf_nodes_count(nodes); i++)
    ck_assert_msg(tf_nodes_eligible(nodes, i, pool) == expect[i], "node %s", tf_nodes_name(nodes, i));
  tf_pool_free(pool);

  /* an empty label value matches an empty selector value only */
  pool = tf_test_pool(POOL_HEAD "  nodeSelector: {node-role.kubernetes.io/control-plane: \"\"}\n");
  for (size_t i = 0; i < tf_nodes_count(nodes); i++)
    ck_assert_int_eq(tf_nodes_eligible(nodes, i, pool), i == 0);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_inventory__host_address_rules)
{
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  /* ExternalIP before InternalIP, per family */
  ck_assert_str_eq(host_address(nodes, "worker-1", TF_AF_INET), "203.0.113.11");
  ck_assert_str_eq(host_address(nodes, "worker-1", TF_AF_INET6), "2001:db8::11");
  /* the relay-address annotation before both */
  ck_assert_str_eq(host_address(nodes, "worker-4", TF_AF_INET), "198.51.100.14");
  ck_assert_str_eq(host_address(nodes, "worker-4", TF_AF_INET6), "2001:db8:1::14");
  /* InternalIP when nothing else */
  ck_assert_str_eq(host_address(nodes, "worker-5", TF_AF_INET), "10.0.0.15");
  ck_assert_str_eq(host_address(nodes, "worker-5", TF_AF_INET6), "fd00::15");
  ck_assert_str_eq(host_address(nodes, "worker-6", TF_AF_INET6), "fd00::16");
  ck_assert_str_eq(host_address(nodes, "worker-6", TF_AF_INET), "none");
  ck_assert_int_eq(tf_error_last()->code, TF_ENOTFOUND);
  ck_assert_str_eq(tf_error_last()->message, "node \"worker-6\": no IPv4 address");
  ck_assert_str_eq(host_address(nodes, "control-plane", TF_AF_INET6), "none");

  tf_addr a;
  ck_assert_int_eq(tf_nodes_host_address(&a, nodes, 7, TF_AF_INET), TF_EINVALID);
  ck_assert_int_eq(tf_nodes_host_address(&a, nodes, 0, 5), TF_EINVALID);
  ck_assert_int_eq(tf_nodes_host_address(NULL, nodes, 0, TF_AF_INET), TF_EINVALID);
  ck_assert_int_eq(tf_nodes_host_address(&a, NULL, 0, TF_AF_INET), TF_EINVALID);

  /* a relay-address of one family leaves the other to the node's addresses */
  tf_nodes_free(nodes);
  nodes = tf_test_nodes("{\"kind\": \"NodeList\", \"items\": [{\"metadata\": {\"name\": \"n1\", \"annotations\": "
                        "{\"turnfleet.hzmi.dev/relay-address\": \" 2001:db8::0:9 \"}}, \"status\": {\"addresses\": "
                        "[{\"type\": \"InternalIP\", \"address\": \"10.1.1.1\"}, {\"type\": \"InternalIP\", "
                        "\"address\": \"fd00::1\"}, {\"type\": \"ExternalIP\", \"address\": \"203.0.113.1\"}, "
                        "{\"type\": \"ExternalIP\", \"address\": \"203.0.113.2\"}]}}]}");
  ck_assert_str_eq(host_address(nodes, "n1", TF_AF_INET6), "2001:db8::9");
  ck_assert_str_eq(host_address(nodes, "n1", TF_AF_INET), "203.0.113.1");
  assert_addrs(nodes->items[0].external_ips, nodes->items[0].external_ip_count, "203.0.113.1,203.0.113.2");
  assert_addrs(nodes->items[0].internal_ips, nodes->items[0].internal_ip_count, "10.1.1.1,fd00::1");
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_inventory__annotations)
{
  tf_nodes *nodes = tf_test_nodes_file("nodes/mixed.json");
  const tf_node *w1 = node_named(nodes, "worker-1");
  /* in the order given, canonical, spaces around commas allowed */
  assert_addrs(w1->external_addresses, w1->external_address_count, "203.0.113.100,203.0.113.101,2001:db8::100");
  assert_addrs(w1->pod_addresses, w1->pod_address_count, "192.0.2.10,192.0.2.11,2001:db8:2::10");
  ck_assert_uint_eq(w1->relay_address_count, 0);
  const tf_node *w4 = node_named(nodes, "worker-4");
  assert_addrs(w4->relay_address, w4->relay_address_count, "198.51.100.14,2001:db8:1::14");
  ck_assert_uint_eq(w4->external_address_count, 0);
  tf_nodes_free(nodes);

  /* empty annotations list nothing; other annotations are not ours to read */
  nodes = tf_test_nodes("{\"kind\": \"List\", \"items\": [{\"metadata\": {\"name\": \"n1\", \"annotations\": {"
                        "\"turnfleet.hzmi.dev/external-addresses\": \"\", \"turnfleet.hzmi.dev/relay-pod-addresses\": "
                        "\"  \", \"turnfleet.hzmi.dev/other\": 7, \"example.com/x\": [1]}}}]}");
  ck_assert_uint_eq(nodes->items[0].external_address_count, 0);
  ck_assert_uint_eq(nodes->items[0].pod_address_count, 0);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_inventory__lenient_shapes)
{
  /* no kind, nulls for optional members, no status at all, empty items */
  tf_nodes *nodes = tf_test_nodes("{\"items\": [{\"metadata\": {\"name\": \"b\", \"labels\": null, \"annotations\": "
                                  "null}, \"spec\": {\"unschedulable\": null}, \"status\": null}, "
                                  "{\"metadata\": {\"name\": \"a.example.com\"}}]}");
  ck_assert_uint_eq(tf_nodes_count(nodes), 2);
  ck_assert_str_eq(tf_nodes_name(nodes, 0), "a.example.com");
  ck_assert_int_eq(nodes->items[1].ready, -1);
  ck_assert_int_eq(nodes->items[1].unschedulable, 0);
  tf_nodes_free(nodes);
  nodes = tf_test_nodes("{\"kind\": \"NodeList\", \"apiVersion\": \"v1\", \"items\": []}");
  ck_assert_uint_eq(tf_nodes_count(nodes), 0);
  tf_nodes_free(nodes);
  /* the first Ready condition decides */
  nodes = tf_test_nodes("{\"kind\": \"List\", \"items\": [{\"metadata\": {\"name\": \"n\"}, \"status\": "
                        "{\"conditions\": [{\"type\": \"Ready\", \"status\": \"False\"}, {\"type\": \"Ready\", "
                        "\"status\": \"True\"}]}}]}");
  ck_assert_int_eq(nodes->items[0].ready, 0);
  tf_nodes_free(nodes);
}
END_TEST

START_TEST(test_inventory__arguments)
{
  tf_nodes *nodes = (tf_nodes *)&nodes;
  ck_assert_int_eq(tf_nodes_parse(NULL, "{}", 2), TF_EINVALID);
  ck_assert_int_eq(tf_nodes_parse(&nodes, NULL, 2), TF_EINVALID);
  ck_assert_int_eq(tf_nodes_parse(&nodes, NULL, 0), TF_EPROTO);
  ck_assert_ptr_null(nodes);
  /* the length is honoured: the text after it is not read */
  const char *text = "{\"items\": []}garbage";
  TF_OK_OR_FAIL(tf_nodes_parse(&nodes, text, 13));
  tf_nodes_free(nodes);
  ck_assert_uint_eq(tf_nodes_count(NULL), 0);
  ck_assert_ptr_null(tf_nodes_name(NULL, 0));
  tf_nodes_free(NULL);
}
END_TEST

static int has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static int has_suffix(const char *s, const char *x)
{
  size_t n = strlen(s), m = strlen(x);
  return n >= m && strcmp(s + n - m, x) == 0;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

START_TEST(test_inventory__invalid_inventories)
{
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s", tf_test_data("invalid"));
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  char *files[256];
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (has_prefix(e->d_name, "nodes-") && has_suffix(e->d_name, ".json") && n < 256) files[n++] = strdup(e->d_name);
  closedir(d);
  qsort(files, n, sizeof(*files), name_cmp);
  ck_assert_uint_ge(n, 10);
  for (size_t i = 0; i < n; i++) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
    size_t len;
    char *text = tf_test_read(path, &len);
    snprintf(path + strlen(path) - 5, 16, ".expected");
    char *expected = tf_test_read(path, NULL);
    expected[strcspn(expected, "\n")] = '\0';
    tf_nodes *nodes = (tf_nodes *)&nodes;
    tf_err rc = tf_nodes_parse(&nodes, text, len);
    tf_err want = has_prefix(expected, "line ") ? TF_EPROTO : TF_EINVALID;
    ck_assert_msg(rc == want, "%s: %d, want %d (%s)", files[i], rc, want, tf_error_last()->message);
    ck_assert_msg(strcmp(tf_error_last()->message, expected) == 0, "%s:\n  got  %s\n  want %s", files[i],
                  tf_error_last()->message, expected);
    ck_assert_ptr_null(nodes);
    free(text);
    free(expected);
    free(files[i]);
  }
}
END_TEST

/* An informer adds nodes one by one: the same inventory as the NodeList says. */
START_TEST(test_inventory__built_node_by_node_like_a_parsed_list)
{
  tf_nodes *nodes = NULL;
  TF_OK_OR_FAIL(tf_nodes_new(&nodes));
  const char *keys[] = {"zone", "turnfleet.hzmi.dev/relay-node"}, *values[] = {"a", "true"};
  tf_addr ext, internal, v6;
  TF_OK_OR_FAIL(tf_addr_parse(&ext, "203.0.113.9"));
  TF_OK_OR_FAIL(tf_addr_parse(&internal, "10.0.0.9"));
  TF_OK_OR_FAIL(tf_addr_parse(&v6, "2001:db8::9"));
  tf_node_info info = TF_NODE_INFO_INIT;
  info.name = "n2";
  info.label_keys = keys;
  info.label_values = values;
  info.label_count = 2;
  info.ready = 1;
  info.external_ips = &ext;
  info.external_ip_count = 1;
  info.internal_ips = &internal;
  info.internal_ip_count = 1;
  TF_OK_OR_FAIL(tf_nodes_add(nodes, &info));
  info.name = "n1"; /* sorted by name whatever the order of arrival */
  info.label_count = 1;
  info.external_ip_count = 0;
  info.relay_addresses = &v6;
  info.relay_address_count = 1;
  TF_OK_OR_FAIL(tf_nodes_add(nodes, &info));
  ck_assert_uint_eq(tf_nodes_count(nodes), 2);
  ck_assert_str_eq(tf_nodes_name(nodes, 0), "n1");
  tf_pool *pool = tf_test_pool("spec: {auth: {realm: r, secretRef: {name: s}}}");
  ck_assert_int_eq(tf_nodes_eligible(nodes, 0, pool), 0); /* n1 lacks the relay-node label */
  ck_assert_int_eq(tf_nodes_eligible(nodes, 1, pool), 1);
  tf_addr got;
  TF_OK_OR_FAIL(tf_nodes_host_address(&got, nodes, 1, TF_AF_INET));
  ck_assert_int_eq(tf_addr_compare(&got, &ext), 0);
  TF_OK_OR_FAIL(tf_nodes_host_address(&got, nodes, 0, TF_AF_INET6));
  ck_assert_int_eq(tf_addr_compare(&got, &v6), 0);
  /* refused as a whole: a duplicate, a bad name, two relay addresses of one family */
  ck_assert_int_eq(tf_nodes_add(nodes, &info), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "duplicate"));
  info.name = "Not_A_Name";
  ck_assert_int_eq(tf_nodes_add(nodes, &info), TF_EINVALID);
  tf_addr two[2] = {v6, v6};
  info.name = "n3";
  info.relay_addresses = two;
  info.relay_address_count = 2;
  ck_assert_int_eq(tf_nodes_add(nodes, &info), TF_EINVALID);
  info.version = 2;
  ck_assert_int_eq(tf_nodes_add(nodes, &info), TF_EINVALID);
  ck_assert_uint_eq(tf_nodes_count(nodes), 2);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
  /* a parsed inventory takes more nodes too */
  nodes = tf_test_nodes("{\"items\":[{\"metadata\":{\"name\":\"m\"}}]}");
  info = (tf_node_info)TF_NODE_INFO_INIT;
  info.name = "a";
  TF_OK_OR_FAIL(tf_nodes_add(nodes, &info));
  ck_assert_str_eq(tf_nodes_name(nodes, 0), "a");
  ck_assert_str_eq(tf_nodes_name(nodes, 1), "m");
  tf_nodes_free(nodes);
}
END_TEST

Suite *tf_test_inventory_suite(void)
{
  Suite *s = suite_create("inventory");
  TCase *tc = tcase_create("inventory");
  tcase_add_test(tc, test_inventory__loopback_nodes);
  tcase_add_test(tc, test_inventory__nodes_sorted_by_name);
  tcase_add_test(tc, test_inventory__eligibility);
  tcase_add_test(tc, test_inventory__host_address_rules);
  tcase_add_test(tc, test_inventory__annotations);
  tcase_add_test(tc, test_inventory__lenient_shapes);
  tcase_add_test(tc, test_inventory__arguments);
  tcase_add_test(tc, test_inventory__invalid_inventories);
  tcase_add_test(tc, test_inventory__built_node_by_node_like_a_parsed_list);
  suite_add_tcase(s, tc);
  return s;
}
