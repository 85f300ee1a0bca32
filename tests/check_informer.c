/* informer: the reflector against the real stand-in through every watch and
 * list fault of the API contract, the cache and its indexes, the work queue,
 * Lease leader election and the Event recorder.
 * API 127.0.0.210:16510, control 16511.
 *
 * Request-count bounds used below (from the stand-in's request log):
 * - a fault-free informer makes exactly 1 LIST; every watch that ends without
 *   an error is followed by one more watch, so watches <= 2 + elapsed / timeoutSeconds;
 * - with a fault answering every request for a window, attempts <= 1 + the
 *   number of backoff steps (0.8, 1.6, 3.2, … s) that fit in the window;
 * - a 410 costs exactly one relist. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "kube_internal.h"
#include "tf_kube_test.h"
#include "tf_test.h"

#define TF_IT_ADDR "127.0.0.210"
#define TF_IT_PORT 16510

static tf_test_cluster tf_it;
static const char *const tf_it_flags[] = {"--bookmark-interval", "1", "--history", "200", NULL};

/* TF_TEST_KUBE_ADDR / TF_TEST_KUBE_PORT (+10 here) move the stand-in (several trees on one machine) */
static void tf_it_setup(void)
{
  const char *a = getenv("TF_TEST_KUBE_ADDR"), *p = getenv("TF_TEST_KUBE_PORT");
  tf_test_cluster_start(&tf_it, a && *a ? a : TF_IT_ADDR, p && *p ? atoi(p) + 10 : TF_IT_PORT, tf_it_flags);
}
static void tf_it_teardown(void) { tf_test_cluster_stop(&tf_it); }
static void tf_it_each(void) { tf_test_reset(&tf_it); }

/* ---- helpers ---- */

typedef struct tf_it_seen {
  pthread_mutex_t mu;
  int added, updated, deleted;
  char deleted_keys[2048];
} tf_it_seen;

static void tf_it_on_change(tf_informer_op op, const char *key, const char *object, void *payload)
{
  tf_it_seen *s = payload;
  (void)object; /* on the informer thread: no check assertions here */
  pthread_mutex_lock(&s->mu);
  if (op == TF_INFORMER_ADDED) s->added++;
  if (op == TF_INFORMER_UPDATED) s->updated++;
  if (op == TF_INFORMER_DELETED) {
    s->deleted++;
    size_t l = strlen(s->deleted_keys);
    snprintf(s->deleted_keys + l, sizeof(s->deleted_keys) - l, "%s;", key);
  }
  pthread_mutex_unlock(&s->mu);
}

static void tf_it_ns(tf_kube *k, const char *ns)
{
  char *b = tf_asprintf__("{\"metadata\":{\"name\":\"%s\"}}", ns);
  tf_err rc = tf_kube_create(k, "/api/v1/namespaces", b, NULL, NULL);
  ck_assert_msg(rc == 0 || rc == TF_ECONFLICT, "namespace %s: %s", ns, tf_error_last()->message);
  free(b);
}

static void tf_it_cm(tf_kube *k, const char *ns, const char *name, const char *label)
{
  char *coll = NULL;
  TF_OK_OR_FAIL(tf_kube_path(&coll, "/api/v1", "configmaps", ns, NULL, NULL));
  char *b = tf_asprintf__("{\"metadata\":{\"name\":\"%s\",\"labels\":{\"app\":\"%s\"}},\"data\":{\"v\":\"0\"}}", name, label);
  TF_OK_OR_FAIL(tf_kube_create(k, coll, b, NULL, NULL));
  free(b);
  tf_free(coll);
}

static void tf_it_cm_del(tf_kube *k, const char *ns, const char *name)
{
  char *p = NULL;
  TF_OK_OR_FAIL(tf_kube_path(&p, "/api/v1", "configmaps", ns, name, NULL));
  TF_OK_OR_FAIL(tf_kube_delete(k, p, NULL, NULL, NULL));
  tf_free(p);
}

static void tf_it_cm_touch(tf_kube *k, const char *ns, const char *name, int v)
{
  char *p = NULL, *b = tf_asprintf__("{\"data\":{\"v\":\"%d\"}}", v);
  TF_OK_OR_FAIL(tf_kube_path(&p, "/api/v1", "configmaps", ns, name, NULL));
  TF_OK_OR_FAIL(tf_kube_patch(k, p, TF_KUBE_PATCH_MERGE, b, NULL, NULL));
  tf_free(p);
  free(b);
}

/* "key@rv;" for every object of a JSON list/array, sorted by key (both sides sort by key). */
static char *tf_it_fingerprint(const cJSON *items)
{
  tf_buf b;
  tf_buf__init(&b);
  int n = cJSON_GetArraySize(items);
  char **lines = calloc((size_t)n + 1, sizeof(char *));
  for (int i = 0; i < n; i++) {
    const cJSON *it = cJSON_GetArrayItem(items, i);
    lines[i] = tf_asprintf__("%s/%s@%s;", tf_kube__meta_str(it, "namespace"), tf_kube__meta_str(it, "name"),
                             tf_kube__meta_str(it, "resourceVersion"));
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (strcmp(lines[i], lines[j]) > 0) {
        char *t = lines[i];
        lines[i] = lines[j];
        lines[j] = t;
      }
  for (int i = 0; i < n; i++) {
    tf_buf__puts(&b, lines[i]);
    free(lines[i]);
  }
  free(lines);
  tf_buf__puts(&b, "");
  char *out = NULL;
  TF_OK_OR_FAIL(tf_buf__detach(&b, &out));
  return out;
}

/* Wait (up to 30 s) until the cache holds exactly the server's objects at their RVs. */
static void tf_it_converges(tf_informer *inf, tf_kube *k, const char *path)
{
  char *want = NULL, *have = NULL;
  for (int i = 0; i < 300; i++) {
    free(want);
    free(have);
    char *txt = NULL;
    TF_OK_OR_FAIL(tf_kube_list(k, path, NULL, &txt, NULL));
    cJSON *d = cJSON_Parse(txt);
    want = tf_it_fingerprint(cJSON_GetObjectItem(d, "items"));
    cJSON_Delete(d);
    tf_free(txt);
    TF_OK_OR_FAIL(tf_informer_list(inf, NULL, NULL, &txt));
    d = cJSON_Parse(txt);
    have = tf_it_fingerprint(d);
    cJSON_Delete(d);
    tf_free(txt);
    if (strcmp(want, have) == 0) break;
    tf_test_sleep_ms(100);
  }
  ck_assert_str_eq(have, want);
  free(want);
  free(have);
}

static void tf_it_wait_synced(tf_informer *inf)
{
  for (int i = 0; i < 300 && !tf_informer_has_synced(inf); i++) tf_test_sleep_ms(100);
  ck_assert(tf_informer_has_synced(inf));
}

/* Wait until the request log has at least @p n matching requests. */

/* A client whose requests the log tells apart (User-Agent tf-informer). */
static tf_kube *tf_it_informer_kube(void) { return tf_test_kube_token(&tf_it, tf_it.token_path, "tf-informer", NULL); }

static tf_informer *tf_it_informer_log(tf_kube *k, const char *path, tf_it_seen *seen, long watch_s, long stall_s,
                                       char **log)
{
  tf_informer_options o;
  TF_OK_OR_FAIL(tf_informer_options_init(&o, TF_INFORMER_OPTIONS_VERSION));
  o.path = path;
  o.watch_min_seconds = watch_s;
  o.watch_max_seconds = watch_s;
  o.stall_seconds = stall_s;
  o.on_change = tf_it_on_change;
  o.payload = seen;
  if (log) {
    o.log = tf_test_log_cb;
    o.log_payload = log;
    o.log_level = TF_LOG_DEBUG;
  }
  tf_informer *inf = NULL;
  TF_OK_OR_FAIL(tf_informer_new(&inf, k, &o));
  TF_OK_OR_FAIL(tf_informer_start(inf));
  return inf;
}

static tf_informer *tf_it_informer(tf_kube *k, const char *path, tf_it_seen *seen, long watch_s, long stall_s)
{
  return tf_it_informer_log(k, path, seen, watch_s, stall_s, NULL);
}

/* A namespace with objects a0..a2 (app=a) and b0 (app=b), and an informer on it. */
typedef struct tf_it_fix {
  tf_kube *k;     /* the informer's client (User-Agent tf-informer) */
  tf_kube *admin; /* the test's writes and checks */
  char ns[32];
  char path[96];
  tf_it_seen seen;
  tf_informer *inf;
  char *log; /* the informer's log */
} tf_it_fix;

static void tf_it_fix_open(tf_it_fix *f, const char *ns, long watch_s, long stall_s)
{
  memset(f, 0, sizeof(*f));
  pthread_mutex_init(&f->seen.mu, NULL);
  f->k = tf_it_informer_kube();
  f->admin = tf_test_kube(&tf_it, NULL);
  snprintf(f->ns, sizeof(f->ns), "%s", ns);
  snprintf(f->path, sizeof(f->path), "/api/v1/namespaces/%s/configmaps", ns);
  tf_it_ns(f->admin, ns);
  for (int i = 0; i < 3; i++) {
    char n[8];
    snprintf(n, sizeof(n), "a%d", i);
    tf_it_cm(f->admin, ns, n, "a");
  }
  tf_it_cm(f->admin, ns, "b0", "b");
  cJSON_Delete(tf_test_control(&tf_it, "DELETE", "/requests", NULL));
  f->inf = tf_it_informer_log(f->k, f->path, &f->seen, watch_s, stall_s, &f->log);
  tf_it_wait_synced(f->inf);
  tf_it_converges(f->inf, f->admin, f->path);
}

static void tf_it_fix_close(tf_it_fix *f)
{
  tf_informer_free(f->inf);
  tf_kube_free(f->k);
  tf_kube_free(f->admin);
  free(f->log);
}

/* Touch @p name every 300 ms (up to 30 s) until the informer's log holds @p n lines with @p needle. */
static void tf_it_until_logged(tf_it_fix *f, const char *name, const char *needle, int n)
{
  for (int i = 0; i < 100 && tf_test_log_count(&f->log, needle) < n; i++) {
    tf_it_cm_touch(f->admin, f->ns, name, 200 + i);
    tf_test_sleep_ms(300);
  }
  ck_assert_msg(tf_test_log_count(&f->log, needle) >= n, "informer log: fewer than %d \"%s\"", n, needle);
}

/* The informer's own requests on @p path (the request log has them once they ended):
 * watch = 1 watches, 0 lists; @p code 0 = any. */
static int tf_it_count(const char *path, int watch, int code)
{
  cJSON *r = tf_test_requests(&tf_it, "GET", path, NULL);
  int n = 0;
  cJSON *it;
  cJSON_ArrayForEach(it, r)
  {
    if (strcmp(cJSON_GetObjectItem(it, "userAgent")->valuestring, "tf-informer") != 0) continue;
    if (!!strstr(cJSON_GetObjectItem(it, "query")->valuestring, "watch=1") != watch) continue;
    if (code && cJSON_GetObjectItem(it, "code")->valueint != code) continue;
    n++;
  }
  cJSON_Delete(r);
  return n;
}

static int tf_it_lists(const tf_it_fix *f) { return tf_it_count(f->path, 0, 0); }
static int tf_it_watches(const tf_it_fix *f) { return tf_it_count(f->path, 1, 0); }

/* Every fault rule has been hit at least once (up to 30 s), touching @p name meanwhile so watches see events. */
static void tf_it_wait_faults_hit(tf_it_fix *f, const char *name)
{
  int all = 0;
  for (int i = 0; i < 100 && !all; i++) {
    cJSON *r = tf_test_control(&tf_it, "GET", "/faults", NULL);
    all = 1;
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(r, "rules")) if (cJSON_GetObjectItem(it, "hits")->valueint == 0) all = 0;
    cJSON_Delete(r);
    if (!all) {
      tf_it_cm_touch(f->admin, f->ns, name, 100 + i);
      tf_test_sleep_ms(300);
    }
  }
  ck_assert_msg(all, "a fault rule was never hit");
}

