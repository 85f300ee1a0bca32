/**
 * @file turnfleet/kube.h
 * @brief A small Kubernetes REST client on libcurl: configuration (kubeconfig,
 * in-cluster service account, explicit options), get/list/create/update/patch/
 * delete on any path (subresources `/status` and `/scale` included), watch
 * streams, and the API's Status errors.
 *
 * Objects travel as JSON text, never as typed structs, so fields this library
 * does not know survive a GET-modify-PUT. Requests speak HTTP/1.1 with
 * keep-alive; TLS is always verified unless the configuration explicitly says
 * `insecure-skip-tls-verify`. Tokens and keys are never logged, never put in
 * an error message and are wiped when freed.
 *
 * Threads: a tf_kube handle may be used by several threads at once (each
 * request borrows one of the handle's connections; the token source is
 * locked). Callbacks run on the thread that made the call. libcurl's global
 * init: tf_kube_new() calls curl_global_init() once when libcurl reports
 * CURL_VERSION_THREADSAFE; otherwise call curl_global_init() yourself before
 * starting threads. The library never calls curl_global_cleanup().
 */
#ifndef TURNFLEET_KUBE_H
#define TURNFLEET_KUBE_H

#include "common.h"
#include "errors.h"
#include "log.h"

TF_BEGIN_DECL

/** A Kubernetes API client (configuration, connections, token source). */
typedef struct tf_kube tf_kube;

/** The Status the server sent with a failure (or one built for a transport error). */
typedef struct tf_kube_status tf_kube_status;

/** Where the configuration comes from. */
typedef enum tf_kube_source {
  TF_KUBE_SOURCE_EXPLICIT = 0,   /**< only the options' server/ca/token fields */
  TF_KUBE_SOURCE_KUBECONFIG = 1, /**< a kubeconfig file (options.kubeconfig) */
  TF_KUBE_SOURCE_IN_CLUSTER = 2  /**< KUBERNETES_SERVICE_HOST/PORT and the service-account directory */
} tf_kube_source;

/** How a client is made. Fields are only appended; strings are copied. */
typedef struct tf_kube_options {
  unsigned int version;         /**< TF_KUBE_OPTIONS_VERSION */
  tf_kube_source source;        /**< default TF_KUBE_SOURCE_EXPLICIT */
  const char *kubeconfig;       /**< kubeconfig path (SOURCE_KUBECONFIG) */
  const char *context;          /**< context to use instead of current-context; NULL = current */
  const char *sa_dir;           /**< in-cluster: directory of token, ca.crt, namespace;
                                     NULL = /var/run/secrets/kubernetes.io/serviceaccount */
  const char *server;           /**< explicit: `https://host:port`; overrides the source's */
  const char *ca_file;          /**< explicit: PEM CA bundle path; overrides the source's */
  const char *token_file;       /**< explicit: bearer token file (re-read); overrides the source's */
  const char *namespace_;       /**< explicit: default namespace; overrides the source's */
  int insecure_skip_tls_verify; /**< explicit: 1 turns TLS verification off (tests only) */
  long timeout_ms;              /**< whole-request timeout for non-watch requests; default 30000 */
  long connect_timeout_ms;      /**< connect timeout; default 10000 */
  const char *field_manager;    /**< `fieldManager` on every write; default "turnfleet" */
  const char *user_agent;       /**< default "libturnfleet/<version>" */
  tf_log_cb log;                /**< log sink (never sees secrets); NULL = silent */
  void *log_payload;            /**< passed to @ref log */
  tf_log_level log_level;       /**< least level passed to @ref log; default TF_LOG_INFO */
} tf_kube_options;

/** Current version of tf_kube_options. */
#define TF_KUBE_OPTIONS_VERSION 1
/** Defaults for tf_kube_options. */
#define TF_KUBE_OPTIONS_INIT {TF_KUBE_OPTIONS_VERSION, TF_KUBE_SOURCE_EXPLICIT, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 30000, 10000, NULL, NULL, NULL, NULL, TF_LOG_INFO}

