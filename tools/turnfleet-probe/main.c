/* turnfleet-probe: prove a TURN relay with a real Allocate.
 * Thin: parse flags, read the secret, call libturnfleet's probe, print.
 * Exit codes: 0 success, 1 the relay answered wrongly, 2 usage or bad input,
 * 3 unreachable or timed out. The secret never comes from argv. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <turnfleet.h>

#include "tool_io.h"
#include "secure.h"

#define PROG "turnfleet-probe"
#define EXIT_OK 0
#define EXIT_WRONG 1
#define EXIT_BAD_INPUT 2
#define EXIT_UNREACHABLE 3
#define SECRET_MAX 4096

static const char usage_text[] =
    "usage: turnfleet-probe --uri URI (--secret-file F | --secret-env VAR) [--user NAME] [--ttl S]\n"
    "         [--expect-address ADDR] [--expect-port-range START-END] [--family ipv4|ipv6] [--peer-check]\n"
    "         [--hold N] [--count N --concurrency C] [--timeout-ms N] [--ca-file F | --insecure] [--json]\n"
    "\n"
    "Allocate on the relay at URI (turn:/turns:) with TURN REST credentials minted from the shared\n"
    "secret, check the relayed address, optionally the data path, and release.\n"
    "Exit: 0 success, 1 the relay answered wrongly, 2 usage or bad input, 3 unreachable or timed out.\n"
    "See docs/probe.md.\n";

/* "turnfleet-probe: <what>: <why>" on stderr. */
#define complain(what, ...) tool_say(PROG, what, __VA_ARGS__)

typedef struct cli {
  const char *uri, *secret_file, *secret_env, *user, *expect_address, *ca_file;
  long long ttl, hold, count, concurrency, timeout_ms;
  int family, peer_check, insecure, json, has_range, has_concurrency;
  tf_port_range range;
  char *secret;
  size_t secret_len;
} cli;

/* A whole non-negative decimal number within [min, max]. */
static int parse_count(const char *flag, const char *text, long long min, long long max, long long *out)
{
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (!*text || *end || errno || text[0] == '-' || text[0] == '+' || v < min || v > max) {
    complain(flag, "\"%s\" is not a whole number from %lld to %lld", text, min, max);
    return -1;
  }
  *out = v;
  return 0;
}

/* The secret: a file's first line, or an environment variable. Never argv. */
static int load_secret(cli *c)
{
  if (c->secret_env) {
    const char *v = getenv(c->secret_env);
    if (!v || !*v) {
      complain("--secret-env", "the environment variable %s is not set or empty", c->secret_env);
      return -1;
    }
    c->secret_len = strlen(v);
    c->secret = strdup(v);
    if (!c->secret) {
      complain("--secret-env", "out of memory");
      return -1;
    }
    return 0;
  }
  if (tf_cred_secret_read(&c->secret, c->secret_file) < 0) {
    complain("--secret-file", "%s", tf_error_last()->message);
    return -1;
  }
  c->secret_len = strlen(c->secret);
  return 0;
}

static void wipe_secret(cli *c)
{
  tf_secret_free(c->secret);
  c->secret = NULL;
}

/* ---- output ---- */

