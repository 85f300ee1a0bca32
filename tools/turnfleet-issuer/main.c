/* turnfleet-issuer: TURN credentials for WebRTC clients, relays chosen by the library's issuer
 * module, from the pools the informers see in Kubernetes or from a `turnfleet up` state directory.
 * Flags, then source.c and serve.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "secure.h"
#include "serve.h"
#include "source.h"
#include "tool_http.h"
#include "tool_io.h"
#include "tool_tls.h"
#include "turnfleet.h"

#define PROG "turnfleet-issuer"
#define EXIT_BAD_INPUT 2
#define MAX_ORIGINS 64

static const char usage[] =
    "usage: turnfleet-issuer --listen ADDR:PORT [--cert FILE --key FILE]\n"
    "         ([--kubeconfig FILE] [--namespace NS] | --state-dir DIR --secret-file FILE --pool NAME [--namespace NS])\n"
    "         (--tokens-file FILE | --no-auth) [--ttl DUR] [--ttl-max DUR] [--max-relays N]\n"
    "         [--cors-origin ORIGIN]... [--rate N] [--burst N] [--threads N] [--max-connections N]\n"
    "         [--timeout S] [--quiet] | --version | --help\n"
    "  --listen          GET /ice, GET /?service=turn, /healthz, /readyz, /metrics; plain HTTP only on loopback\n"
    "  --cert, --key     serve HTTPS with this PEM chain and key (reloaded when the files change)\n"
    "  --kubeconfig      Kubernetes: TURNPools, <pool>-turn-uris ConfigMaps and auth Secrets through informers\n"
    "                    (default: the in-cluster service account)\n"
    "  --namespace       Kubernetes: only this namespace (default: all); the namespace of pool=NAME\n"
    "  --state-dir       instead: a `turnfleet up` state directory (iceServers.json, status.json), re-read on change\n"
    "  --secret-file     its pool's shared secret (one line), re-read on change\n"
    "  --pool            its pool's name (the namespace is --namespace, default \"default\")\n"
    "  --tokens-file     bearer tokens, one a line (# comments), re-read on change; others get 401\n"
    "  --no-auth         answer without a token (loopback only, for development)\n"
    "  --ttl, --ttl-max  credential lifetime by default (1h) and at most (24h): 90, 90s, 15m, 2h\n"
    "  --max-relays      most relays per answer (default 2)\n"
    "  --cors-origin     an origin (scheme://host[:port]) allowed to ask from a browser; repeatable\n"
    "  --rate, --burst   answers per second per client address (default 5) and the burst (default 20); 429 beyond\n"
    "  --threads, --max-connections, --timeout   HTTPS request threads (2), connections (256), idle seconds (10)\n"
    "  --quiet           no line per answer\n";

/* "90", "90s", "15m", "2h" → seconds, 1 s to 7 days. */
static int duration(const char *flag, const char *text, long long *out)
{
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10), mul = 1;
  if (*end == 's') end++;
  else if (*end == 'm') mul = 60, end++;
  else if (*end == 'h') mul = 3600, end++;
  if (errno || end == text || *end || v < 1 || v * mul > 7 * 86400) {
    tool_say(PROG, flag, "\"%s\" is not a duration from 1s to 168h (90, 90s, 15m, 2h)", text);
    return -1;
  }
  *out = v * mul;
  return 0;
}

static int loopback(const char *addr_port)
{
  struct sockaddr_storage ss;
  int v6 = 0;
  if (tool_http_sockaddr(addr_port, &ss, &v6) < 0) return -1;
  if (v6) return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
  return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
}

/* scheme://host[:port], nothing after */
static int origin_ok(const char *o)
{
  const char *p = strstr(o, "://");
  if (!p || p == o || !p[3]) return 0;
  for (const char *c = o; c < p; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '+' || *c == '-' || *c == '.')) return 0;
  for (const char *c = p + 3; *c; c++)
    if (*c == '/' || *c <= ' ' || *c >= 0x7f || *c == '?' || *c == '#') return 0;
  return 1;
}

static void log_line(tf_log_level level, const char *message, void *payload)
{
  (void)level, (void)payload;
  fprintf(stderr, "%s: %s\n", PROG, message);
}

static int bad(const char *what, const char *msg)
{
  tool_say(PROG, what, "%s", msg);
  return EXIT_BAD_INPUT;
}

