/* Private parts of the Kubernetes adapter (adapter.h): the relay pod's
 * contract (built by tf_manifest_relay_pod(), read back by
 * tf_adapter__pod_parse(), both in manifest.c), the write helpers
 * (adapter_objects.c), the expectations and the CLI port slots, and the
 * probe and scrape workers (adapter_work.c). Pure functions but the ones
 * that take a tf_kube. Reachable from the tests (they link the objects). */
#ifndef TF_ADAPTER_INTERNAL_H
#define TF_ADAPTER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "turnfleet.h"

/* The relay pod's labels and annotations: one contract for the builder and the parser. */
#define TF_POD__LABEL_POOL "turnfleet.hzmi.dev/pool"
#define TF_POD__LABEL_RELAY "turnfleet.hzmi.dev/relay"
#define TF_POD__ANN_ADDRESS "turnfleet.hzmi.dev/relay-address"
#define TF_POD__ANN_PORTS "turnfleet.hzmi.dev/port-range"
#define TF_POD__ANN_HASH "turnfleet.hzmi.dev/config-hash"
#define TF_POD__ANN_CLI_PORT "turnfleet.hzmi.dev/cli-port"
/* the readiness gate of a full relay: True (a full relay is healthy) with this reason, so whoever reads
 * the pod next knows it is out of the turn URIs until a port frees */
#define TF_POD__GATE_FULL "RelayFull"

/* A relay Pod as the adapter reads it (every string malloc'd, "" when absent). */
typedef struct tf_adapter__pod {
  char *name, *ns, *uid, *relay, *identity, *config_hash, *owner_uid, *node;
  char *gate_reason, *gate_message, *gate_since; /* the allocate-ready condition's (since: lastTransitionTime) */
  int deleting;              /* metadata.deletionTimestamp is set: its preStop drains it (whoever deleted it) */
  int64_t deleting_since_ms; /* when its deletion was asked (deletionTimestamp - deletionGracePeriodSeconds),
                                Unix ms; 0: unknown */
  int finished;              /* status.phase Succeeded or Failed */
  int started;               /* status.phase Running, Succeeded or Failed: the kubelet ran its containers */
  int gate;                  /* the allocate-ready condition: 1 True, 0 False, -1 absent */
  int ready;                 /* the pod's Ready condition is True (the kubelet saw the gate and every container) */
  int gate_index;            /* its index in status.conditions; -1 */
  int has_conditions;        /* status.conditions is an array */
  int host_network;          /* spec.hostNetwork: its CLI listens on the node's 127.0.0.1 */
  uint16_t agent_port;       /* the agent container's port named "agent"; 0: none */
  uint16_t cli_port;         /* the cli-port annotation; 0: none (a pod made before it was written) */
} tf_adapter__pod;

/* "2026-12-02T22:06:44Z" (fraction and offset allowed) as Unix ms; -1 when malformed. */
int64_t tf_adapter__time_parse(const char *text);

/* Read @p json into @p out (manifest.c, beside the builder). 0; -1 when it is no relay pod of ours (no
 * relay label, no relay-address or port-range annotation, malformed JSON, no memory): @p out cleared. */
int tf_adapter__pod_parse(tf_adapter__pod *out, const char *json);
struct cJSON;
/* The same from a parsed tree (the index's: the event parsed once). */
int tf_adapter__pod_from_tree(tf_adapter__pod *out, const struct cJSON *root);
void tf_adapter__pod_clear(tf_adapter__pod *p);

/* The JSON patch for `pods/NAME/status` that sets the readiness-gate condition to @p ready (with @p reason,
 * @p message and @p now as its lastTransitionTime), or NULL when the pod already says so (or on no memory:
 * *err then 1). It tests the condition's type at its index first: a concurrent change of the list fails
 * it (422) instead of clobbering. */
char *tf_adapter__gate_patch(const tf_adapter__pod *pod, int ready, const char *reason, const char *message,
                             const char *now, int *err);

/* ---- adapter_objects.c ---- */

/* The engine facts of a parsed relay pod (@p f borrows its strings): its identity, config hash and CLI port
 * from the annotations; running unless finished, waiting until started; a pod being deleted is draining since its deletion was
 * asked (@p wall_ms the Unix clock, @p now_ms the engine's); held back from the URIs until the pod is Ready
 * (the kubelet has seen its gate); its readiness gate as the last probe outcome (RelayFull: a 508). */
