/* engine: the fleet engine driven by synthetic facts, no process and no
 * socket. Every timing rule on a made-up monotonic clock: the probe and count
 * schedules, the drain's publication delay, drainTimeout, restart backoff,
 * the shutdown; then acknowledgements, refused inputs and bad arguments. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_test.h"

#define T0 100000 /* the monotonic clock of the tests starts here */
#define WALL 1715000000000LL

static tf_pool *mk_pool(int replicas, const char *version, const char *extra)
{
  char text[1024];
  snprintf(text, sizeof(text),
           "metadata: {name: demo}\n"
           "spec:\n"
           "  replicas: %d\n"
           "  dataplane: {coturnVersion: \"%s\"}\n"
           "  relayPortRange: {start: 49152, end: 49159}\n"
           "  auth: {realm: demo.example.com, secretRef: {name: s}}\n"
           "  drainTimeout: 30s\n%s",
           replicas, version, extra ? extra : "");
  return tf_test_pool(text);
}

static tf_nodes *mk_nodes(int n) { return tf_test_relay_nodes(n); }

static const char *secrets[] = {"s3cr3t"};

/* Render options with the CLI on (master password "clipw") and @p n of @p with as the secrets. */
static tf_coturn_options mk_coturn(const char *const *with, size_t n)
{
  tf_coturn_options co = TF_COTURN_OPTIONS_INIT;
  co.secrets = with;
  co.secrets_count = n;
  co.state_dir = "/var/lib/turnfleet";
  co.cli_port = 5766;
  co.cli_password = "clipw";
  return co;
}

static tf_engine *mk_engine(int replicas, const char *version)
{
  tf_coturn_options co = mk_coturn(secrets, 1);
  tf_engine_options eo = TF_ENGINE_OPTIONS_INIT;
  eo.coturn = &co;
  eo.probe_interval_ms = 1000;
  tf_engine *e = NULL;
  TF_OK_OR_FAIL(tf_engine_new(&e, mk_pool(replicas, version, NULL), mk_nodes(3), &eo));
  return e;
}

static void step(tf_engine *e, int64_t now) { TF_OK_OR_FAIL(tf_engine_step(e, now, WALL + now)); }

/* How many actions of @p kind the last step gave; *first gets the first one. */
static size_t count_kind(const tf_engine *e, tf_engine_action_kind kind, const tf_engine_action **first)
{
  size_t n = 0;
  if (first) *first = NULL;
  for (size_t i = 0; i < tf_engine_action_count(e); i++) {
    const tf_engine_action *a = tf_engine_action_at(e, i);
    if (a->kind != kind) continue;
    if (first && !n) *first = a;
    n++;
  }
  return n;
}

/* Report every START/RESTART as started (pid "p<N>"), every PROBE with @p probe_ok, every COUNT with @p count. */
static void ack_all(tf_engine *e, int64_t now, int probe_ok, int64_t count)
{
  static int pid = 1000;
  for (size_t i = 0; i < tf_engine_action_count(e); i++) {
    const tf_engine_action *a = tf_engine_action_at(e, i);
    char id[16];
    snprintf(id, sizeof(id), "%d", ++pid);
    switch (a->kind) {
    case TF_ENGINE_START:
    case TF_ENGINE_RESTART: TF_OK_OR_FAIL(tf_engine_done(e, a->id, 1, id, now)); break;
    case TF_ENGINE_DRAIN:
    case TF_ENGINE_STOP: TF_OK_OR_FAIL(tf_engine_done(e, a->id, 1, NULL, now)); break;
    case TF_ENGINE_PROBE:
      TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, probe_ok, probe_ok ? 0 : 508, !probe_ok,
                                         probe_ok ? "ok" : "508 no relay port", now));
      break;
    case TF_ENGINE_COUNT: TF_OK_OR_FAIL(tf_engine_count_done(e, a->id, count, now)); break;
    }
  }
}

static size_t ready_count(const tf_engine *e)
{
  size_t n = 0;
  for (size_t i = 0; i < tf_engine_relay_count(e); i++)
    if (tf_engine_relay_at(e, i)->state == TF_ENGINE_RELAY_READY) n++;
  return n;
}

/* Three relays started at T0, probed good at T0+200, counted 0 at T0+500: the fleet of most tests. */
static tf_engine *ready_fleet(int replicas, const char *version)
{
  tf_engine *e = mk_engine(replicas, version);
  step(e, T0);
  ack_all(e, T0, 1, 0);
  step(e, T0 + 200);
  ack_all(e, T0 + 200, 1, 0);
  step(e, T0 + 500);
  ack_all(e, T0 + 500, 1, 0);
  step(e, T0 + 500);
  ck_assert_uint_eq(ready_count(e), (size_t)replicas);
  return e;
}

START_TEST(test_engine__starts_then_probes_then_counts_on_schedule)
{
  tf_engine *e = mk_engine(3, "4.6.1");
  step(e, T0);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, &a), 3);
  ck_assert_uint_eq(tf_engine_action_count(e), 3);
  ck_assert_ptr_nonnull(a->config);
  ck_assert_ptr_nonnull(strstr(a->config, "static-auth-secret=\"s3cr3t\""));
  ck_assert_str_eq(a->reason, "ScaleUp");
  ck_assert_uint_eq(a->ports.start, 49152);
  ck_assert_uint_ge(a->cli_port, 5766);
  ck_assert_uint_eq(tf_engine_relay_at(e, 0)->state, TF_ENGINE_RELAY_STARTING);
  /* not reported yet: the next step asks for nothing again */
  step(e, T0 + 10);
  ck_assert_uint_eq(tf_engine_action_count(e), 0);
  tf_engine_free(e);

  e = mk_engine(3, "4.6.1");
  step(e, T0);
  ack_all(e, T0, 1, 0);
  ck_assert_int_eq(tf_engine_next_ms(e), T0); /* something was reported: step at once */
  step(e, T0);
  ck_assert_uint_eq(tf_engine_action_count(e), 0);
  ck_assert_int_eq(tf_engine_next_ms(e), T0 + 200); /* the first probe */
  step(e, T0 + 199);
  ck_assert_uint_eq(tf_engine_action_count(e), 0);
  step(e, T0 + 200);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, &a), 3);
  ck_assert_uint_eq(a->probe_count, 2); /* every listener: udp and tcp on 3478 */
  ck_assert_ptr_nonnull(strstr(a->probe_uris[0], "turn:203.0.113."));
  ck_assert_ptr_nonnull(strstr(a->probe_uris[1], "?transport=tcp"));
  ck_assert_str_eq(a->probe_addresses[0], a->address);
  ck_assert_str_eq(a->probe_addresses[1], a->address);
  ck_assert_int_eq(a->timeout_ms, 1000);
  /* the count's first time (T0+500) comes while the probes are out: no count overlaps a probe */
  step(e, T0 + 600);
  ck_assert_uint_eq(tf_engine_action_count(e), 0);
  ck_assert_uint_eq(ready_count(e), 0);
  tf_engine_free(e);
}
END_TEST

/* A pod the kubelet has not run (Pending: unscheduled, pulling its image) is neither probed nor counted, and
 * wakes no one; its probe schedule begins when it starts. */
