/* turnfleet agent: the relay pod's sidecar. A thin driver of relayctl:
 *  - `agent` counts the relay's allocations through coturn's CLI every
 *    interval and serves /metrics and /healthz on the relay's own address;
 *    while no stop request is there it undoes a refusal it finds (coturn <
 *    4.6.3's drain): a relay whose pod is not being deleted is never drained;
 *  - `agent prestop` (the agent container's preStop hook) drains the relay
 *    the way its coturn version can only when the coturn container's preStop
 *    asked for it (the `stopping` request beside the marker: that hook runs
 *    only for a pod being deleted, a liveness kill of the agent runs only
 *    this one), waits for zero allocations or the deadline, then writes the
 *    drained marker answering that request, which the coturn hook waits for.
 * Where the CLI is and its password come from the relay's config file only,
 * never from argv or the environment; the /metrics token comes from a file
 * too. Exit: 0 done, 1 the operation failed (prestop: the deadline passed
 * first), 2 usage or bad input. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <turnfleet.h>

#include "tool_http.h"
#include "tool_io.h"
#include "agent.h"
#include "up.h"

#define PROG "turnfleet agent"
#define EXIT_FAILED 1
#define EXIT_BAD_INPUT 2
#define AGENT_CLI_TIMEOUT_MS 2000
#define AGENT_DRAIN_TIMEOUT_MS 5000
#define AGENT_PRESTOP_POLL_MS 500
/* how long `agent prestop` waits for the coturn container's stop request: the kubelet starts every
 * container's preStop of a deleted pod at once, so it is there within moments, or never */
#define AGENT_REQUEST_WAIT_MS 10000
#define AGENT_REQUEST_NAME "stopping"

static const char agent_usage[] =
  "usage: turnfleet agent --config CONF --coturn-version V --listen ADDR:PORT\n"
  "                       --namespace NS --pool POOL --relay NAME [--interval S] [--probe-user U]\n"
  "                       [--metrics-token-file FILE]\n"
  "       turnfleet agent prestop --config CONF --coturn-version V --marker FILE --deadline S\n"
  "       turnfleet agent healthz --config CONF\n"
  "\n"
  "agent:   counts the relay's allocations through coturn's CLI (`pu`) every S seconds (default 5)\n"
  "         and serves /metrics and /healthz on ADDR:PORT, which must be one of the config's\n"
  "         listening-ip addresses. Sessions of REST user U (default turnfleet-operator: the\n"
  "         operator's Allocate probes) are not counted. With FILE (the pool's token, one line),\n"
  "         GET /metrics needs `Authorization: Bearer TOKEN` (else 401); /healthz stays open.\n"
  "         While no stop request is there, a refusal (`cc total-quota -1`) it finds is undone.\n"
  "prestop: only when the stop request DIR/stopping (DIR: FILE's directory; the coturn container's\n"
  "         preStop writes it, an id a line) appears within 10 s: drains (coturn >= 4.6.3: CLI `drain`,\n"
  "         new Allocates get 403; older: `cc total-quota -1`, 486), waits until no allocation is left\n"
  "         or S seconds passed, then writes FILE (`request=ID`, then the outcome). Without a request\n"
  "         (a restart of the agent container, not a deletion) nothing is drained and FILE is not\n"
  "         written. Exit 0 drained or nothing asked, 1 the deadline passed first.\n"
  "healthz: the liveness probe: exit 0 while the running agent's heartbeat (`health` beside coturn's\n"
  "         pidfile, written every interval) says coturn answered within three intervals, else 1.\n"
  "CONF is the relay's rendered turnserver.conf: cli-port, cli-password and listening-ip are read\n"
  "from it. See docs/operator.md.\n";

#define complain(what, ...) tool_say(PROG, what, __VA_ARGS__)

typedef struct agent_args {
  const char *config, *coturn_version, *listen, *namespace_, *pool, *relay, *marker, *interval, *deadline, *probe_user;
  const char *token_file;
} agent_args;

/* The one error line of the tools, then where the usage is; exit 2. */
#define agent_usage_error(...) \
  (tool_say(PROG, NULL, __VA_ARGS__), fputs("(run `turnfleet agent --help` for usage)\n", stderr), EXIT_BAD_INPUT)

