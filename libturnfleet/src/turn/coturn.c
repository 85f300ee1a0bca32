/* coturn: one turnserver.conf per relay, gated by coturn version; the config hash.
 *
 * The renderer is a pure function of (pool, plan, relay, options): no clock,
 * no environment, so the same inputs give the same bytes and the same hash.
 * Every value is checked before the first byte is written, so the only
 * failure after that point is out-of-memory, and every buffer that held a
 * secret is wiped. Error messages name the option, never the secret. */
#include <openssl/evp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define TF_COTURN__VERSION(ma, mi, pa) (((uint32_t)(ma) << 16) | ((uint32_t)(mi) << 8) | (uint32_t)(pa))
#define TF_COTURN__V4_6_1 TF_COTURN__VERSION(4, 6, 1)
#define TF_COTURN__V4_6_2 TF_COTURN__VERSION(4, 6, 2)
#define TF_COTURN__V4_6_3 TF_COTURN__VERSION(4, 6, 3)
#define TF_COTURN__V4_10_0 TF_COTURN__VERSION(4, 10, 0)
#define TF_COTURN__V4_17_0 TF_COTURN__VERSION(4, 17, 0)

/* coturn reads its config with fgets() into a 1025-byte buffer: longer lines are
 * split and the tail becomes a bogus option. Stay well below. */
#define TF_COTURN__LINE_MAX 1000
#define TF_COTURN__DEFAULT_STATE_DIR "/var/lib/turnfleet"
#define TF_COTURN__DEFAULT_PROMETHEUS_PORT 9641u
/* coturn keeps quotas in an int (userdb.h). */
#define TF_COTURN__QUOTA_MAX 2147483647

/* ---- versions ---- */

/* 1-3 decimal digits, value <= 255; advances *p. */

tf_err tf_coturn_version_parse(uint32_t *out, const char *text)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text);
  uint32_t v;
  if (tf_version__parse(text, &v) < 0)
    return tf_error__set(TF_EINVALID, "\"%.64s\" is not a coturn version MAJOR.MINOR.PATCH[-SUFFIX]", text);
  *out = v;
  return TF_OK;
}

uint32_t tf_coturn_features(uint32_t version)
{
  uint32_t f = 0;
  if (version >= TF_COTURN__V4_6_2) f |= TF_COTURN_GRACEFUL_SIGTERM | TF_COTURN_ALLOCATIONS_BY_TYPE;
  if (version >= TF_COTURN__V4_6_3) f |= TF_COTURN_DRAIN | TF_COTURN_PROMETHEUS_ADDRESS;
  if (version >= TF_COTURN__V4_10_0) f |= TF_COTURN_CLI_OPT_IN;
  if (version >= TF_COTURN__V4_17_0) f |= TF_COTURN_DTLS_OPT_IN;
  return f;
}

/* 1 when a line of @p text starts (after blanks and a short form such as "-p, ") with @p option
 * followed by a blank, '=' or the end: how coturn's usage lists an option. */
static int tf_coturn__help_has(const char *text, size_t len, const char *option)
{
  size_t n = strlen(option);
  for (size_t pos = 0; pos < len;) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - text) : len;
    size_t i = pos;
    while (i < end && (text[i] == ' ' || text[i] == '\t')) i++;
    /* a short form first: " -p, --listening-port" */
    if (end - i >= 4 && text[i] == '-' && text[i + 1] != '-' && text[i + 2] == ',' && text[i + 3] == ' ') i += 4;
    if (end - i >= n && memcmp(text + i, option, n) == 0 &&
        (i + n == end || text[i + n] == ' ' || text[i + n] == '\t' || text[i + n] == '=' || text[i + n] == '\r'))
      return 1;
    pos = end + 1;
  }
  return 0;
}

tf_err tf_coturn_build_features(uint32_t *out, const char *text, size_t len)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  if (!tf_coturn__help_has(text, len, "--listening-port"))
    return tf_error__set(TF_EPROTO, "not coturn's usage text: no --listening-port option in it");
  uint32_t f = 0;
  /* the usage lists the exporter's options only when it is compiled in */
  if (tf_coturn__help_has(text, len, "--prometheus")) f |= TF_COTURN_BUILD_PROMETHEUS;
  *out = f;
  return TF_OK;
}

/* How many bytes of a tf_coturn_options a struct of @p version holds. */
static size_t tf_coturn__options_size(unsigned int version)
{
  return version >= 3 ? sizeof(tf_coturn_options) :
         version >= 2 ? offsetof(tf_coturn_options, cert_digest) : offsetof(tf_coturn_options, prometheus);
}

