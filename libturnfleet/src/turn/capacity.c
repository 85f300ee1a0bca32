/* capacity: ports owned per relay and per pool, at full scale, and sizing advice.
 *
 * Pure integer maths (docs/capacity-model.md). The fractional options
 * (headroom, bitrates) are turned into integers first, at a stated resolution,
 * so a ceiling is exact: an exact multiple never rounds up by accident. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* Resolution of the headroom: parts per million. */
#define TF_CAP__PPM 1000000LL
/* Bounds that keep every intermediate product inside 64 bits
 * (N x 10^6 <= 10^18; N x session bit/s <= 10^12 x 10^10 needs 128 bits, see below). */
#define TF_CAP__TARGET_MAX 1000000000000LL /* 10^12 concurrent allocations */
#define TF_CAP__KBPS_MAX 10000000.0        /* 10 Gbit/s per allocation */
#define TF_CAP__MBPS_MAX 1000000000.0      /* 1 Pbit/s per node */

typedef struct tf_cap_relay {
  char name[TF_RELAY_NAME_MAX];
  char addrs[2][TF_ADDR_STRLEN];
  size_t addr_count;
  tf_port_range range;
  int64_t ports_total;
} tf_cap_relay;

struct tf_capacity {
  char *pool;
  char *ns;
  tf_mode mode;
  tf_family family;
  uint32_t ports_per_address;
  uint32_t relays_per_node;
  tf_cap_relay *relays;
  size_t relay_count;
  int64_t allocations;
  int64_t placeable;
  int64_t full_scale;

  int sizing; /* a target was given */
  int64_t target;
  double headroom;
  int64_t addresses_needed;
  int64_t relays_needed;
  int bandwidth; /* a bandwidth bound was given */
  double session_kbps;
  double node_mbps;
  int64_t nodes_for_bandwidth;
};

tf_err tf_capacity_options_init(tf_capacity_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_CAPACITY_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_capacity_options version (1-%d)", version,
                         TF_CAPACITY_OPTIONS_VERSION);
  tf_capacity_options init = TF_CAPACITY_OPTIONS_INIT;
  /* only the fields of @p version: an older caller's struct is shorter */
  opts->version = version;
  opts->target_allocations = init.target_allocations;
  opts->headroom = init.headroom;
  opts->session_kbps = init.session_kbps;
  opts->node_mbps = init.node_mbps;
  return TF_OK;
}

/* The caller's options field by field up to its version, the rest defaulted. */
static void tf_cap__read_options(tf_capacity_options *dst, const tf_capacity_options *src)
{
  tf_capacity_options init = TF_CAPACITY_OPTIONS_INIT;
  *dst = init;
  dst->version = src->version;
  if (src->version >= 1) {
    dst->target_allocations = src->target_allocations;
    dst->headroom = src->headroom;
    dst->session_kbps = src->session_kbps;
    dst->node_mbps = src->node_mbps;
  }
}

/* Round a non-negative, bounded double to the nearest integer (no libm). */
static int64_t tf_cap__round(double x) { return (int64_t)(x + 0.5); }

/* ceil(a / b) for a >= 0, b > 0, without overflow. */
static int64_t tf_cap__ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

