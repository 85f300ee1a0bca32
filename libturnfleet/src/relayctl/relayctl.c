/* relayctl: coturn's telnet CLI on 127.0.0.1 (login, `pu`, `ps`, `drain`,
 * `cc total-quota -1`) over a non-blocking socket bounded by one deadline,
 * the exporter's /metrics through libcurl, an agent's /metrics as one request
 * on a caller's libcurl multi (relayctl_internal.h), and a worker pool that runs
 * either for an event loop. Bytes that held the password are wiped. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "relayctl_internal.h"

#define TF_RCTL__BUF 65536

static int64_t tf_rctl__now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the CLI ---- */

typedef struct tf_rctl__conn {
  int fd;
  int64_t deadline;
  char buf[TF_RCTL__BUF];
  size_t len;
} tf_rctl__conn;

static tf_err tf_rctl__wait(tf_rctl__conn *c, short events)
{
  for (;;) {
    int64_t left = c->deadline - tf_rctl__now_ms();
    if (left <= 0) return tf_error__set(TF_ETIMEOUT, "the relay's CLI did not answer in time");
    struct pollfd p = {c->fd, events, 0};
    int r = poll(&p, 1, (int)left);
    if (r > 0) return TF_OK;
    if (r < 0 && errno != EINTR) return tf_error__set(TF_ENET, "poll: %s", strerror(errno));
  }
}

static tf_err tf_rctl__connect(tf_rctl__conn *c, uint16_t port)
{
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return tf_error__set(TF_ENET, "socket: %s", strerror(errno));
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) return TF_OK;
  if (errno != EINPROGRESS) return tf_error__set(TF_ENET, "connect 127.0.0.1:%u: %s", port, strerror(errno));
  tf_err rc = tf_rctl__wait(c, POLLOUT);
  int err = 0;
  socklen_t len = sizeof(err);
  if (rc == TF_OK && (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err))
    rc = tf_error__set(TF_ENET, "connect 127.0.0.1:%u: %s", port, strerror(err ? err : errno));
  return rc;
}

static tf_err tf_rctl__send(tf_rctl__conn *c, const char *data, size_t n)
{
  while (n) {
    tf_err rc = tf_rctl__wait(c, POLLOUT);
    if (rc < 0) return rc;
    ssize_t w = send(c->fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EINTR) return tf_error__set(TF_ENET, "send: %s", strerror(errno));
    if (w > 0) data += w, n -= (size_t)w;
  }
  return TF_OK;
}

static int tf_rctl__has_password_prompt(const char *b, size_t n) { return memmem(b, n, "password:", 9) != NULL; }
static int tf_rctl__has_prompt(const char *b, size_t n) { return n >= 2 && b[n - 2] == '>' && b[n - 1] == ' '; }
/* after the password: the prompt, or the password prompt again (refused) */
static int tf_rctl__has_login_answer(const char *b, size_t n)
{
  return tf_rctl__has_prompt(b, n) || tf_rctl__has_password_prompt(b, n);
}

/* Read until @p done holds for the bytes from @p from on. */
static tf_err tf_rctl__read_until(tf_rctl__conn *c, size_t from, int (*done)(const char *, size_t))
{
  for (;;) {
    if (done(c->buf + from, c->len - from)) return TF_OK;
    if (c->len + 1 >= sizeof(c->buf)) return tf_error__set(TF_EPROTO, "the relay's CLI answer is too long");
    tf_err rc = tf_rctl__wait(c, POLLIN);
    if (rc < 0) return rc;
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);
    if (r == 0) return tf_error__set(TF_ENET, "the relay's CLI closed the connection");
    if (r < 0 && errno != EAGAIN && errno != EINTR) return tf_error__set(TF_ENET, "recv: %s", strerror(errno));
    if (r > 0) c->len += (size_t)r;
  }
}

static tf_err tf_rctl__login(tf_rctl__conn *c, uint16_t port, const char *password)
{
  tf_err rc = tf_rctl__connect(c, port);
  if (rc == TF_OK) rc = tf_rctl__read_until(c, 0, tf_rctl__has_password_prompt);
  char *line = NULL;
  if (rc == TF_OK) rc = tf_coturn_cli_command(&line, TF_COTURN_CLI_LOGIN, password, 0);
  if (rc < 0) return rc;
  size_t from = c->len;
  rc = tf_rctl__send(c, line, strlen(line));
  tf_secret_free(line);
  if (rc == TF_OK) rc = tf_rctl__read_until(c, from, tf_rctl__has_login_answer);
  if (rc == TF_OK && tf_rctl__has_password_prompt(c->buf + from, c->len - from))
    rc = tf_error__set(TF_EAUTH, "the relay's CLI refused the password");
  return rc;
}