void tf_coturn__options_read(tf_coturn_options *dst, const tf_coturn_options *src)
{
  tf_coturn_options init = TF_COTURN_OPTIONS_INIT;
  *dst = init;
  memcpy(dst, src, tf_coturn__options_size(src->version));
  /* a version 1 caller keeps 0.1's rule: the exporter on every coturn >= 4.6.3 */
  if (src->version < 2) dst->prometheus = -1;
}

int tf_coturn__has_exporter(const tf_coturn_options *opts, uint32_t features)
{
  return opts->prometheus != 0 && (features & TF_COTURN_PROMETHEUS_ADDRESS);
}

tf_err tf_coturn_options_init(tf_coturn_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_COTURN_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_coturn_options version (1-%d)", version,
                         TF_COTURN_OPTIONS_VERSION);
  tf_coturn_options init = TF_COTURN_OPTIONS_INIT;
  init.version = version;
  memcpy(opts, &init, tf_coturn__options_size(version));
  return TF_OK;
}

/* ---- config hash ---- */

tf_err tf_coturn_config_hash(char **out, const char *text)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (EVP_Digest(text, strlen(text), md, &md_len, EVP_sha256(), NULL) != 1 || md_len != 32)
    return tf_error__set(TF_ERROR, "SHA-256 failed");
  char *hex = malloc(2 * (size_t)md_len + 1);
  if (!hex) return tf_error__nomem();
  static const char digits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < md_len; i++) {
    hex[2 * i] = digits[md[i] >> 4];
    hex[2 * i + 1] = digits[md[i] & 0x0f];
  }
  hex[2 * md_len] = '\0';
  *out = hex;
  return TF_OK;
}

/* ---- value checks (before anything is written) ---- */

/* A value written as name="value": no quote (coturn has no escapes), no line
 * break (a second line would be read as another option), not empty, and the
 * whole line within TF_COTURN__LINE_MAX. @p what names the option in errors;
 * the value itself is never put in a message (it may be a secret). */
static tf_err tf_coturn__check_quoted(const char *what, const char *option, const char *value)
{
  if (!value) return tf_error__set(TF_EINVALID, "%s: required", what);
  size_t n = strlen(value);
  if (n == 0) return tf_error__set(TF_EINVALID, "%s: must not be empty", what);
  if (strchr(value, '"')) return tf_error__set(TF_EINVALID, "%s: must not contain a double quote", what);
  if (strpbrk(value, "\r\n")) return tf_error__set(TF_EINVALID, "%s: must not contain a line break", what);
  /* option + '=' + '"' + value + '"' */
  if (strlen(option) + n + 3 > TF_COTURN__LINE_MAX)
    return tf_error__set(TF_EINVALID, "%s: too long for one coturn config line (at most %d bytes)", what,
                         TF_COTURN__LINE_MAX);
  return TF_OK;
}

/* An absolute path written quoted; @p suffix is what the renderer appends. */
static tf_err tf_coturn__check_path(const char *what, const char *option, const char *path, const char *suffix)
{
  if (!path) return tf_error__set(TF_EINVALID, "%s: required", what);
  if (path[0] != '/') return tf_error__set(TF_EINVALID, "%s: must be an absolute path", what);
  if (strchr(path, '"')) return tf_error__set(TF_EINVALID, "%s: must not contain a double quote", what);
  if (strpbrk(path, "\r\n")) return tf_error__set(TF_EINVALID, "%s: must not contain a line break", what);
  if (strlen(option) + strlen(path) + strlen(suffix) + 3 > TF_COTURN__LINE_MAX)
    return tf_error__set(TF_EINVALID, "%s: too long for one coturn config line (at most %d bytes)", what,
                         TF_COTURN__LINE_MAX);
  return TF_OK;
}

/* ---- peer policy ---- */

/* The ranges denied by peerPolicy.denyPrivate: every entry of IANA's IPv4 and IPv6
 * Special-Purpose Address Registries (tests/data/iana-special-purpose.txt), nested ones within
 * their parent: private, loopback, link-local (which holds the cloud metadata address
 * 169.254.169.254), shared/CGNAT, "this network", IETF protocol assignments, documentation,
 * benchmarking, AS112, AMT, the 6to4 relay anycast, reserved (with broadcast); IPv6 unspecified,
 * loopback, IPv4-mapped (so a mapped address cannot reach what the IPv4 rules deny), NAT64's
 * well-known and local-use prefixes (which reach IPv4 through a translator), discard-only and
 * dummy, IETF protocol assignments (Teredo, ORCHID, benchmarking), documentation, 6to4, SRv6
 * SIDs, unique-local and link-local. Multicast is covered by `no-multicast-peers`. coturn only
 * takes `a` or `a-b` here: a CIDR is logged as "Wrong address format" and the rule is silently
 * dropped. The unspecified `::` goes with loopback as `::-::1` (where it leads): coturn reads a
 * range whose last address is all zeros as "up to any", so `::-::` would deny every peer. */