/**
 * Fill @p opts with the defaults.
 * @param[out] opts    the options to initialise
 * @param      version TF_KUBE_OPTIONS_VERSION
 * @return 0, or TF_EINVALID for a NULL @p opts or an unknown version
 */
TF_EXTERN(tf_err) tf_kube_options_init(tf_kube_options *opts, unsigned int version);

/**
 * Make a client. Reads the configuration (files are read now, the token file
 * again later: at most once a minute and at once after a 401), opens no
 * connection. A kubeconfig user with `exec` or `auth-provider` is refused.
 * @param[out] out  the client; release with tf_kube_free()
 * @param      opts the options (read up to their version); NULL = explicit with defaults (fails: no server)
 * @return 0; TF_EINVALID (bad options or configuration, message names the field), TF_EIO (a file
 *         cannot be read), TF_EPROTO (malformed kubeconfig), TF_ENOTFOUND (context/cluster/user
 *         missing), TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_kube_new(tf_kube **out, const tf_kube_options *opts);

/** Release a client; wipes its token and keys. NULL does nothing. @param kube the client */
TF_EXTERN(void) tf_kube_free(tf_kube *kube);

/** The default namespace of the configuration ("default" if none). Borrowed from @p kube. @param kube the client */
TF_EXTERN(const char *) tf_kube_namespace(const tf_kube *kube);

/** The server URL requests go to. Borrowed from @p kube. @param kube the client */
TF_EXTERN(const char *) tf_kube_server(const tf_kube *kube);

/**
 * Build a request path, each segment checked (no '/', no '?', not "." or "..").
 * @param[out] out         the path (e.g. `/apis/coordination.k8s.io/v1/namespaces/ns/leases/x`); free with tf_free()
 * @param      api         `/api/v1` or `/apis/<group>/<version>`
 * @param      resource    plural resource name, e.g. `pods`
 * @param      ns          namespace, or NULL (cluster-scoped, or all namespaces)
 * @param      name        object name, or NULL (the collection)
 * @param      subresource `status`, `scale`, or NULL
 * @return 0, TF_EINVALID (names the bad segment), TF_ENOMEM
 */
TF_EXTERN(tf_err) tf_kube_path(char **out, const char *api, const char *resource, const char *ns, const char *name,
                               const char *subresource);

/** List and watch parameters. Fields are only appended; strings are borrowed for the call. */
typedef struct tf_kube_list_options {
  unsigned int version;          /**< TF_KUBE_LIST_OPTIONS_VERSION */
  const char *label_selector;    /**< `labelSelector`, or NULL */
  const char *field_selector;    /**< `fieldSelector`, or NULL */
  const char *resource_version;  /**< `resourceVersion`, or NULL (unset) */
  long limit;                    /**< list: page size (`limit`, pages followed with `continue`); 0 = one request */
  long timeout_seconds;          /**< watch: `timeoutSeconds`; 0 = unset */
  int allow_bookmarks;           /**< watch: `allowWatchBookmarks=true` */
  long stall_seconds;            /**< watch: abort when no byte arrived for this long; 0 = timeout_seconds + 60 */
  /* version 2 (0.2.0) */
  long silence_ms;               /**< watch: abort (TF_ETIMEOUT) when neither an event nor a bookmark came for
                                      this long, whatever bytes did; 0 = no such check */
} tf_kube_list_options;

/** Current version of tf_kube_list_options. */
#define TF_KUBE_LIST_OPTIONS_VERSION 2
/** Defaults for tf_kube_list_options. */
#define TF_KUBE_LIST_OPTIONS_INIT {TF_KUBE_LIST_OPTIONS_VERSION, NULL, NULL, NULL, 0, 0, 0, 0, 0}

/**
 * Fill @p opts with the defaults.
 * @param[out] opts    the options to initialise
 * @param      version TF_KUBE_LIST_OPTIONS_VERSION
 * @return 0, or TF_EINVALID
 */
TF_EXTERN(tf_err) tf_kube_list_options_init(tf_kube_list_options *opts, unsigned int version);

