/* relayctl_config: read where a relay's CLI is from its rendered
 * turnserver.conf (coturn's own syntax), for the agent. The text is secret
 * material: values are copied into memory that is wiped, and no error message
 * carries a value. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TF_RCFG__MAX_ADDRS 4

struct tf_relayctl_config {
  uint16_t cli_port;
  char *password;
  tf_addr addrs[TF_RCFG__MAX_ADDRS];
  size_t addr_count;
  tf_port_range range;
  char *pidfile;
  int64_t total_quota; /* `total-quota` (0: unlimited), what an undone refusal sets back */
};

/* The value of @p line (its name already split off), trimmed and unquoted, into @p buf. */
static size_t tf_rcfg__value(char *buf, size_t size, const char *v, size_t n)
{
  while (n && (*v == ' ' || *v == '\t' || *v == '=')) v++, n--;
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r')) n--;
  if (n >= 2 && v[0] == '"' && v[n - 1] == '"') v++, n -= 2;
  if (n >= size) return (size_t)-1;
  memcpy(buf, v, n);
  buf[n] = '\0';
  return n;
}

static int tf_rcfg__port(const char *v, long *out)
{
  char *end;
  long p = strtol(v, &end, 10);
  if (!*v || *end || p < 1 || p > 65535) return -1;
  *out = p;
  return 0;
}

tf_err tf_relayctl_config_parse(tf_relayctl_config **out, const char *text, size_t len)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(text);
  tf_relayctl_config *c = calloc(1, sizeof(*c));
  if (!c) return tf_error__nomem();
  c->range.start = 49152;
  c->range.end = 65535;
  char value[512];
  tf_err rc = TF_OK;
  int no_cli = 0;
  size_t line_no = 0;
  for (size_t at = 0; at < len && rc == TF_OK;) {
    const char *line = text + at;
    const char *nl = memchr(line, '\n', len - at);
    size_t n = nl ? (size_t)(nl - line) : len - at;
    at += n + 1;
    line_no++;
    while (n && (*line == ' ' || *line == '\t')) line++, n--;
    if (!n || *line == '#' || *line == '\r') continue;
    size_t name_len = 0;
    while (name_len < n && line[name_len] != ' ' && line[name_len] != '\t' && line[name_len] != '=' &&
           line[name_len] != '\r')
      name_len++;
    char name[32];
    if (name_len >= sizeof(name)) continue; /* not an option this reads */
    memcpy(name, line, name_len);
    name[name_len] = '\0';
    int wanted = !strcmp(name, "cli-port") || !strcmp(name, "cli-password") || !strcmp(name, "cli-ip") ||
                 !strcmp(name, "listening-ip") || !strcmp(name, "min-port") || !strcmp(name, "max-port") ||
                 !strcmp(name, "pidfile") || !strcmp(name, "total-quota");
    if (!strcmp(name, "no-cli")) no_cli = 1;
    if (!wanted) continue;
    size_t vlen = tf_rcfg__value(value, sizeof(value), line + name_len, n - name_len);
    if (vlen == (size_t)-1) {
      rc = tf_error__set(TF_EINVALID, "line %zu: %s: value longer than %zu bytes", line_no, name, sizeof(value) - 1);
      break;
    }
    long p;
    if (!strcmp(name, "cli-password")) {
      if (c->password) tf_secret_free(c->password);
      if (!(c->password = tf_strdup__(value))) rc = tf_error__nomem();
    } else if (!strcmp(name, "pidfile")) {
      free(c->pidfile);
      c->pidfile = NULL; /* a later line names it again: the last one counts, as in coturn */
      if (value[0] != '/')
        rc = tf_error__set(TF_EINVALID, "line %zu: pidfile: must be an absolute path", line_no);
      else if (!(c->pidfile = tf_strdup__(value)))
        rc = tf_error__nomem();
    } else if (!strcmp(name, "total-quota")) {
      char *end;
      long long q = strtoll(value, &end, 10);
      if (!*value || *end || q < 0 || q > 2147483647)
        rc = tf_error__set(TF_EINVALID, "line %zu: total-quota: \"%.16s\" is not 0-2147483647", line_no, value);
      else
        c->total_quota = q;
    } else if (!strcmp(name, "cli-ip")) {
      if (strcmp(value, "127.0.0.1") != 0)
        rc = tf_error__set(TF_EINVALID, "line %zu: cli-ip: must be 127.0.0.1 (the agent talks to the CLI on loopback)",
                           line_no);
    } else if (!strcmp(name, "listening-ip")) {
      if (c->addr_count == TF_RCFG__MAX_ADDRS)
        rc = tf_error__set(TF_EINVALID, "line %zu: listening-ip: more than %d addresses", line_no, TF_RCFG__MAX_ADDRS);
      else if (tf_addr_parse(&c->addrs[c->addr_count], value) < 0)
        rc = tf_error__set(TF_EINVALID, "line %zu: listening-ip: \"%.64s\" is not an IPv4 or IPv6 address", line_no,
                           value);
      else
        c->addr_count++;
    } else if (tf_rcfg__port(value, &p) < 0) {
      rc = tf_error__set(TF_EINVALID, "line %zu: %s: \"%.16s\" is not a port (1-65535)", line_no, name, value);
    } else if (!strcmp(name, "cli-port")) {
      c->cli_port = (uint16_t)p;
    } else if (!strcmp(name, "min-port")) {
      c->range.start = (uint16_t)p;
    } else {
      c->range.end = (uint16_t)p;
    }
  }
  tf_crypto__wipe(value, sizeof(value));
  if (rc == TF_OK && no_cli) rc = tf_error__set(TF_EINVALID, "no-cli: the config turns the CLI off");
  if (rc == TF_OK && !c->cli_port) rc = tf_error__set(TF_EINVALID, "cli-port: missing");
  if (rc == TF_OK && (!c->password || !*c->password))
    rc = tf_error__set(TF_EINVALID, "cli-password: missing or empty (coturn disables the CLI without one)");
  if (rc == TF_OK && !c->addr_count) rc = tf_error__set(TF_EINVALID, "listening-ip: missing");
  if (rc == TF_OK && c->range.start > c->range.end)
    rc = tf_error__set(TF_EINVALID, "max-port: %u is below min-port %u", c->range.end, c->range.start);
  if (rc < 0) {
    tf_relayctl_config_free(c);
    return rc;
  }
  *out = c;
  return TF_OK;
}

