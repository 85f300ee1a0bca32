/* admission: AdmissionReview v1 in, response out. The envelope goes through the
 * one document reader (doc.c: bounded, duplicate keys and bad UTF-8 refused with
 * positions); the pool through tf_pool_parse()/tf_pool_validate(), the very code
 * `turnfleet validate` runs; placement and conflicts through the planner. */
#include <cjson/cJSON.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "model.h"

#define TF__ADM_API "admission.k8s.io/v1"
#define TF__ADM_GROUP "turnfleet.hzmi.dev"
#define TF__ADM_UID_MAX 256
#define TF__ADM_WARNING_MAX 240 /* kube-apiserver truncates a warning past 256 bytes */

struct tf_admission {
  cJSON *root;
  const char *uid, *operation, *sub_resource, *resource, *group, *ns, *name;
  const cJSON *object; /* NULL when null or absent */
};

typedef struct tf_adm__limits {
  size_t max_bytes, max_values, max_warnings;
  int64_t max_replicas;
} tf_adm__limits;

tf_err tf_admission_options_init(tf_admission_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_ADMISSION_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_admission_options version (1-%d)", version,
                         TF_ADMISSION_OPTIONS_VERSION);
  tf_admission_options init = TF_ADMISSION_OPTIONS_INIT;
  *opts = init;
  opts->version = version;
  return TF_OK;
}

static tf_err tf_adm__limits_of(tf_adm__limits *l, const tf_admission_options *o)
{
  l->max_bytes = TF_ADMISSION_MAX_BYTES_DEFAULT;
  l->max_values = TF_PARSE_MAX_VALUES_DEFAULT;
  l->max_warnings = TF_ADMISSION_MAX_WARNINGS_DEFAULT;
  l->max_replicas = 0;
  if (!o) return TF_OK;
  if (o->version == 0 || o->version > TF_ADMISSION_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "opts.version: %u is not a tf_admission_options version (1-%d)", o->version,
                         TF_ADMISSION_OPTIONS_VERSION);
  /* version 1: every field */
  if (o->max_bytes) l->max_bytes = o->max_bytes;
  if (o->max_values) l->max_values = o->max_values;
  if (o->max_warnings) l->max_warnings = o->max_warnings;
  if (o->max_replicas < 0)
    return tf_error__set(TF_EINVALID, "opts.max_replicas: %lld is negative", (long long)o->max_replicas);
  l->max_replicas = o->max_replicas;
  return TF_OK;
}

/* ------------------------------------------------------------------ decode */

/* A member that must be a string when present; *out stays "" when absent. */
static tf_err tf_adm__string(const cJSON *parent, const char *path, const char *key, int required, size_t max,
                             const char **out)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(parent, key);
  *out = "";
  if (!v || cJSON_IsNull(v)) {
    if (required) return tf_error__set(TF_EINVALID, "%s%s: required", path, key);
    return TF_OK;
  }
  if (!cJSON_IsString(v)) return tf_error__set(TF_EINVALID, "%s%s: must be a string", path, key);
  if (required && !*v->valuestring) return tf_error__set(TF_EINVALID, "%s%s: must not be empty", path, key);
  if (max && strlen(v->valuestring) > max)
    return tf_error__set(TF_EINVALID, "%s%s: longer than %zu characters", path, key, max);
  *out = v->valuestring;
  return TF_OK;
}

static tf_err tf_adm__object_or_null(const cJSON *parent, const char *key, const cJSON **out)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(parent, key);
  *out = NULL;
  if (!v || cJSON_IsNull(v)) return TF_OK;
  if (!cJSON_IsObject(v)) return tf_error__set(TF_EINVALID, "request.%s: must be an object or null", key);
  *out = v;
  return TF_OK;
}

