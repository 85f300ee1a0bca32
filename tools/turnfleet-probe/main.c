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
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <turnfleet.h>

#include "secure.h"
#include "tool_io.h"
#include "vantage.h"

#define PROG "turnfleet-probe"
#define EXIT_OK 0
#define EXIT_WRONG 1
#define EXIT_BAD_INPUT 2
#define EXIT_UNREACHABLE 3
#define SECRET_MAX 4096
#define URI_FILE_MAX (16 * 1024 * 1024)
#define FD_RESERVE 32 /* descriptors besides the probes' sockets: stdio, epoll, files */

static const char usage_text[] =
    "usage: turnfleet-probe (--uri URI ... | --uri-file F) (--secret-file F | --secret-env VAR)\n"
    "         [--user NAME | --user-prefix P] [--ttl S] [--expect-address ADDR] [--expect-port-range START-END]\n"
    "         [--family ipv4|ipv6] [--peer-check] [--hold N] [--count N] [--concurrency C] [--timeout-ms N]\n"
    "         [--ca-file F | --insecure] [--json] [--quiet]\n"
    "       turnfleet-probe --vantage POOL [--namespace NS] [--kubeconfig F] [--runner NAME]\n"
    "         (--secret-file F | --secret-env VAR) [probe flags]\n"
    "\n"
    "Allocate on the relay at URI (turn:/turns:) with TURN REST credentials minted from the shared\n"
    "secret, check the relayed address, optionally the data path, and release. --uri may be given\n"
    "several times; --uri-file reads one URI a line (a turn-uris file). --count N runs N probes per URI.\n"
    "Exit: 0 success, 1 the relay answered wrongly, 2 usage, bad input or local resources exhausted,\n"
    "3 unreachable or timed out.\n"
    "--vantage reads the ConfigMap <POOL>-turn-uris, probes every URI and writes the results to the\n"
    "ConfigMap <POOL>-vantage (exit 0 once written, 1 when the API fails, 2 bad input).\n"
    "See docs/probe.md.\n";

/* "turnfleet-probe: <what>: <why>" on stderr. */
#define complain(what, ...) tool_say(PROG, what, __VA_ARGS__)

