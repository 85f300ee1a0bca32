/* metrics: the Prometheus text writer (escaping, deterministic order, values)
 * and the parser (coturn.md §1 examples A and B, 4.6.1's unlabelled gauge,
 * malformed input with line and column, never reading past the length). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_test.h"

/* A copy of @p text in a block of exactly @p len bytes (no NUL after it), so
 * the sanitizer build catches any read past the length. */
static char *exact(const char *text, size_t len)
{
  char *p = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(p);
  memcpy(p, text, len);
  return p;
}

static tf_metrics *parse_ok(const char *text, size_t len)
{
  char *buf = exact(text, len);
  tf_metrics *m = NULL;
  TF_OK_OR_FAIL(tf_metrics_parse(&m, buf, len));
  free(buf);
  return m;
}

static double sum_of(const tf_metrics *m, const char *name)
{
  double v = -1;
  TF_OK_OR_FAIL(tf_metrics_sum(&v, m, name));
  return v;
}

static char *text_of(const tf_metrics *m)
{
  char *t = NULL;
  TF_OK_OR_FAIL(tf_metrics_to_text(&t, m));
  return t;
}

static const char *const L3[] = {"namespace", "pool", "relay"};

/* ---- writer ---- */

START_TEST(test_metrics__writer_escapes_label_values_and_help)
{
  tf_metrics *m = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_metrics_declare(m, "x_total", TF_METRIC_COUNTER, "back\\slash and\nnewline \"quoted\""));
  const char *names[] = {"a"};
  const char *values[] = {"q\"uote \\ back\nline"};
  TF_OK_OR_FAIL(tf_metrics_add(m, "x_total", names, values, 1, 7));
  char *t = text_of(m);
  ck_assert_str_eq(t, "# HELP x_total back\\\\slash and\\nnewline \"quoted\"\n"
                      "# TYPE x_total counter\n"
                      "x_total{a=\"q\\\"uote \\\\ back\\nline\"} 7\n");
  /* and it reads back to the same value */
  tf_metrics *p = parse_ok(t, strlen(t));
  ck_assert_str_eq(tf_metrics_sample_label(p, 0, "a"), values[0]);
  ck_assert_int_eq(tf_metrics_family_type(p, "x_total"), TF_METRIC_COUNTER);
  tf_metrics_free(p);
  tf_free(t);
  tf_metrics_free(m);
}
END_TEST

/* The same families and samples added in two different orders give the same bytes. */
START_TEST(test_metrics__writer_order_does_not_depend_on_calls)
{
  static const char expected[] = "# HELP a_gauge first by name\n"
                                 "# TYPE a_gauge gauge\n"
                                 "a_gauge{namespace=\"default\",pool=\"demo\",relay=\"demo-relay-b\"} 2\n"
                                 "a_gauge{namespace=\"default\",pool=\"demo\",relay=\"demo-relay-c\"} 3\n"
                                 "# HELP b_empty declared, no sample\n"
                                 "# TYPE b_empty counter\n"
                                 "# HELP z_gauge last by name\n"
                                 "# TYPE z_gauge gauge\n"
                                 "z_gauge 1\n";
  for (int round = 0; round < 2; round++) {
    tf_metrics *m = NULL;
    TF_OK_OR_FAIL(tf_metrics_new(&m));
    const char *vb[] = {"default", "demo", "demo-relay-b"};
    const char *vc[] = {"default", "demo", "demo-relay-c"};
    if (round == 0) {
      TF_OK_OR_FAIL(tf_metrics_declare(m, "a_gauge", TF_METRIC_GAUGE, "first by name"));
      TF_OK_OR_FAIL(tf_metrics_declare(m, "b_empty", TF_METRIC_COUNTER, "declared, no sample"));
      TF_OK_OR_FAIL(tf_metrics_declare(m, "z_gauge", TF_METRIC_GAUGE, "last by name"));
      TF_OK_OR_FAIL(tf_metrics_add(m, "a_gauge", L3, vb, 3, 2));
      TF_OK_OR_FAIL(tf_metrics_add(m, "a_gauge", L3, vc, 3, 3));
      TF_OK_OR_FAIL(tf_metrics_add(m, "z_gauge", NULL, NULL, 0, 1));
    } else {
      TF_OK_OR_FAIL(tf_metrics_declare(m, "z_gauge", TF_METRIC_GAUGE, "last by name"));
      TF_OK_OR_FAIL(tf_metrics_add(m, "z_gauge", NULL, NULL, 0, 1));
      TF_OK_OR_FAIL(tf_metrics_declare(m, "a_gauge", TF_METRIC_GAUGE, "first by name"));
      TF_OK_OR_FAIL(tf_metrics_add(m, "a_gauge", L3, vc, 3, 3));
      TF_OK_OR_FAIL(tf_metrics_add(m, "a_gauge", L3, vb, 3, 2));
      TF_OK_OR_FAIL(tf_metrics_declare(m, "b_empty", TF_METRIC_COUNTER, "declared, no sample"));
    }
    char *t = text_of(m);
    ck_assert_str_eq(t, expected);
    tf_free(t);
    tf_metrics_free(m);
  }
}
END_TEST

