/* coturn: version gates, the rendering rules, golden configs, the config hash,
 * and the acceptance test: each rendered config, run by a real `turnserver` on
 * loopback, binds only its relay's own addresses and listener ports. */
#include <stddef.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model.h"
#include "tf_coturn.h"
#include "tf_test.h"

/* ---- inputs ---- */

#define NODE(name, addrs)                                                                               \
  "{\"metadata\":{\"name\":\"" name "\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\","          \
  "\"" TF_LABEL_DEVELOPMENT "\":\"true\"}},"                                                           \
  "\"status\":{\"addresses\":[" addrs "],\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"
#define IP(type, a) "{\"type\":\"" type "\",\"address\":\"" a "\"}"
#define NODELIST(items) "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[" items "]}"

/* Golden inputs: documentation addresses, fixed options. */
static const char golden_ipv4_pool[] =
    "apiVersion: turnfleet.hzmi.dev/v1alpha1\n"
    "kind: TURNPool\n"
    "metadata: {name: demo, namespace: media}\n"
    "spec:\n"
    "  replicas: 1\n"
    "  dataplane: {coturnVersion: \"4.6.1\"}\n"
    "  relayPortRange: {start: 49152, end: 49200}\n"
    "  auth:\n"
    "    realm: turnfleet.example.com\n"
    "    secretRef: {name: turn-shared-secret, key: secret}\n"
    "    previousSecretRef: {name: turn-shared-secret, key: previous}\n"
    "  quota: {userQuota: 10, totalQuota: 0}\n"
    "  peerPolicy:\n"
    "    denyPrivate: true\n"
    "    allow: [\"10.1.0.0/16\"]\n"
    "    deny: [\"203.0.113.128/25\", \"2001:db8:dead::/48\", \"198.51.100.9/32\"]\n";
static const char golden_ipv4_nodes[] =
    NODELIST(NODE("node-a", IP("InternalIP", "10.0.0.7") "," IP("ExternalIP", "203.0.113.7")));

static const char golden_dual_pool[] =
    "apiVersion: turnfleet.hzmi.dev/v1alpha1\n"
    "kind: TURNPool\n"
    "metadata: {name: dual}\n"
    "spec:\n"
    "  dataplane: {image: \"coturn/coturn:4.17.1\", coturnVersion: \"4.17.1\"}\n"
    "  addressing: {mode: HostNetwork, family: DualStack}\n"
    "  relayPortRange: {start: 49152, end: 49200}\n"
    "  listeners:\n"
    "    - {name: turn, protocol: udp, port: 3478}\n"
    "    - {name: turn-tcp, protocol: tcp, port: 3478}\n"
    "    - {name: turns, protocol: tls, port: 5349, tlsSecretRef: {name: turn-tls}}\n"
    "    - {name: turn-dtls, protocol: dtls, port: 5349, tlsSecretRef: {name: turn-tls}}\n"
    "  auth:\n"
    "    realm: dual.example.com\n"
    "    secretRef: {name: turn-shared-secret}\n"
    "  quota: {userQuota: 0, totalQuota: 5000}\n";
static const char golden_dual_nodes[] =
    NODELIST(NODE("node-a", IP("ExternalIP", "2001:db8::7") "," IP("ExternalIP", "203.0.113.7")));

#define PART_POOL(version)                                              \
  "apiVersion: turnfleet.hzmi.dev/v1alpha1\n"                           \
  "kind: TURNPool\n"                                                    \
  "metadata: {name: part}\n"                                            \
  "spec:\n"                                                             \
  "  replicas: 2\n"                                                     \
  "  dataplane: {coturnVersion: \"" version "\"}\n"                     \
  "  addressing: {mode: PartitionedIP, partitionedIP: {relaysPerNode: 2}}\n" \
  "  relayPortRange: {start: 49152, end: 49251}\n"                      \
  "  listeners:\n"                                                      \
  "    - {name: turn, protocol: udp, port: 3478}\n"                     \
  "    - {name: turns, protocol: tls, port: 5349, tlsSecretRef: {name: part-tls}}\n" \
  "  auth:\n"                                                           \
  "    realm: part.example.com\n"                                       \
  "    secretRef: {name: part-secret}\n"                                \
  "  peerPolicy: {denyPrivate: false, deny: [\"192.0.2.0/24\"]}\n"
static const char golden_part_nodes[] = NODELIST(NODE("node-p", IP("ExternalIP", "198.51.100.10")));

/* Secrets used below: distinctive, so a leak into a message is easy to spot. */
#define SECRET_A "SEKRIT-current-7f3a"
#define SECRET_B "SEKRIT previous 91c2"
#define CLI_PW "CLIPW-5d1e"

static tf_plan *plan_of(const tf_pool *pool, const char *nodes_json)
{
  tf_nodes *nodes = tf_test_nodes(nodes_json);
  tf_plan *plan = NULL;
  TF_OK_OR_FAIL(tf_plan_new(&plan, pool, nodes, NULL));
  tf_nodes_free(nodes);
  return plan;
}

/* The relay of @p plan in slice @p slice (first one found). */
static const tf_relay *relay_in_slice(const tf_plan *plan, uint32_t slice)
{
  for (size_t i = 0; i < tf_plan_relay_count(plan); i++)
    if (tf_relay_slice(tf_plan_relay(plan, i)) == slice) return tf_plan_relay(plan, i);
  ck_abort_msg("the plan has no relay in slice %u", slice);
  return NULL;
}

static char *render_ok(const tf_pool *pool, const tf_plan *plan, const char *relay, const tf_coturn_options *o)
{
  char *text = NULL;
  TF_OK_OR_FAIL(tf_coturn_render(&text, pool, plan, relay, o));
  ck_assert_ptr_nonnull(text);
  return text;
}

/* 1 when @p text has the exact line @p line. */
static int has_line(const char *text, const char *line)
{
  size_t n = strlen(line);
  for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
    if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) return 1;
  return 0;
}

/* 1 when a line of @p text starts with @p prefix. */
static int has_prefix_line(const char *text, const char *prefix)
{
  size_t n = strlen(prefix);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, prefix, n) == 0) return 1;
  return 0;
}

#define ASSERT_LINE(text, line) ck_assert_msg(has_line(text, line), "missing line \"%s\" in:\n%s", line, text)
#define ASSERT_NO_LINE(text, line) ck_assert_msg(!has_line(text, line), "unexpected line \"%s\" in:\n%s", line, text)

/* ---- versions, options, hash ---- */

START_TEST(test_coturn__version_parse)
{
  uint32_t v = 0;
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.6.1"));
  ck_assert_uint_eq(v, 0x040601u);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.17.1"));
  ck_assert_uint_eq(v, 0x041101u);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.18.0-r0"));
  ck_assert_uint_eq(v, 0x041200u);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, TF_COTURN_MIN_VERSION));
  ck_assert_uint_eq(v, 0x040601u);
  static const char *const bad[] = {"",        "4.6",      "4.6.1.2",  "v4.6.1",   "4.6.1-",   "4.6.x",
                                    "4..1",    "4.6.1 ",   " 4.6.1",   "4.256.0",  "4.6.1abc", "4.6.1-r0\n",
                                    "4.6.1-\"", "1234.1.1", "4.6.-1",   "latest"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    v = 7;
    ck_assert_msg(tf_coturn_version_parse(&v, bad[i]) == TF_EINVALID, "\"%s\" accepted", bad[i]);
    ck_assert_uint_eq(v, 7);
  }
  ck_assert_str_eq(tf_error_last()->message, "\"latest\" is not a coturn version MAJOR.MINOR.PATCH[-SUFFIX]");
  ck_assert_int_eq(tf_coturn_version_parse(NULL, "4.6.1"), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_version_parse(&v, NULL), TF_EINVALID);
}
END_TEST

START_TEST(test_coturn__features_follow_the_version_map)
{
  uint32_t v;
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.6.1"));
  ck_assert_uint_eq(tf_coturn_features(v), 0);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.6.2"));
  ck_assert_uint_eq(tf_coturn_features(v), TF_COTURN_GRACEFUL_SIGTERM | TF_COTURN_ALLOCATIONS_BY_TYPE);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.6.3"));
  ck_assert_uint_eq(tf_coturn_features(v), TF_COTURN_GRACEFUL_SIGTERM | TF_COTURN_ALLOCATIONS_BY_TYPE |
                                               TF_COTURN_DRAIN | TF_COTURN_PROMETHEUS_ADDRESS);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.9.0"));
  ck_assert_uint_eq(tf_coturn_features(v) & TF_COTURN_CLI_OPT_IN, 0);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.10.0"));
  ck_assert_uint_eq(tf_coturn_features(v) & TF_COTURN_CLI_OPT_IN, TF_COTURN_CLI_OPT_IN);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.16.0"));
  ck_assert_uint_eq(tf_coturn_features(v) & TF_COTURN_DTLS_OPT_IN, 0);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.17.0"));
  ck_assert_uint_eq(tf_coturn_features(v), 0x3fu);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.18.0"));
  ck_assert_uint_eq(tf_coturn_features(v), 0x3fu);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "5.0.0"));
  ck_assert_uint_eq(tf_coturn_features(v), 0x3fu);
}
END_TEST

