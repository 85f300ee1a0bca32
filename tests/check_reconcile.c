/* reconcile: the controller core as a table of scenarios (observations ->
 * actions, published relays, status), then the behaviours a table shows
 * badly: lastTransitionTime across calls, determinism, the status and URI
 * formats, metric samples, CLI ports, and bad input. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_test.h"

/* Every relay lives on node n<k> at 203.0.113.<k>; range 49152-49159 (8 ports),
 * or 49152-49167 in "wide" pools (the label gets a "+"). */
#define T0 1715000000000LL /* 2024-05-06T12:53:20Z */
#define S(x) ((int64_t)(x) * 1000)
#define SECRETS {"s3cr3t"}

static tf_pool *mk_pool(int replicas, int wide, const char *version)
{
  char text[1024];
  snprintf(text, sizeof(text),
           "metadata: {name: demo}\n"
           "spec:\n"
           "  replicas: %d\n"
           "  dataplane: {coturnVersion: \"%s\"}\n"
           "  relayPortRange: {start: 49152, end: %d}\n"
           "  auth: {realm: demo.example.com, secretRef: {name: s}}\n"
           "  drainTimeout: 30s\n",
           replicas, version ? version : "4.6.1", wide ? 49167 : 49159);
  return tf_test_pool(text);
}

static tf_nodes *mk_nodes(int n) { return tf_test_relay_nodes(n); }

static void identity_of(char *buf, size_t size, int k, int wide)
{
  snprintf(buf, size, "203.0.113.%d/49152-%d", k, wide ? 49167 : 49159);
}

static void name_of(char buf[TF_RELAY_NAME_MAX], int k, int wide)
{
  char id[64];
  identity_of(id, sizeof(id), k, wide);
  TF_OK_OR_FAIL(tf_relay_name_for(buf, TF_RELAY_NAME_MAX, "demo", id));
}

/* "r3" / "r3+" for a relay name. */
static const char *label_of(const char *name)
{
  static char label[8];
  for (int k = 1; k <= 4; k++)
    for (int wide = 0; wide <= 1; wide++) {
      char n[TF_RELAY_NAME_MAX];
      name_of(n, k, wide);
      if (strcmp(n, name) == 0) {
        snprintf(label, sizeof(label), "r%d%s", k, wide ? "+" : "");
        return label;
      }
    }
  return "r?";
}

/* The config hash the core wants for relay k: rendered from a plan holding it. */
static char *desired_hash(const tf_pool *pool, int k, int wide)
{
  tf_nodes *nodes = mk_nodes(4);
  tf_existing *fleet = NULL;
  TF_OK_OR_FAIL(tf_existing_new(&fleet));
  char id[64], name[TF_RELAY_NAME_MAX];
  identity_of(id, sizeof(id), k, wide);
  name_of(name, k, wide);
  TF_OK_OR_FAIL(tf_existing_add(fleet, NULL, name, id, 1000000, NULL, 0));
  tf_plan *plan = NULL;
  TF_OK_OR_FAIL(tf_plan_new(&plan, pool, nodes, fleet));
  char *config = NULL, *hash = NULL;
  if (!tf_plan_find(plan, name)) goto done; /* not placeable in this pool: any hash is outdated */
  const char *secrets[] = SECRETS;
  tf_coturn_options copt = TF_COTURN_OPTIONS_INIT;
  copt.secrets = secrets;
  copt.secrets_count = 1;
  TF_OK_OR_FAIL(tf_coturn_render(&config, pool, plan, name, &copt));
  TF_OK_OR_FAIL(tf_coturn_config_hash(&hash, config));
  tf_free(config);
done:
  tf_plan_free(plan);
  tf_existing_free(fleet);
  tf_nodes_free(nodes);
  return hash;
}

/* One observed relay; times in seconds relative to now. */
typedef struct ob {
  int k;         /* node 1-4 (0 ends the list) */
  int wide;      /* started with the wide range */
  int running;
  int hash;      /* 1: the desired config, 0: an old one */
  int64_t started;
  int64_t probe; /* when the last probe finished */
  int probe_ok;  /* 1 passed, 0 failed, -1 never probed */
  int code;
  int64_t allocs; /* -1 unknown */
  int draining;
  int64_t since;
  double exited; /* seconds, fractions allowed */
  int restarts;
  int saw508;
} ob;

/* A ready relay; later initializers override these (hence no -Woverride-init here). */
#pragma GCC diagnostic ignored "-Woverride-init"
#define R(kk, ...) {.k = kk, .running = 1, .hash = 1, .started = -100, .probe = -10, .probe_ok = 1, __VA_ARGS__}

typedef struct scenario {
  const char *name;
  int replicas;
  int nodes;
  int wide;
  ob obs[5];
  const char *claim;     /* an identity claimed by pool "other" */
  const char *actions;   /* "<action> <label> <reason>; ..." */
  const char *published; /* labels of relays with URIs */
  int ready;
  int running;           /* status.replicas */
  const char *conds;     /* status/reason of Ready, ProbeSucceeded, CapacityPressure, AddressConflict */
  int64_t next;          /* nextMs - now, 0: none */
} scenario;

#define ALL_FINE "True/AllRelaysReady True/ProbesSucceeded False/NoPressure False/NoConflict"