static tf_err tf_adm__envelope(tf_admission *r)
{
  const cJSON *root = r->root;
  const char *s;
  tf_err rc;
  if (!cJSON_IsObject(root)) return tf_error__set(TF_EINVALID, "the review is not a JSON object");
  if ((rc = tf_adm__string(root, "", "apiVersion", 1, 0, &s)) < 0) return rc;
  if (strcmp(s, TF__ADM_API) != 0)
    return tf_error__set(TF_EINVALID, "apiVersion: \"%.64s\" is not %s (list only v1 in admissionReviewVersions)", s,
                         TF__ADM_API);
  if ((rc = tf_adm__string(root, "", "kind", 1, 0, &s)) < 0) return rc;
  if (strcmp(s, "AdmissionReview") != 0)
    return tf_error__set(TF_EINVALID, "kind: \"%.64s\" is not AdmissionReview", s);
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
  if (!req || cJSON_IsNull(req)) return tf_error__set(TF_EINVALID, "request: required");
  if (!cJSON_IsObject(req)) return tf_error__set(TF_EINVALID, "request: must be an object");
  if ((rc = tf_adm__string(req, "request.", "uid", 1, TF__ADM_UID_MAX, &r->uid)) < 0) return rc;
  if ((rc = tf_adm__string(req, "request.", "operation", 1, 0, &r->operation)) < 0) return rc;
  static const char *const ops[] = {"CREATE", "UPDATE", "DELETE", "CONNECT", NULL};
  int known = 0;
  for (size_t i = 0; ops[i]; i++) known |= strcmp(ops[i], r->operation) == 0;
  if (!known)
    return tf_error__set(TF_EINVALID, "request.operation: \"%.32s\" is not CREATE, UPDATE, DELETE or CONNECT",
                         r->operation);
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(req, "resource");
  if (!cJSON_IsObject(res)) return tf_error__set(TF_EINVALID, "request.resource: required (an object)");
  if ((rc = tf_adm__string(res, "request.resource.", "group", 0, 0, &r->group)) < 0) return rc;
  if ((rc = tf_adm__string(res, "request.resource.", "resource", 1, 0, &r->resource)) < 0) return rc;
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(req, "kind");
  if (kind && !cJSON_IsObject(kind)) return tf_error__set(TF_EINVALID, "request.kind: must be an object");
  if ((rc = tf_adm__string(req, "request.", "subResource", 0, 0, &r->sub_resource)) < 0) return rc;
  if ((rc = tf_adm__string(req, "request.", "namespace", 0, 0, &r->ns)) < 0) return rc;
  if ((rc = tf_adm__string(req, "request.", "name", 0, 0, &r->name)) < 0) return rc;
  const cJSON *old;
  if ((rc = tf_adm__object_or_null(req, "object", &r->object)) < 0) return rc;
  if ((rc = tf_adm__object_or_null(req, "oldObject", &old)) < 0) return rc;
  const cJSON *dry = cJSON_GetObjectItemCaseSensitive(req, "dryRun");
  if (dry && !cJSON_IsNull(dry) && !cJSON_IsBool(dry))
    return tf_error__set(TF_EINVALID, "request.dryRun: must be a boolean");
  if ((!strcmp(r->operation, "CREATE") || !strcmp(r->operation, "UPDATE")) && !r->object)
    return tf_error__set(TF_EINVALID, "request.object: required for %s", r->operation);
  return TF_OK;
}

tf_err tf_admission_decode(tf_admission **out, const char *body, size_t len, const tf_admission_options *opts)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(body || len == 0);
  tf_adm__limits lim;
  tf_err rc = tf_adm__limits_of(&lim, opts);
  if (rc < 0) return rc;
  if (len > lim.max_bytes)
    return tf_error__set(TF_EINVALID, "the review is larger than the limit of %zu bytes (tf_admission_options.max_bytes)",
                         lim.max_bytes);
  if (len == 0) return tf_error__set(TF_EINVALID, "the review is empty");
  tf_parse_options po = TF_PARSE_OPTIONS_INIT;
  po.max_bytes = lim.max_bytes;
  po.max_values = lim.max_values;
  tf_admission *r = calloc(1, sizeof(*r));
  if (!r) return tf_error__nomem();
  if ((rc = tf_doc__parse_json(&r->root, body, len, &po)) < 0 || (rc = tf_adm__envelope(r)) < 0) {
    tf_admission_free(r);
    return rc;
  }
  *out = r;
  return TF_OK;
}

void tf_admission_free(tf_admission *review)
{
  if (!review) return;
  cJSON_Delete(review->root);
  free(review);
}

const char *tf_admission_uid(const tf_admission *r) { return r ? r->uid : ""; }
const char *tf_admission_operation(const tf_admission *r) { return r ? r->operation : ""; }
const char *tf_admission_sub_resource(const tf_admission *r) { return r ? r->sub_resource : ""; }
const char *tf_admission_resource(const tf_admission *r) { return r ? r->resource : ""; }

/* ---------------------------------------------------------------- verdict */