START_TEST(test_engine__a_waiting_relay_is_probed_only_once_it_starts)
{
  tf_engine *e = mk_engine(1, "4.6.1");
  step(e, T0);
  ack_all(e, T0, 1, 0);
  char name[64];
  snprintf(name, sizeof(name), "%s", tf_engine_relay_at(e, 0)->name);
  tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
  f.name = name;
  f.running = 1;
  f.waiting = 1;
  TF_OK_OR_FAIL(tf_engine_observe(e, &f, T0));
  for (int64_t t = T0; t <= T0 + 5000; t += 100) {
    step(e, t);
    ck_assert_msg(tf_engine_action_count(e) == 0, "at +%lld: %s while waiting", (long long)(t - T0),
                  tf_engine_action_name(tf_engine_action_at(e, 0)->kind));
  }
  ck_assert_int_eq(tf_engine_next_ms(e), 0); /* nothing to wake for */
  ck_assert_uint_eq(tf_engine_relay_at(e, 0)->state, TF_ENGINE_RELAY_STARTING);
  f.waiting = 0; /* it starts: the first probe after the first delay from now */
  TF_OK_OR_FAIL(tf_engine_observe(e, &f, T0 + 5000));
  step(e, T0 + 5000);
  ck_assert_uint_eq(tf_engine_action_count(e), 0);
  ck_assert_int_eq(tf_engine_next_ms(e), T0 + 5200);
  step(e, T0 + 5200);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, NULL), 1);
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__probe_and_count_intervals_run_from_each_result)
{
  tf_engine *e = mk_engine(1, "4.6.1");
  step(e, T0);
  ack_all(e, T0, 1, 0);
  step(e, T0 + 200);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, &a), 1);
  uint64_t probe = a->id;
  /* out for 700 ms: the count due at T0+500 waits for it */
  step(e, T0 + 800);
  ck_assert_uint_eq(tf_engine_action_count(e), 0);
  TF_OK_OR_FAIL(tf_engine_probe_done(e, probe, 1, 0, 0, "ok", T0 + 900));
  step(e, T0 + 900);
  ck_assert_uint_eq(ready_count(e), 1);
  /* ... and then half a probe interval more: coturn still lists the probe's released session */
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_COUNT, NULL), 0);
  ck_assert_int_eq(tf_engine_next_ms(e), T0 + 1400);
  step(e, T0 + 1399);
  ck_assert_uint_eq(tf_engine_action_count(e), 0);
  step(e, T0 + 1400);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_COUNT, &a), 1);
  ck_assert_int_eq(a->count, TF_ENGINE_COUNT_CLI); /* 4.6.1 without Prometheus: the CLI */
  ck_assert_uint_ge(a->cli_port, 5766);
  /* with the relay's own CLI password, the one its config has, never the master */
  char *pw = NULL, line[96];
  TF_OK_OR_FAIL(tf_reconcile_cli_password(&pw, "clipw", a->relay));
  ck_assert_str_eq(a->cli_password, pw);
  snprintf(line, sizeof(line), "cli-password=\"%s\"", pw);
  ck_assert_ptr_nonnull(strstr(tf_reconcile_relay_config(tf_engine_reconcile(e), 0), line));
  tf_secret_free(pw);
  ck_assert_int_eq(a->timeout_ms, 1000);
  TF_OK_OR_FAIL(tf_engine_count_done(e, a->id, 4, T0 + 1450));
  step(e, T0 + 1450);
  ck_assert_int_eq(tf_engine_relay_at(e, 0)->allocations, 4);
  /* next probe one interval after the probe's result, next count one after the count's */
  ck_assert_int_eq(tf_engine_next_ms(e), T0 + 1900);
  step(e, T0 + 1899);
  ck_assert_uint_eq(tf_engine_action_count(e), 0);
  step(e, T0 + 1900);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, &a), 1);
  TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, 0, 508, 1, "508", T0 + 1920));
  step(e, T0 + 1920);
  ck_assert_int_eq(tf_engine_next_ms(e), T0 + 2450);
  step(e, T0 + 2449);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_COUNT, NULL), 0);
  step(e, T0 + 2450);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_COUNT, NULL), 1);
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__relay_states_starting_ready_full_failing)
{
  tf_engine *e = mk_engine(1, "4.6.1");
  step(e, T0);
  ck_assert_str_eq(tf_engine_relay_state_name(tf_engine_relay_at(e, 0)->state), "Starting");
  ack_all(e, T0, 1, 0);
  step(e, T0 + 200);
  ack_all(e, T0 + 200, 0, 0); /* 508 */
  step(e, T0 + 200);
  ck_assert_str_eq(tf_engine_relay_state_name(tf_engine_relay_at(e, 0)->state), "Full");
  ck_assert_int_eq(tf_engine_relay_at(e, 0)->probe_error_code, 508);
  step(e, T0 + 1200);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, &a), 1);
  TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, 0, 0, 0, "no answer", T0 + 1300));
  step(e, T0 + 1300);
  ck_assert_str_eq(tf_engine_relay_state_name(tf_engine_relay_at(e, 0)->state), "Failing");
  ack_all(e, T0 + 1300, 1, 0);
  step(e, T0 + 2300);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, &a), 1);
  TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, 1, 0, 0, "ok", T0 + 2300));
  step(e, T0 + 2300);
  ck_assert_str_eq(tf_engine_relay_state_name(tf_engine_relay_at(e, 0)->state), "Ready");
  ck_assert_ptr_null(tf_engine_relay_state_name((tf_engine_relay_state)7));
  /* the failure counter saw the 508 on Allocate once */
  tf_metrics *m = NULL;
  char *text = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_reconcile_metrics(m, tf_engine_reconcile(e)));
  TF_OK_OR_FAIL(tf_metrics_to_text(&text, m));
  ck_assert_ptr_nonnull(strstr(text, "code=\"508\""));
  tf_free(text);
  tf_metrics_free(m);
  /* the probe's duration: from the step that handed it out to its result */
  step(e, T0 + 3300);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, &a), 1);
  TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, 1, 0, 0, "ok", T0 + 3342));
  step(e, T0 + 3342);
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_reconcile_metrics(m, tf_engine_reconcile(e)));
  TF_OK_OR_FAIL(tf_metrics_to_text(&text, m));
  const char *d = strstr(text, "\nturnfleet_probe_duration_seconds{");
  ck_assert_ptr_nonnull(d);
  ck_assert_ptr_nonnull(strstr(d, "} 0.042\n"));
  ck_assert_ptr_nonnull(strstr(text, "turnfleet_relay_draining{"));
  ck_assert_ptr_null(strstr(text, "\nturnfleet_relay_drain_started_timestamp_seconds{")); /* none drains */
  d = strstr(text, "\nturnfleet_relay_count_failures_total{");
  ck_assert_ptr_nonnull(d);
  ck_assert_ptr_nonnull(strstr(d, "\"} 0\n")); /* no count failed yet */
  ck_assert(strstr(d, "\"} 0\n") < strchr(d + 1, '\n') + 1);
  tf_free(text);
  tf_metrics_free(m);
  /* a count that could not be read is counted */
  const tf_engine_action *c = NULL;
  int64_t t = T0 + 3342;
  while (t < T0 + 60000 && !count_kind(e, TF_ENGINE_COUNT, &c)) step(e, t += 50);
  ck_assert_ptr_nonnull(c);
  TF_OK_OR_FAIL(tf_engine_count_done(e, c->id, -1, t));
  step(e, t);
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_reconcile_metrics(m, tf_engine_reconcile(e)));
  TF_OK_OR_FAIL(tf_metrics_to_text(&text, m));
  d = strstr(text, "\nturnfleet_relay_count_failures_total{");
  ck_assert_ptr_nonnull(d);
  ck_assert_ptr_nonnull(strstr(d, "} 1\n"));
  tf_free(text);
  tf_metrics_free(m);
  tf_engine_free(e);
}
END_TEST

/* Counts that keep failing while the relay passes its probes: Uncounted after three rounds (state,
 * Ready False RelaysUncounted naming it, the gauge), still probed and published; one good count ends it. */
START_TEST(test_engine__a_relay_that_cannot_be_counted_is_uncounted)
{
  tf_engine *e = ready_fleet(1, "4.6.1");
  const char *name = tf_engine_relay_at(e, 0)->name;
  char relay[TF_RELAY_NAME_MAX];
  snprintf(relay, sizeof(relay), "%s", name);
  int64_t t = T0 + 500;
  size_t failed = 0;
  while (failed < TF_RECONCILE_UNCOUNTED_ROUNDS) {
    ck_assert_str_ne(tf_engine_relay_state_name(tf_engine_relay_at(e, 0)->state), "Uncounted");
    t = tf_engine_next_ms(e);
    step(e, t);
    failed += count_kind(e, TF_ENGINE_COUNT, NULL);
    ack_all(e, t, 1, -1);
    step(e, t);
  }
  const tf_engine_relay *v = tf_engine_relay_at(e, 0);
  ck_assert_int_eq(v->state, TF_ENGINE_RELAY_UNCOUNTED);
  ck_assert_str_eq(tf_engine_relay_state_name(v->state), "Uncounted");
  ck_assert_uint_ne(v->flags & TF_RELAY_PUBLISHED, 0);
  ck_assert_int_eq(v->allocations, -1);
  const char *status, *reason, *message;
  TF_OK_OR_FAIL(tf_reconcile_condition(tf_engine_reconcile(e), 0, NULL, &status, &reason, &message, NULL));
  ck_assert_str_eq(status, "False");
  ck_assert_str_eq(reason, "RelaysUncounted");
  ck_assert_ptr_nonnull(strstr(message, relay));
  char *json = NULL;
  TF_OK_OR_FAIL(tf_engine_status_json(&json, e));
  ck_assert_ptr_nonnull(strstr(json, "\"state\":\t\"Uncounted\""));
  tf_free(json);
  tf_metrics *m = NULL;
  double g = 0;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_reconcile_metrics(m, tf_engine_reconcile(e)));
  TF_OK_OR_FAIL(tf_metrics_sum(&g, m, "turnfleet_relay_uncounted"));
  ck_assert(g == 1);
  tf_metrics_free(m);
  /* it keeps being probed and counted; the first good count ends it */
  size_t counted = 0;
  while (!counted) {
    t = tf_engine_next_ms(e);
    step(e, t);
    counted = count_kind(e, TF_ENGINE_COUNT, NULL);
    ack_all(e, t, 1, 2);
    step(e, t);
  }
  ck_assert_int_eq(tf_engine_relay_at(e, 0)->state, TF_ENGINE_RELAY_READY);
  ck_assert_int_eq(tf_engine_relay_at(e, 0)->allocations, 2);
  TF_OK_OR_FAIL(tf_reconcile_condition(tf_engine_reconcile(e), 0, NULL, &status, &reason, NULL, NULL));
  ck_assert_str_eq(reason, "AllRelaysReady");
  tf_engine_free(e);
}
END_TEST

