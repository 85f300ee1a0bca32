/* relayctl: a real turnserver's CLI (count with `pu`, the session list, the
 * drain of its version, a wrong password), /metrics through libcurl against
 * a libmicrohttpd server (only a 200 counts, whatever the headers say), and
 * the worker pool running requests at once. Addresses 127.0.0.91, listener
 * 3801, CLI 3810, relays 61000-61007. */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tf_coturn.h"
#include "tf_test.h"

#define CLI_PW "relayctl-cli-pw"
#define SECRET "relayctl-secret"

static pid_t rc_pid;
static char *rc_dir;
static tf_allocation *rc_held[3];

static void rc_cleanup(void)
{
  for (size_t i = 0; i < 3; i++) {
    tf_allocation_free(rc_held[i]);
    rc_held[i] = NULL;
  }
  tf_ts_reap(&rc_pid);
  tf_ts_remove_dir(&rc_dir);
}

#define RC_CHECK(cond, ...) TF_TS_CHECK(rc_cleanup, cond, __VA_ARGS__)

static tf_relayctl_request cli_request(tf_relayctl_op op, const char *password)
{
  tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
  req.op = op;
  req.port = 3810;
  req.password = password;
  req.timeout_ms = 3000;
  return req;
}

/* Count until it reads @p want (coturn reports a session after its request), bounded. */
static int64_t count_until(int64_t want)
{
  int64_t n = -1;
  for (int i = 0; i < 100; i++) {
    tf_relayctl_request req = cli_request(TF_RELAYCTL_COUNT, CLI_PW);
    if (tf_relayctl_run(&n, NULL, &req) == 0 && n == want) return n;
    tf_ts_sleep_ms(100);
  }
  return n;
}

static tf_allocation *hold(int *code)
{
  tf_probe_options po = TF_PROBE_OPTIONS_INIT;
  po.uri = "turn:127.0.0.91:3801?transport=udp";
  po.secret = SECRET;
  po.timeout_ms = 3000;
  po.rto_ms = 200;
  tf_allocation *a = NULL;
  tf_probe_result *res = NULL;
  (void)tf_allocation_new(&a, &res, &po);
  if (code) *code = res ? tf_probe_result_error_code(res) : -1;
  tf_probe_result_free(res);
  return a;
}

