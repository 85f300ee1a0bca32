/* The adapter's probes and agent scrapes off the reconcile thread (adapter_internal.h): one thread
 * runs one loop, libcurl multi's poll with the probe sets' descriptors beside its own (the probe
 * set hooks, probe.h), so no relay slow to answer holds up another and no pool of threads is
 * kept. A probe job is one probe set (every URI of the relay at once); a scrape is relayctl's
 * request to an agent (relayctl_internal.h) on the multi. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "adapter_internal.h"
#include "relayctl_internal.h"

#define WORK_MAX_WAIT_MS 1000
#define WORK_POLL_FDS 64 /* probe sets waited on at once; more are processed every round */

typedef struct tf_adapter__job {
  struct tf_adapter__job *next;
  char *key;
  tf_probe_set *set;            /* probe: its URIs, started by the loop */
  tf_relayctl__scrape *scrape;  /* scrape */
  char *failed;                 /* probe: a URI's options were refused (tf_probe_set_add) */
  tf_adapter__result result;
} tf_adapter__job;

struct tf_adapter__work {
  pthread_mutex_t mu;
  tf_adapter__job *queued, *finished; /* under mu */
  int stopping;                       /* under mu */
  tf_adapter__job *running;           /* the loop's own */
  CURLM *multi;
  pthread_t thread;
  int started;
  tf_workqueue *queue;
};

