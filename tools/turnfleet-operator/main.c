/* turnfleet-operator: the Kubernetes driver of the fleet engine. Flags and
 * wiring only: the client (kube.h), the leader elector (informer.h), the
 * controller (operator.h), /metrics, /healthz and /readyz. Exit: 0 stopped
 * by SIGTERM/SIGINT, 1 it lost the lease or could not run, 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/rand.h>
#include <turnfleet.h>

#include "operator.h"
#include "secure.h"
#include "tool_http.h"
#include "tool_io.h"

#define PROG "turnfleet-operator"
#define EXIT_FAILED 1
#define EXIT_USAGE 2

static const char usage[] =
  "usage: turnfleet-operator --agent-image IMAGE [--kubeconfig FILE] [--namespace NS]\n"
  "         [--probe-interval DUR] [--publish-delay DUR] [--resync DUR] [--metrics-addr ADDR:PORT]\n"
  "         [--leader-elect] [--lease-name NAME] [--lease-namespace NS] [--lease-duration DUR]\n"
  "         [--renew-deadline DUR] [--retry-period DUR] [--identity ID]\n"
  "         [--cli-port PORT] [--cli-port-slots N] [--cli-ports-per-pool N] [--agent-port PORT]\n"
  "         [--allow-loopback-peers] [--no-api-endpoints] [--bookmark-interval DUR] [--write-budget N/DUR]\n"
  "         [--verbose]\n"
  "\n"
  "Runs TURNPools (turnfleet.hzmi.dev/v1alpha1) as relay pods: see docs/operator.md.\n"
  "  --kubeconfig FILE       the cluster and credentials; default: in-cluster (service account)\n"
  "  --namespace NS          only this namespace's pools; default: every namespace\n"
  "  --agent-image IMAGE     the image of the relay pods' agent container (required)\n"
  "  --probe-interval DUR    between a relay's Allocate probe and its next (default 5s)\n"
  "  --publish-delay DUR     a leaving relay's URI is gone this long before its pod is deleted (default 2s)\n"
  "  --resync DUR            reconcile every pool this often anyway (default 10m; 0: never)\n"
  "  --metrics-addr A:P      /metrics, /healthz, /readyz (default 127.0.0.1:8080)\n"
  "  --leader-elect          act only while holding the Lease (several replicas)\n"
  "  --lease-name NAME       default turnfleet-operator\n"
  "  --lease-namespace NS    default the in-cluster namespace, else turnfleet-system\n"
  "  --lease-duration DUR    default 15s; --renew-deadline 10s; --retry-period 2s\n"
  "  --cli-port PORT         the relays' coturn CLI ports on 127.0.0.1 start here (default 15800);\n"
  "  --cli-port-slots N      each pool takes slot FNV-1a(ns/name) mod N (default 10) ...\n"
  "  --cli-ports-per-pool N  ... of N ports (default 10: the most relays of one pool on one node)\n"
  "  --agent-port PORT       the agent's port on the relay address (default 9700)\n"
  "  --allow-loopback-peers  render coturn's allow-loopback-peers: test clusters on loopback only\n"
  "  --no-api-endpoints  do not watch the kubernetes Endpoints of default for the API servers no relay may\n"
  "                      take (where RBAC cannot grant it: a namespaced install); the API URL's address only\n"
  "  --bookmark-interval DUR the API server's watch bookmark interval (default 60s): a watch with neither\n"
  "                          an event nor a bookmark for twice this is dropped and relisted; 0: no check\n"
  "  --write-budget N/DUR    at most N writes per pool in any DUR (default 100/10s): stale caches never\n"
  "                          drive a write loop\n"
  "DUR: a number with ms, s or m (`1s`, `500ms`); a bare number is seconds.\n";

static atomic_int stop_now;
static atomic_int leading;
static atomic_int lost;
static atomic_int verbose;

static void on_signal(int sig)
{
  (void)sig;
  atomic_store(&stop_now, 1);
}

static void log_line(tf_log_level level, const char *message, void *payload)
{
  (void)payload;
  if (level < TF_LOG_INFO && !atomic_load(&verbose)) return;
  static const char *const names[] = {"debug", "info", "warning", "error"};
  char when[32];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(when, sizeof(when), "%H:%M:%S", &tm);
  fprintf(stderr, "%s %s: %s: %s\n", when, PROG, names[level <= TF_LOG_ERROR ? level : TF_LOG_ERROR], message);
}

static void on_lead(int now_leading, void *payload)
{
  (void)payload;
  if (now_leading) {
    atomic_store(&leading, 1);
    log_line(TF_LOG_INFO, "became the leader", NULL);
  } else {
    if (atomic_load(&leading)) atomic_store(&lost, 1);
    atomic_store(&leading, 0);
  }
}

/* "1s", "500ms", "2m", "3" (seconds) → ms; -1 when malformed. */
static long parse_duration(const char *s)
{
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0 || v > 86400.0 * 365) return -1;
  if (!*end || strcmp(end, "s") == 0) return (long)(v * 1000);
  if (strcmp(end, "ms") == 0) return (long)v;
  if (strcmp(end, "m") == 0) return (long)(v * 60000);
  return -1;
}