/* Scale-down: out of the URIs at once, coturn told publish_delay_ms later, stopped on a later count of 0. */
START_TEST(test_engine__drain_waits_the_publication_delay_then_a_count_of_zero)
{
  tf_engine *e = ready_fleet(3, "4.6.1");
  ck_assert_uint_eq(tf_reconcile_uri_count(tf_engine_reconcile(e)), 6);
  tf_pool *two = NULL;
  TF_OK_OR_FAIL(tf_pool_with_replicas(&two, tf_engine_pool(e), 2));
  ck_assert_int_eq(tf_pool_replicas(two), 2);
  TF_OK_OR_FAIL(tf_engine_set_pool(e, two));
  const int64_t t = T0 + 600;
  step(e, t);
  ck_assert_uint_eq(tf_engine_action_count(e), 0); /* nothing for coturn yet */
  ck_assert_uint_eq(tf_reconcile_uri_count(tf_engine_reconcile(e)), 4);
  size_t draining = 0;
  for (size_t i = 0; i < tf_engine_relay_count(e); i++)
    if (tf_engine_relay_at(e, i)->state == TF_ENGINE_RELAY_DRAINING) draining++;
  ck_assert_uint_eq(draining, 1);
  ck_assert_int_le(tf_engine_next_ms(e), t + 2000);
  step(e, t + 1999);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_DRAIN, NULL), 0);
  /* a count of 0 before coturn refuses does not stop it */
  ack_all(e, t + 1999, 1, 0);
  step(e, t + 1999);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, NULL), 0);
  step(e, t + 2000);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_DRAIN, &a), 1);
  ck_assert_int_eq(a->drain, TF_ENGINE_DRAIN_QUOTA); /* 4.6.1: cc total-quota -1 */
  ck_assert_ptr_nonnull(a->relay_id);
  char name[64];
  snprintf(name, sizeof(name), "%s", a->relay);
  TF_OK_OR_FAIL(tf_engine_done(e, a->id, 1, NULL, t + 2010));
  step(e, t + 2010);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, NULL), 0);
  /* its next count (one interval after the last) reads 0: now it goes */
  step(e, t + 3000);
  ck_assert_uint_ge(count_kind(e, TF_ENGINE_COUNT, NULL), 1);
  ack_all(e, t + 3000, 1, 0);
  step(e, t + 3000);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, &a), 1);
  ck_assert_str_eq(a->relay, name);
  ck_assert_str_eq(a->reason, "Drained");
  TF_OK_OR_FAIL(tf_engine_done(e, a->id, 1, NULL, t + 3000));
  step(e, t + 3000);
  ck_assert_uint_eq(tf_engine_relay_count(e), 2);
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__drain_times_out_after_drain_timeout)
{
  tf_engine *e = ready_fleet(2, "4.17.1");
  tf_pool *one = NULL;
  TF_OK_OR_FAIL(tf_pool_with_replicas(&one, tf_engine_pool(e), 1));
  TF_OK_OR_FAIL(tf_engine_set_pool(e, one));
  const int64_t t = T0 + 600;
  step(e, t);
  step(e, t + 2000);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_DRAIN, &a), 1);
  ck_assert_int_eq(a->drain, TF_ENGINE_DRAIN_MODE); /* >= 4.6.3: coturn's own drain */
  ack_all(e, t + 2000, 1, 5);
  /* its clients stay: counts say 5 until drainTimeout (30 s after it left the URIs) */
  for (int64_t s = 3; s < 30; s += 3) {
    step(e, t + s * 1000);
    ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, NULL), 0);
    ack_all(e, t + s * 1000, 1, 5);
  }
  step(e, t + 29999);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, NULL), 0);
  ack_all(e, t + 29999, 1, 5);
  step(e, t + 30000);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, &a), 1);
  ck_assert_str_eq(a->reason, "DrainTimeout");
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__a_dead_relay_restarts_after_a_doubling_backoff)
{
  tf_engine *e = ready_fleet(1, "4.6.1");
  const char *name = tf_engine_relay_at(e, 0)->name;
  char saved[64];
  snprintf(saved, sizeof(saved), "%s", name);
  tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
  f.name = saved;
  f.running = 0;
  f.exited_ms = T0 + 1000;
  TF_OK_OR_FAIL(tf_engine_observe(e, &f, T0 + 1000));
  step(e, T0 + 1000);
  ck_assert_str_eq(tf_engine_relay_state_name(tf_engine_relay_at(e, 0)->state), "Failing");
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 0);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, NULL) + count_kind(e, TF_ENGINE_COUNT, NULL), 0);
  ck_assert_int_eq(tf_engine_next_ms(e), T0 + 2000); /* backoff 1 s from the exit */
  step(e, T0 + 1999);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 0);
  step(e, T0 + 2000);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, &a), 1);
  ck_assert_str_eq(a->reason, "Exited");
  /* the start fails: it counts as a restart, the next waits 2 s */
  TF_OK_OR_FAIL(tf_engine_done(e, a->id, 0, NULL, T0 + 2000));
  step(e, T0 + 2000);
  ck_assert_int_eq(tf_engine_relay_at(e, 0)->restarts, 1);
  ck_assert_int_eq(tf_engine_next_ms(e), T0 + 4000);
  step(e, T0 + 3999);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 0);
  step(e, T0 + 4000);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, &a), 1);
  TF_OK_OR_FAIL(tf_engine_done(e, a->id, 1, "777", T0 + 4000));
  step(e, T0 + 4000);
  ck_assert_int_eq(tf_engine_relay_at(e, 0)->restarts, 2);
  ck_assert_str_eq(tf_engine_relay_at(e, 0)->id, "777");
  ck_assert_str_eq(tf_engine_relay_state_name(tf_engine_relay_at(e, 0)->state), "Starting");
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__shutdown_drains_everything_then_stops_what_is_left)
{
  tf_engine *e = ready_fleet(3, "4.6.1");
  const int64_t t = T0 + 600;
  TF_OK_OR_FAIL(tf_engine_shutdown(e, t, 0));
  ck_assert_int_eq(tf_engine_finished(e), 0);
  step(e, t);
  ck_assert_uint_eq(tf_reconcile_uri_count(tf_engine_reconcile(e)), 0);
  char *status = NULL;
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_ptr_nonnull(strstr(status, "\"desiredReplicas\":\t0"));
  ck_assert_ptr_nonnull(strstr(status, "\"stopping\":\ttrue"));
  ck_assert_ptr_nonnull(strstr(status, "\"state\":\t\"Draining\""));
  ck_assert_ptr_nonnull(strstr(status, "\"reason\":\t\"Stopping\""));
  /* what is left and until when: in the condition and as fields */
  ck_assert_ptr_nonnull(strstr(status, "stopping: 3 relays draining, allocations left unknown, the last stopped by 20"));
  ck_assert_ptr_nonnull(strstr(status, "\"shutdown\":\t{\n\t\t\"relays\":\t3,\n\t\t\"allocations\":\tnull,\n\t\t\"deadline\":\t\"20"));
  tf_free(status);
  /* input changes are refused while stopping */
  ck_assert_int_eq(tf_engine_set_pool(e, mk_pool(5, "4.6.1", NULL)), TF_EINVALID);
  /* every relay gets coturn's refusal after the delay; the counts keep saying 1 */
  step(e, t + 2000);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_DRAIN, NULL), 3);
  ack_all(e, t + 2000, 1, 1);
  step(e, t + 2001);
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_ptr_nonnull(strstr(status, "stopping: 3 relays draining, 3 allocations left"));
  tf_free(status);
  step(e, t + 30000 + 30000 - 1); /* drainTimeout 30 s: reconcile stops them at t + 30 s */
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, NULL), 3);
  ack_all(e, t + 59999, 1, 1);
  ck_assert_int_eq(tf_engine_finished(e), 1);
  /* after the stop the status is not Ready (zero of zero relays would say True) */
  step(e, t + 59999);
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_ptr_nonnull(strstr(status, "\"type\":\t\"Ready\",\n\t\t\t\"status\":\t\"False\",\n\t\t\t\"reason\":\t\"Stopped\""));
  tf_free(status);
  tf_engine_free(e);

  /* the deadline: drainTimeout + stop_grace_ms, and at once on a second signal */
  e = ready_fleet(2, "4.6.1");
  TF_OK_OR_FAIL(tf_engine_shutdown(e, t, 0));
  step(e, t);
  ck_assert_int_eq(tf_engine_next_ms(e) <= t + 60000, 1);
  TF_OK_OR_FAIL(tf_engine_shutdown(e, t + 10, 1));
  step(e, t + 10);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, &a), 2);
  ck_assert_str_eq(a->reason, "ShutdownTimeout");
  ack_all(e, t + 10, 1, 0);
  step(e, t + 10);
  ck_assert_int_eq(tf_engine_finished(e), 1);
  ck_assert_uint_eq(tf_engine_relay_count(e), 0);
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__a_pool_edit_that_cannot_render_is_refused_whole)
{
  tf_engine *e = ready_fleet(1, "4.6.1");
  /* valid, but a TLS listener needs certificate files the engine was not given */
  tf_pool *tls = mk_pool(1, "4.6.1", "  listeners: [{name: tls, protocol: tls, port: 5349, tlsSecretRef: {name: t}}]\n");
  ck_assert_int_eq(tf_pool_validate(NULL, tls), 0);
  ck_assert_int_eq(tf_engine_set_pool(e, tls), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "cert"));
  ck_assert_uint_eq(tf_pool_listener_count(tf_engine_pool(e)), 2);
  step(e, T0 + 600);
  char *status = NULL;
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_ptr_nonnull(strstr(status, "\"refusedChange\":\t\""));
  ck_assert_ptr_nonnull(strstr(status, "cert"));
  ck_assert_ptr_nonnull(strstr(status, "\"desiredReplicas\":\t1"));
  ck_assert_ptr_nonnull(strstr(status, "\"placedReplicas\":\t1"));
  tf_free(status);
  ck_assert_uint_eq(ready_count(e), 1);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, NULL), 0);
  /* a secret rotation re-renders: one restart at a time */
  const char *rotated[] = {"n3w", "s3cr3t"};
  tf_coturn_options co = mk_coturn(rotated, 2);
  TF_OK_OR_FAIL(tf_engine_set_coturn_options(e, &co));
  step(e, T0 + 700);
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_ptr_nonnull(strstr(status, "\"refusedChange\":\tnull")); /* accepted: the refusal is gone */
  tf_free(status);
  step(e, T0 + 2700); /* after the publication delay */
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, &a), 1);
  ck_assert_ptr_nonnull(strstr(a->config, "static-auth-secret=\"n3w\""));
  co.secrets_count = 0;
  ck_assert_int_eq(tf_engine_set_coturn_options(e, &co), TF_EINVALID);
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__inputs_replaced_together_or_not_at_all_and_driver_refusals_shown)
{
  tf_engine *e = ready_fleet(1, "4.6.1");
  /* a pool the engine cannot render with new nodes: neither is taken */
  tf_pool *tls = mk_pool(2, "4.6.1", "  listeners: [{name: tls, protocol: tls, port: 5349, tlsSecretRef: {name: t}}]\n");
  ck_assert_int_eq(tf_engine_set_inputs(e, tls, mk_nodes(2)), TF_EINVALID);
  ck_assert_int_eq(tf_pool_replicas(tf_engine_pool(e)), 1);
  step(e, T0 + 600);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 0);
  /* both at once */
  TF_OK_OR_FAIL(tf_engine_set_inputs(e, mk_pool(2, "4.6.1", NULL), mk_nodes(2)));
  step(e, T0 + 700);
  ck_assert_int_eq(tf_pool_replicas(tf_engine_pool(e)), 2);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 1);
  /* a refusal of the driver's own is in the status until a change is accepted */
  TF_OK_OR_FAIL(tf_engine_refuse(e, "3 of 5 replicas can be placed"));
  step(e, T0 + 800);
  char *status = NULL;
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_ptr_nonnull(strstr(status, "\"refusedChange\":\t\"3 of 5 replicas can be placed\""));
  tf_free(status);
  ck_assert_int_eq(tf_engine_refuse(e, ""), TF_EINVALID);
  ck_assert_int_eq(tf_engine_set_inputs(e, NULL, mk_nodes(1)), TF_EINVALID);
  TF_OK_OR_FAIL(tf_engine_set_pool(e, mk_pool(2, "4.6.1", NULL)));
  step(e, T0 + 900);
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_ptr_nonnull(strstr(status, "\"refusedChange\":\tnull"));
  tf_free(status);
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__an_operator_restart_adopts_running_pods)
{
  /* a first engine starts the fleet; a second one learns it from facts only */
  tf_engine *first = ready_fleet(2, "4.6.1");
  tf_engine *e = mk_engine(2, "4.6.1");
  for (size_t i = 0; i < 2; i++) {
    const tf_engine_relay *v = tf_engine_relay_at(first, i);
    char identity[96];
    snprintf(identity, sizeof(identity), "%s/%u-%u", v->address, v->ports.start, v->ports.end);
    tf_engine_relay_facts f;
    TF_OK_OR_FAIL(tf_engine_relay_facts_init(&f, TF_ENGINE_RELAY_FACTS_VERSION));
    f.name = v->name;
    f.id = v->id;
    f.running = 1;
    f.started_ms = T0 - 5000;
    f.identity = identity;
    f.config_hash = tf_reconcile_relay_config_hash(tf_engine_reconcile(first), i);
    f.cli_port = tf_reconcile_relay_cli_port(tf_engine_reconcile(first), i);
    TF_OK_OR_FAIL(tf_engine_observe(e, &f, T0));
  }
  step(e, T0);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL) + count_kind(e, TF_ENGINE_RESTART, NULL), 0);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, NULL), 2); /* due long ago */
  tf_engine_free(first);
  tf_engine_free(e);
}
END_TEST

