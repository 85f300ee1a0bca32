/* common, addr, map and doc: errors, versions, addresses, prefixes, ranges, JSON/YAML reading. */
#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "smap.h"
#include "tf_test.h"

START_TEST(test_common__error_names_and_text)
{
  ck_assert_str_eq(tf_error_name(TF_EINVALID), "TF_EINVALID");
  ck_assert_str_eq(tf_strerror(TF_EPROTO), "malformed data");
  ck_assert_str_eq(tf_error_name(-9999), "TF_UNKNOWN");
  ck_assert_int_eq(TF_EIO, -11);
  tf_addr a;
  ck_assert_int_eq(tf_addr_parse(&a, "nope"), TF_EINVALID);
  ck_assert_int_eq(tf_error_last()->code, TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "\"nope\" is not an IPv4 or IPv6 address");
}
END_TEST

/* Callers prefix the last message with a field. Formatting it into its own
 * buffer was undefined and garbled it ("uri: uri: ORT at byte 12: ..."). */
START_TEST(test_common__error_message_may_quote_the_last_one)
{
  tf_error__set(TF_EINVALID, "BAD_PORT at byte %d: not a number", 12);
  ck_assert_int_eq(tf_error__set(TF_EINVALID, "uri: %s", tf_error_last()->message), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "uri: BAD_PORT at byte 12: not a number");
  ck_assert_int_eq(tf_error__set(TF_EPROTO, "%s; %s", tf_error_last()->message, tf_error_last()->message), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message,
                   "uri: BAD_PORT at byte 12: not a number; uri: BAD_PORT at byte 12: not a number");
}
END_TEST

START_TEST(test_common__version)
{
  int ma, mi, pa;
  tf_version(&ma, &mi, &pa);
  ck_assert_int_eq(ma, TF_VERSION_MAJOR);
  ck_assert_int_eq(mi, TF_VERSION_MINOR);
  ck_assert_int_eq(pa, TF_VERSION_PATCH);
  ck_assert_str_eq(tf_version_string(), TF_VERSION_STRING);
}
END_TEST

START_TEST(test_addr__parse_and_format_canonical)
{
  tf_addr a;
  char buf[TF_ADDR_STRLEN];
  TF_OK_OR_FAIL(tf_addr_parse(&a, "2001:0db8:0000::0007"));
  ck_assert_int_eq(a.family, TF_AF_INET6);
  TF_OK_OR_FAIL(tf_addr_format(buf, sizeof(buf), &a));
  ck_assert_str_eq(buf, "2001:db8::7");
  TF_OK_OR_FAIL(tf_addr_parse(&a, "203.0.113.7"));
  ck_assert_int_eq(a.family, TF_AF_INET);
  ck_assert_int_eq(tf_addr_format(buf, 4, &a), TF_EBUFS);
  ck_assert_int_eq(tf_addr_parse(&a, "203.0.113.256"), TF_EINVALID);
  ck_assert_int_eq(tf_addr_parse(&a, "[::1]"), TF_EINVALID);
  tf_addr b;
  TF_OK_OR_FAIL(tf_addr_parse(&b, "::1"));
  ck_assert_int_lt(tf_addr_compare(&a, &b), 0);
}
END_TEST