/* ---- informer ---- */

START_TEST(test_informer__cache_indexes_notifications)
{
  tf_it_fix f;
  tf_it_fix_open(&f, "inf-basic", 2, 0);
  /* a0..a2, b0 and the namespace's kube-root-ca.crt */
  ck_assert_uint_eq(tf_informer_count(f.inf), 5);
  ck_assert_int_eq(f.seen.added, 5);
  /* the first LIST asks for RV "0"; watches ask for bookmarks, from an RV */
  ck_assert_int_eq(tf_test_count(&tf_it, "GET", f.path, "resourceVersion=0"), 1);
  (void)tf_test_wait_count(&tf_it, "GET", f.path, "allowWatchBookmarks=true", 1);
  char *txt = NULL;
  TF_OK_OR_FAIL(tf_informer_list(f.inf, NULL, "app=a", &txt));
  cJSON *d = cJSON_Parse(txt);
  ck_assert_int_eq(cJSON_GetArraySize(d), 3);
  ck_assert_str_eq(tf_kube__meta_str(cJSON_GetArrayItem(d, 0), "name"), "a0");
  cJSON_Delete(d);
  tf_free(txt);
  TF_OK_OR_FAIL(tf_informer_list(f.inf, "inf-basic", "app=b", &txt));
  ck_assert_ptr_nonnull(strstr(txt, "\"b0\""));
  tf_free(txt);
  TF_OK_OR_FAIL(tf_informer_list(f.inf, "elsewhere", NULL, &txt));
  ck_assert_str_eq(txt, "[]");
  tf_free(txt);
  ck_assert_int_eq(tf_informer_list(f.inf, NULL, "app", &txt), TF_EINVALID);
  TF_OK_OR_FAIL(tf_informer_get(f.inf, "inf-basic/a1", &txt));
  tf_free(txt);
  ck_assert_int_eq(tf_informer_get(f.inf, "inf-basic/zz", &txt), TF_ENOTFOUND);
  /* live changes */
  tf_it_cm_touch(f.admin, f.ns, "a1", 1);
  tf_it_cm_del(f.admin, f.ns, "a2");
  tf_it_cm(f.admin, f.ns, "b1", "b");
  tf_it_converges(f.inf, f.admin, f.path);
  TF_OK_OR_FAIL(tf_informer_list(f.inf, NULL, "app=a", &txt));
  d = cJSON_Parse(txt);
  ck_assert_int_eq(cJSON_GetArraySize(d), 2);
  cJSON_Delete(d);
  tf_free(txt);
  TF_OK_OR_FAIL(tf_informer_list(f.inf, "inf-basic", "app=b", &txt));
  d = cJSON_Parse(txt);
  ck_assert_int_eq(cJSON_GetArraySize(d), 2);
  cJSON_Delete(d);
  tf_free(txt);
  pthread_mutex_lock(&f.seen.mu);
  ck_assert_int_eq(f.seen.added, 6);
  ck_assert_int_eq(f.seen.updated, 1);
  ck_assert_int_eq(f.seen.deleted, 1);
  ck_assert_str_eq(f.seen.deleted_keys, "inf-basic/a2;");
  pthread_mutex_unlock(&f.seen.mu);
  ck_assert_int_eq(tf_it_lists(&f), 1);
  tf_it_fix_close(&f);
}
END_TEST

/* Clean ends at timeoutSeconds re-watch from the last RV; no relist. */
START_TEST(test_informer__rewatch_on_clean_end)
{
  tf_it_fix f;
  tf_it_fix_open(&f, "inf-rewatch", 1, 0);
  (void)tf_test_wait_count(&tf_it, "GET", f.path, "watch=1", 3);
  tf_it_cm_del(f.admin, f.ns, "a0");
  tf_it_converges(f.inf, f.admin, f.path);
  ck_assert_int_eq(tf_it_lists(&f), 1);
  /* every re-watch carries a resourceVersion (never a relist, never RV unset) */
  cJSON *w = tf_test_requests(&tf_it, "GET", f.path, "watch=1");
  cJSON *it;
  cJSON_ArrayForEach(it, w) ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(it, "query")->valuestring, "resourceVersion="));
  cJSON_Delete(w);
  tf_it_fix_close(&f);
}
END_TEST

/* 500, 503, 504 on the watch: backoff, re-watch from the same RV, no relist. */
START_TEST(test_informer__server_errors)
{
  tf_it_fix f;
  tf_it_fix_open(&f, "inf-5xx", 2, 0);
  static const int codes[] = {500, 503, 504};
  for (int i = 0; i < 3; i++) {
    char *rule = tf_asprintf__("{\"path\":\"/namespaces/inf-5xx/configmaps$\",\"query\":\"watch=1\",\"status\":%d,\"count\":1}",
                               codes[i]);
    tf_test_fault(&tf_it, rule);
    free(rule);
  }
  tf_it_wait_faults_hit(&f, "a0");
  tf_it_cm_del(f.admin, f.ns, "b0");
  tf_it_converges(f.inf, f.admin, f.path);
  ck_assert_int_eq(tf_it_count(f.path, 1, 500) + tf_it_count(f.path, 1, 503) + tf_it_count(f.path, 1, 504), 3);
  ck_assert_int_eq(tf_it_lists(&f), 1);
  pthread_mutex_lock(&f.seen.mu);
  ck_assert_str_eq(f.seen.deleted_keys, "inf-5xx/b0;");
  pthread_mutex_unlock(&f.seen.mu);
  tf_it_fix_close(&f);
}
END_TEST

/* Namespace @p ns with one ConfigMap, a fault (@p rule: the action and count) on
 * its LIST, and a synced informer on it with the client *k. */
static tf_informer *tf_it_list_fault(const char *ns, const char *rule, tf_it_seen *seen, tf_kube **k)
{
  *k = tf_test_kube(&tf_it, NULL);
  tf_it_ns(*k, ns);
  tf_it_cm(*k, ns, "x", "a");
  char *f = tf_asprintf__("{\"path\":\"/namespaces/%s/configmaps$\",\"query\":\"^(?!.*watch)\",%s}", ns, rule);
  tf_test_fault(&tf_it, f);
  free(f);
  char path[128];
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps", ns);
  tf_informer *inf = tf_it_informer(*k, path, seen, 300, 0);
  tf_it_wait_synced(inf);
  return inf;
}

/* 429 with Retry-After: 2 on the LIST: the next LIST does not come earlier. */
START_TEST(test_informer__retry_after)
{
  tf_it_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  const char *path = "/api/v1/namespaces/inf-429/configmaps";
  tf_kube *k = NULL;
  tf_informer *inf = tf_it_list_fault("inf-429", "\"status\":429,\"retryAfter\":2,\"count\":2", &seen, &k);
  cJSON *l = tf_test_requests(&tf_it, "GET", path, "resourceVersion=0");
  ck_assert_int_eq(cJSON_GetArraySize(l), 3);
  double t0 = cJSON_GetObjectItem(cJSON_GetArrayItem(l, 0), "time")->valuedouble;
  double t1 = cJSON_GetObjectItem(cJSON_GetArrayItem(l, 1), "time")->valuedouble;
  double t2 = cJSON_GetObjectItem(cJSON_GetArrayItem(l, 2), "time")->valuedouble;
  ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(l, 0), "code")->valueint, 429);
  /* the server asked for 2 s (more than the 0.8 s and 1.6 s backoff steps) */
  ck_assert_msg(t1 - t0 >= 1.95 && t2 - t1 >= 1.95, "waited %.2f and %.2f s", t1 - t0, t2 - t1);
  cJSON_Delete(l);
  tf_it_converges(inf, k, path);
  tf_informer_free(inf);
  tf_kube_free(k);
}
END_TEST

/* 410 in all three forms: an ERROR event mid-stream, HTTP 410 on the watch,
 * and 410 on the LIST that follows; each relists with RV unset (a consistent
 * read), and the delete the watch missed is emitted by the relist. */
START_TEST(test_informer__expired)
{
  tf_it_fix f;
  tf_it_fix_open(&f, "inf-410", 2, 0);
  /* 1: ERROR event after the first event of a watch */
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-410/configmaps$\",\"query\":\"watch=1\",\"expireMidStream\":true,\"afterEvents\":1,\"count\":1}");
  tf_it_until_logged(&f, "a0", "ERROR event 410 Expired", 1);
  for (int i = 0; i < 100 && tf_it_lists(&f) < 2; i++) tf_test_sleep_ms(100);
  ck_assert_int_eq(tf_it_lists(&f), 2);
  tf_it_converges(f.inf, f.admin, f.path);
  /* the watch is down (503) while a2 goes away */
  cJSON_Delete(tf_test_control(&tf_it, "DELETE", "/faults", NULL));
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-410/configmaps$\",\"query\":\"watch=1\",\"status\":503}");
  for (int i = 0; i < 100 && tf_it_count(f.path, 1, 503) < 1; i++) tf_test_sleep_ms(100);
  ck_assert_int_ge(tf_it_count(f.path, 1, 503), 1);
  tf_it_cm_del(f.admin, f.ns, "a2");
  /* 2 + 3: HTTP 410 on the next watch, then 410 on the LIST after it */
  cJSON_Delete(tf_test_control(&tf_it, "DELETE", "/faults", NULL));
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-410/configmaps$\",\"query\":\"watch=1\",\"status\":410,\"count\":1}");
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-410/configmaps$\",\"query\":\"^(?!.*watch)\",\"status\":410,\"count\":1}");
  for (int i = 0; i < 200 && tf_it_lists(&f) < 4; i++) tf_test_sleep_ms(100);
  tf_it_converges(f.inf, f.admin, f.path);
  ck_assert_int_eq(tf_it_lists(&f), 4);
  ck_assert_int_eq(tf_it_count(f.path, 0, 410), 1);
  /* every relist after a 410 is a consistent read: no resourceVersion */
  cJSON *all = tf_test_requests(&tf_it, "GET", f.path, NULL);
  int lists = 0;
  cJSON *it;
  cJSON_ArrayForEach(it, all)
  {
    const char *q = cJSON_GetObjectItem(it, "query")->valuestring;
    if (strstr(q, "watch=1") || strcmp(cJSON_GetObjectItem(it, "userAgent")->valuestring, "tf-informer") != 0) continue;
    if (lists++ > 0) ck_assert_msg(!strstr(q, "resourceVersion="), "relist %d: %s", lists, q);
  }
  cJSON_Delete(all);
  pthread_mutex_lock(&f.seen.mu);
  ck_assert_str_eq(f.seen.deleted_keys, "inf-410/a2;");
  pthread_mutex_unlock(&f.seen.mu);
  tf_it_fix_close(&f);
}
END_TEST