static void print_result(const cli *c, const tf_probe_result *r)
{
  if (c->json) {
    char *json = NULL;
    if (tf_probe_result_to_json(&json, r) == 0) {
      puts(json);
      tf_free(json);
    }
    fflush(stdout);
    return;
  }
  char relayed[TF_ADDR_STRLEN + 8] = "-";
  tf_addr a;
  uint16_t port = 0;
  if (tf_probe_result_relayed(r, &a, &port) == 0) {
    char t[TF_ADDR_STRLEN];
    tf_addr_format(t, sizeof(t), &a);
    snprintf(relayed, sizeof(relayed), a.family == TF_AF_INET6 ? "[%s]:%u" : "%s:%u", t, port);
  }
  int ok = tf_probe_result_ok(r);
  printf("%s %s stage=%s code=%d relayed=%s lifetime=%u rtt_ms=", ok ? "ok" : "fail", tf_probe_result_uri(r),
         tf_probe_stage_name(tf_probe_result_stage(r)), tf_probe_result_error_code(r), relayed,
         tf_probe_result_lifetime(r));
  int first = 1;
  for (int s = 0; s < TF_PROBE_STAGE_COUNT; s++) {
    double ms = tf_probe_result_rtt_ms(r, (tf_probe_stage)s);
    if (ms < 0) continue;
    printf("%s%s:%.2f", first ? "" : ",", tf_probe_stage_name((tf_probe_stage)s), ms);
    first = 0;
  }
  if (first) fputs("-", stdout);
  if (tf_probe_result_draining(r)) fputs(" draining", stdout);
  const char *msg = tf_probe_result_message(r);
  if (*msg) printf(" (%s)", msg);
  fputc('\n', stdout);
  fflush(stdout);
}

/* ---- modes ---- */

static int probe_once(const cli *c, const tf_probe_options *o)
{
  tf_probe_result *r = NULL;
  tf_err rc = tf_probe_run(&r, o);
  if (rc == TF_EINVALID) {
    complain("options", "%s", tf_error_last()->message);
    return EXIT_BAD_INPUT;
  }
  if (rc < 0) {
    complain("probe", "%s", tf_error_last()->message);
    return EXIT_WRONG;
  }
  print_result(c, r);
  int code = tf_probe_result_exit_code(r);
  tf_probe_result_free(r);
  return code;
}

typedef struct tally {
  const cli *c;
  size_t ok, failed;
  int worst;
  /* failures by code: TURN codes 100-699, plus named non-TURN kinds */
  size_t by_code[700];
  size_t timeout, unreachable;
  size_t by_stage[TF_PROBE_STAGE_COUNT];
} tally;

static int on_result(size_t index, const tf_probe_result *r, void *payload)
{
  (void)index;
  tally *t = payload;
  print_result(t->c, r);
  if (tf_probe_result_ok(r)) {
    t->ok++;
    return 0;
  }
  t->failed++;
  int ec = tf_probe_result_exit_code(r);
  if (ec == EXIT_UNREACHABLE) t->worst = EXIT_UNREACHABLE;
  else if (t->worst != EXIT_UNREACHABLE) t->worst = EXIT_WRONG;
  int code = tf_probe_result_error_code(r);
  tf_err st = tf_probe_result_status(r);
  if (code > 0 && code < 700) t->by_code[code]++;
  else if (st == TF_ETIMEOUT) t->timeout++;
  else if (st == TF_ENET) t->unreachable++;
  else t->by_stage[tf_probe_result_stage(r)]++;
  return 0;
}

