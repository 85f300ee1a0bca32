/* uri: RFC 7065 turn:/turns: URIs against the reference vectors; formatting. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_test.h"
#include "tf_vectors.h"

static const char *host_type_name(tf_uri_host_type t)
{
  return t == TF_URI_HOST_IPV4 ? "ipv4" : t == TF_URI_HOST_IPV6 ? "ipv6" : "name";
}

static const char *mode_name(tf_uri_mode m)
{
  switch (m) {
  case TF_URI_MODE_UDP:
    return "udp";
  case TF_URI_MODE_TCP:
    return "tcp";
  case TF_URI_MODE_TLS:
    return "tls";
  case TF_URI_MODE_DTLS:
    return "dtls";
  default:
    return "unsupported";
  }
}

/* The reason code of the last error ("CODE at byte N: why"), offset checked. */
static const char *last_reason(const char *text)
{
  static char code[64];
  const char *msg = tf_error_last()->message;
  const char *at = strstr(msg, " at byte ");
  ck_assert_msg(at != NULL && (size_t)(at - msg) < sizeof(code), "no reason code: %s", msg);
  memcpy(code, msg, (size_t)(at - msg));
  code[at - msg] = '\0';
  ck_assert_uint_le(strtoul(at + 9, NULL, 10), strlen(text));
  return code;
}

static void expect_invalid(const char *text, const char *reason)
{
  tf_uri *u = (tf_uri *)1;
  ck_assert_msg(tf_uri_parse(&u, text) == TF_EINVALID, "%s: parsed", text);
  ck_assert_msg(strcmp(last_reason(text), reason) == 0, "%s: %s, want %s", text, tf_error_last()->message, reason);
  ck_assert_ptr_eq(u, (tf_uri *)1);
}

START_TEST(test_uri__vectors)
{
  tf_vectors v = tf_vectors_load("turn_uris.jsonl");
  ck_assert_int_eq(v.count, 32);
  size_t valid = 0, invalid = 0;
  for (size_t i = 0; i < v.count; i++) {
    const cJSON *o = v.items[i];
    const char *text = tf_vec_str(o, "uri");
    if (!cJSON_IsTrue(cJSON_GetObjectItem(o, "valid"))) {
      expect_invalid(text, tf_vec_str(o, "reason"));
      invalid++;
      continue;
    }
    tf_uri *u = NULL;
    TF_OK_OR_FAIL(tf_uri_parse(&u, text));
    ck_assert_str_eq(tf_uri_scheme(u), tf_vec_str(o, "scheme"));
    ck_assert_int_eq(tf_uri_secure(u), cJSON_IsTrue(cJSON_GetObjectItem(o, "secure")));
    ck_assert_str_eq(tf_uri_host(u), tf_vec_str(o, "host"));
    ck_assert_str_eq(host_type_name(tf_uri_host_kind(u)), tf_vec_str(o, "host_type"));
    ck_assert_int_eq(tf_uri_port(u), cJSON_GetObjectItem(o, "port")->valueint);
    ck_assert_int_eq(tf_uri_port_explicit(u), cJSON_IsTrue(cJSON_GetObjectItem(o, "port_explicit")));
    ck_assert_str_eq(tf_uri_transport(u), tf_vec_str(o, "transport"));
    ck_assert_int_eq(tf_uri_transport_explicit(u), cJSON_IsTrue(cJSON_GetObjectItem(o, "transport_explicit")));
    ck_assert_str_eq(mode_name(tf_uri_open_mode(u)), tf_vec_str(o, "mode"));
    tf_uri_free(u);
    valid++;
  }
  ck_assert_int_eq(valid, 13);
  ck_assert_int_eq(invalid, 19);
  tf_vectors_free(&v);
}
END_TEST