/* Dropped watches: EOF inside a line, TCP reset before any answer, TCP
 * reset mid-stream, a stream that closes after its headers with no event:
 * reconnect from the same RV, nothing missed, no relist. */
START_TEST(test_informer__dropped_watches)
{
  tf_it_fix f;
  tf_it_fix_open(&f, "inf-drop", 2, 0);
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-drop/configmaps$\",\"query\":\"watch=1\",\"truncate\":true,\"afterEvents\":0,\"count\":1}");
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-drop/configmaps$\",\"query\":\"watch=1\",\"reset\":true,\"count\":1}");
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-drop/configmaps$\",\"query\":\"watch=1\",\"resetMidStream\":true,\"afterEvents\":1,\"count\":1}");
  tf_it_until_logged(&f, "a1", "the stream ended inside a line", 1);
  tf_it_until_logged(&f, "a1", "watch /api/v1/namespaces/inf-drop/configmaps: GET", 2); /* the two resets */
  /* headers, then the connection closes with no event */
  cJSON_Delete(tf_test_control(&tf_it, "DELETE", "/faults", NULL));
  int errors = tf_test_log_count(&f.log, "watch /api/v1/namespaces/inf-drop/configmaps: ");
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-drop/configmaps$\",\"query\":\"watch=1\",\"stall\":true,\"stallSeconds\":0.2,\"count\":1}");
  tf_it_until_logged(&f, "a1", "watch /api/v1/namespaces/inf-drop/configmaps: ", errors + 1);
  tf_it_cm_del(f.admin, f.ns, "b0");
  tf_it_converges(f.inf, f.admin, f.path);
  pthread_mutex_lock(&f.seen.mu);
  ck_assert_str_eq(f.seen.deleted_keys, "inf-drop/b0;");
  pthread_mutex_unlock(&f.seen.mu);
  ck_assert_int_eq(tf_it_lists(&f), 1);
  tf_it_fix_close(&f);
}
END_TEST

/* A stalled watch (headers, then silence): the watchdog (3 s; healthy
 * watches here get a bookmark every second and end at 2 s) aborts it and the
 * informer re-watches; a change made during the stall arrives. */
START_TEST(test_informer__stalled_watch)
{
  tf_it_fix f;
  tf_it_fix_open(&f, "inf-stall", 2, 3);
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-stall/configmaps$\",\"query\":\"watch=1\",\"stall\":true,\"stallSeconds\":30,\"count\":1}");
  tf_it_until_logged(&f, "a0", "(watchdog)", 1);
  tf_it_cm_del(f.admin, f.ns, "a1");
  tf_it_converges(f.inf, f.admin, f.path);
  ck_assert_int_eq(tf_it_lists(&f), 1);
  tf_it_fix_close(&f);
}
END_TEST

/* Slow headers on the LIST (longer than the client's 5 s timeout): the
 * request times out and the informer retries after its backoff. */
START_TEST(test_informer__slow_list)
{
  tf_it_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  const char *path = "/api/v1/namespaces/inf-slow/configmaps";
  tf_kube *k = NULL;
  tf_informer *inf = tf_it_list_fault("inf-slow", "\"slowHeaders\":7,\"count\":1", &seen, &k);
  tf_it_converges(inf, k, path);
  (void)tf_test_wait_count(&tf_it, "GET", path, "resourceVersion=0", 2);
  ck_assert_int_eq(tf_test_count(&tf_it, "GET", path, "resourceVersion=0"), 2);
  tf_informer_free(inf);
  tf_kube_free(k);
}
END_TEST

/* Token rotation and revocation: the open watch keeps streaming with the
 * revoked token; the next watch gets one 401, the client re-reads the file
 * and reconnects with the new token. */
START_TEST(test_informer__token_rotation)
{
  char *dir = tf_test_tmpdir(), tokp[4096];
  snprintf(tokp, sizeof(tokp), "%s/token", dir);
  char *t1 = tf_test_new_token(&tf_it, "old", tokp);
  char *log = NULL;
  tf_kube *k = tf_test_kube_token(&tf_it, tokp, NULL, &log);
  tf_it_ns(k, "inf-tok");
  tf_it_cm(k, "inf-tok", "x", "a");
  tf_it_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  const char *path = "/api/v1/namespaces/inf-tok/configmaps";
  tf_informer *inf = tf_it_informer(k, path, &seen, 3, 0);
  tf_it_wait_synced(inf);
  (void)tf_test_wait_count(&tf_it, "GET", path, "watch=1", 1);
  char *t2 = tf_test_new_token(&tf_it, "new", tokp);
  char *rev = tf_asprintf__("{\"token\":\"%s\"}", t1);
  cJSON_Delete(tf_test_control(&tf_it, "POST", "/tokens/revoke", rev));
  free(rev);
  /* the watch opened with the old token still delivers */
  tf_kube *admin = tf_test_kube(&tf_it, NULL);
  tf_it_cm(admin, "inf-tok", "y", "a");
  tf_it_converges(inf, admin, path);
  /* after the watch's end (3 s): 401 once, then the new user */
  int got = 0;
  for (int i = 0; i < 200 && !got; i++) {
    cJSON *w = tf_test_requests(&tf_it, "GET", path, "watch=1");
    cJSON *it;
    cJSON_ArrayForEach(it, w) if (strcmp(cJSON_GetObjectItem(it, "user")->valuestring, "new") == 0) got = 1;
    cJSON_Delete(w);
    if (!got) tf_test_sleep_ms(100);
  }
  ck_assert_msg(got, "no watch with the new token");
  cJSON *all = tf_test_requests(&tf_it, "GET", path, NULL);
  int n401 = 0;
  cJSON *it;
  cJSON_ArrayForEach(it, all) if (cJSON_GetObjectItem(it, "code")->valueint == 401) n401++;
  cJSON_Delete(all);
  ck_assert_int_eq(n401, 1);
  tf_it_cm_del(admin, "inf-tok", "x");
  tf_it_converges(inf, admin, path);
  tf_informer_free(inf);
  inf = NULL;
  /* no token in the log */
  ck_assert_ptr_nonnull(log);
  ck_assert_ptr_null(strstr(log, t1));
  ck_assert_ptr_null(strstr(log, t2));
  ck_assert_ptr_nonnull(strstr(log, "401"));
  free(log);
  tf_informer_free(inf);
  tf_kube_free(k);
  tf_kube_free(admin);
  free(t1);
  free(t2);
  tf_test_rmtree(dir);
  free(dir);
}
END_TEST

/* History loss on restart while the informer cannot watch: the deletes it
 * missed come from the relist's diff. A watch failing for 5 s stays bounded
 * by the backoff (no hot loop). */
START_TEST(test_informer__history_loss)
{
  tf_it_fix f;
  tf_it_fix_open(&f, "inf-hist", 2, 0);
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-hist/configmaps$\",\"query\":\"watch=1\",\"status\":503}");
  for (int i = 0; i < 100 && tf_it_count(f.path, 1, 503) < 1; i++) tf_test_sleep_ms(100);
  int before = tf_it_watches(&f);
  tf_it_cm_del(f.admin, f.ns, "a0");
  tf_it_cm_del(f.admin, f.ns, "b0");
  tf_it_cm(f.admin, f.ns, "c0", "c");
  cJSON_Delete(tf_test_control(&tf_it, "POST", "/restart", NULL));
  tf_test_sleep_ms(5000);
  /* 5 s of 503 after the first, with 0.8 s doubling: attempts at about 0.8, 2.4, 5.6 s */
  int failing = tf_it_watches(&f) - before;
  ck_assert_msg(failing <= 4, "%d watch attempts in 5 s of 503", failing);
  cJSON_Delete(tf_test_control(&tf_it, "DELETE", "/faults", NULL));
  tf_it_converges(f.inf, f.admin, f.path);
  ck_assert_int_eq(tf_it_lists(&f), 2);
  pthread_mutex_lock(&f.seen.mu);
  ck_assert_ptr_nonnull(strstr(f.seen.deleted_keys, "inf-hist/a0;"));
  ck_assert_ptr_nonnull(strstr(f.seen.deleted_keys, "inf-hist/b0;"));
  ck_assert_int_eq(f.seen.deleted, 2);
  pthread_mutex_unlock(&f.seen.mu);
  tf_it_fix_close(&f);
}
END_TEST

START_TEST(test_informer__resync_and_options)
{
  tf_kube *k = tf_test_kube(&tf_it, NULL);
  tf_informer_options o;
  TF_OK_OR_FAIL(tf_informer_options_init(&o, TF_INFORMER_OPTIONS_VERSION));
  tf_informer *inf = NULL;
  ck_assert_int_eq(tf_informer_new(&inf, k, &o), TF_EINVALID); /* no path */
  o.path = "/api/v1/namespaces/inf-resync/configmaps";
  o.watch_min_seconds = 10;
  o.watch_max_seconds = 5;
  ck_assert_int_eq(tf_informer_new(&inf, k, &o), TF_EINVALID);
  tf_it_ns(k, "inf-resync");
  tf_it_cm(k, "inf-resync", "x", "a");
  tf_it_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  o.watch_min_seconds = 1;
  o.watch_max_seconds = 2;
  o.resync_ms = 1000;
  o.on_change = tf_it_on_change;
  o.payload = &seen;
  TF_OK_OR_FAIL(tf_informer_new(&inf, k, &o));
  TF_OK_OR_FAIL(tf_informer_start(inf));
  ck_assert_int_eq(tf_informer_start(inf), TF_EINVALID);
  tf_it_wait_synced(inf);
  int updated = 0;
  for (int i = 0; i < 100 && updated < 2; i++) {
    tf_test_sleep_ms(100);
    pthread_mutex_lock(&seen.mu);
    updated = seen.updated;
    pthread_mutex_unlock(&seen.mu);
  }
  ck_assert_int_ge(updated, 2); /* resyncs: UPDATED with nothing changed */
  /* the watches' timeoutSeconds are in [1, 2] */
  (void)tf_test_wait_count(&tf_it, "GET", o.path, "watch=1", 2);
  cJSON *w = tf_test_requests(&tf_it, "GET", o.path, "watch=1");
  cJSON *it;
  cJSON_ArrayForEach(it, w)
  {
    const char *q = strstr(cJSON_GetObjectItem(it, "query")->valuestring, "timeoutSeconds=");
    ck_assert_ptr_nonnull(q);
    long t = strtol(q + 15, NULL, 10);
    ck_assert(t == 1 || t == 2);
  }
  cJSON_Delete(w);
  char *rv = NULL;
  TF_OK_OR_FAIL(tf_informer_resource_version(inf, &rv));
  ck_assert_int_gt(strlen(rv), 0);
  tf_free(rv);
  tf_informer_stop(inf);
  tf_informer_stop(inf);
  ck_assert_uint_eq(tf_informer_count(inf), 2); /* the cache stays readable (x, kube-root-ca.crt) */
  tf_informer_free(inf);
  tf_kube_free(k);
}
END_TEST

