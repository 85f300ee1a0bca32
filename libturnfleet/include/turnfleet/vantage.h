/**
 * @file turnfleet/vantage.h
 * @brief Reachability from a vantage point, pure: the `<pool>-vantage`
 * ConfigMap a vantage runner (`turnfleet-probe --vantage`) writes from its
 * probe results, and the `ReachableFromVantage` condition the operator reads
 * from it.
 *
 * The ConfigMap's data: `runner` (who probed), `time` (RFC 3339 UTC, when),
 * `results.json` (a JSON array, one tf_probe_result_to_json() object per URI
 * of `<pool>-turn-uris`). It never holds a secret or a credential: the probe
 * results carry none.
 */
#ifndef TURNFLEET_VANTAGE_H
#define TURNFLEET_VANTAGE_H

#include "common.h"
#include "errors.h"
#include "metrics.h"
#include "probe.h"

TF_BEGIN_DECL

/** The condition type this module decides. */
#define TF_VANTAGE_CONDITION "ReachableFromVantage"
/** Default staleness bound: results older than this are Unknown (two runs of a 5-minute CronJob). */
#define TF_VANTAGE_STALE_MS_DEFAULT ((int64_t)15 * 60 * 1000)

/**
 * The `<pool>-vantage` ConfigMap (JSON, for a create or a PUT; labels
 * `app.kubernetes.io/managed-by: turnfleet-probe` and `turnfleet.hzmi.dev/pool`).
 * @param[out] out the body, release with tf_free()
 * @param pool the pool's name (a DNS-1123 label)
 * @param ns its namespace (a DNS-1123 label)
 * @param runner who probed (e.g. the pod or host name; printable, 1-253 bytes)
 * @param now_ms when, Unix ms
 * @param results one probe result per URI, borrowed; may be NULL when @p count is 0
 * @param count entries in @p results
 * @return 0; TF_EINVALID naming the bad argument; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_vantage_configmap(char **out, const char *pool, const char *ns, const char *runner,
                                       int64_t now_ms, const tf_probe_result *const *results, size_t count);

/**
 * The ReachableFromVantage condition from a `<pool>-vantage` ConfigMap:
 * - "True", AllReachable: every URI probed fine;
 * - "False", Unreachable: the message lists the failing URIs with the stage and
 *   error of each (at most 8, then "and N more");
 * - "Unknown": NoVantageResults (no ConfigMap: @p configmap NULL), NoURIsProbed
 *   (an empty result list), StaleVantageResults (older than @p stale_ms, or
 *   dated in the future by more than that), BadVantageResults (the message names the field).
 * The message says who probed and when.
 * @param[out] status "True", "False" or "Unknown"; a static string
 * @param[out] reason the reason (CamelCase); a static string
 * @param[out] message release with tf_free()
 * @param configmap the ConfigMap JSON as the API returns it, borrowed; NULL when there is none
 * @param len bytes in @p configmap
 * @param now_ms now, Unix ms
 * @param stale_ms staleness bound in ms; 0: TF_VANTAGE_STALE_MS_DEFAULT
 * @return 0 (a malformed ConfigMap is an Unknown condition, not an error); TF_EINVALID for bad arguments; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_vantage_condition(const char **status, const char **reason, char **message,
                                       const char *configmap, size_t len, int64_t now_ms, int64_t stale_ms);

/**
 * Add the pool's `turnfleet_pool_condition{namespace, pool, type="ReachableFromVantage", status}`
 * samples to @p metrics (declaring the family if needed): 1 for the status
 * tf_vantage_condition() gives for @p configmap, 0 for the other two.
 * tf_reconcile_metrics() leaves this type out: the reconcile core has no vantage.
 * @param ns the pool's namespace
 * @param pool the pool's name
 * @param configmap, len, now_ms, stale_ms as for tf_vantage_condition()
 * @return 0; TF_EINVALID (also for a family declared with another type, or
 *         samples of this pool added before); TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_vantage_metrics(tf_metrics *metrics, const char *ns, const char *pool, const char *configmap,
                                     size_t len, int64_t now_ms, int64_t stale_ms);

TF_END_DECL

#endif
