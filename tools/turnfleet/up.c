/* turnfleet up: the local runtime. One loop: observe (children, probes,
 * allocation counts), tf_reconcile_new(), carry out its actions, write
 * status.json / turn-uris / iceServers.json atomically, serve /metrics, print.
 * Secrets live only in the 0600 relay configs and in memory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "up.h"

#define PROG "turnfleet up"
#define MAX_FAIL_CODES 16

static const char up_usage[] =
  "usage: turnfleet up -f POOL --secret-file F [--addresses LIST | --nodes NODES] [--state-dir DIR]\n"
  "                    [--metrics-addr ADDR:PORT] [--probe-interval S] [--cli-port PORT]\n"
  "                    [--turnserver PATH] [--name NAME] [--json]\n"
  "  --addresses   this host's relay addresses: 127.0.0.11-13, 127.0.0.11,127.0.0.12, fd00::1-3\n"
  "  --state-dir   configs (0600), logs, status.json, turn-uris, iceServers.json (default ./turnfleet-state)\n"
  "  --metrics-addr  /metrics and /healthz (default 127.0.0.1:9650)\n"
  "  --probe-interval  seconds between probe rounds (default 5; fractions allowed)\n"
  "  --cli-port    first loopback CLI port, one per relay, for counting and drain (default 5766)\n"
  "  --turnserver  the coturn to run (default turnserver on PATH), or a wrapper such as\n"
  "                tools/dev/turnserver-rootfs; its --version must be the pool's coturnVersion\n";

static volatile sig_atomic_t stop_signals;

static void on_signal(int sig)
{
  (void)sig;
  stop_signals++;
}

typedef struct relay_rt {
  char *name, *identity, *config_hash, *address;
  uint16_t cli_port, metrics_port, port_start, port_end;
  pid_t pid;
  int64_t started_ms, exited_ms, restarts;
  int draining;
  int64_t draining_since_ms, allocations, probe_ms;
  int probe_ok, probe_error_code, saw_508;
  char *probe_message;
  int fail_codes[MAX_FAIL_CODES];
  int64_t fail_counts[MAX_FAIL_CODES];
  size_t nfail;
  char **uris;
  size_t nuris;
} relay_rt;

typedef struct up {
  const char *pool_file, *name, *addresses, *nodes_file, *turnserver;
  char *state_dir, *log_dir, *secret, *status_json;
  char cli_password[33];
  const char *metrics_addr;
  double probe_interval;
  uint16_t cli_port;
  int json;
  tf_pool *pool, *shutdown_pool;
  struct timespec pool_mtime;
  off_t pool_size;
  tf_nodes *nodes;
  uint32_t features;
  uint32_t ts_version, ts_build; /* the turnserver that runs: its version and TF_COTURN_BUILD_* bits */
  char ts_version_text[64];
  relay_rt *relays;
  size_t nrelays;
  int64_t next_probe_ms;
  pthread_mutex_t mu;
  char *metrics_text;
  struct MHD_Daemon *mhd;
  int lock_fd;
} up;

__attribute__((format(printf, 2, 3))) static void say(const char *what, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "%s: ", PROG);
  if (what) fprintf(stderr, "%s: ", what);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static char *join(const char *a, const char *b)
{
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", a, b);
  return p;
}

static char *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (n + 1 >= cap) {
      char *bigger = realloc(buf, cap * 2);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    if (r == 0) break;
    n += r;
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

/* Write dir/name through dir/.name.tmp + rename, so readers never see half a file. */
static int write_atomic(const char *dir, const char *name, const char *data, mode_t mode)
{
  char tmp[4096], path[4096];
  snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return -1;
  size_t len = strlen(data), off = 0;
  int ok = fchmod(fd, mode) == 0;
  while (ok && off < len) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) ok = 0;
    else off += (size_t)w;
  }
  if (close(fd) < 0) ok = 0;
  if (!ok || rename(tmp, path) < 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* ---- inventory from --addresses ---- */

/* "127.0.0.11-13,127.0.0.20,fd00::1-3": the last octet (IPv4, decimal) or
 * group (IPv6, hex) may be a range. Appends canonical texts to a cJSON array. */
static int parse_addresses(const char *list, cJSON *out)
{
  char *copy = strdup(list), *save = NULL;
  int rc = copy ? 0 : -1;
  for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && !rc; item = strtok_r(NULL, ",", &save)) {
    while (*item == ' ') item++;
    char *dash = strrchr(item, '-');
    unsigned long last = 0;
    if (dash) {
      char *end;
      int v6 = strchr(item, ':') != NULL;
      last = strtoul(dash + 1, &end, v6 ? 16 : 10);
      if (end == dash + 1 || *end) rc = -1;
      *dash = '\0';
    }
    tf_addr a;
    if (rc || tf_addr_parse(&a, item) < 0) {
      rc = -1;
      break;
    }
    unsigned long first = a.family == TF_AF_INET ? a.bytes[3] : ((unsigned long)a.bytes[14] << 8 | a.bytes[15]);
    if (!dash) last = first;
    if (last < first || last > (a.family == TF_AF_INET ? 255ul : 65535ul) || last - first > 255) {
      rc = -1;
      break;
    }
    for (unsigned long v = first; v <= last; v++) {
      if (a.family == TF_AF_INET) a.bytes[3] = (uint8_t)v;
      else a.bytes[14] = (uint8_t)(v >> 8), a.bytes[15] = (uint8_t)v;
      char text[TF_ADDR_STRLEN];
      tf_addr_format(text, sizeof(text), &a);
      cJSON_AddItemToArray(out, cJSON_CreateString(text));
    }
  }
  free(copy);
  if (!rc && cJSON_GetArraySize(out) == 0) rc = -1;
  return rc;
}

