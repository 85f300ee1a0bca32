/**
 * @file turnfleet/plan.h
 * @brief The planner: relay identities, stable names, placement and conflicts.
 *
 * A plan is a pure function of (pool, nodes, existing relays): the same inputs in any
 * order give the identical plan.
 */
#ifndef TURNFLEET_PLAN_H
#define TURNFLEET_PLAN_H

#include "addr.h"
#include "common.h"
#include "errors.h"
#include "inventory.h"
#include "pool.h"

TF_BEGIN_DECL

/** Relays that already exist: this pool's (kept names) and other pools' (claims). */
typedef struct tf_existing tf_existing;
/** A computed plan. Immutable. */
typedef struct tf_plan tf_plan;
/** One relay of a plan, borrowed from it. */
typedef struct tf_relay tf_relay;

/** Longest relay name including NUL. */
#define TF_RELAY_NAME_MAX 64

/**
 * An empty set of existing relays.
 * @param[out] out release with tf_existing_free()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_existing_new(tf_existing **out);

/**
 * Parse existing relays from JSON: an array of relay records, or an object with a
 * `relays` array (such as the output of `turnfleet plan -o json`) whose
 * optional top-level `pool` is the default pool of its records. A record is
 * `{"pool": P, "name": N, "identity": "ADDR[,ADDR]/START-END",
 *   "allocations": A, "listenerPorts": [..]}`; only `identity` is required
 * for another pool's record, `name` and `identity` for this pool's. Without
 * `listenerPorts` the ports of a plan's `listeners[].port` are read; other
 * members are ignored. A missing `allocations` means unknown (-1).
 * @param[out] out release with tf_existing_free()
 * @return 0; TF_EPROTO for malformed JSON; TF_EINVALID naming the record field
 */
TF_EXTERN(tf_err) tf_existing_parse(tf_existing **out, const char *json, size_t len);

/**
 * tf_existing_parse() with input limits.
 * @param[out] out release with tf_existing_free()
 * @param json the records, borrowed for the call
 * @param len bytes in @p json
 * @param opts the limits, borrowed; NULL for the defaults
 * @return as tf_existing_parse(); TF_EINVALID for an input over a limit
 */
TF_EXTERN(tf_err) tf_existing_parse_with(tf_existing **out, const char *json, size_t len, const tf_parse_options *opts);

/**
 * Add one relay record.
 * @param existing the set
 * @param pool owning pool's name; NULL or "" means "the pool being planned"
 * @param name relay name (required for the planned pool's relays)
 * @param identity "ADDR[,ADDR]/START-END"
 * @param allocations current allocations, or -1 when unknown (counted as 0)
 * @param listener_ports the owning pool's listener ports (claims only); may be NULL
 * @param listener_ports_count entries in @p listener_ports
 * @return 0, TF_EINVALID naming the bad argument, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_existing_add(tf_existing *existing, const char *pool, const char *name,
                               const char *identity, int64_t allocations,
                               const uint16_t *listener_ports, size_t listener_ports_count);

/** Number of records. */
TF_EXTERN(size_t) tf_existing_count(const tf_existing *existing);

/** Release a set of existing relays. NULL does nothing. */
TF_EXTERN(void) tf_existing_free(tf_existing *existing);

/**
 * Plan the relays of @p pool on @p nodes.
 * @param[out] out release with tf_plan_free()
 * @param pool a valid pool (borrowed for the call)
 * @param nodes the inventory (borrowed for the call)
 * @param existing this pool's existing relays and other pools' claims; may be NULL
 * @return 0 (also when replicas cannot all be placed: see the conditions);
 *         TF_EINVALID for an invalid pool (first problem in the message) or
 *         a bad argument; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_plan_new(tf_plan **out, const tf_pool *pool, const tf_nodes *nodes,
                              const tf_existing *existing);

/** Release a plan. NULL does nothing. */
TF_EXTERN(void) tf_plan_free(tf_plan *plan);