/* What a driver's objects say of each relay (a pod being deleted, its readiness gate) as facts of version 2. */
static void observe_as_found(tf_engine *e, const tf_engine *first, size_t i, int draining, int64_t since, int probe_ok,
                             int code, int64_t now)
{
  const tf_engine_relay *v = tf_engine_relay_at(first, i);
  char identity[96];
  snprintf(identity, sizeof(identity), "%s/%u-%u", v->address, v->ports.start, v->ports.end);
  tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
  f.name = v->name;
  f.id = v->id;
  f.running = 1;
  f.started_ms = T0 - 5000;
  f.identity = identity;
  f.config_hash = tf_reconcile_relay_config_hash(tf_engine_reconcile(first), i);
  f.cli_port = tf_reconcile_relay_cli_port(tf_engine_reconcile(first), i);
  f.draining = draining;
  f.draining_since_ms = since;
  f.probe_ok = probe_ok;
  f.probe_error_code = code;
  f.probe_message = probe_ok ? NULL : "Allocate answered 508";
  TF_OK_OR_FAIL(tf_engine_observe(e, &f, now));
}

static size_t published(const tf_engine *e)
{
  size_t n = 0;
  for (size_t i = 0; i < tf_engine_relay_count(e); i++) n += (tf_engine_relay_at(e, i)->flags & TF_RELAY_PUBLISHED) != 0;
  return n;
}

static const tf_engine_relay *view_named(const tf_engine *e, const char *name)
{
  for (size_t i = 0; i < tf_engine_relay_count(e); i++)
    if (strcmp(tf_engine_relay_at(e, i)->name, name) == 0) return tf_engine_relay_at(e, i);
  return NULL;
}

/* A new leader mid-scale-down: the relay whose pod is being deleted is draining; the engine starts no second
 * drain, re-creates nothing, and when the draining pod is gone it stops (forgets) it and starts no relay. */
