/* uri: RFC 7065 turn:/turns: URIs, parsed by hand (the RFC forbids a generic
 * hierarchical URI parser). Mirrors the reference parse_turn_uri(). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

struct tf_uri {
  int secure;
  char *host;
  tf_uri_host_type host_type;
  uint16_t port;
  int port_explicit;
  char *transport;
  int transport_explicit;
  tf_uri_mode mode;
};

static tf_err tf_uri__bad(const char *code, size_t at, const char *why)
{
  return tf_error__set(TF_EINVALID, "%s at byte %zu: %s", code, at, why);
}

static int tf_uri__alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static int tf_uri__digit(char c) { return c >= '0' && c <= '9'; }

static int tf_uri__hex(char c) { return tf_uri__digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* RFC 3986 unreserved */
static int tf_uri__unreserved(char c)
{
  return tf_uri__alpha(c) || tf_uri__digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static int tf_uri__sub_delim(char c) { return c != '\0' && strchr("!$&'()*+,;=", c) != NULL; }

/* reg-name = *( unreserved / pct-encoded / sub-delims ); returns the offset of the
 * first bad character, or n when all are good. */
static size_t tf_uri__reg_name_bad(const char *h, size_t n)
{
  size_t i = 0;
  while (i < n) {
    if (h[i] == '%') {
      if (i + 2 >= n || !tf_uri__hex(h[i + 1]) || !tf_uri__hex(h[i + 2])) return i;
      i += 3;
      continue;
    }
    if (!tf_uri__unreserved(h[i]) && !tf_uri__sub_delim(h[i])) return i;
    i++;
  }
  return n;
}

static size_t tf_uri__count(const char *s, size_t n, char c)
{
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += s[i] == c;
  return k;
}

static const char *tf_uri__memchr(const char *s, size_t n, char c) { return memchr(s, c, n); }

void tf_uri_free(tf_uri *uri)
{
  if (!uri) return;
  free(uri->host);
  free(uri->transport);
  free(uri);
}

tf_err tf_uri_parse(tf_uri **out, const char *text)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text);
  size_t len = strlen(text);
  const char *colon = strchr(text, ':');
  if (!colon) return tf_uri__bad("NO_SCHEME", len, "no \"turn:\" or \"turns:\" scheme");
  size_t slen = (size_t)(colon - text);
  int secure;
  if (slen == 4 && strncasecmp(text, "turn", 4) == 0)
    secure = 0;
  else if (slen == 5 && strncasecmp(text, "turns", 5) == 0)
    secure = 1;
  else
    return tf_uri__bad("BAD_SCHEME", 0, "the scheme must be \"turn\" or \"turns\"");
  const char *rest = colon + 1;
  size_t base = slen + 1; /* byte offset of rest in text */
  const char *hash = strchr(rest, '#');
  if (hash) return tf_uri__bad("FRAGMENT_NOT_ALLOWED", (size_t)(hash - text), "a TURN URI has no fragment");

  const char *q = strchr(rest, '?');
  size_t rlen = q ? (size_t)(q - rest) : strlen(rest);
  const char *transport = NULL;
  size_t tlen = 0;
  if (q) {
    if (strncasecmp(q + 1, "transport=", 10) != 0)
      return tf_uri__bad("BAD_QUERY", (size_t)(q - text) + 1, "the only query is \"?transport=\"");
    transport = q + 11;
    tlen = strlen(transport);
    if (tlen == 0) return tf_uri__bad("BAD_TRANSPORT", (size_t)(transport - text), "the transport is empty");
    for (size_t i = 0; i < tlen; i++)
      if (!tf_uri__unreserved(transport[i]))
        return tf_uri__bad("BAD_TRANSPORT", (size_t)(transport - text) + i,
                           "the transport must be unreserved characters only");
  }

  const char *host = rest, *port_s = NULL;
  size_t hlen = 0, plen = 0;
  tf_uri_host_type type;
  tf_addr addr;
  if (rlen > 0 && rest[0] == '[') {
    const char *end = tf_uri__memchr(rest, rlen, ']');
    if (!end) return tf_uri__bad("BAD_IP_LITERAL", base, "\"[\" without \"]\"");
    host = rest + 1;
    hlen = (size_t)(end - host);
    char buf[TF_ADDR_STRLEN];
    if (hlen >= sizeof(buf) || tf_uri__memchr(host, hlen, '%'))
      return tf_uri__bad("BAD_IP_LITERAL", base + 1, "not an IPv6 address (zone ids are not allowed)");
    memcpy(buf, host, hlen);
    buf[hlen] = '\0';
    if (inet_pton(AF_INET6, buf, addr.bytes) != 1)
      return tf_uri__bad("BAD_IP_LITERAL", base + 1, "not an IPv6 address");
    type = TF_URI_HOST_IPV6;
    const char *after = end + 1;
    size_t alen = rlen - (size_t)(after - rest);
    if (alen > 0) {
      if (after[0] != ':')
        return tf_uri__bad("BAD_HOSTPORT", (size_t)(after - text), "only \":port\" may follow the IP literal");
      port_s = after + 1;
      plen = alen - 1;
    }
  } else {
    const char *br = tf_uri__memchr(rest, rlen, '[');
    if (!br) br = tf_uri__memchr(rest, rlen, ']');
    if (br) return tf_uri__bad("BAD_IP_LITERAL", (size_t)(br - text), "brackets only around a whole IPv6 host");
    if (tf_uri__count(rest, rlen, ':') > 1)
      return tf_uri__bad("BAD_HOSTPORT", base, "more than one \":\" (an IPv6 host needs brackets)");
    const char *pc = tf_uri__memchr(rest, rlen, ':');
    hlen = pc ? (size_t)(pc - rest) : rlen;
    if (pc) {
      port_s = pc + 1;
      plen = rlen - hlen - 1;
    }
    if (hlen == 0) return tf_uri__bad("EMPTY_HOST", base, "the host is required");
    size_t bad = tf_uri__reg_name_bad(host, hlen);
    if (bad < hlen) return tf_uri__bad("BAD_HOST", base + bad, "character not allowed in a host name");
    char buf[TF_ADDR_STRLEN];
    type = TF_URI_HOST_NAME;
    if (hlen < sizeof(buf)) {
      memcpy(buf, host, hlen);
      buf[hlen] = '\0';
      if (inet_pton(AF_INET, buf, addr.bytes) == 1) type = TF_URI_HOST_IPV4;
    }
  }

  uint16_t port = secure ? 5349 : 3478;
  int port_explicit = 0;
  if (port_s && plen > 0) {
    unsigned long v = 0;
    for (size_t i = 0; i < plen; i++) {
      if (!tf_uri__digit(port_s[i]))
        return tf_uri__bad("BAD_PORT", (size_t)(port_s - text) + i, "the port must be decimal digits");
      if (v <= 65535) v = v * 10 + (unsigned long)(port_s[i] - '0');
    }
    if (v < 1 || v > 65535)
      return tf_uri__bad("PORT_OUT_OF_RANGE", (size_t)(port_s - text), "the port must be 1-65535");
    port = (uint16_t)v;
    port_explicit = 1;
  }

  tf_uri *u = calloc(1, sizeof(*u));
  if (!u) return tf_error__nomem();
  u->secure = secure;
  u->host = tf_strndup__(host, hlen);
  u->transport = transport ? tf_strndup__(transport, tlen) : tf_strdup__(secure ? "tcp" : "udp");
  if (!u->host || !u->transport) {
    tf_uri_free(u);
    return tf_error__nomem();
  }
  for (char *p = u->transport; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  u->host_type = type;
  u->port = port;
  u->port_explicit = port_explicit;
  u->transport_explicit = transport != NULL;
  int udp = strcmp(u->transport, "udp") == 0, tcp = strcmp(u->transport, "tcp") == 0;
  if (secure)
    u->mode = udp ? TF_URI_MODE_DTLS : tcp ? TF_URI_MODE_TLS : TF_URI_MODE_UNSUPPORTED;
  else
    u->mode = udp ? TF_URI_MODE_UDP : tcp ? TF_URI_MODE_TCP : TF_URI_MODE_UNSUPPORTED;
  *out = u;
  return TF_OK;
}

