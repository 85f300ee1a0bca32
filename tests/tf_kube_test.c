#include "tf_kube_test.h"

#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tf_test.h"

void tf_test_sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

static char *tf_test_slurp_trim(const char *path)
{
  char *s = tf_test_read(path, NULL);
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = '\0';
  return s;
}

void tf_test_cluster_start(tf_test_cluster *c, const char *addr, int port, const char *const *extra)
{
  memset(c, 0, sizeof(*c));
  c->dir = tf_test_tmpdir();
  const char *src = getenv("TF_SOURCE_DIR");
  ck_assert_msg(src != NULL, "TF_SOURCE_DIR is not set (run through ctest)");
  char script[4096], portarg[16], dirarg[4000], logpath[4200];
  snprintf(script, sizeof(script), "%s/tests/kube/cluster.py", src);
  snprintf(portarg, sizeof(portarg), "%d", port);
  snprintf(dirarg, sizeof(dirarg), "%s/kc", c->dir);
  snprintf(logpath, sizeof(logpath), "%s/cluster.log", c->dir);
  const char *argv[32] = {"python3", script, "--dir", dirarg, "--address", addr, "--port", portarg};
  int n = 8;
  for (int i = 0; extra && extra[i] && n < 30; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  pid_t parent = getpid();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    /* never outlive the test runner */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    FILE *f = freopen(logpath, "w", stdout);
    (void)f;
    dup2(1, 2);
    execvp("python3", (char *const *)argv);
    _exit(127);
  }
  c->pid = pid;
  char ready[4300];
  snprintf(ready, sizeof(ready), "%s/ready", dirarg);
  for (int i = 0; i < 600 && access(ready, F_OK) != 0; i++) {
    int st;
    ck_assert_msg(waitpid(pid, &st, WNOHANG) == 0, "cluster.py exited early (see %s)", logpath);
    tf_test_sleep_ms(50);
  }
  ck_assert_msg(access(ready, F_OK) == 0, "cluster.py not ready after 30 s");
  snprintf(c->server, sizeof(c->server), "https://%s:%d", addr, port);
  char p[4300];
  snprintf(p, sizeof(p), "%s/control", dirarg);
  char *ctl = tf_test_slurp_trim(p);
  snprintf(c->control, sizeof(c->control), "%s", ctl);
  free(ctl);
  snprintf(c->kubeconfig, sizeof(c->kubeconfig), "%s/kubeconfig", dirarg);
  snprintf(c->token_path, sizeof(c->token_path), "%s/token", dirarg);
  snprintf(c->ca_path, sizeof(c->ca_path), "%s/ca.crt", dirarg);
  c->token = tf_test_slurp_trim(c->token_path);
}

void tf_test_cluster_stop(tf_test_cluster *c)
{
  if (c->pid > 0) {
    kill(c->pid, SIGTERM);
    int st;
    for (int i = 0; i < 200 && waitpid(c->pid, &st, WNOHANG) == 0; i++) tf_test_sleep_ms(50);
    if (waitpid(c->pid, &st, WNOHANG) == 0) {
      kill(c->pid, SIGKILL);
      waitpid(c->pid, &st, 0);
    }
    c->pid = 0;
  }
  if (c->dir) {
    tf_test_rmtree(c->dir);
    free(c->dir);
    c->dir = NULL;
  }
  free(c->token);
  c->token = NULL;
}

static size_t tf_test_wr(char *d, size_t s, size_t n, void *arg)
{
  char **buf = arg;
  size_t old = *buf ? strlen(*buf) : 0;
  *buf = realloc(*buf, old + s * n + 1);
  memcpy(*buf + old, d, s * n);
  (*buf)[old + s * n] = '\0';
  return s * n;
}

cJSON *tf_test_control(const tf_test_cluster *c, const char *method, const char *path, const char *body)
{
  CURL *h = curl_easy_init();
  ck_assert_ptr_nonnull(h);
  char url[256];
  snprintf(url, sizeof(url), "%s%s", c->control, path);
  char *out = NULL;
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tf_test_wr);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  CURLcode cc = curl_easy_perform(h);
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(hdr);
  curl_easy_cleanup(h);
  ck_assert_msg(cc == CURLE_OK && code >= 200 && code < 300, "control %s %s: %d/%ld %s", method, path, (int)cc, code,
                out ? out : "");
  cJSON *doc = out ? cJSON_Parse(out) : NULL;
  free(out);
  return doc ? doc : cJSON_CreateNull();
}

void tf_test_fault(const tf_test_cluster *c, const char *json) { cJSON_Delete(tf_test_control(c, "POST", "/faults", json)); }

void tf_test_reset(const tf_test_cluster *c)
{
  cJSON_Delete(tf_test_control(c, "DELETE", "/faults", NULL));
  cJSON_Delete(tf_test_control(c, "DELETE", "/requests", NULL));
}

