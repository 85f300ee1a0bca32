/* probe: the TURN client against real coturn on loopback, each relay started
 * from a config the library rendered (tf_coturn_render) and stopped by PID;
 * and the turnfleet-probe CLI (fork/exec of the built binary).
 *
 * Addresses 127.0.0.40-64 and ::1, listener ports 3500-3599, relay ranges in
 * 40000-58999 (the hooks tests: 127.0.20.1-3, ports 3600-3602, relays 40200-40299),
 * CLI port 15640 (below the ephemeral range): distinct from the other suites so
 * `ctest -j` does not collide. ctest runs the suite once per coturn version
 * (4.6.1 on the host, 4.18 from the root filesystem), never both at once. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "probe_internal.h"
#include "tf_coturn.h"
#include "tf_test.h"

/* Distinctive, so a leak into a message, a log line or the output is easy to spot. */
#define SECRET "probe-SEKRIT-5f1c-e2"
#define WRONG_SECRET "not-the-SEKRIT-77"
#define REALM "probe.turnfleet.test"

#define PC_MAX_RELAYS 2
#define PC_MAX_CHILDREN 8
#define PC_READY_MS 10000

/* ---- relays: render, start, wait, stop (one test per forked process) ---- */

typedef struct pc_relay {
  pid_t pid;
  char name[TF_RELAY_NAME_MAX];
  char out_path[1024];
  char log_path[1024];
  tf_addr addrs[2];
  size_t addr_count;
  tf_port_range range;
  int udp, tcp, tls;
  uint16_t plain_port, tls_port;
} pc_relay;

static pc_relay pc_relays[PC_MAX_RELAYS];
static size_t pc_count;
static pid_t pc_children[PC_MAX_CHILDREN];
static char *pc_dir;
static char pc_cert[1200], pc_key[1200], pc_secret_file[1200];
static char pc_version_text[64];
static uint32_t pc_version;

/* Log lines a test causes on purpose (a wrong or expired credential makes
 * coturn log an ERROR about that client); NULL-terminated. */
static const char *pc_log_allowed[4];

static void pc_cleanup(void)
{
  for (size_t i = 0; i < PC_MAX_CHILDREN; i++) tf_ts_reap(&pc_children[i]);
  for (size_t i = 0; i < pc_count; i++) tf_ts_reap(&pc_relays[i].pid);
  tf_ts_remove_dir(&pc_dir);
}

#define PC_CHECK(cond, ...) TF_TS_CHECK(pc_cleanup, cond, __VA_ARGS__)
#define PC_OK(call) TF_TS_OK(pc_cleanup, call)

static void pc_setup(void)
{
  memset(pc_relays, 0, sizeof(pc_relays));
  memset(pc_children, 0, sizeof(pc_children));
  pc_count = 0;
  pc_dir = NULL;
  pc_cert[0] = pc_key[0] = pc_secret_file[0] = '\0';
  memset(pc_log_allowed, 0, sizeof(pc_log_allowed));
}

/* This test sends wrong or expired credentials: coturn logs an ERROR for each
 * (4.6.1 "check_stun_auth: Cannot find credentials of user", 4.18 "credentials
 * of user <...> are wrong" / "have expired"). */
static void pc_expect_credential_errors(void)
{
  pc_log_allowed[0] = "Cannot find credentials of user <";
  pc_log_allowed[1] = "ERROR credentials of user <";
  pc_log_allowed[2] = NULL;
}

static void pc_teardown(void) { pc_cleanup(); }

/* The test's private directory (0700), made on first use. */
static const char *pc_tmpdir(void)
{
  if (!pc_dir) pc_dir = tf_test_tmpdir();
  return pc_dir;
}

#define PC_TLS 0x1
#define PC_LOOPBACK_PEERS 0x2
#define PC_CLI 0x4 /* coturn's CLI on 127.0.0.1:PC_CLI_PORT */
#define PC_CLI_PORT 15640
#define PC_CLI_PASSWORD "probe cli pw 40"


/* A one-node inventory for @p addr. */
static char *pc_nodes(const char *addr)
{
  char *json = NULL;
  int n = asprintf(&json,
                   "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"metadata\":{\"name\":\"probe-node\","
                   "\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\",\"" TF_LABEL_DEVELOPMENT "\":\"true\"}},"
                   "\"status\":{\"addresses\":"
                   "[{\"type\":\"InternalIP\",\"address\":\"%s\"}],\"conditions\":[{\"type\":\"Ready\","
                   "\"status\":\"True\"}]}}]}",
                   addr);
  ck_assert_int_gt(n, 0);
  return json;
}

/* A pool of one relay: udp+tcp on @p port, tls on @p tls_port (0: none),
 * relay range @p start-@p end; @p extra is appended to spec (YAML, 2-space indent). */
static char *pc_pool(const char *name, const char *family, uint16_t port, uint16_t tls_port, unsigned start,
                     unsigned end, const char *extra)
{
  char tls[160] = "";
  if (tls_port)
    snprintf(tls, sizeof(tls), "    - {name: turns, protocol: tls, port: %u, tlsSecretRef: {name: probe-tls}}\n",
             tls_port);
  char *yaml = NULL;
  int n = asprintf(&yaml,
                   "apiVersion: turnfleet.hzmi.dev/v1alpha1\n"
                   "kind: TURNPool\n"
                   "metadata: {name: %s}\n"
                   "spec:\n"
                   "  addressing: {mode: HostNetwork, family: %s}\n"
                   "  relayPortRange: {start: %u, end: %u}\n"
                   "  listeners:\n"
                   "    - {name: turn, protocol: udp, port: %u}\n"
                   "    - {name: turn-tcp, protocol: tcp, port: %u}\n"
                   "%s"
                   "  auth: {realm: " REALM ", secretRef: {name: probe-secret}}\n"
                   "%s",
                   name, family, start, end, port, port, tls, extra ? extra : "");
  ck_assert_int_gt(n, 0);
  return yaml;
}

/* Have all the relay's listeners appeared? */
static int pc_ready(const pc_relay *r)
{
  tf_ts_sock socks[256];
  int n = tf_ts_sockets(r->pid, socks, 256);
  if (n <= 0) return 0;
  for (size_t i = 0; i < r->addr_count; i++) {
    if (r->udp && !tf_ts_has(socks, n, 0, &r->addrs[i], r->plain_port)) return 0;
    if (r->tcp && !tf_ts_has(socks, n, 1, &r->addrs[i], r->plain_port)) return 0;
    if (r->tls && !tf_ts_has(socks, n, 1, &r->addrs[i], r->tls_port)) return 0;
  }
  return 1;
}

/* Plan @p pool_yaml on a one-node inventory at @p node_addr, render every relay
 * for the installed coturn, start it and wait for its listeners. @p extra_conf
 * is appended to the rendered text (tests only: e.g. a short stale-nonce). */
static void pc_start_conf(const char *pool_yaml, const char *node_addr, int flags, const char *extra_conf)
{
  tf_ts_require(pc_version_text, sizeof(pc_version_text), &pc_version);
  tf_pool *pool = tf_test_pool(pool_yaml);
  char *nodes_json = pc_nodes(node_addr);
  tf_nodes *nodes = tf_test_nodes(nodes_json);
  free(nodes_json);
  tf_plan *plan = NULL;
  TF_OK_OR_FAIL(tf_plan_new(&plan, pool, nodes, NULL));
  tf_nodes_free(nodes);
  ck_assert_uint_ge(tf_plan_relay_count(plan), 1);
  ck_assert_uint_le(tf_plan_relay_count(plan), PC_MAX_RELAYS);
  const char *dir = pc_tmpdir();

  char state_dir[1100];
  snprintf(state_dir, sizeof(state_dir), "%s/state", dir);
  PC_CHECK(mkdir(state_dir, 0700) == 0, "mkdir %s: %s", state_dir, strerror(errno));
  if (flags & PC_TLS) {
    /* the certificate names the relay's addresses, as the probe checks them */
    const char *ips[4];
    char texts[4][TF_ADDR_STRLEN];
    size_t n = 0;
    const tf_relay *r0 = tf_plan_relay(plan, 0);
    for (size_t a = 0; a < tf_relay_address_count(r0) && n < 4; a++) {
      tf_addr addr;
      PC_OK(tf_relay_address(&addr, r0, a));
      PC_OK(tf_addr_format(texts[n], sizeof(texts[n]), &addr));
      ips[n] = texts[n];
      n++;
    }
    snprintf(pc_cert, sizeof(pc_cert), "%s/cert.pem", dir);
    snprintf(pc_key, sizeof(pc_key), "%s/pkey.pem", dir);
    PC_CHECK(tf_ts_make_cert(pc_cert, pc_key, ips, n) == 0, "cannot write the test certificate");
  }

  const char *secrets[] = {SECRET};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.coturn_version = pc_version_text; /* render for the coturn that runs it */
  o.secrets = secrets;
  o.secrets_count = 1;
  o.state_dir = state_dir;
  o.cert_file = (flags & PC_TLS) ? pc_cert : NULL;
  o.key_file = (flags & PC_TLS) ? pc_key : NULL;
  o.allow_loopback_peers = (flags & PC_LOOPBACK_PEERS) ? 1 : 0;
  if (flags & PC_CLI) {
    o.cli_port = PC_CLI_PORT;
    o.cli_password = PC_CLI_PASSWORD;
  }

  for (size_t i = 0; i < tf_plan_relay_count(plan); i++) {
    const tf_relay *r = tf_plan_relay(plan, i);
    pc_relay *p = &pc_relays[pc_count];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", tf_relay_name(r));
    snprintf(p->out_path, sizeof(p->out_path), "%s/%s.out", dir, tf_relay_name(r));
    snprintf(p->log_path, sizeof(p->log_path), "%s/%s.log", dir, tf_relay_name(r));
    p->addr_count = tf_relay_address_count(r);
    for (size_t a = 0; a < p->addr_count && a < 2; a++) PC_OK(tf_relay_address(&p->addrs[a], r, a));
    p->range = tf_relay_port_range(r);
    for (size_t l = 0; l < tf_pool_listener_count(pool); l++) {
      int proto = tf_pool_listener_protocol(pool, l);
      uint16_t port = tf_relay_listener_port(r, l);
      if (proto == TF_PROTOCOL_UDP) p->udp = 1;
      if (proto == TF_PROTOCOL_TCP) p->tcp = 1;
      if (proto == TF_PROTOCOL_TLS) p->tls = 1;
      if (proto == TF_PROTOCOL_UDP || proto == TF_PROTOCOL_TCP) p->plain_port = port;
      else p->tls_port = port;
    }
    char relay_state[1200];
    snprintf(relay_state, sizeof(relay_state), "%s/%s", state_dir, p->name);
    PC_CHECK(mkdir(relay_state, 0700) == 0, "mkdir %s: %s", relay_state, strerror(errno));
    o.log_file = p->log_path;
    char *text = NULL;
    PC_OK(tf_coturn_render(&text, pool, plan, p->name, &o));
    if (extra_conf) {
      char *more = tf_asprintf__("%s%s", text, extra_conf);
      tf_crypto__wipe(text, strlen(text));
      tf_free(text);
      PC_CHECK(more != NULL, "out of memory");
      text = more;
    }
    char conf[1200];
    snprintf(conf, sizeof(conf), "%s/%s.conf", dir, p->name);
    tf_test_write(conf, text, 0600);
    tf_crypto__wipe(text, strlen(text));
    free(text);
    struct stat st;
    PC_CHECK(stat(conf, &st) == 0 && (st.st_mode & 0777) == 0600, "%s is not mode 0600", conf);
    pc_count++;
    p->pid = tf_ts_spawn(conf, p->out_path);
    PC_CHECK(p->pid > 0, "fork: %s", strerror(errno));
  }
  tf_plan_free(plan);
  tf_pool_free(pool);

  for (size_t i = 0; i < pc_count; i++) {
    pc_relay *p = &pc_relays[i];
    int64_t deadline = tf_ts_now_ms() + PC_READY_MS;
    while (!pc_ready(p)) {
      int status;
      if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
        char head[2048];
        p->pid = 0;
        tf_ts_file_head(p->out_path, head, sizeof(head));
        PC_CHECK(0, "turnserver for %s exited early (status 0x%x):\n%s", p->name, status, head);
      }
      if (tf_ts_now_ms() > deadline) {
        char head[2048];
        tf_ts_file_head(p->log_path, head, sizeof(head));
        PC_CHECK(0, "turnserver for %s did not open its listeners within %d ms; log:\n%s", p->name, PC_READY_MS,
                 head);
      }
      tf_ts_sleep_ms(20);
    }
  }
}

static void pc_start(const char *pool_yaml, const char *node_addr, int flags)
{
  pc_start_conf(pool_yaml, node_addr, flags, NULL);
}

/* The usual case: one IPv4 relay at 127.0.0.<host>. */
static void pc_start_v4(const char *name, int host, uint16_t port, uint16_t tls_port, unsigned start, unsigned end,
                        const char *extra_spec, int flags)
{
  char *pool = pc_pool(name, "IPv4", port, tls_port, start, end, extra_spec);
  char addr[32];
  snprintf(addr, sizeof(addr), "127.0.0.%d", host);
  pc_start(pool, addr, flags);
  free(pool);
}

/* Stop every relay by PID. SIGKILL: how coturn stops is check_coturn's
 * subject (SIGTERM and the exit status per version); here a graceful 4.18
 * stop would only add seconds per test. */
static void pc_stop_all(void)
{
  for (size_t i = 0; i < pc_count; i++)
    if (pc_relays[i].pid > 0) kill(pc_relays[i].pid, SIGKILL);
  int64_t deadline = tf_ts_now_ms() + 15000;
  for (size_t i = 0; i < pc_count; i++) {
    while (pc_relays[i].pid > 0) {
      if (waitpid(pc_relays[i].pid, NULL, WNOHANG) == pc_relays[i].pid) {
        pc_relays[i].pid = 0;
        break;
      }
      PC_CHECK(tf_ts_now_ms() <= deadline, "turnserver %s did not stop within 15 s of SIGKILL", pc_relays[i].name);
      tf_ts_sleep_ms(20);
    }
  }
  /* the rendered configs made no coturn complain, on any version */
  for (size_t i = 0; i < pc_count; i++) {
    char line[2048];
    const char *paths[] = {pc_relays[i].out_path, pc_relays[i].log_path};
    for (size_t k = 0; k < 2; k++)
      PC_CHECK(!tf_ts_log_problem(paths[k], pc_log_allowed, 0, line, sizeof(line)), "turnserver %s logged in %s: %s",
               pc_relays[i].name, paths[k], line);
  }
}

/* ---- probe helpers ---- */

static tf_probe_options pc_opts(const char *uri)
{
  tf_probe_options o;
  ck_assert_int_eq(tf_probe_options_init(&o, TF_PROBE_OPTIONS_VERSION), 0);
  o.uri = uri;
  o.secret = SECRET;
  o.timeout_ms = 8000;
  return o;
}

static tf_probe_result *pc_run(const tf_probe_options *o)
{
  tf_probe_result *r = NULL;
  PC_OK(tf_probe_run(&r, o));
  PC_CHECK(r != NULL, "no result");
  return r;
}

/* One probe through tf_probe_run() (@p as_set 0: epoll) or as a set of one (1: a set's
 * datagrams go through io_uring where the kernel has it); free with pc_result_free(). */
static tf_probe_result *pc_run_as(const tf_probe_options *o, int as_set, tf_probe_set **set)
{
  *set = NULL;
  if (!as_set) return pc_run(o);
  PC_OK(tf_probe_set_new(set, 1));
  PC_OK(tf_probe_set_add(*set, o));
  PC_OK(tf_probe_set_run(*set, NULL, NULL));
  const tf_probe_result *r = tf_probe_set_result(*set, 0);
  PC_CHECK(r != NULL, "no result");
  return (tf_probe_result *)r;
}

static void pc_result_free(tf_probe_result *r, tf_probe_set *set)
{
  if (set) tf_probe_set_free(set);
  else tf_probe_result_free(r);
}

/* How a set's probes do their I/O (TURNFLEET_PROBE_IO): everything the kernel offers (its ring
 * makes the UDP sockets where it binds through io_uring), "ring" (sockets made with system
 * calls), "epoll". */
static const char *const pc_io_modes[] = {NULL, "ring", "epoll"};

static void pc_set_io(const char *mode)
{
  if (mode) setenv("TURNFLEET_PROBE_IO", mode, 1);
  else unsetenv("TURNFLEET_PROBE_IO");
}

/* Whether this kernel binds through io_uring (IORING_OP_BIND, 56: Linux 6.11). */
static int pc_kernel_binds_in_ring(void)
{
  struct io_uring ring;
  if (io_uring_queue_init(2, &ring, 0) < 0) return 0;
  struct io_uring_probe *pr = io_uring_get_probe_ring(&ring);
  int yes = pr && io_uring_opcode_supported(pr, 56);
  if (pr) io_uring_free_probe(pr);
  io_uring_queue_exit(&ring);
  return yes;
}

static void pc_addr(tf_addr *a, const char *text) { PC_OK(tf_addr_parse(a, text)); }

/* A UDP socket bound to @p ip:@p port that takes datagrams and never answers (close it). */
static int pc_silent_udp(const char *ip, uint16_t port)
{
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, ip, &sa.sin_addr);
  PC_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s:%u: %s", ip, port, strerror(errno));
  return fd;
}