/* ---- work queue ---- */

START_TEST(test_informer__workqueue_dedupe_and_exclusive)
{
  tf_workqueue *q = NULL;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, NULL));
  TF_OK_OR_FAIL(tf_workqueue_add(q, "a"));
  TF_OK_OR_FAIL(tf_workqueue_add(q, "b"));
  TF_OK_OR_FAIL(tf_workqueue_add(q, "a"));
  ck_assert_uint_eq(tf_workqueue_len(q), 2);
  char *k1 = NULL, *k2 = NULL;
  TF_OK_OR_FAIL(tf_workqueue_get(q, &k1, 0));
  ck_assert_str_eq(k1, "a");
  /* "a" is processing: adding it again does not hand it to a second worker */
  TF_OK_OR_FAIL(tf_workqueue_add(q, "a"));
  TF_OK_OR_FAIL(tf_workqueue_get(q, &k2, 0));
  ck_assert_str_eq(k2, "b");
  char *k3 = NULL;
  ck_assert_int_eq(tf_workqueue_get(q, &k3, 0), TF_ETIMEOUT);
  tf_workqueue_done(q, "a"); /* dirty: back in the queue */
  TF_OK_OR_FAIL(tf_workqueue_get(q, &k3, 0));
  ck_assert_str_eq(k3, "a");
  tf_workqueue_done(q, "a");
  tf_workqueue_done(q, "b");
  ck_assert_uint_eq(tf_workqueue_len(q), 0);
  tf_free(k1);
  tf_free(k2);
  tf_free(k3);
  /* delayed: not before its time; an earlier add wins */
  TF_OK_OR_FAIL(tf_workqueue_add_after(q, "d", 60000));
  ck_assert_int_eq(tf_workqueue_get(q, &k1, 0), TF_ETIMEOUT);
  TF_OK_OR_FAIL(tf_workqueue_add_after(q, "d", 1));
  TF_OK_OR_FAIL(tf_workqueue_get(q, &k1, 5000));
  ck_assert_str_eq(k1, "d");
  tf_workqueue_done(q, "d");
  tf_free(k1);
  tf_workqueue_shutdown(q);
  ck_assert_int_eq(tf_workqueue_get(q, &k1, -1), TF_ENOTFOUND);
  tf_workqueue_free(q);
}
END_TEST

START_TEST(test_informer__workqueue_rate_limits)
{
  tf_workqueue_options o;
  TF_OK_OR_FAIL(tf_workqueue_options_init(&o, TF_WORKQUEUE_OPTIONS_VERSION));
  o.base_delay_ms = 0;
  tf_workqueue *q = NULL;
  ck_assert_int_eq(tf_workqueue_new(&q, &o), TF_EINVALID);
  /* per key: base 20 s, so the first retry is not due now */
  o.base_delay_ms = 20000;
  o.max_delay_ms = 40000;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, &o));
  char *k = NULL;
  TF_OK_OR_FAIL(tf_workqueue_add_rate_limited(q, "x"));
  TF_OK_OR_FAIL(tf_workqueue_add_rate_limited(q, "x"));
  TF_OK_OR_FAIL(tf_workqueue_add_rate_limited(q, "x"));
  ck_assert_int_eq(tf_workqueue_failures(q, "x"), 3);
  ck_assert_int_eq(tf_workqueue_get(q, &k, 0), TF_ETIMEOUT);
  tf_workqueue_forget(q, "x");
  ck_assert_int_eq(tf_workqueue_failures(q, "x"), 0);
  /* a plain add is not held back by the key's backoff */
  TF_OK_OR_FAIL(tf_workqueue_add(q, "x"));
  TF_OK_OR_FAIL(tf_workqueue_get(q, &k, 0));
  tf_workqueue_done(q, k);
  tf_free(k);
  tf_workqueue_free(q);
  /* global bucket: 1 token, 0.05 qps: the second key waits ~20 s whatever its own backoff */
  o.base_delay_ms = 1;
  o.qps = 0.05;
  o.burst = 1;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, &o));
  TF_OK_OR_FAIL(tf_workqueue_add_rate_limited(q, "p"));
  TF_OK_OR_FAIL(tf_workqueue_add_rate_limited(q, "q"));
  TF_OK_OR_FAIL(tf_workqueue_get(q, &k, 5000));
  ck_assert_str_eq(k, "p");
  tf_free(k);
  ck_assert_int_eq(tf_workqueue_get(q, &k, 200), TF_ETIMEOUT);
  tf_workqueue_free(q);
}
END_TEST

typedef struct {
  tf_workqueue *q;
  int got;
} tf_it_waiter;

static void *tf_it_wait_thread(void *arg)
{
  tf_it_waiter *w = arg;
  char *k = NULL;
  w->got = tf_workqueue_get(w->q, &k, -1);
  tf_free(k);
  return NULL;
}

START_TEST(test_informer__workqueue_shutdown_wakes)
{
  tf_workqueue *q = NULL;
  TF_OK_OR_FAIL(tf_workqueue_new(&q, NULL));
  tf_it_waiter w = {q, 1};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, tf_it_wait_thread, &w), 0);
  tf_test_sleep_ms(100);
  tf_workqueue_shutdown(q);
  pthread_join(th, NULL);
  ck_assert_int_eq(w.got, TF_ENOTFOUND);
  tf_workqueue_free(q);
}
END_TEST

/* Four workers, eight keys added 20000 times in all: a key is never in two
 * workers' hands at once, adds are folded (at most one run per add), and the
 * queue drains. */
typedef struct {
  tf_workqueue *q;
  pthread_mutex_t mu;
  int busy[8];     /* workers holding key i now */
  int overlap;     /* a key seen busy twice */
  long processed;
} tf_it_pool;

static void *tf_it_worker(void *arg)
{
  tf_it_pool *p = arg;
  char *k = NULL;
  while (tf_workqueue_get(p->q, &k, -1) == 0) {
    int i = k[1] - '0';
    pthread_mutex_lock(&p->mu);
    if (p->busy[i]++) p->overlap = 1;
    pthread_mutex_unlock(&p->mu);
    sched_yield();
    pthread_mutex_lock(&p->mu);
    p->busy[i]--;
    p->processed++;
    pthread_mutex_unlock(&p->mu);
    tf_workqueue_done(p->q, k);
    tf_free(k);
  }
  return NULL;
}

START_TEST(test_informer__workqueue_one_worker_per_key)
{
  tf_it_pool p;
  memset(&p, 0, sizeof(p));
  pthread_mutex_init(&p.mu, NULL);
  TF_OK_OR_FAIL(tf_workqueue_new(&p.q, NULL));
  pthread_t th[4];
  for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, tf_it_worker, &p), 0);
  for (int n = 0; n < 20000; n++) {
    char key[4] = {'k', (char)('0' + n % 8), 0};
    TF_OK_OR_FAIL(tf_workqueue_add(p.q, key));
  }
  /* drained: nothing queued, nothing in a worker's hands */
  for (int i = 0; i < 500; i++) {
    pthread_mutex_lock(&p.mu);
    int busy = 0;
    for (int j = 0; j < 8; j++) busy += p.busy[j];
    pthread_mutex_unlock(&p.mu);
    if (busy == 0 && tf_workqueue_len(p.q) == 0) break;
    tf_test_sleep_ms(10);
  }
  tf_workqueue_shutdown(p.q);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  ck_assert_int_eq(p.overlap, 0);
  /* deduplicated: far fewer runs than adds, at least one per key */
  ck_assert_int_ge(p.processed, 8);
  ck_assert_int_le(p.processed, 20000);
  tf_workqueue_free(p.q);
}
END_TEST

/* ---- leader election ---- */

typedef struct tf_it_el {
  tf_kube *k;
  tf_elector *e;
  char user[16];
  int changes;
  int leading;
  pthread_mutex_t mu;
} tf_it_el;

static void tf_it_el_cb(int leading, void *payload)
{
  tf_it_el *x = payload;
  pthread_mutex_lock(&x->mu);
  x->changes++;
  x->leading = leading;
  pthread_mutex_unlock(&x->mu);
}

static tf_kube *tf_it_user_kube(const char *user, char **tokpath_dir)
{
  *tokpath_dir = tf_test_tmpdir();
  char p[4096];
  snprintf(p, sizeof(p), "%s/token", *tokpath_dir);
  free(tf_test_new_token(&tf_it, user, p));
  return tf_test_kube_token(&tf_it, p, NULL, NULL);
}

static void tf_it_el_open(tf_it_el *x, const char *identity, const char *lease, char **dir)
{
  memset(x, 0, sizeof(*x));
  pthread_mutex_init(&x->mu, NULL);
  snprintf(x->user, sizeof(x->user), "%s", identity);
  x->k = tf_it_user_kube(identity, dir);
  tf_elector_options o;
  TF_OK_OR_FAIL(tf_elector_options_init(&o, TF_ELECTOR_OPTIONS_VERSION));
  o.lease_namespace = "default";
  o.lease_name = lease;
  o.identity = identity;
  o.lease_seconds = 3;
  o.renew_deadline_ms = 2000;
  o.retry_ms = 500;
  o.on_change = tf_it_el_cb;
  o.payload = x;
  TF_OK_OR_FAIL(tf_elector_new(&x->e, x->k, &o));
}

static void tf_it_el_close(tf_it_el *x, char *dir)
{
  tf_elector_free(x->e);
  tf_kube_free(x->k);
  tf_test_rmtree(dir);
  free(dir);
}