/* A NodeList with one Ready node per address, labelled with the pool's nodeSelector. */
static int nodes_from_addresses(tf_nodes **out, const char *list, const tf_pool *pool)
{
  char *pool_json = NULL;
  cJSON *addrs = cJSON_CreateArray(), *doc = NULL, *root = NULL;
  int rc = -1;
  if (!addrs || parse_addresses(list, addrs) < 0) {
    say("--addresses", "cannot parse \"%s\" (want e.g. 127.0.0.11-13,127.0.0.20 or fd00::1-3)", list);
    goto done;
  }
  if (tf_pool_to_json(&pool_json, pool) < 0 || !(doc = cJSON_Parse(pool_json))) goto done;
  const cJSON *selector = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "spec"), "nodeSelector");
  root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "apiVersion", "v1");
  cJSON_AddStringToObject(root, "kind", "List");
  cJSON *items = cJSON_AddArrayToObject(root, "items");
  int i = 0;
  const cJSON *a;
  cJSON_ArrayForEach(a, addrs)
  {
    char name[32];
    snprintf(name, sizeof(name), "local-%03d", ++i);
    cJSON *node = cJSON_CreateObject();
    cJSON_AddItemToArray(items, node);
    cJSON_AddStringToObject(node, "apiVersion", "v1");
    cJSON_AddStringToObject(node, "kind", "Node");
    cJSON *meta = cJSON_AddObjectToObject(node, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON_AddItemToObject(meta, "labels", selector ? cJSON_Duplicate(selector, 1) : cJSON_CreateObject());
    cJSON *status = cJSON_AddObjectToObject(node, "status");
    cJSON *na = cJSON_AddArrayToObject(status, "addresses");
    cJSON *ip = cJSON_CreateObject();
    cJSON_AddStringToObject(ip, "type", "InternalIP");
    cJSON_AddStringToObject(ip, "address", a->valuestring);
    cJSON_AddItemToArray(na, ip);
    cJSON *conds = cJSON_AddArrayToObject(status, "conditions");
    cJSON *ready = cJSON_CreateObject();
    cJSON_AddStringToObject(ready, "type", "Ready");
    cJSON_AddStringToObject(ready, "status", "True");
    cJSON_AddItemToArray(conds, ready);
  }
  char *text = cJSON_PrintUnformatted(root);
  if (text && tf_nodes_parse(out, text, strlen(text)) == 0) rc = 0;
  else say("--addresses", "%s", text ? tf_error_last()->message : "out of memory");
  free(text);
done:
  cJSON_Delete(root);
  cJSON_Delete(doc);
  cJSON_Delete(addrs);
  tf_free(pool_json);
  return rc;
}

/* ---- the turnserver ---- */

/* What the turnserver (or wrapper) given to --turnserver is: its version from
 * `--version`, its build from `-h` (Prometheus or not). 0, or -1 reported. */
static int detect_turnserver(up *u)
{
  char out[512];
  int n = tf_up_capture(u->turnserver, "--version", out, sizeof(out), 15000);
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
  n = help ? tf_up_capture(u->turnserver, "-h", help, size, 15000) : -1;
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
  say(u->pool_file, "%s", why);
  return 1;
}

/* ---- the pool file ---- */

/* Parse and validate; NULL with the problems reported when invalid. */
static tf_pool *load_pool(up *u, int json_report)
{
  size_t len;
  char *text = slurp(u->pool_file, &len);
  tf_pool *pool = NULL;
  tf_problems *problems = NULL;
  cJSON *report = cJSON_CreateArray();
  if (!text) {
    say(u->pool_file, "cannot read: %s", strerror(errno));
    cJSON_AddItemToArray(report, cJSON_CreateString("cannot read the file"));
  } else if (tf_pool_parse(&pool, text, len, TF_FORMAT_AUTO) < 0 ||
             (u->name && tf_pool_set_name(pool, u->name) < 0)) {
    say(u->pool_file, "%s", tf_error_last()->message);
    cJSON_AddItemToArray(report, cJSON_CreateString(tf_error_last()->message));
    tf_pool_free(pool);
    pool = NULL;
  } else if (tf_pool_validate(&problems, pool) < 0) {
    for (size_t i = 0; i < tf_problems_count(problems); i++) {
      char line[1024];
      snprintf(line, sizeof(line), "%s: %s", tf_problems_path(problems, i), tf_problems_message(problems, i));
      say(u->pool_file, "%s", line);
      cJSON_AddItemToArray(report, cJSON_CreateString(line));
    }
    if (!tf_problems_count(problems)) say(u->pool_file, "%s", tf_error_last()->message);
    tf_pool_free(pool);
    pool = NULL;
  }
  char why[512];
  if (pool && coturn_mismatch(u, pool, why, sizeof(why))) {
    cJSON_AddItemToArray(report, cJSON_CreateString(why));
    tf_pool_free(pool);
    pool = NULL;
  }
  if (!pool && json_report && u->json) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "event", "poolInvalid");
    cJSON_AddStringToObject(ev, "file", u->pool_file);
    cJSON_AddItemToObject(ev, "problems", report);
    report = NULL;
    char *line = cJSON_PrintUnformatted(ev);
    if (line) printf("%s\n", line);
    fflush(stdout);
    free(line);
    cJSON_Delete(ev);
  }
  cJSON_Delete(report);
  tf_problems_free(problems);
  free(text);
  return pool;
}

static int pool_changed(up *u)
{
  struct stat st;
  if (stat(u->pool_file, &st) < 0) return 0;
  if (st.st_mtim.tv_sec == u->pool_mtime.tv_sec && st.st_mtim.tv_nsec == u->pool_mtime.tv_nsec &&
      st.st_size == u->pool_size)
    return 0;
  u->pool_mtime = st.st_mtim;
  u->pool_size = st.st_size;
  return 1;
}

