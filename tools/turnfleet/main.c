/* turnfleet: plan, render, capacity and validate TURN relay pools.
 * Thin: parse flags, read files, call libturnfleet, print. Exit codes:
 * 0 success, 1 failure of the operation, 2 usage or bad input. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <turnfleet.h>

#include "tool_io.h"
#include "secure.h"
#include "agent.h"
#include "up.h"

#define PROG "turnfleet"
#define EXIT_BAD_INPUT 2

static const char usage_text[] =
  "usage: turnfleet <command> [options]\n"
  "\n"
  "commands:\n"
  "  validate -f POOL [--name NAME] [-o text|json]\n"
  "  plan     -f POOL --nodes NODES [--existing RELAYS.json] [--name NAME] [-o table|json]\n"
  "  capacity -f POOL --nodes NODES [--existing RELAYS.json] [--target-allocations N] [--headroom H]\n"
  "           [--session-kbps K --node-mbps M] [--name NAME] [-o table|json]\n"
  "  render   -f POOL --nodes NODES --relay NAME --secret-file F [--previous-secret-file F]\n"
  "           [--coturn-version V] [--existing RELAYS.json] [--state-dir DIR] [--log-file F]\n"
  "           [--cert F --key F] [--prometheus] [--cli-port N --cli-password-file F] [--name NAME]\n"
  "           [--out FILE]\n"
  "  up       -f POOL --secret-file F (--addresses LIST | --nodes NODES) [--state-dir DIR]\n"
  "           [--metrics-addr ADDR:PORT] [--probe-interval S] [--json]   (run the pool here; see up --help)\n"
  "  agent    --config CONF --coturn-version V --listen ADDR:PORT --namespace NS --pool P --relay R\n"
  "           --marker FILE [--interval S]          (the relay pod's sidecar; see agent --help)\n"
  "  agent prestop --config CONF --coturn-version V --marker FILE --deadline S\n"
  "  version\n"
  "\n"
  "POOL is a TURNPool (YAML or JSON, whole object or spec); NODES is `kubectl get nodes -o json`.\n"
  "Every input file is limited to 16 MiB and one million values: --max-input-bytes N, --max-input-values N.\n"
  "See docs/cli.md.\n";

/* "turnfleet: <what>: <why>" on stderr. */
#define complain(what, ...) tool_say(PROG, what, __VA_ARGS__)

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "%s: ", PROG);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(run `turnfleet help` for usage)\n");
  return EXIT_BAD_INPUT;
}

/* Read a whole file, at most @p max + 1 bytes (the parser then names the
 * limit); NULL with a message on failure. */
static char *read_file(const char *path, size_t *len, size_t max)
{
  char *buf = tool_read_file(path, len, max);
  if (!buf) complain(path, errno == EIO ? "cannot read" : "cannot open: %s", strerror(errno));
  return buf;
}

typedef struct cli {
  tf_parse_options limits;
  const char *pool_file, *nodes_file, *existing_file, *name, *output;
  const char *relay, *secret_file, *previous_secret_file, *coturn_version;
  const char *state_dir, *log_file, *cert, *key, *out_file, *cli_port, *cli_password_file;
  const char *target, *headroom, *session_kbps, *node_mbps;
  int prometheus; /* render: coturn's exporter (a build that has it) */
  tf_pool *pool;
  tf_nodes *nodes;
  tf_existing *fleet;
  tf_plan *plan;
} cli;

/* A document the parser refused: its message, and how to raise a limit it hit. */
static int parse_failed(const char *path)
{
  const char *msg = tf_error_last()->message;
  complain(path, "%s", msg);
  if (strstr(msg, "tf_parse_options.max_bytes")) complain(path, "hint: raise the limit with --max-input-bytes N");
  if (strstr(msg, "tf_parse_options.max_values")) complain(path, "hint: raise the limit with --max-input-values N");
  return EXIT_BAD_INPUT;
}

