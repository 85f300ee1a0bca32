/* stun: RFC 5769 vectors, the captured coturn 4.6.1 exchanges, the malformed
 * response corpus, the encoder, ChannelData and stream framing, and a decoder
 * that never reads past its buffer (every vector truncated and flipped). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_test.h"
#include "tf_vectors.h"

static int method_code(const char *name)
{
  static const struct {
    const char *name;
    int code;
  } methods[] = {{"Binding", TF_STUN_BINDING},
                 {"Allocate", TF_STUN_ALLOCATE},
                 {"Refresh", TF_STUN_REFRESH},
                 {"Send", TF_STUN_SEND},
                 {"Data", TF_STUN_DATA},
                 {"CreatePermission", TF_STUN_CREATE_PERMISSION},
                 {"ChannelBind", TF_STUN_CHANNEL_BIND}};
  for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
    if (strcmp(methods[i].name, name) == 0) return methods[i].code;
  ck_abort_msg("unknown method %s", name);
  return -1;
}

/* The reason code of the last error: the text before " at byte ". Checks the
 * "CODE at byte N: why" form and that N is within the message. */
static const char *last_reason(size_t len)
{
  static char code[64];
  const char *msg = tf_error_last()->message;
  const char *at = strstr(msg, " at byte ");
  ck_assert_msg(at != NULL, "message without a byte offset: %s", msg);
  size_t n = (size_t)(at - msg);
  ck_assert_msg(n > 0 && n < sizeof(code), "bad reason code in: %s", msg);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg((msg[i] >= 'A' && msg[i] <= 'Z') || msg[i] == '_' || (msg[i] >= '0' && msg[i] <= '9'),
                  "bad reason code in: %s", msg);
  memcpy(code, msg, n);
  code[n] = '\0';
  char *end = NULL;
  unsigned long off = strtoul(at + 9, &end, 10);
  ck_assert_msg(end && end[0] == ':' && end[1] == ' ', "bad offset in: %s", msg);
  ck_assert_msg(off <= len, "offset %lu past the message (%zu bytes): %s", off, len, msg);
  return code;
}

static void assert_hex(const uint8_t *p, size_t n, const char *want, const char *what)
{
  char *got = tf_vec_hex(p, n);
  ck_assert_msg(strcmp(got, want) == 0, "%s: %s != %s", what, got, want);
  free(got);
}

/* ---- RFC 5769 ---- */

START_TEST(test_stun__rfc5769_vectors)
{
  tf_vectors v = tf_vectors_load("rfc5769.jsonl");
  ck_assert_int_eq(v.count, 4);
  for (size_t i = 0; i < v.count; i++) {
    const cJSON *o = v.items[i];
    const char *id = tf_vec_id(o);
    size_t n = 0;
    uint8_t *buf = tf_vec_unhex(tf_vec_str(o, "hex"), &n);
    ck_assert_int_eq(n, cJSON_GetObjectItem(o, "length")->valueint);
    tf_stun_msg *m = NULL;
    TF_OK_OR_FAIL(tf_stun_decode(&m, buf, n));

    char type[8];
    snprintf(type, sizeof(type), "0x%04x", (unsigned)((buf[0] << 8) | buf[1]));
    ck_assert_str_eq(type, tf_vec_str(o, "msg_type"));
    ck_assert_int_eq(tf_stun_msg_method(m), method_code(tf_vec_str(o, "method")));
    const char *cls = tf_vec_str(o, "cls");
    ck_assert_int_eq(tf_stun_msg_class(m), strcmp(cls, "request") == 0 ? TF_STUN_REQUEST : TF_STUN_SUCCESS);
    assert_hex(tf_stun_msg_tid(m), TF_STUN_TID_SIZE, tf_vec_str(o, "tid"), id);

    /* attribute types in wire order */
    char types[256] = "";
    for (size_t k = 0; k < tf_stun_msg_attr_count(m); k++) {
      uint16_t t = 0;
      TF_OK_OR_FAIL(tf_stun_msg_attr(m, k, &t, NULL, NULL));
      snprintf(types + strlen(types), sizeof(types) - strlen(types), "%s0x%04x", k ? "," : "", t);
    }
    ck_assert_str_eq(types, tf_vec_str(o, "attr_types"));

    const struct {
      const char *field;
      uint16_t type;
    } texts[] = {{"software", TF_STUN_ATTR_SOFTWARE},
                 {"username", TF_STUN_ATTR_USERNAME},
                 {"realm", TF_STUN_ATTR_REALM},
                 {"nonce", TF_STUN_ATTR_NONCE}};
    for (size_t k = 0; k < 4; k++) {
      const char *want = tf_vec_str(o, texts[k].field);
      char *got = NULL;
      if (!want) {
        ck_assert_int_eq(tf_stun_msg_text(&got, m, texts[k].type), TF_ENOTFOUND);
        continue;
      }
      TF_OK_OR_FAIL(tf_stun_msg_text(&got, m, texts[k].type));
      ck_assert_str_eq(got, want);
      tf_free(got);
    }

    if (tf_vec_str(o, "xor_mapped_ip")) {
      tf_addr a, want;
      uint16_t port = 0;
      char text[TF_ADDR_STRLEN];
      TF_OK_OR_FAIL(tf_stun_msg_address(m, TF_STUN_ATTR_XOR_MAPPED_ADDRESS, 0, &a, &port));
      TF_OK_OR_FAIL(tf_addr_format(text, sizeof(text), &a));
      TF_OK_OR_FAIL(tf_addr_parse(&want, tf_vec_str(o, "xor_mapped_ip")));
      ck_assert_str_eq(text, tf_vec_str(o, "xor_mapped_ip"));
      ck_assert_int_eq(tf_addr_compare(&a, &want), 0);
      ck_assert_int_eq(port, cJSON_GetObjectItem(o, "xor_mapped_port")->valueint);
      ck_assert_int_eq(tf_stun_msg_address(m, TF_STUN_ATTR_XOR_MAPPED_ADDRESS, 1, &a, &port), TF_ENOTFOUND);
    }

    /* FINGERPRINT: decoding checked it; compare the value too */
    const cJSON *fpv = cJSON_GetObjectItem(o, "fingerprint_valid");
    const uint8_t *val = NULL;
    size_t vlen = 0;
    if (cJSON_IsTrue(fpv)) {
      TF_OK_OR_FAIL(tf_stun_msg_find(m, TF_STUN_ATTR_FINGERPRINT, &val, &vlen));
      ck_assert_int_eq(vlen, 4);
      assert_hex(val, vlen, tf_vec_str(o, "fingerprint_hex"), id);
      /* a flipped FINGERPRINT bit is caught */
      buf[n - 1] ^= 1;
      ck_assert_int_eq(tf_stun_decode(&(tf_stun_msg *){NULL}, buf, n), TF_EPROTO);
      ck_assert_str_eq(last_reason(n), "FINGERPRINT_MISMATCH");
      buf[n - 1] ^= 1;
    } else {
      ck_assert_msg(cJSON_IsNull(fpv), "%s: fingerprint_valid", id);
      ck_assert_int_eq(tf_stun_msg_find(m, TF_STUN_ATTR_FINGERPRINT, &val, &vlen), TF_ENOTFOUND);
    }
    TF_OK_OR_FAIL(tf_stun_msg_find(m, TF_STUN_ATTR_MESSAGE_INTEGRITY, &val, &vlen));
    assert_hex(val, vlen, tf_vec_str(o, "mi_hex"), id);

    /* MESSAGE-INTEGRITY with the short-term password or the long-term key; a wrong key fails */
    uint8_t key[64];
    size_t klen;
    if (strcmp(tf_vec_str(o, "credential"), "short-term") == 0) {
      klen = strlen(tf_vec_str(o, "password"));
      memcpy(key, tf_vec_str(o, "password"), klen);
    } else {
      size_t kn = 0;
      uint8_t *k = tf_vec_unhex(tf_vec_str(o, "key_hex"), &kn);
      uint8_t derived[TF_STUN_KEY_SIZE];
      TF_OK_OR_FAIL(tf_stun_long_term_key(derived, tf_vec_str(o, "username"), tf_vec_str(o, "realm"),
                                          tf_vec_str(o, "password_after_prep")));
      ck_assert_int_eq(kn, TF_STUN_KEY_SIZE);
      ck_assert_mem_eq(derived, k, TF_STUN_KEY_SIZE);
      memcpy(key, k, kn);
      klen = kn;
      free(k);
    }
    TF_OK_OR_FAIL(tf_stun_check_integrity(buf, n, key, klen));
    key[klen] = 'x';
    ck_assert_int_eq(tf_stun_check_integrity(buf, n, key, klen + 1), TF_EAUTH);
    ck_assert_str_eq(last_reason(n), "INTEGRITY_MISMATCH");
    tf_stun_msg_free(m);
    free(buf);
  }
  tf_vectors_free(&v);
}
END_TEST