START_TEST(test_engine__a_new_driver_continues_a_drain_from_the_facts)
{
  tf_engine *first = ready_fleet(3, "4.6.1");
  char leaving[64];
  snprintf(leaving, sizeof(leaving), "%s", tf_engine_relay_at(first, 1)->name);
  tf_engine *e = mk_engine(2, "4.6.1");
  const int64_t t = T0 + 10000;
  for (size_t i = 0; i < 3; i++) observe_as_found(e, first, i, i == 1, i == 1 ? t - 4000 : 0, 1, 0, t);
  for (int round = 0; round < 20; round++) {
    int64_t now = t + round * 500;
    step(e, now);
    ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL) + count_kind(e, TF_ENGINE_RESTART, NULL), 0);
    ck_assert_uint_eq(count_kind(e, TF_ENGINE_DRAIN, NULL), 0); /* its pod's deletion drains it already */
    ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, NULL), 0);  /* its count stays 3 */
    ck_assert_int_eq(view_named(e, leaving)->state, TF_ENGINE_RELAY_DRAINING);
    size_t ready = 0;
    for (size_t i = 0; i < tf_engine_relay_count(e); i++) ready += tf_engine_relay_at(e, i)->state == TF_ENGINE_RELAY_READY;
    ck_assert_uint_eq(ready, 2); /* the gates found stand before any probe of this engine */
    ck_assert_uint_eq(published(e), 2);
    ck_assert_int_eq(view_named(e, leaving)->flags & TF_RELAY_PUBLISHED, 0);
    ack_all(e, now, 1, 3);
  }
  /* its pod is gone: it is stopped (nothing to do) and forgotten; no relay is made in its place */
  tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
  f.name = leaving;
  f.running = 0;
  int64_t now = t + 10000;
  TF_OK_OR_FAIL(tf_engine_observe(e, &f, now));
  step(e, now);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 0);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_STOP, &a), 1);
  ck_assert_str_eq(a->relay, leaving);
  ack_all(e, now, 1, 0);
  step(e, now + 1);
  ck_assert_uint_eq(tf_engine_relay_count(e), 2);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 0);
  /* bad facts are refused by name */
  f.draining = 1;
  f.draining_since_ms = now + 5;
  ck_assert_int_eq(tf_engine_observe(e, &f, now), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "facts.draining_since_ms"));
  f.draining_since_ms = 0;
  f.probe_ok = 2;
  ck_assert_int_eq(tf_engine_observe(e, &f, now), TF_EINVALID);
  /* a version 1 caller's struct is read only up to its version */
  tf_engine_relay_facts v1 = TF_ENGINE_RELAY_FACTS_INIT;
  v1.version = 1;
  v1.name = tf_engine_relay_at(e, 0)->name;
  v1.running = 1;
  v1.draining = 1; /* beyond version 1: not read */
  TF_OK_OR_FAIL(tf_engine_observe(e, &v1, now + 1));
  step(e, now + 1);
  ck_assert_int_ne(tf_engine_relay_at(e, 0)->state, TF_ENGINE_RELAY_DRAINING);
  tf_engine_free(first);
  tf_engine_free(e);
}
END_TEST

/* A new leader mid-roll (a new secret, the old one still valid): the relay whose pod is being replaced is
 * found with its pod being deleted. While that pod is there, no relay is started or restarted (its STOP is
 * done, as the operator does it, only once the pod is gone); then it is made anew on the new config, and only
 * when it is ready does the next relay go, one at a time. */
START_TEST(test_engine__a_new_driver_continues_a_roll_one_relay_at_a_time)
{
  tf_engine *first = ready_fleet(3, "4.6.1");
  tf_engine *e = mk_engine(3, "4.6.1");
  const char *rotated[] = {"n3w", "s3cr3t"};
  tf_coturn_options co = mk_coturn(rotated, 2);
  TF_OK_OR_FAIL(tf_engine_set_coturn_options(e, &co));
  char rolling[64];
  snprintf(rolling, sizeof(rolling), "%s", tf_engine_relay_at(first, 0)->name);
  int64_t t = T0 + 10000;
  for (size_t i = 0; i < 3; i++) observe_as_found(e, first, i, i == 0, i == 0 ? t - 500 : 0, 1, 0, t);
  uint64_t stop_id = 0;
  for (int round = 0; round < 10; round++, t += 500) {
    step(e, t);
    for (size_t i = 0; i < tf_engine_action_count(e); i++) {
      const tf_engine_action *a = tf_engine_action_at(e, i);
      ck_assert_msg(a->kind != TF_ENGINE_START && a->kind != TF_ENGINE_RESTART && a->kind != TF_ENGINE_DRAIN,
                    "round %d: %s %s while %s's old pod is there", round, tf_engine_action_name(a->kind), a->relay,
                    rolling);
      if (a->kind == TF_ENGINE_STOP) {
        ck_assert_str_eq(a->relay, rolling);
        stop_id = a->id;
      } else if (a->kind == TF_ENGINE_PROBE) {
        TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, 1, 0, 0, "ok", t));
      } else if (a->kind == TF_ENGINE_COUNT) {
        TF_OK_OR_FAIL(tf_engine_count_done(e, a->id, 0, t));
      }
    }
  }
  ck_assert_uint_ne(stop_id, 0); /* drained (no allocation left): stopped once its pod goes */
  /* its old pod is gone: made anew, on the new config; the next relay only once it is ready */
  tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
  f.name = rolling;
  f.running = 0;
  TF_OK_OR_FAIL(tf_engine_observe(e, &f, t));
  TF_OK_OR_FAIL(tf_engine_done(e, stop_id, 1, NULL, t));
  int started = 0, restarted = 0;
  char second[64] = "";
  for (int round = 0; round < 40 && !restarted; round++, t += 500) {
    step(e, t);
    for (size_t i = 0; i < tf_engine_action_count(e); i++) {
      const tf_engine_action *a = tf_engine_action_at(e, i);
      if (a->kind != TF_ENGINE_START && a->kind != TF_ENGINE_RESTART) continue;
      if (strcmp(a->relay, rolling) == 0) {
        ck_assert_int_eq(started, 0);
        ck_assert_ptr_nonnull(strstr(a->config, "static-auth-secret=\"n3w\""));
        started = 1;
      } else {
        ck_assert_int_eq(started, 1);
        ck_assert_int_eq(view_named(e, rolling)->state, TF_ENGINE_RELAY_READY);
        ck_assert_int_eq(a->kind, TF_ENGINE_RESTART);
        snprintf(second, sizeof(second), "%s", a->relay);
        restarted++;
      }
    }
    ck_assert_uint_le(count_kind(e, TF_ENGINE_RESTART, NULL), 1);
    ack_all(e, t, 1, 0);
  }
  ck_assert_int_eq(started, 1);
  ck_assert_int_eq(restarted, 1);
  ck_assert_str_ne(second, rolling);
  tf_engine_free(first);
  tf_engine_free(e);
}
END_TEST

/* Another pool's CLI port on a node is kept out of this pool's new relays there until the claims are cleared. */
START_TEST(test_engine__cli_claims_of_other_pools_are_not_taken)
{
  tf_engine *e = mk_engine(3, "4.6.1");
  for (int n = 1; n <= 3; n++) {
    char node[8];
    snprintf(node, sizeof(node), "n%d", n);
    TF_OK_OR_FAIL(tf_engine_add_cli_claim(e, node, 5766));
  }
  ck_assert_int_eq(tf_engine_add_cli_claim(e, "", 5766), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "cli_claims[0].node: required");
  step(e, T0);
  const tf_reconcile *rec = tf_engine_reconcile(e);
  ck_assert_uint_eq(tf_reconcile_relay_count(rec), 3);
  for (size_t i = 0; i < 3; i++) {
    ck_assert_uint_ne(tf_reconcile_relay_cli_port(rec, i), 5766);
    ck_assert_uint_ne(tf_reconcile_relay_cli_port(rec, i), 0);
  }
  TF_OK_OR_FAIL(tf_engine_clear_claims(e));
  tf_engine *free_again = mk_engine(3, "4.6.1");
  step(free_again, T0);
  size_t at_base = 0;
  for (size_t i = 0; i < 3; i++) at_base += tf_reconcile_relay_cli_port(tf_engine_reconcile(free_again), i) == 5766;
  ck_assert_uint_eq(at_base, 1); /* without the claims the first relay takes the base port */
  tf_engine_free(free_again);
  tf_engine_free(e);
}
END_TEST