void tf_adapter__pod_facts(tf_engine_relay_facts *f, const tf_adapter__pod *p, int64_t wall_ms, int64_t now_ms);

/* The status body @p desired (tf_manifest_status()) with each relay's lastProbe.time (and a pass's message)
 * taken from @p observed_pool's status where that relay's probe outcome (ok, errorCode) did not change, and
 * each condition's lastTransitionTime kept where its status did not: the status records outcomes and when
 * they last changed, not every probe. NULL on malformed input or no memory. */
char *tf_adapter__status_stable(const char *desired, const char *observed_pool);

/* @p desired (a status body) with the condition @p type set to @p status/@p reason/@p message, replacing one
 * of that type; its lastTransitionTime is the observed pool's while the status stays, else @p now. NULL on
 * bad JSON or memory. */
char *tf_adapter__with_condition(const char *desired, const char *observed_pool, const char *type,
                                 const char *status, const char *reason, const char *message, const char *now);

/* The status body of a refused pool (invalid spec, missing secret): Ready=False with @p reason and
 * @p message, observedGeneration @p generation, lastTransitionTime kept from @p observed_pool when Ready was
 * already False for the same reason, else @p now. NULL on no memory. */
char *tf_adapter__refused_status(const char *observed_pool, int64_t generation, const char *reason,
                                 const char *message, const char *now);

/* The conditions of @p body (a status body just written) that turned bad against @p observed_pool: a JSON
 * array of {"reason", "message"} (message "Type: the condition's message"), one per condition whose status
 * went wrong (Ready, ProbeSucceeded, ReachableFromVantage False; CapacityPressure, AddressConflict True) or
 * whose reason changed while wrong; a pool only starting (Ready False, RelaysNotReady) is none. NULL on bad
 * JSON or memory. */
char *tf_adapter__condition_troubles(const char *body, const char *observed_pool);

/* What to write for one owned object: TF_ADAPTER__NONE when @p observed (NULL: absent) already has
 * everything @p desired says; CREATE when absent; UPDATE with *update = @p desired carrying the observed
 * metadata.resourceVersion. -1 on malformed input or no memory; *path names the first difference (never a
 * value) when not NULL. */
enum { TF_ADAPTER__NONE = 0, TF_ADAPTER__CREATE = 1, TF_ADAPTER__UPDATE = 2 };
int tf_adapter__diff(char **update, char **path, const char *desired, const char *observed);

/* Create or update the object @p name in collection @p coll so that it has what @p desired says, starting
 * from @p observed (a cache's copy; NULL: absent): nothing is sent when nothing differs; an update carries
 * the resourceVersion it read. A 409 (a concurrent write, or a create of an object that exists) gets one
 * fresh read and, if it still differs, one more write against the fresh resourceVersion: never a loop; a
 * fresh read of an object with other ownerReferences than @p desired's is not written (TF_ECONFLICT, that
 * object in @p learnt: someone else's object of the name, which a cache by label does not show).
 * *written (may be NULL) is 1 when a write succeeded. @p what (may be NULL) says what was done, e.g.
 * `update configmaps/x (data.uris differs)`, malloc'd. @p learnt (may be NULL) gets the object as the
 * server has it when a request told (the write's answer, or the fresh read that needed no write; malloc'd),
 * else NULL. 0, or the tf_kube error of the last request (its Status message in @p what). */
tf_err tf_adapter__apply(tf_kube *kube, const char *coll, const char *name, const char *desired,
                         const char *observed, int *written, char **what, char **learnt);

/* Views ahead of the caches: what this adapter last learnt of an object it writes (the server's answer to
 * its write, or the fresh read after a 409), kept with the resourceVersion its cache showed then. While the
 * cache still shows that resourceVersion (or still lacks the object, when it lacked it), the kept object is
 * the better view: a write from the stale cache would only repeat what was done (a status patch again, a
 * gate again, a PUT answered 409), so a watch that lags never drives a write loop. Once the cache shows
 * anything else, the kept object is dropped and the cache believed; so is one older than the caller's limit
 * (tf_adapter__views_expire(): a cache that lags that long is believed, as an expectation lapses, and an
 * object written once is not kept twice, beside its cached copy, for good). Keys are the caller's ("ns/pool|what").
 * Kept objects may be secret material: wiped when dropped. Not thread-safe (the adapter's loop). */