static int load_nodes(up *u, const tf_pool *pool, tf_nodes **out)
{
  if (u->addresses) return nodes_from_addresses(out, u->addresses, pool);
  size_t len;
  char *text = slurp(u->nodes_file, &len);
  if (!text) {
    say(u->nodes_file, "cannot read: %s", strerror(errno));
    return -1;
  }
  int rc = tf_nodes_parse(out, text, len) < 0 ? -1 : 0;
  if (rc) say(u->nodes_file, "%s", tf_error_last()->message);
  free(text);
  return rc;
}

/* Re-read a changed pool file: a valid one replaces the current pool; an invalid one changes nothing. */
static void watch_pool(up *u)
{
  if (!pool_changed(u)) return;
  tf_pool *pool = load_pool(u, 1);
  if (!pool) {
    say(u->pool_file, "invalid: the running fleet is left as it is");
    return;
  }
  tf_nodes *nodes = NULL;
  if (u->addresses && load_nodes(u, pool, &nodes) < 0) {
    tf_pool_free(pool);
    return;
  }
  tf_pool_free(u->pool);
  u->pool = pool;
  if (nodes) {
    tf_nodes_free(u->nodes);
    u->nodes = nodes;
  }
  u->features = 0;
  uint32_t v;
  if (tf_coturn_version_parse(&v, tf_pool_coturn_version(pool)) == 0) u->features = tf_coturn_features(v);
  if (!u->json) {
    say(u->pool_file, "reloaded (replicas %lld)", (long long)tf_pool_replicas(pool));
  } else {
    printf("{\"event\":\"poolReloaded\",\"replicas\":%lld,\"drainTimeoutMs\":%lld}\n",
           (long long)tf_pool_replicas(pool), (long long)tf_pool_drain_timeout_ms(pool));
    fflush(stdout);
  }
}

/* The pool with replicas 0: what SIGINT/SIGTERM reconciles to, so the core drains every relay. */
static tf_pool *pool_scaled_to_zero(const tf_pool *pool)
{
  char *json = NULL;
  tf_pool *zero = NULL;
  if (tf_pool_to_json(&json, pool) < 0) return NULL;
  cJSON *doc = cJSON_Parse(json);
  cJSON *spec = cJSON_GetObjectItemCaseSensitive(doc, "spec");
  if (spec) cJSON_ReplaceItemInObjectCaseSensitive(spec, "replicas", cJSON_CreateNumber(0));
  char *text = spec ? cJSON_PrintUnformatted(doc) : NULL;
  if (text && tf_pool_parse(&zero, text, strlen(text), TF_FORMAT_JSON) < 0) zero = NULL;
  if (zero && *tf_pool_name(pool) && tf_pool_set_name(zero, tf_pool_name(pool)) < 0) {
    tf_pool_free(zero);
    zero = NULL;
  }
  free(text);
  cJSON_Delete(doc);
  tf_free(json);
  return zero;
}

/* ---- relays ---- */

static relay_rt *find_relay(up *u, const char *name)
{
  for (size_t i = 0; i < u->nrelays; i++)
    if (!strcmp(u->relays[i].name, name)) return &u->relays[i];
  return NULL;
}

static void relay_clear(relay_rt *r)
{
  free(r->name);
  free(r->identity);
  free(r->config_hash);
  free(r->address);
  free(r->probe_message);
  for (size_t j = 0; j < r->nuris; j++) free(r->uris[j]);
  free(r->uris);
  memset(r, 0, sizeof(*r));
}

static void relay_forget(up *u, relay_rt *r)
{
  size_t i = (size_t)(r - u->relays);
  relay_clear(r);
  memmove(&u->relays[i], &u->relays[i + 1], (u->nrelays - i - 1) * sizeof(*r));
  u->nrelays--;
}

static relay_rt *relay_add(up *u, const char *name)
{
  relay_rt *grown = realloc(u->relays, (u->nrelays + 1) * sizeof(*grown));
  if (!grown) return NULL;
  u->relays = grown;
  relay_rt *r = &u->relays[u->nrelays++];
  memset(r, 0, sizeof(*r));
  r->name = strdup(name);
  r->allocations = -1;
  return r;
}

static int grace_ms(const up *u) { return (u->features & TF_COTURN_GRACEFUL_SIGTERM) ? 8000 : 3000; }

static void relay_paths(const up *u, const char *name, char *conf, char *out, size_t size)
{
  snprintf(conf, size, "%s/%s/turnserver.conf", u->state_dir, name);
  snprintf(out, size, "%s/%s.out", u->log_dir, name);
}

static void relay_kill(up *u, relay_rt *r)
{
  if (r->pid > 0) tf_up_stop(r->pid, grace_ms(u));
  r->pid = 0;
}

