/* The fleet engine: per-relay books between reconciles, the probe, count and
 * drain schedules, action acknowledgements and the shutdown, for any driver.
 * All times in the books are the driver's monotonic clock; reconcile gets
 * them translated onto the wall clock of the step (wall - (now - t)), so every
 * interval it measures is a monotonic one. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define TF_ENG__MAX_CODES 16

typedef struct tf_eng__relay {
  char *name, *id, *identity, *config_hash, *probe_message;
  uint16_t cli_port, metrics_port;
  tf_port_range ports;
  char **uris; /* per address, per listener */
  size_t uri_count;
  char **addresses;
  size_t address_count;
  int observed; /* a process was started (or tried) or reported: it goes into the observations */
  int running;
  int64_t started_ms, exited_ms, restarts;
  int draining, drain_sent;
  int64_t draining_since_ms, drain_due_ms, drain_sent_ms;
  int64_t allocations, count_ms, next_probe_ms, next_count_ms;
  int64_t count_failures; /* over the relay's life in this engine: a counter */
  int64_t count_misses;   /* count rounds in a row without a count, since the last good one or its start */
  int64_t probe_ms;
  int64_t probe_sent_ms, probe_duration_ms; /* when the probe out was handed out; the last one's length, -1: unknown */
  int probe_ok, probe_error_code, saw_508;
  int held_back; /* not served by its runtime yet (tf_engine_relay_facts.held_back) */
  int waiting;   /* running, but not started by its runtime yet (tf_engine_relay_facts.waiting) */
  int64_t restart_due_ms; /* a restart begun: out of the URIs since, the RESTART goes at this time; 0 none */
  int restart_asked;      /* the last reconcile asked for its restart */
  int fail_codes[TF_ENG__MAX_CODES];
  int64_t fail_counts[TF_ENG__MAX_CODES];
  size_t fail_count;
  uint64_t life_out, drain_out, probe_out, count_out; /* ids of the actions out; 0: none */
  tf_engine_action_kind life_kind;
  /* what a START/RESTART out will run, applied when it is reported */
  char *next_identity, *next_hash;
  uint16_t next_cli_port, next_metrics_port;
  tf_port_range next_ports;
  char **next_uris, **next_addresses;
  size_t next_uri_count, next_address_count;
} tf_eng__relay;

typedef struct tf_eng__action {
  tf_engine_action pub;
  char *relay, *relay_id, *config, *config_hash, *address, *cli_password; /* config, cli_password: secret */
  char **probe_uris, **probe_addresses;
} tf_eng__action;

typedef struct tf_eng__view {
  tf_engine_relay pub;
  char *name, *id, *address, *probe_message;
} tf_eng__view;

typedef struct tf_eng__claim {
  char *pool, *identity; /* identity NULL: a CLI claim, pool the node's name and ports[0] the port */
  uint16_t *ports;
  size_t port_count;
} tf_eng__claim;

struct tf_engine {
  tf_engine_options opts;
  tf_coturn_options coturn; /* deep copy: secrets and the CLI password wiped on free */
  char **secrets;
  char *log_dir;
  tf_pool *pool, *zero_pool; /* zero_pool: the shutdown's */
  tf_nodes *nodes;
  uint32_t features;
  tf_eng__relay *relays;
  size_t relay_count;
  uint64_t next_id;
  int64_t now_ms, wall_ms; /* of the last step */
  int stepped, dirty, shutting_down;
  int64_t shutdown_deadline_ms;
  char *status_json; /* the reconcile status of the last step, fed back for lastTransitionTime */
  char *refusal;     /* why the last input change was refused; NULL after one is accepted */
  tf_reconcile *rec;
  tf_eng__action *actions;
  size_t action_count, action_cap;
  tf_eng__view *views;
  size_t view_count;
  int64_t next_ms;
  tf_eng__claim *claims; /* other pools' relays (tf_engine_add_claim()) */
  size_t claim_count, claim_cap;
};

/* ---- small helpers ---- */

static void tf_eng__strv_free(char **v, size_t n)
{
  for (size_t i = 0; v && i < n; i++) free(v[i]);
  free(v);
}

static int tf_eng__set_str(char **dst, const char *src)
{
  char *copy = src ? tf_strdup__(src) : NULL;
  if (src && !copy) return -1;
  free(*dst);
  *dst = copy;
  return 0;
}

/* ---- options ---- */

tf_err tf_engine_options_init(tf_engine_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_ENGINE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_engine_options version (1-%d)", version,
                         TF_ENGINE_OPTIONS_VERSION);
  tf_engine_options init = TF_ENGINE_OPTIONS_INIT;
  *opts = init;
  opts->version = version;
  return TF_OK;
}

/* Read the caller's options field by field up to its version (a shorter, older struct is never read past). */
static tf_err tf_eng__read_options(tf_engine_options *dst, const tf_engine_options *src)
{
  if (!src) return tf_error__set(TF_EINVALID, "opts: required (render options with the shared secrets)");
  if (src->version == 0 || src->version > TF_ENGINE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "opts.version: %u is not a tf_engine_options version (1-%d)", src->version,
                         TF_ENGINE_OPTIONS_VERSION);
  tf_engine_options o = TF_ENGINE_OPTIONS_INIT;
  if (src->version >= 1) {
    o.coturn = src->coturn;
    o.log_dir = src->log_dir;
    o.probe_interval_ms = src->probe_interval_ms;
    o.probe_first_delay_ms = src->probe_first_delay_ms;
    o.probe_timeout_ms = src->probe_timeout_ms;
    o.count_interval_ms = src->count_interval_ms;
    o.count_first_delay_ms = src->count_first_delay_ms;
    o.count_timeout_ms = src->count_timeout_ms;
    o.publish_delay_ms = src->publish_delay_ms;
    o.stop_grace_ms = src->stop_grace_ms;
    o.pressure_threshold = src->pressure_threshold;
    o.backoff_initial_ms = src->backoff_initial_ms;
    o.backoff_max_ms = src->backoff_max_ms;
  }
  if (!o.coturn) return tf_error__set(TF_EINVALID, "opts.coturn: required (render options with the shared secrets)");
  if (o.probe_interval_ms < 1) return tf_error__set(TF_EINVALID, "opts.probe_interval_ms: must be >= 1");
  if (o.probe_first_delay_ms < 0) return tf_error__set(TF_EINVALID, "opts.probe_first_delay_ms: must be >= 0");
  if (o.probe_timeout_ms < 0) return tf_error__set(TF_EINVALID, "opts.probe_timeout_ms: must be >= 0");
  if (o.count_interval_ms < 0) return tf_error__set(TF_EINVALID, "opts.count_interval_ms: must be >= 0");
  if (o.count_first_delay_ms < 0) return tf_error__set(TF_EINVALID, "opts.count_first_delay_ms: must be >= 0");
  if (o.count_timeout_ms < 1) return tf_error__set(TF_EINVALID, "opts.count_timeout_ms: must be >= 1");
  if (o.publish_delay_ms < 0) return tf_error__set(TF_EINVALID, "opts.publish_delay_ms: must be >= 0");
  if (o.stop_grace_ms < 0) return tf_error__set(TF_EINVALID, "opts.stop_grace_ms: must be >= 0");
  if (!o.count_interval_ms) o.count_interval_ms = o.probe_interval_ms;
  if (!o.probe_timeout_ms)
    o.probe_timeout_ms = o.probe_interval_ms < 1000 ? 1000 : o.probe_interval_ms > 4000 ? 4000 : o.probe_interval_ms;
  *dst = o;
  return TF_OK;
}

static void tf_eng__coturn_clear(tf_engine *e)
{
  for (size_t i = 0; e->secrets && i < e->coturn.secrets_count; i++) tf_secret_free(e->secrets[i]);
  free(e->secrets);
  e->secrets = NULL;
  tf_secret_free((char *)e->coturn.cli_password);
  free((char *)e->coturn.coturn_version);
  free((char *)e->coturn.state_dir);
  free((char *)e->coturn.log_file);
  free((char *)e->coturn.cert_file);
  free((char *)e->coturn.key_file);
  free((char *)e->coturn.cert_digest);
  memset(&e->coturn, 0, sizeof(e->coturn));
}

