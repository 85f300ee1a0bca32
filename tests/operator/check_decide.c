/* The operator's pure decisions (tools/turnfleet-operator/decide.c): what it
 * reads from a relay pod, the readiness-gate patch, the turn-uris filter, the
 * steady status, the refused status, the write decision, the CLI port slot. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "decide.h"

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

START_TEST(test_decide__reads_a_relay_pod)
{
  op_pod p;
  ck_assert_int_eq(op_pod_parse(&p, pod_json), 0);
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
  op_pod_clear(&p);
  /* not a relay pod: no relay label, or no identity annotations, or not JSON */
  ck_assert_int_eq(op_pod_parse(&p, "{\"metadata\":{\"name\":\"x\"}}"), -1);
  ck_assert_int_eq(op_pod_parse(&p, "{\"metadata\":{\"name\":\"x\",\"labels\":{\"turnfleet.hzmi.dev/relay\":\"x\"}}}"),
                   -1);
  ck_assert_int_eq(op_pod_parse(&p, "not json"), -1);
  ck_assert_int_eq(op_pod_parse(&p, NULL), -1);
}
END_TEST

START_TEST(test_decide__gate_patch_only_when_it_changes)
{
  op_pod p;
  ck_assert_int_eq(op_pod_parse(&p, pod_json), 0);
  int err = 1;
  ck_assert_ptr_null(op_gate_patch(&p, 0, NULL, NULL, "2024-05-01T12:00:00Z", &err));
  ck_assert_int_eq(err, 0);
  char *patch = op_gate_patch(&p, 1, "AllocateSucceeded", "ok", "2024-05-01T12:00:00Z", &err);
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
  patch = op_gate_patch(&p, 1, NULL, NULL, "t", &err);
  ck_assert_ptr_nonnull(strstr(patch, "\"/status/conditions/-\""));
  free(patch);
  p.has_conditions = 0;
  patch = op_gate_patch(&p, 1, NULL, NULL, "t", &err);
  ck_assert_ptr_nonnull(strstr(patch, "\"path\":\"/status/conditions\",\"value\":["));
  free(patch);
  op_pod_clear(&p);
}
END_TEST

START_TEST(test_decide__status_keeps_the_probe_time_while_the_outcome_holds)
{
  const char seen[] = "{\"status\":{\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T1\",\"ok\":true,"
                      "\"errorCode\":0,\"message\":\"\"}},{\"name\":\"b\",\"lastProbe\":{\"time\":\"T1\",\"ok\":true,"
                      "\"errorCode\":0,\"message\":\"\"}}]}}";
  const char want[] = "{\"status\":{\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T2\",\"ok\":true,"
                      "\"errorCode\":0,\"message\":\"\"}},{\"name\":\"b\",\"lastProbe\":{\"time\":\"T2\",\"ok\":false,"
                      "\"errorCode\":508,\"message\":\"full\"}},{\"name\":\"c\",\"lastProbe\":null}]}}";
  char *out = op_status_stable(want, seen);
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
  ck_assert_ptr_null(op_status_stable("not json", seen));
}
END_TEST

START_TEST(test_decide__a_failure_keeps_its_time_and_says_the_current_error)
{
  /* failing since T1 with a start-up message; failing still, otherwise: the time stays, the message is today's */
  const char seen[] = "{\"status\":{\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T1\",\"ok\":false,"
                      "\"errorCode\":0,\"message\":\"connection refused\"}}]}}";
  const char want[] = "{\"status\":{\"relays\":[{\"name\":\"a\",\"lastProbe\":{\"time\":\"T2\",\"ok\":false,"
                      "\"errorCode\":0,\"message\":\"timed out after 3000 ms\"}}]}}";
  char *out = op_status_stable(want, seen);
  cJSON *root = cJSON_Parse(out);
  cJSON *lp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "status"), "relays"), 0),
                                  "lastProbe");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(lp, "time")), "T1");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(lp, "message")), "timed out after 3000 ms");
  cJSON_Delete(root);
  free(out);
}
END_TEST

START_TEST(test_decide__a_pod_being_deleted_and_its_gate_are_read)
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
  op_pod p;
  ck_assert_int_eq(op_pod_parse(&p, json2), 0);
  ck_assert_int_eq(p.deleting, 1);
  ck_assert_int_eq(p.deleting_since_ms, op_time_parse("2024-05-01T12:00:00Z"));
  ck_assert_int_eq(p.gate, 1);
  ck_assert_str_eq(p.gate_reason, "RelayFull");
  ck_assert_str_eq(p.gate_since, "2024-05-01T11:00:00Z");
  /* the same status with another reason is a patch, and keeps the lastTransitionTime */
  int err = 0;
  ck_assert_ptr_null(op_gate_patch(&p, 1, "RelayFull", "m", "2024-05-01T13:00:00Z", &err));
  char *patch = op_gate_patch(&p, 1, "AllocateSucceeded", "ok", "2024-05-01T13:00:00Z", &err);
  ck_assert_ptr_nonnull(patch);
  ck_assert_ptr_nonnull(strstr(patch, "2024-05-01T11:00:00Z"));
  free(patch);
  op_pod_clear(&p);
  free(json2);
  free(json);
  free(text);
}
END_TEST