typedef struct cli {
  const char **uris; /* --uri flags, then the lines of --uri-file */
  size_t nuris, uris_cap;
  char *uri_text; /* the --uri-file contents the uris point into */
  const char *uri_file, *secret_file, *secret_env, *user, *user_prefix, *expect_address, *ca_file;
  long long ttl, hold, count, concurrency, timeout_ms;
  int family, peer_check, insecure, json, quiet, has_range, has_concurrency;
  int progress; /* stderr is a terminal: a progress line */
  tf_port_range range;
  char *secret;
  size_t secret_len;
  probe_vantage vantage; /* --vantage POOL: the vantage runner */
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

/* One result line. @p flush: now (a single probe, --hold: scripts wait for lines);
 * a load run leaves stdout buffered. */
static void print_result(const cli *c, const tf_probe_result *r, int flush)
{
  if (c->json) {
    char *json = NULL;
    if (tf_probe_result_to_json(&json, r) == 0) {
      fputs(json, stdout);
      fputc('\n', stdout);
      tf_free(json);
    }
    if (flush) fflush(stdout);
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
  if (flush) fflush(stdout);
}

static void print_vantage_result(const tf_probe_result *r, void *arg)
{
  if (!((const cli *)arg)->quiet) print_result(arg, r, 0);
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
  print_result(c, r, 1);
  int code = tf_probe_result_exit_code(r);
  tf_probe_result_free(r);
  return code;
}

typedef struct tally {
  const cli *c;
  unsigned long long probes, done, ok, failed;
  int unreachable_seen, wrong_seen, resource_seen;
  /* failures by code: TURN codes 100-699, plus named non-TURN kinds */
  unsigned long long by_code[700];
  unsigned long long timeout, unreachable, resources;
  unsigned long long by_stage[TF_PROBE_STAGE_COUNT];
  double t0, last_progress;
  double last_flush; /* coarse clock */
} tally;

/* Seconds on @p clock: CLOCK_MONOTONIC, or its _COARSE twin (the tick's resolution, no timer
 * read) for the flush deadline. */
static double clock_s(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double mono_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* "\r  1200/2000 probes, 1198 ok, 2 failed, 4700/s" on stderr, at most ten times a second. */
static void progress(tally *t, int last)
{
  if (!t->c->progress) return;
  double now = mono_s();
  if (!last && now - t->last_progress < 0.1) return;
  t->last_progress = now;
  double rate = now > t->t0 ? (double)t->ok / (now - t->t0) : 0.0;
  fprintf(stderr, "\r%llu/%llu probes, %llu ok, %llu failed, %.0f allocations/s\033[K", t->done, t->probes, t->ok,
          t->failed, rate);
  if (last) fputs("\r\033[K", stderr); /* the summary line says it all */
  fflush(stderr);
}

static int on_result(size_t index, const tf_probe_result *r, void *payload)
{
  (void)index;
  tally *t = payload;
  t->done++;
  if (!t->c->quiet) {
    print_result(t->c, r, 0);
    double now = clock_s(CLOCK_MONOTONIC_COARSE);
    if (now - t->last_flush >= 0.1) { /* no result waits in the buffer much longer */
      fflush(stdout);
      t->last_flush = now;
    }
  }
  if (tf_probe_result_ok(r)) {
    t->ok++;
    progress(t, 0);
    return 0;
  }
  t->failed++;
  int ec = tf_probe_result_exit_code(r);
  if (ec == EXIT_UNREACHABLE) t->unreachable_seen = 1;
  else if (ec == EXIT_BAD_INPUT) t->resource_seen = 1;
  else t->wrong_seen = 1;
  int code = tf_probe_result_error_code(r);
  tf_err st = tf_probe_result_status(r);
  if (code > 0 && code < 700) t->by_code[code]++;
  else if (st == TF_ETIMEOUT) t->timeout++;
  else if (st == TF_ENET) t->unreachable++;
  else if (st == TF_ERESOURCE) t->resources++;
  else t->by_stage[tf_probe_result_stage(r)]++;
  progress(t, 0);
  return 0;
}

static void print_summary(const cli *c, const tally *t, double elapsed)
{
  double rate = elapsed > 0 ? (double)t->ok / elapsed : 0.0;
  if (c->json) {
    printf("{\"summary\":{\"probes\":%llu,\"allocations\":%llu,\"failures\":{", t->probes, t->ok);
    int first = 1;
    for (int code = 0; code < 700; code++) {
      if (!t->by_code[code]) continue;
      printf("%s\"%d\":%llu", first ? "" : ",", code, t->by_code[code]);
      first = 0;
    }
    const struct {
      const char *name;
      unsigned long long n;
    } kinds[] = {{"timeout", t->timeout}, {"unreachable", t->unreachable}, {"resources", t->resources}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
      if (!kinds[k].n) continue;
      printf("%s\"%s\":%llu", first ? "" : ",", kinds[k].name, kinds[k].n);
      first = 0;
    }
    for (int s = 0; s < TF_PROBE_STAGE_COUNT; s++) {
      if (!t->by_stage[s]) continue;
      printf("%s\"%s\":%llu", first ? "" : ",", tf_probe_stage_name((tf_probe_stage)s), t->by_stage[s]);
      first = 0;
    }
    printf("},\"elapsedS\":%.3f,\"allocationsPerSecond\":%.1f}}\n", elapsed, rate);
  } else {
    printf("summary: %llu probes, %llu allocations, %llu failures, %.3f s, %.1f allocations/s\n", t->probes, t->ok,
           t->failed, elapsed, rate);
  }
  fflush(stdout);
}

/* Descriptors for @p concurrency probes (two sockets each with --peer-check): raise
 * the soft limit as far as needed and allowed, else refuse naming the numbers. */
static int check_fd_limit(const cli *c, unsigned long long concurrency)
{
  unsigned long long need = concurrency * (c->peer_check ? 2u : 1u) + FD_RESERVE;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return 0;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= need) return 0;
  if (rl.rlim_cur == RLIM_INFINITY) return 0;
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
    struct rlimit raised = rl;
    raised.rlim_cur = (rlim_t)need;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return 0;
  }
  unsigned long long most = rl.rlim_max == RLIM_INFINITY ? rl.rlim_cur : rl.rlim_max;
  unsigned long long fit = most > FD_RESERVE ? (most - FD_RESERVE) / (c->peer_check ? 2u : 1u) : 0;
  complain("--concurrency",
           "%llu probes at once need %llu file descriptors; the limit is %llu (ulimit -n): at most %llu here",
           concurrency, need, most, fit);
  return -1;
}

/* Every URI (--count N times each, N from 1) on one probe set, C at a time, then a summary. */
static int probe_many(const cli *c, tf_probe_options *o)
{
  /* results go out in blocks of 64 KiB rather than stdio's 4 KiB for a pipe or file: a load
   * test's thousands of lines a second then cost a write (and a reader's wake-up) per ~200
   * lines; on_result flushes when 100 ms have passed, so none waits longer */
  static char out[1 << 16];
  if (!isatty(STDOUT_FILENO)) setvbuf(stdout, out, _IOFBF, sizeof(out));
  unsigned long long per_uri = c->count ? (unsigned long long)c->count : 1;
  unsigned long long total = per_uri * c->nuris;
  unsigned long long concurrency = (unsigned long long)c->concurrency;
  if (concurrency > total) concurrency = total;
  if (check_fd_limit(c, concurrency) < 0) return EXIT_BAD_INPUT;
  tf_probe_set *set = NULL;
  if (tf_probe_set_new(&set, (unsigned)concurrency) < 0) {
    complain("--concurrency", "%s", tf_error_last()->message);
    return EXIT_BAD_INPUT;
  }
  for (size_t i = 0; i < c->nuris; i++) {
    o->uri = c->uris[i];
    /* one copy of the options per URI, however many probes: memory does not grow with --count */
    tf_err rc = tf_probe_set_add_repeated(set, o, per_uri);
    if (rc < 0) {
      complain(rc == TF_EINVALID ? "options" : "probe", "%s: %s", c->uris[i], tf_error_last()->message);
      tf_probe_set_free(set);
      return rc == TF_EINVALID ? EXIT_BAD_INPUT : EXIT_WRONG;
    }
  }
  tally *t = calloc(1, sizeof(*t));
  if (!t) {
    complain("probe", "out of memory");
    tf_probe_set_free(set);
    return EXIT_WRONG;
  }
  t->c = c;
  t->probes = total;
  t->t0 = mono_s();
  t->last_flush = clock_s(CLOCK_MONOTONIC_COARSE);
  tf_err rc = tf_probe_set_run(set, on_result, t);
  double elapsed = mono_s() - t->t0;
  tf_probe_set_free(set);
  progress(t, 1);
  if (rc < 0) {
    fflush(stdout);
    complain("probe", "%s", tf_error_last()->message);
    free(t);
    return rc == TF_ERESOURCE ? EXIT_BAD_INPUT : EXIT_WRONG;
  }
  print_summary(c, t, elapsed);
  /* the worst outcome wins: this machine's shortage, then silence, then wrong answers */
  int code = t->resource_seen ? EXIT_BAD_INPUT : t->unreachable_seen ? EXIT_UNREACHABLE
                                                 : t->wrong_seen     ? EXIT_WRONG
                                                                     : EXIT_OK;
  free(t);
  return code;
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
    print_result(c, r, 1);
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
  OPT_URI_FILE,
  OPT_USER_PREFIX,
  OPT_QUIET,
  OPT_HELP,
  OPT_VERSION,
  OPT_VANTAGE,
  OPT_NAMESPACE,
  OPT_KUBECONFIG,
  OPT_RUNNER
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
                                             {"uri-file", required_argument, NULL, OPT_URI_FILE},
                                             {"user-prefix", required_argument, NULL, OPT_USER_PREFIX},
                                             {"quiet", no_argument, NULL, OPT_QUIET},
                                             {"help", no_argument, NULL, OPT_HELP},
                                             {"version", no_argument, NULL, OPT_VERSION},
                                             {"vantage", required_argument, NULL, OPT_VANTAGE},
                                             {"namespace", required_argument, NULL, OPT_NAMESPACE},
                                             {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
                                             {"runner", required_argument, NULL, OPT_RUNNER},
                                             {NULL, 0, NULL, 0}};

/* The flag of an argument without its "=value" (which may be a secret someone typed). */
static const char *flag_name(const char *arg, char *buf, size_t size)
{
  snprintf(buf, size, "%.*s", (int)strcspn(arg, "="), arg);
  return buf;
}

static int add_uri(cli *c, const char *uri)
{
  if (c->nuris == c->uris_cap) {
    size_t cap = c->uris_cap ? c->uris_cap * 2 : 8;
    const char **u = realloc(c->uris, cap * sizeof(*u));
    if (!u) {
      complain("--uri", "out of memory");
      return -1;
    }
    c->uris = u;
    c->uris_cap = cap;
  }
  c->uris[c->nuris++] = uri;
  return 0;
}

/* The URIs of a turn-uris file: one a line; blank lines and lines starting with '#'
 * are skipped, surrounding blanks (and a CR) are not part of the URI. */
static int read_uri_file(cli *c)
{
  size_t len = 0;
  char *text = tool_read_file(c->uri_file, &len, URI_FILE_MAX);
  if (!text) {
    complain("--uri-file", "%s: %s", c->uri_file, strerror(errno));
    return -1;
  }
  if (len > URI_FILE_MAX) {
    free(text);
    complain("--uri-file", "%s: larger than %d MiB", c->uri_file, URI_FILE_MAX >> 20);
    return -1;
  }
  c->uri_text = text;
  const char *nul = memchr(text, '\0', len);
  if (nul) {
    complain("--uri-file", "%s: a NUL byte at offset %zu", c->uri_file, (size_t)(nul - text));
    return -1;
  }
  size_t before = c->nuris;
  unsigned line = 0;
  for (char *p = text; p && *p;) {
    line++;
    char *nl = strchr(p, '\n');
    if (nl) *nl = '\0';
    char *end = p + strlen(p);
    while (*p == ' ' || *p == '\t') p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) *--end = '\0';
    if (*p && *p != '#') {
      tf_uri *uri = NULL;
      if (tf_uri_parse(&uri, p) < 0) {
        complain("--uri-file", "%s:%u: %s", c->uri_file, line, tf_error_last()->message);
        return -1;
      }
      tf_uri_free(uri);
      if (add_uri(c, p) < 0) return -1;
    }
    p = nl ? nl + 1 : NULL;
  }
  if (c->nuris == before) {
    complain("--uri-file", "%s: no URI in it", c->uri_file);
    return -1;
  }
  return 0;
}

/* Parse argv into @p c; returns -1 after a usage message, 1 for --help/--version, 0 to go on. */
static int parse_flags(cli *c, int argc, char **argv)
{
  char name[64];
  opterr = 0;
  int ch;
  while ((ch = getopt_long(argc, argv, ":", long_options, NULL)) != -1) {
    switch (ch) {
    case OPT_URI: {
      tf_uri *uri = NULL;
      if (tf_uri_parse(&uri, optarg) < 0) {
        complain("--uri", "%s", tf_error_last()->message);
        return -1;
      }
      tf_uri_free(uri);
      if (add_uri(c, optarg) < 0) return -1;
      break;
    }
    case OPT_URI_FILE:
      if (c->uri_file) {
        complain("--uri-file", "give it once");
        return -1;
      }
      c->uri_file = optarg;
      break;
    case OPT_USER_PREFIX: c->user_prefix = optarg; break;
    case OPT_QUIET: c->quiet = 1; break;
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
    case OPT_VANTAGE: c->vantage.pool = optarg; c->vantage.argv = argv; break;
    case OPT_NAMESPACE: c->vantage.ns = optarg; break;
    case OPT_KUBECONFIG: c->vantage.kubeconfig = optarg; break;
    case OPT_RUNNER: c->vantage.runner = optarg; break;
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
  if (!c->vantage.pool && (c->vantage.ns || c->vantage.kubeconfig || c->vantage.runner)) {
    complain("--namespace/--kubeconfig/--runner", "only go with --vantage");
    return -1;
  }
  if (c->vantage.pool) {
    if (c->nuris || c->uri_file || c->hold || c->count || c->has_concurrency || c->expect_address || c->has_range) {
      complain("--vantage", "takes its URIs from the pool's turn-uris ConfigMap: no --uri, --uri-file, --hold, "
                            "--count, --concurrency, --expect-address or --expect-port-range");
      return -1;
    }
    if (!c->secret_file == !c->secret_env) {
      complain("--secret-file/--secret-env", "give exactly one (the secret is never taken from the command line)");
      return -1;
    }
    return 0;
  }
  if (c->uri_file && read_uri_file(c) < 0) return -1;
  if (c->nuris == 0) {
    complain("--uri", "required (see --help)");
    return -1;
  }
  if (c->user && c->user_prefix) {
    complain("--user/--user-prefix", "give at most one");
    return -1;
  }
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
  if (c->has_concurrency && !c->count && c->nuris < 2) {
    complain("--concurrency", "only goes with --count or several URIs");
    return -1;
  }
  if (c->hold && c->nuris > 1) {
    complain("--hold", "takes one URI");
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
  if (st != 0) {
    free(c.uris);
    free(c.uri_text);
    return st > 0 ? EXIT_OK : EXIT_BAD_INPUT;
  }
  if (load_secret(&c) < 0) {
    free(c.uris);
    free(c.uri_text);
    return EXIT_BAD_INPUT;
  }
  c.progress = isatty(STDERR_FILENO) && (c.count || c.nuris > 1);

  tf_probe_options o;
  tf_probe_options_init(&o, TF_PROBE_OPTIONS_VERSION);
  o.uri = c.nuris ? c.uris[0] : NULL;
  o.secret = c.secret;
  if (c.user) o.user = c.user;
  if (c.user_prefix) {
    o.user = c.user_prefix;
    o.user_numbered = 1;
  }
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
  if (c.vantage.pool) code = vantage_run(&c.vantage, &o, print_vantage_result, &c);
  else if (c.hold) code = probe_hold(&c, &o);
  else if (c.count || c.nuris > 1 || c.quiet) code = probe_many(&c, &o);
  else code = probe_once(&c, &o);
  wipe_secret(&c);
  free(c.uris);
  free(c.uri_text);
  return code;
}
