/* reconcile: the controller core, pure.
 *
 * One call maps (pool, nodes, observations, now) to a result: the plan and a
 * rendered config per planned relay, the actions a runtime must carry out,
 * the pool status, the published turn URIs and the metric samples. Its steps:
 *  1. plan: the planner over a fleet of the observed relays that are not
 *     draining (kept names, scale-down by fewest allocations) and the claims
 *     of other pools;
 *  2. relays: the planned ones (matched to their observation by name and
 *     identity) and the observed ones leaving, merged by name and sorted;
 *  3. configs: rendered per planned relay with its CLI port and log file;
 *  4. actions: STOP finished drains and dead leavers, DRAIN leavers, one
 *     gated RESTART or in-place DRAIN, START new and dead relays (backoff);
 *  5. status: relays[], counts and the five conditions, lastTransitionTime
 *     carried over from the previous status while a status does not flip.
 * No clock (now comes in), no I/O, no randomness; every list is sorted on
 * values, so input order never shows in the output. */
#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define TF_REC__PREFIX_MAX 48       /* "relays[123456]." */
#define TF_REC__LIST_MAX 3          /* relays named in one condition message */
#define TF_REC__DEFAULT_PROM_PORT 9641u
#define TF_REC__HASH_MAX 128
#define TF_REC__MESSAGE_MAX 512     /* probe messages kept */

/* ---- observations ---- */

typedef struct tf_rec__obs {
  char *name;
  char *identity; /* canonical */
  tf_addr addrs[2];
  size_t addr_count;
  tf_port_range range;
  char *config_hash; /* NULL unknown */
  uint16_t cli_port;
  int running;
  int64_t started_ms, exited_ms, restarts;
  int draining;
  int64_t draining_since_ms;
  int64_t allocations;
  int64_t probe_ms;
  int probe_ok, probe_error_code, saw_508;
  int held_back;       /* ready, not served yet by its runtime: not published */
  int64_t probe_duration_ms; /* -1 unknown */
  int64_t count_failures;
  int64_t count_misses; /* count rounds in a row without a count */
  char *probe_message; /* NULL none */
  int *failure_codes;  /* sorted */
  int64_t *failure_counts;
  size_t failure_count;
  char **uris;
  size_t uri_count;
} tf_rec__obs;

typedef struct tf_rec__prev {
  char *type;
  char *status;
  char *time;
} tf_rec__prev;

typedef struct tf_rec__cli_claim {
  char *node;
  uint16_t port;
} tf_rec__cli_claim;

struct tf_observed {
  tf_rec__obs *relays;
  size_t count, cap;
  size_t adds; /* calls of tf_observed_add_relay (for field paths) */
  tf_existing *claims;
  size_t claim_adds;
  tf_rec__cli_claim *cli_claims; /* other pools' CLI ports, per node (tf_observed_add_cli_claim()) */
  size_t cli_claim_count, cli_claim_cap;
  tf_rec__prev *prev;
  size_t prev_count;
};

static void tf_rec__obs_clear(tf_rec__obs *o)
{
  free(o->name);
  free(o->identity);
  free(o->config_hash);
  free(o->probe_message);
  free(o->failure_codes);
  free(o->failure_counts);
  for (size_t i = 0; o->uris && i < o->uri_count; i++) free(o->uris[i]);
  free(o->uris);
  memset(o, 0, sizeof(*o));
}

static void tf_rec__prev_free(tf_rec__prev *p, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(p[i].type);
    free(p[i].status);
    free(p[i].time);
  }
  free(p);
}

tf_err tf_relay_observation_init(tf_relay_observation *obs, unsigned int version)
{
  TF_ASSERT_ARG(obs);
  if (version == 0 || version > TF_RELAY_OBSERVATION_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_relay_observation version (1-%d)", version,
                         TF_RELAY_OBSERVATION_VERSION);
  tf_relay_observation init = TF_RELAY_OBSERVATION_INIT;
  /* never past the caller's version: an older caller's struct ends sooner */
  size_t size = version == 1   ? offsetof(tf_relay_observation, held_back)
                : version == 2 ? offsetof(tf_relay_observation, probe_duration_ms)
                : version == 3 ? offsetof(tf_relay_observation, count_misses)
                               : sizeof(init);
  memcpy(obs, &init, size);
  obs->version = version;
  return TF_OK;
}

tf_err tf_observed_new(tf_observed **out)
{
  TF_ASSERT_ARG(out);
  tf_observed *o = calloc(1, sizeof(*o));
  if (!o) return tf_error__nomem();
  if (tf_existing_new(&o->claims) < 0) {
    free(o);
    return tf_error__nomem();
  }
  *out = o;
  return TF_OK;
}

void tf_observed_free(tf_observed *o)
{
  if (!o) return;
  for (size_t i = 0; i < o->count; i++) tf_rec__obs_clear(&o->relays[i]);
  free(o->relays);
  tf_existing_free(o->claims);
  for (size_t i = 0; i < o->cli_claim_count; i++) free(o->cli_claims[i].node);
  free(o->cli_claims);
  tf_rec__prev_free(o->prev, o->prev_count);
  free(o);
}

/* Printable ASCII without spaces or quotes (a hash, as the runtime stored it). */
static int tf_rec__token_ok(const char *s, size_t max)
{
  size_t n = 0;
  for (; s[n]; n++)
    if (s[n] <= ' ' || s[n] > '~' || s[n] == '"' || s[n] == '\\') return 0;
  return n > 0 && n <= max;
}