#define PC_EXPECT_OK(r)                                                                                        \
  PC_CHECK(tf_probe_result_ok(r), "probe of %s failed: stage %s, status %s, code %d: %s", tf_probe_result_uri(r), \
           tf_probe_stage_name(tf_probe_result_stage(r)), tf_error_name(tf_probe_result_status(r)),            \
           tf_probe_result_error_code(r), tf_probe_result_message(r))

/* The relayed address is @p want and its port inside the relay's range. */
static void pc_expect_relayed(const tf_probe_result *r, const char *want, const pc_relay *relay)
{
  tf_addr a, w;
  uint16_t port = 0;
  PC_OK(tf_probe_result_relayed(r, &a, &port));
  pc_addr(&w, want);
  char got[TF_ADDR_STRLEN] = "?";
  tf_addr_format(got, sizeof(got), &a);
  PC_CHECK(tf_addr_compare(&a, &w) == 0, "relayed address %s, want %s", got, want);
  PC_CHECK(port >= relay->range.start && port <= relay->range.end, "relayed port %u outside %u-%u", port,
           relay->range.start, relay->range.end);
}

/* ---- log capture ---- */

typedef struct logbuf {
  tf_buf text;
  int lines;
} logbuf;

static void pc_log(tf_log_level level, const char *message, void *payload)
{
  (void)level;
  logbuf *lb = payload;
  tf_buf__puts(&lb->text, message);
  tf_buf__puts(&lb->text, "\n");
  lb->lines++;
}

/* ---- tests: options and results, no server ---- */

START_TEST(test_probe__options_init_gives_the_defaults)
{
  tf_probe_options o;
  memset(&o, 0xa5, sizeof(o));
  TF_OK_OR_FAIL(tf_probe_options_init(&o, TF_PROBE_OPTIONS_VERSION));
  ck_assert_uint_eq(o.version, TF_PROBE_OPTIONS_VERSION);
  ck_assert_ptr_null(o.uri);
  ck_assert_ptr_null(o.secret);
  ck_assert_ptr_null(o.user);
  ck_assert_int_eq(o.ttl_s, 600);
  ck_assert_int_eq(o.separator, 0);
  ck_assert_int_eq(o.family, 0);
  ck_assert_ptr_null(o.expect_address);
  ck_assert_uint_eq(o.expect_port_start, 0);
  ck_assert_int_eq(o.peer_check, 0);
  ck_assert_int_eq(o.timeout_ms, 5000);
  ck_assert_int_eq(o.rto_ms, 500);
  ck_assert_ptr_null(o.ca_file);
  ck_assert_int_eq(o.insecure, 0);
  ck_assert_int_eq(o.now, 0);
  ck_assert_uint_eq(o.lifetime_s, 0);
  ck_assert_int_eq(o.release, 1);
  ck_assert_ptr_null(o.log_cb);
  ck_assert_int_eq(o.log_level, TF_LOG_INFO);
  ck_assert_int_eq(tf_probe_options_init(&o, 0), TF_EINVALID);
  ck_assert_int_eq(tf_probe_options_init(&o, TF_PROBE_OPTIONS_VERSION + 1), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "version"));
  ck_assert_int_eq(tf_probe_options_init(NULL, 1), TF_EINVALID);
}
END_TEST

START_TEST(test_probe__bad_options_name_the_field_never_the_secret)
{
  static const struct {
    const char *field; /* the message starts with it */
    const char *uri;
    int ttl, family, timeout, rto, separator;
    const char *expect;
    uint16_t start, end;
    int no_secret;
  } cases[] = {
      {"uri: ", NULL, 600, 0, 5000, 500, 0, NULL, 0, 0, 0},
      {"uri: ", "stun:127.0.0.1", 600, 0, 5000, 500, 0, NULL, 0, 0, 0},
      {"uri: ", "turn://127.0.0.1", 600, 0, 5000, 500, 0, NULL, 0, 0, 0},
      {"uri: ", "turns:127.0.0.1?transport=udp", 600, 0, 5000, 500, 0, NULL, 0, 0, 0},
      {"uri: ", "turn:127.0.0.1?transport=sctp", 600, 0, 5000, 500, 0, NULL, 0, 0, 0},
      {"secret: ", "turn:127.0.0.1", 600, 0, 5000, 500, 0, NULL, 0, 0, 1},
      {"ttl_s: ", "turn:127.0.0.1", 0, 0, 5000, 500, 0, NULL, 0, 0, 0},
      {"family: ", "turn:127.0.0.1", 600, 5, 5000, 500, 0, NULL, 0, 0, 0},
      {"timeout_ms: ", "turn:127.0.0.1", 600, 0, 0, 500, 0, NULL, 0, 0, 0},
      {"rto_ms: ", "turn:127.0.0.1", 600, 0, 5000, -1, 0, NULL, 0, 0, 0},
      {"separator: ", "turn:127.0.0.1", 600, 0, 5000, 500, 1, NULL, 0, 0, 0},
      {"expect_address: ", "turn:127.0.0.1", 600, 0, 5000, 500, 0, "127.0.0.300", 0, 0, 0},
      {"expect_port_end: ", "turn:127.0.0.1", 600, 0, 5000, 500, 0, NULL, 49200, 49152, 0},
      {"expect_port_start: ", "turn:127.0.0.1", 600, 0, 5000, 500, 0, NULL, 0, 49152, 0},
  };
  tf_probe_set *set = NULL;
  TF_OK_OR_FAIL(tf_probe_set_new(&set, 4));
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_probe_options o;
    TF_OK_OR_FAIL(tf_probe_options_init(&o, TF_PROBE_OPTIONS_VERSION));
    o.uri = cases[i].uri;
    o.secret = cases[i].no_secret ? "" : SECRET;
    o.ttl_s = cases[i].ttl;
    o.family = cases[i].family;
    o.timeout_ms = cases[i].timeout;
    o.rto_ms = cases[i].rto;
    o.separator = cases[i].separator;
    o.expect_address = cases[i].expect;
    o.expect_port_start = cases[i].start;
    o.expect_port_end = cases[i].end;
    tf_probe_result *r = (tf_probe_result *)0x1;
    ck_assert_int_eq(tf_probe_run(&r, &o), TF_EINVALID);
    const char *msg = tf_error_last()->message;
    ck_assert_msg(strncmp(msg, cases[i].field, strlen(cases[i].field)) == 0, "case %zu: \"%s\" does not start with %s",
                  i, msg, cases[i].field);
    ck_assert_msg(!strstr(msg, SECRET), "case %zu: the secret is in \"%s\"", i, msg);
    ck_assert_ptr_eq(r, (tf_probe_result *)0x1); /* untouched */
    ck_assert_int_eq(tf_probe_set_add(set, &o), TF_EINVALID);
    tf_allocation *a = (tf_allocation *)0x1;
    tf_probe_result *ar = (tf_probe_result *)0x1;
    ck_assert_int_eq(tf_allocation_new(&a, &ar, &o), TF_EINVALID);
    ck_assert_ptr_null(a);
    ck_assert_ptr_null(ar);
  }
  ck_assert_uint_eq(tf_probe_set_count(set), 0);
  ck_assert_int_eq(tf_probe_run(NULL, NULL), TF_EINVALID);
  tf_probe_options bad;
  TF_OK_OR_FAIL(tf_probe_options_init(&bad, TF_PROBE_OPTIONS_VERSION));
  bad.version = 99;
  bad.uri = "turn:127.0.0.1";
  bad.secret = SECRET;
  tf_probe_result *r = NULL;
  ck_assert_int_eq(tf_probe_run(&r, &bad), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "version"));
  ck_assert_int_eq(tf_probe_set_run(NULL, NULL, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_probe_set_run(set, NULL, NULL), TF_OK); /* nothing queued */
  tf_probe_set_free(set);
  tf_probe_set *none = (tf_probe_set *)0x1;
  ck_assert_int_eq(tf_probe_set_new(&none, 0), TF_EINVALID);
}
END_TEST

START_TEST(test_probe__results_are_null_safe_and_stages_named)
{
  static const char *const names[] = {"resolve",    "connect", "tls",  "allocate", "verify",
                                      "permission", "channel", "data", "release",  "done"};
  for (int i = 0; i < TF_PROBE_STAGE_COUNT; i++) ck_assert_str_eq(tf_probe_stage_name((tf_probe_stage)i), names[i]);
  ck_assert_str_eq(tf_probe_stage_name((tf_probe_stage)TF_PROBE_STAGE_COUNT), "unknown");
  ck_assert_str_eq(tf_probe_stage_name((tf_probe_stage)-1), "unknown");
  ck_assert_int_eq(tf_probe_result_ok(NULL), 0);
  ck_assert_int_eq(tf_probe_result_exit_code(NULL), 2);
  ck_assert_double_eq(tf_probe_result_rtt_ms(NULL, TF_PROBE_STAGE_ALLOCATE), -1.0);
  ck_assert_str_eq(tf_probe_result_message(NULL), "");
  ck_assert_int_eq(tf_probe_result_relayed(NULL, NULL, NULL), TF_EINVALID);
  char *json = NULL;
  ck_assert_int_eq(tf_probe_result_to_json(&json, NULL), TF_EINVALID);
  ck_assert_ptr_null(tf_probe_set_result(NULL, 0));
  ck_assert_uint_eq(tf_probe_set_count(NULL), 0);
  ck_assert_int_eq(tf_allocation_refresh(NULL), TF_EINVALID);
  ck_assert_int_eq(tf_allocation_release(NULL), TF_EINVALID);
  ck_assert_uint_eq(tf_allocation_lifetime(NULL), 0);
  tf_probe_result_free(NULL);
  tf_probe_set_free(NULL);
  tf_allocation_free(NULL);
}
END_TEST

/* Every byte (but NUL) at every place of an eight-byte chunk and across chunks, in each of the
 * three strings: the JSON parses back to the same bytes, with no raw control byte in it. */
START_TEST(test_probe__json_strings_escape_every_byte_anywhere)
{
  char text[64];
  for (int c = 1; c < 256; c++) {
    for (size_t pos = 0; pos < 20; pos++) {
      size_t n = 0;
      for (size_t i = 0; i < pos; i++) text[n++] = (char)('a' + i % 26);
      text[n++] = (char)c;
      for (size_t i = 0; i < pos % 11; i++) text[n++] = i % 2 ? '"' : 'Z';
      text[n] = '\0';
      tf_probe_result *r = tf_probe__result_new(text);
      ck_assert_ptr_nonnull(r);
      r->error_reason = strdup(text);
      r->message = strdup(text + pos);
      ck_assert(r->error_reason && r->message);
      r->rtt[TF_PROBE_STAGE_ALLOCATE] = 1.0005; /* half a microsecond rounds up: 1.001 */
      r->rtt[TF_PROBE_STAGE_RELEASE] = 12.5;
      char *json = NULL;
      ck_assert_int_eq(tf_probe_result_to_json(&json, r), TF_OK);
      for (const char *q = json; *q; q++) ck_assert_msg((unsigned char)*q >= 0x20, "raw byte 0x%02x in %s", *q, json);
      cJSON *j = cJSON_Parse(json);
      ck_assert_msg(j != NULL, "byte 0x%02x at %zu: not JSON: %s", c, pos, json);
      ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "uri")->valuestring, text);
      ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "errorReason")->valuestring, text);
      ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "message")->valuestring, text + pos);
      ck_assert_msg(strstr(json, "\"rttMs\":{\"allocate\":1.001,\"release\":12.5}"), "rttMs in %s", json);
      cJSON_Delete(j);
      tf_free(json);
      tf_probe_result_free(r);
    }
  }
}
END_TEST

/* ---- tests: against a real turnserver ---- */

