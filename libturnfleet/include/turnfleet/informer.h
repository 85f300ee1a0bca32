/**
 * @file turnfleet/informer.h
 * @brief Controller machinery on top of tf_kube: the informer (client-go's
 * reflector: list, watch, relist on 410, backoff, stall watchdog) with a cache
 * of shared read-only objects (each parsed once), indexed by namespace, label
 * and the caller's index functions; a keyed, rate-limited work queue; Lease
 * leader election; an Event recorder with client-side dedupe.
 *
 * How it runs: an informer and an elector each own one worker thread that
 * makes blocking requests with their own connections (started by
 * tf_informer_start() / tf_elector_start(), joined by the stop functions).
 * The caller's loop never blocks on them: it reads the cache (locked, any
 * thread), and takes work from the queue (any thread, tf_workqueue_get() with
 * a timeout). Callbacks run on the owning worker thread, never with a library
 * lock held, one at a time and in order, so a callback may call
 * tf_informer_get()/tf_informer_list() and tf_workqueue_add(); it must not
 * call the stop or free function of the handle that called it. Strings passed
 * to callbacks are borrowed for the call. A transform and the index functions
 * run on the informer's thread too, with no lock held, before the object is
 * cached.
 */
#ifndef TURNFLEET_INFORMER_H
#define TURNFLEET_INFORMER_H

#include "common.h"
#include "errors.h"
#include "kube.h"
#include "log.h"

TF_BEGIN_DECL

/* ---------------------------------------------------------------- informer */

/** A list+watch cache of one collection. */
typedef struct tf_informer tf_informer;

/**
 * A cached object in its compact read-only form: parsed once when it came (watch event or list item), held as
 * its minified JSON text with an offset tape over its values, in one allocation, never changed. Reference
 * counted: a reader that got one from the informer holds it until tf_informer_object_release(), across any
 * update or delete of that object in the cache (which only drops the cache's own reference). Any thread.
 * (since 0.2.0)
 */
typedef struct tf_informer_object tf_informer_object;

/**
 * A change the caller makes to each object before it is cached (client-go's transform): drop what no reader
 * needs. Given to tf_informer_options.transform; valid only during that call.
 */
typedef struct tf_informer_edit tf_informer_edit;

/** The values an index function gives one object (tf_informer_add_indexer()); valid only during that call. */
typedef struct tf_informer_values tf_informer_values;

/** What happened to a cached object. */
typedef enum tf_informer_op {
  TF_INFORMER_ADDED = 0,   /**< new in the cache */
  TF_INFORMER_UPDATED = 1, /**< changed (or a resync: old and new are the same) */
  TF_INFORMER_DELETED = 2  /**< gone (also a delete found by a relist: object is the last known state) */
} tf_informer_op;

/**
 * A cache change, called on the informer's thread after the cache has changed.
 * @param op      what happened
 * @param key     `namespace/name` (or `name` for cluster-scoped objects)
 * @param object  the object as JSON text (the new state; for DELETED the last state), borrowed from the
 *                cached form (tf_informer_object_json()): no copy is made for the call
 * @param payload tf_informer_options.payload
 */
typedef void (*tf_informer_cb)(tf_informer_op op, const char *key, const char *object, void *payload);

/**
 * The caller's transform, on the informer's thread before the object is cached (metadata.managedFields is
 * dropped already). No library lock is held. It may only read and remove through @p edit.
 * @param edit    the object being cached
 * @param key     `namespace/name` or `name`
 * @param payload tf_informer_options.transform_payload
 */
typedef void (*tf_informer_transform_cb)(tf_informer_edit *edit, const char *key, void *payload);