/* One command after the login; its answer is c->buf[*from, len) up to the prompt. */
static tf_err tf_rctl__command(tf_rctl__conn *c, tf_coturn_cli_op op, int64_t quota, size_t *from)
{
  char *line = NULL;
  tf_err rc = tf_coturn_cli_command(&line, op, NULL, quota);
  if (rc < 0) return rc;
  *from = c->len;
  rc = tf_rctl__send(c, line, strlen(line));
  tf_free(line);
  if (rc < 0) return rc;
  rc = tf_rctl__read_until(c, *from, tf_rctl__has_prompt);
  /* coturn >= 4.6.3 ends the CLI session on `drain`: closing after it is the answer */
  if (rc == TF_ENET && op == TF_COTURN_CLI_DRAIN) {
    close(c->fd);
    c->fd = -1;
    rc = TF_OK;
  }
  return rc;
}

/* 1 when the TCP socket listening on 127.0.0.1:@p port is one of process @p pid's descriptors. */
static int tf_rctl__listener_owned_by(uint16_t port, int pid)
{
  FILE *f = fopen("/proc/net/tcp", "r");
  char line[512], want[32], path[64], link[64], sock[40];
  unsigned long inode = 0;
  snprintf(want, sizeof(want), "0100007F:%04X", port); /* 127.0.0.1, as the kernel prints it */
  while (f && !inode && fgets(line, sizeof(line), f)) {
    char local[64], state[8];
    unsigned long ino;
    if (sscanf(line, " %*s %63s %*s %7s %*s %*s %*s %*s %*s %lu", local, state, &ino) == 3 &&
        strcmp(local, want) == 0 && strcmp(state, "0A") == 0)
      inode = ino;
  }
  if (f) fclose(f);
  if (!inode) return 0;
  snprintf(sock, sizeof(sock), "socket:[%lu]", inode);
  snprintf(path, sizeof(path), "/proc/%d/fd", pid);
  DIR *d = opendir(path);
  int found = 0;
  for (struct dirent *de = d ? readdir(d) : NULL; de && !found; de = readdir(d)) {
    char fd_path[320];
    snprintf(fd_path, sizeof(fd_path), "%s/%s", path, de->d_name);
    ssize_t n = readlink(fd_path, link, sizeof(link) - 1);
    if (n > 0) link[n] = '\0', found = strcmp(link, sock) == 0;
  }
  if (d) closedir(d);
  return found;
}

/* A logged-in CLI session (*out, released with tf_rctl__close), the password only to @p req->owner_pid's listener. */
static tf_err tf_rctl__open(tf_rctl__conn **out, const tf_relayctl_request *req)
{
  *out = NULL;
  if (req->owner_pid > 0 && !tf_rctl__listener_owned_by(req->port, req->owner_pid))
    return tf_error__set(TF_EAUTH, "127.0.0.1:%u: the listener is not process %d's: the password is not sent",
                         req->port, req->owner_pid);
  tf_rctl__conn *c = calloc(1, sizeof(*c));
  if (!c) return tf_error__nomem();
  c->fd = -1;
  c->deadline = tf_rctl__now_ms() + req->timeout_ms;
  *out = c;
  return tf_rctl__login(c, req->port, req->password);
}

static void tf_rctl__close(tf_rctl__conn *c, tf_err rc)
{
  if (c->fd >= 0 && rc == TF_OK) {
    c->deadline = tf_rctl__now_ms() + 100; /* a polite quit, not waited for */
    (void)tf_rctl__send(c, "quit\r\n", 6);
  }
  if (c->fd >= 0) close(c->fd);
  tf_crypto__wipe(c, sizeof(*c));
  free(c);
}

