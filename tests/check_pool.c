/* pool: parsing TURNPools (YAML and JSON, whole object or spec), defaults,
 * canonical JSON, and validation that reports every problem with its path.
 * The invalid pools live in tests/data/invalid/pool-*.{yaml,json}, each with
 * a sibling .expected listing the exact problems; adding a file adds a case. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "tf_test.h"

#define TF_POOL_TEST_AUTH "auth: {realm: turnfleet.test, secretRef: {name: demo-secret}}\n"

/* All problems of a validation as "path: message\n" lines (malloc'd). */
static char *pool_problems_text(const tf_pool *p, tf_err *rc_out)
{
  tf_problems *pr = NULL;
  tf_err rc = tf_pool_validate(&pr, p);
  if (rc_out) *rc_out = rc;
  ck_assert_ptr_nonnull(pr);
  size_t cap = 64;
  for (size_t i = 0; i < tf_problems_count(pr); i++)
    cap += strlen(tf_problems_path(pr, i)) + strlen(tf_problems_message(pr, i)) + 3;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  text[0] = '\0';
  for (size_t i = 0; i < tf_problems_count(pr); i++) {
    strcat(text, tf_problems_path(pr, i));
    strcat(text, ": ");
    strcat(text, tf_problems_message(pr, i));
    strcat(text, "\n");
  }
  tf_problems_free(pr);
  return text;
}

/* Parse and validate; the pool must be valid. */
static tf_pool *pool_valid(const char *text)
{
  tf_pool *p = tf_test_pool(text);
  tf_err rc;
  char *problems = pool_problems_text(p, &rc);
  ck_assert_msg(rc == 0, "expected a valid pool, got:\n%s", problems);
  free(problems);
  return p;
}

/* Parse and validate; return the problems text (the pool must parse). */
static char *pool_invalid(const char *text)
{
  tf_pool *p = tf_test_pool(text);
  tf_err rc;
  char *problems = pool_problems_text(p, &rc);
  ck_assert_int_eq(rc, TF_EINVALID);
  tf_pool_free(p);
  return problems;
}

static char *pool_json(const tf_pool *p)
{
  char *json = NULL;
  TF_OK_OR_FAIL(tf_pool_to_json(&json, p));
  ck_assert_ptr_nonnull(json);
  return json;
}

START_TEST(test_pool__parse_whole_object_yaml)
{
  const char *y =
      "apiVersion: turnfleet.hzmi.dev/v1alpha1\n"
      "kind: TURNPool\n"
      "metadata: {name: demo, namespace: turn, labels: {team: rtc}, uid: 0b7c}\n"
      "spec:\n"
      "  replicas: 3\n"
      "  dataplane: {image: \"coturn/coturn:4.18.0-r0\", coturnVersion: \"4.18.0\"}\n"
      "  addressing:\n"
      "    mode: ExternalIPPool\n"
      "    family: IPv4\n"
      "    externalIPPool: {addresses: [\"203.0.113.0/28\", 198.51.100.7]}\n"
      "  nodeSelector: {turnfleet.hzmi.dev/relay-node: \"true\", zone: a}\n"
      "  relayPortRange: {start: 49152, end: 49200}\n"
      "  listeners:\n"
      "    - {name: turn, protocol: udp, port: 3478}\n"
      "    - {name: turns, protocol: tls, port: 5349, tlsSecretRef: {name: turn-tls}}\n"
      "  auth:\n"
      "    realm: turnfleet.example.com\n"
      "    secretRef: {name: turn-shared-secret, key: secret}\n"
      "    previousSecretRef: {name: turn-shared-secret, key: previous}\n"
      "  quota: {userQuota: 10, totalQuota: 0}\n"
      "  peerPolicy: {denyPrivate: false, allow: [\"10.1.0.0/16\"], deny: [\"192.0.2.0/24\", \"2001:db8::1\"]}\n"
      "  drainTimeout: 1h30m\n"
      "status: {relays: []}\n";
  tf_pool *p = pool_valid(y);
  ck_assert_str_eq(tf_pool_name(p), "demo");
  ck_assert_str_eq(tf_pool_namespace(p), "turn");
  ck_assert_int_eq(tf_pool_replicas(p), 3);
  ck_assert_int_eq(tf_pool_mode(p), TF_MODE_EXTERNAL_IP_POOL);
  ck_assert_int_eq(tf_pool_family(p), TF_FAMILY_IPV4);
  ck_assert_int_eq(tf_pool_relay_port_range(p).start, 49152);
  ck_assert_int_eq(tf_pool_relay_port_range(p).end, 49200);
  ck_assert_uint_eq(tf_pool_relays_per_node(p), 1);
  ck_assert_uint_eq(tf_pool_listener_count(p), 2);
  ck_assert_str_eq(tf_pool_listener_name(p, 1), "turns");
  ck_assert_int_eq(tf_pool_listener_protocol(p, 1), TF_PROTOCOL_TLS);
  ck_assert_uint_eq(tf_pool_listener_port(p, 1), 5349);
  ck_assert_str_eq(tf_pool_realm(p), "turnfleet.example.com");
  ck_assert_str_eq(tf_pool_coturn_version(p), "4.18.0");
  ck_assert_int_eq(tf_pool_drain_timeout_ms(p), 5400000);
  /* the model the planner and renderer read */
  ck_assert_str_eq(p->image, "coturn/coturn:4.18.0-r0");
  ck_assert_uint_eq(p->external_prefix_count, 2);
  ck_assert_uint_eq(p->external_prefixes[0].bits, 28);
  ck_assert_uint_eq(p->external_prefixes[1].bits, 32);
  ck_assert_uint_eq(p->node_selector_count, 2);
  ck_assert_str_eq(p->node_selector[1].key, "zone");
  ck_assert_str_eq(p->listeners[1].tls_secret, "turn-tls");
  ck_assert_ptr_null(p->listeners[0].tls_secret);
  ck_assert_str_eq(p->secret.name, "turn-shared-secret");
  ck_assert_str_eq(p->previous_secret.key, "previous");
  ck_assert_int_eq(p->user_quota, 10);
  ck_assert_int_eq(p->deny_private, 0);
  ck_assert_uint_eq(p->peer_allow_count, 1);
  ck_assert_uint_eq(p->peer_deny_count, 2);
  ck_assert_int_eq(p->peer_deny[1].addr.family, TF_AF_INET6);
  tf_pool_free(p);
}
END_TEST