/** Informer knobs. Fields are only appended; strings are copied. */
typedef struct tf_informer_options {
  unsigned int version;        /**< TF_INFORMER_OPTIONS_VERSION */
  const char *path;            /**< collection path (tf_kube_path() with no name); required */
  const char *label_selector;  /**< or NULL */
  const char *field_selector;  /**< or NULL */
  long resync_ms;              /**< every this often an UPDATED for each cached object; 0 = never */
  long watch_min_seconds;      /**< timeoutSeconds is random in [min, max]; default 300 */
  long watch_max_seconds;      /**< default 600 */
  long stall_seconds;          /**< watchdog: no byte for this long aborts the watch; 0 = timeoutSeconds + 60 */
  long backoff_initial_ms;     /**< first wait after a failure; default 800 */
  long backoff_max_ms;         /**< doubling up to; default 30000 */
  long backoff_reset_ms;       /**< healthy this long resets the backoff; default 120000 */
  tf_informer_cb on_change;    /**< or NULL */
  void *payload;               /**< passed to on_change */
  tf_log_cb log;               /**< or NULL (silent) */
  void *log_payload;           /**< passed to log */
  tf_log_level log_level;      /**< default TF_LOG_INFO */
  /* version 2 (0.2.0) */
  long bookmark_interval_ms;   /**< how often the server sends a bookmark on a quiet watch (kube-apiserver: about
                                    a minute); a watch that brings neither an event nor a bookmark for twice this
                                    is dropped and the cache relisted at once. Default 60000; 0 = no such check.
                                    A version-1 caller gets the default. */
  /* version 3 (0.2.0) */
  tf_informer_transform_cb transform; /**< or NULL: each object before it is cached */
  void *transform_payload;            /**< passed to transform */
} tf_informer_options;

/** Current version of tf_informer_options. */
#define TF_INFORMER_OPTIONS_VERSION 3
/** Defaults for tf_informer_options. */
#define TF_INFORMER_OPTIONS_INIT {TF_INFORMER_OPTIONS_VERSION, NULL, NULL, NULL, 0, 300, 600, 0, 800, 30000, 120000, NULL, NULL, NULL, NULL, TF_LOG_INFO, 60000, NULL, NULL}

/**
 * Fill @p opts with the defaults.
 * @param[out] opts    the options
 * @param      version TF_INFORMER_OPTIONS_VERSION
 * @return 0 or TF_EINVALID
 */
TF_EXTERN(tf_err) tf_informer_options_init(tf_informer_options *opts, unsigned int version);

/**
 * Make an informer (not started).
 * @param[out] out  the informer; release with tf_informer_free()
 * @param      kube the client; borrowed, must outlive the informer
 * @param      opts the options (read up to their version)
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_informer_new(tf_informer **out, tf_kube *kube, const tf_informer_options *opts);

/**
 * Start the informer's thread (list, then watch, until stopped).
 * @param inf the informer
 * @return 0, TF_EINVALID (already started), TF_ERROR (no thread)
 */
TF_EXTERN(tf_err) tf_informer_start(tf_informer *inf);

/**
 * Stop the thread and wait for it (aborts a running request). The cache stays readable.
 * Not from the informer's own callback. @param inf the informer; NULL does nothing
 */
TF_EXTERN(void) tf_informer_stop(tf_informer *inf);

/** Stop (if running) and release. NULL does nothing. @param inf the informer */
TF_EXTERN(void) tf_informer_free(tf_informer *inf);

/** 1 once the first LIST has filled the cache, else 0. Any thread. @param inf the informer */
TF_EXTERN(int) tf_informer_has_synced(const tf_informer *inf);

/** Number of cached objects. Any thread. @param inf the informer */
TF_EXTERN(size_t) tf_informer_count(const tf_informer *inf);

/**
 * One cached object. Any thread.
 * @param      inf the informer
 * @param      key `namespace/name` or `name`
 * @param[out] out the object as JSON text; free with tf_free()
 * @return 0, TF_ENOTFOUND, TF_EINVALID, TF_ENOMEM
 * A copy of the cached text; tf_informer_get_object() shares it instead.
 */
TF_EXTERN(tf_err) tf_informer_get(const tf_informer *inf, const char *key, char **out);

