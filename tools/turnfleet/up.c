/* turnfleet up: the local runtime, a thin driver of the library's fleet
 * engine. It feeds the engine facts (children started and reaped, probe and
 * count results, the pool and nodes files) and carries out its actions with
 * processes, files, the coturn CLI (relayctl workers) and probes; it writes
 * status.json / turn-uris / iceServers.json atomically, serves /metrics and
 * /healthz, and prints a table or JSON events. Secrets live only in the 0600
 * relay configs and in memory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "secure.h"
#include "tool_http.h"
#include "tool_io.h"
#include "up.h"

#define PROG "turnfleet up"
#define say(what, ...) tool_say(PROG, what, __VA_ARGS__)

static const char up_usage[] =
  "usage: turnfleet up -f POOL --secret-file F [--addresses LIST | --nodes NODES] [--state-dir DIR]\n"
  "                    [--metrics-addr ADDR:PORT] [--probe-interval S] [--cli-port PORT]\n"
  "                    [--turnserver PATH] [--name NAME] [--peer-check [--allow-loopback-peers]]\n"
  "                    [--cert F --key F [--ca-file F]] [--json]\n"
  "  --addresses   this host's relay addresses: 127.0.0.11-13, 127.0.0.11,127.0.0.12, fd00::1-3\n"
  "  --state-dir   configs (0600), logs, status.json, turn-uris, iceServers.json (default ./turnfleet-state)\n"
  "  --metrics-addr  /metrics and /healthz (default 127.0.0.1:9650)\n"
  "  --probe-interval  seconds between a relay's probes (default 5; fractions allowed)\n"
  "  --cli-port    first loopback CLI port of the relays: counting and drain (default 5766)\n"
  "  --peer-check  probes also send data through each relay to a second allocation\n"
  "  --allow-loopback-peers  let coturn relay to loopback peers (test fleets on 127.0.0.0/8 only)\n"
  "  --cert/--key  the relays' TLS certificate and key (required with tls listeners)\n"
  "  --ca-file     what the probes verify the relays' certificate with (default: the system's CAs)\n"

  "  --turnserver  the coturn to run (default turnserver on PATH), or a wrapper such as\n"
  "                tools/dev/turnserver-rootfs; its --version must be the pool's coturnVersion\n";

static volatile sig_atomic_t stop_signals;

static void on_signal(int sig)
{
  (void)sig;
  stop_signals++;
}

#define UP_LOG 12

typedef struct child {
  char *name;
  pid_t pid;
} child;

typedef struct up {
  const char *pool_file, *name, *addresses, *nodes_file, *turnserver, *metrics_addr, *secret_file, *ca_file;
  char *cert, *key;
  char *state_dir, *log_dir, *secret, *previous, *last_status; /* secret, previous: wiped */
  char cli_password[33];
  double probe_interval;
  uint16_t cli_port;
  int json, grace_ms, peer_check, allow_loopback_peers;
  struct timespec pool_mtime, secret_mtime, nodes_mtime;
  tf_engine *engine;
  tf_relayctl_workers *ctl;
  child *children;
  size_t nchildren;
  pthread_mutex_t mu; /* the HTTP thread reads what follows */
  uint32_t ts_version, ts_build; /* the turnserver that runs: its version and TF_COTURN_BUILD_* bits */
  char ts_version_text[64];
  char *metrics_text;
  const char *unhealthy[4]; /* why /healthz fails, per source (static strings); NULL: fine */
  struct MHD_Daemon *mhd;
  char *log[UP_LOG]; /* the table's event log, a ring */
  size_t log_next;
  int64_t loop_ms;   /* when the loop last went round (for /healthz) */
  char **acts; /* the last step's lifecycle actions, printed after the next step */
  size_t nacts;
  int event_due;
} up;

/* A line of the table's event log, stamped with the time (the JSON events carry their own). */
__attribute__((format(printf, 2, 3))) static void log_line(up *u, const char *fmt, ...)
{
  char when[16], *text = NULL;
  time_t t = time(NULL);
  struct tm tm;
  strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&t, &tm));
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&text, fmt, ap) < 0) text = NULL;
  va_end(ap);
  free(u->log[u->log_next]);
  if (text && asprintf(&u->log[u->log_next], "%s %s", when, text) < 0) u->log[u->log_next] = NULL;
  free(text);
  u->log_next = (u->log_next + 1) % UP_LOG;
}

/* ---- the turnserver ---- */

/* What the turnserver (or wrapper) given to --turnserver is: its version from
 * `--version`, its build from `-h` (Prometheus or not). 0, or -1 reported. */
static int detect_turnserver(up *u)
{
  char out[512];
  int n = up_capture(u->turnserver, "--version", out, sizeof(out), 15000);
  if (n < 0) {
    say("--turnserver", "cannot run %s: %s", u->turnserver, strerror(errno));
    return -1;
  }
  const char *line = out + strspn(out, " \t\r\n");
  char first[64];
  snprintf(first, sizeof(first), "%.*s", (int)strcspn(line, " \t\r\n"), line);
  if (tf_coturn_version_parse(&u->ts_version, first) < 0) {
    say("--turnserver", "%s --version printed no coturn version: \"%.*s\"", u->turnserver, (int)strcspn(line, "\r\n") > 80 ? 80 : (int)strcspn(line, "\r\n"), line);
    return -1;
  }
  snprintf(u->ts_version_text, sizeof(u->ts_version_text), "%s", first);
  size_t size = 256 * 1024;
  char *help = malloc(size);
  n = help ? up_capture(u->turnserver, "-h", help, size, 15000) : -1;
  if (n < 0 || tf_coturn_build_features(&u->ts_build, help, (size_t)n) < 0) {
    say("--turnserver", "%s -h: %s", u->turnserver, n < 0 ? strerror(errno) : tf_error_last()->message);
    free(help);
    return -1;
  }
  free(help);
  return 0;
}