START_TEST(test_pool__parse_spec_only_json_then_set_name)
{
  const char *j = "  {\"replicas\": 2, \"addressing\": {\"mode\": \"PodIP\", \"family\": \"IPv6\"},"
                  " \"auth\": {\"realm\": \"r.test\", \"secretRef\": {\"name\": \"s\"}}}";
  tf_pool *p = NULL;
  TF_OK_OR_FAIL(tf_pool_parse(&p, j, strlen(j), TF_FORMAT_AUTO));
  ck_assert_str_eq(tf_pool_name(p), "");
  ck_assert_int_eq(tf_pool_mode(p), TF_MODE_POD_IP);
  ck_assert_int_eq(tf_pool_family(p), TF_FAMILY_IPV6);
  tf_problems *pr = NULL;
  ck_assert_int_eq(tf_pool_validate(&pr, p), TF_EINVALID);
  ck_assert_uint_eq(tf_problems_count(pr), 1);
  ck_assert_str_eq(tf_problems_path(pr, 0), "metadata.name");
  ck_assert_str_eq(tf_error_last()->message,
                   "metadata.name: required (give a whole TURNPool object or set the name)");
  tf_problems_free(pr);
  TF_OK_OR_FAIL(tf_pool_set_name(p, "media"));
  pr = NULL;
  TF_OK_OR_FAIL(tf_pool_validate(&pr, p));
  ck_assert_ptr_nonnull(pr);
  ck_assert_uint_eq(tf_problems_count(pr), 0);
  tf_problems_free(pr);
  ck_assert_str_eq(tf_pool_name(p), "media");
  /* a bad name set later is caught by validation too */
  TF_OK_OR_FAIL(tf_pool_set_name(p, "Media"));
  ck_assert_int_eq(tf_pool_validate(NULL, p), TF_EINVALID);
  tf_pool_free(p);

  /* the same spec as YAML, forced format */
  const char *y = "replicas: 2\naddressing: {mode: PodIP, family: IPv6}\n" TF_POOL_TEST_AUTH;
  TF_OK_OR_FAIL(tf_pool_parse(&p, y, strlen(y), TF_FORMAT_YAML));
  ck_assert_int_eq(tf_pool_replicas(p), 2);
  tf_pool_free(p);
  /* YAML flow text is not JSON */
  ck_assert_int_eq(tf_pool_parse(&p, y, strlen(y), TF_FORMAT_JSON), TF_EPROTO);
  ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_pool__defaults_applied)
{
  tf_pool *p = pool_valid("metadata: {name: d}\nspec:\n  " TF_POOL_TEST_AUTH);
  ck_assert_str_eq(tf_pool_namespace(p), "default");
  ck_assert_int_eq(tf_pool_replicas(p), 1);
  ck_assert_int_eq(tf_pool_mode(p), TF_MODE_HOST_NETWORK);
  ck_assert_int_eq(tf_pool_family(p), TF_FAMILY_IPV4);
  ck_assert_int_eq(tf_pool_relay_port_range(p).start, 49152);
  ck_assert_int_eq(tf_pool_relay_port_range(p).end, 65535);
  ck_assert_uint_eq(tf_pool_relays_per_node(p), 1);
  ck_assert_str_eq(tf_pool_coturn_version(p), "4.6.1");
  ck_assert_int_eq(tf_pool_drain_timeout_ms(p), 600000);
  ck_assert_uint_eq(tf_pool_listener_count(p), 2);
  ck_assert_str_eq(tf_pool_listener_name(p, 0), "turn");
  ck_assert_int_eq(tf_pool_listener_protocol(p, 0), TF_PROTOCOL_UDP);
  ck_assert_str_eq(tf_pool_listener_name(p, 1), "turn-tcp");
  ck_assert_int_eq(tf_pool_listener_protocol(p, 1), TF_PROTOCOL_TCP);
  ck_assert_uint_eq(tf_pool_listener_port(p, 1), 3478);
  char *json = pool_json(p);
  ck_assert_str_eq(json,
                   "{\"apiVersion\":\"turnfleet.hzmi.dev/v1alpha1\",\"kind\":\"TURNPool\","
                   "\"metadata\":{\"name\":\"d\",\"namespace\":\"default\"},"
                   "\"spec\":{\"replicas\":1,"
                   "\"dataplane\":{\"image\":\"coturn/coturn:4.6.1\",\"coturnVersion\":\"4.6.1\"},"
                   "\"addressing\":{\"mode\":\"HostNetwork\",\"family\":\"IPv4\"},"
                   "\"nodeSelector\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"},"
                   "\"relayPortRange\":{\"start\":49152,\"end\":65535},"
                   "\"listeners\":[{\"name\":\"turn\",\"protocol\":\"udp\",\"port\":3478},"
                   "{\"name\":\"turn-tcp\",\"protocol\":\"tcp\",\"port\":3478}],"
                   "\"auth\":{\"realm\":\"turnfleet.test\",\"secretRef\":{\"name\":\"demo-secret\",\"key\":\"secret\"}},"
                   "\"quota\":{\"userQuota\":0,\"totalQuota\":0},"
                   "\"peerPolicy\":{\"denyPrivate\":true,\"allow\":[],\"deny\":[]},"
                   "\"drainTimeout\":\"600s\"}}");
  tf_free(json);
  tf_pool_free(p);

  /* the image follows a given coturnVersion; null means "not given" */
  p = pool_valid("metadata: {name: d}\nspec:\n  replicas: ~\n  dataplane: {coturnVersion: 4.17.1}\n"
                 "  nodeSelector: {}\n  " TF_POOL_TEST_AUTH);
  ck_assert_str_eq(p->image, "coturn/coturn:4.17.1");
  ck_assert_int_eq(tf_pool_replicas(p), 1);
  ck_assert_uint_eq(p->node_selector_count, 0); /* given empty: every node */
  tf_pool_free(p);
}
END_TEST