static int tf_rec__int_cmp(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Copy and check @p r into @p o; @p p prefixes field paths. */
static tf_err tf_rec__obs_copy(tf_rec__obs *o, const tf_relay_observation *r, const char *p)
{
  memset(o, 0, sizeof(*o));
  if (r->version == 0 || r->version > TF_RELAY_OBSERVATION_VERSION)
    return tf_error__set(TF_EINVALID, "%sversion: %u is not a tf_relay_observation version (1-%d)", p, r->version,
                         TF_RELAY_OBSERVATION_VERSION);
  if (!r->name) return tf_error__set(TF_EINVALID, "%sname: required", p);
  if (!tf_inventory__valid_name(r->name, TF_RELAY_NAME_MAX - 1))
    return tf_error__set(TF_EINVALID, "%sname: \"%.64s\" is not a valid relay name", p, r->name);
  if (!r->identity) return tf_error__set(TF_EINVALID, "%sidentity: required", p);
  if (tf_identity__parse(r->identity, o->addrs, &o->addr_count, &o->range) < 0)
    return tf_error__set(TF_EINVALID, "%sidentity: \"%.64s\" is not ADDR[,ADDR]/START-END", p, r->identity);
  if (r->config_hash && !tf_rec__token_ok(r->config_hash, TF_REC__HASH_MAX))
    return tf_error__set(TF_EINVALID, "%sconfig_hash: not a config hash", p);
  if (r->started_ms < 0) return tf_error__set(TF_EINVALID, "%sstarted_ms: must be >= 0", p);
  if (r->exited_ms < 0) return tf_error__set(TF_EINVALID, "%sexited_ms: must be >= 0", p);
  if (r->restarts < 0) return tf_error__set(TF_EINVALID, "%srestarts: must be >= 0", p);
  if (r->draining && r->draining_since_ms <= 0)
    return tf_error__set(TF_EINVALID, "%sdraining_since_ms: required (> 0) with draining", p);
  if (r->draining_since_ms < 0) return tf_error__set(TF_EINVALID, "%sdraining_since_ms: must be >= 0", p);
  if (r->allocations < -1)
    return tf_error__set(TF_EINVALID, "%sallocations: %lld is not -1 (unknown) or a count", p,
                         (long long)r->allocations);
  if (r->probe_ms < 0) return tf_error__set(TF_EINVALID, "%sprobe_ms: must be >= 0", p);
  if (r->probe_error_code < 0 || r->probe_error_code > 999)
    return tf_error__set(TF_EINVALID, "%sprobe_error_code: %d is not 0 or a TURN error code", p, r->probe_error_code);
  if (r->failure_count && (!r->failure_codes || !r->failure_counts))
    return tf_error__set(TF_EINVALID, "%sfailure_codes: NULL with %zu entries", p, r->failure_count);
  for (size_t i = 0; i < r->failure_count; i++) {
    if (r->failure_codes[i] < 100 || r->failure_codes[i] > 699)
      return tf_error__set(TF_EINVALID, "%sfailure_codes[%zu]: %d is not a TURN error code (100-699)", p, i,
                           r->failure_codes[i]);
    if (r->failure_counts[i] < 0) return tf_error__set(TF_EINVALID, "%sfailure_counts[%zu]: must be >= 0", p, i);
    for (size_t j = 0; j < i; j++)
      if (r->failure_codes[j] == r->failure_codes[i])
        return tf_error__set(TF_EINVALID, "%sfailure_codes[%zu]: %d given twice", p, i, r->failure_codes[i]);
  }
  if (r->uri_count && !r->uris) return tf_error__set(TF_EINVALID, "%suris: NULL with %zu entries", p, r->uri_count);
  for (size_t i = 0; i < r->uri_count; i++) {
    tf_uri *u = NULL;
    if (!r->uris[i] || tf_uri_parse(&u, r->uris[i]) < 0)
      return tf_error__set(TF_EINVALID, "%suris[%zu]: not a turn:/turns: URI", p, i);
    tf_uri_free(u);
  }

  char canon[2 * TF_ADDR_STRLEN + 16];
  tf_err rc = tf_identity__format(canon, sizeof(canon), o->addrs, o->addr_count, o->range);
  if (rc < 0) return rc;
  o->name = strdup(r->name);
  o->identity = strdup(canon);
  o->config_hash = r->config_hash ? strdup(r->config_hash) : NULL;
  o->probe_message = r->probe_message ? tf_strndup__(r->probe_message, TF_REC__MESSAGE_MAX) : NULL;
  size_t fc = r->failure_count;
  o->failure_codes = malloc((fc ? fc : 1) * sizeof(int));
  o->failure_counts = malloc((fc ? fc : 1) * sizeof(int64_t));
  if (!o->name || !o->identity || (r->config_hash && !o->config_hash) || (r->probe_message && !o->probe_message) ||
      !o->failure_codes || !o->failure_counts) {
    tf_rec__obs_clear(o);
    return tf_error__nomem();
  }
  /* failures sorted by code, so input order never shows */
  for (size_t i = 0; i < fc; i++) o->failure_codes[i] = r->failure_codes[i];
  qsort(o->failure_codes, fc, sizeof(int), tf_rec__int_cmp);
  for (size_t i = 0; i < fc; i++)
    for (size_t j = 0; j < fc; j++)
      if (r->failure_codes[j] == o->failure_codes[i]) o->failure_counts[i] = r->failure_counts[j];
  o->failure_count = fc;
  o->uris = calloc(r->uri_count + 1, sizeof(char *));
  if (!o->uris) {
    tf_rec__obs_clear(o);
    return tf_error__nomem();
  }
  for (size_t i = 0; i < r->uri_count; i++, o->uri_count++)
    if (!(o->uris[i] = strdup(r->uris[i]))) {
      tf_rec__obs_clear(o);
      return tf_error__nomem();
    }
  o->cli_port = r->cli_port;
  o->running = r->running ? 1 : 0;
  o->started_ms = r->started_ms;
  o->exited_ms = r->exited_ms;
  o->restarts = r->restarts;
  o->draining = r->draining ? 1 : 0;
  o->draining_since_ms = r->draining_since_ms;
  o->allocations = r->allocations;
  o->probe_ms = r->probe_ms;
  o->probe_ok = r->probe_ok ? 1 : 0;
  o->probe_error_code = r->probe_error_code;
  o->saw_508 = r->saw_508 ? 1 : 0;
  o->held_back = r->version >= 2 && r->held_back ? 1 : 0;
  o->probe_duration_ms = r->version >= 3 && r->probe_duration_ms >= 0 ? r->probe_duration_ms : -1;
  o->count_failures = r->version >= 3 && r->count_failures > 0 ? r->count_failures : 0;
  o->count_misses = r->version >= 4 && r->count_misses > 0 ? r->count_misses : 0;
  return TF_OK;
}

tf_err tf_observed_add_relay(tf_observed *obs, const tf_relay_observation *relay)
{
  TF_ASSERT_ARG(obs);
  TF_ASSERT_ARG(relay);
  char p[TF_REC__PREFIX_MAX];
  snprintf(p, sizeof(p), "relays[%zu].", obs->adds);
  for (size_t i = 0; relay->name && i < obs->count; i++)
    if (strcmp(obs->relays[i].name, relay->name) == 0)
      return tf_error__set(TF_EINVALID, "%sname: \"%.64s\" was added before", p, relay->name);
  if (obs->count == obs->cap) {
    size_t cap = obs->cap ? 2 * obs->cap : 8;
    tf_rec__obs *r = realloc(obs->relays, cap * sizeof(*r));
    if (!r) return tf_error__nomem();
    obs->relays = r;
    obs->cap = cap;
  }
  tf_err rc = tf_rec__obs_copy(&obs->relays[obs->count], relay, p);
  if (rc < 0) return rc;
  obs->count++;
  obs->adds++;
  return TF_OK;
}

tf_err tf_observed_add_claim(tf_observed *obs, const char *pool, const char *identity,
                             const uint16_t *listener_ports, size_t listener_ports_count)
{
  TF_ASSERT_ARG(obs);
  size_t n = obs->claim_adds;
  if (!pool || !*pool) return tf_error__set(TF_EINVALID, "claims[%zu].pool: required", n);
  tf_err rc = tf_existing_add(obs->claims, pool, NULL, identity, -1, listener_ports, listener_ports_count);
  if (rc < 0) {
    char why[512];
    snprintf(why, sizeof(why), "%s", tf_error_last()->message);
    return tf_error__set(rc, "claims[%zu].%s", n, why);
  }
  obs->claim_adds++;
  return TF_OK;
}

tf_err tf_observed_add_cli_claim(tf_observed *obs, const char *node, uint16_t port)
{
  TF_ASSERT_ARG(obs);
  size_t n = obs->cli_claim_count;
  if (!node || !*node) return tf_error__set(TF_EINVALID, "cli_claims[%zu].node: required", n);
  if (!port) return tf_error__set(TF_EINVALID, "cli_claims[%zu].port: must be 1-65535", n);
  if (n == obs->cli_claim_cap) { /* doubled: a pool on a busy node has a thousand of them, every step */
    size_t cap = n ? 2 * n : 16;
    tf_rec__cli_claim *grown = realloc(obs->cli_claims, cap * sizeof(*grown));
    if (!grown) return tf_error__nomem();
    obs->cli_claims = grown;
    obs->cli_claim_cap = cap;
  }
  if (!(obs->cli_claims[n].node = tf_strdup__(node))) return tf_error__nomem();
  obs->cli_claims[n].port = port;
  obs->cli_claim_count++;
  return TF_OK;
}

tf_err tf_observed_set_status(tf_observed *obs, const char *json, size_t len)
{
  TF_ASSERT_ARG(obs);
  TF_ASSERT_ARG(json);
  cJSON *root = NULL;
  tf_err rc = tf_doc__parse_json(&root, json, len, NULL);
  if (rc < 0) return rc;
  const cJSON *status = root;
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return tf_error__set(TF_EINVALID, "status: must be an object");
  }
  /* a whole TURNPool object carries it under "status" */
  const cJSON *inner = cJSON_GetObjectItemCaseSensitive(root, "status");
  if (cJSON_IsObject(inner) && (cJSON_GetObjectItemCaseSensitive(root, "spec") ||
                                cJSON_GetObjectItemCaseSensitive(root, "kind") ||
                                cJSON_GetObjectItemCaseSensitive(root, "metadata")))
    status = inner;
  const cJSON *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions");
  size_t n = cJSON_IsArray(conds) ? (size_t)cJSON_GetArraySize(conds) : 0;
  if (conds && !cJSON_IsArray(conds) && !cJSON_IsNull(conds)) {
    cJSON_Delete(root);
    return tf_error__set(TF_EINVALID, "status.conditions: must be an array");
  }
  tf_rec__prev *prev = calloc(n ? n : 1, sizeof(*prev));
  if (!prev) {
    cJSON_Delete(root);
    return tf_error__nomem();
  }
  size_t k = 0, i = 0;
  rc = TF_OK;
  tf_map types; /* condition type -> seen: a status with many conditions stays linear */
  tf_map__init(&types);
  const cJSON *c;
  const cJSON *list = n ? conds : NULL;
  cJSON_ArrayForEach(c, list)
  {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(c, "status");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "lastTransitionTime");
    if (!cJSON_IsObject(c)) rc = tf_error__set(TF_EINVALID, "status.conditions[%zu]: must be an object", i);
    else if (!cJSON_IsString(type) || !*type->valuestring)
      rc = tf_error__set(TF_EINVALID, "status.conditions[%zu].type: must be a non-empty string", i);
    else if (!cJSON_IsString(st) || (strcmp(st->valuestring, "True") != 0 && strcmp(st->valuestring, "False") != 0 &&
                                     strcmp(st->valuestring, "Unknown") != 0))
      rc = tf_error__set(TF_EINVALID, "status.conditions[%zu].status: must be True, False or Unknown", i);
    else if (!cJSON_IsString(t) || tf_time__parse(t->valuestring, NULL) < 0)
      rc = tf_error__set(TF_EINVALID, "status.conditions[%zu].lastTransitionTime: must be an RFC 3339 time", i);
    else {
      int fresh = tf_map__insert(&types, 0, type->valuestring, strlen(type->valuestring), i, NULL);
      if (fresh < 0) rc = fresh;
      else if (!fresh)
        rc = tf_error__set(TF_EINVALID, "status.conditions[%zu].type: %.64s given twice", i, type->valuestring);
      if (rc == TF_OK) {
        prev[k].type = strdup(type->valuestring);
        prev[k].status = strdup(st->valuestring);
        prev[k].time = strdup(t->valuestring);
        if (!prev[k].type || !prev[k].status || !prev[k].time) rc = tf_error__nomem();
        k++;
      }
    }
    if (rc != TF_OK) break;
    i++;
  }
  tf_map__dispose(&types);
  cJSON_Delete(root);
  if (rc < 0) {
    tf_rec__prev_free(prev, k);
    return rc;
  }
  tf_rec__prev_free(obs->prev, obs->prev_count);
  obs->prev = prev;
  obs->prev_count = k;
  return TF_OK;
}

/* ---- options ---- */

tf_err tf_reconcile_options_init(tf_reconcile_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_RECONCILE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_reconcile_options version (1-%d)", version,
                         TF_RECONCILE_OPTIONS_VERSION);
  tf_reconcile_options init = TF_RECONCILE_OPTIONS_INIT;
  opts->version = version;
  opts->coturn = init.coturn;
  opts->log_dir = init.log_dir;
  opts->pressure_threshold = init.pressure_threshold;
  opts->backoff_initial_ms = init.backoff_initial_ms;
  opts->backoff_max_ms = init.backoff_max_ms;
  if (version >= 2) opts->cli_password_per_relay = init.cli_password_per_relay;
  return TF_OK;
}

/* The caller's options read field by field up to its version, the rest defaulted: a struct from an
 * older caller is shorter than ours and is never read past. */
static void tf_rec__read_options(tf_reconcile_options *dst, const tf_reconcile_options *src)
{
  tf_reconcile_options init = TF_RECONCILE_OPTIONS_INIT;
  *dst = init;
  dst->version = src->version;
  dst->coturn = src->coturn;
  dst->log_dir = src->log_dir;
  dst->pressure_threshold = src->pressure_threshold;
  dst->backoff_initial_ms = src->backoff_initial_ms;
  dst->backoff_max_ms = src->backoff_max_ms;
  if (src->version >= 2) dst->cli_password_per_relay = src->cli_password_per_relay;
}

tf_err tf_reconcile_cli_password(char **out, const char *master, const char *relay)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  if (!master || !*master || !relay || !*relay) return tf_error__set(TF_EINVALID, "master, relay: required");
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), master, (int)strlen(master), (const unsigned char *)relay, strlen(relay), mac, &len))
    return tf_error__nomem();
  char *hex = malloc(33);
  if (!hex) return tf_error__nomem();
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
  tf_crypto__wipe(mac, sizeof(mac));
  *out = hex;
  return TF_OK;
}

