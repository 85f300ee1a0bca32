/* relayctl_config: where a relay's CLI is, read from its rendered
 * turnserver.conf (the renderer's own output for both coturn versions) and
 * from hand-made variants; bad configs are named by line and option, never
 * by value. Pure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_test.h"

#define CLI_PW "RCFG-CLIPW-0e77"
#define SECRET "RCFG-SEKRIT-51ab"

static const char pool_text[] =
    "apiVersion: turnfleet.hzmi.dev/v1alpha1\n"
    "kind: TURNPool\n"
    "metadata: {name: cfg}\n"
    "spec:\n"
    "  dataplane: {coturnVersion: \"%s\"}\n"
    "  addressing: {mode: HostNetwork, family: DualStack}\n"
    "  relayPortRange: {start: 63000, end: 63009}\n"
    "  auth: {realm: cfg.test, secretRef: {name: s}}\n";
static const char nodes_json[] =
    "{\"kind\":\"List\",\"items\":[{\"metadata\":{\"name\":\"n\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\","
    "\"" TF_LABEL_DEVELOPMENT "\":\"true\"}},"
    "\"status\":{\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"127.0.0.231\"},"
    "{\"type\":\"ExternalIP\",\"address\":\"::1\"}]}}]}";

static tf_relayctl_config *parse_ok(const char *text)
{
  tf_relayctl_config *c = NULL;
  TF_OK_OR_FAIL(tf_relayctl_config_parse(&c, text, strlen(text)));
  return c;
}

START_TEST(test_relayctl_config__reads_the_renderers_output)
{
  const char *versions[] = {"4.6.1", "4.18.0"};
  for (size_t v = 0; v < 2; v++) {
    char text[1024];
    snprintf(text, sizeof(text), pool_text, versions[v]);
    tf_pool *pool = tf_test_pool(text);
    tf_nodes *nodes = tf_test_nodes(nodes_json);
    tf_plan *plan = NULL;
    TF_OK_OR_FAIL(tf_plan_new(&plan, pool, nodes, NULL));
    const char *secrets[] = {SECRET};
    tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
    o.secrets = secrets;
    o.secrets_count = 1;
    o.cli_port = 47701;
    o.cli_password = CLI_PW;
    char *conf = NULL;
    TF_OK_OR_FAIL(tf_coturn_render(&conf, pool, plan, tf_relay_name(tf_plan_relay(plan, 0)), &o));
    tf_relayctl_config *c = parse_ok(conf);
    ck_assert_uint_eq(tf_relayctl_config_cli_port(c), 47701);
    ck_assert_uint_eq(tf_relayctl_config_address_count(c), 2);
    tf_addr a;
    char s[TF_ADDR_STRLEN];
    TF_OK_OR_FAIL(tf_relayctl_config_address(&a, c, 0));
    TF_OK_OR_FAIL(tf_addr_format(s, sizeof(s), &a));
    ck_assert_str_eq(s, "127.0.0.231");
    TF_OK_OR_FAIL(tf_relayctl_config_address(&a, c, 1));
    TF_OK_OR_FAIL(tf_addr_format(s, sizeof(s), &a));
    ck_assert_str_eq(s, "::1");
    ck_assert_int_eq(tf_relayctl_config_address(&a, c, 2), TF_ENOTFOUND);
    tf_port_range r = tf_relayctl_config_port_range(c);
    ck_assert_uint_eq(r.start, 63000);
    ck_assert_uint_eq(r.end, 63009);
    ck_assert_ptr_nonnull(strstr(tf_relayctl_config_pidfile(c), "/turnserver.pid"));
    tf_relayctl_request req;
    TF_OK_OR_FAIL(tf_relayctl_config_request(&req, c, TF_RELAYCTL_COUNT, 2000));
    ck_assert_uint_eq(req.port, 47701);
    ck_assert_str_eq(req.password, CLI_PW);
    ck_assert_int_eq(req.timeout_ms, 2000);
    ck_assert_int_eq(tf_relayctl_config_request(&req, c, TF_RELAYCTL_COUNT_METRICS, 2000), TF_EINVALID);
    ck_assert_int_eq(tf_relayctl_config_request(&req, c, TF_RELAYCTL_COUNT, 0), TF_EINVALID);
    tf_relayctl_config_free(c);
    tf_secret_free(conf);
    tf_plan_free(plan);
    tf_nodes_free(nodes);
    tf_pool_free(pool);
  }
}
END_TEST

START_TEST(test_relayctl_config__coturn_syntax)
{
  /* spaces, tabs and '=' between name and value, quotes, comments, defaults */
  tf_relayctl_config *c = parse_ok("# a comment\n  cli-port 47702\ncli-password\t= \"pw with space\"\r\n"
                                   "listening-ip=127.0.0.232\nlistening-port=3900\n");
  ck_assert_uint_eq(tf_relayctl_config_cli_port(c), 47702);
  tf_relayctl_request req;
  TF_OK_OR_FAIL(tf_relayctl_config_request(&req, c, TF_RELAYCTL_DRAIN, 1000));
  ck_assert_str_eq(req.password, "pw with space");
  ck_assert_uint_eq(tf_relayctl_config_port_range(c).start, 49152);
  ck_assert_uint_eq(tf_relayctl_config_port_range(c).end, 65535);
  ck_assert_ptr_null(tf_relayctl_config_pidfile(c));
  tf_relayctl_config_free(c);
  tf_relayctl_config_free(NULL);
}
END_TEST

