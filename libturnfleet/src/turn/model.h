/* The library's internal data model: what pool, inventory and plan hold.
 * Private; modules further down the layering (capacity, coturn) read it. */
#ifndef TF_MODEL_H
#define TF_MODEL_H

#include "internal.h"

typedef struct tf_kv {
  char *key;
  char *value;
} tf_kv;

typedef struct tf_listener {
  char *name;
  tf_protocol protocol;
  uint16_t port;
  char *tls_secret; /* tlsSecretRef.name, NULL if absent */
} tf_listener;

typedef struct tf_secret_ref {
  char *name; /* NULL when the ref is absent */
  char *key;  /* default "secret" */
} tf_secret_ref;

/* Which optional sections were present in the document (mode-specific checks). */
#define TF_POOL_HAS_EXTERNAL_IP_POOL 0x01u
#define TF_POOL_HAS_POD_IP 0x02u
#define TF_POOL_HAS_PARTITIONED_IP 0x04u
#define TF_POOL_HAS_NAME 0x08u
#define TF_POOL_HAS_RELAYS_PER_NODE 0x10u /* partitionedIP.relaysPerNode given */
#define TF_POOL_HAS_PREVIOUS_SECRET 0x20u /* auth.previousSecretRef given */

struct tf_pool {
  char *name;      /* "" when absent */
  char *ns;        /* default "default" */
  unsigned present; /* TF_POOL_HAS_* */

  int64_t replicas; /* default 1 */
  char *image;          /* spec.dataplane.image */
  char *coturn_version; /* spec.dataplane.coturnVersion, default "4.6.1" */

  tf_mode mode;
  tf_family family;
  tf_prefix *external_prefixes; /* externalIPPool.addresses */
  size_t external_prefix_count;
  char *pod_network; /* podIP.network, NULL if absent */
  uint32_t relays_per_node; /* partitionedIP.relaysPerNode; 1 in other modes */

  tf_kv *node_selector; /* default {turnfleet.hzmi.dev/relay-node: "true"} */
  size_t node_selector_count;

  tf_port_range range; /* default 49152-65535 */
  tf_listener *listeners; /* default udp+tcp 3478 */
  size_t listener_count;

  char *realm;
  tf_secret_ref secret;
  tf_secret_ref previous_secret;

  int64_t user_quota;  /* 0 = unlimited */
  int64_t total_quota; /* 0 = unlimited */

  int deny_private; /* default 1 */
  tf_prefix *peer_allow;
  size_t peer_allow_count;
  tf_prefix *peer_deny;
  size_t peer_deny_count;

  int64_t drain_timeout_ms; /* default 600000 */

  tf_problems *problems; /* shape and type problems found while parsing */

  /* Private to pool.c: what validation needs beyond the values above. */
  size_t problems_head;    /* problems[0..head) are about apiVersion/kind/metadata */
  unsigned bad;            /* TF_POOL__BAD_* of pool.c: a field already has a problem */
  int64_t rpn;             /* relaysPerNode as given (0 when absent) */
  uint8_t *listener_flags; /* per listener: TF_POOL__L_* of pool.c */
};

typedef struct tf_node {
  char *name;
  tf_kv *labels; /* sorted by key */
  size_t label_count;
  int unschedulable;
  int ready; /* 1 True, 0 False or Unknown (kubectl's NotReady: the node stopped reporting), -1 absent */
  tf_addr *relay_address; /* annotation relay-address (at most one per family) */
  size_t relay_address_count;
  tf_addr *external_addresses; /* annotation external-addresses */
  size_t external_address_count;
  tf_addr *pod_addresses; /* annotation relay-pod-addresses */
  size_t pod_address_count;
  tf_addr *external_ips; /* status.addresses type ExternalIP, in order */
  size_t external_ip_count;
  tf_addr *internal_ips; /* status.addresses type InternalIP, in order */
  size_t internal_ip_count;
} tf_node;

struct tf_nodes {
  tf_node *items; /* sorted by name, names unique */
  size_t count;
  struct tf_nodes__chunk *chunks; /* arena holding items and everything they point to */
  size_t cap;     /* built inventories (tf_nodes_add): items is malloc'd with room for cap */
  int items_heap; /* 1: items is malloc'd, not in the arena */
  struct tf_nodes__reserved {
    tf_addr addr;
    uint16_t port;
    char *what;
  } reserved[TF_NODES_RESERVED_MAX]; /* tf_nodes_reserve_endpoint() */
  size_t reserved_count;
};