START_TEST(test_metrics__writer_values)
{
  static const struct {
    double v;
    const char *text;
  } cases[] = {
      {0, "0"},          {-0.0, "0"},           {42, "42"},         {-7, "-7"},
      {0.1, "0.1"},      {0.5, "0.5"},          {1.0 / 3, "0.3333333333333333"},
      {1e20, "1e+20"},   {9007199254740991.0, "9007199254740991"},
      {2.5e-7, "2.5e-07"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_metrics *m = NULL;
    TF_OK_OR_FAIL(tf_metrics_new(&m));
    TF_OK_OR_FAIL(tf_metrics_declare(m, "v", TF_METRIC_GAUGE, ""));
    TF_OK_OR_FAIL(tf_metrics_add(m, "v", NULL, NULL, 0, cases[i].v));
    char *t = text_of(m);
    char want[128];
    snprintf(want, sizeof(want), "# HELP v \n# TYPE v gauge\nv %s\n", cases[i].text);
    ck_assert_str_eq(t, want);
    /* the written value reads back exactly */
    tf_metrics *p = parse_ok(t, strlen(t));
    ck_assert(sum_of(p, "v") == cases[i].v);
    tf_metrics_free(p);
    tf_free(t);
    tf_metrics_free(m);
  }
  tf_metrics *m = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_metrics_declare(m, "s", TF_METRIC_GAUGE, "specials"));
  const char *n[] = {"k"};
  const char *v1[] = {"nan"}, *v2[] = {"pinf"}, *v3[] = {"ninf"};
  TF_OK_OR_FAIL(tf_metrics_add(m, "s", n, v1, 1, NAN));
  TF_OK_OR_FAIL(tf_metrics_add(m, "s", n, v2, 1, INFINITY));
  TF_OK_OR_FAIL(tf_metrics_add(m, "s", n, v3, 1, -INFINITY));
  char *t = text_of(m);
  ck_assert_str_eq(t, "# HELP s specials\n# TYPE s gauge\ns{k=\"nan\"} NaN\ns{k=\"ninf\"} -Inf\ns{k=\"pinf\"} +Inf\n");
  tf_free(t);
  tf_metrics_free(m);
}
END_TEST

START_TEST(test_metrics__writer_histogram_samples_join_their_family)
{
  tf_metrics *m = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_metrics_declare(m, "rtt_seconds", TF_METRIC_HISTOGRAM, "probe round trips"));
  const char *le[] = {"le"};
  const char *v1[] = {"0.1"}, *v2[] = {"+Inf"};
  TF_OK_OR_FAIL(tf_metrics_add(m, "rtt_seconds_bucket", le, v1, 1, 3));
  TF_OK_OR_FAIL(tf_metrics_add(m, "rtt_seconds_bucket", le, v2, 1, 4));
  TF_OK_OR_FAIL(tf_metrics_add(m, "rtt_seconds_count", NULL, NULL, 0, 4));
  TF_OK_OR_FAIL(tf_metrics_add(m, "rtt_seconds_sum", NULL, NULL, 0, 0.25));
  char *t = text_of(m);
  ck_assert_str_eq(t, "# HELP rtt_seconds probe round trips\n# TYPE rtt_seconds histogram\n"
                      "rtt_seconds_bucket{le=\"+Inf\"} 4\nrtt_seconds_bucket{le=\"0.1\"} 3\n"
                      "rtt_seconds_count 4\nrtt_seconds_sum 0.25\n");
  tf_free(t);
  tf_metrics_free(m);
}
END_TEST