START_TEST(test_stun__rfc5769_xor_address_encoding)
{
  /* RFC 5769 2.2 / 2.3: the XOR-MAPPED-ADDRESS values as encoded on the wire */
  static const uint8_t tid[TF_STUN_TID_SIZE] = {0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae};
  const struct {
    const char *ip;
    const char *hex;
  } cases[] = {{"192.0.2.1", "0001a147e112a643"},
               {"2001:db8:1234:5678:11:2233:4455:6677", "0002a1470113a9faa5d3f179bc25f4b5bed2b9d9"}};
  for (size_t i = 0; i < 2; i++) {
    tf_stun_msg *m = NULL;
    tf_addr a, back;
    uint16_t port = 0;
    const uint8_t *val = NULL;
    size_t len = 0;
    TF_OK_OR_FAIL(tf_addr_parse(&a, cases[i].ip));
    TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_BINDING, TF_STUN_SUCCESS, tid));
    TF_OK_OR_FAIL(tf_stun_msg_add_xor_address(m, TF_STUN_ATTR_XOR_MAPPED_ADDRESS, &a, 32853));
    TF_OK_OR_FAIL(tf_stun_msg_find(m, TF_STUN_ATTR_XOR_MAPPED_ADDRESS, &val, &len));
    assert_hex(val, len, cases[i].hex, cases[i].ip);
    TF_OK_OR_FAIL(tf_stun_msg_address(m, TF_STUN_ATTR_XOR_MAPPED_ADDRESS, 0, &back, &port));
    ck_assert_int_eq(tf_addr_compare(&a, &back), 0);
    ck_assert_int_eq(port, 32853);
    tf_stun_msg_free(m);
  }
}
END_TEST

START_TEST(test_stun__rfc5769_long_term_request_rebuilt)
{
  /* 2.4 is zero-padded: the encoder rebuilds it byte for byte from its fields */
  tf_vectors v = tf_vectors_load("rfc5769.jsonl");
  ck_assert_int_eq(v.count, 4);
  const cJSON *o = v.items[3];
  ck_assert_str_eq(tf_vec_id(o), "rfc5769-2.4-long-term-request");
  size_t tn = 0, kn = 0;
  uint8_t *tid = tf_vec_unhex(tf_vec_str(o, "tid"), &tn);
  uint8_t *key = tf_vec_unhex(tf_vec_str(o, "key_hex"), &kn);
  tf_stun_msg *m = NULL;
  TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_BINDING, TF_STUN_REQUEST, tid));
  const char *user = tf_vec_str(o, "username"), *nonce = tf_vec_str(o, "nonce"), *realm = tf_vec_str(o, "realm");
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_USERNAME, user, strlen(user)));
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_NONCE, nonce, strlen(nonce)));
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_REALM, realm, strlen(realm)));
  TF_OK_OR_FAIL(tf_stun_msg_add_integrity(m, key, kn));
  size_t len = 0;
  const uint8_t *bytes = tf_stun_msg_bytes(m, &len);
  assert_hex(bytes, len, tf_vec_str(o, "hex"), "rebuilt 2.4");
  tf_stun_msg_free(m);
  free(tid);
  free(key);
  tf_vectors_free(&v);
}
END_TEST

/* ---- coturn 4.6.1 captures ---- */

static void fmt_addr(char *out, size_t size, const tf_stun_msg *m, uint16_t type, int *port)
{
  tf_addr a;
  uint16_t p = 0;
  TF_OK_OR_FAIL(tf_stun_msg_address(m, type, 0, &a, &p));
  TF_OK_OR_FAIL(tf_addr_format(out, size, &a));
  *port = p;
}