/* The `Default total-quota: N` of a `pc` answer (coturn prints the int -1 as 2^64-1): 0 with *quota, -1 when absent. */
static int tf_rctl__default_total_quota(const char *answer, size_t alen, int64_t *quota)
{
  static const char key[] = "Default total-quota:";
  const char *at = memmem(answer, alen, key, sizeof(key) - 1);
  if (!at) return -1;
  at += sizeof(key) - 1;
  char num[32];
  size_t n = 0;
  while (at < answer + alen && *at == ' ') at++;
  while (at < answer + alen && n + 1 < sizeof(num) && ((*at >= '0' && *at <= '9') || *at == '-')) num[n++] = *at++;
  num[n] = '\0';
  char *end;
  errno = 0;
  if (num[0] == '-') *quota = strtoll(num, &end, 10);
  else *quota = (int64_t)strtoull(num, &end, 10); /* 18446744073709551615 -> -1 */
  return n && !*end && !errno ? 0 : -1;
}

tf_err tf_relayctl__unrefuse(int *undone, const tf_relayctl_request *req, int64_t quota)
{
  *undone = 0;
  tf_rctl__conn *c = NULL;
  size_t from = 0;
  int64_t have = 0;
  tf_err rc = tf_rctl__open(&c, req);
  if (rc == TF_OK) rc = tf_rctl__command(c, TF_COTURN_CLI_PRINT_CONFIG, 0, &from);
  if (rc == TF_OK && tf_rctl__default_total_quota(c->buf + from, c->len - from, &have) < 0)
    rc = tf_error__set(TF_EPROTO, "the relay's CLI printed no `Default total-quota:` line");
  if (rc == TF_OK && have < 0) {
    rc = tf_rctl__command(c, TF_COTURN_CLI_SET_TOTAL_QUOTA, quota, &from);
    if (rc == TF_OK && !memmem(c->buf + from, c->len - from, "total-quota", 11))
      rc = tf_error__set(TF_EPROTO, "the relay's CLI did not confirm `cc total-quota %lld`", (long long)quota);
    if (rc == TF_OK) *undone = 1;
  }
  if (c) tf_rctl__close(c, rc);
  return rc;
}

tf_err tf_relayctl__version(uint32_t *version, const tf_relayctl_request *req)
{
  *version = 0;
  tf_rctl__conn *c = calloc(1, sizeof(*c));
  if (!c) return tf_error__nomem();
  c->fd = -1;
  c->deadline = tf_rctl__now_ms() + req->timeout_ms;
  /* the banner before the password prompt: nothing is sent, so any listener may hear it */
  tf_err rc = tf_rctl__connect(c, req->port);
  if (rc == TF_OK) rc = tf_rctl__read_until(c, 0, tf_rctl__has_password_prompt);
  if (rc == TF_OK) {
    c->buf[c->len] = '\0';
    const char *at = strstr(c->buf, "Coturn-");
    char text[32] = "";
    if (at) sscanf(at + 7, "%31[0-9.]", text);
    if (!text[0] || tf_coturn_version_parse(version, text) < 0)
      rc = tf_error__set(TF_EPROTO, "the relay's CLI banner names no coturn version (`Coturn-X.Y.Z`)");
  }
  if (c->fd >= 0) close(c->fd);
  free(c);
  return rc;
}

static tf_err tf_rctl__cli(int64_t *count, char **text, const tf_relayctl_request *req)
{
  tf_rctl__conn *c = NULL;
  size_t from = 0;
  tf_err rc = tf_rctl__open(&c, req);
  if (!c) return rc;
  /* `pu`, not `pc`: 4.6.1's total-current-allocs also counts every Allocate refused with 508 */
  tf_coturn_cli_op op = req->op == TF_RELAYCTL_COUNT      ? TF_COTURN_CLI_PRINT_USERS
                        : req->op == TF_RELAYCTL_SESSIONS ? TF_COTURN_CLI_PRINT_SESSIONS
                        : req->op == TF_RELAYCTL_DRAIN    ? TF_COTURN_CLI_DRAIN
                                                          : TF_COTURN_CLI_REFUSE_ALLOCATIONS;
  if (rc == TF_OK) rc = tf_rctl__command(c, op, 0, &from);
  const char *answer = c->buf + from;
  size_t alen = c->len - from;
  if (rc == TF_OK && (req->op == TF_RELAYCTL_COUNT || req->op == TF_RELAYCTL_SESSIONS)) {
    int64_t n = 0;
    rc = tf_coturn_allocations_from_cli(&n, answer, alen);
    if (rc == TF_ENOTFOUND) rc = tf_error__set(TF_EPROTO, "the relay's CLI printed no `Total sessions:` line");
    if (rc == TF_OK && count) *count = n;
    if (rc == TF_OK && text && !(*text = tf_strndup__(answer, alen))) rc = tf_error__nomem();
  } else if (rc == TF_OK && req->op == TF_RELAYCTL_REFUSE && !memmem(answer, alen, "total-quota", 11)) {
    rc = tf_error__set(TF_EPROTO, "the relay's CLI did not confirm `cc total-quota -1`");
  }
  tf_rctl__close(c, rc);
  return rc;
}