/* START (or the second half of RESTART): config 0600, then turnserver -c. */
static int relay_start(up *u, const tf_reconcile *rec, size_t i, int64_t now)
{
  const char *name = tf_reconcile_relay_name(rec, i);
  const char *config = tf_reconcile_relay_config(rec, i);
  const tf_relay *planned = tf_plan_find(tf_reconcile_plan(rec), name);
  if (!config || !planned) return -1;
  relay_rt *r = find_relay(u, name);
  if (r && r->pid > 0) relay_kill(u, r);
  if (!r && !(r = relay_add(u, name))) return -1;
  else if (r->exited_ms && !r->draining) r->restarts++;
  char dir[4096], conf[4096], out[4096];
  snprintf(dir, sizeof(dir), "%s/%s", u->state_dir, name);
  relay_paths(u, name, conf, out, sizeof(conf));
  if (mkdir(dir, 0700) < 0 && errno != EEXIST) return -1;
  if (write_atomic(dir, "turnserver.conf", config, 0600) < 0) {
    say(name, "cannot write its config: %s", strerror(errno));
    return -1;
  }
  free(r->identity);
  free(r->config_hash);
  free(r->address);
  r->identity = xstrdup(tf_relay_identity(planned));
  r->config_hash = xstrdup(tf_reconcile_relay_config_hash(rec, i));
  tf_addr a;
  char text[TF_ADDR_STRLEN] = "";
  if (tf_relay_address(&a, planned, 0) == 0) tf_addr_format(text, sizeof(text), &a);
  r->address = strdup(text);
  tf_port_range range = tf_relay_port_range(planned);
  r->port_start = range.start;
  r->port_end = range.end;
  r->cli_port = tf_reconcile_relay_cli_port(rec, i);
  r->metrics_port = tf_reconcile_relay_metrics_port(rec, i);
  for (size_t j = 0; j < r->nuris; j++) free(r->uris[j]);
  free(r->uris);
  r->nuris = tf_reconcile_relay_uri_count(rec, i);
  r->uris = calloc(r->nuris ? r->nuris : 1, sizeof(char *));
  for (size_t j = 0; r->uris && j < r->nuris; j++) r->uris[j] = xstrdup(tf_reconcile_relay_uri(rec, i, j));
  if (!r->uris) r->nuris = 0;
  r->draining = 0;
  r->draining_since_ms = 0;
  r->allocations = -1;
  r->probe_ms = 0;
  r->probe_ok = 0;
  r->probe_error_code = 0;
  r->saw_508 = 0;
  free(r->probe_message);
  r->probe_message = NULL;
  r->started_ms = now;
  r->pid = tf_up_spawn(u->turnserver, conf, out);
  if (r->pid < 0) {
    say(name, "cannot start %s: %s", u->turnserver, strerror(errno));
    r->pid = 0;
    r->exited_ms = now;
    return -1;
  }
  return 0;
}

static void relay_drain(up *u, relay_rt *r, int64_t now)
{
  if (r->pid > 0) {
    if (u->features & TF_COTURN_DRAIN) {
      kill(r->pid, SIGUSR1); /* >= 4.6.3 only: it kills older versions */
    } else if (!r->cli_port || tf_up_cli_refuse_allocations(r->cli_port, u->cli_password, 2000) < 0) {
      say(r->name, "could not refuse new allocations through its CLI; draining by its URI only");
    }
  }
  r->draining = 1;
  r->draining_since_ms = now;
}

static void relay_stop(up *u, relay_rt *r)
{
  char conf[4096], out[4096];
  relay_paths(u, r->name, conf, out, sizeof(conf));
  relay_kill(u, r);
  unlink(conf); /* the only copy of the secret on disk goes with the relay */
  relay_forget(u, r);
}

/* A child that died: remember when, so the core restarts it after its backoff. */
static void reap_children(up *u, int64_t now)
{
  int status;
  pid_t pid;
  while ((pid = tf_up_reap(&status)) > 0) {
    for (size_t i = 0; i < u->nrelays; i++) {
      if (u->relays[i].pid != pid) continue;
      relay_rt *r = &u->relays[i];
      r->pid = 0;
      r->exited_ms = now;
      if (!u->json)
        say(r->name, "turnserver %d exited (%s %d)", (int)pid, WIFSIGNALED(status) ? "signal" : "status",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
  }
}

/* ---- probes and counts ---- */

static void probe_round(up *u)
{
  tf_probe_set *set = NULL;
  relay_rt **probed = calloc(u->nrelays ? u->nrelays : 1, sizeof(*probed));
  size_t n = 0;
  if (!probed || tf_probe_set_new(&set, 16) < 0) {
    free(probed);
    return;
  }
  int timeout = (int)(u->probe_interval * 1000);
  timeout = timeout < 1000 ? 1000 : timeout > 4000 ? 4000 : timeout;
  for (size_t i = 0; i < u->nrelays; i++) {
    relay_rt *r = &u->relays[i];
    if (r->pid <= 0 || r->draining || !r->nuris) continue;
    tf_probe_options po = TF_PROBE_OPTIONS_INIT;
    po.uri = r->uris[0];
    po.secret = u->secret;
    po.expect_address = r->address;
    po.expect_port_start = r->port_start;
    po.expect_port_end = r->port_end;
    po.timeout_ms = timeout;
    po.rto_ms = 200;
    if (tf_probe_set_add(set, &po) == 0) probed[n++] = r;
  }
  if (n) (void)tf_probe_set_run(set, NULL, NULL);
  int64_t now = tf_up_now_ms();
  for (size_t i = 0; i < n; i++) {
    const tf_probe_result *res = tf_probe_set_result(set, i);
    relay_rt *r = probed[i];
    if (!res) continue;
    r->probe_ms = now;
    r->probe_ok = tf_probe_result_ok(res);
    r->probe_error_code = tf_probe_result_error_code(res);
    free(r->probe_message);
    r->probe_message = xstrdup(tf_probe_result_message(res));
    if (r->probe_ok) r->saw_508 = 0;
    if (r->probe_error_code == 508) r->saw_508 = 1;
    if (r->probe_error_code && tf_probe_result_stage(res) == TF_PROBE_STAGE_ALLOCATE) {
      size_t k = 0;
      while (k < r->nfail && r->fail_codes[k] != r->probe_error_code) k++;
      if (k < MAX_FAIL_CODES) {
        if (k == r->nfail) r->fail_codes[r->nfail++] = r->probe_error_code, r->fail_counts[k] = 0;
        r->fail_counts[k]++;
      }
    }
  }
  tf_probe_set_free(set);
  free(probed);
}

static void count_allocations(up *u)
{
  for (size_t i = 0; i < u->nrelays; i++) {
    relay_rt *r = &u->relays[i];
    int64_t n = -1;
    int rc = -1;
    if (r->pid <= 0) {
      r->allocations = -1;
      continue;
    }
    if (r->metrics_port && (u->features & TF_COTURN_ALLOCATIONS_BY_TYPE))
      rc = tf_up_metrics_allocations(&n, r->address, r->metrics_port, 1000);
    else if (r->cli_port)
      rc = tf_up_cli_allocations(&n, r->cli_port, u->cli_password, 1000);
    r->allocations = rc == 0 ? n : -1;
  }
}

/* ---- metrics over HTTP ---- */

static enum MHD_Result http_handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                    const char *version, const char *upload, size_t *upload_size, void **ctx)
{
  (void)version;
  (void)upload;
  (void)upload_size;
  (void)ctx;
  up *u = cls;
  const char *type = "text/plain; charset=utf-8";
  unsigned int code = MHD_HTTP_OK;
  char *body = NULL;
  if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
    code = MHD_HTTP_METHOD_NOT_ALLOWED;
    body = strdup("method not allowed\n");
  } else if (!strcmp(url, "/healthz")) {
    body = strdup(stop_signals ? "stopping\n" : "ok\n");
    if (stop_signals) code = MHD_HTTP_SERVICE_UNAVAILABLE;
  } else if (!strcmp(url, "/metrics")) {
    type = "text/plain; version=0.0.4; charset=utf-8";
    pthread_mutex_lock(&u->mu);
    body = strdup(u->metrics_text ? u->metrics_text : "");
    pthread_mutex_unlock(&u->mu);
  } else {
    code = MHD_HTTP_NOT_FOUND;
    body = strdup("not found\n");
  }
  if (!body) return MHD_NO;
  struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", type);
  enum MHD_Result rc = MHD_queue_response(conn, code, resp);
  MHD_destroy_response(resp);
  return rc;
}

