/* The reference for bench/webhook: a static HTTPS response served by the same
 * stack as turnfleet-webhook (tools/common/tool_tls.c: libmicrohttpd over
 * GnuTLS, the same limits and thread count). It reads each POST body and answers
 * the bytes of RESPONSE_FILE, so the two servers differ only by the review work.
 *   bench_webhook_static ADDR:PORT CERT KEY RESPONSE_FILE THREADS
 * Runs until SIGTERM/SIGINT. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "tool_http.h"
#include "tool_io.h"
#include "tool_tls.h"

static char *response;

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
  (void)cls, (void)url, (void)method, (void)version, (void)upload;
  static int first;
  if (!*con_cls) {
    *con_cls = &first;
    return MHD_YES;
  }
  if (*upload_size) {
    *upload_size = 0;
    return MHD_YES;
  }
  return tool_http_reply(conn, MHD_HTTP_OK, "application/json", response);
}

int main(int argc, char **argv)
{
  if (argc != 6) {
    fprintf(stderr, "usage: bench_webhook_static ADDR:PORT CERT KEY RESPONSE_FILE THREADS\n");
    return 2;
  }
  int sfd = tool_stop_signalfd();
  response = tool_read_file(argv[4], NULL, 1 << 20);
  char err[256];
  if (!response || tool_tls_start(argv[2], argv[3], 1000, err, sizeof(err)) < 0) {
    fprintf(stderr, "bench_webhook_static: %s\n", response ? err : "cannot read the response file");
    return 2;
  }
  /* turnfleet-webhook's defaults: 256 connections, 10 s idle */
  tool_https_limits lim = {256, 10, (unsigned int)atoi(argv[5]), NULL, NULL};
  struct MHD_Daemon *d = tool_https_start(argv[1], handle, NULL, &lim);
  if (!d) {
    fprintf(stderr, "bench_webhook_static: cannot serve on %s\n", argv[1]);
    return 1;
  }
  struct signalfd_siginfo si;
  while (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si)) {
  }
  MHD_stop_daemon(d);
  tool_tls_stop();
  free(response);
  return 0;
}