/* A deep copy of the caller's render options, read up to its version. */
static tf_err tf_eng__coturn_copy(tf_engine *e, const tf_coturn_options *src)
{
  if (!src) return tf_error__set(TF_EINVALID, "coturn: required (render options with the shared secrets)");
  if (src->version == 0 || src->version > TF_COTURN_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "coturn.version: %u is not a tf_coturn_options version (1-%d)", src->version,
                         TF_COTURN_OPTIONS_VERSION);
  if (!src->secrets || !src->secrets_count)
    return tf_error__set(TF_EINVALID, "coturn.secrets: at least one shared secret is required");
  tf_engine copy;
  memset(&copy, 0, sizeof(copy));
  tf_coturn_options init = TF_COTURN_OPTIONS_INIT;
  copy.coturn = init;
  int ok = (copy.secrets = calloc(src->secrets_count, sizeof(char *))) != NULL;
  for (size_t i = 0; ok && i < src->secrets_count; i++) {
    if (!src->secrets[i]) {
      tf_eng__coturn_clear(&copy);
      return tf_error__set(TF_EINVALID, "coturn.secrets[%zu]: required", i);
    }
    ok = (copy.secrets[i] = tf_strdup__(src->secrets[i])) != NULL;
    copy.coturn.secrets_count = i + 1;
  }
  /* version 1 fields (every version has them) */
#define TF_ENG__DUP(field) \
  if (ok && src->field) ok = (copy.coturn.field = tf_strdup__(src->field)) != NULL
  TF_ENG__DUP(coturn_version);
  TF_ENG__DUP(state_dir);
  TF_ENG__DUP(log_file);
  TF_ENG__DUP(cli_password);
  TF_ENG__DUP(cert_file);
  TF_ENG__DUP(key_file);
#undef TF_ENG__DUP
  copy.coturn.cli_port = src->cli_port;
  copy.coturn.prometheus_port = src->prometheus_port;
  copy.coturn.allow_loopback_peers = src->allow_loopback_peers;
  if (src->version >= 2) copy.coturn.prometheus = src->prometheus;
  if (ok && src->version >= 3 && src->cert_digest) ok = (copy.coturn.cert_digest = tf_strdup__(src->cert_digest)) != NULL;
  copy.coturn.version = src->version; /* the renderer keeps the caller's version's rules */
  copy.coturn.secrets = (const char *const *)copy.secrets;
  if (!ok) {
    tf_eng__coturn_clear(&copy);
    return tf_error__nomem();
  }
  tf_eng__coturn_clear(e);
  e->coturn = copy.coturn;
  e->secrets = copy.secrets;
  return TF_OK;
}

/* ---- books ---- */

static void tf_eng__next_clear(tf_eng__relay *r)
{
  free(r->next_identity);
  free(r->next_hash);
  tf_eng__strv_free(r->next_uris, r->next_uri_count);
  tf_eng__strv_free(r->next_addresses, r->next_address_count);
  r->next_identity = r->next_hash = NULL;
  r->next_uris = r->next_addresses = NULL;
  r->next_uri_count = r->next_address_count = 0;
}

static void tf_eng__relay_clear(tf_eng__relay *r)
{
  free(r->name);
  free(r->id);
  free(r->identity);
  free(r->config_hash);
  free(r->probe_message);
  tf_eng__strv_free(r->uris, r->uri_count);
  tf_eng__strv_free(r->addresses, r->address_count);
  tf_eng__next_clear(r);
  memset(r, 0, sizeof(*r));
}

static tf_eng__relay *tf_eng__find(tf_engine *e, const char *name)
{
  for (size_t i = 0; i < e->relay_count; i++)
    if (strcmp(e->relays[i].name, name) == 0) return &e->relays[i];
  return NULL;
}

static tf_eng__relay *tf_eng__add(tf_engine *e, const char *name)
{
  tf_eng__relay *grown = realloc(e->relays, (e->relay_count + 1) * sizeof(*grown));
  if (!grown) return NULL;
  e->relays = grown;
  tf_eng__relay *r = &e->relays[e->relay_count];
  memset(r, 0, sizeof(*r));
  if (!(r->name = tf_strdup__(name))) return NULL;
  r->allocations = -1;
  r->probe_duration_ms = -1;
  e->relay_count++;
  return r;
}

static void tf_eng__forget(tf_engine *e, tf_eng__relay *r)
{
  size_t i = (size_t)(r - e->relays);
  tf_eng__relay_clear(r);
  memmove(&e->relays[i], &e->relays[i + 1], (e->relay_count - i - 1) * sizeof(*r));
  e->relay_count--;
}

/* A new process: everything learnt about the old one is void. */
static void tf_eng__fresh_process(const tf_engine *e, tf_eng__relay *r, int64_t started_ms)
{
  r->running = 1;
  r->observed = 1;
  r->started_ms = started_ms;
  r->exited_ms = 0;
  r->draining = r->drain_sent = 0;
  r->draining_since_ms = r->drain_due_ms = r->drain_sent_ms = 0;
  r->allocations = -1;
  r->count_ms = 0;
  r->count_misses = 0;
  r->probe_ms = 0;
  r->probe_duration_ms = -1;
  r->probe_ok = r->probe_error_code = r->saw_508 = 0;
  free(r->probe_message);
  r->probe_message = NULL;
  r->next_probe_ms = started_ms + e->opts.probe_first_delay_ms;
  r->next_count_ms = started_ms + e->opts.count_first_delay_ms;
}

static void tf_eng__gone(tf_eng__relay *r, int64_t when)
{
  r->running = 0;
  r->observed = 1;
  r->exited_ms = when;
  r->allocations = -1;
}

/* ---- lifecycle ---- */

static void tf_eng__actions_clear(tf_engine *e)
{
  for (size_t i = 0; i < e->action_count; i++) {
    tf_eng__action *a = &e->actions[i];
    free(a->relay);
    free(a->relay_id);
    tf_secret_free(a->config);
    tf_secret_free(a->cli_password);
    free(a->config_hash);
    free(a->address);
    tf_eng__strv_free(a->probe_uris, a->pub.probe_count);
    tf_eng__strv_free(a->probe_addresses, a->pub.probe_count);
  }
  e->action_count = 0;
}

static void tf_eng__views_clear(tf_engine *e)
{
  for (size_t i = 0; i < e->view_count; i++) {
    free(e->views[i].name);
    free(e->views[i].id);
    free(e->views[i].address);
    free(e->views[i].probe_message);
  }
  free(e->views);
  e->views = NULL;
  e->view_count = 0;
}

void tf_engine_free(tf_engine *e)
{
  if (!e) return;
  tf_eng__actions_clear(e);
  free(e->actions);
  tf_eng__views_clear(e);
  for (size_t i = 0; i < e->relay_count; i++) tf_eng__relay_clear(&e->relays[i]);
  free(e->relays);
  tf_reconcile_free(e->rec);
  (void)tf_engine_clear_claims(e);
  free(e->status_json);
  free(e->refusal);
  tf_eng__coturn_clear(e);
  free(e->log_dir);
  tf_pool_free(e->pool);
  tf_pool_free(e->zero_pool);
  tf_nodes_free(e->nodes);
  free(e);
}

static uint32_t tf_eng__features(const tf_pool *pool, const tf_coturn_options *coturn)
{
  uint32_t v = 0;
  const char *text = coturn->coturn_version ? coturn->coturn_version : tf_pool_coturn_version(pool);
  return tf_coturn_version_parse(&v, text) == 0 ? tf_coturn_features(v) : 0;
}

/* The reconcile time of a monotonic instant: the step's wall clock minus how long ago it was. */
static int64_t tf_eng__wall(const tf_engine *e, int64_t t)
{
  if (t <= 0) return 0;
  int64_t w = e->wall_ms - (e->now_ms - t);
  return w > 0 ? w : 1;
}

static tf_err tf_eng__observed(tf_observed **out, const tf_engine *e)
{
  tf_observed *obs = NULL;
  tf_err rc = tf_observed_new(&obs);
  for (size_t i = 0; rc == TF_OK && i < e->relay_count; i++) {
    const tf_eng__relay *r = &e->relays[i];
    if (!r->observed) continue;
    tf_relay_observation o = TF_RELAY_OBSERVATION_INIT;
    o.name = r->name;
    o.identity = r->identity;
    o.config_hash = r->config_hash;
    o.cli_port = r->cli_port;
    o.running = r->running;
    o.started_ms = tf_eng__wall(e, r->started_ms);
    o.exited_ms = tf_eng__wall(e, r->exited_ms);
    o.restarts = r->restarts;
    o.draining = r->draining;
    o.draining_since_ms = tf_eng__wall(e, r->draining_since_ms);
    o.allocations = r->allocations;
    o.probe_ms = tf_eng__wall(e, r->probe_ms);
    o.probe_ok = r->probe_ok;
    o.probe_error_code = r->probe_error_code;
    o.probe_message = r->probe_message;
    o.saw_508 = r->saw_508;
    o.failure_codes = r->fail_codes;
    o.failure_counts = r->fail_counts;
    o.failure_count = r->fail_count;
    o.uris = (const char *const *)r->uris;
    o.uri_count = r->uri_count;
    o.held_back = r->held_back || r->restart_due_ms; /* a restart begun: unpublished until it goes */
    o.probe_duration_ms = r->probe_duration_ms;
    o.count_failures = r->count_failures;
    o.count_misses = r->count_misses;
    rc = tf_observed_add_relay(obs, &o);
  }
  if (rc == TF_OK && e->status_json) (void)tf_observed_set_status(obs, e->status_json, strlen(e->status_json));
  for (size_t i = 0; rc == TF_OK && i < e->claim_count; i++)
    rc = e->claims[i].identity ? tf_observed_add_claim(obs, e->claims[i].pool, e->claims[i].identity,
                                                       e->claims[i].ports, e->claims[i].port_count)
                               : tf_observed_add_cli_claim(obs, e->claims[i].pool, e->claims[i].ports[0]);
  if (rc < 0) {
    tf_observed_free(obs);
    return rc;
  }
  *out = obs;
  return TF_OK;
}