/* The address a node offers in HostNetwork/PartitionedIP mode for family @p af
 * (TF_AF_INET/TF_AF_INET6): relay-address annotation, else first ExternalIP,
 * else first InternalIP. NULL when it has none. Borrowed from the node. */
const tf_addr *tf_inventory__host_address(const tf_node *node, int af);
/* Why @p node takes no relay of @p pool ("cordoned", "NotReady", "nodeSelector" with the first
 * selector entry it fails in *selector), or NULL when it is eligible. */
/* 1 when the node carries TF_LABEL_DEVELOPMENT=true: its loopback addresses may host relays. */
int tf_inventory__development(const tf_node *node);
const char *tf_inventory__excluded(const tf_node *node, const tf_pool *pool, const tf_kv **selector);
/* 1 when @p s is a lowercase RFC 1123 subdomain of at most @p max characters
 * (Kubernetes object names: nodes, pools, relays). */
TF__PRIVATE int tf_inventory__valid_name(const char *s, size_t max);

/* tf_pool_parse() on a document already read (@p root borrowed): what the admission
 * module uses for the object inside a review, without printing and parsing it again. */
struct cJSON;
TF__PRIVATE tf_err tf_pool__from_tree(tf_pool **out, const struct cJSON *root);

/* Where the planner may place a relay of @p pool on @p nodes: every candidate identity's (node, address),
 * before claims and conflicts (a pure function of pool and nodes). Another pool's relay concerns this pool
 * only on one of these addresses (its AddressConflict, the addresses it may take) and its CLI port only on
 * one of these nodes (the planned relays'). *out malloc'd (NULL when none), node names borrowed from
 * @p nodes, addresses repeated where candidates share them. TF_OK, TF_ENOMEM. */
typedef struct tf_plan__site {
  const char *node;
  tf_addr addr;
} tf_plan__site;
TF__PRIVATE tf_err tf_plan__sites(const tf_pool *pool, const tf_nodes *nodes, tf_plan__site **out, size_t *n);

typedef struct tf_existing_record {
  char *pool; /* NULL = the pool being planned */
  char *name;
  char *identity;
  int64_t allocations; /* -1 unknown */
  tf_addr addrs[2];
  size_t addr_count;
  tf_port_range range;
  uint16_t *listener_ports;
  size_t listener_port_count;
} tf_existing_record;

struct tf_existing {
  tf_existing_record *items;
  size_t count;
  size_t cap;
};

/* Parse an identity string "ADDR[,ADDR]/START-END" (canonical or not). */
tf_err tf_identity__parse(const char *identity, tf_addr addrs[2], size_t *addr_count, tf_port_range *range);
/* Format the canonical identity string into buf (IPv4 first). */
tf_err tf_identity__format(char *buf, size_t size, const tf_addr *addrs, size_t addr_count, tf_port_range range);

struct tf_relay {
  char name[TF_RELAY_NAME_MAX];
  char *identity;
  char *node;
  tf_addr addrs[2]; /* IPv4 first */
  size_t addr_count;
  tf_port_range range;
  uint32_t slice;  /* PartitionedIP slice index */
  int is_new;      /* 1 when not kept from the fleet */
  const struct tf_plan *plan;
};

typedef struct tf_condition {
  char *type;
  char *status; /* "True" | "False" | "Unknown" */
  char *reason;
  char *message;
} tf_condition;

struct tf_plan {
  char *pool_name;
  char *ns;
  int64_t replicas;
  tf_mode mode;
  tf_family family;
  tf_port_range range; /* the pool's whole relay range */
  uint16_t *listener_ports; /* the pool's listener ports, by listener index */
  char **listener_names;    /* by listener index */
  tf_protocol *listener_protocols;
  size_t listener_count;
  tf_relay *relays; /* sorted by (node, first address, range start) */
  size_t relay_count;
  tf_map name_index; /* relay name -> relay index (tf_plan_find); keys are the relays' names */
  char *strings;   /* block holding every relay's identity and node */
  size_t placeable; /* identities placeable at full scale, conflicts excluded */
  uint32_t ports_per_address; /* size of the pool's whole relay range */
  tf_condition *conditions;
  size_t condition_count;
};

/* coturn options as the renderer reads them: @p dst gets the defaults, then
 * the fields of @p src's version (a caller's older struct is shorter). */
void tf_coturn__options_read(tf_coturn_options *dst, const tf_coturn_options *src);
/* 1 when a config rendered with @p opts for a coturn of @p features has the Prometheus exporter. */
int tf_coturn__has_exporter(const tf_coturn_options *opts, uint32_t features);

#endif