START_TEST(test_addr__prefixes)
{
  tf_prefix p;
  tf_addr a, lo, hi;
  char buf[TF_ADDR_STRLEN];
  TF_OK_OR_FAIL(tf_prefix_parse(&p, "203.0.113.0/28"));
  ck_assert_int_eq(p.bits, 28);
  TF_OK_OR_FAIL(tf_addr_parse(&a, "203.0.113.15"));
  ck_assert_int_eq(tf_prefix_contains(&p, &a), 1);
  TF_OK_OR_FAIL(tf_addr_parse(&a, "203.0.113.16"));
  ck_assert_int_eq(tf_prefix_contains(&p, &a), 0);
  tf_prefix_bounds(&p, &lo, &hi);
  TF_OK_OR_FAIL(tf_addr_format(buf, sizeof(buf), &hi));
  ck_assert_str_eq(buf, "203.0.113.15");
  ck_assert_int_eq(tf_prefix_parse(&p, "203.0.113.1/28"), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "\"203.0.113.1/28\" has host bits set");
  ck_assert_int_eq(tf_prefix_parse(&p, "10.0.0.0/33"), TF_EINVALID);
  ck_assert_int_eq(tf_prefix_parse(&p, "10.0.0.0/"), TF_EINVALID);
  TF_OK_OR_FAIL(tf_prefix_parse(&p, "fc00::/7"));
  tf_prefix_bounds(&p, &lo, &hi);
  TF_OK_OR_FAIL(tf_addr_format(buf, sizeof(buf), &hi));
  ck_assert_str_eq(buf, "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  TF_OK_OR_FAIL(tf_prefix_parse(&p, "::1"));
  ck_assert_int_eq(p.bits, 128);
}
END_TEST

START_TEST(test_addr__port_ranges)
{
  tf_port_range r;
  TF_OK_OR_FAIL(tf_port_range_parse(&r, "49152-49200"));
  ck_assert_int_eq(tf_port_range_size(r), 49);
  ck_assert_int_eq(tf_port_range_parse(&r, "49200-49152"), TF_EINVALID);
  ck_assert_str_eq(tf_error_last()->message, "\"49200-49152\": end 49152 is below start 49200");
  ck_assert_int_eq(tf_port_range_parse(&r, "0-10"), TF_EINVALID);
  ck_assert_int_eq(tf_port_range_parse(&r, "1-65536"), TF_EINVALID);
  ck_assert_int_eq(tf_port_range_parse(&r, "10"), TF_EINVALID);
}
END_TEST

START_TEST(test_doc__json_errors_name_the_offset)
{
  cJSON *j = NULL;
  const char *bad = "{\n  \"a\": [1,\n  2,,]\n}";
  ck_assert_int_eq(tf_doc__parse_json(&j, bad, strlen(bad), NULL), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "line 3, column 5 (byte 17): invalid JSON");
  ck_assert_int_eq(tf_doc__parse_json(&j, "{} x", 4, NULL), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "line 1, column 4 (byte 3): unexpected data after the JSON value");
  ck_assert_int_eq(tf_doc__parse_json(&j, "", 0, NULL), TF_EPROTO);
  TF_OK_OR_FAIL(tf_doc__parse_json(&j, " {\"a\":1} \n", 10, NULL));
  cJSON_Delete(j);
}
END_TEST

START_TEST(test_doc__yaml_core_schema)
{
  cJSON *j = NULL;
  const char *y = "a: 3\nb: \"3\"\nc: true\nd: ~\ne: [x, 1.5]\nf: {g: 'h'}\ni: 0x1F\n";
  TF_OK_OR_FAIL(tf_doc__parse_yaml(&j, y, strlen(y), NULL));
  ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "a")));
  ck_assert(cJSON_IsString(cJSON_GetObjectItem(j, "b")));
  ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "c")));
  ck_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "d")));
  ck_assert_double_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "e"), 1)->valuedouble, 1.5);
  ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "f"), "g")->valuestring, "h");
  ck_assert(cJSON_IsString(cJSON_GetObjectItem(j, "i")));
  cJSON_Delete(j);
}
END_TEST

START_TEST(test_doc__yaml_errors)
{
  cJSON *j = NULL;
  const char *dup = "a: 1\na: 2\n";
  ck_assert_int_eq(tf_doc__parse_yaml(&j, dup, strlen(dup), NULL), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "line 2, column 1 (byte 5): a: duplicate key (first at line 1, column 1)");
  const char *alias = "a: &x 1\nb: *x\n";
  ck_assert_int_eq(tf_doc__parse_yaml(&j, alias, strlen(alias), NULL), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "line 2, column 4 (byte 11): YAML aliases are not supported");
  const char *two = "a: 1\n---\nb: 2\n";
  ck_assert_int_eq(tf_doc__parse_yaml(&j, two, strlen(two), NULL), TF_EPROTO);
  ck_assert_str_eq(tf_error_last()->message, "line 2, column 1 (byte 5): only one YAML document is allowed");
  const char *bad = "a: [1, 2\n";
  ck_assert_int_eq(tf_doc__parse_yaml(&j, bad, strlen(bad), NULL), TF_EPROTO);
  ck_assert_ptr_null(j);
}
END_TEST

