/* Blocking clients for a relay's counters: coturn's telnet CLI (4.6.1: `pc`,
 * and `cc total-quota -1` for the drain) and its Prometheus /metrics (>= 4.6.2).
 * Bounded by a deadline; the password is wiped and never printed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "up.h"

typedef struct conn {
  int fd;
  int64_t deadline;
  char buf[65536];
  size_t len;
} conn;

static int wait_fd(conn *c, short events)
{
  for (;;) {
    int64_t left = c->deadline - tf_up_now_ms();
    if (left <= 0) return -1;
    struct pollfd p = {c->fd, events, 0};
    int r = poll(&p, 1, (int)left);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static int conn_open(conn *c, const char *address, uint16_t port, int timeout_ms)
{
  struct sockaddr_storage ss;
  socklen_t sl;
  memset(&ss, 0, sizeof(ss));
  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    sl = sizeof(*v4);
  } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    sl = sizeof(*v6);
  } else {
    return -1;
  }
  c->len = 0;
  c->deadline = tf_up_now_ms() + timeout_ms;
  c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return -1;
  if (connect(c->fd, (struct sockaddr *)&ss, sl) < 0) {
    int err = 0;
    socklen_t el = sizeof(err);
    if (errno != EINPROGRESS || wait_fd(c, POLLOUT) < 0 || getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 ||
        err) {
      close(c->fd);
      c->fd = -1;
      return -1;
    }
  }
  return 0;
}

static void conn_close(conn *c)
{
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  explicit_bzero(c->buf, sizeof(c->buf));
}

static int conn_send(conn *c, const char *data, size_t n)
{
  while (n) {
    if (wait_fd(c, POLLOUT) < 0) return -1;
    ssize_t w = send(c->fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EINTR) return -1;
    if (w > 0) data += w, n -= (size_t)w;
  }
  return 0;
}

/* Read until @p done says the buffer (from @p from) is complete; -1 on EOF, error, deadline. */
static int conn_read_until(conn *c, size_t from, int (*done)(const char *, size_t))
{
  for (;;) {
    if (done(c->buf + from, c->len - from)) return 0;
    if (c->len + 1 >= sizeof(c->buf)) return -1;
    if (wait_fd(c, POLLIN) < 0) return -1;
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);
    if (r == 0) return -1;
    if (r < 0 && errno != EAGAIN && errno != EINTR) return -1;
    if (r > 0) c->len += (size_t)r;
  }
}

static int has_password_prompt(const char *b, size_t n) { return memmem(b, n, "password:", 9) != NULL; }
static int has_prompt(const char *b, size_t n) { return n >= 2 && b[n - 2] == '>' && b[n - 1] == ' '; }
static int has_http_end(const char *b, size_t n)
{
  (void)b;
  (void)n;
  return 0; /* read to EOF (Connection: close) */
}

/* Connect and log in: afterwards the buffer ends with the `> ` prompt. */
static int cli_login(conn *c, uint16_t port, const char *password, int timeout_ms)
{
  if (conn_open(c, "127.0.0.1", port, timeout_ms) < 0) return -1;
  char *line = NULL;
  if (conn_read_until(c, 0, has_password_prompt) < 0 ||
      tf_coturn_cli_command(&line, TF_COTURN_CLI_LOGIN, password, 0) < 0) {
    conn_close(c);
    return -1;
  }
  size_t from = c->len;
  int rc = conn_send(c, line, strlen(line));
  tf_cred_secret_free(line);
  if (rc < 0 || conn_read_until(c, from, has_prompt) < 0 || has_password_prompt(c->buf + from, c->len - from)) {
    conn_close(c);
    return -1;
  }
  return 0;
}

static int cli_run(conn *c, tf_coturn_cli_op op, size_t *from)
{
  char *line = NULL;
  if (tf_coturn_cli_command(&line, op, NULL, 0) < 0) return -1;
  *from = c->len;
  int rc = conn_send(c, line, strlen(line));
  tf_free(line);
  if (rc < 0) return -1;
  return conn_read_until(c, *from, has_prompt);
}

int tf_up_cli_allocations(int64_t *out, uint16_t port, const char *password, int timeout_ms)
{
  conn *c = calloc(1, sizeof(*c));
  if (!c) return -1;
  c->fd = -1;
  size_t from = 0;
  int rc = cli_login(c, port, password, timeout_ms);
  /* `pu`, not `pc`: 4.6.1's total-current-allocs also counts refused (508) Allocates */
  if (rc == 0) rc = cli_run(c, TF_COTURN_CLI_PRINT_USERS, &from);
  if (rc == 0 && tf_coturn_allocations_from_cli(out, c->buf + from, c->len - from) < 0) rc = -1;
  if (c->fd >= 0) (void)conn_send(c, "quit\r\n", 6);
  conn_close(c);
  free(c);
  return rc;
}

int tf_up_cli_refuse_allocations(uint16_t port, const char *password, int timeout_ms)
{
  conn *c = calloc(1, sizeof(*c));
  if (!c) return -1;
  c->fd = -1;
  size_t from = 0;
  int rc = cli_login(c, port, password, timeout_ms);
  if (rc == 0) rc = cli_run(c, TF_COTURN_CLI_REFUSE_ALLOCATIONS, &from);
  if (rc == 0 && !memmem(c->buf + from, c->len - from, "total-quota", 11)) rc = -1;
  if (c->fd >= 0) (void)conn_send(c, "quit\r\n", 6);
  conn_close(c);
  free(c);
  return rc;
}

int tf_up_metrics_allocations(int64_t *out, const char *address, uint16_t port, int timeout_ms)
{
  conn *c = calloc(1, sizeof(*c));
  if (!c) return -1;
  c->fd = -1;
  int rc = conn_open(c, address, port, timeout_ms);
  if (rc == 0) {
    char req[256];
    int n = snprintf(req, sizeof(req), "GET /metrics HTTP/1.0\r\nHost: %s:%u\r\nConnection: close\r\n\r\n",
                     address, (unsigned)port);
    rc = conn_send(c, req, (size_t)n);
  }
  if (rc == 0) {
    (void)conn_read_until(c, 0, has_http_end); /* ends at EOF (or the deadline) */
    c->buf[c->len] = '\0';
    const char *body = strstr(c->buf, "\r\n\r\n");
    rc = -1;
    if (!strncmp(c->buf, "HTTP/1.", 7) && strstr(c->buf, " 200") && body &&
        tf_coturn_allocations_from_metrics(out, body + 4, c->len - (size_t)(body + 4 - c->buf)) == 0)
      rc = 0;
  }
  conn_close(c);
  free(c);
  return rc;
}