static const struct {
  const char *cidr;
  int loopback;
} tf_coturn__private[] = {
    {"0.0.0.0/8", 0},        {"10.0.0.0/8", 0},       {"100.64.0.0/10", 0},     {"127.0.0.0/8", 1},
    {"169.254.0.0/16", 0},   {"172.16.0.0/12", 0},    {"192.0.0.0/24", 0},      {"192.0.2.0/24", 0},
    {"192.31.196.0/24", 0},  {"192.52.193.0/24", 0},  {"192.88.99.0/24", 0},    {"192.168.0.0/16", 0},
    {"192.175.48.0/24", 0},  {"198.18.0.0/15", 0},    {"198.51.100.0/24", 0},   {"203.0.113.0/24", 0},
    {"240.0.0.0/4", 0},      {"::/127", 1},           {"::ffff:0:0/96", 0},
    {"64:ff9b::/96", 0},     {"64:ff9b:1::/48", 0},   {"100::/64", 0},          {"100:0:0:1::/64", 0},
    {"2001::/23", 0},        {"2001:db8::/32", 0},    {"2002::/16", 0},         {"2620:4f:8000::/48", 0},
    {"3fff::/20", 0},        {"5f00::/16", 0},        {"fc00::/7", 0},          {"fe80::/10", 0},
};

static tf_err tf_coturn__put_range(tf_buf *b, const char *option, const tf_prefix *p)
{
  tf_addr lo, hi;
  char a[TF_ADDR_STRLEN], z[TF_ADDR_STRLEN];
  tf_prefix_bounds(p, &lo, &hi);
  tf_err rc = tf_addr_format(a, sizeof(a), &lo);
  if (rc == 0) rc = tf_addr_format(z, sizeof(z), &hi);
  if (rc < 0) return rc;
  tf_buf__printf(b, "%s=%s-%s\n", option, a, z);
  return TF_OK;
}

static tf_err tf_coturn__put_peer_policy(tf_buf *b, const tf_pool *pool, int allow_loopback)
{
  tf_err rc = TF_OK;
  if (pool->deny_private) {
    for (size_t i = 0; rc == 0 && i < sizeof(tf_coturn__private) / sizeof(tf_coturn__private[0]); i++) {
      /* allow-loopback-peers (tests) would be undone by a loopback deny rule */
      if (allow_loopback && tf_coturn__private[i].loopback) continue;
      tf_prefix p;
      rc = tf_prefix_parse(&p, tf_coturn__private[i].cidr);
      if (rc == 0) rc = tf_coturn__put_range(b, "denied-peer-ip", &p);
    }
  }
  for (size_t i = 0; rc == 0 && i < pool->peer_deny_count; i++)
    rc = tf_coturn__put_range(b, "denied-peer-ip", &pool->peer_deny[i]);
  /* coturn checks the allow list first: an allowed range wins over a denied one */
  for (size_t i = 0; rc == 0 && i < pool->peer_allow_count; i++)
    rc = tf_coturn__put_range(b, "allowed-peer-ip", &pool->peer_allow[i]);
  return rc;
}

/* ---- render ---- */

static const tf_relay *tf_coturn__find(const tf_plan *plan, const char *name)
{
  for (size_t i = 0; i < plan->relay_count; i++)
    if (strcmp(plan->relays[i].name, name) == 0) return &plan->relays[i];
  return NULL;
}

/* What the relay listens on, from the pool's listeners. */
typedef struct tf_coturn__listen {
  int udp, tcp, tls, dtls;
  uint16_t plain_port; /* udp/tcp: coturn's one listening-port */
  uint16_t tls_port;   /* tls/dtls: coturn's one tls-listening-port */
} tf_coturn__listen;