/* Seconds >= @p min as milliseconds; -1 when malformed. */
static int64_t parse_seconds(const char *text, double min)
{
  char *end;
  errno = 0;
  double s = strtod(text, &end);
  if (!*text || *end || errno || !isfinite(s) || s < min || s > 86400.0 * 7) return -1;
  return (int64_t)(s * 1000.0 + 0.5);
}

/* The relay's config: read, parsed, the text wiped. Prints why on failure. */
static tf_relayctl_config *load_config(const char *path)
{
  size_t len = 0;
  char *text = tool_read_file(path, &len, TOOL_READ_MAX);
  if (!text) {
    complain("--config", "%s: cannot read: %s", path, strerror(errno));
    return NULL;
  }
  tf_relayctl_config *config = NULL;
  tf_err rc = tf_relayctl_config_parse(&config, text, len);
  tf_secret_free(text); /* the config holds the secrets */
  if (rc < 0) complain("--config", "%s: %s", path, tf_error_last()->message);
  return config;
}

/* The /metrics token: one line of printable characters (a final newline allowed). Prints why on failure,
 * never the token. */
static char *load_token(const char *path)
{
  size_t len = 0;
  char *text = tool_read_file(path, &len, 4096);
  if (!text) {
    complain("--metrics-token-file", "%s: cannot read: %s", path, strerror(errno));
    return NULL;
  }
  while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = '\0';
  size_t ok = 0;
  while (ok < len && text[ok] > ' ' && text[ok] <= '~') ok++;
  if (!len || ok != len) {
    complain("--metrics-token-file", "%s: %s", path,
             len ? "not a token (one line of printable characters without spaces)" : "empty");
    tf_secret_free(text);
    return NULL;
  }
  return text;
}

static int load_version(const char *text, uint32_t *version)
{
  if (tf_coturn_version_parse(version, text) < 0) {
    complain("--coturn-version", "%s", tf_error_last()->message);
    return -1;
  }
  return 0;
}

/* coturn's PID from the config's pidfile: 1 with *pid (0 when the config names no
 * pidfile: nothing to check against), 0 when coturn is not running (why says so).
 * The relay pod shares one PID namespace, so the PID coturn wrote is valid here. */
static int coturn_pid(const tf_relayctl_config *config, int *pid, char *why, size_t size)
{
  const char *path = tf_relayctl_config_pidfile(config);
  *pid = 0;
  if (!path) return 1;
  char *text = tool_read_file(path, NULL, TOOL_READ_MAX);
  if (!text) {
    snprintf(why, size, "coturn's pidfile %s: %s (not started?)", path, strerror(errno));
    return 0;
  }
  char *end;
  long n = strtol(text, &end, 10);
  int ok = end != text && (*end == '\0' || *end == '\n') && n > 0 && n < (1L << 22);
  free(text);
  if (!ok) {
    snprintf(why, size, "coturn's pidfile %s: not a PID", path);
    return 0;
  }
  /* a pidfile outlives coturn (it never removes it): the process must be there */
  char proc[48];
  snprintf(proc, sizeof(proc), "/proc/%ld", n);
  if (access(proc, F_OK) != 0) {
    snprintf(why, size, "coturn (PID %ld from %s) is not running", n, path);
    return 0;
  }
  *pid = (int)n;
  return 1;
}

/* One CLI exchange with the relay; the password goes only to @p owner's listener (0: unchecked). */
static tf_err relay_run(const tf_relayctl_config *config, int owner, tf_relayctl_op op, int timeout_ms, int64_t *count)
{
  tf_relayctl_request req;
  tf_err rc = tf_relayctl_config_request(&req, config, op, timeout_ms);
  req.owner_pid = owner;
  return rc < 0 ? rc : tf_relayctl_run(count, NULL, &req);
}

/* The relay's allocations without @p probe_user's: the operator's own Allocate probes are no clients. */
static tf_err relay_count(const tf_relayctl_config *config, int owner, const char *probe_user, int64_t *count)
{
  tf_relayctl_request req;
  tf_err rc = tf_relayctl_config_request(&req, config, TF_RELAYCTL_COUNT, AGENT_CLI_TIMEOUT_MS);
  char *text = NULL;
  int64_t total = 0, probes = 0;
  req.owner_pid = owner;
  if (rc == 0) rc = tf_relayctl_run(&total, &text, &req);
  if (rc == 0 && probe_user && *probe_user && text)
    rc = tf_coturn_user_sessions_from_cli(&probes, text, strlen(text), probe_user);
  tf_free(text);
  if (rc == 0) *count = total > probes ? total - probes : 0;
  return rc;
}