START_TEST(test_pool__coturn_version_from_the_image_tag)
{
  /* the seed's own form: no coturnVersion, the image's tag says it */
  static const struct {
    const char *image, *version;
  } ok[] = {{"coturn/coturn:4.18.0-r0", "4.18.0"},
            {"registry.test:5000/media/coturn:4.6.3-alpine", "4.6.3"},
            {"coturn/coturn:4.17.1@sha256:0123456789abcdef", "4.17.1"}};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    char text[512];
    snprintf(text, sizeof(text), "metadata: {name: d}\nspec:\n  dataplane: {image: \"%s\"}\n  " TF_POOL_TEST_AUTH,
             ok[i].image);
    tf_pool *p = pool_valid(text);
    ck_assert_str_eq(tf_pool_coturn_version(p), ok[i].version);
    ck_assert_str_eq(tf_pool_image(p), ok[i].image);
    tf_pool_free(p);
  }
  /* a given coturnVersion wins over the tag */
  tf_pool *p = pool_valid("metadata: {name: d}\nspec:\n  dataplane: {image: \"coturn/coturn:4.18.0\", coturnVersion: "
                          "\"4.17.1\"}\n  " TF_POOL_TEST_AUTH);
  ck_assert_str_eq(tf_pool_coturn_version(p), "4.17.1");
  tf_pool_free(p);
  static const struct {
    const char *image, *why;
  } bad[] = {{"coturn/coturn@sha256:0123456789abcdef", "only a digest, no tag"},
             {"registry.test:5000/coturn", "no tag"},
             {"coturn/coturn:latest", "a tag that is not a version MAJOR.MINOR.PATCH[-suffix]"},
             {"coturn/coturn:4.18", "a tag that is not a version MAJOR.MINOR.PATCH[-suffix]"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[512], want[512];
    snprintf(text, sizeof(text), "metadata: {name: d}\nspec:\n  dataplane: {image: \"%s\"}\n  " TF_POOL_TEST_AUTH,
             bad[i].image);
    snprintf(want, sizeof(want),
             "spec.dataplane.coturnVersion: required: spec.dataplane.image \"%s\" has %s, so the coturn version "
             "cannot be taken from it (set coturnVersion, e.g. \"4.18.0\")\n",
             bad[i].image, bad[i].why);
    char *got = pool_invalid(text);
    ck_assert_str_eq(got, want);
    free(got);
  }
  char *got = pool_invalid("metadata: {name: d}\nspec:\n  dataplane: {image: \"coturn/coturn:4.5.2\"}\n  " TF_POOL_TEST_AUTH);
  ck_assert_str_eq(got, "spec.dataplane.coturnVersion: \"4.5.2\" (the tag of spec.dataplane.image) is older than 4.6.1, "
                        "the oldest coturn Turnfleet supports\n");
  free(got);
}
END_TEST