START_TEST(test_relayctl__counts_lists_and_drains_a_real_turnserver)
{
  char version_text[64];
  uint32_t version;
  tf_ts_require(version_text, sizeof(version_text), &version);
  rc_dir = tf_test_tmpdir();
  char text[1024], conf[1200], out[1200], log[1200];
  snprintf(text, sizeof(text),
           "metadata: {name: rctl}\n"
           "spec:\n"
           "  replicas: 1\n"
           "  dataplane: {coturnVersion: \"%s\"}\n"
           "  relayPortRange: {start: 61000, end: 61007}\n"
           "  listeners: [{name: turn, protocol: udp, port: 3801}]\n"
           "  auth: {realm: rctl.test, secretRef: {name: s}}\n",
           version_text);
  tf_pool *pool = tf_test_pool(text);
  tf_nodes *nodes = tf_test_nodes("{\"kind\":\"List\",\"items\":[{\"metadata\":{\"name\":\"n1\",\"labels\":"
                                  "{\"turnfleet.hzmi.dev/relay-node\":\"true\",\"" TF_LABEL_DEVELOPMENT "\":\"true\"}},"
                                  "\"status\":{\"addresses\":"
                                  "[{\"type\":\"InternalIP\",\"address\":\"127.0.0.91\"}],\"conditions\":"
                                  "[{\"type\":\"Ready\",\"status\":\"True\"}]}}]}");
  tf_plan *plan = NULL;
  TF_OK_OR_FAIL(tf_plan_new(&plan, pool, nodes, NULL));
  ck_assert_uint_eq(tf_plan_relay_count(plan), 1);
  const char *secrets[] = {SECRET};
  tf_coturn_options o = TF_COTURN_OPTIONS_INIT;
  o.secrets = secrets;
  o.secrets_count = 1;
  o.state_dir = rc_dir;
  snprintf(log, sizeof(log), "%s/relay.log", rc_dir);
  o.log_file = log;
  o.cli_port = 3810;
  o.cli_password = CLI_PW;
  o.allow_loopback_peers = 1;
  char *config = NULL;
  TF_OK_OR_FAIL(tf_coturn_render(&config, pool, plan, tf_relay_name(tf_plan_relay(plan, 0)), &o));
  snprintf(conf, sizeof(conf), "%s/turnserver.conf", rc_dir);
  snprintf(out, sizeof(out), "%s/out.log", rc_dir);
  tf_test_write(conf, config, 0600);
  tf_free(config);
  rc_pid = tf_ts_spawn(conf, out);
  RC_CHECK(rc_pid > 0, "spawn: %s", strerror(errno));

  /* the CLI comes up: a fresh relay counts 0 */
  int64_t n = count_until(0);
  char head[2048];
  tf_ts_file_head(out, head, sizeof(head));
  RC_CHECK(n == 0, "no count of 0 from the CLI (last %lld); output:\n%s", (long long)n, head);
  /* a wrong password is refused, and said so, without the password in the message */
  tf_relayctl_request req = cli_request(TF_RELAYCTL_COUNT, "not-the-password");
  tf_err rc = tf_relayctl_run(&n, NULL, &req);
  RC_CHECK(rc == TF_EAUTH, "wrong password -> %d (%s)", rc, tf_error_last()->message);
  RC_CHECK(n == -1 && !strstr(tf_error_last()->message, "not-the-password"), "the password leaked");

  /* the listener must be the relay's: its own process passes, any other is never sent the password */
  req = cli_request(TF_RELAYCTL_COUNT, CLI_PW);
  req.owner_pid = rc_pid;
  rc = tf_relayctl_run(&n, NULL, &req);
  RC_CHECK(rc == 0 && n == 0, "owner check on the relay's own listener -> %d (%s)", rc, tf_error_last()->message);
  int fake = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(3811);
  RC_CHECK(fake >= 0 && bind(fake, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fake, 4) == 0, "fake: %s",
           strerror(errno));
  req.port = 3811; /* ours, not the relay's */
  rc = tf_relayctl_run(&n, NULL, &req);
  int accepted = accept(fake, NULL, NULL);
  close(fake);
  RC_CHECK(rc == TF_EAUTH && strstr(tf_error_last()->message, "not process"), "fake listener -> %d (%s)", rc,
           tf_error_last()->message);
  RC_CHECK(accepted < 0, "the fake listener was connected to");

  /* two held allocations: `pu` counts 2, `ps` lists them */
  for (int i = 0; i < 2; i++) {
    int code = 0;
    rc_held[i] = hold(&code);
    RC_CHECK(rc_held[i], "allocation %d failed (code %d)", i, code);
  }
  n = count_until(2);
  RC_CHECK(n == 2, "pu counted %lld, not 2", (long long)n);
  char *list = NULL;
  req = cli_request(TF_RELAYCTL_SESSIONS, CLI_PW);
  rc = tf_relayctl_run(&n, &list, &req);
  RC_CHECK(rc == 0 && n == 2 && list && strstr(list, "relay addr 127.0.0.91:610"), "ps -> %d, %lld sessions: %s", rc,
           (long long)n, list ? list : tf_error_last()->message);
  tf_free(list);

  /* the drain of this version: coturn >= 4.6.3 has `drain` (403), older ones take `cc total-quota -1` (486) */
  int mode = (tf_coturn_features(version) & TF_COTURN_DRAIN) != 0;
  req = cli_request(mode ? TF_RELAYCTL_DRAIN : TF_RELAYCTL_REFUSE, CLI_PW);
  rc = tf_relayctl_run(NULL, NULL, &req);
  RC_CHECK(rc == 0, "drain -> %d (%s)", rc, tf_error_last()->message);
  int code = 0;
  for (int i = 0; i < 80 && code != (mode ? 403 : 486); i++) { /* the quota takes up to 5 s */
    tf_allocation_free(rc_held[2]);
    rc_held[2] = hold(&code);
    if (code != (mode ? 403 : 486)) tf_ts_sleep_ms(100);
  }
  RC_CHECK(code == (mode ? 403 : 486), "a new Allocate after the drain got %d, not %d", code, mode ? 403 : 486);
  /* the held ones stay */
  RC_CHECK(tf_allocation_refresh(rc_held[0]) == 0, "a held allocation did not survive the drain");
  rc_cleanup();
  tf_plan_free(plan);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
}
END_TEST

/* ---- /metrics ---- */

typedef struct http_reply {
  unsigned int status;
  const char *body;
} http_reply;

static enum MHD_Result http_answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                   const char *version, const char *upload, size_t *upload_size, void **ctx)
{
  (void)url, (void)method, (void)version, (void)upload, (void)upload_size, (void)ctx;
  const http_reply *r = cls;
  struct MHD_Response *resp =
    MHD_create_response_from_buffer(strlen(r->body), (void *)r->body, MHD_RESPMEM_PERSISTENT);
  enum MHD_Result rc = MHD_queue_response(conn, r->status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static int64_t metrics_with(unsigned int status, const char *body, tf_err *rc)
{
  http_reply reply = {status, body};
  struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, http_answer, &reply,
                                          MHD_OPTION_END);
  ck_assert_ptr_nonnull(d);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
  req.op = TF_RELAYCTL_COUNT_METRICS;
  req.address = "127.0.0.1";
  req.port = info->port;
  req.timeout_ms = 5000;
  int64_t n = -1;
  *rc = tf_relayctl_run(&n, NULL, &req);
  MHD_stop_daemon(d);
  return n;
}

START_TEST(test_relayctl__metrics_count_only_from_a_200)
{
  static const char scrape[] = "# TYPE turn_total_allocations gauge\n"
                               "turn_total_allocations{type=\"UDP\"} 3\n"
                               "turn_total_allocations{type=\"TCP\"} 1\n";
  tf_err rc;
  ck_assert_int_eq(metrics_with(200, scrape, &rc), 4);
  ck_assert_int_eq(rc, 0);
  /* a 404 whose body is 200 bytes long (`Content-Length: 200`) is no scrape */
  char body[201];
  memset(body, '#', 200);
  memcpy(body, scrape, strlen(scrape));
  body[strlen(scrape)] = '#';
  body[200] = '\0';
  ck_assert_int_eq(metrics_with(404, body, &rc), -1);
  ck_assert_int_eq(rc, TF_EPROTO);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "404"));
  /* nothing listening */
  tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
  req.op = TF_RELAYCTL_COUNT_METRICS;
  req.address = "127.0.0.1";
  req.port = 1;
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, &req), TF_ENET);
  req.address = "not an address";
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, &req), TF_EINVALID);
}
END_TEST