/* 1 (reported, the reason in @p why) when the pool's coturnVersion is not the turnserver that runs it. */
static int coturn_mismatch(const up *u, const tf_pool *pool, char *why, size_t size)
{
  uint32_t v = 0;
  const char *want = tf_pool_coturn_version(pool);
  if (want && tf_coturn_version_parse(&v, want) == 0 && v == u->ts_version) return 0;
  snprintf(why, size,
           "spec.dataplane.coturnVersion: \"%s\" contradicts the turnserver this runs: %s is coturn %s "
           "(set coturnVersion to it, or give --turnserver a coturn %s)",
           want ? want : "", u->turnserver, u->ts_version_text, want ? want : "of that version");
  return 1;
}

/* ---- files ---- */

static int file_changed(const char *path, struct timespec *seen)
{
  struct stat st;
  if (stat(path, &st) < 0 || (st.st_mtim.tv_sec == seen->tv_sec && st.st_mtim.tv_nsec == seen->tv_nsec)) return 0;
  *seen = st.st_mtim;
  return 1;
}

/* Parse and validate the pool file; NULL with every problem reported when it is not a valid pool. */
static tf_pool *load_pool(up *u)
{
  size_t len;
  char *text = tool_read_file(u->pool_file, &len);
  tf_pool *pool = NULL;
  tf_problems *problems = NULL;
  cJSON *report = cJSON_CreateArray();
  char line[1024];
  if (!text) {
    snprintf(line, sizeof(line), "cannot read: %s", strerror(errno));
    cJSON_AddItemToArray(report, cJSON_CreateString(line));
  } else if (tf_pool_parse(&pool, text, len, TF_FORMAT_AUTO) < 0 || (u->name && tf_pool_set_name(pool, u->name) < 0) ||
             tf_pool_validate(&problems, pool) < 0) {
    for (size_t i = 0; i < tf_problems_count(problems); i++) {
      snprintf(line, sizeof(line), "%s: %s", tf_problems_path(problems, i), tf_problems_message(problems, i));
      cJSON_AddItemToArray(report, cJSON_CreateString(line));
    }
    if (!tf_problems_count(problems)) cJSON_AddItemToArray(report, cJSON_CreateString(tf_error_last()->message));
    tf_pool_free(pool);
    pool = NULL;
  }
  char why[512];
  if (pool && coturn_mismatch(u, pool, why, sizeof(why))) {
    cJSON_AddItemToArray(report, cJSON_CreateString(why));
    tf_pool_free(pool);
    pool = NULL;
  }
  const cJSON *p;
  cJSON_ArrayForEach(p, report) say(u->pool_file, "%s", p->valuestring);
  if (!pool && u->json && u->engine) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "event", "poolInvalid");
    cJSON_AddStringToObject(ev, "file", u->pool_file);
    cJSON_AddItemToObject(ev, "problems", report);
    report = NULL;
    char *out = cJSON_PrintUnformatted(ev);
    if (out) printf("%s\n", out);
    fflush(stdout);
    free(out);
    cJSON_Delete(ev);
  }
  cJSON_Delete(report);
  tf_problems_free(problems);
  free(text);
  return pool;
}

/* The inventory of this host: HostNetwork and PartitionedIP get one Ready node per address (the
 * i-th IPv4 with the i-th IPv6 in DualStack); ExternalIPPool and PodIP one node listing every
 * address (the planner keeps those in the pool's CIDRs). Labelled with the pool's nodeSelector. */
static tf_nodes *nodes_from_addresses(const char *list, const tf_pool *pool)
{
  enum { MAX = 1024 };
  tf_addr *addrs = calloc(MAX, sizeof(tf_addr)), *v4 = calloc(MAX, sizeof(tf_addr)), *v6 = calloc(MAX, sizeof(tf_addr));
  size_t n = 0, n4 = 0, n6 = 0, nl = tf_pool_node_selector_count(pool);
  tf_nodes *nodes = NULL;
  const char *keys[64], *values[64];
  for (size_t i = 0; i < nl && i < 64; i++)
    keys[i] = tf_pool_node_selector_key(pool, i), values[i] = tf_pool_node_selector_value(pool, i);
  int ok = addrs && v4 && v6 && tf_addr_list_parse(addrs, MAX, &n, list) == 0 && tf_nodes_new(&nodes) == 0;
  if (!ok) say("--addresses", "%s (want e.g. 127.0.0.11-13,127.0.0.20, fd00::1-3 or 127.0.0.80/30)", tf_error_last()->message);
  for (size_t i = 0; ok && i < n; i++) {
    if (addrs[i].family == TF_AF_INET) v4[n4++] = addrs[i];
    else v6[n6++] = addrs[i];
  }
  tf_mode mode = tf_pool_mode(pool);
  int listed = mode == TF_MODE_EXTERNAL_IP_POOL || mode == TF_MODE_POD_IP;
  int dual = tf_pool_family(pool) == TF_FAMILY_DUAL_STACK;
  size_t nodes_wanted = listed ? 1 : dual ? (n4 < n6 ? n4 : n6) : n;
  for (size_t i = 0; ok && i < nodes_wanted; i++) {
    char name[32];
    snprintf(name, sizeof(name), listed ? "local" : "local-%03zu", i + 1);
    tf_addr pair[2] = {v4[i < n4 ? i : 0], v6[i < n6 ? i : 0]};
    tf_node_info info = TF_NODE_INFO_INIT;
    info.name = name;
    info.label_keys = keys;
    info.label_values = values;
    info.label_count = nl < 64 ? nl : 64;
    info.ready = 1;
    info.internal_ips = listed ? addrs : dual ? pair : &addrs[i];
    info.internal_ip_count = listed ? n : dual ? 2 : 1;
    if (mode == TF_MODE_EXTERNAL_IP_POOL) info.external_addresses = addrs, info.external_address_count = n;
    if (mode == TF_MODE_POD_IP) info.pod_addresses = addrs, info.pod_address_count = n;
    ok = tf_nodes_add(nodes, &info) == 0;
  }
  free(addrs);
  free(v4);
  free(v6);
  if (ok) return nodes;
  tf_nodes_free(nodes);
  return NULL;
}

/* 0 when (addr, port) can be bound for @p type now; else the errno (EADDRINUSE: someone has it). */
static int bind_error(const tf_addr *addr, uint16_t port, int type)
{
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof(ss));
  socklen_t len;
  if (addr->family == TF_AF_INET) {
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    memcpy(&v4->sin_addr, addr->bytes, 4);
    len = sizeof(*v4);
  } else {
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    memcpy(&v6->sin6_addr, addr->bytes, 16);
    len = sizeof(*v6);
  }
  int fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0), err = 0;
  if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0) err = errno;
  if (fd >= 0) close(fd);
  return err;
}