int main(int argc, char **argv)
{
  secure_no_dumps(); /* the secret and the TLS key are in memory */
  const char *listen = NULL, *cert = NULL, *key = NULL, *state_dir = NULL, *secret_file = NULL;
  const char *tokens_file = NULL, *pool = NULL, *ns = NULL, *kubeconfig = NULL;
  const char *origins[MAX_ORIGINS];
  size_t origin_count = 0;
  long long ttl = TF_ISSUER_TTL_DEFAULT_S, ttl_max = TF_ISSUER_TTL_MAX_S, max_relays = TF_ISSUER_MAX_RELAYS_DEFAULT;
  long long rate = 5, burst = 20, threads = 2, conns = 256, timeout = 10;
  int no_auth = 0, quiet = 0, ttl_given = 0;
  static const struct option longs[] = {
      {"listen", required_argument, NULL, 'l'},     {"cert", required_argument, NULL, 'c'},
      {"key", required_argument, NULL, 'k'},        {"state-dir", required_argument, NULL, 'd'},
      {"secret-file", required_argument, NULL, 's'}, {"pool", required_argument, NULL, 'p'},
      {"namespace", required_argument, NULL, 'n'},  {"tokens-file", required_argument, NULL, 'T'},
      {"no-auth", no_argument, NULL, 'A'},          {"ttl", required_argument, NULL, 't'},
      {"ttl-max", required_argument, NULL, 'x'},    {"max-relays", required_argument, NULL, 'm'},
      {"cors-origin", required_argument, NULL, 'o'}, {"rate", required_argument, NULL, 'r'},
      {"burst", required_argument, NULL, 'b'},      {"threads", required_argument, NULL, 'h' + 256},
      {"max-connections", required_argument, NULL, 'C'}, {"timeout", required_argument, NULL, 'W'},
      {"kubeconfig", required_argument, NULL, 'K'}, {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},             {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0}};
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (c) {
    case 'l': listen = optarg; break;
    case 'c': cert = optarg; break;
    case 'k': key = optarg; break;
    case 'd': state_dir = optarg; break;
    case 's': secret_file = optarg; break;
    case 'p': pool = optarg; break;
    case 'n': ns = optarg; break;
    case 'T': tokens_file = optarg; break;
    case 'A': no_auth = 1; break;
    case 't': if (duration("--ttl", optarg, &ttl) < 0) return EXIT_BAD_INPUT; ttl_given = 1; break;
    case 'x': if (duration("--ttl-max", optarg, &ttl_max) < 0) return EXIT_BAD_INPUT; break;
    case 'm': if (tool_number(PROG, "--max-relays", optarg, 1, 64, &max_relays) < 0) return EXIT_BAD_INPUT; break;
    case 'o':
      if (!origin_ok(optarg)) return bad("--cors-origin", "must be scheme://host[:port], as a browser sends Origin");
      if (origin_count == MAX_ORIGINS) return bad("--cors-origin", "more than 64 origins");
      origins[origin_count++] = optarg;
      break;
    case 'r': if (tool_number(PROG, "--rate", optarg, 0, 1000000, &rate) < 0) return EXIT_BAD_INPUT; break;
    case 'b': if (tool_number(PROG, "--burst", optarg, 1, 1000000, &burst) < 0) return EXIT_BAD_INPUT; break;
    case 'h' + 256: if (tool_number(PROG, "--threads", optarg, 1, 256, &threads) < 0) return EXIT_BAD_INPUT; break;
    case 'C': if (tool_number(PROG, "--max-connections", optarg, 1, 65536, &conns) < 0) return EXIT_BAD_INPUT; break;
    case 'W': if (tool_number(PROG, "--timeout", optarg, 1, 3600, &timeout) < 0) return EXIT_BAD_INPUT; break;
    case 'K': kubeconfig = optarg; break;
    case 'q': quiet = 1; break;
    case 'h': fputs(usage, stdout); return 0;
    case 'V': printf("%s %s\n", PROG, tf_version_string()); return 0;
    default:
      tool_say(PROG, NULL, "unknown option or missing value: %s", argv[optind - 1]);
      fputs(usage, stderr);
      return EXIT_BAD_INPUT;
    }
  }
  if (optind < argc) return bad(argv[optind], "unexpected argument");
  if (!listen) {
    tool_say(PROG, NULL, "--listen is required");
    fputs(usage, stderr);
    return EXIT_BAD_INPUT;
  }
  if (state_dir) {
    if (kubeconfig) return bad("--kubeconfig", "not with --state-dir");
    if (!secret_file || !pool) return bad("--state-dir", "needs --secret-file and --pool");
  } else if (secret_file || pool) {
    return bad(secret_file ? "--secret-file" : "--pool", "only with --state-dir");
  }
  int lo = loopback(listen);
  if (lo < 0) return bad("--listen", "must be ADDR:PORT or [V6]:PORT");
  if (!cert != !key) return bad(cert ? "--key" : "--cert", "--cert and --key go together");
  if (!cert && !lo) return bad("--listen", "plain HTTP is served on a loopback address only: give --cert and --key");
  if (!tokens_file && !no_auth) return bad("--tokens-file", "required (or --no-auth, on loopback only)");
  if (tokens_file && no_auth) return bad("--no-auth", "not with --tokens-file");
  if (no_auth && !lo) return bad("--no-auth", "only on a loopback --listen address");
  if (!ttl_given && ttl > ttl_max) ttl = ttl_max; /* a short --ttl-max shortens the default too */
  if (ttl > ttl_max) return bad("--ttl", "longer than --ttl-max");
  if (ttl < TF_ISSUER_TTL_MIN_S || ttl_max < TF_ISSUER_TTL_MIN_S) return bad("--ttl", "at least 60s");
  if ((pool && !*pool) || (ns && !*ns)) return bad(ns && !*ns ? "--namespace" : "--pool", "must not be empty");

  int sfd = tool_stop_signalfd();
  char err[600];
  const char *ns_given = ns;
  is_tokens *tokens = NULL;
  tf_kube *kube = NULL;
  is_source *src = NULL;
  if (tokens_file && !(tokens = is_tokens_new(tokens_file, err, sizeof(err)))) {
    if (sfd >= 0) close(sfd);
    return bad("--tokens-file", err);
  }
  if (state_dir) {
    if (!ns) ns = "default";
    src = is_source_files(state_dir, secret_file, ns, pool, err, sizeof(err));
    if (!src) {
      is_tokens_free(tokens);
      if (sfd >= 0) close(sfd);
      return bad("--secret-file", err);
    }
  } else {
    tf_kube_options ko;
    tf_kube_options_init(&ko, TF_KUBE_OPTIONS_VERSION);
    ko.source = kubeconfig ? TF_KUBE_SOURCE_KUBECONFIG : TF_KUBE_SOURCE_IN_CLUSTER;
    ko.kubeconfig = kubeconfig;
    ko.user_agent = PROG;
    if (tf_kube_new(&kube, &ko) < 0) {
      tool_say(PROG, kubeconfig ? kubeconfig : "in-cluster configuration", "%s", tf_error_last()->message);
      is_tokens_free(tokens);
      if (sfd >= 0) close(sfd);
      return EXIT_BAD_INPUT;
    }
    src = is_source_kube(kube, ns, log_line, err, sizeof(err));
    if (!src) {
      tool_say(PROG, "informers", "%s", err);
      tf_kube_free(kube);
      is_tokens_free(tokens);
      if (sfd >= 0) close(sfd);
      return 1;
    }
    if (!ns) ns = tf_kube_namespace(kube);
  }
  if (cert && tool_tls_start(cert, key, 1000, err, sizeof(err)) < 0) {
    is_source_free(src);
    tf_kube_free(kube);
    is_tokens_free(tokens);
    if (sfd >= 0) close(sfd);
    return bad("--cert/--key", err);
  }
  is_server_options so;
  memset(&so, 0, sizeof(so));
  so.listen = listen;
  so.tls = cert != NULL;
  so.limits.connections = (unsigned int)conns;
  so.limits.idle_s = (unsigned int)timeout;
  so.limits.threads = (unsigned int)threads;
  so.source = src;
  so.tokens = tokens;
  so.default_ns = ns;
  so.origins = origins;
  so.origin_count = origin_count;
  so.rate = (double)rate;
  so.burst = (double)burst;
  tf_issuer_options_init(&so.issuer, TF_ISSUER_OPTIONS_VERSION);
  so.issuer.max_relays = (size_t)max_relays;
  so.issuer.ttl_default_s = ttl;
  so.issuer.ttl_max_s = ttl_max;
  so.log_requests = !quiet;
  is_server *srv = sfd >= 0 ? is_server_start(&so) : NULL;
  int st = 0;
  if (!srv) {
    tool_say(PROG, "--listen", "cannot serve on %s: %s", listen, strerror(errno));
    st = 1;
  } else {
    if (state_dir)
      fprintf(stderr, "%s: serving %s/%s from %s on %s (%s)%s\n", PROG, ns, pool, state_dir, listen,
              cert ? "https" : "http", no_auth ? ", without authentication" : "");
    else
      fprintf(stderr, "%s: serving the pools of %s from %s on %s (%s)%s\n", PROG,
              ns_given ? ns_given : "every namespace",
              tf_kube_server(kube), listen, cert ? "https" : "http", no_auth ? ", without authentication" : "");
  }
  while (!st) {
    struct signalfd_siginfo si;
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(sfd, &fds);
    struct timeval tv = {1, 0};
    if (select(sfd + 1, &fds, NULL, NULL, &tv) > 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) break;
  }
  is_server_stop(srv);
  if (cert) tool_tls_stop();
  is_source_free(src);
  tf_kube_free(kube);
  is_tokens_free(tokens);
  if (sfd >= 0) close(sfd);
  return st;
}