START_TEST(test_coturn__options_init)
{
  tf_coturn_options o;
  memset(&o, 0xa5, sizeof(o));
  TF_OK_OR_FAIL(tf_coturn_options_init(&o, TF_COTURN_OPTIONS_VERSION));
  ck_assert_uint_eq(o.version, TF_COTURN_OPTIONS_VERSION);
  ck_assert_ptr_null(o.coturn_version);
  ck_assert_ptr_null(o.secrets);
  ck_assert_uint_eq(o.secrets_count, 0);
  ck_assert_ptr_null(o.state_dir);
  ck_assert_ptr_null(o.log_file);
  ck_assert_uint_eq(o.cli_port, 0);
  ck_assert_ptr_null(o.cli_password);
  ck_assert_uint_eq(o.prometheus_port, 0);
  ck_assert_ptr_null(o.cert_file);
  ck_assert_ptr_null(o.key_file);
  ck_assert_int_eq(o.allow_loopback_peers, 0);
  ck_assert_int_eq(o.prometheus, 0);
  ck_assert_int_eq(tf_coturn_options_init(&o, 0), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_options_init(&o, TF_COTURN_OPTIONS_VERSION + 1), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "version"));
  ck_assert_int_eq(tf_coturn_options_init(NULL, 1), TF_EINVALID);
}
END_TEST

/* A caller built against 0.1 passes a version 1 struct, shorter than today's:
 * init writes and render reads only its fields (the sanitizer build sees any
 * access past the exact-size heap block), and it keeps 0.1's exporter rule. */
START_TEST(test_coturn__version_1_options_are_read_up_to_their_end)
{
  size_t v1_size = offsetof(tf_coturn_options, prometheus);
  void *block = malloc(v1_size);
  ck_assert_ptr_nonnull(block);
  TF_OK_OR_FAIL(tf_coturn_options_init(block, 1));
  tf_coturn_options full;
  memset(&full, 0xa5, sizeof(full));
  memcpy(&full, block, v1_size);
  ck_assert_uint_eq(full.version, 1);
  ck_assert_ptr_null(full.secrets);
  tf_pool *pool = tf_test_pool(golden_dual_pool);
  tf_plan *plan = plan_of(pool, golden_dual_nodes);
  const char *secrets[] = {SECRET_A};
  full.secrets = secrets;
  full.secrets_count = 1;
  full.cert_file = "/c.pem";
  full.key_file = "/k.pem";
  memcpy(block, &full, v1_size);
  char *t = render_ok(pool, plan, tf_relay_name(tf_plan_relay(plan, 0)), block);
  ASSERT_LINE(t, "prometheus-address=203.0.113.7");
  tf_free(t);
  tf_plan_free(plan);
  tf_pool_free(pool);
  free(block);
}
END_TEST

/* The build's features from its own `turnserver -h` (captured from Debian's
 * 4.6.1 and 4.18.0, neither with Prometheus). */
START_TEST(test_coturn__build_features_from_the_usage_text)
{
  const char *files[] = {"coturn/help-4.6.1.txt", "coturn/help-4.18.0.txt"};
  for (size_t i = 0; i < 2; i++) {
    size_t len = 0;
    char *text = tf_test_read(tf_test_data(files[i]), &len);
    uint32_t f = 0xffffffffu;
    TF_OK_OR_FAIL(tf_coturn_build_features(&f, text, len));
    ck_assert_msg(f == 0, "%s: features 0x%x", files[i], f);
    free(text);
  }
  /* a build with the exporter lists its options */
  const char *with = "Usage: turnserver [options]\n --listening-port\t<port>\tTURN listener port\n"
                     " --prometheus\t\t\t\tEnable prometheus metrics.\n";
  uint32_t f = 0;
  TF_OK_OR_FAIL(tf_coturn_build_features(&f, with, strlen(with)));
  ck_assert_uint_eq(f, TF_COTURN_BUILD_PROMETHEUS);
  /* --prometheus-port alone, or a mention in prose, is not the option */
  const char *prose = " --listening-port <port>\n see --prometheusfoo and prometheus\n";
  TF_OK_OR_FAIL(tf_coturn_build_features(&f, prose, strlen(prose)));
  ck_assert_uint_eq(f, 0);
  const char *other = "usage: nc [-46] host port\n";
  ck_assert_int_eq(tf_coturn_build_features(&f, other, strlen(other)), TF_EPROTO);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "--listening-port"));
  ck_assert_int_eq(tf_coturn_build_features(NULL, other, 1), TF_EINVALID);
}
END_TEST