typedef struct tf_adm__verdict {
  tf_problems *denials;  /* empty: allowed */
  char **warnings;
  size_t warning_count, warnings_dropped;
  size_t max_warnings;
  cJSON *patch; /* JSON Patch array, or NULL */
  int failed;   /* out of memory */
} tf_adm__verdict;

static void tf_adm__warn(tf_adm__verdict *v, const char *fmt, ...) TF__PRINTF(2, 3);
static void tf_adm__warn(tf_adm__verdict *v, const char *fmt, ...)
{
  if (v->warning_count >= v->max_warnings) {
    v->warnings_dropped++;
    return;
  }
  char text[TF__ADM_WARNING_MAX + 1];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n > TF__ADM_WARNING_MAX) memcpy(text + TF__ADM_WARNING_MAX - 3, "...", 4);
  char *copy = tf_strdup__(text);
  char **grown = copy ? realloc(v->warnings, (v->warning_count + 1) * sizeof(char *)) : NULL;
  if (!grown) {
    free(copy);
    v->failed = 1;
    return;
  }
  v->warnings = grown;
  v->warnings[v->warning_count++] = copy;
}

static void tf_adm__deny(tf_adm__verdict *v, const char *path, const char *fmt, ...) TF__PRINTF(3, 4);
static void tf_adm__deny(tf_adm__verdict *v, const char *path, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (tf_problems__addv(v->denials, path, fmt, ap) < 0) v->failed = 1;
  va_end(ap);
}

static int tf_adm__same_pool(const tf_pool *p, const char *ns, const char *name)
{
  return strcmp(tf_pool_namespace(p), *ns ? ns : "default") == 0 && strcmp(tf_pool_name(p), name) == 0;
}

/* The relays the other pools would take on these nodes, as claims for the planner. */
static tf_err tf_adm__claims(tf_existing **out, const tf_pool *self, const tf_nodes *nodes, const tf_pool *const *pools,
                             size_t count)
{
  tf_err rc = tf_existing_new(out);
  for (size_t i = 0; i < count && rc == TF_OK; i++) {
    const tf_pool *other = pools[i];
    if (!other || tf_adm__same_pool(other, tf_pool_namespace(self), tf_pool_name(self))) continue;
    if (tf_pool_validate(NULL, other) < 0) continue; /* an invalid pool runs no relays */
    tf_plan *plan = NULL;
    if (tf_plan_new(&plan, other, nodes, NULL) < 0) continue;
    /* `name.namespace`: a valid pool name for the planner (labels have no dots), unique across namespaces */
    char *owner = tf_asprintf__("%s.%s", tf_pool_name(other), tf_pool_namespace(other));
    if (!owner) rc = tf_error__nomem();
    uint16_t ports[64];
    size_t nl = tf_pool_listener_count(other);
    if (nl > 64) nl = 64;
    for (size_t k = 0; k < tf_plan_relay_count(plan) && rc == TF_OK; k++) {
      const tf_relay *r = tf_plan_relay(plan, k);
      for (size_t l = 0; l < nl; l++) ports[l] = tf_relay_listener_port(r, l);
      rc = tf_existing_add(*out, owner, tf_relay_name(r), tf_relay_identity(r), -1, ports, nl);
    }
    free(owner);
    tf_plan_free(plan);
  }
  if (rc < 0) {
    tf_existing_free(*out);
    *out = NULL;
  }
  return rc;
}

static const char *tf_adm__condition(const tf_plan *plan, const char *type, const char **reason)
{
  for (size_t i = 0; i < tf_plan_condition_count(plan); i++) {
    const char *t, *status, *why, *msg;
    if (tf_plan_condition(plan, i, &t, &status, &why, &msg) == 0 && strcmp(t, type) == 0) {
      if (reason) *reason = why;
      return strcmp(status, "True") == 0 ? msg : NULL;
    }
  }
  return NULL;
}

static int tf_adm__in(uint16_t port, tf_port_range r) { return port >= r.start && port <= r.end; }

/* 1 when the planned relays of @p a and @p b share an address. */
static int tf_adm__share_address(const tf_plan *a, const tf_plan *b)
{
  for (size_t i = 0; i < tf_plan_relay_count(a); i++)
    for (size_t k = 0; k < tf_relay_address_count(tf_plan_relay(a, i)); k++) {
      tf_addr x;
      if (tf_relay_address(&x, tf_plan_relay(a, i), k) < 0) continue;
      for (size_t j = 0; j < tf_plan_relay_count(b); j++)
        for (size_t l = 0; l < tf_relay_address_count(tf_plan_relay(b, j)); l++) {
          tf_addr y;
          if (tf_relay_address(&y, tf_plan_relay(b, j), l) == 0 && tf_addr_compare(&x, &y) == 0) return 1;
        }
    }
  return 0;
}