static double mono_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int probe_count(const cli *c, const tf_probe_options *o)
{
  tf_probe_set *set = NULL;
  if (tf_probe_set_new(&set, (unsigned)c->concurrency) < 0) {
    complain("--concurrency", "%s", tf_error_last()->message);
    return EXIT_BAD_INPUT;
  }
  for (long long i = 0; i < c->count; i++) {
    tf_err rc = tf_probe_set_add(set, o);
    if (rc < 0) {
      complain(rc == TF_EINVALID ? "options" : "probe", "%s", tf_error_last()->message);
      tf_probe_set_free(set);
      return rc == TF_EINVALID ? EXIT_BAD_INPUT : EXIT_WRONG;
    }
  }
  tally t;
  memset(&t, 0, sizeof(t));
  t.c = c;
  double t0 = mono_s();
  tf_err rc = tf_probe_set_run(set, on_result, &t);
  double elapsed = mono_s() - t0;
  tf_probe_set_free(set);
  if (rc < 0) {
    complain("probe", "%s", tf_error_last()->message);
    return EXIT_WRONG;
  }
  double rate = elapsed > 0 ? (double)t.ok / elapsed : 0.0;
  if (c->json) {
    printf("{\"summary\":{\"probes\":%lld,\"allocations\":%zu,\"failures\":{", c->count, t.ok);
    int first = 1;
    for (int code = 0; code < 700; code++) {
      if (!t.by_code[code]) continue;
      printf("%s\"%d\":%zu", first ? "" : ",", code, t.by_code[code]);
      first = 0;
    }
    if (t.timeout) printf("%s\"timeout\":%zu", first ? "" : ",", t.timeout), first = 0;
    if (t.unreachable) printf("%s\"unreachable\":%zu", first ? "" : ",", t.unreachable), first = 0;
    for (int s = 0; s < TF_PROBE_STAGE_COUNT; s++) {
      if (!t.by_stage[s]) continue;
      printf("%s\"%s\":%zu", first ? "" : ",", tf_probe_stage_name((tf_probe_stage)s), t.by_stage[s]);
      first = 0;
    }
    printf("},\"elapsedS\":%.3f,\"allocationsPerSecond\":%.1f}}\n", elapsed, rate);
  } else {
    printf("summary: %lld probes, %zu allocations, %zu failures, %.3f s, %.1f allocations/s\n", c->count, t.ok,
           t.failed, elapsed, rate);
  }
  fflush(stdout);
  return t.failed ? t.worst : EXIT_OK;
}

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
  (void)sig;
  stop_requested = 1;
}

/* Seconds until the next refresh of an allocation granted @p lifetime seconds:
 * half the lifetime, or a minute before it ends, whichever is sooner. */
static double refresh_interval(uint32_t lifetime)
{
  double half = lifetime / 2.0;
  double before_end = (double)lifetime - 60.0;
  double t = before_end > 0 && before_end < half ? before_end : half;
  return t < 1.0 ? 1.0 : t;
}

static int probe_hold(const cli *c, const tf_probe_options *o)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  size_t n = (size_t)c->hold;
  tf_allocation **held = calloc(n, sizeof(*held));
  double *due = calloc(n, sizeof(*due));
  if (!held || !due) {
    free(held);
    free(due);
    complain("--hold", "out of memory");
    return EXIT_WRONG;
  }
  int status = EXIT_OK, refresh_failed = 0;
  size_t made = 0;
  for (; made < n && !stop_requested; made++) {
    tf_probe_result *r = NULL;
    tf_err rc = tf_allocation_new(&held[made], &r, o);
    if (rc == TF_EINVALID && !r) {
      complain("options", "%s", tf_error_last()->message);
      status = EXIT_BAD_INPUT;
      break;
    }
    if (!r) {
      complain("probe", "%s", tf_error_last()->message);
      status = EXIT_WRONG;
      break;
    }
    print_result(c, r);
    if (rc < 0) {
      status = tf_probe_result_exit_code(r);
      tf_probe_result_free(r);
      break;
    }
    tf_probe_result_free(r);
    due[made] = mono_s() + refresh_interval(tf_allocation_lifetime(held[made]));
  }
  while (status == EXIT_OK && !stop_requested) {
    double now = mono_s();
    for (size_t i = 0; i < made && !stop_requested; i++) {
      if (!held[i] || now < due[i]) continue;
      if (tf_allocation_refresh(held[i]) < 0) {
        /* kept: try again shortly (the exit status will say something went wrong) */
        complain("refresh", "allocation %zu: %s", i + 1, tf_error_last()->message);
        refresh_failed = 1;
        due[i] = mono_s() + 5.0;
        continue;
      }
      due[i] = mono_s() + refresh_interval(tf_allocation_lifetime(held[i]));
    }
    struct timespec step = {0, 100 * 1000000L};
    nanosleep(&step, NULL);
  }
  for (size_t i = 0; i < made; i++) {
    if (!held[i]) continue;
    if (tf_allocation_release(held[i]) < 0) complain("release", "allocation %zu: %s", i + 1, tf_error_last()->message);
    tf_allocation_free(held[i]);
  }
  free(held);
  free(due);
  return status == EXIT_OK && refresh_failed ? EXIT_WRONG : status;
}

