/* issuer: which relays a user is handed and the credential for them, on synthetic pools and a synthetic clock. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_test.h"

#define NOW 1767225600 /* 2026-01-01T00:00:00Z: the synthetic clock */
#define SECRET "fleet-shared-secret"
#define PINNED_CHOICE "p-relay-a0 p-relay-c2 p-relay-e4 "

/* A pool of @p n relays on 198.51.100.(10+i), each with a udp and a tcp URI, plus a status document:
 * in_use[i] < 0 is an unknown count; flags per relay: 'r' ready, 'd' draining, 'u' unready, 'f' Full. */
typedef struct fixture {
  char ice[8192];
  char status[16384];
} fixture;

static void fixture_make(fixture *f, size_t n, const int *in_use, const char *flags, size_t published)
{
  size_t o = 0, s = 0;
  o += (size_t)snprintf(f->ice + o, sizeof(f->ice) - o, "[");
  s += (size_t)snprintf(f->status + s, sizeof(f->status) - s, "{\"replicas\":%zu,\"relays\":[", n);
  for (size_t i = 0; i < n; i++) {
    char flag = flags ? flags[i] : 'r';
    if (i < published)
      o += (size_t)snprintf(f->ice + o, sizeof(f->ice) - o,
                            "%s{\"urls\":[\"turn:198.51.100.%zu:3478?transport=udp\",\"turn:198.51.100.%zu:3478?transport=tcp\"]}",
                            i ? "," : "", 10 + i, 10 + i);
    char use[32];
    if (in_use && in_use[i] >= 0) snprintf(use, sizeof(use), "%d", in_use[i]);
    else snprintf(use, sizeof(use), "null");
    s += (size_t)snprintf(f->status + s, sizeof(f->status) - s,
                          "%s{\"name\":\"p-relay-%c%zu\",\"relayAddress\":\"198.51.100.%zu\",\"portRange\":{\"start\":49152,"
                          "\"end\":49251},\"ready\":%s,\"draining\":%s,\"allocations\":%s,\"portsInUse\":%s,"
                          "\"portsTotal\":100,\"state\":\"%s\"}",
                          i ? "," : "", 'a' + (char)i, i, 10 + i, flag == 'u' ? "false" : "true",
                          flag == 'd' ? "true" : "false", use, use, flag == 'f' ? "Full" : "Ready");
  }
  snprintf(f->ice + o, sizeof(f->ice) - o, "]");
  snprintf(f->status + s, sizeof(f->status) - s, "]}");
}

static tf_issuer_pool *pool_of(const fixture *f)
{
  tf_issuer_pool *p = NULL;
  TF_OK_OR_FAIL(tf_issuer_pool_new(&p, f->ice, strlen(f->ice), f->status, strlen(f->status)));
  return p;
}

static tf_issuer_answer *ask(const tf_issuer_pool *p, const char *user, size_t max_relays)
{
  tf_issuer_request req = TF_ISSUER_REQUEST_INIT;
  req.user = user;
  tf_issuer_options o = TF_ISSUER_OPTIONS_INIT;
  o.max_relays = max_relays;
  tf_issuer_answer *a = NULL;
  TF_OK_OR_FAIL(tf_issuer_answer_new(&a, p, SECRET, &req, &o, NOW));
  return a;
}

/* the relay names of an answer joined by ' ' */
static void names_of(const tf_issuer_answer *a, char *buf, size_t size)
{
  buf[0] = '\0';
  for (size_t i = 0; i < tf_issuer_answer_relay_count(a); i++) {
    strncat(buf, tf_issuer_answer_relay_name(a, i), size - strlen(buf) - 2);
    strcat(buf, " ");
  }
}

static int names_has(const tf_issuer_answer *a, const char *name)
{
  for (size_t i = 0; i < tf_issuer_answer_relay_count(a); i++)
    if (strcmp(tf_issuer_answer_relay_name(a, i), name) == 0) return 1;
  return 0;
}

