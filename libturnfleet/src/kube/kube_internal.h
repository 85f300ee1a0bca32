/* Private parts of the kube module: configuration, Status, watch lines.
 * Reachable from the tests and the fuzz targets (they link the objects). */
#ifndef TF_KUBE_INTERNAL_H
#define TF_KUBE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "internal.h"

struct cJSON;

/* A byte blob (PEM); `secret` blobs are wiped when disposed. */
typedef struct tf_kube__blob {
  char *ptr;
  size_t len;
} tf_kube__blob;

/* What a configuration source resolved to. */
typedef struct tf_kube__config {
  char *server;          /* https://host:port */
  char *ns;              /* default namespace, or NULL */
  char *tls_server_name; /* or NULL */
  int insecure;          /* insecure-skip-tls-verify */
  tf_kube__blob ca;      /* PEM CA bundle, or empty */
  tf_kube__blob cert;    /* client certificate PEM, or empty */
  tf_kube__blob key;     /* client key PEM (secret), or empty */
  char *token;           /* static bearer token (secret), or NULL */
  char *token_file;      /* re-read bearer token file, or NULL */
} tf_kube__config;

void tf_kube__config_dispose(tf_kube__config *c);

/* Parse kubeconfig text. Relative file paths are resolved against @p base_dir
 * (the kubeconfig's directory; NULL = as given). @p context overrides
 * current-context. Files named by certificate-authority, client-certificate
 * and client-key are read now. Never puts a credential in an error message. */
tf_err tf_kube__config_parse(tf_kube__config *out, const char *text, size_t len, const char *base_dir,
                             const char *context);
/* Read the kubeconfig file at @p path and parse it. */
tf_err tf_kube__config_load(tf_kube__config *out, const char *path, const char *context);
/* The in-cluster configuration: env KUBERNETES_SERVICE_HOST/PORT, @p sa_dir/{ca.crt,token,namespace}. */
tf_err tf_kube__config_in_cluster(tf_kube__config *out, const char *sa_dir);

/* Read a whole file (at most @p max bytes) into a NUL-terminated buffer. */
tf_err tf_kube__read_file(const char *path, size_t max, tf_kube__blob *out);

/* The Status object. */
struct tf_kube_status {
  int code;
  char *reason;
  char *message;
  long retry_after;
  size_t ncauses;
  struct tf_kube__cause {
    char *type, *message, *field;
  } *causes;
};

/* Build a Status from an HTTP answer: the body's Status when it parses as one,
 * else one named after the HTTP code. @p retry_after_header may be NULL.
 * Never fails but on memory (returns NULL). */
tf_kube_status *tf_kube__status_parse(int http_code, const char *body, size_t len, const char *retry_after_header);
/* Build a Status for a local/transport failure. */
tf_kube_status *tf_kube__status_local(int code, const char *reason, const char *message);
/* The tf_err for an HTTP code. */
tf_err tf_kube__code_err(int http_code);

/* Watch line buffer: bytes appended as they come, complete lines handed out
 * once each; the scan for '\n' resumes where it stopped, so no byte is looked
 * at twice. */
typedef struct tf_kube__lines {
  char *buf;
  size_t len;  /* bytes held */
  size_t cap;
  size_t scan; /* bytes of buf already scanned for '\n' */
  size_t max;  /* longest line accepted */
} tf_kube__lines;

void tf_kube__lines_init(tf_kube__lines *l, size_t max);
void tf_kube__lines_dispose(tf_kube__lines *l);
/* Append @p n bytes and call @p fn(line, len, arg) for every complete line
 * (without '\n', NUL-terminated in place). Stops at the first nonzero return of
 * @p fn and returns it; returns TF_EPROTO when a line grows over max, TF_ENOMEM. */
int tf_kube__lines_feed(tf_kube__lines *l, const char *data, size_t n, int (*fn)(char *line, size_t len, void *arg),
                        void *arg);

/* Parse one watch line into its type and object (borrowed from *root, which
 * the caller deletes). Returns TF_EPROTO for a line that is not an event. */
tf_err tf_kube__event_parse(const char *line, size_t len, struct cJSON **root, int *type, struct cJSON **object);

/* A JSON string field under obj.metadata (NULL when absent). */
const char *tf_kube__meta_str(const struct cJSON *obj, const char *field);

/* Polled (about once a second and on every chunk) on the requesting thread
 * while a watch or a cancellable request runs; nonzero aborts it (TF_EUSER). */
typedef int (*tf_kube__tick_fn)(void *arg);
/* Blocking watch delivering parsed objects (no printing): the informer uses it. */
typedef int (*tf_kube__event_fn)(int type, struct cJSON *object, void *arg);
tf_err tf_kube__watch(tf_kube *k, const char *path, const tf_kube_list_options *o, tf_kube__event_fn fn,
                      tf_kube__tick_fn tick, void *arg, tf_kube_status **status);
/* LIST returning the parsed list; @p tick may abort it. */
tf_err tf_kube__list(tf_kube *k, const char *path, const tf_kube_list_options *o, tf_kube__tick_fn tick, void *arg,
                     struct cJSON **out, tf_kube_status **status);
/* informer_object.c: the compact form of @p tree (managedFields removed from it first), keyed @p key; NULL on
 * no memory. */
tf_informer_object *tf_inf__object_build(struct cJSON *tree, const char *key);
/* The bytes of a tf_informer_options of @p version (what a caller of that version has). */
size_t tf_informer__options_size(unsigned int version);
/* Tests and benchmarks: a watch event fed to @p inf as its worker would (no server; @p object is changed). */
void tf_informer__feed(tf_informer *inf, int type, struct cJSON *object);
/* ... and a LIST's answer, as a (re)list replaces the cache. */
void tf_informer__feed_list(tf_informer *inf, struct cJSON *list);
/* Flags of tf_kube__request(). */
#define TF_KUBE__WRITE 1 /* adds fieldManager */
#define TF_KUBE__LEASE 2 /* the elector's own: never gated, its own Retry-After clock */
/* Any request, abandoned at the monotonic @p deadline_ms (0 = the client's timeout only)
 * with TF_ETIMEOUT; @p write is TF_KUBE__* flags. */
tf_err tf_kube__request(tf_kube *k, const char *method, const char *path, const char *content_type, const char *body,
                        int write, int64_t deadline_ms, char **out, tf_kube_status **status);
/* Log through the client's sink (secrets never passed here). */
void tf_kube__log(const tf_kube *k, tf_log_level level, const char *fmt, ...) TF__PRINTF(3, 4);

/* Monotonic clock in ms. */
int64_t tf_kube__now_ms(void);
/* One timed wait of up to @p ms on @p cv (a CLOCK_MONOTONIC condition), @p mu
 * held by the caller; returns early on a signal or a spurious wake-up (callers
 * loop). Returns nonzero when *stop is set. */
int tf_kube__wait(pthread_mutex_t *mu, pthread_cond_t *cv, int64_t ms, volatile int *stop);

#endif