static tf_err tf_rec__check_options(const tf_reconcile_options *o)
{
  if (!o) return tf_error__set(TF_EINVALID, "opts: required (render options with the shared secrets)");
  if (o->version == 0 || o->version > TF_RECONCILE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "opts.version: %u is not a tf_reconcile_options version (1-%d)", o->version,
                         TF_RECONCILE_OPTIONS_VERSION);
  if (!o->coturn) return tf_error__set(TF_EINVALID, "opts.coturn: required (render options with the shared secrets)");
  if (!(o->pressure_threshold > 0 && o->pressure_threshold <= 1))
    return tf_error__set(TF_EINVALID, "opts.pressure_threshold: must be in (0, 1]");
  if (o->backoff_initial_ms < 0) return tf_error__set(TF_EINVALID, "opts.backoff_initial_ms: must be >= 0");
  if (o->backoff_max_ms < o->backoff_initial_ms)
    return tf_error__set(TF_EINVALID, "opts.backoff_max_ms: must be >= backoff_initial_ms");
  if (o->log_dir) {
    if (o->log_dir[0] != '/') return tf_error__set(TF_EINVALID, "opts.log_dir: must be an absolute path");
    if (strlen(o->log_dir) > 800) return tf_error__set(TF_EINVALID, "opts.log_dir: too long");
  }
  return TF_OK;
}

/* ---- the result ---- */

typedef struct tf_rec__relay {
  const char *name; /* planned relay's or obs's */
  unsigned flags;
  const tf_relay *planned; /* borrowed from rec->plan; NULL: leaving */
  tf_rec__obs obs;         /* copied; obs.name NULL when none */
  int has_obs;
  int member;          /* obs is this planned relay's own process (same identity, not draining) */
  int current_probe;   /* obs.probe_* is from the current process */
  char *config;        /* secret */
  char *config_hash;
  uint16_t cli_port;
  uint16_t metrics_port;
  char **uris;
  size_t uri_count;
  char *address;       /* relayAddress */
  tf_port_range range;
  uint32_t ports_total;
  char *waiting;       /* why a planned relay's start waits; NULL */
} tf_rec__relay;

typedef struct tf_rec__action {
  tf_action action;
  size_t relay;
  const char *reason; /* static */
} tf_rec__action;

struct tf_reconcile {
  char *pool_name;
  char *ns;
  int64_t spec_replicas;
  int64_t drain_timeout_ms;
  tf_plan *plan;
  tf_rec__relay *relays;
  size_t relay_count;
  tf_rec__action *actions;
  size_t action_count;
  char **uris; /* published, borrowed from relays */
  size_t uri_count;
  tf_condition conds[5];
  char *cond_times[5];
  size_t replicas; /* planned with a running process */
  size_t ready;
  int64_t next_ms;
};

static void tf_rec__relay_clear(tf_rec__relay *r)
{
  tf_rec__obs_clear(&r->obs);
  if (r->config) {
    tf_crypto__wipe(r->config, strlen(r->config));
    free(r->config);
  }
  free(r->config_hash);
  for (size_t i = 0; i < r->uri_count; i++) free(r->uris[i]);
  free(r->uris);
  free(r->address);
  free(r->waiting);
}

void tf_reconcile_free(tf_reconcile *rec)
{
  if (!rec) return;
  for (size_t i = 0; i < rec->relay_count; i++) tf_rec__relay_clear(&rec->relays[i]);
  free(rec->relays);
  free(rec->actions);
  free(rec->uris);
  for (size_t i = 0; i < 5; i++) {
    free(rec->conds[i].type);
    free(rec->conds[i].status);
    free(rec->conds[i].reason);
    free(rec->conds[i].message);
    free(rec->cond_times[i]);
  }
  tf_plan_free(rec->plan);
  free(rec->pool_name);
  free(rec->ns);
  free(rec);
}

/* A deep copy of an observation. */
static tf_err tf_rec__obs_dup(tf_rec__obs *dst, const tf_rec__obs *src)
{
  *dst = *src;
  dst->uris = NULL; /* the copy owns none of src's blocks until they are duplicated */
  dst->uri_count = 0;
  dst->name = strdup(src->name);
  dst->identity = strdup(src->identity);
  dst->config_hash = src->config_hash ? strdup(src->config_hash) : NULL;
  dst->probe_message = src->probe_message ? strdup(src->probe_message) : NULL;
  size_t fc = src->failure_count ? src->failure_count : 1;
  dst->failure_codes = malloc(fc * sizeof(int));
  dst->failure_counts = malloc(fc * sizeof(int64_t));
  if (!dst->name || !dst->identity || (src->config_hash && !dst->config_hash) ||
      (src->probe_message && !dst->probe_message) || !dst->failure_codes || !dst->failure_counts) {
    tf_rec__obs_clear(dst);
    return tf_error__nomem();
  }
  memcpy(dst->failure_codes, src->failure_codes, src->failure_count * sizeof(int));
  memcpy(dst->failure_counts, src->failure_counts, src->failure_count * sizeof(int64_t));
  dst->uris = calloc(src->uri_count + 1, sizeof(char *));
  if (!dst->uris) {
    tf_rec__obs_clear(dst);
    return tf_error__nomem();
  }
  for (size_t i = 0; i < src->uri_count; i++, dst->uri_count++)
    if (!(dst->uris[i] = strdup(src->uris[i]))) {
      tf_rec__obs_clear(dst);
      return tf_error__nomem();
    }
  return TF_OK;
}

static int tf_rec__obs_ptr_cmp(const void *a, const void *b)
{
  return strcmp((*(const tf_rec__obs *const *)a)->name, (*(const tf_rec__obs *const *)b)->name);
}

static int tf_rec__relay_cmp(const void *a, const void *b)
{
  return strcmp(((const tf_rec__relay *)a)->name, ((const tf_rec__relay *)b)->name);
}

