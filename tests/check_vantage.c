/* vantage: the <pool>-vantage ConfigMap and the ReachableFromVantage condition. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_test.h"

#define NOW 1764590400000LL /* 2025-12-01T12:00:00Z */

static void condition(const char *cm, int64_t now, int64_t stale, const char *status, const char *reason,
                      const char *message)
{
  const char *st = NULL, *why = NULL;
  char *msg = NULL;
  TF_OK_OR_FAIL(tf_vantage_condition(&st, &why, &msg, cm, cm ? strlen(cm) : 0, now, stale));
  ck_assert_str_eq(st, status);
  ck_assert_str_eq(why, reason);
  ck_assert_msg(strstr(msg, message) != NULL, "\"%s\" lacks \"%s\"", msg, message);
  tf_free(msg);
}

static char *configmap(const char *time, const char *results)
{
  cJSON *root = cJSON_CreateObject();
  cJSON *data = cJSON_AddObjectToObject(root, "data");
  cJSON_AddStringToObject(data, "runner", "vantage-pod-1");
  cJSON_AddStringToObject(data, "time", time);
  cJSON_AddStringToObject(data, "results.json", results);
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return s;
}

START_TEST(test_vantage__condition_true_false_unknown)
{
  char *ok = configmap("2025-12-01T11:58:00Z", "[{\"uri\":\"turn:192.0.2.1:3478?transport=udp\",\"ok\":true},"
                                               "{\"uri\":\"turn:192.0.2.2:3478?transport=udp\",\"ok\":true}]");
  condition(ok, NOW, 0, "True", "AllReachable", "2 of 2 URIs reachable from vantage-pod-1 at 2025-12-01T11:58:00Z");
  /* the same results past the staleness bound, and dated in the future */
  condition(ok, NOW + 14 * 60 * 1000, 0, "Unknown", "StaleVantageResults", "older than 900 s");
  condition(ok, NOW, 60 * 1000, "Unknown", "StaleVantageResults",
            "the results of vantage-pod-1 at 2025-12-01T11:58:00Z are older than 60 s");
  condition(ok, NOW - 20 * 60 * 1000, 0, "Unknown", "StaleVantageResults", "older than");
  cJSON_free(ok);
  char *bad = configmap("2025-12-01T11:59:30.5+00:00",
                        "[{\"uri\":\"turn:192.0.2.1:3478?transport=udp\",\"ok\":true},"
                        "{\"uri\":\"turn:192.0.2.2:3478?transport=udp\",\"ok\":false,\"stage\":\"allocate\","
                        "\"errorCode\":401,\"errorReason\":\"Unauthorized\"},"
                        "{\"uri\":\"turns:192.0.2.3:5349?transport=tcp\",\"ok\":false,\"stage\":\"connect\","
                        "\"errorCode\":0,\"message\":\"connection refused\"}]");
  condition(bad, NOW, 0, "False", "Unreachable",
            "2 of 3 URIs unreachable from vantage-pod-1 at 2025-12-01T11:59:30.5+00:00: "
            "turn:192.0.2.2:3478?transport=udp (allocate 401: Unauthorized); "
            "turns:192.0.2.3:5349?transport=tcp (connect: connection refused)");
  cJSON_free(bad);
  char *none = configmap("2025-12-01T11:59:00Z", "[]");
  condition(none, NOW, 0, "Unknown", "NoURIsProbed", "probed no URI");
  cJSON_free(none);
  condition(NULL, NOW, 0, "Unknown", "NoVantageResults", "no vantage runner has written results");
}
END_TEST

START_TEST(test_vantage__failing_list_is_bounded)
{
  char list[8192] = "[";
  for (int i = 0; i < 20; i++)
    snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s{\"uri\":\"turn:192.0.2.%d:3478\",\"ok\":false}",
             i ? "," : "", i + 1);
  strcat(list, "]");
  char *cm = configmap("2025-12-01T11:59:00Z", list);
  condition(cm, NOW, 0, "False", "Unreachable", "turn:192.0.2.8:3478 (failed); and 12 more");
  cJSON_free(cm);
}
END_TEST