/* ---- workers ---- */

#define N_AT_ONCE 4

typedef struct stall {
  int lfd;
  int accepted; /* the most connections open at once */
} stall;

/* Accept N_AT_ONCE connections and hold each open (no prompt) until all are in, then close them all. */
static void *stall_server(void *arg)
{
  stall *s = arg;
  int fds[N_AT_ONCE];
  for (s->accepted = 0; s->accepted < N_AT_ONCE; s->accepted++) {
    struct pollfd p = {s->lfd, POLLIN, 0};
    if (poll(&p, 1, 15000) <= 0) break; /* a serial client would leave us waiting here */
    fds[s->accepted] = accept(s->lfd, NULL, NULL);
    if (fds[s->accepted] < 0) break;
  }
  for (int i = 0; i < s->accepted; i++) close(fds[i]);
  return NULL;
}

START_TEST(test_relayctl__workers_ask_every_relay_at_once)
{
  stall s = {socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), 0};
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t sl = sizeof(sa);
  ck_assert_int_eq(bind(s.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  ck_assert_int_eq(listen(s.lfd, 16), 0);
  ck_assert_int_eq(getsockname(s.lfd, (struct sockaddr *)&sa, &sl), 0);
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, stall_server, &s), 0);

  tf_relayctl_workers *w = NULL;
  TF_OK_OR_FAIL(tf_relayctl_workers_new(&w, N_AT_ONCE));
  ck_assert_int_eq(tf_relayctl_workers_next(w, NULL, NULL, NULL), 0);
  for (uint64_t tag = 1; tag <= N_AT_ONCE; tag++) {
    tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
    req.port = ntohs(sa.sin_port);
    req.password = CLI_PW;
    req.timeout_ms = 20000; /* each would stall a serial loop this long */
    TF_OK_OR_FAIL(tf_relayctl_workers_submit(w, &req, tag));
  }
  pthread_join(th, NULL);
  ck_assert_int_eq(s.accepted, N_AT_ONCE);
  unsigned seen = 0;
  while (seen != (1u << N_AT_ONCE) - 1) {
    struct pollfd p = {tf_relayctl_workers_fd(w), POLLIN, 0};
    ck_assert_int_eq(poll(&p, 1, 30000), 1);
    uint64_t tag;
    tf_err rc;
    int64_t count;
    while (tf_relayctl_workers_next(w, &tag, &rc, &count) == 1) {
      ck_assert_int_eq(rc, TF_ENET); /* closed before any prompt */
      ck_assert_int_eq(count, -1);
      seen |= 1u << (tag - 1);
    }
  }
  tf_relayctl_workers_free(w);
  close(s.lfd);

  ck_assert_int_eq(tf_relayctl_workers_new(&w, 0), TF_EINVALID);
  ck_assert_int_eq(tf_relayctl_workers_new(&w, 65), TF_EINVALID);
  tf_relayctl_workers_free(NULL);
  ck_assert_int_eq(tf_relayctl_workers_fd(NULL), -1);
}
END_TEST

START_TEST(test_relayctl__rejects_bad_requests)
{
  tf_relayctl_request req = TF_RELAYCTL_REQUEST_INIT;
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, &req), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "req.port"));
  req.port = 3810;
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, &req), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "req.password"));
  req.password = "pw";
  req.timeout_ms = 0;
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, &req), TF_EINVALID);
  req.timeout_ms = 100;
  req.op = (tf_relayctl_op)9;
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, &req), TF_EINVALID);
  req.op = TF_RELAYCTL_COUNT;
  req.version = TF_RELAYCTL_REQUEST_VERSION + 1;
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, &req), TF_EINVALID);
  req.version = 1;
  req.password = "pw\r\nquit";
  req.port = 1; /* nothing listens: the connect fails first */
  ck_assert_int_eq(tf_relayctl_run(NULL, NULL, &req), TF_ENET);
}
END_TEST

Suite *tf_test_relayctl_suite(void)
{
  Suite *s = suite_create("relayctl");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_relayctl__counts_lists_and_drains_a_real_turnserver);
  tcase_add_test(tc, test_relayctl__metrics_count_only_from_a_200);
  tcase_add_test(tc, test_relayctl__workers_ask_every_relay_at_once);
  tcase_add_test(tc, test_relayctl__rejects_bad_requests);
  suite_add_tcase(s, tc);
  return s;
}
