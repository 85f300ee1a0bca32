/* plan: relay identities per addressing mode, stable names, conflicts.
 *
 * tf_plan_new() is a pure function of (pool, nodes, existing relays). Its steps:
 *  1. candidates: every identity the eligible nodes offer, in (node name,
 *     address, range start) order; an address offered by two nodes goes to
 *     the first node only;
 *  2. claims: a candidate sharing an (address, port) with another pool's
 *     relay is not used (claims sorted by address, binary-searched);
 *  3. kept: this pool's relays whose identity is still a usable candidate
 *     keep their names; scale-down drops the fewest allocations first;
 *  4. new: further candidates in order until replicas, hash-named and salted
 *     ("#1", "#2", ...) when a name is held by another identity or taken.
 * Every tie is broken on values, never on input order, so the same inputs
 * in any order give the byte-identical plan. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define TF__NAME_ALPHABET "bcdfghjklmnpqrstvwxz2456789"
#define TF__IDENTITY_TEXT_MAX 256 /* longer input is not an identity */
#define TF__CONFLICT_CLAUSES_MAX 10
#define TF__CONFLICT_NAMES_MAX 4
#define TF__IDENTITY_BUF (2 * TF_ADDR_STRLEN + 16) /* two addresses, ',', "/65535-65535" */

/* ---- identities ---- */

tf_err tf_identity__parse(const char *identity, tf_addr addrs[2], size_t *addr_count, tf_port_range *range)
{
  TF_ASSERT_ARG(identity);
  TF_ASSERT_ARG(addrs);
  TF_ASSERT_ARG(addr_count);
  TF_ASSERT_ARG(range);
  size_t len = strlen(identity);
  const char *slash = strrchr(identity, '/');
  if (len > TF__IDENTITY_TEXT_MAX || !slash || slash == identity)
    return tf_error__set(TF_EINVALID, "\"%.64s\" is not a relay identity ADDR[,ADDR]/START-END", identity);
  tf_port_range r;
  tf_err rc = tf_port_range_parse(&r, slash + 1);
  if (rc < 0) return rc;
  tf_addr a[2];
  size_t n = 0;
  const char *p = identity;
  while (p < slash) {
    const char *comma = memchr(p, ',', (size_t)(slash - p));
    const char *end = comma ? comma : slash;
    char text[TF_ADDR_STRLEN];
    size_t tl = (size_t)(end - p);
    if (n == 2)
      return tf_error__set(TF_EINVALID, "\"%.64s\": a relay has at most two addresses", identity);
    if (tl == 0 || tl >= sizeof(text))
      return tf_error__set(TF_EINVALID, "\"%.64s\" is not a relay identity ADDR[,ADDR]/START-END", identity);
    memcpy(text, p, tl);
    text[tl] = '\0';
    if ((rc = tf_addr_parse(&a[n], text)) < 0) return rc;
    n++;
    if (!comma) break;
    p = comma + 1;
    if (p == slash)
      return tf_error__set(TF_EINVALID, "\"%.64s\" is not a relay identity ADDR[,ADDR]/START-END", identity);
  }
  if (n == 2) {
    if (a[0].family == a[1].family)
      return tf_error__set(TF_EINVALID, "\"%.64s\": two %s addresses", identity,
                           a[0].family == TF_AF_INET ? "IPv4" : "IPv6");
    if (a[0].family == TF_AF_INET6) {
      tf_addr t = a[0];
      a[0] = a[1];
      a[1] = t;
    }
  }
  addrs[0] = a[0];
  if (n == 2) addrs[1] = a[1];
  *addr_count = n;
  *range = r;
  return TF_OK;
}

static char *tf_plan__put_u(char *p, unsigned v)
{
  char t[10];
  int n = 0;
  do {
    t[n++] = (char)('0' + v % 10u);
    v /= 10u;
  } while (v);
  while (n) *p++ = t[--n];
  return p;
}

/* Canonical text of an address, IPv4 without printf (planning formats many). */
static char *tf_plan__put_addr(char *p, const tf_addr *a)
{
  if (a->family == TF_AF_INET) {
    for (int i = 0; i < 4; i++) {
      if (i) *p++ = '.';
      p = tf_plan__put_u(p, a->bytes[i]);
    }
    return p;
  }
  tf_addr_format(p, TF_ADDR_STRLEN, a);
  return p + strlen(p);
}

tf_err tf_identity__format(char *buf, size_t size, const tf_addr *addrs, size_t addr_count, tf_port_range range)
{
  TF_ASSERT_ARG(buf);
  TF_ASSERT_ARG(addrs);
  TF_ASSERT_ARG(addr_count == 1 || addr_count == 2);
  for (size_t i = 0; i < addr_count; i++)
    if (addrs[i].family != TF_AF_INET && addrs[i].family != TF_AF_INET6)
      return tf_error__set(TF_EINVALID, "address family %u is not 4 or 6", addrs[i].family);
  char tmp[TF__IDENTITY_BUF];
  size_t first = addr_count == 2 && addrs[0].family == TF_AF_INET6 ? 1 : 0;
  char *p = tf_plan__put_addr(tmp, &addrs[first]);
  if (addr_count == 2) {
    *p++ = ',';
    p = tf_plan__put_addr(p, &addrs[1 - first]);
  }
  *p++ = '/';
  p = tf_plan__put_u(p, range.start);
  *p++ = '-';
  p = tf_plan__put_u(p, range.end);
  *p = '\0';
  size_t n = (size_t)(p - tmp);
  if (n + 1 > size) return tf_error__set(TF_EBUFS, "identity needs %zu bytes, buffer has %zu", n + 1, size);
  memcpy(buf, tmp, n + 1);
  return TF_OK;
}

static void tf_plan__encode_name(char *buf, const char *pool, size_t pool_len, uint32_t h)
{
  memcpy(buf, pool, pool_len);
  memcpy(buf + pool_len, "-relay-", 7);
  char *p = buf + pool_len + 7;
  for (int i = 0; i < 5; i++) {
    p[i] = TF__NAME_ALPHABET[h % 27u];
    h /= 27u;
  }
  p[5] = '\0';
}

tf_err tf_relay_name_for(char *buf, size_t size, const char *pool, const char *identity)
{
  TF_ASSERT_ARG(buf);
  TF_ASSERT_ARG(pool && *pool);
  TF_ASSERT_ARG(identity);
  size_t pl = strlen(pool);
  if (pl + 13 > TF_RELAY_NAME_MAX)
    return tf_error__set(TF_EINVALID, "pool name \"%.64s\" is longer than %d characters", pool, TF_RELAY_NAME_MAX - 13);
  if (pl + 13 > size) return tf_error__set(TF_EBUFS, "relay name needs %zu bytes, buffer has %zu", pl + 13, size);
  tf_plan__encode_name(buf, pool, pl, tf_fnv1a32__(identity, strlen(identity)));
  return TF_OK;
}

/* ---- existing relays ---- */

tf_err tf_existing_new(tf_existing **out)
{
  TF_ASSERT_ARG(out);
  *out = calloc(1, sizeof(tf_existing));
  return *out ? TF_OK : tf_error__nomem();
}

size_t tf_existing_count(const tf_existing *fleet) { return fleet ? fleet->count : 0; }

static void tf_plan__record_free(tf_existing_record *r)
{
  free(r->pool);
  free(r->name);
  free(r->identity);
  free(r->listener_ports);
}

void tf_existing_free(tf_existing *fleet)
{
  if (!fleet) return;
  for (size_t i = 0; i < fleet->count; i++) tf_plan__record_free(&fleet->items[i]);
  free(fleet->items);
  free(fleet);
}