START_TEST(test_metrics__writer_rejects_bad_input)
{
  tf_metrics *m = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  ck_assert_int_eq(tf_metrics_declare(m, "9lives", TF_METRIC_GAUGE, ""), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "name: \"9lives\" is not a metric name [a-zA-Z_:][a-zA-Z0-9_:]*");
  ck_assert_int_eq(tf_metrics_declare(m, "a-b", TF_METRIC_GAUGE, ""), TF_EINVALID);
  ck_assert_int_eq(tf_metrics_declare(m, "ok", (tf_metric_type)9, ""), TF_EINVALID);
  ck_assert_int_eq(tf_metrics_declare(NULL, "ok", TF_METRIC_GAUGE, ""), TF_EINVALID);
  TF_OK_OR_FAIL(tf_metrics_declare(m, "ok", TF_METRIC_GAUGE, ""));
  ck_assert_int_eq(tf_metrics_declare(m, "ok", TF_METRIC_COUNTER, ""), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "name: family ok is already declared");

  ck_assert_int_eq(tf_metrics_add(m, "undeclared", NULL, NULL, 0, 1), TF_ENOTFOUND);
  ck_assert_str_eq(tf_error_last()->message, "name: no family declared for undeclared");
  /* a summary has no _bucket */
  TF_OK_OR_FAIL(tf_metrics_declare(m, "sm", TF_METRIC_SUMMARY, ""));
  ck_assert_int_eq(tf_metrics_add(m, "sm_bucket", NULL, NULL, 0, 1), TF_ENOTFOUND);

  const char *bad1[] = {"__reserved"}, *bad2[] = {"1x"}, *bad3[] = {"a", "a"}, *vals[] = {"v", "w"};
  ck_assert_int_eq(tf_metrics_add(m, "ok", bad1, vals, 1, 1), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "label_names[0]: \"__reserved\" is not a label name");
  ck_assert_int_eq(tf_metrics_add(m, "ok", bad2, vals, 1, 1), TF_EINVALID);
  ck_assert_int_eq(tf_metrics_add(m, "ok", bad3, vals, 2, 1), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "label_names[1]: a given twice");
  const char *nulls[] = {NULL};
  ck_assert_int_eq(tf_metrics_add(m, "ok", bad3, nulls, 1, 1), TF_EINVALID);
  ck_assert_int_eq(tf_metrics_add(m, "ok", NULL, NULL, 1, 1), TF_EINVALID);

  const char *n[] = {"relay"}, *v[] = {"r1"};
  TF_OK_OR_FAIL(tf_metrics_add(m, "ok", n, v, 1, 1));
  ck_assert_int_eq(tf_metrics_add(m, "ok", n, v, 1, 2), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "labels: ok{relay=\"r1\"} was added before");
  /* nothing half-applied: one sample */
  ck_assert_uint_eq(tf_metrics_sample_count(m), 1);
  ck_assert_int_eq(tf_metrics_to_text(NULL, m), TF_EINVALID);
  tf_metrics_free(m);
  tf_metrics_free(NULL);
}
END_TEST

/* ---- parser ---- */