static tf_err tf_eng__reconcile(tf_reconcile **out, const tf_engine *e, const tf_pool *pool, const tf_nodes *nodes,
                                const tf_coturn_options *coturn)
{
  tf_observed *obs = NULL;
  tf_err rc = tf_eng__observed(&obs, e);
  if (rc < 0) return rc;
  tf_reconcile_options ro = TF_RECONCILE_OPTIONS_INIT;
  ro.coturn = coturn;
  ro.log_dir = e->log_dir;
  ro.pressure_threshold = e->opts.pressure_threshold;
  ro.backoff_initial_ms = e->opts.backoff_initial_ms;
  ro.backoff_max_ms = e->opts.backoff_max_ms;
  ro.cli_password_per_relay = 1; /* a password that reaches a wrong listener opens no other relay */
  rc = tf_reconcile_new(out, pool, nodes, obs, e->stepped ? e->wall_ms : 1, &ro);
  tf_observed_free(obs);
  return rc;
}

tf_err tf_engine_new(tf_engine **out, tf_pool *pool, tf_nodes *nodes, const tf_engine_options *opts)
{
  tf_engine *e = NULL;
  tf_err rc = TF_OK;
  if (!out || !pool || !nodes) rc = tf_error__set(TF_EINVALID, "invalid argument: out, pool and nodes are required");
  if (out) *out = NULL;
  if (rc == TF_OK && !(e = calloc(1, sizeof(*e)))) rc = tf_error__nomem();
  if (rc == TF_OK) {
    e->pool = pool;
    e->nodes = nodes;
    pool = NULL;
    nodes = NULL;
    e->next_id = 1;
    rc = tf_eng__read_options(&e->opts, opts);
  }
  if (rc == TF_OK) rc = tf_eng__coturn_copy(e, e->opts.coturn);
  if (rc == TF_OK && e->opts.log_dir && !(e->log_dir = tf_strdup__(e->opts.log_dir))) rc = tf_error__nomem();
  if (rc == TF_OK) {
    e->opts.coturn = NULL;
    e->opts.log_dir = NULL;
    e->features = tf_eng__features(e->pool, &e->coturn);
    /* refuse at once what no step could do: an invalid pool, options the renderer refuses */
    tf_reconcile *trial = NULL;
    rc = tf_eng__reconcile(&trial, e, e->pool, e->nodes, &e->coturn);
    tf_reconcile_free(trial);
  }
  if (rc < 0) {
    tf_pool_free(pool);
    tf_nodes_free(nodes);
    tf_engine_free(e);
    return rc;
  }
  *out = e;
  return TF_OK;
}

/* Try an input change with the current books: refused as a whole when reconcile refuses it. */
static tf_err tf_eng__try(tf_engine *e, const tf_pool *pool, const tf_nodes *nodes, const tf_coturn_options *coturn)
{
  if (e->shutting_down) return tf_error__set(TF_EINVALID, "the engine is shutting down: no input changes");
  tf_reconcile *trial = NULL;
  tf_err rc = tf_eng__reconcile(&trial, e, pool, nodes, coturn);
  tf_reconcile_free(trial);
  /* the refusal stays in the status until an input change is accepted */
  free(e->refusal);
  e->refusal = rc < 0 ? tf_strdup__(tf_error_last()->message) : NULL;
  return rc;
}

tf_err tf_engine_set_pool(tf_engine *e, tf_pool *pool)
{
  tf_err rc = e && pool ? tf_eng__try(e, pool, e->nodes, &e->coturn) : tf_error__set(TF_EINVALID, "invalid argument");
  if (rc < 0) {
    tf_pool_free(pool);
    return rc;
  }
  tf_pool_free(e->pool);
  e->pool = pool;
  e->features = tf_eng__features(pool, &e->coturn);
  e->dirty = 1;
  return TF_OK;
}

tf_err tf_engine_set_nodes(tf_engine *e, tf_nodes *nodes)
{
  tf_err rc = e && nodes ? tf_eng__try(e, e->pool, nodes, &e->coturn) : tf_error__set(TF_EINVALID, "invalid argument");
  if (rc < 0) {
    tf_nodes_free(nodes);
    return rc;
  }
  tf_nodes_free(e->nodes);
  e->nodes = nodes;
  e->dirty = 1;
  return TF_OK;
}

tf_err tf_engine_set_coturn_options(tf_engine *e, const tf_coturn_options *coturn)
{
  TF_ASSERT_ARG(e);
  tf_engine copy;
  memset(&copy, 0, sizeof(copy));
  tf_err rc = tf_eng__coturn_copy(&copy, coturn);
  if (rc == TF_OK) rc = tf_eng__try(e, e->pool, e->nodes, &copy.coturn);
  if (rc < 0) {
    tf_eng__coturn_clear(&copy);
    return rc;
  }
  /* new secrets: every relay is probed at once with the one every relay takes (the previous while it is
   * rendered): a relay that takes no valid secret any more leaves the URIs on that result, the others stay */
  int rotated = copy.coturn.secrets_count != e->coturn.secrets_count;
  for (size_t i = 0; !rotated && i < copy.coturn.secrets_count; i++)
    rotated = strcmp(copy.coturn.secrets[i], e->coturn.secrets[i]) != 0;
  for (size_t i = 0; rotated && i < e->relay_count; i++)
    if (e->relays[i].running && !e->relays[i].probe_out) e->relays[i].next_probe_ms = 0;
  tf_eng__coturn_clear(e);
  e->coturn = copy.coturn;
  e->secrets = copy.secrets;
  e->features = tf_eng__features(e->pool, &e->coturn);
  e->dirty = 1;
  return TF_OK;
}

tf_err tf_engine_set_status(tf_engine *e, const char *json, size_t len)
{
  TF_ASSERT_ARG(e);
  TF_ASSERT_ARG(json);
  tf_observed *obs = NULL;
  tf_err rc = tf_observed_new(&obs);
  if (rc == TF_OK) rc = tf_observed_set_status(obs, json, len); /* the one reader of a status */
  tf_observed_free(obs);
  if (rc < 0) return rc;
  char *copy = tf_strndup__(json, len);
  if (!copy) return tf_error__nomem();
  free(e->status_json);
  e->status_json = copy;
  return TF_OK;
}

/* ---- facts ---- */

tf_err tf_engine_relay_facts_init(tf_engine_relay_facts *facts, unsigned int version)
{
  TF_ASSERT_ARG(facts);
  if (version == 0 || version > TF_ENGINE_RELAY_FACTS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_engine_relay_facts version (1-%d)", version,
                         TF_ENGINE_RELAY_FACTS_VERSION);
  tf_engine_relay_facts init = TF_ENGINE_RELAY_FACTS_INIT;
  size_t size = version == 1   ? offsetof(tf_engine_relay_facts, draining)
                : version == 2 ? offsetof(tf_engine_relay_facts, waiting)
                               : sizeof(init);
  memcpy(facts, &init, size); /* the caller's */
  facts->version = version;
  return TF_OK;
}

/* The caller's facts field by field up to its version, the rest at this version's defaults. */
static void tf_eng__read_facts(tf_engine_relay_facts *f, const tf_engine_relay_facts *src)
{
  tf_engine_relay_facts init = TF_ENGINE_RELAY_FACTS_INIT;
  *f = init;
  f->name = src->name;
  f->id = src->id;
  f->running = src->running;
  f->started_ms = src->started_ms;
  f->exited_ms = src->exited_ms;
  f->identity = src->identity;
  f->config_hash = src->config_hash;
  f->cli_port = src->cli_port;
  f->restarts = src->restarts;
  if (src->version >= 2) {
    f->draining = src->draining;
    f->draining_since_ms = src->draining_since_ms;
    f->probe_ok = src->probe_ok;
    f->probe_error_code = src->probe_error_code;
    f->probe_message = src->probe_message;
    f->held_back = src->held_back;
  }
  if (src->version >= 3) f->waiting = src->waiting;
}