#define BAD(text, field)                                                                               \
  do {                                                                                                 \
    tf_relayctl_config *c_ = (tf_relayctl_config *)1;                                                  \
    ck_assert_int_eq(tf_relayctl_config_parse(&c_, text, strlen(text)), TF_EINVALID);                  \
    ck_assert_ptr_null(c_);                                                                            \
    ck_assert_msg(strstr(tf_error_last()->message, field) != NULL, "\"%s\" does not name %s",         \
                  tf_error_last()->message, field);                                                    \
    ck_assert_msg(strstr(tf_error_last()->message, "hunter2") == NULL, "the password leaked: %s",     \
                  tf_error_last()->message);                                                           \
  } while (0)

START_TEST(test_relayctl_config__bad_configs_are_named)
{
  BAD("cli-password=hunter2\nlistening-ip=127.0.0.1\n", "cli-port: missing");
  BAD("cli-port=47703\nlistening-ip=127.0.0.1\n", "cli-password: missing");
  BAD("cli-port=47703\ncli-password=\"\"\nlistening-ip=127.0.0.1\n", "cli-password: missing or empty");
  BAD("cli-port=47703\ncli-password=hunter2\n", "listening-ip: missing");
  BAD("cli-port=70000\ncli-password=hunter2\nlistening-ip=127.0.0.1\n", "line 1: cli-port");
  BAD("cli-port=47703\ncli-password=hunter2\nlistening-ip=127.0.0.300\n", "line 3: listening-ip");
  BAD("cli-port=47703\ncli-password=hunter2\ncli-ip=203.0.113.7\nlistening-ip=127.0.0.1\n", "line 3: cli-ip");
  BAD("no-cli\ncli-port=47703\ncli-password=hunter2\nlistening-ip=127.0.0.1\n", "no-cli");
  BAD("cli-port=47703\ncli-password=hunter2\nlistening-ip=127.0.0.1\nmin-port=63010\nmax-port=63000\n", "max-port");
  BAD("cli-port=47703\ncli-password=hunter2\nlistening-ip=127.0.0.1\npidfile=\"run/t.pid\"\n", "line 4: pidfile");
  /* a second pidfile line replaces the first (found by the fuzzer: the first was freed twice) */
  BAD("cli-port=47703\ncli-password=hunter2\nlistening-ip=127.0.0.1\npidfile=/a.pid\npidfile=rel\n", "line 5: pidfile");
}
END_TEST

START_TEST(test_relayctl_config__drain_per_version)
{
  uint32_t v;
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.6.1"));
  ck_assert_int_eq(tf_relayctl_drain_op(v), TF_RELAYCTL_REFUSE);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.6.3"));
  ck_assert_int_eq(tf_relayctl_drain_op(v), TF_RELAYCTL_DRAIN);
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v, "4.18.0"));
  ck_assert_int_eq(tf_relayctl_drain_op(v), TF_RELAYCTL_DRAIN);
}
END_TEST

Suite *tf_test_relayctl_config_suite(void)
{
  Suite *s = suite_create("relayctl_config");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_relayctl_config__reads_the_renderers_output);
  tcase_add_test(tc, test_relayctl_config__coturn_syntax);
  tcase_add_test(tc, test_relayctl_config__bad_configs_are_named);
  tcase_add_test(tc, test_relayctl_config__drain_per_version);
  suite_add_tcase(s, tc);
  return s;
}