/* The conflict denial, on the field that meets the other pools' ports on a shared address: a
 * listener port in their range or on their listener (spec.listeners[i].port), the relay range
 * over theirs or their listeners (spec.relayPortRange). */
static void tf_adm__deny_conflict(tf_adm__verdict *v, const tf_pool *pool, const tf_plan *alone, const tf_nodes *nodes,
                                  const tf_pool *const *pools, size_t count, const char *conflict)
{
  tf_port_range r1 = tf_pool_relay_port_range(pool);
  size_t n1 = tf_pool_listener_count(pool);
  int range = 0, listener[64] = {0};
  for (size_t i = 0; i < count; i++) {
    const tf_pool *o = pools[i];
    if (!o || tf_adm__same_pool(o, tf_pool_namespace(pool), tf_pool_name(pool)) || tf_pool_validate(NULL, o) < 0) continue;
    tf_plan *op = NULL;
    if (tf_plan_new(&op, o, nodes, NULL) < 0) continue;
    int shared = tf_adm__share_address(alone, op);
    tf_plan_free(op);
    if (!shared) continue;
    tf_port_range r2 = tf_pool_relay_port_range(o);
    range |= r1.start <= r2.end && r2.start <= r1.end;
    for (size_t l = 0; l < tf_pool_listener_count(o); l++) range |= tf_adm__in(tf_pool_listener_port(o, l), r1);
    for (size_t k = 0; k < n1 && k < 64; k++) {
      uint16_t port = tf_pool_listener_port(pool, k);
      int hit = tf_adm__in(port, r2);
      for (size_t l = 0; l < tf_pool_listener_count(o); l++) hit |= tf_pool_listener_port(o, l) == port;
      listener[k] |= hit;
    }
  }
  int first = !range; /* the first denial carries the planner's message */
  if (range)
    tf_adm__deny(v, "spec.relayPortRange", "address conflict with another pool (its relay range or a listener port on "
                                           "the same address): %s", conflict);
  for (size_t k = 0; k < n1 && k < 64; k++) {
    if (!listener[k]) continue;
    char path[48];
    snprintf(path, sizeof(path), "spec.listeners[%zu].port", k);
    if (first)
      tf_adm__deny(v, path, "address conflict with another pool: port %u is its relay port or listener on the same "
                            "address: %s", tf_pool_listener_port(pool, k), conflict);
    else
      tf_adm__deny(v, path, "port %u is another pool's relay port or listener on the same address",
                   tf_pool_listener_port(pool, k));
    first = 0;
  }
  if (first) /* no port shared with a pool it could name: what the planner says */
    tf_adm__deny(v, "spec.relayPortRange", "address conflict with another pool: %s", conflict);
}

/* Placement warnings and cross-pool conflicts from dry-run plans. */
static tf_err tf_adm__plan(tf_adm__verdict *v, const tf_pool *pool, const tf_nodes *nodes, const tf_pool *const *pools,
                           size_t count)
{
  tf_existing *claims = NULL;
  tf_plan *alone = NULL, *shared = NULL;
  tf_err rc = tf_plan_new(&alone, pool, nodes, NULL);
  if (rc == TF_OK) rc = tf_adm__claims(&claims, pool, nodes, pools, count);
  if (rc == TF_OK) rc = tf_plan_new(&shared, pool, nodes, claims);
  if (rc < 0) goto done;
  /* fewer identities with the other pools' claims than without: they hold some of ours */
  const char *conflict = tf_adm__condition(shared, "AddressConflict", NULL);
  int denied = tf_plan_placeable_count(shared) < tf_plan_placeable_count(alone) && conflict;
  if (denied) tf_adm__deny_conflict(v, pool, alone, nodes, pools, count, conflict);
  const char *dup = tf_adm__condition(alone, "AddressConflict", NULL);
  if (dup) tf_adm__warn(v, "nodes: %s", dup);
  if (denied) goto done; /* the denial says why: no placement warning beside it */
  /* the planner's own words: the identities, the eligible nodes, the rule, each node left out and why */
  for (size_t i = 0; i < tf_plan_condition_count(shared); i++) {
    const char *t, *status, *msg;
    if (tf_plan_condition(shared, i, &t, &status, NULL, &msg) == 0 && strcmp(t, "Placed") == 0 &&
        strcmp(status, "False") == 0)
      tf_adm__warn(v, "spec.replicas: %s", msg);
  }
done:
  tf_plan_free(alone);
  tf_plan_free(shared);
  tf_existing_free(claims);
  return rc;
}