/* The address lists people write on a command line: ranges, single addresses, prefixes. */
START_TEST(test_addr__lists)
{
  tf_addr a[600];
  size_t n = 0;
  char text[TF_ADDR_STRLEN];
  TF_OK_OR_FAIL(tf_addr_list_parse(a, 600, &n, "127.0.0.11-13, 127.0.0.20,fd00::fe-101,10.0.0.254/31"));
  ck_assert_uint_eq(n, 3 + 1 + 4 + 2);
  tf_addr_format(text, sizeof(text), &a[2]);
  ck_assert_str_eq(text, "127.0.0.13");
  tf_addr_format(text, sizeof(text), &a[5]);
  ck_assert_str_eq(text, "fd00::ff");
  tf_addr_format(text, sizeof(text), &a[6]);
  ck_assert_str_eq(text, "fd00::100"); /* the carry into the next byte */
  tf_addr_format(text, sizeof(text), &a[9]);
  ck_assert_str_eq(text, "10.0.0.255");
  TF_OK_OR_FAIL(tf_addr_list_parse(a, 600, &n, "10.0.0.0/24"));
  ck_assert_uint_eq(n, 256);
  ck_assert_int_eq(tf_addr_list_parse(a, 600, &n, "10.0.0.0/23"), TF_EINVALID);
  ck_assert_int_eq(tf_addr_list_parse(a, 600, &n, "127.0.0.1,127.0.0.300"), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "item 1 \"127.0.0.300\""));
  ck_assert_int_eq(tf_addr_list_parse(a, 600, &n, "127.0.0.13-11"), TF_EINVALID);
  ck_assert_int_eq(tf_addr_list_parse(a, 600, &n, "127.0.0.1-x"), TF_EINVALID);
  ck_assert_int_eq(tf_addr_list_parse(a, 600, &n, " , "), TF_EINVALID);
  ck_assert_int_eq(tf_addr_list_parse(a, 2, &n, "127.0.0.1-3"), TF_EBUFS);
}
END_TEST

/* The keyed HMAC-SHA1 state and MD5 agree with OpenSSL's HMAC() and EVP MD5 byte for byte:
 * RFC 2202's vectors, then keys of every length from 0 to 200 bytes (past the 64-byte block,
 * where the key is hashed first) over messages of 0 to 300 bytes split at every kind of point,
 * then messages of every length from 0 to 300 bytes. */