typedef struct tf_adapter__views tf_adapter__views;
tf_adapter__views *tf_adapter__views_new(void);
void tf_adapter__views_free(tf_adapter__views *v);
/* The better view of @p key: the kept object, or @p cached (NULL: absent from the cache). Borrowed, valid
 * until the next call on @p v. */
const char *tf_adapter__views_pick(tf_adapter__views *v, const char *key, const char *cached);
/* Keep @p fresh (the server's object) for @p key; @p seen is what tf_adapter__views_pick() answered for it
 * (the cache's copy when nothing was kept). @p fresh NULL forgets @p key (the view turned out wrong). 0, -1
 * on no memory (then nothing is kept). @p now_ms: when (monotonic), for tf_adapter__views_expire(). */
int tf_adapter__views_keep(tf_adapter__views *v, const char *key, const char *seen, const char *fresh, int64_t now_ms);
/* Forget every object kept before @p before_ms. */
void tf_adapter__views_expire(tf_adapter__views *v, int64_t before_ms);
/* Forget every key that starts with @p prefix (a pool gone). */
void tf_adapter__views_forget(tf_adapter__views *v, const char *prefix);

/* 1 when @p observed carries the ownerReferences @p desired sets (both none counts), 0 when they differ, -1 on
 * malformed input. An update that changed them would take the object over (kube-apiserver's
 * OwnerReferencesPermissionEnforcement then asks for `delete` on it, which the operator is not granted). */
int tf_adapter__same_owners(const char *desired, const char *observed);

/* @p object with @p finalizer in metadata.finalizers (@p want 1) or without it (0), its status dropped;
 * NULL with *err 0 when it already is so, NULL with *err 1 on malformed input or no memory. */
char *tf_adapter__with_finalizer(const char *object, const char *finalizer, int want, int *err);

/* metadata.generation of @p object (0 when absent); metadata.@p field as a malloc'd string ("" when absent,
 * NULL on no memory); the deletionTimestamp as Unix ms (1 when it is not a time, 0 when not being deleted);
 * 1 when status.@p field is true. */
int64_t tf_adapter__generation(const char *object);
char *tf_adapter__meta_string(const char *object, const char *field);
int64_t tf_adapter__deletion_ms(const char *object);
int tf_adapter__status_says(const char *object, const char *field);

/* ---- adapter_index.c: the caches parsed once, by owning pool, node and claimed address ---- */

/* Where a pool's planner may place relays (tf_plan__sites()): canonical addresses and node names, each sorted
 * and unique. known 0: not computed (every other pool's relay is then a claim on it). */
typedef struct tf_adapter__sites {
  int known;
  char **addrs;
  size_t naddrs;
  char **nodes;
  size_t nnodes;
} tf_adapter__sites;
/* The sites of @p pool on @p nodes into @p out (cleared first). 0, -1 on no memory (@p out unknown). */
int tf_adapter__sites_plan(tf_adapter__sites *out, const tf_pool *pool, const tf_nodes *nodes);
void tf_adapter__sites_clear(tf_adapter__sites *s);

/* The TURNPools, relay Pods and Nodes as tf_adapter_changed() forwards them: parsed once per change, indexed by
 * owning pool (the pool label), node and address (the relay-address annotation), and the addresses each pool
 * may place relays on. Thread-safe (one lock). */
typedef struct tf_adapter__index tf_adapter__index;
tf_adapter__index *tf_adapter__index_new(void);
void tf_adapter__index_free(tf_adapter__index *x);

/* tf_adapter_changed(): take the change into @p x and queue on @p queue the pools it concerns (docs/operator.md):
 * a TURNPool itself, and when it comes, goes or changes its listener ports the pools its relays meet; a relay
 * pod its pool, and when its claim changes (it comes or goes; its address, ports, node, CLI port, owner or phase
 * changes) the pools with a relay or a site on its addresses whose ports it may meet (relay range, listener
 * ports) and, on host networking, the pools with a relay on its CLI port on its node (a collision); a Node the pools whose nodeSelector its old or new labels match and those
 * with relays on it (the API servers' Endpoints, a namespaced key: every pool); a Secret the pools of its
 * namespace that name it (secretRef, previousSecretRef, tlsSecretRef) and the pool of its label; a ConfigMap
 * the pool of its label. @p key NULL: every pool of the @p pools cache. Any thread. 0; TF_EINVALID for an
 * unknown @p cache. */