/**
 * Cached objects through the indexes. Any thread.
 * @param      inf   the informer
 * @param      ns    only this namespace (namespace index), or NULL
 * @param      label only objects with this label, `key=value` (label index), or NULL
 * @param[out] out   a JSON array of the objects, sorted by key; free with tf_free()
 * @return 0, TF_EINVALID (label without '='), TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_informer_list(const tf_informer *inf, const char *ns, const char *label, char **out);

/**
 * One cached object, shared. Any thread. No copy, no parse: the reader borrows the cache's own form.
 * @param      inf the informer
 * @param      key `namespace/name` or `name`
 * @param[out] out the object, referenced; release with tf_informer_object_release()
 * @return 0, TF_ENOTFOUND, TF_EINVALID (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_informer_get_object(const tf_informer *inf, const char *key, tf_informer_object **out);

/**
 * Cached objects through the namespace and label indexes, shared, sorted by key. Any thread.
 * @param      inf   the informer
 * @param      ns    only this namespace, or NULL
 * @param      label only objects with this label, `key=value`, or NULL
 * @param[out] out   an array of referenced objects (NULL when none); release with tf_informer_objects_release()
 * @param[out] n     how many
 * @return 0, TF_EINVALID (label without '='), TF_ENOMEM (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_informer_list_objects(const tf_informer *inf, const char *ns, const char *label,
                                           tf_informer_object ***out, size_t *n);

/**
 * An index function (client-go's IndexFunc): the values under which @p obj is found in its index, each given
 * with tf_informer_values_add() (none: the object is not in this index). Called on the informer's thread
 * before the object is cached, with no library lock held; it must only read @p obj.
 * @param obj     the object
 * @param out     where the values go
 * @param payload the indexer's payload
 */
typedef void (*tf_informer_index_cb)(const tf_informer_object *obj, tf_informer_values *out, void *payload);

/**
 * Register an index (client-go's Indexers), before tf_informer_start().
 * @param inf     the informer
 * @param name    the index's name (copied), unique per informer
 * @param fn      the index function
 * @param payload passed to @p fn
 * @return 0, TF_EINVALID (started, name taken or empty), TF_ENOMEM (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_informer_add_indexer(tf_informer *inf, const char *name, tf_informer_index_cb fn, void *payload);

/**
 * Add one value for the object being indexed (a value given twice counts once).
 * @param out   from the index function
 * @param value copied
 * @return 0, TF_EINVALID, TF_ENOMEM (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_informer_values_add(tf_informer_values *out, const char *value);

/**
 * The cached objects an index holds under @p value, shared, sorted by key. Any thread.
 * @param      inf   the informer
 * @param      index a name given to tf_informer_add_indexer()
 * @param      value the value
 * @param[out] out   an array of referenced objects (NULL when none); release with tf_informer_objects_release()
 * @param[out] n     how many
 * @return 0, TF_ENOTFOUND (no such index), TF_EINVALID, TF_ENOMEM (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_informer_by_index(const tf_informer *inf, const char *index, const char *value,
                                       tf_informer_object ***out, size_t *n);

/** Bytes the cached objects take (their compact forms, tapes included). Any thread. @param inf the informer (since 0.2.0) */
TF_EXTERN(size_t) tf_informer_bytes(const tf_informer *inf);

/**
 * Read and remove in a transform (tf_informer_transform_cb).
 * @param edit the object being cached
 * @param path keys of nested objects from the root, NULL-terminated: `{"data", "big", NULL}`
 * @return the string there (borrowed for the call), or NULL when it is absent or no string (since 0.2.0)
 */
TF_EXTERN(const char *) tf_informer_edit_string(const tf_informer_edit *edit, const char *const *path);

/**
 * Remove the member at @p path.
 * @param edit the object being cached
 * @param path keys of nested objects from the root, NULL-terminated
 * @return 1 removed, 0 it was not there (since 0.2.0)
 */
TF_EXTERN(int) tf_informer_edit_remove(tf_informer_edit *edit, const char *const *path);

/**
 * An object of the compact form from JSON text (what the informer caches, managedFields dropped), for a
 * caller that has an object from elsewhere.
 * @param[out] out  the object; release with tf_informer_object_release()
 * @param      json a JSON object with metadata.name
 * @param      len  its length
 * @return 0, TF_EINVALID (names what is missing), TF_ENOMEM (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_informer_object_parse(tf_informer_object **out, const char *json, size_t len);

/** One more reference. @param obj the object (NULL: NULL) @return @p obj (since 0.2.0) */
TF_EXTERN(tf_informer_object *) tf_informer_object_ref(tf_informer_object *obj);