START_TEST(test_metrics__parse_coturn_4_17_1_example_a)
{
  size_t len = 0;
  char *text = tf_test_read(tf_test_data("metrics/coturn-4.17.1-example-a.prom"), &len);
  tf_metrics *m = parse_ok(text, len);
  /* 2 UDP + 1 TLS allocation */
  ck_assert(sum_of(m, "turn_total_allocations") == 3);
  /* a family with HELP/TYPE and no sample is 0, not absent */
  ck_assert(sum_of(m, "turn_unauthenticated_401_dropped_responses") == 0);
  ck_assert(sum_of(m, "turn_traffic_rcvb") == 264);
  ck_assert(sum_of(m, "turn_packet_processed") == 9);
  ck_assert_int_eq(tf_metrics_family_type(m, "turn_traffic_rcvp"), TF_METRIC_COUNTER);
  ck_assert_int_eq(tf_metrics_family_type(m, "turn_total_allocations"), TF_METRIC_GAUGE);
  ck_assert_int_eq(tf_metrics_family_type(m, "nope"), -1);
  double x;
  ck_assert_int_eq(tf_metrics_sum(&x, m, "process_open_fds"), TF_ENOTFOUND);
  /* samples keep input order and their labels */
  size_t found = 0;
  for (size_t i = 0; i < tf_metrics_sample_count(m); i++) {
    const char *name;
    double v;
    TF_OK_OR_FAIL(tf_metrics_sample(m, i, &name, &v));
    if (strcmp(name, "turn_total_allocations") != 0) continue;
    const char *type = tf_metrics_sample_label(m, i, "type");
    ck_assert_ptr_nonnull(type);
    ck_assert_str_eq(type, found == 0 ? "TLS/TCP" : "UDP");
    ck_assert(v == (found == 0 ? 1 : 2));
    ck_assert_ptr_null(tf_metrics_sample_label(m, i, "realm"));
    found++;
  }
  ck_assert_uint_eq(found, 2);
  ck_assert_uint_eq(tf_metrics_sample_count(m), 8);
  ck_assert_int_eq(tf_metrics_sample(m, 8, NULL, NULL), TF_ENOTFOUND);
  int64_t allocs = -1;
  TF_OK_OR_FAIL(tf_coturn_allocations_from_metrics(&allocs, text, len));
  ck_assert_int_eq(allocs, 3);
  tf_metrics_free(m);
  free(text);
}
END_TEST

START_TEST(test_metrics__parse_coturn_libprom_example_b)
{
  size_t len = 0;
  char *text = tf_test_read(tf_test_data("metrics/coturn-libprom-example-b.prom"), &len);
  tf_metrics *m = parse_ok(text, len);
  ck_assert(sum_of(m, "turn_total_allocations") == 3);
  ck_assert(sum_of(m, "process_open_fds") == 41);
  int64_t allocs = -1;
  TF_OK_OR_FAIL(tf_coturn_allocations_from_metrics(&allocs, text, len));
  ck_assert_int_eq(allocs, 3);
  tf_metrics_free(m);
  free(text);
}
END_TEST

/* coturn 4.6.1 with Prometheus, a fresh relay, a %.17g libprom value, CRLF, no final newline. */
START_TEST(test_metrics__parse_coturn_variants)
{
  static const struct {
    const char *text;
    int64_t allocations;
  } ok[] = {
      {"# HELP turn_total_allocations Represents current allocations number\n"
       "# TYPE turn_total_allocations gauge\n"
       "turn_total_allocations 3\n\n",
       3},
      {"# HELP turn_total_allocations Represents current allocations number\n"
       "# TYPE turn_total_allocations gauge\n",
       0},
      {"turn_total_allocations{type=\"UDP\"} 5.0000000000000000\r\n"
       "turn_total_allocations{type=\"TCP\",} 2 1715000000000\r\n"
       "process_start_time_seconds 1715000000.25",
       7},
      {"  turn_total_allocations\t{ type = \"DTLS\" }\t1  \n# a comment\n#HELP not metadata\n", 1},
  };
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    size_t len = strlen(ok[i].text);
    char *buf = exact(ok[i].text, len);
    int64_t allocs = -1;
    TF_OK_OR_FAIL(tf_coturn_allocations_from_metrics(&allocs, buf, len));
    ck_assert_int_eq(allocs, ok[i].allocations);
    free(buf);
  }
  int64_t allocs = 42;
  static const char other[] = "# TYPE up gauge\nup 1\n";
  ck_assert_int_eq(tf_coturn_allocations_from_metrics(&allocs, other, strlen(other)), TF_ENOTFOUND);
  ck_assert_str_eq(tf_error_last()->message, "turn_total_allocations: not in the scrape (is this coturn's /metrics?)");
  static const char negative[] = "turn_total_allocations -1\n";
  ck_assert_int_eq(tf_coturn_allocations_from_metrics(&allocs, negative, strlen(negative)), TF_EPROTO);
  static const char fraction[] = "turn_total_allocations 1.5\n";
  ck_assert_int_eq(tf_coturn_allocations_from_metrics(&allocs, fraction, strlen(fraction)), TF_EPROTO);
  static const char nan[] = "turn_total_allocations NaN\n";
  ck_assert_int_eq(tf_coturn_allocations_from_metrics(&allocs, nan, strlen(nan)), TF_EPROTO);
  ck_assert_int_eq(allocs, 42); /* untouched on failure */
  ck_assert_int_eq(tf_coturn_allocations_from_metrics(&allocs, "", 0), TF_ENOTFOUND);
}
END_TEST