/* Add a record; @p where prefixes field paths in messages ("relays[2]."). */
static tf_err tf_plan__fleet_add(tf_existing *fleet, const char *pool, const char *name, const char *identity,
                                 int64_t allocations, const uint16_t *ports, size_t port_count, const char *where)
{
  if (!identity) return tf_error__set(TF_EINVALID, "%sidentity: required", where);
  if (pool && *pool && !tf_inventory__valid_name(pool, 253))
    return tf_error__set(TF_EINVALID, "%spool: \"%.64s\" is not a valid pool name", where, pool);
  if (!name && !(pool && *pool))
    return tf_error__set(TF_EINVALID, "%sname: required for a relay of the planned pool", where);
  if (name && !tf_inventory__valid_name(name, TF_RELAY_NAME_MAX - 1))
    return tf_error__set(TF_EINVALID, "%sname: \"%.64s\" is not a valid relay name", where, name);
  if (allocations < -1)
    return tf_error__set(TF_EINVALID, "%sallocations: %lld is not -1 (unknown) or a count", where,
                         (long long)allocations);
  if (port_count && !ports) return tf_error__set(TF_EINVALID, "%slistenerPorts: NULL with %zu entries", where, port_count);
  for (size_t i = 0; i < port_count; i++)
    if (ports[i] == 0) return tf_error__set(TF_EINVALID, "%slistenerPorts[%zu]: 0 is not a port", where, i);

  tf_existing_record r;
  memset(&r, 0, sizeof(r));
  if (tf_identity__parse(identity, r.addrs, &r.addr_count, &r.range) < 0) {
    char why[512];
    snprintf(why, sizeof(why), "%s", tf_error_last()->message);
    return tf_error__set(TF_EINVALID, "%sidentity: %s", where, why);
  }
  char canonical[TF__IDENTITY_BUF];
  if (tf_identity__format(canonical, sizeof(canonical), r.addrs, r.addr_count, r.range) < 0) return TF_EINVALID;
  if (fleet->count == fleet->cap) {
    size_t cap = fleet->cap ? fleet->cap * 2 : 16;
    tf_existing_record *items = realloc(fleet->items, cap * sizeof(*items));
    if (!items) return tf_error__nomem();
    fleet->items = items;
    fleet->cap = cap;
  }
  r.allocations = allocations;
  r.pool = (pool && *pool) ? strdup(pool) : NULL;
  r.name = name ? strdup(name) : NULL;
  r.identity = strdup(canonical);
  r.listener_port_count = port_count;
  r.listener_ports = port_count ? malloc(port_count * sizeof(uint16_t)) : NULL;
  if ((pool && *pool && !r.pool) || (name && !r.name) || !r.identity || (port_count && !r.listener_ports)) {
    tf_plan__record_free(&r);
    return tf_error__nomem();
  }
  if (port_count) memcpy(r.listener_ports, ports, port_count * sizeof(uint16_t));
  fleet->items[fleet->count++] = r;
  return TF_OK;
}

tf_err tf_existing_add(tf_existing *fleet, const char *pool, const char *name, const char *identity, int64_t allocations,
                    const uint16_t *listener_ports, size_t listener_ports_count)
{
  TF_ASSERT_ARG(fleet);
  return tf_plan__fleet_add(fleet, pool, name, identity, allocations, listener_ports, listener_ports_count, "");
}

static int tf_plan__json_int(const cJSON *v, double lo, double hi, int64_t *out)
{
  if (!cJSON_IsNumber(v)) return -1;
  double d = v->valuedouble;
  if (!(d >= lo && d <= hi) || d != (double)(int64_t)d) return -1;
  *out = (int64_t)d;
  return 0;
}

static const cJSON *tf_plan__member(const cJSON *obj, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsNull(v) ? NULL : v;
}

static tf_err tf_plan__fleet_record(tf_existing *fleet, const cJSON *rec, const char *default_pool, const char *where)
{
  if (!cJSON_IsObject(rec)) return tf_error__set(TF_EINVALID, "%.*s: must be an object", (int)strlen(where) - 1, where);
  const char *s[3] = {default_pool, NULL, NULL};
  static const char *const keys[3] = {"pool", "name", "identity"};
  for (int k = 0; k < 3; k++) {
    const cJSON *v = tf_plan__member(rec, keys[k]);
    if (!v) continue;
    if (!cJSON_IsString(v)) return tf_error__set(TF_EINVALID, "%s%s: must be a string", where, keys[k]);
    s[k] = v->valuestring;
  }
  int64_t allocations = -1;
  const cJSON *a = tf_plan__member(rec, "allocations");
  if (a && tf_plan__json_int(a, -1, 9007199254740992.0, &allocations) < 0)
    return tf_error__set(TF_EINVALID, "%sallocations: must be an integer >= -1", where);

  /* listenerPorts, else the ports of a plan's `listeners` */
  const char *key = "listenerPorts";
  const cJSON *ports = tf_plan__member(rec, key);
  int from_listeners = !ports;
  if (from_listeners) ports = tf_plan__member(rec, key = "listeners");
  size_t n = 0;
  uint16_t *list = NULL;
  if (ports) {
    if (!cJSON_IsArray(ports)) return tf_error__set(TF_EINVALID, "%s%s: must be a list", where, key);
    size_t cap = (size_t)cJSON_GetArraySize(ports);
    list = malloc((cap ? cap : 1) * sizeof(uint16_t));
    if (!list) return tf_error__nomem();
    const cJSON *p;
    cJSON_ArrayForEach(p, ports)
    {
      const cJSON *v = p;
      if (from_listeners) {
        if (!cJSON_IsObject(p)) {
          free(list);
          return tf_error__set(TF_EINVALID, "%slisteners[%zu]: must be an object", where, n);
        }
        v = tf_plan__member(p, "port");
      }
      int64_t port;
      if (tf_plan__json_int(v, 1, 65535, &port) < 0) {
        free(list);
        return tf_error__set(TF_EINVALID, "%s%s[%zu]%s: must be a port 1-65535", where, key, n,
                             from_listeners ? ".port" : "");
      }
      list[n++] = (uint16_t)port;
    }
  }
  tf_err rc = tf_plan__fleet_add(fleet, s[0], s[1], s[2], allocations, list, n, where);
  free(list);
  return rc;
}

tf_err tf_existing_parse(tf_existing **out, const char *json, size_t len)
{
  return tf_existing_parse_with(out, json, len, NULL);
}

tf_err tf_existing_parse_with(tf_existing **out, const char *json, size_t len, const tf_parse_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(json || len == 0);
  *out = NULL;
  cJSON *root = NULL;
  tf_err rc = tf_doc__parse_json(&root, json ? json : "", len, opts);
  if (rc < 0) return rc;
  const cJSON *relays = root;
  const char *default_pool = NULL;
  const char *prefix = "";
  if (cJSON_IsObject(root)) {
    const cJSON *p = tf_plan__member(root, "pool");
    relays = tf_plan__member(root, "relays");
    prefix = "relays";
    if (p && !cJSON_IsString(p)) rc = tf_error__set(TF_EINVALID, "pool: must be a string");
    else if (!relays) rc = tf_error__set(TF_EINVALID, "relays: required");
    else if (!cJSON_IsArray(relays)) rc = tf_error__set(TF_EINVALID, "relays: must be a list");
    default_pool = p ? p->valuestring : NULL;
  } else if (!cJSON_IsArray(root)) {
    rc = tf_error__set(TF_EINVALID, "document: must be a list of relay records or an object with `relays`");
  }
  tf_existing *fleet = NULL;
  if (rc == TF_OK) rc = tf_existing_new(&fleet);
  if (rc == TF_OK) {
    size_t i = 0;
    const cJSON *rec;
    cJSON_ArrayForEach(rec, relays)
    {
      char where[48];
      snprintf(where, sizeof(where), "%s[%zu].", prefix, i++);
      if ((rc = tf_plan__fleet_record(fleet, rec, default_pool, where)) < 0) break;
    }
  }
  cJSON_Delete(root);
  if (rc < 0) {
    tf_existing_free(fleet);
    return rc;
  }
  *out = fleet;
  return TF_OK;
}