START_TEST(test_pool__secret_messages_name_the_secret_and_the_key)
{
  tf_pool *p = pool_valid("metadata: {name: d, namespace: media}\nspec:\n  auth: {realm: r.test, secretRef: {name: s, "
                          "key: k}, previousSecretRef: {name: old}}\n");
  ck_assert_int_eq(tf_pool_check_secret(p, 0, "a-good-secret", 13), 0);
  size_t big = 10u << 20;
  char *value = malloc(big + 1);
  ck_assert_ptr_nonnull(value);
  memset(value, 'a', big);
  value[big] = '\0';
  ck_assert_int_eq(tf_pool_check_secret(p, 0, value, TF_POOL_SECRET_MAX), 0);
  ck_assert_int_eq(tf_pool_check_secret(p, 0, value, big), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message,
                   "spec.auth.secretRef: Secret media/s, key k: 10485760 bytes, more than the cap of 512 bytes");
  free(value);
  static const struct {
    const char *value;
    size_t len;
    const char *why;
  } bad[] = {{"two\nlines", 9, "must not contain a line break"},
             {"", 0, "must not be empty"},
             {"a\"quote", 7, "must not contain a double quote"},
             {"tab\there", 8, "must not contain a control character or NUL"},
             {"nul\0inside", 10, "must not contain a control character or NUL"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ck_assert_int_eq(tf_pool_check_secret(p, 1, bad[i].value, bad[i].len), TF_EINVALID);
    char want[256];
    snprintf(want, sizeof(want), "spec.auth.previousSecretRef: Secret media/old, key secret: %s", bad[i].why);
    ck_assert_str_eq(tf_error_last()->message, want);
    ck_assert_ptr_null(strstr(tf_error_last()->message, "two"));
  }
  ck_assert_int_eq(tf_pool_check_secret(p, 0, NULL, 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "spec.auth.secretRef: Secret media/s, key k: no such key");
  tf_pool_free(p);
}
END_TEST

START_TEST(test_pool__every_mode_and_family)
{
  static const char *const sections[4] = {
      "",
      "    externalIPPool: {addresses: [\"203.0.113.0/28\", \"2001:db8:1::/124\"]}\n",
      "    podIP: {}\n",
      "    partitionedIP: {relaysPerNode: 3}\n",
  };
  for (int mode = 0; mode < 4; mode++) {
    for (int family = 0; family < 3; family++) {
      const char *section = sections[mode];
      if (mode == TF_MODE_EXTERNAL_IP_POOL && family == TF_FAMILY_IPV4)
        section = "    externalIPPool: {addresses: [\"203.0.113.0/28\"]}\n";
      if (mode == TF_MODE_EXTERNAL_IP_POOL && family == TF_FAMILY_IPV6)
        section = "    externalIPPool: {addresses: [\"2001:db8:1::/124\"]}\n";
      char text[1024];
      snprintf(text, sizeof(text),
               "metadata: {name: m%d-f%d}\nspec:\n  addressing:\n    mode: %s\n    family: %s\n%s"
               "  relayPortRange: {start: 50000, end: 50999}\n  " TF_POOL_TEST_AUTH,
               mode, family, tf_mode_name((tf_mode)mode), tf_family_name((tf_family)family), section);
      tf_pool *p = pool_valid(text);
      ck_assert_int_eq(tf_pool_mode(p), mode);
      ck_assert_int_eq(tf_pool_family(p), family);
      ck_assert_uint_eq(tf_pool_relays_per_node(p), mode == TF_MODE_PARTITIONED_IP ? 3u : 1u);
      /* and the same pool through its canonical JSON */
      char *json = pool_json(p);
      tf_pool *q = pool_valid(json);
      char *again = pool_json(q);
      ck_assert_str_eq(again, json);
      tf_free(again);
      tf_free(json);
      tf_pool_free(q);
      tf_pool_free(p);
    }
  }
}
END_TEST

START_TEST(test_pool__example_pools_round_trip)
{
  static const char *const files[] = {"pools/loopback.yaml", "pools/dualstack.yaml", "pools/external.yaml",
                                      "pools/podip.yaml", "pools/partitioned.yaml"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char *text = tf_test_read(tf_test_data(files[i]), NULL);
    tf_pool *p = pool_valid(text);
    free(text);
    char *json = pool_json(p);
    tf_pool *q = pool_valid(json);
    char *again = pool_json(q);
    ck_assert_msg(strcmp(json, again) == 0, "%s: round trip differs:\n%s\n%s", files[i], json, again);
    ck_assert_str_eq(tf_pool_name(q), tf_pool_name(p));
    ck_assert_int_eq(tf_pool_replicas(q), tf_pool_replicas(p));
    ck_assert_int_eq(tf_pool_mode(q), tf_pool_mode(p));
    ck_assert_int_eq(tf_pool_family(q), tf_pool_family(p));
    ck_assert_int_eq(tf_pool_relay_port_range(q).start, tf_pool_relay_port_range(p).start);
    ck_assert_int_eq(tf_pool_relay_port_range(q).end, tf_pool_relay_port_range(p).end);
    ck_assert_uint_eq(tf_pool_relays_per_node(q), tf_pool_relays_per_node(p));
    ck_assert_uint_eq(tf_pool_listener_count(q), tf_pool_listener_count(p));
    for (size_t l = 0; l < tf_pool_listener_count(p); l++) {
      ck_assert_str_eq(tf_pool_listener_name(q, l), tf_pool_listener_name(p, l));
      ck_assert_int_eq(tf_pool_listener_protocol(q, l), tf_pool_listener_protocol(p, l));
      ck_assert_uint_eq(tf_pool_listener_port(q, l), tf_pool_listener_port(p, l));
    }
    ck_assert_str_eq(tf_pool_realm(q), tf_pool_realm(p));
    ck_assert_int_eq(tf_pool_drain_timeout_ms(q), tf_pool_drain_timeout_ms(p));
    ck_assert_uint_eq(q->external_prefix_count, p->external_prefix_count);
    for (size_t k = 0; k < p->external_prefix_count; k++)
      ck_assert_int_eq(memcmp(&q->external_prefixes[k], &p->external_prefixes[k], sizeof(tf_prefix)), 0);
    ck_assert_ptr_null(strstr(json, "\"secret\":")); /* references only, never secret values */
    tf_free(again);
    tf_free(json);
    tf_pool_free(q);
    tf_pool_free(p);
  }
  tf_pool *p = tf_test_pool_file("pools/loopback.yaml");
  ck_assert_str_eq(tf_pool_name(p), "loop");
  ck_assert_int_eq(tf_pool_replicas(p), 3);
  ck_assert_int_eq(tf_pool_relay_port_range(p).start, 50000);
  ck_assert_int_eq(tf_pool_relay_port_range(p).end, 50099);
  ck_assert_str_eq(p->secret.name, "loop-secret");
  tf_pool_free(p);
  p = tf_test_pool_file("pools/partitioned.yaml");
  ck_assert_int_eq(tf_pool_mode(p), TF_MODE_PARTITIONED_IP);
  ck_assert_uint_eq(tf_pool_relays_per_node(p), 4);
  ck_assert_str_eq(p->listeners[2].tls_secret, "part-tls");
  tf_pool_free(p);
}
END_TEST

/* Split text into lines (in place); returns the count. */
static size_t pool_lines(char *text, char **lines, size_t max)
{
  size_t n = 0;
  char *save = NULL;
  for (char *l = strtok_r(text, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save)) lines[n++] = l;
  return n;
}

/* One corpus case: parse (TF_EPROTO gives one line, the error) and validate. */
static void pool_corpus_case(const char *dir, const char *file)
{
  char path[8192];
  int pw = snprintf(path, sizeof(path), "%s/%s", dir, file);
  ck_assert(pw > 0 && (size_t)pw < sizeof(path) - 16);
  size_t len = 0;
  char *text = tf_test_read(path, &len);
  char *dot = strrchr(path, '.');
  snprintf(dot, sizeof(path) - (size_t)(dot - path), ".expected");
  char *expected = tf_test_read(path, NULL);

  char *got = NULL;
  tf_pool *p = NULL;
  tf_err rc = tf_pool_parse(&p, text, len, TF_FORMAT_AUTO);
  if (rc < 0) {
    ck_assert_msg(rc == TF_EPROTO, "%s: parse returned %d (%s)", file, rc, tf_error_last()->message);
    ck_assert_ptr_null(p);
    got = malloc(strlen(tf_error_last()->message) + 2);
    ck_assert_ptr_nonnull(got);
    sprintf(got, "%s\n", tf_error_last()->message);
  } else {
    got = pool_problems_text(p, &rc);
    ck_assert_msg(rc == TF_EINVALID, "%s: the pool is valid, expected problems", file);
    /* tf_error_last() names the first problem and counts the rest */
    tf_problems *pr = NULL;
    ck_assert_int_eq(tf_pool_validate(&pr, p), TF_EINVALID);
    size_t n = tf_problems_count(pr);
    char first[2048];
    int w = snprintf(first, sizeof(first), "%s: %s", tf_problems_path(pr, 0), tf_problems_message(pr, 0));
    if (n > 1) snprintf(first + w, sizeof(first) - (size_t)w, " (and %zu more problem%s)", n - 1, n == 2 ? "" : "s");
    ck_assert_str_eq(tf_error_last()->message, first);
    tf_problems_free(pr);
    tf_pool_free(p);
  }
  if (strcmp(got, expected) != 0) {
    char *g = strdup(got), *e = strdup(expected);
    char *gl[128], *el[128];
    size_t gn = pool_lines(g, gl, 128), en = pool_lines(e, el, 128);
    size_t i = 0;
    while (i < gn && i < en && !strcmp(gl[i], el[i])) i++;
    ck_abort_msg("%s: problems differ at line %zu\n- expected: %s\n+ got:      %s\n--- expected (%zu lines):\n%s--- got "
                 "(%zu lines):\n%s",
                 file, i + 1, i < en ? el[i] : "(nothing)", i < gn ? gl[i] : "(nothing)", en, expected, gn, got);
  }
  free(got);
  free(expected);
  free(text);
}

static int pool_name_cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(test_pool__invalid_corpus)
{
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s", tf_test_data("invalid"));
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  char *names[512];
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < 512) {
    const char *dot = strrchr(e->d_name, '.');
    if (strncmp(e->d_name, "pool-", 5) != 0 || !dot) continue;
    if (strcmp(dot, ".yaml") != 0 && strcmp(dot, ".json") != 0) continue;
    names[n] = strdup(e->d_name);
    ck_assert_ptr_nonnull(names[n]);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof(names[0]), pool_name_cmp);
  ck_assert_uint_ge(n, 27);
  for (size_t i = 0; i < n; i++) {
    pool_corpus_case(dir, names[i]);
    free(names[i]);
  }
}
END_TEST

START_TEST(test_pool__syntax_errors_are_eproto)
{
  tf_pool *p = NULL;
  const char *bad = "{\"spec\": {\"replicas\": }}";
  ck_assert_int_eq(tf_pool_parse(&p, bad, strlen(bad), TF_FORMAT_AUTO), TF_EPROTO);
  ck_assert_ptr_null(p);
  ck_assert_str_eq(tf_error_last()->message, "line 1, column 23 (byte 22): invalid JSON");
  ck_assert_int_eq(tf_pool_parse(&p, "", 0, TF_FORMAT_AUTO), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "document: must be a mapping (a TURNPool object or its spec)");
  ck_assert_int_eq(tf_pool_parse(&p, "just text", 9, TF_FORMAT_AUTO), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "document: must be a mapping (a TURNPool object or its spec)");
  ck_assert_int_eq(tf_pool_parse(&p, "[1]", 3, TF_FORMAT_JSON), TF_EPROTO);
  ck_assert_ptr_null(p);
  /* bytes after the first NUL are still text to the parser, not a crash */
  const char nul[] = "replicas: 1\0\n";
  ck_assert_int_eq(tf_pool_parse(&p, nul, sizeof(nul) - 1, TF_FORMAT_YAML), TF_EPROTO);
  ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_pool__durations)
{
  static const struct {
    const char *text;
    int64_t ms;
  } ok[] = {{"600s", 600000},   {"10m", 600000}, {"1h30m", 5400000}, {"1.5h", 5400000}, {"250ms", 250},
            {"0s", 0},          {"1m30s", 90000}, {"2h0m0s", 7200000}, {"0.5s", 500},   {"1h1m1s1ms", 3661001}};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    char text[256];
    snprintf(text, sizeof(text), "metadata: {name: d}\nspec:\n  drainTimeout: \"%s\"\n  " TF_POOL_TEST_AUTH,
             ok[i].text);
    tf_pool *p = pool_valid(text);
    ck_assert_msg(tf_pool_drain_timeout_ms(p) == ok[i].ms, "%s -> %lld", ok[i].text,
                  (long long)tf_pool_drain_timeout_ms(p));
    tf_pool_free(p);
  }
  static const char *const bad[] = {"600", "10x", "", "s", "1.2.3s", "h1", "5 s", "1d", "0", "10M", "1e3s"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[256], want[256];
    snprintf(text, sizeof(text), "metadata: {name: d}\nspec:\n  drainTimeout: \"%s\"\n  " TF_POOL_TEST_AUTH, bad[i]);
    snprintf(want, sizeof(want), "spec.drainTimeout: \"%s\" is not a duration (e.g. 600s, 10m, 1h30m)\n", bad[i]);
    char *got = pool_invalid(text);
    ck_assert_str_eq(got, want);
    free(got);
  }
  char *got = pool_invalid("metadata: {name: d}\nspec:\n  drainTimeout: 99999999999999999h\n  " TF_POOL_TEST_AUTH);
  ck_assert_str_eq(got, "spec.drainTimeout: \"99999999999999999h\" is too long\n");
  free(got);
}
END_TEST