static int start_http(up *u)
{
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof(ss));
  char host[128];
  const char *colon = strrchr(u->metrics_addr, ':');
  if (!colon || (size_t)(colon - u->metrics_addr) >= sizeof(host)) return -1;
  memcpy(host, u->metrics_addr, (size_t)(colon - u->metrics_addr));
  host[colon - u->metrics_addr] = '\0';
  char *h = host, *end;
  if (h[0] == '[' && h[strlen(h) - 1] == ']') h[strlen(h) - 1] = '\0', h++;
  long port = strtol(colon + 1, &end, 10);
  if (*end || end == colon + 1 || port < 0 || port > 65535) return -1;
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD;
  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
  } else if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    flags |= MHD_USE_IPv6;
  } else {
    return -1;
  }
  u->mhd = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, http_handler, u, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_END);
  return u->mhd ? 0 : -1;
}

/* ---- output ---- */

static const char *relay_state(unsigned int flags, const relay_rt *r)
{
  if (flags & TF_RELAY_DRAINING) return "draining";
  if (flags & TF_RELAY_READY) return "ready";
  if (flags & TF_RELAY_WAITING) return "waiting";
  if (r && r->pid > 0) return "starting";
  return (flags & TF_RELAY_PLANNED) ? "down" : "leaving";
}