static long parse_uint(const char *s, long lo, long hi)
{
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  return v;
}

/* Every write of the client goes through here: only while the Lease is held (read from the clock
 * at each write), and within the pool's write budget (the adapter's). */
typedef struct gate_ctx {
  tf_elector *el; /* NULL without --leader-elect */
  op_controller *ctl;
} gate_ctx;

static long write_gate(const char *method, const char *path, void *payload)
{
  gate_ctx *g = payload;
  long ms = g->el ? tf_elector_write_gate(method, path, g->el) : 1L << 30;
  if (ms <= 0) return 0;
  return tf_adapter_write_gate(method, path, op_controller_adapter(g->ctl)) > 0 ? ms : 0;
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                             const char *version, const char *upload, size_t *upload_len, void **state)
{
  (void)version;
  (void)upload;
  (void)upload_len;
  (void)state;
  op_controller *ctl = cls;
  if (strcmp(method, "GET") != 0) return tool_http_reply(conn, 405, "text/plain", "GET only\n");
  if (strcmp(url, "/healthz") == 0) return tool_http_reply(conn, 200, "text/plain", "ok\n");
  if (strcmp(url, "/readyz") == 0)
    return op_controller_synced(ctl) ? tool_http_reply(conn, 200, "text/plain", "ok\n")
                                         : tool_http_reply(conn, 503, "text/plain", "informers not synced\n");
  if (strcmp(url, "/metrics") == 0) {
    /* every replica says whether it leads: "no leader" is a sum of 0, "no operator" an absent series */
    char *text = op_controller_metrics(ctl, atomic_load(&leading));
    enum MHD_Result r = text ? tool_http_reply(conn, 200, "text/plain; version=0.0.4", text)
                             : tool_http_reply(conn, 500, "text/plain", "no memory\n");
    free(text);
    return r;
  }
  return tool_http_reply(conn, 404, "text/plain", "not found\n");
}

#define bad_usage(...) (tool_say(PROG, NULL, __VA_ARGS__), fputs("(run `turnfleet-operator --help`)\n", stderr), EXIT_USAGE)