START_TEST(test_pool__coturn_versions)
{
  static const char *const ok[] = {"4.6.1", "4.6.2", "4.6.10", "4.7.0", "4.18.0-r0", "5.0.0", "4.6.1-1.debian"};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    char text[256];
    snprintf(text, sizeof(text), "metadata: {name: d}\nspec:\n  dataplane: {coturnVersion: \"%s\"}\n  " TF_POOL_TEST_AUTH,
             ok[i]);
    tf_pool *p = pool_valid(text);
    ck_assert_str_eq(tf_pool_coturn_version(p), ok[i]);
    tf_pool_free(p);
  }
  static const char *const old[] = {"4.6.0", "4.5.2", "3.9.9", "0.0.0"};
  for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++) {
    char text[256];
    snprintf(text, sizeof(text), "metadata: {name: d}\nspec:\n  dataplane: {coturnVersion: \"%s\"}\n  " TF_POOL_TEST_AUTH,
             old[i]);
    char *got = pool_invalid(text);
    ck_assert_ptr_nonnull(strstr(got, "is older than 4.6.1"));
    free(got);
  }
  static const char *const bad[] = {"4.6", "4.6.1.2", "v4.6.1", "4.6.1-", "4..1", "4.6.x", "4.6.1 r0"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[256];
    snprintf(text, sizeof(text), "metadata: {name: d}\nspec:\n  dataplane: {coturnVersion: \"%s\"}\n  " TF_POOL_TEST_AUTH,
             bad[i]);
    char *got = pool_invalid(text);
    ck_assert_msg(strstr(got, "is not a coturn version") != NULL, "%s: %s", bad[i], got);
    free(got);
  }
}
END_TEST

START_TEST(test_pool__name_limits)
{
  char name[64], text[512];
  memset(name, 'a', 51);
  name[51] = '\0';
  snprintf(text, sizeof(text), "metadata: {name: %s}\nspec:\n  " TF_POOL_TEST_AUTH, name);
  tf_pool *p = pool_valid(text);
  tf_pool_free(p);
  p = pool_valid("metadata: {name: 0-a-9}\nspec:\n  " TF_POOL_TEST_AUTH);
  tf_pool_free(p);
  static const char *const bad[] = {"-a", "a-", "a.b", "A", "a_b", "\"\""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(text, sizeof(text), "metadata: {name: %s}\nspec:\n  " TF_POOL_TEST_AUTH, bad[i]);
    char *got = pool_invalid(text);
    ck_assert_msg(strncmp(got, "metadata.name: ", 15) == 0 && strchr(got, '\n') == got + strlen(got) - 1, "%s: %s",
                  bad[i], got);
    free(got);
  }
  /* a user string in a message is cut, so messages stay bounded */
  char longname[300];
  memset(longname, 'B', 299);
  longname[299] = '\0';
  snprintf(text, sizeof(text), "metadata: {name: %s}\nspec:\n  " TF_POOL_TEST_AUTH, longname);
  char *got = pool_invalid(text);
  ck_assert_uint_lt(strlen(got), 250);
  free(got);
}
END_TEST

START_TEST(test_pool__partitioned_listener_ports)
{
  /* slices serve port + i: 49148-49151 end just below the range, 5349-5352 clear of 3478-3481 */
  tf_pool *p = pool_valid("metadata: {name: part}\nspec:\n"
                          "  addressing: {mode: PartitionedIP, partitionedIP: {relaysPerNode: 4}}\n"
                          "  relayPortRange: {start: 49152, end: 49200}\n"
                          "  listeners:\n"
                          "    - {name: turn, protocol: udp, port: 49148}\n"
                          "    - {name: turns, protocol: tls, port: 49144, tlsSecretRef: {name: t}}\n"
                          "  " TF_POOL_TEST_AUTH);
  ck_assert_uint_eq(tf_pool_relays_per_node(p), 4);
  tf_pool_free(p);
  /* 49 ports shared by 49 relays: one port each is still a slice */
  p = pool_valid("metadata: {name: part}\nspec:\n"
                 "  addressing: {mode: PartitionedIP, partitionedIP: {relaysPerNode: 49}}\n"
                 "  relayPortRange: {start: 49152, end: 49200}\n  " TF_POOL_TEST_AUTH);
  tf_pool_free(p);
  /* the same ports without partitioning are fine: no shift */
  p = pool_valid("metadata: {name: host}\nspec:\n"
                 "  relayPortRange: {start: 49152, end: 49200}\n"
                 "  listeners: [{name: turn, protocol: udp, port: 65535}, {name: turns, protocol: dtls, port: 49151,"
                 " tlsSecretRef: {name: t}}]\n  " TF_POOL_TEST_AUTH);
  tf_pool_free(p);
}
END_TEST