/* Action order within a kind, and rollout order: lowest address first, then range, then name. */
static int tf_rec__order_cmp(const void *pa, const void *pb, void *arg)
{
  const tf_reconcile *rec = arg;
  const tf_rec__relay *a = &rec->relays[*(const size_t *)pa], *b = &rec->relays[*(const size_t *)pb];
  const tf_addr *aa = a->planned ? &a->planned->addrs[0] : &a->obs.addrs[0];
  const tf_addr *ba = b->planned ? &b->planned->addrs[0] : &b->obs.addrs[0];
  int c = tf_addr_compare(aa, ba);
  if (c) return c;
  if (a->range.start != b->range.start) return a->range.start < b->range.start ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int tf_rec__share_address(const tf_addr *a, size_t an, const tf_addr *b, size_t bn)
{
  for (size_t i = 0; i < an; i++)
    for (size_t j = 0; j < bn; j++)
      if (tf_addr_compare(&a[i], &b[j]) == 0) return 1;
  return 0;
}

/* A relay with a process that is not (being) drained: what the status counts and probes judge. */
static int tf_rec__serving(const tf_rec__relay *r)
{
  return r->has_obs && r->obs.running && !(r->flags & TF_RELAY_DRAINING) && (r->member || !r->planned);
}

/* Its process runs and passed a probe made after it started. */
static int tf_rec__probe_good(const tf_rec__relay *r)
{
  return r->has_obs && r->obs.running && r->current_probe && r->obs.probe_ok;
}

/* A serving planned relay whose last probe, made after it started, got 508: it works and is full. Out of
 * the URIs while full (no client can allocate), but healthy: load never lowers the pool's Ready. */
static int tf_rec__full(const tf_rec__relay *r)
{
  return r->planned && tf_rec__serving(r) && r->current_probe && !r->obs.probe_ok && r->obs.probe_error_code == 508;
}

/* 1 when @p a holds fewer allocations than @p b (an unknown count is more than any known one). */
static int tf_rec__fewer(const tf_rec__relay *a, const tf_rec__relay *b)
{
  int64_t x = a->obs.allocations, y = b->obs.allocations;
  return x >= 0 && (y < 0 || x < y);
}

/* A planned relay served by its own process, which passed its probe. */
static int tf_rec__ready(const tf_rec__relay *r) { return r->planned && r->member && tf_rec__probe_good(r); }

/* Its probe passed and its runtime serves it: a restart of it costs its clients something. */
static int tf_rec__in_use(const tf_rec__relay *r) { return tf_rec__probe_good(r) && !r->obs.held_back; }

/* It serves and passed its probe, but its count rounds keep coming back empty: its load is unknown. */
static int tf_rec__uncounted(const tf_rec__relay *r)
{
  return tf_rec__probe_good(r) && !r->obs.draining && r->obs.count_misses >= TF_RECONCILE_UNCOUNTED_ROUNDS;
}

/* The wait before a dead relay starts again: none when its process had run at least backoff_max_ms (it was
 * lost, not crashing: a pod deleted or evicted), else doubling with its restarts up to backoff_max_ms. */
static int64_t tf_rec__backoff(const tf_reconcile_options *o, const tf_rec__obs *obs)
{
  if (obs->started_ms > 0 && obs->exited_ms - obs->started_ms >= o->backoff_max_ms) return 0;
  int64_t d = o->backoff_initial_ms;
  for (int64_t k = 0; k < obs->restarts && d < o->backoff_max_ms; k++) d = d > INT64_MAX / 2 ? INT64_MAX : 2 * d;
  return d < o->backoff_max_ms ? d : o->backoff_max_ms;
}

static void tf_rec__next(tf_reconcile *rec, int64_t t)
{
  if (t > 0 && (rec->next_ms == 0 || t < rec->next_ms)) rec->next_ms = t;
}

static tf_err tf_rec__push_action(tf_reconcile *rec, size_t *cap, tf_action a, size_t relay, const char *reason)
{
  if (rec->action_count == *cap) {
    size_t n = *cap ? 2 * *cap : 8;
    tf_rec__action *p = realloc(rec->actions, n * sizeof(*p));
    if (!p) return tf_error__nomem();
    rec->actions = p;
    *cap = n;
  }
  rec->actions[rec->action_count++] = (tf_rec__action){a, relay, reason};
  return TF_OK;
}

static tf_err tf_rec__address_text(char **out, const tf_addr *addrs, size_t n)
{
  char a[TF_ADDR_STRLEN], b[TF_ADDR_STRLEN];
  tf_err rc = tf_addr_format(a, sizeof(a), &addrs[0]);
  if (rc == 0 && n > 1) rc = tf_addr_format(b, sizeof(b), &addrs[1]);
  if (rc < 0) return rc;
  *out = n > 1 ? tf_asprintf__("%s,%s", a, b) : strdup(a);
  return *out ? TF_OK : tf_error__nomem();
}

/* URIs of a planned relay: each address, each listener. */
static tf_err tf_rec__relay_uris(tf_rec__relay *r, const tf_pool *pool)
{
  size_t nl = tf_pool_listener_count(pool);
  r->uris = calloc(nl * r->planned->addr_count + 1, sizeof(char *));
  if (!r->uris) return tf_error__nomem();
  for (size_t a = 0; a < r->planned->addr_count; a++)
    for (size_t l = 0; l < nl; l++) {
      int proto = tf_pool_listener_protocol(pool, l);
      int secure = proto == TF_PROTOCOL_TLS || proto == TF_PROTOCOL_DTLS;
      const char *transport = proto == TF_PROTOCOL_UDP || proto == TF_PROTOCOL_DTLS ? "udp" : "tcp";
      tf_err rc = tf_uri_format(&r->uris[r->uri_count], secure, &r->planned->addrs[a],
                                tf_relay_listener_port(r->planned, l), transport);
      if (rc < 0) return rc;
      r->uri_count++;
    }
  return TF_OK;
}

/* Is @p port free for a relay's CLI on @p node? Not another relay's of the pool, nor another pool's on that node
 * (host networking: one 127.0.0.1 per node), not in the pool's relay range or listener ports. */
static int tf_rec__cli_port_free(uint32_t port, const char *node, const tf_pool *pool, const tf_observed *obs,
                                 const tf_rec__relay *rs, size_t rn)
{
  for (size_t i = 0; obs && node && tf_pool_mode(pool) != TF_MODE_POD_IP && i < obs->cli_claim_count; i++)
    if (obs->cli_claims[i].port == port && strcmp(obs->cli_claims[i].node, node) == 0) return 0;
  tf_port_range range = tf_pool_relay_port_range(pool);
  if (port >= range.start && port <= range.end) return 0;
  uint32_t rpn = tf_pool_relays_per_node(pool);
  for (size_t l = 0; l < tf_pool_listener_count(pool); l++) {
    uint32_t base = tf_pool_listener_port(pool, l);
    if (port >= base && port < base + (rpn ? rpn : 1)) return 0;
  }
  for (size_t i = 0; obs && i < obs->count; i++)
    if (obs->relays[i].cli_port == port) return 0;
  for (size_t i = 0; i < rn; i++)
    if (rs[i].cli_port == port) return 0;
  return 1;
}

/* Render the planned relays' configs. */
static tf_err tf_rec__render(tf_reconcile *rec, const tf_pool *pool, const tf_observed *obs,
                             const tf_reconcile_options *o)
{
  if (o->coturn->version == 0 || o->coturn->version > TF_COTURN_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "opts.coturn.version: %u is not a tf_coturn_options version (1-%d)",
                         o->coturn->version, TF_COTURN_OPTIONS_VERSION);
  tf_coturn_options base_copy;
  tf_coturn__options_read(&base_copy, o->coturn);
  const tf_coturn_options *base = &base_copy;
  const char *vtext = base->coturn_version ? base->coturn_version : tf_pool_coturn_version(pool);
  uint32_t version = 0;
  int prom = tf_coturn_version_parse(&version, vtext) == 0 && tf_coturn__has_exporter(base, tf_coturn_features(version));

  /* CLI ports: a relay keeps the one it runs with; new ones, in plan order, take the lowest free */
  if (base->cli_port) {
    for (size_t i = 0; i < rec->relay_count; i++) {
      tf_rec__relay *r = &rec->relays[i];
      if (r->planned && r->member && r->obs.cli_port) r->cli_port = r->obs.cli_port;
    }
    for (size_t k = 0; k < tf_plan_relay_count(rec->plan); k++) {
      const tf_relay *p = tf_plan_relay(rec->plan, k);
      tf_rec__relay *r = NULL;
      for (size_t i = 0; i < rec->relay_count && !r; i++)
        if (rec->relays[i].planned == p) r = &rec->relays[i];
      if (!r || r->cli_port) continue;
      uint32_t port = base->cli_port;
      while (port <= 65535 && !tf_rec__cli_port_free(port, tf_relay_node(p), pool, obs, rec->relays, rec->relay_count))
        port++;
      if (port > 65535)
        return tf_error__set(TF_EINVALID, "opts.coturn.cli_port: no free CLI port from %u up", base->cli_port);
      r->cli_port = (uint16_t)port;
    }
  }
  for (size_t i = 0; i < rec->relay_count; i++) {
    tf_rec__relay *r = &rec->relays[i];
    if (!r->planned) continue;
    tf_coturn_options copt = *base;
    copt.cli_port = r->cli_port;
    char *log = NULL, *password = NULL;
    if (o->cli_password_per_relay && base->cli_port && base->cli_password) {
      tf_err prc = tf_reconcile_cli_password(&password, base->cli_password, r->name);
      if (prc < 0) return prc;
      copt.cli_password = password;
    }
    if (o->log_dir) {
      log = tf_asprintf__("%s/%s.log", o->log_dir, r->name);
      if (!log) return tf_error__nomem();
      copt.log_file = log;
    }
    tf_err rc = tf_coturn_render(&r->config, pool, rec->plan, r->name, &copt);
    free(log);
    tf_secret_free(password);
    if (rc == TF_OK) rc = tf_coturn_config_hash(&r->config_hash, r->config);
    if (rc == TF_OK) rc = tf_rec__relay_uris(r, pool);
    if (rc < 0) {
      if (rc == TF_EINVALID) {
        char why[512];
        snprintf(why, sizeof(why), "%s", tf_error_last()->message);
        return tf_error__set(rc, "relay %s: %s", r->name, why);
      }
      return rc;
    }
    if (prom) {
      unsigned port = (base->prometheus_port ? base->prometheus_port : TF_REC__DEFAULT_PROM_PORT) +
                      tf_relay_slice(r->planned);
      r->metrics_port = port <= 65535 ? (uint16_t)port : 0;
    }
  }
  return TF_OK;
}

/* Step 2: the relays, planned and leaving, merged by name. */
static tf_err tf_rec__relays(tf_reconcile *rec, const tf_observed *obs)
{
  size_t np = tf_plan_relay_count(rec->plan), no = obs ? obs->count : 0;
  rec->relays = calloc(np + no + 1, sizeof(*rec->relays));
  if (!rec->relays) return tf_error__nomem();
  tf_err rc = TF_OK;
  for (size_t k = 0; k < np; k++) {
    tf_rec__relay *r = &rec->relays[rec->relay_count++];
    r->planned = tf_plan_relay(rec->plan, k);
    r->name = tf_relay_name(r->planned);
    r->flags = TF_RELAY_PLANNED;
    r->range = tf_relay_port_range(r->planned);
    r->ports_total = tf_relay_ports_total(r->planned);
    if ((rc = tf_rec__address_text(&r->address, r->planned->addrs, r->planned->addr_count)) < 0) return rc;
  }
  for (size_t i = 0; i < no; i++) {
    const tf_rec__obs *o = &obs->relays[i];
    tf_rec__relay *r = NULL;
    for (size_t k = 0; k < np && !r; k++)
      if (strcmp(rec->relays[k].name, o->name) == 0) r = &rec->relays[k];
    if (r) {
      /* the planned relay's own process, or a draining one of the same name */
      r->member = !o->draining && strcmp(o->identity, r->planned->identity) == 0;
      if (!r->member && !o->draining) {
        /* same name, other identity, not draining: cannot come from the planner; treat as leaving */
        r = NULL;
      }
    }
    if (!r) {
      r = &rec->relays[rec->relay_count++];
      r->range = o->range;
      r->ports_total = (uint32_t)o->addr_count * tf_port_range_size(o->range);
      if ((rc = tf_rec__address_text(&r->address, o->addrs, o->addr_count)) < 0) return rc;
    }
    if ((rc = tf_rec__obs_dup(&r->obs, o)) < 0) return rc;
    r->has_obs = 1;
    r->name = r->planned ? r->name : r->obs.name;
    if (!r->member && r->planned) {
      /* a draining twin: it is what runs under this name; show its numbers */
      r->range = o->range;
      r->ports_total = (uint32_t)o->addr_count * tf_port_range_size(o->range);
    }
    if (!r->planned) {
      r->cli_port = o->cli_port; /* a DRAIN of coturn < 4.6.3 goes through its CLI */
      /* a leaving relay: the URIs it serves (what to probe, what stays published while it waits) */
      r->uris = calloc(o->uri_count + 1, sizeof(char *));
      if (!r->uris) return tf_error__nomem();
      for (size_t j = 0; j < o->uri_count; j++, r->uri_count++)
        if (!(r->uris[j] = strdup(o->uris[j]))) return tf_error__nomem();
    }
    if (o->running) r->flags |= TF_RELAY_RUNNING;
    if (o->draining) r->flags |= TF_RELAY_DRAINING;
    r->current_probe = o->probe_ms > 0 && o->probe_ms >= o->started_ms;
  }
  qsort(rec->relays, rec->relay_count, sizeof(*rec->relays), tf_rec__relay_cmp);
  return TF_OK;
}

/* An observed relay outside the plan (not stopping now) on one of @p r's addresses, or under its name. */
static const tf_rec__relay *tf_rec__blocker(const tf_reconcile *rec, const tf_rec__relay *r, const char *stopping,
                                            int *only_waiting_leavers)
{
  const tf_rec__relay *first = NULL;
  *only_waiting_leavers = 1;
  for (size_t i = 0; i < rec->relay_count; i++) {
    const tf_rec__relay *o = &rec->relays[i];
    if (!o->has_obs || o->member || stopping[i]) continue;
    /* its own draining twin (same name: same state directory) blocks it wherever that runs */
    if (o != r &&
        !tf_rec__share_address(o->obs.addrs, o->obs.addr_count, r->planned->addrs, r->planned->addr_count))
      continue;
    if (!first) first = o;
    if (o->obs.draining) *only_waiting_leavers = 0;
  }
  return first;
}

/* Step 4: the actions. */
static tf_err tf_rec__actions(tf_reconcile *rec, const tf_pool *pool, int64_t now, const tf_reconcile_options *o)
{
  size_t n = rec->relay_count, cap = 0;
  /* per relay: STOP now, DRAIN now, RESTART now, START now (1 new, 2 after an exit), replaced in place */
  char *stopping = calloc(n + 1, 1), *draining_now = calloc(n + 1, 1), *restarting = calloc(n + 1, 1);
  char *start = calloc(n + 1, 1), *in_place = calloc(n + 1, 1), *held = calloc(n + 1, 1); /* held: unavailable */
  size_t *order = malloc((n + 1) * sizeof(*order));
  tf_err rc = TF_OK;
  if (!stopping || !draining_now || !restarting || !start || !in_place || !held || !order) {
    rc = tf_error__nomem();
    goto done;
  }
  /* actions of a kind, and the rollout, go by address: deterministic and easy to follow */
  for (size_t i = 0; i < n; i++) order[i] = i;
  qsort_r(order, n, sizeof(*order), tf_rec__order_cmp, rec);
  int64_t timeout = tf_pool_drain_timeout_ms(pool);
  size_t active_observed = 0;
  for (size_t i = 0; i < n; i++) active_observed += rec->relays[i].has_obs && !rec->relays[i].obs.draining;

  /* STOP: drains that are over, leavers without a process */
  for (size_t x = 0; x < n && rc == TF_OK; x++) {
    size_t i = order[x];
    const tf_rec__relay *r = &rec->relays[i];
    if (!r->has_obs || r->member) continue;
    const char *why = NULL;
    if (r->obs.draining) {
      if (!r->obs.running) why = "Exited";
      else if (r->obs.allocations == 0) why = "Drained";
      else if (now >= r->obs.draining_since_ms + timeout) why = "DrainTimeout";
      else tf_rec__next(rec, r->obs.draining_since_ms + timeout);
    } else if (!r->obs.running) {
      why = "Removed";
    }
    if (why) {
      stopping[i] = 1;
      rc = tf_rec__push_action(rec, &cap, TF_ACTION_STOP, i, why);
    }
  }

  /* DRAIN: running leavers, except those replaced in place (a planned relay waits for their
   * address): they go one at a time, below. A scale-down drains one relay at a time, the one
   * with the fewest allocations first, while no other leaver drains; with no replicas left at
   * all (a pool scaled to zero, a shutdown) every leaver drains at once. */
  int one_at_a_time = tf_plan_relay_count(rec->plan) > 0, leaver_draining = 0;
  long fewest = -1;
  for (size_t i = 0; i < n; i++)
    leaver_draining |= rec->relays[i].has_obs && !rec->relays[i].member && rec->relays[i].obs.draining &&
                       !stopping[i] && rec->relays[i].obs.running;
  for (size_t x = 0; x < n && rc == TF_OK; x++) {
    size_t i = order[x];
    const tf_rec__relay *r = &rec->relays[i];
    if (!r->has_obs || r->member || r->obs.draining || stopping[i]) continue;
    for (size_t k = 0; k < n && !in_place[i]; k++) {
      const tf_rec__relay *p = &rec->relays[k];
      if (p->planned && !p->member && k != i &&
          tf_rec__share_address(r->obs.addrs, r->obs.addr_count, p->planned->addrs, p->planned->addr_count))
        in_place[i] = 1;
    }
    if (in_place[i]) continue;
    if (one_at_a_time && r->obs.running) {
      if (fewest < 0 || tf_rec__fewer(r, &rec->relays[fewest])) fewest = (long)i;
      continue;
    }
    draining_now[i] = 1;
    rc = tf_rec__push_action(rec, &cap, TF_ACTION_DRAIN, i,
                             active_observed > tf_plan_relay_count(rec->plan) ? "ScaleDown" : "Replaced");
  }
  if (fewest >= 0 && !leaver_draining && rc == TF_OK) {
    draining_now[fewest] = 1;
    rc = tf_rec__push_action(rec, &cap, TF_ACTION_DRAIN, (size_t)fewest,
                             active_observed > tf_plan_relay_count(rec->plan) ? "ScaleDown" : "Replaced");
  }

  /* planned relays: which start now, which wait, how many are unavailable */
  size_t unavailable = 0;
  for (size_t i = 0; i < n && rc == TF_OK; i++) {
    tf_rec__relay *r = &rec->relays[i];
    if (!r->planned) continue;
    /* a relay its runtime does not serve (held back) is no spare for a restart either */
    int counts = !tf_rec__ready(r) || (r->has_obs && r->obs.held_back);
    held[i] = (char)counts;
    if (r->member && !r->obs.running) {
      int64_t at = r->obs.exited_ms ? r->obs.exited_ms + tf_rec__backoff(o, &r->obs) : now;
      if (now >= at) {
        start[i] = 2;
      } else {
        tf_rec__next(rec, at);
        char t[48];
        tf_time__format(t, at);
        if (!(r->waiting = tf_asprintf__("restart backoff until %s", t))) rc = tf_error__nomem();
      }
    } else if (!r->member) {
      int only_leavers;
      const tf_rec__relay *b = tf_rec__blocker(rec, r, stopping, &only_leavers);
      if (!b) {
        start[i] = 1;
      } else {
        if (!(r->waiting = tf_asprintf__("address in use by %s%s", b->name, b->obs.draining ? " (draining)" : "")))
          rc = tf_error__nomem();
        /* waiting for leavers not draining yet: their drain is the disruption, gated below */
        if (only_leavers) counts = 0;
      }
    }
    if (r->waiting) r->flags |= TF_RELAY_WAITING;
    unavailable += (size_t)counts;
  }

  /* one disruption at a time: a restart for a new config, or the drain of a relay replaced in
   * place; only while every other planned relay is ready and served, except that a relay not
   * serving anyway (not ready, or held back: a restart its runtime has begun) may always go, and
   * goes first */
  long pick = -1;
  for (size_t x = 0; x < n && rc == TF_OK; x++) {
    size_t i = order[x];
    const tf_rec__relay *r = &rec->relays[i];
    int outdated = r->planned && r->member && r->obs.running &&
                   (!r->obs.config_hash || strcmp(r->obs.config_hash, r->config_hash) != 0);
    if (!outdated && !in_place[i]) continue;
    /* a relay that is not ready anyway first, then the one with the fewest allocations */
    const tf_rec__relay *p = pick >= 0 ? &rec->relays[pick] : NULL;
    if (!p || (tf_rec__in_use(p) && !tf_rec__in_use(r)) ||
        (tf_rec__in_use(p) == tf_rec__in_use(r) && tf_rec__fewer(r, p)))
      pick = (long)i;
  }
  if (pick >= 0 && rc == TF_OK &&
      (!tf_rec__in_use(&rec->relays[pick]) || unavailable - (size_t)held[pick] == 0)) {
    if (rec->relays[pick].planned) {
      restarting[pick] = 1;
      rc = tf_rec__push_action(rec, &cap, TF_ACTION_RESTART, (size_t)pick, "ConfigChanged");
    } else {
      draining_now[pick] = 1;
      rc = tf_rec__push_action(rec, &cap, TF_ACTION_DRAIN, (size_t)pick, "Replaced");
    }
  }

  /* START last: after the STOPs that free their addresses */
  for (size_t x = 0; x < n && rc == TF_OK; x++)
    if (start[order[x]])
      rc = tf_rec__push_action(rec, &cap, TF_ACTION_START, order[x], start[order[x]] == 2 ? "Exited" : "ScaleUp");

  /* flags that follow: a relay restarting or draining now is neither ready nor published; one
   * replaced in place keeps serving until its turn comes */
  for (size_t i = 0; i < n && rc == TF_OK; i++) {
    tf_rec__relay *r = &rec->relays[i];
    int served = !(r->has_obs && r->obs.held_back);
    if (tf_rec__ready(r) && !restarting[i]) r->flags |= TF_RELAY_READY | (served ? TF_RELAY_PUBLISHED : 0);
    if (in_place[i] && !draining_now[i] && tf_rec__probe_good(r))
      r->flags |= TF_RELAY_READY | (r->uri_count && served ? TF_RELAY_PUBLISHED : 0);
    if (draining_now[i]) r->flags |= TF_RELAY_DRAINING;
    if ((r->flags & TF_RELAY_READY) && tf_rec__uncounted(r)) r->flags |= TF_RELAY_UNCOUNTED;
    if (tf_rec__serving(r)) rec->replicas++;
  }
done:
  free(order);
  free(stopping);
  free(draining_now);
  free(restarting);
  free(start);
  free(in_place);
  free(held);
  return rc;
}

/* ---- conditions ---- */

static const char *const tf_rec__cond_types[5] = {"Ready", "ProbeSucceeded", "CapacityPressure", "AddressConflict",
                                                  "ReachableFromVantage"};

static tf_err tf_rec__set_cond(tf_reconcile *rec, size_t i, const char *status, const char *reason, char *message,
                               const tf_observed *obs, int64_t now)
{
  tf_condition *c = &rec->conds[i];
  c->type = strdup(tf_rec__cond_types[i]);
  c->status = strdup(status);
  c->reason = strdup(reason);
  c->message = message;
  const char *kept = NULL;
  for (size_t k = 0; obs && k < obs->prev_count; k++)
    if (strcmp(obs->prev[k].type, tf_rec__cond_types[i]) == 0 && strcmp(obs->prev[k].status, status) == 0)
      kept = obs->prev[k].time;
  char t[48];
  tf_time__format(t, now);
  rec->cond_times[i] = strdup(kept ? kept : t);
  if (!c->type || !c->status || !c->reason || !c->message || !rec->cond_times[i]) return tf_error__nomem();
  return TF_OK;
}

/* "a; b; c and 2 more" over at most TF_REC__LIST_MAX clauses. */
static void tf_rec__clause(tf_buf *b, size_t *count, const char *fmt, ...) TF__PRINTF(3, 4);
static void tf_rec__clause(tf_buf *b, size_t *count, const char *fmt, ...)
{
  if ((*count)++ >= TF_REC__LIST_MAX) return;
  if (*count > 1) tf_buf__puts(b, "; ");
  char text[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  tf_buf__puts(b, text);
}

static tf_err tf_rec__finish_list(tf_buf *b, size_t count, char **out)
{
  if (count > TF_REC__LIST_MAX) tf_buf__printf(b, "; and %zu more", count - TF_REC__LIST_MAX);
  return tf_buf__detach(b, out);
}

static tf_err tf_rec__conditions(tf_reconcile *rec, const tf_observed *obs, int64_t now,
                                 const tf_reconcile_options *o)
{
  size_t planned = tf_plan_relay_count(rec->plan), n_full = 0;
  for (size_t i = 0; i < rec->relay_count; i++) {
    rec->ready += (rec->relays[i].flags & TF_RELAY_READY) != 0;
    n_full += !(rec->relays[i].flags & TF_RELAY_READY) && tf_rec__full(&rec->relays[i]);
  }
  int64_t want = rec->spec_replicas;
  tf_err rc;
  char *msg = NULL;

  /* Ready */
  {
    tf_buf b;
    tf_buf__init(&b);
    tf_buf__printf(&b, "%zu/%lld relays ready", rec->ready, (long long)want);
    if (n_full) tf_buf__printf(&b, ", %zu full (no relay port free)", n_full);
    const char *status = "True", *reason = "AllRelaysReady";
    if ((int64_t)planned < want) {
      status = "False";
      reason = "InsufficientAddresses";
      const char *pm = NULL;
      for (size_t k = 0; k < tf_plan_condition_count(rec->plan); k++) {
        const char *type, *m;
        if (tf_plan_condition(rec->plan, k, &type, NULL, NULL, &m) == 0 && strcmp(type, "Placed") == 0) pm = m;
      }
      tf_buf__printf(&b, "; %s", pm ? pm : "not every replica could be placed");
    } else if ((int64_t)(rec->ready + n_full) < want) {
      status = "False";
      reason = "RelaysNotReady";
      size_t count = 0;
      tf_buf w;
      tf_buf__init(&w);
      for (size_t i = 0; i < rec->relay_count; i++) {
        const tf_rec__relay *r = &rec->relays[i];
        if (!r->planned || (r->flags & TF_RELAY_READY) || tf_rec__full(r)) continue;
        const char *why = r->waiting                                 ? r->waiting
                          : !r->has_obs || !r->member                 ? "not started"
                          : !r->obs.running                           ? "not running"
                          : !r->current_probe                         ? "not probed since it started"
                          : r->obs.probe_ok                           ? "restarting"
                                                                      : "its probe failed";
        tf_rec__clause(&w, &count, "%s: %s", r->name, why);
      }
      char *list = NULL;
      if ((rc = tf_rec__finish_list(&w, count, &list)) < 0) {
        tf_buf__dispose(&b, 0);
        return rc;
      }
      if (*list) tf_buf__printf(&b, " (%s)", list);
      free(list);
    }
    /* ready but not counted: what it carries is unknown, so the pool is not Ready with nulls */
    size_t uncounted = 0;
    tf_buf u;
    tf_buf__init(&u);
    for (size_t i = 0; i < rec->relay_count; i++)
      if (rec->relays[i].flags & TF_RELAY_UNCOUNTED) tf_rec__clause(&u, &uncounted, "%s", rec->relays[i].name);
    char *ulist = NULL;
    if ((rc = tf_rec__finish_list(&u, uncounted, &ulist)) < 0) {
      tf_buf__dispose(&b, 0);
      return rc;
    }
    if (uncounted) {
      tf_buf__printf(&b, "; %zu uncounted (no ports-in-use count for %d count rounds: %s)", uncounted,
                     TF_RECONCILE_UNCOUNTED_ROUNDS, ulist);
      if (strcmp(status, "True") == 0) status = "False", reason = "RelaysUncounted";
    }
    free(ulist);
    if ((rc = tf_buf__detach(&b, &msg)) < 0) return rc;
    if ((rc = tf_rec__set_cond(rec, 0, status, reason, msg, obs, now)) < 0) return rc;
  }

  /* ProbeSucceeded: the serving relays probed since their process started */
  {
    size_t probed = 0, failed = 0;
    tf_buf b;
    tf_buf__init(&b);
    for (size_t i = 0; i < rec->relay_count; i++) {
      const tf_rec__relay *r = &rec->relays[i];
      if (!tf_rec__serving(r) || !r->current_probe) continue;
      probed++;
      if (r->obs.probe_ok || r->obs.probe_error_code == 508) continue; /* 508: it answered, full (CapacityPressure) */
      char code[32] = "";
      if (r->obs.probe_error_code) snprintf(code, sizeof(code), "error %d", r->obs.probe_error_code);
      const char *m = r->obs.probe_message && *r->obs.probe_message ? r->obs.probe_message : "";
      tf_rec__clause(&b, &failed, "%s: %s%s%s", r->name, code, *code && *m ? ": " : "",
                     *code || *m ? m : "failed");
    }
    const char *status, *reason;
    char *list = NULL;
    if ((rc = tf_rec__finish_list(&b, failed, &list)) < 0) return rc;
    if (failed) {
      status = "False";
      reason = "ProbeFailed";
      msg = tf_asprintf__("%zu/%zu probed relays failed: %s", failed, probed, list);
    } else if (probed) {
      status = "True";
      reason = "ProbesSucceeded";
      msg = tf_asprintf__("%zu/%zu probed relays passed", probed, probed);
    } else {
      status = "Unknown";
      reason = "NotProbed";
      msg = strdup("no relay has been probed since it started");
    }
    free(list);
    if (!msg) return tf_error__nomem();
    if ((rc = tf_rec__set_cond(rec, 1, status, reason, msg, obs, now)) < 0) return rc;
  }

  /* CapacityPressure: serving relays at the threshold, or answering 508 since their last good probe */
  {
    size_t count = 0;
    int any508 = 0;
    tf_buf b;
    tf_buf__init(&b);
    for (size_t i = 0; i < rec->relay_count; i++) {
      const tf_rec__relay *r = &rec->relays[i];
      if (!tf_rec__serving(r)) continue;
      int full = r->obs.allocations >= 0 && r->ports_total > 0 &&
                 (double)r->obs.allocations >= o->pressure_threshold * (double)r->ports_total;
      if (full && r->obs.saw_508)
        tf_rec__clause(&b, &count, "%s: %lld/%u ports in use and answered 508", r->name,
                       (long long)r->obs.allocations, r->ports_total);
      else if (full)
        tf_rec__clause(&b, &count, "%s: %lld/%u ports in use", r->name, (long long)r->obs.allocations,
                       r->ports_total);
      else if (r->obs.saw_508)
        tf_rec__clause(&b, &count, "%s: answered 508 (no relay port free) since its last good probe", r->name);
      any508 |= r->obs.saw_508;
    }
    char *list = NULL;
    if ((rc = tf_rec__finish_list(&b, count, &list)) < 0) return rc;
    int pct = (int)(o->pressure_threshold * 100 + 0.5);
    if (count) {
      msg = list;
      list = NULL;
    } else {
      msg = tf_asprintf__("no relay uses %d%% of its ports or answered 508", pct);
    }
    free(list);
    if (!msg) return tf_error__nomem();
    if ((rc = tf_rec__set_cond(rec, 2, count ? "True" : "False",
                               !count ? "NoPressure" : any508 ? "InsufficientCapacity" : "PortsNearlyExhausted", msg,
                               obs, now)) < 0)
      return rc;
  }

  /* AddressConflict: the planner's */
  {
    const char *status = "False", *reason = "NoConflict", *m = "no relay address is claimed by another pool";
    for (size_t k = 0; k < tf_plan_condition_count(rec->plan); k++) {
      const char *type, *s, *rs, *mm;
      if (tf_plan_condition(rec->plan, k, &type, &s, &rs, &mm) == 0 && strcmp(type, "AddressConflict") == 0) {
        status = s;
        reason = rs;
        m = mm;
      }
    }
    if (!(msg = strdup(m))) return tf_error__nomem();
    if ((rc = tf_rec__set_cond(rec, 3, status, reason, msg, obs, now)) < 0) return rc;
  }

  /* ReachableFromVantage: no vantage probe in this core yet */
  if (!(msg = strdup("no vantage probe is configured"))) return tf_error__nomem();
  return tf_rec__set_cond(rec, 4, "Unknown", "NoVantage", msg, obs, now);
}

/* ---- entry point ---- */

tf_err tf_reconcile_new(tf_reconcile **out, const tf_pool *pool, const tf_nodes *nodes, const tf_observed *obs,
                        int64_t now_ms, const tf_reconcile_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(pool);
  TF_ASSERT_ARG(nodes);
  if (now_ms < 0) return tf_error__set(TF_EINVALID, "now_ms: must be >= 0");
  tf_err rc = tf_rec__check_options(opts);
  if (rc < 0) return rc;
  tf_reconcile_options read;
  tf_rec__read_options(&read, opts);
  opts = &read;
  if ((rc = tf_pool_validate(NULL, pool)) < 0) return rc;
  const char *pool_name = tf_pool_name(pool);
  for (size_t i = 0; obs && i < obs->claims->count; i++)
    if (strcmp(obs->claims->items[i].pool, pool_name) == 0)
      return tf_error__set(TF_EINVALID, "claims[%zu].pool: \"%s\" is the pool being reconciled (add its relays "
                                        "with tf_observed_add_relay)", i, pool_name);

  /* 1. the plan over the fleet of relays that stay, and the claims */
  tf_existing *fleet = NULL;
  if ((rc = tf_existing_new(&fleet)) < 0) return rc;
  const tf_rec__obs **sorted = calloc((obs ? obs->count : 0) + 1, sizeof(*sorted));
  if (!sorted) {
    tf_existing_free(fleet);
    return tf_error__nomem();
  }
  for (size_t i = 0; obs && i < obs->count; i++) sorted[i] = &obs->relays[i];
  qsort(sorted, obs ? obs->count : 0, sizeof(*sorted), tf_rec__obs_ptr_cmp);
  for (size_t i = 0; rc == TF_OK && obs && i < obs->count; i++)
    if (!sorted[i]->draining)
      rc = tf_existing_add(fleet, NULL, sorted[i]->name, sorted[i]->identity, sorted[i]->allocations, NULL, 0);
  for (size_t i = 0; rc == TF_OK && obs && i < obs->claims->count; i++) {
    const tf_existing_record *c = &obs->claims->items[i];
    rc = tf_existing_add(fleet, c->pool, c->name, c->identity, -1, c->listener_ports, c->listener_port_count);
  }
  free(sorted);
  tf_reconcile *rec = calloc(1, sizeof(*rec));
  if (!rec) rc = rc < 0 ? rc : tf_error__nomem();
  if (rc == TF_OK) rc = tf_plan_new(&rec->plan, pool, nodes, fleet);
  tf_existing_free(fleet);
  if (rc == TF_OK) {
    rec->pool_name = strdup(pool_name);
    rec->ns = strdup(tf_pool_namespace(pool));
    rec->spec_replicas = tf_pool_replicas(pool);
    rec->drain_timeout_ms = tf_pool_drain_timeout_ms(pool);
    if (!rec->pool_name || !rec->ns) rc = tf_error__nomem();
  }
  /* 2-5 */
  if (rc == TF_OK) rc = tf_rec__relays(rec, obs);
  if (rc == TF_OK) rc = tf_rec__render(rec, pool, obs, opts);
  if (rc == TF_OK) rc = tf_rec__actions(rec, pool, now_ms, opts);
  if (rc == TF_OK) rc = tf_rec__conditions(rec, obs, now_ms, opts);
  if (rc == TF_OK) {
    size_t n = 0;
    for (size_t i = 0; i < rec->relay_count; i++)
      if (rec->relays[i].flags & TF_RELAY_PUBLISHED) n += rec->relays[i].uri_count;
    rec->uris = calloc(n + 1, sizeof(char *));
    if (!rec->uris) rc = tf_error__nomem();
    for (size_t i = 0; rc == TF_OK && i < rec->relay_count; i++)
      if (rec->relays[i].flags & TF_RELAY_PUBLISHED)
        for (size_t j = 0; j < rec->relays[i].uri_count; j++) rec->uris[rec->uri_count++] = rec->relays[i].uris[j];
  }
  if (rc < 0) {
    tf_reconcile_free(rec);
    return rc;
  }
  *out = rec;
  return TF_OK;
}

/* ---- accessors ---- */

const char *tf_action_name(tf_action action)
{
  switch (action) {
  case TF_ACTION_START:
    return "start";
  case TF_ACTION_DRAIN:
    return "drain";
  case TF_ACTION_STOP:
    return "stop";
  case TF_ACTION_RESTART:
    return "restart";
  default:
    return NULL;
  }
}

size_t tf_reconcile_action_count(const tf_reconcile *rec) { return rec ? rec->action_count : 0; }

tf_err tf_reconcile_action(const tf_reconcile *rec, size_t i, tf_action *action, size_t *relay, const char **reason)
{
  TF_ASSERT_ARG(rec);
  if (i >= rec->action_count)
    return tf_error__set(TF_ENOTFOUND, "action %zu: out of range (%zu actions)", i, rec->action_count);
  if (action) *action = rec->actions[i].action;
  if (relay) *relay = rec->actions[i].relay;
  if (reason) *reason = rec->actions[i].reason;
  return TF_OK;
}

static const tf_rec__relay *tf_rec__at(const tf_reconcile *rec, size_t i)
{
  return rec && i < rec->relay_count ? &rec->relays[i] : NULL;
}

size_t tf_reconcile_relay_count(const tf_reconcile *rec) { return rec ? rec->relay_count : 0; }

const char *tf_reconcile_relay_name(const tf_reconcile *rec, size_t i)
{
  const tf_rec__relay *r = tf_rec__at(rec, i);
  return r ? r->name : NULL;
}

unsigned int tf_reconcile_relay_flags(const tf_reconcile *rec, size_t i)
{
  const tf_rec__relay *r = tf_rec__at(rec, i);
  return r ? r->flags : 0;
}

const char *tf_reconcile_relay_config(const tf_reconcile *rec, size_t i)
{
  const tf_rec__relay *r = tf_rec__at(rec, i);
  return r ? r->config : NULL;
}

const char *tf_reconcile_relay_config_hash(const tf_reconcile *rec, size_t i)
{
  const tf_rec__relay *r = tf_rec__at(rec, i);
  return r ? r->config_hash : NULL;
}

uint16_t tf_reconcile_relay_cli_port(const tf_reconcile *rec, size_t i)
{
  const tf_rec__relay *r = tf_rec__at(rec, i);
  return r ? r->cli_port : 0;
}

uint16_t tf_reconcile_relay_metrics_port(const tf_reconcile *rec, size_t i)
{
  const tf_rec__relay *r = tf_rec__at(rec, i);
  return r ? r->metrics_port : 0;
}

size_t tf_reconcile_relay_uri_count(const tf_reconcile *rec, size_t i)
{
  const tf_rec__relay *r = tf_rec__at(rec, i);
  return r ? r->uri_count : 0;
}

const char *tf_reconcile_relay_uri(const tf_reconcile *rec, size_t i, size_t j)
{
  const tf_rec__relay *r = tf_rec__at(rec, i);
  return r && j < r->uri_count ? r->uris[j] : NULL;
}

const tf_plan *tf_reconcile_plan(const tf_reconcile *rec) { return rec ? rec->plan : NULL; }

size_t tf_reconcile_uri_count(const tf_reconcile *rec) { return rec ? rec->uri_count : 0; }

const char *tf_reconcile_uri(const tf_reconcile *rec, size_t i)
{
  return rec && i < rec->uri_count ? rec->uris[i] : NULL;
}

size_t tf_reconcile_condition_count(const tf_reconcile *rec) { return rec ? 5 : 0; }

tf_err tf_reconcile_condition(const tf_reconcile *rec, size_t i, const char **type, const char **status,
                              const char **reason, const char **message, const char **last_transition_time)
{
  TF_ASSERT_ARG(rec);
  if (i >= 5) return tf_error__set(TF_ENOTFOUND, "condition %zu: out of range (5 conditions)", i);
  if (type) *type = rec->conds[i].type;
  if (status) *status = rec->conds[i].status;
  if (reason) *reason = rec->conds[i].reason;
  if (message) *message = rec->conds[i].message;
  if (last_transition_time) *last_transition_time = rec->cond_times[i];
  return TF_OK;
}

int64_t tf_reconcile_next_ms(const tf_reconcile *rec) { return rec ? rec->next_ms : 0; }

/* ---- JSON ---- */

/* A small pretty printer: two-space indent, one member a line. */
#define TF_REC__JSON_DEPTH 8
typedef struct tf_rec__jw {
  tf_buf *b;
  int depth;
  size_t count[TF_REC__JSON_DEPTH];
} tf_rec__jw;


static void tf_rec__jw_key(tf_rec__jw *w, const char *key)
{
  if (w->depth > 0) {
    tf_buf__puts(w->b, w->count[w->depth]++ ? ",\n" : "\n");
    for (int i = 0; i < w->depth; i++) tf_buf__puts(w->b, "  ");
  }
  if (key) {
    tf_buf__json_str(w->b, key);
    tf_buf__puts(w->b, ": ");
  }
}

static void tf_rec__jw_open(tf_rec__jw *w, const char *key, const char *bracket)
{
  tf_rec__jw_key(w, key);
  tf_buf__puts(w->b, bracket);
  if (w->depth + 1 < TF_REC__JSON_DEPTH) w->count[++w->depth] = 0;
}

static void tf_rec__jw_close(tf_rec__jw *w, const char *bracket)
{
  size_t had = w->count[w->depth];
  w->depth--;
  if (had) {
    tf_buf__puts(w->b, "\n");
    for (int i = 0; i < w->depth; i++) tf_buf__puts(w->b, "  ");
  }
  tf_buf__puts(w->b, bracket);
}

static void tf_rec__jw_str(tf_rec__jw *w, const char *key, const char *v)
{
  tf_rec__jw_key(w, key);
  if (v) tf_buf__json_str(w->b, v);
  else tf_buf__puts(w->b, "null");
}

static void tf_rec__jw_int(tf_rec__jw *w, const char *key, int64_t v)
{
  tf_rec__jw_key(w, key);
  tf_buf__printf(w->b, "%lld", (long long)v);
}

static void tf_rec__jw_bool(tf_rec__jw *w, const char *key, int v)
{
  tf_rec__jw_key(w, key);
  tf_buf__puts(w->b, v ? "true" : "false");
}

static void tf_rec__jw_null(tf_rec__jw *w, const char *key)
{
  tf_rec__jw_key(w, key);
  tf_buf__puts(w->b, "null");
}

static void tf_rec__status(tf_rec__jw *w, const char *key, const tf_reconcile *rec)
{
  tf_rec__jw_open(w, key, "{");
  tf_rec__jw_int(w, "replicas", (int64_t)rec->replicas);
  tf_rec__jw_int(w, "readyRelays", (int64_t)rec->ready);
  /* what turn-uris publishes: the ready relays that are not draining */
  tf_rec__jw_open(w, "turnURIs", "[");
  for (size_t i = 0; i < rec->uri_count; i++) tf_rec__jw_str(w, NULL, rec->uris[i]);
  tf_rec__jw_close(w, "]");
  tf_rec__jw_open(w, "relays", "[");
  for (size_t i = 0; i < rec->relay_count; i++) {
    const tf_rec__relay *r = &rec->relays[i];
    tf_rec__jw_open(w, NULL, "{");
    tf_rec__jw_str(w, "name", r->name);
    tf_rec__jw_str(w, "relayAddress", r->address);
    tf_rec__jw_open(w, "portRange", "{");
    tf_rec__jw_int(w, "start", r->range.start);
    tf_rec__jw_int(w, "end", r->range.end);
    tf_rec__jw_close(w, "}");
    tf_rec__jw_bool(w, "ready", (r->flags & TF_RELAY_READY) != 0);
    tf_rec__jw_bool(w, "draining", (r->flags & TF_RELAY_DRAINING) != 0);
    int known = r->has_obs && r->obs.allocations >= 0;
    if (known) {
      tf_rec__jw_int(w, "allocations", r->obs.allocations);
      tf_rec__jw_int(w, "portsInUse", r->obs.allocations);
    } else {
      tf_rec__jw_null(w, "allocations");
      tf_rec__jw_null(w, "portsInUse");
    }
    tf_rec__jw_int(w, "portsTotal", r->ports_total);
    if (r->has_obs && r->obs.probe_ms > 0) {
      char t[48];
      tf_time__format(t, r->obs.probe_ms);
      tf_rec__jw_open(w, "lastProbe", "{");
      tf_rec__jw_str(w, "time", t);
      tf_rec__jw_bool(w, "ok", r->obs.probe_ok);
      tf_rec__jw_int(w, "errorCode", r->obs.probe_error_code);
      tf_rec__jw_str(w, "message", r->obs.probe_message ? r->obs.probe_message : "");
      tf_rec__jw_close(w, "}");
    } else {
      tf_rec__jw_null(w, "lastProbe");
    }
    tf_rec__jw_close(w, "}");
  }
  tf_rec__jw_close(w, "]");
  tf_rec__jw_open(w, "conditions", "[");
  for (size_t i = 0; i < 5; i++) {
    tf_rec__jw_open(w, NULL, "{");
    tf_rec__jw_str(w, "type", rec->conds[i].type);
    tf_rec__jw_str(w, "status", rec->conds[i].status);
    tf_rec__jw_str(w, "reason", rec->conds[i].reason);
    tf_rec__jw_str(w, "message", rec->conds[i].message);
    tf_rec__jw_str(w, "lastTransitionTime", rec->cond_times[i]);
    tf_rec__jw_close(w, "}");
  }
  tf_rec__jw_close(w, "]");
  tf_rec__jw_close(w, "}");
}

tf_err tf_reconcile_status_json(char **out, const tf_reconcile *rec)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(rec);
  tf_buf b;
  tf_buf__init(&b);
  tf_rec__jw w = {&b, 0, {0}};
  tf_rec__status(&w, NULL, rec);
  return tf_buf__detach(&b, out);
}

tf_err tf_reconcile_to_json(char **out, const tf_reconcile *rec)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(rec);
  tf_buf b;
  tf_buf__init(&b);
  tf_rec__jw w = {&b, 0, {0}};
  tf_rec__jw_open(&w, NULL, "{");
  tf_rec__status(&w, "status", rec);
  tf_rec__jw_open(&w, "actions", "[");
  for (size_t i = 0; i < rec->action_count; i++) {
    const tf_rec__action *a = &rec->actions[i];
    tf_rec__jw_open(&w, NULL, "{");
    tf_rec__jw_str(&w, "action", tf_action_name(a->action));
    tf_rec__jw_str(&w, "relay", rec->relays[a->relay].name);
    tf_rec__jw_str(&w, "reason", a->reason);
    tf_rec__jw_close(&w, "}");
  }
  tf_rec__jw_close(&w, "]");
  tf_rec__jw_open(&w, "relays", "[");
  static const struct {
    unsigned flag;
    const char *name;
  } flags[] = {{TF_RELAY_PLANNED, "planned"},     {TF_RELAY_RUNNING, "running"},
               {TF_RELAY_READY, "ready"},         {TF_RELAY_DRAINING, "draining"},
               {TF_RELAY_PUBLISHED, "published"}, {TF_RELAY_WAITING, "waiting"},
               {TF_RELAY_UNCOUNTED, "uncounted"}};
  for (size_t i = 0; i < rec->relay_count; i++) {
    const tf_rec__relay *r = &rec->relays[i];
    tf_rec__jw_open(&w, NULL, "{");
    tf_rec__jw_str(&w, "name", r->name);
    for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
      tf_rec__jw_bool(&w, flags[k].name, (r->flags & flags[k].flag) != 0);
    tf_rec__jw_str(&w, "waitingFor", r->waiting);
    tf_rec__jw_str(&w, "configHash", r->config_hash);
    tf_rec__jw_int(&w, "cliPort", r->cli_port);
    tf_rec__jw_int(&w, "metricsPort", r->metrics_port);
    tf_rec__jw_open(&w, "uris", "[");
    for (size_t j = 0; j < r->uri_count; j++) tf_rec__jw_str(&w, NULL, r->uris[j]);
    tf_rec__jw_close(&w, "]");
    tf_rec__jw_close(&w, "}");
  }
  tf_rec__jw_close(&w, "]");
  tf_rec__jw_open(&w, "uris", "[");
  for (size_t i = 0; i < rec->uri_count; i++) tf_rec__jw_str(&w, NULL, rec->uris[i]);
  tf_rec__jw_close(&w, "]");
  tf_rec__jw_int(&w, "nextMs", rec->next_ms);
  tf_rec__jw_close(&w, "}");
  return tf_buf__detach(&b, out);
}