/** Drop a reference; the last one frees it. NULL does nothing. @param obj the object (since 0.2.0) */
TF_EXTERN(void) tf_informer_object_release(tf_informer_object *obj);

/** Release each object of @p objs and free the array. NULL does nothing. @param objs the array @param n its count (since 0.2.0) */
TF_EXTERN(void) tf_informer_objects_release(tf_informer_object **objs, size_t n);

/**
 * The object as minified JSON, borrowed from it (valid while the reference is held), NUL-terminated.
 * @param      obj the object
 * @param[out] len its length, or NULL
 * @return the text (since 0.2.0)
 */
TF_EXTERN(const char *) tf_informer_object_json(const tf_informer_object *obj, size_t *len);

/** The object's cache key (`namespace/name` or `name`), borrowed from it. @param obj the object (since 0.2.0) */
TF_EXTERN(const char *) tf_informer_object_key(const tf_informer_object *obj);

/** Bytes this object takes (header, tape, text, key). @param obj the object (since 0.2.0) */
TF_EXTERN(size_t) tf_informer_object_size(const tf_informer_object *obj);

/**
 * The JSON of one value, by the tape (no parse), borrowed from the object: a slice of its text, not
 * NUL-terminated.
 * @param      obj  the object
 * @param      path keys of nested objects from the root, NULL-terminated (`{"metadata", "labels", NULL}`);
 *                  NULL or empty: the whole object
 * @param[out] json the value's first byte
 * @param[out] len  its length
 * @return 0, TF_ENOTFOUND (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_informer_object_find(const tf_informer_object *obj, const char *const *path, const char **json,
                                          size_t *len);

/**
 * A string value, decoded.
 * @param      obj  the object
 * @param      path as for tf_informer_object_find()
 * @param[out] out  the string; free with tf_free()
 * @return 0, TF_ENOTFOUND, TF_EINVALID (not a string), TF_ENOMEM (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_informer_object_string(const tf_informer_object *obj, const char *const *path, char **out);

/**
 * How many times the informer listed (the first list included): a relist after a 410, after a
 * watch silent for two bookmark intervals, after a failed list. Any thread.
 * @param inf the informer
 * @return the count (since 0.2.0)
 */
TF_EXTERN(long) tf_informer_lists(const tf_informer *inf);

/**
 * The resourceVersion the informer will watch from next ("" before the first list).
 * @param      inf the informer
 * @param[out] out a copy; free with tf_free()
 * @return 0, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_informer_resource_version(const tf_informer *inf, char **out);

/* -------------------------------------------------------------- work queue */

/** A queue of keys: deduplicated, one worker per key at a time, rate-limited retries. Thread-safe. */
typedef struct tf_workqueue tf_workqueue;

/** Work queue knobs (client-go's default controller rate limiter). Fields are only appended. */
typedef struct tf_workqueue_options {
  unsigned int version;  /**< TF_WORKQUEUE_OPTIONS_VERSION */
  long base_delay_ms;    /**< per-key backoff: base * 2^failures; default 5 */
  long max_delay_ms;     /**< per-key cap; default 1000000 (1000 s) */
  double qps;            /**< global token bucket for rate-limited adds; default 50 */
  long burst;            /**< bucket size; default 300 */
} tf_workqueue_options;

/** Current version of tf_workqueue_options. */
#define TF_WORKQUEUE_OPTIONS_VERSION 1
/** Defaults for tf_workqueue_options. */
#define TF_WORKQUEUE_OPTIONS_INIT {TF_WORKQUEUE_OPTIONS_VERSION, 5, 1000000, 50.0, 300}

/**
 * Fill @p opts with the defaults.
 * @param[out] opts    the options
 * @param      version TF_WORKQUEUE_OPTIONS_VERSION
 * @return 0 or TF_EINVALID
 */
TF_EXTERN(tf_err) tf_workqueue_options_init(tf_workqueue_options *opts, unsigned int version);

