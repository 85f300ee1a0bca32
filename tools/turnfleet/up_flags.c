/* The command line of `turnfleet up`: flags into the runtime's settings, usage. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "up.h"

static const char up_usage[] =
  "usage: turnfleet up -f POOL --secret-file F [--addresses LIST | --nodes NODES] [--state-dir DIR]\n"
  "                    [--metrics-addr ADDR:PORT] [--probe-interval S] [--cli-port PORT]\n"
  "                    [--turnserver PATH] [--name NAME] [--peer-check [--allow-loopback-peers]]\n"
  "                    [--cert F --key F [--ca-file F]] [--json]\n"
  "  --addresses   this host's relay addresses: 127.0.0.11-13, 127.0.0.11,127.0.0.12, fd00::1-3, 127.0.0.80/30\n"
  "  --nodes       a NodeList JSON file (kubectl get nodes -o json), watched like the pool file\n"
  "  --state-dir   configs (0600), logs, status.json, turn-uris, iceServers.json (default ./turnfleet-state)\n"
  "  --metrics-addr  /metrics and /healthz (default 127.0.0.1:9650)\n"
  "  --probe-interval  seconds between a relay's probes (default 5; fractions allowed)\n"
  "  --cli-port    first loopback CLI port of the relays: counting and drain (default 5766)\n"
  "  --peer-check  probes also send data through each relay to a second allocation\n"
  "  --allow-loopback-peers  let coturn relay to loopback peers (test fleets on 127.0.0.0/8 only)\n"
  "  --cert/--key  the relays' TLS certificate and key (required with tls listeners)\n"
  "  --ca-file     what the probes verify the relays' certificate with (default: the system's CAs)\n"
  "  --turnserver  the coturn to run (default turnserver on PATH), or a wrapper such as\n"
  "                tools/dev/turnserver-rootfs; its --version must be the pool's coturnVersion\n"
  "  --json        JSON events on stdout (the default when stdout is not a terminal)\n";

enum { O_SECRET = 256, O_ADDRESSES, O_NODES, O_STATE_DIR, O_METRICS_ADDR, O_PROBE_INTERVAL, O_JSON, O_NAME,
       O_CLI_PORT, O_TURNSERVER, O_PEER_CHECK, O_ALLOW_LOOPBACK, O_CERT, O_KEY, O_CA_FILE };

int up_parse_flags(up *u, int argc, char **argv)
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
    case O_SECRET: u->secret_file = optarg; break;
    case O_ADDRESSES: u->addresses = optarg; break;
    case O_NODES: u->nodes_file = optarg; break;
    case O_STATE_DIR: u->state_dir_arg = optarg; break;
    case O_METRICS_ADDR: u->metrics_addr = optarg; break;
    case O_NAME: u->name = optarg; break;
    case O_JSON: u->json = 1; break;
    case O_PEER_CHECK: u->peer_check = 1; break;
    case O_ALLOW_LOOPBACK: u->allow_loopback_peers = 1; break;
    case O_CA_FILE: u->ca_file = optarg; break;
    case O_CERT:
    case O_KEY: /* coturn resolves relative names its own way: absolute paths */
      if (!(*(opt == O_CERT ? &u->cert : &u->key) = realpath(optarg, NULL)))
        return up_say(opt == O_CERT ? "--cert" : "--key", "%s: %s", optarg, strerror(errno)), 2;
      break;
    case O_TURNSERVER: u->turnserver = optarg; break;
    case O_PROBE_INTERVAL:
      u->probe_interval = strtod(optarg, &end);
      if (!*optarg || *end || !(u->probe_interval >= 0.1 && u->probe_interval <= 3600))
        return up_say("--probe-interval", "\"%s\" is not a number of seconds in 0.1-3600", optarg), 2;
      break;
    case O_CLI_PORT:
      port = strtol(optarg, &end, 10);
      if (!*optarg || *end || port < 1 || port > 65535) return up_say("--cli-port", "\"%s\" is not a port", optarg), 2;
      u->cli_port = (uint16_t)port;
      break;
    case ':': return up_say(NULL, "option \"%s\" needs a value", argv[optind - 1]), 2;
    default: return up_say(NULL, "unknown option \"%s\"\n%s", argv[optind - 1], up_usage), 2;
    }
  }
  if (optind < argc) return up_say(NULL, "unexpected argument \"%s\"", argv[optind]), 2;
  if (!u->pool_file || !u->secret_file) return up_say(NULL, "-f POOL and --secret-file F are required\n%s", up_usage), 2;
  if (!u->addresses == !u->nodes_file) return up_say(NULL, "give exactly one of --addresses LIST and --nodes NODES"), 2;
  if (!u->cert != !u->key) return up_say("--cert/--key", "give both or neither"), 2;
  return -1;
}