START_TEST(test_vantage__malformed_configmaps_name_the_field)
{
  static const char *const cases[][2] = {
      {"{", "the vantage ConfigMap: line 1"},
      {"{\"data\":7}", "data: required"},
      {"{\"data\":{\"time\":\"2025-12-01T11:59:00Z\",\"results.json\":\"[]\"}}", "data.runner: required"},
      {"{\"data\":{\"runner\":\"r\",\"time\":\"yesterday\",\"results.json\":\"[]\"}}", "data.time: required"},
      {"{\"data\":{\"runner\":\"r\",\"time\":\"2025-13-01T11:59:00Z\",\"results.json\":\"[]\"}}", "data.time"},
      {"{\"data\":{\"runner\":\"r\",\"time\":\"2025-12-01T11:59:00Z\"}}", "data.results.json: required"},
      {"{\"data\":{\"runner\":\"r\",\"time\":\"2025-12-01T11:59:00Z\",\"results.json\":\"{}\"}}",
       "data.results.json: must be a JSON array"},
      {"{\"data\":{\"runner\":\"r\",\"time\":\"2025-12-01T11:59:00Z\",\"results.json\":\"[{\\\"ok\\\":true}]\"}}",
       "data.results.json[0]: an object with uri"},
      {"{\"data\":{\"runner\":\"r\",\"time\":\"2025-12-01T11:59:00Z\",\"results.json\":\"[1,\"}}",
       "data.results.json: line 1"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    condition(cases[i][0], NOW, 0, "Unknown", "BadVantageResults", cases[i][1]);
  const char *st, *why;
  char *msg;
  ck_assert_int_eq(tf_vantage_condition(NULL, &why, &msg, NULL, 0, NOW, 0), TF_EINVALID);
  ck_assert_int_eq(tf_vantage_condition(&st, &why, &msg, NULL, 0, NOW, -1), TF_EINVALID);
}
END_TEST

START_TEST(test_vantage__configmap_round_trip)
{
  /* a real failed probe: TCP to a closed port on loopback is refused at once */
  tf_probe_options o;
  TF_OK_OR_FAIL(tf_probe_options_init(&o, TF_PROBE_OPTIONS_VERSION));
  o.uri = "turn:127.0.0.1:9?transport=tcp";
  o.secret = "not-a-real-secret";
  o.timeout_ms = 2000;
  tf_probe_result *r = NULL;
  tf_probe_run(&r, &o);
  ck_assert_ptr_nonnull(r);
  ck_assert_int_eq(tf_probe_result_ok(r), 0);
  const tf_probe_result *results[] = {r};
  char *cm = NULL;
  TF_OK_OR_FAIL(tf_vantage_configmap(&cm, "demo", "edge", "runner-a", NOW, results, 1));
  ck_assert_ptr_null(strstr(cm, "not-a-real-secret"));
  cJSON *root = cJSON_Parse(cm);
  ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "metadata"), "name")->valuestring, "demo-vantage");
  ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "metadata"), "namespace")->valuestring, "edge");
  cJSON *data = cJSON_GetObjectItem(root, "data");
  ck_assert_str_eq(cJSON_GetObjectItem(data, "time")->valuestring, "2025-12-01T12:00:00Z");
  ck_assert_str_eq(cJSON_GetObjectItem(data, "runner")->valuestring, "runner-a");
  cJSON_Delete(root);
  condition(cm, NOW, 0, "False", "Unreachable", "1 of 1 URIs unreachable from runner-a at 2025-12-01T12:00:00Z: "
                                                "turn:127.0.0.1:9?transport=tcp (");
  tf_free(cm);
  ck_assert_int_eq(tf_vantage_configmap(&cm, "Demo", "edge", "r", NOW, results, 1), TF_EINVALID);
  ck_assert_int_eq(tf_vantage_configmap(&cm, "demo", "a.b", "r", NOW, results, 1), TF_EINVALID);
  ck_assert_int_eq(tf_vantage_configmap(&cm, "demo", "edge", "r\n", NOW, results, 1), TF_EINVALID);
  ck_assert_int_eq(tf_vantage_configmap(&cm, "demo", "edge", "r", NOW, NULL, 1), TF_EINVALID);
  TF_OK_OR_FAIL(tf_vantage_configmap(&cm, "demo", "edge", "r", NOW, NULL, 0));
  condition(cm, NOW, 0, "Unknown", "NoURIsProbed", "r at 2025-12-01T12:00:00Z probed no URI");
  tf_free(cm);
  tf_probe_result_free(r);
}
END_TEST

START_TEST(test_vantage__metrics_say_the_condition)
{
  char *bad = configmap("2025-12-01T11:59:30Z", "[{\"uri\":\"turn:192.0.2.2:3478?transport=udp\",\"ok\":false,"
                                                "\"stage\":\"allocate\",\"errorCode\":401}]");
  tf_metrics *m = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_vantage_metrics(m, "turn", "edge", bad, strlen(bad), NOW, 0));
  TF_OK_OR_FAIL(tf_vantage_metrics(m, "turn", "other", NULL, 0, NOW, 0)); /* no results: Unknown */
  ck_assert_int_eq(tf_vantage_metrics(m, "turn", "edge", bad, strlen(bad), NOW, 0), TF_EINVALID); /* twice */
  char *text = NULL;
  TF_OK_OR_FAIL(tf_metrics_to_text(&text, m));
  static const char *const want[] = {
    "turnfleet_pool_condition{namespace=\"turn\",pool=\"edge\",type=\"ReachableFromVantage\",status=\"False\"} 1\n",
    "turnfleet_pool_condition{namespace=\"turn\",pool=\"edge\",type=\"ReachableFromVantage\",status=\"True\"} 0\n",
    "turnfleet_pool_condition{namespace=\"turn\",pool=\"edge\",type=\"ReachableFromVantage\",status=\"Unknown\"} 0\n",
    "turnfleet_pool_condition{namespace=\"turn\",pool=\"other\",type=\"ReachableFromVantage\",status=\"Unknown\"} 1\n",
    "# TYPE turnfleet_pool_condition gauge\n",
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    ck_assert_msg(strstr(text, want[i]) != NULL, "%s lacks %s", text, want[i]);
  tf_free(text);
  tf_metrics_free(m);
  /* a family of another type is refused */
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_metrics_declare(m, "turnfleet_pool_condition", TF_METRIC_COUNTER, "x"));
  ck_assert_int_eq(tf_vantage_metrics(m, "turn", "edge", bad, strlen(bad), NOW, 0), TF_EINVALID);
  ck_assert_int_eq(tf_vantage_metrics(m, NULL, "edge", NULL, 0, NOW, 0), TF_EINVALID);
  tf_metrics_free(m);
  cJSON_free(bad);
}
END_TEST

Suite *tf_test_vantage_suite(void)
{
  Suite *s = suite_create("vantage");
  TCase *tc = tcase_create("vantage");
  tcase_add_test(tc, test_vantage__condition_true_false_unknown);
  tcase_add_test(tc, test_vantage__failing_list_is_bounded);
  tcase_add_test(tc, test_vantage__malformed_configmaps_name_the_field);
  tcase_add_test(tc, test_vantage__configmap_round_trip);
  tcase_add_test(tc, test_vantage__metrics_say_the_condition);
  suite_add_tcase(s, tc);
  return s;
}