START_TEST(test_coturn__config_hash_is_hex_sha256)
{
  char *h = NULL;
  /* FIPS 180-2 vectors */
  TF_OK_OR_FAIL(tf_coturn_config_hash(&h, "abc"));
  ck_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  tf_free(h);
  TF_OK_OR_FAIL(tf_coturn_config_hash(&h, ""));
  ck_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  tf_free(h);
  TF_OK_OR_FAIL(tf_coturn_config_hash(&h, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"));
  ck_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  tf_free(h);
  h = (char *)"untouched";
  ck_assert_int_eq(tf_coturn_config_hash(&h, NULL), TF_EINVALID);
  ck_assert_str_eq(h, "untouched");
  ck_assert_int_eq(tf_coturn_config_hash(NULL, "abc"), TF_EINVALID);
}
END_TEST

/* ---- golden files ---- */

/* Compare @p actual with tests/data/coturn/<name>.conf, where the golden file
 * writes the library version as @TF_VERSION@. TF_UPDATE_GOLDEN=1 rewrites it. */
static void golden_compare(const char *name, const char *actual)
{
  char rel[256];
  snprintf(rel, sizeof(rel), "coturn/%s.conf", name);
  const char *path = tf_test_data(rel);
  char *path_copy = strdup(path);
  ck_assert_ptr_nonnull(path_copy);
  const char *marker = "@TF_VERSION@";
  const char *update = getenv("TF_UPDATE_GOLDEN");
  if (update && strcmp(update, "1") == 0) {
    /* write the golden with the version replaced by the marker */
    const char *needle = "Turnfleet " TF_VERSION_STRING " ";
    const char *at = strstr(actual, needle);
    ck_assert_ptr_nonnull(at);
    FILE *f = fopen(path_copy, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*sTurnfleet %s %s", (int)(at - actual), actual, marker, at + strlen(needle));
    fclose(f);
  }
  char *raw = tf_test_read(path_copy, NULL);
  /* expand the marker */
  char *expected = NULL;
  const char *m = strstr(raw, marker);
  ck_assert_msg(m != NULL, "%s has no %s marker", rel, marker);
  ck_assert_int_ge(asprintf(&expected, "%.*s%s%s", (int)(m - raw), raw, TF_VERSION_STRING, m + strlen(marker)), 0);
  if (strcmp(expected, actual) != 0) {
    /* find the first differing line */
    const char *e = expected, *a = actual;
    int line = 1;
    while (*e && *a && *e == *a) {
      if (*e == '\n') line++;
      e++;
      a++;
    }
    const char *el = e, *al = a;
    while (el > expected && el[-1] != '\n') el--;
    while (al > actual && al[-1] != '\n') al--;
    int en = (int)strcspn(el, "\n"), an = (int)strcspn(al, "\n");
    ck_abort_msg("%s differs at line %d:\n  expected: %.*s\n  actual:   %.*s\n(run with TF_UPDATE_GOLDEN=1 to "
                 "rewrite after checking the change)",
                 rel, line, en, el, an, al);
  }
  free(expected);
  free(raw);
  free(path_copy);
}

START_TEST(test_coturn__golden_ipv4_4_6_1)
{
  tf_pool *pool = tf_test_pool(golden_ipv4_pool);
  tf_plan *plan = plan_of(pool, golden_ipv4_nodes);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 1);
  const tf_relay *r = tf_plan_relay(plan, 0);
  ck_assert_str_eq(tf_relay_name(r), "demo-relay-mb7l6"); /* the naming vector of docs/cli.md */
  const char *secrets[] = {SECRET_A, SECRET_B};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = secrets;
  o.secrets_count = 2;
  o.state_dir = "/var/lib/turnfleet";
  o.log_file = "/var/log/turnfleet/demo-relay-mb7l6.log";
  o.cli_port = 5766;
  o.cli_password = CLI_PW;
  char *text = render_ok(pool, plan, tf_relay_name(r), &o);
  golden_compare("ipv4-4.6.1", text);
  tf_free(text);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_coturn__golden_dualstack_4_17_1)
{
  tf_pool *pool = tf_test_pool(golden_dual_pool);
  tf_plan *plan = plan_of(pool, golden_dual_nodes);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 1);
  const tf_relay *r = tf_plan_relay(plan, 0);
  ck_assert_uint_eq(tf_relay_address_count(r), 2);
  const char *secrets[] = {"s3cr3t with spaces"};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = secrets;
  o.secrets_count = 1;
  o.state_dir = "/srv/turnfleet/state";
  o.cert_file = "/etc/turnfleet/tls/tls.crt";
  o.key_file = "/etc/turnfleet/tls/tls.key";
  o.prometheus = 1; /* a build with the exporter (the coturn/coturn images) */
  char *text = render_ok(pool, plan, tf_relay_name(r), &o);
  golden_compare("dualstack-4.17.1", text);
  tf_free(text);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_coturn__golden_partitioned_tls_4_6_1)
{
  tf_pool *pool = tf_test_pool(PART_POOL("4.6.1"));
  tf_plan *plan = plan_of(pool, golden_part_nodes);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 2);
  const tf_relay *r = relay_in_slice(plan, 0);
  const char *secrets[] = {SECRET_A};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = secrets;
  o.secrets_count = 1;
  o.cert_file = "/etc/turnfleet/tls/tls.crt";
  o.key_file = "/etc/turnfleet/tls/tls.key";
  char *text = render_ok(pool, plan, tf_relay_name(r), &o);
  golden_compare("partitioned-tls-4.6.1", text);
  tf_free(text);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_coturn__golden_partitioned_tls_4_18_0)
{
  tf_pool *pool = tf_test_pool(PART_POOL("4.18.0-r0"));
  tf_plan *plan = plan_of(pool, golden_part_nodes);
  const tf_relay *r = relay_in_slice(plan, 1);
  const char *secrets[] = {SECRET_A, SECRET_B};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = secrets;
  o.secrets_count = 2;
  o.prometheus_port = 9700;
  o.cert_file = "/etc/turnfleet/tls/tls.crt";
  o.key_file = "/etc/turnfleet/tls/tls.key";
  o.cli_port = 5801;
  o.cli_password = CLI_PW;
  char *text = render_ok(pool, plan, tf_relay_name(r), &o);
  golden_compare("partitioned-tls-4.18.0", text);
  /* the hash of the rendered text is the hash of the golden bytes */
  char *h1 = NULL, *h2 = NULL;
  TF_OK_OR_FAIL(tf_coturn_config_hash(&h1, text));
  ck_assert_uint_eq(strlen(h1), 64);
  char *again = render_ok(pool, plan, tf_relay_name(r), &o);
  TF_OK_OR_FAIL(tf_coturn_config_hash(&h2, again));
  ck_assert_str_eq(h1, h2);
  tf_free(h1);
  tf_free(h2);
  tf_free(again);
  tf_free(text);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

/* ---- rendering rules ---- */

/* denyPrivate covers every entry of IANA's special-purpose registries: each lies inside one
 * denied-peer-ip range of the rendered config (coturn's a-b form). */
START_TEST(test_coturn__deny_private_covers_the_special_purpose_registries)
{
  tf_pool *pool = tf_test_pool(golden_ipv4_pool);
  tf_plan *plan = plan_of(pool, golden_ipv4_nodes);
  const char *secrets[] = {SECRET_A};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = secrets;
  o.secrets_count = 1;
  char *t = render_ok(pool, plan, tf_relay_name(tf_plan_relay(plan, 0)), &o);
  ASSERT_LINE(t, "no-multicast-peers");
  tf_addr lo[64], hi[64];
  size_t n = 0;
  for (const char *p = strstr(t, "\ndenied-peer-ip="); p; p = strstr(p + 1, "\ndenied-peer-ip=")) {
    char a[TF_ADDR_STRLEN], z[TF_ADDR_STRLEN];
    ck_assert_int_eq(sscanf(p + 16, "%45[^-\n]-%45[^\n]", a, z), 2);
    ck_assert_uint_lt(n, 64);
    TF_OK_OR_FAIL(tf_addr_parse(&lo[n], a));
    TF_OK_OR_FAIL(tf_addr_parse(&hi[n], z));
    n++;
  }
  char *list = tf_test_read(tf_test_data("iana-special-purpose.txt"), NULL);
  size_t entries = 0;
  for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#') continue;
    char cidr[64];
    ck_assert_int_eq(sscanf(line, "%63s", cidr), 1);
    tf_prefix pre;
    TF_OK_OR_FAIL(tf_prefix_parse(&pre, cidr));
    tf_addr first, last;
    tf_prefix_bounds(&pre, &first, &last);
    int covered = 0;
    for (size_t i = 0; i < n && !covered; i++)
      covered = lo[i].family == first.family && tf_addr_compare(&lo[i], &first) <= 0 && tf_addr_compare(&last, &hi[i]) <= 0;
    ck_assert_msg(covered, "%s is not inside one denied-peer-ip range", line);
    entries++;
  }
  ck_assert_uint_ge(entries, 50);
  free(list);
  tf_free(t);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_coturn__render_is_deterministic)
{
  tf_pool *pool = tf_test_pool(golden_ipv4_pool);
  tf_plan *plan = plan_of(pool, golden_ipv4_nodes);
  const char *name = tf_relay_name(tf_plan_relay(plan, 0));
  const char *secrets[] = {SECRET_A};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = secrets;
  o.secrets_count = 1;
  char *a = render_ok(pool, plan, name, &o);
  char *b = render_ok(pool, plan, name, &o);
  ck_assert_str_eq(a, b);
  char *ha = NULL, *hb = NULL;
  TF_OK_OR_FAIL(tf_coturn_config_hash(&ha, a));
  /* another secret is another config, and another hash (so a rotation restarts the relay) */
  const char *other[] = {SECRET_B};
  o.secrets = other;
  char *c = render_ok(pool, plan, name, &o);
  TF_OK_OR_FAIL(tf_coturn_config_hash(&hb, c));
  ck_assert_str_ne(ha, hb);
  tf_free(ha);
  tf_free(hb);
  tf_free(a);
  tf_free(b);
  tf_free(c);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

static void expect_reject(tf_err code, const char *field, const tf_pool *pool, const tf_plan *plan,
                          const char *relay, const tf_coturn_options *o);

START_TEST(test_coturn__render_rules)
{
  tf_pool *pool = tf_test_pool(golden_dual_pool);
  tf_plan *plan = plan_of(pool, golden_dual_nodes);
  const char *name = tf_relay_name(tf_plan_relay(plan, 0));
  const char *secrets[] = {SECRET_A, SECRET_B};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = secrets;
  o.secrets_count = 2;
  o.cert_file = "/c.pem";
  o.key_file = "/k.pem";
  o.prometheus = 1; /* a build with the exporter, e.g. the coturn/coturn images */
  char *t = render_ok(pool, plan, name, &o);
  /* both addresses, IPv4 first; one line per secret, quoted; never multiplex-peer or CIDR */
  ck_assert_ptr_nonnull(strstr(t, "listening-ip=203.0.113.7\nlistening-ip=2001:db8::7\n"));
  ck_assert_ptr_nonnull(strstr(t, "relay-ip=203.0.113.7\nrelay-ip=2001:db8::7\n"));
  ASSERT_LINE(t, "static-auth-secret=\"" SECRET_A "\"");
  ASSERT_LINE(t, "static-auth-secret=\"" SECRET_B "\"");
  ck_assert_ptr_null(strstr(t, "multiplex-peer"));
  ck_assert_ptr_nonnull(strstr(t, "# identity 203.0.113.7,2001:db8::7/49152-49200\n"));
  for (const char *p = strstr(t, "denied-peer-ip="); p; p = strstr(p + 1, "denied-peer-ip="))
    ck_assert_msg(p[strcspn(p, "/\n")] != '/', "CIDR in %.*s", (int)strcspn(p, "\n"), p);
  /* the default private ranges, as coturn's a-b form */
  ASSERT_LINE(t, "denied-peer-ip=169.254.0.0-169.254.255.255");
  ASSERT_LINE(t, "denied-peer-ip=100.64.0.0-100.127.255.255");
  ASSERT_LINE(t, "denied-peer-ip=127.0.0.0-127.255.255.255");
  ASSERT_LINE(t, "denied-peer-ip=0.0.0.0-0.255.255.255");
  ASSERT_LINE(t, "denied-peer-ip=192.0.0.0-192.0.0.255");
  ASSERT_LINE(t, "denied-peer-ip=198.18.0.0-198.19.255.255");
  ASSERT_LINE(t, "denied-peer-ip=240.0.0.0-255.255.255.255");
  ASSERT_LINE(t, "denied-peer-ip=::-::1");
  /* never a range that ends at the all-zero address: coturn reads it as "up to any" */
  ck_assert_ptr_null(strstr(t, "-::\n"));
  ck_assert_ptr_null(strstr(t, "-0.0.0.0\n"));
  ASSERT_LINE(t, "denied-peer-ip=fc00::-fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  ASSERT_LINE(t, "denied-peer-ip=fe80::-febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  ASSERT_LINE(t, "denied-peer-ip=::ffff:0.0.0.0-::ffff:255.255.255.255");
  /* 4.17.1 with a dtls listener: `dtls`, never the deprecated `no-dtls`; prometheus on the relay address */
  ASSERT_LINE(t, "dtls");
  ASSERT_NO_LINE(t, "no-dtls");
  ASSERT_NO_LINE(t, "no-tls");
  ASSERT_NO_LINE(t, "no-udp");
  ASSERT_LINE(t, "prometheus");
  ASSERT_LINE(t, "prometheus-address=203.0.113.7");
  ASSERT_LINE(t, "prometheus-port=9641");
  ASSERT_LINE(t, "total-quota=5000");
  ck_assert(!has_prefix_line(t, "user-quota"));
  ASSERT_LINE(t, "log-file=stdout");
  /* >= 4.10 the CLI is off by default and `no-cli` logs an ERROR: neither line */
  ASSERT_NO_LINE(t, "no-cli");
  ASSERT_NO_LINE(t, "cli");
  ASSERT_NO_LINE(t, "allow-loopback-peers");
  tf_free(t);
  /* a build without the exporter (Debian's): no prometheus line at all */
  o.prometheus = 0;
  t = render_ok(pool, plan, name, &o);
  ck_assert(!has_prefix_line(t, "prometheus"));
  tf_free(t);
  /* the CLI on >= 4.10 is switched on with `cli`; before, off with `no-cli` */
  o.cli_port = 5800;
  o.cli_password = "cli secret";
  t = render_ok(pool, plan, name, &o);
  ASSERT_LINE(t, "cli");
  ASSERT_LINE(t, "cli-port=5800");
  tf_free(t);
  o.coturn_version = "4.9.0";
  t = render_ok(pool, plan, name, &o);
  ASSERT_NO_LINE(t, "cli");
  ASSERT_LINE(t, "cli-port=5800");
  tf_free(t);
  o.cli_port = 0;
  t = render_ok(pool, plan, name, &o);
  ASSERT_LINE(t, "no-cli");
  tf_free(t);
  o.coturn_version = "4.10.0";
  t = render_ok(pool, plan, name, &o);
  ASSERT_NO_LINE(t, "no-cli");
  tf_free(t);
  o.prometheus = 1;

  /* 4.6.2: no prometheus-address (the exporter would bind every address), so
   * asking for it is refused; a dtls listener on 4.6.x is on by default:
   * neither dtls nor no-dtls */
  o.coturn_version = "4.6.2";
  expect_reject(TF_EINVALID, "prometheus: coturn 4.6.2 has no prometheus-address", pool, plan, name, &o);
  o.prometheus = 0;
  t = render_ok(pool, plan, name, &o);
  ck_assert(!has_prefix_line(t, "prometheus"));
  ASSERT_NO_LINE(t, "dtls");
  ASSERT_NO_LINE(t, "no-dtls");
  ck_assert_ptr_nonnull(strstr(t, "for coturn 4.6.2\n"));
  tf_free(t);
  o.coturn_version = "4.6.3";
  o.prometheus = 1;
  t = render_ok(pool, plan, name, &o);
  ASSERT_LINE(t, "prometheus-address=203.0.113.7");
  tf_free(t);
  o.prometheus = 0;

  /* allow-loopback-peers (tests) drops the loopback deny rules that would undo it */
  o.coturn_version = NULL;
  o.allow_loopback_peers = 1;
  t = render_ok(pool, plan, name, &o);
  ASSERT_LINE(t, "allow-loopback-peers");
  ASSERT_NO_LINE(t, "denied-peer-ip=127.0.0.0-127.255.255.255");
  ASSERT_NO_LINE(t, "denied-peer-ip=::1-::1");
  ASSERT_LINE(t, "denied-peer-ip=10.0.0.0-10.255.255.255");
  tf_free(t);
  tf_plan_free(plan);
  tf_pool_free(pool);

  /* only the declared listeners: a tls-only pool; no private deny list when denyPrivate is false */
  pool = tf_test_pool("metadata: {name: tlsonly}\n"
                      "spec:\n"
                      "  relayPortRange: {start: 49152, end: 49200}\n"
                      "  listeners: [{name: turns, protocol: tls, port: 443, tlsSecretRef: {name: t}}]\n"
                      "  auth: {realm: r.example.com, secretRef: {name: s}}\n"
                      "  peerPolicy: {denyPrivate: false}\n");
  plan = plan_of(pool, golden_ipv4_nodes);
  o.allow_loopback_peers = 0;
  t = render_ok(pool, plan, tf_relay_name(tf_plan_relay(plan, 0)), &o);
  ASSERT_LINE(t, "no-udp");
  ASSERT_LINE(t, "no-tcp");
  ASSERT_LINE(t, "no-dtls");
  ASSERT_NO_LINE(t, "no-tls");
  ck_assert(!has_prefix_line(t, "listening-port="));
  ASSERT_LINE(t, "tls-listening-port=443");
  ck_assert(!has_prefix_line(t, "denied-peer-ip"));
  ASSERT_LINE(t, "cert=\"/c.pem\"");
  ASSERT_LINE(t, "pkey=\"/k.pem\"");
  ASSERT_LINE(t, "pidfile=\"/var/lib/turnfleet/tlsonly-relay-mb7l6/turnserver.pid\"");
  ASSERT_LINE(t, "min-port=49152");
  ASSERT_LINE(t, "max-port=49200");
  tf_free(t);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

/* Assert a failed render: @p code, a message containing @p field, no secret
 * in the message, and *out untouched. */
static void expect_reject(tf_err code, const char *field, const tf_pool *pool, const tf_plan *plan,
                          const char *relay, const tf_coturn_options *o)
{
  char sentinel[] = "untouched";
  char *out = sentinel;
  tf_err rc = tf_coturn_render(&out, pool, plan, relay, o);
  const char *msg = tf_error_last()->message;
  ck_assert_msg(rc == code, "expected %s for %s, got %d (%s)", tf_error_name(code), field, rc, msg);
  ck_assert_ptr_eq(out, sentinel);
  ck_assert_msg(strstr(msg, field) != NULL, "message \"%s\" does not name %s", msg, field);
  ck_assert_msg(strstr(msg, "SEKRIT") == NULL && strstr(msg, "CLIPW") == NULL, "secret in message \"%s\"", msg);
}

START_TEST(test_coturn__render_rejects_bad_options)
{
  tf_pool *pool = tf_test_pool(golden_ipv4_pool);
  tf_plan *plan = plan_of(pool, golden_ipv4_nodes);
  const char *name = tf_relay_name(tf_plan_relay(plan, 0));
  const char *good[] = {SECRET_A, SECRET_B};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = good;
  o.secrets_count = 2;
  char *ok = render_ok(pool, plan, name, &o);
  tf_free(ok);

  expect_reject(TF_EINVALID, "opts", pool, plan, name, NULL);
  o.version = 0;
  expect_reject(TF_EINVALID, "opts.version", pool, plan, name, &o);
  o.version = TF_COTURN_OPTIONS_VERSION + 1;
  expect_reject(TF_EINVALID, "opts.version", pool, plan, name, &o);
  o.version = TF_COTURN_OPTIONS_VERSION;

  o.secrets_count = 0;
  expect_reject(TF_EINVALID, "secrets: at least one shared secret is required", pool, plan, name, &o);
  o.secrets = NULL;
  o.secrets_count = 1;
  expect_reject(TF_EINVALID, "secrets", pool, plan, name, &o);
  const char *newline[] = {"SEKRIT\nrealm=evil"};
  o.secrets = newline;
  expect_reject(TF_EINVALID, "secrets[0]: must not contain a line break", pool, plan, name, &o);
  const char *cr[] = {SECRET_A, "SEKRIT\rx"};
  o.secrets = cr;
  o.secrets_count = 2;
  expect_reject(TF_EINVALID, "secrets[1]: must not contain a line break", pool, plan, name, &o);
  const char *quote[] = {SECRET_A, "SEKRIT\"x"};
  o.secrets = quote;
  expect_reject(TF_EINVALID, "secrets[1]: must not contain a double quote", pool, plan, name, &o);
  const char *empty[] = {""};
  o.secrets = empty;
  o.secrets_count = 1;
  expect_reject(TF_EINVALID, "secrets[0]: must not be empty", pool, plan, name, &o);
  const char *null_entry[] = {SECRET_A, NULL};
  o.secrets = null_entry;
  o.secrets_count = 2;
  expect_reject(TF_EINVALID, "secrets[1]: required", pool, plan, name, &o);
  /* static-auth-secret="<secret>" must fit a 1000-byte line: 979 bytes do, 980 do not */
  char longest[1001];
  memset(longest, 'S', sizeof(longest));
  memcpy(longest, "SEKRIT", 6);
  longest[979] = '\0';
  const char *fits[] = {longest};
  o.secrets = fits;
  o.secrets_count = 1;
  ok = render_ok(pool, plan, name, &o);
  ck_assert_uint_eq(strcspn(strstr(ok, "static-auth-secret="), "\n"), 1000);
  tf_free(ok);
  longest[979] = 'S';
  longest[980] = '\0';
  expect_reject(TF_EINVALID, "secrets[0]: too long", pool, plan, name, &o);
  o.secrets = good;
  o.secrets_count = 2;

  o.state_dir = "var/lib/turnfleet";
  expect_reject(TF_EINVALID, "state_dir: must be an absolute path", pool, plan, name, &o);
  o.state_dir = "/var/lib/\nturnfleet";
  expect_reject(TF_EINVALID, "state_dir", pool, plan, name, &o);
  o.state_dir = "/var/lib/\"turnfleet";
  expect_reject(TF_EINVALID, "state_dir", pool, plan, name, &o);
  o.state_dir = NULL;
  o.log_file = "relay.log";
  expect_reject(TF_EINVALID, "log_file: must be an absolute path", pool, plan, name, &o);
  o.log_file = NULL;

  o.cli_port = 5766;
  expect_reject(TF_EINVALID, "cli_password: required", pool, plan, name, &o);
  o.cli_password = "CLIPW\nno-auth";
  expect_reject(TF_EINVALID, "cli_password: must not contain a line break", pool, plan, name, &o);
  o.cli_password = "CLIPW\"";
  expect_reject(TF_EINVALID, "cli_password", pool, plan, name, &o);
  o.cli_password = CLI_PW;
  ok = render_ok(pool, plan, name, &o);
  ASSERT_LINE(ok, "cli-ip=127.0.0.1");
  ASSERT_LINE(ok, "cli-port=5766");
  ASSERT_LINE(ok, "cli-password=\"" CLI_PW "\"");
  ASSERT_NO_LINE(ok, "no-cli");
  tf_free(ok);
  o.cli_port = 0;

  expect_reject(TF_ENOTFOUND, "demo-relay-zzzzz", pool, plan, "demo-relay-zzzzz", &o);
  o.coturn_version = "4.5.2";
  expect_reject(TF_EINVALID, "coturn_version: coturn 4.5.2 is older than 4.6.1", pool, plan, name, &o);
  o.coturn_version = "4.6";
  expect_reject(TF_EINVALID, "coturn_version", pool, plan, name, &o);
  o.coturn_version = "4.6.0";
  expect_reject(TF_EINVALID, "older than", pool, plan, name, &o);
  o.coturn_version = NULL;

  char *out = NULL;
  ck_assert_int_eq(tf_coturn_render(NULL, pool, plan, name, &o), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_render(&out, NULL, plan, name, &o), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_render(&out, pool, NULL, name, &o), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_render(&out, pool, plan, NULL, &o), TF_EINVALID);
  ck_assert_ptr_null(out);

  /* a plan made for another pool */
  tf_pool *other = tf_test_pool(golden_dual_pool);
  expect_reject(TF_EINVALID, "plan", other, plan, name, &o);
  tf_pool_free(other);
  tf_plan_free(plan);
  tf_pool_free(pool);

  /* tls listeners need absolute cert and key paths */
  pool = tf_test_pool(PART_POOL("4.6.1"));
  plan = plan_of(pool, golden_part_nodes);
  name = tf_relay_name(tf_plan_relay(plan, 0));
  expect_reject(TF_EINVALID, "cert_file: required", pool, plan, name, &o);
  o.cert_file = "tls.crt";
  o.key_file = "/k.pem";
  expect_reject(TF_EINVALID, "cert_file: must be an absolute path", pool, plan, name, &o);
  o.cert_file = "/c.pem";
  o.key_file = NULL;
  expect_reject(TF_EINVALID, "key_file: required", pool, plan, name, &o);
  o.key_file = "/k.pem";
  /* a prometheus port inside the relay range would take one of the relay's ports */
  o.coturn_version = "4.6.3";
  o.prometheus = 1;
  o.prometheus_port = 49160;
  expect_reject(TF_EINVALID, "prometheus_port", pool, plan, name, &o);
  o.prometheus_port = 65535;
  expect_reject(TF_EINVALID, "prometheus_port", pool, plan, tf_relay_name(relay_in_slice(plan, 1)), &o);
  o.prometheus_port = 0;
  ok = render_ok(pool, plan, tf_relay_name(relay_in_slice(plan, 1)), &o);
  ASSERT_LINE(ok, "prometheus-port=9642");
  tf_free(ok);
  tf_plan_free(plan);
  tf_pool_free(pool);
}
END_TEST

/* ---- the acceptance test: real turnserver processes on loopback ---- */

#define TS_MAX 4
#define TS_READY_MS 10000
#define TS_STOP_MS 15000

typedef struct ts_proc {
  pid_t pid;
  char name[TF_RELAY_NAME_MAX];
  char out_path[1024]; /* stdout + stderr */
  char log_path[1024]; /* log-file */
  tf_addr addrs[2];
  size_t addr_count;
  tf_port_range range;
  int udp, tcp, tls, dtls;
  uint16_t plain_port, tls_port, cli_port;
} ts_proc;

/* One test runs per forked process, so file-level state is per test. */
static ts_proc ts_procs[TS_MAX];
static size_t ts_count;
static char *ts_dir;
static char ts_version_text[64];
static uint32_t ts_version;

static void ts_cleanup(void)
{
  for (size_t i = 0; i < ts_count; i++) tf_ts_reap(&ts_procs[i].pid);
  tf_ts_remove_dir(&ts_dir);
}

#define TS_CHECK(cond, ...) TF_TS_CHECK(ts_cleanup, cond, __VA_ARGS__)
#define TS_OK(call) TF_TS_OK(ts_cleanup, call)

static void ts_setup(void)
{
  memset(ts_procs, 0, sizeof(ts_procs));
  ts_count = 0;
  ts_dir = NULL;
}

static void ts_teardown(void) { ts_cleanup(); }

/* turnserver on PATH and its version; fails loudly when absent. */
static void ts_require_turnserver(void) { tf_ts_require(ts_version_text, sizeof(ts_version_text), &ts_version); }

static int ts_addr_eq(const tf_addr *a, const tf_addr *b) { return tf_addr_compare(a, b) == 0; }

/* Is (tcp, addr, port) a socket the relay should have? */
static int ts_expected(const ts_proc *p, const tf_ts_sock *s)
{
  static tf_addr loop4;
  if (loop4.family == 0) tf_addr_parse(&loop4, "127.0.0.1");
  if (p->cli_port && s->tcp && s->port == p->cli_port && ts_addr_eq(&s->addr, &loop4)) return 1;
  int own = 0;
  for (size_t i = 0; i < p->addr_count; i++) own |= ts_addr_eq(&s->addr, &p->addrs[i]);
  if (!own) return 0;
  if (s->tcp) return (p->tcp && s->port == p->plain_port) || (p->tls && s->port == p->tls_port);
  return (p->udp && s->port == p->plain_port) || (p->dtls && s->port == p->tls_port);
}

static int ts_all_present(const ts_proc *p, const tf_ts_sock *socks, int n)
{
  static tf_addr loop4;
  if (loop4.family == 0) tf_addr_parse(&loop4, "127.0.0.1");
  for (size_t i = 0; i < p->addr_count; i++) {
    if (p->udp && !tf_ts_has(socks, n, 0, &p->addrs[i], p->plain_port)) return 0;
    if (p->tcp && !tf_ts_has(socks, n, 1, &p->addrs[i], p->plain_port)) return 0;
    if (p->tls && !tf_ts_has(socks, n, 1, &p->addrs[i], p->tls_port)) return 0;
    if (p->dtls && !tf_ts_has(socks, n, 0, &p->addrs[i], p->tls_port)) return 0;
  }
  if (p->cli_port && !tf_ts_has(socks, n, 1, &loop4, p->cli_port)) return 0;
  return 1;
}

static void ts_start(ts_proc *p, const char *conf)
{
  pid_t pid = tf_ts_spawn(conf, p->out_path);
  TS_CHECK(pid >= 0, "fork: %s", strerror(errno));
  p->pid = pid;
}

/* Wait until every expected socket is there, then check that nothing else is. */
static void ts_wait_and_check_sockets(ts_proc *p)
{
  enum { MAXS = 256 };
  tf_ts_sock socks[MAXS];
  int n = 0;
  int64_t deadline = tf_ts_now_ms() + TS_READY_MS;
  for (;;) {
    int status;
    pid_t w = waitpid(p->pid, &status, WNOHANG);
    if (w == p->pid) {
      char head[2048];
      p->pid = 0;
      tf_ts_file_head(p->out_path, head, sizeof(head));
      TS_CHECK(0, "turnserver for %s exited early (status 0x%x):\n%s", p->name, status, head);
    }
    n = tf_ts_sockets(p->pid, socks, MAXS);
    if (n > 0 && ts_all_present(p, socks, n)) break;
    if (tf_ts_now_ms() > deadline) {
      char head[2048];
      tf_ts_file_head(p->log_path, head, sizeof(head));
      TS_CHECK(0, "turnserver for %s did not bind its listeners within %d ms (%d sockets); log:\n%s", p->name,
               TS_READY_MS, n, head);
    }
    tf_ts_sleep_ms(50);
  }
  /* settle: late listener threads would show up now */
  tf_ts_sleep_ms(300);
  n = tf_ts_sockets(p->pid, socks, MAXS);
  TS_CHECK(n > 0, "turnserver for %s has no sockets any more", p->name);
  for (int i = 0; i < n; i++) {
    char desc[128];
    tf_ts_fmt_sock(desc, sizeof(desc), &socks[i]);
    TS_CHECK(ts_expected(p, &socks[i]), "turnserver for %s has a socket it should not: %s", p->name, desc);
    TS_CHECK(!socks[i].tcp || socks[i].state == 0x0A, "turnserver for %s: %s is not listening", p->name, desc);
    TS_CHECK(socks[i].port < p->range.start || socks[i].port > p->range.end,
             "turnserver for %s pre-binds relay port: %s", p->name, desc);
    /* the RFC 5780 alternates of coturn's default ports are never opened by
     * accident (a listener's own port may be 3479 in PartitionedIP, checked above) */
    TS_CHECK((socks[i].port != 3479 && socks[i].port != 5350) || socks[i].port == p->plain_port ||
                 socks[i].port == p->tls_port,
             "RFC 5780 alternate port bound: %s", desc);
  }
}

/* Set when the case renders allow-loopback-peers: coturn then always warns
 * "CONFIG WARNING: allow_loopback_peers opens a possible security
 * vulnerability", which is the point of that test-only option. */
static int ts_expect_loopback_warning;

/* No configuration warning in @p path (not even a WARNING: this is the renderer's acceptance). */
static void ts_check_log(const ts_proc *p, const char *path)
{
  char line[2048];
  const char *allowed[3] = {NULL, NULL, NULL};
  size_t n = 0;
  /* 4.6.1 "CONFIG WARNING: allow_loopback_peers opens ...", 4.18 "WARNING CONFIG: allow_loopback_peers opens ..." */
  if (ts_expect_loopback_warning) allowed[n++] = "allow_loopback_peers opens a possible security vulnerability";
  /* coturn 4.18 looks for its default certificate files even with no TLS or
   * DTLS listener (`no-tls`; DTLS is off by default there and `no-dtls` is
   * gone): a warning naming the default path, the only one it prints */
  if (!p->tls && !p->dtls && ts_version >= 0x041200u) allowed[n++] = " file not found or not readable: //turn_server_";
  TS_CHECK(!tf_ts_log_problem(path, allowed, 1, line, sizeof(line)),
           "turnserver for %s logged a configuration problem in %s: %s", p->name, path, line);
}

/* SIGTERM every server by PID and reap it within a deadline. coturn 4.6.1 has
 * no SIGTERM handler, so the kernel ends it: death by signal 15 is its clean
 * stop. From 4.6.2 coturn handles SIGTERM and exits 0. */
static void ts_stop_all(void)
{
  for (size_t i = 0; i < ts_count; i++)
    if (ts_procs[i].pid > 0) kill(ts_procs[i].pid, SIGTERM);
  int64_t deadline = tf_ts_now_ms() + TS_STOP_MS;
  for (size_t i = 0; i < ts_count; i++) {
    ts_proc *p = &ts_procs[i];
    int status = 0;
    while (p->pid > 0) {
      pid_t w = waitpid(p->pid, &status, WNOHANG);
      if (w == p->pid) {
        p->pid = 0;
        break;
      }
      TS_CHECK(tf_ts_now_ms() <= deadline, "turnserver for %s did not stop within %d ms of SIGTERM", p->name,
               TS_STOP_MS);
      tf_ts_sleep_ms(20);
    }
    if (tf_coturn_features(ts_version) & TF_COTURN_GRACEFUL_SIGTERM)
      TS_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "turnserver for %s: status 0x%x after SIGTERM",
               p->name, status);
    else
      TS_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "turnserver for %s: status 0x%x after SIGTERM",
               p->name, status);
  }
}

/* A self-signed certificate made with the OpenSSL C API (no openssl CLI needed). */
static void ts_make_cert(const char *cert_path, const char *key_path)
{
  TS_CHECK(tf_ts_make_cert(cert_path, key_path, NULL, 0) == 0, "cannot write the test certificate %s", cert_path);
}

typedef struct ts_case {
  const char *pool_yaml;
  const char *nodes_json;
  size_t expect_relays;
  uint16_t cli_port; /* 0: no CLI */
  const char *cli_password;
  int tls;          /* make a certificate */
  int allow_loopback_peers;
} ts_case;

/* Plan, render, start every relay, check its sockets and log, stop it. */
static void ts_run(const ts_case *c)
{
  ts_require_turnserver();
  tf_pool *pool = tf_test_pool(c->pool_yaml);
  tf_plan *plan = plan_of(pool, c->nodes_json);
  ck_assert_uint_eq(tf_plan_relay_count(plan), c->expect_relays);
  ck_assert_uint_le(c->expect_relays, TS_MAX);
  ts_dir = tf_test_tmpdir();

  char state_dir[1024], cert[1024], key[1024];
  snprintf(state_dir, sizeof(state_dir), "%s/state", ts_dir);
  snprintf(cert, sizeof(cert), "%s/cert.pem", ts_dir);
  snprintf(key, sizeof(key), "%s/pkey.pem", ts_dir);
  TS_CHECK(mkdir(state_dir, 0700) == 0, "mkdir %s: %s", state_dir, strerror(errno));
  if (c->tls) ts_make_cert(cert, key);

  const char *secrets[] = {"acceptance secret 1", "acceptance-secret-0"};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.coturn_version = ts_version_text; /* render for the coturn that runs it */
  o.secrets = secrets;
  o.secrets_count = 2;
  o.state_dir = state_dir;
  o.cli_port = c->cli_port;
  o.cli_password = c->cli_password;
  o.cert_file = c->tls ? cert : NULL;
  o.key_file = c->tls ? key : NULL;
  o.allow_loopback_peers = c->allow_loopback_peers;
  ts_expect_loopback_warning = c->allow_loopback_peers;

  for (size_t i = 0; i < tf_plan_relay_count(plan); i++) {
    const tf_relay *r = tf_plan_relay(plan, i);
    ts_proc *p = &ts_procs[ts_count];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", tf_relay_name(r));
    snprintf(p->out_path, sizeof(p->out_path), "%s/%s.out", ts_dir, tf_relay_name(r));
    snprintf(p->log_path, sizeof(p->log_path), "%s/%s.log", ts_dir, tf_relay_name(r));
    p->addr_count = tf_relay_address_count(r);
    for (size_t a = 0; a < p->addr_count; a++) TS_OK(tf_relay_address(&p->addrs[a], r, a));
    p->range = tf_relay_port_range(r);
    p->cli_port = c->cli_port;
    for (size_t l = 0; l < tf_pool_listener_count(pool); l++) {
      int proto = tf_pool_listener_protocol(pool, l);
      uint16_t port = tf_relay_listener_port(r, l);
      if (proto == TF_PROTOCOL_UDP) p->udp = 1;
      if (proto == TF_PROTOCOL_TCP) p->tcp = 1;
      if (proto == TF_PROTOCOL_TLS) p->tls = 1;
      if (proto == TF_PROTOCOL_DTLS) p->dtls = 1;
      if (proto == TF_PROTOCOL_UDP || proto == TF_PROTOCOL_TCP) p->plain_port = port;
      else p->tls_port = port;
    }
    /* DTLS is opt-in from 4.17 and on by default before: only a dtls listener opens it */
    char relay_state[1200];
    snprintf(relay_state, sizeof(relay_state), "%s/%s", state_dir, p->name);
    TS_CHECK(mkdir(relay_state, 0700) == 0, "mkdir %s: %s", relay_state, strerror(errno));
    o.log_file = p->log_path;
    char *text = NULL;
    TS_OK(tf_coturn_render(&text, pool, plan, p->name, &o));
    char conf[1200];
    snprintf(conf, sizeof(conf), "%s/%s.conf", ts_dir, p->name);
    tf_test_write(conf, text, 0600);
    tf_crypto__wipe(text, strlen(text));
    tf_free(text);
    struct stat st;
    TS_CHECK(stat(conf, &st) == 0 && (st.st_mode & 0777) == 0600, "%s is not mode 0600", conf);
    ts_count++;
    ts_start(p, conf);
  }
  for (size_t i = 0; i < ts_count; i++) ts_wait_and_check_sockets(&ts_procs[i]);
  for (size_t i = 0; i < ts_count; i++) {
    ts_check_log(&ts_procs[i], ts_procs[i].out_path);
    ts_check_log(&ts_procs[i], ts_procs[i].log_path);
  }
  tf_plan_free(plan);
  tf_pool_free(pool);
}

START_TEST(test_coturn__turnserver_ipv4_relays_bind_only_their_own_address)
{
  ts_case c = {0};
  c.pool_yaml = "metadata: {name: loop}\n"
                "spec:\n"
                "  replicas: 3\n"
                "  addressing: {mode: HostNetwork, family: IPv4}\n"
                "  relayPortRange: {start: 50000, end: 50099}\n"
                "  listeners:\n"
                "    - {name: turn, protocol: udp, port: 3478}\n"
                "    - {name: turn-tcp, protocol: tcp, port: 3478}\n"
                "  auth: {realm: loop.turnfleet.test, secretRef: {name: loop-secret}}\n"
                "  quota: {userQuota: 5, totalQuota: 100}\n"
                "  peerPolicy: {allow: [\"127.0.0.99/32\"], deny: [\"203.0.113.0/24\", \"2001:db8::/32\"]}\n";
  c.nodes_json = NODELIST(NODE("n21", IP("InternalIP", "127.0.0.21")) "," NODE("n22", IP("InternalIP", "127.0.0.22"))
                              "," NODE("n23", IP("InternalIP", "127.0.0.23")));
  c.expect_relays = 3;
  ts_run(&c);
  ts_stop_all();
  ts_cleanup();
}
END_TEST

START_TEST(test_coturn__turnserver_dual_stack_relay_binds_both_families)
{
  ts_case c = {0};
  c.pool_yaml = "metadata: {name: dloop}\n"
                "spec:\n"
                "  addressing: {mode: HostNetwork, family: DualStack}\n"
                "  relayPortRange: {start: 50300, end: 50349}\n"
                "  listeners:\n"
                "    - {name: turn, protocol: udp, port: 3681}\n"
                "    - {name: turn-tcp, protocol: tcp, port: 3681}\n"
                "    - {name: turn-dtls, protocol: dtls, port: 5781, tlsSecretRef: {name: t}}\n"
                "  auth: {realm: dloop.turnfleet.test, secretRef: {name: s}}\n";
  c.nodes_json = NODELIST(NODE("n24", IP("InternalIP", "127.0.0.24") "," IP("InternalIP", "::1")));
  c.expect_relays = 1;
  c.tls = 1; /* dtls without tls: UDP on 5781, no TCP there */
  c.allow_loopback_peers = 1;
  ts_run(&c);
  ck_assert_uint_eq(ts_procs[0].addr_count, 2);
  ts_stop_all();
  ts_cleanup();
}
END_TEST

START_TEST(test_coturn__turnserver_partitioned_tls_slices_share_one_address)
{
  ts_case c = {0};
  c.pool_yaml = "metadata: {name: ploop}\n"
                "spec:\n"
                "  replicas: 2\n"
                "  addressing: {mode: PartitionedIP, partitionedIP: {relaysPerNode: 2}}\n"
                "  relayPortRange: {start: 50400, end: 50449}\n"
                "  listeners:\n"
                "    - {name: turn, protocol: udp, port: 3778}\n"
                "    - {name: turn-tcp, protocol: tcp, port: 3778}\n"
                "    - {name: turns, protocol: tls, port: 5749, tlsSecretRef: {name: t}}\n"
                "  auth: {realm: ploop.turnfleet.test, secretRef: {name: s}}\n";
  c.nodes_json = NODELIST(NODE("n25", IP("InternalIP", "127.0.0.25")));
  c.expect_relays = 2;
  c.tls = 1;
  ts_run(&c);
  /* the two slices: disjoint halves of the range, listeners on port + slice */
  ck_assert_uint_eq(ts_procs[0].range.start == 50400 ? ts_procs[1].range.start : ts_procs[0].range.start, 50425);
  ck_assert_uint_ne(ts_procs[0].plain_port, ts_procs[1].plain_port);
  ck_assert_uint_ne(ts_procs[0].tls_port, ts_procs[1].tls_port);
  ts_stop_all();
  ts_cleanup();
}
END_TEST

START_TEST(test_coturn__turnserver_cli_only_on_127_0_0_1)
{
  ts_case c = {0};
  c.pool_yaml = "metadata: {name: cloop}\n"
                "spec:\n"
                "  relayPortRange: {start: 50500, end: 50549}\n"
                "  listeners: [{name: turn, protocol: udp, port: 3878}]\n"
                "  auth: {realm: cloop.turnfleet.test, secretRef: {name: s}}\n";
  c.nodes_json = NODELIST(NODE("n26", IP("InternalIP", "127.0.0.26")));
  c.expect_relays = 1;
  c.cli_port = 15661;
  c.cli_password = "cli pass 26";
  ts_run(&c);
  /* the quoted password works: log in and read the allocation count (pu) and the session list (ps) */
  tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
  req.port = 15661;
  req.password = "cli pass 26";
  req.timeout_ms = 5000;
  int64_t allocs = -1;
  TS_OK(tf_relayctl_run(&allocs, NULL, &req));
  TS_CHECK(allocs == 0, "pu: %lld allocations on a fresh relay", (long long)allocs);
  char *text = NULL;
  req.op = TF_RELAYCTL_SESSIONS;
  allocs = -1;
  TS_OK(tf_relayctl_run(&allocs, &text, &req));
  TS_CHECK(allocs == 0 && text && strstr(text, "Total sessions: 0"), "ps: %s", text ? text : "");
  tf_free(text);
  /* a wrong password is refused */
  req.op = TF_RELAYCTL_COUNT;
  req.password = "not the password";
  TS_CHECK(tf_relayctl_run(&allocs, NULL, &req) == TF_EAUTH, "wrong password: %s", tf_error_last()->message);
  ts_stop_all();
  ts_cleanup();
}
END_TEST

/* ---- allocation counts and CLI lines ---- */

/* A real coturn 4.6.1 telnet session (login, `pc`) with two allocations held,
 * captured byte for byte (paths replaced by /var/lib/turnfleet/relay-a). */
START_TEST(test_coturn__allocations_from_cli_real_4_6_1_session)
{
  size_t len = 0;
  char *text = tf_test_read(tf_test_data("coturn/cli-pc-4.6.1.session"), &len);
  char *buf = malloc(len);
  ck_assert_ptr_nonnull(buf);
  memcpy(buf, text, len); /* exactly len bytes: the sanitizer sees any overread */
  int64_t allocs = -1;
  TF_OK_OR_FAIL(tf_coturn_allocations_from_cli(&allocs, buf, len));
  ck_assert_int_eq(allocs, 2);
  free(buf);
  free(text);
}
END_TEST

/* `pu` as coturn prints it: the probe user's sessions, whatever the expiry prefix; no one else's. */
START_TEST(test_coturn__user_sessions_from_cli_counts_one_user)
{
  static const char pu[] = "\xff\xfb\x01  user: <1795954056:alice>, 2 sessions\r\n"
                           "    user: <1795954056:turnfleet-operator>, 1 sessions\r\n"
                           "    user: <1795954099:turnfleet-operator>, 3 sessions\r\n"
                           "    user: <x-turnfleet-operator>, 5 sessions\r\n"
                           "    user: <turnfleet-operator>, 4 sessions\r\n\r\n  Total sessions: 15\r\n> ";
  int64_t n = -1;
  TF_OK_OR_FAIL(tf_coturn_user_sessions_from_cli(&n, pu, sizeof(pu) - 1, "turnfleet-operator"));
  ck_assert_int_eq(n, 8);
  TF_OK_OR_FAIL(tf_coturn_user_sessions_from_cli(&n, pu, sizeof(pu) - 1, "bob"));
  ck_assert_int_eq(n, 0);
  static const char bad[] = "    user: <1:turnfleet-operator>, many sessions\r\n";
  ck_assert_int_eq(tf_coturn_user_sessions_from_cli(&n, bad, sizeof(bad) - 1, "turnfleet-operator"), TF_EPROTO);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "line 1"));
  ck_assert_int_eq(tf_coturn_user_sessions_from_cli(&n, pu, sizeof(pu) - 1, ""), TF_EINVALID);
}
END_TEST

