/* HTTPS serving for the tools on libmicrohttpd over GnuTLS (the TLS library
 * Debian's libmicrohttpd is built with): the certificate and key come from
 * files and are reloaded when the files change, without restarting the
 * server; connection limit, idle timeout and a thread pool. One certificate
 * source per process (GnuTLS's certificate callback carries no closure). */
#ifndef TURNFLEET_TOOL_TLS_H
#define TURNFLEET_TOOL_TLS_H

#include <stddef.h>

#include <microhttpd.h>

typedef struct tool_https_limits {
  unsigned int connections; /* at once; more wait in the kernel's backlog */
  unsigned int idle_s;      /* a connection silent this long is closed */
  unsigned int threads;     /* request threads */
  MHD_RequestCompletedCallback completed; /* or NULL: called when a request ends, to free its state */
  void *completed_cls;
} tool_https_limits;

/* Load @p cert (PEM chain) and @p key (PEM) and check that they belong
 * together, then watch both files (stat every @p poll_ms): a change that loads
 * and matches replaces the pair for new handshakes; one that does not (a
 * half-written rotation) keeps the old pair and is tried again. The key file's
 * bytes are wiped after use. 0, or -1 with the reason in @p err. */
int tool_tls_start(const char *cert, const char *key, long poll_ms, char *err, size_t errlen);

/* Pairs loaded so far (1 after tool_tls_start(); +1 per reload). */
unsigned long tool_tls_generation(void);

/* The last reload failure ("" when none since the last success); copied into @p buf. */
void tool_tls_last_error(char *buf, size_t size);

/* Stop watching and release every pair; after the servers are stopped. */
void tool_tls_stop(void);

/* Serve @p handler over HTTPS with the pair of tool_tls_start() on "ADDR:PORT"
 * ("[v6]:PORT" too). NULL when the address is malformed or cannot be bound. */
struct MHD_Daemon *tool_https_start(const char *addr_port, MHD_AccessHandlerCallback handler, void *cls,
                                    const tool_https_limits *limits);

#endif
