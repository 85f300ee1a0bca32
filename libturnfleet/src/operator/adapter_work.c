/* Worker threads for the adapter's probes and scrapes (adapter_internal.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "adapter_internal.h"

typedef struct tf_adapter__job {
  struct tf_adapter__job *next;
  tf_adapter__job_kind kind;
  char *key;
  uint64_t epoch, id;
  char **uris, **addresses;
  int *families;
  int insecure;
  size_t n;
  tf_port_range ports;
  char *secret, *url;
  int timeout_ms;
  tf_adapter__result result;
} tf_adapter__job;

struct tf_adapter__work {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  tf_adapter__job *queued, *queued_tail, *finished;
  int stopping;
  pthread_t *threads;
  size_t thread_count;
  tf_workqueue *queue;
};

static void job_free(tf_adapter__job *j)
{
  if (!j) return;
  for (size_t i = 0; i < j->n; i++) {
    free(j->uris ? j->uris[i] : NULL);
    free(j->addresses ? j->addresses[i] : NULL);
  }
  free(j->uris);
  free(j->addresses);
  free(j->families);
  if (j->secret) {
    OPENSSL_cleanse(j->secret, strlen(j->secret));
    free(j->secret);
  }
  free(j->url);
  free(j->key);
  tf_adapter__result_clear(&j->result);
  free(j);
}

void tf_adapter__result_clear(tf_adapter__result *r)
{
  if (!r) return;
  free(r->message);
  r->message = NULL;
}

static void run_probe(tf_adapter__job *j)
{
  j->result.ok = j->n > 0;
  for (size_t i = 0; i < j->n && j->result.ok; i++) {
    tf_probe_options po = TF_PROBE_OPTIONS_INIT;
    po.uri = j->uris[i];
    po.secret = j->secret;
    po.user = "turnfleet-operator";
    po.expect_address = j->addresses[i];
    po.family = j->families[i];
    po.insecure = j->insecure;
    po.expect_port_start = j->ports.start;
    po.expect_port_end = j->ports.end;
    po.timeout_ms = j->timeout_ms;
    tf_probe_result *res = NULL;
    if (tf_probe_run(&res, &po) < 0) {
      j->result.ok = 0;
      j->result.message = strdup(tf_error_last()->message);
      break;
    }
    if (!tf_probe_result_ok(res)) {
      j->result.ok = 0;
      j->result.error_code = tf_probe_result_error_code(res);
      j->result.on_allocate = tf_probe_result_stage(res) == TF_PROBE_STAGE_ALLOCATE;
      const char *m = tf_probe_result_message(res);
      j->result.message = strdup(m ? m : "probe failed");
    }
    tf_probe_result_free(res);
  }
}

typedef struct body {
  char *p;
  size_t len;
} body;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
  body *b = arg;
  size_t add = size * n;
  if (b->len + add > ((size_t)4 << 20)) return 0; /* an agent's /metrics is small */
  char *grown = realloc(b->p, b->len + add + 1);
  if (!grown) return 0;
  memcpy(grown + b->len, data, add);
  b->len += add;
  grown[b->len] = '\0';
  b->p = grown;
  return add;
}

static void run_scrape(tf_adapter__job *j)
{
  j->result.allocations = -1;
  CURL *c = curl_easy_init();
  body b = {NULL, 0};
  long code = 0;
  if (!c) return;
  curl_easy_setopt(c, CURLOPT_URL, j->url);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)j->timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  /* the pool's token: only the operator reads its agents' /metrics */
  struct curl_slist *headers = NULL;
  char *auth = j->secret ? malloc(strlen(j->secret) + 32) : NULL;
  if (auth) {
    sprintf(auth, "Authorization: Bearer %s", j->secret);
    headers = curl_slist_append(NULL, auth);
    OPENSSL_cleanse(auth, strlen(auth));
    free(auth);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  }
  if (curl_easy_perform(c) == CURLE_OK && curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK &&
      code == 200 && b.p) {
    tf_metrics *m = NULL;
    double sum = 0;
    (void)tf_metrics_parse(&m, b.p, b.len);
    /* the agent leaves the sample out while its count fails: unknown, not zero */
    int seen = 0;
    for (size_t i = 0; m && i < tf_metrics_sample_count(m); i++) {
      const char *name = NULL;
      double v;
      if (tf_metrics_sample(m, i, &name, &v) == 0 && strcmp(name, TF_METRIC_AGENT_PORTS_IN_USE) == 0) seen = 1;
    }
    if (seen && tf_metrics_sum(&sum, m, TF_METRIC_AGENT_PORTS_IN_USE) == 0) j->result.allocations = (int64_t)sum;
    tf_metrics_free(m);
  }
  free(b.p);
  curl_easy_cleanup(c);
  for (struct curl_slist *h = headers; h; h = h->next) OPENSSL_cleanse(h->data, strlen(h->data));
  curl_slist_free_all(headers);
}