/* Warnings that need no nodes. */
static void tf_adm__static_warnings(tf_adm__verdict *v, const tf_pool *pool)
{
  if (tf_pool_mode(pool) == TF_MODE_PARTITIONED_IP)
    tf_adm__warn(v, "spec.addressing.partitionedIP.relaysPerNode: PartitionedIP adds no capacity: %u relays per "
                    "address share its %u relay ports",
                 tf_pool_relays_per_node(pool), tf_port_range_size(tf_pool_relay_port_range(pool)));
  for (size_t i = 0; i < tf_pool_listener_count(pool); i++) {
    uint16_t port = tf_pool_listener_port(pool, i);
    if (port && port < 1024)
      tf_adm__warn(v, "spec.listeners[%zu].port: %u is below 1024: the relay keeps NET_BIND_SERVICE", i, port);
  }
}

static void tf_adm__check_replicas(tf_adm__verdict *v, int64_t replicas, int64_t max)
{
  if (max > 0 && replicas > max)
    tf_adm__deny(v, "spec.replicas", "%lld is above this cluster's maximum of %lld (turnfleet-webhook --max-replicas)",
                 (long long)replicas, (long long)max);
}

/* JSON Pointer escaping of one reference token (RFC 6901). */
static char *tf_adm__pointer(const char *base, const char *token)
{
  tf_buf b;
  tf_buf__init(&b);
  tf_buf__puts(&b, base);
  tf_buf__puts(&b, "/");
  for (const char *s = token; *s; s++) {
    if (*s == '~') tf_buf__puts(&b, "~0");
    else if (*s == '/') tf_buf__puts(&b, "~1");
    else tf_buf__putn(&b, s, 1);
  }
  char *out = NULL;
  if (tf_buf__detach(&b, &out) < 0) return NULL;
  return out;
}

static int tf_adm__add_op(cJSON *patch, const char *path, const cJSON *value)
{
  cJSON *op = cJSON_CreateObject();
  cJSON *val = cJSON_Duplicate(value, 1);
  if (!op || !val || !cJSON_AddStringToObject(op, "op", "add") || !cJSON_AddStringToObject(op, "path", path)) {
    cJSON_Delete(op);
    cJSON_Delete(val);
    return -1;
  }
  cJSON_AddItemToObject(op, "value", val);
  cJSON_AddItemToArray(patch, op);
  return 0;
}

/* An "add" for every member the defaulted object has and the given one lacks;
 * members present are never replaced (the parser's canonical form is not the user's). */
static int tf_adm__diff(cJSON *patch, const cJSON *given, const cJSON *full, const char *path, int depth)
{
  if (depth > 16) return 0;
  if (cJSON_IsObject(full) && cJSON_IsObject(given)) {
    for (const cJSON *c = full->child; c; c = c->next) {
      char *p = tf_adm__pointer(path, c->string);
      if (!p) return -1;
      const cJSON *g = cJSON_GetObjectItemCaseSensitive(given, c->string);
      int rc = g ? tf_adm__diff(patch, g, c, p, depth + 1) : tf_adm__add_op(patch, p, c);
      free(p);
      if (rc < 0) return rc;
    }
  } else if (cJSON_IsArray(full) && cJSON_IsArray(given) && cJSON_GetArraySize(full) == cJSON_GetArraySize(given)) {
    const cJSON *g = given->child;
    int i = 0;
    for (const cJSON *c = full->child; c && g; c = c->next, g = g->next, i++) {
      char idx[24];
      snprintf(idx, sizeof(idx), "%d", i);
      char *p = tf_adm__pointer(path, idx);
      if (!p) return -1;
      int rc = tf_adm__diff(patch, g, c, p, depth + 1);
      free(p);
      if (rc < 0) return rc;
    }
  }
  return 0;
}

/* A warning for each default the patch adds ("spec.dataplane.image: defaulted to ..."), so nobody
 * is surprised by what the object says afterwards. */