START_TEST(test_pool__json_and_yaml_agree)
{
  const char *y = "metadata: {name: same}\nspec:\n  replicas: 5\n  addressing: {mode: HostNetwork, family: DualStack}\n"
                  "  quota: {userQuota: 3}\n  peerPolicy: {deny: [\"100.64.0.0/10\"]}\n  drainTimeout: 90s\n"
                  "  " TF_POOL_TEST_AUTH;
  const char *j = "{\"metadata\": {\"name\": \"same\"}, \"spec\": {\"replicas\": 5,"
                  " \"addressing\": {\"mode\": \"HostNetwork\", \"family\": \"DualStack\"},"
                  " \"quota\": {\"userQuota\": 3}, \"peerPolicy\": {\"deny\": [\"100.64.0.0/10\"]},"
                  " \"drainTimeout\": \"90s\","
                  " \"auth\": {\"realm\": \"turnfleet.test\", \"secretRef\": {\"name\": \"demo-secret\"}}}}";
  tf_pool *a = pool_valid(y), *b = pool_valid(j);
  char *ja = pool_json(a), *jb = pool_json(b);
  ck_assert_str_eq(ja, jb);
  ck_assert_ptr_nonnull(strstr(ja, "\"drainTimeout\":\"90s\""));
  ck_assert_ptr_nonnull(strstr(ja, "\"deny\":[\"100.64.0.0/10\"]"));
  tf_free(ja);
  tf_free(jb);
  tf_pool_free(a);
  tf_pool_free(b);
}
END_TEST

START_TEST(test_pool__enum_names)
{
  ck_assert_str_eq(tf_mode_name(TF_MODE_HOST_NETWORK), "HostNetwork");
  ck_assert_str_eq(tf_mode_name(TF_MODE_EXTERNAL_IP_POOL), "ExternalIPPool");
  ck_assert_str_eq(tf_mode_name(TF_MODE_POD_IP), "PodIP");
  ck_assert_str_eq(tf_mode_name(TF_MODE_PARTITIONED_IP), "PartitionedIP");
  ck_assert_ptr_null(tf_mode_name((tf_mode)4));
  ck_assert_ptr_null(tf_mode_name((tf_mode)-1));
  ck_assert_str_eq(tf_family_name(TF_FAMILY_IPV4), "IPv4");
  ck_assert_str_eq(tf_family_name(TF_FAMILY_IPV6), "IPv6");
  ck_assert_str_eq(tf_family_name(TF_FAMILY_DUAL_STACK), "DualStack");
  ck_assert_ptr_null(tf_family_name((tf_family)3));
  ck_assert_str_eq(tf_protocol_name(TF_PROTOCOL_UDP), "udp");
  ck_assert_str_eq(tf_protocol_name(TF_PROTOCOL_TCP), "tcp");
  ck_assert_str_eq(tf_protocol_name(TF_PROTOCOL_TLS), "tls");
  ck_assert_str_eq(tf_protocol_name(TF_PROTOCOL_DTLS), "dtls");
  ck_assert_ptr_null(tf_protocol_name((tf_protocol)4));
}
END_TEST

START_TEST(test_pool__bad_arguments_and_null_pool)
{
  tf_pool *p = (tf_pool *)0x1;
  ck_assert_int_eq(tf_pool_parse(NULL, "a: 1", 4, TF_FORMAT_AUTO), TF_EINVALID);
  ck_assert_int_eq(tf_pool_parse(&p, NULL, 4, TF_FORMAT_AUTO), TF_EINVALID);
  ck_assert_int_eq(tf_pool_parse(&p, "a: 1", 4, 7), TF_EINVALID);
  ck_assert_int_eq(tf_pool_set_name(NULL, "x"), TF_EINVALID);
  ck_assert_int_eq(tf_pool_validate(NULL, NULL), TF_EINVALID);
  tf_problems *pr = (tf_problems *)0x1;
  ck_assert_int_eq(tf_pool_validate(&pr, NULL), TF_EINVALID);
  ck_assert_ptr_null(pr);
  char *json = (char *)0x1;
  ck_assert_int_eq(tf_pool_to_json(&json, NULL), TF_EINVALID);
  ck_assert_ptr_null(json);
  ck_assert_int_eq(tf_pool_to_json(NULL, NULL), TF_EINVALID);
  tf_pool_free(NULL);
  tf_problems_free(NULL);
  ck_assert_str_eq(tf_pool_name(NULL), "");
  ck_assert_str_eq(tf_pool_namespace(NULL), "");
  ck_assert_int_eq(tf_pool_replicas(NULL), 0);
  ck_assert_int_eq(tf_pool_mode(NULL), TF_MODE_HOST_NETWORK);
  ck_assert_int_eq(tf_pool_family(NULL), TF_FAMILY_IPV4);
  ck_assert_int_eq(tf_pool_relay_port_range(NULL).start, 0);
  ck_assert_uint_eq(tf_pool_relays_per_node(NULL), 0);
  ck_assert_uint_eq(tf_pool_listener_count(NULL), 0);
  ck_assert_ptr_null(tf_pool_listener_name(NULL, 0));
  ck_assert_int_eq(tf_pool_listener_protocol(NULL, 0), -1);
  ck_assert_uint_eq(tf_pool_listener_port(NULL, 0), 0);
  ck_assert_str_eq(tf_pool_realm(NULL), "");
  ck_assert_str_eq(tf_pool_coturn_version(NULL), "");
  ck_assert_int_eq(tf_pool_drain_timeout_ms(NULL), 0);
  ck_assert_uint_eq(tf_problems_count(NULL), 0);
  ck_assert_ptr_null(tf_problems_path(NULL, 0));
  /* out of range on a real pool */
  tf_pool *q = pool_valid("metadata: {name: d}\nspec:\n  " TF_POOL_TEST_AUTH);
  ck_assert_ptr_null(tf_pool_listener_name(q, 2));
  ck_assert_int_eq(tf_pool_listener_protocol(q, 2), -1);
  ck_assert_uint_eq(tf_pool_listener_port(q, 2), 0);
  ck_assert_int_eq(tf_pool_set_name(q, NULL), TF_EINVALID);
  ck_assert_str_eq(tf_pool_name(q), "d");
  tf_pool_free(q);
}
END_TEST