/* Sample both electors for @p ms; fail if both lead at once; return who led last (bitmask). */
static int tf_it_el_watch(tf_it_el *a, tf_it_el *b, long ms)
{
  int mask = 0;
  for (long t = 0; t < ms; t += 10) {
    int la = tf_elector_is_leader(a->e), lb = tf_elector_is_leader(b->e);
    ck_assert_msg(!(la && lb), "two leaders at once");
    mask = la | lb << 1;
    tf_test_sleep_ms(10);
  }
  return mask;
}

/* The successful Lease writes by user, in order: "a a a b b" -> the writer changes at most @p handovers times. */
static void tf_it_el_writers(const char *lease, int max_handovers)
{
  char path[128];
  snprintf(path, sizeof(path), "/leases/%s", lease);
  cJSON *w = tf_test_requests(&tf_it, NULL, path, NULL);
  const char *last = NULL;
  int handovers = 0;
  cJSON *it;
  cJSON_ArrayForEach(it, w)
  {
    const char *m = cJSON_GetObjectItem(it, "method")->valuestring;
    int code = cJSON_GetObjectItem(it, "code")->valueint;
    if (strcmp(m, "PUT") != 0 || code != 200) continue;
    const char *u = cJSON_GetObjectItem(it, "user")->valuestring;
    if (last && strcmp(last, u) != 0) handovers++;
    last = u;
  }
  cJSON_Delete(w);
  ck_assert_int_le(handovers, max_handovers);
}

START_TEST(test_informer__election_one_leader_and_release)
{
  tf_it_el a, b;
  char *da, *db;
  tf_it_el_open(&a, "el-a", "lease-1", &da);
  tf_it_el_open(&b, "el-b", "lease-1", &db);
  TF_OK_OR_FAIL(tf_elector_start(a.e));
  for (int i = 0; i < 100 && !tf_elector_is_leader(a.e); i++) tf_test_sleep_ms(50);
  ck_assert(tf_elector_is_leader(a.e));
  TF_OK_OR_FAIL(tf_elector_start(b.e));
  /* a renews every 0.5 s: b waits, never leads */
  ck_assert_int_eq(tf_it_el_watch(&a, &b, 4000), 1);
  int renews = tf_test_count(&tf_it, "PUT", "/leases/lease-1", NULL);
  ck_assert_msg(renews >= 4 && renews <= 12, "%d lease PUTs in ~4.5 s at a 0.5 s retry", renews);
  /* a clean stop releases: b takes over without waiting out the lease */
  tf_elector_stop(a.e);
  ck_assert(!tf_elector_is_leader(a.e));
  ck_assert(tf_elector_finished(a.e));
  ck_assert_int_eq(a.changes, 2);
  ck_assert_int_eq(a.leading, 0);
  for (int i = 0; i < 60 && !tf_elector_is_leader(b.e); i++) tf_test_sleep_ms(50);
  ck_assert(tf_elector_is_leader(b.e));
  tf_it_el_writers("lease-1", 1);
  tf_it_el_close(&a, da);
  tf_it_el_close(&b, db);
}
END_TEST

/* Another identity holds the Lease and stops renewing: takeover only after
 * leaseDurationSeconds of local time since the record last changed. */
START_TEST(test_informer__election_competing_holder)
{
  tf_kube *k = tf_test_kube(&tf_it, NULL);
  TF_OK_OR_FAIL(tf_kube_create(k, "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                               "{\"metadata\":{\"name\":\"lease-2\"},\"spec\":{\"holderIdentity\":\"ghost\","
                               "\"leaseDurationSeconds\":3,\"acquireTime\":\"2000-01-01T00:00:00.000000Z\","
                               "\"renewTime\":\"2000-01-01T00:00:00.000000Z\",\"leaseTransitions\":4}}",
                               NULL, NULL));
  tf_it_el a;
  char *da;
  tf_it_el_open(&a, "el-c", "lease-2", &da);
  TF_OK_OR_FAIL(tf_elector_start(a.e));
  for (int i = 0; i < 200 && !tf_elector_is_leader(a.e); i++) tf_test_sleep_ms(50);
  ck_assert(tf_elector_is_leader(a.e));
  /* the renewTime from 2000 did not count: the first GET and the takeover PUT are >= 3 s apart */
  cJSON *r = tf_test_requests(&tf_it, NULL, "/leases/lease-2", NULL);
  double first_get = 0, put = 0;
  cJSON *it;
  cJSON_ArrayForEach(it, r)
  {
    const char *m = cJSON_GetObjectItem(it, "method")->valuestring;
    double t = cJSON_GetObjectItem(it, "time")->valuedouble;
    if (!first_get && strcmp(m, "GET") == 0) first_get = t;
    if (!put && strcmp(m, "PUT") == 0 && cJSON_GetObjectItem(it, "code")->valueint == 200) put = t;
  }
  cJSON_Delete(r);
  ck_assert_msg(put - first_get >= 2.9, "took over %.2f s after first seeing the lease", put - first_get);
  char *out = NULL;
  TF_OK_OR_FAIL(tf_kube_get(k, "/apis/coordination.k8s.io/v1/namespaces/default/leases/lease-2", &out, NULL));
  cJSON *d = cJSON_Parse(out);
  cJSON *spec = cJSON_GetObjectItem(d, "spec");
  ck_assert_str_eq(cJSON_GetObjectItem(spec, "holderIdentity")->valuestring, "el-c");
  ck_assert_int_eq(cJSON_GetObjectItem(spec, "leaseTransitions")->valueint, 5);
  cJSON_Delete(d);
  tf_free(out);
  tf_it_el_close(&a, da);
  tf_kube_free(k);
}
END_TEST

/* A leader whose renewals are slower than the renew deadline gives up and
 * stops; the other takes over only after that; 409 on Lease PUTs is retried
 * without a hot loop. */
START_TEST(test_informer__election_lost_lease)
{
  tf_it_el a, b;
  char *da, *db;
  tf_it_el_open(&a, "el-d", "lease-3", &da);
  tf_it_el_open(&b, "el-e", "lease-3", &db);
  /* the first two takeover PUTs conflict */
  tf_test_fault(&tf_it, "{\"method\":\"POST\",\"path\":\"/leases$\",\"status\":409,\"count\":1}");
  TF_OK_OR_FAIL(tf_elector_start(a.e));
  for (int i = 0; i < 100 && !tf_elector_is_leader(a.e); i++) tf_test_sleep_ms(50);
  ck_assert(tf_elector_is_leader(a.e));
  TF_OK_OR_FAIL(tf_elector_start(b.e));
  ck_assert_int_eq(tf_it_el_watch(&a, &b, 1500), 1);
  /* a's renewals now take 5 s (> its 2 s renew deadline) */
  tf_test_fault(&tf_it, "{\"method\":\"PUT\",\"path\":\"/leases/lease-3$\",\"user\":\"el-d\",\"slowHeaders\":5}");
  int mask = 0;
  for (int i = 0; i < 100 && !(mask & 2); i++) mask = tf_it_el_watch(&a, &b, 100);
  ck_assert_int_eq(mask, 2);
  ck_assert(tf_elector_finished(a.e));
  pthread_mutex_lock(&a.mu);
  ck_assert_int_eq(a.leading, 0); /* told to stop the work */
  ck_assert_int_eq(a.changes, 2);
  pthread_mutex_unlock(&a.mu);
  ck_assert_int_eq(tf_it_el_watch(&a, &b, 1000), 2);
  cJSON_Delete(tf_test_control(&tf_it, "DELETE", "/faults", NULL));
  /* 409 on b's PUTs: retried every retry period, not hot */
  cJSON_Delete(tf_test_control(&tf_it, "DELETE", "/requests", NULL));
  tf_test_fault(&tf_it, "{\"method\":\"PUT\",\"path\":\"/leases/lease-3$\",\"status\":409,\"count\":2}");
  ck_assert_int_eq(tf_it_el_watch(&a, &b, 2000) & 1, 0);
  int puts = tf_test_count(&tf_it, "PUT", "/leases/lease-3", NULL);
  ck_assert_msg(puts >= 2 && puts <= 10, "%d PUTs in 2 s", puts);
  tf_it_el_writers("lease-3", 1);
  tf_it_el_close(&a, da);
  tf_it_el_close(&b, db);
}
END_TEST

START_TEST(test_informer__election_options)
{
  tf_kube *k = tf_test_kube(&tf_it, NULL);
  tf_elector_options o;
  TF_OK_OR_FAIL(tf_elector_options_init(&o, TF_ELECTOR_OPTIONS_VERSION));
  o.lease_namespace = "default";
  o.lease_name = "x";
  tf_elector *e = NULL;
  ck_assert_int_eq(tf_elector_new(&e, k, &o), TF_EINVALID); /* identity */
  o.identity = "me";
  o.lease_seconds = 2;
  ck_assert_int_eq(tf_elector_new(&e, k, &o), TF_EINVALID); /* lease <= renew deadline */
  o.lease_seconds = 15;
  o.retry_ms = 9000;
  ck_assert_int_eq(tf_elector_new(&e, k, &o), TF_EINVALID); /* renew <= 1.2 retry */
  o.retry_ms = 2000;
  o.lease_name = "a/b";
  ck_assert_int_eq(tf_elector_new(&e, k, &o), TF_EINVALID);
  tf_kube_free(k);
}
END_TEST

/* ---- events ---- */

START_TEST(test_informer__recorder_dedupe)
{
  tf_kube *k = tf_test_kube(&tf_it, NULL);
  tf_recorder *r = NULL;
  TF_OK_OR_FAIL(tf_recorder_new(&r, k, "turnfleet-test"));
  const char *pool = "{\"apiVersion\":\"turnfleet.hzmi.dev/v1alpha1\",\"kind\":\"TURNPool\",\"metadata\":{\"name\":"
                     "\"edge\",\"namespace\":\"default\",\"uid\":\"u-1\"}}";
  for (int i = 0; i < 3; i++) TF_OK_OR_FAIL(tf_recorder_event(r, pool, "Normal", "RelayCreated", "created pod p1"));
  TF_OK_OR_FAIL(tf_recorder_event(r, pool, "Warning", "RelayFailed", "pod p2 failed"));
  ck_assert_int_eq(tf_recorder_event(r, pool, "Bad", "X", "y"), TF_EINVALID);
  ck_assert_int_eq(tf_recorder_event(r, "{}", "Normal", "X", "y"), TF_EINVALID);
  ck_assert_int_eq(tf_test_count(&tf_it, "POST", "/namespaces/default/events", NULL), 2);
  ck_assert_int_eq(tf_test_count(&tf_it, "PATCH", "/namespaces/default/events/edge.", NULL), 2);
  char *out = NULL;
  TF_OK_OR_FAIL(tf_kube_list(k, "/api/v1/namespaces/default/events", NULL, &out, NULL));
  cJSON *d = cJSON_Parse(out);
  cJSON *it;
  int found = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(d, "items"))
  {
    const cJSON *reason = cJSON_GetObjectItem(it, "reason");
    if (cJSON_IsString(reason) && strcmp(reason->valuestring, "RelayCreated") == 0) {
      ck_assert_int_eq(cJSON_GetObjectItem(it, "count")->valueint, 3);
      ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(it, "involvedObject"), "uid")->valuestring, "u-1");
      found++;
    }
  }
  ck_assert_int_eq(found, 1);
  cJSON_Delete(d);
  tf_free(out);
  tf_recorder_free(r);
  tf_kube_free(k);
}
END_TEST