tf_err tf_engine_observe(tf_engine *e, const tf_engine_relay_facts *facts, int64_t now_ms)
{
  TF_ASSERT_ARG(e);
  TF_ASSERT_ARG(facts);
  if (facts->version == 0 || facts->version > TF_ENGINE_RELAY_FACTS_VERSION)
    return tf_error__set(TF_EINVALID, "facts.version: %u is not a tf_engine_relay_facts version (1-%d)",
                         facts->version, TF_ENGINE_RELAY_FACTS_VERSION);
  tf_engine_relay_facts f;
  tf_eng__read_facts(&f, facts);
  if (!f.name || !*f.name) return tf_error__set(TF_EINVALID, "facts.name: required");
  if (now_ms < 0) return tf_error__set(TF_EINVALID, "now_ms: must be >= 0");
  if (f.probe_ok < -1 || f.probe_ok > 1) return tf_error__set(TF_EINVALID, "facts.probe_ok: must be -1, 0 or 1");
  if (f.draining_since_ms < 0 || f.draining_since_ms > now_ms)
    return tf_error__set(TF_EINVALID, "facts.draining_since_ms: must be between 0 and now_ms");
  tf_eng__relay *r = tf_eng__find(e, f.name);
  if (!r || !r->observed) {
    if (!f.identity) return tf_error__set(TF_EINVALID, "facts.identity: required for an unknown relay");
    if (!r && !(r = tf_eng__add(e, f.name))) return tf_error__nomem();
  }
  if ((f.identity && tf_eng__set_str(&r->identity, f.identity) < 0) ||
      (f.config_hash && tf_eng__set_str(&r->config_hash, f.config_hash) < 0) ||
      (f.id && tf_eng__set_str(&r->id, f.id) < 0))
    return tf_error__nomem();
  if (f.cli_port) r->cli_port = f.cli_port;
  if (f.restarts >= 0) r->restarts = f.restarts;
  /* a process began: a new one, or the one a waiting pod stood for */
  if (f.running && (!r->running || (r->waiting && !f.waiting)))
    tf_eng__fresh_process(e, r, f.started_ms ? f.started_ms : now_ms);
  else if (f.running && f.started_ms) r->started_ms = f.started_ms;
  else if (!f.running && (r->running || !r->observed)) tf_eng__gone(r, f.exited_ms ? f.exited_ms : now_ms);
  r->waiting = f.running && f.waiting;
  r->observed = 1;
  r->held_back = f.held_back ? 1 : 0;
  if (f.draining && !r->draining) {
    /* its runtime drains it already: coturn was (or is being) told, so no DRAIN of ours follows */
    int64_t since = f.draining_since_ms > 0 ? f.draining_since_ms : now_ms;
    if (since < 1) since = 1;
    r->draining = r->drain_sent = 1;
    r->draining_since_ms = r->drain_due_ms = r->drain_sent_ms = since;
  }
  if (f.probe_ok >= 0 && r->running && !r->probe_ms && !r->probe_out) {
    /* what the runtime recorded of its last probe stands until the engine's own first probe */
    if (tf_eng__set_str(&r->probe_message, f.probe_message) < 0) return tf_error__nomem();
    r->probe_ms = now_ms > r->started_ms ? now_ms : r->started_ms;
    if (r->probe_ms < 1) r->probe_ms = 1;
    r->probe_ok = f.probe_ok;
    r->probe_error_code = f.probe_ok ? 0 : f.probe_error_code;
    r->saw_508 = !f.probe_ok && f.probe_error_code == 508;
  }
  e->dirty = 1;
  return TF_OK;
}

tf_err tf_engine_clear_claims(tf_engine *e)
{
  TF_ASSERT_ARG(e);
  for (size_t i = 0; i < e->claim_count; i++) {
    free(e->claims[i].pool);
    free(e->claims[i].identity);
    free(e->claims[i].ports);
  }
  free(e->claims);
  e->claims = NULL;
  e->claim_count = e->claim_cap = 0;
  e->dirty = 1;
  return TF_OK;
}

/* Store a claim checked already (@p identity NULL: a CLI claim, @p pool its node). */
static tf_err tf_eng__keep_claim(tf_engine *e, const char *pool, const char *identity, const uint16_t *ports, size_t n)
{
  if (e->claim_count == e->claim_cap) { /* doubled: a thousand claims on a busy node */
    size_t cap = e->claim_cap ? 2 * e->claim_cap : 16;
    tf_eng__claim *grown = realloc(e->claims, cap * sizeof(*grown));
    if (!grown) return tf_error__nomem();
    e->claims = grown;
    e->claim_cap = cap;
  }
  tf_eng__claim *c = &e->claims[e->claim_count];
  memset(c, 0, sizeof(*c));
  c->pool = tf_strdup__(pool);
  c->identity = identity ? tf_strdup__(identity) : NULL;
  c->ports = n ? malloc(n * sizeof(uint16_t)) : NULL;
  if (!c->pool || (identity && !c->identity) || (n && !c->ports)) {
    free(c->pool);
    free(c->identity);
    free(c->ports);
    return tf_error__nomem();
  }
  if (n) memcpy(c->ports, ports, n * sizeof(uint16_t));
  c->port_count = n;
  e->claim_count++;
  e->dirty = 1;
  return TF_OK;
}

tf_err tf_engine_add_claim(tf_engine *e, const char *pool, const char *identity, const uint16_t *listener_ports,
                           size_t listener_ports_count)
{
  TF_ASSERT_ARG(e);
  /* checked now, as the next reconcile would, so a bad claim is refused here and never stored */
  tf_observed *trial = NULL;
  tf_err rc = tf_observed_new(&trial);
  if (rc == TF_OK) rc = tf_observed_add_claim(trial, pool, identity, listener_ports, listener_ports_count);
  tf_observed_free(trial);
  if (rc < 0) return rc;
  return tf_eng__keep_claim(e, pool, identity, listener_ports, listener_ports_count);
}

tf_err tf_engine_add_cli_claim(tf_engine *e, const char *node, uint16_t port)
{
  TF_ASSERT_ARG(e);
  tf_observed *trial = NULL;
  tf_err rc = tf_observed_new(&trial);
  if (rc == TF_OK) rc = tf_observed_add_cli_claim(trial, node, port);
  tf_observed_free(trial);
  if (rc < 0) return rc;
  return tf_eng__keep_claim(e, node, NULL, &port, 1);
}

/* ---- the step ---- */

static tf_eng__action *tf_eng__push(tf_engine *e, tf_engine_action_kind kind, const tf_eng__relay *r,
                                    const char *reason)
{
  if (e->action_count == e->action_cap) {
    size_t cap = e->action_cap ? e->action_cap * 2 : 8;
    tf_eng__action *grown = realloc(e->actions, cap * sizeof(*grown));
    if (!grown) return NULL;
    e->actions = grown;
    e->action_cap = cap;
  }
  tf_eng__action *a = &e->actions[e->action_count];
  memset(a, 0, sizeof(*a));
  a->relay = tf_strdup__(r->name);
  a->relay_id = r->id ? tf_strdup__(r->id) : NULL;
  if (!a->relay || (r->id && !a->relay_id)) {
    free(a->relay);
    free(a->relay_id);
    return NULL;
  }
  e->action_count++;
  a->pub.version = TF_ENGINE_ACTION_VERSION;
  a->pub.id = e->next_id++;
  a->pub.kind = kind;
  a->pub.reason = reason;
  a->pub.ports = r->ports;
  a->pub.cli_port = r->cli_port;
  a->pub.metrics_port = r->metrics_port;
  return a;
}

/* Point the action's public fields at its own copies. */
static void tf_eng__seal(tf_eng__action *a)
{
  a->pub.relay = a->relay;
  a->pub.relay_id = a->relay_id;
  a->pub.config = a->config;
  a->pub.config_hash = a->config_hash;
  a->pub.address = a->address ? a->address : "";
  a->pub.probe_uris = (const char *const *)a->probe_uris;
  a->pub.probe_addresses = (const char *const *)a->probe_addresses;
  a->pub.cli_password = a->cli_password;
}

/* Planned relay @p i's URIs and address texts (copies). */
static tf_err tf_eng__planned_strings(const tf_reconcile *rec, size_t i, const tf_relay *planned, char ***uris,
                                      size_t *nu, char ***addrs, size_t *na)
{
  *nu = tf_reconcile_relay_uri_count(rec, i);
  *na = tf_relay_address_count(planned);
  *uris = calloc(*nu + 1, sizeof(char *));
  *addrs = calloc(*na + 1, sizeof(char *));
  int ok = *uris && *addrs;
  for (size_t j = 0; ok && j < *nu; j++) ok = ((*uris)[j] = tf_strdup__(tf_reconcile_relay_uri(rec, i, j))) != NULL;
  for (size_t j = 0; ok && j < *na; j++) {
    tf_addr a;
    char text[TF_ADDR_STRLEN];
    ok = tf_relay_address(&a, planned, j) == 0 && tf_addr_format(text, sizeof(text), &a) == 0 &&
         ((*addrs)[j] = tf_strdup__(text)) != NULL;
  }
  if (ok) return TF_OK;
  tf_eng__strv_free(*uris, *nu);
  tf_eng__strv_free(*addrs, *na);
  *uris = *addrs = NULL;
  *nu = *na = 0;
  return tf_error__nomem();
}

/* START/RESTART of reconcile relay @p i: what it will run goes into the books when reported. */
static tf_err tf_eng__start(tf_engine *e, tf_eng__relay *r, size_t i, tf_engine_action_kind kind, const char *reason)
{
  const tf_reconcile *rec = e->rec;
  const tf_relay *planned = tf_plan_find(tf_reconcile_plan(rec), r->name);
  if (!planned || !tf_reconcile_relay_config(rec, i))
    return tf_error__set(TF_EINVALID, "relays.%s: no rendered config to start", r->name);
  tf_eng__next_clear(r);
  if (tf_eng__planned_strings(rec, i, planned, &r->next_uris, &r->next_uri_count, &r->next_addresses,
                              &r->next_address_count) < 0)
    return tf_error__nomem();
  size_t na = r->next_address_count;
  r->next_identity = tf_strdup__(tf_relay_identity(planned));
  r->next_hash = tf_strdup__(tf_reconcile_relay_config_hash(rec, i));
  int ok = r->next_identity && r->next_hash;
  r->next_cli_port = tf_reconcile_relay_cli_port(rec, i);
  r->next_metrics_port = tf_reconcile_relay_metrics_port(rec, i);
  r->next_ports = tf_relay_port_range(planned);
  tf_eng__action *a = ok ? tf_eng__push(e, kind, r, reason) : NULL;
  if (!a) return tf_error__nomem();
  a->config = tf_strdup__(tf_reconcile_relay_config(rec, i));
  a->config_hash = tf_strdup__(r->next_hash);
  a->address = na ? tf_strdup__(r->next_addresses[0]) : NULL;
  a->pub.ports = r->next_ports;
  a->pub.cli_port = r->next_cli_port;
  a->pub.metrics_port = r->next_metrics_port;
  if (!a->config || !a->config_hash || (na && !a->address)) return tf_error__nomem();
  r->life_out = a->pub.id;
  r->life_kind = kind;
  if (kind == TF_ENGINE_RESTART) r->probe_ok = 0; /* no longer ready: no second restart meanwhile */
  tf_eng__seal(a);
  return TF_OK;
}

