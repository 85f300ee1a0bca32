/* The inputs of `turnfleet up`: the turnserver it runs, the pool file, the
 * nodes (--addresses or --nodes), the secret file; loaded at start, watched
 * while it runs. A change is applied whole or not at all, and a refusal is
 * reported on stderr, in the events, in status.json and by /healthz. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "up.h"

void up_set_unhealthy(up *u, int source, const char *why)
{
  pthread_mutex_lock(&u->mu);
  u->unhealthy[source] = why;
  pthread_mutex_unlock(&u->mu);
}

int up_file_changed(const char *path, struct timespec *seen)
{
  struct stat st;
  if (stat(path, &st) < 0 || (st.st_mtim.tv_sec == seen->tv_sec && st.st_mtim.tv_nsec == seen->tv_nsec)) return 0;
  *seen = st.st_mtim;
  return 1;
}

int up_detect_turnserver(up *u)
{
  char out[512];
  int n = up_capture(u->turnserver, "--version", out, sizeof(out), 15000);
  if (n < 0) {
    up_say("--turnserver", "cannot run %s: %s", u->turnserver, strerror(errno));
    return -1;
  }
  const char *line = out + strspn(out, " \t\r\n");
  int len = (int)strcspn(line, "\r\n");
  snprintf(u->ts_version_text, sizeof(u->ts_version_text), "%.*s", (int)strcspn(line, " \t\r\n"), line);
  if (tf_coturn_version_parse(&u->ts_version, u->ts_version_text) < 0) {
    up_say("--turnserver", "%s --version printed no coturn version: \"%.*s\"", u->turnserver, len > 80 ? 80 : len, line);
    return -1;
  }
  size_t size = 256 * 1024;
  char *help = malloc(size);
  n = help ? up_capture(u->turnserver, "-h", help, size, 15000) : -1;
  if (n < 0 || tf_coturn_build_features(&u->ts_build, help, (size_t)n) < 0) {
    up_say("--turnserver", "%s -h: %s", u->turnserver, n < 0 ? strerror(errno) : tf_error_last()->message);
    free(help);
    return -1;
  }
  free(help);
  return 0;
}

tf_pool *up_load_pool(up *u)
{
  size_t len;
  char *text = tool_read_file(u->pool_file, &len, TOOL_READ_MAX);
  tf_pool *pool = NULL;
  tf_problems *problems = NULL;
  cJSON *report = cJSON_CreateArray();
  char line[1024];
  if (!text) {
    snprintf(line, sizeof(line), "cannot read: %s", strerror(errno));
    cJSON_AddItemToArray(report, cJSON_CreateString(line));
  } else if (tf_pool_parse(&pool, text, len, TF_FORMAT_AUTO) < 0 || (u->name && tf_pool_set_name(pool, u->name) < 0) ||
             tf_pool_validate(&problems, pool) < 0) {
    for (size_t i = 0; i < tf_problems_count(problems); i++) {
      snprintf(line, sizeof(line), "%s: %s", tf_problems_path(problems, i), tf_problems_message(problems, i));
      cJSON_AddItemToArray(report, cJSON_CreateString(line));
    }
    if (!tf_problems_count(problems)) cJSON_AddItemToArray(report, cJSON_CreateString(tf_error_last()->message));
    tf_pool_free(pool);
    pool = NULL;
  }
  const cJSON *p;
  cJSON_ArrayForEach(p, report) up_say(u->pool_file, "%s", p->valuestring);
  if (!pool && u->engine) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "file", u->pool_file);
    cJSON_AddItemToObject(ev, "problems", report);
    report = NULL;
    up_event(u, "poolInvalid", ev);
  }
  cJSON_Delete(report);
  tf_problems_free(problems);
  free(text);
  return pool;
}

tf_nodes *up_load_nodes(up *u, const tf_pool *pool, char *why, size_t size)
{
  tf_nodes *nodes = NULL;
  const char *what = u->addresses ? "--addresses" : u->nodes_file;
  if (u->addresses) {
    enum { MAX = 1024 };
    tf_addr *addrs = calloc(MAX, sizeof(tf_addr));
    size_t n = 0;
    if (!addrs || tf_addr_list_parse(addrs, MAX, &n, u->addresses) < 0)
      snprintf(why, size, "%s (want e.g. 127.0.0.11-13,127.0.0.20, fd00::1-3 or 127.0.0.80/30)", tf_error_last()->message);
    else if (tf_engine_local_nodes(&nodes, pool, addrs, n) < 0)
      snprintf(why, size, "%s", tf_error_last()->message);
    free(addrs);
  } else {
    size_t len;
    char *text = tool_read_file(u->nodes_file, &len, TOOL_READ_MAX);
    if (!text) snprintf(why, size, "cannot open: %s", strerror(errno));
    else if (tf_nodes_parse(&nodes, text, len) < 0) snprintf(why, size, "%s", tf_error_last()->message);
    free(text);
  }
  if (!nodes) up_say(what, "%s", why);
  return nodes;
}

/* 0 when (addr, port) can be bound for @p type now; else the errno (EADDRINUSE: someone has it).
 * TCP with SO_REUSEADDR (as coturn binds: a closed relay's TIME_WAIT is no owner); UDP without,
 * so that another coturn's socket counts. */