START_TEST(test_issuer__ice_answer_is_an_rtcconfiguration_fragment_with_rest_credentials)
{
  fixture f;
  int use[] = {10, 20};
  fixture_make(&f, 2, use, NULL, 2);
  tf_issuer_pool *p = pool_of(&f);
  ck_assert_uint_eq(tf_issuer_pool_eligible(p), 2);
  tf_issuer_answer *a = ask(p, "alice", 2);
  char *json = NULL;
  TF_OK_OR_FAIL(tf_issuer_answer_json(&json, a, TF_ISSUER_FORM_ICE));
  cJSON *root = cJSON_Parse(json);
  ck_assert_ptr_nonnull(root);
  ck_assert_int_eq((int)cJSON_GetObjectItem(root, "ttl")->valuedouble, TF_ISSUER_TTL_DEFAULT_S);
  const cJSON *servers = cJSON_GetObjectItem(root, "iceServers");
  ck_assert_int_eq(cJSON_GetArraySize(servers), 2);
  /* least loaded first: 198.51.100.10 has 90 ports free, .11 has 80 */
  const cJSON *s0 = cJSON_GetArrayItem(servers, 0);
  ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(s0, "urls"), 0)->valuestring,
                   "turn:198.51.100.10:3478?transport=udp");
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(s0, "urls")), 2);
  const char *user = cJSON_GetObjectItem(s0, "username")->valuestring;
  const char *cred = cJSON_GetObjectItem(s0, "credential")->valuestring;
  char want[64];
  snprintf(want, sizeof(want), "%d:alice", NOW + TF_ISSUER_TTL_DEFAULT_S);
  ck_assert_str_eq(user, want);
  /* coturn's check of the same credential: valid until the expiry, with this secret only */
  TF_OK_OR_FAIL(tf_cred_verify(SECRET, user, cred, NOW + TF_ISSUER_TTL_DEFAULT_S, 0));
  ck_assert_int_eq(tf_cred_verify(SECRET, user, cred, NOW + TF_ISSUER_TTL_DEFAULT_S + 1, 0), TF_EAUTH);
  ck_assert_int_eq(tf_cred_verify("previous-secret", user, cred, NOW, 0), TF_EAUTH);
  cJSON_Delete(root);
  tf_secret_free(json);
  tf_issuer_answer_free(a);
  tf_issuer_pool_free(p);
}
END_TEST

START_TEST(test_issuer__rest_answer_has_the_draft_fields)
{
  fixture f;
  fixture_make(&f, 3, NULL, NULL, 3);
  tf_issuer_pool *p = pool_of(&f);
  tf_issuer_answer *a = ask(p, "bob", 2);
  char *json = NULL;
  TF_OK_OR_FAIL(tf_issuer_answer_json(&json, a, TF_ISSUER_FORM_REST));
  cJSON *root = cJSON_Parse(json);
  ck_assert_ptr_nonnull(root);
  ck_assert_int_eq(cJSON_GetArraySize(root), 4);
  const char *user = cJSON_GetObjectItem(root, "username")->valuestring;
  const char *pw = cJSON_GetObjectItem(root, "password")->valuestring;
  TF_OK_OR_FAIL(tf_cred_verify(SECRET, user, pw, NOW, 0));
  ck_assert_int_eq((int)cJSON_GetObjectItem(root, "ttl")->valuedouble, TF_ISSUER_TTL_DEFAULT_S);
  /* two relays, two URIs each, flattened */
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "uris")), 4);
  cJSON_Delete(root);
  tf_secret_free(json);
  ck_assert_int_eq(tf_issuer_answer_json(&json, a, (tf_issuer_form)7), TF_EINVALID);
  tf_issuer_answer_free(a);
  tf_issuer_pool_free(p);
}
END_TEST