START_TEST(test_probe__allocates_over_udp)
{
  pc_start_v4("pudp", 41, 3501, 0, 56000, 56049, NULL, 0);
  logbuf lb;
  memset(&lb, 0, sizeof(lb));
  tf_buf__init(&lb.text);
  tf_probe_options o = pc_opts("turn:127.0.0.41:3501");
  o.log_cb = pc_log;
  o.log_payload = &lb;
  o.log_level = TF_LOG_DEBUG;
  tf_probe_result *r = pc_run(&o);
  PC_EXPECT_OK(r);
  PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_DONE, "stage %d", tf_probe_result_stage(r));
  PC_CHECK(tf_probe_result_status(r) == TF_OK && tf_probe_result_error_code(r) == 0, "status/code");
  PC_CHECK(tf_probe_result_exit_code(r) == 0, "exit code");
  pc_expect_relayed(r, "127.0.0.41", &pc_relays[0]);
  tf_addr mapped, loop1;
  uint16_t mport = 0;
  PC_OK(tf_probe_result_mapped(r, &mapped, &mport));
  pc_addr(&loop1, "127.0.0.1");
  PC_CHECK(tf_addr_compare(&mapped, &loop1) == 0 && mport != 0, "mapped address is not this host's 127.0.0.1");
  PC_CHECK(tf_probe_result_lifetime(r) == 600, "lifetime %u (coturn grants 600 by default)",
           tf_probe_result_lifetime(r));
  PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_CONNECT) >= 0, "connect ran");
  PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_ALLOCATE) > 0, "allocate ran");
  PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_RELEASE) > 0, "release ran");
  PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_TLS) == -1, "no TLS over udp");
  PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_DATA) == -1, "no data check without peer_check");
  PC_CHECK(tf_probe_result_draining(r) == 0 && *tf_probe_result_message(r) == '\0', "draining or message");
  /* the JSON object: exactly the fields of docs/probe.md */
  char *json = NULL;
  PC_OK(tf_probe_result_to_json(&json, r));
  cJSON *j = cJSON_Parse(json);
  PC_CHECK(j != NULL, "not JSON: %s", json);
  static const char *const keys[] = {"uri",           "ok",          "stage",    "errorCode", "errorReason",
                                     "relayedAddress", "relayedPort", "mappedAddress", "lifetime",  "rttMs",
                                     "draining",      "message"};
  PC_CHECK(cJSON_GetArraySize(j) == 12, "%d fields in %s", cJSON_GetArraySize(j), json);
  for (size_t i = 0; i < 12; i++) PC_CHECK(cJSON_GetObjectItemCaseSensitive(j, keys[i]), "no %s in %s", keys[i], json);
  PC_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")), "ok");
  PC_CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(j, "stage")->valuestring, "done"), "stage");
  PC_CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(j, "relayedAddress")->valuestring, "127.0.0.41"), "address");
  PC_CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(j, "mappedAddress")->valuestring, "127.0.0.1"), "mapped");
  PC_CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(j, "uri")->valuestring, "turn:127.0.0.41:3501"), "uri");
  cJSON *rtt = cJSON_GetObjectItemCaseSensitive(j, "rttMs");
  PC_CHECK(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(rtt, "allocate")), "rttMs.allocate in %s", json);
  PC_CHECK(!cJSON_GetObjectItemCaseSensitive(rtt, "tls"), "rttMs.tls did not run: %s", json);
  PC_CHECK(!strstr(json, SECRET), "secret in the JSON");
  cJSON_Delete(j);
  tf_free(json);
  /* the log: debug lines, never the secret */
  PC_CHECK(lb.lines > 0 && lb.text.ptr && strstr(lb.text.ptr, "allocated 127.0.0.41:"), "log: %s",
           lb.text.ptr ? lb.text.ptr : "(none)");
  PC_CHECK(!strstr(lb.text.ptr, SECRET), "secret in the log");
  tf_buf__dispose(&lb.text, 0);
  tf_probe_result_free(r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__allocates_over_tcp)
{
  pc_start_v4("ptcp", 42, 3502, 0, 56050, 56099, NULL, 0);
  tf_probe_options o = pc_opts("turn:127.0.0.42:3502?transport=tcp");
  tf_probe_result *r = pc_run(&o);
  PC_EXPECT_OK(r);
  pc_expect_relayed(r, "127.0.0.42", &pc_relays[0]);
  PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_CONNECT) > 0, "connect ran");
  PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_RELEASE) > 0, "release ran");
  tf_probe_result_free(r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__allocates_over_tls_verifying_the_certificate)
{
  pc_start_v4("ptls", 43, 3503, 3553, 56100, 56149, NULL, PC_TLS);
  /* verified against the relay's own (self-signed) certificate, IP checked */
  tf_probe_options o = pc_opts("turns:127.0.0.43:3553");
  o.ca_file = pc_cert;
  tf_probe_result *r = pc_run(&o);
  PC_EXPECT_OK(r);
  pc_expect_relayed(r, "127.0.0.43", &pc_relays[0]);
  PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_TLS) > 0, "tls ran");
  tf_probe_result_free(r);
  /* insecure: no verification */
  o = pc_opts("turns:127.0.0.43:3553?transport=tcp");
  o.insecure = 1;
  r = pc_run(&o);
  PC_EXPECT_OK(r);
  tf_probe_result_free(r);
  /* another CA: refused at the TLS stage; the relay answered wrongly (exit 1) */
  char other_cert[1200], other_key[1200];
  snprintf(other_cert, sizeof(other_cert), "%s/other.pem", pc_tmpdir());
  snprintf(other_key, sizeof(other_key), "%s/other-key.pem", pc_tmpdir());
  const char *ips[] = {"127.0.0.43"};
  PC_CHECK(tf_ts_make_cert(other_cert, other_key, ips, 1) == 0, "cannot make a second certificate");
  o = pc_opts("turns:127.0.0.43:3553");
  o.ca_file = other_cert;
  r = pc_run(&o);
  PC_CHECK(!tf_probe_result_ok(r) && tf_probe_result_stage(r) == TF_PROBE_STAGE_TLS, "stage %s: %s",
           tf_probe_stage_name(tf_probe_result_stage(r)), tf_probe_result_message(r));
  PC_CHECK(tf_probe_result_status(r) == TF_ERROR && tf_probe_result_exit_code(r) == 1, "status %s",
           tf_error_name(tf_probe_result_status(r)));
  PC_CHECK(strstr(tf_probe_result_message(r), "certificate") != NULL, "message: %s", tf_probe_result_message(r));
  PC_CHECK(tf_probe_result_relayed(r, NULL, NULL) == TF_ENOTFOUND, "no allocation after a failed handshake");
  tf_probe_result_free(r);
  /* the system store does not know a self-signed test certificate */
  o = pc_opts("turns:127.0.0.43:3553");
  r = pc_run(&o);
  PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_TLS && tf_probe_result_exit_code(r) == 1, "system store: %s",
           tf_probe_result_message(r));
  tf_probe_result_free(r);
  /* a CA file that does not exist is bad input */
  o = pc_opts("turns:127.0.0.43:3553");
  o.ca_file = "/nonexistent/ca.pem";
  r = NULL;
  PC_CHECK(tf_probe_run(&r, &o) == TF_EINVALID && r == NULL, "missing CA file accepted");
  PC_CHECK(!strncmp(tf_error_last()->message, "ca_file: ", 9), "message: %s", tf_error_last()->message);
  /* a CA file that is not PEM fails at the TLS stage */
  char junk[1200];
  snprintf(junk, sizeof(junk), "%s/junk.pem", pc_tmpdir());
  tf_test_write(junk, "not a certificate\n", 0600);
  o.ca_file = junk;
  r = pc_run(&o);
  PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_TLS && tf_probe_result_exit_code(r) == 1, "junk CA: %s",
           tf_probe_result_message(r));
  tf_probe_result_free(r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__ipv6_relay_on_loopback)
{
  char *pool = pc_pool("pv6", "IPv6", 3504, 0, 56150, 56199, NULL);
  pc_start(pool, "::1", 0);
  free(pool);
  const char *uris[] = {"turn:[::1]:3504", "turn:[::1]:3504?transport=tcp"};
  for (size_t i = 0; i < 2; i++) {
    tf_probe_options o = pc_opts(uris[i]);
    o.family = TF_AF_INET6; /* REQUESTED-ADDRESS-FAMILY: coturn defaults to IPv4 */
    o.expect_address = "::1";
    tf_probe_result *r = pc_run(&o);
    PC_EXPECT_OK(r);
    pc_expect_relayed(r, "::1", &pc_relays[0]);
    tf_addr mapped, v6;
    PC_OK(tf_probe_result_mapped(r, &mapped, NULL));
    pc_addr(&v6, "::1");
    PC_CHECK(tf_addr_compare(&mapped, &v6) == 0, "mapped address is not ::1");
    tf_probe_result_free(r);
  }
  /* the relay has no IPv4 address: 440, not retried */
  tf_probe_options o = pc_opts("turn:[::1]:3504");
  o.family = TF_AF_INET;
  tf_probe_result *r = pc_run(&o);
  PC_CHECK(tf_probe_result_error_code(r) == 440 && tf_probe_result_stage(r) == TF_PROBE_STAGE_ALLOCATE,
           "code %d: %s", tf_probe_result_error_code(r), tf_probe_result_message(r));
  PC_CHECK(tf_probe_result_status(r) == TF_ERROR && tf_probe_result_exit_code(r) == 1, "status");
  tf_probe_result_free(r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

static int64_t pc_cli_count(void);

START_TEST(test_probe__peer_check_passes_over_udp_tcp_and_tls)
{
  pc_start_v4("ppeer", 44, 3505, 3555, 56200, 56249, "  peerPolicy: {denyPrivate: false}\n",
              PC_TLS | PC_LOOPBACK_PEERS | PC_CLI);
  const char *uris[] = {"turn:127.0.0.44:3505", "turn:127.0.0.44:3505?transport=tcp", "turns:127.0.0.44:3555"};
  for (size_t i = 0; i < 3; i++) {
    tf_probe_options o = pc_opts(uris[i]);
    o.peer_check = 1;
    o.ca_file = pc_cert;
    tf_probe_result *r = pc_run(&o);
    PC_EXPECT_OK(r);
    pc_expect_relayed(r, "127.0.0.44", &pc_relays[0]);
    PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_PERMISSION) > 0, "%s: permission ran", uris[i]);
    PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_CHANNEL) > 0, "%s: channel ran", uris[i]);
    PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_DATA) > 0, "%s: data ran", uris[i]);
    tf_probe_result_free(r);
  }
  /* one slot, so each probe runs in the memory of the one before, with and without the peer
   * check in turn, over UDP and TCP: a reused probe clears leg B only when the check opens it */
  tf_probe_set *set = NULL;
  PC_OK(tf_probe_set_new(&set, 1));
  for (int i = 0; i < 6; i++) {
    tf_probe_options o = pc_opts(uris[i % 3 == 1]);
    o.peer_check = i % 2 == 0;
    PC_OK(tf_probe_set_add(set, &o));
  }
  PC_OK(tf_probe_set_run(set, NULL, NULL));
  for (size_t i = 0; i < 6; i++) {
    const tf_probe_result *r = tf_probe_set_result(set, i);
    PC_EXPECT_OK(r);
    double data = tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_DATA);
    PC_CHECK(i % 2 == 0 ? data > 0 : data == -1, "probe %zu: data stage %g ms", i, data);
  }
  tf_probe_set_free(set);
  /* and every leg released what it allocated: none is left on the relay */
  int64_t deadline = tf_ts_now_ms() + 5000;
  while (pc_cli_count() != 0) {
    PC_CHECK(tf_ts_now_ms() < deadline, "allocations left on the relay after the probes");
    tf_ts_sleep_ms(100);
  }
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__peer_check_fails_when_the_relay_forbids_the_peer)
{
  /* loopback peers are denied (coturn's default and the pool's denyPrivate):
   * CreatePermission gets 403, which is not "draining" */
  pc_start_v4("pdeny", 45, 3506, 0, 56250, 56299, NULL, 0);
  tf_probe_options o = pc_opts("turn:127.0.0.45:3506");
  o.peer_check = 1;
  tf_probe_result *r = pc_run(&o);
  PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_PERMISSION, "stage %s: %s",
           tf_probe_stage_name(tf_probe_result_stage(r)), tf_probe_result_message(r));
  PC_CHECK(tf_probe_result_error_code(r) == 403 && tf_probe_result_draining(r) == 0, "code %d draining %d",
           tf_probe_result_error_code(r), tf_probe_result_draining(r));
  PC_CHECK(tf_probe_result_exit_code(r) == 1, "exit code");
  tf_probe_result_free(r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__wrong_secret_gets_401)
{
  pc_expect_credential_errors();
  pc_start_v4("pauth", 46, 3507, 0, 56300, 56349, NULL, 0);
  const char *uris[] = {"turn:127.0.0.46:3507", "turn:127.0.0.46:3507?transport=tcp"};
  for (size_t i = 0; i < 2; i++) {
    tf_probe_options o = pc_opts(uris[i]);
    o.secret = WRONG_SECRET;
    tf_probe_result *r = pc_run(&o);
    PC_CHECK(tf_probe_result_error_code(r) == 401 && tf_probe_result_status(r) == TF_EAUTH, "%s: code %d status %s",
             uris[i], tf_probe_result_error_code(r), tf_error_name(tf_probe_result_status(r)));
    PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_ALLOCATE && tf_probe_result_exit_code(r) == 1, "stage/exit");
    PC_CHECK(!strstr(tf_probe_result_message(r), WRONG_SECRET) && !strstr(tf_probe_result_message(r), SECRET),
             "a secret in the message");
    tf_probe_result_free(r);
  }
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__expired_username_gets_401)
{
  pc_expect_credential_errors();
  pc_start_v4("pexp", 47, 3508, 0, 56350, 56399, NULL, 0);
  tf_probe_options o = pc_opts("turn:127.0.0.47:3508");
  o.now = (int64_t)time(NULL) - 7200; /* expired an hour and fifty minutes ago */
  o.ttl_s = 600;
  tf_probe_result *r = pc_run(&o);
  PC_CHECK(tf_probe_result_error_code(r) == 401 && tf_probe_result_status(r) == TF_EAUTH, "code %d: %s",
           tf_probe_result_error_code(r), tf_probe_result_message(r));
  tf_probe_result_free(r);
  /* the same clock with a long enough lifetime still works: now is what decides */
  o.ttl_s = 86400;
  r = pc_run(&o);
  PC_EXPECT_OK(r);
  tf_probe_result_free(r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* Probe until an allocation succeeds (a released port comes back ~1 s after
 * Refresh(0); an allocation never released would hold it for 600 s). */
static void pc_expect_ports_come_back(const char *uri)
{
  int64_t deadline = tf_ts_now_ms() + 10000;
  for (;;) {
    tf_probe_options o = pc_opts(uri);
    tf_probe_result *r = pc_run(&o);
    int ok = tf_probe_result_ok(r);
    int code = tf_probe_result_error_code(r);
    tf_probe_result_free(r);
    if (ok) return;
    PC_CHECK(code == 508, "expected 508 while the ports are held, got %d", code);
    PC_CHECK(tf_ts_now_ms() < deadline, "the released ports did not come back within 10 s");
    tf_ts_sleep_ms(250);
  }
}

START_TEST(test_probe__full_port_range_gets_508)
{
  pc_start_v4("pfull", 48, 3509, 0, 56400, 56403, NULL, 0);
  const char *uri = "turn:127.0.0.48:3509";
  tf_allocation *held[4] = {NULL};
  unsigned seen = 0;
  for (int i = 0; i < 4; i++) {
    tf_probe_options o = pc_opts(uri);
    tf_probe_result *r = NULL;
    PC_OK(tf_allocation_new(&held[i], &r, &o));
    PC_EXPECT_OK(r);
    tf_addr a;
    uint16_t port = 0;
    PC_OK(tf_allocation_relayed(held[i], &a, &port));
    PC_CHECK(port >= 56400 && port <= 56403 && !(seen & (1u << (port - 56400))), "port %u", port);
    seen |= 1u << (port - 56400);
    tf_probe_result_free(r);
  }
  PC_CHECK(seen == 0xf, "the four allocations hold the four ports");
  /* the fifth: 508, from a new allocation and from a plain probe */
  tf_probe_options o = pc_opts(uri);
  tf_allocation *fifth = (tf_allocation *)0x1;
  tf_probe_result *r = NULL;
  tf_err rc = tf_allocation_new(&fifth, &r, &o);
  PC_CHECK(rc == TF_ERROR && fifth == NULL && r != NULL, "tf_allocation_new -> %d", rc);
  PC_CHECK(tf_probe_result_error_code(r) == 508 && tf_probe_result_stage(r) == TF_PROBE_STAGE_ALLOCATE,
           "code %d", tf_probe_result_error_code(r));
  tf_probe_result_free(r);
  r = pc_run(&o);
  PC_CHECK(tf_probe_result_error_code(r) == 508 && tf_probe_result_status(r) == TF_ERROR, "code %d",
           tf_probe_result_error_code(r));
  PC_CHECK(tf_probe_result_exit_code(r) == 1 && !tf_probe_result_draining(r), "exit/draining");
  tf_probe_result_free(r);
  /* released by tf_allocation_free: the ports come back */
  for (int i = 0; i < 4; i++) tf_allocation_free(held[i]);
  pc_expect_ports_come_back(uri);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__user_quota_gets_486)
{
  pc_start_v4("pquota", 49, 3510, 0, 56450, 56499, "  quota: {userQuota: 1}\n", 0);
  const char *uri = "turn:127.0.0.49:3510";
  tf_probe_options o = pc_opts(uri);
  tf_allocation *a = NULL;
  PC_OK(tf_allocation_new(&a, NULL, &o));
  tf_probe_result *r = pc_run(&o);
  PC_CHECK(tf_probe_result_error_code(r) == 486 && tf_probe_result_status(r) == TF_ERROR, "code %d: %s",
           tf_probe_result_error_code(r), tf_probe_result_message(r));
  PC_CHECK(tf_probe_result_exit_code(r) == 1, "exit");
  tf_probe_result_free(r);
  /* the quota is per user */
  o.user = "another-user";
  r = pc_run(&o);
  PC_EXPECT_OK(r);
  tf_probe_result_free(r);
  PC_OK(tf_allocation_release(a));
  tf_allocation_free(a);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__nobody_listening_is_unreachable_or_timeout)
{
  /* nothing listens on 127.0.0.50:3511 (UDP: ICMP port unreachable; TCP: RST) */
  const char *uris[] = {"turn:127.0.0.50:3511", "turn:127.0.0.50:3511?transport=tcp", "turns:127.0.0.50:3511"};
  for (size_t i = 0; i < 3; i++) {
    tf_probe_options o = pc_opts(uris[i]);
    o.timeout_ms = 2000;
    tf_probe_result *r = pc_run(&o); /* returning at all is the point: bounded by the timeout */
    tf_err st = tf_probe_result_status(r);
    PC_CHECK(st == TF_ENET || st == TF_ETIMEOUT, "%s: status %s", uris[i], tf_error_name(st));
    PC_CHECK(tf_probe_result_exit_code(r) == 3 && !tf_probe_result_ok(r), "%s: exit code", uris[i]);
    PC_CHECK(tf_probe_result_relayed(r, NULL, NULL) == TF_ENOTFOUND, "no relayed address");
    char *json = NULL;
    PC_OK(tf_probe_result_to_json(&json, r));
    cJSON *j = cJSON_Parse(json);
    PC_CHECK(j && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "ok")) &&
                 cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "relayedAddress")) &&
                 cJSON_GetArraySize(j) == 12,
             "JSON of a failure: %s", json);
    cJSON_Delete(j);
    tf_free(json);
    tf_probe_result_free(r);
  }
  /* a set's UDP probe (on the ring where there is one): loopback always answers with ICMP, so
   * the receive fails with "connection refused" */
  tf_probe_options refused = pc_opts(uris[0]);
  refused.timeout_ms = 2000;
  tf_probe_set *set;
  tf_probe_result *r = pc_run_as(&refused, 1, &set);
  PC_CHECK(tf_probe_result_status(r) == TF_ENET && strstr(tf_probe_result_message(r), "connection refused"),
           "set: status %s: %s", tf_error_name(tf_probe_result_status(r)), tf_probe_result_message(r));
  pc_result_free(r, set);
  /* a connect that fails (a link-local address without a scope): the same result from
   * tf_probe_run() and from a set on each of its I/O paths, the ring's socket made in the ring */
  for (int path = 0; path < 4; path++) {
    tf_probe_options o = pc_opts("turn:[fe80::1]:3478");
    if (path > 0) pc_set_io(pc_io_modes[path - 1]);
    r = pc_run_as(&o, path > 0, &set);
    pc_set_io(NULL);
    PC_CHECK(tf_probe_result_status(r) == TF_ENET && tf_probe_result_stage(r) == TF_PROBE_STAGE_CONNECT &&
                 strcmp(tf_probe_result_message(r), "cannot connect to [fe80::1]:3478 over udp: Invalid argument") == 0,
             "path %d: stage %s, status %s: %s", path, tf_probe_stage_name(tf_probe_result_stage(r)),
             tf_error_name(tf_probe_result_status(r)), tf_probe_result_message(r));
    pc_result_free(r, set);
  }
  /* a UDP port that takes datagrams and never answers: retransmissions, then a timeout (epoll,
   * then a set's ring) */
  int fd = pc_silent_udp("127.0.0.50", 3512);
  for (int as_set = 0; as_set < 2; as_set++) {
    tf_probe_options o = pc_opts("turn:127.0.0.50:3512");
    o.timeout_ms = 1000;
    o.rto_ms = 100; /* sends at 0, 100, 300, 700 ms */
    r = pc_run_as(&o, as_set, &set);
    PC_CHECK(tf_probe_result_status(r) == TF_ETIMEOUT && tf_probe_result_exit_code(r) == 3, "set %d: status %s: %s",
             as_set, tf_error_name(tf_probe_result_status(r)), tf_probe_result_message(r));
    PC_CHECK(strstr(tf_probe_result_message(r), "timed out after 4 sends") != NULL, "set %d: message: %s", as_set,
             tf_probe_result_message(r));
    PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_ALLOCATE, "stage");
    pc_result_free(r, set);
    /* the four Allocates arrived, each one the same bytes (a retransmission keeps its tid) */
    uint8_t first[2048], buf[2048];
    ssize_t n0 = recv(fd, first, sizeof(first), MSG_DONTWAIT);
    PC_CHECK(n0 >= 20, "set %d: no Allocate arrived", as_set);
    int same = 1;
    for (int i = 1; i < 4; i++) {
      ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      PC_CHECK(n > 0, "set %d: only %d datagrams arrived", as_set, i);
      same &= n == n0 && memcmp(buf, first, (size_t)n) == 0;
    }
    PC_CHECK(same, "set %d: a retransmission differs from the first send", as_set);
    PC_CHECK(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0, "set %d: more than four datagrams", as_set);
  }
  close(fd);
}
END_TEST