static tf_err tf_coturn__listeners(tf_coturn__listen *l, const tf_pool *pool, const tf_relay *relay)
{
  memset(l, 0, sizeof(*l));
  for (size_t i = 0; i < pool->listener_count; i++) {
    uint16_t port = tf_relay_listener_port(relay, i);
    tf_protocol proto = pool->listeners[i].protocol;
    int plain = proto == TF_PROTOCOL_UDP || proto == TF_PROTOCOL_TCP;
    uint16_t *slot = plain ? &l->plain_port : &l->tls_port;
    if (port == 0) return tf_error__set(TF_EINVALID, "spec.listeners[%zu].port: no port in the plan", i);
    if (*slot && *slot != port)
      return tf_error__set(TF_EINVALID,
                           "spec.listeners[%zu].port: coturn serves all %s listeners on one port (%u, not %u)", i,
                           plain ? "udp/tcp" : "tls/dtls", *slot, port);
    *slot = port;
    if (proto == TF_PROTOCOL_UDP) l->udp = 1;
    if (proto == TF_PROTOCOL_TCP) l->tcp = 1;
    if (proto == TF_PROTOCOL_TLS) l->tls = 1;
    if (proto == TF_PROTOCOL_DTLS) l->dtls = 1;
  }
  if (!l->udp && !l->tcp && !l->tls && !l->dtls) return tf_error__set(TF_EINVALID, "spec.listeners: none");
  return TF_OK;
}

static tf_err tf_coturn__check_secrets(const tf_coturn_options *opts)
{
  if (!opts->secrets || opts->secrets_count == 0)
    return tf_error__set(TF_EINVALID, "secrets: at least one shared secret is required");
  for (size_t i = 0; i < opts->secrets_count; i++) {
    char what[32];
    snprintf(what, sizeof(what), "secrets[%zu]", i);
    tf_err rc = tf_coturn__check_quoted(what, "static-auth-secret", opts->secrets[i]);
    if (rc < 0) return rc;
  }
  return TF_OK;
}