START_TEST(test_issuer__same_user_keeps_its_relays_while_they_stay_eligible)
{
  fixture f;
  int use[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  fixture_make(&f, 8, use, NULL, 8);
  tf_issuer_pool *p = pool_of(&f);
  char first[256], again[256];
  tf_issuer_answer *a = ask(p, "carol", 2);
  names_of(a, first, sizeof(first));
  tf_issuer_answer_free(a);

  /* loads change, the set does not (only the order may) */
  int use2[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  fixture g;
  fixture_make(&g, 8, use2, NULL, 8);
  tf_issuer_pool *q = pool_of(&g);
  a = ask(q, "carol", 2);
  ck_assert_uint_eq(tf_issuer_answer_relay_count(a), 2);
  char n0[64], n1[64];
  sscanf(first, "%63s %63s", n0, n1);
  ck_assert_msg(names_has(a, n0) && names_has(a, n1), "carol had %s and now has another set", first);
  tf_issuer_answer_free(a);

  /* one of them drains: carol keeps the other, and gets one new relay */
  char flags[9] = "rrrrrrrr";
  flags[n0[8] - 'a'] = 'd';
  fixture h;
  fixture_make(&h, 8, use, flags, 8);
  tf_issuer_pool *r = pool_of(&h);
  ck_assert_uint_eq(tf_issuer_pool_eligible(r), 7);
  a = ask(r, "carol", 2);
  names_of(a, again, sizeof(again));
  ck_assert_msg(!names_has(a, n0), "the draining %s was handed out: %s", n0, again);
  ck_assert_msg(names_has(a, n1), "carol lost %s that is still healthy: %s", n1, again);
  tf_issuer_answer_free(a);

  /* users spread over the relays: with 200 users every relay is somebody's */
  int seen[8] = {0};
  for (int u = 0; u < 200; u++) {
    char name[16];
    snprintf(name, sizeof(name), "user%d", u);
    a = ask(p, name, 2);
    for (size_t i = 0; i < tf_issuer_answer_relay_count(a); i++) seen[tf_issuer_answer_relay_name(a, i)[8] - 'a']++;
    tf_issuer_answer_free(a);
  }
  for (int i = 0; i < 8; i++) ck_assert_msg(seen[i] > 10, "relay %d got %d of 400 hand-outs", i, seen[i]);
  tf_issuer_pool_free(p);
  tf_issuer_pool_free(q);
  tf_issuer_pool_free(r);
}
END_TEST

START_TEST(test_issuer__never_draining_unready_full_or_unpublished)
{
  fixture f;
  int use[5] = {0, 0, 0, 100, 0};
  /* a draining, b unready, c ready, d at its port total, e Full by state */
  fixture_make(&f, 5, use, "durrf", 5);
  tf_issuer_pool *p = pool_of(&f);
  ck_assert_uint_eq(tf_issuer_pool_eligible(p), 1);
  for (int u = 0; u < 50; u++) {
    char name[16];
    snprintf(name, sizeof(name), "u%d", u);
    tf_issuer_answer *a = ask(p, name, 4);
    ck_assert_uint_eq(tf_issuer_answer_relay_count(a), 1);
    ck_assert_str_eq(tf_issuer_answer_relay_name(a, 0), "p-relay-c2");
    tf_issuer_answer_free(a);
  }
  tf_issuer_pool_free(p);

  /* ready in the status but not (or no longer) in the turn-uris: never handed out */
  fixture g;
  fixture_make(&g, 3, NULL, NULL, 1);
  p = pool_of(&g);
  ck_assert_uint_eq(tf_issuer_pool_eligible(p), 1);
  tf_issuer_answer *a = ask(p, "dave", 3);
  ck_assert_uint_eq(tf_issuer_answer_relay_count(a), 1);
  ck_assert_str_eq(tf_issuer_answer_relay_name(a, 0), "p-relay-a0");
  tf_issuer_answer_free(a);
  tf_issuer_pool_free(p);

  /* nothing eligible: TF_ENOTFOUND that says why */
  fixture h;
  fixture_make(&h, 2, NULL, "du", 2);
  p = pool_of(&h);
  tf_issuer_request req = TF_ISSUER_REQUEST_INIT;
  req.user = "erin";
  ck_assert_int_eq(tf_issuer_answer_new(&a, p, SECRET, &req, NULL, NOW), TF_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "no relay of the pool is ready"));
  ck_assert_ptr_null(a);
  tf_issuer_pool_free(p);
}
END_TEST

START_TEST(test_issuer__relays_under_pressure_only_when_needed)
{
  fixture f;
  int use[4] = {95, 91, 10, 50};
  fixture_make(&f, 4, use, NULL, 4);
  tf_issuer_pool *p = pool_of(&f);
  for (int u = 0; u < 50; u++) {
    char name[16];
    snprintf(name, sizeof(name), "u%d", u);
    tf_issuer_answer *a = ask(p, name, 2);
    /* c and d have headroom: every user gets them, least loaded first */
    ck_assert_str_eq(tf_issuer_answer_relay_name(a, 0), "p-relay-c2");
    ck_assert_str_eq(tf_issuer_answer_relay_name(a, 1), "p-relay-d3");
    tf_issuer_answer_free(a);
    a = ask(p, name, 3);
    ck_assert_uint_eq(tf_issuer_answer_relay_count(a), 3); /* then one of the pressured */
    tf_issuer_answer_free(a);
  }
  tf_issuer_pool_free(p);
}
END_TEST

START_TEST(test_issuer__transport_and_family_filters)
{
  const char *ice = "[{\"urls\":[\"turn:198.51.100.10:3478?transport=udp\",\"turns:198.51.100.10:5349?transport=tcp\","
                    "\"turn:[2001:db8::a]:3478?transport=udp\"]},{\"urls\":[\"turn:198.51.100.11:3478?transport=tcp\"]}]";
  const char *st = "{\"status\":{\"relays\":[{\"name\":\"p-relay-a\",\"relayAddress\":\"198.51.100.10,2001:db8::a\","
                   "\"ready\":true,\"draining\":false,\"portsInUse\":0,\"portsTotal\":10},"
                   "{\"name\":\"p-relay-b\",\"relayAddress\":\"198.51.100.11\",\"ready\":true,\"draining\":false,"
                   "\"portsInUse\":null,\"portsTotal\":10}]}}";
  tf_issuer_pool *p = NULL;
  TF_OK_OR_FAIL(tf_issuer_pool_new(&p, ice, strlen(ice), st, strlen(st)));
  ck_assert_uint_eq(tf_issuer_pool_eligible(p), 2);
  tf_issuer_request req = TF_ISSUER_REQUEST_INIT;
  req.user = "frank";
  TF_OK_OR_FAIL(tf_issuer_transports_parse(&req.transports, "UDP"));
  req.family = 6;
  tf_issuer_answer *a = NULL;
  TF_OK_OR_FAIL(tf_issuer_answer_new(&a, p, SECRET, &req, NULL, NOW));
  char *json = NULL;
  TF_OK_OR_FAIL(tf_issuer_answer_json(&json, a, TF_ISSUER_FORM_REST));
  ck_assert_ptr_nonnull(strstr(json, "\"uris\":[\"turn:[2001:db8::a]:3478?transport=udp\"]"));
  tf_secret_free(json);
  tf_issuer_answer_free(a);

  TF_OK_OR_FAIL(tf_issuer_transports_parse(&req.transports, "tls,tcp"));
  req.family = 4;
  TF_OK_OR_FAIL(tf_issuer_answer_new(&a, p, SECRET, &req, NULL, NOW));
  ck_assert_uint_eq(tf_issuer_answer_relay_count(a), 2);
  /* known count (10 free) before an unknown one */
  ck_assert_str_eq(tf_issuer_answer_relay_name(a, 0), "p-relay-a");
  TF_OK_OR_FAIL(tf_issuer_answer_json(&json, a, TF_ISSUER_FORM_ICE));
  ck_assert_ptr_nonnull(strstr(json, "\"urls\":[\"turns:198.51.100.10:5349?transport=tcp\"]"));
  ck_assert_ptr_null(strstr(json, "transport=udp"));
  tf_secret_free(json);
  tf_issuer_answer_free(a);

  /* dtls only on request, and no relay has it */
  req.transports = TF_ISSUER_DTLS;
  ck_assert_int_eq(tf_issuer_answer_new(&a, p, SECRET, &req, NULL, NOW), TF_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "transports and family"));
  tf_issuer_pool_free(p);

  int fam = 0;
  TF_OK_OR_FAIL(tf_issuer_family_parse(&fam, "IPv6"));
  ck_assert_int_eq(fam, 6);
  ck_assert_int_eq(tf_issuer_family_parse(&fam, "ipv5"), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "family"));
  unsigned int t = 0;
  ck_assert_int_eq(tf_issuer_transports_parse(&t, "udp,sctp"), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "transport"));
  ck_assert_int_eq(tf_issuer_transports_parse(&t, ""), TF_EINVALID);
}
END_TEST