/* Compare every "<side>.<field>" of a capture entry with the decoded message. */
static size_t check_fields(const cJSON *o, const char *side, const tf_stun_msg *m, const uint8_t *buf)
{
  size_t checked = 0, plen = strlen(side);
  const char *id = tf_vec_id(o);
  const cJSON *it;
  cJSON_ArrayForEach(it, o)
  {
    if (strncmp(it->string, side, plen) != 0 || it->string[plen] != '.') continue;
    const char *f = it->string + plen + 1;
    char s[1024] = "";
    long long num = -1;
    int is_num = 0, is_bool = 0, bval = 0;
    const uint8_t *val = NULL;
    size_t vlen = 0;
    if (strcmp(f, "msg_type") == 0) {
      snprintf(s, sizeof(s), "0x%04x", (unsigned)((buf[0] << 8) | buf[1]));
    } else if (strcmp(f, "attr_types") == 0) {
      for (size_t k = 0; k < tf_stun_msg_attr_count(m); k++) {
        uint16_t t = 0;
        TF_OK_OR_FAIL(tf_stun_msg_attr(m, k, &t, NULL, NULL));
        snprintf(s + strlen(s), sizeof(s) - strlen(s), "%s0x%04x", k ? "," : "", t);
      }
    } else if (strcmp(f, "error_code") == 0 || strcmp(f, "error_reason") == 0) {
      int code = 0;
      const char *reason = NULL;
      TF_OK_OR_FAIL(tf_stun_msg_error(m, &code, &reason));
      is_num = f[6] == 'c';
      num = code;
      snprintf(s, sizeof(s), "%s", reason);
    } else if (strcmp(f, "realm") == 0 || strcmp(f, "nonce") == 0 || strcmp(f, "software") == 0 ||
               strcmp(f, "username") == 0) {
      uint16_t t = f[0] == 'r'   ? TF_STUN_ATTR_REALM
                   : f[0] == 'n' ? TF_STUN_ATTR_NONCE
                   : f[0] == 's' ? TF_STUN_ATTR_SOFTWARE
                                 : TF_STUN_ATTR_USERNAME;
      char *text = NULL;
      TF_OK_OR_FAIL(tf_stun_msg_text(&text, m, t));
      snprintf(s, sizeof(s), "%s", text);
      tf_free(text);
    } else if (strncmp(f, "xor_mapped_", 11) == 0 || strncmp(f, "xor_relayed_", 12) == 0 ||
               strncmp(f, "xor_peer_", 9) == 0 || strncmp(f, "mapped_", 7) == 0) {
      uint16_t t = strncmp(f, "xor_mapped_", 11) == 0    ? TF_STUN_ATTR_XOR_MAPPED_ADDRESS
                   : strncmp(f, "xor_relayed_", 12) == 0 ? TF_STUN_ATTR_XOR_RELAYED_ADDRESS
                   : strncmp(f, "xor_peer_", 9) == 0     ? TF_STUN_ATTR_XOR_PEER_ADDRESS
                                                         : TF_STUN_ATTR_MAPPED_ADDRESS;
      int port = 0;
      fmt_addr(s, sizeof(s), m, t, &port);
      if (strstr(f, "_port")) {
        is_num = 1;
        num = port;
      } else {
        ck_assert_msg(strstr(f, "_ip") != NULL, "%s: unknown field %s", id, it->string);
      }
    } else if (strcmp(f, "lifetime") == 0) {
      uint32_t lt = 0;
      TF_OK_OR_FAIL(tf_stun_msg_u32(m, TF_STUN_ATTR_LIFETIME, &lt));
      is_num = 1;
      num = lt;
    } else if (strcmp(f, "data_hex") == 0 || strcmp(f, "reservation_token_hex") == 0) {
      TF_OK_OR_FAIL(tf_stun_msg_find(m, f[0] == 'd' ? TF_STUN_ATTR_DATA : TF_STUN_ATTR_RESERVATION_TOKEN, &val, &vlen));
      char *h = tf_vec_hex(val, vlen);
      snprintf(s, sizeof(s), "%s", h);
      free(h);
    } else if (strcmp(f, "unknown_attributes") == 0) {
      TF_OK_OR_FAIL(tf_stun_msg_find(m, TF_STUN_ATTR_UNKNOWN_ATTRIBUTES, &val, &vlen));
      for (size_t k = 0; k + 1 < vlen; k += 2)
        snprintf(s + strlen(s), sizeof(s) - strlen(s), "%s0x%04x", k ? "," : "",
                 (unsigned)((val[k] << 8) | val[k + 1]));
    } else if (strcmp(f, "has_mi") == 0 || strcmp(f, "has_fp") == 0) {
      is_bool = 1;
      bval =
          tf_stun_msg_find(m, f[4] == 'm' ? TF_STUN_ATTR_MESSAGE_INTEGRITY : TF_STUN_ATTR_FINGERPRINT, NULL, NULL) == 0;
    } else {
      ck_abort_msg("%s: field %s is not compared by this test", id, it->string);
    }
    if (is_bool) {
      ck_assert_msg(cJSON_IsBool(it) && cJSON_IsTrue(it) == bval, "%s: %s differs", id, it->string);
    } else if (is_num) {
      ck_assert_msg(cJSON_IsNumber(it) && (long long)it->valuedouble == num, "%s: %s = %lld, want %g", id, it->string,
                    num, it->valuedouble);
    } else {
      ck_assert_msg(cJSON_IsString(it) && strcmp(it->valuestring, s) == 0, "%s: %s = \"%s\", want \"%s\"", id,
                    it->string, s, cJSON_IsString(it) ? it->valuestring : "?");
    }
    checked++;
  }
  return checked;
}

/* 1 valid, 0 mismatch, -1 no MESSAGE-INTEGRITY. */
static int mi_state(const uint8_t *buf, size_t n, const uint8_t *key)
{
  tf_err rc = tf_stun_check_integrity(buf, n, key, TF_STUN_KEY_SIZE);
  if (rc == 0) return 1;
  if (rc == TF_EAUTH) return 0;
  ck_assert_msg(rc == TF_ENOTFOUND, "check_integrity -> %d (%s)", rc, tf_error_last()->message);
  return -1;
}

START_TEST(test_stun__coturn_capture)
{
  tf_vectors v = tf_vectors_load("coturn_4.6.1_exchanges.jsonl");
  ck_assert_int_eq(v.count, 103);
  size_t fields = 0, stun_msgs = 0, channel_frames = 0, stream_msgs = 0, validated = 0, mi_checked = 0;
  for (size_t i = 0; i < v.count; i++) {
    const cJSON *o = v.items[i];
    const char *id = tf_vec_id(o);
    uint8_t *key = NULL;
    size_t kn = 0;
    if (tf_vec_str(o, "key_md5_hex")) {
      key = tf_vec_unhex(tf_vec_str(o, "key_md5_hex"), &kn);
      ck_assert_int_eq(kn, TF_STUN_KEY_SIZE);
      /* key = MD5(username:realm:password), password = REST password of the secret */
      uint8_t derived[TF_STUN_KEY_SIZE];
      TF_OK_OR_FAIL(
          tf_stun_long_term_key(derived, tf_vec_str(o, "username"), tf_vec_str(o, "realm"), tf_vec_str(o, "password")));
      ck_assert_mem_eq(derived, key, TF_STUN_KEY_SIZE);
      if (tf_vec_str(o, "secret")) {
        char *pw = NULL;
        TF_OK_OR_FAIL(tf_cred_password(&pw, tf_vec_str(o, "secret"), tf_vec_str(o, "username")));
        ck_assert_str_eq(pw, tf_vec_str(o, "password"));
        tf_free(pw);
      }
    }
    tf_stun_msg *sides[2] = {NULL, NULL};
    for (int sd = 0; sd < 2; sd++) {
      const char *side = sd ? "response" : "request";
      char k_hex[32], k_kind[32], k_mi[32], k_data[32], k_flen[32], k_msgs[32];
      snprintf(k_hex, sizeof(k_hex), "%s_hex", side);
      snprintf(k_kind, sizeof(k_kind), "%s_kind", side);
      snprintf(k_mi, sizeof(k_mi), "%s_mi_valid", side);
      snprintf(k_data, sizeof(k_data), "%s_data_hex", side);
      snprintf(k_flen, sizeof(k_flen), "%s_frame_len", side);
      snprintf(k_msgs, sizeof(k_msgs), "%s_messages", side);
      const char *hex = tf_vec_str(o, k_hex);
      if (!hex) continue;
      const char *kind = tf_vec_str(o, k_kind);
      size_t n = 0;
      uint8_t *buf = tf_vec_unhex(hex, &n);
      size_t flen = 0;
      if (strcmp(kind, "channeldata") == 0) {
        uint16_t ch = 0;
        const uint8_t *data = NULL;
        size_t dlen = 0;
        TF_OK_OR_FAIL(tf_stun_channel_data_decode(buf, n, &ch, &data, &dlen));
        ck_assert_int_eq(ch, cJSON_GetObjectItem(o, "channel")->valueint);
        assert_hex(data, dlen, tf_vec_str(o, k_data), id);
        TF_OK_OR_FAIL(tf_stun_frame_length(buf, n, &flen));
        int streamed = strcmp(tf_vec_str(o, "transport"), "udp") != 0;
        /* over TCP/TLS the frame is padded (with stale bytes from coturn); over UDP it is not */
        ck_assert_int_eq(n, cJSON_GetObjectItem(o, k_flen)->valueint);
        ck_assert_int_eq(streamed ? flen : 4 + dlen, n);
        channel_frames++;
      } else if (strcmp(kind, "stun-stream") == 0) {
        size_t off = 0, count = 0;
        while (off < n) {
          TF_OK_OR_FAIL(tf_stun_frame_length(buf + off, n - off, &flen));
          ck_assert_uint_le(flen, n - off);
          tf_stun_msg *m = NULL;
          TF_OK_OR_FAIL(tf_stun_decode(&m, buf + off, flen));
          ck_assert_int_eq(tf_stun_msg_find(m, TF_STUN_ATTR_FINGERPRINT, NULL, NULL), 0);
          tf_stun_msg_free(m);
          off += flen;
          count++;
        }
        ck_assert_int_eq(off, n);
        ck_assert_int_eq(count, cJSON_GetObjectItem(o, k_msgs)->valueint);
        stream_msgs += count;
      } else {
        ck_assert_str_eq(kind, "stun");
        tf_stun_msg *m = NULL;
        TF_OK_OR_FAIL(tf_stun_decode(&m, buf, n));
        if (strcmp(tf_vec_str(o, "transport"), "udp") != 0) {
          TF_OK_OR_FAIL(tf_stun_frame_length(buf, n, &flen));
          ck_assert_int_eq(flen, n);
        }
        fields += check_fields(o, side, m, buf);
        const cJSON *mi = cJSON_GetObjectItem(o, k_mi);
        ck_assert_msg(mi != NULL, "%s: %s missing", id, k_mi);
        if (key) {
          int st = mi_state(buf, n, key);
          ck_assert_msg(cJSON_IsNull(mi) ? st == -1 : (cJSON_IsTrue(mi) ? st == 1 : st == 0), "%s: %s is %d", id, k_mi,
                        st);
          mi_checked++;
        } else {
          ck_assert_msg(cJSON_IsNull(mi), "%s: %s without a key", id, k_mi);
        }
        sides[sd] = m;
        stun_msgs++;
      }
      free(buf);
    }
    /* every captured response passes the probe's validator for its request
     * (indications such as Send / Data have no response) */
    if (sides[0] && sides[1] && tf_stun_msg_class(sides[0]) == TF_STUN_REQUEST) {
      size_t n = 0;
      const uint8_t *resp = tf_stun_msg_bytes(sides[1], &n);
      int authed = tf_stun_msg_find(sides[0], TF_STUN_ATTR_MESSAGE_INTEGRITY, NULL, NULL) == 0;
      tf_stun_msg *out = NULL;
      tf_err rc = tf_stun_validate_response(&out, resp, n, tf_stun_msg_tid(sides[0]), tf_stun_msg_method(sides[0]),
                                            authed ? key : NULL, TF_STUN_KEY_SIZE);
      ck_assert_msg(rc == 0, "%s: response rejected: %s", id, tf_error_last()->message);
      ck_assert_int_eq(tf_stun_msg_class(out), tf_stun_msg_class(sides[1]));
      tf_stun_msg_free(out);
      validated++;
    }
    tf_stun_msg_free(sides[0]);
    tf_stun_msg_free(sides[1]);
    free(key);
  }
  /* nothing skipped silently: 90 STUN request/response pairs + 4 single messages each way */
  ck_assert_int_eq(stun_msgs, 90 * 2 + 8);
  ck_assert_int_eq(channel_frames, 8);
  ck_assert_int_eq(stream_msgs, 4);
  ck_assert_int_eq(validated, 89);
  ck_assert_uint_gt(mi_checked, 150);
  ck_assert_uint_gt(fields, 1000);
  tf_vectors_free(&v);
}
END_TEST