/* ---- agent: count and serve ---- */

typedef struct agent {
  const agent_args *args;
  tf_relayctl_config *config;
  int64_t interval_ms;
  char *token; /* the pool's /metrics token (secret); NULL: /metrics is open */
  pthread_mutex_t lock; /* guards the fields below: the HTTP thread reads them */
  int64_t count;        /* -1 until the first good count */
  int64_t counted_ms;   /* monotonic time of the last good count; 0: never */
  int64_t failures;     /* counts that failed, since the start */
  int64_t undone;       /* refusals found and undone while the pod was not being deleted */
  int mismatch;         /* 1: the running coturn is not the version its config was rendered for */
  char why[256];        /* the last failure, for /healthz (never holds the password) */
} agent;

static char *agent_metrics(agent *a, int64_t count, int64_t failures, int64_t undone, int mismatch)
{
  tf_metrics *m = NULL;
  char *text = NULL;
  tf_port_range r = tf_relayctl_config_port_range(a->config);
  double total = (double)tf_relayctl_config_address_count(a->config) * (double)tf_port_range_size(r);
  const char *names[] = {"namespace", "pool", "relay"};
  const char *values[] = {a->args->namespace_, a->args->pool, a->args->relay};
  /* turnfleet_agent_*: the operator exports turnfleet_relay_* for the same relays (metrics.h) */
  if (tf_metrics_new(&m) == 0 &&
      tf_metrics_declare(m, TF_METRIC_AGENT_PORTS_IN_USE, TF_METRIC_GAUGE,
                         "Relay ports held by allocations (coturn CLI `pu`); absent until a count succeeds, and "
                         "while the last one is older than two intervals") == 0 &&
      tf_metrics_declare(m, TF_METRIC_AGENT_PORTS_TOTAL, TF_METRIC_GAUGE,
                         "Relay ports the relay owns: addresses x ports in its range") == 0 &&
      tf_metrics_declare(m, TF_METRIC_AGENT_COUNT_FAILURES, TF_METRIC_COUNTER,
                         "Counts through the coturn CLI that failed") == 0 &&
      tf_metrics_declare(m, TF_METRIC_AGENT_VERSION_MISMATCH, TF_METRIC_GAUGE,
                         "1 when the running coturn (its CLI banner) is not the version its config was rendered "
                         "for (--coturn-version)") == 0 &&
      tf_metrics_declare(m, TF_METRIC_AGENT_DRAINS_UNDONE, TF_METRIC_COUNTER,
                         "Refusals of new Allocates found while the pod was not being deleted, and undone") == 0 &&
      (count < 0 || tf_metrics_add(m, TF_METRIC_AGENT_PORTS_IN_USE, names, values, 3, (double)count) == 0) &&
      tf_metrics_add(m, TF_METRIC_AGENT_PORTS_TOTAL, names, values, 3, total) == 0 &&
      tf_metrics_add(m, TF_METRIC_AGENT_COUNT_FAILURES, names, values, 3, (double)failures) == 0 &&
      tf_metrics_add(m, TF_METRIC_AGENT_DRAINS_UNDONE, names, values, 3, (double)undone) == 0 &&
      tf_metrics_add(m, TF_METRIC_AGENT_VERSION_MISMATCH, names, values, 3, (double)mismatch) == 0)
    (void)tf_metrics_to_text(&text, m);
  tf_metrics_free(m);
  return text;
}

/* Healthy while coturn answered within @p stale_ms: 1 (or 0) with the line that says so in @p body. */
static int health(char *body, size_t size, int64_t counted_ms, int64_t stale_ms, int64_t count, const char *why)
{
  int64_t age = up_now_ms() - counted_ms;
  if (!counted_ms) snprintf(body, size, "no count yet%s%s\n", why[0] ? ": " : "", why);
  else if (age > stale_ms) snprintf(body, size, "no count for %" PRId64 " ms: %s\n", age, why);
  else snprintf(body, size, "ok: %" PRId64 " allocations\n", count);
  return counted_ms && age <= stale_ms;
}