/* ---- /metrics ---- */

static size_t tf_rctl__curl_write(char *data, size_t size, size_t n, void *payload)
{
  tf_buf *b = payload;
  tf_buf__putn(b, data, size * n);
  return b->failed ? 0 : size * n;
}

static tf_err tf_rctl__metrics(int64_t *count, const tf_relayctl_request *req)
{
  tf_addr addr;
  if (!req->address || tf_addr_parse(&addr, req->address) < 0)
    return tf_error__set(TF_EINVALID, "req.address: an IPv4 or IPv6 address is required for /metrics");
  char host[TF_ADDR_STRLEN], url[TF_ADDR_STRLEN + 32];
  tf_addr_format(host, sizeof(host), &addr);
  snprintf(url, sizeof(url), addr.family == TF_AF_INET6 ? "http://[%s]:%u/metrics" : "http://%s:%u/metrics", host,
           (unsigned)req->port);
  CURL *curl = curl_easy_init();
  if (!curl) return tf_error__nomem();
  tf_buf body;
  tf_buf__init(&body);
  curl_easy_setopt(curl, CURLOPT_URL, url);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE, 8L << 20);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, tf_rctl__curl_write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  CURLcode cc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  tf_err rc = TF_OK;
  if (cc == CURLE_OPERATION_TIMEDOUT) rc = tf_error__set(TF_ETIMEOUT, "%s: no answer in time", url);
  else if (body.failed) rc = tf_error__nomem();
  else if (cc != CURLE_OK) rc = tf_error__set(TF_ENET, "%s: %s", url, curl_easy_strerror(cc));
  else if (status != 200) rc = tf_error__set(TF_EPROTO, "%s: HTTP status %ld, not 200", url, status);
  else rc = tf_coturn_allocations_from_metrics(count, body.ptr ? body.ptr : "", body.len);
  tf_buf__dispose(&body, 0);
  return rc;
}

/* ---- an agent's /metrics: one request on the caller's libcurl multi ---- */

struct tf_relayctl__scrape {
  CURL *curl;
  struct curl_slist *headers; /* the bearer token: wiped on free */
  tf_buf body;
};

tf_relayctl__scrape *tf_relayctl__scrape_new(const char *url, const char *token, int timeout_ms)
{
  tf_relayctl__scrape *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  tf_buf__init(&s->body);
  if (!(s->curl = curl_easy_init())) {
    free(s);
    return NULL;
  }
  curl_easy_setopt(s->curl, CURLOPT_URL, url);
  curl_easy_setopt(s->curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  curl_easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(s->curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(s->curl, CURLOPT_MAXFILESIZE, 4L << 20); /* an agent's /metrics is small */
  curl_easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, tf_rctl__curl_write);
  curl_easy_setopt(s->curl, CURLOPT_WRITEDATA, &s->body);
  curl_easy_setopt(s->curl, CURLOPT_PRIVATE, s);
  if (token) { /* the pool's token: only the operator reads its agents' /metrics */
    size_t n = strlen(token) + 32;
    char *auth = malloc(n);
    if (auth) {
      snprintf(auth, n, "Authorization: Bearer %s", token);
      s->headers = curl_slist_append(NULL, auth);
      tf_crypto__wipe(auth, strlen(auth));
      free(auth);
    }
    if (!s->headers) {
      tf_relayctl__scrape_free(s);
      return NULL;
    }
    curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, s->headers);
  }
  return s;
}

CURL *tf_relayctl__scrape_handle(const tf_relayctl__scrape *s) { return s->curl; }