START_TEST(test_issuer__partitioned_relays_on_one_address_match_in_name_order)
{
  /* PartitionedIP: two relays on one address, the first draining and so not published */
  const char *ice = "[{\"urls\":[\"turn:198.51.100.10:3479?transport=udp\"]}]";
  const char *st = "{\"relays\":[{\"name\":\"p-relay-a\",\"relayAddress\":\"198.51.100.10\",\"ready\":true,"
                   "\"draining\":true,\"portsInUse\":3,\"portsTotal\":10},{\"name\":\"p-relay-b\",\"relayAddress\":"
                   "\"198.51.100.10\",\"ready\":true,\"draining\":false,\"portsInUse\":1,\"portsTotal\":10}]}";
  tf_issuer_pool *p = NULL;
  TF_OK_OR_FAIL(tf_issuer_pool_new(&p, ice, strlen(ice), st, strlen(st)));
  tf_issuer_answer *a = ask(p, "gina", 2);
  ck_assert_uint_eq(tf_issuer_answer_relay_count(a), 1);
  ck_assert_str_eq(tf_issuer_answer_relay_name(a, 0), "p-relay-b");
  tf_issuer_answer_free(a);
  tf_issuer_pool_free(p);
}
END_TEST

START_TEST(test_issuer__ttl_bounds_and_request_fields)
{
  fixture f;
  fixture_make(&f, 1, NULL, NULL, 1);
  tf_issuer_pool *p = pool_of(&f);
  tf_issuer_request req = TF_ISSUER_REQUEST_INIT;
  tf_issuer_answer *a = NULL;
  req.user = "hank";
  req.ttl_s = 120;
  TF_OK_OR_FAIL(tf_issuer_answer_new(&a, p, SECRET, &req, NULL, NOW));
  ck_assert_int_eq(tf_issuer_answer_ttl(a), 120);
  tf_issuer_answer_free(a);
  static const struct {
    const char *user;
    int64_t ttl;
    const char *secret;
    const char *field;
  } bad[] = {{"hank", 59, SECRET, "ttl: 59 is outside 60-86400"},
             {"hank", 86401, SECRET, "ttl: 86401"},
             {NULL, 0, SECRET, "user: is required"},
             {"", 0, SECRET, "user: is required"},
             {"a:b", 0, SECRET, "user: byte 1"},
             {"a b", 0, SECRET, "user: byte 1"},
             {"hank", 0, "", "secret: is empty"},
             {"hank", 0, NULL, "secret: is empty"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    req.user = bad[i].user;
    req.ttl_s = bad[i].ttl;
    ck_assert_int_eq(tf_issuer_answer_new(&a, p, bad[i].secret, &req, NULL, NOW), TF_EINVALID);
    ck_assert_msg(strstr(tf_error_last()->message, bad[i].field), "case %zu: %s", i, tf_error_last()->message);
    ck_assert_ptr_null(a);
  }
  char longer[200];
  memset(longer, 'x', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = '\0';
  req.user = longer;
  req.ttl_s = 0;
  ck_assert_int_eq(tf_issuer_answer_new(&a, p, SECRET, &req, NULL, NOW), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "user: longer than 128"));

  /* options: bounds checked, read up to their version */
  tf_issuer_options o;
  TF_OK_OR_FAIL(tf_issuer_options_init(&o, TF_ISSUER_OPTIONS_VERSION));
  ck_assert_uint_eq(o.max_relays, TF_ISSUER_MAX_RELAYS_DEFAULT);
  ck_assert_int_eq(tf_issuer_options_init(&o, 99), TF_EINVALID);
  req.user = "hank";
  TF_OK_OR_FAIL(tf_issuer_options_init(&o, TF_ISSUER_OPTIONS_VERSION));
  o.ttl_min_s = 600;
  o.ttl_default_s = 300;
  ck_assert_int_eq(tf_issuer_answer_new(&a, p, SECRET, &req, &o, NOW), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "opts.ttl_default_s"));
  o.ttl_default_s = 600;
  o.pressure = 1.5;
  ck_assert_int_eq(tf_issuer_answer_new(&a, p, SECRET, &req, &o, NOW), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "opts.pressure"));
  o.pressure = 0;
  o.version = 7;
  ck_assert_int_eq(tf_issuer_answer_new(&a, p, SECRET, &req, &o, NOW), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "opts.version"));
  req.version = 0;
  ck_assert_int_eq(tf_issuer_answer_new(&a, p, SECRET, &req, NULL, NOW), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "request.version"));
  tf_issuer_pool_free(p);
}
END_TEST

