/* HTTP serving for the tools, on libmicrohttpd: one setup with the limits
 * that keep a slow or idle client from starving the server. */
#ifndef TURNFLEET_TOOL_HTTP_H
#define TURNFLEET_TOOL_HTTP_H

#include <microhttpd.h>

/* Serve @p handler on "ADDR:PORT" ("[v6]:PORT" too) with a connection limit
 * and a per-connection idle timeout. NULL when the address is malformed or
 * cannot be bound (errno set by libmicrohttpd where it says). */
struct MHD_Daemon *tool_http_start(const char *addr_port, MHD_AccessHandlerCallback handler, void *cls);

/* Queue a copy of @p body with @p code and Content-Type @p type. */
enum MHD_Result tool_http_reply(struct MHD_Connection *conn, unsigned int code, const char *type, const char *body);

#endif