/* A watch that brings neither an event nor a bookmark for two bookmark intervals (here 1 s,
 * the stand-in's too) is dropped and the cache relisted at once, long before the byte watchdog
 * (timeoutSeconds + 60); a quiet watch that brings its bookmarks is kept. */
START_TEST(test_informer__silent_watch_relists)
{
  tf_it_fix f;
  memset(&f, 0, sizeof(f));
  pthread_mutex_init(&f.seen.mu, NULL);
  f.k = tf_it_informer_kube();
  f.admin = tf_test_kube(&tf_it, NULL);
  snprintf(f.ns, sizeof(f.ns), "inf-silent");
  snprintf(f.path, sizeof(f.path), "/api/v1/namespaces/inf-silent/configmaps");
  tf_it_ns(f.admin, f.ns);
  tf_it_ns(f.admin, "inf-silent-other");
  tf_it_cm(f.admin, f.ns, "a0", "a");
  cJSON_Delete(tf_test_control(&tf_it, "DELETE", "/requests", NULL));
  tf_test_fault(&tf_it, "{\"path\":\"/namespaces/inf-silent/configmaps$\",\"query\":\"watch=1\",\"stall\":true,"
                        "\"stallSeconds\":60,\"count\":1}");
  tf_informer_options o;
  TF_OK_OR_FAIL(tf_informer_options_init(&o, TF_INFORMER_OPTIONS_VERSION));
  ck_assert_int_eq(o.bookmark_interval_ms, 60000);
  o.path = f.path;
  o.watch_min_seconds = o.watch_max_seconds = 300; /* the byte watchdog: 360 s */
  o.bookmark_interval_ms = 1000;
  o.on_change = tf_it_on_change;
  o.payload = &f.seen;
  o.log = tf_test_log_cb;
  o.log_payload = &f.log;
  o.log_level = TF_LOG_DEBUG;
  o.bookmark_interval_ms = -1;
  ck_assert_int_eq(tf_informer_new(&f.inf, f.k, &o), TF_EINVALID);
  o.bookmark_interval_ms = 1000;
  TF_OK_OR_FAIL(tf_informer_new(&f.inf, f.k, &o));
  TF_OK_OR_FAIL(tf_informer_start(f.inf));
  tf_it_wait_synced(f.inf);
  ck_assert_int_eq(tf_informer_lists(f.inf), 1);
  /* made while the stream is silent: only the relist can bring it */
  tf_it_cm(f.admin, f.ns, "a1", "a");
  for (int i = 0; i < 300 && tf_informer_lists(f.inf) < 2; i++) tf_test_sleep_ms(50);
  ck_assert_int_eq(tf_informer_lists(f.inf), 2);
  ck_assert_int_ge(tf_test_log_count(&f.log, "neither an event nor a bookmark"), 1);
  tf_it_converges(f.inf, f.admin, f.path);
  ck_assert_int_eq(tf_it_lists(&f), 2);
  /* quiet but alive: three bookmark-only advances (writes elsewhere) keep the watch */
  for (int round = 0; round < 3; round++) {
    char name[16], *made = NULL;
    snprintf(name, sizeof(name), "o%d", round);
    char *body = tf_asprintf__("{\"metadata\":{\"name\":\"%s\"}}", name);
    TF_OK_OR_FAIL(tf_kube_create(f.admin, "/api/v1/namespaces/inf-silent-other/configmaps", body, &made, NULL));
    cJSON *m = cJSON_Parse(made);
    char *want = tf_strdup__(tf_kube__meta_str(m, "resourceVersion")), *have = NULL;
    cJSON_Delete(m);
    tf_free(made);
    free(body);
    for (int i = 0; i < 100; i++) {
      tf_free(have);
      TF_OK_OR_FAIL(tf_informer_resource_version(f.inf, &have));
      if (atol(have) >= atol(want)) break;
      tf_test_sleep_ms(50);
    }
    ck_assert_msg(atol(have) >= atol(want), "no bookmark brought RV %s (have %s)", want, have);
    tf_free(have);
    free(want);
  }
  ck_assert_int_eq(tf_informer_lists(f.inf), 2);
  tf_it_fix_close(&f);
}
END_TEST

/* The write budget on a synthetic clock: at most `writes` per key in any window. */
START_TEST(test_informer__budget)
{
  tf_budget_options o;
  TF_OK_OR_FAIL(tf_budget_options_init(&o, TF_BUDGET_OPTIONS_VERSION));
  ck_assert_int_eq(o.writes, 100);
  ck_assert_int_eq(o.interval_ms, 10000);
  ck_assert_int_eq(tf_budget_options_init(&o, 99), TF_EINVALID);
  tf_budget *b = NULL;
  o.writes = 0;
  ck_assert_int_eq(tf_budget_new(&b, &o), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "writes"));
  o.writes = 3;
  o.interval_ms = 0;
  ck_assert_int_eq(tf_budget_new(&b, &o), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "interval_ms"));
  o.interval_ms = 1000;
  TF_OK_OR_FAIL(tf_budget_new(&b, &o));
  long wait = -1;
  for (int64_t t = 0; t < 3; t++) TF_OK_OR_FAIL(tf_budget_take(b, "ns/a", 5000 + t, &wait));
  ck_assert_int_eq(wait, 0);
  ck_assert_int_eq(tf_budget_wait(b, "ns/a", 5003), 997); /* asking spends nothing */
  ck_assert_int_eq(tf_budget_take(b, "ns/a", 5003, &wait), TF_EREFUSED);
  ck_assert_int_eq(wait, 997);
  ck_assert_int_eq(tf_budget_wait(b, "ns/other", 5003), 0);
  ck_assert_int_eq(tf_budget_take(b, "ns/a", 5999, &wait), TF_EREFUSED);
  ck_assert_int_eq(wait, 1);
  TF_OK_OR_FAIL(tf_budget_take(b, "ns/b", 5999, NULL)); /* keys are apart */
  ck_assert_int_eq(tf_budget_wait(b, "ns/a", 6000), 0);
  TF_OK_OR_FAIL(tf_budget_take(b, "ns/a", 6000, &wait)); /* the first left the window */
  ck_assert_int_eq(tf_budget_take(b, "ns/a", 6000, &wait), TF_EREFUSED);
  ck_assert_int_eq(wait, 1);
  ck_assert_uint_eq(tf_budget_refused(b), 3);
  /* a storm is bounded: 10 000 attempts over 10 s → at most 3 per 1 s window */
  int granted = 0;
  for (int64_t t = 0; t < 10000; t++) granted += tf_budget_take(b, "ns/storm", 100000 + t, NULL) == 0;
  ck_assert_int_eq(granted, 30);
  ck_assert_int_eq(tf_budget_take(NULL, "k", 0, NULL), TF_EINVALID);
  tf_budget_free(b);
  tf_budget_free(NULL);
  ck_assert_uint_eq(tf_budget_refused(NULL), 0);
  ck_assert_int_eq(tf_budget_wait(NULL, "k", 0), 0);
}
END_TEST

static long tf_it_refuse(const char *method, const char *path, void *payload)
{
  (void)method, (void)path, (void)payload;
  return 0;
}

/* Events under 429 + Retry-After and a refusing write gate: queued, in order, sent again no
 * sooner than the server asked, delivered; a full queue drops the oldest and counts it. */
START_TEST(test_informer__recorder_retries)
{
  tf_kube *k = tf_test_kube(&tf_it, NULL);
  tf_recorder *r = NULL;
  TF_OK_OR_FAIL(tf_recorder_new(&r, k, "turnfleet-test"));
  const char *pool = "{\"apiVersion\":\"turnfleet.hzmi.dev/v1alpha1\",\"kind\":\"TURNPool\",\"metadata\":{\"name\":"
                     "\"retry\",\"namespace\":\"default\",\"uid\":\"u-2\"}}";
  /* the client sends it three times (its own two retries after the wait), then the recorder queues it */
  tf_test_fault(&tf_it, "{\"method\":\"POST\",\"path\":\"/namespaces/default/events$\",\"status\":429,"
                        "\"retryAfter\":1,\"count\":4}");
  ck_assert_int_eq(tf_recorder_event(r, pool, "Normal", "RelayDraining", "relay r1 draining"), TF_EUNAVAILABLE);
  ck_assert_uint_eq(tf_recorder_pending(r), 1);
  ck_assert_int_eq(tf_recorder_event(r, pool, "Normal", "RelayRemoved", "relay r1 removed"), TF_EUNAVAILABLE);
  ck_assert_uint_eq(tf_recorder_pending(r), 2);
  for (int i = 0; i < 200 && tf_recorder_flush(r) > 0; i++) tf_test_sleep_ms(50);
  ck_assert_uint_eq(tf_recorder_pending(r), 0);
  ck_assert_uint_eq(tf_recorder_dropped(r), 0);
  cJSON *posts = tf_test_requests(&tf_it, "POST", "/namespaces/default/events", NULL);
  int n = cJSON_GetArraySize(posts);
  ck_assert_int_eq(n, 6); /* 4 refused, then both delivered */
  for (int i = 1; i < n; i++) {
    double t0 = cJSON_GetObjectItem(cJSON_GetArrayItem(posts, i - 1), "time")->valuedouble;
    double t1 = cJSON_GetObjectItem(cJSON_GetArrayItem(posts, i), "time")->valuedouble;
    if (cJSON_GetObjectItem(cJSON_GetArrayItem(posts, i - 1), "code")->valueint == 429)
      ck_assert_msg(t1 - t0 >= 0.95, "POST %d came %.3f s after a 429 asking for 1 s", i, t1 - t0);
  }
  cJSON_Delete(posts);
  char *out = NULL;
  TF_OK_OR_FAIL(tf_kube_list(k, "/api/v1/namespaces/default/events", NULL, &out, NULL));
  ck_assert_ptr_nonnull(strstr(out, "relay r1 draining"));
  ck_assert_ptr_nonnull(strstr(out, "relay r1 removed"));
  tf_free(out);
  /* a write gate refusing everything: nothing sent, everything queued up to 256, the rest counted */
  TF_OK_OR_FAIL(tf_kube_set_write_gate(k, tf_it_refuse, NULL));
  int before = tf_test_count(&tf_it, "POST", "/namespaces/default/events", NULL);
  for (int i = 0; i < 300; i++) {
    char msg[32];
    snprintf(msg, sizeof(msg), "burst %03d", i);
    ck_assert_int_lt(tf_recorder_event(r, pool, "Normal", "Burst", msg), 0);
  }
  ck_assert_uint_eq(tf_recorder_pending(r), 256);
  ck_assert_uint_eq(tf_recorder_dropped(r), 44);
  ck_assert_int_eq(tf_test_count(&tf_it, "POST", "/namespaces/default/events", NULL), before);
  TF_OK_OR_FAIL(tf_kube_set_write_gate(k, NULL, NULL));
  for (int i = 0; i < 400 && tf_recorder_flush(r) > 0; i++) tf_test_sleep_ms(50);
  ck_assert_uint_eq(tf_recorder_pending(r), 0);
  ck_assert_int_eq(tf_test_count(&tf_it, "POST", "/namespaces/default/events", NULL), before + 256);
  TF_OK_OR_FAIL(tf_kube_list(k, "/api/v1/namespaces/default/events", NULL, &out, NULL));
  ck_assert_ptr_null(strstr(out, "burst 043")); /* the oldest went */
  ck_assert_ptr_nonnull(strstr(out, "burst 044"));
  ck_assert_ptr_nonnull(strstr(out, "burst 299"));
  tf_free(out);
  tf_recorder_free(r);
  tf_kube_free(k);
}
END_TEST