/* The excerpt of coturn.md §5, preceded and interleaved by telnet negotiation. */
START_TEST(test_coturn__allocations_from_cli_skips_telnet_iac)
{
  static const char excerpt[] = "  stale-nonce: ON (*)\r\n"
                                "  Default realm: r\r\n"
                                "  CLI session realm: r\r\n"
                                "  Long-term authorization mechanism: ON\r\n"
                                "  TURN REST API support: ON\r\n"
                                "  TURN REST API separator ASCII number: 58\r\n"
                                "  total-current-allocs: 3\r\n"
                                "  Default total-quota: 1 (**)\r\n"
                                "  Default user-quota: 0 (**)\r\n> ";
  int64_t allocs = -1;
  TF_OK_OR_FAIL(tf_coturn_allocations_from_cli(&allocs, excerpt, sizeof(excerpt) - 1));
  ck_assert_int_eq(allocs, 3);

  /* IAC WILL ECHO, IAC WILL SGA, IAC DO NAWS, a subnegotiation, IAC NOP in the
   * middle of the key and IAC GA in the middle of the number */
  static const char iac[] = "\xff\xfb\x01\xff\xfb\x03\xff\xfd\x1f\xff\xfa\x1f\x00\x50\x00\x18\xff\xf0"
                            "TURN Server\r\nEnter password: \xff\xfc\x01\r\n> \r\n"
                            "  total-curr\xff\xf1" "ent-allocs: 1\xff\xf9" "2\r\n> ";
  char *buf = malloc(sizeof(iac) - 1);
  ck_assert_ptr_nonnull(buf);
  memcpy(buf, iac, sizeof(iac) - 1);
  TF_OK_OR_FAIL(tf_coturn_allocations_from_cli(&allocs, buf, sizeof(iac) - 1));
  ck_assert_int_eq(allocs, 12);
  /* every prefix: found, not found yet, never a read past the length */
  for (size_t n = 0; n < sizeof(iac) - 1; n++) {
    char *part = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(part);
    memcpy(part, iac, n);
    int64_t v = -1;
    tf_err rc = tf_coturn_allocations_from_cli(&v, part, n);
    ck_assert_msg(rc == TF_ENOTFOUND || (rc == TF_OK && v == 12), "prefix %zu: %d %lld", n, rc, (long long)v);
    free(part);
  }
  free(buf);

  /* two replies in one buffer: the last one counts */
  static const char two[] = "total-current-allocs: 5\r\n> pc\r\ntotal-current-allocs: 4\r\n> ";
  TF_OK_OR_FAIL(tf_coturn_allocations_from_cli(&allocs, two, sizeof(two) - 1));
  ck_assert_int_eq(allocs, 4);

  /* `pu` (what the runtime sends): the tail of coturn.md §5's capture */
  static const char pu[] = "\r\n    user: <1795954056:alice>, 1 sessions\r\n    user: <1795954056:bob>, 1 sessions\r\n"
                           "    user: <1795954056:carol>, 1 sessions\r\n\r\n  Total sessions: 3\r\n\r\n> ";
  TF_OK_OR_FAIL(tf_coturn_allocations_from_cli(&allocs, pu, sizeof(pu) - 1));
  ck_assert_int_eq(allocs, 3);
  static const char bad_pu[] = "  Total sessions: lots\r\n";
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, bad_pu, sizeof(bad_pu) - 1), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "line 1: Total sessions: the value is not a count");
}
END_TEST