tf_err tf_adapter__enqueue(tf_adapter__index *x, tf_informer *pools, tf_workqueue *queue, tf_adapter_cache cache,
                           tf_informer_op op, const char *key, const char *object);

/* Pool @p key (uid @p uid; NULL: any) may place relays on @p s's addresses (NULL: none): the queue's sites. 0,
 * -1 on no memory. A pool the index does not hold is left alone. */
int tf_adapter__index_set_sites(tf_adapter__index *x, const char *key, const char *uid, const tf_adapter__sites *s);

/* The claims of other pools that concern pool @p key (uid @p uid), into @p engine: the CLI ports of other
 * pools' running host-network relays on @p sites' nodes, the relays of other existing pools on @p sites'
 * addresses with their pools' listener ports (@p sites NULL or unknown: every node, every address). *refused:
 * claims the engine refused (tf_error_last() says the last). *collisions: the pool's relays that share a CLI
 * port with another relay on their node (tf_adapter__cli_collisions(), @p why). @p digest: the SHA-256 of the
 * claims @p engine holds from the last call (zeros: none known); when the claims are the same the engine's are
 * left as they are (*refused 0), else they are replaced and @p digest updated. 0, -1 on no memory. */
int tf_adapter__index_claims(tf_adapter__index *x, tf_engine *engine, const char *key, const char *uid,
                             const tf_adapter__sites *sites, unsigned char digest[32], size_t *refused, char *why,
                             size_t why_len, size_t *collisions);

/* ---- adapter_secrets.c: the caches of the Secrets the pools reference ---- */

/* One informer per referenced Secret (field selector metadata.name=NAME in the pool's namespace), made when
 * a pool first references it and dropped when no pool does: a Secret no pool references is never listed,
 * watched or cached. A change of a cached Secret (it appears, changes, goes) queues the pools that reference
 * it. Changed by one thread (the adapter's loop); read by any. */
typedef struct tf_adapter__refs tf_adapter__refs;
/* The informers take @p tmpl's knobs (its path, selectors and callback are replaced; NULL: the defaults) and
 * write nothing; a change queues into @p queue. NULL on no memory. */
tf_adapter__refs *tf_adapter__refs_new(tf_kube *kube, const tf_informer_options *tmpl, tf_workqueue *queue);
/* Stop every informer and release. */
void tf_adapter__refs_free(tf_adapter__refs *t);
/* Pool @p pool (`ns/name`) now references the Secrets @p names (@p n; NULL or "" entries skipped) of
 * namespace @p ns, and no others: informers made (and started) for names new to every pool, dropped for names
 * no pool references any more. 0; -1 when a cache could not be made (the others are set). */
int tf_adapter__refs_set(tf_adapter__refs *t, const char *pool, const char *ns, const char *const *names,
                         size_t n);
/* The cached Secret @p key (`ns/name`; tf_free()): 0; TF_ENOTFOUND (its cache synced: there is none);
 * TF_EUNAVAILABLE while no pool references it or its cache has not synced yet. */
tf_err tf_adapter__refs_get(tf_adapter__refs *t, const char *key, char **out);
/* How many Secrets are cached (informers running). */
size_t tf_adapter__refs_count(tf_adapter__refs *t);
/* Queue the pools that reference Secret @p key (its informer's callback). */
void tf_adapter__refs_changed(tf_adapter__refs *t, const char *key);


/* The first CLI port of a pool's relays: @p base + @p stride x slot, the slot FNV-1a("NS/NAME") mod
 * @p slots. Relays on host networking share their node's 127.0.0.1: pools in different slots never share a
 * CLI port; pools in one slot are told apart by tf_adapter__cli_collisions(). */
uint16_t tf_adapter__cli_port_base(const char *ns, const char *name, uint16_t base, unsigned slots,
                                   unsigned stride);

/* The CLI ports of pool @p owner_uid's pods that another pod in @p pods (@p n) also uses on the same node,
 * both on host networking and neither finished: "relay a and relay b (pool p) on node n share CLI port N"
 * for the first @p max of them, '; '-joined into @p why (may be NULL). Returns how many of the pool's pods
 * collide. */