/* ---- malformed responses ---- */

START_TEST(test_stun__malformed_vectors)
{
  tf_vectors v = tf_vectors_load("stun_malformed.jsonl");
  ck_assert_int_eq(v.count, 28);
  size_t accepted = 0, rejected = 0;
  for (size_t i = 0; i < v.count; i++) {
    const cJSON *o = v.items[i];
    const char *id = tf_vec_id(o);
    size_t n = 0, tn = 0, kn = 0;
    uint8_t *buf = tf_vec_unhex(tf_vec_str(o, "hex"), &n);
    uint8_t *tid = tf_vec_unhex(tf_vec_str(o, "ctx_tid"), &tn);
    uint8_t *key = tf_vec_unhex(tf_vec_str(o, "ctx_key_hex"), &kn);
    ck_assert_int_eq(tn, TF_STUN_TID_SIZE);
    int authed = cJSON_IsTrue(cJSON_GetObjectItem(o, "ctx_authenticated"));
    tf_stun_msg *m = NULL;
    tf_err rc =
        tf_stun_validate_response(&m, buf, n, tid, method_code(tf_vec_str(o, "ctx_method")), authed ? key : NULL, kn);
    if (strcmp(tf_vec_str(o, "verdict"), "accept") == 0) {
      ck_assert_msg(rc == 0, "%s: rejected: %s", id, tf_error_last()->message);
      ck_assert_ptr_nonnull(m);
      accepted++;
    } else {
      ck_assert_msg(rc < 0, "%s: accepted", id);
      const char *want = tf_vec_str(o, "reason_code");
      const char *got = last_reason(n);
      ck_assert_msg(strcmp(got, want) == 0, "%s: %s (%s), want %s", id, got, tf_error_last()->message, want);
      int auth = strcmp(want, "INTEGRITY_MISMATCH") == 0 || strcmp(want, "MISSING_MESSAGE_INTEGRITY") == 0;
      ck_assert_int_eq(rc, auth ? TF_EAUTH : TF_EPROTO);
      rejected++;
    }
    tf_stun_msg_free(m);
    free(buf);
    free(tid);
    free(key);
  }
  ck_assert_int_eq(accepted, 4);
  ck_assert_int_eq(rejected, 24);
  tf_vectors_free(&v);
}
END_TEST

