/* The operator's pure decisions: what it reads from an observed object and
 * what it writes because of it. No I/O, no clock (times come in as text),
 * so every rule has a unit test (tests/operator/check_decide.c). */
#ifndef TURNFLEET_OPERATOR_DECIDE_H
#define TURNFLEET_OPERATOR_DECIDE_H

#include <stddef.h>
#include <stdint.h>

/* A relay Pod as the operator reads it (every string malloc'd, "" when absent). */
typedef struct op_pod {
  char *name, *uid, *relay, *identity, *config_hash, *owner_uid;
  char *gate_reason, *gate_message, *gate_since; /* the allocate-ready condition's (since: lastTransitionTime) */
  int deleting;       /* metadata.deletionTimestamp is set: its preStop drains it (whoever deleted it) */
  int64_t deleting_since_ms; /* when its deletion was asked (deletionTimestamp - deletionGracePeriodSeconds),
                                Unix ms; 0: unknown */
  int finished;       /* status.phase Succeeded or Failed */
  int gate;           /* the allocate-ready condition: 1 True, 0 False, -1 absent */
  int ready;          /* the pod's Ready condition is True (the kubelet saw the gate and every container) */
  int gate_index;     /* its index in status.conditions; -1 */
  int has_conditions; /* status.conditions is an array */
  uint16_t agent_port; /* the agent container's port named "agent"; 0: none */
} op_pod;

/* "2026-12-02T22:06:44Z" (fraction and offset allowed) as Unix ms; -1 when malformed. */
int64_t op_time_parse(const char *text);

/* Read @p json into @p out. 0; -1 when it is no relay pod of ours (no
 * turnfleet.hzmi.dev/relay label, no relay-address or port-range annotation,
 * malformed JSON); @p out is then cleared. */
int op_pod_parse(op_pod *out, const char *json);
void op_pod_clear(op_pod *p);

/* The JSON patch for `pods/NAME/status` that sets the readiness-gate
 * condition to @p ready (with @p reason, @p message and @p now as its
 * lastTransitionTime), or NULL when the pod already says so (or on no memory:
 * *err then 1). The patch tests the condition's type at its index first, so
 * a concurrent change of the list fails it (422) instead of clobbering. */
char *op_gate_patch(const op_pod *pod, int ready, const char *reason, const char *message, const char *now,
                    int *err);

/* The status body @p desired (tf_manifest_status()) with each relay's
 * lastProbe.time and message taken from @p observed_pool's status where
 * that relay's probe outcome (ok, errorCode) did not change: the status
 * records outcomes and when they last changed, not every probe. NULL on
 * malformed input or no memory. */
char *op_status_stable(const char *desired, const char *observed_pool);

/* The status body of a pool the operator refuses (invalid spec, missing
 * secret): Ready=False with @p reason and @p message, observedGeneration
 * @p generation, lastTransitionTime kept from @p observed_pool when Ready
 * was already False for the same reason, else @p now. NULL on no memory. */
/* @p desired (a status body) with the condition @p type set to @p status/@p reason/@p message, replacing one
 * of that type; its lastTransitionTime is the observed pool's while the status stays, else @p now. NULL on
 * bad JSON or memory. */
char *op_with_condition(const char *desired, const char *observed_pool, const char *type, const char *status,
                        const char *reason, const char *message, const char *now);

char *op_refused_status(const char *observed_pool, int64_t generation, const char *reason, const char *message,
                        const char *now);

/* What to do with one object the operator owns: OP_WRITE_NONE when
 * @p observed (NULL: absent) already has everything @p desired says;
 * OP_WRITE_CREATE when absent; OP_WRITE_UPDATE with *update = @p desired
 * carrying the observed metadata.resourceVersion (a GET+PUT with optimistic
 * concurrency). -1 on malformed input or no memory; *path names the first
 * difference (never a value) when not NULL. */
enum { OP_WRITE_NONE = 0, OP_WRITE_CREATE = 1, OP_WRITE_UPDATE = 2 };
int op_object_write(char **update, char **path, const char *desired, const char *observed);

/* The first CLI port of a pool's relays: @p base + @p stride x slot, the
 * slot FNV-1a("NS/NAME") mod @p slots. Relays on host networking share the
 * node's 127.0.0.1: pools in different slots never share a CLI port. */
uint16_t op_cli_port_base(const char *ns, const char *name, uint16_t base, unsigned slots, unsigned stride);

/* Whether @p crt (PEM) and @p key (PEM) make a usable certificate and key for coturn: a certificate, a
 * private key, and the key is the certificate's. 0 with @p digest (65 bytes) the hex SHA-256 of both; -1
 * with @p why naming the key that is wrong (`tls.crt: no PEM certificate`). */
int op_tls_pair_check(const char *crt, const char *key, char digest[65], char *why, size_t why_len);

/* metadata.generation of @p object (0 when absent); metadata.uid and
 * resourceVersion as malloc'd strings ("" when absent, NULL on no memory). */
int64_t op_generation(const char *object);
char *op_meta_string(const char *object, const char *field);

/* metadata.deletionTimestamp of @p object as Unix ms (1 when it is not a time); 0 when it is not being deleted. */
int64_t op_deletion_ms(const char *object);

/* @p object (an observed object, with its resourceVersion: a PUT that fails on a concurrent change) with
 * @p finalizer in metadata.finalizers (@p want 1) or without it (0), its status dropped; NULL with *err 0
 * when it already is so, NULL with *err 1 on malformed input or no memory. */
char *op_with_finalizer(const char *object, const char *finalizer, int want, int *err);

/* 1 when status.@p field of @p object is true. */
int op_status_says(const char *object, const char *field);

#endif