START_TEST(test_mac__agrees_with_openssl)
{
  static const struct {
    const char *key, *data, *hex;
    size_t key_len;
  } rfc2202[] = {
    {"Jefe", "what do ya want for nothing?", "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79", 4},
    {"\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa"
     "\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa"
     "\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa"
     "\xaa\xaa\xaa\xaa\xaa",
     "Test Using Larger Than Block-Size Key - Hash Key First", "aa4ae5e15272d00e95705637ce8a3b55ed402112", 80},
  };
  uint8_t mac[TF_MAC_SIZE], want[EVP_MAX_MD_SIZE];
  char hex[2 * TF_MAC_SIZE + 1];
  tf_mac m;
  for (size_t i = 0; i < sizeof(rfc2202) / sizeof(rfc2202[0]); i++) {
    tf_mac__init(&m, rfc2202[i].key, rfc2202[i].key_len);
    tf_mac__sign(&m, rfc2202[i].data, strlen(rfc2202[i].data), NULL, 0, mac);
    for (size_t k = 0; k < TF_MAC_SIZE; k++) snprintf(hex + 2 * k, 3, "%02x", mac[k]);
    ck_assert_str_eq(hex, rfc2202[i].hex);
  }
  uint8_t key[200], data[300];
  uint32_t x = 2202;
  for (size_t i = 0; i < sizeof(key); i++) key[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
  for (size_t i = 0; i < sizeof(data); i++) data[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
  for (size_t klen = 0; klen <= sizeof(key); klen++) {
    size_t dlen = (klen * 7) % (sizeof(data) + 1), split = dlen ? (klen * 13) % (dlen + 1) : 0;
    unsigned n = 0;
    ck_assert_ptr_nonnull(HMAC(EVP_sha1(), key, (int)klen, data, dlen, want, &n));
    ck_assert_uint_eq(n, TF_MAC_SIZE);
    tf_mac__init(&m, key, klen);
    tf_mac__sign(&m, data, split, data + split, dlen - split, mac);
    ck_assert_msg(!memcmp(mac, want, TF_MAC_SIZE), "key of %zu bytes, %zu bytes split at %zu", klen, dlen, split);
    tf_mac__sign(&m, data, dlen, NULL, 0, mac); /* the keyed state is reused unchanged */
    ck_assert_msg(!memcmp(mac, want, TF_MAC_SIZE), "key of %zu bytes, reused", klen);
  }
  /* every message length to 300 (each place of SHA-1's padding: one final block or two),
   * split at its start, a STUN header's 20 bytes, its middle and its end */
  tf_mac__init(&m, key, 16);
  for (size_t dlen = 0; dlen <= sizeof(data); dlen++) {
    unsigned n = 0;
    ck_assert_ptr_nonnull(HMAC(EVP_sha1(), key, 16, data, dlen, want, &n));
    const size_t splits[] = {0, dlen < 20 ? dlen : 20, dlen / 2, dlen};
    for (size_t s = 0; s < sizeof(splits) / sizeof(splits[0]); s++) {
      tf_mac__sign(&m, data, splits[s], data + splits[s], dlen - splits[s], mac);
      ck_assert_msg(!memcmp(mac, want, TF_MAC_SIZE), "%zu bytes split at %zu", dlen, splits[s]);
    }
  }
  tf_mac__wipe(&m);
  const char *parts[] = {"user", ":", "realm.test", ":", "pass word"};
  uint8_t md5[16];
  unsigned n = 0;
  tf_mac__md5(md5, parts, 5);
  ck_assert_int_eq(EVP_Digest("user:realm.test:pass word", 25, want, &n, EVP_md5(), NULL), 1);
  ck_assert_uint_eq(n, 16);
  ck_assert_mem_eq(md5, want, 16);
}
END_TEST

/* The one hash table under random puts and deletes (deletion shifts entries back
 * within their probe runs): every answer agrees with a plain array. */
START_TEST(test_map__random_puts_and_deletes_agree_with_an_array)
{
  enum { KEYS = 700, OPS = 40000 };
  static int want[KEYS]; /* 0: absent, else the value stored */
  static int vals[KEYS][64];
  memset(want, 0, sizeof(want));
  tf_smap *m = tf_smap__new(NULL);
  ck_assert_ptr_nonnull(m);
  uint32_t x = 12345;
  size_t present = 0;
  char key[16];
  for (int op = 0; op < OPS; op++) {
    x = x * 1103515245u + 12345u;
    int k = (int)((x >> 8) % KEYS);
    snprintf(key, sizeof(key), "k%d", k);
    if ((x >> 4) % 3) {
      present += !want[k];
      want[k] = op + 1;
      ck_assert_int_eq(tf_smap__put(m, key, &vals[k][0] + (op % 64)), 0);
      vals[k][op % 64] = op + 1;
    } else {
      ck_assert_int_eq(tf_smap__del(m, key), want[k] != 0);
      present -= want[k] != 0;
      want[k] = 0;
    }
    if (op % 997 == 0 || op == OPS - 1) {
      ck_assert_uint_eq(tf_smap__count(m), present);
      for (int j = 0; j < KEYS; j++) {
        snprintf(key, sizeof(key), "k%d", j);
        int *v = tf_smap__get(m, key);
        ck_assert_int_eq(v != NULL, want[j] != 0);
        if (v) ck_assert_int_eq(*v, want[j]);
      }
      size_t pos = 0, seen = 0;
      const char *kk;
      void *vv;
      while (tf_smap__next(m, &pos, &kk, &vv)) {
        ck_assert_int_ne(want[atoi(kk + 1)], 0);
        seen++;
      }
      ck_assert_uint_eq(seen, present);
    }
  }
  tf_smap__free(m);
}
END_TEST

/* Each _init() of a struct with more than one version writes nothing past the version asked for (an older
 * caller's struct ends there), and refuses version 0 and versions newer than the library's. */
#define INIT_KEEPS_TO(T, init, latest, v1_end)                                                              \
  do {                                                                                                     \
    union {                                                                                                \
      T s;                                                                                                 \
      unsigned char b[sizeof(T)];                                                                          \
    } u;                                                                                                   \
    memset(&u, 0xAA, sizeof(u));                                                                           \
    TF_OK_OR_FAIL(init(&u.s, 1));                                                                          \
    ck_assert_uint_eq(u.s.version, 1);                                                                     \
    for (size_t i = (v1_end); i < sizeof(T); i++) ck_assert_msg(u.b[i] == 0xAA, #T ": byte %zu written", i); \
    TF_OK_OR_FAIL(init(&u.s, latest));                                                                     \
    ck_assert_uint_eq(u.s.version, latest);                                                                \
    ck_assert_int_eq(init(&u.s, 0), TF_EINVALID);                                                          \
    ck_assert_int_eq(init(&u.s, (latest) + 1), TF_EINVALID);                                               \
  } while (0)

START_TEST(test_common__inits_write_no_field_past_the_callers_version)
{
  INIT_KEEPS_TO(tf_relay_observation, tf_relay_observation_init, TF_RELAY_OBSERVATION_VERSION,
                offsetof(tf_relay_observation, held_back));
  INIT_KEEPS_TO(tf_engine_relay_facts, tf_engine_relay_facts_init, TF_ENGINE_RELAY_FACTS_VERSION,
                offsetof(tf_engine_relay_facts, draining));
  INIT_KEEPS_TO(tf_informer_options, tf_informer_options_init, TF_INFORMER_OPTIONS_VERSION,
                offsetof(tf_informer_options, bookmark_interval_ms));
  INIT_KEEPS_TO(tf_kube_list_options, tf_kube_list_options_init, TF_KUBE_LIST_OPTIONS_VERSION,
                offsetof(tf_kube_list_options, silence_ms));
  INIT_KEEPS_TO(tf_relayctl_request, tf_relayctl_request_init, TF_RELAYCTL_REQUEST_VERSION,
                offsetof(tf_relayctl_request, owner_pid));
  INIT_KEEPS_TO(tf_manifest_options, tf_manifest_options_init, TF_MANIFEST_OPTIONS_VERSION,
                offsetof(tf_manifest_options, metrics_token));
  INIT_KEEPS_TO(tf_coturn_options, tf_coturn_options_init, TF_COTURN_OPTIONS_VERSION, offsetof(tf_coturn_options, prometheus));
  /* one version so far: the whole struct, and the version asked for */
  tf_node_info ni;
  TF_OK_OR_FAIL(tf_node_info_init(&ni, TF_NODE_INFO_VERSION));
  ck_assert_int_eq(ni.ready, -1);
  ck_assert_int_eq(tf_node_info_init(&ni, TF_NODE_INFO_VERSION + 1), TF_EINVALID);
  tf_manifest_event ev;
  TF_OK_OR_FAIL(tf_manifest_event_init(&ev, TF_MANIFEST_EVENT_VERSION));
  ck_assert_str_eq(ev.type, "Normal");
  ck_assert_int_eq(ev.count, 1);
  ck_assert_int_eq(tf_manifest_event_init(&ev, 0), TF_EINVALID);
  tf_kube_options ko;
  TF_OK_OR_FAIL(tf_kube_options_init(&ko, 1));
  ck_assert_uint_eq(ko.version, 1);
}
END_TEST

Suite *tf_test_common_suite(void)
{
  Suite *s = suite_create("common");
  TCase *tc = tcase_create("common");
  tcase_add_test(tc, test_common__error_names_and_text);
  tcase_add_test(tc, test_common__error_message_may_quote_the_last_one);
  tcase_add_test(tc, test_common__version);
  tcase_add_test(tc, test_addr__parse_and_format_canonical);
  tcase_add_test(tc, test_addr__prefixes);
  tcase_add_test(tc, test_addr__lists);
  tcase_add_test(tc, test_addr__port_ranges);
  tcase_add_test(tc, test_doc__json_errors_name_the_offset);
  tcase_add_test(tc, test_doc__yaml_core_schema);
  tcase_add_test(tc, test_doc__yaml_errors);
  tcase_add_test(tc, test_map__random_puts_and_deletes_agree_with_an_array);
  tcase_add_test(tc, test_mac__agrees_with_openssl);
  tcase_add_test(tc, test_common__inits_write_no_field_past_the_callers_version);
  suite_add_tcase(s, tc);
  return s;
}