/* ---- planning ---- */

enum { TF__CAND_USABLE = 0, TF__CAND_DUPLICATE = 1, TF__CAND_CONFLICT = 2 };

typedef struct tf_plan__cand {
  tf_addr addrs[2];
  tf_port_range range;
  uint32_t node;
  uint32_t slice;
  uint8_t addr_count;
  uint8_t state;
  uint8_t chosen;
  const char *kept; /* the fleet record's name when a kept relay holds it */
} tf_plan__cand;

/* One address of a candidate or of a claim, for sorting by address. */
typedef struct tf_plan__ref {
  tf_addr addr;
  uint32_t owner; /* candidate or fleet record index */
  uint32_t node;  /* candidate's node index */
} tf_plan__ref;

/* A fleet record of this pool whose identity is still a usable candidate. */
typedef struct tf_plan__pick {
  uint32_t cand;
  int64_t allocations; /* the record's, -1 counted as 0 */
  const char *name;    /* the record's */
} tf_plan__pick;

/* Relay names seen while planning: the map gives each name's entry in info. */
typedef struct tf_plan__names {
  tf_map map;
  struct tf_plan__name_info {
    const tf_existing_record *holder; /* a fleet record of this pool with the name */
    int holders_differ;            /* records with the name hold different identities */
    int taken;                     /* used in this plan */
  } *info;
  size_t count;
} tf_plan__names;

typedef struct tf_plan__work {
  const tf_pool *pool;
  const tf_nodes *nodes;
  const tf_existing *fleet;
  tf_plan__cand *cands;
  size_t cand_count, cand_cap;
  tf_buf conflicts;      /* the AddressConflict message */
  size_t conflict_count; /* clauses, written or not */
  size_t in_use;         /* of them: addresses claimed by another pool or offered twice */
  struct tf_plan__refusal {
    uint32_t node;
    tf_addr addr;
    const char *why;    /* static text, or the reserved endpoint's what */
    uint16_t port;      /* the reserved endpoint's port, or 0 */
  } *refused;           /* node addresses no relay may use, in node order */
  size_t refused_count, refused_cap;
} tf_plan__work;

#define TF_PLAN__LOOPBACK_WHY(range)                                                                        \
  "loopback (" range "), which hosts relays only on a node labelled " TF_LABEL_DEVELOPMENT "=true"

/* Why @p a can never be a relay's address (a relay there would listen on every address, on a
 * group, on a link only, on what no host owns, or on what only the host itself reaches unless its
 * node is a development one), NULL when it can. */
static const char *tf_plan__unusable(const tf_addr *a, int development)
{
  const uint8_t *b = a->bytes;
  if (a->family == TF_AF_INET) {
    if (b[0] == 0) return "unspecified (0.0.0.0/8, \"this network\")";
    if (b[0] == 127 && !development) return TF_PLAN__LOOPBACK_WHY("127.0.0.0/8");
    if (b[0] == 169 && b[1] == 254) return "link-local (169.254.0.0/16, with the cloud metadata address)";
    if (b[0] >= 224 && b[0] <= 239) return "multicast";
    if (b[0] == 255 && b[1] == 255 && b[2] == 255 && b[3] == 255) return "the limited broadcast address";
    if (b[0] >= 240) return "reserved (240.0.0.0/4)";
    return NULL;
  }
  static const uint8_t zero[16];
  if (memcmp(b, zero, sizeof(zero)) == 0) return "unspecified (::)";
  if (memcmp(b, zero, 15) == 0 && b[15] == 1 && !development) return TF_PLAN__LOOPBACK_WHY("::1");
  if (b[0] == 0xff) return "multicast";
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local (fe80::/10)";
  return NULL;
}

/* 1 when @p port is the pool's relay range or one of its listener ports. */
static int tf_plan__pool_holds_port(const tf_pool *pool, uint16_t port)
{
  if (port >= pool->range.start && port <= pool->range.end) return 1;
  for (size_t i = 0; i < pool->listener_count; i++)
    if (pool->listeners[i].port == port) return 1;
  return 0;
}

/* 1 (and the refusal noted) when node @p node's address @p a may host no relay of this pool:
 * an unusable address, or a reserved endpoint's address whose port the pool would take. */
static int tf_plan__refuse(tf_plan__work *w, uint32_t node, const tf_addr *a)
{
  if (!a) return 0;
  const char *why = tf_plan__unusable(a, tf_inventory__development(&w->nodes->items[node]));
  uint16_t port = 0;
  for (size_t i = 0; !why && i < w->nodes->reserved_count; i++) {
    const struct tf_nodes__reserved *r = &w->nodes->reserved[i];
    if (tf_addr_compare(&r->addr, a) == 0 && tf_plan__pool_holds_port(w->pool, r->port)) {
      why = r->what;
      port = r->port;
    }
  }
  if (!why) return 0;
  if (w->refused_count == w->refused_cap) {
    size_t cap = w->refused_cap ? 2 * w->refused_cap : 8;
    struct tf_plan__refusal *n = realloc(w->refused, cap * sizeof(*n));
    if (!n) return 1; /* refused all the same: out of memory, only its mention is lost */
    w->refused = n;
    w->refused_cap = cap;
  }
  w->refused[w->refused_count++] = (struct tf_plan__refusal){node, *a, why, port};
  return 1;
}

static tf_err tf_plan__push(tf_plan__work *w, uint32_t node, const tf_addr *a4, const tf_addr *a6, tf_port_range range,
                            uint32_t slice)
{
  if (w->cand_count == w->cand_cap) {
    size_t cap = w->cand_cap ? w->cand_cap * 2 : 64;
    if (cap > UINT32_MAX) return tf_error__nomem();
    tf_plan__cand *c = realloc(w->cands, cap * sizeof(*c));
    if (!c) return tf_error__nomem();
    w->cands = c;
    w->cand_cap = cap;
  }
  tf_plan__cand *c = &w->cands[w->cand_count++];
  memset(c, 0, sizeof(*c));
  if (a4) c->addrs[c->addr_count++] = *a4;
  if (a6) c->addrs[c->addr_count++] = *a6;
  c->range = range;
  c->node = node;
  c->slice = slice;
  return TF_OK;
}

static int tf_plan__addr_cmp(const void *a, const void *b) { return tf_addr_compare(a, b); }

static int tf_plan__in_external_pool(const tf_pool *pool, const tf_addr *a)
{
  for (size_t k = 0; k < pool->external_prefix_count; k++)
    if (tf_prefix_contains(&pool->external_prefixes[k], a)) return 1;
  return 0;
}

/* ExternalIPPool and PodIP: a relay per listed address of the family; DualStack
 * pairs the i-th IPv4 with the i-th IPv6 in address order. */
