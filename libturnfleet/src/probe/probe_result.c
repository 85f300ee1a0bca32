/* probe results: accessors, the exit code and the JSON object. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_internal.h"

/* names padded to 16 bytes: each is written with one fixed-size copy */
#define STAGE(name) {name, sizeof(name) - 1}
static const struct {
  char name[16];
  size_t len;
} stages[TF_PROBE_STAGE_COUNT] = {STAGE("resolve"),    STAGE("connect"), STAGE("tls"),  STAGE("allocate"),
                                  STAGE("verify"),     STAGE("permission"), STAGE("channel"), STAGE("data"),
                                  STAGE("release"),    STAGE("done")};

const char *tf_probe_stage_name(tf_probe_stage stage)
{
  if ((int)stage < 0 || (int)stage >= TF_PROBE_STAGE_COUNT) return "unknown";
  return stages[stage].name;
}

tf_probe_result *tf_probe__result_new(const char *uri)
{
  /* one allocation: the URI lives right after the struct; reason and message stay NULL ("")
   * until a failure sets them */
  size_t n = strlen(uri ? uri : "");
  /* malloc, not calloc: glibc's calloc skips its per-thread cache, and a load test makes and
   * frees one result per probe */
  tf_probe_result *r = malloc(sizeof(*r) + n + 1);
  if (!r) return NULL;
  memset(r, 0, sizeof(*r));
  r->uri = (char *)(r + 1);
  memcpy(r->uri, uri ? uri : "", n + 1);
  r->stage = TF_PROBE_STAGE_RESOLVE;
  r->status = TF_OK;
  for (int i = 0; i < TF_PROBE_STAGE_COUNT; i++) r->rtt[i] = -1.0;
  return r;
}