/* The heartbeat `health` beside coturn's pidfile, for `agent healthz` (the liveness probe, an exec: no
 * connection to the agent, so no flood of its port can fail it): "COUNTED_MS STALE_MS COUNT" then why. */
static void write_heartbeat(const agent *a, int64_t counted_ms, int64_t count, const char *why)
{
  const char *pidfile = tf_relayctl_config_pidfile(a->config), *slash = pidfile ? strrchr(pidfile, '/') : NULL;
  if (!slash) return;
  char dir[512], text[384];
  snprintf(dir, sizeof(dir), "%.*s", slash == pidfile ? 1 : (int)(slash - pidfile), pidfile);
  int n = snprintf(text, sizeof(text), "%" PRId64 " %" PRId64 " %" PRId64 "\n%s\n", counted_ms,
                   3 * a->interval_ms + AGENT_CLI_TIMEOUT_MS, count, why);
  (void)tool_write_atomic(dir, "health", text, (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1, 0644);
}

/* /metrics is the operator's: `Authorization: Bearer TOKEN` with the pool's token, compared in constant time. */
static int authorized(const agent *a, struct MHD_Connection *conn)
{
  if (!a->token) return 1;
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  size_t n = strlen(a->token);
  if (!h || strncmp(h, "Bearer ", 7) != 0) return 0;
  h += 7;
  return strlen(h) == n && CRYPTO_memcmp(h, a->token, n) == 0;
}

static enum MHD_Result agent_http(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state)
{
  (void)version, (void)upload, (void)upload_size, (void)state;
  agent *a = cls;
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return tool_http_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "method not allowed\n");
  pthread_mutex_lock(&a->lock);
  int64_t count = a->count, counted = a->counted_ms, failures = a->failures, undone = a->undone;
  int mismatch = a->mismatch;
  char why[sizeof(a->why)];
  memcpy(why, a->why, sizeof(why));
  pthread_mutex_unlock(&a->lock);
  if (!strcmp(url, "/metrics") && !authorized(a, conn)) {
    struct MHD_Response *r = MHD_create_response_from_buffer(sizeof("unauthorized\n") - 1, (void *)"unauthorized\n",
                                                             MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_UNAUTHORIZED, r);
    MHD_destroy_response(r);
    return rc;
  }
  if (!strcmp(url, "/metrics")) {
    /* a count older than two intervals is no sample: the counts stopped, so its load is unknown */
    int fresh = counted && up_now_ms() - counted <= 2 * a->interval_ms;
    char *text = agent_metrics(a, fresh ? count : -1, failures, undone, mismatch);
    if (!text) return tool_http_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n");
    enum MHD_Result rc = tool_http_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text);
    tf_free(text);
    return rc;
  }
  if (!strcmp(url, "/healthz")) {
    char body[320];
    int ok = health(body, sizeof(body), counted, 3 * a->interval_ms + AGENT_CLI_TIMEOUT_MS, count, why);
    return tool_http_reply(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", body);
  }
  return tool_http_reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
}

/* --listen must be one of the relay's own addresses. */
static int check_listen(const agent_args *args, const tf_relayctl_config *config)
{
  char host[TF_ADDR_STRLEN + 2];
  const char *colon = strrchr(args->listen, ':');
  size_t n = colon ? (size_t)(colon - args->listen) : 0;
  if (!colon || n < 1 || n >= sizeof(host)) {
    complain("--listen", "\"%s\" is not ADDR:PORT", args->listen);
    return -1;
  }
  memcpy(host, args->listen, n);
  host[n] = '\0';
  char *h = host;
  if (n >= 2 && h[0] == '[' && h[n - 1] == ']') h[n - 1] = '\0', h++;
  tf_addr want;
  if (tf_addr_parse(&want, h) < 0) {
    complain("--listen", "\"%s\" is not ADDR:PORT", args->listen);
    return -1;
  }
  for (size_t i = 0; i < tf_relayctl_config_address_count(config); i++) {
    tf_addr have;
    if (tf_relayctl_config_address(&have, config, i) == 0 && tf_addr_compare(&have, &want) == 0) return 0;
  }
  complain("--listen", "%s is not an address of the relay (its config's listening-ip)", h);
  return -1;
}