/* A restart out, or begun (waiting for the publication delay), for a relay other than @p r. */
static int tf_eng__restart_out(const tf_engine *e, const tf_eng__relay *r)
{
  for (size_t i = 0; i < e->relay_count; i++)
    if (&e->relays[i] != r && ((e->relays[i].life_out && e->relays[i].life_kind == TF_ENGINE_RESTART) ||
                               e->relays[i].restart_due_ms))
      return 1;
  return 0;
}

/* A relay the driver reported (an operator after its restart) gets its URIs and addresses from the plan. */
static tf_err tf_eng__adopt(tf_engine *e)
{
  const tf_plan *plan = tf_reconcile_plan(e->rec);
  for (size_t i = 0; i < tf_reconcile_relay_count(e->rec); i++) {
    tf_eng__relay *r = tf_eng__find(e, tf_reconcile_relay_name(e->rec, i));
    const tf_relay *planned = tf_plan_find(plan, tf_reconcile_relay_name(e->rec, i));
    if (!r || !r->observed || r->address_count || !planned || !r->identity ||
        strcmp(r->identity, tf_relay_identity(planned)) != 0)
      continue;
    char **uris, **addrs;
    size_t nu, na;
    if (tf_eng__planned_strings(e->rec, i, planned, &uris, &nu, &addrs, &na) < 0) return tf_error__nomem();
    r->uris = uris;
    r->uri_count = nu;
    r->addresses = addrs;
    r->address_count = na;
    r->ports = tf_relay_port_range(planned);
    r->metrics_port = tf_reconcile_relay_metrics_port(e->rec, i);
  }
  return TF_OK;
}

/* Whether two identities ("ADDR[,ADDR]/START-END") name a common address. */
static int tf_eng__identities_share_address(const char *a, const char *b)
{
  if (!a || !b) return 0;
  const char *a_end = strchr(a, '/'), *b_end = strchr(b, '/');
  if (!a_end || !b_end) return 0;
  for (const char *x = a; x < a_end;) {
    const char *xc = memchr(x, ',', (size_t)(a_end - x));
    size_t xl = (size_t)((xc ? xc : a_end) - x);
    for (const char *y = b; y < b_end;) {
      const char *yc = memchr(y, ',', (size_t)(b_end - y));
      size_t yl = (size_t)((yc ? yc : b_end) - y);
      if (xl == yl && memcmp(x, y, xl) == 0) return 1;
      y = yc ? yc + 1 : b_end;
    }
    x = xc ? xc + 1 : a_end;
  }
  return 0;
}

/* A planned relay starts only once no relay leaving the plan holds one of its addresses: a STOP that
 * is held back (a drain not confirmed by a count yet) or still out (a pod still terminating) keeps
 * the old coturn bound there, and two coturn processes on one address split its listeners' clients. */
static int tf_eng__address_held(const tf_engine *e, const tf_eng__relay *r, const tf_relay *planned)
{
  const tf_plan *plan = tf_reconcile_plan(e->rec);
  for (size_t i = 0; planned && i < e->relay_count; i++) {
    const tf_eng__relay *q = &e->relays[i];
    if (q == r || !q->observed || tf_plan_find(plan, q->name)) continue;
    if (tf_eng__identities_share_address(q->identity, tf_relay_identity(planned))) return 1;
  }
  return 0;
}

static void tf_eng__wake(tf_engine *e, int64_t t)
{
  if (t > 0 && (e->next_ms == 0 || t < e->next_ms)) e->next_ms = t;
}

static tf_err tf_eng__lifecycle(tf_engine *e)
{
  const tf_reconcile *rec = e->rec;
  tf_err rc = TF_OK;
  for (size_t i = 0; i < e->relay_count; i++) e->relays[i].restart_asked = 0;
  for (size_t k = 0; rc == TF_OK && k < tf_reconcile_action_count(rec); k++) {
    tf_action action;
    size_t i;
    const char *reason;
    if ((rc = tf_reconcile_action(rec, k, &action, &i, &reason)) < 0) break;
    const char *name = tf_reconcile_relay_name(rec, i);
    tf_eng__relay *r = tf_eng__find(e, name);
    if (r && r->life_out) continue; /* one lifecycle action per relay at a time */
    /* a draining relay goes at zero only on a count made after coturn was told to refuse new allocations */
    if (action == TF_ACTION_STOP && r && r->running && strcmp(reason, "Drained") == 0 &&
        !(r->drain_sent && r->count_ms >= r->drain_sent_ms))
      continue;
    switch (action) {
    case TF_ACTION_DRAIN:
      /* out of the URIs from now on; coturn is told after the publication delay */
      if (r && !r->draining) {
        r->draining = 1;
        r->draining_since_ms = e->now_ms;
        r->drain_due_ms = e->now_ms + e->opts.publish_delay_ms;
      }
      break;
    case TF_ACTION_STOP: {
      tf_eng__action *a = r ? tf_eng__push(e, TF_ENGINE_STOP, r, reason) : NULL;
      if (r && !a) rc = tf_error__nomem();
      if (a) {
        a->address = r->address_count ? tf_strdup__(r->addresses[0]) : NULL;
        r->life_out = a->pub.id;
        r->life_kind = TF_ENGINE_STOP;
        tf_eng__seal(a);
      }
      break;
    }
    case TF_ACTION_RESTART:
      /* the relay leaves the URIs now and restarts after the publication delay (readers of the URIs
       * stop handing it out first), one relay at a time */
      if (!r || (!r->restart_due_ms && tf_eng__restart_out(e, r))) break;
      r->restart_asked = 1;
      if (!r->restart_due_ms) {
        r->restart_due_ms = e->now_ms + e->opts.publish_delay_ms;
        if (r->restart_due_ms < 1) r->restart_due_ms = 1;
      }
      if (e->now_ms >= r->restart_due_ms) {
        r->restart_due_ms = 0;
        rc = tf_eng__start(e, r, i, TF_ENGINE_RESTART, reason);
      } else {
        tf_eng__wake(e, r->restart_due_ms);
      }
      break;
    case TF_ACTION_START:
      if (tf_eng__address_held(e, r, tf_plan_find(tf_reconcile_plan(rec), name))) break;
      if (!r && !(r = tf_eng__add(e, name))) rc = tf_error__nomem();
      else rc = tf_eng__start(e, r, i, TF_ENGINE_START, reason);
      break;
    }
  }
  /* a restart begun that the reconcile no longer asks for (its process went, its config came back) */
  for (size_t i = 0; rc == TF_OK && i < e->relay_count; i++)
    if (!e->relays[i].restart_asked) e->relays[i].restart_due_ms = 0;
  return rc;
}

/* The CLI password of the action's relay, derived as the renderer did. */
static tf_err tf_eng__cli_password(const tf_engine *e, tf_eng__action *a)
{
  if (!e->coturn.cli_password) return TF_OK;
  return tf_reconcile_cli_password(&a->cli_password, e->coturn.cli_password, a->relay);
}