START_TEST(test_coturn__allocations_from_cli_rejects)
{
  int64_t allocs = 77;
  static const char none[] = "TURN Server\r\nEnter password: \r\n";
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, none, sizeof(none) - 1), TF_ENOTFOUND);
  ck_assert_str_eq(tf_error_last()->message, "neither Total sessions: nor total-current-allocs: is in the CLI output");
  /* the line has not ended: "3" may be the start of "30" */
  static const char unfinished[] = "  total-current-allocs: 3";
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, unfinished, sizeof(unfinished) - 1), TF_ENOTFOUND);
  static const char word[] = "a\r\nb\r\n  total-current-allocs: many\r\n";
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, word, sizeof(word) - 1), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "line 3: total-current-allocs: the value is not a count");
  static const char negative[] = "total-current-allocs: -1\n";
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, negative, sizeof(negative) - 1), TF_EPROTO);
  static const char trailing[] = "total-current-allocs: 3 (**)\n";
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, trailing, sizeof(trailing) - 1), TF_EPROTO);
  static const char huge[] = "total-current-allocs: 1234567890123456789012\n";
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, huge, sizeof(huge) - 1), TF_EPROTO);
  ck_assert_int_eq(allocs, 77);
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, "", 0), TF_ENOTFOUND);
  ck_assert_int_eq(tf_coturn_allocations_from_cli(NULL, "", 0), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_allocations_from_cli(&allocs, NULL, 4), TF_EINVALID);
}
END_TEST