static void tf_adm__default_warnings(tf_adm__verdict *v)
{
  const cJSON *op;
  cJSON_ArrayForEach(op, v->patch)
  {
    const char *ptr = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "path"));
    char *val = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(op, "value"));
    char field[256];
    size_t n = 0;
    for (const char *c = ptr ? ptr + 1 : ""; *c && n + 2 < sizeof(field); c++) {
      if (*c == '~' && (c[1] == '0' || c[1] == '1')) field[n++] = *++c == '0' ? '~' : '/';
      else field[n++] = *c == '/' ? '.' : *c;
    }
    field[n] = '\0';
    if (val && strlen(val) > 120) memcpy(val + 117, "...", 4);
    tf_adm__warn(v, "%s: defaulted to %s", field, val ? val : "?");
    cJSON_free(val);
  }
}

static tf_err tf_adm__defaults(tf_adm__verdict *v, const cJSON *object, const tf_pool *pool)
{
  char *text = NULL;
  tf_err rc = tf_pool_to_json(&text, pool);
  if (rc < 0) return rc;
  cJSON *full = cJSON_Parse(text);
  tf_free(text);
  if (!full) return tf_error__nomem();
  const cJSON *fspec = cJSON_GetObjectItemCaseSensitive(full, "spec");
  const cJSON *gspec = cJSON_GetObjectItemCaseSensitive(object, "spec");
  v->patch = cJSON_CreateArray();
  int bad = !v->patch;
  if (!bad && fspec) bad = cJSON_IsObject(gspec) ? tf_adm__diff(v->patch, gspec, fspec, "/spec", 0) < 0
                                                  : tf_adm__add_op(v->patch, "/spec", fspec) < 0;
  cJSON_Delete(full);
  if (bad) return tf_error__nomem();
  if (cJSON_GetArraySize(v->patch) == 0) {
    cJSON_Delete(v->patch);
    v->patch = NULL;
  }
  return TF_OK;
}

/* The object through the pool parser (the same walk as tf_pool_parse(), on the tree already
 * read); the namespace comes from the request when the object has none (kube-apiserver may leave
 * it out of a CREATE's object). Parse problems and validation problems become denials. */
static tf_err tf_adm__pool(tf_pool **out, tf_adm__verdict *v, const tf_admission *r, const cJSON *object)
{
  tf_err rc = tf_pool__from_tree(out, object);
  if (rc == TF_ENOMEM) return rc;
  if (rc < 0) {
    tf_adm__deny(v, "", "%s", tf_error_last()->message);
    return TF_OK;
  }
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
  if (*r->ns && !cJSON_GetObjectItemCaseSensitive(meta, "namespace")) {
    char *ns = tf_strdup__(r->ns);
    if (!ns) return tf_error__nomem();
    free((*out)->ns);
    (*out)->ns = ns;
  }
  tf_problems *problems = NULL;
  rc = tf_pool_validate(&problems, *out);
  if (rc == TF_ENOMEM) {
    tf_problems_free(problems);
    return rc;
  }
  for (size_t i = 0; i < tf_problems_count(problems); i++)
    tf_adm__deny(v, tf_problems_path(problems, i), "%s", tf_problems_message(problems, i));
  tf_problems_free(problems);
  return TF_OK;
}

static tf_err tf_adm__judge_pool(tf_adm__verdict *v, const tf_admission *r, tf_admission_kind kind,
                                 const tf_nodes *nodes, const tf_pool *const *pools, size_t count,
                                 const tf_adm__limits *lim)
{
  tf_pool *pool = NULL;
  tf_err rc = tf_adm__pool(&pool, v, r, r->object);
  if (rc < 0 || !pool || tf_problems_count(v->denials) > 0) {
    tf_pool_free(pool);
    return rc;
  }
  tf_adm__check_replicas(v, tf_pool_replicas(pool), lim->max_replicas);
  tf_adm__static_warnings(v, pool);
  if (nodes) rc = tf_adm__plan(v, pool, nodes, pools, count);
  if (rc == TF_OK && kind == TF_ADMISSION_MUTATE && tf_problems_count(v->denials) == 0)
    rc = tf_adm__defaults(v, r->object, pool);
  tf_pool_free(pool);
  return rc;
}