/*
 * Every request below returns 0 on a 2xx answer and otherwise a code chosen
 * from the HTTP status: 400/415/422 TF_EINVALID, 401/403 TF_EAUTH,
 * 404 TF_ENOTFOUND, 409 TF_ECONFLICT, 410 TF_EEXPIRED,
 * 429/500/502/503/504 TF_EUNAVAILABLE, other codes TF_ERROR; TF_ETIMEOUT and
 * TF_ENET for transport failures, TF_EPROTO for a malformed answer. When
 * @p status is not NULL it receives the Status (the server's, or one built for
 * a transport error) on failure and NULL on success; free it with
 * tf_kube_status_free(). A 401 makes the client re-read its token file and
 * retry once.
 *
 * Retry-After (since 0.2.0): an answer 429 or 503 that asks for a wait (the
 * `Retry-After` header, else `details.retryAfterSeconds`; at most 300 s) holds
 * every later request of the client until the wait has passed — writes,
 * Events, reads, lists and watches alike, from any thread. A request that
 * would have to wait longer than the client's timeout_ms (or past its
 * caller's deadline) is not sent: TF_EUNAVAILABLE at once, with a Status whose
 * tf_kube_status_retry_after() is the wait left. A 429 itself is sent again
 * after its wait, at most twice. The elector's Lease requests keep a clock of
 * their own, so a 429 on a write never costs the Lease.
 *
 * Write gate (since 0.2.0): with tf_kube_set_write_gate(), every request but
 * GET (and the elector's own Lease requests) asks the gate right before it is
 * sent, once more after the connection is up, and is abandoned when the
 * permission it was given runs out; a refused write is never sent and returns
 * TF_EREFUSED (Status reason "Refused", code 0).
 */

/**
 * Decide whether a write may be sent now; called on the requesting thread
 * right before each write (and once more when its connection is up), never
 * with a library lock held.
 * @param method  "POST", "PUT", "PATCH" or "DELETE"
 * @param path    the request path (no query)
 * @param payload what was given to tf_kube_set_write_gate()
 * @return how many more milliseconds the write may take (> 0: send it, abandoned at
 *         that point with TF_ETIMEOUT); 0 or less: refuse it (TF_EREFUSED)
 */
typedef long (*tf_kube_write_gate_cb)(const char *method, const char *path, void *payload);

/**
 * Put every write of @p kube behind @p gate (e.g. tf_elector_write_gate() with
 * the elector as @p payload: writes only while the Lease is held). Any thread;
 * requests already under way keep the gate they were given.
 * @param kube    the client
 * @param gate    the gate, or NULL to send every write again
 * @param payload passed to @p gate; borrowed, must outlive its use
 * @return 0, TF_EINVALID (NULL @p kube)
 */
TF_EXTERN(tf_err) tf_kube_set_write_gate(tf_kube *kube, tf_kube_write_gate_cb gate, void *payload);

/**
 * GET one object (any path: `.../status`, `.../scale` too).
 * @param      kube   the client
 * @param      path   request path (tf_kube_path())
 * @param[out] out    the object as JSON text; free with tf_free()
 * @param[out] status the Status on failure, or NULL
 * @return see above
 */
TF_EXTERN(tf_err) tf_kube_get(tf_kube *kube, const char *path, char **out, tf_kube_status **status);

/**
 * LIST a collection. With opts->limit > 0 every page is fetched (`continue`)
 * and the items are joined into one list that carries the last page's
 * `metadata.resourceVersion`.
 * @param      kube   the client
 * @param      path   collection path
 * @param      opts   selectors, resourceVersion, limit; NULL = none
 * @param[out] out    the list as JSON text; free with tf_free()
 * @param[out] status the Status on failure, or NULL
 * @return see above
 */
TF_EXTERN(tf_err) tf_kube_list(tf_kube *kube, const char *path, const tf_kube_list_options *opts, char **out,
                               tf_kube_status **status);