static int load_pool(cli *c)
{
  size_t len;
  if (!c->pool_file) return usage_error("%s", "-f POOL is required");
  char *text = read_file(c->pool_file, &len, c->limits.max_bytes);
  if (!text) return EXIT_BAD_INPUT;
  tf_err rc = tf_pool_parse_with(&c->pool, text, len, TF_FORMAT_AUTO, &c->limits);
  free(text);
  if (rc < 0) return parse_failed(c->pool_file);
  if (c->name && tf_pool_set_name(c->pool, c->name) < 0) {
    complain("--name", "%s", tf_error_last()->message);
    return EXIT_BAD_INPUT;
  }
  tf_problems *problems = NULL;
  rc = tf_pool_validate(&problems, c->pool);
  for (size_t i = 0; i < tf_problems_count(problems); i++)
    complain(c->pool_file, "%s: %s", tf_problems_path(problems, i), tf_problems_message(problems, i));
  tf_problems_free(problems);
  if (rc == TF_EINVALID && !*tf_pool_name(c->pool))
    complain(c->pool_file, "hint: a bare spec has no metadata.name: pass --name NAME");
  if (rc == TF_EINVALID) return EXIT_BAD_INPUT;
  if (rc < 0) {
    complain(c->pool_file, "%s", tf_error_last()->message);
    return 1;
  }
  return 0;
}

static int load_plan(cli *c)
{
  size_t len;
  int st = load_pool(c);
  if (st) return st;
  if (!c->nodes_file) return usage_error("%s", "--nodes NODES is required");
  char *text = read_file(c->nodes_file, &len, c->limits.max_bytes);
  if (!text) return EXIT_BAD_INPUT;
  tf_err rc = tf_nodes_parse_with(&c->nodes, text, len, &c->limits);
  free(text);
  if (rc < 0) return parse_failed(c->nodes_file);
  if (c->existing_file) {
    text = read_file(c->existing_file, &len, c->limits.max_bytes);
    if (!text) return EXIT_BAD_INPUT;
    rc = tf_existing_parse_with(&c->fleet, text, len, &c->limits);
    free(text);
    if (rc < 0) return parse_failed(c->existing_file);
  }
  rc = tf_plan_new(&c->plan, c->pool, c->nodes, c->fleet);
  if (rc < 0) {
    complain("plan", "%s", tf_error_last()->message);
    return rc == TF_EINVALID ? EXIT_BAD_INPUT : 1;
  }
  return 0;
}

static int print_json(tf_err rc, char *json)
{
  if (rc < 0) {
    complain(NULL, "%s", tf_error_last()->message);
    return 1;
  }
  fputs(json, stdout);
  fputc('\n', stdout);
  tf_free(json);
  return 0;
}

static int check_output(const cli *c, const char *a, const char *b)
{
  if (!c->output || !strcmp(c->output, a) || !strcmp(c->output, b)) return 0;
  fprintf(stderr, "%s: -o: \"%s\" is not one of %s, %s\n", PROG, c->output, a, b);
  return EXIT_BAD_INPUT;
}

static int wants_json(const cli *c) { return c->output && !strcmp(c->output, "json"); }

static void print_conditions(const tf_plan *plan)
{
  for (size_t i = 0; i < tf_plan_condition_count(plan); i++) {
    const char *type, *status, *reason, *message;
    if (tf_plan_condition(plan, i, &type, &status, &reason, &message) == 0)
      printf("%s=%s (%s): %s\n", type, status, reason, message);
  }
}

static void relay_addresses(const tf_relay *r, char *buf, size_t size)
{
  size_t used = 0;
  buf[0] = '\0';
  for (size_t a = 0; a < tf_relay_address_count(r); a++) {
    tf_addr addr;
    char text[TF_ADDR_STRLEN];
    if (tf_relay_address(&addr, r, a) < 0 || tf_addr_format(text, sizeof(text), &addr) < 0) continue;
    int n = snprintf(buf + used, size - used, "%s%s", a ? "," : "", text);
    if (n < 0 || (size_t)n >= size - used) break;
    used += (size_t)n;
  }
}