START_TEST(test_stun__validate_checks_tid_and_errors)
{
  /* a 401 as coturn sends it, checked against the wrong tid, method and class */
  static const uint8_t tid[TF_STUN_TID_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  uint8_t other[TF_STUN_TID_SIZE];
  memcpy(other, tid, sizeof(other));
  other[11] ^= 1;
  tf_stun_msg *m = NULL;
  TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_ALLOCATE, TF_STUN_ERROR, tid));
  static const uint8_t ec[] = {0, 0, 4, 1, 'U', 'n', 'a', 'u', 't', 'h', 'o', 'r', 'i', 'z', 'e', 'd'};
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_ERROR_CODE, ec, sizeof(ec)));
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_REALM, "turnfleet.test", 14));
  size_t n = 0;
  const uint8_t *b = tf_stun_msg_bytes(m, &n);
  ck_assert_int_eq(tf_stun_validate_response(NULL, b, n, tid, TF_STUN_ALLOCATE, NULL, 0), TF_EPROTO);
  ck_assert_str_eq(last_reason(n), "MISSING_REALM_OR_NONCE");
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_NONCE, "60480a81ad7e422a", 16));
  TF_OK_OR_FAIL(tf_stun_msg_add_fingerprint(m));
  b = tf_stun_msg_bytes(m, &n);
  tf_stun_msg *out = NULL;
  TF_OK_OR_FAIL(tf_stun_validate_response(&out, b, n, tid, TF_STUN_ALLOCATE, NULL, 0));
  int code = 0;
  const char *reason = NULL;
  TF_OK_OR_FAIL(tf_stun_msg_error(out, &code, &reason));
  ck_assert_int_eq(code, 401);
  ck_assert_str_eq(reason, "Unauthorized");
  tf_stun_msg_free(out);
  /* an error response needs no MESSAGE-INTEGRITY even when a key is given */
  static const uint8_t key[TF_STUN_KEY_SIZE] = {1};
  TF_OK_OR_FAIL(tf_stun_validate_response(NULL, b, n, tid, TF_STUN_ALLOCATE, key, sizeof(key)));
  out = (tf_stun_msg *)1;
  ck_assert_int_eq(tf_stun_validate_response(&out, b, n, other, TF_STUN_ALLOCATE, NULL, 0), TF_EPROTO);
  ck_assert_str_eq(last_reason(n), "TRANSACTION_ID_MISMATCH");
  ck_assert_ptr_eq(out, (tf_stun_msg *)1); /* untouched on failure */
  ck_assert_int_eq(tf_stun_validate_response(NULL, b, n, tid, TF_STUN_REFRESH, NULL, 0), TF_EPROTO);
  ck_assert_str_eq(last_reason(n), "METHOD_MISMATCH");
  ck_assert_int_eq(tf_stun_validate_response(NULL, b, n, NULL, TF_STUN_ALLOCATE, NULL, 0), TF_EINVALID);
  ck_assert_int_eq(tf_stun_validate_response(NULL, b, n, tid, TF_STUN_ALLOCATE, key, 0), TF_EINVALID);
  tf_stun_msg_free(m);

  /* an unknown comprehension-required attribute fails the transaction */
  TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_REFRESH, TF_STUN_SUCCESS, tid));
  TF_OK_OR_FAIL(tf_stun_msg_add_u32(m, 0x7F01, 1));
  b = tf_stun_msg_bytes(m, &n);
  TF_OK_OR_FAIL(tf_stun_decode(&out, b, n));
  tf_stun_msg_free(out);
  ck_assert_int_eq(tf_stun_validate_response(NULL, b, n, tid, TF_STUN_REFRESH, NULL, 0), TF_EPROTO);
  ck_assert_str_eq(last_reason(n), "UNKNOWN_COMPREHENSION_REQUIRED");
  tf_stun_msg_free(m);
}
END_TEST

/* ---- encoder ---- */

START_TEST(test_stun__encode_round_trip)
{
  uint8_t key[TF_STUN_KEY_SIZE];
  TF_OK_OR_FAIL(tf_stun_long_term_key(key, "1827486390:probe-udp4", "turnfleet.test", "C9qgfqAOoaGsTSqHQmuPJ9WXXBE="));
  static const uint8_t want_key[TF_STUN_KEY_SIZE] = {0x2f, 0xb0, 0x3f, 0xc3, 0xb6, 0x93, 0x11, 0xe9,
                                                     0x3a, 0x37, 0x3c, 0x51, 0x13, 0x35, 0x4c, 0x11};
  ck_assert_mem_eq(key, want_key, sizeof(key));

  tf_stun_msg *m = NULL;
  TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_CREATE_PERMISSION, TF_STUN_REQUEST, NULL));
  uint8_t tid[TF_STUN_TID_SIZE];
  memcpy(tid, tf_stun_msg_tid(m), sizeof(tid));
  tf_addr v4, v6;
  TF_OK_OR_FAIL(tf_addr_parse(&v4, "127.0.0.1"));
  TF_OK_OR_FAIL(tf_addr_parse(&v6, "2001:db8::7"));
  TF_OK_OR_FAIL(tf_stun_msg_add_xor_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, &v4, 45460));
  TF_OK_OR_FAIL(tf_stun_msg_add_xor_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, &v6, 1));
  TF_OK_OR_FAIL(tf_stun_msg_add_u32(m, TF_STUN_ATTR_REQUESTED_TRANSPORT, 17u << 24));
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_USERNAME, "1827486390:probe-udp4", 21));
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_DONT_FRAGMENT, NULL, 0));
  TF_OK_OR_FAIL(tf_stun_msg_add_integrity(m, key, sizeof(key)));
  /* after MESSAGE-INTEGRITY only FINGERPRINT */
  ck_assert_int_eq(tf_stun_msg_add_u32(m, TF_STUN_ATTR_LIFETIME, 0), TF_EINVALID);
  ck_assert_int_eq(tf_stun_msg_add_integrity(m, key, sizeof(key)), TF_EINVALID);
  TF_OK_OR_FAIL(tf_stun_msg_add_fingerprint(m));
  ck_assert_int_eq(tf_stun_msg_add_fingerprint(m), TF_EINVALID);
  ck_assert_int_eq(tf_stun_msg_add(m, TF_STUN_ATTR_SOFTWARE, "x", 1), TF_EINVALID);

  size_t n = 0;
  const uint8_t *b = tf_stun_msg_bytes(m, &n);
  ck_assert_int_eq(n % 4, 0);
  ck_assert_int_eq(((size_t)b[2] << 8 | b[3]) + 20, n);
  TF_OK_OR_FAIL(tf_stun_check_integrity(b, n, key, sizeof(key)));
  tf_stun_msg *d = NULL;
  TF_OK_OR_FAIL(tf_stun_decode(&d, b, n));
  ck_assert_int_eq(tf_stun_msg_method(d), TF_STUN_CREATE_PERMISSION);
  ck_assert_int_eq(tf_stun_msg_class(d), TF_STUN_REQUEST);
  ck_assert_mem_eq(tf_stun_msg_tid(d), tid, sizeof(tid));
  ck_assert_int_eq(tf_stun_msg_attr_count(d), 7);
  tf_addr a;
  uint16_t port = 0;
  TF_OK_OR_FAIL(tf_stun_msg_address(d, TF_STUN_ATTR_XOR_PEER_ADDRESS, 0, &a, &port));
  ck_assert_int_eq(tf_addr_compare(&a, &v4), 0);
  ck_assert_int_eq(port, 45460);
  /* the IPv6 XOR mask includes the transaction id */
  TF_OK_OR_FAIL(tf_stun_msg_address(d, TF_STUN_ATTR_XOR_PEER_ADDRESS, 1, &a, &port));
  ck_assert_int_eq(tf_addr_compare(&a, &v6), 0);
  ck_assert_int_eq(port, 1);
  const uint8_t *val = NULL;
  size_t vlen = 0;
  TF_OK_OR_FAIL(tf_stun_msg_attr(d, 1, NULL, &val, &vlen));
  ck_assert_int_eq(vlen, 20);
  ck_assert_int_ne(memcmp(val + 4, v6.bytes, 16), 0);
  ck_assert_int_eq(val[4 + 15], v6.bytes[15] ^ tid[11]);
  uint32_t rt = 0;
  TF_OK_OR_FAIL(tf_stun_msg_u32(d, TF_STUN_ATTR_REQUESTED_TRANSPORT, &rt));
  ck_assert_uint_eq(rt, 17u << 24);
  char *user = NULL;
  TF_OK_OR_FAIL(tf_stun_msg_text(&user, d, TF_STUN_ATTR_USERNAME));
  ck_assert_str_eq(user, "1827486390:probe-udp4");
  tf_free(user);
  TF_OK_OR_FAIL(tf_stun_msg_find(d, TF_STUN_ATTR_DONT_FRAGMENT, &val, &vlen));
  ck_assert_int_eq(vlen, 0);
  ck_assert_int_eq(tf_stun_msg_u32(d, TF_STUN_ATTR_LIFETIME, &rt), TF_ENOTFOUND);
  ck_assert_int_eq(tf_stun_msg_u32(d, TF_STUN_ATTR_USERNAME, &rt), TF_EPROTO);
  ck_assert_int_eq(tf_stun_msg_attr(d, 7, NULL, NULL, NULL), TF_ENOTFOUND);
  ck_assert_int_eq(tf_stun_msg_error(d, NULL, NULL), TF_ENOTFOUND);
  /* a wrong key is caught; so is a changed byte (by FINGERPRINT first) */
  key[0] ^= 1;
  ck_assert_int_eq(tf_stun_check_integrity(b, n, key, sizeof(key)), TF_EAUTH);
  tf_stun_msg_free(d);
  tf_stun_msg_free(m);

  /* two fresh transaction ids differ */
  tf_stun_msg *m1 = NULL, *m2 = NULL;
  TF_OK_OR_FAIL(tf_stun_msg_new(&m1, TF_STUN_BINDING, TF_STUN_REQUEST, NULL));
  TF_OK_OR_FAIL(tf_stun_msg_new(&m2, TF_STUN_BINDING, TF_STUN_REQUEST, NULL));
  ck_assert_int_ne(memcmp(tf_stun_msg_tid(m1), tf_stun_msg_tid(m2), TF_STUN_TID_SIZE), 0);
  b = tf_stun_msg_bytes(m1, &n);
  ck_assert_int_eq(n, 20);
  ck_assert_int_eq(b[0], 0x00);
  ck_assert_int_eq(b[1], 0x01);
  tf_stun_msg_free(m1);
  tf_stun_msg_free(m2);
}
END_TEST

