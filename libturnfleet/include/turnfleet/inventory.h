/**
 * @file turnfleet/inventory.h
 * @brief Nodes from a Kubernetes NodeList (`kubectl get nodes -o json`):
 * labels, schedulability, readiness, addresses and Turnfleet's annotations.
 */
#ifndef TURNFLEET_INVENTORY_H
#define TURNFLEET_INVENTORY_H

#include "addr.h"
#include "common.h"
#include "errors.h"
#include "pool.h"

TF_BEGIN_DECL

/** A node inventory, nodes sorted by name: parsed (tf_nodes_parse()) or built (tf_nodes_new(), tf_nodes_add()). */
typedef struct tf_nodes tf_nodes;

/** Annotation keys read from nodes. */
#define TF_ANNOTATION_RELAY_ADDRESS "turnfleet.hzmi.dev/relay-address"
#define TF_ANNOTATION_EXTERNAL_ADDRESSES "turnfleet.hzmi.dev/external-addresses"
#define TF_ANNOTATION_RELAY_POD_ADDRESSES "turnfleet.hzmi.dev/relay-pod-addresses"

/**
 * The label (value `true`) that lets a node's loopback addresses (127.0.0.0/8, ::1) host relays:
 * a development cluster whose nodes all run on one host. Elsewhere the planner refuses them, as
 * it refuses unspecified, multicast, link-local and broadcast addresses. Under the
 * `node-restriction.kubernetes.io/` prefix, which the NodeRestriction admission plugin keeps a
 * kubelet from setting on its own Node: only the cluster's administrators can set it.
 */
#define TF_LABEL_DEVELOPMENT "node-restriction.kubernetes.io/turnfleet-development"

/**
 * Parse a NodeList (`kind: List` or `NodeList`; `kind` may be absent) as
 * JSON. `items` is required; per node `metadata.name` (a lowercase RFC 1123
 * subdomain, unique), `metadata.labels`, the turnfleet.hzmi.dev/ annotations
 * (comma lists of addresses), `spec.unschedulable`, the `Ready` condition and
 * the ExternalIP/InternalIP `status.addresses` are read; the rest is ignored.
 * @param[out] out release with tf_nodes_free()
 * @return 0; TF_EPROTO for malformed JSON (byte offset in the message);
 *         TF_EINVALID for a field of the wrong type or value, a duplicate
 *         node name or a malformed annotation (message names the path, e.g.
 *         `items[2].metadata.annotations["turnfleet.hzmi.dev/relay-address"]`); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_nodes_parse(tf_nodes **out, const char *json, size_t len);

/** One node for tf_nodes_add(), as an informer sees it. Fields are only appended; read up to the caller's version. */
typedef struct tf_node_info {
  unsigned int version;            /**< TF_NODE_INFO_VERSION */
  const char *name;                /**< metadata.name (required: a lowercase RFC 1123 subdomain) */
  const char *const *label_keys;   /**< metadata.labels keys ... */
  const char *const *label_values; /**< ... and values */
  size_t label_count;              /**< entries in both */
  int ready;                       /**< the Ready condition: 1 True, 0 False or Unknown (NotReady), -1 none (eligible) */
  int unschedulable;               /**< spec.unschedulable */
  const tf_addr *internal_ips;     /**< status.addresses of type InternalIP, in order */
  size_t internal_ip_count;        /**< entries in @p internal_ips */
  const tf_addr *external_ips;     /**< status.addresses of type ExternalIP, in order */
  size_t external_ip_count;        /**< entries in @p external_ips */
  const tf_addr *relay_addresses;  /**< the relay-address annotation (at most one per family) */
  size_t relay_address_count;      /**< entries in @p relay_addresses */
  const tf_addr *external_addresses; /**< the external-addresses annotation (ExternalIPPool) */
  size_t external_address_count;   /**< entries in @p external_addresses */
  const tf_addr *pod_addresses;    /**< the relay-pod-addresses annotation (PodIP) */
  size_t pod_address_count;        /**< entries in @p pod_addresses */
} tf_node_info;

#define TF_NODE_INFO_VERSION 1
#define TF_NODE_INFO_INIT {TF_NODE_INFO_VERSION, NULL, NULL, NULL, 0, -1, 0, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL, 0}

