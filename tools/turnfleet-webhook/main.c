/* turnfleet-webhook: the TURNPool admission webhook (validating and mutating)
 * over HTTPS. Flags, then the library's admission module behind serve.c. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sys/select.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cache.h"
#include "secure.h"
#include "serve.h"
#include "tool_io.h"
#include "tool_tls.h"
#include "turnfleet.h"

#define PROG "turnfleet-webhook"
#define EXIT_BAD_INPUT 2

static const char usage[] =
    "usage: turnfleet-webhook --listen ADDR:PORT --cert FILE --key FILE [--kubeconfig FILE]\n"
    "         [--max-replicas N] [--max-body BYTES] [--max-connections N] [--timeout S] [--threads N]\n"
    "         [--no-cluster] [--quiet] | --version | --help\n"
    "  --listen          where to serve HTTPS: POST /validate, POST /mutate, GET /healthz, GET /readyz\n"
    "  --cert, --key     PEM certificate chain and private key; reloaded when the files change\n"
    "  --kubeconfig      read TURNPools and Nodes with this kubeconfig (default: in-cluster service account)\n"
    "  --max-replicas    deny spec.replicas above N (create, update and /scale); default no cap\n"
    "  --max-body        largest review in bytes (default 3145728); larger bodies get 413\n"
    "  --max-connections connections at once (default 256)\n"
    "  --timeout         seconds a connection may idle, and a body may take to arrive (default 10)\n"
    "  --threads         request threads (default 2)\n"
    "  --no-cluster      no API access: pool rules only (no conflicts, no placement warnings)\n"
    "  --quiet           no line per review\n";

static int bad(const char *what, const char *msg)
{
  tool_say(PROG, what, "%s", msg);
  return EXIT_BAD_INPUT;
}

static void log_line(tf_log_level level, const char *message, void *payload)
{
  (void)level, (void)payload;
  fprintf(stderr, "%s: %s\n", PROG, message);
}

int main(int argc, char **argv)
{
  secure_no_dumps(); /* the TLS key is in memory */
  const char *listen = NULL, *cert = NULL, *key = NULL, *kubeconfig = NULL;
  long long max_replicas = 0, max_body = 3145728, conns = 256, timeout = 10, threads = 2;
  int no_cluster = 0, quiet = 0;
  static const struct option longs[] = {
      {"listen", required_argument, NULL, 'l'},      {"cert", required_argument, NULL, 'c'},
      {"key", required_argument, NULL, 'k'},         {"kubeconfig", required_argument, NULL, 'K'},
      {"max-replicas", required_argument, NULL, 'r'}, {"max-body", required_argument, NULL, 'b'},
      {"max-connections", required_argument, NULL, 'n'}, {"timeout", required_argument, NULL, 't'},
      {"threads", required_argument, NULL, 'T'},     {"no-cluster", no_argument, NULL, 'N'},
      {"quiet", no_argument, NULL, 'q'},             {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},           {NULL, 0, NULL, 0}};
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (c) {
    case 'l': listen = optarg; break;
    case 'c': cert = optarg; break;
    case 'k': key = optarg; break;
    case 'K': kubeconfig = optarg; break;
    case 'r': if (tool_number(PROG, "--max-replicas", optarg, 0, 2147483647LL, &max_replicas) < 0) return EXIT_BAD_INPUT; break;
    case 'b': if (tool_number(PROG, "--max-body", optarg, 1024, 64LL << 20, &max_body) < 0) return EXIT_BAD_INPUT; break;
    case 'n': if (tool_number(PROG, "--max-connections", optarg, 1, 65536, &conns) < 0) return EXIT_BAD_INPUT; break;
    case 't': if (tool_number(PROG, "--timeout", optarg, 1, 3600, &timeout) < 0) return EXIT_BAD_INPUT; break;
    case 'T': if (tool_number(PROG, "--threads", optarg, 1, 256, &threads) < 0) return EXIT_BAD_INPUT; break;
    case 'N': no_cluster = 1; break;
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
  if (!listen || !cert || !key) {
    tool_say(PROG, NULL, "--listen, --cert and --key are required");
    fputs(usage, stderr);
    return EXIT_BAD_INPUT;
  }
  if (no_cluster && kubeconfig) return bad("--kubeconfig", "not with --no-cluster");

  /* SIGTERM/SIGINT through a descriptor, blocked before any thread exists so all inherit the mask */
  int sfd = tool_stop_signalfd();
  char err[512];
  if (tool_tls_start(cert, key, 1000, err, sizeof(err)) < 0) {
    tool_say(PROG, "--cert/--key", "%s", err);
    if (sfd >= 0) close(sfd);
    return EXIT_BAD_INPUT;
  }

  tf_kube *kube = NULL;
  wh_cache *cache = NULL;
  int st = 0;
  if (!no_cluster) {
    tf_kube_options ko;
    tf_kube_options_init(&ko, TF_KUBE_OPTIONS_VERSION);
    ko.source = kubeconfig ? TF_KUBE_SOURCE_KUBECONFIG : TF_KUBE_SOURCE_IN_CLUSTER;
    ko.kubeconfig = kubeconfig;
    ko.user_agent = PROG;
    if (tf_kube_new(&kube, &ko) < 0) {
      tool_say(PROG, kubeconfig ? kubeconfig : "in-cluster configuration", "%s", tf_error_last()->message);
      st = EXIT_BAD_INPUT;
    } else if (wh_cache_start(&cache, kube, log_line, err, sizeof(err)) < 0) {
      tool_say(PROG, "cache", "%s", err);
      st = 1;
    }
  }
  wh_server *srv = NULL;
  if (!st) {
    wh_server_options so;
    memset(&so, 0, sizeof(so));
    so.listen = listen;
    so.limits.connections = (unsigned int)conns;
    so.limits.idle_s = (unsigned int)timeout;
    so.limits.threads = (unsigned int)threads;
    so.max_body = (size_t)max_body;
    so.body_ms = (long)timeout * 1000;
    tf_admission_options_init(&so.admission, TF_ADMISSION_OPTIONS_VERSION);
    so.admission.max_bytes = (size_t)max_body;
    so.admission.max_replicas = max_replicas;
    so.cache = cache;
    so.log_reviews = !quiet;
    srv = sfd >= 0 ? wh_server_start(&so) : NULL;
    if (!srv) {
      tool_say(PROG, "--listen", "cannot serve on %s: %s", listen, strerror(errno));
      st = 1;
    } else {
      fprintf(stderr, "%s: serving on %s\n", PROG, listen);
    }
  }
  unsigned long gen = tool_tls_generation();
  char last[256] = "";
  while (!st) {
    struct signalfd_siginfo si;
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(sfd, &fds);
    struct timeval tv = {1, 0};
    if (select(sfd + 1, &fds, NULL, NULL, &tv) > 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) break;
    /* say when the certificate changed or a new one could not be loaded, once each */
    unsigned long g = tool_tls_generation();
    if (g != gen) fprintf(stderr, "%s: loaded a new certificate from %s (generation %lu)\n", PROG, cert, g);
    gen = g;
    char now[256];
    tool_tls_last_error(now, sizeof(now));
    if (*now && strcmp(now, last) != 0) fprintf(stderr, "%s: keeping the current certificate: %s\n", PROG, now);
    memcpy(last, now, sizeof(last));
  }
  wh_server_stop(srv);
  wh_cache_stop(cache);
  tf_kube_free(kube);
  tool_tls_stop();
  if (sfd >= 0) close(sfd);
  return st;
}