static int cmd_validate(cli *c)
{
  int st = check_output(c, "text", "json");
  if (st || (st = load_pool(c))) return st;
  if (wants_json(c)) {
    char *json = NULL;
    tf_err rc = tf_pool_to_json(&json, c->pool);
    return print_json(rc, json);
  }
  printf("%s: valid TURNPool %s/%s: %s %s, %lld replicas, relay ports %u-%u\n", c->pool_file,
         tf_pool_namespace(c->pool), tf_pool_name(c->pool), tf_mode_name(tf_pool_mode(c->pool)),
         tf_family_name(tf_pool_family(c->pool)), (long long)tf_pool_replicas(c->pool),
         tf_pool_relay_port_range(c->pool).start, tf_pool_relay_port_range(c->pool).end);
  return 0;
}

static int cmd_plan(cli *c)
{
  int st = check_output(c, "table", "json");
  if (st || (st = load_plan(c))) return st;
  if (wants_json(c)) {
    char *json = NULL;
    tf_err rc = tf_plan_to_json(&json, c->plan);
    return print_json(rc, json);
  }
  printf("%-28s %-20s %-32s %-13s %s\n", "NAME", "NODE", "ADDRESSES", "PORTS", "PORTS-TOTAL");
  for (size_t i = 0; i < tf_plan_relay_count(c->plan); i++) {
    const tf_relay *r = tf_plan_relay(c->plan, i);
    char addrs[2 * TF_ADDR_STRLEN + 2], ports[16];
    relay_addresses(r, addrs, sizeof(addrs));
    snprintf(ports, sizeof(ports), "%u-%u", tf_relay_port_range(r).start, tf_relay_port_range(r).end);
    printf("%-28s %-20s %-32s %-13s %u\n", tf_relay_name(r), tf_relay_node(r), addrs, ports,
           tf_relay_ports_total(r));
  }
  print_conditions(c->plan);
  return 0;
}

/* Parse a non-negative number option; -1 on error (reported). */
static int parse_number(const char *flag, const char *text, double *out, int integer)
{
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end || v < 0 || (integer && v != (double)(long long)v)) {
    complain(flag, "\"%s\" is not a non-negative %s", text, integer ? "integer" : "number");
    return -1;
  }
  *out = v;
  return 0;
}

static int cmd_capacity(cli *c)
{
  tf_capacity_options opts = TF_CAPACITY_OPTIONS_INIT;
  double v;
  int st = check_output(c, "table", "json");
  if (st) return st;
  if (c->target) {
    if (parse_number("--target-allocations", c->target, &v, 1) < 0) return EXIT_BAD_INPUT;
    opts.target_allocations = (int64_t)v;
  }
  if (c->headroom) {
    if (parse_number("--headroom", c->headroom, &v, 0) < 0) return EXIT_BAD_INPUT;
    opts.headroom = v;
  }
  if (c->session_kbps) {
    if (parse_number("--session-kbps", c->session_kbps, &v, 0) < 0) return EXIT_BAD_INPUT;
    opts.session_kbps = v;
  }
  if (c->node_mbps) {
    if (parse_number("--node-mbps", c->node_mbps, &v, 0) < 0) return EXIT_BAD_INPUT;
    opts.node_mbps = v;
  }
  if ((st = load_plan(c))) return st;
  tf_capacity *cap = NULL;
  if (tf_capacity_new(&cap, c->pool, c->plan, &opts) < 0) {
    complain("capacity", "%s", tf_error_last()->message);
    return EXIT_BAD_INPUT;
  }
  if (wants_json(c)) {
    char *json = NULL;
    tf_err rc = tf_capacity_to_json(&json, cap);
    tf_capacity_free(cap);
    return print_json(rc, json);
  }
  printf("%-28s %-32s %s\n", "RELAY", "ADDRESSES", "PORTS-TOTAL");
  for (size_t i = 0; i < tf_plan_relay_count(c->plan); i++) {
    const tf_relay *r = tf_plan_relay(c->plan, i);
    char addrs[2 * TF_ADDR_STRLEN + 2];
    relay_addresses(r, addrs, sizeof(addrs));
    printf("%-28s %-32s %u\n", tf_relay_name(r), addrs, tf_relay_ports_total(r));
  }
  printf("allocations: %lld (planned relays)\n", (long long)tf_capacity_allocations(cap));
  printf("full scale:  %lld (%zu placeable relay identities)\n",
         (long long)tf_capacity_full_scale_allocations(cap), tf_plan_placeable_count(c->plan));
  if (tf_pool_mode(c->pool) == TF_MODE_PARTITIONED_IP)
    printf("note: PartitionedIP adds no capacity: its relays split each address's ports\n");
  if (opts.target_allocations > 0)
    printf("sizing:      %lld addresses for %lld allocations at %.0f%% headroom\n",
           (long long)tf_capacity_addresses_needed(cap), (long long)opts.target_allocations,
           opts.headroom * 100.0);
  if (tf_capacity_nodes_for_bandwidth(cap) > 0)
    printf("bandwidth:   %lld nodes at %.0f kbit/s per allocation and %.0f Mbit/s per node\n",
           (long long)tf_capacity_nodes_for_bandwidth(cap), opts.session_kbps, opts.node_mbps);
  print_conditions(c->plan);
  tf_capacity_free(cap);
  return 0;
}