/* Shutdown deadline, drains, probes and counts that are due. */
static tf_err tf_eng__schedule(tf_engine *e)
{
  const int64_t now = e->now_ms;
  for (size_t i = 0; i < e->relay_count; i++) {
    tf_eng__relay *r = &e->relays[i];
    if (!r->observed || r->life_out) continue;
    tf_eng__action *a = NULL;
    if (e->shutting_down && now >= e->shutdown_deadline_ms) {
      if (!(a = tf_eng__push(e, TF_ENGINE_STOP, r, "ShutdownTimeout"))) return tf_error__nomem();
      r->life_out = a->pub.id;
      r->life_kind = TF_ENGINE_STOP;
      tf_eng__seal(a);
      continue;
    }
    if (!r->running) continue;
    if (r->draining && !r->drain_sent && !r->drain_out) {
      int mode = (e->features & TF_COTURN_DRAIN) != 0;
      if (!mode && !r->cli_port) {
        r->drain_sent = 1; /* no CLI to refuse through: it drains by leaving the URIs only */
        r->drain_sent_ms = now;
      } else if (now >= r->drain_due_ms) {
        if (!(a = tf_eng__push(e, TF_ENGINE_DRAIN, r, "Drain"))) return tf_error__nomem();
        a->pub.drain = mode ? TF_ENGINE_DRAIN_MODE : TF_ENGINE_DRAIN_QUOTA;
        a->pub.timeout_ms = e->opts.count_timeout_ms;
        if (tf_eng__cli_password(e, a) < 0) return tf_error__nomem();
        r->drain_out = a->pub.id;
        tf_eng__seal(a);
      } else {
        tf_eng__wake(e, r->drain_due_ms);
      }
    }
    if (r->waiting) continue; /* nothing listens yet: its start (an observation) schedules its probes */
    if (!r->draining && r->uri_count && r->address_count && !r->probe_out && !r->count_out) {
      if (now >= r->next_probe_ms) {
        if (!(a = tf_eng__push(e, TF_ENGINE_PROBE, r, "Probe"))) return tf_error__nomem();
        /* every listener of every address (both halves of a DualStack relay, turns: too); not DTLS,
         * which the probe cannot speak */
        size_t per = r->uri_count / r->address_count;
        a->probe_uris = calloc(r->uri_count + 1, sizeof(char *));
        a->probe_addresses = calloc(r->uri_count + 1, sizeof(char *));
        if (!a->probe_uris || !a->probe_addresses) return tf_error__nomem();
        for (size_t k = 0; k < r->uri_count; k++) {
          tf_uri *uri = NULL;
          int dtls = tf_uri_parse(&uri, r->uris[k]) == 0 && tf_uri_open_mode(uri) == TF_URI_MODE_DTLS;
          tf_uri_free(uri);
          if (dtls) continue;
          size_t j = a->pub.probe_count;
          a->probe_uris[j] = tf_strdup__(r->uris[k]);
          a->probe_addresses[j] = tf_strdup__(r->addresses[k / per]);
          a->pub.probe_count++;
          if (!a->probe_uris[j] || !a->probe_addresses[j]) return tf_error__nomem();
        }
        a->address = tf_strdup__(r->addresses[0]);
        a->pub.timeout_ms = e->opts.probe_timeout_ms;
        r->probe_out = a->pub.id;
        r->probe_sent_ms = now;
        tf_eng__seal(a);
      } else {
        tf_eng__wake(e, r->next_probe_ms);
      }
    }
    int metrics = r->metrics_port && (e->features & TF_COTURN_ALLOCATIONS_BY_TYPE);
    if ((metrics || r->cli_port) && !r->probe_out && !r->count_out) {
      if (now >= r->next_count_ms) {
        if (!(a = tf_eng__push(e, TF_ENGINE_COUNT, r, "Count"))) return tf_error__nomem();
        a->pub.count = metrics ? TF_ENGINE_COUNT_METRICS : TF_ENGINE_COUNT_CLI;
        a->pub.timeout_ms = e->opts.count_timeout_ms;
        if (!metrics && tf_eng__cli_password(e, a) < 0) return tf_error__nomem();
        a->address = r->address_count ? tf_strdup__(r->addresses[0]) : NULL;
        r->count_out = a->pub.id;
        tf_eng__seal(a);
      } else {
        tf_eng__wake(e, r->next_count_ms);
      }
    }
  }
  return TF_OK;
}

static tf_engine_relay_state tf_eng__state(unsigned int flags, const tf_eng__relay *r)
{
  if (flags & TF_RELAY_DRAINING) return TF_ENGINE_RELAY_DRAINING;
  if (flags & TF_RELAY_UNCOUNTED) return TF_ENGINE_RELAY_UNCOUNTED;
  if (flags & TF_RELAY_READY) return TF_ENGINE_RELAY_READY;
  if (!r || !r->observed) return TF_ENGINE_RELAY_STARTING;
  if (!r->running) return r->exited_ms ? TF_ENGINE_RELAY_FAILING : TF_ENGINE_RELAY_STARTING;
  if (!r->probe_ms || r->probe_ms < r->started_ms) return TF_ENGINE_RELAY_STARTING;
  if (r->probe_error_code == 508) return TF_ENGINE_RELAY_FULL;
  return r->probe_ok ? TF_ENGINE_RELAY_STARTING : TF_ENGINE_RELAY_FAILING;
}

static tf_err tf_eng__build_views(tf_engine *e)
{
  size_t n = tf_reconcile_relay_count(e->rec);
  e->views = calloc(n + 1, sizeof(*e->views));
  if (!e->views) return tf_error__nomem();
  for (size_t i = 0; i < n; i++, e->view_count = i) {
    tf_eng__view *v = &e->views[i];
    const tf_eng__relay *r = tf_eng__find(e, tf_reconcile_relay_name(e->rec, i));
    unsigned int flags = tf_reconcile_relay_flags(e->rec, i);
    v->name = tf_strdup__(tf_reconcile_relay_name(e->rec, i));
    tf_buf b;
    tf_buf__init(&b);
    for (size_t j = 0; r && j < r->address_count; j++) {
      if (j) tf_buf__puts(&b, ",");
      tf_buf__puts(&b, r->addresses[j]);
    }
    if (tf_buf__detach(&b, &v->address) < 0 || !v->name) return tf_error__nomem();
    if (r && r->id && !(v->id = tf_strdup__(r->id))) return tf_error__nomem();
    if (r && r->probe_message && !(v->probe_message = tf_strdup__(r->probe_message))) return tf_error__nomem();
    v->pub.version = TF_ENGINE_RELAY_VERSION;
    v->pub.name = v->name;
    v->pub.id = v->id;
    v->pub.address = v->address ? v->address : "";
    v->pub.probe_message = v->probe_message;
    v->pub.flags = flags;
    v->pub.state = tf_eng__state(flags, r);
    v->pub.ports = r ? r->ports : (tf_port_range){0, 0};
    v->pub.restarts = r ? r->restarts : 0;
    v->pub.allocations = r ? r->allocations : -1;
    v->pub.probe_ms = r ? r->probe_ms : 0;
    v->pub.probe_ok = r ? r->probe_ok : 0;
    v->pub.probe_error_code = r ? r->probe_error_code : 0;
  }
  return TF_OK;
}

tf_err tf_engine_step(tf_engine *e, int64_t now_ms, int64_t wall_ms)
{
  TF_ASSERT_ARG(e);
  if (now_ms < 0 || wall_ms < 0) return tf_error__set(TF_EINVALID, "now_ms, wall_ms: must be >= 0");
  if (e->stepped && now_ms < e->now_ms)
    return tf_error__set(TF_EINVALID, "now_ms: %lld is before the last step's %lld (a monotonic clock never goes back)",
                         (long long)now_ms, (long long)e->now_ms);
  e->now_ms = now_ms;
  e->wall_ms = wall_ms;
  e->stepped = 1;
  tf_eng__actions_clear(e);
  tf_eng__views_clear(e);
  tf_reconcile_free(e->rec);
  e->rec = NULL;
  e->next_ms = 0;
  tf_err rc = tf_eng__reconcile(&e->rec, e, e->zero_pool ? e->zero_pool : e->pool, e->nodes, &e->coturn);
  if (rc == TF_OK) rc = tf_eng__adopt(e);
  if (rc == TF_OK) rc = tf_eng__lifecycle(e);
  if (rc == TF_OK) rc = tf_eng__schedule(e);
  if (rc == TF_OK) rc = tf_eng__build_views(e);
  if (rc == TF_OK) {
    char *status = NULL;
    if ((rc = tf_reconcile_status_json(&status, e->rec)) == TF_OK) {
      free(e->status_json);
      e->status_json = tf_strdup__(status);
      tf_free(status);
      if (!e->status_json) rc = tf_error__nomem();
    }
  }
  if (rc == TF_OK) {
    int64_t rn = tf_reconcile_next_ms(e->rec);
    if (rn > 0) tf_eng__wake(e, now_ms + (rn > wall_ms ? rn - wall_ms : 0));
    if (e->shutting_down) tf_eng__wake(e, e->shutdown_deadline_ms);
    e->dirty = 0;
  }
  return rc;
}

/* ---- acknowledgements ---- */

static tf_eng__relay *tf_eng__out(tf_engine *e, uint64_t id, uint64_t **slot)
{
  for (size_t i = 0; id && i < e->relay_count; i++) {
    tf_eng__relay *r = &e->relays[i];
    uint64_t *slots[4] = {&r->life_out, &r->drain_out, &r->probe_out, &r->count_out};
    for (int k = 0; k < 4; k++)
      if (*slots[k] == id) {
        *slot = slots[k];
        return r;
      }
  }
  return NULL;
}