/* ---- the compact shared form, without a server (events fed as the worker would) ---- */

typedef struct tf_io_fix {
  tf_kube *kube;
  tf_informer *inf;
  int transforms; /* objects the transform saw: each is built once */
} tf_io_fix;

static void tf_io_transform(tf_informer_edit *edit, const char *key, void *payload)
{
  tf_io_fix *f = payload;
  (void)key;
  f->transforms++;
  (void)tf_informer_edit_remove(edit, (const char *const[]){"data", "bulk", NULL});
}

static void tf_io_open(tf_io_fix *f, int transform)
{
  memset(f, 0, sizeof(*f));
  tf_kube_options ko = TF_KUBE_OPTIONS_INIT;
  ko.server = "https://127.0.21.1:41100"; /* never contacted: the informer is not started */
  TF_OK_OR_FAIL(tf_kube_new(&f->kube, &ko));
  tf_informer_options o;
  TF_OK_OR_FAIL(tf_informer_options_init(&o, TF_INFORMER_OPTIONS_VERSION));
  o.path = "/api/v1/pods";
  if (transform) {
    o.transform = tf_io_transform;
    o.transform_payload = f;
  }
  TF_OK_OR_FAIL(tf_informer_new(&f->inf, f->kube, &o));
}

static void tf_io_close(tf_io_fix *f)
{
  tf_informer_free(f->inf);
  tf_kube_free(f->kube);
}

static void tf_io_feed(tf_io_fix *f, int type, const char *json)
{
  cJSON *o = cJSON_Parse(json);
  ck_assert_ptr_nonnull(o);
  tf_informer__feed(f->inf, type, o);
  cJSON_Delete(o);
}

static char *tf_io_str(const tf_informer_object *o, const char *const *path)
{
  char *s = NULL;
  TF_OK_OR_FAIL(tf_informer_object_string(o, path, &s));
  return s;
}

/* A reader's object is the one parsed when it came: an update and a delete change the cache, never what it holds. */
START_TEST(test_informer__object_outlives_update_and_delete)
{
  tf_io_fix f;
  tf_io_open(&f, 1);
  tf_io_feed(&f, TF_KUBE_EVENT_ADDED,
             "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"resourceVersion\":\"1\",\"managedFields\":[{\"manager\":"
             "\"kubectl\"}]},\"data\":{\"v\":\"one\",\"bulk\":\"xxxxxxxx\"}}");
  ck_assert_int_eq(f.transforms, 1);
  tf_informer_object *held = NULL, *again = NULL;
  TF_OK_OR_FAIL(tf_informer_get_object(f.inf, "n/p", &held));
  TF_OK_OR_FAIL(tf_informer_get_object(f.inf, "n/p", &again));
  ck_assert_ptr_eq(held, again); /* shared: no copy, no parse, no print per read */
  tf_informer_object_release(again);
  /* managedFields and what the transform dropped are not cached */
  ck_assert_str_eq(tf_informer_object_json(held, NULL),
                   "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"resourceVersion\":\"1\"},\"data\":{\"v\":\"one\"}}");
  ck_assert_str_eq(tf_informer_object_key(held), "n/p");
  ck_assert_uint_eq(tf_informer_bytes(f.inf), tf_informer_object_size(held));
  tf_io_feed(&f, TF_KUBE_EVENT_MODIFIED,
             "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"resourceVersion\":\"2\"},\"data\":{\"v\":\"two\"}}");
  ck_assert_int_eq(f.transforms, 2);
  char *v = tf_io_str(held, (const char *const[]){"data", "v", NULL});
  ck_assert_str_eq(v, "one"); /* the reader still holds the first state, intact */
  tf_free(v);
  tf_informer_object *cur = NULL;
  TF_OK_OR_FAIL(tf_informer_get_object(f.inf, "n/p", &cur));
  ck_assert_ptr_ne(cur, held);
  v = tf_io_str(cur, (const char *const[]){"data", "v", NULL});
  ck_assert_str_eq(v, "two");
  tf_free(v);
  /* the old text API gives the same text, a copy */
  char *txt = NULL;
  TF_OK_OR_FAIL(tf_informer_get(f.inf, "n/p", &txt));
  ck_assert_str_eq(txt, tf_informer_object_json(cur, NULL));
  tf_free(txt);
  TF_OK_OR_FAIL(tf_informer_list(f.inf, "n", NULL, &txt));
  ck_assert_uint_eq(strlen(txt), strlen(tf_informer_object_json(cur, NULL)) + 2);
  tf_free(txt);
  tf_io_feed(&f, TF_KUBE_EVENT_DELETED,
             "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"resourceVersion\":\"3\"},\"data\":{\"v\":\"two\"}}");
  ck_assert_int_eq(f.transforms, 2); /* a delete builds nothing */
  ck_assert_int_eq(tf_informer_get_object(f.inf, "n/p", &again), TF_ENOTFOUND);
  ck_assert_uint_eq(tf_informer_count(f.inf), 0);
  ck_assert_uint_eq(tf_informer_bytes(f.inf), 0);
  v = tf_io_str(cur, (const char *const[]){"metadata", "resourceVersion", NULL});
  ck_assert_str_eq(v, "2");
  tf_free(v);
  tf_informer_object_release(cur);
  tf_informer_object_release(held);
  tf_io_close(&f);
}
END_TEST

/* A relist builds only what changed (its RV): the objects it already holds stay, shared, untouched. */
START_TEST(test_informer__relist_builds_only_changes)
{
  tf_io_fix f;
  tf_io_open(&f, 1);
  const char *first = "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
                      "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"resourceVersion\":\"1\"}},"
                      "{\"metadata\":{\"name\":\"b\",\"namespace\":\"n\",\"resourceVersion\":\"2\"}}]}";
  const char *again = "{\"metadata\":{\"resourceVersion\":\"12\"},\"items\":["
                      "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"resourceVersion\":\"1\"}},"
                      "{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"resourceVersion\":\"11\"}}]}";
  cJSON *l = cJSON_Parse(first);
  tf_informer__feed_list(f.inf, l);
  cJSON_Delete(l);
  ck_assert_int_eq(f.transforms, 2);
  tf_informer_object *a = NULL, *a2 = NULL;
  TF_OK_OR_FAIL(tf_informer_get_object(f.inf, "n/a", &a));
  l = cJSON_Parse(again);
  tf_informer__feed_list(f.inf, l);
  cJSON_Delete(l);
  ck_assert_int_eq(f.transforms, 3); /* c only: a is unchanged, b is gone */
  TF_OK_OR_FAIL(tf_informer_get_object(f.inf, "n/a", &a2));
  ck_assert_ptr_eq(a, a2);
  ck_assert_int_eq(tf_informer_get_object(f.inf, "n/b", &a2), TF_ENOTFOUND);
  ck_assert_uint_eq(tf_informer_count(f.inf), 2);
  tf_informer_object_release(a);
  tf_informer_object_release(a);
  char *rv = NULL;
  TF_OK_OR_FAIL(tf_informer_resource_version(f.inf, &rv));
  ck_assert_str_eq(rv, "12");
  tf_free(rv);
  tf_io_close(&f);
}
END_TEST

/* The tape finds values by path: strings decoded, containers and numbers as their JSON, escaped keys. */
START_TEST(test_informer__object_tape)
{
  const char *json = "{\"metadata\":{\"name\":\"x\",\"labels\":{\"a\\\"b\":\"q\\u00e9\\n\",\"k}\":\"]\"}},"
                     "\"spec\":{\"n\":[1,{\"z\":[]}],\"m\":-1.5e3,\"t\":true,\"e\":{}},\"last\":null}";
  tf_informer_object *o = NULL;
  TF_OK_OR_FAIL(tf_informer_object_parse(&o, json, strlen(json)));
  const char *v;
  size_t n;
  TF_OK_OR_FAIL(tf_informer_object_find(o, (const char *const[]){"spec", "n", NULL}, &v, &n));
  ck_assert_int_eq((int)n, 12);
  ck_assert(strncmp(v, "[1,{\"z\":[]}]", n) == 0);
  TF_OK_OR_FAIL(tf_informer_object_find(o, (const char *const[]){"spec", "m", NULL}, &v, &n));
  ck_assert(n == 5 && strncmp(v, "-1500", 5) == 0); /* as cJSON printed it */
  TF_OK_OR_FAIL(tf_informer_object_find(o, (const char *const[]){"spec", "e", NULL}, &v, &n));
  ck_assert(n == 2 && strncmp(v, "{}", 2) == 0);
  TF_OK_OR_FAIL(tf_informer_object_find(o, (const char *const[]){"last", NULL}, &v, &n));
  ck_assert(n == 4 && strncmp(v, "null", 4) == 0);
  TF_OK_OR_FAIL(tf_informer_object_find(o, (const char *const[]){"metadata", "labels", NULL}, &v, &n));
  ck_assert_uint_eq(n, strlen("{\"a\\\"b\":\"q\xc3\xa9\\n\",\"k}\":\"]\"}"));
  ck_assert(strncmp(v, "{\"a\\\"b\":\"q\xc3\xa9\\n\",\"k}\":\"]\"}", n) == 0);
  TF_OK_OR_FAIL(tf_informer_object_find(o, NULL, &v, &n));
  ck_assert_uint_eq(n, strlen(tf_informer_object_json(o, NULL)));
  char *s = tf_io_str(o, (const char *const[]){"metadata", "labels", "a\"b", NULL});
  ck_assert_str_eq(s, "q\xc3\xa9\n");
  tf_free(s);
  s = tf_io_str(o, (const char *const[]){"metadata", "labels", "k}", NULL});
  ck_assert_str_eq(s, "]");
  tf_free(s);
  ck_assert_int_eq(tf_informer_object_find(o, (const char *const[]){"spec", "nope", NULL}, &v, &n), TF_ENOTFOUND);
  ck_assert_int_eq(tf_informer_object_find(o, (const char *const[]){"spec", "n", "x", NULL}, &v, &n), TF_ENOTFOUND);
  ck_assert_int_eq(tf_informer_object_string(o, (const char *const[]){"spec", "t", NULL}, &s), TF_EINVALID);
  ck_assert_ptr_eq(tf_informer_object_ref(o), o);
  tf_informer_object_release(o);
  tf_informer_object_release(o);
  ck_assert_int_eq(tf_informer_object_parse(&o, "[1]", 3), TF_EINVALID);
  ck_assert_int_eq(tf_informer_object_parse(&o, "{\"metadata\":{}}", 15), TF_EINVALID);
  ck_assert_ptr_null(o);
}
END_TEST