/* A relay whose runtime does not serve it yet (its pod not Ready) counts as ready and is not published. */
START_TEST(test_engine__a_held_back_relay_is_ready_but_not_published)
{
  tf_engine *first = ready_fleet(2, "4.6.1");
  tf_engine *e = mk_engine(2, "4.6.1");
  const int64_t t = T0 + 10000;
  observe_as_found(e, first, 0, 0, 0, 1, 0, t);
  observe_as_found(e, first, 1, 0, 0, 1, 0, t);
  tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
  f.name = tf_engine_relay_at(first, 1)->name;
  f.running = 1;
  f.held_back = 1;
  TF_OK_OR_FAIL(tf_engine_observe(e, &f, t));
  step(e, t);
  ck_assert_uint_eq(ready_count(e), 2);
  ck_assert_uint_eq(published(e), 1);
  ck_assert_int_eq(view_named(e, f.name)->flags & TF_RELAY_PUBLISHED, 0);
  /* nor is it a spare: a new config rolls no other relay while one is held back */
  const char *rotated[] = {"n3w", "s3cr3t"};
  tf_coturn_options co = mk_coturn(rotated, 2);
  TF_OK_OR_FAIL(tf_engine_set_coturn_options(e, &co));
  step(e, t);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, NULL), 0);
  f.held_back = 0;
  TF_OK_OR_FAIL(tf_engine_observe(e, &f, t + 1));
  step(e, t + 1);
  ck_assert_uint_eq(published(e), 1); /* the other one serves while this one rolls */
  step(e, t + 2001);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, NULL), 1);
  tf_engine_free(first);
  tf_engine_free(e);
}
END_TEST

/* The status of condition @p type in a status JSON ("" when absent); a static buffer. */
static const char *cond_status(const char *status, const char *type)
{
  static char out[16];
  out[0] = '\0';
  cJSON *doc = cJSON_Parse(status);
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "conditions"))
  {
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "type"));
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "status"));
    if (t && v && strcmp(t, type) == 0) snprintf(out, sizeof(out), "%s", v);
  }
  cJSON_Delete(doc);
  return out;
}

/* A relay found full (its gate said so) and one that fills: Full, out of the URIs, the pool's Ready kept,
 * CapacityPressure True; its first passing probe after a port frees puts it back. */
START_TEST(test_engine__a_full_relay_is_healthy_and_out_of_the_uris)
{
  tf_engine *first = ready_fleet(2, "4.6.1");
  tf_engine *e = mk_engine(2, "4.6.1");
  const int64_t t = T0 + 10000;
  observe_as_found(e, first, 0, 0, 0, 1, 0, t);
  observe_as_found(e, first, 1, 0, 0, 0, 508, t);
  step(e, t);
  const char *full = tf_engine_relay_at(first, 1)->name;
  ck_assert_int_eq(view_named(e, full)->state, TF_ENGINE_RELAY_FULL);
  ck_assert_int_eq(view_named(e, tf_engine_relay_at(first, 0)->name)->state, TF_ENGINE_RELAY_READY);
  ck_assert_uint_eq(published(e), 1);
  ck_assert_int_eq(view_named(e, full)->flags & TF_RELAY_PUBLISHED, 0);
  char *status = NULL;
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_str_eq(cond_status(status, "Ready"), "True");
  ck_assert_ptr_nonnull(strstr(status, "1 full (no relay port free)"));
  ck_assert_str_eq(cond_status(status, "CapacityPressure"), "True");
  ck_assert_str_eq(cond_status(status, "ProbeSucceeded"), "True");
  tf_free(status);
  /* the engine's own probes: 508 keeps it Full, a pass makes it Ready and published again */
  for (int round = 0; round < 10; round++) ack_all(e, t + round * 1000, 0, 8), step(e, t + (round + 1) * 1000);
  ck_assert_int_eq(view_named(e, full)->state, TF_ENGINE_RELAY_FULL);
  int64_t now = t + 11000;
  for (int round = 0; round < 6; round++, now += 1000) ack_all(e, now, 1, 7), step(e, now + 1000);
  ck_assert_int_eq(view_named(e, full)->state, TF_ENGINE_RELAY_READY);
  ck_assert_uint_eq(published(e), 2);
  tf_engine_free(first);
  tf_engine_free(e);
}
END_TEST

/* Another pool's relay on one of the addresses: that address is not used, AddressConflict is True,
 * and forgetting the claim gives the address back. */
START_TEST(test_engine__claims_of_other_pools_raise_address_conflict)
{
  tf_engine *e = mk_engine(3, "4.6.1");
  const uint16_t ports[] = {3478};
  ck_assert_int_eq(tf_engine_add_claim(e, "other", "203.0.113.2/49152-49159", ports, 1), 0);
  ck_assert_int_eq(tf_engine_add_claim(e, "other", "not-an-identity", NULL, 0), TF_EINVALID);
  ck_assert_int_eq(tf_engine_add_claim(e, NULL, "203.0.113.3/49152-49159", NULL, 0), TF_EINVALID);
  step(e, T0);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 2);
  for (size_t i = 0; i < tf_engine_action_count(e); i++)
    ck_assert_str_ne(tf_engine_action_at(e, i)->address, "203.0.113.2");
  char *status = NULL;
  TF_OK_OR_FAIL(tf_engine_status_json(&status, e));
  ck_assert_ptr_nonnull(strstr(status, "\"AddressConflict\""));
  const char *c = strstr(status, "\"AddressConflict\"");
  const char *end = strchr(c, '}'), *t = strstr(c, "\"True\"");
  ck_assert_ptr_nonnull(end);
  ck_assert_msg(t && t < end, "AddressConflict is not True: %.200s", c);
  tf_free(status);
  ack_all(e, T0, 1, 0);
  TF_OK_OR_FAIL(tf_engine_clear_claims(e));
  step(e, T0 + 10);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_START, NULL), 1);
  tf_engine_free(e);
}
END_TEST

/* A new relay range gives every relay a new identity: each new relay waits for its address, the
 * old relays drain one at a time, the next only once the replacement before it is ready. */
START_TEST(test_engine__a_range_change_replaces_one_relay_at_a_time)
{
  tf_engine *e = ready_fleet(3, "4.6.1");
  TF_OK_OR_FAIL(tf_engine_set_pool(e, tf_test_pool("metadata: {name: demo}\n"
                                                   "spec:\n"
                                                   "  replicas: 3\n"
                                                   "  dataplane: {coturnVersion: \"4.6.1\"}\n"
                                                   "  relayPortRange: {start: 49200, end: 49207}\n"
                                                   "  auth: {realm: demo.example.com, secretRef: {name: s}}\n"
                                                   "  drainTimeout: 30s\n")));
  int64_t t = T0 + 1000;
  size_t replaced = 0;
  for (int round = 0; round < 200 && replaced < 3; round++, t += 100) {
    step(e, t);
    size_t starts = count_kind(e, TF_ENGINE_START, NULL);
    size_t draining = 0, starting = 0, old = 0;
    for (size_t i = 0; i < tf_engine_relay_count(e); i++) {
      const tf_engine_relay *r = tf_engine_relay_at(e, i);
      if (r->state == TF_ENGINE_RELAY_DRAINING) draining++;
      if (r->state == TF_ENGINE_RELAY_STARTING) starting++;
      if (r->ports.start == 49152) old++;
    }
    (void)starting;
    ck_assert_msg(starts <= 1, "round %d: %zu starts at once", round, starts);
    ck_assert_msg(draining <= 1, "round %d: %zu relays draining at once", round, draining);
    replaced = 3 - old;
    ack_all(e, t, 1, 0);
  }
  ck_assert_uint_eq(replaced, 3);
  tf_engine_free(e);
}
END_TEST

START_TEST(test_engine__rejects_bad_input)
{
  tf_engine_options eo;
  ck_assert_int_eq(tf_engine_options_init(&eo, 0), TF_EINVALID);
  ck_assert_int_eq(tf_engine_options_init(&eo, TF_ENGINE_OPTIONS_VERSION + 1), TF_EINVALID);
  TF_OK_OR_FAIL(tf_engine_options_init(&eo, TF_ENGINE_OPTIONS_VERSION));
  ck_assert_int_eq(eo.probe_interval_ms, 5000);
  ck_assert_int_eq(eo.publish_delay_ms, 2000);
  tf_engine *e = NULL;
  ck_assert_int_eq(tf_engine_new(&e, mk_pool(1, "4.6.1", NULL), mk_nodes(1), &eo), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "opts.coturn"));
  tf_coturn_options co = TF_COTURN_OPTIONS_INIT;
  co.secrets = secrets;
  co.secrets_count = 1;
  eo.coturn = &co;
  eo.probe_interval_ms = 0;
  ck_assert_int_eq(tf_engine_new(&e, mk_pool(1, "4.6.1", NULL), mk_nodes(1), &eo), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "opts.probe_interval_ms"));
  ck_assert_ptr_null(e);

  e = ready_fleet(1, "4.6.1");
  ck_assert_int_eq(tf_engine_step(e, T0, WALL), TF_EINVALID); /* back in time */
  ck_assert_int_eq(tf_engine_done(e, 999999, 1, NULL, T0 + 600), TF_ENOTFOUND);
  ck_assert_int_eq(tf_engine_probe_done(e, 999999, 1, 0, 0, NULL, T0 + 600), TF_ENOTFOUND);
  ck_assert_int_eq(tf_engine_count_done(e, 0, 1, T0 + 600), TF_ENOTFOUND);
  tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
  ck_assert_int_eq(tf_engine_observe(e, &f, T0 + 600), TF_EINVALID);
  f.name = "demo-relay-unknown";
  f.running = 1;
  ck_assert_int_eq(tf_engine_observe(e, &f, T0 + 600), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "facts.identity"));
  f.version = 2;
  ck_assert_int_eq(tf_engine_observe(e, &f, T0 + 600), TF_EINVALID);
  ck_assert_int_eq(tf_engine_relay_facts_init(&f, 9), TF_EINVALID);
  ck_assert_ptr_null(tf_engine_action_at(e, 99));
  ck_assert_ptr_null(tf_engine_relay_at(e, 99));
  ck_assert_ptr_null(tf_engine_action_name((tf_engine_action_kind)42));
  ck_assert_str_eq(tf_engine_action_name(TF_ENGINE_COUNT), "count");
  tf_pool *p = NULL;
  ck_assert_int_eq(tf_pool_with_replicas(&p, tf_engine_pool(e), -1), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "replicas"));
  tf_engine_free(e);
  tf_engine_free(NULL);
  char *out = NULL;
  ck_assert_int_eq(tf_engine_status_json(&out, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_engine_finished(NULL), 0);
  ck_assert_int_eq(tf_engine_next_ms(NULL), 0);
}
END_TEST