static void print_iteration(up *u, const tf_reconcile *rec, int64_t now, const char *const *acts, size_t nacts)
{
  size_t nr = tf_reconcile_relay_count(rec), ready = 0;
  for (size_t i = 0; i < nr; i++)
    if (tf_reconcile_relay_flags(rec, i) & TF_RELAY_READY) ready++;
  if (u->json) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "event", "reconcile");
    cJSON_AddNumberToObject(ev, "timeMs", (double)now);
    cJSON_AddStringToObject(ev, "pool", tf_pool_name(u->pool));
    cJSON_AddBoolToObject(ev, "stopping", stop_signals > 0);
    cJSON_AddNumberToObject(ev, "readyRelays", (double)ready);
    cJSON *a = cJSON_AddArrayToObject(ev, "actions");
    for (size_t i = 0; i < nacts; i++) cJSON_AddItemToArray(a, cJSON_CreateString(acts[i]));
    cJSON *rel = cJSON_AddArrayToObject(ev, "relays");
    for (size_t i = 0; i < nr; i++) {
      unsigned int fl = tf_reconcile_relay_flags(rec, i);
      relay_rt *r = find_relay(u, tf_reconcile_relay_name(rec, i));
      cJSON *o = cJSON_CreateObject();
      cJSON_AddItemToArray(rel, o);
      cJSON_AddStringToObject(o, "name", tf_reconcile_relay_name(rec, i));
      cJSON_AddStringToObject(o, "state", relay_state(fl, r));
      cJSON_AddBoolToObject(o, "published", (fl & TF_RELAY_PUBLISHED) != 0);
      cJSON_AddNumberToObject(o, "pid", r ? (double)r->pid : 0);
      cJSON_AddNumberToObject(o, "restarts", r ? (double)r->restarts : 0);
      if (r && r->allocations >= 0) cJSON_AddNumberToObject(o, "allocations", (double)r->allocations);
      else cJSON_AddNullToObject(o, "allocations");
    }
    cJSON *uris = cJSON_AddArrayToObject(ev, "uris");
    for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++)
      cJSON_AddItemToArray(uris, cJSON_CreateString(tf_reconcile_uri(rec, i)));
    char *line = cJSON_PrintUnformatted(ev);
    if (line) printf("%s\n", line);
    free(line);
    cJSON_Delete(ev);
  } else {
    time_t t = (time_t)(now / 1000);
    struct tm tm;
    char when[32];
    localtime_r(&t, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    printf("\033[H\033[J");
    printf("turnfleet up  pool %s/%s  coturn %s  %s  ready %zu/%lld  uris %zu%s\n\n", tf_pool_namespace(u->pool),
           tf_pool_name(u->pool), tf_pool_coturn_version(u->pool), when, ready, (long long)tf_pool_replicas(u->pool),
           tf_reconcile_uri_count(rec), stop_signals ? "  STOPPING (draining)" : "");
    printf("%-22s %-16s %-13s %-9s %-7s %-8s %-8s %s\n", "RELAY", "ADDRESS", "PORTS", "STATE", "ALLOCS", "PID",
           "RESTARTS", "LAST PROBE");
    for (size_t i = 0; i < nr; i++) {
      unsigned int fl = tf_reconcile_relay_flags(rec, i);
      relay_rt *r = find_relay(u, tf_reconcile_relay_name(rec, i));
      char ports[32] = "-", allocs[32] = "-", probe[96] = "-";
      if (r && r->port_start) snprintf(ports, sizeof(ports), "%u-%u", r->port_start, r->port_end);
      if (r && r->allocations >= 0) snprintf(allocs, sizeof(allocs), "%lld", (long long)r->allocations);
      if (r && r->probe_ms)
        snprintf(probe, sizeof(probe), "%s%s%.60s", r->probe_ok ? "ok" : "FAIL",
                 r->probe_ok ? "" : ": ", r->probe_ok ? "" : (r->probe_message ? r->probe_message : ""));
      printf("%-22s %-16s %-13s %-9s %-7s %-8d %-8lld %s\n", tf_reconcile_relay_name(rec, i),
             r && r->address ? r->address : "-", ports, relay_state(fl, r), allocs, r ? (int)r->pid : 0,
             r ? (long long)r->restarts : 0LL, probe);
    }
    printf("\nturn URIs:\n");
    for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) printf("  %s\n", tf_reconcile_uri(rec, i));
    for (size_t i = 0; i < nacts; i++) printf("%s %s\n", i ? "      " : "acted:", acts[i]);
  }
  fflush(stdout);
}

/* ---- one iteration ---- */

static tf_observed *observe(up *u)
{
  tf_observed *obs = NULL;
  if (tf_observed_new(&obs) < 0) return NULL;
  for (size_t i = 0; i < u->nrelays; i++) {
    relay_rt *r = &u->relays[i];
    tf_relay_observation o = TF_RELAY_OBSERVATION_INIT;
    o.name = r->name;
    o.identity = r->identity;
    o.config_hash = r->config_hash;
    o.cli_port = r->cli_port;
    o.running = r->pid > 0;
    o.started_ms = r->started_ms;
    o.exited_ms = r->exited_ms;
    o.restarts = r->restarts;
    o.draining = r->draining;
    o.draining_since_ms = r->draining_since_ms;
    o.allocations = r->allocations;
    o.probe_ms = r->probe_ms;
    o.probe_ok = r->probe_ok;
    o.probe_error_code = r->probe_error_code;
    o.probe_message = r->probe_message;
    o.saw_508 = r->saw_508;
    o.failure_codes = r->fail_codes;
    o.failure_counts = r->fail_counts;
    o.failure_count = r->nfail;
    o.uris = (const char *const *)r->uris;
    o.uri_count = r->nuris;
    if (tf_observed_add_relay(obs, &o) < 0) say(r->name, "%s", tf_error_last()->message);
  }
  if (u->status_json) (void)tf_observed_set_status(obs, u->status_json, strlen(u->status_json));
  return obs;
}

static void publish(up *u, const tf_reconcile *rec)
{
  char *status = NULL, *ice = NULL;
  if (tf_reconcile_status_json(&status, rec) == 0) {
    size_t n = strlen(status);
    char *with_nl = malloc(n + 2);
    if (with_nl) {
      memcpy(with_nl, status, n);
      memcpy(with_nl + n, "\n", 2);
      if (write_atomic(u->state_dir, "status.json", with_nl, 0644) < 0) say("status.json", "%s", strerror(errno));
      free(with_nl);
    }
    free(u->status_json);
    u->status_json = strdup(status);
    tf_free(status);
  }
  size_t cap = 1;
  for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) cap += strlen(tf_reconcile_uri(rec, i)) + 1;
  char *uris = malloc(cap), *p = uris;
  if (uris) {
    *p = '\0';
    for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) p += sprintf(p, "%s\n", tf_reconcile_uri(rec, i));
    if (write_atomic(u->state_dir, "turn-uris", uris, 0644) < 0) say("turn-uris", "%s", strerror(errno));
    free(uris);
  }
  if (tf_reconcile_ice_servers_json(&ice, rec) == 0) {
    size_t n = strlen(ice);
    char *with_nl = malloc(n + 2);
    if (with_nl) {
      memcpy(with_nl, ice, n);
      memcpy(with_nl + n, "\n", 2);
      if (write_atomic(u->state_dir, "iceServers.json", with_nl, 0644) < 0) say("iceServers.json", "%s", strerror(errno));
      free(with_nl);
    }
    tf_free(ice);
  }
  tf_metrics *m = NULL;
  char *text = NULL;
  if (tf_metrics_new(&m) == 0 && tf_reconcile_metrics(m, rec) == 0 && tf_metrics_to_text(&text, m) == 0) {
    pthread_mutex_lock(&u->mu);
    tf_free(u->metrics_text);
    u->metrics_text = text;
    pthread_mutex_unlock(&u->mu);
  }
  tf_metrics_free(m);
}