static tf_err tf_cap__check_options(const tf_capacity_options *o)
{
  if (o->version == 0 || o->version > TF_CAPACITY_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "opts.version: %u is not a tf_capacity_options version (1-%d)", o->version,
                         TF_CAPACITY_OPTIONS_VERSION);
  if (o->target_allocations < 0)
    return tf_error__set(TF_EINVALID, "target_allocations: %lld is negative", (long long)o->target_allocations);
  if (o->target_allocations > TF_CAP__TARGET_MAX)
    return tf_error__set(TF_EINVALID, "target_allocations: %lld is above %lld", (long long)o->target_allocations,
                         (long long)TF_CAP__TARGET_MAX);
  /* written so that NaN fails too */
  if (!(o->headroom >= 0.0 && o->headroom < 1.0))
    return tf_error__set(TF_EINVALID, "headroom: %g is outside [0, 1)", o->headroom);
  if (tf_cap__round(o->headroom * (double)TF_CAP__PPM) >= TF_CAP__PPM)
    return tf_error__set(TF_EINVALID, "headroom: %g rounds to 1 at a resolution of 1e-6", o->headroom);
  if (!(o->session_kbps >= 0.0 && o->session_kbps <= TF_CAP__KBPS_MAX))
    return tf_error__set(TF_EINVALID, "session_kbps: %g is outside [0, %g]", o->session_kbps, TF_CAP__KBPS_MAX);
  if (!(o->node_mbps >= 0.0 && o->node_mbps <= TF_CAP__MBPS_MAX))
    return tf_error__set(TF_EINVALID, "node_mbps: %g is outside [0, %g]", o->node_mbps, TF_CAP__MBPS_MAX);
  if (o->session_kbps > 0.0 && tf_cap__round(o->session_kbps * 1000.0) == 0)
    return tf_error__set(TF_EINVALID, "session_kbps: %g is below the resolution of 1 bit/s", o->session_kbps);
  if (o->node_mbps > 0.0 && tf_cap__round(o->node_mbps * 1000000.0) == 0)
    return tf_error__set(TF_EINVALID, "node_mbps: %g is below the resolution of 1 bit/s", o->node_mbps);
  return TF_OK;
}

/* Sizing (docs/capacity-model.md):
 *   addresses = ceil(N / (P x (1 - h)))          with h in ppm: ceil(N x 10^6 / (P x (10^6 - h_ppm)))
 *   relays    = addresses, x relaysPerNode in PartitionedIP
 *   nodes for bandwidth = ceil(N x session bit/s / node bit/s) */
static tf_err tf_cap__size(tf_capacity *c, const tf_capacity_options *o)
{
  c->target = o->target_allocations;
  c->headroom = o->headroom;
  int64_t h_ppm = tf_cap__round(o->headroom * (double)TF_CAP__PPM);
  int64_t usable = (int64_t)c->ports_per_address * (TF_CAP__PPM - h_ppm); /* ports per address x 10^6 */
  if (usable <= 0) return tf_error__set(TF_EINVALID, "spec.relayPortRange: no ports per address");
  c->addresses_needed = tf_cap__ceil_div(c->target * TF_CAP__PPM, usable);
  /* DualStack: coturn hands out IPv4 relays unless a client asks for IPv6, and
   * an RFC 8656 dual allocation takes a port in each family, so each family must
   * hold the whole target: one relay per address needed, the IPv6 half is spare. */
  c->relays_needed = c->addresses_needed;
  if (c->mode == TF_MODE_PARTITIONED_IP) c->relays_needed = c->addresses_needed * (int64_t)c->relays_per_node;

  if (o->session_kbps > 0.0 && o->node_mbps > 0.0) {
    c->bandwidth = 1;
    c->session_kbps = o->session_kbps;
    c->node_mbps = o->node_mbps;
    unsigned __int128 session_bps = (unsigned __int128)tf_cap__round(o->session_kbps * 1000.0);
    unsigned __int128 node_bps = (unsigned __int128)tf_cap__round(o->node_mbps * 1000000.0);
    unsigned __int128 total = (unsigned __int128)c->target * session_bps;
    unsigned __int128 nodes = total / node_bps + (total % node_bps != 0);
    if (nodes > (unsigned __int128)INT64_MAX)
      return tf_error__set(TF_EINVALID, "node_mbps: %g is too small for %lld allocations at %g kbit/s", o->node_mbps,
                           (long long)c->target, o->session_kbps);
    c->nodes_for_bandwidth = (int64_t)nodes;
  }
  return TF_OK;
}

