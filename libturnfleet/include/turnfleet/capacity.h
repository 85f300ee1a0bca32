/**
 * @file turnfleet/capacity.h
 * @brief Capacity maths: ports owned per relay, per pool, at full scale, and sizing advice.
 *
 * See docs/capacity-model.md. Pure functions over a pool and its plan.
 */
#ifndef TURNFLEET_CAPACITY_H
#define TURNFLEET_CAPACITY_H

#include "common.h"
#include "errors.h"
#include "plan.h"
#include "pool.h"

TF_BEGIN_DECL

/** Knobs for tf_capacity_new(). Fields are only appended. */
typedef struct tf_capacity_options {
  unsigned int version;         /**< TF_CAPACITY_OPTIONS_VERSION */
  int64_t target_allocations;   /**< concurrent allocations to size for; 0 = no sizing */
  double headroom;              /**< fraction kept free, 0 <= h < 1 (default 0.2) */
  double session_kbps;          /**< bitrate per allocation; 0 = no bandwidth bound */
  double node_mbps;             /**< usable bandwidth per node; 0 = no bandwidth bound */
} tf_capacity_options;

#define TF_CAPACITY_OPTIONS_VERSION 1
#define TF_CAPACITY_OPTIONS_INIT {TF_CAPACITY_OPTIONS_VERSION, 0, 0.2, 0.0, 0.0}

/**
 * Fill @p opts with the defaults of @p version.
 * @return 0, TF_EINVALID for a NULL pointer or an unknown version
 */
TF_EXTERN(tf_err) tf_capacity_options_init(tf_capacity_options *opts, unsigned int version);

/** A capacity report. Immutable. */
typedef struct tf_capacity tf_capacity;

/**
 * Compute the capacity of @p plan for @p pool.
 * @param[out] out release with tf_capacity_free()
 * @param opts NULL for the defaults
 * @return 0; TF_EINVALID for bad options (negative target, headroom outside [0,1),
 *         negative bitrate) naming the field; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_capacity_new(tf_capacity **out, const tf_pool *pool, const tf_plan *plan,
                                  const tf_capacity_options *opts);

/** Release a report. NULL does nothing. */
TF_EXTERN(void) tf_capacity_free(tf_capacity *capacity);

/** Allocations the planned relays can hold: sum of addresses x ports. */
TF_EXTERN(int64_t) tf_capacity_allocations(const tf_capacity *capacity);

/** Allocations if the pool were scaled to every placeable identity. */
TF_EXTERN(int64_t) tf_capacity_full_scale_allocations(const tf_capacity *capacity);

/**
 * Relay addresses needed for the target at the headroom:
 * ceil(N / (ports x (1 - h))); 0 without a target.
 */
TF_EXTERN(int64_t) tf_capacity_addresses_needed(const tf_capacity *capacity);

/** Nodes needed by the bandwidth bound (sessions x bitrate / node bandwidth); 0 without one. */
TF_EXTERN(int64_t) tf_capacity_nodes_for_bandwidth(const tf_capacity *capacity);

/**
 * The report as stable JSON (docs/cli.md, docs/capacity-model.md).
 * @param[out] out release with tf_free()
 */
TF_EXTERN(tf_err) tf_capacity_to_json(char **out, const tf_capacity *capacity);

TF_END_DECL

#endif