tf_err tf_coturn_render(char **out, const tf_pool *pool, const tf_plan *plan, const char *relay_name,
                        const tf_coturn_options *caller_opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(pool);
  TF_ASSERT_ARG(plan);
  TF_ASSERT_ARG(relay_name);
  if (!caller_opts) return tf_error__set(TF_EINVALID, "opts: required (at least one shared secret)");
  if (caller_opts->version == 0 || caller_opts->version > TF_COTURN_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "opts.version: %u is not a tf_coturn_options version (1-%d)",
                         caller_opts->version, TF_COTURN_OPTIONS_VERSION);
  tf_coturn_options copy;
  tf_coturn__options_read(&copy, caller_opts);
  const tf_coturn_options *opts = &copy;

  /* The pool: valid, and the one the plan was made from. */
  tf_err rc = tf_pool_validate(NULL, pool);
  if (rc < 0) return rc;
  if (!plan->pool_name || strcmp(plan->pool_name, pool->name) != 0 || plan->listener_count != pool->listener_count)
    return tf_error__set(TF_EINVALID, "plan: was made for pool \"%.64s\", not \"%.64s\"",
                         plan->pool_name ? plan->pool_name : "", pool->name);
  const tf_relay *relay = tf_coturn__find(plan, relay_name);
  if (!relay)
    return tf_error__set(TF_ENOTFOUND, "relay \"%.80s\" is not in the plan of pool \"%.64s\"", relay_name,
                         pool->name);

  /* The coturn version drives what may be rendered. */
  const char *vtext = opts->coturn_version ? opts->coturn_version : pool->coturn_version;
  const char *vfield = opts->coturn_version ? "coturn_version" : "spec.dataplane.coturnVersion";
  uint32_t version = 0;
  if (!vtext) return tf_error__set(TF_EINVALID, "%s: required", vfield);
  if (tf_coturn_version_parse(&version, vtext) < 0)
    return tf_error__set(TF_EINVALID, "%s: \"%.64s\" is not a coturn version MAJOR.MINOR.PATCH", vfield, vtext);
  if (version < TF_COTURN__V4_6_1)
    return tf_error__set(TF_EINVALID, "%s: coturn %.64s is older than %s, the oldest supported", vfield, vtext,
                         TF_COTURN_MIN_VERSION);
  uint32_t features = tf_coturn_features(version);

  /* Every value is checked before the first line is written. */
  rc = tf_coturn__check_secrets(opts);
  if (rc < 0) return rc;
  rc = tf_coturn__check_quoted("spec.auth.realm", "realm", pool->realm);
  if (rc < 0) return rc;
  if (pool->user_quota < 0 || pool->user_quota > TF_COTURN__QUOTA_MAX)
    return tf_error__set(TF_EINVALID, "spec.quota.userQuota: must be 0-%d", TF_COTURN__QUOTA_MAX);
  if (pool->total_quota < 0 || pool->total_quota > TF_COTURN__QUOTA_MAX)
    return tf_error__set(TF_EINVALID, "spec.quota.totalQuota: must be 0-%d", TF_COTURN__QUOTA_MAX);
  const char *state_dir = opts->state_dir ? opts->state_dir : TF_COTURN__DEFAULT_STATE_DIR;
  char suffix[TF_RELAY_NAME_MAX + 16];
  snprintf(suffix, sizeof(suffix), "/%s/turnserver.pid", relay->name);
  rc = tf_coturn__check_path("state_dir", "pidfile", state_dir, suffix);
  if (rc < 0) return rc;
  if (opts->log_file) {
    rc = tf_coturn__check_path("log_file", "log-file", opts->log_file, "");
    if (rc < 0) return rc;
  }
  if (opts->cli_port) {
    rc = tf_coturn__check_quoted("cli_password", "cli-password", opts->cli_password);
    if (rc < 0) return rc;
  }
  tf_coturn__listen l;
  rc = tf_coturn__listeners(&l, pool, relay);
  if (rc < 0) return rc;
  if (l.tls || l.dtls) {
    if (!opts->cert_file) return tf_error__set(TF_EINVALID, "cert_file: required by the pool's tls/dtls listener");
    if (!opts->key_file) return tf_error__set(TF_EINVALID, "key_file: required by the pool's tls/dtls listener");
    rc = tf_coturn__check_path("cert_file", "cert", opts->cert_file, "");
    if (rc == 0) rc = tf_coturn__check_path("key_file", "pkey", opts->key_file, "");
    if (rc < 0) return rc;
    for (const char *d = opts->cert_digest; d && *d; d++)
      if (!((*d >= '0' && *d <= '9') || (*d >= 'a' && *d <= 'f')))
        return tf_error__set(TF_EINVALID, "cert_digest: must be lowercase hex");
  }
  if (relay->addr_count < 1 || relay->addr_count > 2)
    return tf_error__set(TF_EINVALID, "plan: relay \"%s\" has %zu addresses", relay->name, relay->addr_count);
  char addrs[2][TF_ADDR_STRLEN];
  for (size_t i = 0; i < relay->addr_count; i++) {
    rc = tf_addr_format(addrs[i], sizeof(addrs[i]), &relay->addrs[i]);
    if (rc < 0) return rc;
  }

  /* Prometheus only when asked for (the build must have it: Debian's 4.6.1 and
   * 4.18 have not, and there every exporter option is a "Bad configuration
   * format" warning) and where it is safe: coturn 4.6.1 and 4.6.2 have no
   * `prometheus-address`, so their exporter binds every address of the host
   * and the relays of a host would all claim one port (a scrape could not
   * tell which relay answered). From 4.6.3 the exporter binds the relay's own
   * (first) address; relays sharing an address (PartitionedIP) get base +
   * slice. Counting goes through the CLI (`pu`) wherever there is no exporter. */
  unsigned prom_port = 0;
  if (opts->prometheus > 0 && !(features & TF_COTURN_PROMETHEUS_ADDRESS))
    return tf_error__set(TF_EINVALID, "prometheus: coturn %.64s has no prometheus-address (needs 4.6.3 or newer)",
                         vtext);
  if (tf_coturn__has_exporter(opts, features)) {
    unsigned base = opts->prometheus_port ? opts->prometheus_port : TF_COTURN__DEFAULT_PROMETHEUS_PORT;
    prom_port = base + relay->slice;
    if (prom_port > 65535u)
      return tf_error__set(TF_EINVALID, "prometheus_port: %u + slice %u is above 65535", base, relay->slice);
    if (prom_port >= pool->range.start && prom_port <= pool->range.end)
      return tf_error__set(TF_EINVALID, "prometheus_port: %u lies in the relay port range %u-%u", prom_port,
                           pool->range.start, pool->range.end);
    if ((prom_port == l.plain_port && l.tcp) || (prom_port == l.tls_port && l.tls))
      return tf_error__set(TF_EINVALID, "prometheus_port: %u is a TCP listener port of relay %s", prom_port,
                           relay->name);
  }

  tf_buf b;
  tf_buf__init(&b);
  tf_buf__printf(&b, "# turnserver.conf of relay %s (pool %s/%s)\n", relay->name, pool->ns, pool->name);
  tf_buf__printf(&b, "# identity %s\n", relay->identity ? relay->identity : "");
  tf_buf__printf(&b, "# rendered by Turnfleet %s for coturn %u.%u.%u\n", TF_VERSION_STRING, version >> 16,
                 (version >> 8) & 0xffu, version & 0xffu);
  /* the image it runs, in the config and so in its hash: a new image rolls the relays as a new config does */
  const char *image = tf_pool_image(pool);
  if (image && *image) tf_buf__printf(&b, "# image %s\n", image);
  tf_buf__puts(&b, "# Holds the shared secrets: keep it private (mode 0600), never log it.\n");

  /* Bind only the relay's own addresses (coturn's defaults are every address). */
  for (size_t i = 0; i < relay->addr_count; i++) tf_buf__printf(&b, "listening-ip=%s\n", addrs[i]);
  for (size_t i = 0; i < relay->addr_count; i++) tf_buf__printf(&b, "relay-ip=%s\n", addrs[i]);
  if (l.udp || l.tcp) tf_buf__printf(&b, "listening-port=%u\n", l.plain_port);
  if (l.tls || l.dtls) tf_buf__printf(&b, "tls-listening-port=%u\n", l.tls_port);
  /* Open only the declared listeners. */
  if (!l.udp) tf_buf__puts(&b, "no-udp\n");
  if (!l.tcp) tf_buf__puts(&b, "no-tcp\n");
  if (!l.tls) tf_buf__puts(&b, "no-tls\n");
  if (features & TF_COTURN_DTLS_OPT_IN) {
    /* >= 4.17: DTLS is off unless asked for; `no-dtls` is deprecated (a warning) */
    if (l.dtls) tf_buf__puts(&b, "dtls\n");
  } else if (!l.dtls) {
    tf_buf__puts(&b, "no-dtls\n");
  }
  tf_buf__printf(&b, "min-port=%u\n", relay->range.start);
  tf_buf__printf(&b, "max-port=%u\n", relay->range.end);

  tf_buf__printf(&b, "realm=\"%s\"\n", pool->realm);
  tf_buf__puts(&b, "use-auth-secret\n");
  /* coturn accepts every listed secret: current first, then the previous one */
  for (size_t i = 0; i < opts->secrets_count; i++) tf_buf__printf(&b, "static-auth-secret=\"%s\"\n", opts->secrets[i]);
  if (pool->user_quota > 0) tf_buf__printf(&b, "user-quota=%lld\n", (long long)pool->user_quota);
  if (pool->total_quota > 0) tf_buf__printf(&b, "total-quota=%lld\n", (long long)pool->total_quota);

  tf_buf__puts(&b, "fingerprint\n");
  /* RFC 5780 would bind port+1 on a second address: not this relay's ports */
  tf_buf__puts(&b, "no-rfc5780\n");
  tf_buf__puts(&b, "no-multicast-peers\n");
  tf_buf__puts(&b, "no-software-attribute\n");
  tf_buf__puts(&b, "stale-nonce=600\n");
  rc = tf_coturn__put_peer_policy(&b, pool, opts->allow_loopback_peers);
  if (rc < 0) {
    tf_buf__dispose(&b, 1);
    return rc;
  }
  if (opts->allow_loopback_peers) tf_buf__puts(&b, "allow-loopback-peers\n");

  if (l.tls || l.dtls) {
    tf_buf__printf(&b, "cert=\"%s\"\n", opts->cert_file);
    tf_buf__printf(&b, "pkey=\"%s\"\n", opts->key_file);
    if (opts->cert_digest) tf_buf__printf(&b, "# certificate %s\n", opts->cert_digest);
  }
  if (opts->cli_port) {
    /* >= 4.10 the CLI is off unless `cli` is given */
    if (features & TF_COTURN_CLI_OPT_IN) tf_buf__puts(&b, "cli\n");
    /* telnet is cleartext: never on the relay's public address */
    tf_buf__puts(&b, "cli-ip=127.0.0.1\n");
    tf_buf__printf(&b, "cli-port=%u\n", opts->cli_port);
    tf_buf__printf(&b, "cli-password=\"%s\"\n", opts->cli_password);
  } else if (!(features & TF_COTURN_CLI_OPT_IN)) {
    tf_buf__puts(&b, "no-cli\n"); /* >= 4.10 off by default, and `no-cli` logs an ERROR */
  }
  if (prom_port) {
    tf_buf__puts(&b, "prometheus\n");
    tf_buf__printf(&b, "prometheus-address=%s\n", addrs[0]);
    tf_buf__printf(&b, "prometheus-port=%u\n", prom_port);
  }
  /* coturn's defaults are one system-wide pidfile and SQLite db: one per relay */
  tf_buf__printf(&b, "pidfile=\"%s/%s/turnserver.pid\"\n", state_dir, relay->name);
  tf_buf__printf(&b, "userdb=\"%s/%s/turndb\"\n", state_dir, relay->name);
  if (opts->log_file) {
    tf_buf__printf(&b, "log-file=\"%s\"\n", opts->log_file);
    tf_buf__puts(&b, "simple-log\n");
    tf_buf__puts(&b, "no-stdout-log\n");
  } else {
    tf_buf__puts(&b, "log-file=stdout\n");
  }
  return tf_buf__detach(&b, out);
}

