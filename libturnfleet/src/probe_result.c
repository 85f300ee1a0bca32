/* probe results: accessors, the exit code and the JSON object. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_internal.h"

static const char *const stage_names[TF_PROBE_STAGE_COUNT] = {
    "resolve", "connect", "tls", "allocate", "verify", "permission", "channel", "data", "release", "done"};

const char *tf_probe_stage_name(tf_probe_stage stage)
{
  if ((int)stage < 0 || (int)stage >= TF_PROBE_STAGE_COUNT) return "unknown";
  return stage_names[stage];
}

tf_probe_result *tf_probe__result_new(const char *uri)
{
  /* one allocation: the URI lives right after the struct; reason and message stay NULL ("")
   * until a failure sets them */
  size_t n = strlen(uri ? uri : "");
  tf_probe_result *r = calloc(1, sizeof(*r) + n + 1);
  if (!r) return NULL;
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

/* Decimal text of @p v into the end of @p t[24]; returns the first digit. */
static char *json_uint(char t[24], uint64_t v)
{
  char *d = t + 23;
  *d = '\0';
  do {
    *--d = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return d;
}

static void json_num(tf_buf *b, const char *key, uint64_t v)
{
  char t[24];
  tf_buf__puts(b, key);
  tf_buf__puts(b, json_uint(t, v));
}

static void json_addr(tf_buf *b, const char *key, int has, const tf_addr *a)
{
  char text[TF_ADDR_STRLEN];
  tf_buf__puts(b, key);
  if (has && a->family == TF_AF_INET) {
    /* dotted quad, the canonical form, without inet_ntop's sprintf */
    char t[24], *o = text;
    *o++ = '"';
    for (int i = 0; i < 4; i++) {
      const char *d = json_uint(t, a->bytes[i]);
      while (*d) *o++ = *d++;
      *o++ = i < 3 ? '.' : '"';
    }
    *o = '\0';
    tf_buf__puts(b, text);
  } else if (!has || tf_addr_format(text, sizeof(text), a) < 0) {
    tf_buf__puts(b, "null");
  } else {
    tf_buf__json_str(b, text);
  }
}

/* Milliseconds to the microsecond, without trailing zeros: 1.619, 0, 12.5. */
static void json_ms(tf_buf *b, double ms)
{
  char t[24], frac[5];
  uint64_t us = ms > 0 && ms < 1e15 ? (uint64_t)llround(ms * 1000.0) : 0;
  tf_buf__puts(b, json_uint(t, us / 1000));
  unsigned f = (unsigned)(us % 1000);
  if (!f) return;
  frac[0] = '.';
  frac[1] = (char)('0' + f / 100);
  frac[2] = (char)('0' + f / 10 % 10);
  frac[3] = (char)('0' + f % 10);
  frac[4] = '\0';
  for (int i = 3; frac[i] == '0'; i--) frac[i] = '\0';
  tf_buf__puts(b, frac);
}

tf_err tf_probe_result_to_json(char **out, const tf_probe_result *result)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(result);
  /* every string in a result is printable UTF-8 (tf_probe__printable): the text is valid JSON.
   * Written piece by piece, no printf: --count prints one per probe. */
  tf_buf b;
  tf_buf__init(&b);
  b.ptr = malloc(512); /* a success fits: no regrowth */
  if (b.ptr) {
    b.cap = 512;
    b.ptr[0] = '\0';
  }
  tf_buf__puts(&b, "{\"uri\":");
  tf_buf__json_str(&b, result->uri);
  tf_buf__puts(&b, tf_probe_result_ok(result) ? ",\"ok\":true,\"stage\":\"" : ",\"ok\":false,\"stage\":\"");
  tf_buf__puts(&b, tf_probe_stage_name(result->stage));
  tf_buf__puts(&b, "\"");
  if (result->error_code < 0) tf_buf__puts(&b, ",\"errorCode\":0");
  else json_num(&b, ",\"errorCode\":", (uint64_t)result->error_code);
  tf_buf__puts(&b, ",\"errorReason\":");
  tf_buf__json_str(&b, tf_probe_result_error_reason(result));
  json_addr(&b, ",\"relayedAddress\":", result->has_relayed, &result->relayed);
  if (result->has_relayed) json_num(&b, ",\"relayedPort\":", result->relayed_port);
  else tf_buf__puts(&b, ",\"relayedPort\":null");
  json_addr(&b, ",\"mappedAddress\":", result->has_mapped, &result->mapped);
  json_num(&b, ",\"lifetime\":", result->lifetime);
  tf_buf__puts(&b, ",\"rttMs\":{");
  int first = 1;
  for (int i = 0; i < TF_PROBE_STAGE_COUNT; i++) {
    if (result->rtt[i] < 0) continue;
    tf_buf__puts(&b, first ? "\"" : ",\"");
    tf_buf__puts(&b, stage_names[i]);
    tf_buf__puts(&b, "\":");
    json_ms(&b, result->rtt[i]);
    first = 0;
  }
  tf_buf__puts(&b, result->draining ? "},\"draining\":true,\"message\":" : "},\"draining\":false,\"message\":");
  tf_buf__json_str(&b, tf_probe_result_message(result));
  tf_buf__puts(&b, "}");
  return tf_buf__detach(&b, out);
}