/* Returns the core's next deadline (0: none), or -1 when the reconcile failed. */
static int64_t iterate(up *u, const tf_coturn_options *copts)
{
  int64_t now = tf_up_now_ms();
  tf_observed *obs = observe(u);
  tf_reconcile_options ro = TF_RECONCILE_OPTIONS_INIT;
  ro.coturn = copts;
  ro.log_dir = u->log_dir;
  tf_reconcile *rec = NULL;
  const tf_pool *pool = u->shutdown_pool ? u->shutdown_pool : u->pool;
  if (!obs || tf_reconcile_new(&rec, pool, u->nodes, obs, now, &ro) < 0) {
    say("reconcile", "%s", tf_error_last()->message);
    tf_observed_free(obs);
    return -1;
  }
  tf_observed_free(obs);
  size_t nacts = tf_reconcile_action_count(rec);
  char **acts = calloc(nacts ? nacts : 1, sizeof(char *));
  for (size_t k = 0; k < nacts; k++) {
    tf_action action;
    size_t i;
    const char *reason;
    if (tf_reconcile_action(rec, k, &action, &i, &reason) < 0) continue;
    const char *name = tf_reconcile_relay_name(rec, i);
    relay_rt *r = find_relay(u, name);
    char line[256];
    snprintf(line, sizeof(line), "%s %s (%s)", tf_action_name(action), name, reason);
    if (acts) acts[k] = strdup(line);
    switch (action) {
    case TF_ACTION_STOP:
      if (r) relay_stop(u, r);
      break;
    case TF_ACTION_DRAIN:
      if (r) relay_drain(u, r, now);
      break;
    case TF_ACTION_RESTART:
      if (r) relay_kill(u, r);
      /* fall through */
    case TF_ACTION_START:
      (void)relay_start(u, rec, i, now);
      break;
    }
  }
  publish(u, rec);
  print_iteration(u, rec, now, (const char *const *)acts, acts ? nacts : 0);
  for (size_t k = 0; acts && k < nacts; k++) free(acts[k]);
  free(acts);
  int64_t next = tf_reconcile_next_ms(rec);
  tf_reconcile_free(rec);
  return next;
}

static void sleep_until(up *u, int64_t deadline, sig_atomic_t seen_signals)
{
  while (tf_up_now_ms() < deadline && stop_signals == seen_signals) {
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG | __WNOTHREAD);
    if (pid > 0) {
      /* put it back in our books and wake up: a relay died */
      for (size_t i = 0; i < u->nrelays; i++)
        if (u->relays[i].pid == pid) {
          u->relays[i].pid = 0;
          u->relays[i].exited_ms = tf_up_now_ms();
          if (!u->json) say(u->relays[i].name, "turnserver %d exited", (int)pid);
        }
      return;
    }
  }
}

/* ---- main ---- */

enum { O_SECRET = 256, O_ADDRESSES, O_NODES, O_STATE_DIR, O_METRICS_ADDR, O_PROBE_INTERVAL, O_JSON, O_NAME,
       O_CLI_PORT, O_TURNSERVER };

static char *absolute_dir(const char *path)
{
  if (mkdir(path, 0700) < 0 && errno != EEXIST) return NULL;
  return realpath(path, NULL);
}