START_TEST(test_uri__more_cases_from_the_reference_parser)
{
  /* expectations computed with verify_vectors.parse_turn_uri() */
  expect_invalid("turn:host:0", "PORT_OUT_OF_RANGE");
  expect_invalid("turn:host:99999999999999999999", "PORT_OUT_OF_RANGE");
  expect_invalid("turn:host?transport=", "BAD_TRANSPORT");
  expect_invalid("turn:host?transport=u/p", "BAD_TRANSPORT");
  expect_invalid("turn:host?", "BAD_QUERY");
  expect_invalid("stun:host", "BAD_SCHEME");
  expect_invalid("turn", "NO_SCHEME");
  expect_invalid("", "NO_SCHEME");
  expect_invalid("turn:[]", "BAD_IP_LITERAL");
  expect_invalid("turn:[::1]]", "BAD_HOSTPORT");
  expect_invalid("turn:h]ost", "BAD_IP_LITERAL");
  expect_invalid("turn::3478", "EMPTY_HOST");
  expect_invalid("turn:?transport=udp", "EMPTY_HOST");
  expect_invalid("turn:ho%2", "BAD_HOST");
  expect_invalid("turn:ho%zzst", "BAD_HOST");
  expect_invalid("turn:h\xc3\xa9st", "BAD_HOST");
  expect_invalid("turns:[::1]:+1", "BAD_PORT");
  expect_invalid("turn:[0:0:0:0:0:0:0:0:0]", "BAD_IP_LITERAL");

  tf_uri *u = NULL;
  TF_OK_OR_FAIL(tf_uri_parse(&u, "turn:ho%2Dst!$&'()*+,;=:1?transport=SCTP"));
  ck_assert_str_eq(tf_uri_host(u), "ho%2Dst!$&'()*+,;=");
  ck_assert_int_eq(tf_uri_host_kind(u), TF_URI_HOST_NAME);
  ck_assert_int_eq(tf_uri_port(u), 1);
  ck_assert_str_eq(tf_uri_transport(u), "sctp");
  ck_assert_int_eq(tf_uri_open_mode(u), TF_URI_MODE_UNSUPPORTED);
  tf_uri_free(u);
  TF_OK_OR_FAIL(tf_uri_parse(&u, "turns:[::1]:?Transport=Tcp"));
  ck_assert_int_eq(tf_uri_port(u), 5349);
  ck_assert_int_eq(tf_uri_port_explicit(u), 0);
  ck_assert_int_eq(tf_uri_open_mode(u), TF_URI_MODE_TLS);
  tf_uri_free(u);
  /* a dotted quad with a leading zero is a name, as Python's ipaddress sees it */
  TF_OK_OR_FAIL(tf_uri_parse(&u, "turn:203.0.113.07:65535"));
  ck_assert_int_eq(tf_uri_host_kind(u), TF_URI_HOST_NAME);
  ck_assert_int_eq(tf_uri_port(u), 65535);
  tf_uri_free(u);
  tf_uri_free(NULL);
  ck_assert_int_eq(tf_uri_parse(NULL, "turn:x"), TF_EINVALID);
  ck_assert_int_eq(tf_uri_parse(&u, NULL), TF_EINVALID);
}
END_TEST

START_TEST(test_uri__format_and_parse_back)
{
  const struct {
    int secure;
    const char *ip;
    uint16_t port;
    const char *transport;
    const char *want;
    tf_uri_mode mode;
  } cases[] = {
      {0, "203.0.113.7", 3478, "udp", "turn:203.0.113.7:3478?transport=udp", TF_URI_MODE_UDP},
      {0, "203.0.113.7", 3479, "tcp", "turn:203.0.113.7:3479?transport=tcp", TF_URI_MODE_TCP},
      {1, "2001:0db8::7", 5349, "tcp", "turns:[2001:db8::7]:5349?transport=tcp", TF_URI_MODE_TLS},
      {1, "::1", 443, "udp", "turns:[::1]:443?transport=udp", TF_URI_MODE_DTLS},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_addr a, back;
    char *text = NULL;
    TF_OK_OR_FAIL(tf_addr_parse(&a, cases[i].ip));
    TF_OK_OR_FAIL(tf_uri_format(&text, cases[i].secure, &a, cases[i].port, cases[i].transport));
    ck_assert_str_eq(text, cases[i].want);
    tf_uri *u = NULL;
    TF_OK_OR_FAIL(tf_uri_parse(&u, text));
    TF_OK_OR_FAIL(tf_addr_parse(&back, tf_uri_host(u)));
    ck_assert_int_eq(tf_addr_compare(&a, &back), 0);
    ck_assert_int_eq(tf_uri_port(u), cases[i].port);
    ck_assert_int_eq(tf_uri_open_mode(u), cases[i].mode);
    ck_assert_int_eq(tf_uri_host_kind(u), a.family == TF_AF_INET ? TF_URI_HOST_IPV4 : TF_URI_HOST_IPV6);
    tf_uri_free(u);
    tf_free(text);
  }
  tf_addr a;
  char *text = (char *)1;
  TF_OK_OR_FAIL(tf_addr_parse(&a, "203.0.113.7"));
  ck_assert_int_eq(tf_uri_format(&text, 0, &a, 3478, "sctp"), TF_EINVALID);
  ck_assert_int_eq(tf_uri_format(&text, 0, &a, 0, "udp"), TF_EINVALID);
  ck_assert_int_eq(tf_uri_format(&text, 0, NULL, 3478, "udp"), TF_EINVALID);
  a.family = 5;
  ck_assert_int_eq(tf_uri_format(&text, 0, &a, 3478, "udp"), TF_EINVALID);
  ck_assert_ptr_eq(text, (char *)1);
}
END_TEST

Suite *tf_test_uri_suite(void)
{
  Suite *s = suite_create("uri");
  TCase *tc = tcase_create("uri");
  tcase_add_test(tc, test_uri__vectors);
  tcase_add_test(tc, test_uri__more_cases_from_the_reference_parser);
  tcase_add_test(tc, test_uri__format_and_parse_back);
  suite_add_tcase(s, tc);
  return s;
}