START_TEST(test_coturn__cli_command_lines)
{
  static const struct {
    tf_coturn_cli_op op;
    const char *password;
    int64_t quota;
    const char *line;
  } ok[] = {
      {TF_COTURN_CLI_LOGIN, "s3cr3t pw", 0, "s3cr3t pw\r\n"},
      {TF_COTURN_CLI_PRINT_CONFIG, NULL, 0, "pc\r\n"},
      {TF_COTURN_CLI_REFUSE_ALLOCATIONS, NULL, 0, "cc total-quota -1\r\n"},
      {TF_COTURN_CLI_SET_TOTAL_QUOTA, NULL, 0, "cc total-quota 0\r\n"},
      {TF_COTURN_CLI_SET_TOTAL_QUOTA, NULL, 2147483647, "cc total-quota 2147483647\r\n"},
      {TF_COTURN_CLI_DRAIN, NULL, 0, "drain\r\n"},
      {TF_COTURN_CLI_STOP, NULL, 0, "stop\r\n"},
      {TF_COTURN_CLI_PRINT_USERS, NULL, 0, "pu\r\n"},
  };
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    char *line = NULL;
    TF_OK_OR_FAIL(tf_coturn_cli_command(&line, ok[i].op, ok[i].password, ok[i].quota));
    ck_assert_str_eq(line, ok[i].line);
    tf_free(line);
  }
  char *line = (char *)"untouched";
  ck_assert_int_eq(tf_coturn_cli_command(&line, TF_COTURN_CLI_LOGIN, "", 0), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_cli_command(&line, TF_COTURN_CLI_LOGIN, NULL, 0), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_cli_command(&line, TF_COTURN_CLI_LOGIN, "pw\r\npc", 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "password: must not contain a line break");
  ck_assert_int_eq(tf_coturn_cli_command(&line, TF_COTURN_CLI_SET_TOTAL_QUOTA, NULL, -1), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "quota: -1 is not 0-2147483647");
  ck_assert_int_eq(tf_coturn_cli_command(&line, TF_COTURN_CLI_SET_TOTAL_QUOTA, NULL, 2147483648LL), TF_EINVALID);
  ck_assert_int_eq(tf_coturn_cli_command(&line, (tf_coturn_cli_op)42, NULL, 0), TF_EINVALID);
  ck_assert_str_eq(line, "untouched");
  ck_assert_int_eq(tf_coturn_cli_command(NULL, TF_COTURN_CLI_STOP, NULL, 0), TF_EINVALID);
}
END_TEST