/* Refuse at start what cannot work on these nodes: replicas that cannot all be placed (with the
 * planner's reason), and a listener address and port that another process already holds. */
static int check_plan(const tf_pool *pool, const tf_nodes *nodes)
{
  tf_plan *plan = NULL;
  if (tf_plan_new(&plan, pool, nodes, NULL) < 0) return say("plan", "%s", tf_error_last()->message), -1;
  int64_t placed = (int64_t)tf_plan_relay_count(plan);
  int bad = placed < tf_pool_replicas(pool);
  for (size_t k = 0; bad && k < tf_plan_condition_count(plan); k++) {
    const char *type, *message;
    if (tf_plan_condition(plan, k, &type, NULL, NULL, &message) == 0 && strcmp(type, "Placed") == 0)
      say("--addresses/--nodes", "%lld of %lld replicas can be placed (%s %s): %s", (long long)placed,
          (long long)tf_pool_replicas(pool), tf_mode_name(tf_pool_mode(pool)), tf_family_name(tf_pool_family(pool)),
          message);
  }
  for (size_t i = 0; !bad && i < tf_plan_relay_count(plan); i++) {
    const tf_relay *r = tf_plan_relay(plan, i);
    for (size_t a = 0; a < tf_relay_address_count(r); a++)
      for (size_t l = 0; l < tf_pool_listener_count(pool); l++) {
        tf_addr addr;
        char text[TF_ADDR_STRLEN];
        int proto = tf_pool_listener_protocol(pool, l), err;
        int type = proto == TF_PROTOCOL_UDP || proto == TF_PROTOCOL_DTLS ? SOCK_DGRAM : SOCK_STREAM;
        uint16_t port = tf_relay_listener_port(r, l);
        if (tf_relay_address(&addr, r, a) < 0 || !(err = bind_error(&addr, port, type))) continue;
        tf_addr_format(text, sizeof(text), &addr);
        say(tf_relay_name(r), "cannot listen on %s port %u (%s): %s%s", text, port, tf_protocol_name(proto),
            strerror(err), err == EADDRINUSE ? " (another turnfleet up, or another process, holds it)" : "");
        bad = 1;
      }
  }
  tf_plan_free(plan);
  return bad ? -1 : 0;
}

static tf_nodes *load_nodes(up *u, const tf_pool *pool)
{
  if (u->addresses) return nodes_from_addresses(u->addresses, pool);
  size_t len;
  char *text = tool_read_file(u->nodes_file, &len);
  tf_nodes *nodes = NULL;
  if (!text) say(u->nodes_file, "cannot open: %s", strerror(errno));
  else if (tf_nodes_parse(&nodes, text, len) < 0) say(u->nodes_file, "%s", tf_error_last()->message);
  free(text);
  return nodes;
}

enum { H_POOL, H_NODES, H_SECRET, H_FILES };

static void set_unhealthy(up *u, int source, const char *why)
{
  pthread_mutex_lock(&u->mu);
  u->unhealthy[source] = why;
  pthread_mutex_unlock(&u->mu);
}

/* A changed pool file: a valid pool that the engine accepts replaces the running one; anything else changes nothing. */
static void watch_pool(up *u)
{
  if (!file_changed(u->pool_file, &u->pool_mtime)) return;
  tf_pool *pool = load_pool(u);
  tf_nodes *nodes = pool && u->addresses ? load_nodes(u, pool) : NULL;
  if (pool && (!u->addresses || nodes) && (!nodes || tf_engine_set_nodes(u->engine, nodes) == 0) &&
      tf_engine_set_pool(u->engine, pool) == 0) {
    set_unhealthy(u, H_POOL, NULL);
    if (!u->json) {
      say(u->pool_file, "reloaded (replicas %lld)", (long long)tf_pool_replicas(pool));
    } else {
      printf("{\"event\":\"poolReloaded\",\"replicas\":%lld,\"drainTimeoutMs\":%lld}\n",
             (long long)tf_pool_replicas(pool), (long long)tf_pool_drain_timeout_ms(pool));
      fflush(stdout);
    }
    return;
  }
  if (pool && (!u->addresses || nodes)) {
    say(u->pool_file, "refused: %s", tf_error_last()->message);
    log_line(u, "pool edit refused: %s", tf_error_last()->message);
    if (u->json) {
      cJSON *ev = cJSON_CreateObject();
      cJSON_AddStringToObject(ev, "event", "poolRefused");
      cJSON_AddStringToObject(ev, "file", u->pool_file);
      cJSON_AddStringToObject(ev, "message", tf_error_last()->message);
      char *out = cJSON_PrintUnformatted(ev);
      if (out) printf("%s\n", out);
      fflush(stdout);
      free(out);
      cJSON_Delete(ev);
    }
  }
  else if (pool) tf_pool_free(pool);
  say(u->pool_file, "not applied: the running fleet is left as it is");
  set_unhealthy(u, H_POOL, "the last pool edit was refused");
}

/* ---- actions ---- */

static child *find_child(up *u, const char *name)
{
  for (size_t i = 0; i < u->nchildren; i++)
    if (!strcmp(u->children[i].name, name)) return &u->children[i];
  return NULL;
}

static void stop_child(up *u, const char *name)
{
  child *c = find_child(u, name);
  if (!c) return;
  if (c->pid > 0) up_stop(c->pid, u->grace_ms);
  free(c->name);
  *c = u->children[--u->nchildren];
}