START_TEST(test_metrics__parse_rejects_malformed_input_with_line_and_column)
{
  static const struct {
    const char *text;
    const char *message;
  } bad[] = {
      {"foo{a=\"b\" 1\n", "line 1, column 11: expected ',' or '}' after a label"},
      {"foo 1x\n", "line 1, column 5: not a number (a float, NaN, +Inf or -Inf)"},
      {"foo 0x10\n", "line 1, column 5: not a number (a float, NaN, +Inf or -Inf)"},
      {"foo\n", "line 1, column 4: expected a value"},
      {"\n\n# TYPE foo gauge\nfoo\n", "line 4, column 4: expected a value"},
      {"foo{a=\"\\q\"} 1\n", "line 1, column 8: invalid escape in a label value (only \\\\, \\\" and \\n)"},
      {"foo{a=\"b} 1\n", "line 1, column 12: unterminated label value"},
      {"foo{a=\"b\",a=\"c\"} 1\n", "line 1, column 12: label given twice"},
      {"foo{=\"b\"} 1\n", "line 1, column 5: expected a label name"},
      {"foo{a \"b\"} 1\n", "line 1, column 7: expected '=' after the label name"},
      {"foo{a=b} 1\n", "line 1, column 7: expected '\"' to open the label value"},
      {"{a=\"b\"} 1\n", "line 1, column 1: expected a metric name"},
      {"foo 1 abc\n", "line 1, column 7: expected an integer timestamp or the end of the line"},
      {"foo 1 2 3\n", "line 1, column 9: unexpected text after the timestamp"},
      {"foo{a=\"b\"}1\n", "line 1, column 11: expected a space before the value"},
      {"# TYPE foo bogus\n", "line 1, column 12: expected counter, gauge, histogram, summary or untyped"},
      {"# TYPE foo gauge extra\n", "line 1, column 18: unexpected text after the type"},
      {"  # TYPE foo gauge\n# TYPE foo counter\n", "line 2, column 12: a second, different TYPE for this metric"},
      {"# HELP 1foo x\n", "line 1, column 8: expected a metric name"},
      {"# TYPE foo\tgauge\n  # TYPE 1x gauge\n", "line 2, column 10: expected a metric name"},
      {"foo{a=\"b\"} 1\nfoo{a=\"b\"} 2\n", "line 2, column 1: a sample with the same name and labels came before"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    size_t len = strlen(bad[i].text);
    char *buf = exact(bad[i].text, len);
    tf_metrics *m = (tf_metrics *)buf; /* must stay untouched */
    ck_assert_msg(tf_metrics_parse(&m, buf, len) == TF_EPROTO, "case %zu accepted", i);
    ck_assert_msg(strcmp(tf_error_last()->message, bad[i].message) == 0, "case %zu: %s", i,
                  tf_error_last()->message);
    ck_assert_ptr_eq(m, (tf_metrics *)buf);
    free(buf);
  }
  /* a NUL byte inside the given length */
  static const char nul[] = "foo 1\nbar\0 2\n";
  tf_metrics *m = NULL;
  ck_assert_int_eq(tf_metrics_parse(&m, nul, sizeof(nul) - 1), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "line 2, column 4: NUL byte");
  ck_assert_ptr_null(m);
  ck_assert_int_eq(tf_metrics_parse(NULL, "x 1", 3), TF_EINVALID);
  ck_assert_int_eq(tf_metrics_parse(&m, NULL, 3), TF_EINVALID);
}
END_TEST

/* The parser stops at the length: what lies after it is never read. */
START_TEST(test_metrics__parse_stops_at_the_length)
{
  static const char text[] = "foo 1\nbar 2\n";
  tf_metrics *m = parse_ok(text, 5);
  ck_assert(sum_of(m, "foo") == 1);
  double x;
  ck_assert_int_eq(tf_metrics_sum(&x, m, "bar"), TF_ENOTFOUND);
  tf_metrics_free(m);
  /* cut inside a label value, a value and a timestamp: every prefix parses or fails cleanly */
  static const char full[] = "# HELP a_b help \\\\ text\n# TYPE a_b gauge\na_b{x=\"1\\\"2\",y=\"z\"} 12.5e1 1715000000\n";
  for (size_t n = 0; n <= sizeof(full) - 1; n++) {
    char *buf = exact(full, n);
    tf_metrics *p = NULL;
    tf_err rc = tf_metrics_parse(&p, buf, n);
    ck_assert(rc == TF_OK || rc == TF_EPROTO);
    if (rc == TF_OK) tf_metrics_free(p);
    free(buf);
  }
  m = parse_ok(full, sizeof(full) - 1);
  ck_assert(sum_of(m, "a_b") == 125);
  ck_assert_str_eq(tf_metrics_sample_label(m, 0, "x"), "1\"2");
  char *t = text_of(m);
  ck_assert_str_eq(t, "# HELP a_b help \\\\ text\n# TYPE a_b gauge\na_b{x=\"1\\\"2\",y=\"z\"} 125\n");
  tf_free(t);
  tf_metrics_free(m);
}
END_TEST

/* Parsed text written again: families first, then samples no family declares. */
START_TEST(test_metrics__parse_then_write_round_trip)
{
  size_t len = 0;
  char *text = tf_test_read(tf_test_data("metrics/coturn-libprom-example-b.prom"), &len);
  tf_metrics *m = parse_ok(text, len);
  const char *n[] = {"k"}, *v[] = {"v"};
  ck_assert_int_eq(tf_metrics_add(m, "stray", n, v, 1, 1), TF_ENOTFOUND);
  char *t = text_of(m);
  ck_assert_str_eq(t, "# HELP process_open_fds <libprom help text>\n# TYPE process_open_fds gauge\n"
                      "process_open_fds 41\n"
                      "# HELP turn_total_allocations Represents current allocations number\n"
                      "# TYPE turn_total_allocations gauge\n"
                      "turn_total_allocations{type=\"TLS/TCP\"} 1\nturn_total_allocations{type=\"UDP\"} 2\n");
  tf_metrics *again = parse_ok(t, strlen(t));
  char *t2 = text_of(again);
  ck_assert_str_eq(t2, t);
  tf_free(t2);
  tf_free(t);
  tf_metrics_free(again);
  tf_metrics_free(m);
  m = parse_ok("orphan{a=\"1\"} 2\n# TYPE known counter\nknown 1\n", 45);
  t = text_of(m);
  ck_assert_str_eq(t, "# HELP known \n# TYPE known counter\nknown 1\norphan{a=\"1\"} 2\n");
  tf_free(t);
  tf_metrics_free(m);
  free(text);
}
END_TEST

Suite *tf_test_metrics_suite(void)
{
  Suite *s = suite_create("metrics");
  TCase *w = tcase_create("writer");
  tcase_add_test(w, test_metrics__writer_escapes_label_values_and_help);
  tcase_add_test(w, test_metrics__writer_order_does_not_depend_on_calls);
  tcase_add_test(w, test_metrics__writer_values);
  tcase_add_test(w, test_metrics__writer_histogram_samples_join_their_family);
  tcase_add_test(w, test_metrics__writer_rejects_bad_input);
  suite_add_tcase(s, w);
  TCase *p = tcase_create("parser");
  tcase_add_test(p, test_metrics__parse_coturn_4_17_1_example_a);
  tcase_add_test(p, test_metrics__parse_coturn_libprom_example_b);
  tcase_add_test(p, test_metrics__parse_coturn_variants);
  tcase_add_test(p, test_metrics__parse_rejects_malformed_input_with_line_and_column);
  tcase_add_test(p, test_metrics__parse_stops_at_the_length);
  tcase_add_test(p, test_metrics__parse_then_write_round_trip);
  suite_add_tcase(s, p);
  return s;
}