static tf_err tf_adm__judge_scale(tf_adm__verdict *v, const tf_admission *r, const tf_nodes *nodes,
                                  const tf_pool *const *pools, size_t count, const tf_adm__limits *lim)
{
  const cJSON *spec = cJSON_GetObjectItemCaseSensitive(r->object, "spec");
  const cJSON *n = cJSON_IsObject(spec) ? cJSON_GetObjectItemCaseSensitive(spec, "replicas") : NULL;
  if (!n) {
    tf_adm__deny(v, "spec.replicas", "required");
    return TF_OK;
  }
  double d = n->valuedouble;
  if (!cJSON_IsNumber(n) || d != floor(d) || !isfinite(d)) {
    tf_adm__deny(v, "spec.replicas", "must be an integer");
    return TF_OK;
  }
  if (d < 0) {
    tf_adm__deny(v, "spec.replicas", "%.0f is negative", d);
    return TF_OK;
  }
  if (d > 2147483647.0) {
    tf_adm__deny(v, "spec.replicas", "%.0f is above 2147483647", d);
    return TF_OK;
  }
  int64_t replicas = (int64_t)d;
  tf_adm__check_replicas(v, replicas, lim->max_replicas);
  const tf_pool *current = NULL;
  for (size_t i = 0; i < count && !current; i++)
    if (pools[i] && tf_adm__same_pool(pools[i], r->ns, r->name)) current = pools[i];
  if (!current || tf_problems_count(v->denials) > 0) return TF_OK;
  tf_pool *scaled = NULL;
  tf_err rc = tf_pool_with_replicas(&scaled, current, replicas);
  if (rc < 0) return rc == TF_ENOMEM ? rc : TF_OK;
  tf_problems *problems = NULL;
  if ((rc = tf_pool_validate(&problems, scaled)) == TF_ENOMEM) goto done;
  rc = TF_OK;
  for (size_t i = 0; i < tf_problems_count(problems); i++)
    tf_adm__deny(v, tf_problems_path(problems, i), "%s", tf_problems_message(problems, i));
  if (tf_problems_count(v->denials) == 0 && nodes) rc = tf_adm__plan(v, scaled, nodes, pools, count);
done:
  tf_problems_free(problems);
  tf_pool_free(scaled);
  return rc;
}

/* --------------------------------------------------------------- response */

/* 403 Forbidden, as kube-apiserver's own default for a denial: kubectl prints the
 * message after `admission webhook "<name>" denied the request: `; with reason
 * Invalid it would print `The TURNPool "x" is invalid` and the causes instead. */
static cJSON *tf_adm__status(const tf_problems *denials)
{
  tf_buf msg;
  tf_buf__init(&msg);
  cJSON *status = cJSON_CreateObject();
  cJSON *details = status ? cJSON_AddObjectToObject(status, "details") : NULL;
  cJSON *causes = details ? cJSON_AddArrayToObject(details, "causes") : NULL;
  int ok = causes != NULL;
  for (size_t i = 0; ok && i < tf_problems_count(denials); i++) {
    const char *path = tf_problems_path(denials, i), *text = tf_problems_message(denials, i);
    if (i) tf_buf__puts(&msg, "; ");
    if (*path) tf_buf__printf(&msg, "%s: ", path);
    tf_buf__puts(&msg, text);
    cJSON *c = cJSON_CreateObject();
    ok = c && cJSON_AddStringToObject(c, "type", "FieldValueInvalid") && cJSON_AddStringToObject(c, "message", text) &&
         cJSON_AddStringToObject(c, "field", path);
    if (c) cJSON_AddItemToArray(causes, c);
  }
  char *text = NULL;
  if (tf_buf__detach(&msg, &text) < 0) ok = 0;
  ok = ok && cJSON_AddStringToObject(status, "status", "Failure") &&
       cJSON_AddStringToObject(status, "message", text) && cJSON_AddStringToObject(status, "reason", "Forbidden") &&
       cJSON_AddNumberToObject(status, "code", 403);
  tf_free(text);
  if (!ok) {
    cJSON_Delete(status);
    return NULL;
  }
  return status;
}

static char *tf_adm__base64(const char *text)
{
  size_t n = strlen(text);
  if (n > (size_t)INT32_MAX / 2) return NULL;
  char *out = malloc(4 * ((n + 2) / 3) + 1);
  if (out) EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)text, (int)n);
  return out;
}