START_TEST(test_pool__validate_counts_the_rest)
{
  tf_pool *p = tf_test_pool("replicas: -1\nauth: {realm: r}\n");
  ck_assert_int_eq(tf_pool_validate(NULL, p), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message,
                   "metadata.name: required (give a whole TURNPool object or set the name) (and 2 more problems)");
  tf_pool_free(p);
  p = tf_test_pool("metadata: {name: x}\nspec: {auth: {realm: r}}\n");
  ck_assert_int_eq(tf_pool_validate(NULL, p), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message,
                   "spec.auth.secretRef: required (the Secret holding the shared TURN secret)");
  tf_pool_free(p);
  p = tf_test_pool("metadata: {name: x}\nspec: {replicas: 1.5, auth: {realm: r}}\n");
  ck_assert_int_eq(tf_pool_validate(NULL, p), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "spec.replicas: must be an integer (and 1 more problem)");
  tf_pool_free(p);
}
END_TEST

START_TEST(test_pool__odd_keys_stay_on_one_bounded_line)
{
  char key[201];
  memset(key, 'k', 200);
  key[200] = '\0';
  char text[512];
  snprintf(text, sizeof(text),
           "{\"metadata\": {\"name\": \"odd\"}, \"spec\": {\"a\\nb\": 1, \"%s\": 2,"
           " \"auth\": {\"realm\": \"r\", \"secretRef\": {\"name\": \"s\"}}}}",
           key);
  char *got = pool_invalid(text);
  char want[512];
  snprintf(want, sizeof(want), "spec.a?b: unknown field\nspec.%.64s: unknown field\n", key);
  ck_assert_str_eq(got, want);
  free(got);
}
END_TEST

/* What a Pod or Secret builder reads, without a JSON round trip. */
START_TEST(test_pool__accessors_for_manifest_builders)
{
  tf_pool *p = pool_valid("metadata: {name: acc}\n"
                          "spec:\n"
                          "  replicas: 3\n"
                          "  dataplane: {image: \"coturn/coturn:4.6.3\", coturnVersion: \"4.6.3\"}\n"
                          "  addressing: {mode: ExternalIPPool, externalIPPool: {addresses: [203.0.113.0/29]}}\n"
                          "  nodeSelector: {pool: edge}\n"
                          "  listeners: [{name: tls, protocol: tls, port: 5349, tlsSecretRef: {name: certs}}]\n"
                          "  auth: {realm: r, secretRef: {name: s1, key: k}, previousSecretRef: {name: s0}}\n"
                          "  quota: {userQuota: 2, totalQuota: 50}\n"
                          "  peerPolicy: {denyPrivate: false, deny: [198.51.100.0/24]}\n"
                          "  drainTimeout: 45s\n");
  ck_assert_str_eq(tf_pool_image(p), "coturn/coturn:4.6.3");
  const char *name, *key;
  TF_OK_OR_FAIL(tf_pool_secret_ref(p, 0, &name, &key));
  ck_assert_str_eq(name, "s1");
  ck_assert_str_eq(key, "k");
  TF_OK_OR_FAIL(tf_pool_secret_ref(p, 1, &name, &key));
  ck_assert_str_eq(name, "s0");
  ck_assert_str_eq(key, "secret");
  ck_assert_str_eq(tf_pool_listener_tls_secret(p, 0), "certs");
  ck_assert_ptr_null(tf_pool_listener_tls_secret(p, 1));
  ck_assert_uint_eq(tf_pool_node_selector_count(p), 1);
  ck_assert_str_eq(tf_pool_node_selector_key(p, 0), "pool");
  ck_assert_str_eq(tf_pool_node_selector_value(p, 0), "edge");
  ck_assert_ptr_null(tf_pool_node_selector_key(p, 1));
  ck_assert_ptr_null(tf_pool_pod_network(p));
  ck_assert_uint_eq(tf_pool_external_prefix_count(p), 1);
  tf_prefix pre;
  TF_OK_OR_FAIL(tf_pool_external_prefix(&pre, p, 0));
  ck_assert_uint_eq(pre.bits, 29);
  ck_assert_int_eq(tf_pool_external_prefix(&pre, p, 1), TF_ENOTFOUND);
  ck_assert_int_eq(tf_pool_quota(p, 0), 2);
  ck_assert_int_eq(tf_pool_quota(p, 1), 50);
  ck_assert_int_eq(tf_pool_peer_deny_private(p), 0);
  ck_assert_uint_eq(tf_pool_peer_prefix_count(p, 1), 1);
  ck_assert_uint_eq(tf_pool_peer_prefix_count(p, 0), 0);
  TF_OK_OR_FAIL(tf_pool_peer_prefix(&pre, p, 1, 0));
  ck_assert_uint_eq(pre.bits, 24);
  ck_assert_int_eq(tf_pool_drain_timeout_ms(p), 45000);
  /* another replica count, everything else the same */
  tf_pool *five = NULL;
  TF_OK_OR_FAIL(tf_pool_with_replicas(&five, p, 5));
  ck_assert_int_eq(tf_pool_replicas(five), 5);
  ck_assert_str_eq(tf_pool_name(five), "acc");
  char *a = NULL, *b = NULL;
  TF_OK_OR_FAIL(tf_pool_to_json(&a, p));
  TF_OK_OR_FAIL(tf_pool_to_json(&b, five));
  ck_assert_ptr_nonnull(strstr(b, "\"replicas\":5"));
  ck_assert_int_eq(strlen(a), strlen(b));
  tf_free(a);
  tf_free(b);
  tf_pool_free(five);
  tf_pool_free(p);
  p = pool_valid("metadata: {name: b}\nspec: {auth: {realm: r, secretRef: {name: s}}}");
  ck_assert_int_eq(tf_pool_secret_ref(p, 1, &name, NULL), TF_ENOTFOUND);
  ck_assert_ptr_null(name);
  ck_assert_int_eq(tf_pool_peer_deny_private(p), 1);
  ck_assert_str_eq(tf_pool_image(p), "coturn/coturn:4.6.1"); /* the default follows coturnVersion */
  tf_pool_free(p);
}
END_TEST