/* A secret file (one line); NULL after a message. Release with tf_secret_free(). */
static char *read_secret(const char *flag, const char *path)
{
  char *secret = NULL;
  if (tf_cred_secret_read(&secret, path) < 0) complain(flag, "%s", tf_error_last()->message);
  return secret;
}

/* coturn resolves relative names through its own search path: hand the
 * library absolute paths, relative to where the user stands. */
static char *absolute(const char *path)
{
  if (!path || path[0] == '/') return path ? strdup(path) : NULL;
  char cwd[4096];
  if (!getcwd(cwd, sizeof(cwd))) return NULL;
  size_t n = strlen(cwd) + strlen(path) + 2;
  char *abs = malloc(n);
  if (abs) snprintf(abs, n, "%s/%s", cwd, path);
  return abs;
}

static int cmd_render(cli *c)
{
  if (!c->relay) return usage_error("%s", "--relay NAME is required");
  if (!c->secret_file) return usage_error("%s", "--secret-file F is required");
  int st = load_plan(c);
  if (st) return st;
  char *secrets[2] = {NULL, NULL}, *cli_password = NULL;
  size_t n = 0;
  st = EXIT_BAD_INPUT;
  if (!(secrets[n++] = read_secret("--secret-file", c->secret_file))) goto done;
  if (c->previous_secret_file && !(secrets[n++] = read_secret("--previous-secret-file", c->previous_secret_file))) goto done;
  for (size_t i = 0; i < n; i++) secure_dontdump(secrets[i], strlen(secrets[i]) + 1);

  tf_coturn_options opts = TF_COTURN_OPTIONS_INIT;
  if (!c->cli_port != !c->cli_password_file) {
    st = usage_error("%s", "--cli-port and --cli-password-file go together");
    goto done;
  }
  if (c->cli_port) {
    char *end;
    long port = strtol(c->cli_port, &end, 10);
    if (!*c->cli_port || *end || port < 1 || port > 65535) {
      complain("--cli-port", "\"%s\" is not a port (1-65535)", c->cli_port);
      goto done;
    }
    /* the password is secret like the shared one: from a file, wiped */
    if (!(cli_password = read_secret("--cli-password-file", c->cli_password_file))) goto done;
    opts.cli_port = (uint16_t)port;
    opts.cli_password = cli_password;
  }
  opts.coturn_version = c->coturn_version;
  opts.prometheus = c->prometheus;
  opts.secrets = (const char *const *)secrets;
  opts.secrets_count = n;
  char *paths[4] = {absolute(c->state_dir), absolute(c->log_file), absolute(c->cert), absolute(c->key)};
  opts.state_dir = paths[0];
  opts.log_file = paths[1];
  opts.cert_file = paths[2];
  opts.key_file = paths[3];
  char *conf = NULL;
  tf_err rc = tf_coturn_render(&conf, c->pool, c->plan, c->relay, &opts);
  for (size_t i = 0; i < 4; i++) free(paths[i]);
  if (rc < 0) {
    complain("render", "%s", tf_error_last()->message);
    st = (rc == TF_EINVALID || rc == TF_ENOTFOUND) ? EXIT_BAD_INPUT : 1;
    goto done;
  }
  st = 0;
  size_t len = strlen(conf);
  secure_dontdump(conf, len + 1);
  if (c->out_file) {
    /* the config holds the shared secret: a new 0600 file renamed into place, never through a symlink */
    if (secure_write_file(c->out_file, conf, len) < 0) {
      complain(c->out_file, "cannot write: %s", errno == ELOOP ? "it is a symbolic link (refusing to follow it)"
                                                : errno == EINVAL ? "not a regular file" : strerror(errno));
      st = errno == ELOOP || errno == EINVAL ? EXIT_BAD_INPUT : 1;
    }
  } else {
    fputs(conf, stdout);
  }
  tf_secret_free(conf); /* the config holds the secret: wipe it too */
done:
  for (size_t i = 0; i < n; i++) tf_secret_free(secrets[i]);
  tf_secret_free(cli_password);
  return st;
}