START_TEST(test_decide__times_parse_as_rfc3339)
{
  ck_assert_int_eq(op_time_parse("1970-01-01T00:00:01Z"), 1000);
  ck_assert_int_eq(op_time_parse("1970-01-01T00:00:01.25Z"), 1250);
  ck_assert_int_eq(op_time_parse("1970-01-01T01:00:00+01:00"), 0);
  ck_assert_int_eq(op_time_parse("2024-05-01T12:00:00Z"), 1714564800000LL);
  ck_assert_int_eq(op_time_parse("2024-05-01 12:00:00Z"), -1);
  ck_assert_int_eq(op_time_parse("2024-13-01T12:00:00Z"), -1);
  ck_assert_int_eq(op_time_parse("2024-05-01T12:00:00"), -1);
  ck_assert_int_eq(op_time_parse("2024-05-01T12:00:00.Z"), -1);
  ck_assert_int_eq(op_time_parse(NULL), -1);
}
END_TEST

START_TEST(test_decide__a_refused_pool_keeps_its_transition_time)
{
  const char seen[] = "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"InvalidSpec\","
                      "\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"}]}}";
  char *out = op_refused_status(seen, 4, "InvalidSpec", "spec.x: bad", "2024-05-01T12:00:00Z");
  ck_assert_ptr_nonnull(strstr(out, "2024-01-01T00:00:00Z"));
  ck_assert_ptr_nonnull(strstr(out, "\"observedGeneration\":\t4"));
  free(out);
  out = op_refused_status(seen, 4, "SecretMissing", "spec.auth.secretRef: no key", "2024-05-01T12:00:00Z");
  ck_assert_ptr_nonnull(strstr(out, "2024-05-01T12:00:00Z"));
  ck_assert_ptr_null(strstr(out, "2024-01-01T00:00:00Z"));
  free(out);
}
END_TEST

/* The drain finalizer: added once, removed once, other finalizers kept, the status never in the PUT. */
START_TEST(test_decide__the_drain_finalizer_is_added_and_removed_once)
{
  const char *fin = "turnfleet.hzmi.dev/drain";
  const char pool[] = "{\"metadata\":{\"name\":\"edge\",\"resourceVersion\":\"7\"},\"spec\":{},\"status\":{\"x\":1}}";
  int err = 1;
  char *with = op_with_finalizer(pool, fin, 1, &err);
  ck_assert_int_eq(err, 0);
  ck_assert_str_eq(with, "{\"metadata\":{\"name\":\"edge\",\"resourceVersion\":\"7\",\"finalizers\":"
                         "[\"turnfleet.hzmi.dev/drain\"]},\"spec\":{}}");
  ck_assert_ptr_null(op_with_finalizer(with, fin, 1, &err));
  ck_assert_int_eq(err, 0);
  const char two[] = "{\"metadata\":{\"finalizers\":[\"a/b\",\"turnfleet.hzmi.dev/drain\"],"
                     "\"deletionTimestamp\":\"2026-12-03T06:00:00Z\"}}";
  char *without = op_with_finalizer(two, fin, 0, &err);
  ck_assert_str_eq(without, "{\"metadata\":{\"finalizers\":[\"a/b\"],\"deletionTimestamp\":\"2026-12-03T06:00:00Z\"}}");
  ck_assert_ptr_null(op_with_finalizer(pool, fin, 0, &err));
  ck_assert_int_eq(err, 0);
  ck_assert_ptr_null(op_with_finalizer("{\"metadata\":{\"finalizers\":3}}", fin, 1, &err));
  ck_assert_int_eq(err, 1);
  ck_assert_ptr_null(op_with_finalizer("not json", fin, 1, &err));
  ck_assert_int_eq(err, 1);
  /* the deletion's time */
  ck_assert_int_eq(op_deletion_ms(two), op_time_parse("2026-12-03T06:00:00Z"));
  ck_assert_int_eq(op_deletion_ms(pool), 0);
  ck_assert_int_eq(op_deletion_ms("{\"metadata\":{\"deletionTimestamp\":\"soon\"}}"), 1);
  ck_assert_int_eq(op_deletion_ms("{\"metadata\":{\"deletionTimestamp\":null}}"), 0);
  ck_assert_int_eq(op_status_says(pool, "x"), 0);
  ck_assert_int_eq(op_status_says("{\"status\":{\"stopping\":true}}", "stopping"), 1);
  free(with);
  free(without);
}
END_TEST