/* A fake relay that answers what it is sent, badly, in one of these ways. */
enum hostile {
  H_ECHO,        /* a copy of the request: its transaction id, but a request where a response is due */
  H_GARBAGE,     /* 50 bytes of noise */
  H_SHORT,       /* 10 bytes */
  H_WRONG_TID,   /* a well-formed 401 for another transaction */
  H_HUGE,        /* a 60 KB datagram */
  H_FF_REASON,   /* a well-formed 486 whose reason is 763 bytes of 0xFF */
  H_LONG_CHALLENGE, /* 401 with a 200-byte REALM and a 100-byte NONCE; 486 once a request carries both back */
  H_TCP_UNRELATED, /* TCP: a stream of well-formed responses to other transactions */
  H_FLOOD_CHALLENGE /* H_GARBAGE 100 times, then H_LONG_CHALLENGE's answer */
};
#define PC_FLOOD 100

/* The answer to the request in @p req (its transaction id at byte 8). */
static size_t pc_hostile_answer(int mode, const uint8_t *req, size_t req_len, uint8_t *out, size_t size)
{
  if (mode == H_ECHO) {
    memcpy(out, req, req_len < size ? req_len : size);
    return req_len < size ? req_len : size;
  }
  if (mode == H_GARBAGE || mode == H_SHORT) {
    size_t n = mode == H_GARBAGE ? 50 : 10;
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(0xC3 ^ (i * 37));
    return n;
  }
  if (mode == H_HUGE) {
    memset(out, 0, size);
    out[1] = 0x01;
    memcpy(out + 4, "\x21\x12\xA4\x42", 4);
    memcpy(out + 8, req + 8, TF_STUN_TID_SIZE);
    return 60000;
  }
  uint8_t tid[TF_STUN_TID_SIZE];
  memcpy(tid, req + 8, sizeof(tid));
  if (mode == H_LONG_CHALLENGE || mode == H_FLOOD_CHALLENGE) {
    char realm[201], nonce[101];
    memset(realm, 'r', 200);
    memset(nonce, 'n', 100);
    realm[200] = nonce[100] = '\0';
    tf_stun_msg *q = NULL;
    const uint8_t *v1 = NULL, *v2 = NULL;
    size_t n1 = 0, n2 = 0;
    int echoed = tf_stun_decode(&q, req, req_len) == TF_OK && tf_stun_msg_find(q, TF_STUN_ATTR_REALM, &v1, &n1) == 0 &&
                 tf_stun_msg_find(q, TF_STUN_ATTR_NONCE, &v2, &n2) == 0 && n1 == 200 && !memcmp(v1, realm, 200) &&
                 n2 == 100 && !memcmp(v2, nonce, 100);
    tf_stun_msg_free(q);
    tf_stun_msg *m = NULL;
    size_t len = 0;
    if (tf_stun_msg_new(&m, TF_STUN_ALLOCATE, TF_STUN_ERROR, tid) < 0) return 0;
    uint8_t v[4] = {0, 0, 4, echoed ? 86 : 1};
    tf_stun_msg_add(m, TF_STUN_ATTR_ERROR_CODE, v, sizeof(v));
    tf_stun_msg_add(m, TF_STUN_ATTR_REALM, realm, 200);
    tf_stun_msg_add(m, TF_STUN_ATTR_NONCE, nonce, 100);
    tf_stun_msg_add_fingerprint(m);
    const uint8_t *bytes = tf_stun_msg_bytes(m, &len);
    if (len <= size) memcpy(out, bytes, len);
    tf_stun_msg_free(m);
    return len <= size ? len : 0;
  }
  if (mode != H_FF_REASON) tid[0] ^= 0x5A; /* another transaction */
  tf_stun_msg *m = NULL;
  size_t len = 0;
  if (tf_stun_msg_new(&m, TF_STUN_ALLOCATE, mode == H_TCP_UNRELATED ? TF_STUN_SUCCESS : TF_STUN_ERROR, tid) < 0)
    return 0;
  if (mode == H_FF_REASON) {
    uint8_t v[4 + 763];
    memset(v, 0, 4);
    v[2] = 4;
    v[3] = 86;
    memset(v + 4, 0xFF, 763);
    tf_stun_msg_add(m, TF_STUN_ATTR_ERROR_CODE, v, sizeof(v));
  } else if (mode == H_WRONG_TID) {
    uint8_t v[4] = {0, 0, 4, 1};
    tf_stun_msg_add(m, TF_STUN_ATTR_ERROR_CODE, v, sizeof(v));
    tf_stun_msg_add(m, TF_STUN_ATTR_REALM, "x", 1);
    tf_stun_msg_add(m, TF_STUN_ATTR_NONCE, "y", 1);
  }
  tf_stun_msg_add_fingerprint(m);
  const uint8_t *bytes = tf_stun_msg_bytes(m, &len);
  if (len <= size) memcpy(out, bytes, len);
  tf_stun_msg_free(m);
  return len <= size ? len : 0;
}

static pid_t pc_hostile_server(int mode, const char *ip, uint16_t port)
{
  int tcp = mode == H_TCP_UNRELATED;
  int fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, ip, &sa.sin_addr);
  PC_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && (!tcp || listen(fd, 8) == 0),
           "bind %s:%u: %s", ip, port, strerror(errno));
  pid_t parent = getpid();
  pid_t pid = fork();
  PC_CHECK(pid >= 0, "fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    static uint8_t out[65536];
    for (;;) {
      uint8_t req[4096];
      if (tcp) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        ssize_t n = recv(c, req, sizeof(req), 0);
        /* answer with unrelated messages until the client hangs up */
        for (int i = 0; n >= 20 && i < 100000; i++) {
          size_t len = pc_hostile_answer(mode, req, (size_t)n, out, sizeof(out));
          if (len == 0 || send(c, out, len, MSG_NOSIGNAL) < 0) break;
          usleep(20000);
        }
        close(c);
        continue;
      }
      struct sockaddr_storage from;
      socklen_t fl = sizeof(from);
      ssize_t n = recvfrom(fd, req, sizeof(req), 0, (struct sockaddr *)&from, &fl);
      if (n < 20) continue;
      for (int i = 0; mode == H_FLOOD_CHALLENGE && i < PC_FLOOD; i++) {
        size_t len = pc_hostile_answer(H_GARBAGE, req, (size_t)n, out, sizeof(out));
        sendto(fd, out, len, 0, (struct sockaddr *)&from, fl);
      }
      size_t len = pc_hostile_answer(mode, req, (size_t)n, out, sizeof(out));
      if (len) sendto(fd, out, len, 0, (struct sockaddr *)&from, fl);
    }
  }
  close(fd);
  return pid;
}

START_TEST(test_probe__malformed_answers_are_dropped_and_reported)
{
  pc_children[0] = pc_hostile_server(H_ECHO, "127.0.0.59", 3599);
  logbuf lb;
  memset(&lb, 0, sizeof(lb));
  tf_buf__init(&lb.text);
  tf_probe_options o = pc_opts("turn:127.0.0.59:3599");
  o.timeout_ms = 800;
  o.rto_ms = 100;
  o.log_cb = pc_log;
  o.log_payload = &lb;
  o.log_level = TF_LOG_DEBUG;
  tf_probe_result *r = pc_run(&o);
  PC_CHECK(tf_probe_result_status(r) == TF_EPROTO && tf_probe_result_exit_code(r) == 1, "status %s: %s",
           tf_error_name(tf_probe_result_status(r)), tf_probe_result_message(r));
  PC_CHECK(strstr(tf_probe_result_message(r), "NOT_A_RESPONSE") != NULL, "message: %s", tf_probe_result_message(r));
  PC_CHECK(lb.text.ptr && strstr(lb.text.ptr, "dropped an answer to Allocate"), "log: %s",
           lb.text.ptr ? lb.text.ptr : "(none)");
  tf_buf__dispose(&lb.text, 0);
  tf_probe_result_free(r);
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__wrong_address_or_range_fails_verify)
{
  pc_start_v4("pverify", 51, 3513, 0, 56500, 56549, NULL, 0);
  tf_probe_options o = pc_opts("turn:127.0.0.51:3513");
  o.expect_address = "127.0.0.52";
  tf_probe_result *r = pc_run(&o);
  PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_VERIFY && tf_probe_result_status(r) == TF_ERROR, "stage %s",
           tf_probe_stage_name(tf_probe_result_stage(r)));
  PC_CHECK(!strcmp(tf_probe_result_message(r), "relayed address 127.0.0.51 is not the expected 127.0.0.52"),
           "message: %s", tf_probe_result_message(r));
  PC_CHECK(tf_probe_result_exit_code(r) == 1 && tf_probe_result_error_code(r) == 0, "exit/code");
  PC_CHECK(tf_probe_result_relayed(r, NULL, NULL) == 0, "the relayed address is still reported");
  tf_probe_result_free(r);
  o = pc_opts("turn:127.0.0.51:3513");
  o.expect_port_start = 49152;
  o.expect_port_end = 49200;
  r = pc_run(&o);
  uint16_t port = 0;
  PC_OK(tf_probe_result_relayed(r, NULL, &port));
  char want[128];
  snprintf(want, sizeof(want), "relayed port %u is outside 49152-49200", port);
  PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_VERIFY && !strcmp(tf_probe_result_message(r), want),
           "message: %s", tf_probe_result_message(r));
  tf_probe_result_free(r);
  /* the right expectations pass; an IPv4-mapped spelling is not the same address */
  o = pc_opts("turn:127.0.0.51:3513");
  o.expect_address = "127.0.0.51";
  o.expect_port_start = 56500;
  o.expect_port_end = 56549;
  r = pc_run(&o);
  PC_EXPECT_OK(r);
  tf_probe_result_free(r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__allocation_refresh_and_release)
{
  /* a 2 s nonce lifetime (appended to the rendered config) makes the refresh meet 438 */
  char *pool = pc_pool("palloc", "IPv4", 3519, 0, 56800, 56849, NULL);
  pc_start_conf(pool, "127.0.0.57", 0, "stale-nonce=2\n");
  free(pool);
  const char *uris[] = {"turn:127.0.0.57:3519", "turn:127.0.0.57:3519?transport=tcp"};
  for (size_t i = 0; i < 2; i++) {
    tf_probe_options o = pc_opts(uris[i]);
    o.lifetime_s = 1200;
    tf_allocation *a = NULL;
    tf_probe_result *r = NULL;
    PC_OK(tf_allocation_new(&a, &r, &o));
    PC_EXPECT_OK(r);
    PC_CHECK(tf_probe_result_lifetime(r) == 1200 && tf_allocation_lifetime(a) == 1200, "lifetime %u",
             tf_allocation_lifetime(a));
    PC_CHECK(tf_probe_result_rtt_ms(r, TF_PROBE_STAGE_RELEASE) == -1, "a held allocation is not released");
    tf_probe_result_free(r);
    tf_addr addr, want;
    uint16_t port = 0;
    PC_OK(tf_allocation_relayed(a, &addr, &port));
    pc_addr(&want, "127.0.0.57");
    PC_CHECK(tf_addr_compare(&addr, &want) == 0 && port >= 56800 && port <= 56849, "relayed");
    PC_OK(tf_allocation_refresh(a));
    PC_CHECK(tf_allocation_lifetime(a) == 1200, "lifetime after refresh %u", tf_allocation_lifetime(a));
    tf_ts_sleep_ms(3000); /* the nonce goes stale: 438, retried with the new one */
    PC_OK(tf_allocation_refresh(a));
    PC_CHECK(tf_allocation_lifetime(a) == 1200, "lifetime after the 438 retry %u", tf_allocation_lifetime(a));
    PC_OK(tf_allocation_release(a));
    PC_OK(tf_allocation_release(a)); /* twice is fine */
    PC_CHECK(tf_allocation_refresh(a) == TF_ENOTFOUND, "refresh after release");
    tf_allocation_free(a);
  }
  pc_stop_all();
  pc_cleanup();
}
END_TEST

typedef struct stopper {
  size_t calls;
  size_t stop_after;
} stopper;

static int pc_stop_cb(size_t index, const tf_probe_result *r, void *payload)
{
  (void)index;
  (void)r;
  stopper *s = payload;
  return ++s->calls >= s->stop_after;
}

/* The allocation count through the CLI (`pu`), and the drain of each version:
 * coturn >= 4.6.3 takes `drain` (new Allocates get 403, which the probe
 * reports as draining; held allocations keep refreshing; the process exits by
 * itself, status 0, once they are gone), older ones `cc total-quota -1` (new
 * Allocates get 486; held ones keep refreshing; the runtime stops it). */
/* One request to the relay's CLI through the library's own client (relayctl). */
static tf_err pc_relay_cli(tf_relayctl_op op, int64_t *count)
{
  tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
  req.op = op;
  req.port = PC_CLI_PORT;
  req.password = PC_CLI_PASSWORD;
  req.timeout_ms = 5000;
  req.owner_pid = pc_relays[0].pid; /* the password goes only to this relay's own listener */
  return tf_relayctl_run(count, NULL, &req);
}

static int64_t pc_cli_count(void)
{
  int64_t n = -1;
  PC_CHECK(pc_relay_cli(TF_RELAYCTL_COUNT, &n) == 0, "CLI pu: %s", tf_error_last()->message);
  return n;
}

/* The CLI opens a moment after the TURN listeners: its first count. */
static int64_t pc_cli_open(void)
{
  int64_t deadline = tf_ts_now_ms() + 5000;
  int64_t n = -1;
  while (pc_relay_cli(TF_RELAYCTL_COUNT, &n) < 0) {
    PC_CHECK(tf_ts_now_ms() < deadline, "coturn's CLI did not open: %s", tf_error_last()->message);
    tf_ts_sleep_ms(100);
  }
  return n;
}