static tf_err tf_plan__listed(tf_plan__work *w, uint32_t node, const tf_addr *list, size_t n, int want4, int want6,
                              tf_addr *scratch)
{
  size_t n4 = 0, n6 = 0;
  int filter = w->pool->mode == TF_MODE_EXTERNAL_IP_POOL;
  for (size_t k = 0; k < n; k++) {
    if (filter && !tf_plan__in_external_pool(w->pool, &list[k])) continue;
    if (list[k].family == TF_AF_INET && want4 && !tf_plan__refuse(w, node, &list[k])) scratch[n4++] = list[k];
  }
  for (size_t k = 0; k < n; k++) {
    if (filter && !tf_plan__in_external_pool(w->pool, &list[k])) continue;
    if (list[k].family == TF_AF_INET6 && want6 && !tf_plan__refuse(w, node, &list[k])) scratch[n4 + n6++] = list[k];
  }
  qsort(scratch, n4, sizeof(tf_addr), tf_plan__addr_cmp);
  qsort(scratch + n4, n6, sizeof(tf_addr), tf_plan__addr_cmp);
  tf_err rc = TF_OK;
  if (want4 && want6) {
    for (size_t k = 0; k < n4 && k < n6 && rc == TF_OK; k++)
      rc = tf_plan__push(w, node, &scratch[k], &scratch[n4 + k], w->pool->range, 0);
  } else {
    for (size_t k = 0; k < n4 + n6 && rc == TF_OK; k++)
      rc = tf_plan__push(w, node, want4 ? &scratch[k] : NULL, want4 ? NULL : &scratch[k], w->pool->range, 0);
  }
  return rc;
}

static tf_err tf_plan__candidates(tf_plan__work *w)
{
  const tf_pool *pool = w->pool;
  int want4 = pool->family != TF_FAMILY_IPV6;
  int want6 = pool->family != TF_FAMILY_IPV4;
  uint32_t k = pool->mode == TF_MODE_PARTITIONED_IP && pool->relays_per_node > 0 ? pool->relays_per_node : 1;
  uint32_t size = tf_port_range_size(pool->range);
  size_t scratch_cap = 0;
  tf_addr *scratch = NULL;
  tf_err rc = TF_OK;
  for (size_t i = 0; i < w->nodes->count && rc == TF_OK; i++) {
    if (!tf_nodes_eligible(w->nodes, i, pool)) continue;
    const tf_node *node = &w->nodes->items[i];
    if (pool->mode == TF_MODE_HOST_NETWORK || pool->mode == TF_MODE_PARTITIONED_IP) {
      const tf_addr *a4 = want4 ? tf_inventory__host_address(node, TF_AF_INET) : NULL;
      const tf_addr *a6 = want6 ? tf_inventory__host_address(node, TF_AF_INET6) : NULL;
      if ((want4 && !a4) || (want6 && !a6)) continue;
      int r4 = tf_plan__refuse(w, (uint32_t)i, a4), r6 = tf_plan__refuse(w, (uint32_t)i, a6);
      if (r4 || r6) continue;
      /* slice s gets size/k ports, the first size%k slices one more */
      uint32_t start = pool->range.start;
      for (uint32_t s = 0; s < k && rc == TF_OK; s++) {
        uint32_t ports = size / k + (s < size % k ? 1u : 0u);
        if (ports == 0) break;
        tf_port_range r = {(uint16_t)start, (uint16_t)(start + ports - 1)};
        rc = tf_plan__push(w, (uint32_t)i, a4, a6, r, s);
        start += ports;
      }
      continue;
    }
    const tf_addr *list = pool->mode == TF_MODE_EXTERNAL_IP_POOL ? node->external_addresses : node->pod_addresses;
    size_t n = pool->mode == TF_MODE_EXTERNAL_IP_POOL ? node->external_address_count : node->pod_address_count;
    if (n == 0) continue;
    if (n > scratch_cap) {
      tf_addr *s = realloc(scratch, n * sizeof(tf_addr));
      if (!s) {
        rc = tf_error__nomem();
        break;
      }
      scratch = s;
      scratch_cap = n;
    }
    rc = tf_plan__listed(w, (uint32_t)i, list, n, want4, want6, scratch);
  }
  free(scratch);
  return rc;
}

static int tf_plan__ref_cmp(const void *pa, const void *pb)
{
  const tf_plan__ref *a = pa, *b = pb;
  int c = tf_addr_compare(&a->addr, &b->addr);
  if (c) return c;
  if (a->node != b->node) return a->node < b->node ? -1 : 1;
  return a->owner < b->owner ? -1 : a->owner > b->owner;
}

/* Start the next clause of the AddressConflict message, or count it only. */
static int tf_plan__clause(tf_plan__work *w)
{
  if (w->conflict_count++ >= TF__CONFLICT_CLAUSES_MAX) return 0;
  if (w->conflict_count > 1) tf_buf__puts(&w->conflicts, "; ");
  return 1;
}

/* An address offered by several nodes is used by the first node (by name) only. */
static tf_err tf_plan__duplicates(tf_plan__work *w)
{
  size_t n = 0;
  for (size_t i = 0; i < w->cand_count; i++) n += w->cands[i].addr_count;
  tf_plan__ref *refs = malloc((n ? n : 1) * sizeof(*refs));
  if (!refs) return tf_error__nomem();
  n = 0;
  for (size_t i = 0; i < w->cand_count; i++)
    for (size_t k = 0; k < w->cands[i].addr_count; k++)
      refs[n++] = (tf_plan__ref){w->cands[i].addrs[k], (uint32_t)i, w->cands[i].node};
  qsort(refs, n, sizeof(*refs), tf_plan__ref_cmp);
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && tf_addr_compare(&refs[e].addr, &refs[g].addr) == 0) e++;
    if (refs[e - 1].node != refs[g].node) {
      /* the nodes sharing the address, in name order (refs are sorted by node) */
      size_t listed = 0, distinct = 0;
      int write = tf_plan__clause(w);
      w->in_use++;
      char a[TF_ADDR_STRLEN];
      tf_addr_format(a, sizeof(a), &refs[g].addr);
      if (write) tf_buf__printf(&w->conflicts, "%s is offered by nodes ", a);
      for (size_t j = g; j < e; j++) {
        tf_plan__cand *c = &w->cands[refs[j].owner];
        if (refs[j].node != refs[g].node && c->state == TF__CAND_USABLE) c->state = TF__CAND_DUPLICATE;
        if (j > g && refs[j].node == refs[j - 1].node) continue;
        distinct++;
        if (write && listed < TF__CONFLICT_NAMES_MAX)
          tf_buf__printf(&w->conflicts, "%s%s", listed++ ? ", " : "", w->nodes->items[refs[j].node].name);
      }
      if (write && distinct > listed) tf_buf__printf(&w->conflicts, " and %zu more", distinct - listed);
      if (write) tf_buf__printf(&w->conflicts, " (only %s uses it)", w->nodes->items[refs[g].node].name);
    }
    g = e;
  }
  free(refs);
  return TF_OK;
}

/* The refused node addresses as clauses of the AddressConflict message: the node, the address
 * and why. */
static void tf_plan__refusals(tf_plan__work *w)
{
  for (size_t i = 0; i < w->refused_count; i++) {
    const struct tf_plan__refusal *r = &w->refused[i];
    if (!tf_plan__clause(w)) continue;
    char a[TF_ADDR_STRLEN];
    tf_addr_format(a, sizeof(a), &r->addr);
    if (r->port)
      tf_buf__printf(&w->conflicts, "node %s: %s is refused: %s listens on port %u there, within the pool's ports",
                     w->nodes->items[r->node].name, a, r->why, r->port);
    else
      tf_buf__printf(&w->conflicts, "node %s: %s is refused: %s", w->nodes->items[r->node].name, a, r->why);
  }
}

static int tf_plan__is_other_pool(const tf_existing_record *r, const char *pool)
{
  return r->pool && *r->pool && strcmp(r->pool, pool) != 0;
}