/* The stop request's path (malloc'd; NULL without memory): `stopping` in the pod's run directory, the
 * one of coturn's pidfile (the rendered config always names one there), else of @p marker. */
static char *request_path(const tf_relayctl_config *config, const char *marker)
{
  const char *pidfile = tf_relayctl_config_pidfile(config), *beside = pidfile ? pidfile : marker;
  if (!beside) return NULL;
  const char *slash = strrchr(beside, '/');
  int dir = slash ? (int)(slash - beside) + 1 : 0;
  char *path = malloc((size_t)dir + sizeof(AGENT_REQUEST_NAME));
  if (path) memcpy(path, beside, (size_t)dir), memcpy(path + dir, AGENT_REQUEST_NAME, sizeof(AGENT_REQUEST_NAME));
  return path;
}

/* Undo a refusal found while no stop request is there: the pod is not being deleted, so nothing may
 * drain it (an older agent's preStop after a liveness kill did). When the request appeared during
 * the exchange, the refusal is sent again: the drain it asked for may have been the one undone. */
static void undo_refusal(agent *a, int owner, const char *request)
{
  int undone = 0;
  if (access(request, F_OK) == 0 || tf_relayctl_config_unrefuse(&undone, a->config, owner, AGENT_CLI_TIMEOUT_MS) < 0 ||
      !undone)
    return;
  if (access(request, F_OK) == 0) {
    (void)relay_run(a->config, owner, TF_RELAYCTL_REFUSE, AGENT_CLI_TIMEOUT_MS, NULL);
    return;
  }
  complain("drain", "%s", "coturn refused new Allocates (`cc total-quota -1`) while its pod is not being deleted: "
                          "undone (total-quota set back to the config's)");
  pthread_mutex_lock(&a->lock);
  a->undone++;
  pthread_mutex_unlock(&a->lock);
}

/* Compare the coturn that runs (a new process: @p owner) with the version its config was rendered for. */
static void check_version(agent *a, int owner, uint32_t rendered)
{
  uint32_t running = 0;
  if (tf_relayctl_config_running_version(&running, a->config, AGENT_CLI_TIMEOUT_MS) < 0) return;
  int mismatch = running != rendered;
  if (mismatch)
    complain("--coturn-version", "coturn %u.%u.%u runs (PID %d), but its config was rendered for %s: the pool's "
             "spec.dataplane.coturnVersion does not match its image", running >> 16, (running >> 8) & 0xff,
             running & 0xff, owner, a->args->coturn_version);
  pthread_mutex_lock(&a->lock);
  a->mismatch = mismatch;
  pthread_mutex_unlock(&a->lock);
}