/* ---- allocation counts and the CLI ---- */

tf_err tf_coturn_allocations_from_metrics(int64_t *out, const char *text, size_t len)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  tf_metrics *m = NULL;
  tf_err rc = tf_metrics_parse(&m, text, len);
  if (rc < 0) return rc;
  double sum = 0;
  rc = tf_metrics_sum(&sum, m, "turn_total_allocations");
  tf_metrics_free(m);
  if (rc == TF_ENOTFOUND)
    return tf_error__set(TF_ENOTFOUND, "turn_total_allocations: not in the scrape (is this coturn's /metrics?)");
  if (rc < 0) return rc;
  /* a gauge of counts: anything but a non-negative integer means a broken exporter */
  if (!(sum >= 0 && sum <= 9007199254740992.0) || sum != (double)(int64_t)sum)
    return tf_error__set(TF_EPROTO, "turn_total_allocations: %g is not a count", sum);
  *out = (int64_t)sum;
  return TF_OK;
}

/* Copy @p text without telnet IAC sequences (RFC 854) into @p dst (len bytes). */
static size_t tf_coturn__strip_telnet(char *dst, const unsigned char *src, size_t len)
{
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    if (src[i] != 0xFF) {
      dst[n++] = (char)src[i++];
      continue;
    }
    if (i + 1 >= len) break; /* a lone IAC at the end: the rest has not arrived */
    unsigned char cmd = src[i + 1];
    if (cmd == 0xFF) { /* an escaped data byte 255 */
      dst[n++] = (char)0xFF;
      i += 2;
    } else if (cmd >= 0xFB) { /* WILL, WONT, DO, DONT + option */
      i += 3;
    } else if (cmd == 0xFA) { /* SB ... IAC SE */
      i += 2;
      while (i < len && !(src[i] == 0xFF && i + 1 < len && src[i + 1] == 0xF0)) i++;
      i += 2;
    } else { /* a two-byte command (NOP, GA, ...) */
      i += 2;
    }
  }
  return n;
}