/**
 * Make a work queue.
 * @param[out] out  the queue; release with tf_workqueue_free()
 * @param      opts the options (read up to their version); NULL = defaults
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_workqueue_new(tf_workqueue **out, const tf_workqueue_options *opts);

/** Release (after tf_workqueue_shutdown() and when no thread waits in it). NULL does nothing. @param q the queue */
TF_EXTERN(void) tf_workqueue_free(tf_workqueue *q);

/**
 * Queue @p key now. A key already queued is not queued twice; a key being
 * processed is queued again when its worker calls tf_workqueue_done().
 * @param q   the queue
 * @param key copied
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_workqueue_add(tf_workqueue *q, const char *key);

/**
 * Queue @p key after @p delay_ms (an earlier pending time wins).
 * @param q        the queue
 * @param key      copied
 * @param delay_ms delay; <= 0 is tf_workqueue_add()
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_workqueue_add_after(tf_workqueue *q, const char *key, long delay_ms);

/**
 * Queue @p key after its backoff: the larger of the per-key delay
 * (base * 2^failures, capped) and the global token bucket's; counts a failure.
 * @param q   the queue
 * @param key copied
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_workqueue_add_rate_limited(tf_workqueue *q, const char *key);

/** Forget @p key's failures (after a success). @param q the queue @param key the key */
TF_EXTERN(void) tf_workqueue_forget(tf_workqueue *q, const char *key);

/** Failures counted for @p key since the last forget. @param q the queue @param key the key */
TF_EXTERN(int) tf_workqueue_failures(tf_workqueue *q, const char *key);

/**
 * Take the next key, waiting up to @p timeout_ms. The key is "processing"
 * until tf_workqueue_done(): no other worker gets it meanwhile.
 * @param      q          the queue
 * @param[out] key        the key; free with tf_free()
 * @param      timeout_ms how long to wait; 0 = do not wait, < 0 = until a key or shutdown
 * @return 0, TF_ETIMEOUT (nothing came), TF_ENOTFOUND (shut down and empty)
 */
TF_EXTERN(tf_err) tf_workqueue_get(tf_workqueue *q, char **key, long timeout_ms);

/** The worker is done with @p key (re-queued if it was added meanwhile). @param q the queue @param key the key */
TF_EXTERN(void) tf_workqueue_done(tf_workqueue *q, const char *key);

/** Keys waiting now (not delayed, not processing). @param q the queue */
TF_EXTERN(size_t) tf_workqueue_len(tf_workqueue *q);

/** Stop accepting keys and wake every waiting tf_workqueue_get(). @param q the queue */
TF_EXTERN(void) tf_workqueue_shutdown(tf_workqueue *q);

/* --------------------------------------------------------- leader election */

/** Leader election on a coordination.k8s.io/v1 Lease (client-go's algorithm). */
typedef struct tf_elector tf_elector;

/**
 * Leadership changed; called on the elector's thread.
 * @param leading 1: this process leads now, start the work; 0: it lost or released the
 *                lease, stop the work at once (the elector does not run again)
 * @param payload tf_elector_options.payload
 */
typedef void (*tf_elector_cb)(int leading, void *payload);

/** Elector knobs. Fields are only appended; strings are copied. Must hold lease > renew deadline > 1.2 x retry. */
typedef struct tf_elector_options {
  unsigned int version;      /**< TF_ELECTOR_OPTIONS_VERSION */
  const char *lease_namespace; /**< required */
  const char *lease_name;    /**< required */
  const char *identity;      /**< required, unique per process (hostname_uuid) */
  long lease_seconds;        /**< leaseDurationSeconds; default 15 */
  long renew_deadline_ms;    /**< a leader that could not renew within this gives up; default 10000 */
  long retry_ms;             /**< between attempts (jitter 1.2 when acquiring); default 2000 */
  int release_on_stop;       /**< tf_elector_stop() of a leader writes an empty holder; default 1 */
  tf_elector_cb on_change;   /**< or NULL */
  void *payload;             /**< passed to on_change */
  tf_log_cb log;             /**< or NULL */
  void *log_payload;         /**< passed to log */
  tf_log_level log_level;    /**< default TF_LOG_INFO */
} tf_elector_options;