static int agent_serve(const agent_args *args)
{
  if (!args->config || !args->coturn_version || !args->listen || !args->namespace_ || !args->pool || !args->relay)
    return agent_usage_error("%s", "--config, --coturn-version, --listen, --namespace, --pool and --relay are required");
  if (args->marker || args->deadline) return agent_usage_error("%s", "--marker and --deadline are for `agent prestop`");
  agent a;
  memset(&a, 0, sizeof(a));
  a.args = args;
  a.count = -1;
  a.interval_ms = args->interval ? parse_seconds(args->interval, 0.05) : 5000;
  if (a.interval_ms < 0) return agent_usage_error("--interval: \"%s\" is not a number of seconds >= 0.05", args->interval);
  uint32_t version;
  if (load_version(args->coturn_version, &version) < 0) return EXIT_BAD_INPUT;
  if (args->token_file && !(a.token = load_token(args->token_file))) return EXIT_BAD_INPUT;
  if (!(a.config = load_config(args->config))) {
    tf_secret_free(a.token);
    return EXIT_BAD_INPUT;
  }
  char *request = request_path(a.config, NULL);
  if (check_listen(args, a.config) < 0) {
    tf_relayctl_config_free(a.config);
    tf_secret_free(a.token);
    free(request);
    return EXIT_BAD_INPUT;
  }
  pthread_mutex_init(&a.lock, NULL);

  /* SIGTERM/SIGINT through a descriptor, blocked before the HTTP thread exists so it inherits the mask */
  int sfd = tool_stop_signalfd();
  struct MHD_Daemon *mhd = sfd >= 0 ? tool_http_start(args->listen, agent_http, &a) : NULL;
  int st = 0;
  if (!mhd) {
    complain("--listen", "cannot serve on %s: %s", args->listen, strerror(errno));
    st = EXIT_FAILED;
  }
  int was_ok = -1, checked = 0; /* checked: the coturn PID whose version was compared */
  while (!st) {
    int64_t n = -1;
    int owner;
    char why[sizeof(a.why)];
    tf_err rc = TF_ENOTFOUND;
    if (coturn_pid(a.config, &owner, why, sizeof(why))) {
      rc = relay_count(a.config, owner, args->probe_user ? args->probe_user : "turnfleet-operator", &n);
      if (rc < 0) snprintf(why, sizeof(why), "the relay's CLI: %s", tf_error_last()->message);
      if (rc == 0 && request) undo_refusal(&a, owner, request);
      if (rc == 0 && owner != checked) check_version(&a, owner, version), checked = owner;
    }
    pthread_mutex_lock(&a.lock);
    if (rc == 0) {
      a.count = n;
      a.counted_ms = up_now_ms();
      a.why[0] = '\0';
    } else {
      memcpy(a.why, why, sizeof(why));
      a.failures++;
    }
    int64_t beat_ms = a.counted_ms, beat_count = a.count;
    pthread_mutex_unlock(&a.lock);
    write_heartbeat(&a, beat_ms, beat_count, rc == 0 ? "" : why);
    if ((rc == 0) != was_ok) { /* say it when it changes, not every interval */
      if (rc == 0) fprintf(stderr, "%s: counting: %" PRId64 " allocations\n", PROG, n);
      else complain("count", "%s", why);
      was_ok = rc == 0;
    }
    struct pollfd p = {sfd, POLLIN, 0};
    if (poll(&p, 1, (int)a.interval_ms) > 0) break;
  }
  if (mhd) MHD_stop_daemon(mhd);
  if (sfd >= 0) close(sfd);
  pthread_mutex_destroy(&a.lock);
  tf_relayctl_config_free(a.config);
  tf_secret_free(a.token);
  free(request);
  return st;
}

/* ---- agent prestop: drain, wait, mark ---- */

static int write_marker(const char *path, const char *text)
{
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  const char *name = slash ? slash + 1 : path;
  int rc = dir && *name ? tool_write_atomic(dir, name, text, strlen(text), 0644) : -1;
  if (rc < 0) complain("--marker", "%s: cannot write: %s", path, dir && *name ? strerror(errno) : "not a file path");
  free(dir);
  return rc;
}

/* Wait (until @p end, at most AGENT_REQUEST_WAIT_MS) for the coturn container's stop request beside
 * @p marker: 1 with its id, 0 when none came (this container alone is stopped: not a deletion), -1 bad. */
static int wait_request(const tf_relayctl_config *config, const char *marker, int64_t end, char *id, size_t size)
{
  char *path = request_path(config, marker);
  if (!path) {
    complain("prestop", "%s", "out of memory");
    return -1;
  }
  int64_t until = up_now_ms() + AGENT_REQUEST_WAIT_MS;
  if (end < until) until = end;
  char *text = NULL;
  while (!(text = tool_read_file(path, NULL, 256)) && up_now_ms() < until) usleep(100 * 1000);
  if (!text) {
    printf("%s: no stop request (%s) from the coturn container's preStop within %d s: the pod is not being "
           "deleted (this container alone is stopped, as for a failed liveness probe): nothing drained\n",
           PROG, path, AGENT_REQUEST_WAIT_MS / 1000);
    fflush(stdout);
    free(path);
    return 0;
  }
  size_t n = strcspn(text, "\n");
  int ok = n > 0 && n < size && strspn(text, "0123456789abcdefABCDEF-") == n;
  if (ok) memcpy(id, text, n), id[n] = '\0';
  else complain("prestop", "%s: not a request id (one line of hex digits and '-')", path);
  free(text);
  free(path);
  return ok ? 1 : -1;
}