tf_err tf_coturn_user_sessions_from_cli(int64_t *out, const char *text, size_t len, const char *user)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  if (!user || !*user) return tf_error__set(TF_EINVALID, "user: required");
  static const char key[] = "user: <";
  size_t ulen = strlen(user);
  char *clean = malloc(len ? len : 1);
  if (!clean) return tf_error__nomem();
  size_t n = tf_coturn__strip_telnet(clean, (const unsigned char *)text, len);
  tf_err rc = TF_OK;
  int64_t sum = 0;
  size_t line = 0;
  for (size_t pos = 0; pos < n && rc == TF_OK;) {
    const char *nl = memchr(clean + pos, '\n', n - pos);
    size_t end = nl ? (size_t)(nl - clean) : n;
    size_t i = pos;
    line++;
    pos = nl ? end + 1 : n;
    if (!nl) break;
    while (i < end && (clean[i] == ' ' || clean[i] == '\t')) i++;
    if (end - i < sizeof(key) - 1 || memcmp(clean + i, key, sizeof(key) - 1) != 0) continue;
    i += sizeof(key) - 1;
    const char *close = memchr(clean + i, '>', end - i);
    if (!close) continue;
    size_t nlen = (size_t)(close - (clean + i));
    int match = (nlen == ulen && memcmp(clean + i, user, ulen) == 0) ||
                (nlen > ulen && clean[i + nlen - ulen - 1] == ':' && memcmp(clean + i + nlen - ulen, user, ulen) == 0);
    if (!match) continue;
    i += nlen + 1;
    if (end - i < 2 || clean[i] != ',' || clean[i + 1] != ' ') {
      rc = tf_error__set(TF_EPROTO, "line %zu: user: the session count is missing", line);
      break;
    }
    i += 2;
    size_t a = i;
    int64_t v = 0;
    while (i < end && clean[i] >= '0' && clean[i] <= '9' && i - a < 18) v = v * 10 + (clean[i++] - '0');
    if (i == a || end - i < 9 || memcmp(clean + i, " sessions", 9) != 0) {
      rc = tf_error__set(TF_EPROTO, "line %zu: user: the session count is not a count", line);
      break;
    }
    sum += v;
  }
  tf_crypto__wipe(clean, len ? len : 1);
  free(clean);
  if (rc == TF_OK) *out = sum;
  return rc;
}