/* ---- flags ---- */

enum {
  OPT_URI = 256,
  OPT_SECRET_FILE,
  OPT_SECRET_ENV,
  OPT_USER,
  OPT_TTL,
  OPT_EXPECT_ADDRESS,
  OPT_EXPECT_PORT_RANGE,
  OPT_FAMILY,
  OPT_PEER_CHECK,
  OPT_HOLD,
  OPT_COUNT,
  OPT_CONCURRENCY,
  OPT_TIMEOUT_MS,
  OPT_CA_FILE,
  OPT_INSECURE,
  OPT_JSON,
  OPT_HELP,
  OPT_VERSION
};

static const struct option long_options[] = {{"uri", required_argument, NULL, OPT_URI},
                                             {"secret-file", required_argument, NULL, OPT_SECRET_FILE},
                                             {"secret-env", required_argument, NULL, OPT_SECRET_ENV},
                                             {"user", required_argument, NULL, OPT_USER},
                                             {"ttl", required_argument, NULL, OPT_TTL},
                                             {"expect-address", required_argument, NULL, OPT_EXPECT_ADDRESS},
                                             {"expect-port-range", required_argument, NULL, OPT_EXPECT_PORT_RANGE},
                                             {"family", required_argument, NULL, OPT_FAMILY},
                                             {"peer-check", no_argument, NULL, OPT_PEER_CHECK},
                                             {"hold", required_argument, NULL, OPT_HOLD},
                                             {"count", required_argument, NULL, OPT_COUNT},
                                             {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
                                             {"timeout-ms", required_argument, NULL, OPT_TIMEOUT_MS},
                                             {"ca-file", required_argument, NULL, OPT_CA_FILE},
                                             {"insecure", no_argument, NULL, OPT_INSECURE},
                                             {"json", no_argument, NULL, OPT_JSON},
                                             {"help", no_argument, NULL, OPT_HELP},
                                             {"version", no_argument, NULL, OPT_VERSION},
                                             {NULL, 0, NULL, 0}};

/* The flag of an argument without its "=value" (which may be a secret someone typed). */
static const char *flag_name(const char *arg, char *buf, size_t size)
{
  snprintf(buf, size, "%.*s", (int)strcspn(arg, "="), arg);
  return buf;
}

/* Parse argv into @p c; returns -1 after a usage message, 1 for --help/--version, 0 to go on. */
static int parse_flags(cli *c, int argc, char **argv)
{
  char name[64];
  opterr = 0;
  int ch;
  while ((ch = getopt_long(argc, argv, ":", long_options, NULL)) != -1) {
    switch (ch) {
    case OPT_URI: c->uri = optarg; break;
    case OPT_SECRET_FILE: c->secret_file = optarg; break;
    case OPT_SECRET_ENV: c->secret_env = optarg; break;
    case OPT_USER: c->user = optarg; break;
    case OPT_TTL:
      if (parse_count("--ttl", optarg, 1, 10LL * 365 * 86400, &c->ttl) < 0) return -1;
      break;
    case OPT_EXPECT_ADDRESS: {
      tf_addr a;
      if (tf_addr_parse(&a, optarg) < 0) {
        complain("--expect-address", "%s", tf_error_last()->message);
        return -1;
      }
      c->expect_address = optarg;
      break;
    }
    case OPT_EXPECT_PORT_RANGE:
      if (tf_port_range_parse(&c->range, optarg) < 0) {
        complain("--expect-port-range", "%s", tf_error_last()->message);
        return -1;
      }
      c->has_range = 1;
      break;
    case OPT_FAMILY:
      if (!strcmp(optarg, "ipv4")) c->family = TF_AF_INET;
      else if (!strcmp(optarg, "ipv6")) c->family = TF_AF_INET6;
      else {
        complain("--family", "\"%s\" is not ipv4 or ipv6", optarg);
        return -1;
      }
      break;
    case OPT_PEER_CHECK: c->peer_check = 1; break;
    case OPT_HOLD:
      if (parse_count("--hold", optarg, 1, 100000, &c->hold) < 0) return -1;
      break;
    case OPT_COUNT:
      if (parse_count("--count", optarg, 1, 100000000, &c->count) < 0) return -1;
      break;
    case OPT_CONCURRENCY:
      if (parse_count("--concurrency", optarg, 1, 100000, &c->concurrency) < 0) return -1;
      c->has_concurrency = 1;
      break;
    case OPT_TIMEOUT_MS:
      if (parse_count("--timeout-ms", optarg, 1, INT_MAX, &c->timeout_ms) < 0) return -1;
      break;
    case OPT_CA_FILE: c->ca_file = optarg; break;
    case OPT_INSECURE: c->insecure = 1; break;
    case OPT_JSON: c->json = 1; break;
    case OPT_HELP: fputs(usage_text, stdout); return 1;
    case OPT_VERSION: printf("%s %s\n", PROG, tf_version_string()); return 1;
    case ':': complain(flag_name(argv[optind - 1], name, sizeof(name)), "needs a value"); return -1;
    default:
      complain(flag_name(argv[optind - 1], name, sizeof(name)), "unknown option (see --help)");
      return -1;
    }
  }
  if (optind < argc) {
    /* not echoed: it may be a secret typed in the wrong place */
    complain("arguments", "%d unexpected argument(s): only flags are taken (see --help)", argc - optind);
    return -1;
  }
  if (!c->uri) {
    complain("--uri", "required (see --help)");
    return -1;
  }
  tf_uri *uri = NULL;
  if (tf_uri_parse(&uri, c->uri) < 0) {
    complain("--uri", "%s", tf_error_last()->message);
    return -1;
  }
  tf_uri_free(uri);
  if (!c->secret_file == !c->secret_env) {
    complain("--secret-file/--secret-env", "give exactly one (the secret is never taken from the command line)");
    return -1;
  }
  if (c->ca_file && c->insecure) {
    complain("--ca-file/--insecure", "give at most one");
    return -1;
  }
  if (c->hold && c->count) {
    complain("--hold/--count", "give at most one");
    return -1;
  }
  if (c->has_concurrency && !c->count) {
    complain("--concurrency", "only goes with --count");
    return -1;
  }
  return 0;
}

int main(int argc, char **argv)
{
  /* the secret and a --hold's allocations live here: no core dump may carry them */
  if (secure_no_dumps() < 0) {
    complain(NULL, "cannot disable core dumps: %s", strerror(errno));
    return 1;
  }
  cli c;
  memset(&c, 0, sizeof(c));
  c.concurrency = 1;
  int st = parse_flags(&c, argc, argv);
  if (st != 0) return st > 0 ? EXIT_OK : EXIT_BAD_INPUT;
  if (load_secret(&c) < 0) return EXIT_BAD_INPUT;

  tf_probe_options o;
  tf_probe_options_init(&o, TF_PROBE_OPTIONS_VERSION);
  o.uri = c.uri;
  o.secret = c.secret;
  if (c.user) o.user = c.user;
  if (c.ttl) o.ttl_s = c.ttl;
  o.family = c.family;
  o.expect_address = c.expect_address;
  if (c.has_range) {
    o.expect_port_start = c.range.start;
    o.expect_port_end = c.range.end;
  }
  o.peer_check = c.peer_check;
  if (c.timeout_ms) o.timeout_ms = (int)c.timeout_ms;
  o.ca_file = c.ca_file;
  o.insecure = c.insecure;

  int code;
  if (c.hold) code = probe_hold(&c, &o);
  else if (c.count) code = probe_count(&c, &o);
  else code = probe_once(&c, &o);
  wipe_secret(&c);
  return code;
}