tf_err tf_capacity_new(tf_capacity **out, const tf_pool *pool, const tf_plan *plan, const tf_capacity_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(pool);
  TF_ASSERT_ARG(plan);
  tf_capacity_options read = TF_CAPACITY_OPTIONS_INIT;
  if (opts && opts->version >= 1 && opts->version <= TF_CAPACITY_OPTIONS_VERSION) tf_cap__read_options(&read, opts);
  else if (opts) read.version = opts->version; /* refused below */
  const tf_capacity_options *o = &read;
  tf_err rc = tf_cap__check_options(o);
  if (rc < 0) return rc;
  if (!plan->pool_name || !pool->name || strcmp(plan->pool_name, pool->name) != 0)
    return tf_error__set(TF_EINVALID, "plan: was made for pool \"%.64s\", not \"%.64s\"",
                         plan->pool_name ? plan->pool_name : "", pool->name ? pool->name : "");

  tf_capacity *c = calloc(1, sizeof(*c));
  if (!c) return tf_error__nomem();
  c->pool = tf_strdup__(pool->name);
  c->ns = tf_strdup__(pool->ns ? pool->ns : "default");
  c->relays = plan->relay_count ? calloc(plan->relay_count, sizeof(*c->relays)) : NULL;
  if (!c->pool || !c->ns || (plan->relay_count && !c->relays)) {
    tf_capacity_free(c);
    return tf_error__nomem();
  }
  c->mode = plan->mode;
  c->family = pool->family;
  c->ports_per_address = plan->ports_per_address ? plan->ports_per_address : tf_port_range_size(pool->range);
  c->relays_per_node = c->mode == TF_MODE_PARTITIONED_IP && pool->relays_per_node ? pool->relays_per_node : 1;

  for (size_t i = 0; i < plan->relay_count; i++) {
    const tf_relay *r = &plan->relays[i];
    tf_cap_relay *cr = &c->relays[i];
    if (r->addr_count < 1 || r->addr_count > 2) {
      tf_capacity_free(c);
      return tf_error__set(TF_EINVALID, "plan: relay \"%s\" has %zu addresses", r->name, r->addr_count);
    }
    memcpy(cr->name, r->name, sizeof(cr->name));
    cr->name[sizeof(cr->name) - 1] = '\0';
    cr->addr_count = r->addr_count;
    for (size_t a = 0; a < r->addr_count; a++) {
      rc = tf_addr_format(cr->addrs[a], sizeof(cr->addrs[a]), &r->addrs[a]);
      if (rc < 0) {
        tf_capacity_free(c);
        return rc;
      }
    }
    cr->range = r->range;
    cr->ports_total = (int64_t)r->addr_count * tf_port_range_size(r->range);
    c->allocations += cr->ports_total;
    c->relay_count++;
  }

  /* Full scale: every placeable identity placed. A PartitionedIP identity is a
   * slice of one node address's range, so its slices add up to that address's
   * range and no more: count node addresses, not slices. */
  int64_t per_identity = (int64_t)(c->family == TF_FAMILY_DUAL_STACK ? 2 : 1) * c->ports_per_address;
  c->placeable = (int64_t)plan->placeable;
  if (c->mode == TF_MODE_PARTITIONED_IP)
    c->full_scale = tf_cap__ceil_div(c->placeable, (int64_t)c->relays_per_node) * per_identity;
  else
    c->full_scale = c->placeable * per_identity;

  if (o->target_allocations > 0) {
    c->sizing = 1;
    rc = tf_cap__size(c, o);
    if (rc < 0) {
      tf_capacity_free(c);
      return rc;
    }
  }
  *out = c;
  return TF_OK;
}

void tf_capacity_free(tf_capacity *capacity)
{
  if (!capacity) return;
  free(capacity->pool);
  free(capacity->ns);
  free(capacity->relays);
  free(capacity);
}

int64_t tf_capacity_allocations(const tf_capacity *capacity) { return capacity ? capacity->allocations : 0; }

int64_t tf_capacity_full_scale_allocations(const tf_capacity *capacity)
{
  return capacity ? capacity->full_scale : 0;
}

int64_t tf_capacity_addresses_needed(const tf_capacity *capacity)
{
  return capacity ? capacity->addresses_needed : 0;
}

int64_t tf_capacity_nodes_for_bandwidth(const tf_capacity *capacity)
{
  return capacity ? capacity->nodes_for_bandwidth : 0;
}

/* ---- JSON ---- */

static int tf_cap__num(cJSON *obj, const char *key, double v) { return cJSON_AddNumberToObject(obj, key, v) != NULL; }