int main(int argc, char **argv)
{
  (void)secure_no_dumps();
  enum { O_KC = 256, O_NS, O_IMG, O_PI, O_PD, O_RS, O_MA, O_LE, O_LN, O_LNS, O_LD, O_RD, O_RP, O_ID, O_CP, O_CS,
         O_CPP, O_AP, O_V, O_H, O_VER, O_ALP, O_BI, O_WB, O_NAE };
  static const struct option longs[] = {
    {"kubeconfig", 1, 0, O_KC},      {"namespace", 1, 0, O_NS},        {"agent-image", 1, 0, O_IMG},
    {"probe-interval", 1, 0, O_PI},  {"publish-delay", 1, 0, O_PD},    {"resync", 1, 0, O_RS},
    {"metrics-addr", 1, 0, O_MA},    {"leader-elect", 0, 0, O_LE},     {"lease-name", 1, 0, O_LN},
    {"lease-namespace", 1, 0, O_LNS}, {"lease-duration", 1, 0, O_LD},  {"renew-deadline", 1, 0, O_RD},
    {"retry-period", 1, 0, O_RP},    {"identity", 1, 0, O_ID},         {"cli-port", 1, 0, O_CP},
    {"cli-port-slots", 1, 0, O_CS},  {"cli-ports-per-pool", 1, 0, O_CPP}, {"agent-port", 1, 0, O_AP},
    {"verbose", 0, 0, O_V},          {"help", 0, 0, O_H},              {"version", 0, 0, O_VER},
    {"allow-loopback-peers", 0, 0, O_ALP}, {"bookmark-interval", 1, 0, O_BI}, {"write-budget", 1, 0, O_WB},
    {"no-api-endpoints", 0, 0, O_NAE},
    {0, 0, 0, 0}};
  const char *kubeconfig = NULL, *lease_name = "turnfleet-operator", *lease_ns = NULL, *identity = NULL;
  const char *metrics_addr = "127.0.0.1:8080";
  op_config cfg = {NULL, 600000, 60000, TF_ADAPTER_OPTIONS_INIT};
  tf_adapter_options *ao = &cfg.adapter; /* the defaults of the usage text are the library's */
  ao->log = log_line;
  long lease_ms = 15000, renew_ms = 10000, retry_ms = 2000;
  int elect = 0, opt;
  opterr = 0; /* the complaint below names the option */
  while ((opt = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    long v = 0;
    switch (opt) {
    case O_KC: kubeconfig = optarg; break;
    case O_NS: cfg.namespace_ = optarg; break;
    case O_IMG: ao->agent_image = optarg; break;
    case O_PI:
    case O_PD:
    case O_RS:
    case O_LD:
    case O_RD:
    case O_RP:
      if ((v = parse_duration(optarg)) < 0 || (v == 0 && opt != O_RS && opt != O_PD))
        return bad_usage("--%s: \"%.64s\" is not a duration (e.g. 1s, 500ms)", longs[opt - O_KC].name, optarg);
      if (opt == O_PI) ao->probe_interval_ms = v;
      if (opt == O_PD) ao->publish_delay_ms = v;
      if (opt == O_RS) cfg.resync_ms = v;
      if (opt == O_LD) lease_ms = v;
      if (opt == O_RD) renew_ms = v;
      if (opt == O_RP) retry_ms = v;
      break;
    case O_MA: metrics_addr = optarg; break;
    case O_LE: elect = 1; break;
    case O_ALP: ao->allow_loopback_peers = 1; break;
    case O_NAE: cfg.no_api_endpoints = 1; break;
    case O_LN: lease_name = optarg; break;
    case O_LNS: lease_ns = optarg; break;
    case O_ID: identity = optarg; break;
    case O_CP:
    case O_AP:
      if ((v = parse_uint(optarg, 1, 65535)) < 0)
        return bad_usage("--%s: \"%.32s\" is not a port (1-65535)", longs[opt - O_KC].name, optarg);
      if (opt == O_CP) ao->cli_port_base = (uint16_t)v;
      else ao->agent_port = (uint16_t)v;
      break;
    case O_CS:
    case O_CPP:
      if ((v = parse_uint(optarg, 1, 1000)) < 0)
        return bad_usage("--%s: \"%.32s\" is not a count (1-1000)", longs[opt - O_KC].name, optarg);
      if (opt == O_CS) ao->cli_slots = (unsigned)v;
      else ao->cli_stride = (unsigned)v;
      break;
    case O_BI:
      if ((v = parse_duration(optarg)) < 0)
        return bad_usage("--bookmark-interval: \"%.64s\" is not a duration (e.g. 60s; 0: no check)", optarg);
      cfg.bookmark_interval_ms = v;
      break;
    case O_WB: {
      const char *slash = strchr(optarg, '/');
      char num[16];
      size_t n = slash ? (size_t)(slash - optarg) : 0;
      if (n) snprintf(num, sizeof(num), "%.*s", (int)(n < sizeof(num) ? n : sizeof(num) - 1), optarg);
      long w = n && n < sizeof(num) ? parse_uint(num, 1, 100000) : -1;
      long d = w > 0 ? parse_duration(slash + 1) : -1;
      if (w < 1 || d < 1)
        return bad_usage("--write-budget: \"%.64s\" is not N/DUR (e.g. 100/10s)", optarg);
      ao->budget_writes = w;
      ao->budget_interval_ms = d;
      break;
    }
    case O_V: atomic_store(&verbose, 1); break;
    case O_H: fputs(usage, stdout); return 0;
    case O_VER: printf("%s %s\n", PROG, tf_version_string()); return 0;
    default: return bad_usage("%s: unknown option or missing value", argv[optind - 1]);
    }
  }
  if (optind < argc) return bad_usage("unexpected argument \"%.64s\"", argv[optind]);
  if (!ao->agent_image || !*ao->agent_image) return bad_usage("--agent-image: required");
  if ((unsigned long)ao->cli_port_base + (unsigned long)ao->cli_slots * ao->cli_stride > 65536)
    return bad_usage("--cli-port: %u + %u slots x %u ports is past 65535", ao->cli_port_base, ao->cli_slots,
                     ao->cli_stride);
  if (elect && !(lease_ms > renew_ms && renew_ms * 10 > retry_ms * 12))
    return bad_usage("--lease-duration must be > --renew-deadline > 1.2 x --retry-period");

  char ident[128];
  if (!identity) {
    unsigned char r[6];
    char host[64] = "operator";
    (void)gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    if (RAND_bytes(r, sizeof(r)) != 1) memset(r, 0, sizeof(r));
    snprintf(ident, sizeof(ident), "%s_%02x%02x%02x%02x%02x%02x", host, r[0], r[1], r[2], r[3], r[4], r[5]);
    identity = ident;
  }

  char agent[200];
  snprintf(agent, sizeof(agent), "%s (%s)", PROG, identity);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  tf_kube_options ko = TF_KUBE_OPTIONS_INIT;
  ko.source = kubeconfig ? TF_KUBE_SOURCE_KUBECONFIG : TF_KUBE_SOURCE_IN_CLUSTER;
  ko.kubeconfig = kubeconfig;
  ko.field_manager = PROG;
  ko.user_agent = agent;
  ko.timeout_ms = 10000;
  ko.connect_timeout_ms = 3000;
  ko.log = log_line;
  tf_kube *kube = NULL;
  if (tf_kube_new(&kube, &ko) < 0) {
    tool_say(PROG, kubeconfig ? kubeconfig : "in-cluster configuration", "%s", tf_error_last()->message);
    return EXIT_USAGE;
  }
  if (!lease_ns) lease_ns = kubeconfig ? "turnfleet-system" : tf_kube_namespace(kube);

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  op_controller *ctl = NULL;
  if (op_controller_new(&ctl, kube, &cfg) < 0 || op_controller_start(ctl) < 0) {
    tool_say(PROG, NULL, "cannot start the controller: %s", tf_error_last()->message);
    op_controller_free(ctl);
    tf_kube_free(kube);
    return EXIT_FAILED;
  }
  struct MHD_Daemon *http = tool_http_start(metrics_addr, serve, ctl);
  if (!http) {
    tool_say(PROG, "--metrics-addr", "cannot serve on %s: %s", metrics_addr, strerror(errno ? errno : EINVAL));
    op_controller_free(ctl);
    tf_kube_free(kube);
    return EXIT_USAGE;
  }

  tf_elector *el = NULL;
  gate_ctx gc = {NULL, ctl};
  if (elect) {
    tf_elector_options eo = TF_ELECTOR_OPTIONS_INIT;
    eo.lease_namespace = lease_ns;
    eo.lease_name = lease_name;
    eo.identity = identity;
    eo.lease_seconds = (lease_ms + 999) / 1000;
    eo.renew_deadline_ms = renew_ms;
    eo.retry_ms = retry_ms;
    eo.on_change = on_lead;
    eo.log = log_line;
    if (tf_elector_new(&el, kube, &eo) < 0 || tf_elector_start(el) < 0) {
      tool_say(PROG, "--leader-elect", "%s", tf_error_last()->message);
      tf_elector_free(el);
      MHD_stop_daemon(http);
      op_controller_free(ctl);
      tf_kube_free(kube);
      return EXIT_USAGE;
    }
    gc.el = el;
  } else {
    atomic_store(&leading, 1);
  }
  /* the one place writes are gated: the Lease (when elected) and the per-pool budget */
  tf_kube_set_write_gate(kube, write_gate, &gc);
  log_line(TF_LOG_INFO, elect ? "started; waiting for the lease" : "started", NULL);

  int was_leading = 0, code = 0;
  while (!atomic_load(&stop_now)) {
    if (atomic_load(&lost)) {
      log_line(TF_LOG_ERROR, "lost the lease: stopping (another replica takes over)", NULL);
      code = EXIT_FAILED;
      break;
    }
    if (!atomic_load(&leading) || !op_controller_synced(ctl)) {
      struct timespec ts = {0, 50 * 1000000L};
      nanosleep(&ts, NULL);
      continue;
    }
    if (!was_leading) {
      was_leading = 1;
      op_controller_enqueue_all(ctl);
    }
    op_controller_run_once(ctl, 100);
  }
  if (!code) log_line(TF_LOG_INFO, "stopping: the relays keep running", NULL);
  tf_kube_set_write_gate(kube, NULL, NULL);
  tf_elector_free(el); /* a leader releases the lease */
  MHD_stop_daemon(http);
  op_controller_free(ctl);
  tf_kube_free(kube);
  return code;
}