static int tf_plan__overlap(tf_port_range a, tf_port_range b) { return a.start <= b.end && b.start <= a.end; }

static int tf_plan__in(uint16_t port, tf_port_range r) { return port >= r.start && port <= r.end; }

/* Do a candidate's ports (range and shifted listeners) meet a claim's? */
static int tf_plan__ports_meet(const tf_pool *pool, const tf_plan__cand *c, const tf_existing_record *claim)
{
  if (tf_plan__overlap(c->range, claim->range)) return 1;
  for (size_t i = 0; i < pool->listener_count; i++) {
    uint32_t port = (uint32_t)pool->listeners[i].port + c->slice;
    if (port > 65535) continue;
    if (tf_plan__in((uint16_t)port, claim->range)) return 1;
    for (size_t j = 0; j < claim->listener_port_count; j++)
      if (claim->listener_ports[j] == port) return 1;
  }
  for (size_t j = 0; j < claim->listener_port_count; j++)
    if (tf_plan__in(claim->listener_ports[j], c->range)) return 1;
  return 0;
}

typedef struct tf_plan__hit {
  tf_addr addr;
  const char *pool;
} tf_plan__hit;

static int tf_plan__hit_cmp(const void *pa, const void *pb)
{
  const tf_plan__hit *a = pa, *b = pb;
  int c = tf_addr_compare(&a->addr, &b->addr);
  return c ? c : strcmp(a->pool, b->pool);
}

/* Other pools' claims: sorted by address, each candidate address binary-searched. */
static tf_err tf_plan__claims(tf_plan__work *w)
{
  const tf_existing *f = w->fleet;
  size_t n = 0;
  for (size_t i = 0; f && i < f->count; i++)
    if (tf_plan__is_other_pool(&f->items[i], w->pool->name)) n += f->items[i].addr_count;
  if (n == 0) return TF_OK;
  tf_plan__ref *claims = malloc(n * sizeof(*claims));
  size_t hit_cap = 16, hit_count = 0;
  tf_plan__hit *hits = malloc(hit_cap * sizeof(*hits));
  if (!claims || !hits) {
    free(claims);
    free(hits);
    return tf_error__nomem();
  }
  n = 0;
  for (size_t i = 0; i < f->count; i++)
    if (tf_plan__is_other_pool(&f->items[i], w->pool->name))
      for (size_t k = 0; k < f->items[i].addr_count; k++) claims[n++] = (tf_plan__ref){f->items[i].addrs[k], (uint32_t)i, 0};
  qsort(claims, n, sizeof(*claims), tf_plan__ref_cmp);

  tf_err rc = TF_OK;
  for (size_t i = 0; i < w->cand_count && rc == TF_OK; i++) {
    tf_plan__cand *c = &w->cands[i];
    for (size_t k = 0; k < c->addr_count && rc == TF_OK; k++) {
      size_t lo = 0, hi = n;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tf_addr_compare(&claims[mid].addr, &c->addrs[k]) < 0) lo = mid + 1;
        else hi = mid;
      }
      for (size_t j = lo; j < n && tf_addr_compare(&claims[j].addr, &c->addrs[k]) == 0; j++) {
        const tf_existing_record *claim = &f->items[claims[j].owner];
        if (!tf_plan__ports_meet(w->pool, c, claim)) continue;
        c->state = TF__CAND_CONFLICT;
        if (hit_count == hit_cap) {
          tf_plan__hit *h = realloc(hits, 2 * hit_cap * sizeof(*hits));
          if (!h) {
            rc = tf_error__nomem();
            break;
          }
          hits = h;
          hit_cap *= 2;
        }
        hits[hit_count++] = (tf_plan__hit){c->addrs[k], claim->pool};
      }
    }
  }
  if (rc == TF_OK) {
    qsort(hits, hit_count, sizeof(*hits), tf_plan__hit_cmp);
    for (size_t g = 0; g < hit_count;) {
      size_t e = g + 1;
      while (e < hit_count && tf_addr_compare(&hits[e].addr, &hits[g].addr) == 0) e++;
      w->in_use++;
      if (tf_plan__clause(w)) {
        char a[TF_ADDR_STRLEN];
        tf_addr_format(a, sizeof(a), &hits[g].addr);
        size_t distinct = 0, listed = 0;
        for (size_t j = g; j < e; j++) distinct += (j == g || strcmp(hits[j].pool, hits[j - 1].pool) != 0);
        tf_buf__printf(&w->conflicts, "%s is in use by pool%s ", a, distinct > 1 ? "s" : "");
        for (size_t j = g; j < e; j++) {
          if (j > g && strcmp(hits[j].pool, hits[j - 1].pool) == 0) continue;
          if (listed == TF__CONFLICT_NAMES_MAX) break;
          tf_buf__printf(&w->conflicts, "%s%s", listed++ ? ", " : "", hits[j].pool);
        }
        if (distinct > listed) tf_buf__printf(&w->conflicts, " and %zu more", distinct - listed);
      }
      g = e;
    }
  }
  free(claims);
  free(hits);
  return rc;
}

/* Candidates ordered by identity, for looking up fleet records. */
static int tf_plan__key_cmp(const tf_addr *a, size_t an, tf_port_range ar, const tf_addr *b, size_t bn,
                            tf_port_range br)
{
  if (an != bn) return an < bn ? -1 : 1;
  for (size_t k = 0; k < an; k++) {
    int c = tf_addr_compare(&a[k], &b[k]);
    if (c) return c;
  }
  if (ar.start != br.start) return ar.start < br.start ? -1 : 1;
  if (ar.end != br.end) return ar.end < br.end ? -1 : 1;
  return 0;
}

static int tf_plan__cand_index_cmp(const void *pa, const void *pb, void *arg)
{
  const tf_plan__cand *cands = arg;
  const tf_plan__cand *a = &cands[*(const uint32_t *)pa], *b = &cands[*(const uint32_t *)pb];
  return tf_plan__key_cmp(a->addrs, a->addr_count, a->range, b->addrs, b->addr_count, b->range);
}

static int64_t tf_plan__allocs(int64_t a) { return a < 0 ? 0 : a; }