Suite *tf_test_coturn_suite(void)
{
  Suite *s = suite_create("coturn");
  TCase *tc = tcase_create("render");
  tcase_set_tags(tc, "normal");
  tcase_add_test(tc, test_coturn__version_parse);
  tcase_add_test(tc, test_coturn__deny_private_covers_the_special_purpose_registries);
  tcase_add_test(tc, test_coturn__features_follow_the_version_map);
  tcase_add_test(tc, test_coturn__options_init);
  tcase_add_test(tc, test_coturn__version_1_options_are_read_up_to_their_end);
  tcase_add_test(tc, test_coturn__build_features_from_the_usage_text);
  tcase_add_test(tc, test_coturn__config_hash_is_hex_sha256);
  tcase_add_test(tc, test_coturn__golden_ipv4_4_6_1);
  tcase_add_test(tc, test_coturn__golden_dualstack_4_17_1);
  tcase_add_test(tc, test_coturn__golden_partitioned_tls_4_6_1);
  tcase_add_test(tc, test_coturn__golden_partitioned_tls_4_18_0);
  tcase_add_test(tc, test_coturn__render_is_deterministic);
  tcase_add_test(tc, test_coturn__render_rules);
  tcase_add_test(tc, test_coturn__render_rejects_bad_options);
  suite_add_tcase(s, tc);

  TCase *tn = tcase_create("counts");
  tcase_set_tags(tn, "normal");
  tcase_add_test(tn, test_coturn__allocations_from_cli_real_4_6_1_session);
  tcase_add_test(tn, test_coturn__allocations_from_cli_skips_telnet_iac);
  tcase_add_test(tn, test_coturn__user_sessions_from_cli_counts_one_user);
  tcase_add_test(tn, test_coturn__allocations_from_cli_rejects);
  tcase_add_test(tn, test_coturn__cli_command_lines);
  suite_add_tcase(s, tn);

  /* real turnserver processes on loopback: tagged normal, so CI runs them */
  TCase *ts = tcase_create("turnserver");
  tcase_set_tags(ts, "normal");
  tcase_add_checked_fixture(ts, ts_setup, ts_teardown);
  tcase_add_test(ts, test_coturn__turnserver_ipv4_relays_bind_only_their_own_address);
  tcase_add_test(ts, test_coturn__turnserver_dual_stack_relay_binds_both_families);
  tcase_add_test(ts, test_coturn__turnserver_partitioned_tls_slices_share_one_address);
  tcase_add_test(ts, test_coturn__turnserver_cli_only_on_127_0_0_1);
  suite_add_tcase(s, ts);
  return s;
}