cJSON *tf_test_requests(const tf_test_cluster *c, const char *method, const char *path_part, const char *query_part)
{
  cJSON *all = tf_test_control(c, "GET", "/requests", NULL);
  cJSON *items = cJSON_IsArray(all) ? all : cJSON_GetObjectItemCaseSensitive(all, "requests");
  if (!items) items = cJSON_GetObjectItemCaseSensitive(all, "items");
  ck_assert_msg(cJSON_IsArray(items), "request log: unexpected shape");
  cJSON *res = cJSON_CreateArray();
  cJSON *it;
  cJSON_ArrayForEach(it, items)
  {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "method");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "path");
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(it, "query");
    if (method && (!cJSON_IsString(m) || strcmp(m->valuestring, method) != 0)) continue;
    if (path_part && (!cJSON_IsString(p) || !strstr(p->valuestring, path_part))) continue;
    if (query_part && (!cJSON_IsString(q) || !strstr(q->valuestring, query_part))) continue;
    cJSON_AddItemToArray(res, cJSON_Duplicate(it, 1));
  }
  cJSON_Delete(all);
  return res;
}

int tf_test_count(const tf_test_cluster *c, const char *method, const char *path_part, const char *query_part)
{
  cJSON *r = tf_test_requests(c, method, path_part, query_part);
  int n = cJSON_GetArraySize(r);
  cJSON_Delete(r);
  return n;
}

int tf_test_wait_count(const tf_test_cluster *c, const char *method, const char *path_part, const char *query_part,
                       int n)
{
  int got = 0;
  for (int i = 0; i < 300 && (got = tf_test_count(c, method, path_part, query_part)) < n; i++) tf_test_sleep_ms(100);
  ck_assert_msg(got >= n, "%s %s ?%s: %d requests, waited for %d", method ? method : "*", path_part ? path_part : "",
                query_part ? query_part : "", got, n);
  return got;
}

static pthread_mutex_t tf_test_log_mu = PTHREAD_MUTEX_INITIALIZER;

void tf_test_log_cb(tf_log_level level, const char *msg, void *payload)
{
  (void)level;
  char **buf = payload;
  pthread_mutex_lock(&tf_test_log_mu);
  size_t old = *buf ? strlen(*buf) : 0, n = strlen(msg);
  *buf = realloc(*buf, old + n + 2);
  memcpy(*buf + old, msg, n);
  (*buf)[old + n] = '\n';
  (*buf)[old + n + 1] = '\0';
  pthread_mutex_unlock(&tf_test_log_mu);
}

char *tf_test_new_token(const tf_test_cluster *c, const char *user, const char *path)
{
  char body[256];
  snprintf(body, sizeof(body), "{\"user\":\"%s\",\"groups\":[\"system:masters\"]}", user);
  cJSON *t = tf_test_control(c, "POST", "/tokens", body);
  char *tok = strdup(cJSON_GetObjectItem(t, "token")->valuestring);
  cJSON_Delete(t);
  tf_test_write(path, tok, 0600);
  return tok;
}

/* The test defaults (5 s requests, fieldManager turnfleet-test, logging into @p log), then a client. */
static tf_kube *tf_test_kube_opts(tf_kube_options *o, char **log)
{
  o->timeout_ms = 5000;
  o->connect_timeout_ms = 2000;
  o->field_manager = "turnfleet-test";
  if (log) {
    o->log = tf_test_log_cb;
    o->log_payload = log;
    o->log_level = TF_LOG_DEBUG;
  }
  tf_kube *k = NULL;
  TF_OK_OR_FAIL(tf_kube_new(&k, o));
  return k;
}

tf_kube *tf_test_kube_token(const tf_test_cluster *c, const char *token_path, const char *user_agent, char **log)
{
  tf_kube_options o;
  TF_OK_OR_FAIL(tf_kube_options_init(&o, TF_KUBE_OPTIONS_VERSION));
  o.server = c->server;
  o.ca_file = c->ca_path;
  o.token_file = token_path;
  o.user_agent = user_agent;
  return tf_test_kube_opts(&o, log);
}

tf_kube *tf_test_kube(const tf_test_cluster *c, char **log)
{
  tf_kube_options o;
  TF_OK_OR_FAIL(tf_kube_options_init(&o, TF_KUBE_OPTIONS_VERSION));
  o.source = TF_KUBE_SOURCE_KUBECONFIG;
  o.kubeconfig = c->kubeconfig;
  return tf_test_kube_opts(&o, log);
}

int tf_test_log_count(char **buf, const char *needle)
{
  pthread_mutex_lock(&tf_test_log_mu);
  int n = 0;
  for (const char *p = *buf; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
  pthread_mutex_unlock(&tf_test_log_mu);
  return n;
}