static cJSON *tf_cap__json(const tf_capacity *c)
{
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  int ok = cJSON_AddStringToObject(root, "pool", c->pool) != NULL &&
           cJSON_AddStringToObject(root, "namespace", c->ns) != NULL &&
           cJSON_AddStringToObject(root, "mode", tf_mode_name(c->mode) ? tf_mode_name(c->mode) : "") != NULL &&
           cJSON_AddStringToObject(root, "family", tf_family_name(c->family) ? tf_family_name(c->family) : "") !=
               NULL &&
           tf_cap__num(root, "portsPerAddress", c->ports_per_address);
  if (ok && c->mode == TF_MODE_PARTITIONED_IP) ok = tf_cap__num(root, "relaysPerNode", c->relays_per_node);
  cJSON *relays = ok ? cJSON_AddArrayToObject(root, "relays") : NULL;
  ok = relays != NULL;
  for (size_t i = 0; ok && i < c->relay_count; i++) {
    const tf_cap_relay *r = &c->relays[i];
    cJSON *jr = cJSON_CreateObject();
    ok = jr != NULL && cJSON_AddItemToArray(relays, jr);
    if (!ok) {
      cJSON_Delete(jr);
      break;
    }
    ok = cJSON_AddStringToObject(jr, "name", r->name) != NULL;
    cJSON *addrs = ok ? cJSON_AddArrayToObject(jr, "addresses") : NULL;
    ok = addrs != NULL;
    for (size_t a = 0; ok && a < r->addr_count; a++) {
      cJSON *s = cJSON_CreateString(r->addrs[a]);
      ok = s != NULL && cJSON_AddItemToArray(addrs, s);
      if (!ok) cJSON_Delete(s);
    }
    cJSON *range = ok ? cJSON_AddObjectToObject(jr, "portRange") : NULL;
    ok = range != NULL && tf_cap__num(range, "start", r->range.start) && tf_cap__num(range, "end", r->range.end) &&
         tf_cap__num(jr, "portsTotal", (double)r->ports_total);
  }
  ok = ok && tf_cap__num(root, "allocations", (double)c->allocations) &&
       tf_cap__num(root, "placeable", (double)c->placeable) &&
       tf_cap__num(root, "fullScaleAllocations", (double)c->full_scale);
  if (ok && c->mode == TF_MODE_PARTITIONED_IP)
    ok = cJSON_AddStringToObject(root, "partitionedNote",
                                 "PartitionedIP adds no capacity: its relays split each address's ports") != NULL;
  if (ok && c->sizing) {
    cJSON *s = cJSON_AddObjectToObject(root, "sizing");
    ok = s != NULL && tf_cap__num(s, "targetAllocations", (double)c->target) &&
         tf_cap__num(s, "headroom", c->headroom) && tf_cap__num(s, "addressesNeeded", (double)c->addresses_needed) &&
         tf_cap__num(s, "relaysNeeded", (double)c->relays_needed);
    if (ok && c->mode == TF_MODE_PARTITIONED_IP)
      ok = tf_cap__num(s, "nodeAddressesNeeded", (double)c->addresses_needed);
    if (ok && c->bandwidth)
      ok = tf_cap__num(s, "sessionKbps", c->session_kbps) && tf_cap__num(s, "nodeMbps", c->node_mbps) &&
           tf_cap__num(s, "nodesForBandwidth", (double)c->nodes_for_bandwidth);
    if (ok)
      ok = cJSON_AddStringToObject(s, "limitedBy",
                                   c->bandwidth && c->nodes_for_bandwidth > c->addresses_needed ? "bandwidth"
                                                                                                 : "ports") != NULL;
  }
  if (!ok) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

tf_err tf_capacity_to_json(char **out, const tf_capacity *capacity)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(capacity);
  cJSON *root = tf_cap__json(capacity);
  if (!root) return tf_error__nomem();
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) return tf_error__nomem();
  /* cJSON allocates with malloc (no hooks installed), so tf_free() releases it */
  *out = text;
  return TF_OK;
}