START_TEST(test_stun__encoder_limits)
{
  tf_stun_msg *m = NULL;
  static uint8_t big[TF_STUN_MAX_MESSAGE];
  ck_assert_int_eq(tf_stun_msg_new(&m, 0, TF_STUN_REQUEST, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_stun_msg_new(&m, TF_STUN_ALLOCATE, 4, NULL), TF_EINVALID);
  ck_assert_ptr_null(m);
  TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_ALLOCATE, TF_STUN_REQUEST, NULL));
  ck_assert_int_eq(tf_stun_msg_add(m, TF_STUN_ATTR_DATA, big, TF_STUN_MAX_MESSAGE - 20 - 4 + 1), TF_EBUFS);
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_DATA, big, TF_STUN_MAX_MESSAGE - 20 - 4 - 8));
  /* room for FINGERPRINT, not for MESSAGE-INTEGRITY */
  ck_assert_int_eq(tf_stun_msg_add_integrity(m, (const uint8_t *)"k", 1), TF_EBUFS);
  TF_OK_OR_FAIL(tf_stun_msg_add_fingerprint(m));
  size_t n = 0;
  const uint8_t *b = tf_stun_msg_bytes(m, &n);
  ck_assert_int_eq(n, TF_STUN_MAX_MESSAGE);
  ck_assert_int_eq(tf_stun_max_message(), TF_STUN_MAX_MESSAGE);
  tf_stun_msg *d = NULL;
  TF_OK_OR_FAIL(tf_stun_decode(&d, b, n));
  tf_stun_msg_free(d);
  tf_stun_msg_free(m);

  /* at most TF_STUN_MAX_ATTRIBUTES attributes */
  TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_ALLOCATE, TF_STUN_REQUEST, NULL));
  for (int i = 0; i < TF_STUN_MAX_ATTRIBUTES; i++) TF_OK_OR_FAIL(tf_stun_msg_add(m, 0x8099, NULL, 0));
  ck_assert_int_eq(tf_stun_msg_add(m, 0x8099, NULL, 0), TF_EBUFS);
  ck_assert_int_eq(tf_stun_msg_add_fingerprint(m), TF_EBUFS);
  ck_assert_int_eq(tf_stun_msg_attr_count(m), TF_STUN_MAX_ATTRIBUTES);
  tf_stun_msg_free(m);

  /* MESSAGE-INTEGRITY and FINGERPRINT only through their own calls; addresses need a family */
  TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_ALLOCATE, TF_STUN_REQUEST, NULL));
  ck_assert_int_eq(tf_stun_msg_add(m, TF_STUN_ATTR_MESSAGE_INTEGRITY, big, 20), TF_EINVALID);
  ck_assert_int_eq(tf_stun_msg_add(m, TF_STUN_ATTR_FINGERPRINT, big, 4), TF_EINVALID);
  tf_addr none;
  memset(&none, 0, sizeof(none));
  ck_assert_int_eq(tf_stun_msg_add_xor_address(m, TF_STUN_ATTR_XOR_PEER_ADDRESS, &none, 1), TF_EINVALID);
  ck_assert_int_eq(tf_stun_msg_add(m, TF_STUN_ATTR_DATA, NULL, 3), TF_EINVALID);
  ck_assert_int_eq(tf_stun_msg_add_integrity(m, NULL, 16), TF_EINVALID);
  ck_assert_int_eq(tf_stun_msg_attr_count(m), 0);
  /* ERROR-CODE reason: trailing NULs stripped */
  static const uint8_t ec[] = {0, 0, 4, 38, 'S', 't', 'a', 'l', 'e', ' ', 'n', 'o', 'n', 'c', 'e', 0};
  TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_ERROR_CODE, ec, sizeof(ec)));
  int code = 0;
  const char *reason = NULL;
  TF_OK_OR_FAIL(tf_stun_msg_error(m, &code, &reason));
  ck_assert_int_eq(code, 438);
  ck_assert_str_eq(reason, "Stale nonce");
  tf_stun_msg_free(m);
  tf_stun_msg_free(NULL);
}
END_TEST

START_TEST(test_stun__decoder_rejects_oversize_and_args)
{
  tf_stun_msg *m = NULL;
  ck_assert_int_eq(tf_stun_decode(NULL, "", 0), TF_EINVALID);
  ck_assert_int_eq(tf_stun_decode(&m, NULL, 20), TF_EINVALID);
  ck_assert_int_eq(tf_stun_decode(&m, NULL, 0), TF_EPROTO);
  ck_assert_str_eq(last_reason(0), "TRUNCATED_HEADER");
  /* a well-formed message over TF_STUN_MAX_MESSAGE */
  size_t n = TF_STUN_MAX_MESSAGE + 8;
  uint8_t *b = calloc(1, n);
  ck_assert_ptr_nonnull(b);
  b[1] = 1;
  b[2] = (uint8_t)((n - 20) >> 8);
  b[3] = (uint8_t)(n - 20);
  b[4] = 0x21, b[5] = 0x12, b[6] = 0xa4, b[7] = 0x42;
  b[20] = 0x80, b[21] = 0x99, b[22] = (uint8_t)((n - 24) >> 8), b[23] = (uint8_t)(n - 24);
  ck_assert_int_eq(tf_stun_decode(&m, b, n), TF_EPROTO);
  ck_assert_str_eq(last_reason(n), "MESSAGE_TOO_LARGE");
  ck_assert_ptr_null(m);
  size_t flen = 0;
  ck_assert_int_eq(tf_stun_frame_length(b, n, &flen), TF_EPROTO);
  b[4] = 0;
  ck_assert_int_eq(tf_stun_decode(&m, b, n), TF_EPROTO);
  ck_assert_str_eq(last_reason(n), "BAD_MAGIC_COOKIE");
  free(b);
}
END_TEST

/* ---- ChannelData and framing ---- */