static void *worker(void *arg)
{
  tf_adapter__work *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->queued && !w->stopping) pthread_cond_wait(&w->cv, &w->mu);
    if (w->stopping) break;
    tf_adapter__job *j = w->queued;
    w->queued = j->next;
    if (!w->queued) w->queued_tail = NULL;
    pthread_mutex_unlock(&w->mu);
    if (j->kind == TF_ADAPTER__PROBE) run_probe(j);
    else run_scrape(j);
    if (j->secret) {
      OPENSSL_cleanse(j->secret, strlen(j->secret));
      free(j->secret);
      j->secret = NULL;
    }
    pthread_mutex_lock(&w->mu);
    j->next = NULL;
    tf_adapter__job **tail = &w->finished;
    while (*tail) tail = &(*tail)->next;
    *tail = j;
    pthread_mutex_unlock(&w->mu);
    (void)tf_workqueue_add(w->queue, j->key);
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

tf_adapter__work *tf_adapter__work_new(size_t threads, tf_workqueue *queue)
{
  tf_adapter__work *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->queue = queue;
  w->threads = calloc(threads, sizeof(pthread_t));
  for (size_t i = 0; w->threads && i < threads; i++) {
    if (pthread_create(&w->threads[i], NULL, worker, w) != 0) break;
    w->thread_count++;
  }
  if (!w->thread_count) {
    tf_adapter__work_free(w);
    return NULL;
  }
  return w;
}

void tf_adapter__work_free(tf_adapter__work *w)
{
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stopping = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  for (size_t i = 0; i < w->thread_count; i++) pthread_join(w->threads[i], NULL);
  free(w->threads);
  for (tf_adapter__job *lists[2] = {w->queued, w->finished}, **l = lists; l < lists + 2; l++)
    while (*l) {
      tf_adapter__job *next = (*l)->next;
      job_free(*l);
      *l = next;
    }
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}

static int submit(tf_adapter__work *w, tf_adapter__job *j)
{
  pthread_mutex_lock(&w->mu);
  if (w->queued_tail) w->queued_tail->next = j;
  else w->queued = j;
  w->queued_tail = j;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  return 0;
}

int tf_adapter__work_probe(tf_adapter__work *w, const char *key, uint64_t epoch, uint64_t id, const tf_probe_options *po, size_t n)
{
  tf_adapter__job *j = calloc(1, sizeof(*j));
  if (!j) return -1;
  j->kind = TF_ADAPTER__PROBE;
  j->result.kind = TF_ADAPTER__PROBE;
  j->epoch = j->result.epoch = epoch;
  j->id = j->result.id = id;
  j->key = strdup(key);
  j->uris = calloc(n + 1, sizeof(char *));
  j->addresses = calloc(n + 1, sizeof(char *));
  j->families = calloc(n + 1, sizeof(int));
  j->secret = strdup(n && po[0].secret ? po[0].secret : "");
  int ok = j->key && j->uris && j->addresses && j->families && j->secret;
  j->n = ok ? n : 0;
  for (size_t i = 0; ok && i < n; i++) {
    ok = (j->uris[i] = strdup(po[i].uri)) && (j->addresses[i] = strdup(po[i].expect_address));
    j->families[i] = po[i].family;
  }
  if (n) {
    j->ports.start = po[0].expect_port_start;
    j->ports.end = po[0].expect_port_end;
    j->timeout_ms = po[0].timeout_ms;
    j->insecure = po[0].insecure;
  }
  if (!ok) {
    job_free(j);
    return -1;
  }
  return submit(w, j);
}

int tf_adapter__work_scrape(tf_adapter__work *w, const char *key, uint64_t epoch, uint64_t id, const char *url,
                            const char *token, int timeout_ms)
{
  tf_adapter__job *j = calloc(1, sizeof(*j));
  if (!j) return -1;
  j->kind = TF_ADAPTER__SCRAPE;
  j->result.kind = TF_ADAPTER__SCRAPE;
  j->epoch = j->result.epoch = epoch;
  j->id = j->result.id = id;
  j->key = strdup(key);
  j->url = strdup(url);
  j->secret = token ? strdup(token) : NULL;
  j->timeout_ms = timeout_ms;
  if (!j->key || !j->url || (token && !j->secret)) {
    job_free(j);
    return -1;
  }
  return submit(w, j);
}

size_t tf_adapter__work_take(tf_adapter__work *w, const char *key, tf_adapter__result **out)
{
  size_t n = 0, cap = 0;
  *out = NULL;
  pthread_mutex_lock(&w->mu);
  for (tf_adapter__job **l = &w->finished; *l;) {
    tf_adapter__job *j = *l;
    if (strcmp(j->key, key) != 0) {
      l = &j->next;
      continue;
    }
    if (n == cap) {
      tf_adapter__result *grown = realloc(*out, (cap = cap ? cap * 2 : 8) * sizeof(tf_adapter__result));
      if (!grown) break;
      *out = grown;
    }
    (*out)[n++] = j->result;
    j->result.message = NULL;
    *l = j->next;
    job_free(j);
  }
  pthread_mutex_unlock(&w->mu);
  return n;
}
