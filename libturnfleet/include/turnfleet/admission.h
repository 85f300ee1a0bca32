/**
 * @file turnfleet/admission.h
 * @brief AdmissionReview v1 for TURNPools, pure: decode a review (bounded,
 * exact errors), judge it (the pool rules of tf_pool_validate() with their
 * field paths, cross-pool address conflicts, a replica cap, `/scale` writes),
 * and write the response: a denial naming the fields, warnings from a dry-run
 * plan over the nodes, the defaults as a JSON Patch (mutating).
 *
 * No I/O: the caller (turnfleet-webhook) reads the request and supplies the
 * nodes and the other pools it knows; this module never blocks.
 */
#ifndef TURNFLEET_ADMISSION_H
#define TURNFLEET_ADMISSION_H

#include "common.h"
#include "errors.h"
#include "inventory.h"
#include "pool.h"

TF_BEGIN_DECL

/** A decoded AdmissionReview request. Immutable. */
typedef struct tf_admission tf_admission;

/** What the response is for: the validating or the mutating webhook. */
typedef enum tf_admission_kind {
  TF_ADMISSION_VALIDATE = 0, /**< allow or deny, with warnings; never a patch */
  TF_ADMISSION_MUTATE = 1    /**< allow, with the defaults as a JSON Patch (a pool that does not validate gets none) */
} tf_admission_kind;

/** Admission knobs. Fields are only appended; they are read up to @ref version. */
typedef struct tf_admission_options {
  unsigned int version; /**< TF_ADMISSION_OPTIONS_VERSION */
  size_t max_bytes;     /**< longest review in bytes; 0: TF_ADMISSION_MAX_BYTES_DEFAULT */
  size_t max_values;    /**< most JSON values in one review; 0: TF_PARSE_MAX_VALUES_DEFAULT */
  int64_t max_replicas; /**< highest spec.replicas allowed (create, update, `/scale`); 0: no cap
                             beyond the pool parser's */
  size_t max_warnings;  /**< most warnings in one response; 0: TF_ADMISSION_MAX_WARNINGS_DEFAULT */
} tf_admission_options;

#define TF_ADMISSION_OPTIONS_VERSION 1
/** 3 MiB: kube-apiserver's own limit on a request body, plus the review's envelope. */
#define TF_ADMISSION_MAX_BYTES_DEFAULT ((size_t)3 << 20)
/** kube-apiserver keeps warnings up to 4096 bytes in all; 16 short ones fit. */
#define TF_ADMISSION_MAX_WARNINGS_DEFAULT 16
#define TF_ADMISSION_OPTIONS_INIT {TF_ADMISSION_OPTIONS_VERSION, TF_ADMISSION_MAX_BYTES_DEFAULT, 0, 0, 0}

/**
 * Initialise @p opts to the defaults of @p version.
 * @param[out] opts the options to fill, the caller's
 * @param version TF_ADMISSION_OPTIONS_VERSION (or older)
 * @return 0; TF_EINVALID for an unknown version
 */
TF_EXTERN(tf_err) tf_admission_options_init(tf_admission_options *opts, unsigned int version);

/**
 * Decode an AdmissionReview v1 request body. Checks the envelope only
 * (`apiVersion: admission.k8s.io/v1`, `kind: AdmissionReview`, `request.uid`,
 * `request.operation`, the types of `request.kind`, `resource`, `subResource`,
 * `namespace`, `name`, `object`, `oldObject`, `dryRun`); the object itself is
 * judged by tf_admission_respond(), so a bad pool gets a denial, not an error.
 * @param[out] out the review, release with tf_admission_free()
 * @param body the request body (JSON), borrowed for the call
 * @param len bytes in @p body
 * @param opts the limits (max_bytes, max_values), borrowed; NULL for the defaults
 * @return 0; TF_EPROTO for malformed JSON (line, column and byte offset), a
 *         duplicate key, NUL or invalid UTF-8 (with the field path);
 *         TF_EINVALID for a body over a limit or a wrong envelope field (the
 *         message names it: `request.uid: required`); TF_ENOMEM. Any failure
 *         deserves HTTP 400: a review without a uid cannot be answered.
 */
TF_EXTERN(tf_err) tf_admission_decode(tf_admission **out, const char *body, size_t len,
                                      const tf_admission_options *opts);

/** Release a review. NULL does nothing. */
TF_EXTERN(void) tf_admission_free(tf_admission *review);

/** request.uid. Borrowed from @p review. */
TF_EXTERN(const char *) tf_admission_uid(const tf_admission *review);
/** request.operation: "CREATE", "UPDATE", "DELETE" or "CONNECT". Borrowed. */
TF_EXTERN(const char *) tf_admission_operation(const tf_admission *review);
/** request.subResource ("" for the object itself, "scale", "status"). Borrowed. */
TF_EXTERN(const char *) tf_admission_sub_resource(const tf_admission *review);
/** request.resource.resource ("turnpools"). Borrowed. */
TF_EXTERN(const char *) tf_admission_resource(const tf_admission *review);

/**
 * Judge a review and write the AdmissionReview v1 response (`response.uid` is
 * the request's). What is judged:
 * - CREATE/UPDATE of `turnpools`: the object through tf_pool_parse() and
 *   tf_pool_validate() (a denial lists every problem as `path: message`, `; `
 *   between them, with the causes in `status.details.causes`); spec.replicas
 *   against `max_replicas`; with @p nodes, the relay addresses the pool would
 *   take against those the other pools in @p pools would take (planned on the
 *   same nodes): an overlap of relay range or listener port on one address is
 *   denied (`spec.relayPortRange: address conflict: ...`);
 * - CREATE/UPDATE of `turnpools/scale` (autoscaling/v1 Scale): spec.replicas an
 *   integer, >= 0, <= `max_replicas`; the pool of the same namespace and name in
 *   @p pools, when there, is validated and planned at the new count;
 * - anything else (DELETE, CONNECT, `/status`, other resources) is allowed as is.
 * Warnings (with @p nodes): replicas that cannot be placed and why; relay
 * addresses offered by two nodes; PartitionedIP adds no capacity; listener
 * ports below 1024 (the relay needs NET_BIND_SERVICE).
 * @param[out] out the response JSON, release with tf_free()
 * @param[out] allowed 1 when the response allows the request; may be NULL
 * @param review the decoded review, borrowed
 * @param kind TF_ADMISSION_VALIDATE or TF_ADMISSION_MUTATE
 * @param nodes the node inventory for the dry-run plan; NULL: no placement warnings and no conflict check
 * @param pools the other pools (e.g. an informer's cache); the reviewed pool's
 *        own entry (same namespace and name) is skipped, or, for `/scale`, used
 *        as the pool being scaled; may be NULL when @p pool_count is 0
 * @param pool_count entries in @p pools (NULL entries are skipped)
 * @param opts max_replicas and max_warnings, borrowed; NULL for the defaults
 * @return 0 (a denial is a successful answer); TF_EINVALID for bad arguments; TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_admission_respond(char **out, int *allowed, const tf_admission *review, tf_admission_kind kind,
                                       const tf_nodes *nodes, const tf_pool *const *pools, size_t pool_count,
                                       const tf_admission_options *opts);

TF_END_DECL

#endif