/* Every input is bounded: bytes and values, each named with the field that raises it. */
START_TEST(test_pool__input_limits_are_named)
{
  static const char json[] = "{\"kind\": \"TURNPool\", \"metadata\": {\"name\": \"demo\"}, \"spec\": {\"replicas\": 2}}";
  static const char yaml[] = "kind: TURNPool\nmetadata: {name: demo}\nspec: {replicas: 2}\n";
  tf_pool *p = NULL;
  tf_parse_options o = TF_PARSE_OPTIONS_INIT;
  ck_assert_uint_eq(o.max_bytes, 16u << 20);
  o.max_bytes = 10;
  ck_assert_int_eq(tf_pool_parse_with(&p, json, strlen(json), TF_FORMAT_AUTO, &o), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message,
                   "input is larger than the limit of 10 bytes (tf_parse_options.max_bytes)");
  ck_assert_int_eq(tf_pool_parse_with(&p, yaml, strlen(yaml), TF_FORMAT_AUTO, &o), TF_EINVALID);
  ck_assert_ptr_null(p);
  o.max_bytes = 0; /* the default */
  o.max_values = 4;
  const char *docs[] = {json, yaml};
  for (size_t i = 0; i < 2; i++) {
    ck_assert_int_eq(tf_pool_parse_with(&p, docs[i], strlen(docs[i]), TF_FORMAT_AUTO, &o), TF_EINVALID);
    ck_assert_str_eq(tf_error_last()->message,
                     "document has more than 4 values, the limit (tf_parse_options.max_values)");
    ck_assert_ptr_null(p);
  }
  o.max_values = 6;
  for (size_t i = 0; i < 2; i++) {
    TF_OK_OR_FAIL(tf_pool_parse_with(&p, docs[i], strlen(docs[i]), TF_FORMAT_AUTO, &o));
    tf_pool_free(p);
    p = NULL;
  }
  o.version = 99;
  ck_assert_int_eq(tf_pool_parse_with(&p, json, strlen(json), TF_FORMAT_AUTO, &o), TF_EINVALID);
  ck_assert_int_eq(tf_parse_options_init(&o, 0), TF_EINVALID);
  TF_OK_OR_FAIL(tf_parse_options_init(&o, TF_PARSE_OPTIONS_VERSION));
  ck_assert_uint_eq(o.max_values, TF_PARSE_MAX_VALUES_DEFAULT);
  /* the defaults refuse what is over them */
  size_t big = TF_PARSE_MAX_BYTES_DEFAULT + 1;
  char *huge = malloc(big);
  ck_assert_ptr_nonnull(huge);
  memset(huge, ' ', big);
  huge[0] = '{';
  huge[big - 1] = '}';
  ck_assert_int_eq(tf_pool_parse(&p, huge, big, TF_FORMAT_AUTO), TF_EINVALID);
  free(huge);
}
END_TEST

/* JSON and YAML refuse the same strings: NUL (which used to cut "s\u0000a" to "s"), control
 * characters, invalid UTF-8 and duplicate keys, with the field path and the positions. */
START_TEST(test_pool__strings_refused_alike)
{
  static const struct {
    const char *text;
    const char *message;
  } cases[] = {
    {"{\"metadata\": {\"name\": \"s\\u0000a\"}}",
     "line 1, column 25 (byte 24): metadata.name: the string contains a NUL character (\\u0000)"},
    {"metadata: {name: \"s\\0a\"}\n", "line 1, column 18 (byte 17): metadata.name: the string contains a NUL character"},
    {"{\"metadata\": {\"name\": \"s\\\\u0000a\"}}", NULL}, /* an escaped backslash, then text: fine */
    {"{\"spec\": {\"realm\": \"a\xff\"}}", "line 1, column 22 (byte 21): spec.realm: the string is not valid UTF-8"},
    {"{\"spec\": {\"realm\": \"a\xed\xa0\x80\"}}", "line 1, column 22 (byte 21): spec.realm: the string is not valid UTF-8"},
    {"{\"spec\": {\"realm\": \"a\tb\"}}",
     "line 1, column 22 (byte 21): spec.realm: the string contains the control character 0x09"},
    {"{\"spec\": {\"listeners\": [{\"name\": \"a\", \"name\": \"b\"}]}}",
     "line 1, column 39 (byte 38): spec.listeners[0].name: duplicate key (first at line 1, column 26)"},
    {"spec:\n  listeners:\n  - {name: a, name: b}\n",
     "line 3, column 15 (byte 33): spec.listeners[0].name: duplicate key (first at line 3, column 6)"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_pool *p = NULL;
    tf_err rc = tf_pool_parse(&p, cases[i].text, strlen(cases[i].text), TF_FORMAT_AUTO);
    if (!cases[i].message) {
      ck_assert_msg(rc == 0, "case %zu: %s", i, tf_error_last()->message);
      tf_pool_free(p);
      continue;
    }
    ck_assert_msg(rc == TF_EPROTO, "case %zu: rc %d", i, rc);
    ck_assert_msg(strcmp(tf_error_last()->message, cases[i].message) == 0, "case %zu:\n  got  %s\n  want %s", i,
                  tf_error_last()->message, cases[i].message);
    ck_assert_ptr_null(p);
  }
}
END_TEST

Suite *tf_test_pool_suite(void)
{
  Suite *s = suite_create("pool");
  TCase *tc = tcase_create("pool");
  tcase_add_test(tc, test_pool__parse_whole_object_yaml);
  tcase_add_test(tc, test_pool__parse_spec_only_json_then_set_name);
  tcase_add_test(tc, test_pool__defaults_applied);
  tcase_add_test(tc, test_pool__coturn_version_from_the_image_tag);
  tcase_add_test(tc, test_pool__secret_messages_name_the_secret_and_the_key);
  tcase_add_test(tc, test_pool__every_mode_and_family);
  tcase_add_test(tc, test_pool__example_pools_round_trip);
  tcase_add_test(tc, test_pool__invalid_corpus);
  tcase_add_test(tc, test_pool__syntax_errors_are_eproto);
  tcase_add_test(tc, test_pool__durations);
  tcase_add_test(tc, test_pool__coturn_versions);
  tcase_add_test(tc, test_pool__name_limits);
  tcase_add_test(tc, test_pool__partitioned_listener_ports);
  tcase_add_test(tc, test_pool__json_and_yaml_agree);
  tcase_add_test(tc, test_pool__enum_names);
  tcase_add_test(tc, test_pool__bad_arguments_and_null_pool);
  tcase_add_test(tc, test_pool__validate_counts_the_rest);
  tcase_add_test(tc, test_pool__odd_keys_stay_on_one_bounded_line);
  tcase_add_test(tc, test_pool__accessors_for_manifest_builders);
  tcase_add_test(tc, test_pool__input_limits_are_named);
  tcase_add_test(tc, test_pool__strings_refused_alike);
  suite_add_tcase(s, tc);
  return s;
}