void tf_relayctl_config_free(tf_relayctl_config *config)
{
  if (!config) return;
  tf_secret_free(config->password);
  free(config->pidfile);
  tf_crypto__wipe(config, sizeof(*config));
  free(config);
}

uint16_t tf_relayctl_config_cli_port(const tf_relayctl_config *config) { return config ? config->cli_port : 0; }

const char *tf_relayctl_config_pidfile(const tf_relayctl_config *config) { return config ? config->pidfile : NULL; }

size_t tf_relayctl_config_address_count(const tf_relayctl_config *config) { return config ? config->addr_count : 0; }

tf_err tf_relayctl_config_address(tf_addr *out, const tf_relayctl_config *config, size_t i)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(config);
  if (i >= config->addr_count)
    return tf_error__set(TF_ENOTFOUND, "address %zu: out of range (%zu addresses)", i, config->addr_count);
  *out = config->addrs[i];
  return TF_OK;
}

tf_port_range tf_relayctl_config_port_range(const tf_relayctl_config *config)
{
  tf_port_range none = {0, 0};
  return config ? config->range : none;
}

tf_err tf_relayctl_config_request(tf_relayctl_request *req, const tf_relayctl_config *config, tf_relayctl_op op,
                                  int timeout_ms)
{
  TF_ASSERT_ARG(req);
  TF_ASSERT_ARG(config);
  if (op != TF_RELAYCTL_COUNT && op != TF_RELAYCTL_DRAIN && op != TF_RELAYCTL_REFUSE && op != TF_RELAYCTL_SESSIONS)
    return tf_error__set(TF_EINVALID, "op: %d is not a CLI op", (int)op);
  if (timeout_ms <= 0) return tf_error__set(TF_EINVALID, "timeout_ms: must be > 0");
  tf_relayctl_request r = TF_RELAYCTL_REQUEST_INIT;
  r.op = op;
  r.port = config->cli_port;
  r.password = config->password;
  r.timeout_ms = timeout_ms;
  *req = r;
  return TF_OK;
}

tf_err tf_relayctl_config_unrefuse(int *undone, const tf_relayctl_config *config, int owner_pid, int timeout_ms)
{
  TF_ASSERT_ARG(undone);
  TF_ASSERT_ARG(config);
  *undone = 0;
  tf_relayctl_request req;
  tf_err rc = tf_relayctl_config_request(&req, config, TF_RELAYCTL_REFUSE, timeout_ms);
  req.owner_pid = owner_pid;
  return rc < 0 ? rc : tf_relayctl__unrefuse(undone, &req, config->total_quota);
}

tf_err tf_relayctl_config_running_version(uint32_t *version, const tf_relayctl_config *config, int timeout_ms)
{
  TF_ASSERT_ARG(version);
  TF_ASSERT_ARG(config);
  tf_relayctl_request req;
  tf_err rc = tf_relayctl_config_request(&req, config, TF_RELAYCTL_COUNT, timeout_ms);
  return rc < 0 ? rc : tf_relayctl__version(version, &req);
}

tf_relayctl_op tf_relayctl_drain_op(uint32_t version)
{
  return (tf_coturn_features(version) & TF_COTURN_DRAIN) ? TF_RELAYCTL_DRAIN : TF_RELAYCTL_REFUSE;
}