static tf_err tf_adm__write(char **out, const tf_admission *r, const tf_adm__verdict *v)
{
  cJSON *root = cJSON_CreateObject();
  int ok = root && cJSON_AddStringToObject(root, "apiVersion", TF__ADM_API) &&
           cJSON_AddStringToObject(root, "kind", "AdmissionReview");
  cJSON *resp = ok ? cJSON_AddObjectToObject(root, "response") : NULL;
  int allowed = tf_problems_count(v->denials) == 0;
  ok = resp && cJSON_AddStringToObject(resp, "uid", r->uid) && cJSON_AddBoolToObject(resp, "allowed", allowed);
  if (ok && !allowed) {
    cJSON *st = tf_adm__status(v->denials);
    ok = st != NULL;
    if (ok) cJSON_AddItemToObject(resp, "status", st);
  }
  if (ok && (v->warning_count || v->warnings_dropped)) {
    cJSON *w = cJSON_AddArrayToObject(resp, "warnings");
    ok = w != NULL;
    for (size_t i = 0; ok && i < v->warning_count; i++) {
      cJSON *s = cJSON_CreateString(v->warnings[i]);
      ok = s != NULL;
      if (ok) cJSON_AddItemToArray(w, s);
    }
    if (ok && v->warnings_dropped) {
      char more[64];
      snprintf(more, sizeof(more), "and %zu more warnings", v->warnings_dropped);
      cJSON *s = cJSON_CreateString(more);
      ok = s != NULL;
      if (ok) cJSON_AddItemToArray(w, s);
    }
  }
  if (ok && allowed && v->patch) {
    char *text = cJSON_PrintUnformatted(v->patch);
    char *b64 = text ? tf_adm__base64(text) : NULL;
    cJSON_free(text);
    ok = b64 && cJSON_AddStringToObject(resp, "patchType", "JSONPatch") && cJSON_AddStringToObject(resp, "patch", b64);
    free(b64);
  }
  if (!ok) {
    cJSON_Delete(root);
    return tf_error__nomem();
  }
  return tf_doc__print(out, root);
}

tf_err tf_admission_respond(char **out, int *allowed, const tf_admission *review, tf_admission_kind kind,
                            const tf_nodes *nodes, const tf_pool *const *pools, size_t pool_count,
                            const tf_admission_options *opts)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  if (allowed) *allowed = 0;
  TF_ASSERT_ARG(review);
  TF_ASSERT_ARG(kind == TF_ADMISSION_VALIDATE || kind == TF_ADMISSION_MUTATE);
  TF_ASSERT_ARG(pools || pool_count == 0);
  tf_adm__limits lim;
  tf_err rc = tf_adm__limits_of(&lim, opts);
  if (rc < 0) return rc;
  tf_adm__verdict v = {0};
  v.max_warnings = lim.max_warnings;
  v.denials = tf_problems__new();
  if (!v.denials) return tf_error__nomem();
  int write = !strcmp(review->operation, "CREATE") || !strcmp(review->operation, "UPDATE");
  int ours = !strcmp(review->group, TF__ADM_GROUP) && !strcmp(review->resource, "turnpools");
  if (write && ours && !*review->sub_resource)
    rc = tf_adm__judge_pool(&v, review, kind, nodes, pools, pool_count, &lim);
  else if (write && ours && !strcmp(review->sub_resource, "scale"))
    rc = tf_adm__judge_scale(&v, review, nodes, pools, pool_count, &lim);
  if (rc == TF_OK && v.failed) rc = tf_error__nomem();
  if (rc == TF_OK && kind == TF_ADMISSION_MUTATE) {
    /* the mutating answer only defaults, each with its warning; denials and the other warnings are
     * the validating webhook's */
    tf_problems_free(v.denials);
    v.denials = tf_problems__new();
    if (!v.denials) rc = tf_error__nomem();
    for (size_t i = 0; i < v.warning_count; i++) free(v.warnings[i]);
    v.warning_count = v.warnings_dropped = 0;
    if (v.patch) tf_adm__default_warnings(&v);
    if (v.failed) rc = tf_error__nomem();
  }
  if (rc == TF_OK) rc = tf_adm__write(out, review, &v);
  if (rc == TF_OK && allowed) *allowed = tf_problems_count(v.denials) == 0;
  tf_problems_free(v.denials);
  for (size_t i = 0; i < v.warning_count; i++) free(v.warnings[i]);
  free(v.warnings);
  cJSON_Delete(v.patch);
  return rc;
}