/** Name of the pool the plan is for. Borrowed. */
TF_EXTERN(const char *) tf_plan_pool_name(const tf_plan *plan);

/** Number of planned relays, sorted by (node, first address, range start). */
TF_EXTERN(size_t) tf_plan_relay_count(const tf_plan *plan);

/** Relay @p i, NULL when out of range. Borrowed from @p plan. */
TF_EXTERN(const tf_relay *) tf_plan_relay(const tf_plan *plan, size_t i);

/** The relay named @p name, NULL when the plan has none. Borrowed from @p plan. */
TF_EXTERN(const tf_relay *) tf_plan_find(const tf_plan *plan, const char *name);

/** Identities placeable on the inventory (the plan at full scale), conflicts excluded. */
TF_EXTERN(size_t) tf_plan_placeable_count(const tf_plan *plan);

/** Number of conditions (`Placed`, `AddressConflict`). */
TF_EXTERN(size_t) tf_plan_condition_count(const tf_plan *plan);

/**
 * Condition @p i. Each output may be NULL; strings are borrowed from @p plan.
 * @return 0, TF_ENOTFOUND when out of range
 */
TF_EXTERN(tf_err) tf_plan_condition(const tf_plan *plan, size_t i, const char **type,
                                    const char **status, const char **reason,
                                    const char **message);

/**
 * The plan as stable JSON (docs/cli.md): `{"pool", "namespace", "replicas",
 * "placeable", "relays": [{name, identity, node, addresses,
 * portRange{start,end}, portsTotal, listeners[{name, protocol, port}]}],
 * "conditions": [{type, status, reason, message}]}`, keys in that order,
 * indented by two spaces, without a final newline. tf_existing_parse() reads it back.
 * @param[out] out release with tf_free()
 */
TF_EXTERN(tf_err) tf_plan_to_json(char **out, const tf_plan *plan);

/** Relay name, `<pool>-relay-xxxxx`. Borrowed. */
TF_EXTERN(const char *) tf_relay_name(const tf_relay *relay);
/** Identity string, "ADDR[,ADDR]/START-END". Borrowed. */
TF_EXTERN(const char *) tf_relay_identity(const tf_relay *relay);
/** Node the relay runs on. Borrowed. */
TF_EXTERN(const char *) tf_relay_node(const tf_relay *relay);
/** Number of addresses (2 in DualStack, else 1). */
TF_EXTERN(size_t) tf_relay_address_count(const tf_relay *relay);
/**
 * Address @p i (IPv4 first).
 * @return 0, TF_ENOTFOUND when out of range
 */
TF_EXTERN(tf_err) tf_relay_address(tf_addr *out, const tf_relay *relay, size_t i);
/** The relay's own port range. */
TF_EXTERN(tf_port_range) tf_relay_port_range(const tf_relay *relay);
/** Ports the relay owns: addresses x ports in its range. */
TF_EXTERN(uint32_t) tf_relay_ports_total(const tf_relay *relay);
/**
 * The port the relay serves pool listener @p listener on: the listener's port,
 * plus the slice index in PartitionedIP mode (relays sharing an address need
 * their own listener ports so that each relay's URI reaches that relay).
 * @return the port, 0 when out of range
 */
TF_EXTERN(uint16_t) tf_relay_listener_port(const tf_relay *relay, size_t listener);
/** Slice index in PartitionedIP mode, 0 otherwise. */
TF_EXTERN(uint32_t) tf_relay_slice(const tf_relay *relay);

/**
 * The relay name for an identity: `<pool>-relay-` + 5 characters of the
 * FNV-1a hash of @p identity (docs/cli.md, `plan`).
 * @param[out] buf at least TF_RELAY_NAME_MAX bytes
 * @return 0, TF_EINVALID, TF_EBUFS
 */
TF_EXTERN(tf_err) tf_relay_name_for(char *buf, size_t size, const char *pool, const char *identity);

TF_END_DECL

#endif