int64_t tf_relayctl__scrape_count(tf_relayctl__scrape *s, CURLcode cc)
{
  long code = 0;
  if (cc != CURLE_OK || s->body.failed || curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK ||
      code != 200 || !s->body.ptr)
    return -1;
  tf_metrics *m = NULL;
  double sum = 0;
  int64_t count = -1;
  (void)tf_metrics_parse(&m, s->body.ptr, s->body.len);
  /* the agent leaves the sample out while its count fails: unknown, not zero */
  int seen = 0;
  for (size_t i = 0; m && i < tf_metrics_sample_count(m); i++) {
    const char *name = NULL;
    double v;
    if (tf_metrics_sample(m, i, &name, &v) == 0 && strcmp(name, TF_METRIC_AGENT_PORTS_IN_USE) == 0) seen = 1;
  }
  if (seen && tf_metrics_sum(&sum, m, TF_METRIC_AGENT_PORTS_IN_USE) == 0) count = (int64_t)sum;
  tf_metrics_free(m);
  return count;
}

void tf_relayctl__scrape_free(tf_relayctl__scrape *s)
{
  if (!s) return;
  curl_easy_cleanup(s->curl);
  for (struct curl_slist *h = s->headers; h; h = h->next) tf_crypto__wipe(h->data, strlen(h->data));
  curl_slist_free_all(s->headers);
  tf_buf__dispose(&s->body, 0);
  free(s);
}

tf_err tf_relayctl_request_init(tf_relayctl_request *req, unsigned int version)
{
  TF_ASSERT_ARG(req);
  if (version == 0 || version > TF_RELAYCTL_REQUEST_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_relayctl_request version (1-%d)", version,
                         TF_RELAYCTL_REQUEST_VERSION);
  tf_relayctl_request init = TF_RELAYCTL_REQUEST_INIT;
  memcpy(req, &init, version == 1 ? offsetof(tf_relayctl_request, owner_pid) : sizeof(init));
  req->version = version;
  return TF_OK;
}

/* The caller's request field by field up to its version (an older caller's struct is shorter). */
static tf_err tf_rctl__read_request(tf_relayctl_request *dst, const tf_relayctl_request *src)
{
  if (src->version == 0 || src->version > TF_RELAYCTL_REQUEST_VERSION)
    return tf_error__set(TF_EINVALID, "req.version: %u is not a tf_relayctl_request version (1-%d)", src->version,
                         TF_RELAYCTL_REQUEST_VERSION);
  tf_relayctl_request init = TF_RELAYCTL_REQUEST_INIT;
  *dst = init;
  dst->op = src->op;
  dst->address = src->address;
  dst->port = src->port;
  dst->password = src->password;
  dst->timeout_ms = src->timeout_ms;
  if (src->version >= 2) dst->owner_pid = src->owner_pid;
  return TF_OK;
}

tf_err tf_relayctl_run(int64_t *count, char **text, const tf_relayctl_request *caller)
{
  if (text) *text = NULL;
  TF_ASSERT_ARG(caller);
  tf_relayctl_request read = TF_RELAYCTL_REQUEST_INIT;
  tf_err rc = tf_rctl__read_request(&read, caller);
  if (rc < 0) return rc;
  const tf_relayctl_request *req = &read;
  if ((unsigned)req->op > TF_RELAYCTL_SESSIONS) return tf_error__set(TF_EINVALID, "req.op: %d is not an op", (int)req->op);
  if (!req->port) return tf_error__set(TF_EINVALID, "req.port: required");
  if (req->timeout_ms <= 0) return tf_error__set(TF_EINVALID, "req.timeout_ms: must be > 0");
  int64_t n = -1;
  if (req->op == TF_RELAYCTL_COUNT_METRICS) {
    rc = tf_rctl__metrics(&n, req);
  } else {
    if (!req->password || !*req->password) return tf_error__set(TF_EINVALID, "req.password: required for the CLI");
    rc = tf_rctl__cli(&n, text, req);
  }
  if (count) *count = rc == TF_OK ? n : -1;
  return rc;
}

/* ---- the worker pool ---- */

typedef struct tf_rctl__job {
  struct tf_rctl__job *next;
  tf_relayctl_request req;
  char *address, *password; /* password: wiped */
  uint64_t tag;
  tf_err rc;
  int64_t count;
} tf_rctl__job;

struct tf_relayctl_workers {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  tf_rctl__job *queue, *queue_tail, *done;
  int stopping;
  int efd;
  pthread_t *threads;
  size_t thread_count;
};