/* Kept relays, one per identity: most allocations, then smallest name. */
static int tf_plan__pick_by_cand(const void *pa, const void *pb)
{
  const tf_plan__pick *a = pa, *b = pb;
  if (a->cand != b->cand) return a->cand < b->cand ? -1 : 1;
  if (a->allocations != b->allocations) return a->allocations > b->allocations ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* ... and one per name: most allocations, then first identity. */
static int tf_plan__pick_by_name(const void *pa, const void *pb)
{
  const tf_plan__pick *a = pa, *b = pb;
  int c = strcmp(a->name, b->name);
  if (c) return c;
  if (a->allocations != b->allocations) return a->allocations > b->allocations ? -1 : 1;
  return a->cand < b->cand ? -1 : a->cand > b->cand;
}

/* Scale-down keeps the most allocations; ties keep the smaller name. */
static int tf_plan__pick_by_allocs(const void *pa, const void *pb)
{
  const tf_plan__pick *a = pa, *b = pb;
  if (a->allocations != b->allocations) return a->allocations > b->allocations ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* The entry of @p name (borrowed: it must outlive the planning), added empty
 * when absent (*fresh = 1); NULL when out of memory. */
static struct tf_plan__name_info *tf_plan__name(tf_plan__names *t, const char *name, int *fresh)
{
  uint64_t *at = NULL;
  int rc = tf_map__insert(&t->map, 0, name, strlen(name), t->count, &at);
  if (rc < 0) return NULL;
  if (rc == 1) memset(&t->info[t->count++], 0, sizeof(t->info[0]));
  if (fresh) *fresh = rc;
  return &t->info[*at];
}

static int tf_plan__record_is(const tf_existing_record *r, const tf_plan__cand *c)
{
  return tf_plan__key_cmp(r->addrs, r->addr_count, r->range, c->addrs, c->addr_count, c->range) == 0;
}

static tf_err tf_plan__append_condition(tf_plan *plan, const char *type, const char *status, const char *reason,
                                        char *message)
{
  tf_condition *c = &plan->conditions[plan->condition_count];
  c->type = strdup(type);
  c->status = strdup(status);
  c->reason = strdup(reason);
  c->message = message;
  plan->condition_count++;
  if (!c->type || !c->status || !c->reason || !c->message) return tf_error__nomem();
  return TF_OK;
}

/* Choose the relays and fill @p plan. */
static tf_err tf_plan__choose(tf_plan__work *w, tf_plan *plan)
{
  const tf_pool *pool = w->pool;
  const tf_existing *f = w->fleet;
  size_t usable = 0;
  for (size_t i = 0; i < w->cand_count; i++) usable += w->cands[i].state == TF__CAND_USABLE;
  size_t own = 0;
  for (size_t i = 0; f && i < f->count; i++) own += !tf_plan__is_other_pool(&f->items[i], pool->name) && f->items[i].name;
  size_t replicas = pool->replicas < 0 ? 0 : (uint64_t)pool->replicas > usable ? usable : (size_t)pool->replicas;

  uint32_t *index = malloc((usable ? usable : 1) * sizeof(*index));
  tf_plan__pick *picks = malloc((own + 1) * sizeof(*picks));
  /* one name per own record, one per new relay */
  tf_plan__names names = {.info = malloc((own + replicas + 1) * sizeof(*names.info))};
  tf_map__init(&names.map);
  tf_buf strings;
  tf_buf__init(&strings);
  size_t *offsets = NULL;
  tf_err rc = TF_OK;
  if (!index || !picks || !names.info) {
    rc = tf_error__nomem();
    goto done;
  }

  /* this pool's fleet records: names held, and kept identities */
  size_t n = 0, kept = 0;
  for (size_t i = 0; i < w->cand_count; i++)
    if (w->cands[i].state == TF__CAND_USABLE) index[n++] = (uint32_t)i;
  qsort_r(index, n, sizeof(*index), tf_plan__cand_index_cmp, w->cands);
  for (size_t i = 0; f && i < f->count; i++) {
    const tf_existing_record *r = &f->items[i];
    if (tf_plan__is_other_pool(r, pool->name) || !r->name) continue;
    int fresh;
    struct tf_plan__name_info *s = tf_plan__name(&names, r->name, &fresh);
    if (!s) {
      rc = tf_error__nomem();
      goto done;
    }
    if (fresh) {
      s->holder = r;
    } else if (tf_plan__key_cmp(s->holder->addrs, s->holder->addr_count, s->holder->range, r->addrs, r->addr_count,
                                r->range) != 0) {
      s->holders_differ = 1;
    }
    size_t lo = 0, hi = n;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      const tf_plan__cand *c = &w->cands[index[mid]];
      int cmp = tf_plan__key_cmp(c->addrs, c->addr_count, c->range, r->addrs, r->addr_count, r->range);
      if (cmp == 0) {
        picks[kept++] = (tf_plan__pick){index[mid], tf_plan__allocs(r->allocations), r->name};
        break;
      }
      if (cmp < 0) lo = mid + 1;
      else hi = mid;
    }
  }
  /* one kept relay per identity, then one per name */
  qsort(picks, kept, sizeof(*picks), tf_plan__pick_by_cand);
  n = 0;
  for (size_t i = 0; i < kept; i++)
    if (i == 0 || picks[i].cand != picks[i - 1].cand) picks[n++] = picks[i];
  kept = n;
  qsort(picks, kept, sizeof(*picks), tf_plan__pick_by_name);
  n = 0;
  for (size_t i = 0; i < kept; i++)
    if (i == 0 || strcmp(picks[i].name, picks[i - 1].name) != 0) picks[n++] = picks[i];
  kept = n;
  if (kept > replicas) {
    qsort(picks, kept, sizeof(*picks), tf_plan__pick_by_allocs);
    kept = replicas;
  }
  for (size_t i = 0; i < kept; i++) {
    w->cands[picks[i].cand].chosen = 1;
    w->cands[picks[i].cand].kept = picks[i].name;
    tf_plan__name(&names, picks[i].name, NULL)->taken = 1; /* there since the records' pass */
  }
  /* then new relays, in candidate order, up to replicas */
  size_t count = kept;
  for (size_t i = 0; i < w->cand_count && count < replicas; i++) {
    if (w->cands[i].state != TF__CAND_USABLE || w->cands[i].chosen) continue;
    w->cands[i].chosen = 1;
    count++;
  }

  /* relays in candidate order, which is (node, first address, range start) order;
   * identities and node names go to one string block */
  size_t pool_len = strlen(pool->name);
  plan->relays = calloc(count ? count : 1, sizeof(tf_relay));
  offsets = malloc((count + 1) * 2 * sizeof(*offsets));
  if (!plan->relays || !offsets) {
    rc = tf_error__nomem();
    goto done;
  }
  size_t k = 0;
  for (size_t i = 0; i < w->cand_count && k < count; i++) {
    const tf_plan__cand *c = &w->cands[i];
    if (!c->chosen) continue;
    tf_relay *r = &plan->relays[k];
    char identity[TF__IDENTITY_BUF];
    if ((rc = tf_identity__format(identity, sizeof(identity), c->addrs, c->addr_count, c->range)) < 0) goto done;
    size_t il = strlen(identity);
    offsets[2 * k] = strings.len;
    tf_buf__putn(&strings, identity, il + 1);
    offsets[2 * k + 1] = strings.len;
    const char *node = w->nodes->items[c->node].name;
    tf_buf__putn(&strings, node, strlen(node) + 1);
    memcpy(r->addrs, c->addrs, sizeof(r->addrs));
    r->addr_count = c->addr_count;
    r->range = c->range;
    r->slice = c->slice;
    r->plan = plan;
    k++;
    if (c->kept) {
      snprintf(r->name, sizeof(r->name), "%s", c->kept);
      continue;
    }
    /* salt "#1", "#2"... while the name is taken here or held by another identity */
    r->is_new = 1;
    uint32_t base = tf_fnv1a32__(identity, il);
    for (unsigned salt = 0;; salt++) {
      uint32_t h = base;
      if (salt) {
        char tail[16];
        int tl = snprintf(tail, sizeof(tail), "#%u", salt);
        for (int t = 0; t < tl; t++) {
          h ^= (uint8_t)tail[t];
          h *= 16777619u;
        }
      }
      tf_plan__encode_name(r->name, pool->name, pool_len, h);
      int fresh;
      struct tf_plan__name_info *s = tf_plan__name(&names, r->name, &fresh);
      if (!s) {
        rc = tf_error__nomem();
        goto done;
      }
      if (!fresh && (s->taken || (s->holder && (s->holders_differ || !tf_plan__record_is(s->holder, c)))))
        continue;
      s->taken = 1;
      break;
    }
  }
  if (strings.failed) {
    rc = tf_error__nomem();
    goto done;
  }
  if ((rc = tf_buf__detach(&strings, &plan->strings)) < 0) goto done;
  for (size_t i = 0; i < count; i++) {
    tf_relay *r = &plan->relays[i];
    r->identity = plan->strings + offsets[2 * i];
    r->node = plan->strings + offsets[2 * i + 1];
    if (tf_map__insert(&plan->name_index, 0, r->name, strlen(r->name), i, NULL) < 0) {
      rc = tf_error__nomem();
      goto done;
    }
  }
  plan->relay_count = count;
  plan->placeable = usable;

done:
  free(index);
  free(picks);
  tf_map__dispose(&names.map);
  free(names.info);
  free(offsets);
  tf_buf__dispose(&strings, 0);
  return rc;
}

#define TF__EXCLUDED_NAMED_MAX 8

/* Why too few replicas were placed: the identities, the nodes eligible of all, the rule that bounds
 * the identities in this mode, and each node left out with the rule that excluded it (the first
 * TF__EXCLUDED_NAMED_MAX named). The webhook warns with the same words. */
static tf_err tf_plan__insufficient(const tf_plan__work *w, const tf_plan *plan, char **out)
{
  const tf_nodes *nodes = w->nodes;
  size_t n = nodes ? nodes->count : 0, eligible = 0, excluded = 0;
  tf_buf left;
  tf_buf__init(&left);
  for (size_t i = 0; i < n; i++) {
    const tf_kv *sel;
    const char *why = tf_inventory__excluded(&nodes->items[i], w->pool, &sel);
    if (!why) {
      eligible++;
      continue;
    }
    if (excluded++ >= TF__EXCLUDED_NAMED_MAX) continue;
    tf_buf__printf(&left, "%s%s (%s", excluded > 1 ? ", " : "", nodes->items[i].name, why);
    if (sel) tf_buf__printf(&left, " %s=%s", sel->key, sel->value);
    tf_buf__putn(&left, ")", 1);
  }
  if (excluded > TF__EXCLUDED_NAMED_MAX) tf_buf__printf(&left, " and %zu more", excluded - TF__EXCLUDED_NAMED_MAX);
  const char *rule;
  if (eligible == 0)
    rule = "no node is eligible";
  else if (tf_pool_mode(w->pool) == TF_MODE_EXTERNAL_IP_POOL)
    rule = "too few spec.addressing.externalIPPool addresses on eligible nodes";
  else if (tf_pool_mode(w->pool) == TF_MODE_POD_IP)
    rule = "too few relay-pod-addresses on eligible nodes";
  else
    rule = "one per eligible node address of the family";
  tf_buf b;
  tf_buf__init(&b);
  tf_buf__printf(&b, "%zu of %lld replicas placed: %zu relay %s on %zu of %zu nodes (%s)", plan->relay_count,
                 (long long)plan->replicas, plan->placeable, plan->placeable == 1 ? "identity" : "identities", eligible,
                 n, rule);
  if (excluded) {
    tf_buf__printf(&b, "; not eligible: ");
    if (left.len) tf_buf__putn(&b, left.ptr, left.len);
  }
  if (left.failed) b.failed = 1;
  tf_buf__dispose(&left, 0);
  return tf_buf__detach(&b, out);
}

static tf_err tf_plan__conditions(tf_plan__work *w, tf_plan *plan)
{
  plan->conditions = calloc(2, sizeof(tf_condition));
  if (!plan->conditions) return tf_error__nomem();
  long long replicas = (long long)plan->replicas;
  tf_err rc;
  if ((long long)plan->relay_count >= replicas) {
    rc = tf_plan__append_condition(plan, "Placed", "True", "AllPlaced",
                                   tf_asprintf__("%zu of %lld replicas placed", plan->relay_count, replicas));
  } else {
    char *msg = NULL;
    if ((rc = tf_plan__insufficient(w, plan, &msg)) < 0) return rc;
    rc = tf_plan__append_condition(plan, "Placed", "False", "InsufficientAddresses", msg);
  }
  if (rc < 0) return rc;
  if (w->conflict_count == 0)
    return tf_plan__append_condition(plan, "AddressConflict", "False", "NoConflict",
                                     strdup("no relay address is claimed by another pool or offered by two nodes"));
  /* in use by another pool or offered twice, else only refused (unusable, or a reserved endpoint's) */
  const char *reason = w->in_use ? "AddressInUse" : "UnusableAddress";
  if (w->conflict_count > TF__CONFLICT_CLAUSES_MAX)
    tf_buf__printf(&w->conflicts, "; and %zu more", w->conflict_count - TF__CONFLICT_CLAUSES_MAX);
  char *msg = NULL;
  if ((rc = tf_buf__detach(&w->conflicts, &msg)) < 0) return rc;
  return tf_plan__append_condition(plan, "AddressConflict", "True", reason, msg);
}

tf_err tf_plan__sites(const tf_pool *pool, const tf_nodes *nodes, tf_plan__site **out, size_t *n)
{
  *out = NULL;
  *n = 0;
  tf_plan__work w;
  memset(&w, 0, sizeof(w));
  w.pool = pool;
  w.nodes = nodes;
  tf_buf__init(&w.conflicts);
  tf_err rc = tf_plan__candidates(&w);
  size_t count = 0;
  for (size_t i = 0; rc == TF_OK && i < w.cand_count; i++) count += w.cands[i].addr_count;
  tf_plan__site *sites = rc == TF_OK && count ? malloc(count * sizeof(*sites)) : NULL;
  if (rc == TF_OK && count && !sites) rc = tf_error__nomem();
  for (size_t i = 0; sites && i < w.cand_count; i++)
    for (size_t k = 0; k < w.cands[i].addr_count; k++)
      sites[(*n)++] = (tf_plan__site){nodes->items[w.cands[i].node].name, w.cands[i].addrs[k]};
  free(w.cands);
  free(w.refused);
  tf_buf__dispose(&w.conflicts, 0);
  *out = sites;
  return rc;
}

tf_err tf_plan_new(tf_plan **out, const tf_pool *pool, const tf_nodes *nodes, const tf_existing *fleet)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(pool);
  TF_ASSERT_ARG(nodes);
  *out = NULL;
  if (tf_pool_validate(NULL, pool) < 0) return TF_EINVALID;
  if (nodes->count > UINT32_MAX / 2 || (fleet && fleet->count > UINT32_MAX / 2))
    return tf_error__set(TF_EINVALID, "inventory or fleet too large");

  tf_plan *plan = calloc(1, sizeof(*plan));
  if (!plan) return tf_error__nomem();
  tf_plan__work w;
  memset(&w, 0, sizeof(w));
  w.pool = pool;
  w.nodes = nodes;
  w.fleet = fleet;
  tf_buf__init(&w.conflicts);

  tf_err rc = TF_OK;
  plan->pool_name = strdup(pool->name);
  plan->ns = strdup(pool->ns ? pool->ns : "default");
  plan->replicas = pool->replicas;
  plan->mode = pool->mode;
  plan->family = pool->family;
  plan->range = pool->range;
  plan->ports_per_address = tf_port_range_size(pool->range);
  plan->listener_count = pool->listener_count;
  plan->listener_ports = calloc(pool->listener_count + 1, sizeof(uint16_t));
  plan->listener_names = calloc(pool->listener_count + 1, sizeof(char *));
  plan->listener_protocols = calloc(pool->listener_count + 1, sizeof(tf_protocol));
  if (!plan->pool_name || !plan->ns || !plan->listener_ports || !plan->listener_names || !plan->listener_protocols)
    rc = tf_error__nomem();
  for (size_t i = 0; rc == TF_OK && i < pool->listener_count; i++) {
    plan->listener_ports[i] = pool->listeners[i].port;
    plan->listener_protocols[i] = pool->listeners[i].protocol;
    if (!(plan->listener_names[i] = strdup(pool->listeners[i].name ? pool->listeners[i].name : "")))
      rc = tf_error__nomem();
  }
  if (rc == TF_OK) rc = tf_plan__candidates(&w);
  /* claims first: the message lists other pools' addresses before doubly offered ones */
  if (rc == TF_OK) rc = tf_plan__claims(&w);
  if (rc == TF_OK) rc = tf_plan__duplicates(&w);
  if (rc == TF_OK) tf_plan__refusals(&w);
  if (rc == TF_OK && w.conflicts.failed) rc = tf_error__nomem();
  if (rc == TF_OK) rc = tf_plan__choose(&w, plan);
  if (rc == TF_OK) rc = tf_plan__conditions(&w, plan);
  free(w.cands);
  free(w.refused);
  tf_buf__dispose(&w.conflicts, 0);
  if (rc < 0) {
    tf_plan_free(plan);
    return rc;
  }
  *out = plan;
  return TF_OK;
}