START_TEST(test_issuer__bad_documents_name_the_field)
{
  static const struct {
    const char *ice, *status, *field;
    tf_err code;
  } bad[] = {
      {"{}", "{}", "iceServers: must be an array", TF_EINVALID},
      {"[", "{}", "iceServers: ", TF_EPROTO},
      {"[{\"urls\":\"turn:198.51.100.1\"}]", "{}", "iceServers[0].urls: must be an array", TF_EINVALID},
      {"[{\"urls\":[]}]", "{}", "iceServers[0].urls: must be a non-empty array", TF_EINVALID},
      {"[{\"urls\":[\"turn:198.51.100.1\",\"http://x\"]}]", "{}", "iceServers[0].urls[1]: BAD_SCHEME", TF_EINVALID},
      {"[{\"urls\":[7]}]", "{}", "iceServers[0].urls[0]: must be a string", TF_EINVALID},
      {"[]", "[]", "status: must be an object", TF_EINVALID},
      {"[]", "{\"relays\":{}}", "relays: must be an array", TF_EINVALID},
      {"[]", "{\"relays\":[{\"name\":\"a\",\"relayAddress\":\"198.51.100.1\",\"ready\":\"yes\",\"portsTotal\":1}]}",
       "relays[0].ready: must be true or false", TF_EINVALID},
      {"[]", "{\"status\":{\"relays\":[{\"name\":\"a\",\"relayAddress\":\"x\",\"ready\":true,\"portsTotal\":1}]}}",
       "status.relays[0].relayAddress", TF_EINVALID},
      {"[]", "{\"relays\":[{\"name\":\"a\",\"relayAddress\":\"198.51.100.1\",\"ready\":true,\"portsInUse\":-1,\"portsTotal\":1}]}",
       "relays[0].portsInUse", TF_EINVALID},
      {"[]", "{\"relays\":[1]}", "relays[0]: must be an object", TF_EINVALID},
      /* found by fuzzing: a count no int64_t holds */
      {"[]", "{\"relays\":[{\"name\":\"a\",\"relayAddress\":\"198.51.100.1\",\"ready\":true,\"portsTotal\":4e76}]}",
       "relays[0].portsTotal: must be a whole number from 1 to 2147483647", TF_EINVALID},
      {"[]", "{\"relays\":[{\"name\":\"a\",\"relayAddress\":\"198.51.100.1\",\"ready\":true,\"portsInUse\":1.5,\"portsTotal\":9}]}",
       "relays[0].portsInUse: must be a whole number", TF_EINVALID},
      {"[]", "{\"relays\":[{\"relayAddress\":\"198.51.100.1\"}]}", "relays[0].name", TF_EINVALID},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tf_issuer_pool *p = (tf_issuer_pool *)1;
    ck_assert_int_eq(tf_issuer_pool_new(&p, bad[i].ice, strlen(bad[i].ice), bad[i].status, strlen(bad[i].status)),
                     bad[i].code);
    ck_assert_msg(strstr(tf_error_last()->message, bad[i].field), "case %zu: %s", i, tf_error_last()->message);
    ck_assert_ptr_null(p);
  }
  /* a TURNPool without status yet: no relay, no error */
  tf_issuer_pool *p = NULL;
  TF_OK_OR_FAIL(tf_issuer_pool_new(&p, "[]", 2, "{\"kind\":\"TURNPool\"}", 19));
  ck_assert_uint_eq(tf_issuer_pool_eligible(p), 0);
  tf_issuer_pool_free(p);
  tf_issuer_pool_free(NULL);
  tf_issuer_answer_free(NULL);
}
END_TEST