/* ReachableFromVantage joins the status: one of its type, the transition time kept while the status holds. */
START_TEST(test_decide__vantage_condition_in_the_status)
{
  const char body[] = "{\"status\":{\"replicas\":2,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
                      "{\"type\":\"ReachableFromVantage\",\"status\":\"Unknown\"}]}}";
  const char seen[] = "{\"status\":{\"conditions\":[{\"type\":\"ReachableFromVantage\",\"status\":\"True\","
                      "\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"}]}}";
  char *out = op_with_condition(body, seen, "ReachableFromVantage", "True", "AllReachable", "3 of 3", "2024-05-01T12:00:00Z");
  ck_assert_ptr_nonnull(out);
  ck_assert_ptr_nonnull(strstr(out, "2024-01-01T00:00:00Z"));
  ck_assert_ptr_nonnull(strstr(out, "\"Ready\""));
  ck_assert_ptr_nonnull(strstr(out, "AllReachable"));
  ck_assert_ptr_null(strstr(out, "Unknown"));               /* replaced, not added */
  ck_assert_ptr_null(strstr(strstr(out, "ReachableFromVantage") + 1, "ReachableFromVantage")); /* once */
  free(out);
  out = op_with_condition(body, seen, "ReachableFromVantage", "False", "Unreachable", "turn:x failed", "2024-05-01T12:00:00Z");
  ck_assert_ptr_nonnull(strstr(out, "2024-05-01T12:00:00Z"));
  ck_assert_ptr_null(strstr(out, "2024-01-01T00:00:00Z"));
  free(out);
  ck_assert_ptr_null(op_with_condition("{\"no\":1}", NULL, "ReachableFromVantage", "True", "r", "m", "t"));
}
END_TEST

START_TEST(test_decide__writes_only_what_differs)
{
  const char desired[] = "{\"metadata\":{\"name\":\"c\"},\"data\":{\"k\":\"v\"}}";
  char *update = NULL, *path = NULL;
  ck_assert_int_eq(op_object_write(&update, &path, desired, NULL), OP_WRITE_CREATE);
  ck_assert_int_eq(op_object_write(&update, &path, desired,
                                   "{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"7\",\"uid\":\"x\"},"
                                   "\"data\":{\"k\":\"v\"}}"),
                   OP_WRITE_NONE);
  ck_assert_ptr_null(update);
  ck_assert_int_eq(op_object_write(&update, &path, desired,
                                   "{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"7\"},\"data\":{\"k\":\"w\"}}"),
                   OP_WRITE_UPDATE);
  ck_assert_str_eq(path, "data.k");
  ck_assert_ptr_nonnull(strstr(update, "\"resourceVersion\":\t\"7\""));
  ck_assert_ptr_null(strstr(update, "\"w\""));
  free(update);
  free(path);
  ck_assert_int_eq(op_object_write(&update, &path, desired, "{"), -1);
}
END_TEST

START_TEST(test_decide__cli_port_slots)
{
  /* FNV-1a("tfe2e/edge") mod 10 = 9, ("tfe2e/rival") mod 10 = 8 */
  ck_assert_uint_eq(op_cli_port_base("tfe2e", "edge", 15800, 10, 10), 15890);
  ck_assert_uint_eq(op_cli_port_base("tfe2e", "rival", 15800, 10, 10), 15880);
  ck_assert_uint_eq(op_cli_port_base("tfe2e", "edge", 15800, 1, 10), 15800);
  ck_assert_int_eq(op_generation("{\"metadata\":{\"generation\":3}}"), 3);
  ck_assert_int_eq(op_generation("{}"), 0);
  char *uid = op_meta_string("{\"metadata\":{\"uid\":\"u\"}}", "uid");
  ck_assert_str_eq(uid, "u");
  free(uid);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("operator");
  TCase *tc = tcase_create("decide");
  tcase_add_test(tc, test_decide__reads_a_relay_pod);
  tcase_add_test(tc, test_decide__gate_patch_only_when_it_changes);
  tcase_add_test(tc, test_decide__status_keeps_the_probe_time_while_the_outcome_holds);
  tcase_add_test(tc, test_decide__a_refused_pool_keeps_its_transition_time);
  tcase_add_test(tc, test_decide__writes_only_what_differs);
  tcase_add_test(tc, test_decide__vantage_condition_in_the_status);
  tcase_add_test(tc, test_decide__cli_port_slots);
  tcase_add_test(tc, test_decide__a_failure_keeps_its_time_and_says_the_current_error);
  tcase_add_test(tc, test_decide__a_pod_being_deleted_and_its_gate_are_read);
  tcase_add_test(tc, test_decide__times_parse_as_rfc3339);
  tcase_add_test(tc, test_decide__the_drain_finalizer_is_added_and_removed_once);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