size_t tf_adapter__cli_collisions(const tf_adapter__pod *pods, size_t n, const char *owner_uid, char *why,
                                  size_t why_len);

/* Expectations: what this adapter asked the API server for and its caches do not show yet. A create of a
 * relay pod is expected until the pod cache holds that pod (or another of that name that is not being
 * deleted); a delete until the cache holds none
 * with that uid, or its pod is being deleted. Either lapses after @p ttl_ms (the cache is then believed,
 * whatever it says). While a create is expected the relay is not created again; while a delete is, it is
 * not deleted again. */
typedef struct tf_adapter__expect tf_adapter__expect;
tf_adapter__expect *tf_adapter__expect_new(int64_t ttl_ms);
void tf_adapter__expect_free(tf_adapter__expect *e);
/* Record a create of pod @p key (its name; uid @p uid) / a delete of pod @p key with uid @p uid. 0, -1. */
int tf_adapter__expect_create(tf_adapter__expect *e, const char *key, const char *uid, int64_t now_ms);
int tf_adapter__expect_delete(tf_adapter__expect *e, const char *key, const char *uid, int64_t now_ms);
/* What the cache says of pod @p key: @p uid (NULL: absent), @p deleting. Settles what it shows. */
void tf_adapter__expect_observe(tf_adapter__expect *e, const char *key, const char *uid, int deleting,
                                int64_t now_ms);
/* The uid of the pod created under @p key that the cache does not show yet (borrowed), or NULL. */
const char *tf_adapter__expect_creating(const tf_adapter__expect *e, const char *key, int64_t now_ms);
/* 1 while a delete of pod @p key with @p uid was sent and the cache does not show it yet. */
int tf_adapter__expect_deleting(const tf_adapter__expect *e, const char *key, const char *uid, int64_t now_ms);
/* When the first expectation still held at @p now_ms lapses, or 0 when none is held. */
int64_t tf_adapter__expect_next_ms(const tf_adapter__expect *e, int64_t now_ms);

/* ---- adapter_work.c: probes and agent scrapes off the reconcile thread, on one loop ---- */

typedef struct tf_adapter__work tf_adapter__work;
typedef enum { TF_ADAPTER__PROBE = 0, TF_ADAPTER__SCRAPE = 1 } tf_adapter__job_kind;

typedef struct tf_adapter__result {
  tf_adapter__job_kind kind;
  uint64_t id;         /* the engine action's id */
  uint64_t epoch;      /* the engine it belongs to (a pool's engine made anew has another) */
  int ok;              /* probe: every URI passed */
  int error_code;      /* probe: the TURN error code that failed it, 0: none */
  int on_allocate;     /* probe: it failed on the Allocate */
  char *message;       /* probe: what failed (never a secret); NULL when it passed */
  int64_t allocations; /* scrape: turnfleet_agent_ports_in_use; -1: unreadable */
} tf_adapter__result;

/* One thread running one loop for every job at once; a finished job adds its key to @p queue. NULL on
 * failure. */
tf_adapter__work *tf_adapter__work_new(tf_workqueue *queue);
/* Stop the loop (jobs in flight are abandoned, a probe's allocations released best effort) and release
 * what is left. */
void tf_adapter__work_free(tf_adapter__work *w);
/* Allocate through each of the @p n probes @p po describes (the secret of the first serves all: copied,
 * wiped after use). 0, -1 on no memory. */
int tf_adapter__work_probe(tf_adapter__work *w, const char *key, uint64_t epoch, uint64_t id,
                           const tf_probe_options *po, size_t n);
/* GET @p url (an agent's /metrics) with `Authorization: Bearer @p token` (NULL: none; copied, wiped after
 * use) and sum turnfleet_agent_ports_in_use. 0, -1 on no memory. */
int tf_adapter__work_scrape(tf_adapter__work *w, const char *key, uint64_t epoch, uint64_t id, const char *url,
                            const char *token, int timeout_ms);
/* The finished results of @p key in the order they finished; *out malloc'd (release each with
 * tf_adapter__result_clear(), then free()). Returns the count. */
size_t tf_adapter__work_take(tf_adapter__work *w, const char *key, tf_adapter__result **out);
void tf_adapter__result_clear(tf_adapter__result *r);

#endif