static void tf_rctl__job_free(tf_rctl__job *j)
{
  if (!j) return;
  tf_secret_free(j->password);
  free(j->address);
  free(j);
}

static void *tf_rctl__worker(void *arg)
{
  tf_relayctl_workers *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->queue && !w->stopping) pthread_cond_wait(&w->cv, &w->mu);
    if (!w->queue) break;
    tf_rctl__job *j = w->queue;
    w->queue = j->next;
    if (!w->queue) w->queue_tail = NULL;
    pthread_mutex_unlock(&w->mu);
    j->rc = tf_relayctl_run(&j->count, NULL, &j->req);
    pthread_mutex_lock(&w->mu);
    j->next = w->done;
    w->done = j;
    uint64_t one = 1;
    ssize_t wr = write(w->efd, &one, sizeof(one));
    (void)wr;
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

void tf_relayctl_workers_free(tf_relayctl_workers *w)
{
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stopping = 1;
  /* queued requests are dropped; running ones end by their deadlines */
  while (w->queue) {
    tf_rctl__job *j = w->queue;
    w->queue = j->next;
    tf_rctl__job_free(j);
  }
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  for (size_t i = 0; i < w->thread_count; i++) pthread_join(w->threads[i], NULL);
  while (w->done) {
    tf_rctl__job *j = w->done;
    w->done = j->next;
    tf_rctl__job_free(j);
  }
  free(w->threads);
  if (w->efd >= 0) close(w->efd);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

tf_err tf_relayctl_workers_new(tf_relayctl_workers **out, size_t threads)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  if (threads < 1 || threads > 64) return tf_error__set(TF_EINVALID, "threads: %zu is not 1-64", threads);
  tf_relayctl_workers *w = calloc(1, sizeof(*w));
  if (!w || !(w->threads = calloc(threads, sizeof(pthread_t)))) {
    free(w);
    return tf_error__nomem();
  }
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->efd < 0) {
    tf_relayctl_workers_free(w);
    return tf_error__set(TF_EIO, "eventfd: %s", strerror(errno));
  }
  for (; w->thread_count < threads; w->thread_count++)
    if (pthread_create(&w->threads[w->thread_count], NULL, tf_rctl__worker, w) != 0) {
      tf_relayctl_workers_free(w);
      return tf_error__set(TF_EIO, "pthread_create: cannot start a worker");
    }
  *out = w;
  return TF_OK;
}

tf_err tf_relayctl_workers_submit(tf_relayctl_workers *w, const tf_relayctl_request *caller, uint64_t tag)
{
  TF_ASSERT_ARG(w);
  TF_ASSERT_ARG(caller);
  tf_relayctl_request req[1] = {TF_RELAYCTL_REQUEST_INIT};
  tf_err rc = tf_rctl__read_request(req, caller);
  if (rc < 0) return rc;
  tf_rctl__job *j = calloc(1, sizeof(*j));
  if (!j) return tf_error__nomem();
  j->req = *req;
  j->tag = tag;
  if ((req->address && !(j->address = tf_strdup__(req->address))) ||
      (req->password && !(j->password = tf_strdup__(req->password)))) {
    tf_rctl__job_free(j);
    return tf_error__nomem();
  }
  j->req.address = j->address;
  j->req.password = j->password;
  pthread_mutex_lock(&w->mu);
  if (w->queue_tail) w->queue_tail->next = j;
  else w->queue = j;
  w->queue_tail = j;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  return TF_OK;
}

int tf_relayctl_workers_fd(const tf_relayctl_workers *w) { return w ? w->efd : -1; }

int tf_relayctl_workers_next(tf_relayctl_workers *w, uint64_t *tag, tf_err *rc, int64_t *count)
{
  TF_ASSERT_ARG(w);
  pthread_mutex_lock(&w->mu);
  tf_rctl__job *j = w->done;
  if (j) w->done = j->next;
  if (!w->done) {
    uint64_t drained;
    ssize_t r = read(w->efd, &drained, sizeof(drained)); /* not readable until the next result */
    (void)r;
  }
  pthread_mutex_unlock(&w->mu);
  if (!j) return 0;
  if (tag) *tag = j->tag;
  if (rc) *rc = j->rc;
  if (count) *count = j->count;
  tf_rctl__job_free(j);
  return 1;
}