tf_err tf_engine_done(tf_engine *e, uint64_t id, int ok, const char *relay_id, int64_t now_ms)
{
  TF_ASSERT_ARG(e);
  uint64_t *slot = NULL;
  tf_eng__relay *r = tf_eng__out(e, id, &slot);
  if (!r || (slot != &r->life_out && slot != &r->drain_out))
    return tf_error__set(TF_ENOTFOUND, "id: %llu is no start, restart, drain or stop out", (unsigned long long)id);
  *slot = 0;
  e->dirty = 1;
  if (slot == &r->drain_out) {
    if (ok) {
      r->drain_sent = 1;
      r->drain_sent_ms = now_ms;
    } else {
      r->drain_due_ms = now_ms + e->opts.count_interval_ms;
    }
    return TF_OK;
  }
  if (r->life_kind == TF_ENGINE_STOP) {
    if (ok) tf_eng__forget(e, r); /* else it is asked again at the next step */
    return TF_OK;
  }
  /* START/RESTART: the books take what it runs now */
  if (r->life_kind == TF_ENGINE_START && r->observed && !r->running) r->restarts++;
  free(r->identity);
  free(r->config_hash);
  tf_eng__strv_free(r->uris, r->uri_count);
  tf_eng__strv_free(r->addresses, r->address_count);
  r->identity = r->next_identity;
  r->config_hash = r->next_hash;
  r->uris = r->next_uris;
  r->uri_count = r->next_uri_count;
  r->addresses = r->next_addresses;
  r->address_count = r->next_address_count;
  r->cli_port = r->next_cli_port;
  r->metrics_port = r->next_metrics_port;
  r->ports = r->next_ports;
  r->next_identity = r->next_hash = NULL;
  r->next_uris = r->next_addresses = NULL;
  r->next_uri_count = r->next_address_count = 0;
  if (tf_eng__set_str(&r->id, ok ? relay_id : NULL) < 0) return tf_error__nomem();
  if (ok) tf_eng__fresh_process(e, r, now_ms);
  else tf_eng__gone(r, now_ms);
  return TF_OK;
}

tf_err tf_engine_probe_done(tf_engine *e, uint64_t id, int ok, int error_code, int on_allocate, const char *message,
                            int64_t now_ms)
{
  TF_ASSERT_ARG(e);
  uint64_t *slot = NULL;
  tf_eng__relay *r = tf_eng__out(e, id, &slot);
  if (!r || slot != &r->probe_out)
    return tf_error__set(TF_ENOTFOUND, "id: %llu is no probe out", (unsigned long long)id);
  if (tf_eng__set_str(&r->probe_message, message) < 0) return tf_error__nomem();
  *slot = 0;
  e->dirty = 1;
  r->probe_ms = now_ms;
  r->probe_duration_ms = now_ms >= r->probe_sent_ms ? now_ms - r->probe_sent_ms : -1;
  r->probe_ok = ok ? 1 : 0;
  r->probe_error_code = ok ? 0 : error_code;
  if (ok) r->saw_508 = 0;
  if (!ok && error_code == 508) r->saw_508 = 1;
  if (!ok && error_code && on_allocate) {
    size_t k = 0;
    while (k < r->fail_count && r->fail_codes[k] != error_code) k++;
    if (k < TF_ENG__MAX_CODES) {
      if (k == r->fail_count) r->fail_codes[r->fail_count++] = error_code, r->fail_counts[k] = 0;
      r->fail_counts[k]++;
    }
  }
  r->next_probe_ms = now_ms + e->opts.probe_interval_ms;
  /* coturn lists a released allocation's session a moment longer: count half an interval after a probe */
  if (r->next_count_ms < now_ms + e->opts.probe_interval_ms / 2) r->next_count_ms = now_ms + e->opts.probe_interval_ms / 2;
  return TF_OK;
}

tf_err tf_engine_count_done(tf_engine *e, uint64_t id, int64_t allocations, int64_t now_ms)
{
  TF_ASSERT_ARG(e);
  uint64_t *slot = NULL;
  tf_eng__relay *r = tf_eng__out(e, id, &slot);
  if (!r || slot != &r->count_out)
    return tf_error__set(TF_ENOTFOUND, "id: %llu is no count out", (unsigned long long)id);
  *slot = 0;
  e->dirty = 1;
  r->allocations = allocations >= 0 ? allocations : -1;
  if (allocations >= 0) r->count_ms = now_ms, r->count_misses = 0;
  else r->count_failures++, r->count_misses++;
  r->next_count_ms = now_ms + e->opts.count_interval_ms;
  return TF_OK;
}

int64_t tf_engine_next_ms(const tf_engine *e)
{
  if (!e) return 0;
  if (e->dirty || !e->stepped) return e->now_ms;
  return e->next_ms;
}

tf_err tf_engine_shutdown(tf_engine *e, int64_t now_ms, int immediate)
{
  TF_ASSERT_ARG(e);
  if (!e->zero_pool) {
    tf_err rc = tf_pool_with_replicas(&e->zero_pool, e->pool, 0);
    if (rc < 0) return rc;
    e->shutting_down = 1;
    e->shutdown_deadline_ms = now_ms + tf_pool_drain_timeout_ms(e->pool) + e->opts.stop_grace_ms;
  }
  if (immediate && now_ms < e->shutdown_deadline_ms) e->shutdown_deadline_ms = now_ms;
  e->dirty = 1;
  return TF_OK;
}

int tf_engine_finished(const tf_engine *e) { return e && e->shutting_down && e->relay_count == 0; }

/* ---- what the last step says ---- */

const char *tf_engine_action_name(tf_engine_action_kind kind)
{
  static const char *const names[] = {"start", "restart", "drain", "stop", "probe", "count"};
  return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : NULL;
}

size_t tf_engine_action_count(const tf_engine *e) { return e ? e->action_count : 0; }

const tf_engine_action *tf_engine_action_at(const tf_engine *e, size_t i)
{
  return e && i < e->action_count ? &e->actions[i].pub : NULL;
}

const char *tf_engine_relay_state_name(tf_engine_relay_state state)
{
  static const char *const names[] = {"Starting", "Ready", "Full", "Failing", "Draining", "Uncounted"};
  return (unsigned)state < sizeof(names) / sizeof(names[0]) ? names[state] : NULL;
}

size_t tf_engine_relay_count(const tf_engine *e) { return e ? e->view_count : 0; }

const tf_engine_relay *tf_engine_relay_at(const tf_engine *e, size_t i)
{
  return e && i < e->view_count ? &e->views[i].pub : NULL;
}

const tf_reconcile *tf_engine_reconcile(const tf_engine *e) { return e ? e->rec : NULL; }

const tf_pool *tf_engine_pool(const tf_engine *e) { return e ? e->pool : NULL; }

tf_err tf_engine_status_json(char **out, const tf_engine *e)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(e);
  if (!e->rec || !e->status_json) return tf_error__set(TF_EINVALID, "engine: no step yet");
  cJSON *doc = cJSON_Parse(e->status_json);
  if (!doc) return tf_error__nomem();
  cJSON_AddNumberToObject(doc, "desiredReplicas", e->shutting_down ? 0 : (double)tf_pool_replicas(e->pool));
  cJSON_AddNumberToObject(doc, "placedReplicas", (double)tf_plan_relay_count(tf_reconcile_plan(e->rec)));
  cJSON_AddBoolToObject(doc, "stopping", e->shutting_down);
  if (e->refusal) cJSON_AddStringToObject(doc, "refusedChange", e->refusal);
  else cJSON_AddNullToObject(doc, "refusedChange");
  cJSON *relay;
  cJSON_ArrayForEach(relay, cJSON_GetObjectItemCaseSensitive(doc, "relays"))
  {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(relay, "name"));
    const tf_engine_relay *v = NULL;
    for (size_t j = 0; name && j < e->view_count && !v; j++)
      if (strcmp(e->views[j].name, name) == 0) v = &e->views[j].pub;
    cJSON_AddStringToObject(relay, "state", tf_engine_relay_state_name(v ? v->state : TF_ENGINE_RELAY_STARTING));
    cJSON_AddNumberToObject(relay, "restarts", v ? (double)v->restarts : 0);
  }
  /* a runtime that stops is not Ready, whatever zero relays of zero say: it says what is left and until when */
  char deadline[32] = "", stopping[160] = "";
  int64_t left = 0;
  int known = 1;
  if (e->shutting_down) {
    for (size_t i = 0; i < e->relay_count; i++) {
      if (e->relays[i].allocations < 0) known = 0;
      else left += e->relays[i].allocations;
    }
    time_t t = (time_t)((e->wall_ms + (e->shutdown_deadline_ms - e->now_ms)) / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(deadline, sizeof(deadline), "%Y-%m-%dT%H:%M:%SZ", &tm);
    char allocs[48] = "allocations left unknown";
    if (known) snprintf(allocs, sizeof(allocs), "%" PRId64 " allocations left", left);
    snprintf(stopping, sizeof(stopping), "stopping: %zu relays draining, %s, the last stopped by %s", e->relay_count,
             allocs, deadline);
  }
  cJSON *cond;
  cJSON_ArrayForEach(cond, cJSON_GetObjectItemCaseSensitive(doc, "conditions"))
  {
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cond, "type"));
    if (!e->shutting_down || !type || strcmp(type, "Ready") != 0) continue;
    const char *was = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cond, "status"));
    if (was && strcmp(was, "False") != 0) {
      char when[32];
      time_t t = (time_t)(e->wall_ms / 1000);
      struct tm tm;
      gmtime_r(&t, &tm);
      strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
      cJSON_ReplaceItemInObjectCaseSensitive(cond, "lastTransitionTime", cJSON_CreateString(when));
    }
    cJSON_ReplaceItemInObjectCaseSensitive(cond, "status", cJSON_CreateString("False"));
    cJSON_ReplaceItemInObjectCaseSensitive(cond, "reason", cJSON_CreateString(e->relay_count ? "Stopping" : "Stopped"));
    cJSON_ReplaceItemInObjectCaseSensitive(cond, "message", cJSON_CreateString(e->relay_count ? stopping : "stopped"));
  }
  if (e->shutting_down) {
    cJSON *sd = cJSON_AddObjectToObject(doc, "shutdown");
    cJSON_AddNumberToObject(sd, "relays", (double)e->relay_count);
    if (known) cJSON_AddNumberToObject(sd, "allocations", (double)left);
    else cJSON_AddNullToObject(sd, "allocations");
    cJSON_AddStringToObject(sd, "deadline", deadline);
  }
  char *text = cJSON_Print(doc);
  cJSON_Delete(doc);
  char *copy = text ? tf_strdup__(text) : NULL;
  cJSON_free(text);
  if (!copy) return tf_error__nomem();
  *out = copy;
  return TF_OK;
}