START_TEST(test_stun__channel_data_and_framing)
{
  uint8_t buf[64];
  size_t n = 0;
  TF_OK_OR_FAIL(tf_stun_channel_data_encode(buf, sizeof(buf), &n, 0x4000, "chan-data-odd", 13, 0));
  ck_assert_int_eq(n, 17);
  assert_hex(buf, n, "4000000d6368616e2d646174612d6f6464", "udp frame");
  TF_OK_OR_FAIL(tf_stun_channel_data_encode(buf, sizeof(buf), &n, 0x4000, "chan-data-odd", 13, 1));
  ck_assert_int_eq(n, 20);
  assert_hex(buf, n, "4000000d6368616e2d646174612d6f6464000000", "tcp frame");
  ck_assert_int_eq(tf_stun_channel_data_encode(buf, 19, &n, 0x4000, "chan-data-odd", 13, 1), TF_EBUFS);
  ck_assert_int_eq(tf_stun_channel_data_encode(buf, sizeof(buf), &n, 0x3FFF, "x", 1, 0), TF_EINVALID);
  ck_assert_int_eq(tf_stun_channel_data_encode(buf, sizeof(buf), &n, 0x5000, "x", 1, 0), TF_EINVALID);
  TF_OK_OR_FAIL(tf_stun_channel_data_encode(buf, sizeof(buf), &n, 0x4FFF, NULL, 0, 1));
  ck_assert_int_eq(n, 4);

  uint16_t ch = 0;
  const uint8_t *data = NULL;
  size_t dlen = 0;
  TF_OK_OR_FAIL(tf_stun_channel_data_encode(buf, sizeof(buf), &n, 0x4001, "abc", 3, 1));
  TF_OK_OR_FAIL(tf_stun_channel_data_decode(buf, n, &ch, &data, &dlen));
  ck_assert_int_eq(ch, 0x4001);
  ck_assert_int_eq(dlen, 3);
  ck_assert_mem_eq(data, "abc", 3);
  ck_assert_int_eq(tf_stun_channel_data_decode(buf, 6, &ch, &data, &dlen), TF_EPROTO);
  ck_assert_str_eq(last_reason(6), "CHANNEL_DATA_OVERRUN");
  ck_assert_int_eq(tf_stun_channel_data_decode(buf, 3, &ch, &data, &dlen), TF_EPROTO);
  ck_assert_str_eq(last_reason(3), "TRUNCATED_CHANNEL_DATA");
  buf[0] = 0x50;
  ck_assert_int_eq(tf_stun_channel_data_decode(buf, n, &ch, &data, &dlen), TF_EPROTO);
  ck_assert_str_eq(last_reason(n), "BAD_CHANNEL_NUMBER");

  size_t flen = 0;
  static const uint8_t stun[] = {0x01, 0x01, 0x00, 0x44};
  static const uint8_t cd[] = {0x40, 0x00, 0x00, 0x0d};
  static const uint8_t junk[] = {0x80, 0x00, 0x00, 0x00};
  TF_OK_OR_FAIL(tf_stun_frame_length(stun, 4, &flen));
  ck_assert_int_eq(flen, 20 + 0x44);
  TF_OK_OR_FAIL(tf_stun_frame_length(cd, 4, &flen));
  ck_assert_int_eq(flen, 20);
  ck_assert_int_eq(tf_stun_frame_length(junk, 4, &flen), TF_EPROTO);
  ck_assert_str_eq(last_reason(4), "NOT_STUN_OR_CHANNEL_DATA");
  ck_assert_int_eq(tf_stun_frame_length(stun, 3, &flen), TF_EBUFS);
  ck_assert_int_eq(tf_stun_frame_length(stun, 4, NULL), TF_EINVALID);
}
END_TEST

/* ---- the decoder never reads past the buffer ---- */

struct corpus {
  uint8_t **bufs;
  size_t *lens;
  size_t count, cap;
};

static void corpus_add(struct corpus *c, const char *hex)
{
  if (!hex) return;
  if (c->count == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 64;
    c->bufs = realloc(c->bufs, c->cap * sizeof(*c->bufs));
    c->lens = realloc(c->lens, c->cap * sizeof(*c->lens));
    ck_assert(c->bufs && c->lens);
  }
  c->bufs[c->count] = tf_vec_unhex(hex, &c->lens[c->count]);
  c->count++;
}

static void corpus_load(struct corpus *c)
{
  memset(c, 0, sizeof(*c));
  const char *files[] = {"rfc5769.jsonl", "coturn_4.6.1_exchanges.jsonl", "stun_malformed.jsonl"};
  for (size_t f = 0; f < 3; f++) {
    tf_vectors v = tf_vectors_load(files[f]);
    for (size_t i = 0; i < v.count; i++) {
      corpus_add(c, tf_vec_str(v.items[i], "hex"));
      corpus_add(c, tf_vec_str(v.items[i], "request_hex"));
      corpus_add(c, tf_vec_str(v.items[i], "response_hex"));
    }
    tf_vectors_free(&v);
  }
  ck_assert_int_eq(c->count, 4 + 99 + 99 + 28);
}

static void corpus_free(struct corpus *c)
{
  for (size_t i = 0; i < c->count; i++) free(c->bufs[i]);
  free(c->bufs);
  free(c->lens);
}

/* 1 when the last error reads "CODE at byte N: why" with N <= @p len. No
 * ck_assert here: the check runner reports each assertion through a pipe, too
 * slow for the hundreds of thousands of calls below. */
static int reason_form_ok(size_t len)
{
  const char *msg = tf_error_last()->message;
  const char *at = strstr(msg, " at byte ");
  if (!at || at == msg) return 0;
  for (const char *p = msg; p < at; p++)
    if (!((*p >= 'A' && *p <= 'Z') || *p == '_' || (*p >= '0' && *p <= '9'))) return 0;
  char *end = NULL;
  unsigned long off = strtoul(at + 9, &end, 10);
  return end && end[0] == ':' && end[1] == ' ' && off <= len;
}

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    if (!(cond)) ck_abort_msg("%s failed (%zu bytes): %s", #cond, n, tf_error_last()->message); \
  } while (0)

/* Every entry point over exactly @p n heap bytes; the result must be a clean
 * success or a reason-coded failure whose offset lies inside the input. */