/* START (or the second half of RESTART): config 0600, then turnserver -c. @return the pid or -1. */
static pid_t start_relay(up *u, const tf_engine_action *a)
{
  char dir[4096], conf[4200], out[4200];
  snprintf(dir, sizeof(dir), "%s/%s", u->state_dir, a->relay);
  snprintf(conf, sizeof(conf), "%s/turnserver.conf", dir);
  snprintf(out, sizeof(out), "%s/%s.out", u->log_dir, a->relay);
  /* the only copy of the secret on disk: 0600, atomic, never through a symbolic link */
  if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || secure_write_file(conf, a->config, strlen(a->config)) < 0) {
    say(a->relay, "cannot write its config: %s", strerror(errno));
    return -1;
  }
  pid_t pid = up_spawn(u->turnserver, conf, out);
  child *grown = pid > 0 ? realloc(u->children, (u->nchildren + 1) * sizeof(child)) : NULL;
  if (pid > 0 && grown) {
    u->children = grown;
    u->children[u->nchildren++] = (child){strdup(a->relay), pid};
  }
  if (pid < 0) say(a->relay, "cannot start %s: %s", u->turnserver, strerror(errno));
  return pid;
}

static void carry_out(up *u, const tf_engine_action *a, int64_t now, tf_probe_set *probes, uint64_t *probe_ids,
                      size_t *nprobes)
{
  char id[24] = "", path[4200];
  switch (a->kind) {
  case TF_ENGINE_RESTART:
  case TF_ENGINE_START: {
    if (a->kind == TF_ENGINE_RESTART) stop_child(u, a->relay);
    pid_t pid = start_relay(u, a);
    if (pid > 0) snprintf(id, sizeof(id), "%d", (int)pid);
    (void)tf_engine_done(u->engine, a->id, pid > 0, id, now);
    break;
  }
  case TF_ENGINE_STOP:
    stop_child(u, a->relay);
    snprintf(path, sizeof(path), "%s/%s/turnserver.conf", u->state_dir, a->relay);
    unlink(path); /* the only copy of the secret on disk goes with the relay */
    (void)tf_engine_done(u->engine, a->id, 1, NULL, now);
    break;
  case TF_ENGINE_DRAIN:
  case TF_ENGINE_COUNT: {
    tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
    req.op = a->kind == TF_ENGINE_COUNT ? (a->count == TF_ENGINE_COUNT_METRICS ? TF_RELAYCTL_COUNT_METRICS : TF_RELAYCTL_COUNT)
             : a->drain == TF_ENGINE_DRAIN_MODE ? TF_RELAYCTL_DRAIN : TF_RELAYCTL_REFUSE;
    req.address = a->address;
    req.port = req.op == TF_RELAYCTL_COUNT_METRICS ? a->metrics_port : a->cli_port;
    req.password = a->cli_password; /* the relay's own, and only to a listener of its process */
    req.owner_pid = a->relay_id ? atoi(a->relay_id) : 0;
    req.timeout_ms = (int)a->timeout_ms;
    if (tf_relayctl_workers_submit(u->ctl, &req, a->id) < 0) {
      if (a->kind == TF_ENGINE_COUNT) (void)tf_engine_count_done(u->engine, a->id, -1, now);
      else (void)tf_engine_done(u->engine, a->id, 0, NULL, now);
    }
    break;
  }
  case TF_ENGINE_PROBE:
    for (size_t j = 0; j < a->probe_count; j++) {
      tf_probe_options po = TF_PROBE_OPTIONS_INIT;
      tf_addr addr;
      po.uri = a->probe_uris[j];
      po.secret = u->previous ? u->previous : u->secret; /* every relay, restarted or not, takes it */
      po.expect_address = a->probe_addresses[j];
      po.family = tf_addr_parse(&addr, a->probe_addresses[j]) == 0 ? addr.family : 0; /* the pool's family */
      po.expect_port_start = a->ports.start;
      po.expect_port_end = a->ports.end;
      po.timeout_ms = (int)a->timeout_ms;
      po.rto_ms = 200;
      po.peer_check = u->peer_check;
      po.ca_file = u->ca_file;
      if (tf_probe_set_add(probes, &po) == 0) probe_ids[(*nprobes)++] = a->id;
    }
    break;
  }
}

/* Run the round's probes on one poll loop (bounded by one timeout); a relay passes when all its URIs do. */
static void run_probes(up *u, tf_probe_set *set, const uint64_t *ids, size_t n)
{
  if (!n) return;
  (void)tf_probe_set_run(set, NULL, NULL);
  int64_t now = up_now_ms();
  for (size_t i = 0; i < n;) {
    size_t j = i;
    const tf_probe_result *bad = NULL;
    for (; j < n && ids[j] == ids[i]; j++)
      if (!tf_probe_result_ok(tf_probe_set_result(set, j)) && !bad) bad = tf_probe_set_result(set, j);
    const tf_probe_result *r = bad ? bad : tf_probe_set_result(set, i);
    (void)tf_engine_probe_done(u->engine, ids[i], !bad, tf_probe_result_error_code(r),
                               tf_probe_result_stage(r) == TF_PROBE_STAGE_ALLOCATE, tf_probe_result_message(r), now);
    i = j;
  }
}

/* Results of the CLI and /metrics requests that came back. */
static void take_results(up *u)
{
  uint64_t id;
  tf_err rc;
  int64_t count;
  while (tf_relayctl_workers_next(u->ctl, &id, &rc, &count) == 1)
    if (tf_engine_count_done(u->engine, id, rc == 0 ? count : -1, up_now_ms()) == TF_ENOTFOUND)
      (void)tf_engine_done(u->engine, id, rc == 0, NULL, up_now_ms());
}