/* index functions the operator's caches use: owning pool (label), node (spec.nodeName), claimed address */
static void tf_io_by_pool(const tf_informer_object *o, tf_informer_values *out, void *payload)
{
  (void)payload;
  char *ns = NULL, *pool = NULL;
  if (tf_informer_object_string(o, (const char *const[]){"metadata", "namespace", NULL}, &ns) == 0 &&
      tf_informer_object_string(o, (const char *const[]){"metadata", "labels", "turnfleet.hzmi.dev/pool", NULL}, &pool) == 0) {
    char key[256];
    snprintf(key, sizeof(key), "%s/%s", ns, pool);
    ck_assert_int_eq(tf_informer_values_add(out, key), 0);
  }
  tf_free(ns);
  tf_free(pool);
}

static void tf_io_by_node(const tf_informer_object *o, tf_informer_values *out, void *payload)
{
  (void)payload;
  char *node = NULL;
  if (tf_informer_object_string(o, (const char *const[]){"spec", "nodeName", NULL}, &node) == 0 && *node)
    (void)tf_informer_values_add(out, node);
  tf_free(node);
}

static void tf_io_by_addr(const tf_informer_object *o, tf_informer_values *out, void *payload)
{
  (void)payload;
  char *a = NULL, *save = NULL;
  if (tf_informer_object_string(o, (const char *const[]){"metadata", "annotations", "turnfleet.hzmi.dev/relay-address", NULL},
                                &a) == 0)
    for (char *t = strtok_r(a, ",", &save); t; t = strtok_r(NULL, ",", &save)) (void)tf_informer_values_add(out, t);
  tf_free(a);
}

static void tf_io_pod(tf_io_fix *f, int type, const char *name, const char *pool, const char *node, const char *addrs)
{
  char json[1024];
  snprintf(json, sizeof(json),
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"labels\":{\"turnfleet.hzmi.dev/pool\":\"%s\"},"
           "\"annotations\":{\"turnfleet.hzmi.dev/relay-address\":\"%s\"}},\"spec\":{\"nodeName\":\"%s\"}}",
           name, pool, addrs, node);
  tf_io_feed(f, type, json);
}

static size_t tf_io_count(tf_io_fix *f, const char *index, const char *value, const char *first)
{
  tf_informer_object **objs = NULL;
  size_t n = 99;
  TF_OK_OR_FAIL(tf_informer_by_index(f->inf, index, value, &objs, &n));
  if (first && n) ck_assert_str_eq(tf_informer_object_key(objs[0]), first);
  tf_informer_objects_release(objs, n);
  return n;
}

START_TEST(test_informer__indexers)
{
  tf_io_fix f;
  tf_io_open(&f, 0);
  TF_OK_OR_FAIL(tf_informer_add_indexer(f.inf, "pool", tf_io_by_pool, NULL));
  TF_OK_OR_FAIL(tf_informer_add_indexer(f.inf, "node", tf_io_by_node, NULL));
  TF_OK_OR_FAIL(tf_informer_add_indexer(f.inf, "address", tf_io_by_addr, NULL));
  ck_assert_int_eq(tf_informer_add_indexer(f.inf, "node", tf_io_by_node, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_informer_add_indexer(f.inf, "", tf_io_by_node, NULL), TF_EINVALID);
  tf_io_pod(&f, TF_KUBE_EVENT_ADDED, "a-relay-1", "a", "n1", "127.0.21.1");
  tf_io_pod(&f, TF_KUBE_EVENT_ADDED, "a-relay-2", "a", "n2", "127.0.21.2,::1");
  tf_io_pod(&f, TF_KUBE_EVENT_ADDED, "b-relay-1", "b", "n1", "127.0.21.1");
  /* by owning pool */
  /* registered before the first object only: the ones cached already would be missing from it */
  ck_assert_int_eq(tf_informer_add_indexer(f.inf, "late", tf_io_by_node, NULL), TF_EINVALID);
  ck_assert_uint_eq(tf_io_count(&f, "pool", "ns/a", "ns/a-relay-1"), 2);
  ck_assert_uint_eq(tf_io_count(&f, "pool", "ns/b", "ns/b-relay-1"), 1);
  ck_assert_uint_eq(tf_io_count(&f, "pool", "ns/c", NULL), 0);
  /* by node */
  ck_assert_uint_eq(tf_io_count(&f, "node", "n1", "ns/a-relay-1"), 2);
  ck_assert_uint_eq(tf_io_count(&f, "node", "n2", "ns/a-relay-2"), 1);
  /* by claimed address: two pools claim 127.0.21.1 */
  ck_assert_uint_eq(tf_io_count(&f, "address", "127.0.21.1", "ns/a-relay-1"), 2);
  ck_assert_uint_eq(tf_io_count(&f, "address", "::1", "ns/a-relay-2"), 1);
  /* an update moves an object between values; a delete takes it out of every index */
  tf_io_pod(&f, TF_KUBE_EVENT_MODIFIED, "b-relay-1", "b", "n2", "127.0.21.3");
  ck_assert_uint_eq(tf_io_count(&f, "node", "n1", "ns/a-relay-1"), 1);
  ck_assert_uint_eq(tf_io_count(&f, "node", "n2", "ns/a-relay-2"), 2);
  ck_assert_uint_eq(tf_io_count(&f, "address", "127.0.21.1", "ns/a-relay-1"), 1);
  ck_assert_uint_eq(tf_io_count(&f, "address", "127.0.21.3", "ns/b-relay-1"), 1);
  tf_io_pod(&f, TF_KUBE_EVENT_DELETED, "a-relay-2", "a", "n2", "127.0.21.2,::1");
  ck_assert_uint_eq(tf_io_count(&f, "pool", "ns/a", "ns/a-relay-1"), 1);
  ck_assert_uint_eq(tf_io_count(&f, "address", "::1", NULL), 0);
  ck_assert_uint_eq(tf_io_count(&f, "node", "n2", "ns/b-relay-1"), 1);
  tf_informer_object **objs = NULL;
  size_t n = 0;
  ck_assert_int_eq(tf_informer_by_index(f.inf, "owner", "x", &objs, &n), TF_ENOTFOUND);
  /* the namespace and label indexes answer in the shared form too */
  TF_OK_OR_FAIL(tf_informer_list_objects(f.inf, "ns", "turnfleet.hzmi.dev/pool=b", &objs, &n));
  ck_assert_uint_eq(n, 1);
  tf_informer_objects_release(objs, n);
  TF_OK_OR_FAIL(tf_informer_list_objects(f.inf, "other", NULL, &objs, &n));
  ck_assert_uint_eq(n, 0);
  ck_assert_ptr_null(objs);
  tf_io_close(&f);
}
END_TEST

/* Options are read up to the caller's version: a version-2 caller's struct ends before the transform. */
START_TEST(test_informer__options_version_2)
{
  union {
    tf_informer_options s;
    unsigned char b[sizeof(tf_informer_options)];
  } u;
  memset(&u, 0xAA, sizeof(u));
  TF_OK_OR_FAIL(tf_informer_options_init(&u.s, 2));
  ck_assert_uint_eq(u.s.version, 2);
  ck_assert_int_eq(u.s.bookmark_interval_ms, 60000);
  for (size_t i = offsetof(tf_informer_options, transform); i < sizeof(u); i++) ck_assert_uint_eq(u.b[i], 0xAA);
  TF_OK_OR_FAIL(tf_informer_options_init(&u.s, 3));
  ck_assert_ptr_null(u.s.transform);
  ck_assert_int_eq(tf_informer_options_init(&u.s, 4), TF_EINVALID);
}
END_TEST


Suite *tf_test_informer_suite(void)
{
  Suite *s = suite_create("informer");
  TCase *wq = tcase_create("workqueue");
  tcase_add_test(wq, test_informer__workqueue_dedupe_and_exclusive);
  tcase_add_test(wq, test_informer__workqueue_rate_limits);
  tcase_add_test(wq, test_informer__workqueue_shutdown_wakes);
  tcase_add_test(wq, test_informer__workqueue_one_worker_per_key);
  tcase_add_test(wq, test_informer__budget);
  tcase_add_test(wq, test_informer__object_outlives_update_and_delete);
  tcase_add_test(wq, test_informer__object_tape);
  tcase_add_test(wq, test_informer__relist_builds_only_changes);
  tcase_add_test(wq, test_informer__indexers);
  tcase_add_test(wq, test_informer__options_version_2);
  suite_add_tcase(s, wq);
  TCase *live = tcase_create("standin");
  tcase_add_unchecked_fixture(live, tf_it_setup, tf_it_teardown);
  tcase_add_checked_fixture(live, tf_it_each, NULL);
  tcase_set_timeout(live, 120);
  tcase_add_test(live, test_informer__cache_indexes_notifications);
  tcase_add_test(live, test_informer__rewatch_on_clean_end);
  tcase_add_test(live, test_informer__server_errors);
  tcase_add_test(live, test_informer__retry_after);
  tcase_add_test(live, test_informer__expired);
  tcase_add_test(live, test_informer__dropped_watches);
  tcase_add_test(live, test_informer__stalled_watch);
  tcase_add_test(live, test_informer__slow_list);
  tcase_add_test(live, test_informer__token_rotation);
  tcase_add_test(live, test_informer__history_loss);
  tcase_add_test(live, test_informer__resync_and_options);
  tcase_add_test(live, test_informer__election_one_leader_and_release);
  tcase_add_test(live, test_informer__election_competing_holder);
  tcase_add_test(live, test_informer__election_lost_lease);
  tcase_add_test(live, test_informer__election_options);
  tcase_add_test(live, test_informer__recorder_dedupe);
  tcase_add_test(live, test_informer__silent_watch_relists);
  tcase_add_test(live, test_informer__recorder_retries);
  suite_add_tcase(s, live);
  return s;
}