static int agent_prestop(const agent_args *args)
{
  if (!args->config || !args->coturn_version || !args->marker || !args->deadline)
    return agent_usage_error("%s", "prestop: --config, --coturn-version, --marker and --deadline are required");
  if (args->listen || args->namespace_ || args->pool || args->relay || args->interval || args->probe_user ||
      args->token_file)
    return agent_usage_error("%s", "prestop takes --config, --coturn-version, --marker and --deadline only");
  int64_t deadline_ms = parse_seconds(args->deadline, 0);
  if (deadline_ms < 0) return agent_usage_error("--deadline: \"%s\" is not a number of seconds >= 0", args->deadline);
  uint32_t version;
  tf_relayctl_config *config = NULL;
  if (load_version(args->coturn_version, &version) < 0 || !(config = load_config(args->config))) {
    /* nothing can be drained: do not keep a coturn container that asked waiting for the grace period */
    char id[72], mark[128];
    if (wait_request(NULL, args->marker, up_now_ms() + deadline_ms, id, sizeof(id)) > 0) {
      snprintf(mark, sizeof(mark), "request=%s\nfailed: bad input\n", id);
      write_marker(args->marker, mark);
    }
    tf_relayctl_config_free(config);
    return EXIT_BAD_INPUT;
  }
  int64_t end = up_now_ms() + deadline_ms;
  char id[72];
  int asked = wait_request(config, args->marker, end, id, sizeof(id));
  if (asked <= 0) {
    tf_relayctl_config_free(config);
    return asked < 0 ? EXIT_BAD_INPUT : 0;
  }
  tf_relayctl_op op = tf_relayctl_drain_op(version);
  const char *how = op == TF_RELAYCTL_DRAIN ? "`drain` (new Allocates get 403)" : "`cc total-quota -1` (new Allocates get 486)";
  int owner;
  char why[256];
  tf_err rc = TF_ENET;
  int gone = !coturn_pid(config, &owner, why, sizeof(why));
  if (!gone && (rc = relay_run(config, owner, op, AGENT_DRAIN_TIMEOUT_MS, NULL)) == TF_ENET)
    snprintf(why, sizeof(why), "%s", tf_error_last()->message), gone = 1;
  if (gone) {
    printf("%s: coturn is not running (%s): nothing to drain\n", PROG, why);
  } else if (rc == 0) {
    printf("%s: coturn %s: sent %s\n", PROG, args->coturn_version, how);
  } else {
    /* keep counting: the wait below still ends at zero or at the deadline */
    complain("drain", "the relay's CLI: %s", tf_error_last()->message);
  }
  fflush(stdout);
  int64_t n = -1, last = -2;
  while (!gone) {
    /* coturn >= 4.6.3 exits by itself once the drain reached zero */
    rc = coturn_pid(config, &owner, why, sizeof(why)) ? relay_run(config, owner, TF_RELAYCTL_COUNT,
                                                                  AGENT_CLI_TIMEOUT_MS, &n)
                                                      : TF_ENET;
    if (rc == TF_ENET) {
      printf("%s: coturn stopped: drained\n", PROG);
      n = 0;
      break;
    }
    if (rc == 0 && n == 0) break;
    if (rc == 0 && n != last) {
      printf("%s: waiting: %" PRId64 " allocations\n", PROG, n);
      fflush(stdout);
      last = n;
    }
    int64_t left = end - up_now_ms();
    if (left <= 0) break;
    usleep((useconds_t)((left < AGENT_PRESTOP_POLL_MS ? left : AGENT_PRESTOP_POLL_MS) * 1000));
  }
  tf_relayctl_config_free(config);
  char text[96], mark[192];
  int drained = gone || n == 0;
  if (drained) snprintf(text, sizeof(text), "drained allocations=0\n");
  else if (n >= 0) snprintf(text, sizeof(text), "deadline allocations=%" PRId64 "\n", n);
  else snprintf(text, sizeof(text), "deadline allocations=unknown\n");
  if (!drained) complain("prestop", "the deadline (%s s) passed first: %s", args->deadline, text);
  else printf("%s: %s", PROG, text);
  fflush(stdout);
  /* the marker answers this request only: a later drain's coturn hook waits for its own id */
  snprintf(mark, sizeof(mark), "request=%s\n%s", id, text);
  if (write_marker(args->marker, mark) < 0) return EXIT_FAILED;
  return drained ? 0 : EXIT_FAILED;
}