/* A child that died: a fact for the engine, which restarts it after its backoff. */
static void reap_children(up *u)
{
  int status;
  pid_t pid;
  while ((pid = up_reap(&status)) > 0)
    for (size_t i = 0; i < u->nchildren; i++) {
      if (u->children[i].pid != pid) continue;
      child gone = u->children[i];
      u->children[i] = u->children[--u->nchildren]; /* a restart adds it again */
      tf_engine_relay_facts f = TF_ENGINE_RELAY_FACTS_INIT;
      f.name = gone.name;
      f.running = 0;
      (void)tf_engine_observe(u->engine, &f, up_now_ms());
      log_line(u, "%s: turnserver %d exited (%s %d)", f.name, (int)pid, WIFSIGNALED(status) ? "signal" : "status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      free(gone.name);
      break;
    }
}

/* ---- output ---- */

static int write_text(up *u, const char *name, const char *text)
{
  if (tool_write_atomic(u->state_dir, name, text, strlen(text), 0644) == 0) return 0;
  say(name, "cannot write: %s (kept retrying)", strerror(errno));
  return -1;
}

static void publish(up *u)
{
  const tf_reconcile *rec = tf_engine_reconcile(u->engine);
  char *status = NULL, *ice = NULL, *metrics = NULL;
  int failed = 0;
  tf_metrics *m = NULL;
  if (tf_engine_status_json(&status, u->engine) == 0 && (!u->last_status || strcmp(status, u->last_status))) {
    size_t cap = 2;
    for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) cap += strlen(tf_reconcile_uri(rec, i)) + 1;
    char *uris = calloc(1, cap), *with_nl = NULL;
    for (size_t i = 0; uris && i < tf_reconcile_uri_count(rec); i++)
      strcat(strcat(uris, tf_reconcile_uri(rec, i)), "\n");
    /* the URIs first: a relay that left them is never still published by a newer status */
    failed |= !uris || write_text(u, "turn-uris", uris) < 0;
    if (tf_reconcile_ice_servers_json(&ice, rec) == 0 && asprintf(&with_nl, "%s\n", ice) > 0)
      failed |= write_text(u, "iceServers.json", with_nl) < 0;
    free(with_nl);
    with_nl = NULL;
    if (asprintf(&with_nl, "%s\n", status) > 0) failed |= write_text(u, "status.json", with_nl) < 0;
    free(with_nl);
    free(uris);
    if (!failed) {
      free(u->last_status);
      u->last_status = strdup(status);
    }
    set_unhealthy(u, H_FILES, failed ? "the state directory cannot be written" : NULL);
  }
  if (tf_metrics_new(&m) == 0 && tf_reconcile_metrics(m, rec) == 0 && tf_metrics_to_text(&metrics, m) == 0) {
    pthread_mutex_lock(&u->mu);
    tf_free(u->metrics_text);
    u->metrics_text = metrics;
    pthread_mutex_unlock(&u->mu);
  }
  tf_metrics_free(m);
  tf_free(status);
  tf_free(ice);
}

static void print_event(up *u, const char *const *acts, size_t nacts)
{
  const tf_reconcile *rec = tf_engine_reconcile(u->engine);
  const tf_pool *pool = tf_engine_pool(u->engine);
  size_t n = tf_engine_relay_count(u->engine), ready = 0;
  for (size_t i = 0; i < n; i++) ready += tf_engine_relay_at(u->engine, i)->state == TF_ENGINE_RELAY_READY;
  if (u->json) {
    cJSON *ev = cJSON_CreateObject(), *rel, *a, *uris;
    cJSON_AddStringToObject(ev, "event", "reconcile");
    cJSON_AddNumberToObject(ev, "timeMs", (double)up_wall_ms());
    cJSON_AddStringToObject(ev, "pool", tf_pool_name(pool));
    cJSON_AddBoolToObject(ev, "stopping", stop_signals > 0);
    cJSON_AddNumberToObject(ev, "readyRelays", (double)ready);
    cJSON_AddNumberToObject(ev, "desiredReplicas", (double)tf_pool_replicas(pool));
    cJSON_AddNumberToObject(ev, "placedReplicas", (double)tf_plan_relay_count(tf_reconcile_plan(rec)));
    cJSON *conds = cJSON_AddArrayToObject(ev, "conditions");
    for (size_t i = 0; i < tf_reconcile_condition_count(rec); i++) {
      const char *type, *status, *reason, *message;
      if (tf_reconcile_condition(rec, i, &type, &status, &reason, &message, NULL) < 0) continue;
      cJSON *c = cJSON_CreateObject();
      cJSON_AddStringToObject(c, "type", type);
      cJSON_AddStringToObject(c, "status", status);
      cJSON_AddStringToObject(c, "reason", reason);
      cJSON_AddStringToObject(c, "message", message);
      cJSON_AddItemToArray(conds, c);
    }
    cJSON_AddItemToObject(ev, "actions", a = cJSON_CreateArray());
    for (size_t i = 0; i < nacts; i++) cJSON_AddItemToArray(a, cJSON_CreateString(acts[i]));
    cJSON_AddItemToObject(ev, "relays", rel = cJSON_CreateArray());
    for (size_t i = 0; i < n; i++) {
      const tf_engine_relay *r = tf_engine_relay_at(u->engine, i);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddItemToArray(rel, o);
      cJSON_AddStringToObject(o, "name", r->name);
      cJSON_AddStringToObject(o, "state", tf_engine_relay_state_name(r->state));
      cJSON_AddBoolToObject(o, "published", (r->flags & TF_RELAY_PUBLISHED) != 0);
      cJSON_AddNumberToObject(o, "pid", r->id ? atoi(r->id) : 0);
      cJSON_AddNumberToObject(o, "restarts", (double)r->restarts);
      if (r->allocations >= 0) cJSON_AddNumberToObject(o, "allocations", (double)r->allocations);
      else cJSON_AddNullToObject(o, "allocations");
    }
    cJSON_AddItemToObject(ev, "uris", uris = cJSON_CreateArray());
    for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++)
      cJSON_AddItemToArray(uris, cJSON_CreateString(tf_reconcile_uri(rec, i)));
    char *line = cJSON_PrintUnformatted(ev);
    if (line) printf("%s\n", line);
    free(line);
    cJSON_Delete(ev);
  } else {
    printf("\033[H\033[Jturnfleet up  pool %s/%s  coturn %s  ready %zu/%lld  uris %zu%s\n\n%-22s %-16s %-13s %-9s "
           "%-7s %-8s %-8s %s\n", tf_pool_namespace(pool), tf_pool_name(pool), tf_pool_coturn_version(pool), ready,
           (long long)tf_pool_replicas(pool), tf_reconcile_uri_count(rec), stop_signals ? "  STOPPING (draining)" : "",
           "RELAY", "ADDRESS", "PORTS", "STATE", "ALLOCS", "PID", "RESTARTS", "LAST PROBE");
    for (size_t i = 0; i < n; i++) {
      const tf_engine_relay *r = tf_engine_relay_at(u->engine, i);
      char ports[32] = "-", allocs[24] = "-";
      if (r->ports.start) snprintf(ports, sizeof(ports), "%u-%u", r->ports.start, r->ports.end);
      if (r->allocations >= 0) snprintf(allocs, sizeof(allocs), "%lld", (long long)r->allocations);
      printf("%-22s %-16s %-13s %-9s %-7s %-8s %-8lld %s%s%.60s\n", r->name, *r->address ? r->address : "-", ports,
             tf_engine_relay_state_name(r->state), allocs, r->id ? r->id : "-", (long long)r->restarts,
             !r->probe_ms ? "-" : r->probe_ok ? "ok" : "FAIL", r->probe_ms && !r->probe_ok ? ": " : "",
             r->probe_ms && !r->probe_ok && r->probe_message ? r->probe_message : "");
    }
    printf("\nturn URIs:\n");
    for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) printf("  %s\n", tf_reconcile_uri(rec, i));
    printf("\nconditions:\n");
    for (size_t i = 0; i < tf_reconcile_condition_count(rec); i++) {
      const char *type, *status, *reason, *message;
      if (tf_reconcile_condition(rec, i, &type, &status, &reason, &message, NULL) == 0)
        printf("  %-20s %-5s %s: %s\n", type, status, reason, message);
    }
    /* the event log survives the redraws: the last lines of what happened */
    for (size_t i = 0; i < nacts; i++) log_line(u, "%s", acts[i]);
    printf("\nevents:\n");
    for (size_t i = 0; i < UP_LOG; i++)
      if (u->log[(u->log_next + i) % UP_LOG]) printf("  %s\n", u->log[(u->log_next + i) % UP_LOG]);
  }
  fflush(stdout);
}