/* Length of the valid UTF-8 sequence at @p s (shortest form, no surrogates), 0 if none. */
static size_t utf8_len(const unsigned char *s)
{
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4) return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (n == 3 && c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
  if (n == 3 && c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
  if (n == 4 && c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
  if (n == 4 && c == 0xF4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
  return n;
}

char *tf_probe__printable(const char *text)
{
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  size_t len = strlen((const char *)s);
  char *out = malloc(4 * len + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < len;) {
    size_t n = s[i] >= 0x20 && s[i] != 0x7F ? utf8_len(s + i) : 0;
    if (n == 0) {
      o += (size_t)snprintf(out + o, 5, "\\x%02X", s[i]);
      i++;
      continue;
    }
    memcpy(out + o, s + i, n);
    o += n;
    i += n;
  }
  out[o] = '\0';
  return out;
}

void tf_probe_result_free(tf_probe_result *result)
{
  if (!result) return;
  free(result->error_reason);
  free(result->message);
  free(result);
}

int tf_probe_result_ok(const tf_probe_result *result)
{
  return result && result->status == TF_OK && result->stage == TF_PROBE_STAGE_DONE;
}

tf_probe_stage tf_probe_result_stage(const tf_probe_result *result)
{
  return result ? result->stage : TF_PROBE_STAGE_RESOLVE;
}

tf_err tf_probe_result_status(const tf_probe_result *result) { return result ? result->status : TF_EINVALID; }

int tf_probe_result_error_code(const tf_probe_result *result) { return result ? result->error_code : 0; }

const char *tf_probe_result_error_reason(const tf_probe_result *result)
{
  return result && result->error_reason ? result->error_reason : "";
}

const char *tf_probe_result_message(const tf_probe_result *result)
{
  return result && result->message ? result->message : "";
}

int tf_probe_result_draining(const tf_probe_result *result) { return result ? result->draining : 0; }

const char *tf_probe_result_uri(const tf_probe_result *result) { return result ? result->uri : ""; }

tf_err tf_probe_result_relayed(const tf_probe_result *result, tf_addr *addr, uint16_t *port)
{
  TF_ASSERT_ARG(result);
  if (!result->has_relayed) return tf_error__set(TF_ENOTFOUND, "the probe made no allocation");
  if (addr) *addr = result->relayed;
  if (port) *port = result->relayed_port;
  return TF_OK;
}

tf_err tf_probe_result_mapped(const tf_probe_result *result, tf_addr *addr, uint16_t *port)
{
  TF_ASSERT_ARG(result);
  if (!result->has_mapped) return tf_error__set(TF_ENOTFOUND, "the probe got no mapped address");
  if (addr) *addr = result->mapped;
  if (port) *port = result->mapped_port;
  return TF_OK;
}

uint32_t tf_probe_result_lifetime(const tf_probe_result *result) { return result ? result->lifetime : 0; }

double tf_probe_result_rtt_ms(const tf_probe_result *result, tf_probe_stage stage)
{
  if (!result || (int)stage < 0 || (int)stage >= TF_PROBE_STAGE_COUNT) return -1.0;
  return result->rtt[stage];
}

int tf_probe_result_exit_code(const tf_probe_result *result)
{
  if (!result) return 2;
  if (tf_probe_result_ok(result)) return 0;
  if (result->status == TF_ERESOURCE) return 2;
  if (result->status == TF_ETIMEOUT || result->status == TF_ENET) return 3;
  return 1;
}

/* ---- JSON, written straight into one block sized for the worst case: --count prints one
 * object per probe, so no printf, no regrowth, no second pass ---- */

#define JSON_FIXED 704 /* every part but the three strings: 627 bytes at most, and room for put_short()'s 16 */
/* a literal's length is known: the copy compiles to a few moves */
#define put_lit(o, lit) ((char *)memcpy(o, lit, sizeof(lit) - 1) + sizeof(lit) - 1)

/* Short runs (names, digits) of at most 16 bytes, from a source of at least 16 readable bytes:
 * one fixed-size copy, of which the first @p n bytes count (the block has room for the rest). */
static char *put_short(char *o, const char *s, size_t n)
{
  memcpy(o, s, 16);
  return o + n;
}

/* Decimal text of @p v, written in place from its last digit. */
static char *put_uint(char *o, uint64_t v)
{
  size_t n = 1;
  for (uint64_t t = v; t >= 10; t /= 10) n++;
  for (size_t i = n; i-- > 0; v /= 10) o[i] = (char)('0' + v % 10);
  return o + n;
}

/* Nonzero exactly when one of the eight bytes of @p x is below 0x20, '"' or '\\': what a JSON
 * string escapes (the SWAR tests for a byte below n and a zero byte). Such a chunk is
 * written byte by byte. */
static uint64_t needs_escape(uint64_t x)
{
  const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
  uint64_t quote = x ^ (ones * '"'), slash = x ^ (ones * '\\');
  /* a byte below 0x20, and a zero byte of each XOR: nonzero exactly when one exists */
  return (((x - ones * 0x20) & ~x) | ((quote - ones) & ~quote) | ((slash - ones) & ~slash)) & high;
}

/* A JSON string of the @p n bytes at @p s: '"' and '\\' escaped, \n \t \r by name, other
 * control bytes as \u00XX (at most 6 bytes out per byte in). Clean runs go eight at a time. */
static char *put_str(char *o, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  *o++ = '"';
  size_t i = 0;
  while (i < n) {
    if (n - i >= 8) {
      uint64_t x;
      memcpy(&x, s + i, 8);
      if (!needs_escape(x)) {
        memcpy(o, &x, 8);
        o += 8;
        i += 8;
        continue;
      }
    }
    size_t end = n - i >= 8 ? i + 8 : n;
    for (; i < end; i++) {
      unsigned ch = (unsigned char)s[i];
      if (ch >= 0x20 && ch != '"' && ch != '\\') {
        *o++ = (char)ch;
        continue;
      }
      *o++ = '\\';
      switch (ch) {
      case '"': *o++ = '"'; break;
      case '\\': *o++ = '\\'; break;
      case '\n': *o++ = 'n'; break;
      case '\t': *o++ = 't'; break;
      case '\r': *o++ = 'r'; break;
      default:
        o = put_lit(o, "u00");
        *o++ = hex[ch >> 4];
        *o++ = hex[ch & 15];
        break;
      }
    }
  }
  *o++ = '"';
  return o;
}

static char *put_addr(char *o, int has, const tf_addr *a)
{
  if (has && a->family == TF_AF_INET) {
    /* dotted quad, the canonical form, without inet_ntop's sprintf */
    *o++ = '"';
    for (int i = 0; i < 4; i++) {
      o = put_uint(o, a->bytes[i]);
      *o++ = i < 3 ? '.' : '"';
    }
    return o;
  }
  char text[TF_ADDR_STRLEN];
  if (!has || tf_addr_format(text, sizeof(text), a) < 0) return put_lit(o, "null");
  return put_str(o, text, strlen(text));
}

/* Milliseconds to the microsecond, without trailing zeros: 1.619, 0, 12.5 (half a
 * microsecond rounds up, as llround() would for these positive values). */
static char *put_ms(char *o, double ms)
{
  uint64_t us = ms > 0 && ms < 1e15 ? (uint64_t)(ms * 1000.0 + 0.5) : 0;
  o = put_uint(o, us / 1000);
  unsigned f = (unsigned)(us % 1000);
  if (!f) return o;
  char frac[16] = {'.', (char)('0' + f / 100), (char)('0' + f / 10 % 10), (char)('0' + f % 10)};
  size_t n = 4;
  while (frac[n - 1] == '0') n--;
  return put_short(o, frac, n);
}

tf_err tf_probe_result_to_json(char **out, const tf_probe_result *result)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(result);
  /* every string in a result is printable UTF-8 (tf_probe__printable): the text is valid JSON */
  const char *reason = tf_probe_result_error_reason(result), *message = tf_probe_result_message(result);
  size_t uri_len = strlen(result->uri), reason_len = strlen(reason), message_len = strlen(message);
  char *text = malloc(6 * (uri_len + reason_len + message_len) + JSON_FIXED), *o = text;
  if (!text) return tf_error__nomem();
  o = put_lit(o, "{\"uri\":");
  o = put_str(o, result->uri, uri_len);
  if (tf_probe_result_ok(result)) o = put_lit(o, ",\"ok\":true,\"stage\":\"");
  else o = put_lit(o, ",\"ok\":false,\"stage\":\"");
  int st = (int)result->stage >= 0 && (int)result->stage < TF_PROBE_STAGE_COUNT ? (int)result->stage : -1;
  o = st < 0 ? put_lit(o, "unknown") : put_short(o, stages[st].name, stages[st].len);
  o = put_lit(o, "\",\"errorCode\":");
  o = put_uint(o, result->error_code < 0 ? 0 : (uint64_t)result->error_code);
  o = put_lit(o, ",\"errorReason\":");
  o = put_str(o, reason, reason_len);
  o = put_lit(o, ",\"relayedAddress\":");
  o = put_addr(o, result->has_relayed, &result->relayed);
  o = put_lit(o, ",\"relayedPort\":");
  if (result->has_relayed) o = put_uint(o, result->relayed_port);
  else o = put_lit(o, "null");
  o = put_lit(o, ",\"mappedAddress\":");
  o = put_addr(o, result->has_mapped, &result->mapped);
  o = put_lit(o, ",\"lifetime\":");
  o = put_uint(o, result->lifetime);
  o = put_lit(o, ",\"rttMs\":{");
  int first = 1;
  for (int i = 0; i < TF_PROBE_STAGE_COUNT; i++) {
    if (result->rtt[i] < 0) continue;
    if (!first) *o++ = ',';
    *o++ = '"';
    o = put_short(o, stages[i].name, stages[i].len);
    o = put_lit(o, "\":");
    o = put_ms(o, result->rtt[i]);
    first = 0;
  }
  if (result->draining) o = put_lit(o, "},\"draining\":true,\"message\":");
  else o = put_lit(o, "},\"draining\":false,\"message\":");
  o = put_str(o, message, message_len);
  *o++ = '}';
  *o = '\0';
  *out = text;
  return TF_OK;
}