void tf_plan_free(tf_plan *plan)
{
  if (!plan) return;
  free(plan->pool_name);
  free(plan->ns);
  free(plan->listener_ports);
  for (size_t i = 0; plan->listener_names && i < plan->listener_count; i++) free(plan->listener_names[i]);
  free(plan->listener_names);
  free(plan->listener_protocols);
  free(plan->relays);
  tf_map__dispose(&plan->name_index);
  free(plan->strings);
  for (size_t i = 0; i < plan->condition_count; i++) {
    free(plan->conditions[i].type);
    free(plan->conditions[i].status);
    free(plan->conditions[i].reason);
    free(plan->conditions[i].message);
  }
  free(plan->conditions);
  free(plan);
}

const char *tf_plan_pool_name(const tf_plan *plan) { return plan ? plan->pool_name : NULL; }

size_t tf_plan_relay_count(const tf_plan *plan) { return plan ? plan->relay_count : 0; }

const tf_relay *tf_plan_relay(const tf_plan *plan, size_t i)
{
  return (plan && i < plan->relay_count) ? &plan->relays[i] : NULL;
}

const tf_relay *tf_plan_find(const tf_plan *plan, const char *name)
{
  if (!plan || !name) return NULL;
  const uint64_t *i = tf_map__find(&plan->name_index, 0, name, strlen(name));
  return i ? &plan->relays[*i] : NULL;
}