/** Current version of tf_elector_options. */
#define TF_ELECTOR_OPTIONS_VERSION 1
/** Defaults for tf_elector_options. */
#define TF_ELECTOR_OPTIONS_INIT {TF_ELECTOR_OPTIONS_VERSION, NULL, NULL, NULL, 15, 10000, 2000, 1, NULL, NULL, NULL, NULL, TF_LOG_INFO}

/**
 * Fill @p opts with the defaults.
 * @param[out] opts    the options
 * @param      version TF_ELECTOR_OPTIONS_VERSION
 * @return 0 or TF_EINVALID
 */
TF_EXTERN(tf_err) tf_elector_options_init(tf_elector_options *opts, unsigned int version);

/**
 * Make an elector (not started).
 * @param[out] out  the elector; release with tf_elector_free()
 * @param      kube the client; borrowed, must outlive the elector
 * @param      opts the options (read up to their version)
 * @return 0, TF_EINVALID (names the field or the timing rule), TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_elector_new(tf_elector **out, tf_kube *kube, const tf_elector_options *opts);

/** Start campaigning on the elector's thread. @param e the elector @return 0, TF_EINVALID (started), TF_ERROR */
TF_EXTERN(tf_err) tf_elector_start(tf_elector *e);

/** 1 while this process holds the lease (and has renewed it within the deadline). Any thread. @param e the elector */
TF_EXTERN(int) tf_elector_is_leader(const tf_elector *e);

/**
 * A write gate (tf_kube_write_gate_cb) for tf_kube_set_write_gate(): writes go
 * out only while this elector holds the Lease, read from the clock at each
 * write: the renew deadline counted from the start of the last successful
 * renewal. A leader that could not renew, or a process that was paused past
 * that deadline, has its writes refused at once (TF_EREFUSED), before its
 * elector thread noticed. The elector's own Lease requests are never gated.
 * Any thread.
 * @param method  ignored
 * @param path    ignored
 * @param elector the tf_elector (borrowed; must outlive the gate's use)
 * @return the milliseconds left of the renew deadline, or 0 when not leading
 *         (since 0.2.0)
 */
TF_EXTERN(long) tf_elector_write_gate(const char *method, const char *path, void *elector);

/** 1 once the elector has stopped for good (lost the lease, or stopped). Any thread. @param e the elector */
TF_EXTERN(int) tf_elector_finished(const tf_elector *e);

/**
 * Stop and wait; a leader releases the lease when release_on_stop (holder "",
 * leaseDurationSeconds 1) and gets on_change(0). Not from the callback.
 * @param e the elector; NULL does nothing
 */
TF_EXTERN(void) tf_elector_stop(tf_elector *e);

/** Stop (if running) and release. NULL does nothing. @param e the elector */
TF_EXTERN(void) tf_elector_free(tf_elector *e);

/* ------------------------------------------------------------------ events */

/** core/v1 Events with client-side dedupe: a repeat is a PATCH of count and lastTimestamp. Thread-safe. */
typedef struct tf_recorder tf_recorder;

/**
 * Make a recorder.
 * @param[out] out       the recorder; release with tf_recorder_free()
 * @param      kube      the client; borrowed, must outlive the recorder
 * @param      component `source.component`, e.g. "turnfleet-operator"; copied
 * @return 0, TF_EINVALID, TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_recorder_new(tf_recorder **out, tf_kube *kube, const char *component);

/** Release. NULL does nothing. @param r the recorder */
TF_EXTERN(void) tf_recorder_free(tf_recorder *r);

/**
 * Record an Event about @p involved. The same (object, type, reason, message)
 * again PATCHes the existing Event's count instead of creating one more.
 * Blocking (one request, after the queued ones that are due); a failure is
 * returned but should never fail a reconcile. Since 0.2.0 an Event the server
 * cannot take now (TF_EUNAVAILABLE, TF_ETIMEOUT, TF_ENET) or the write gate
 * refused (TF_EREFUSED) is not lost: it is returned with that code and queued
 * (bounded: 256; an overflow drops the oldest, counted by tf_recorder_dropped()),
 * in order, and sent again by tf_recorder_flush() or the next call, no sooner
 * than the server's Retry-After (else a backoff from 0.5 s doubling to 30 s).
 * @param r        the recorder
 * @param involved the object as JSON text (apiVersion, kind, metadata.name, metadata.namespace, metadata.uid are used)
 * @param type     "Normal" or "Warning"
 * @param reason   CamelCase reason
 * @param message  human text
 * @return 0, TF_EINVALID, or a request error (kube.h)
 */