/* A plan of the local nodes: the relays' addresses, sorted, as "a b c". */
static void local_relays(char *out, size_t size, const char *pool_extra, int replicas, const char *list)
{
  tf_addr addrs[16];
  size_t n = 0;
  TF_OK_OR_FAIL(tf_addr_list_parse(addrs, 16, &n, list));
  tf_pool *pool = mk_pool(replicas, "4.6.1", pool_extra);
  tf_nodes *nodes = NULL;
  TF_OK_OR_FAIL(tf_engine_local_nodes(&nodes, pool, addrs, n));
  tf_plan *plan = NULL;
  TF_OK_OR_FAIL(tf_plan_new(&plan, pool, nodes, NULL));
  out[0] = 0;
  for (size_t i = 0; i < tf_plan_relay_count(plan); i++) {
    const tf_relay *r = tf_plan_relay(plan, i);
    for (size_t a = 0; a < tf_relay_address_count(r); a++) {
      tf_addr addr;
      char text[TF_ADDR_STRLEN];
      TF_OK_OR_FAIL(tf_relay_address(&addr, r, a));
      tf_addr_format(text, sizeof(text), &addr);
      snprintf(out + strlen(out), size - strlen(out), "%s%s%s", *out ? " " : "", a ? "+" : "", text);
    }
  }
  tf_plan_free(plan);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}

START_TEST(test_engine__local_nodes_serve_every_mode_and_family)
{
  char got[512];
  local_relays(got, sizeof(got), NULL, 2, "127.0.0.11-12");
  ck_assert_str_eq(got, "127.0.0.11 127.0.0.12");
  /* ExternalIPPool: the addresses inside the pool's CIDR only */
  local_relays(got, sizeof(got), "  addressing: {mode: ExternalIPPool, externalIPPool: {addresses: [127.0.0.84/30]}}\n", 3,
               "127.0.0.84-86,127.0.0.90");
  ck_assert_str_eq(got, "127.0.0.84 127.0.0.85 127.0.0.86");
  local_relays(got, sizeof(got), "  addressing: {mode: HostNetwork, family: IPv6}\n", 1, "::1,127.0.0.1");
  ck_assert_str_eq(got, "::1");
  /* DualStack: one address of each family per relay */
  local_relays(got, sizeof(got), "  addressing: {mode: HostNetwork, family: DualStack}\n", 2, "127.0.0.11-12,fd00::1-2");
  ck_assert_str_eq(got, "127.0.0.11 +fd00::1 127.0.0.12 +fd00::2");
  /* the nodeSelector is on every node */
  tf_addr a[1];
  size_t n = 0;
  TF_OK_OR_FAIL(tf_addr_list_parse(a, 1, &n, "127.0.0.11"));
  tf_pool *pool = mk_pool(1, "4.6.1", "  nodeSelector: {role: relay}\n");
  tf_nodes *nodes = NULL;
  TF_OK_OR_FAIL(tf_engine_local_nodes(&nodes, pool, a, n));
  ck_assert_uint_eq(tf_nodes_count(nodes), 1);
  ck_assert_int_eq(tf_nodes_eligible(nodes, 0, pool), 1);
  tf_nodes_free(nodes);
  ck_assert_int_eq(tf_engine_local_nodes(&nodes, NULL, a, n), TF_EINVALID);
  ck_assert_ptr_null(nodes);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_engine__start_checks_name_what_cannot_work)
{
  tf_addr a[4];
  size_t n = 0;
  TF_OK_OR_FAIL(tf_addr_list_parse(a, 4, &n, "127.0.0.84"));
  tf_pool *pool = mk_pool(3, "4.6.1", NULL);
  tf_nodes *nodes = NULL;
  TF_OK_OR_FAIL(tf_engine_local_nodes(&nodes, pool, a, n));
  ck_assert_int_eq(tf_engine_check_placement(pool, nodes), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "1 of 3 replicas can be placed (HostNetwork IPv4)"));
  tf_nodes_free(nodes);
  TF_OK_OR_FAIL(tf_engine_local_nodes(&nodes, pool, a, 0)); /* no address at all */
  ck_assert_int_eq(tf_engine_check_placement(pool, nodes), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "0 of 3 replicas"));
  tf_nodes_free(nodes);
  TF_OK_OR_FAIL(tf_addr_list_parse(a, 4, &n, "127.0.0.84-86"));
  TF_OK_OR_FAIL(tf_engine_local_nodes(&nodes, pool, a, n));
  TF_OK_OR_FAIL(tf_engine_check_placement(pool, nodes));
  tf_nodes_free(nodes);

  uint32_t v461 = 0, v418 = 0;
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v461, "4.6.1"));
  TF_OK_OR_FAIL(tf_coturn_version_parse(&v418, "4.18.0"));
  TF_OK_OR_FAIL(tf_engine_check_runtime(pool, v461, 0));
  ck_assert_int_eq(tf_engine_check_runtime(pool, v418, 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message,
                   "spec.dataplane.coturnVersion: \"4.6.1\" contradicts the turnserver this runs: it is coturn 4.18.0");
  tf_pool_free(pool);
  pool = mk_pool(1, "4.6.1", "  listeners:\n    - {name: turn, protocol: udp, port: 3478}\n"
                             "    - {name: turns, protocol: tls, port: 5349, tlsSecretRef: {name: certs}}\n");
  ck_assert_int_eq(tf_engine_check_runtime(pool, v461, 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "spec.listeners[1]: tls listener \"turns\" needs the relays' certificate and key");
  TF_OK_OR_FAIL(tf_engine_check_runtime(pool, v461, 1));
  ck_assert_int_eq(tf_engine_check_runtime(NULL, v461, 1), TF_EINVALID);
  ck_assert_int_eq(tf_engine_check_placement(pool, NULL), TF_EINVALID);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_engine__probe_options_and_results_for_a_driver)
{
  tf_engine *e = mk_engine(1, "4.6.1");
  step(e, T0);
  ack_all(e, T0, 1, 0);
  step(e, T0 + 200);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, &a), 1);
  ck_assert_uint_ge(a->probe_count, 1);
  tf_probe_options po = TF_PROBE_OPTIONS_INIT;
  po.peer_check = 1;
  TF_OK_OR_FAIL(tf_engine_probe_options(e, a, 0, &po));
  ck_assert_str_eq(po.uri, a->probe_uris[0]);
  ck_assert_str_eq(po.expect_address, a->probe_addresses[0]);
  ck_assert_str_eq(po.secret, "s3cr3t");
  ck_assert_int_eq(po.family, TF_AF_INET);
  ck_assert_uint_eq(po.expect_port_start, 49152);
  ck_assert_uint_eq(po.expect_port_end, 49159);
  ck_assert_int_eq(po.timeout_ms, (int)a->timeout_ms);
  ck_assert_int_eq(po.peer_check, 1); /* the driver's own fields are kept */
  ck_assert_int_eq(tf_engine_probe_options(e, a, a->probe_count, &po), TF_EINVALID);
  po.version = 99;
  ck_assert_int_eq(tf_engine_probe_options(e, a, 0, &po), TF_EINVALID);
  /* a probe that did not run fails the relay */
  const tf_probe_result *none[1] = {NULL};
  TF_OK_OR_FAIL(tf_engine_probe_results_done(e, a->id, none, 1, T0 + 300));
  step(e, T0 + 300);
  ck_assert_uint_eq(tf_engine_relay_at(e, 0)->state, TF_ENGINE_RELAY_FAILING);
  ck_assert_str_eq(tf_engine_relay_at(e, 0)->probe_message, "a probe did not run");
  ck_assert_int_eq(tf_engine_probe_results_done(e, a->id, none, 1, T0 + 300), TF_ENOTFOUND); /* reported already */
  /* while a secret rotates, probes use the previous one: relays not restarted yet have only it */
  const char *rotated[] = {"n3w", "s3cr3t"};
  tf_coturn_options co = mk_coturn(rotated, 2);
  TF_OK_OR_FAIL(tf_engine_set_coturn_options(e, &co));
  step(e, T0 + 1400);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, NULL), 1); /* a new secret: probed at once */
  ack_all(e, T0 + 1400, 1, 0);
  step(e, T0 + 3400); /* after the publication delay */
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, NULL), 1);
  ack_all(e, T0 + 3400, 1, 0);
  step(e, T0 + 3600);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, &a), 1);
  tf_probe_options p2 = TF_PROBE_OPTIONS_INIT;
  TF_OK_OR_FAIL(tf_engine_probe_options(e, a, 0, &p2));
  ck_assert_str_eq(p2.secret, "s3cr3t");
  tf_engine_free(e);
}
END_TEST