size_t tf_plan_placeable_count(const tf_plan *plan) { return plan ? plan->placeable : 0; }

size_t tf_plan_condition_count(const tf_plan *plan) { return plan ? plan->condition_count : 0; }

tf_err tf_plan_condition(const tf_plan *plan, size_t i, const char **type, const char **status, const char **reason,
                         const char **message)
{
  TF_ASSERT_ARG(plan);
  if (i >= plan->condition_count)
    return tf_error__set(TF_ENOTFOUND, "condition %zu: the plan has %zu", i, plan->condition_count);
  const tf_condition *c = &plan->conditions[i];
  if (type) *type = c->type;
  if (status) *status = c->status;
  if (reason) *reason = c->reason;
  if (message) *message = c->message;
  return TF_OK;
}

/* ---- JSON ---- */


tf_err tf_plan_to_json(char **out, const tf_plan *plan)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(plan);
  *out = NULL;
  tf_buf b;
  tf_buf__init(&b);
  tf_buf__puts(&b, "{\n  \"pool\": ");
  tf_buf__json_str(&b, plan->pool_name);
  tf_buf__puts(&b, ",\n  \"namespace\": ");
  tf_buf__json_str(&b, plan->ns);
  tf_buf__printf(&b, ",\n  \"replicas\": %lld,\n  \"placeable\": %zu,\n  \"relays\": [", (long long)plan->replicas,
                 plan->placeable);
  for (size_t i = 0; i < plan->relay_count; i++) {
    const tf_relay *r = &plan->relays[i];
    tf_buf__puts(&b, i ? ",\n    {\n      \"name\": " : "\n    {\n      \"name\": ");
    tf_buf__json_str(&b, r->name);
    tf_buf__puts(&b, ",\n      \"identity\": ");
    tf_buf__json_str(&b, r->identity);
    tf_buf__puts(&b, ",\n      \"node\": ");
    tf_buf__json_str(&b, r->node);
    tf_buf__puts(&b, ",\n      \"addresses\": [");
    for (size_t k = 0; k < r->addr_count; k++) {
      char a[TF_ADDR_STRLEN];
      tf_addr_format(a, sizeof(a), &r->addrs[k]);
      tf_buf__printf(&b, "%s\"%s\"", k ? ", " : "", a);
    }
    tf_buf__printf(&b, "],\n      \"portRange\": {\"start\": %u, \"end\": %u},\n      \"portsTotal\": %u,\n"
                       "      \"listeners\": [",
                   r->range.start, r->range.end, tf_relay_ports_total(r));
    for (size_t l = 0; l < plan->listener_count; l++) {
      tf_buf__puts(&b, l ? ",\n        {\"name\": " : "\n        {\"name\": ");
      tf_buf__json_str(&b, plan->listener_names[l]);
      const char *proto = tf_protocol_name(plan->listener_protocols[l]);
      tf_buf__printf(&b, ", \"protocol\": \"%s\", \"port\": %u}", proto ? proto : "", tf_relay_listener_port(r, l));
    }
    tf_buf__puts(&b, plan->listener_count ? "\n      ]\n    }" : "]\n    }");
  }
  tf_buf__puts(&b, plan->relay_count ? "\n  ],\n  \"conditions\": [" : "],\n  \"conditions\": [");
  for (size_t i = 0; i < plan->condition_count; i++) {
    const tf_condition *c = &plan->conditions[i];
    tf_buf__puts(&b, i ? ",\n    {\"type\": " : "\n    {\"type\": ");
    tf_buf__json_str(&b, c->type);
    tf_buf__puts(&b, ", \"status\": ");
    tf_buf__json_str(&b, c->status);
    tf_buf__puts(&b, ", \"reason\": ");
    tf_buf__json_str(&b, c->reason);
    tf_buf__puts(&b, ", \"message\": ");
    tf_buf__json_str(&b, c->message);
    tf_buf__puts(&b, "}");
  }
  tf_buf__puts(&b, plan->condition_count ? "\n  ]\n}" : "]\n}");
  return tf_buf__detach(&b, out);
}

/* ---- relays ---- */

const char *tf_relay_name(const tf_relay *relay) { return relay ? relay->name : NULL; }

const char *tf_relay_identity(const tf_relay *relay) { return relay ? relay->identity : NULL; }

const char *tf_relay_node(const tf_relay *relay) { return relay ? relay->node : NULL; }

size_t tf_relay_address_count(const tf_relay *relay) { return relay ? relay->addr_count : 0; }

tf_err tf_relay_address(tf_addr *out, const tf_relay *relay, size_t i)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(relay);
  if (i >= relay->addr_count)
    return tf_error__set(TF_ENOTFOUND, "address %zu: relay %s has %zu", i, relay->name, relay->addr_count);
  *out = relay->addrs[i];
  return TF_OK;
}

tf_port_range tf_relay_port_range(const tf_relay *relay)
{
  tf_port_range none = {0, 0};
  return relay ? relay->range : none;
}

uint32_t tf_relay_ports_total(const tf_relay *relay)
{
  return relay ? (uint32_t)relay->addr_count * tf_port_range_size(relay->range) : 0;
}

uint16_t tf_relay_listener_port(const tf_relay *relay, size_t listener)
{
  if (!relay || !relay->plan || listener >= relay->plan->listener_count) return 0;
  uint32_t port = (uint32_t)relay->plan->listener_ports[listener] + relay->slice;
  return port > 65535 ? 0 : (uint16_t)port;
}

uint32_t tf_relay_slice(const tf_relay *relay) { return relay ? relay->slice : 0; }