static int bind_error(const tf_addr *addr, uint16_t port, int type)
{
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof(ss));
  socklen_t len;
  if (addr->family == TF_AF_INET) {
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    memcpy(&v4->sin_addr, addr->bytes, 4);
    len = sizeof(*v4);
  } else {
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    memcpy(&v6->sin6_addr, addr->bytes, 16);
    len = sizeof(*v6);
  }
  int fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0), err = 0, one = 1;
  if (fd >= 0 && type == SOCK_STREAM) (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || (type == SOCK_STREAM && listen(fd, 1) < 0)) err = errno;
  if (fd >= 0) close(fd);
  return err;
}

int up_relay_bind_problem(const tf_pool *pool, const tf_relay *r, char *why, size_t size)
{
  for (size_t a = 0; a < tf_relay_address_count(r); a++)
    for (size_t l = 0; l < tf_pool_listener_count(pool); l++) {
      tf_addr addr;
      char text[TF_ADDR_STRLEN];
      int proto = tf_pool_listener_protocol(pool, l), err;
      int type = proto == TF_PROTOCOL_UDP || proto == TF_PROTOCOL_DTLS ? SOCK_DGRAM : SOCK_STREAM;
      uint16_t port = tf_relay_listener_port(r, l);
      if (tf_relay_address(&addr, r, a) < 0 || !(err = bind_error(&addr, port, type))) continue;
      tf_addr_format(text, sizeof(text), &addr);
      snprintf(why, size, "cannot listen on %s port %u (%s): %s%s", text, port, tf_protocol_name(proto), strerror(err),
               err == EADDRINUSE ? " (another turnfleet up, or another process, holds it)" : "");
      return -1;
    }
  return 0;
}

int up_check_listeners(const tf_pool *pool, const tf_nodes *nodes)
{
  tf_plan *plan = NULL;
  if (tf_plan_new(&plan, pool, nodes, NULL) < 0) return up_say("plan", "%s", tf_error_last()->message), -1;
  int bad = 0;
  char why[512];
  for (size_t i = 0; !bad && i < tf_plan_relay_count(plan); i++)
    if ((bad = up_relay_bind_problem(pool, tf_plan_relay(plan, i), why, sizeof(why)) < 0))
      up_say(tf_relay_name(tf_plan_relay(plan, i)), "%s", why);
  tf_plan_free(plan);
  return bad ? -1 : 0;
}

tf_coturn_options up_coturn_options(up *u, const char *secrets[2])
{
  tf_coturn_options co = TF_COTURN_OPTIONS_INIT;
  secrets[0] = u->secret;
  secrets[1] = u->previous;
  co.secrets = secrets;
  co.secrets_count = u->previous ? 2 : 1;
  co.state_dir = u->state_dir;
  co.cli_port = u->cli_port;
  co.cli_password = u->cli_password;
  co.allow_loopback_peers = u->allow_loopback_peers; /* off by default: coturn refuses loopback peers */
  co.cert_file = u->cert;
  co.key_file = u->key;
  /* coturn's own exporter only where the build has it (Debian's 4.6.1 and 4.18 count through the CLI) */
  co.prometheus = (u->ts_build & TF_COTURN_BUILD_PROMETHEUS) ? 1 : 0;
  return co;
}

/* A change refused as a whole: said on stderr, in the events, the status and /healthz. */
static void refused(up *u, const char *file, const char *event, int source, const char *health)
{
  const char *why = tf_error_last()->message;
  char *copy = strdup(why);
  up_say(file, "refused: %s; the running fleet is left as it is", why);
  up_log(u, "%s edit refused: %s", file, why);
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "file", file);
  cJSON_AddStringToObject(ev, "message", copy ? copy : why);
  up_event(u, event, ev);
  (void)tf_engine_refuse(u->engine, copy ? copy : "out of memory");
  free(copy);
  up_set_unhealthy(u, source, health);
}