enum {
  OPT_NODES = 256, OPT_EXISTING, OPT_NAME, OPT_RELAY, OPT_SECRET_FILE, OPT_PREVIOUS_SECRET_FILE,
  OPT_COTURN_VERSION, OPT_STATE_DIR, OPT_LOG_FILE, OPT_CERT, OPT_KEY, OPT_OUT, OPT_TARGET,
  OPT_HEADROOM, OPT_SESSION_KBPS, OPT_NODE_MBPS, OPT_MAX_INPUT_BYTES, OPT_MAX_INPUT_VALUES, OPT_PROMETHEUS,
  OPT_CLI_PORT, OPT_CLI_PASSWORD_FILE
};

static const struct option long_options[] = {
  {"file", required_argument, NULL, 'f'},
  {"output", required_argument, NULL, 'o'},
  {"nodes", required_argument, NULL, OPT_NODES},
  {"existing", required_argument, NULL, OPT_EXISTING},
  {"name", required_argument, NULL, OPT_NAME},
  {"relay", required_argument, NULL, OPT_RELAY},
  {"secret-file", required_argument, NULL, OPT_SECRET_FILE},
  {"previous-secret-file", required_argument, NULL, OPT_PREVIOUS_SECRET_FILE},
  {"coturn-version", required_argument, NULL, OPT_COTURN_VERSION},
  {"state-dir", required_argument, NULL, OPT_STATE_DIR},
  {"log-file", required_argument, NULL, OPT_LOG_FILE},
  {"cert", required_argument, NULL, OPT_CERT},
  {"key", required_argument, NULL, OPT_KEY},
  {"out", required_argument, NULL, OPT_OUT},
  {"prometheus", no_argument, NULL, OPT_PROMETHEUS},
  {"target-allocations", required_argument, NULL, OPT_TARGET},
  {"headroom", required_argument, NULL, OPT_HEADROOM},
  {"session-kbps", required_argument, NULL, OPT_SESSION_KBPS},
  {"node-mbps", required_argument, NULL, OPT_NODE_MBPS},
  {"max-input-bytes", required_argument, NULL, OPT_MAX_INPUT_BYTES},
  {"max-input-values", required_argument, NULL, OPT_MAX_INPUT_VALUES},
  {"cli-port", required_argument, NULL, OPT_CLI_PORT},
  {"cli-password-file", required_argument, NULL, OPT_CLI_PASSWORD_FILE},
  {"help", no_argument, NULL, 'h'},
  {NULL, 0, NULL, 0},
};