/* ---- HTTP ---- */

static enum MHD_Result http_handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                    const char *version, const char *upload, size_t *upload_size, void **ctx)
{
  (void)version, (void)upload, (void)upload_size, (void)ctx;
  up *u = cls;
  if (strcmp(method, "GET") && strcmp(method, "HEAD"))
    return tool_http_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "method not allowed\n");
  pthread_mutex_lock(&u->mu);
  char *body = NULL;
  unsigned int code = MHD_HTTP_OK;
  const char *type = "text/plain; charset=utf-8";
  if (!strcmp(url, "/healthz")) {
    int64_t quiet = up_now_ms() - u->loop_ms, limit = (int64_t)(u->probe_interval * 3000) + 20000; /* a stop waits up to 8 s */
    const char *why = stop_signals ? "stopping" : quiet > limit ? "the runtime loop is stalled" : NULL;
    for (int k = 0; k < 4 && !why; k++) why = u->unhealthy[k];
    code = why ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK;
    if (asprintf(&body, "%s\n", why ? why : "ok") < 0) body = NULL;
  } else if (!strcmp(url, "/metrics")) {
    type = "text/plain; version=0.0.4; charset=utf-8";
    body = strdup(u->metrics_text ? u->metrics_text : "");
  }
  pthread_mutex_unlock(&u->mu);
  enum MHD_Result rc = body ? tool_http_reply(conn, code, type, body)
                            : tool_http_reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
  free(body);
  return rc;
}

/* ---- the loop ---- */

/* One step: decide, act, report back. What was done is printed after the next step, which shows its effect. */
static void iterate(up *u)
{
  int64_t now = up_now_ms();
  if (tf_engine_step(u->engine, now, up_wall_ms()) < 0) {
    say("engine", "%s", tf_error_last()->message);
    return;
  }
  if (u->event_due) print_event(u, (const char *const *)u->acts, u->nacts);
  for (size_t i = 0; i < u->nacts; i++) free(u->acts[i]);
  free(u->acts);
  size_t n = tf_engine_action_count(u->engine), nprobes = 0;
  u->acts = calloc(n + 1, sizeof(char *));
  u->nacts = 0;
  uint64_t *probe_ids = calloc(n * 2 + 1, sizeof(uint64_t));
  tf_probe_set *set = NULL;
  if (!u->acts || !probe_ids || tf_probe_set_new(&set, 16) < 0) n = 0;
  for (size_t i = 0; i < n; i++) {
    const tf_engine_action *a = tf_engine_action_at(u->engine, i);
    if (a->kind <= TF_ENGINE_STOP && asprintf(&u->acts[u->nacts], "%s %s (%s)", tf_engine_action_name(a->kind),
                                              a->relay, a->reason) > 0)
      u->nacts++;
    carry_out(u, a, now, set, probe_ids, &nprobes);
  }
  run_probes(u, set, probe_ids, nprobes);
  tf_probe_set_free(set);
  free(probe_ids);
  publish(u);
  u->event_due = u->nacts || nprobes;
}

enum { O_SECRET = 256, O_ADDRESSES, O_NODES, O_STATE_DIR, O_METRICS_ADDR, O_PROBE_INTERVAL, O_JSON, O_NAME,
       O_CLI_PORT, O_TURNSERVER, O_PEER_CHECK, O_ALLOW_LOOPBACK, O_CERT, O_KEY, O_CA_FILE };