/* A new secret: every relay is probed at once with the secret every relay takes, so that a relay that takes
 * no valid secret any more leaves the URIs on that result while the others stay published. */
START_TEST(test_engine__a_secret_change_probes_every_relay_at_once)
{
  tf_engine *e = ready_fleet(3, "4.6.1");
  step(e, T0 + 600);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, NULL), 0);
  /* the documented rotation (the new secret, the old one as previous): probed with the old, all pass */
  const char *rotated[] = {"n3w", "s3cr3t"};
  tf_coturn_options co = mk_coturn(rotated, 2);
  TF_OK_OR_FAIL(tf_engine_set_coturn_options(e, &co));
  step(e, T0 + 610);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, NULL), 3);
  for (size_t i = 0; i < tf_engine_action_count(e); i++) {
    const tf_engine_action *a = tf_engine_action_at(e, i);
    if (a->kind != TF_ENGINE_PROBE) continue;
    tf_probe_options po = TF_PROBE_OPTIONS_INIT;
    TF_OK_OR_FAIL(tf_engine_probe_options(e, a, 0, &po));
    ck_assert_str_eq(po.secret, "s3cr3t");
    TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, 1, 0, 0, "ok", T0 + 620));
  }
  step(e, T0 + 620);
  /* one relay at a time rolls to the new config (out of the URIs first); the others stay published */
  ck_assert_uint_eq(published(e), 2);
  /* the same secrets again: no probe out of turn */
  TF_OK_OR_FAIL(tf_engine_set_coturn_options(e, &co));
  step(e, T0 + 630);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, NULL), 0);
  tf_engine_free(e);

  /* a hard rotation (no previous): probed with the new one; a relay that refuses it (401) leaves the URIs */
  e = ready_fleet(3, "4.6.1");
  const char *fresh[] = {"fr3sh"};
  co = mk_coturn(fresh, 1);
  TF_OK_OR_FAIL(tf_engine_set_coturn_options(e, &co));
  step(e, T0 + 640);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_PROBE, NULL), 3);
  const char *refused = NULL;
  for (size_t i = 0; i < tf_engine_action_count(e); i++) {
    const tf_engine_action *a = tf_engine_action_at(e, i);
    if (a->kind != TF_ENGINE_PROBE) continue;
    tf_probe_options po = TF_PROBE_OPTIONS_INIT;
    TF_OK_OR_FAIL(tf_engine_probe_options(e, a, 0, &po));
    ck_assert_str_eq(po.secret, "fr3sh");
    const tf_engine_relay *v = view_named(e, a->relay);
    int ok = refused || !(v->flags & TF_RELAY_PUBLISHED); /* a published one still runs the old secret */
    if (!ok) refused = v->name;
    TF_OK_OR_FAIL(tf_engine_probe_done(e, a->id, ok, ok ? 0 : 401, !ok, ok ? "ok" : "401 Unauthorized", T0 + 650));
  }
  ck_assert_ptr_nonnull(refused);
  char name[64];
  snprintf(name, sizeof(name), "%s", refused);
  step(e, T0 + 650);
  ck_assert_int_eq(view_named(e, name)->flags & TF_RELAY_PUBLISHED, 0);
  tf_engine_free(e);
}
END_TEST

/* A restart for a new config: the relay leaves the URIs at once and its RESTART goes publish_delay_ms later
 * (readers of the URIs stop handing it out first), one relay at a time, for every runtime alike. */
START_TEST(test_engine__a_restart_waits_the_publication_delay_out_of_the_uris)
{
  tf_engine *e = ready_fleet(3, "4.6.1");
  const char *rotated[] = {"n3w", "s3cr3t"};
  tf_coturn_options co = mk_coturn(rotated, 2);
  TF_OK_OR_FAIL(tf_engine_set_coturn_options(e, &co));
  const int64_t t = T0 + 600;
  step(e, t);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, NULL), 0);
  ck_assert_uint_eq(published(e), 2);
  ck_assert_uint_eq(tf_reconcile_uri_count(tf_engine_reconcile(e)), 2 * 2); /* udp and tcp of two relays */
  ck_assert_int_le(tf_engine_next_ms(e), t + 2000);
  step(e, t + 1999);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, NULL), 0);
  ck_assert_uint_eq(published(e), 2);
  step(e, t + 2000);
  const tf_engine_action *a;
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, &a), 1);
  ck_assert_ptr_nonnull(strstr(a->config, "static-auth-secret=\"n3w\""));
  char first[64];
  snprintf(first, sizeof(first), "%s", a->relay);
  /* no second one while it is out */
  step(e, t + 2100);
  ck_assert_uint_eq(count_kind(e, TF_ENGINE_RESTART, NULL), 0);
  ck_assert_uint_eq(published(e), 2);
  tf_engine_free(e);
}
END_TEST

Suite *tf_test_engine_suite(void)
{
  Suite *s = suite_create("engine");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_engine__starts_then_probes_then_counts_on_schedule);
  tcase_add_test(tc, test_engine__probe_and_count_intervals_run_from_each_result);
  tcase_add_test(tc, test_engine__a_waiting_relay_is_probed_only_once_it_starts);
  tcase_add_test(tc, test_engine__a_secret_change_probes_every_relay_at_once);
  tcase_add_test(tc, test_engine__a_restart_waits_the_publication_delay_out_of_the_uris);
  tcase_add_test(tc, test_engine__relay_states_starting_ready_full_failing);
  tcase_add_test(tc, test_engine__a_relay_that_cannot_be_counted_is_uncounted);
  tcase_add_test(tc, test_engine__drain_waits_the_publication_delay_then_a_count_of_zero);
  tcase_add_test(tc, test_engine__drain_times_out_after_drain_timeout);
  tcase_add_test(tc, test_engine__a_dead_relay_restarts_after_a_doubling_backoff);
  tcase_add_test(tc, test_engine__shutdown_drains_everything_then_stops_what_is_left);
  tcase_add_test(tc, test_engine__a_pool_edit_that_cannot_render_is_refused_whole);
  tcase_add_test(tc, test_engine__an_operator_restart_adopts_running_pods);
  tcase_add_test(tc, test_engine__claims_of_other_pools_raise_address_conflict);
  tcase_add_test(tc, test_engine__cli_claims_of_other_pools_are_not_taken);
  tcase_add_test(tc, test_engine__a_range_change_replaces_one_relay_at_a_time);
  tcase_add_test(tc, test_engine__rejects_bad_input);
  tcase_add_test(tc, test_engine__probe_options_and_results_for_a_driver);
  tcase_add_test(tc, test_engine__inputs_replaced_together_or_not_at_all_and_driver_refusals_shown);
  tcase_add_test(tc, test_engine__local_nodes_serve_every_mode_and_family);
  tcase_add_test(tc, test_engine__start_checks_name_what_cannot_work);
  tcase_add_test(tc, test_engine__a_new_driver_continues_a_drain_from_the_facts);
  tcase_add_test(tc, test_engine__a_new_driver_continues_a_roll_one_relay_at_a_time);
  tcase_add_test(tc, test_engine__a_full_relay_is_healthy_and_out_of_the_uris);
  tcase_add_test(tc, test_engine__a_held_back_relay_is_ready_but_not_published);
  suite_add_tcase(s, tc);
  return s;
}