tf_err tf_reconcile_ice_servers_json(char **out, const tf_reconcile *rec)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(rec);
  tf_buf b;
  tf_buf__init(&b);
  tf_rec__jw w = {&b, 0, {0}};
  tf_rec__jw_open(&w, NULL, "[");
  for (size_t i = 0; i < rec->relay_count; i++) {
    const tf_rec__relay *r = &rec->relays[i];
    if (!(r->flags & TF_RELAY_PUBLISHED) || r->uri_count == 0) continue;
    tf_rec__jw_open(&w, NULL, "{");
    tf_rec__jw_open(&w, "urls", "[");
    for (size_t j = 0; j < r->uri_count; j++) tf_rec__jw_str(&w, NULL, r->uris[j]);
    tf_rec__jw_close(&w, "]");
    tf_rec__jw_close(&w, "}");
  }
  tf_rec__jw_close(&w, "]");
  return tf_buf__detach(&b, out);
}

/* ---- metrics ---- */

static tf_err tf_rec__family(tf_metrics *m, const char *name, tf_metric_type type, const char *help)
{
  int t = tf_metrics_family_type(m, name);
  if (t < 0) return tf_metrics_declare(m, name, type, help);
  if (t != (int)type) return tf_error__set(TF_EINVALID, "metrics: %s is declared with another type", name);
  return TF_OK;
}

