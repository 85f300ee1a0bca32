/* HTTP serving for the tools, on libmicrohttpd: one setup with the limits
 * that keep a slow or idle client from starving the server. */
#ifndef TURNFLEET_TOOL_HTTP_H
#define TURNFLEET_TOOL_HTTP_H

#include <microhttpd.h>

/* Serve @p handler on "ADDR:PORT" ("[v6]:PORT" too) with a connection limit
 * (256), a limit per client address (8: a flood from one address is refused
 * past it, the others are served) and a per-connection idle timeout (5 s). NULL when the address is malformed or
 * cannot be bound (errno set by libmicrohttpd where it says). */
struct MHD_Daemon *tool_http_start(const char *addr_port, MHD_AccessHandlerCallback handler, void *cls);

/* Parse "ADDR:PORT" ("[v6]:PORT" too) into @p ss; *v6 is 1 for IPv6. 0, or -1 when malformed. */
struct sockaddr_storage;
int tool_http_sockaddr(const char *addr_port, struct sockaddr_storage *ss, int *v6);

/* Queue a copy of @p body with @p code and Content-Type @p type. */
enum MHD_Result tool_http_reply(struct MHD_Connection *conn, unsigned int code, const char *type, const char *body);

#endif
