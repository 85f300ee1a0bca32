/* addr: IPv4/IPv6 addresses, prefixes and port ranges. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

tf_err tf_addr_parse(tf_addr *out, const char *text)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text);
  tf_addr a;
  memset(&a, 0, sizeof(a));
  if (inet_pton(AF_INET, text, a.bytes) == 1) {
    a.family = TF_AF_INET;
  } else if (inet_pton(AF_INET6, text, a.bytes) == 1) {
    a.family = TF_AF_INET6;
  } else {
    return tf_error__set(TF_EINVALID, "\"%.64s\" is not an IPv4 or IPv6 address", text);
  }
  *out = a;
  return TF_OK;
}

tf_err tf_addr_format(char *buf, size_t size, const tf_addr *addr)
{
  TF_ASSERT_ARG(buf);
  TF_ASSERT_ARG(addr);
  char tmp[TF_ADDR_STRLEN];
  int af = addr->family == TF_AF_INET ? AF_INET : addr->family == TF_AF_INET6 ? AF_INET6 : -1;
  if (af < 0) return tf_error__set(TF_EINVALID, "address family %u is not 4 or 6", addr->family);
  if (!inet_ntop(af, addr->bytes, tmp, sizeof(tmp))) return tf_error__set(TF_EINVALID, "cannot format address");
  size_t n = strlen(tmp);
  if (n + 1 > size) return tf_error__set(TF_EBUFS, "address needs %zu bytes, buffer has %zu", n + 1, size);
  memcpy(buf, tmp, n + 1);
  return TF_OK;
}

int tf_addr_compare(const tf_addr *a, const tf_addr *b)
{
  if (a->family != b->family) return a->family < b->family ? -1 : 1;
  return memcmp(a->bytes, b->bytes, a->family == TF_AF_INET ? 4 : 16);
}

static unsigned tf_addr__bits(const tf_addr *a) { return a->family == TF_AF_INET ? 32u : 128u; }

tf_err tf_prefix_parse(tf_prefix *out, const char *text)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text);
  const char *slash = strchr(text, '/');
  char host[TF_ADDR_STRLEN];
  size_t hl = slash ? (size_t)(slash - text) : strlen(text);
  if (hl == 0 || hl >= sizeof(host))
    return tf_error__set(TF_EINVALID, "\"%.64s\" is not an address or CIDR prefix", text);
  memcpy(host, text, hl);
  host[hl] = '\0';
  tf_prefix p;
  memset(&p, 0, sizeof(p));
  if (tf_addr_parse(&p.addr, host) < 0)
    return tf_error__set(TF_EINVALID, "\"%.64s\" is not an address or CIDR prefix", text);
  unsigned max = tf_addr__bits(&p.addr);
  p.bits = (uint8_t)max;
  if (slash) {
    const char *d = slash + 1;
    char *end = NULL;
    if (*d < '0' || *d > '9') return tf_error__set(TF_EINVALID, "\"%.64s\": prefix length is not a number", text);
    errno = 0;
    unsigned long bits = strtoul(d, &end, 10);
    if (errno || *end || bits > max)
      return tf_error__set(TF_EINVALID, "\"%.64s\": prefix length must be 0-%u", text, max);
    p.bits = (uint8_t)bits;
  }
  for (unsigned i = p.bits; i < max; i++) {
    if (p.addr.bytes[i / 8] & (0x80u >> (i % 8)))
      return tf_error__set(TF_EINVALID, "\"%.64s\" has host bits set", text);
  }
  *out = p;
  return TF_OK;
}

int tf_prefix_contains(const tf_prefix *prefix, const tf_addr *addr)
{
  if (!prefix || !addr || prefix->addr.family != addr->family) return 0;
  for (unsigned i = 0; i < prefix->bits; i++) {
    uint8_t m = (uint8_t)(0x80u >> (i % 8));
    if ((prefix->addr.bytes[i / 8] & m) != (addr->bytes[i / 8] & m)) return 0;
  }
  return 1;
}

void tf_prefix_bounds(const tf_prefix *prefix, tf_addr *first, tf_addr *last)
{
  if (!prefix) return;
  tf_addr lo = prefix->addr, hi = prefix->addr;
  unsigned max = tf_addr__bits(&prefix->addr);
  for (unsigned i = prefix->bits; i < max; i++) {
    uint8_t m = (uint8_t)(0x80u >> (i % 8));
    lo.bytes[i / 8] &= (uint8_t)~m;
    hi.bytes[i / 8] |= m;
  }
  if (first) *first = lo;
  if (last) *last = hi;
}

static int tf_port__parse(const char *s, size_t n, uint16_t *out)
{
  unsigned long v = 0;
  if (n == 0 || n > 5) return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (unsigned long)(s[i] - '0');
  }
  if (v < 1 || v > 65535) return -1;
  *out = (uint16_t)v;
  return 0;
}

tf_err tf_port_range_parse(tf_port_range *out, const char *text)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text);
  const char *dash = strchr(text, '-');
  tf_port_range r;
  if (!dash || tf_port__parse(text, (size_t)(dash - text), &r.start) < 0 ||
      tf_port__parse(dash + 1, strlen(dash + 1), &r.end) < 0)
    return tf_error__set(TF_EINVALID, "\"%.64s\" is not a port range START-END (ports 1-65535)", text);
  if (r.end < r.start)
    return tf_error__set(TF_EINVALID, "\"%.64s\": end %u is below start %u", text, r.end, r.start);
  *out = r;
  return TF_OK;
}

uint32_t tf_port_range_size(tf_port_range range)
{
  return range.end < range.start ? 0u : (uint32_t)range.end - range.start + 1u;
}

/* One item of an address list into out[*n...]; the next address is the last plus one, with carry. */
static tf_err tf_addr__list_item(tf_addr *out, size_t max, size_t *n, char *item, size_t index)
{
  tf_prefix pre;
  tf_addr a;
  unsigned long count;
  if (strchr(item, '/')) {
    if (tf_prefix_parse(&pre, item) < 0 || (pre.addr.family == TF_AF_INET ? 32 : 128) - pre.bits > 8)
      return tf_error__set(TF_EINVALID, "item %zu \"%.64s\": not a prefix of at most 256 addresses", index, item);
    a = pre.addr;
    count = 1ul << ((pre.addr.family == TF_AF_INET ? 32 : 128) - pre.bits);
  } else {
    char *dash = strrchr(item, '-'), *end = NULL;
    int v6 = strchr(item, ':') != NULL;
    unsigned long last = dash ? strtoul(dash + 1, &end, v6 ? 16 : 10) : 0;
    int ok = !dash || (end != dash + 1 && !*end);
    if (dash) *dash = '\0';
    if (!ok || tf_addr_parse(&a, item) < 0)
      return tf_error__set(TF_EINVALID, "item %zu \"%.64s\": not an address or ADDR-LAST range", index, item);
    unsigned long first = v6 ? ((unsigned long)a.bytes[14] << 8 | a.bytes[15]) : a.bytes[3];
    if (!dash) last = first;
    if (last < first || last > (v6 ? 65535ul : 255ul) || last - first > 255)
      return tf_error__set(TF_EINVALID, "item %zu \"%.64s\": the range must go up, by at most 256", index, item);
    count = last - first + 1;
  }
  for (unsigned long k = 0; k < count; k++) {
    if (*n == max) return tf_error__set(TF_EBUFS, "more than %zu addresses", max);
    out[(*n)++] = a;
    for (int b = a.family == TF_AF_INET ? 3 : 15; b >= 0 && ++a.bytes[b] == 0; b--) {
    }
  }
  return TF_OK;
}

tf_err tf_addr_list_parse(tf_addr *out, size_t max, size_t *count, const char *text)
{
  TF_ASSERT_ARG(out || max == 0);
  TF_ASSERT_ARG(count);
  TF_ASSERT_ARG(text);
  *count = 0;
  char *copy = tf_strdup__(text), *save = NULL;
  if (!copy) return tf_error__nomem();
  tf_err rc = TF_OK;
  size_t index = 0;
  for (char *item = strtok_r(copy, ",", &save); item && rc == TF_OK; item = strtok_r(NULL, ",", &save)) {
    while (*item == ' ') item++;
    rc = tf_addr__list_item(out, max, count, item, index++);
  }
  free(copy);
  if (rc == TF_OK && *count == 0) rc = tf_error__set(TF_EINVALID, "the list holds no address");
  return rc;
}