tf_err tf_reconcile_metrics(tf_metrics *metrics, const tf_reconcile *rec)
{
  TF_ASSERT_ARG(metrics);
  TF_ASSERT_ARG(rec);
  static const struct {
    const char *name;
    tf_metric_type type;
    const char *help;
  } families[] = {
    {TF_METRIC_RELAY_PORTS_IN_USE, TF_METRIC_GAUGE, "Relay ports held by allocations (one per allocation)"},
    {TF_METRIC_RELAY_PORTS_TOTAL, TF_METRIC_GAUGE, "Relay ports the relay owns (addresses x ports in its range)"},
    {TF_METRIC_RELAY_DRAINING, TF_METRIC_GAUGE, "1 while the relay drains, else 0"},
    {TF_METRIC_RELAY_UNCOUNTED, TF_METRIC_GAUGE,
     "1 while the relay serves and passed its probe but its ports in use cannot be counted, else 0"},
    {TF_METRIC_RELAY_DRAIN_STARTED, TF_METRIC_GAUGE, "When the relay's drain began, Unix seconds (draining relays only)"},
    {TF_METRIC_PROBE_SUCCESS, TF_METRIC_GAUGE,
     "1 when the relay's last TURN Allocate probe since its start passed, else 0"},
    {TF_METRIC_PROBE_DURATION, TF_METRIC_GAUGE, "How long the relay's last probe took, seconds"},
    {TF_METRIC_ALLOCATION_FAILURES, TF_METRIC_COUNTER, "Allocate failures seen by the probes, by TURN error code"},
    {TF_METRIC_RELAY_COUNT_FAILURES, TF_METRIC_COUNTER,
     "Counts of the relay's allocations that could not be read (coturn CLI or the agent's /metrics)"},
    {TF_METRIC_POOL_CONDITION, TF_METRIC_GAUGE,
     "The pool's status conditions: 1 for the current status of each type, 0 for the others"},
    {TF_METRIC_POOL_DRAIN_TIMEOUT, TF_METRIC_GAUGE, "The pool's drainTimeout, seconds"},
  };
  tf_err rc = TF_OK;
  for (size_t i = 0; rc == TF_OK && i < sizeof(families) / sizeof(families[0]); i++)
    rc = tf_rec__family(metrics, families[i].name, families[i].type, families[i].help);
  static const char *const names[] = {"namespace", "pool", "relay", "code"};
  for (size_t i = 0; rc == TF_OK && i < rec->relay_count; i++) {
    const tf_rec__relay *r = &rec->relays[i];
    const char *values[4] = {rec->ns, rec->pool_name, r->name, NULL};
    int draining = r->has_obs && r->obs.draining;
    int probed = r->has_obs && r->obs.running && r->current_probe;
    if (r->has_obs && r->obs.allocations >= 0)
      rc = tf_metrics_add(metrics, TF_METRIC_RELAY_PORTS_IN_USE, names, values, 3, (double)r->obs.allocations);
    if (rc == TF_OK) rc = tf_metrics_add(metrics, TF_METRIC_RELAY_PORTS_TOTAL, names, values, 3, r->ports_total);
    if (rc == TF_OK) rc = tf_metrics_add(metrics, TF_METRIC_RELAY_DRAINING, names, values, 3, draining ? 1 : 0);
    if (rc == TF_OK)
      rc = tf_metrics_add(metrics, TF_METRIC_RELAY_UNCOUNTED, names, values, 3,
                          (r->flags & TF_RELAY_UNCOUNTED) ? 1 : 0);
    if (rc == TF_OK && r->has_obs)
      rc = tf_metrics_add(metrics, TF_METRIC_RELAY_COUNT_FAILURES, names, values, 3, (double)r->obs.count_failures);
    /* a timestamp, not an age: Prometheus takes time() - it, so a late scrape of this result does not lie */
    if (rc == TF_OK && draining)
      rc = tf_metrics_add(metrics, TF_METRIC_RELAY_DRAIN_STARTED, names, values, 3,
                          (double)r->obs.draining_since_ms / 1000.0);
    if (rc == TF_OK && probed)
      rc = tf_metrics_add(metrics, TF_METRIC_PROBE_SUCCESS, names, values, 3, r->obs.probe_ok ? 1 : 0);
    if (rc == TF_OK && probed && r->obs.probe_duration_ms >= 0)
      rc = tf_metrics_add(metrics, TF_METRIC_PROBE_DURATION, names, values, 3, (double)r->obs.probe_duration_ms / 1000.0);
    for (size_t k = 0; rc == TF_OK && r->has_obs && k < r->obs.failure_count; k++) {
      char code[8];
      snprintf(code, sizeof(code), "%d", r->obs.failure_codes[k]);
      values[3] = code;
      rc = tf_metrics_add(metrics, TF_METRIC_ALLOCATION_FAILURES, names, values, 4, (double)r->obs.failure_counts[k]);
    }
  }
  /* every status of every condition, 0 or 1 (a series that exists only while True cannot show it turn False);
   * not ReachableFromVantage, which this core does not know (tf_vantage_metrics()) */
  static const char *const pool_names[] = {"namespace", "pool", "type", "status"};
  static const char *const statuses[] = {"True", "False", "Unknown"};
  for (size_t i = 0; rc == TF_OK && i < sizeof(rec->conds) / sizeof(rec->conds[0]); i++) {
    const tf_condition *c = &rec->conds[i];
    if (c->type && strcmp(c->type, "ReachableFromVantage") == 0) continue;
    for (size_t k = 0; rc == TF_OK && c->type && k < 3; k++) {
      const char *values[4] = {rec->ns, rec->pool_name, c->type, statuses[k]};
      rc = tf_metrics_add(metrics, TF_METRIC_POOL_CONDITION, pool_names, values, 4,
                          c->status && strcmp(c->status, statuses[k]) == 0 ? 1 : 0);
    }
  }
  const char *pool_values[2] = {rec->ns, rec->pool_name};
  if (rc == TF_OK)
    rc = tf_metrics_add(metrics, TF_METRIC_POOL_DRAIN_TIMEOUT, pool_names, pool_values, 2,
                        (double)rec->drain_timeout_ms / 1000.0);
  return rc;
}