static const scenario scenarios[] = {
    {"fresh pool: every relay starts", 3, 4, 0, {{0}}, NULL,
     "start r1 ScaleUp; start r2 ScaleUp; start r3 ScaleUp", "", 0, 0,
     "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
    {"steady state: nothing to do", 3, 4, 0, {R(1), R(2), R(3)}, NULL, "", "r1 r2 r3", 3, 3, ALL_FINE, 0},
    {"started, not probed yet: not ready, not published", 2, 4, 0,
     {R(1, .probe_ok = -1), R(2, .probe = -200)}, NULL, "", "", 0, 2,
     "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
    {"scale up 2 -> 3", 3, 4, 0, {R(1), R(2)}, NULL, "start r3 ScaleUp", "r1 r2", 2, 2,
     "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", 0},
    {"scale down 3 -> 2 drains the fewest allocations; its URI goes at once", 2, 4, 0,
     {R(1, .allocs = 5), R(2, .allocs = 1), R(3, .allocs = 3)}, NULL, "drain r2 ScaleDown", "r1 r3", 2, 2, ALL_FINE,
     0},
    {"scale down 3 -> 1: one drain at a time, the fewest allocations first", 1, 4, 0,
     {R(1, .allocs = 5), R(2, .allocs = 3), R(3, .allocs = 1)}, NULL, "drain r3 ScaleDown", "r1", 1, 2,
     ALL_FINE, 0},
    {"scale down 3 -> 1: the next drains only once the first is gone", 1, 4, 0,
     {R(1, .allocs = 5), R(2, .allocs = 3), R(3, .allocs = 1, .draining = 1, .since = -5)}, NULL, "", "r1", 1, 2,
     ALL_FINE, S(25)},
    {"config change: the relay with the fewest allocations restarts first", 3, 4, 0,
     {R(1, .hash = 0, .allocs = 4), R(2, .hash = 0, .allocs = 0), R(3, .hash = 0, .allocs = 2)}, NULL,
     "restart r2 ConfigChanged", "r1 r3", 2, 3,
     "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", 0},
    {"draining with allocations: wait for them (until drainTimeout)", 2, 4, 0,
     {R(1, .allocs = 5), R(2, .allocs = 1, .draining = 1, .since = -10), R(3, .allocs = 3)}, NULL, "", "r1 r3", 2,
     2, ALL_FINE, S(20)},
    {"draining, allocations unknown: wait", 2, 4, 0,
     {R(1), R(2, .allocs = -1, .draining = 1, .since = -10), R(3)}, NULL, "", "r1 r3", 2, 2, ALL_FINE, S(20)},
    {"allocations reached 0: stop", 2, 4, 0,
     {R(1, .allocs = 5), R(2, .allocs = 0, .draining = 1, .since = -10), R(3, .allocs = 3)}, NULL,
     "stop r2 Drained", "r1 r3", 2, 2, ALL_FINE, 0},
    {"drainTimeout passed: stop even with allocations", 2, 4, 0,
     {R(1), R(2, .allocs = 4, .draining = 1, .since = -30), R(3)}, NULL, "stop r2 DrainTimeout", "r1 r3", 2, 2,
     ALL_FINE, 0},
    {"a second before drainTimeout: still waiting", 2, 4, 0,
     {R(1), R(2, .allocs = 4, .draining = 1, .since = -29), R(3)}, NULL, "", "r1 r3", 2, 2, ALL_FINE, S(1)},
    {"a draining coturn >= 4.6.3 exits on its own: stop (clean up)", 2, 4, 0,
     {R(1), R(2, .running = 0, .allocs = 2, .draining = 1, .since = -5), R(3)}, NULL, "stop r2 Exited", "r1 r3", 2,
     2, ALL_FINE, 0},
    {"config change: restart one relay", 3, 4, 0, {R(1, .hash = 0), R(2, .hash = 0), R(3, .hash = 0)}, NULL,
     "restart r1 ConfigChanged", "r2 r3", 2, 3,
     "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", 0},
    {"rollout: the restarted relay is not ready yet, the next waits", 3, 4, 0,
     {R(1, .started = -5, .probe = -10), R(2, .hash = 0), R(3, .hash = 0)}, NULL, "", "r2 r3", 2, 3,
     "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", 0},
    {"rollout: the restarted relay is ready, restart the next", 3, 4, 0,
     {R(1, .started = -5, .probe = -1), R(2, .hash = 0), R(3, .hash = 0)}, NULL, "restart r2 ConfigChanged",
     "r1 r3", 2, 3, "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", 0},
    {"rollout: a relay that is not ready anyway goes first", 3, 4, 0,
     {R(1, .hash = 0), R(2, .hash = 0), R(3, .hash = 0, .probe_ok = 0, .code = 401)}, NULL,
     "restart r3 ConfigChanged", "r1 r2", 2, 3,
     "False/RelaysNotReady False/ProbeFailed False/NoPressure False/NoConflict", 0},
    {"rollout waits while another relay is down", 3, 4, 0,
     {R(1, .hash = 0), R(2, .hash = 0), R(3, .running = 0, .started = -30, .exited = -0.5)}, NULL, "", "r1 r2", 2, 2,
     "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", 500},
    {"a relay failing its probe: not ready, not published", 3, 4, 0,
     {R(1), R(2), R(3, .probe_ok = 0, .code = 401)}, NULL, "", "r1 r2", 2, 3,
     "False/RelaysNotReady False/ProbeFailed False/NoPressure False/NoConflict", 0},
    {"a probe from before the restart does not count", 1, 4, 0, {R(1, .probe_ok = 0, .started = -5, .probe = -8)},
     NULL, "", "", 0, 1, "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
    {"508 since the last good probe: CapacityPressure", 2, 4, 0, {R(1), R(2, .saw508 = 1)}, NULL, "", "r1 r2", 2, 2,
     "True/AllRelaysReady True/ProbesSucceeded True/InsufficientCapacity False/NoConflict", 0},
    {"8 of 8 ports in use: CapacityPressure", 2, 4, 0, {R(1, .allocs = 8), R(2)}, NULL, "", "r1 r2", 2, 2,
     "True/AllRelaysReady True/ProbesSucceeded True/PortsNearlyExhausted False/NoConflict", 0},
    {"7 of 8 ports (87.5%) is below 90%", 2, 4, 0, {R(1, .allocs = 7), R(2)}, NULL, "", "r1 r2", 2, 2, ALL_FINE, 0},
    {"another pool claims n2's address: skipped, AddressConflict", 3, 4, 0, {{0}}, "203.0.113.2/49100-49200",
     "start r1 ScaleUp; start r3 ScaleUp; start r4 ScaleUp", "", 0, 0,
     "False/RelaysNotReady Unknown/NotProbed False/NoPressure True/AddressInUse", 0},
    {"more replicas than addresses: InsufficientAddresses", 5, 4, 0, {R(1), R(2), R(3), R(4)}, NULL, "",
     "r1 r2 r3 r4", 4, 4, "False/InsufficientAddresses True/ProbesSucceeded False/NoPressure False/NoConflict", 0},
    {"dead process: not before the backoff (1 s after the first exit)", 1, 4, 0,
     {R(1, .running = 0, .started = -30, .exited = -0.5)}, NULL, "", "", 0, 0,
     "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 500},
    {"dead process: started again once the backoff passed", 1, 4, 0, {R(1, .running = 0, .started = -30, .exited = -1)}, NULL,
     "start r1 Exited", "", 0, 0, "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
    {"backoff doubles per restart: 3 restarts -> 8 s", 1, 4, 0, {R(1, .running = 0, .started = -10, .exited = -7, .restarts = 3)},
     NULL, "", "", 0, 0, "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", S(1)},
    {"backoff is capped at 60 s", 1, 4, 0, {R(1, .running = 0, .exited = -60, .restarts = 30)}, NULL,
     "start r1 Exited", "", 0, 0, "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
    {"a relay that had run 60 s is lost, not crashing: started again at once", 1, 4, 0,
     {R(1, .running = 0, .started = -61, .exited = -0.1, .restarts = 30)}, NULL, "start r1 Exited", "", 0, 0,
     "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
    {"a relay whose node left: replaced", 3, 3, 0, {R(1), R(2), R(4)}, NULL, "drain r4 Replaced; start r3 ScaleUp",
     "r1 r2", 2, 2, "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", 0},
    {"scaled up again while the relay drains: it waits for the drain", 3, 4, 0,
     {R(1), R(2), R(3, .allocs = 2, .draining = 1, .since = -5)}, NULL, "", "r1 r2", 2, 2,
     "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", S(25)},
    {"... and starts as soon as the drain is over", 3, 4, 0,
     {R(1), R(2), R(3, .allocs = 0, .draining = 1, .since = -6)}, NULL, "stop r3 Drained; start r3 ScaleUp",
     "r1 r2", 2, 2, "False/RelaysNotReady True/ProbesSucceeded False/NoPressure False/NoConflict", 0},
    {"range change: the old relay drains first (its address is needed)", 1, 4, 1, {R(1, .allocs = 3)}, NULL,
     "drain r1 Replaced", "", 0, 0,
     "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
    {"range change: the new relay waits for the old one's drain", 1, 4, 1,
     {R(1, .allocs = 3, .draining = 1, .since = -3)}, NULL, "", "", 0, 0,
     "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", S(27)},
    {"range change: old one stopped, new one started in the same pass", 1, 4, 1,
     {R(1, .allocs = 0, .draining = 1, .since = -4)}, NULL, "stop r1 Drained; start r1+ ScaleUp", "", 0, 0,
     "False/RelaysNotReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
    {"replicas 0: everything drains, Ready", 0, 4, 0, {R(1, .allocs = 1), R(2)}, NULL,
     "drain r1 ScaleDown; drain r2 ScaleDown", "", 0, 0,
     "True/AllRelaysReady Unknown/NotProbed False/NoPressure False/NoConflict", 0},
};

static tf_observed *observe(const ob *obs, size_t n, const tf_pool *pool, int reverse)
{
  tf_observed *o = NULL;
  TF_OK_OR_FAIL(tf_observed_new(&o));
  for (size_t j = 0; j < n; j++) {
    const ob *b = &obs[reverse ? n - 1 - j : j];
    char id[64], name[TF_RELAY_NAME_MAX];
    identity_of(id, sizeof(id), b->k, b->wide);
    name_of(name, b->k, b->wide);
    char *hash = b->hash ? desired_hash(pool, b->k, b->wide) : NULL;
    tf_relay_observation r = TF_RELAY_OBSERVATION_INIT;
    r.name = name;
    r.identity = id;
    r.config_hash = hash ? hash : "0000000000000000000000000000000000000000000000000000000000000000";
    r.running = b->running;
    r.started_ms = T0 + S(b->started);
    r.exited_ms = b->exited ? T0 + (int64_t)(b->exited * 1000) : 0;
    r.restarts = b->restarts;
    r.draining = b->draining;
    r.draining_since_ms = b->draining ? T0 + S(b->since) : 0;
    r.allocations = b->allocs;
    if (b->probe_ok >= 0) {
      r.probe_ms = T0 + S(b->probe);
      r.probe_ok = b->probe_ok;
      r.probe_error_code = b->code;
      r.probe_message = b->probe_ok ? "" : "Allocate answered 401";
    }
    r.saw_508 = b->saw508;
    char udp[64], tcp[64];
    snprintf(udp, sizeof(udp), "turn:203.0.113.%d:3478?transport=udp", b->k);
    snprintf(tcp, sizeof(tcp), "turn:203.0.113.%d:3478?transport=tcp", b->k);
    const char *uris[] = {udp, tcp};
    r.uris = uris;
    r.uri_count = 2;
    TF_OK_OR_FAIL(tf_observed_add_relay(o, &r));
    tf_free(hash);
  }
  return o;
}

static size_t count_obs(const scenario *sc)
{
  size_t n = 0;
  while (n < 5 && sc->obs[n].k) n++;
  return n;
}

static tf_reconcile *run(const tf_pool *pool, const tf_nodes *nodes, const tf_observed *o, int64_t now)
{
  const char *secrets[] = SECRETS;
  tf_coturn_options copt = TF_COTURN_OPTIONS_INIT;
  copt.secrets = secrets;
  copt.secrets_count = 1;
  tf_reconcile_options opts = TF_RECONCILE_OPTIONS_INIT;
  opts.coturn = &copt;
  tf_reconcile *rec = NULL;
  TF_OK_OR_FAIL(tf_reconcile_new(&rec, pool, nodes, o, now, &opts));
  return rec;
}

static void actions_text(char *buf, size_t size, const tf_reconcile *rec)
{
  buf[0] = '\0';
  for (size_t i = 0; i < tf_reconcile_action_count(rec); i++) {
    tf_action a;
    size_t relay;
    const char *reason;
    TF_OK_OR_FAIL(tf_reconcile_action(rec, i, &a, &relay, &reason));
    size_t len = strlen(buf);
    snprintf(buf + len, size - len, "%s%s %s %s", i ? "; " : "", tf_action_name(a),
             label_of(tf_reconcile_relay_name(rec, relay)), reason);
  }
}

static void published_text(char *buf, size_t size, const tf_reconcile *rec)
{
  buf[0] = '\0';
  for (size_t i = 0; i < tf_reconcile_relay_count(rec); i++) {
    if (!(tf_reconcile_relay_flags(rec, i) & TF_RELAY_PUBLISHED)) continue;
    size_t len = strlen(buf);
    snprintf(buf + len, size - len, "%s%s", len ? " " : "", label_of(tf_reconcile_relay_name(rec, i)));
  }
  /* labels sort like names only by accident: sort the words */
  char *words[8];
  size_t n = 0;
  char copy[256];
  snprintf(copy, sizeof(copy), "%s", buf);
  for (char *t = strtok(copy, " "); t && n < 8; t = strtok(NULL, " ")) words[n++] = t;
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (strcmp(words[j], words[i]) < 0) {
        char *x = words[i];
        words[i] = words[j];
        words[j] = x;
      }
  char out[256] = "";
  for (size_t i = 0; i < n; i++) {
    strcat(out, i ? " " : "");
    strcat(out, words[i]);
  }
  snprintf(buf, size, "%s", out);
}

static void conds_text(char *buf, size_t size, const tf_reconcile *rec)
{
  buf[0] = '\0';
  for (size_t i = 0; i < 4; i++) {
    const char *status, *reason;
    TF_OK_OR_FAIL(tf_reconcile_condition(rec, i, NULL, &status, &reason, NULL, NULL));
    size_t len = strlen(buf);
    snprintf(buf + len, size - len, "%s%s/%s", i ? " " : "", status, reason);
  }
}

/* Sort the actions' text within each kind would hide order bugs: the table
 * lists actions in the exact order the core must emit them. */
START_TEST(test_reconcile__scenarios)
{
  const scenario *sc = &scenarios[_i];
  tf_pool *pool = mk_pool(sc->replicas, sc->wide, NULL);
  tf_nodes *nodes = mk_nodes(sc->nodes);
  tf_observed *o = observe(sc->obs, count_obs(sc), pool, 0);
  if (sc->claim) TF_OK_OR_FAIL(tf_observed_add_claim(o, "other", sc->claim, NULL, 0));
  tf_reconcile *rec = run(pool, nodes, o, T0);

  char got[512];
  actions_text(got, sizeof(got), rec);
  ck_assert_msg(strcmp(got, sc->actions) == 0, "%s: actions \"%s\", want \"%s\"", sc->name, got, sc->actions);
  published_text(got, sizeof(got), rec);
  ck_assert_msg(strcmp(got, sc->published) == 0, "%s: published \"%s\", want \"%s\"", sc->name, got,
                sc->published);
  conds_text(got, sizeof(got), rec);
  ck_assert_msg(strcmp(got, sc->conds) == 0, "%s: conditions \"%s\", want \"%s\"", sc->name, got, sc->conds);
  int64_t next = tf_reconcile_next_ms(rec);
  ck_assert_msg(next == (sc->next ? T0 + sc->next : 0), "%s: nextMs %lld, want +%lld", sc->name,
                (long long)(next ? next - T0 : 0), (long long)sc->next);

  /* the status agrees with the accessors */
  char *status = NULL;
  TF_OK_OR_FAIL(tf_reconcile_status_json(&status, rec));
  cJSON *j = cJSON_Parse(status);
  ck_assert_ptr_nonnull(j);
  ck_assert_int_eq(cJSON_GetObjectItem(j, "readyRelays")->valueint, sc->ready);
  ck_assert_int_eq(cJSON_GetObjectItem(j, "replicas")->valueint, sc->running);
  size_t uris = 0;
  const cJSON *relays = cJSON_GetObjectItem(j, "relays");
  ck_assert_int_eq(cJSON_GetArraySize(relays), (int)tf_reconcile_relay_count(rec));
  for (size_t i = 0; i < tf_reconcile_relay_count(rec); i++) {
    unsigned f = tf_reconcile_relay_flags(rec, i);
    const cJSON *r = cJSON_GetArrayItem(relays, (int)i);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "name")->valuestring, tf_reconcile_relay_name(rec, i));
    ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItem(r, "ready")), (f & TF_RELAY_READY) != 0);
    ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItem(r, "draining")), (f & TF_RELAY_DRAINING) != 0);
    /* published = ready; never draining */
    ck_assert_int_eq((f & TF_RELAY_PUBLISHED) != 0, (f & TF_RELAY_READY) != 0);
    ck_assert(!((f & TF_RELAY_PUBLISHED) && (f & TF_RELAY_DRAINING)));
    if (f & TF_RELAY_PUBLISHED) uris += tf_reconcile_relay_uri_count(rec, i);
    /* a planned relay has a config; a leaving one has none */
    ck_assert_int_eq(tf_reconcile_relay_config(rec, i) != NULL, (f & TF_RELAY_PLANNED) != 0);
  }
  ck_assert_uint_eq(uris, tf_reconcile_uri_count(rec));
  cJSON_Delete(j);
  tf_free(status);
  tf_reconcile_free(rec);
  tf_observed_free(o);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* The draining relay of a scale-down is flagged draining in the very result that drains it. */
START_TEST(test_reconcile__scale_down_marks_the_relay_draining_at_once)
{
  tf_pool *pool = mk_pool(2, 0, NULL);
  tf_nodes *nodes = mk_nodes(4);
  const ob obs[] = {R(1, .allocs = 5), R(2, .allocs = 1), R(3, .allocs = 3)};
  tf_observed *o = observe(obs, 3, pool, 0);
  tf_reconcile *rec = run(pool, nodes, o, T0);
  char r2[TF_RELAY_NAME_MAX];
  name_of(r2, 2, 0);
  int found = 0;
  for (size_t i = 0; i < tf_reconcile_relay_count(rec); i++) {
    if (strcmp(tf_reconcile_relay_name(rec, i), r2) != 0) continue;
    found = 1;
    unsigned f = tf_reconcile_relay_flags(rec, i);
    ck_assert_uint_eq(f, TF_RELAY_RUNNING | TF_RELAY_DRAINING);
    ck_assert_ptr_null(tf_reconcile_relay_config(rec, i));
  }
  ck_assert(found);
  for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) ck_assert_ptr_null(strstr(tf_reconcile_uri(rec, i), ".2:"));
  ck_assert_uint_eq(tf_reconcile_uri_count(rec), 4);
  tf_reconcile_free(rec);
  tf_observed_free(o);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* A range change over two relays: one in-place drain at a time. */
START_TEST(test_reconcile__range_change_replaces_one_relay_at_a_time)
{
  tf_pool *pool = mk_pool(2, 1, NULL);
  tf_nodes *nodes = mk_nodes(2);
  const ob both[] = {R(1, .allocs = 3), R(2, .allocs = 1)};
  tf_observed *o = observe(both, 2, pool, 0);
  tf_reconcile *rec = run(pool, nodes, o, T0);
  char got[256];
  actions_text(got, sizeof(got), rec);
  /* the one with the fewest allocations goes first; the other keeps serving */
  ck_assert_str_eq(got, "drain r2 Replaced");
  ck_assert_uint_eq(tf_reconcile_uri_count(rec), 2); /* the other one, udp + tcp */
  tf_reconcile_free(rec);
  tf_observed_free(o);
  /* while the first one drains, the second waits */
  ob step[2] = {R(1, .allocs = 3), R(2, .allocs = 1, .draining = 1, .since = -2)};
  o = observe(step, 2, pool, 0);
  rec = run(pool, nodes, o, T0);
  actions_text(got, sizeof(got), rec);
  ck_assert_str_eq(got, "");
  tf_reconcile_free(rec);
  tf_observed_free(o);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* lastTransitionTime: kept while a status holds, now when it flips; reason and message always fresh. */
START_TEST(test_reconcile__conditions_keep_last_transition_time_until_status_flips)
{
  tf_pool *pool = mk_pool(2, 0, NULL);
  tf_nodes *nodes = mk_nodes(4);
  const ob fine[] = {R(1), R(2)};
  tf_observed *o = observe(fine, 2, pool, 0);
  tf_reconcile *rec = run(pool, nodes, o, T0);
  const char *t;
  TF_OK_OR_FAIL(tf_reconcile_condition(rec, 0, NULL, NULL, NULL, NULL, &t));
  ck_assert_str_eq(t, "2024-05-06T12:53:20Z");
  char *status = NULL;
  TF_OK_OR_FAIL(tf_reconcile_status_json(&status, rec));
  tf_reconcile_free(rec);
  tf_observed_free(o);

  /* an hour later, same state: every lastTransitionTime is kept */
  o = observe(fine, 2, pool, 0);
  TF_OK_OR_FAIL(tf_observed_set_status(o, status, strlen(status)));
  rec = run(pool, nodes, o, T0 + S(3600));
  for (size_t i = 0; i < tf_reconcile_condition_count(rec); i++) {
    const char *type;
    TF_OK_OR_FAIL(tf_reconcile_condition(rec, i, &type, NULL, NULL, NULL, &t));
    ck_assert_msg(strcmp(t, "2024-05-06T12:53:20Z") == 0, "%s moved to %s", type, t);
  }
  tf_reconcile_free(rec);
  tf_observed_free(o);

  /* relay 2 fails its probe: ProbeSucceeded and Ready flip (now), the others keep theirs */
  const ob failing[] = {R(1), R(2, .probe_ok = 0, .code = 401)};
  o = observe(failing, 2, pool, 0);
  TF_OK_OR_FAIL(tf_observed_set_status(o, status, strlen(status)));
  tf_free(status);
  rec = run(pool, nodes, o, T0 + S(7200));
  static const char *const want[5] = {"2024-05-06T14:53:20Z", "2024-05-06T14:53:20Z", "2024-05-06T12:53:20Z",
                                      "2024-05-06T12:53:20Z", "2024-05-06T12:53:20Z"};
  for (size_t i = 0; i < 5; i++) {
    const char *type, *st, *reason, *msg;
    TF_OK_OR_FAIL(tf_reconcile_condition(rec, i, &type, &st, &reason, &msg, &t));
    ck_assert_msg(strcmp(t, want[i]) == 0, "%s: %s, want %s", type, t, want[i]);
    if (i == 1) {
      ck_assert_str_eq(st, "False");
      ck_assert_str_eq(reason, "ProbeFailed");
      char r2[TF_RELAY_NAME_MAX], expect[200];
      name_of(r2, 2, 0);
      snprintf(expect, sizeof(expect), "1/2 probed relays failed: %s: error 401: Allocate answered 401", r2);
      ck_assert_str_eq(msg, expect);
    }
  }
  TF_OK_OR_FAIL(tf_reconcile_status_json(&status, rec));
  tf_reconcile_free(rec);
  tf_observed_free(o);

  /* the probe passes again: ProbeSucceeded flips back (now), its reason and message change */
  o = observe(fine, 2, pool, 0);
  TF_OK_OR_FAIL(tf_observed_set_status(o, status, strlen(status)));
  rec = run(pool, nodes, o, T0 + S(7260));
  const char *reason, *msg;
  TF_OK_OR_FAIL(tf_reconcile_condition(rec, 1, NULL, NULL, &reason, &msg, &t));
  ck_assert_str_eq(t, "2024-05-06T14:54:20Z");
  ck_assert_str_eq(reason, "ProbesSucceeded");
  ck_assert_str_eq(msg, "2/2 probed relays passed");
  TF_OK_OR_FAIL(tf_reconcile_condition(rec, 3, NULL, NULL, NULL, NULL, &t));
  ck_assert_str_eq(t, "2024-05-06T12:53:20Z");
  tf_reconcile_free(rec);
  tf_observed_free(o);

  /* a whole TURNPool object is read too, and Unknown -> True flips */
  static const char object[] =
      "{\"apiVersion\":\"turnfleet.hzmi.dev/v1alpha1\",\"kind\":\"TURNPool\",\"metadata\":{\"name\":\"demo\"},"
      "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"X\",\"message\":\"\","
      "\"lastTransitionTime\":\"2020-01-01T00:00:00Z\"},{\"type\":\"ProbeSucceeded\",\"status\":\"Unknown\","
      "\"lastTransitionTime\":\"2020-01-01T00:00:00.5+02:00\"}]}}";
  o = observe(fine, 2, pool, 0);
  TF_OK_OR_FAIL(tf_observed_set_status(o, object, sizeof(object) - 1));
  rec = run(pool, nodes, o, T0);
  TF_OK_OR_FAIL(tf_reconcile_condition(rec, 0, NULL, NULL, NULL, NULL, &t));
  ck_assert_str_eq(t, "2020-01-01T00:00:00Z");
  TF_OK_OR_FAIL(tf_reconcile_condition(rec, 1, NULL, NULL, NULL, NULL, &t));
  ck_assert_str_eq(t, "2024-05-06T12:53:20Z");
  tf_reconcile_free(rec);
  tf_observed_free(o);
  tf_free(status);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* Same inputs, same bytes: twice, and with the observations added in another order. */
START_TEST(test_reconcile__deterministic)
{
  tf_pool *pool = mk_pool(3, 0, "4.18.0");
  tf_nodes *nodes = mk_nodes(4);
  const ob obs[] = {R(1, .allocs = 2, .hash = 0), R(2, .probe_ok = 0, .code = 508, .saw508 = 1),
                    R(4, .allocs = 1, .draining = 1, .since = -3), R(3, .running = 0, .started = -30, .exited = -0.2, .restarts = 2)};
  char *text[3];
  for (int round = 0; round < 3; round++) {
    tf_observed *o = observe(obs, 4, pool, round == 2);
    TF_OK_OR_FAIL(tf_observed_add_claim(o, "zeta", "198.51.100.1/40000-40100", NULL, 0));
    TF_OK_OR_FAIL(tf_observed_add_claim(o, "alpha", "198.51.100.2/40000-40100", NULL, 0));
    tf_reconcile *rec = run(pool, nodes, o, T0);
    TF_OK_OR_FAIL(tf_reconcile_to_json(&text[round], rec));
    tf_reconcile_free(rec);
    tf_observed_free(o);
  }
  ck_assert_str_eq(text[0], text[1]);
  ck_assert_str_eq(text[0], text[2]);
  /* and it says something: relay 3 restarts 4 s (2 restarts) after its exit */
  ck_assert_ptr_nonnull(strstr(text[0], "\"nextMs\": 1715000003800"));
  for (int round = 0; round < 3; round++) tf_free(text[round]);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* The exact status document and URI formats for one small case. */
START_TEST(test_reconcile__status_uris_and_ice_servers)
{
  tf_pool *pool = mk_pool(2, 0, NULL);
  tf_nodes *nodes = mk_nodes(2);
  const ob obs[] = {R(1, .allocs = 3), R(2, .allocs = -1, .probe_ok = -1)};
  tf_observed *o = observe(obs, 2, pool, 0);
  tf_reconcile *rec = run(pool, nodes, o, T0);
  char n1[TF_RELAY_NAME_MAX], n2[TF_RELAY_NAME_MAX];
  name_of(n1, 1, 0);
  name_of(n2, 2, 0);
  int r1_first = strcmp(n1, n2) < 0;
  char r1[600], r2[600], want[4096];
  snprintf(r1, sizeof(r1),
           "    {\n      \"name\": \"%s\",\n      \"relayAddress\": \"203.0.113.1\",\n"
           "      \"portRange\": {\n        \"start\": 49152,\n        \"end\": 49159\n      },\n"
           "      \"ready\": true,\n      \"draining\": false,\n      \"allocations\": 3,\n"
           "      \"portsInUse\": 3,\n      \"portsTotal\": 8,\n      \"lastProbe\": {\n"
           "        \"time\": \"2024-05-06T12:53:10Z\",\n        \"ok\": true,\n        \"errorCode\": 0,\n"
           "        \"message\": \"\"\n      }\n    }",
           n1);
  snprintf(r2, sizeof(r2),
           "    {\n      \"name\": \"%s\",\n      \"relayAddress\": \"203.0.113.2\",\n"
           "      \"portRange\": {\n        \"start\": 49152,\n        \"end\": 49159\n      },\n"
           "      \"ready\": false,\n      \"draining\": false,\n      \"allocations\": null,\n"
           "      \"portsInUse\": null,\n      \"portsTotal\": 8,\n      \"lastProbe\": null\n    }",
           n2);
  snprintf(want, sizeof(want),
           "{\n  \"replicas\": 2,\n  \"readyRelays\": 1,\n  \"turnURIs\": [\n"
           "    \"turn:203.0.113.1:3478?transport=udp\",\n    \"turn:203.0.113.1:3478?transport=tcp\"\n  ],\n"
           "  \"relays\": [\n%s,\n%s\n  ],\n  \"conditions\": [\n"
           "    {\n      \"type\": \"Ready\",\n      \"status\": \"False\",\n      \"reason\": \"RelaysNotReady\",\n"
           "      \"message\": \"1/2 relays ready (%s: not probed since it started)\",\n"
           "      \"lastTransitionTime\": \"2024-05-06T12:53:20Z\"\n    },\n"
           "    {\n      \"type\": \"ProbeSucceeded\",\n      \"status\": \"True\",\n"
           "      \"reason\": \"ProbesSucceeded\",\n      \"message\": \"1/1 probed relays passed\",\n"
           "      \"lastTransitionTime\": \"2024-05-06T12:53:20Z\"\n    },\n"
           "    {\n      \"type\": \"CapacityPressure\",\n      \"status\": \"False\",\n"
           "      \"reason\": \"NoPressure\",\n      \"message\": \"no relay uses 90%% of its ports or answered 508\",\n"
           "      \"lastTransitionTime\": \"2024-05-06T12:53:20Z\"\n    },\n"
           "    {\n      \"type\": \"AddressConflict\",\n      \"status\": \"False\",\n"
           "      \"reason\": \"NoConflict\",\n"
           "      \"message\": \"no relay address is claimed by another pool or offered by two nodes\",\n"
           "      \"lastTransitionTime\": \"2024-05-06T12:53:20Z\"\n    },\n"
           "    {\n      \"type\": \"ReachableFromVantage\",\n      \"status\": \"Unknown\",\n"
           "      \"reason\": \"NoVantage\",\n      \"message\": \"no vantage probe is configured\",\n"
           "      \"lastTransitionTime\": \"2024-05-06T12:53:20Z\"\n    }\n  ]\n}",
           r1_first ? r1 : r2, r1_first ? r2 : r1, n2);
  char *status = NULL;
  TF_OK_OR_FAIL(tf_reconcile_status_json(&status, rec));
  ck_assert_str_eq(status, want);
  tf_free(status);

  ck_assert_uint_eq(tf_reconcile_uri_count(rec), 2);
  ck_assert_str_eq(tf_reconcile_uri(rec, 0), "turn:203.0.113.1:3478?transport=udp");
  ck_assert_str_eq(tf_reconcile_uri(rec, 1), "turn:203.0.113.1:3478?transport=tcp");
  ck_assert_ptr_null(tf_reconcile_uri(rec, 2));
  char *ice = NULL;
  TF_OK_OR_FAIL(tf_reconcile_ice_servers_json(&ice, rec));
  ck_assert_str_eq(ice, "[\n  {\n    \"urls\": [\n      \"turn:203.0.113.1:3478?transport=udp\",\n"
                        "      \"turn:203.0.113.1:3478?transport=tcp\"\n    ]\n  }\n]");
  tf_free(ice);
  /* every planned relay has its probe targets, published or not */
  for (size_t i = 0; i < tf_reconcile_relay_count(rec); i++) {
    ck_assert_uint_eq(tf_reconcile_relay_uri_count(rec, i), 2);
    ck_assert_ptr_nonnull(strstr(tf_reconcile_relay_uri(rec, i, 0), "?transport=udp"));
    ck_assert_ptr_null(tf_reconcile_relay_uri(rec, i, 2));
    ck_assert_uint_eq(tf_reconcile_relay_metrics_port(rec, i), 0); /* 4.6.1 has no exporter */
    ck_assert_uint_eq(tf_reconcile_relay_cli_port(rec, i), 0);
  }
  ck_assert_ptr_nonnull(tf_plan_find(tf_reconcile_plan(rec), n1));
  tf_reconcile_free(rec);
  tf_observed_free(o);

  /* nothing ready: an empty array */
  o = observe(obs + 1, 1, pool, 0);
  rec = run(pool, nodes, o, T0);
  TF_OK_OR_FAIL(tf_reconcile_ice_servers_json(&ice, rec));
  ck_assert_str_eq(ice, "[]");
  tf_free(ice);
  tf_reconcile_free(rec);
  tf_observed_free(o);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* Metric names and labels exactly as docs/cli.md and docs/operator.md say, read back with the parser. */
START_TEST(test_reconcile__metric_samples)
{
  tf_pool *pool = mk_pool(2, 0, NULL);
  tf_nodes *nodes = mk_nodes(3);
  ob obs[] = {R(1, .allocs = 5), R(2, .allocs = -1, .probe_ok = 0, .code = 508),
              R(3, .allocs = 2, .draining = 1, .since = -1)};
  tf_observed *o = NULL;
  TF_OK_OR_FAIL(tf_observed_new(&o));
  for (int k = 0; k < 3; k++) {
    char id[64], name[TF_RELAY_NAME_MAX];
    identity_of(id, sizeof(id), obs[k].k, 0);
    name_of(name, obs[k].k, 0);
    tf_relay_observation r = TF_RELAY_OBSERVATION_INIT;
    r.name = name;
    r.identity = id;
    r.running = 1;
    r.started_ms = T0 - S(100);
    r.probe_ms = T0 - S(10);
    r.probe_ok = obs[k].probe_ok;
    r.probe_error_code = obs[k].code;
    r.allocations = obs[k].allocs;
    r.draining = obs[k].draining;
    r.draining_since_ms = obs[k].draining ? T0 - S(1) : 0;
    r.probe_duration_ms = k == 0 ? 250 : 999;
    r.count_failures = k == 0 ? 3 : 5;
    if (k == 2) r.version = 2; /* a version 2 caller has no probe duration: not read */
    int codes[] = {508, 486};
    int64_t counts[] = {7, 1};
    if (k == 1) {
      r.failure_codes = codes;
      r.failure_counts = counts;
      r.failure_count = 2;
    }
    TF_OK_OR_FAIL(tf_observed_add_relay(o, &r));
  }
  tf_reconcile *rec = run(pool, nodes, o, T0);
  tf_metrics *m = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_reconcile_metrics(m, rec));
  char *text = NULL;
  TF_OK_OR_FAIL(tf_metrics_to_text(&text, m));
  tf_metrics *p = NULL;
  TF_OK_OR_FAIL(tf_metrics_parse(&p, text, strlen(text)));
  ck_assert_int_eq(tf_metrics_family_type(p, "turnfleet_relay_ports_in_use"), TF_METRIC_GAUGE);
  ck_assert_int_eq(tf_metrics_family_type(p, "turnfleet_relay_ports_total"), TF_METRIC_GAUGE);
  ck_assert_int_eq(tf_metrics_family_type(p, "turnfleet_probe_success"), TF_METRIC_GAUGE);
  ck_assert_int_eq(tf_metrics_family_type(p, "turnfleet_allocation_failures_total"), TF_METRIC_COUNTER);
  double v;
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_relay_ports_in_use"));
  ck_assert(v == 7); /* 5 + the draining relay's 2; relay 2 unknown: no sample */
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_relay_ports_total"));
  ck_assert(v == 24);
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_probe_success"));
  ck_assert(v == 2); /* relays 1 and 3 passed, 2 failed */
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_allocation_failures_total"));
  ck_assert(v == 8);
  size_t in_use = 0;
  for (size_t i = 0; i < tf_metrics_sample_count(p); i++) {
    const char *name;
    TF_OK_OR_FAIL(tf_metrics_sample(p, i, &name, &v));
    ck_assert_str_eq(tf_metrics_sample_label(p, i, "namespace"), "default");
    ck_assert_str_eq(tf_metrics_sample_label(p, i, "pool"), "demo");
    if (strncmp(name, "turnfleet_pool_", 15) == 0) { /* pool series: no relay label */
      ck_assert_ptr_null(tf_metrics_sample_label(p, i, "relay"));
      continue;
    }
    ck_assert_ptr_nonnull(strstr(tf_metrics_sample_label(p, i, "relay"), "demo-relay-"));
    int failures = strcmp(name, "turnfleet_allocation_failures_total") == 0;
    ck_assert_int_eq(tf_metrics_sample_label(p, i, "code") != NULL, failures);
    if (failures && strcmp(tf_metrics_sample_label(p, i, "code"), "486") == 0) ck_assert(v == 1);
    in_use += strcmp(name, "turnfleet_relay_ports_in_use") == 0;
  }
  ck_assert_uint_eq(in_use, 2);
  /* drains: one relay, since T0 - 1 s as a Unix timestamp */
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_relay_draining"));
  ck_assert(v == 1);
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_relay_drain_started_timestamp_seconds"));
  ck_assert(v == (double)(T0 - S(1)) / 1000.0);
  /* probe duration: relay 1's 250 ms, relay 2's failed probe's 999 ms; relay 3 (a version 2 observation) has none */
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_probe_duration_seconds"));
  ck_assert(v == 0.25 + 0.999);
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_relay_count_failures_total"));
  ck_assert(v == 3 + 5); /* not relay 3's */
  /* the pool's conditions: each type once per status, exactly one of them 1, as in the status */
  for (size_t c = 0; c < tf_reconcile_condition_count(rec); c++) {
    const char *type, *status;
    TF_OK_OR_FAIL(tf_reconcile_condition(rec, c, &type, &status, NULL, NULL, NULL));
    size_t seen = 0;
    for (size_t i = 0; i < tf_metrics_sample_count(p); i++) {
      const char *name;
      TF_OK_OR_FAIL(tf_metrics_sample(p, i, &name, &v));
      if (strcmp(name, "turnfleet_pool_condition") || strcmp(tf_metrics_sample_label(p, i, "type"), type)) continue;
      seen++;
      ck_assert(v == (strcmp(tf_metrics_sample_label(p, i, "status"), status) == 0 ? 1 : 0));
    }
    ck_assert_uint_eq(seen, strcmp(type, "ReachableFromVantage") == 0 ? 0 : 3); /* not known here */
  }
  ck_assert_ptr_nonnull(strstr(text, "turnfleet_pool_condition{namespace=\"default\",pool=\"demo\",type=\"Ready\","));
  TF_OK_OR_FAIL(tf_metrics_sum(&v, p, "turnfleet_pool_drain_timeout_seconds"));
  ck_assert(v == (double)tf_pool_drain_timeout_ms(pool) / 1000.0);
  /* exact label order of one line */
  char r1[TF_RELAY_NAME_MAX], line[200];
  name_of(r1, 1, 0);
  snprintf(line, sizeof(line), "turnfleet_relay_ports_in_use{namespace=\"default\",pool=\"demo\",relay=\"%s\"} 5\n",
           r1);
  ck_assert_ptr_nonnull(strstr(text, line));
  /* a second pool's samples go into the same set; a family of another type is refused */
  ck_assert_int_eq(tf_reconcile_metrics(m, rec), TF_EINVALID); /* the same pool twice: duplicate samples */
  tf_metrics *clash = NULL;
  TF_OK_OR_FAIL(tf_metrics_new(&clash));
  TF_OK_OR_FAIL(tf_metrics_declare(clash, "turnfleet_probe_success", TF_METRIC_COUNTER, "x"));
  ck_assert_int_eq(tf_reconcile_metrics(clash, rec), TF_EINVALID);
  tf_metrics_free(clash);
  tf_free(text);
  tf_metrics_free(p);
  tf_metrics_free(m);
  tf_reconcile_free(rec);
  tf_observed_free(o);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* A relay that serves and passed its probe, but whose count rounds gave nothing three times in a row,
 * is Uncounted: still served, the pool not Ready (RelaysUncounted, naming it), its gauge 1. Two misses,
 * a draining relay or an older caller's observation (no count_misses) are not. */
static tf_reconcile *run_misses(const tf_pool *pool, const tf_nodes *nodes, const int64_t misses[2],
                                unsigned int version)
{
  tf_observed *o = NULL;
  TF_OK_OR_FAIL(tf_observed_new(&o));
  for (int k = 1; k <= 2; k++) {
    char id[64], name[TF_RELAY_NAME_MAX];
    identity_of(id, sizeof(id), k, 0);
    name_of(name, k, 0);
    char *hash = desired_hash(pool, k, 0);
    tf_relay_observation r = TF_RELAY_OBSERVATION_INIT;
    r.version = version;
    r.name = name;
    r.identity = id;
    r.config_hash = hash;
    r.running = 1;
    r.started_ms = T0 - S(100);
    r.probe_ms = T0 - S(10);
    r.probe_ok = 1;
    r.allocations = -1;
    r.count_misses = misses[k - 1];
    TF_OK_OR_FAIL(tf_observed_add_relay(o, &r));
    tf_free(hash);
  }
  tf_reconcile *rec = run(pool, nodes, o, T0);
  tf_observed_free(o);
  return rec;
}

static double uncounted_gauge(const tf_reconcile *rec)
{
  tf_metrics *m = NULL;
  double v = -1;
  TF_OK_OR_FAIL(tf_metrics_new(&m));
  TF_OK_OR_FAIL(tf_reconcile_metrics(m, rec));
  TF_OK_OR_FAIL(tf_metrics_sum(&v, m, "turnfleet_relay_uncounted"));
  tf_metrics_free(m);
  return v;
}

START_TEST(test_reconcile__a_relay_without_counts_is_uncounted_and_the_pool_not_ready)
{
  tf_pool *pool = mk_pool(2, 0, NULL);
  tf_nodes *nodes = mk_nodes(3);
  char r2[TF_RELAY_NAME_MAX], r1[TF_RELAY_NAME_MAX];
  name_of(r1, 1, 0);
  name_of(r2, 2, 0);
  const char *status, *reason, *message;

  int64_t two[2] = {0, TF_RECONCILE_UNCOUNTED_ROUNDS - 1};
  tf_reconcile *rec = run_misses(pool, nodes, two, TF_RELAY_OBSERVATION_VERSION);
  ck_assert_uint_eq(tf_reconcile_action_count(rec), 0);
  TF_OK_OR_FAIL(tf_reconcile_condition(rec, 0, NULL, &status, &reason, NULL, NULL));
  ck_assert_str_eq(status, "True");
  ck_assert_str_eq(reason, "AllRelaysReady");
  for (size_t i = 0; i < 2; i++) ck_assert_uint_eq(tf_reconcile_relay_flags(rec, i) & TF_RELAY_UNCOUNTED, 0);
  ck_assert(uncounted_gauge(rec) == 0);
  tf_reconcile_free(rec);

  int64_t three[2] = {0, TF_RECONCILE_UNCOUNTED_ROUNDS};
  rec = run_misses(pool, nodes, three, TF_RELAY_OBSERVATION_VERSION);
  ck_assert_uint_eq(tf_reconcile_action_count(rec), 0); /* nothing restarted for it: it serves */
  for (size_t i = 0; i < 2; i++) {
    unsigned int f = tf_reconcile_relay_flags(rec, i);
    int it = strcmp(tf_reconcile_relay_name(rec, i), r2) == 0;
    ck_assert_uint_eq((f & TF_RELAY_UNCOUNTED) != 0, it);
    ck_assert_uint_ne(f & TF_RELAY_PUBLISHED, 0);
  }
  TF_OK_OR_FAIL(tf_reconcile_condition(rec, 0, NULL, &status, &reason, &message, NULL));
  ck_assert_str_eq(status, "False");
  ck_assert_str_eq(reason, "RelaysUncounted");
  ck_assert_ptr_nonnull(strstr(message, r2));
  ck_assert_ptr_null(strstr(message, r1));
  ck_assert_ptr_nonnull(strstr(message, "1 uncounted"));
  ck_assert(uncounted_gauge(rec) == 1);
  char *json = NULL;
  TF_OK_OR_FAIL(tf_reconcile_to_json(&json, rec));
  ck_assert_ptr_nonnull(strstr(json, "\"uncounted\": true"));
  tf_free(json);
  tf_reconcile_free(rec);

  /* a version 3 caller has no count_misses: not read */
  rec = run_misses(pool, nodes, three, 3);
  TF_OK_OR_FAIL(tf_reconcile_condition(rec, 0, NULL, &status, &reason, NULL, NULL));
  ck_assert_str_eq(reason, "AllRelaysReady");
  ck_assert(uncounted_gauge(rec) == 0);
  tf_reconcile_free(rec);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* CLI ports: kept by running relays, lowest free for new ones; the exporter port from 4.6.3. */
START_TEST(test_reconcile__cli_ports_logs_and_metrics_ports)
{
  tf_pool *pool = mk_pool(3, 0, "4.17.1");
  tf_nodes *nodes = mk_nodes(3);
  const char *secrets[] = SECRETS;
  tf_coturn_options copt = TF_COTURN_OPTIONS_INIT;
  copt.secrets = secrets;
  copt.secrets_count = 1;
  copt.cli_port = 5766;
  copt.cli_password = "cli-pw";
  copt.prometheus = 1; /* a build with the exporter (tf_coturn_options v2): metrics ports */
  copt.state_dir = "/var/lib/turnfleet";
  tf_reconcile_options opts = TF_RECONCILE_OPTIONS_INIT;
  opts.coturn = &copt;
  opts.log_dir = "/var/log/turnfleet";
  tf_observed *o = NULL;
  TF_OK_OR_FAIL(tf_observed_new(&o));
  char id[64], r2[TF_RELAY_NAME_MAX];
  identity_of(id, sizeof(id), 2, 0);
  name_of(r2, 2, 0);
  tf_relay_observation r = TF_RELAY_OBSERVATION_INIT;
  r.name = r2;
  r.identity = id;
  r.running = 1;
  r.cli_port = 5767;
  TF_OK_OR_FAIL(tf_observed_add_relay(o, &r));
  /* a relay on a node that left, CLI on 5766: drained through that port, which stays taken */
  char id4[64], r4[TF_RELAY_NAME_MAX];
  identity_of(id4, sizeof(id4), 4, 0);
  name_of(r4, 4, 0);
  r.name = r4;
  r.identity = id4;
  r.cli_port = 5766;
  TF_OK_OR_FAIL(tf_observed_add_relay(o, &r));
  tf_reconcile *rec = NULL;
  TF_OK_OR_FAIL(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts));
  const tf_plan *plan = tf_reconcile_plan(rec);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 3);
  /* in plan order (n1, n2, n3): 5768 (5766 and 5767 are taken), kept 5767, 5769 */
  static const uint16_t want[] = {5768, 5767, 5769};
  for (size_t k = 0; k < 3; k++) {
    const char *name = tf_relay_name(tf_plan_relay(plan, k));
    size_t i = 0;
    while (strcmp(tf_reconcile_relay_name(rec, i), name) != 0) i++;
    ck_assert_uint_eq(tf_reconcile_relay_cli_port(rec, i), want[k]);
    ck_assert_uint_eq(tf_reconcile_relay_metrics_port(rec, i), 9641);
    char line[128];
    snprintf(line, sizeof(line), "cli-port=%u\n", want[k]);
    ck_assert_ptr_nonnull(strstr(tf_reconcile_relay_config(rec, i), line));
    snprintf(line, sizeof(line), "log-file=\"/var/log/turnfleet/%s.log\"\n", name);
    ck_assert_ptr_nonnull(strstr(tf_reconcile_relay_config(rec, i), line));
    ck_assert_ptr_nonnull(strstr(tf_reconcile_relay_config(rec, i), "cli-password=\"cli-pw\"\n"));
  }
  /* the running relay without a config hash counts as outdated: restarted (the only disruption) */
  char got[256];
  actions_text(got, sizeof(got), rec);
  ck_assert_str_eq(got, "drain r4 Replaced; restart r2 ConfigChanged; start r1 ScaleUp; start r3 ScaleUp");
  for (size_t i = 0; i < tf_reconcile_relay_count(rec); i++)
    if (strcmp(tf_reconcile_relay_name(rec, i), r4) == 0) {
      ck_assert_uint_eq(tf_reconcile_relay_cli_port(rec, i), 5766);
      ck_assert_uint_eq(tf_reconcile_relay_metrics_port(rec, i), 0);
      ck_assert_ptr_null(tf_reconcile_relay_config(rec, i));
    }
  /* no secret in the JSON */
  char *json = NULL;
  TF_OK_OR_FAIL(tf_reconcile_to_json(&json, rec));
  ck_assert_ptr_null(strstr(json, "s3cr3t"));
  ck_assert_ptr_null(strstr(json, "cli-pw"));
  tf_free(json);
  tf_reconcile_free(rec);
  tf_observed_free(o);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* Another pool's CLI ports on a node (host networking: one 127.0.0.1 per node) are not given to this pool's
 * new relays there; on other nodes they are; a relay keeps the port it runs with. */
START_TEST(test_reconcile__cli_ports_avoid_other_pools_on_the_node)
{
  tf_pool *pool = mk_pool(3, 0, "4.17.1");
  tf_nodes *nodes = mk_nodes(3);
  const char *secrets[] = SECRETS;
  tf_coturn_options copt = TF_COTURN_OPTIONS_INIT;
  copt.secrets = secrets;
  copt.secrets_count = 1;
  copt.cli_port = 5766;
  copt.cli_password = "cli-pw";
  copt.state_dir = "/var/lib/turnfleet";
  tf_reconcile_options opts = TF_RECONCILE_OPTIONS_INIT;
  opts.coturn = &copt;
  tf_observed *o = NULL;
  TF_OK_OR_FAIL(tf_observed_new(&o));
  char id[64], r2[TF_RELAY_NAME_MAX];
  identity_of(id, sizeof(id), 2, 0);
  name_of(r2, 2, 0);
  tf_relay_observation r = TF_RELAY_OBSERVATION_INIT;
  r.name = r2;
  r.identity = id;
  r.running = 1;
  r.cli_port = 5766;
  TF_OK_OR_FAIL(tf_observed_add_relay(o, &r));
  TF_OK_OR_FAIL(tf_observed_add_cli_claim(o, "n1", 5766));
  TF_OK_OR_FAIL(tf_observed_add_cli_claim(o, "n1", 5767));
  TF_OK_OR_FAIL(tf_observed_add_cli_claim(o, "n2", 5766)); /* its own relay there keeps it all the same */
  TF_OK_OR_FAIL(tf_observed_add_cli_claim(o, "n3", 5768));
  ck_assert_int_eq(tf_observed_add_cli_claim(o, NULL, 5770), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "cli_claims[4].node: required");
  ck_assert_int_eq(tf_observed_add_cli_claim(o, "n1", 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "cli_claims[4].port: must be 1-65535");
  tf_reconcile *rec = NULL;
  TF_OK_OR_FAIL(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts));
  const tf_plan *plan = tf_reconcile_plan(rec);
  ck_assert_uint_eq(tf_plan_relay_count(plan), 3);
  /* in plan order (n1, n2, n3): 5768 (5766 and 5767 are another pool's there), kept 5766, 5767 (5766 is
   * this pool's on n2, 5768 on n1; 5768 is another pool's on n3) */
  static const char *node[] = {"n1", "n2", "n3"};
  static const uint16_t want[] = {5768, 5766, 5767};
  for (size_t k = 0; k < 3; k++) {
    const tf_relay *p = tf_plan_relay(plan, k);
    ck_assert_str_eq(tf_relay_node(p), node[k]);
    size_t i = 0;
    while (strcmp(tf_reconcile_relay_name(rec, i), tf_relay_name(p)) != 0) i++;
    ck_assert_uint_eq(tf_reconcile_relay_cli_port(rec, i), want[k]);
  }
  tf_reconcile_free(rec);
  tf_observed_free(o);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

START_TEST(test_reconcile__rejects_bad_input)
{
  tf_pool *pool = mk_pool(1, 0, NULL);
  tf_nodes *nodes = mk_nodes(1);
  tf_observed *o = NULL;
  TF_OK_OR_FAIL(tf_observed_new(&o));
  tf_relay_observation r = TF_RELAY_OBSERVATION_INIT;
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "relays[0].name: required");
  r.name = "Bad_Name";
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "relays[0].name: \"Bad_Name\" is not a valid relay name");
  r.name = "demo-relay-aaaaa";
  r.identity = "203.0.113.1/2-1";
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "relays[0].identity: \"203.0.113.1/2-1\" is not ADDR[,ADDR]/START-END");
  r.identity = "203.0.113.1/49152-49159";
  r.draining = 1;
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "relays[0].draining_since_ms: required (> 0) with draining");
  r.draining = 0;
  r.allocations = -2;
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  r.allocations = 0;
  int codes[] = {508, 508};
  int64_t counts[] = {1, 2};
  r.failure_codes = codes;
  r.failure_counts = counts;
  r.failure_count = 2;
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "relays[0].failure_codes[1]: 508 given twice");
  codes[1] = 99;
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  r.failure_count = 0;
  r.config_hash = "has space";
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  r.config_hash = NULL;
  r.version = 7;
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  r.version = TF_RELAY_OBSERVATION_VERSION;
  TF_OK_OR_FAIL(tf_observed_add_relay(o, &r));
  ck_assert_int_eq(tf_observed_add_relay(o, &r), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "relays[1].name: \"demo-relay-aaaaa\" was added before");

  ck_assert_int_eq(tf_observed_add_claim(o, NULL, "203.0.113.9/1-2", NULL, 0), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "claims[0].pool: required");
  ck_assert_int_eq(tf_observed_add_claim(o, "other", "nope", NULL, 0), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "claims[0]."));

  static const struct {
    const char *json;
    tf_err code;
    const char *message;
  } bad_status[] = {
      {"{\"conditions\": [", TF_EPROTO, NULL},
      {"[]", TF_EINVALID, "status: must be an object"},
      {"{\"conditions\": {}}", TF_EINVALID, "status.conditions: must be an array"},
      {"{\"conditions\": [{\"type\": \"Ready\", \"status\": \"Yes\", \"lastTransitionTime\": \"2024-05-01T12:00:00Z\"}]}",
       TF_EINVALID, "status.conditions[0].status: must be True, False or Unknown"},
      {"{\"conditions\": [{\"type\": \"Ready\", \"status\": \"True\", \"lastTransitionTime\": \"yesterday\"}]}",
       TF_EINVALID, "status.conditions[0].lastTransitionTime: must be an RFC 3339 time"},
      {"{\"conditions\": [{\"type\": \"Ready\", \"status\": \"True\", \"lastTransitionTime\": \"2024-05-01T12:00:00Z\"},"
       "{\"type\": \"Ready\", \"status\": \"True\", \"lastTransitionTime\": \"2024-05-01T12:00:00Z\"}]}",
       TF_EINVALID, "status.conditions[1].type: Ready given twice"},
  };
  for (size_t i = 0; i < sizeof(bad_status) / sizeof(bad_status[0]); i++) {
    ck_assert_int_eq(tf_observed_set_status(o, bad_status[i].json, strlen(bad_status[i].json)), bad_status[i].code);
    if (bad_status[i].message) ck_assert_str_eq(tf_error_last()->message, bad_status[i].message);
  }

  const char *secrets[] = SECRETS;
  tf_coturn_options copt = TF_COTURN_OPTIONS_INIT;
  copt.secrets = secrets;
  copt.secrets_count = 1;
  tf_reconcile_options opts = TF_RECONCILE_OPTIONS_INIT;
  tf_reconcile *rec = (tf_reconcile *)&opts; /* must stay untouched */
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "opts.coturn: required (render options with the shared secrets)");
  opts.coturn = &copt;
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, -1, &opts), TF_EINVALID);
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, T0, NULL), TF_EINVALID);
  opts.pressure_threshold = 1.5;
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "opts.pressure_threshold: must be in (0, 1]");
  opts.pressure_threshold = 0.9;
  opts.backoff_max_ms = 10;
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts), TF_EINVALID);
  opts.backoff_max_ms = 60000;
  opts.log_dir = "relative";
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts), TF_EINVALID);
  opts.log_dir = NULL;
  copt.secrets_count = 0;
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "secrets: at least one shared secret is required"));
  copt.secrets_count = 1;
  copt.cli_port = 5766; /* without a password */
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "cli_password: required"));
  copt.cli_port = 0;
  ck_assert_ptr_eq(rec, (tf_reconcile *)&opts);
  /* this pool's relays come as observations, not as claims */
  TF_OK_OR_FAIL(tf_observed_add_claim(o, "demo", "203.0.113.9/40000-40010", NULL, 0));
  ck_assert_int_eq(tf_reconcile_new(&rec, pool, nodes, o, T0, &opts), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message,
                   "claims[0].pool: \"demo\" is the pool being reconciled (add its relays with tf_observed_add_relay)");
  tf_observed_free(o);
  /* an invalid pool */
  tf_pool *nameless = tf_test_pool("spec: {auth: {realm: r, secretRef: {name: s}}}\n");
  ck_assert_int_eq(tf_reconcile_new(&rec, nameless, nodes, NULL, T0, &opts), TF_EINVALID);
  tf_pool_free(nameless);

  tf_reconcile_options io;
  ck_assert_int_eq(tf_reconcile_options_init(&io, 0), TF_EINVALID);
  TF_OK_OR_FAIL(tf_reconcile_options_init(&io, TF_RECONCILE_OPTIONS_VERSION));
  ck_assert(io.pressure_threshold == 0.9 && io.backoff_initial_ms == 1000 && io.backoff_max_ms == 60000);
  tf_relay_observation ro;
  ck_assert_int_eq(tf_relay_observation_init(&ro, TF_RELAY_OBSERVATION_VERSION + 1), TF_EINVALID);
  TF_OK_OR_FAIL(tf_relay_observation_init(&ro, 1));
  ck_assert_int_eq(ro.allocations, -1);
  ck_assert_str_eq(tf_action_name(TF_ACTION_RESTART), "restart");
  ck_assert_ptr_null(tf_action_name((tf_action)9));
  ck_assert_int_eq(tf_reconcile_action(NULL, 0, NULL, NULL, NULL), TF_EINVALID);
  ck_assert_uint_eq(tf_reconcile_relay_count(NULL), 0);
  tf_reconcile_free(NULL);
  tf_observed_free(NULL);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* A caller built against version 1 passes a shorter struct: it is written and read only to its end
 * (the sanitizer build catches a byte past it), and keeps version 1's shared CLI password. */