tf_err tf_coturn_allocations_from_cli(int64_t *out, const char *text, size_t len)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  static const char *const keys[] = {"Total sessions:", "total-current-allocs:"};
  char *clean = malloc(len ? len : 1);
  if (!clean) return tf_error__nomem();
  size_t n = tf_coturn__strip_telnet(clean, (const unsigned char *)text, len);
  tf_err rc = TF_ENOTFOUND;
  int64_t value = 0;
  size_t line = 0;
  for (size_t pos = 0; pos < n;) {
    const char *nl = memchr(clean + pos, '\n', n - pos);
    size_t end = nl ? (size_t)(nl - clean) : n;
    size_t i = pos;
    line++;
    pos = nl ? end + 1 : n;
    if (!nl) break; /* an unfinished line: its number may still be growing */
    while (i < end && (clean[i] == ' ' || clean[i] == '\t')) i++;
    const char *key = NULL;
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]) && !key; k++)
      if (end - i >= strlen(keys[k]) && memcmp(clean + i, keys[k], strlen(keys[k])) == 0) key = keys[k];
    if (!key) continue;
    i += strlen(key);
    while (i < end && (clean[i] == ' ' || clean[i] == '\t')) i++;
    size_t a = i;
    int64_t v = 0;
    while (i < end && clean[i] >= '0' && clean[i] <= '9' && i - a < 18) v = v * 10 + (clean[i++] - '0');
    size_t digits = i - a;
    while (i < end && (clean[i] == ' ' || clean[i] == '\t' || clean[i] == '\r' || clean[i] == '\0')) i++;
    if (digits == 0 || i != end) {
      rc = tf_error__set(TF_EPROTO, "line %zu: %s the value is not a count", line, key);
      break;
    }
    value = v;
    rc = TF_OK;
  }
  tf_crypto__wipe(clean, len ? len : 1); /* a session may echo what was typed */
  free(clean);
  if (rc == TF_ENOTFOUND)
    return tf_error__set(TF_ENOTFOUND, "neither Total sessions: nor total-current-allocs: is in the CLI output");
  if (rc < 0) return rc;
  *out = value;
  return TF_OK;
}

tf_err tf_coturn_cli_command(char **out, tf_coturn_cli_op op, const char *password, int64_t quota)
{
  TF_ASSERT_ARG(out);
  char *line = NULL;
  switch (op) {
  case TF_COTURN_CLI_LOGIN:
    if (!password || !*password) return tf_error__set(TF_EINVALID, "password: required (coturn disables an empty one)");
    if (strpbrk(password, "\r\n")) return tf_error__set(TF_EINVALID, "password: must not contain a line break");
    line = tf_asprintf__("%s\r\n", password);
    break;
  case TF_COTURN_CLI_PRINT_CONFIG:
    line = strdup("pc\r\n");
    break;
  case TF_COTURN_CLI_REFUSE_ALLOCATIONS:
    /* total_quota is an int: -1 makes `current >= quota` true for every new
     * Allocate (486), while refreshes of existing allocations still succeed */
    line = strdup("cc total-quota -1\r\n");
    break;
  case TF_COTURN_CLI_SET_TOTAL_QUOTA:
    if (quota < 0 || quota > TF_COTURN__QUOTA_MAX)
      return tf_error__set(TF_EINVALID, "quota: %lld is not 0-%d", (long long)quota, TF_COTURN__QUOTA_MAX);
    line = tf_asprintf__("cc total-quota %lld\r\n", (long long)quota);
    break;
  case TF_COTURN_CLI_DRAIN:
    line = strdup("drain\r\n");
    break;
  case TF_COTURN_CLI_STOP:
    line = strdup("stop\r\n");
    break;
  case TF_COTURN_CLI_PRINT_USERS:
    line = strdup("pu\r\n");
    break;
  case TF_COTURN_CLI_PRINT_SESSIONS:
    line = strdup("ps\r\n");
    break;
  default:
    return tf_error__set(TF_EINVALID, "op: %d is not a tf_coturn_cli_op", (int)op);
  }
  if (!line) return tf_error__nomem();
  *out = line;
  return TF_OK;
}