const char *tf_uri_scheme(const tf_uri *uri) { return uri && uri->secure ? "turns" : "turn"; }

int tf_uri_secure(const tf_uri *uri) { return uri ? uri->secure : 0; }

const char *tf_uri_host(const tf_uri *uri) { return uri ? uri->host : NULL; }

tf_uri_host_type tf_uri_host_kind(const tf_uri *uri) { return uri ? uri->host_type : TF_URI_HOST_NAME; }

uint16_t tf_uri_port(const tf_uri *uri) { return uri ? uri->port : 0; }

int tf_uri_port_explicit(const tf_uri *uri) { return uri ? uri->port_explicit : 0; }

const char *tf_uri_transport(const tf_uri *uri) { return uri ? uri->transport : NULL; }

int tf_uri_transport_explicit(const tf_uri *uri) { return uri ? uri->transport_explicit : 0; }

tf_uri_mode tf_uri_open_mode(const tf_uri *uri) { return uri ? uri->mode : TF_URI_MODE_UNSUPPORTED; }

tf_err tf_uri_format(char **out, int secure, const tf_addr *addr, uint16_t port, const char *transport)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(addr);
  TF_ASSERT_ARG(transport);
  if (strcmp(transport, "udp") != 0 && strcmp(transport, "tcp") != 0)
    return tf_error__set(TF_EINVALID, "transport: must be \"udp\" or \"tcp\"");
  if (port == 0) return tf_error__set(TF_EINVALID, "port: must be 1-65535");
  char host[TF_ADDR_STRLEN];
  tf_err rc = tf_addr_format(host, sizeof(host), addr);
  if (rc < 0) return rc;
  int v6 = addr->family == TF_AF_INET6;
  char *s = tf_asprintf__("%s:%s%s%s:%u?transport=%s", secure ? "turns" : "turn", v6 ? "[" : "", host, v6 ? "]" : "",
                          (unsigned)port, transport);
  if (!s) return tf_error__nomem();
  *out = s;
  return TF_OK;
}