START_TEST(test_reconcile__a_version_1_options_struct_is_read_only_to_its_end)
{
  tf_pool *pool = mk_pool(1, 0, "4.6.1");
  tf_nodes *nodes = mk_nodes(1);
  const char *secrets[] = SECRETS;
  tf_coturn_options copt = TF_COTURN_OPTIONS_INIT;
  copt.secrets = secrets;
  copt.secrets_count = 1;
  copt.cli_port = 5766;
  copt.cli_password = "cli-master";
  copt.state_dir = "/var/lib/turnfleet";
  /* the struct as version 1 declared it */
  typedef struct {
    unsigned int version;
    const tf_coturn_options *coturn;
    const char *log_dir;
    double pressure_threshold;
    int64_t backoff_initial_ms, backoff_max_ms;
  } options_v1;
  _Static_assert(sizeof(options_v1) == offsetof(tf_reconcile_options, cli_password_per_relay), "v1 layout");
  options_v1 *o = malloc(sizeof(*o)); /* exactly that long: a byte past it is a heap overflow */
  ck_assert_ptr_nonnull(o);
  TF_OK_OR_FAIL(tf_reconcile_options_init((tf_reconcile_options *)(void *)o, 1));
  ck_assert(o->pressure_threshold == 0.9 && o->backoff_max_ms == 60000);
  o->coturn = &copt;
  tf_reconcile *rec = NULL;
  TF_OK_OR_FAIL(tf_reconcile_new(&rec, pool, nodes, NULL, T0, (const tf_reconcile_options *)(void *)o));
  ck_assert_ptr_nonnull(strstr(tf_reconcile_relay_config(rec, 0), "cli-password=\"cli-master\""));
  tf_reconcile_free(rec);
  free(o);
  /* version 2, per relay: each relay its own derived password, never the master */
  tf_reconcile_options o2 = TF_RECONCILE_OPTIONS_INIT;
  o2.coturn = &copt;
  o2.cli_password_per_relay = 1;
  TF_OK_OR_FAIL(tf_reconcile_new(&rec, pool, nodes, NULL, T0, &o2));
  char *pw = NULL, line[128];
  TF_OK_OR_FAIL(tf_reconcile_cli_password(&pw, "cli-master", tf_reconcile_relay_name(rec, 0)));
  ck_assert_uint_eq(strlen(pw), 32);
  snprintf(line, sizeof(line), "cli-password=\"%s\"", pw);
  ck_assert_ptr_nonnull(strstr(tf_reconcile_relay_config(rec, 0), line));
  ck_assert_ptr_null(strstr(tf_reconcile_relay_config(rec, 0), "cli-master"));
  char *other = NULL;
  TF_OK_OR_FAIL(tf_reconcile_cli_password(&other, "cli-master", "another-relay"));
  ck_assert_str_ne(pw, other);
  tf_secret_free(other);
  ck_assert_int_eq(tf_reconcile_cli_password(&other, NULL, "x"), TF_EINVALID);
  ck_assert_ptr_null(other);
  tf_secret_free(pw);
  tf_reconcile_free(rec);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

Suite *tf_test_reconcile_suite(void)
{
  Suite *s = suite_create("reconcile");
  TCase *tc = tcase_create("core");
  tcase_add_loop_test(tc, test_reconcile__scenarios, 0, (int)(sizeof(scenarios) / sizeof(scenarios[0])));
  tcase_add_test(tc, test_reconcile__scale_down_marks_the_relay_draining_at_once);
  tcase_add_test(tc, test_reconcile__range_change_replaces_one_relay_at_a_time);
  tcase_add_test(tc, test_reconcile__conditions_keep_last_transition_time_until_status_flips);
  tcase_add_test(tc, test_reconcile__deterministic);
  tcase_add_test(tc, test_reconcile__status_uris_and_ice_servers);
  tcase_add_test(tc, test_reconcile__metric_samples);
  tcase_add_test(tc, test_reconcile__a_relay_without_counts_is_uncounted_and_the_pool_not_ready);
  tcase_add_test(tc, test_reconcile__cli_ports_logs_and_metrics_ports);
  tcase_add_test(tc, test_reconcile__cli_ports_avoid_other_pools_on_the_node);
  tcase_add_test(tc, test_reconcile__rejects_bad_input);
  tcase_add_test(tc, test_reconcile__a_version_1_options_struct_is_read_only_to_its_end);
  suite_add_tcase(s, tc);
  return s;
}