static int exercise(const uint8_t *src, size_t n)
{
  uint8_t *b = malloc(n ? n : 1);
  CHECK(b != NULL);
  if (n) memcpy(b, src, n);
  static const uint8_t key[TF_STUN_KEY_SIZE] = {0x80, 0xfa, 0x6e, 0x2b};
  uint8_t tid[TF_STUN_TID_SIZE] = {0};
  if (n >= 20) memcpy(tid, b + 8, sizeof(tid));
  tf_stun_msg *m = NULL;
  tf_err rc = tf_stun_decode(&m, b, n);
  if (rc < 0) {
    CHECK(rc == TF_EPROTO && reason_form_ok(n) && m == NULL);
  } else {
    /* every accessor over every attribute stays in bounds */
    const uint8_t *base = tf_stun_msg_bytes(m, NULL);
    for (size_t i = 0; i < tf_stun_msg_attr_count(m); i++) {
      uint16_t t = 0;
      const uint8_t *val = NULL;
      size_t vlen = 0;
      CHECK(tf_stun_msg_attr(m, i, &t, &val, &vlen) == 0);
      CHECK(val >= base + 24 && val + vlen <= base + n);
      char *text = NULL;
      CHECK(tf_stun_msg_text(&text, m, t) == 0);
      tf_free(text);
      tf_addr a;
      uint16_t port;
      if (t == TF_STUN_ATTR_MAPPED_ADDRESS || t == TF_STUN_ATTR_XOR_MAPPED_ADDRESS ||
          t == TF_STUN_ATTR_XOR_PEER_ADDRESS || t == TF_STUN_ATTR_XOR_RELAYED_ADDRESS)
        CHECK(tf_stun_msg_address(m, t, 0, &a, &port) == 0); /* checked by the decoder */
      if (t == TF_STUN_ATTR_ALTERNATE_SERVER && tf_stun_msg_address(m, t, 0, &a, &port) < 0)
        CHECK(reason_form_ok(n)); /* checked when read */
    }
    int code = 0;
    const char *reason = NULL;
    if (tf_stun_msg_error(m, &code, &reason) == 0) CHECK(code >= 300 && code <= 699 && reason);
    tf_stun_msg_free(m);
  }
  tf_err vr = tf_stun_validate_response(NULL, b, n, tid, TF_STUN_ALLOCATE, key, sizeof(key));
  if (vr < 0) CHECK(reason_form_ok(n));
  CHECK(rc == 0 || vr < 0);
  tf_err ir = tf_stun_check_integrity(b, n, key, sizeof(key));
  if (ir < 0) CHECK(reason_form_ok(n));
  size_t flen = 0;
  tf_err fr = tf_stun_frame_length(b, n, &flen);
  CHECK(fr == 0 || fr == TF_EBUFS || fr == TF_EPROTO);
  uint16_t ch = 0;
  const uint8_t *data = NULL;
  size_t dlen = 0;
  if (tf_stun_channel_data_decode(b, n, &ch, &data, &dlen) == 0) CHECK(data == b + 4 && data + dlen <= b + n);
  free(b);
  return rc;
}

START_TEST(test_stun__decoder_bounds_truncated_and_flipped)
{
  struct corpus c;
  corpus_load(&c);
  size_t runs = 0, swallowed = 0;
  for (size_t i = 0; i < c.count; i++) {
    const uint8_t *src = c.bufs[i];
    size_t n = c.lens[i];
    int ok = exercise(src, n) == 0;
    /* a valid message cut anywhere is rejected (20 + length no longer matches) */
    for (size_t k = 0; k < n; k++) {
      int rc = exercise(src, k);
      if (ok && rc != TF_EPROTO) ck_abort_msg("vector %zu cut at %zu accepted", i, k);
      runs++;
    }
    /* every byte flipped (one bit, all bits) */
    tf_stun_msg *orig = NULL;
    size_t fp_off = 0;
    if (ok) {
      TF_OK_OR_FAIL(tf_stun_decode(&orig, src, n));
      for (size_t a = 0; a < tf_stun_msg_attr_count(orig); a++) {
        uint16_t t = 0;
        const uint8_t *val = NULL;
        TF_OK_OR_FAIL(tf_stun_msg_attr(orig, a, &t, &val, NULL));
        if (t == TF_STUN_ATTR_FINGERPRINT) fp_off = (size_t)(val - tf_stun_msg_bytes(orig, NULL)) - 4;
      }
      tf_stun_msg_free(orig);
    }
    uint8_t *copy = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(copy);
    static const uint8_t masks[] = {0x01, 0xFF};
    for (size_t k = 0; k < n; k++) {
      for (size_t f = 0; f < sizeof(masks); f++) {
        memcpy(copy, src, n);
        copy[k] ^= masks[f];
        int rc = exercise(copy, n);
        /* FINGERPRINT (CRC-32) catches every changed byte it covers, unless the
         * change made an attribute swallow it (then there is none left) */
        if (fp_off && k < fp_off && rc == 0) {
          tf_stun_msg *d = NULL;
          TF_OK_OR_FAIL(tf_stun_decode(&d, copy, n));
          ck_assert_msg(tf_stun_msg_find(d, TF_STUN_ATTR_FINGERPRINT, NULL, NULL) == TF_ENOTFOUND,
                        "vector %zu byte %zu mask %02x accepted", i, k, masks[f]);
          tf_stun_msg_free(d);
          swallowed++;
        }
        runs++;
      }
    }
    free(copy);
  }
  ck_assert_uint_gt(runs, 50000);
  ck_assert_uint_lt(swallowed, runs / 100);
  corpus_free(&c);
}
END_TEST

/* FINGERPRINT over every message size from the header alone to 4 KiB (the 16-byte-block path,
 * where the CPU has one, and the table path for the rest) against a bit-at-a-time CRC-32, and a
 * flipped byte in any position is caught. */
static uint32_t crc32_bitwise(const uint8_t *p, size_t n)
{
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

START_TEST(test_stun__fingerprint_every_size)
{
  static uint8_t value[TF_STUN_MAX_MESSAGE];
  for (size_t i = 0; i < sizeof(value); i++) value[i] = (uint8_t)(i * 131u + 7u);
  for (size_t len = 0; len + 20 + 4 + 8 <= TF_STUN_MAX_MESSAGE; len += len < 300 ? 1 : 61) {
    tf_stun_msg *m = NULL;
    TF_OK_OR_FAIL(tf_stun_msg_new(&m, TF_STUN_BINDING, TF_STUN_REQUEST, NULL));
    if (len) TF_OK_OR_FAIL(tf_stun_msg_add(m, TF_STUN_ATTR_SOFTWARE, value, len));
    TF_OK_OR_FAIL(tf_stun_msg_add_fingerprint(m));
    size_t n = 0;
    const uint8_t *b = tf_stun_msg_bytes(m, &n);
    uint32_t got = (uint32_t)b[n - 4] << 24 | (uint32_t)b[n - 3] << 16 | (uint32_t)b[n - 2] << 8 | b[n - 1];
    ck_assert_msg(got == (crc32_bitwise(b, n - 8) ^ 0x5354554Eu), "FINGERPRINT of a %zu-byte message", n);
    tf_stun_msg *d = NULL;
    TF_OK_OR_FAIL(tf_stun_decode(&d, b, n));
    tf_stun_msg_free(d);
    uint8_t copy[TF_STUN_MAX_MESSAGE];
    memcpy(copy, b, n);
    size_t at = len ? 24 + (len * 7) % len : 12; /* in SOFTWARE's value or the transaction id */
    copy[at] ^= 0x01;
    ck_assert_int_eq(tf_stun_decode(&d, copy, n), TF_EPROTO);
    ck_assert_str_eq(last_reason(n), "FINGERPRINT_MISMATCH");
    tf_stun_msg_free(m);
  }
}
END_TEST

Suite *tf_test_stun_suite(void)
{
  Suite *s = suite_create("stun");
  TCase *tc = tcase_create("stun");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_stun__rfc5769_vectors);
  tcase_add_test(tc, test_stun__rfc5769_xor_address_encoding);
  tcase_add_test(tc, test_stun__rfc5769_long_term_request_rebuilt);
  tcase_add_test(tc, test_stun__coturn_capture);
  tcase_add_test(tc, test_stun__malformed_vectors);
  tcase_add_test(tc, test_stun__validate_checks_tid_and_errors);
  tcase_add_test(tc, test_stun__encode_round_trip);
  tcase_add_test(tc, test_stun__fingerprint_every_size);
  tcase_add_test(tc, test_stun__encoder_limits);
  tcase_add_test(tc, test_stun__decoder_rejects_oversize_and_args);
  tcase_add_test(tc, test_stun__channel_data_and_framing);
  tcase_add_test(tc, test_stun__decoder_bounds_truncated_and_flipped);
  suite_add_tcase(s, tc);
  return s;
}