/* Which options each command takes. */
static int option_allowed(const char *cmd, int opt)
{
  switch (opt) {
  case 'f': case 'o': case OPT_NAME: case 'h': case OPT_MAX_INPUT_BYTES: case OPT_MAX_INPUT_VALUES:
    return 1;
  case OPT_NODES: case OPT_EXISTING:
    return strcmp(cmd, "validate") != 0;
  case OPT_TARGET: case OPT_HEADROOM: case OPT_SESSION_KBPS: case OPT_NODE_MBPS:
    return !strcmp(cmd, "capacity");
  default:
    return !strcmp(cmd, "render");
  }
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fputs(usage_text, stderr);
    return EXIT_BAD_INPUT;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    fputs(usage_text, stdout);
    return 0;
  }
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    printf("turnfleet %s\n", tf_version_string());
    return 0;
  }
  /* up and render hold the shared secret, up and agent the CLI password: no core dump may carry them */
  if ((!strcmp(cmd, "up") || !strcmp(cmd, "render") || !strcmp(cmd, "agent")) && secure_no_dumps() < 0) {
    complain(NULL, "cannot disable core dumps: %s", strerror(errno));
    return 1;
  }
  if (!strcmp(cmd, "up")) return up_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "agent")) return agent_main(argc - 1, argv + 1);
  int (*run)(cli *) = !strcmp(cmd, "validate") ? cmd_validate
                      : !strcmp(cmd, "plan")   ? cmd_plan
                      : !strcmp(cmd, "capacity") ? cmd_capacity
                      : !strcmp(cmd, "render") ? cmd_render
                                               : NULL;
  if (!run) return usage_error("unknown command \"%s\"", cmd);

  cli c;
  memset(&c, 0, sizeof(c));
  tf_parse_options_init(&c.limits, TF_PARSE_OPTIONS_VERSION);
  int opt;
  opterr = 0;
  optind = 2;
  while ((opt = getopt_long(argc, argv, ":f:o:h", long_options, NULL)) != -1) {
    if (opt == '?') return usage_error("unknown option \"%s\"", argv[optind - 1]);
    if (opt == ':') return usage_error("option \"%s\" needs a value", argv[optind - 1]);
    if (!option_allowed(cmd, opt)) return usage_error("option \"%s\" does not apply to this command", argv[optind - 1]);
    switch (opt) {
    case 'h': fputs(usage_text, stdout); return 0;
    case 'f': c.pool_file = optarg; break;
    case 'o': c.output = optarg; break;
    case OPT_NODES: c.nodes_file = optarg; break;
    case OPT_EXISTING: c.existing_file = optarg; break;
    case OPT_NAME: c.name = optarg; break;
    case OPT_RELAY: c.relay = optarg; break;
    case OPT_SECRET_FILE: c.secret_file = optarg; break;
    case OPT_PREVIOUS_SECRET_FILE: c.previous_secret_file = optarg; break;
    case OPT_COTURN_VERSION: c.coturn_version = optarg; break;
    case OPT_STATE_DIR: c.state_dir = optarg; break;
    case OPT_LOG_FILE: c.log_file = optarg; break;
    case OPT_CERT: c.cert = optarg; break;
    case OPT_KEY: c.key = optarg; break;
    case OPT_OUT: c.out_file = optarg; break;
    case OPT_PROMETHEUS: c.prometheus = 1; break;
    case OPT_TARGET: c.target = optarg; break;
    case OPT_HEADROOM: c.headroom = optarg; break;
    case OPT_SESSION_KBPS: c.session_kbps = optarg; break;
    case OPT_NODE_MBPS: c.node_mbps = optarg; break;
    case OPT_MAX_INPUT_BYTES:
    case OPT_MAX_INPUT_VALUES: {
      double v;
      const char *flag = opt == OPT_MAX_INPUT_BYTES ? "--max-input-bytes" : "--max-input-values";
      if (parse_number(flag, optarg, &v, 1) < 0) return EXIT_BAD_INPUT;
      if (v < 1) return usage_error("%s must be at least 1", flag);
      *(opt == OPT_MAX_INPUT_BYTES ? &c.limits.max_bytes : &c.limits.max_values) = (size_t)v;
      break;
    }
    case OPT_CLI_PORT: c.cli_port = optarg; break;
    case OPT_CLI_PASSWORD_FILE: c.cli_password_file = optarg; break;
    default: break;
    }
  }
  if (optind < argc) return usage_error("unexpected argument \"%s\"", argv[optind]);

  int st = run(&c);
  tf_plan_free(c.plan);
  tf_existing_free(c.fleet);
  tf_nodes_free(c.nodes);
  tf_pool_free(c.pool);
  return st;
}