static int parse_flags(up *u, int argc, char **argv, const char **secret_file, const char **state_dir)
{
  static const struct option opts[] = {
    {"file", required_argument, NULL, 'f'},       {"secret-file", required_argument, NULL, O_SECRET},
    {"addresses", required_argument, NULL, O_ADDRESSES}, {"nodes", required_argument, NULL, O_NODES},
    {"state-dir", required_argument, NULL, O_STATE_DIR}, {"metrics-addr", required_argument, NULL, O_METRICS_ADDR},
    {"probe-interval", required_argument, NULL, O_PROBE_INTERVAL}, {"cli-port", required_argument, NULL, O_CLI_PORT},
    {"turnserver", required_argument, NULL, O_TURNSERVER}, {"name", required_argument, NULL, O_NAME},
    {"json", no_argument, NULL, O_JSON},           {"help", no_argument, NULL, 'h'},
    {"peer-check", no_argument, NULL, O_PEER_CHECK}, {"allow-loopback-peers", no_argument, NULL, O_ALLOW_LOOPBACK},
    {"cert", required_argument, NULL, O_CERT},     {"key", required_argument, NULL, O_KEY},
    {"ca-file", required_argument, NULL, O_CA_FILE},
    {NULL, 0, NULL, 0},
  };
  int opt;
  opterr = 0;
  optind = 1;
  while ((opt = getopt_long(argc, argv, ":f:h", opts, NULL)) != -1) {
    char *end = NULL;
    long port;
    switch (opt) {
    case 'h': fputs(up_usage, stdout); return 0;
    case 'f': u->pool_file = optarg; break;
    case O_SECRET: *secret_file = optarg; break;
    case O_ADDRESSES: u->addresses = optarg; break;
    case O_NODES: u->nodes_file = optarg; break;
    case O_STATE_DIR: *state_dir = optarg; break;
    case O_METRICS_ADDR: u->metrics_addr = optarg; break;
    case O_NAME: u->name = optarg; break;
    case O_JSON: u->json = 1; break;
    case O_PEER_CHECK: u->peer_check = 1; break;
    case O_ALLOW_LOOPBACK: u->allow_loopback_peers = 1; break;
    case O_CA_FILE: u->ca_file = optarg; break;
    case O_CERT:
    case O_KEY: /* coturn resolves relative names its own way: absolute paths */
      if (!(*(opt == O_CERT ? &u->cert : &u->key) = realpath(optarg, NULL)))
        return say(opt == O_CERT ? "--cert" : "--key", "%s: %s", optarg, strerror(errno)), 2;
      break;
    case O_TURNSERVER: u->turnserver = optarg; break;
    case O_PROBE_INTERVAL:
      u->probe_interval = strtod(optarg, &end);
      if (!*optarg || *end || !(u->probe_interval >= 0.1 && u->probe_interval <= 3600))
        return say("--probe-interval", "\"%s\" is not a number of seconds in 0.1-3600", optarg), 2;
      break;
    case O_CLI_PORT:
      port = strtol(optarg, &end, 10);
      if (!*optarg || *end || port < 1 || port > 65535) return say("--cli-port", "\"%s\" is not a port", optarg), 2;
      u->cli_port = (uint16_t)port;
      break;
    case ':': return say(NULL, "option \"%s\" needs a value", argv[optind - 1]), 2;
    default: return say(NULL, "unknown option \"%s\"\n%s", argv[optind - 1], up_usage), 2;
    }
  }
  if (optind < argc) return say(NULL, "unexpected argument \"%s\"", argv[optind]), 2;
  if (!u->pool_file || !*secret_file) return say(NULL, "-f POOL and --secret-file F are required\n%s", up_usage), 2;
  if (!u->addresses == !u->nodes_file) return say(NULL, "give exactly one of --addresses LIST and --nodes NODES"), 2;
  if (!u->cert != !u->key) return say("--cert/--key", "give both or neither"), 2;
  return -1;
}

/* The render options: the current secret, and the one before it while relays may still run with it. */
static tf_coturn_options coturn_options(up *u, const char *secrets[2])
{
  tf_coturn_options co = TF_COTURN_OPTIONS_INIT;
  secrets[0] = u->secret;
  secrets[1] = u->previous;
  co.secrets = secrets;
  co.secrets_count = u->previous ? 2 : 1;
  co.state_dir = u->state_dir;
  co.cli_port = u->cli_port;
  co.cli_password = u->cli_password;
  co.allow_loopback_peers = u->allow_loopback_peers; /* off by default: coturn refuses loopback peers */
  co.cert_file = u->cert;
  co.key_file = u->key;
  /* coturn's own exporter only where the build has it (Debian's 4.6.1 and 4.18 count through the CLI) */
  co.prometheus = (u->ts_build & TF_COTURN_BUILD_PROMETHEUS) ? 1 : 0;
  return co;
}

/* A rotated secret: relays re-render with (new, old) and restart one at a time; an empty or
 * missing file is reported and the running fleet kept. */
static void watch_secret(up *u)
{
  if (!file_changed(u->secret_file, &u->secret_mtime)) return;
  char *secret = NULL;
  if (tf_cred_secret_read(&secret, u->secret_file) < 0) {
    say("--secret-file", "%s: the running fleet keeps the secret it has", tf_error_last()->message);
    log_line(u, "secret file unusable: %s", tf_error_last()->message);
    set_unhealthy(u, H_SECRET, "the secret file cannot be used");
    return;
  }
  if (!strcmp(secret, u->secret)) {
    tf_secret_free(secret);
    set_unhealthy(u, H_SECRET, NULL);
    return;
  }
  char *old_previous = u->previous;
  u->previous = u->secret;
  u->secret = secret;
  const char *secrets[2];
  tf_coturn_options co = coturn_options(u, secrets);
  if (tf_engine_set_coturn_options(u->engine, &co) < 0) { /* refused: back to what runs */
    say("--secret-file", "refused: %s", tf_error_last()->message);
    u->secret = u->previous;
    u->previous = old_previous;
    tf_secret_free(secret);
    set_unhealthy(u, H_SECRET, "the rotated secret was refused");
    return;
  }
  tf_secret_free(old_previous);
  set_unhealthy(u, H_SECRET, NULL);
  log_line(u, "secret rotated: relays restart one at a time");
}

/* A changed --nodes file: a valid inventory the engine accepts replaces the running one. */
static void watch_nodes(up *u)
{
  if (!u->nodes_file || !file_changed(u->nodes_file, &u->nodes_mtime)) return;
  tf_nodes *nodes = load_nodes(u, tf_engine_pool(u->engine));
  if (!nodes || tf_engine_set_nodes(u->engine, nodes) < 0) {
    if (nodes) say(u->nodes_file, "refused: %s", tf_error_last()->message);
    say(u->nodes_file, "not applied: the running fleet is left as it is");
    set_unhealthy(u, H_NODES, "the last nodes edit was refused");
    return;
  }
  set_unhealthy(u, H_NODES, NULL);
}