static void job_free(tf_adapter__job *j)
{
  if (!j) return;
  tf_probe_set_free(j->set);
  tf_relayctl__scrape_free(j->scrape);
  free(j->failed);
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

/* A probe set that ended: the first URI that failed (in their order) decides. */
static void probe_result(tf_adapter__job *j, tf_err rc)
{
  tf_adapter__result *r = &j->result;
  r->ok = tf_probe_set_count(j->set) > 0 && !j->failed && rc == TF_OK;
  if (j->failed) r->message = j->failed, j->failed = NULL;
  else if (rc < 0) r->message = strdup(tf_error_last()->message);
  for (size_t i = 0; r->ok && i < tf_probe_set_count(j->set); i++) {
    const tf_probe_result *res = tf_probe_set_result(j->set, i);
    if (res && tf_probe_result_ok(res)) continue;
    r->ok = 0;
    if (!res) {
      r->message = strdup("probe failed: no result");
      break;
    }
    r->error_code = tf_probe_result_error_code(res);
    r->on_allocate = tf_probe_result_stage(res) == TF_PROBE_STAGE_ALLOCATE;
    const char *m = tf_probe_result_message(res);
    r->message = strdup(m && *m ? m : "probe failed");
  }
  tf_probe_set_free(j->set); /* the secret's copies wiped */
  j->set = NULL;
}

/* The loop's jobs that ended go to the finished list, their keys to the queue. */
static void finish(tf_adapter__work *w, tf_adapter__job *j)
{
  pthread_mutex_lock(&w->mu);
  j->next = NULL;
  tf_adapter__job **tail = &w->finished;
  while (*tail) tail = &(*tail)->next;
  *tail = j;
  pthread_mutex_unlock(&w->mu);
  (void)tf_workqueue_add(w->queue, j->key);
}

/* Take the queued jobs and start them: a probe set's first requests, a scrape on the multi. */
static void start_queued(tf_adapter__work *w)
{
  pthread_mutex_lock(&w->mu);
  tf_adapter__job *q = w->queued;
  w->queued = NULL;
  pthread_mutex_unlock(&w->mu);
  while (q) {
    tf_adapter__job *j = q;
    q = q->next;
    tf_err rc = TF_OK;
    if (j->set) rc = j->failed ? TF_EINVALID : tf_probe_set_start(j->set, NULL, NULL);
    else if (curl_multi_add_handle(w->multi, tf_relayctl__scrape_handle(j->scrape)) != CURLM_OK) rc = TF_ENOMEM;
    if (rc < 0 || (j->set && tf_probe_set_running(j->set) == 0)) {
      if (j->set) probe_result(j, rc);
      else j->result.allocations = -1;
      finish(w, j);
      continue;
    }
    j->next = w->running;
    w->running = j;
  }
}

/* One non-blocking round of every probe set; the ones that ended are finished. */
static void process_probes(tf_adapter__work *w)
{
  for (tf_adapter__job **l = &w->running; *l;) {
    tf_adapter__job *j = *l;
    size_t running = 1;
    tf_err rc = j->set ? tf_probe_set_process(j->set, &running) : TF_OK;
    if (!j->set || running) {
      l = &j->next;
      continue;
    }
    *l = j->next;
    probe_result(j, rc);
    finish(w, j);
  }
}

/* The scrapes the multi is done with are finished. */
static void process_scrapes(tf_adapter__work *w)
{
  int left = 0;
  (void)curl_multi_perform(w->multi, &left);
  CURLMsg *msg;
  while ((msg = curl_multi_info_read(w->multi, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL *easy = msg->easy_handle;
    CURLcode cc = msg->data.result;
    curl_multi_remove_handle(w->multi, easy);
    for (tf_adapter__job **l = &w->running; *l; l = &(*l)->next) {
      tf_adapter__job *j = *l;
      if (!j->scrape || tf_relayctl__scrape_handle(j->scrape) != easy) continue;
      *l = j->next;
      j->result.allocations = tf_relayctl__scrape_count(j->scrape, cc);
      tf_relayctl__scrape_free(j->scrape); /* the token's copy wiped */
      j->scrape = NULL;
      finish(w, j);
      break;
    }
  }
}

/* Wait for the multi's sockets, the probe sets' descriptors, the earliest timeout or a wake-up. */
static void wait_round(tf_adapter__work *w)
{
  struct curl_waitfd fds[WORK_POLL_FDS];
  unsigned n = 0;
  long curl_ms = -1;
  int timeout = WORK_MAX_WAIT_MS;
  (void)curl_multi_timeout(w->multi, &curl_ms);
  if (curl_ms >= 0 && curl_ms < timeout) timeout = (int)curl_ms;
  for (tf_adapter__job *j = w->running; j; j = j->next) {
    if (!j->set) continue;
    int t = tf_probe_set_timeout(j->set), fd = tf_probe_set_fd(j->set);
    if (t >= 0 && t < timeout) timeout = t;
    if (fd >= 0 && n < WORK_POLL_FDS) fds[n++] = (struct curl_waitfd){fd, CURL_WAIT_POLLIN, 0};
    else timeout = 0; /* no room to wait for it: go round at once */
  }
  if (timeout > 0) (void)curl_multi_poll(w->multi, fds, n, timeout, NULL);
}

static void *loop(void *arg)
{
  tf_adapter__work *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    int stopping = w->stopping;
    pthread_mutex_unlock(&w->mu);
    if (stopping) break;
    start_queued(w);
    process_probes(w);
    process_scrapes(w);
    wait_round(w);
  }
  while (w->running) { /* abandoned: a probe's allocations released, best effort */
    tf_adapter__job *j = w->running;
    w->running = j->next;
    if (j->scrape) curl_multi_remove_handle(w->multi, tf_relayctl__scrape_handle(j->scrape));
    job_free(j);
  }
  return NULL;
}

tf_adapter__work *tf_adapter__work_new(tf_workqueue *queue)
{
  tf_adapter__work *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  pthread_mutex_init(&w->mu, NULL);
  w->queue = queue;
  if (!(w->multi = curl_multi_init()) || pthread_create(&w->thread, NULL, loop, w) != 0) {
    tf_adapter__work_free(w);
    return NULL;
  }
  w->started = 1;
  return w;
}

void tf_adapter__work_free(tf_adapter__work *w)
{
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stopping = 1;
  pthread_mutex_unlock(&w->mu);
  if (w->started) {
    curl_multi_wakeup(w->multi);
    pthread_join(w->thread, NULL);
  }
  for (tf_adapter__job *lists[2] = {w->queued, w->finished}, **l = lists; l < lists + 2; l++)
    while (*l) {
      tf_adapter__job *next = (*l)->next;
      job_free(*l);
      *l = next;
    }
  if (w->multi) curl_multi_cleanup(w->multi);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

static int submit(tf_adapter__work *w, tf_adapter__job *j)
{
  pthread_mutex_lock(&w->mu);
  tf_adapter__job **tail = &w->queued;
  while (*tail) tail = &(*tail)->next;
  *tail = j;
  pthread_mutex_unlock(&w->mu);
  curl_multi_wakeup(w->multi);
  return 0;
}

static tf_adapter__job *job_new(const char *key, tf_adapter__job_kind kind, uint64_t epoch, uint64_t id)
{
  tf_adapter__job *j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->result.kind = kind;
  j->result.epoch = epoch;
  j->result.id = id;
  if (!(j->key = strdup(key))) {
    free(j);
    return NULL;
  }
  return j;
}

int tf_adapter__work_probe(tf_adapter__work *w, const char *key, uint64_t epoch, uint64_t id, const tf_probe_options *po, size_t n)
{
  tf_adapter__job *j = job_new(key, TF_ADAPTER__PROBE, epoch, id);
  if (!j || tf_probe_set_new(&j->set, n ? (unsigned)n : 1) < 0) {
    job_free(j);
    return -1;
  }
  for (size_t i = 0; i < n && !j->failed; i++) {
    tf_probe_options o = TF_PROBE_OPTIONS_INIT;
    o.uri = po[i].uri;
    o.secret = po[0].secret; /* the first's serves all */
    o.user = "turnfleet-operator";
    o.expect_address = po[i].expect_address;
    o.family = po[i].family;
    o.insecure = po[0].insecure;
    o.expect_port_start = po[0].expect_port_start;
    o.expect_port_end = po[0].expect_port_end;
    o.timeout_ms = po[0].timeout_ms;
    tf_err rc = tf_probe_set_add(j->set, &o); /* copied; the secret wiped when the set is freed */
    if (rc == TF_ENOMEM) {
      job_free(j);
      return -1;
    }
    if (rc < 0 && !(j->failed = strdup(tf_error_last()->message))) {
      job_free(j);
      return -1;
    }
  }
  return submit(w, j);
}

int tf_adapter__work_scrape(tf_adapter__work *w, const char *key, uint64_t epoch, uint64_t id, const char *url,
                            const char *token, int timeout_ms)
{
  tf_adapter__job *j = job_new(key, TF_ADAPTER__SCRAPE, epoch, id);
  if (!j || !(j->scrape = tf_relayctl__scrape_new(url, token, timeout_ms))) {
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
