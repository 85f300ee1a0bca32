/* See tool_http.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tool_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#define TOOL_HTTP_CONNECTIONS 256 /* at once; more wait in the kernel's backlog, refused past it */
#define TOOL_HTTP_PER_IP 8        /* at once from one client address: one client cannot take every slot */
#define TOOL_HTTP_IDLE_S 5        /* an idle (or half-open: no request yet) connection is closed after this */

int tool_http_sockaddr(const char *addr_port, struct sockaddr_storage *ss, int *is_v6)
{
  memset(ss, 0, sizeof(*ss));
  char host[128];
  const char *colon = strrchr(addr_port, ':');
  if (!colon || (size_t)(colon - addr_port) >= sizeof(host)) return -1;
  memcpy(host, addr_port, (size_t)(colon - addr_port));
  host[colon - addr_port] = '\0';
  char *h = host, *end;
  size_t hl = strlen(h);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') h[hl - 1] = '\0', h++;
  long port = strtol(colon + 1, &end, 10);
  if (*end || end == colon + 1 || port < 0 || port > 65535) return -1;
  struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    *is_v6 = 0;
  } else if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    *is_v6 = 1;
  } else {
    return -1;
  }
  return 0;
}

struct MHD_Daemon *tool_http_start(const char *addr_port, MHD_AccessHandlerCallback handler, void *cls)
{
  struct sockaddr_storage ss;
  int v6;
  if (tool_http_sockaddr(addr_port, &ss, &v6) < 0) return NULL;
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | (v6 ? MHD_USE_IPv6 : 0);
  return MHD_start_daemon(flags, 0, NULL, NULL, handler, cls, MHD_OPTION_SOCK_ADDR,
                          (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)TOOL_HTTP_CONNECTIONS,
                          MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)TOOL_HTTP_PER_IP,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)TOOL_HTTP_IDLE_S, MHD_OPTION_END);
}

enum MHD_Result tool_http_reply(struct MHD_Connection *conn, unsigned int code, const char *type, const char *body)
{
  struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, "Content-Type", type);
  enum MHD_Result rc = MHD_queue_response(conn, code, resp);
  MHD_destroy_response(resp);
  return rc;
}