TF_EXTERN(tf_err) tf_recorder_event(tf_recorder *r, const char *involved, const char *type, const char *reason,
                                    const char *message);

/**
 * Send the queued Events that are due, in order, until one fails again or the
 * queue is empty. Cheap when nothing is due; call it from the controller's loop.
 * @param r the recorder (NULL: 0)
 * @return the Events still queued (since 0.2.0)
 */
TF_EXTERN(size_t) tf_recorder_flush(tf_recorder *r);

/** Events queued for another try. Any thread. @param r the recorder @return the count (since 0.2.0) */
TF_EXTERN(size_t) tf_recorder_pending(const tf_recorder *r);

/**
 * Events given up: pushed out of a full queue, or refused by the server for
 * good (403, 422, ...). Any thread.
 * @param r the recorder
 * @return the count since the recorder was made (since 0.2.0)
 */
TF_EXTERN(uint64_t) tf_recorder_dropped(const tf_recorder *r);

/* ------------------------------------------------------------ write budget */

/** A bound on writes per key (a pool) in a sliding window: what keeps stale caches from driving a write loop. Thread-safe. */
typedef struct tf_budget tf_budget;

/** Budget knobs. Fields are only appended. */
typedef struct tf_budget_options {
  unsigned int version; /**< TF_BUDGET_OPTIONS_VERSION */
  long writes;          /**< at most this many writes per key ... ; default 100 */
  long interval_ms;     /**< ... in any window of this length; default 10000 */
} tf_budget_options;

/** Current version of tf_budget_options. */
#define TF_BUDGET_OPTIONS_VERSION 1
/** Defaults for tf_budget_options. */
#define TF_BUDGET_OPTIONS_INIT {TF_BUDGET_OPTIONS_VERSION, 100, 10000}

/**
 * Fill @p opts with the defaults.
 * @param[out] opts    the options
 * @param      version TF_BUDGET_OPTIONS_VERSION
 * @return 0 or TF_EINVALID (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_budget_options_init(tf_budget_options *opts, unsigned int version);

/**
 * Make a budget.
 * @param[out] out  the budget; release with tf_budget_free()
 * @param      opts the options (read up to their version); NULL = defaults
 * @return 0, TF_EINVALID (writes 1..100000, interval_ms 1..86400000; names the field), TF_ENOMEM (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_budget_new(tf_budget **out, const tf_budget_options *opts);

/** Release. NULL does nothing. @param b the budget (since 0.2.0) */
TF_EXTERN(void) tf_budget_free(tf_budget *b);

/**
 * Spend one write of @p key at @p now_ms (a monotonic clock the caller keeps:
 * the same one for every call), when the window has one left.
 * @param      b       the budget
 * @param      key     the key (copied)
 * @param      now_ms  the caller's monotonic time
 * @param[out] wait_ms when refused: the milliseconds until a write is free again; may be NULL
 * @return 0 (spent), TF_EREFUSED (none left in the window; nothing spent), TF_EINVALID, TF_ENOMEM (since 0.2.0)
 */
TF_EXTERN(tf_err) tf_budget_take(tf_budget *b, const char *key, int64_t now_ms, long *wait_ms);

/**
 * How long until @p key may write again, spending nothing: lets a caller skip work that would
 * only be refused.
 * @param b      the budget (NULL: 0)
 * @param key    the key
 * @param now_ms the caller's monotonic time (the clock given to tf_budget_take())
 * @return 0 when a write is free now, else the milliseconds until one is (since 0.2.0)
 */
TF_EXTERN(long) tf_budget_wait(tf_budget *b, const char *key, int64_t now_ms);

/** Writes refused so far, all keys together. Any thread. @param b the budget @return the count (since 0.2.0) */
TF_EXTERN(uint64_t) tf_budget_refused(const tf_budget *b);

TF_END_DECL

#endif