START_TEST(test_probe__cli_counts_and_drain_per_version)
{
  pc_start_v4("pdrain", 40, 3521, 0, 56900, 56949, NULL, PC_CLI);
  PC_CHECK(pc_cli_open() == 0, "a fresh relay counts allocations");
  int64_t deadline;
  tf_probe_options o = pc_opts("turn:127.0.0.40:3521");
  tf_allocation *held[2] = {NULL, NULL};
  const char *uris[] = {"turn:127.0.0.40:3521", "turn:127.0.0.40:3521?transport=tcp"};
  for (size_t i = 0; i < 2; i++) {
    tf_probe_options h = pc_opts(uris[i]);
    tf_probe_result *r = NULL;
    PC_OK(tf_allocation_new(&held[i], &r, &h));
    PC_EXPECT_OK(r);
    tf_probe_result_free(r);
  }
  /* coturn's relay threads report a session to the CLI's thread by message: under load, a moment later */
  int64_t counted = -1;
  deadline = tf_ts_now_ms() + 5000;
  while ((counted = pc_cli_count()) != 2 && tf_ts_now_ms() < deadline) tf_ts_sleep_ms(100);
  PC_CHECK(counted == 2, "%" PRId64 " allocations counted with 2 held", counted);

  int drain = (tf_coturn_features(pc_version) & TF_COTURN_DRAIN) != 0;
  PC_CHECK(tf_relayctl_drain_op(pc_version) == (drain ? TF_RELAYCTL_DRAIN : TF_RELAYCTL_REFUSE), "drain op");
  PC_CHECK(pc_relay_cli(tf_relayctl_drain_op(pc_version), NULL) == 0, "CLI drain: %s", tf_error_last()->message);
  /* new Allocates are refused: at once with drain, within 5 s with the quota (the auth thread copies it) */
  int want = drain ? 403 : 486, code = 0;
  deadline = tf_ts_now_ms() + 10000;
  tf_probe_result *r = NULL;
  for (;;) {
    r = pc_run(&o);
    code = tf_probe_result_error_code(r);
    if (code == want || tf_ts_now_ms() > deadline) break;
    tf_probe_result_free(r);
    tf_ts_sleep_ms(250);
  }
  PC_CHECK(code == want, "coturn %s after the drain: code %d (%s), want %d", pc_version_text, code,
           tf_probe_result_message(r), want);
  PC_CHECK(tf_probe_result_stage(r) == TF_PROBE_STAGE_ALLOCATE, "refused at stage %s",
           tf_probe_stage_name(tf_probe_result_stage(r)));
  PC_CHECK(tf_probe_result_draining(r) == (want == 403), "draining %d for %d", tf_probe_result_draining(r), code);
  PC_CHECK(tf_probe_result_exit_code(r) == 1, "exit code %d", tf_probe_result_exit_code(r));
  tf_probe_result_free(r);
  /* the held allocations keep working */
  for (size_t i = 0; i < 2; i++) PC_OK(tf_allocation_refresh(held[i]));
  /* `pu` counts sessions: a refused Allocate's session lingers a few seconds (4.6.1), then only the held two */
  deadline = tf_ts_now_ms() + 15000;
  while ((counted = pc_cli_count()) != 2 && tf_ts_now_ms() < deadline) tf_ts_sleep_ms(250);
  PC_CHECK(counted == 2, "%" PRId64 " allocations counted while draining with 2 held", counted);
  PC_OK(tf_allocation_release(held[0]));
  deadline = tf_ts_now_ms() + 5000;
  while (pc_cli_count() != 1) {
    PC_CHECK(tf_ts_now_ms() < deadline, "the released allocation is still counted");
    tf_ts_sleep_ms(100);
  }
  PC_CHECK(pc_relays[0].pid > 0 && waitpid(pc_relays[0].pid, NULL, WNOHANG) == 0, "coturn exited with an allocation held");
  PC_OK(tf_allocation_refresh(held[1]));
  PC_OK(tf_allocation_release(held[1]));
  for (size_t i = 0; i < 2; i++) tf_allocation_free(held[i]);
  if (drain) {
    /* it exits by itself, cleanly, once the last allocation is gone */
    int status = 0;
    deadline = tf_ts_now_ms() + 40000;
    while (waitpid(pc_relays[0].pid, &status, WNOHANG) != pc_relays[0].pid) {
      PC_CHECK(tf_ts_now_ms() < deadline, "a drained coturn %s still runs 40 s after its last allocation",
               pc_version_text);
      tf_ts_sleep_ms(100);
    }
    pc_relays[0].pid = 0;
    PC_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "drained coturn: status 0x%x", status);
  } else {
    deadline = tf_ts_now_ms() + 5000;
    while (pc_cli_count() != 0) {
      PC_CHECK(tf_ts_now_ms() < deadline, "released allocations still counted");
      tf_ts_sleep_ms(100);
    }
  }
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__set_callback_can_stop_the_set)
{
  pc_start_v4("pstop", 58, 3520, 0, 56850, 56899, NULL, 0);
  tf_probe_set *set = NULL;
  PC_OK(tf_probe_set_new(&set, 2));
  tf_probe_options o = pc_opts("turn:127.0.0.58:3520");
  for (int i = 0; i < 10; i++) PC_OK(tf_probe_set_add(set, &o));
  PC_CHECK(tf_probe_set_count(set) == 10, "count");
  PC_CHECK(tf_probe_set_result(set, 0) == NULL, "no result before the run");
  stopper s = {0, 3};
  tf_err rc = tf_probe_set_run(set, pc_stop_cb, &s);
  PC_CHECK(rc == TF_EUSER, "run -> %d", rc);
  PC_CHECK(s.calls == 3, "the callback ran %zu times", s.calls);
  size_t done = 0;
  for (size_t i = 0; i < 10; i++) {
    const tf_probe_result *r = tf_probe_set_result(set, i);
    if (!r) continue;
    done++;
    PC_EXPECT_OK(r);
  }
  PC_CHECK(done >= 3 && done < 10, "%zu results", done);
  PC_CHECK(tf_probe_set_result(set, 10) == NULL, "out of range");
  tf_probe_set_free(set);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

typedef struct counter {
  size_t ok, failed, calls;
  size_t resource, unreachable, other; /* failures: TF_ERESOURCE with exit 2, TF_ENET, the rest */
  size_t stop_after;                   /* stop the set after this many results (0: never) */
  char first_failure[512];
} counter;

static int pc_count_cb(size_t index, const tf_probe_result *r, void *payload)
{
  (void)index;
  counter *c = payload;
  c->calls++;
  tf_err st = tf_probe_result_status(r);
  if (tf_probe_result_ok(r)) {
    c->ok++;
  } else {
    if (st == TF_ERESOURCE && tf_probe_result_exit_code(r) == 2) c->resource++;
    else if (st == TF_ENET) c->unreachable++;
    else c->other++;
    if (c->failed++ == 0)
      snprintf(c->first_failure, sizeof(c->first_failure), "stage %s %s code %d: %s",
               tf_probe_stage_name(tf_probe_result_stage(r)), tf_error_name(st), tf_probe_result_error_code(r),
               tf_probe_result_message(r));
  }
  return c->stop_after && c->calls >= c->stop_after;
}

START_TEST(test_probe__two_thousand_cycles_at_concurrency_64)
{
  pc_start_v4("pload", 52, 3514, 0, 57000, 58999, NULL, 0);
  tf_probe_set *set = NULL;
  PC_OK(tf_probe_set_new(&set, 64));
  tf_probe_options o = pc_opts("turn:127.0.0.52:3514");
  o.timeout_ms = 20000;
  for (int i = 0; i < 2000; i++) PC_OK(tf_probe_set_add(set, &o));
  counter c;
  memset(&c, 0, sizeof(c));
  PC_OK(tf_probe_set_run(set, pc_count_cb, &c));
  PC_CHECK(c.calls == 2000 && c.ok == 2000 && c.failed == 0, "%zu ok, %zu failed; first: %s", c.ok, c.failed,
           c.first_failure);
  for (size_t i = 0; i < 2000; i++) {
    const tf_probe_result *r = tf_probe_set_result(set, i);
    PC_CHECK(r && tf_probe_result_ok(r), "result %zu", i);
    uint16_t port = 0;
    PC_OK(tf_probe_result_relayed(r, NULL, &port));
    PC_CHECK(port >= 57000 && port <= 58999, "port %u", port);
  }
  tf_probe_set_free(set);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* ---- the CLI ---- */

static const char *pc_cli_path(void)
{
  static char path[4096];
  const char *build = getenv("TF_BUILD_DIR");
  PC_CHECK(build != NULL, "TF_BUILD_DIR is not set (run through ctest)");
  snprintf(path, sizeof(path), "%s/tools/turnfleet-probe/turnfleet-probe", build);
  PC_CHECK(access(path, X_OK) == 0, "%s is not built (TF_BUILD_TOOLS=ON)", path);
  return path;
}

static const char *pc_write_secret(const char *secret)
{
  snprintf(pc_secret_file, sizeof(pc_secret_file), "%s/secret", pc_tmpdir());
  char text[256];
  snprintf(text, sizeof(text), "%s\n", secret);
  tf_test_write(pc_secret_file, text, 0600);
  return pc_secret_file;
}

/* Start the CLI with @p args (NULL-terminated); stdout on *out_fd (if not NULL),
 * else both outputs into files of the test dir. */
static pid_t pc_cli_spawn_to(const char *const *args, const char *env_name, const char *env_value, int *out_fd,
                             int *err_fd, const char *err_tty);

static pid_t pc_cli_spawn(const char *const *args, const char *env_name, const char *env_value, int *out_fd,
                          int *err_fd)
{
  return pc_cli_spawn_to(args, env_name, env_value, out_fd, err_fd, NULL);
}

/* pc_cli_spawn(), with stderr on the terminal @p err_tty when not NULL (then *err_fd reads nothing). */
static pid_t pc_cli_spawn_to(const char *const *args, const char *env_name, const char *env_value, int *out_fd,
                             int *err_fd, const char *err_tty)
{
  const char *bin = pc_cli_path();
  char *argv[32];
  size_t n = 0;
  argv[n++] = (char *)"turnfleet-probe";
  for (size_t i = 0; args[i] && n < 31; i++) argv[n++] = (char *)args[i];
  argv[n] = NULL;
  int op[2], ep[2];
  PC_CHECK(pipe(op) == 0 && pipe(ep) == 0, "pipe");
  pid_t parent = getpid();
  pid_t pid = fork();
  PC_CHECK(pid >= 0, "fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(op[1], 1);
    dup2(ep[1], 2);
    if (err_tty) {
      int tty = open(err_tty, O_RDWR | O_NOCTTY);
      if (tty < 0) _exit(127);
      dup2(tty, 2); /* stderr is a terminal */
    }
    close(op[0]);
    close(op[1]);
    close(ep[0]);
    close(ep[1]);
    if (env_name) setenv(env_name, env_value, 1);
    execv(bin, argv);
    _exit(127);
  }
  close(op[1]);
  close(ep[1]);
  *out_fd = op[0];
  *err_fd = ep[0];
  for (size_t i = 0; i < PC_MAX_CHILDREN; i++) {
    if (pc_children[i] == 0) {
      pc_children[i] = pid;
      break;
    }
  }
  return pid;
}

static void pc_forget_child(pid_t pid)
{
  for (size_t i = 0; i < PC_MAX_CHILDREN; i++)
    if (pc_children[i] == pid) pc_children[i] = 0;
}

typedef struct cli_out {
  int code;
  tf_buf out, err;
} cli_out;

/* Read both pipes to EOF (60 s at most), reap the child; the exit code in r->code. */
static void pc_cli_collect(cli_out *r, pid_t pid, int ofd, int efd)
{
  tf_buf__init(&r->out);
  tf_buf__init(&r->err);
  int64_t deadline = tf_ts_now_ms() + 60000;
  int open_fds = 2;
  struct pollfd p[2] = {{ofd, POLLIN, 0}, {efd, POLLIN, 0}};
  while (open_fds > 0) {
    PC_CHECK(tf_ts_now_ms() < deadline, "turnfleet-probe did not finish within 60 s");
    if (poll(p, 2, 200) <= 0) continue;
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(p[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        close(p[i].fd);
        p[i].fd = -1;
        open_fds--;
        continue;
      }
      tf_buf__putn(i == 0 ? &r->out : &r->err, buf, (size_t)n);
    }
  }
  int status = 0;
  PC_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
  pc_forget_child(pid);
  r->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!r->out.ptr) tf_buf__puts(&r->out, "");
  if (!r->err.ptr) tf_buf__puts(&r->err, "");
}

static void pc_cli(cli_out *r, const char *env_name, const char *env_value, const char *const *args)
{
  int ofd, efd;
  pid_t pid = pc_cli_spawn(args, env_name, env_value, &ofd, &efd);
  pc_cli_collect(r, pid, ofd, efd);
  /* whatever happened, the secrets never reach the output */
  PC_CHECK(!strstr(r->out.ptr, SECRET) && !strstr(r->err.ptr, SECRET), "the secret reached the output");
  PC_CHECK(!strstr(r->out.ptr, WRONG_SECRET) && !strstr(r->err.ptr, WRONG_SECRET), "a secret reached the output");
}

static void pc_cli_free(cli_out *r)
{
  tf_buf__dispose(&r->out, 0);
  tf_buf__dispose(&r->err, 0);
}

#define CLI(r, ...)                                             \
  do {                                                          \
    const char *cli__args[] = {__VA_ARGS__, NULL};              \
    pc_cli((r), NULL, NULL, cli__args);                         \
  } while (0)

/* The JSON object of a one-line output. */
static cJSON *pc_json_line(const char *text)
{
  cJSON *j = cJSON_Parse(text);
  PC_CHECK(j != NULL && cJSON_IsObject(j), "not one JSON object: %s", text);
  return j;
}

START_TEST(test_probe__cli_usage_errors_exit_2)
{
  const char *secret = pc_write_secret(SECRET);
  static const char *const empty_env = "TF_PROBE_EMPTY_SECRET";
  const struct {
    const char *args[10];
    const char *what; /* "turnfleet-probe: <what>: " */
  } cases[] = {
      {{"--secret-file", NULL}, "--secret-file"},
      {{"--uri", "turn:127.0.0.53:3515", NULL}, "--secret-file/--secret-env"},
      {{"--uri", "turn:127.0.0.53:3515", "--secret-file", "x", "--secret-env", "Y", NULL},
       "--secret-file/--secret-env"},
      {{"--secret-file", "x", NULL}, "--uri"},
      {{"--uri", "stun:127.0.0.53", "--secret-file", "x", NULL}, "--uri"},
      {{"--uri", "turn:127.0.0.53", "--secret=" SECRET, NULL}, "--secret"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", SECRET, NULL}, "arguments"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "/nonexistent/secret", NULL}, "--secret-file"},
      {{"--uri", "turn:127.0.0.53", "--secret-env", "TF_PROBE_EMPTY_SECRET", NULL}, "--secret-env"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--ca-file", "c", "--insecure", NULL},
       "--ca-file/--insecure"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--family", "ipv5", NULL}, "--family"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--expect-address", "nope", NULL}, "--expect-address"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--expect-port-range", "9-1", NULL}, "--expect-port-range"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--concurrency", "4", NULL}, "--concurrency"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--hold", "0", NULL}, "--hold"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--count", "2", "--hold", "1", NULL}, "--hold/--count"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--timeout-ms", "-5", NULL}, "--timeout-ms"},
      {{"--uri", "turn:127.0.0.53", "--secret-file", "x", "--bogus", NULL}, "--bogus"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *args[11];
    size_t n = 0;
    for (; cases[i].args[n]; n++) args[n] = !strcmp(cases[i].args[n], "x") ? secret : cases[i].args[n];
    args[n] = NULL;
    cli_out r;
    pc_cli(&r, empty_env, "", args);
    char want[128];
    snprintf(want, sizeof(want), "turnfleet-probe: %s: ", cases[i].what);
    PC_CHECK(r.code == 2, "case %zu: exit %d, stderr: %s", i, r.code, r.err.ptr);
    PC_CHECK(!strncmp(r.err.ptr, want, strlen(want)), "case %zu: stderr \"%s\" does not start with \"%s\"", i,
             r.err.ptr, want);
    PC_CHECK(r.out.ptr[0] == '\0', "case %zu: stdout: %s", i, r.out.ptr);
    pc_cli_free(&r);
  }
  cli_out r;
  CLI(&r, "--help");
  PC_CHECK(r.code == 0 && strstr(r.out.ptr, "--secret-file F | --secret-env VAR"), "--help: %s", r.out.ptr);
  pc_cli_free(&r);
}
END_TEST

START_TEST(test_probe__cli_exit_codes_json_and_secret_sources)
{
  pc_expect_credential_errors();
  pc_start_v4("pcli", 53, 3515, 0, 56550, 56599, NULL, 0);
  const char *secret = pc_write_secret(SECRET);
  char wrong[1200];
  snprintf(wrong, sizeof(wrong), "%s/wrong", pc_tmpdir());
  tf_test_write(wrong, WRONG_SECRET "\n", 0600);
  const char *uri = "turn:127.0.0.53:3515";
  cli_out r;

  /* 0: human output, one line */
  CLI(&r, "--uri", uri, "--secret-file", secret);
  PC_CHECK(r.code == 0, "exit %d: %s %s", r.code, r.out.ptr, r.err.ptr);
  PC_CHECK(!strncmp(r.out.ptr, "ok turn:127.0.0.53:3515 stage=done code=0 relayed=127.0.0.53:", 61), "out: %s",
           r.out.ptr);
  PC_CHECK(strchr(r.out.ptr, '\n') == r.out.ptr + strlen(r.out.ptr) - 1, "one line: %s", r.out.ptr);
  pc_cli_free(&r);

  /* 0: --json, the secret from the environment */
  const char *args_env[] = {"--uri", uri, "--secret-env", "TF_PROBE_TEST_SECRET", "--json", NULL};
  pc_cli(&r, "TF_PROBE_TEST_SECRET", SECRET, args_env);
  PC_CHECK(r.code == 0, "exit %d: %s %s", r.code, r.out.ptr, r.err.ptr);
  cJSON *j = pc_json_line(r.out.ptr);
  static const char *const keys[] = {"uri",           "ok",          "stage",    "errorCode", "errorReason",
                                     "relayedAddress", "relayedPort", "mappedAddress", "lifetime",  "rttMs",
                                     "draining",      "message"};
  for (size_t i = 0; i < 12; i++)
    PC_CHECK(cJSON_GetObjectItemCaseSensitive(j, keys[i]), "no %s: %s", keys[i], r.out.ptr);
  PC_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")), "ok");
  PC_CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(j, "relayedAddress")->valuestring, "127.0.0.53"), "address");
  double port = cJSON_GetObjectItemCaseSensitive(j, "relayedPort")->valuedouble;
  PC_CHECK(port >= 56550 && port <= 56599, "port %g", port);
  PC_CHECK(cJSON_GetObjectItemCaseSensitive(j, "errorCode")->valuedouble == 0, "errorCode");
  PC_CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "rttMs")), "rttMs");
  PC_CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "draining")), "draining");
  cJSON_Delete(j);
  pc_cli_free(&r);

  /* 1: wrong secret (401) */
  CLI(&r, "--uri", uri, "--secret-file", wrong, "--json");
  PC_CHECK(r.code == 1, "exit %d", r.code);
  j = pc_json_line(r.out.ptr);
  PC_CHECK(cJSON_GetObjectItemCaseSensitive(j, "errorCode")->valuedouble == 401, "code: %s", r.out.ptr);
  PC_CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(j, "stage")->valuestring, "allocate"), "stage: %s", r.out.ptr);
  cJSON_Delete(j);
  pc_cli_free(&r);

  /* 1: the checks, named */
  CLI(&r, "--uri", uri, "--secret-file", secret, "--expect-address", "127.0.0.54");
  PC_CHECK(r.code == 1 && strstr(r.out.ptr, "stage=verify") &&
               strstr(r.out.ptr, "relayed address 127.0.0.53 is not the expected 127.0.0.54"),
           "exit %d: %s", r.code, r.out.ptr);
  pc_cli_free(&r);
  CLI(&r, "--uri", uri, "--secret-file", secret, "--expect-port-range", "49152-49200", "--json");
  PC_CHECK(r.code == 1 && strstr(r.out.ptr, "is outside 49152-49200"), "exit %d: %s", r.code, r.out.ptr);
  pc_cli_free(&r);
  CLI(&r, "--uri", uri, "--secret-file", secret, "--expect-address", "127.0.0.53", "--expect-port-range",
      "56550-56599", "--family", "ipv4");
  PC_CHECK(r.code == 0, "exit %d: %s", r.code, r.out.ptr);
  pc_cli_free(&r);

  /* 3: nobody listens there */
  CLI(&r, "--uri", "turn:127.0.0.53:3599?transport=tcp", "--secret-file", secret, "--json", "--timeout-ms", "2000");
  PC_CHECK(r.code == 3, "exit %d: %s", r.code, r.out.ptr);
  j = pc_json_line(r.out.ptr);
  PC_CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "ok")), "ok: %s", r.out.ptr);
  cJSON_Delete(j);
  pc_cli_free(&r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* Read lines from @p fd until @p want of them arrived (15 s at most). */
static void pc_read_lines(int fd, tf_buf *out, int want)
{
  int64_t deadline = tf_ts_now_ms() + 15000;
  int lines = 0;
  while (lines < want) {
    PC_CHECK(tf_ts_now_ms() < deadline, "only %d of %d lines within 15 s: %s", lines, want,
             out->ptr ? out->ptr : "");
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    PC_CHECK(n > 0, "turnfleet-probe closed its output after %d lines: %s", lines, out->ptr ? out->ptr : "");
    tf_buf__putn(out, buf, (size_t)n);
    for (ssize_t i = 0; i < n; i++) lines += buf[i] == '\n';
  }
}

/* Hold N allocations with the CLI, stop it with SIGTERM, check it released them. */
static void pc_cli_hold(const char *uri, const char *hold, int n, const char *other_uri)
{
  const char *secret = pc_write_secret(SECRET);
  const char *args[] = {"--uri", uri, "--secret-file", secret, "--hold", hold, "--json", NULL};
  int ofd, efd;
  pid_t pid = pc_cli_spawn(args, NULL, NULL, &ofd, &efd);
  tf_buf lines;
  tf_buf__init(&lines);
  pc_read_lines(ofd, &lines, n);
  /* each line an allocation, each on its own port */
  int ports[8] = {0};
  const char *line = lines.ptr;
  for (int i = 0; i < n; i++) {
    const char *nl = strchr(line, '\n');
    char *one = tf_strndup__(line, (size_t)(nl - line));
    cJSON *j = pc_json_line(one);
    PC_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")), "allocation %d: %s", i, one);
    ports[i] = (int)cJSON_GetObjectItemCaseSensitive(j, "relayedPort")->valuedouble;
    for (int k = 0; k < i; k++) PC_CHECK(ports[k] != ports[i], "port %d twice", ports[i]);
    cJSON_Delete(j);
    free(one);
    line = nl + 1;
  }
  tf_buf__dispose(&lines, 0);
  /* the range is full while they are held: the next Allocate gets 508 (the CLI exits 1) */
  cli_out r;
  CLI(&r, "--uri", other_uri, "--secret-file", secret, "--json");
  PC_CHECK(r.code == 1, "exit %d: %s", r.code, r.out.ptr);
  cJSON *j = pc_json_line(r.out.ptr);
  PC_CHECK(cJSON_GetObjectItemCaseSensitive(j, "errorCode")->valuedouble == 508, "code: %s", r.out.ptr);
  cJSON_Delete(j);
  pc_cli_free(&r);
  /* SIGTERM: release, exit 0 */
  PC_CHECK(kill(pid, SIGTERM) == 0, "kill");
  cli_out rest;
  pc_cli_collect(&rest, pid, ofd, efd);
  PC_CHECK(rest.code == 0, "exit %d after SIGTERM: %s", rest.code, rest.err.ptr);
  PC_CHECK(!strstr(rest.out.ptr, SECRET) && !strstr(rest.err.ptr, SECRET), "secret in the output");
  pc_cli_free(&rest);
  pc_expect_ports_come_back(other_uri);
}

START_TEST(test_probe__cli_hold_two_then_sigterm_releases)
{
  pc_start_v4("phold", 54, 3516, 0, 56600, 56601, NULL, 0);
  pc_cli_hold("turn:127.0.0.54:3516", "2", 2, "turn:127.0.0.54:3516");
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__cli_hold_fills_a_four_port_range_then_508)
{
  pc_start_v4("phold4", 56, 3518, 0, 56750, 56753, NULL, 0);
  pc_cli_hold("turn:127.0.0.56:3518?transport=tcp", "4", 4, "turn:127.0.0.56:3518");
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* The acceptance run itself, through the CLI: --count 2000 --concurrency 64, zero failures. */
START_TEST(test_probe__cli_count_2000_at_concurrency_64)
{
  pc_start_v4("pcload", 56, 3518, 0, 57000, 58999, NULL, 0);
  const char *secret = pc_write_secret(SECRET);
  cli_out r;
  CLI(&r, "--uri", "turn:127.0.0.56:3518", "--secret-file", secret, "--count", "2000", "--concurrency", "64",
      "--timeout-ms", "20000", "--json");
  PC_CHECK(r.code == 0, "exit %d: %s", r.code, r.err.ptr);
  const char *last = strstr(r.out.ptr, "{\"summary\"");
  PC_CHECK(last != NULL, "no summary line");
  cJSON *j = pc_json_line(last);
  cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "summary");
  PC_CHECK(cJSON_GetObjectItemCaseSensitive(s, "allocations")->valuedouble == 2000, "allocations: %s", last);
  cJSON *failures = cJSON_GetObjectItemCaseSensitive(s, "failures");
  PC_CHECK(cJSON_IsObject(failures) && cJSON_GetArraySize(failures) == 0, "failures: %s", last);
  cJSON_Delete(j);
  pc_cli_free(&r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__cli_count_prints_a_summary)
{
  pc_start_v4("pcount", 55, 3517, 0, 56650, 56749, NULL, 0);
  const char *secret = pc_write_secret(SECRET);
  cli_out r;
  CLI(&r, "--uri", "turn:127.0.0.55:3517", "--secret-file", secret, "--count", "50", "--concurrency", "8", "--json");
  PC_CHECK(r.code == 0, "exit %d: %s", r.code, r.err.ptr);
  int lines = 0;
  cJSON *summary = NULL;
  for (char *line = r.out.ptr; *line;) {
    char *nl = strchr(line, '\n');
    PC_CHECK(nl != NULL, "unterminated line");
    *nl = '\0';
    cJSON *j = pc_json_line(line);
    if (cJSON_GetObjectItemCaseSensitive(j, "summary")) {
      summary = j;
    } else {
      PC_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")), "line %d: %s", lines, line);
      cJSON *rtt = cJSON_GetObjectItemCaseSensitive(j, "rttMs");
      /* the host is an address: nothing to resolve */
      PC_CHECK(cJSON_GetObjectItemCaseSensitive(rtt, "resolve")->valuedouble == 0, "line %d: %s", lines, line);
      cJSON_Delete(j);
      lines++;
    }
    line = nl + 1;
  }
  PC_CHECK(lines == 50 && summary != NULL, "%d probe lines, summary %p", lines, (void *)summary);
  cJSON *s = cJSON_GetObjectItemCaseSensitive(summary, "summary");
  PC_CHECK(cJSON_GetObjectItemCaseSensitive(s, "allocations")->valuedouble == 50, "allocations");
  cJSON *failures = cJSON_GetObjectItemCaseSensitive(s, "failures");
  PC_CHECK(cJSON_IsObject(failures) && cJSON_GetArraySize(failures) == 0, "failures");
  PC_CHECK(cJSON_GetObjectItemCaseSensitive(s, "elapsedS")->valuedouble > 0, "elapsedS");
  PC_CHECK(cJSON_GetObjectItemCaseSensitive(s, "allocationsPerSecond")->valuedouble > 0, "allocationsPerSecond");
  cJSON_Delete(summary);
  pc_cli_free(&r);
  /* human summary */
  CLI(&r, "--uri", "turn:127.0.0.55:3517?transport=tcp", "--secret-file", secret, "--count", "5", "--concurrency",
      "2");
  PC_CHECK(r.code == 0 && strstr(r.out.ptr, "summary: 5 probes, 5 allocations, 0 failures, "), "exit %d: %s",
           r.code, r.out.ptr);
  pc_cli_free(&r);
  /* failures by kind, and the worst exit code */
  CLI(&r, "--uri", "turn:127.0.0.55:3599?transport=tcp", "--secret-file", secret, "--count", "3", "--concurrency",
      "2", "--json");
  PC_CHECK(r.code == 3, "exit %d: %s", r.code, r.out.ptr);
  PC_CHECK(strstr(r.out.ptr, "\"allocations\":0,\"failures\":{\"unreachable\":3}"), "summary: %s", r.out.ptr);
  pc_cli_free(&r);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* Results written into a pipe are held in a 64 KiB block, but none for much more than 100 ms:
 * against a relay that never answers, each probe of a --count run ends at its 300 ms timeout,
 * and the first lines arrive long before the 200 or so that fill a block (a minute). */
START_TEST(test_probe__cli_slow_results_are_not_held_back)
{
  int fd = pc_silent_udp("127.0.0.60", 3597);
  const char *secret = pc_write_secret(SECRET);
  const char *args[] = {"--uri", "turn:127.0.0.60:3597", "--secret-file", secret, "--count", "1000",
                        "--concurrency", "1", "--timeout-ms", "300", "--json", NULL};
  int ofd, efd;
  pid_t pid = pc_cli_spawn(args, NULL, NULL, &ofd, &efd);
  tf_buf lines;
  tf_buf__init(&lines);
  pc_read_lines(ofd, &lines, 2);
  PC_CHECK(strstr(lines.ptr, "\"ok\":false") != NULL, "%s", lines.ptr);
  tf_buf__dispose(&lines, 0);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  pc_forget_child(pid);
  close(ofd);
  close(efd);
  close(fd);
  pc_cleanup();
}
END_TEST

/* ---- issue 10 and 15: options versions, hostile answers, resources, streaming, scale, CLI ---- */

START_TEST(test_probe__v1_options_are_read_only_up_to_their_version)
{
  /* a version-1 struct: its fields end after log_level; what follows (here its tail padding,
   * where version 2 put user_numbered) is not the caller's to vouch for: filled with 0xAB. It
   * sits at the very end of a page with a page nobody may touch after it. */
  size_t v1_end = offsetof(tf_probe_options, log_level) + sizeof(tf_log_level);
  size_t v1 = (v1_end + 7) & ~(size_t)7;
  long pg = sysconf(_SC_PAGESIZE);
  uint8_t *pages = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert(pages != MAP_FAILED);
  ck_assert_int_eq(mprotect(pages + pg, (size_t)pg, PROT_NONE), 0);
  uint8_t *raw = pages + pg - v1;
  memset(raw, 0xAB, v1);
  tf_probe_options *o = (tf_probe_options *)(void *)raw;
  ck_assert_int_eq(tf_probe_options_init(o, 1), 0);
  for (size_t i = v1_end; i < v1; i++) ck_assert_uint_eq(raw[i], 0xAB); /* init wrote version 1 only */
  ck_assert_uint_eq(o->version, 1);
  ck_assert_int_eq(o->timeout_ms, 5000);
  o->uri = "turn:127.0.0.60:3590";
  o->secret = SECRET;
  tf_probe_set *set = NULL;
  ck_assert_int_eq(tf_probe_set_new(&set, 1), 0);
  ck_assert_int_eq(tf_probe_set_add(set, o), 0);
  ck_assert_int_eq(tf_probe_set_add_repeated(set, o, 3), 0);
  ck_assert_uint_eq(tf_probe_set_count(set), 4);
  tf_probe_set_free(set);
  /* a version-2 struct is read whole: user_numbered must be 0 or 1 */
  tf_probe_options v2;
  ck_assert_int_eq(tf_probe_options_init(&v2, 2), 0);
  v2.uri = "turn:127.0.0.60:3590";
  v2.secret = SECRET;
  v2.user_numbered = 7;
  tf_probe_result *r = NULL;
  ck_assert_int_eq(tf_probe_run(&r, &v2), TF_EINVALID);
  ck_assert(strstr(tf_error_last()->message, "user_numbered") != NULL);
  ck_assert_int_eq(munmap(pages, (size_t)pg * 2), 0);
}
END_TEST

/* 1 when @p s is valid UTF-8 (cJSON takes any byte; JSON does not). */
static int pc_valid_utf8(const char *s)
{
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    size_t n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 && *p >= 0xC2 ? 2 : (*p & 0xF0) == 0xE0 ? 3
                             : (*p & 0xF8) == 0xF0 && *p <= 0xF4 ? 4
                                                                 : 0;
    if (!n) return 0;
    for (size_t i = 1; i < n; i++)
      if ((p[i] & 0xC0) != 0x80) return 0;
    p += n;
  }
  return 1;
}

START_TEST(test_probe__unusable_answers_fail_with_the_last_reason)
{
  static const struct {
    int mode;
    const char *uri;
    const char *why;
  } cases[] = {
      {H_GARBAGE, "turn:127.0.0.60:3590", "neither STUN"},
      {H_SHORT, "turn:127.0.0.60:3591", "shorter than the 20-byte header"},
      {H_WRONG_TID, "turn:127.0.0.60:3592", "TRANSACTION_ID_MISMATCH"},
      {H_HUGE, "turn:127.0.0.60:3593", "a datagram of 60000 bytes"},
      {H_TCP_UNRELATED, "turn:127.0.0.60:3595?transport=tcp", "TRANSACTION_ID_MISMATCH"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    pc_children[0] =
        pc_hostile_server(cases[i].mode, "127.0.0.60", (uint16_t)(3590 + (cases[i].mode == H_TCP_UNRELATED ? 5 : i)));
    for (int as_set = 0; as_set < 2; as_set++) { /* epoll, then a set's io_uring */
      tf_probe_options o = pc_opts(cases[i].uri);
      o.timeout_ms = 700;
      o.rto_ms = 100;
      tf_probe_set *set;
      tf_probe_result *r = pc_run_as(&o, as_set, &set);
      /* answers came, none usable: the relay answered wrongly (exit 1), not "no answer" (exit 3) */
      PC_CHECK(tf_probe_result_status(r) == TF_EPROTO && tf_probe_result_exit_code(r) == 1,
               "case %zu (set %d): status %s, exit %d: %s", i, as_set, tf_error_name(tf_probe_result_status(r)),
               tf_probe_result_exit_code(r), tf_probe_result_message(r));
      PC_CHECK(strstr(tf_probe_result_message(r), "only unusable answers") &&
                   strstr(tf_probe_result_message(r), cases[i].why),
               "case %zu (set %d): message: %s", i, as_set, tf_probe_result_message(r));
      pc_result_free(r, set);
    }
    tf_ts_reap(&pc_children[0]);
  }
  pc_cleanup();
}
END_TEST

/* A realm and a nonce too long for the leg's own buffers (64 bytes) go to the heap and come
 * back byte for byte: the fake relay answers 486, not 401 again, only when they do. Then the same
 * behind a hundred datagrams of noise ahead of every answer: more than a set of one has receive
 * buffers in its ring (16), so the socket's receive ends for want of a buffer and is armed again,
 * and the answers behind the noise still arrive. */
START_TEST(test_probe__long_realm_and_nonce_are_sent_back_whole)
{
  static const struct {
    int mode;
    const char *uri;
    int rto_ms; /* the flood: an answer from behind it, not from a retransmission */
  } cases[] = {{H_LONG_CHALLENGE, "turn:127.0.0.60:3596", 500}, {H_FLOOD_CHALLENGE, "turn:127.0.0.60:3597", 1000}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    pc_children[0] = pc_hostile_server(cases[i].mode, "127.0.0.60", (uint16_t)(3596 + i));
    for (int as_set = 0; as_set < 2; as_set++) {
      tf_probe_options o = pc_opts(cases[i].uri);
      o.timeout_ms = 4000;
      o.rto_ms = cases[i].rto_ms;
      tf_probe_set *set;
      tf_probe_result *r = pc_run_as(&o, as_set, &set);
      PC_CHECK(tf_probe_result_error_code(r) == 486, "case %zu, set %d: code %d: %s", i, as_set,
               tf_probe_result_error_code(r), tf_probe_result_message(r));
      pc_result_free(r, set);
    }
    tf_ts_reap(&pc_children[0]);
  }
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__any_reason_bytes_give_valid_json)
{
  pc_children[0] = pc_hostile_server(H_FF_REASON, "127.0.0.60", 3594);
  tf_probe_options o = pc_opts("turn:127.0.0.60:3594");
  o.timeout_ms = 2000;
  tf_probe_result *r = pc_run(&o);
  PC_CHECK(tf_probe_result_error_code(r) == 486 && tf_probe_result_exit_code(r) == 1, "code %d: %s",
           tf_probe_result_error_code(r), tf_probe_result_message(r));
  const char *reason = tf_probe_result_error_reason(r);
  PC_CHECK(strlen(reason) == 763 * 4 && !strncmp(reason, "\\xFF\\xFF", 8), "reason kept as text: %.40s", reason);
  char *json = NULL;
  PC_OK(tf_probe_result_to_json(&json, r));
  PC_CHECK(pc_valid_utf8(json), "the JSON is not UTF-8");
  cJSON *j = cJSON_Parse(json);
  PC_CHECK(j && cJSON_GetObjectItemCaseSensitive(j, "errorReason") &&
               !strcmp(cJSON_GetObjectItemCaseSensitive(j, "errorReason")->valuestring, reason),
           "JSON: %.200s", json);
  cJSON_Delete(j);
  tf_free(json);
  tf_probe_result_free(r);
  /* and the CLI's output */
  const char *secret = pc_write_secret(SECRET);
  cli_out c;
  CLI(&c, "--uri", "turn:127.0.0.60:3594", "--secret-file", secret, "--json");
  PC_CHECK(c.code == 1 && pc_valid_utf8(c.out.ptr), "exit %d, output UTF-8: %d", c.code, pc_valid_utf8(c.out.ptr));
  cJSON_Delete(pc_json_line(c.out.ptr));
  pc_cli_free(&c);
  pc_cleanup();
}
END_TEST

START_TEST(test_probe__out_of_descriptors_is_local_not_unreachable)
{
  pc_start_v4("pfds", 64, 3523, 0, 56750, 56849, NULL, 0);
  /* room for about 8 sockets, for 32 probes at once */
  int high = open("/dev/null", O_RDONLY);
  PC_CHECK(high >= 0, "open");
  close(high);
  struct rlimit saved, low;
  PC_CHECK(getrlimit(RLIMIT_NOFILE, &saved) == 0, "getrlimit");
  low = saved;
  low.rlim_cur = (rlim_t)high + 10;
  PC_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit: %s", strerror(errno));
  tf_probe_set *set = NULL;
  PC_OK(tf_probe_set_new(&set, 32));
  tf_probe_options o = pc_opts("turn:127.0.0.64:3523");
  PC_OK(tf_probe_set_add_repeated(set, &o, 32));
  counter c;
  memset(&c, 0, sizeof(c));
  tf_err rc = tf_probe_set_run(set, pc_count_cb, &c);
  setrlimit(RLIMIT_NOFILE, &saved);
  tf_probe_set_free(set);
  PC_OK(rc);
  PC_CHECK(c.calls == 32 && c.resource > 0 && c.unreachable == 0 && c.other == 0,
           "%zu results: %zu ok, %zu out of resources, %zu unreachable, %zu other; first: %s", c.calls, c.ok,
           c.resource, c.unreachable, c.other, c.first_failure);
  PC_CHECK(strstr(c.first_failure, "stage connect TF_ERESOURCE") &&
               strstr(c.first_failure, "local resources exhausted"),
           "first: %s",
           c.first_failure);
  /* the CLI: a soft limit it may raise, then a hard limit it may not */
  const char *secret = pc_write_secret(SECRET);
  low.rlim_cur = 64;
  PC_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
  cli_out r;
  CLI(&r, "--uri", "turn:127.0.0.64:3523", "--secret-file", secret, "--count", "90", "--concurrency", "90",
      "--quiet", "--json");
  PC_CHECK(r.code == 0 && strstr(r.out.ptr, "\"allocations\":90,\"failures\":{}"), "raised: exit %d: %s %s", r.code,
           r.out.ptr, r.err.ptr);
  pc_cli_free(&r);
  struct rlimit hard = {256, 256};
  PC_CHECK(setrlimit(RLIMIT_NOFILE, &hard) == 0, "setrlimit: %s", strerror(errno));
  CLI(&r, "--uri", "turn:127.0.0.64:3523", "--secret-file", secret, "--count", "6000", "--concurrency", "5000");
  PC_CHECK(r.code == 2 && strstr(r.err.ptr, "turnfleet-probe: --concurrency: 5000 probes at once need 5032 file "
                                            "descriptors; the limit is 256"),
           "refused: exit %d: %s", r.code, r.err.ptr);
  PC_CHECK(r.out.ptr[0] == '\0', "nothing ran: %s", r.out.ptr);
  pc_cli_free(&r);
  /* a limit the set fits exactly (its sockets, the epoll and ring descriptors): a ring closes
   * sockets at its next submit, and a probe started before that takes a closed one's place
   * (the ring submits its closes when socket() meets EMFILE), so no probe fails; a ring that
   * makes the sockets holds them in a file table within the limit */
  tf_ts_sleep_ms(2500); /* the relay's 100 ports back from the runs above */
  for (int m = 0; m < 3; m++) {
    pc_set_io(pc_io_modes[m]);
    int lowest = dup(0);
    close(lowest);
    int open_above = 0; /* descriptors already open above the lowest free one */
    for (int fd = lowest; fd < lowest + 64; fd++) open_above += fcntl(fd, F_GETFD) >= 0;
    struct rlimit before;
    PC_CHECK(getrlimit(RLIMIT_NOFILE, &before) == 0, "getrlimit");
    low = before; /* the hard limit as the CLI part left it */
    low.rlim_cur = (rlim_t)(lowest + open_above + 2 + 8);
    PC_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit: %s", strerror(errno));
    PC_OK(tf_probe_set_new(&set, 8));
    PC_OK(tf_probe_set_add_repeated(set, &o, 30)); /* 2 x 30 of the relay's 100 ports */
    memset(&c, 0, sizeof(c));
    rc = tf_probe_set_run(set, pc_count_cb, &c);
    setrlimit(RLIMIT_NOFILE, &before);
    pc_set_io(NULL);
    tf_probe_set_free(set);
    PC_OK(rc);
    PC_CHECK(c.calls == 30 && c.ok == 30, "exact limit, I/O %s: %zu ok of %zu; first: %s",
             pc_io_modes[m] ? pc_io_modes[m] : "default", c.ok, c.calls, c.first_failure);
  }
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* The CLI's VmRSS once it printed 50 results of a --count COUNT run (then stopped by PID). */
static long pc_cli_rss_kb(const char *secret, const char *count)
{
  const char *args[] = {"--uri", "turn:127.0.0.63:3522", "--secret-file", secret, "--count", count,
                        "--concurrency", "8", "--json", NULL};
  int ofd, efd;
  pid_t pid = pc_cli_spawn(args, NULL, NULL, &ofd, &efd);
  FILE *out = fdopen(ofd, "r");
  PC_CHECK(out != NULL, "fdopen");
  char line[4096];
  int lines = 0;
  while (lines < 50 && fgets(line, sizeof(line), out)) lines++;
  char path[64], status[4096];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  tf_ts_file_head(path, status, sizeof(status));
  const char *rss = strstr(status, "VmRSS:");
  long kb = rss ? strtol(rss + 6, NULL, 10) : -1;
  kill(pid, SIGTERM);
  fclose(out);
  close(efd);
  waitpid(pid, NULL, 0);
  pc_forget_child(pid);
  PC_CHECK(lines == 50, "--count %s: only %d result lines", count, lines);
  return kb;
}

START_TEST(test_probe__count_streams_in_constant_memory)
{
  pc_start_v4("pstream", 63, 3522, 0, 40000, 43999, NULL, 0);
  /* a trillion probes queued: nothing is built for them up front */
  tf_probe_set *set = NULL;
  PC_OK(tf_probe_set_new(&set, 8));
  tf_probe_options o = pc_opts("turn:127.0.0.63:3522");
  PC_OK(tf_probe_set_add_repeated(set, &o, 1000000000000ull));
  counter c;
  memset(&c, 0, sizeof(c));
  c.stop_after = 40;
  PC_CHECK(tf_probe_set_run(set, pc_count_cb, &c) == TF_EUSER, "the callback stops it: %s",
           tf_error_last()->message);
  PC_CHECK(c.calls == 40 && c.ok == 40, "%zu calls, %zu ok: %s", c.calls, c.ok, c.first_failure);
  PC_CHECK(tf_probe_set_result(set, 3) == NULL, "repeated results are not kept");
  tf_probe_set_free(set);
  /* the CLI: with --count 1000000 its memory, once probes run, is that of --count 10000 (which must still
   * be running when its VmRSS is read after 50 results: a --count 100 run could end first) */
  const char *secret = pc_write_secret(SECRET);
  long small = pc_cli_rss_kb(secret, "10000"), big = pc_cli_rss_kb(secret, "1000000");
  PC_CHECK(small > 0 && big > 0 && big - small < 16 * 1024, "VmRSS after 50 results: %ld kB with --count 10000, "
           "%ld kB with --count 1000000", small, big);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* The descriptors this process holds now whose /proc link starts with @p what. */
static int pc_fds_of(const char *what)
{
  int n = 0;
  for (int fd = 0; fd < 4096; fd++) {
    char path[64], target[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t len = readlink(path, target, sizeof(target) - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    n += strncmp(target, what, strlen(what)) == 0;
  }
  return n;
}

/* Whether this process holds an io_uring instance now. */
static int pc_holds_io_uring(void) { return pc_fds_of("anon_inode:[io_uring]") > 0; }

typedef struct ring_seen {
  counter c;
  int with_ring, without;
  int sockets_max; /* socket descriptors at a callback, at most */
} ring_seen;

static int pc_ring_cb(size_t index, const tf_probe_result *r, void *payload)
{
  ring_seen *s = payload;
  if (pc_holds_io_uring()) s->with_ring++;
  else s->without++;
  int n = pc_fds_of("socket:");
  if (n > s->sockets_max) s->sockets_max = n;
  return pc_count_cb(index, r, &s->c);
}

/* A set's UDP datagrams go through io_uring on this kernel, its sockets made in the ring where
 * the kernel binds through io_uring (no descriptor for them), made with system calls with
 * TURNFLEET_PROBE_IO=ring, and all through epoll with TURNFLEET_PROBE_IO=epoll (or where the
 * kernel has no io_uring): each allocates, peer check and all. */
START_TEST(test_probe__sets_run_on_io_uring_and_on_epoll)
{
  pc_start_v4("pring", 65, 3524, 0, 57000, 57999, "  peerPolicy: {denyPrivate: false}\n", PC_LOOPBACK_PEERS | PC_CLI);
  int lowest = dup(0); /* the lowest free descriptor before any set ran */
  close(lowest);
  int made_in_ring = pc_kernel_binds_in_ring();
  for (int m = 0; m < 3; m++) {
    const char *mode = pc_io_modes[m];
    int epoll_only = m == 2;
    pc_set_io(mode);
    int sockets_before = pc_fds_of("socket:");
    tf_probe_set *set = NULL;
    PC_OK(tf_probe_set_new(&set, 16));
    tf_probe_options o = pc_opts("turn:127.0.0.65:3524");
    o.peer_check = 1;
    PC_OK(tf_probe_set_add_repeated(set, &o, 120));
    tf_probe_options plain = pc_opts("turn:127.0.0.65:3524");
    PC_OK(tf_probe_set_add_repeated(set, &plain, 120));
    ring_seen seen;
    memset(&seen, 0, sizeof(seen));
    tf_err rc = tf_probe_set_run(set, pc_ring_cb, &seen);
    pc_set_io(NULL);
    tf_probe_set_free(set);
    PC_OK(rc);
    PC_CHECK(seen.c.calls == 240 && seen.c.ok == 240, "I/O %s: %zu ok of %zu; first: %s", mode ? mode : "default",
             seen.c.ok, seen.c.calls, seen.c.first_failure);
    if (epoll_only) PC_CHECK(seen.with_ring == 0, "TURNFLEET_PROBE_IO=epoll: an io_uring was open");
    else PC_CHECK(seen.without == 0, "no io_uring while the set ran (does the kernel refuse io_uring_setup?)");
    /* the probes' sockets: descriptors, unless the ring made them */
    if (m == 0 && made_in_ring)
      PC_CHECK(seen.sockets_max == sockets_before, "the ring makes the sockets, yet %d socket descriptors were open "
               "(%d before the set)", seen.sockets_max, sockets_before);
    else
      PC_CHECK(seen.sockets_max > sockets_before, "I/O %s: no socket descriptor while the set ran",
               mode ? mode : "default");
    PC_CHECK(!pc_holds_io_uring(), "the set's io_uring outlived it");
    /* every leg released what it allocated, and its socket is closed */
    int64_t deadline = tf_ts_now_ms() + 5000;
    while (pc_cli_count() != 0) {
      PC_CHECK(tf_ts_now_ms() < deadline, "I/O %s: allocations left on the relay after the set",
               mode ? mode : "default");
      tf_ts_sleep_ms(100);
    }
    int fd = dup(0);
    PC_CHECK(fd == lowest, "I/O %s: descriptors left open: the lowest free one is %d, not %d", mode ? mode : "default", fd,
             lowest);
    close(fd);
  }
  pc_stop_all();
  pc_cleanup();
}
END_TEST

static void pc_scale(int peer_check, unsigned probes)
{
  /* coturn keeps a relay port a while after its allocation is released: at
   * this rate a range as large as the allocations keeps 508 out of the test */
  pc_start_v4("pscale", 57, 3521, 0, 40000, 59999, peer_check ? "  peerPolicy: {denyPrivate: false}\n" : NULL,
              peer_check ? PC_LOOPBACK_PEERS : 0);
  tf_probe_set *set = NULL;
  PC_OK(tf_probe_set_new(&set, 256));
  tf_probe_options o = pc_opts("turn:127.0.0.57:3521");
  o.timeout_ms = 30000;
  o.peer_check = peer_check;
  PC_OK(tf_probe_set_add_repeated(set, &o, probes));
  counter c;
  memset(&c, 0, sizeof(c));
  PC_OK(tf_probe_set_run(set, pc_count_cb, &c));
  tf_probe_set_free(set);
  PC_CHECK(c.calls == probes && c.ok == probes, "%s: %zu of %u ok; first failure: %s",
           peer_check ? "peer check" : "udp", c.ok, probes, c.first_failure);
  pc_stop_all();
  pc_cleanup();
}

/* 437 means a reused 5-tuple: at scale every Allocate still gets a fresh one */
START_TEST(test_probe__twenty_thousand_allocations_at_256_without_437) { pc_scale(0, 20000); }
END_TEST

START_TEST(test_probe__peer_check_twenty_thousand_allocations_at_256_without_437) { pc_scale(1, 10000); }
END_TEST

START_TEST(test_probe__cli_users_uris_quiet_and_progress)
{
  pc_start_v4("pusers", 63, 3522, 0, 56900, 56999, "  quota: {userQuota: 1}\n", 0);
  const char *secret = pc_write_secret(SECRET);
  const char *udp = "turn:127.0.0.63:3522", *tcp = "turn:127.0.0.63:3522?transport=tcp";
  cli_out r;
  /* a distinct user per probe: a per-user quota of 1 refuses none of 12 at once */
  CLI(&r, "--uri", udp, "--secret-file", secret, "--count", "12", "--concurrency", "12", "--user-prefix", "load-",
      "--json", "--quiet");
  PC_CHECK(r.code == 0 && strstr(r.out.ptr, "{\"summary\":{\"probes\":12,\"allocations\":12,\"failures\":{}") &&
               strchr(r.out.ptr, '\n') == r.out.ptr + strlen(r.out.ptr) - 1,
           "--user-prefix --quiet: exit %d: %s %s", r.code, r.out.ptr, r.err.ptr);
  PC_CHECK(r.err.ptr[0] == '\0', "no progress without a terminal: %s", r.err.ptr);
  pc_cli_free(&r);
  /* one user for all: the quota bites */
  CLI(&r, "--uri", udp, "--secret-file", secret, "--count", "12", "--concurrency", "12", "--user", "same", "--json",
      "--quiet");
  PC_CHECK(r.code == 1 && strstr(r.out.ptr, "\"486\":"), "--user: exit %d: %s", r.code, r.out.ptr);
  pc_cli_free(&r);
  /* several --uri: every one is probed (the old CLI kept the last) */
  CLI(&r, "--uri", udp, "--uri", tcp, "--secret-file", secret, "--user-prefix", "multi-", "--json");
  PC_CHECK(r.code == 0, "two URIs: exit %d: %s %s", r.code, r.out.ptr, r.err.ptr);
  PC_CHECK(strstr(r.out.ptr, "\"uri\":\"turn:127.0.0.63:3522\"") &&
               strstr(r.out.ptr, "\"uri\":\"turn:127.0.0.63:3522?transport=tcp\"") &&
               strstr(r.out.ptr, "\"probes\":2,\"allocations\":2"),
           "two URIs: %s", r.out.ptr);
  pc_cli_free(&r);
  /* a turn-uris file */
  char file[1200];
  snprintf(file, sizeof(file), "%s/turn-uris", pc_tmpdir());
  char text[512];
  snprintf(text, sizeof(text), "# the pool's URIs\n%s\n\n  %s\r\n", udp, tcp);
  tf_test_write(file, text, 0600);
  CLI(&r, "--uri-file", file, "--secret-file", secret, "--count", "3", "--concurrency", "2", "--user-prefix", "file-");
  PC_CHECK(r.code == 0 && strstr(r.out.ptr, "summary: 6 probes, 6 allocations, 0 failures"), "--uri-file: exit %d: %s",
           r.code, r.out.ptr);
  pc_cli_free(&r);
  snprintf(text, sizeof(text), "%s\nstun:127.0.0.63\n", udp);
  tf_test_write(file, text, 0600);
  CLI(&r, "--uri-file", file, "--secret-file", secret);
  PC_CHECK(r.code == 2 && strstr(r.err.ptr, "turnfleet-probe: --uri-file: ") && strstr(r.err.ptr, "turn-uris:2: "),
           "bad line: exit %d: %s", r.code, r.err.ptr);
  pc_cli_free(&r);
  /* a progress line on a terminal */
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  PC_CHECK(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0, "pty: %s", strerror(errno));
  const char *args[] = {"--uri", udp, "--secret-file", secret, "--count", "30", "--concurrency", "2",
                        "--user-prefix", "tty-", "--quiet", NULL};
  char slave[128];
  PC_CHECK(ptsname_r(master, slave, sizeof(slave)) == 0, "ptsname");
  int ofd, efd;
  pid_t pid = pc_cli_spawn_to(args, NULL, NULL, &ofd, &efd, slave);
  close(efd);
  tf_buf tty;
  tf_buf__init(&tty);
  int64_t deadline = tf_ts_now_ms() + 30000;
  int status = 0;
  for (;;) {
    struct pollfd p = {master, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buf[1024];
      ssize_t n = read(master, buf, sizeof(buf));
      if (n > 0) tf_buf__putn(&tty, buf, (size_t)n);
    }
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    PC_CHECK(tf_ts_now_ms() < deadline, "the CLI did not finish");
  }
  pc_forget_child(pid);
  close(master);
  close(ofd);
  PC_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
  PC_CHECK(tty.ptr && strstr(tty.ptr, "/30 probes, "), "progress on the terminal: %s", tty.ptr ? tty.ptr : "");
  tf_buf__dispose(&tty, 0);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* A lossy path between the probe and coturn: a UDP relay that forwards each client's datagrams
 * from a socket of its own (coturn sees one 5-tuple per client), and drops the first copy of
 * every Refresh request (its retransmissions pass: the test is about the first loss, not about
 * the odds of losing them all) and one in ten of every other datagram, both ways, at random. */
#define LOSSY_CLIENTS 256
typedef struct lossy {
  int down;            /* where the probe sends: 127.0.0.67:3525 */
  struct sockaddr_in up; /* coturn */
  struct {
    struct sockaddr_in from;
    int fd;
  } c[LOSSY_CLIENTS];
  int n;
  uint8_t refreshed[LOSSY_CLIENTS * 4][12]; /* transaction ids of Refresh requests seen */
  int nrefreshed;
  volatile int stop;
  unsigned seed; /* one datagram in ten lost, at random (the same every run) */
  unsigned seen, dropped, refresh_dropped;
  pthread_t thread;
} lossy;

static int lossy_drop(lossy *x, const uint8_t *d, ssize_t n, int from_client)
{
  x->seen++;
  if (from_client && n >= 20 && d[0] == 0x00 && d[1] == 0x04) { /* a Refresh request */
    for (int i = 0; i < x->nrefreshed; i++)
      if (!memcmp(x->refreshed[i], d + 8, 12)) return 0; /* its retransmissions pass */
    if (x->nrefreshed < LOSSY_CLIENTS * 4) memcpy(x->refreshed[x->nrefreshed++], d + 8, 12);
    x->refresh_dropped++;
    x->dropped++;
    return 1;
  }
  if (rand_r(&x->seed) % 10 == 0) {
    x->dropped++;
    return 1;
  }
  return 0;
}

static void *lossy_run(void *arg)
{
  lossy *x = arg;
  uint8_t buf[2048];
  while (!x->stop) {
    struct pollfd p[1 + LOSSY_CLIENTS];
    p[0] = (struct pollfd){x->down, POLLIN, 0};
    for (int i = 0; i < x->n; i++) p[1 + i] = (struct pollfd){x->c[i].fd, POLLIN, 0};
    if (poll(p, (nfds_t)(1 + x->n), 100) <= 0) continue;
    if (p[0].revents & POLLIN) {
      struct sockaddr_in from;
      socklen_t fl = sizeof(from);
      ssize_t n = recvfrom(x->down, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
      int k = 0;
      while (n > 0 && k < x->n && memcmp(&x->c[k].from, &from, sizeof(from))) k++;
      if (n > 0 && k == x->n && x->n < LOSSY_CLIENTS) {
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in me = {.sin_family = AF_INET};
        inet_pton(AF_INET, "127.0.0.67", &me.sin_addr);
        if (fd >= 0 && bind(fd, (struct sockaddr *)&me, sizeof(me)) == 0 &&
            connect(fd, (struct sockaddr *)&x->up, sizeof(x->up)) == 0) {
          x->c[x->n].from = from;
          x->c[x->n++].fd = fd;
        } else if (fd >= 0) {
          close(fd);
        }
      }
      if (n > 0 && k < x->n && !lossy_drop(x, buf, n, 1)) (void)!send(x->c[k].fd, buf, (size_t)n, 0);
    }
    for (int i = 0; i < x->n; i++) {
      if (!(p[1 + i].revents & POLLIN)) continue;
      ssize_t n = recv(x->c[i].fd, buf, sizeof(buf), 0);
      if (n > 0 && !lossy_drop(x, buf, n, 0))
        (void)!sendto(x->down, buf, (size_t)n, 0, (struct sockaddr *)&x->c[i].from, sizeof(x->c[i].from));
    }
  }
  return NULL;
}

/* The probe releases what it allocated, on success and on failure alike, though datagrams are
 * lost: its Refresh(0) is a transaction, retransmitted until answered, so nothing is left on the
 * relay for the allocation's lifetime (coturn's count read through its CLI after each run). */
START_TEST(test_probe__a_lossy_path_leaves_no_allocation_behind)
{
  pc_start_v4("plossy", 66, 3525, 0, 59100, 59149, NULL, PC_CLI);
  int64_t n = pc_cli_open(), deadline;
  static lossy x;
  memset(&x, 0, sizeof(x));
  x.seed = 3525;
  x.down = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(3525)};
  inet_pton(AF_INET, "127.0.0.67", &at.sin_addr);
  PC_CHECK(x.down >= 0 && bind(x.down, (struct sockaddr *)&at, sizeof(at)) == 0, "the lossy relay: %s", strerror(errno));
  x.up = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(3525)};
  inet_pton(AF_INET, "127.0.0.66", &x.up.sin_addr);
  PC_CHECK(pthread_create(&x.thread, NULL, lossy_run, &x) == 0, "pthread_create");
  const char *secret = pc_write_secret(SECRET);
  const char *uri = "turn:127.0.0.67:3525";
  /* every probe fails after its Allocate (the relayed address is not the one expected), so
   * only the release after a failure can free it */
  const char *runs[][2] = {{"--expect-address", "127.0.0.200"}, {"--user-prefix", "ok-"}};
  for (size_t k = 0; k < 2; k++) {
    unsigned before = x.refresh_dropped;
    cli_out r;
    CLI(&r, "--uri", uri, "--secret-file", secret, "--count", "24", "--concurrency", "6", "--timeout-ms", "30000",
        runs[k][0], runs[k][1], "--json");
    PC_CHECK(r.code == (k == 0 ? 1 : 0) &&
                 strstr(r.out.ptr, k == 0 ? "\"allocations\":0,\"failures\":{\"verify\":24}"
                                          : "\"probes\":24,\"allocations\":24,\"failures\":{}"),
             "run %zu: exit %d: %s %s", k, r.code, r.out.ptr, r.err.ptr);
    pc_cli_free(&r);
    PC_CHECK(x.refresh_dropped >= before + 24, "run %zu: only %u Refresh requests were lost", k,
             x.refresh_dropped - before);
    /* coturn frees a released allocation a moment after its Refresh(0) */
    deadline = tf_ts_now_ms() + 10000;
    while ((n = pc_cli_count()) != 0) {
      PC_CHECK(tf_ts_now_ms() < deadline, "run %zu: %" PRId64 " allocations left on the relay", k, n);
      tf_ts_sleep_ms(100);
    }
  }
  x.stop = 1;
  pthread_join(x.thread, NULL);
  for (int i = 0; i < x.n; i++) close(x.c[i].fd);
  close(x.down);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* The hooks on the caller's own epoll loop: the set's one descriptor, a timer of the caller's and a
 * silent UDP "relay" of the caller's beside it. The silent probe retransmits at 0, 200, 600 and
 * 1400 ms; between each two of its datagrams (200 ms and more apart) the caller's loop must have
 * woken for its timer (20 ms) at least three times: a round that held the loop until the set's
 * next timer would leave one wake-up per gap, its ticks piled up in it. Addresses 127.0.20.1-2 (this test's own),
 * listener 3600, relay range 40200-40299. */
typedef struct hook_counts {
  size_t calls, ok, timeouts;
} hook_counts;

static int pc_hook_cb(size_t index, const tf_probe_result *r, void *payload)
{
  (void)index;
  hook_counts *h = payload;
  h->calls++;
  if (tf_probe_result_ok(r)) h->ok++;
  else if (tf_probe_result_status(r) == TF_ETIMEOUT) h->timeouts++;
  return 0;
}

START_TEST(test_probe__hooks_run_a_set_on_the_callers_epoll_loop)
{
  char *pool = pc_pool("phooks", "IPv4", 3600, 0, 40200, 40299, NULL);
  pc_start(pool, "127.0.20.1", 0);
  free(pool);
  int silent = pc_silent_udp("127.0.20.2", 3601);
  tf_probe_set *set = NULL;
  PC_OK(tf_probe_set_new(&set, 4));
  const char *uris[] = {"turn:127.0.20.1:3600", "turn:127.0.20.1:3600?transport=tcp"};
  for (int i = 0; i < 8; i++) {
    tf_probe_options o = pc_opts(uris[i % 2]);
    PC_OK(tf_probe_set_add(set, &o));
  }
  tf_probe_options q = pc_opts("turn:127.0.20.2:3601");
  q.rto_ms = 200;
  q.timeout_ms = 2000;
  PC_OK(tf_probe_set_add(set, &q));
  PC_CHECK(tf_probe_set_fd(set) == -1 && tf_probe_set_timeout(set) == -1, "hooks before the start");
  hook_counts h = {0, 0, 0};
  PC_OK(tf_probe_set_start(set, pc_hook_cb, &h));
  PC_CHECK(tf_probe_set_start(set, NULL, NULL) == TF_EINVALID, "a second start");
  PC_CHECK(tf_probe_set_run(set, NULL, NULL) == TF_EINVALID, "a run while it runs");
  PC_CHECK(tf_probe_set_add(set, &q) == TF_EINVALID, "an add while it runs");
  PC_CHECK(tf_probe_set_running(set) == 9, "running %zu", tf_probe_set_running(set));

  int ep = epoll_create1(EPOLL_CLOEXEC);
  int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  PC_CHECK(ep >= 0 && tfd >= 0, "epoll/timerfd: %s", strerror(errno));
  struct itimerspec its = {{0, 20000000}, {0, 20000000}};
  PC_CHECK(timerfd_settime(tfd, 0, &its, NULL) == 0, "timerfd_settime");
  int fds[3] = {tf_probe_set_fd(set), tfd, silent};
  PC_CHECK(fds[0] >= 0, "the set's descriptor");
  for (int i = 0; i < 3; i++) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    PC_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) == 0, "epoll_ctl: %s", strerror(errno));
  }
  size_t running = 9, rounds = 0, dgrams = 0, gaps = 0, gaps_ticked = 0, wakes = 0, wakes_at_dgram = 0;
  uint64_t ticks = 0;
  while (running) {
    struct epoll_event ev[3];
    int n = epoll_wait(ep, ev, 3, tf_probe_set_timeout(set));
    PC_CHECK(n >= 0 || errno == EINTR, "epoll_wait: %s", strerror(errno));
    for (int i = 0; i < n; i++) {
      if (ev[i].data.u32 == 1) {
        uint64_t k = 0;
        if (read(tfd, &k, sizeof(k)) == (ssize_t)sizeof(k)) ticks += k, wakes++;
      } else if (ev[i].data.u32 == 2) {
        char buf[1500];
        while (recv(silent, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
          if (dgrams++ > 0) {
            gaps++;
            gaps_ticked += wakes - wakes_at_dgram >= 3;
          }
          wakes_at_dgram = wakes;
        }
      }
    }
    PC_OK(tf_probe_set_process(set, &running));
    rounds++;
  }
  close(tfd);
  close(ep);
  close(silent);
  PC_CHECK(h.calls == 9 && h.ok == 8 && h.timeouts == 1, "callback: %zu calls, %zu ok, %zu timed out", h.calls, h.ok,
           h.timeouts);
  for (size_t i = 0; i < 8; i++) PC_EXPECT_OK(tf_probe_set_result(set, i));
  PC_CHECK(tf_probe_result_status(tf_probe_set_result(set, 8)) == TF_ETIMEOUT, "the silent relay's probe");
  /* the caller's loop went round while the probes ran: its timer ticked between every two sends */
  PC_CHECK(dgrams >= 3, "the silent relay got %zu datagrams", dgrams);
  PC_CHECK(gaps_ticked == gaps,
           "the caller's timer woke its loop 3 times or more in %zu of %zu gaps between retransmissions (%zu wake-ups "
           "for %" PRIu64 " ticks, %zu rounds)",
           gaps_ticked, gaps, wakes, ticks, rounds);
  PC_CHECK(tf_probe_set_fd(set) == -1 && tf_probe_set_timeout(set) == -1 && tf_probe_set_running(set) == 0,
           "hooks after the end");
  size_t after = 1;
  PC_OK(tf_probe_set_process(set, &after));
  PC_CHECK(after == 0, "process after the end");
  tf_probe_set_free(set);
  pc_stop_all();
  pc_cleanup();
}
END_TEST

/* A set started on the caller's loop and freed while it runs releases what it holds. */
START_TEST(test_probe__hooks_set_freed_while_running)
{
  int silent = pc_silent_udp("127.0.20.3", 3602);
  tf_probe_set *set = NULL;
  PC_OK(tf_probe_set_new(&set, 2));
  tf_probe_options q = pc_opts("turn:127.0.20.3:3602");
  for (int i = 0; i < 3; i++) PC_OK(tf_probe_set_add(set, &q));
  PC_OK(tf_probe_set_start(set, NULL, NULL));
  PC_CHECK(tf_probe_set_running(set) == 3 && tf_probe_set_fd(set) >= 0, "running");
  /* the first requests went out at the start: the silent socket has them without a process */
  struct pollfd p = {silent, POLLIN, 0};
  PC_CHECK(poll(&p, 1, 5000) == 1, "no request reached the silent relay after the start");
  size_t running = 0;
  PC_OK(tf_probe_set_process(set, &running));
  PC_CHECK(running == 3, "running %zu", running);
  tf_probe_set_free(set);
  close(silent);
}
END_TEST

Suite *tf_test_probe_suite(void)
{
  Suite *s = suite_create("probe");
  TCase *tc = tcase_create("api");
  tcase_set_tags(tc, "normal");
  tcase_add_test(tc, test_probe__options_init_gives_the_defaults);
  tcase_add_test(tc, test_probe__bad_options_name_the_field_never_the_secret);
  tcase_add_test(tc, test_probe__results_are_null_safe_and_stages_named);
  tcase_add_test(tc, test_probe__json_strings_escape_every_byte_anywhere);
  tcase_add_test(tc, test_probe__v1_options_are_read_only_up_to_their_version);
  suite_add_tcase(s, tc);

  /* real turnserver processes on loopback */
  TCase *ts = tcase_create("turnserver");
  tcase_set_tags(ts, "normal");
  tcase_set_timeout(ts, 120);
  tcase_add_checked_fixture(ts, pc_setup, pc_teardown);
  tcase_add_test(ts, test_probe__allocates_over_udp);
  tcase_add_test(ts, test_probe__allocates_over_tcp);
  tcase_add_test(ts, test_probe__allocates_over_tls_verifying_the_certificate);
  tcase_add_test(ts, test_probe__ipv6_relay_on_loopback);
  tcase_add_test(ts, test_probe__peer_check_passes_over_udp_tcp_and_tls);
  tcase_add_test(ts, test_probe__peer_check_fails_when_the_relay_forbids_the_peer);
  tcase_add_test(ts, test_probe__wrong_secret_gets_401);
  tcase_add_test(ts, test_probe__expired_username_gets_401);
  tcase_add_test(ts, test_probe__full_port_range_gets_508);
  tcase_add_test(ts, test_probe__user_quota_gets_486);
  tcase_add_test(ts, test_probe__nobody_listening_is_unreachable_or_timeout);
  tcase_add_test(ts, test_probe__malformed_answers_are_dropped_and_reported);
  tcase_add_test(ts, test_probe__wrong_address_or_range_fails_verify);
  tcase_add_test(ts, test_probe__allocation_refresh_and_release);
  tcase_add_test(ts, test_probe__cli_counts_and_drain_per_version);
  tcase_add_test(ts, test_probe__set_callback_can_stop_the_set);
  tcase_add_test(ts, test_probe__two_thousand_cycles_at_concurrency_64);
  tcase_add_test(ts, test_probe__sets_run_on_io_uring_and_on_epoll);
  tcase_add_test(ts, test_probe__unusable_answers_fail_with_the_last_reason);
  tcase_add_test(ts, test_probe__any_reason_bytes_give_valid_json);
  tcase_add_test(ts, test_probe__long_realm_and_nonce_are_sent_back_whole);
  tcase_add_test(ts, test_probe__out_of_descriptors_is_local_not_unreachable);
  tcase_add_test(ts, test_probe__count_streams_in_constant_memory);
  tcase_add_test(ts, test_probe__hooks_run_a_set_on_the_callers_epoll_loop);
  tcase_add_test(ts, test_probe__hooks_set_freed_while_running);
  suite_add_tcase(s, ts);

  /* 20,000 allocations at 256 at once, plain and with the peer check */
  TCase *scale = tcase_create("scale");
  tcase_set_tags(scale, "normal");
  tcase_set_timeout(scale, 600);
  tcase_add_checked_fixture(scale, pc_setup, pc_teardown);
  tcase_add_test(scale, test_probe__twenty_thousand_allocations_at_256_without_437);
  tcase_add_test(scale, test_probe__peer_check_twenty_thousand_allocations_at_256_without_437);
  suite_add_tcase(s, scale);

  TCase *cli = tcase_create("cli");
  tcase_set_tags(cli, "normal");
  tcase_set_timeout(cli, 120);
  tcase_add_checked_fixture(cli, pc_setup, pc_teardown);
  tcase_add_test(cli, test_probe__cli_usage_errors_exit_2);
  tcase_add_test(cli, test_probe__cli_exit_codes_json_and_secret_sources);
  tcase_add_test(cli, test_probe__cli_hold_two_then_sigterm_releases);
  tcase_add_test(cli, test_probe__cli_hold_fills_a_four_port_range_then_508);
  tcase_add_test(cli, test_probe__cli_count_prints_a_summary);
  tcase_add_test(cli, test_probe__cli_slow_results_are_not_held_back);
  tcase_add_test(cli, test_probe__cli_count_2000_at_concurrency_64);
  tcase_add_test(cli, test_probe__cli_users_uris_quiet_and_progress);
  tcase_add_test(cli, test_probe__a_lossy_path_leaves_no_allocation_behind);
  suite_add_tcase(s, cli);
  return s;
}