START_TEST(test_issuer__hash_is_pinned)
{
  /* the choice must not change across builds: a user keeps its relays after an upgrade */
  fixture f;
  fixture_make(&f, 6, NULL, NULL, 6);
  tf_issuer_pool *p = pool_of(&f);
  char got[256];
  tf_issuer_answer *a = ask(p, "pinned-user", 3);
  names_of(a, got, sizeof(got));
  tf_issuer_answer_free(a);
  a = ask(p, "pinned-user", 3);
  char again[256];
  names_of(a, again, sizeof(again));
  ck_assert_str_eq(got, again);
  ck_assert_str_eq(got, PINNED_CHOICE);
  tf_issuer_answer_free(a);
  tf_issuer_pool_free(p);
}
END_TEST

Suite *tf_test_issuer_suite(void)
{
  Suite *s = suite_create("issuer");
  TCase *tc = tcase_create("issuer");
  tcase_add_test(tc, test_issuer__ice_answer_is_an_rtcconfiguration_fragment_with_rest_credentials);
  tcase_add_test(tc, test_issuer__rest_answer_has_the_draft_fields);
  tcase_add_test(tc, test_issuer__same_user_keeps_its_relays_while_they_stay_eligible);
  tcase_add_test(tc, test_issuer__never_draining_unready_full_or_unpublished);
  tcase_add_test(tc, test_issuer__relays_under_pressure_only_when_needed);
  tcase_add_test(tc, test_issuer__transport_and_family_filters);
  tcase_add_test(tc, test_issuer__partitioned_relays_on_one_address_match_in_name_order);
  tcase_add_test(tc, test_issuer__ttl_bounds_and_request_fields);
  tcase_add_test(tc, test_issuer__bad_documents_name_the_field);
  tcase_add_test(tc, test_issuer__hash_is_pinned);
  suite_add_tcase(s, tc);
  return s;
}