/* `agent healthz`: the liveness probe, from the heartbeat the running agent writes (no connection). */
static int agent_healthz(const agent_args *args)
{
  if (!args->config) return agent_usage_error("%s", "healthz: --config is required");
  if (args->coturn_version || args->listen || args->namespace_ || args->pool || args->relay || args->interval ||
      args->probe_user || args->marker || args->deadline || args->token_file)
    return agent_usage_error("%s", "healthz takes --config only");
  tf_relayctl_config *config = load_config(args->config);
  if (!config) return EXIT_BAD_INPUT;
  const char *pidfile = tf_relayctl_config_pidfile(config), *slash = pidfile ? strrchr(pidfile, '/') : NULL;
  char path[560];
  if (slash) snprintf(path, sizeof(path), "%.*s/health", (int)(slash - pidfile), pidfile);
  tf_relayctl_config_free(config);
  if (!slash) {
    complain("--config", "%s: names no pidfile, beside which the agent's heartbeat is", args->config);
    return EXIT_BAD_INPUT;
  }
  char *text = tool_read_file(path, NULL, 1024), why[320] = "", body[400];
  long long counted = 0, stale = 0, count = 0;
  if (!text || sscanf(text, "%lld %lld %lld", &counted, &stale, &count) != 3) {
    printf("%s: no heartbeat in %s%s: the agent is not running (yet)\n", PROG, path, text ? " (malformed)" : "");
    free(text);
    return EXIT_FAILED;
  }
  const char *nl = strchr(text, '\n');
  if (nl) snprintf(why, sizeof(why), "%.*s", (int)strcspn(nl + 1, "\n"), nl + 1);
  free(text);
  int ok = health(body, sizeof(body), counted, stale, count, why);
  fputs(body, stdout);
  return ok ? 0 : EXIT_FAILED;
}

int agent_main(int argc, char **argv)
{
  int prestop = argc > 1 && !strcmp(argv[1], "prestop"), healthz = argc > 1 && !strcmp(argv[1], "healthz");
  enum { A_CONFIG = 256, A_VERSION, A_LISTEN, A_NAMESPACE, A_POOL, A_RELAY, A_MARKER, A_INTERVAL, A_DEADLINE,
         A_PROBE_USER, A_TOKEN_FILE };
  static const struct option opts[] = {
    {"config", required_argument, NULL, A_CONFIG},       {"coturn-version", required_argument, NULL, A_VERSION},
    {"listen", required_argument, NULL, A_LISTEN},       {"namespace", required_argument, NULL, A_NAMESPACE},
    {"pool", required_argument, NULL, A_POOL},           {"relay", required_argument, NULL, A_RELAY},
    {"marker", required_argument, NULL, A_MARKER},       {"interval", required_argument, NULL, A_INTERVAL},
    {"probe-user", required_argument, NULL, A_PROBE_USER}, {"metrics-token-file", required_argument, NULL, A_TOKEN_FILE},
    {"deadline", required_argument, NULL, A_DEADLINE},   {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
  };
  agent_args a;
  memset(&a, 0, sizeof(a));
  opterr = 0;
  optind = prestop || healthz ? 2 : 1;
  int opt;
  while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (opt) {
    case 'h': fputs(agent_usage, stdout); return 0;
    case '?': return agent_usage_error("unknown option \"%s\"", argv[optind - 1]);
    case ':': return agent_usage_error("option \"%s\" needs a value", argv[optind - 1]);
    case A_CONFIG: a.config = optarg; break;
    case A_VERSION: a.coturn_version = optarg; break;
    case A_LISTEN: a.listen = optarg; break;
    case A_NAMESPACE: a.namespace_ = optarg; break;
    case A_POOL: a.pool = optarg; break;
    case A_RELAY: a.relay = optarg; break;
    case A_MARKER: a.marker = optarg; break;
    case A_INTERVAL: a.interval = optarg; break;
    case A_DEADLINE: a.deadline = optarg; break;
    case A_PROBE_USER: a.probe_user = optarg; break;
    case A_TOKEN_FILE: a.token_file = optarg; break;
    default: break;
    }
  }
  if (optind < argc) return agent_usage_error("unexpected argument \"%s\"", argv[optind]);
  return prestop ? agent_prestop(&a) : healthz ? agent_healthz(&a) : agent_serve(&a);
}