/**
 * POST (create) an object into a collection; 201 expected.
 * @param      kube   the client
 * @param      path   collection path
 * @param      body   the object as JSON text
 * @param[out] out    the created object; free with tf_free(); may be NULL
 * @param[out] status the Status on failure, or NULL
 * @return see above (409 AlreadyExists is TF_ECONFLICT)
 */
TF_EXTERN(tf_err) tf_kube_create(tf_kube *kube, const char *path, const char *body, char **out,
                                 tf_kube_status **status);

/**
 * PUT (update) an object. The body must carry `metadata.resourceVersion`
 * (optimistic concurrency is always on): without it TF_EINVALID and no request.
 * @param      kube   the client
 * @param      path   object path (or its `/status`, `/scale`)
 * @param      body   the whole object as JSON text
 * @param[out] out    the stored object; free with tf_free(); may be NULL
 * @param[out] status the Status on failure, or NULL
 * @return see above (stale resourceVersion: TF_ECONFLICT)
 */
TF_EXTERN(tf_err) tf_kube_update(tf_kube *kube, const char *path, const char *body, char **out,
                                 tf_kube_status **status);

/** Patch kinds (strategic merge and apply are deliberately absent). */
typedef enum tf_kube_patch_type {
  TF_KUBE_PATCH_MERGE = 0, /**< application/merge-patch+json (RFC 7386) */
  TF_KUBE_PATCH_JSON = 1   /**< application/json-patch+json (RFC 6902) */
} tf_kube_patch_type;

/**
 * PATCH an object.
 * @param      kube   the client
 * @param      path   object path (or its `/status`, `/scale`)
 * @param      type   merge or JSON patch
 * @param      body   the patch as JSON text
 * @param[out] out    the patched object; free with tf_free(); may be NULL
 * @param[out] status the Status on failure, or NULL
 * @return see above (failed JSON-patch `test`: TF_EINVALID with code 422)
 */
TF_EXTERN(tf_err) tf_kube_patch(tf_kube *kube, const char *path, tf_kube_patch_type type, const char *body, char **out,
                                tf_kube_status **status);

/** Deletion propagation. */
typedef enum tf_kube_propagation {
  TF_KUBE_PROPAGATION_UNSET = 0,      /**< server default */
  TF_KUBE_PROPAGATION_BACKGROUND = 1, /**< Background */
  TF_KUBE_PROPAGATION_FOREGROUND = 2, /**< Foreground */
  TF_KUBE_PROPAGATION_ORPHAN = 3      /**< Orphan */
} tf_kube_propagation;

/** DELETE parameters (sent as a DeleteOptions body). Fields are only appended. */
typedef struct tf_kube_delete_options {
  unsigned int version;                /**< TF_KUBE_DELETE_OPTIONS_VERSION */
  const char *precondition_uid;        /**< `preconditions.uid`, or NULL */
  const char *precondition_rv;         /**< `preconditions.resourceVersion`, or NULL */
  tf_kube_propagation propagation;     /**< `propagationPolicy` */
  long grace_period_seconds;           /**< `gracePeriodSeconds`; -1 = unset */
} tf_kube_delete_options;

/** Current version of tf_kube_delete_options. */
#define TF_KUBE_DELETE_OPTIONS_VERSION 1
/** Defaults for tf_kube_delete_options. */
#define TF_KUBE_DELETE_OPTIONS_INIT {TF_KUBE_DELETE_OPTIONS_VERSION, NULL, NULL, TF_KUBE_PROPAGATION_UNSET, -1}

/**
 * Fill @p opts with the defaults.
 * @param[out] opts    the options to initialise
 * @param      version TF_KUBE_DELETE_OPTIONS_VERSION
 * @return 0, or TF_EINVALID
 */
TF_EXTERN(tf_err) tf_kube_delete_options_init(tf_kube_delete_options *opts, unsigned int version);