/**
 * Fill @p info with the defaults of @p version (TF_NODE_INFO_INIT's: no labels or addresses,
 * readiness unknown), writing no field past it.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_node_info_init(tf_node_info *info, unsigned int version);

/**
 * An empty inventory to add nodes to.
 * @param[out] out release with tf_nodes_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_nodes_new(tf_nodes **out);

/**
 * Add one node (kept in name order; indexes of later names shift).
 * @param info borrowed for the call; copied
 * @return 0; TF_EINVALID naming the field (`info.name: duplicate node "n1"`,
 *         two relay addresses of one family); TF_ENOMEM. Nothing is added on failure.
 */
TF_EXTERN(tf_err) tf_nodes_add(tf_nodes *nodes, const tf_node_info *info);

/**
 * tf_nodes_parse() with input limits. Duplicate keys (labels and annotations
 * included), NUL characters and invalid UTF-8 are refused with TF_EPROTO,
 * the field path and the positions.
 * @param[out] out release with tf_nodes_free()
 * @param json the NodeList, borrowed for the call
 * @param len bytes in @p json
 * @param opts the limits, borrowed; NULL for the defaults
 * @return as tf_nodes_parse(); TF_EINVALID for an input over a limit
 */
TF_EXTERN(tf_err) tf_nodes_parse_with(tf_nodes **out, const char *json, size_t len, const tf_parse_options *opts);

/** Release an inventory. NULL does nothing. */
TF_EXTERN(void) tf_nodes_free(tf_nodes *nodes);

/** Most endpoints tf_nodes_reserve_endpoint() keeps. */
#define TF_NODES_RESERVED_MAX 8

/**
 * An endpoint that must stay what it is: no relay is planned on @p addr whose relay port range
 * or listener ports hold @p port (the Kubernetes API server's address and port, say). The
 * planner refuses such a candidate in its AddressConflict condition, naming the node and @p what.
 * @param addr borrowed; copied
 * @param what what the endpoint is, e.g. "the Kubernetes API server" (copied)
 * @return 0; TF_EINVALID for a NULL argument or port 0; TF_ERESOURCE past TF_NODES_RESERVED_MAX
 *         endpoints; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_nodes_reserve_endpoint(tf_nodes *nodes, const tf_addr *addr, uint16_t port, const char *what);

/**
 * tf_nodes_reserve_endpoint() for every endpoint of a Kubernetes Endpoints object (`kubectl get
 * endpoints kubernetes -n default -o json`, the API servers of the cluster): each
 * `subsets[].addresses[].ip` and `subsets[].notReadyAddresses[].ip` with each of its subset's
 * `ports[].port`. An endpoint already reserved is not reserved twice. Nothing is reserved on failure.
 * @param json the object, borrowed for the call
 * @param what as tf_nodes_reserve_endpoint()
 * @return 0; TF_EPROTO for malformed JSON (byte offset in the message); TF_EINVALID naming the
 *         field (`subsets[0].addresses[1].ip: must be an IP address`); TF_ERESOURCE when the
 *         endpoints would pass TF_NODES_RESERVED_MAX; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_nodes_reserve_endpoints(tf_nodes *nodes, const char *json, size_t len, const char *what);

/** Number of nodes. */
TF_EXTERN(size_t) tf_nodes_count(const tf_nodes *nodes);

/** Name of node @p i (sorted order); NULL when out of range. Borrowed. */
TF_EXTERN(const char *) tf_nodes_name(const tf_nodes *nodes, size_t i);

/**
 * Whether node @p i may carry relays of @p pool: it matches spec.nodeSelector,
 * is not `spec.unschedulable`, and it is not NotReady: a Ready condition False or Unknown (the node
 * stopped reporting) makes it ineligible, so its relays drain; a node without a Ready condition
 * (an inventory written by hand) is eligible.
 * @return 1 eligible, 0 not (or out of range)
 */
TF_EXTERN(int) tf_nodes_eligible(const tf_nodes *nodes, size_t i, const tf_pool *pool);

/**
 * The address node @p i offers in HostNetwork and PartitionedIP mode for one
 * family: the relay-address annotation, else the first ExternalIP, else the
 * first InternalIP of that family.
 * @param[out] out the address
 * @param af TF_AF_INET or TF_AF_INET6
 * @return 0, TF_ENOTFOUND when the node has none, TF_EINVALID
 */
TF_EXTERN(tf_err) tf_nodes_host_address(tf_addr *out, const tf_nodes *nodes, size_t i, int af);

TF_END_DECL

#endif