/* Everything before the loop; @return -1 to go on, else the exit code. */
static int start(up *u, const char *secret_file, const char *state_dir)
{
  tf_pool *pool = NULL;
  tf_nodes *nodes = NULL;
  if (detect_turnserver(u) < 0) return 2;
  u->secret_file = secret_file;
  if (tf_cred_secret_read(&u->secret, secret_file) < 0) return say("--secret-file", "%s", tf_error_last()->message), 2;
  if (!(pool = load_pool(u)) || !(nodes = load_nodes(u, pool)) || check_plan(pool, nodes) < 0)
    return tf_pool_free(pool), tf_nodes_free(nodes), 2;
  file_changed(u->pool_file, &u->pool_mtime);
  for (size_t l = 0; l < tf_pool_listener_count(pool) && !u->cert; l++)
    if (tf_pool_listener_protocol(pool, l) == TF_PROTOCOL_TLS || tf_pool_listener_protocol(pool, l) == TF_PROTOCOL_DTLS)
      return say("--cert/--key", "listener %s is %s: give the relays' certificate and key", tf_pool_listener_name(pool, l),
                 tf_protocol_name(tf_pool_listener_protocol(pool, l))), tf_pool_free(pool), tf_nodes_free(nodes), 2;
  if ((mkdir(state_dir, 0700) < 0 && errno != EEXIST) || !(u->state_dir = realpath(state_dir, NULL)) ||
      !(u->log_dir = tool_join(u->state_dir, "logs")) || (mkdir(u->log_dir, 0700) < 0 && errno != EEXIST))
    return say("--state-dir", "cannot create %s: %s", state_dir, strerror(errno)), tf_pool_free(pool), tf_nodes_free(nodes), 2;
  char *lock_path = tool_join(u->state_dir, "lock");
  int lock_fd = lock_path ? open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1; /* held until exit */
  free(lock_path);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) < 0)
    return say("--state-dir", "%s is in use by another turnfleet up", u->state_dir), tf_pool_free(pool), tf_nodes_free(nodes), 2;
  unsigned char rnd[16];
  if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) return tf_pool_free(pool), tf_nodes_free(nodes), 1;
  for (size_t i = 0; i < sizeof(rnd); i++) snprintf(u->cli_password + 2 * i, 3, "%02x", rnd[i]);
  explicit_bzero(rnd, sizeof(rnd));
  uint32_t v = 0;
  tf_coturn_version_parse(&v, tf_pool_coturn_version(pool));
  u->grace_ms = (tf_coturn_features(v) & TF_COTURN_GRACEFUL_SIGTERM) ? 8000 : 3000;
  const char *secrets[2];
  tf_coturn_options co = coturn_options(u, secrets);
  file_changed(u->secret_file, &u->secret_mtime);
  if (u->nodes_file) file_changed(u->nodes_file, &u->nodes_mtime);
  tf_engine_options eo = TF_ENGINE_OPTIONS_INIT;
  eo.coturn = &co;
  eo.log_dir = u->log_dir;
  eo.probe_interval_ms = (int64_t)(u->probe_interval * 1000);
  eo.publish_delay_ms = eo.probe_interval_ms; /* turn-uris is rewritten at once; readers poll it */
  if (tf_engine_new(&u->engine, pool, nodes, &eo) < 0) return say(u->pool_file, "%s", tf_error_last()->message), 2;
  char *status_path = tool_join(u->state_dir, "status.json"), *old = status_path ? tool_read_file(status_path, NULL) : NULL;
  if (old) (void)tf_engine_set_status(u->engine, old, strlen(old)); /* conditions keep their transition times */
  free(old);
  free(status_path);
  if (tf_relayctl_workers_new(&u->ctl, 8) < 0) return say("relayctl", "%s", tf_error_last()->message), 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  u->loop_ms = up_now_ms();
  if (!(u->mhd = tool_http_start(u->metrics_addr, http_handler, u)))
    return say("--metrics-addr", "cannot serve on %s", u->metrics_addr), 1;
  return -1;
}

int up_main(int argc, char **argv)
{
  up u;
  memset(&u, 0, sizeof(u));
  u.metrics_addr = "127.0.0.1:9650";
  u.probe_interval = 5;
  u.cli_port = 5766;
  u.turnserver = "turnserver";
  u.json = !isatty(STDOUT_FILENO);
  pthread_mutex_init(&u.mu, NULL);
  const char *secret_file = NULL, *state_dir = "turnfleet-state";
  int st = parse_flags(&u, argc, argv, &secret_file, &state_dir);
  if (st < 0) st = start(&u, secret_file, state_dir);
  for (sig_atomic_t seen = 0; st < 0;) {
    pthread_mutex_lock(&u.mu);
    u.loop_ms = up_now_ms();
    pthread_mutex_unlock(&u.mu);
    reap_children(&u);
    take_results(&u);
    if (stop_signals != seen) {
      (void)tf_engine_shutdown(u.engine, up_now_ms(), seen > 0); /* a second signal: stop at once */
      seen = stop_signals;
    }
    if (!seen) watch_pool(&u), watch_secret(&u), watch_nodes(&u);
    iterate(&u);
    if (tf_engine_finished(u.engine)) st = 0;
    int64_t wait = tf_engine_next_ms(u.engine) - up_now_ms();
    struct pollfd p = {tf_relayctl_workers_fd(u.ctl), POLLIN, 0};
    if (st < 0 && wait > 0) poll(&p, 1, wait > 100 ? 100 : (int)wait); /* children, signals, files: every 100 ms */
  }
  if (u.engine && tf_engine_finished(u.engine)) {
    iterate(&u); /* the final status: no relay left, not ready */
    u.event_due = 1;
    iterate(&u);
    if (!u.json) printf("turnfleet up: every relay drained and stopped\n");
  }
  if (u.mhd) MHD_stop_daemon(u.mhd);
  while (u.nchildren) stop_child(&u, u.children[0].name);
  free(u.children);
  for (size_t i = 0; i < u.nacts; i++) free(u.acts[i]);
  free(u.acts);
  tf_relayctl_workers_free(u.ctl);
  tf_engine_free(u.engine);
  tf_secret_free(u.secret);
  tf_secret_free(u.previous);
  explicit_bzero(u.cli_password, sizeof(u.cli_password));
  free(u.last_status);
  tf_free(u.metrics_text);
  for (size_t i = 0; i < UP_LOG; i++) free(u.log[i]);
  free(u.state_dir);
  free(u.cert);
  free(u.key);
  free(u.log_dir);
  pthread_mutex_destroy(&u.mu);
  return st;
}