/* ---- what a driver refuses at start ---- */

tf_err tf_engine_local_nodes(tf_nodes **out, const tf_pool *pool, const tf_addr *addrs, size_t count)
{
  if (out) *out = NULL;
  TF_ASSERT_ARG(out && pool && (addrs || !count));
  tf_addr *v4 = calloc(count + 1, sizeof(tf_addr)), *v6 = calloc(count + 1, sizeof(tf_addr));
  size_t n4 = 0, n6 = 0, nl = tf_pool_node_selector_count(pool);
  const char **keys = calloc(nl + 1, sizeof(char *)), **values = calloc(nl + 1, sizeof(char *));
  tf_nodes *nodes = NULL;
  tf_err rc = v4 && v6 && keys && values ? tf_nodes_new(&nodes) : tf_error__nomem();
  for (size_t i = 0; i < nl; i++)
    keys[i] = tf_pool_node_selector_key(pool, i), values[i] = tf_pool_node_selector_value(pool, i);
  /* the addresses are the user's own, not a kubelet's: a loopback one is theirs to choose */
  keys[nl] = TF_LABEL_DEVELOPMENT, values[nl] = "true";
  for (size_t i = 0; rc == TF_OK && i < count; i++) {
    if (addrs[i].family == TF_AF_INET) v4[n4++] = addrs[i];
    else v6[n6++] = addrs[i];
  }
  tf_mode mode = tf_pool_mode(pool);
  int listed = mode == TF_MODE_EXTERNAL_IP_POOL || mode == TF_MODE_POD_IP;
  int dual = tf_pool_family(pool) == TF_FAMILY_DUAL_STACK;
  size_t wanted = !count ? 0 : listed ? 1 : dual ? (n4 < n6 ? n4 : n6) : count;
  for (size_t i = 0; rc == TF_OK && i < wanted; i++) {
    char name[32];
    snprintf(name, sizeof(name), listed ? "local" : "local-%03zu", i + 1);
    tf_addr pair[2] = {v4[i < n4 ? i : 0], v6[i < n6 ? i : 0]};
    tf_node_info info = TF_NODE_INFO_INIT;
    info.name = name;
    info.label_keys = keys;
    info.label_values = values;
    info.label_count = nl + 1;
    info.ready = 1;
    info.internal_ips = listed ? addrs : dual ? pair : &addrs[i];
    info.internal_ip_count = listed ? count : dual ? 2 : 1;
    if (mode == TF_MODE_EXTERNAL_IP_POOL) info.external_addresses = addrs, info.external_address_count = count;
    if (mode == TF_MODE_POD_IP) info.pod_addresses = addrs, info.pod_address_count = count;
    rc = tf_nodes_add(nodes, &info);
  }
  free(v4);
  free(v6);
  free(keys);
  free(values);
  if (rc < 0) {
    tf_nodes_free(nodes);
    return rc;
  }
  *out = nodes;
  return TF_OK;
}

tf_err tf_engine_check_placement(const tf_pool *pool, const tf_nodes *nodes)
{
  TF_ASSERT_ARG(pool && nodes);
  tf_plan *plan = NULL;
  tf_err rc = tf_plan_new(&plan, pool, nodes, NULL);
  if (rc < 0) return rc;
  int64_t placed = (int64_t)tf_plan_relay_count(plan), want = tf_pool_replicas(pool);
  const char *why = "no eligible node offers an address";
  for (size_t k = 0; placed < want && k < tf_plan_condition_count(plan); k++) {
    const char *type, *message;
    if (tf_plan_condition(plan, k, &type, NULL, NULL, &message) == 0 && strcmp(type, "Placed") == 0) why = message;
  }
  if (placed < want)
    rc = tf_error__set(TF_EINVALID, "%lld of %lld replicas can be placed (%s %s): %s", (long long)placed,
                       (long long)want, tf_mode_name(tf_pool_mode(pool)), tf_family_name(tf_pool_family(pool)), why);
  tf_plan_free(plan);
  return rc;
}

tf_err tf_engine_check_runtime(const tf_pool *pool, uint32_t coturn_version, int have_tls)
{
  TF_ASSERT_ARG(pool);
  uint32_t want = 0;
  const char *text = tf_pool_coturn_version(pool);
  if (!text || tf_coturn_version_parse(&want, text) < 0 || want != coturn_version)
    return tf_error__set(TF_EINVALID, "spec.dataplane.coturnVersion: \"%s\" contradicts the turnserver this runs: it is coturn %u.%u.%u",
                         text ? text : "", (unsigned)(coturn_version >> 16), (unsigned)((coturn_version >> 8) & 0xff),
                         (unsigned)(coturn_version & 0xff));
  for (size_t l = 0; l < tf_pool_listener_count(pool) && !have_tls; l++) {
    tf_protocol p = tf_pool_listener_protocol(pool, l);
    if (p == TF_PROTOCOL_TLS || p == TF_PROTOCOL_DTLS)
      return tf_error__set(TF_EINVALID, "spec.listeners[%zu]: %s listener \"%s\" needs the relays' certificate and key", l,
                           tf_protocol_name(p), tf_pool_listener_name(pool, l));
  }
  return TF_OK;
}

tf_err tf_engine_set_inputs(tf_engine *e, tf_pool *pool, tf_nodes *nodes)
{
  tf_err rc = e && pool && nodes ? tf_eng__try(e, pool, nodes, &e->coturn) : tf_error__set(TF_EINVALID, "invalid argument");
  if (rc < 0) {
    tf_pool_free(pool);
    tf_nodes_free(nodes);
    return rc;
  }
  tf_pool_free(e->pool);
  tf_nodes_free(e->nodes);
  e->pool = pool;
  e->nodes = nodes;
  e->features = tf_eng__features(pool, &e->coturn);
  e->dirty = 1;
  return TF_OK;
}

tf_err tf_engine_refuse(tf_engine *e, const char *why)
{
  TF_ASSERT_ARG(e && why && *why);
  char *copy = tf_strdup__(why);
  if (!copy) return tf_error__nomem();
  free(e->refusal);
  e->refusal = copy;
  e->dirty = 1;
  return TF_OK;
}

/* ---- probes for a driver ---- */

tf_err tf_engine_probe_options(const tf_engine *e, const tf_engine_action *a, size_t j, tf_probe_options *po)
{
  TF_ASSERT_ARG(e && a && po);
  if (a->kind != TF_ENGINE_PROBE || j >= a->probe_count)
    return tf_error__set(TF_EINVALID, "action: not a probe, or no URI %zu", j);
  if (po->version < 1 || po->version > TF_PROBE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "po.version: %u is not a known TF_PROBE_OPTIONS_VERSION", po->version);
  tf_addr addr;
  po->uri = a->probe_uris[j];
  /* the secret every relay takes: the previous one while it is rendered (relays not restarted yet have only it) */
  po->secret = e->coturn.secrets[e->coturn.secrets_count - 1];
  po->expect_address = a->probe_addresses[j];
  po->family = tf_addr_parse(&addr, a->probe_addresses[j]) == 0 ? addr.family : 0; /* the pool's family */
  po->expect_port_start = a->ports.start;
  po->expect_port_end = a->ports.end;
  po->timeout_ms = (int)a->timeout_ms;
  return TF_OK;
}

tf_err tf_engine_probe_results_done(tf_engine *e, uint64_t id, const tf_probe_result *const *results, size_t count,
                                    int64_t now_ms)
{
  TF_ASSERT_ARG(e && (results || !count));
  for (size_t i = 0; i < count; i++) {
    const tf_probe_result *r = results[i];
    if (!r) return tf_engine_probe_done(e, id, 0, 0, 0, "a probe did not run", now_ms);
    if (!tf_probe_result_ok(r)) /* the first that failed tells why */
      return tf_engine_probe_done(e, id, 0, tf_probe_result_error_code(r), tf_probe_result_stage(r) == TF_PROBE_STAGE_ALLOCATE,
                                  tf_probe_result_message(r), now_ms);
  }
  if (!count) return tf_engine_probe_done(e, id, 0, 0, 0, "no probe ran", now_ms);
  return tf_engine_probe_done(e, id, 1, 0, 0, tf_probe_result_message(results[0]), now_ms);
}