/**
 * DELETE an object.
 * @param      kube   the client
 * @param      path   object path
 * @param      opts   preconditions, propagation, grace; NULL = none
 * @param[out] out    the answer: the object (still present with a deletionTimestamp) or a
 *                    Success Status; free with tf_free(); may be NULL
 * @param[out] status the Status on failure, or NULL
 * @return see above (404: TF_ENOTFOUND, which a caller may treat as done)
 */
TF_EXTERN(tf_err) tf_kube_delete(tf_kube *kube, const char *path, const tf_kube_delete_options *opts, char **out,
                                 tf_kube_status **status);

/** Watch event types. */
typedef enum tf_kube_event_type {
  TF_KUBE_EVENT_ADDED = 0,    /**< ADDED */
  TF_KUBE_EVENT_MODIFIED = 1, /**< MODIFIED */
  TF_KUBE_EVENT_DELETED = 2,  /**< DELETED */
  TF_KUBE_EVENT_BOOKMARK = 3, /**< BOOKMARK: only metadata.resourceVersion */
  TF_KUBE_EVENT_ERROR = 4     /**< ERROR: the object is a Status; the stream ends after it */
} tf_kube_event_type;

/**
 * One watch event.
 * @param type    the event type
 * @param object  the event's object as JSON text; borrowed for the call
 * @param payload what was given to tf_kube_watch()
 * @return 0 to go on, anything else to stop the watch (tf_kube_watch() returns TF_EUSER)
 */
typedef int (*tf_kube_event_cb)(tf_kube_event_type type, const char *object, void *payload);

/**
 * WATCH a collection (blocking until the stream ends). Lines are buffered to
 * '\n' and parsed once each; a line over 16 MiB or a line that is not an event
 * ends the watch with TF_EPROTO. The stall watchdog aborts when no byte came
 * for opts->stall_seconds (TF_ETIMEOUT). A clean end of the stream returns 0.
 * An ERROR event is passed to @p cb and then ends the watch with the code of
 * its Status (410: TF_EEXPIRED), filling @p status.
 * @param      kube    the client
 * @param      path    collection path
 * @param      opts    resourceVersion, selectors, timeoutSeconds, bookmarks, stall; NULL = none
 * @param      cb      called on this thread for each event
 * @param[out] status  the Status on failure, or NULL
 * @param      payload passed to @p cb
 * @return 0 (clean end), TF_EUSER (@p cb stopped it), or a request error as above
 */
TF_EXTERN(tf_err) tf_kube_watch(tf_kube *kube, const char *path, const tf_kube_list_options *opts,
                                tf_kube_event_cb cb, tf_kube_status **status, void *payload);

/** Release a Status. NULL does nothing. @param status the Status */
TF_EXTERN(void) tf_kube_status_free(tf_kube_status *status);
/** HTTP status code (0 for a transport error). @param status the Status */
TF_EXTERN(int) tf_kube_status_code(const tf_kube_status *status);
/** `reason` ("Conflict", "Expired", …; "" when absent). Borrowed. @param status the Status */
TF_EXTERN(const char *) tf_kube_status_reason(const tf_kube_status *status);
/** `message` ("" when absent; never a secret). Borrowed. @param status the Status */
TF_EXTERN(const char *) tf_kube_status_message(const tf_kube_status *status);
/** Seconds the server asked to wait (`Retry-After`, else `details.retryAfterSeconds`); 0 when none. @param status the Status */
TF_EXTERN(long) tf_kube_status_retry_after(const tf_kube_status *status);
/** Number of `details.causes`. @param status the Status */
TF_EXTERN(size_t) tf_kube_status_cause_count(const tf_kube_status *status);
/**
 * One cause. Borrowed strings ("" when absent); NULL out-pointers are skipped.
 * @param      status  the Status
 * @param      i       index below tf_kube_status_cause_count()
 * @param[out] type    `type`
 * @param[out] message `message`
 * @param[out] field   `field`
 * @return 0, or TF_EINVALID for a bad index
 */
TF_EXTERN(tf_err) tf_kube_status_cause(const tf_kube_status *status, size_t i, const char **type, const char **message,
                                       const char **field);

TF_END_DECL

#endif