/* A changed pool file (or nodes file): a valid pool that can run, be placed and rendered replaces the running one. */
static void watch_pool(up *u, int pool_changed)
{
  tf_pool *pool = pool_changed ? up_load_pool(u) : NULL;
  if (pool_changed && !pool) {
    up_say(u->pool_file, "not applied: the running fleet is left as it is");
    up_log(u, "pool file invalid: not applied");
    up_set_unhealthy(u, UP_H_POOL, "the last pool edit was invalid");
    return;
  }
  if (!pool && tf_pool_with_replicas(&pool, tf_engine_pool(u->engine), tf_pool_replicas(tf_engine_pool(u->engine))) < 0)
    return;
  const char *file = pool_changed ? u->pool_file : u->nodes_file;
  int source = pool_changed ? UP_H_POOL : UP_H_NODES;
  char why[1024];
  tf_nodes *nodes = up_load_nodes(u, pool, why, sizeof(why));
  if (!nodes) {
    tf_pool_free(pool);
    up_say(file, "not applied: the running fleet is left as it is");
    up_log(u, "%s: %s", u->addresses ? "--addresses" : u->nodes_file, why);
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "file", u->addresses ? "--addresses" : u->nodes_file);
    cJSON_AddStringToObject(ev, "message", why);
    up_event(u, pool_changed ? "poolRefused" : "nodesInvalid", ev);
    up_set_unhealthy(u, source, pool_changed ? "the last pool edit was refused" : "the last nodes edit was invalid");
    return;
  }
  int checked = tf_engine_check_runtime(pool, u->ts_version, u->cert != NULL) == 0 &&
                tf_engine_check_placement(pool, nodes) == 0;
  if (!checked) tf_pool_free(pool), tf_nodes_free(nodes);
  if (!checked || tf_engine_set_inputs(u->engine, pool, nodes) < 0) { /* set_inputs takes both, also on failure */
    refused(u, file, pool_changed ? "poolRefused" : "nodesRefused", source,
            pool_changed ? "the last pool edit was refused" : "the last nodes edit was refused");
    return;
  }
  up_set_unhealthy(u, UP_H_POOL, NULL);
  up_set_unhealthy(u, UP_H_NODES, NULL);
  const tf_pool *now = tf_engine_pool(u->engine);
  up_log(u, "%s reloaded (replicas %lld)", file, (long long)tf_pool_replicas(now));
  if (!u->json) up_say(file, "reloaded (replicas %lld)", (long long)tf_pool_replicas(now));
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "file", file);
  cJSON_AddNumberToObject(ev, "replicas", (double)tf_pool_replicas(now));
  cJSON_AddNumberToObject(ev, "drainTimeoutMs", (double)tf_pool_drain_timeout_ms(now));
  up_event(u, pool_changed ? "poolReloaded" : "nodesReloaded", ev);
}

/* A rotated secret: relays re-render with (new, old) and restart one at a time; an empty or
 * missing file is reported and the running fleet kept. */
static void watch_secret(up *u)
{
  char *secret = NULL;
  if (tf_cred_secret_read(&secret, u->secret_file) < 0) {
    up_say("--secret-file", "%s: the running fleet keeps the secret it has", tf_error_last()->message);
    up_log(u, "secret file unusable: %s", tf_error_last()->message);
    up_set_unhealthy(u, UP_H_SECRET, "the secret file cannot be used");
    return;
  }
  if (!strcmp(secret, u->secret)) {
    tf_secret_free(secret);
    up_set_unhealthy(u, UP_H_SECRET, NULL);
    return;
  }
  char *old_previous = u->previous;
  u->previous = u->secret;
  u->secret = secret;
  const char *secrets[2];
  tf_coturn_options co = up_coturn_options(u, secrets);
  if (tf_engine_set_coturn_options(u->engine, &co) < 0) { /* refused: back to what runs */
    up_say("--secret-file", "refused: %s", tf_error_last()->message);
    u->secret = u->previous;
    u->previous = old_previous;
    tf_secret_free(secret);
    up_set_unhealthy(u, UP_H_SECRET, "the rotated secret was refused");
    return;
  }
  tf_secret_free(old_previous);
  up_set_unhealthy(u, UP_H_SECRET, NULL);
  up_log(u, "secret rotated: relays restart one at a time");
}

void up_watch_inputs(up *u)
{
  int pool_changed = up_file_changed(u->pool_file, &u->pool_mtime);
  int nodes_changed = u->nodes_file && up_file_changed(u->nodes_file, &u->nodes_mtime);
  if (pool_changed || nodes_changed) watch_pool(u, pool_changed);
  if (up_file_changed(u->secret_file, &u->secret_mtime)) watch_secret(u);
}