int tf_up_main(int argc, char **argv)
{
  static const struct option opts[] = {
    {"file", required_argument, NULL, 'f'},
    {"secret-file", required_argument, NULL, O_SECRET},
    {"addresses", required_argument, NULL, O_ADDRESSES},
    {"nodes", required_argument, NULL, O_NODES},
    {"state-dir", required_argument, NULL, O_STATE_DIR},
    {"metrics-addr", required_argument, NULL, O_METRICS_ADDR},
    {"probe-interval", required_argument, NULL, O_PROBE_INTERVAL},
    {"cli-port", required_argument, NULL, O_CLI_PORT},
    {"turnserver", required_argument, NULL, O_TURNSERVER},
    {"name", required_argument, NULL, O_NAME},
    {"json", no_argument, NULL, O_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
  };
  up u;
  memset(&u, 0, sizeof(u));
  u.metrics_addr = "127.0.0.1:9650";
  u.probe_interval = 5;
  u.cli_port = 5766;
  u.turnserver = "turnserver";
  u.lock_fd = -1;
  u.json = !isatty(STDOUT_FILENO);
  const char *secret_file = NULL, *state_dir = "turnfleet-state";
  int opt;
  opterr = 0;
  optind = 1;
  while ((opt = getopt_long(argc, argv, ":f:h", opts, NULL)) != -1) {
    char *end = NULL;
    switch (opt) {
    case 'h': fputs(up_usage, stdout); return 0;
    case 'f': u.pool_file = optarg; break;
    case O_SECRET: secret_file = optarg; break;
    case O_ADDRESSES: u.addresses = optarg; break;
    case O_NODES: u.nodes_file = optarg; break;
    case O_STATE_DIR: state_dir = optarg; break;
    case O_METRICS_ADDR: u.metrics_addr = optarg; break;
    case O_NAME: u.name = optarg; break;
    case O_JSON: u.json = 1; break;
    case O_TURNSERVER: u.turnserver = optarg; break;
    case O_PROBE_INTERVAL:
      u.probe_interval = strtod(optarg, &end);
      if (!*optarg || *end || !(u.probe_interval >= 0.1 && u.probe_interval <= 3600)) {
        say("--probe-interval", "\"%s\" is not a number of seconds in 0.1-3600", optarg);
        return 2;
      }
      break;
    case O_CLI_PORT: {
      long p = strtol(optarg, &end, 10);
      if (!*optarg || *end || p < 1 || p > 65535) {
        say("--cli-port", "\"%s\" is not a port", optarg);
        return 2;
      }
      u.cli_port = (uint16_t)p;
      break;
    }
    case ':': say(NULL, "option \"%s\" needs a value", argv[optind - 1]); return 2;
    default: say(NULL, "unknown option \"%s\"\n%s", argv[optind - 1], up_usage); return 2;
    }
  }
  if (optind < argc) {
    say(NULL, "unexpected argument \"%s\"", argv[optind]);
    return 2;
  }
  if (!u.pool_file || !secret_file) {
    say(NULL, "-f POOL and --secret-file F are required\n%s", up_usage);
    return 2;
  }
  if (!u.addresses == !u.nodes_file) {
    say(NULL, "give exactly one of --addresses LIST and --nodes NODES");
    return 2;
  }

  int st = 2;
  tf_coturn_options copts = TF_COTURN_OPTIONS_INIT;
  pthread_mutex_init(&u.mu, NULL);
  if (tf_cred_secret_read(&u.secret, secret_file) < 0) {
    say("--secret-file", "%s", tf_error_last()->message);
    goto done;
  }
  if (detect_turnserver(&u) < 0) goto done;
  if (!(u.pool = load_pool(&u, 0))) goto done;
  pool_changed(&u); /* remember its mtime */
  uint32_t v;
  if (tf_coturn_version_parse(&v, tf_pool_coturn_version(u.pool)) == 0) u.features = tf_coturn_features(v);
  if (load_nodes(&u, u.pool, &u.nodes) < 0) goto done;
  if (!(u.state_dir = absolute_dir(state_dir))) {
    say("--state-dir", "cannot create %s: %s", state_dir, strerror(errno));
    goto done;
  }
  chmod(u.state_dir, 0700);
  u.log_dir = join(u.state_dir, "logs");
  if (!u.log_dir || (mkdir(u.log_dir, 0700) < 0 && errno != EEXIST)) goto done;
  char *lock_path = join(u.state_dir, "lock");
  u.lock_fd = lock_path ? open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
  free(lock_path);
  if (u.lock_fd < 0 || flock(u.lock_fd, LOCK_EX | LOCK_NB) < 0) {
    say("--state-dir", "%s is in use by another turnfleet up", u.state_dir);
    goto done;
  }
  unsigned char rnd[16];
  if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) goto done;
  for (size_t i = 0; i < sizeof(rnd); i++) snprintf(u.cli_password + 2 * i, 3, "%02x", rnd[i]);
  explicit_bzero(rnd, sizeof(rnd));
  {
    char *status_path = join(u.state_dir, "status.json");
    u.status_json = status_path ? slurp(status_path, NULL) : NULL; /* conditions keep their transition times */
    free(status_path);
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (start_http(&u) < 0) {
    say("--metrics-addr", "cannot serve on %s", u.metrics_addr);
    st = 1;
    goto done;
  }

  const char *secrets[1] = {u.secret};
  copts.secrets = secrets;
  copts.secrets_count = 1;
  copts.state_dir = u.state_dir;
  copts.cli_port = u.cli_port;
  copts.cli_password = u.cli_password;
  /* coturn's own exporter only where the build has it (Debian's 4.6.1 and 4.18 count through the CLI) */
  copts.prometheus = (u.ts_build & TF_COTURN_BUILD_PROMETHEUS) ? 1 : 0;

  st = 0;
  sig_atomic_t seen = 0;
  int64_t stop_deadline = 0;
  for (;;) {
    int64_t now = tf_up_now_ms();
    reap_children(&u, now);
    if (stop_signals != seen) {
      seen = stop_signals;
      if (!u.shutdown_pool) {
        u.shutdown_pool = pool_scaled_to_zero(u.pool);
        /* bounded: drainTimeout, plus time to stop the processes */
        stop_deadline = now + tf_pool_drain_timeout_ms(u.pool) + 30000;
        if (!u.shutdown_pool) break;
      } else {
        break; /* a second signal: stop at once */
      }
    }
    if (!u.shutdown_pool) watch_pool(&u);
    if (now >= u.next_probe_ms) {
      count_allocations(&u); /* first: the last round's probe allocations have had an interval to close */
      probe_round(&u);
      u.next_probe_ms = tf_up_now_ms() + (int64_t)(u.probe_interval * 1000);
    }
    int64_t next = iterate(&u, &copts);
    if (u.shutdown_pool && u.nrelays == 0) break;
    if (u.shutdown_pool && tf_up_now_ms() > stop_deadline) break;
    int64_t wake = u.next_probe_ms;
    if (next > 0 && next < wake) wake = next;
    sleep_until(&u, wake, seen);
  }
  for (size_t i = u.nrelays; i-- > 0;) relay_stop(&u, &u.relays[i]);
  if (u.shutdown_pool) (void)iterate(&u, &copts); /* the final status: no relay left */
  if (u.shutdown_pool && !u.json) printf("turnfleet up: every relay drained and stopped\n");

done:
  if (u.mhd) MHD_stop_daemon(u.mhd);
  for (size_t i = u.nrelays; i-- > 0;) relay_stop(&u, &u.relays[i]);
  free(u.relays);
  tf_pool_free(u.pool);
  tf_pool_free(u.shutdown_pool);
  tf_nodes_free(u.nodes);
  tf_cred_secret_free(u.secret);
  explicit_bzero(u.cli_password, sizeof(u.cli_password));
  free(u.status_json);
  tf_free(u.metrics_text);
  free(u.state_dir);
  free(u.log_dir);
  if (u.lock_fd >= 0) close(u.lock_fd);
  pthread_mutex_destroy(&u.mu);
  return st;
}
