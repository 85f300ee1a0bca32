/* admission: reviews captured from the Kubernetes API stand-in
 * (tests/data/admission/, written by capture.py there) in, responses out. */
#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_test.h"

static char *review_text(const char *name)
{
  char rel[256];
  snprintf(rel, sizeof(rel), "admission/%s.review.json", name);
  return tf_test_read(tf_test_data(rel), NULL);
}

static tf_admission *review_of(const char *name)
{
  char *text = review_text(name);
  tf_admission *r = NULL;
  TF_OK_OR_FAIL(tf_admission_decode(&r, text, strlen(text), NULL));
  free(text);
  return r;
}

/* The pool inside a captured review's request.object. */
static tf_pool *pool_of_review(const char *name)
{
  char *text = review_text(name);
  cJSON *root = cJSON_Parse(text);
  free(text);
  ck_assert_ptr_nonnull(root);
  char *obj = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "request"), "object"));
  cJSON_Delete(root);
  tf_pool *p = tf_test_pool(obj);
  cJSON_free(obj);
  return p;
}

/* Respond and parse the response; checks the envelope and the uid. */
static cJSON *respond(const tf_admission *r, tf_admission_kind kind, const tf_nodes *nodes, const tf_pool *const *pools,
                      size_t n, const tf_admission_options *opts, int *allowed)
{
  char *out = NULL;
  TF_OK_OR_FAIL(tf_admission_respond(&out, allowed, r, kind, nodes, pools, n, opts));
  cJSON *root = cJSON_Parse(out);
  tf_free(out);
  ck_assert_ptr_nonnull(root);
  ck_assert_str_eq(cJSON_GetObjectItem(root, "apiVersion")->valuestring, "admission.k8s.io/v1");
  ck_assert_str_eq(cJSON_GetObjectItem(root, "kind")->valuestring, "AdmissionReview");
  cJSON *resp = cJSON_GetObjectItem(root, "response");
  ck_assert_str_eq(cJSON_GetObjectItem(resp, "uid")->valuestring, tf_admission_uid(r));
  ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItem(resp, "allowed")), *allowed);
  return root;
}

static const char *denial(const cJSON *root)
{
  const cJSON *st = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "response"), "status");
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(cJSON_GetObjectItem(st, "code")->valueint, 403);
  return cJSON_GetObjectItem(st, "message")->valuestring;
}

/* Warnings joined by "\n" (static buffer). */
static const char *warnings(const cJSON *root)
{
  static char buf[8192];
  buf[0] = 0;
  const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "response"), "warnings");
  for (const cJSON *s = w ? w->child : NULL; s; s = s->next) {
    ck_assert_uint_le(strlen(s->valuestring), 256);
    strncat(buf, s->valuestring, sizeof(buf) - strlen(buf) - 2);
    strcat(buf, "\n");
  }
  return buf;
}

START_TEST(test_admission__decode_captured_reviews)
{
  tf_admission *r = review_of("03-scale");
  ck_assert_str_eq(tf_admission_operation(r), "UPDATE");
  ck_assert_str_eq(tf_admission_sub_resource(r), "scale");
  ck_assert_str_eq(tf_admission_resource(r), "turnpools");
  ck_assert_str_eq(tf_admission_uid(r), "3d81011c-bbf4-46a5-ab49-82767443479a");
  tf_admission_free(r);
  r = review_of("01-create-valid");
  ck_assert_str_eq(tf_admission_operation(r), "CREATE");
  ck_assert_str_eq(tf_admission_sub_resource(r), "");
  tf_admission_free(r);
}
END_TEST

static const struct {
  const char *body;
  tf_err code;
  const char *message;
} bad_reviews[] = {
    {"", TF_EINVALID, "the review is empty"},
    {"{\"apiVersion\":", TF_EPROTO, "byte"},
    {"[1]", TF_EINVALID, "the review is not a JSON object"},
    {"{\"kind\":\"AdmissionReview\"}", TF_EINVALID, "apiVersion: required"},
    {"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\"}", TF_EINVALID,
     "apiVersion: \"admission.k8s.io/v1beta1\" is not admission.k8s.io/v1"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\"}", TF_EINVALID, "kind: \"Pod\" is not AdmissionReview"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", TF_EINVALID, "request: required"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{}}", TF_EINVALID,
     "request.uid: required"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":7}}", TF_EINVALID,
     "request.uid: must be a string"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
     "\"operation\":\"PATCH\"}}",
     TF_EINVALID, "request.operation: \"PATCH\" is not CREATE, UPDATE, DELETE or CONNECT"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
     "\"operation\":\"CREATE\"}}",
     TF_EINVALID, "request.resource: required"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
     "\"operation\":\"CREATE\",\"resource\":{\"resource\":\"turnpools\"},\"object\":[]}}",
     TF_EINVALID, "request.object: must be an object or null"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
     "\"operation\":\"CREATE\",\"resource\":{\"resource\":\"turnpools\"},\"object\":null}}",
     TF_EINVALID, "request.object: required for CREATE"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
     "\"uid\":\"v\"}}",
     TF_EPROTO, "request.uid: duplicate key"},
    {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\\u0000\"}}",
     TF_EPROTO, "request.uid: the string contains a NUL character"},
};

START_TEST(test_admission__malformed_reviews_name_the_field)
{
  for (size_t i = 0; i < sizeof(bad_reviews) / sizeof(bad_reviews[0]); i++) {
    tf_admission *r = (tf_admission *)1;
    tf_err rc = tf_admission_decode(&r, bad_reviews[i].body, strlen(bad_reviews[i].body), NULL);
    ck_assert_msg(rc == bad_reviews[i].code, "%zu: %d, want %d (%s)", i, rc, bad_reviews[i].code,
                  tf_error_last()->message);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(tf_error_last()->message, bad_reviews[i].message), "%zu: \"%s\" lacks \"%s\"", i,
                  tf_error_last()->message, bad_reviews[i].message);
  }
}
END_TEST

START_TEST(test_admission__size_is_bounded)
{
  char *text = review_text("01-create-valid");
  tf_admission_options o;
  TF_OK_OR_FAIL(tf_admission_options_init(&o, TF_ADMISSION_OPTIONS_VERSION));
  o.max_bytes = strlen(text) - 1;
  tf_admission *r = NULL;
  ck_assert_int_eq(tf_admission_decode(&r, text, strlen(text), &o), TF_EINVALID);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "tf_admission_options.max_bytes"));
  o.max_bytes = 0;
  o.max_values = 10;
  ck_assert_int_eq(tf_admission_decode(&r, text, strlen(text), &o), TF_EINVALID);
  o.max_values = 0;
  TF_OK_OR_FAIL(tf_admission_decode(&r, text, strlen(text), &o));
  tf_admission_free(r);
  o.version = 99;
  ck_assert_int_eq(tf_admission_decode(&r, text, strlen(text), &o), TF_EINVALID);
  ck_assert_int_eq(tf_admission_options_init(&o, 0), TF_EINVALID);
  free(text);
}
END_TEST

START_TEST(test_admission__valid_pool_allowed_without_warnings)
{
  tf_admission *r = review_of("01-create-valid");
  tf_nodes *nodes = tf_test_relay_nodes(3);
  int allowed = 0;
  cJSON *root = respond(r, TF_ADMISSION_VALIDATE, nodes, NULL, 0, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  ck_assert_str_eq(warnings(root), "");
  ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "response"), "patch"));
  cJSON_Delete(root);
  tf_nodes_free(nodes);
  tf_admission_free(r);
}
END_TEST

START_TEST(test_admission__bad_pool_denied_with_field_paths)
{
  tf_admission *r = review_of("04-create-bad-range");
  int allowed = 1;
  cJSON *root = respond(r, TF_ADMISSION_VALIDATE, NULL, NULL, 0, NULL, &allowed);
  ck_assert_int_eq(allowed, 0);
  /* the same problem `turnfleet validate` prints for this spec */
  tf_pool *pool = pool_of_review("04-create-bad-range");
  tf_problems *problems = NULL;
  ck_assert_int_eq(tf_pool_validate(&problems, pool), TF_EINVALID);
  char want[512];
  snprintf(want, sizeof(want), "%s: %s", tf_problems_path(problems, 0), tf_problems_message(problems, 0));
  ck_assert_str_eq(tf_problems_path(problems, 0), "spec.relayPortRange.end");
  ck_assert_msg(strncmp(denial(root), want, strlen(want)) == 0, "%s", denial(root));
  const cJSON *causes =
      cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "response"), "status"),
                                              "details"),
                          "causes");
  ck_assert_int_eq(cJSON_GetArraySize(causes), (int)tf_problems_count(problems));
  ck_assert_str_eq(cJSON_GetObjectItem(causes->child, "field")->valuestring, "spec.relayPortRange.end");
  cJSON_Delete(root);
  /* the mutating answer never denies and never patches an invalid pool */
  root = respond(r, TF_ADMISSION_MUTATE, NULL, NULL, 0, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "response"), "patch"));
  cJSON_Delete(root);
  tf_problems_free(problems);
  tf_pool_free(pool);
  tf_admission_free(r);
}
END_TEST

/* The decoded JSON Patch of a response, NULL when none. */
static cJSON *patch_of(const cJSON *root)
{
  const cJSON *resp = cJSON_GetObjectItem(root, "response");
  const cJSON *p = cJSON_GetObjectItem(resp, "patch");
  if (!p) return NULL;
  ck_assert_str_eq(cJSON_GetObjectItem(resp, "patchType")->valuestring, "JSONPatch");
  size_t n = strlen(p->valuestring);
  unsigned char *raw = malloc(n + 1);
  int len = EVP_DecodeBlock(raw, (const unsigned char *)p->valuestring, (int)n);
  ck_assert_int_gt(len, 0);
  while (len > 0 && raw[len - 1] == 0) len--;
  raw[len] = 0;
  cJSON *patch = cJSON_Parse((char *)raw);
  free(raw);
  ck_assert_ptr_nonnull(patch);
  return patch;
}

START_TEST(test_admission__mutate_adds_defaults_only)
{
  tf_admission *r = review_of("01-create-valid");
  int allowed = 0;
  cJSON *root = respond(r, TF_ADMISSION_MUTATE, NULL, NULL, 0, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  cJSON *patch = patch_of(root);
  ck_assert_ptr_nonnull(patch);
  char paths[2048] = "";
  for (const cJSON *op = patch->child; op; op = op->next) {
    ck_assert_str_eq(cJSON_GetObjectItem(op, "op")->valuestring, "add");
    strcat(paths, cJSON_GetObjectItem(op, "path")->valuestring);
    strcat(paths, " ");
  }
  /* the review gave replicas, relayPortRange and auth.realm/secretRef.name */
  ck_assert_str_eq(paths, "/spec/dataplane /spec/addressing /spec/nodeSelector /spec/listeners "
                          "/spec/auth/secretRef/key /spec/quota /spec/peerPolicy /spec/drainTimeout ");
  const cJSON *sel = cJSON_GetArrayItem(patch, 2);
  ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(sel, "value"), "turnfleet.hzmi.dev/relay-node")->valuestring,
                   "true");
  /* and a word for each default, as kubectl prints it */
  const char *w = warnings(root);
  ck_assert_msg(strstr(w, "spec.nodeSelector: defaulted to {\"turnfleet.hzmi.dev/relay-node\":\"true\"}\n") &&
                    strstr(w, "spec.peerPolicy: defaulted to {\"denyPrivate\":true") &&
                    strstr(w, "spec.dataplane: defaulted to {") && strstr(w, "spec.auth.secretRef.key: defaulted to"),
                "%s", w);
  size_t lines = 0;
  for (const char *c = w; *c; c++) lines += *c == '\n';
  ck_assert_uint_eq(lines, 8);
  cJSON_Delete(patch);
  cJSON_Delete(root);
  tf_admission_free(r);
}
END_TEST

START_TEST(test_admission__patch_adds_inside_given_mappings)
{
  const char *body =
      "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u1\","
      "\"operation\":\"CREATE\",\"resource\":{\"group\":\"turnfleet.hzmi.dev\",\"resource\":\"turnpools\"},"
      "\"namespace\":\"ns\",\"object\":{\"apiVersion\":\"turnfleet.hzmi.dev/v1alpha1\",\"kind\":\"TURNPool\","
      "\"metadata\":{\"name\":\"p\"},\"spec\":{\"auth\":{\"realm\":\"r.test\",\"secretRef\":{\"name\":\"s\"}},"
      "\"nodeSelector\":{\"example.com/zone\":\"x\"},\"quota\":{\"userQuota\":3}}}}}";
  tf_admission *r = NULL;
  TF_OK_OR_FAIL(tf_admission_decode(&r, body, strlen(body), NULL));
  int allowed = 0;
  cJSON *root = respond(r, TF_ADMISSION_MUTATE, NULL, NULL, 0, NULL, &allowed);
  ck_assert_msg(allowed == 1, "%s", cJSON_PrintUnformatted(root));
  cJSON *patch = patch_of(root);
  ck_assert_ptr_nonnull(patch);
  /* a member inside a given mapping is added by its own path; the given key is left alone */
  int saw_total = 0;
  for (const cJSON *op = patch->child; op; op = op->next) {
    const char *path = cJSON_GetObjectItem(op, "path")->valuestring;
    saw_total |= strcmp(path, "/spec/quota/totalQuota") == 0;
    ck_assert_msg(strncmp(path, "/spec/nodeSelector", 18) != 0, "%s", path);
    ck_assert_msg(strcmp(path, "/spec/quota/userQuota") != 0, "%s", path);
  }
  ck_assert_int_eq(saw_total, 1);
  cJSON_Delete(patch);
  cJSON_Delete(root);
  tf_admission_free(r);
}
END_TEST

START_TEST(test_admission__patch_takes_coturn_version_from_the_image_tag)
{
  const char *body =
      "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u1\","
      "\"operation\":\"CREATE\",\"resource\":{\"group\":\"turnfleet.hzmi.dev\",\"resource\":\"turnpools\"},"
      "\"namespace\":\"ns\",\"object\":{\"apiVersion\":\"turnfleet.hzmi.dev/v1alpha1\",\"kind\":\"TURNPool\","
      "\"metadata\":{\"name\":\"p\"},\"spec\":{\"auth\":{\"realm\":\"r.test\",\"secretRef\":{\"name\":\"s\"}},"
      "\"dataplane\":{\"image\":\"coturn/coturn:4.18.0-r0\"}}}}}";
  tf_admission *r = NULL;
  TF_OK_OR_FAIL(tf_admission_decode(&r, body, strlen(body), NULL));
  int allowed = 0;
  cJSON *root = respond(r, TF_ADMISSION_MUTATE, NULL, NULL, 0, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  cJSON *patch = patch_of(root);
  ck_assert_ptr_nonnull(patch);
  int saw = 0;
  for (const cJSON *op = patch->child; op; op = op->next)
    if (!strcmp(cJSON_GetObjectItem(op, "path")->valuestring, "/spec/dataplane/coturnVersion")) {
      ck_assert_str_eq(cJSON_GetObjectItem(op, "value")->valuestring, "4.18.0");
      saw = 1;
    }
  ck_assert_int_eq(saw, 1);
  cJSON_Delete(patch);
  cJSON_Delete(root);
  tf_admission_free(r);
}
END_TEST

START_TEST(test_admission__warnings_partitioned_and_low_port)
{
  tf_admission *r = review_of("05-create-partitioned-low-port");
  tf_nodes *nodes = tf_test_relay_nodes(3);
  int allowed = 0;
  cJSON *root = respond(r, TF_ADMISSION_VALIDATE, nodes, NULL, 0, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  ck_assert_str_eq(warnings(root),
                   "spec.addressing.partitionedIP.relaysPerNode: PartitionedIP adds no capacity: 2 relays per address "
                   "share its 100 relay ports\n"
                   "spec.listeners[0].port: 443 is below 1024: the relay keeps NET_BIND_SERVICE\n");
  cJSON_Delete(root);
  tf_nodes_free(nodes);
  tf_admission_free(r);
}
END_TEST

START_TEST(test_admission__unplaceable_replicas_warned_with_why)
{
  tf_admission *r = review_of("01-create-valid"); /* 2 replicas */
  tf_nodes *one = tf_test_relay_nodes(1);
  int allowed = 0;
  cJSON *root = respond(r, TF_ADMISSION_VALIDATE, one, NULL, 0, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  ck_assert_str_eq(warnings(root), "spec.replicas: 1 of 2 replicas placed: 1 relay identity on 1 of 1 nodes (one per "
                                   "eligible node address of the family)\n");
  cJSON_Delete(root);
  tf_nodes *none = tf_test_nodes("{\"kind\":\"NodeList\",\"items\":[]}");
  root = respond(r, TF_ADMISSION_VALIDATE, none, NULL, 0, NULL, &allowed);
  ck_assert_str_eq(warnings(root), "spec.replicas: 0 of 2 replicas placed: 0 relay identities on 0 of 0 nodes (no node is "
                                   "eligible)\n");
  cJSON_Delete(root);
  /* each node left out is named with the rule that excluded it */
  tf_nodes *out = tf_test_nodes(
      "{\"kind\":\"List\",\"items\":["
      "{\"metadata\":{\"name\":\"c1\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}},\"spec\":{\"unschedulable\":true},"
      "\"status\":{\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"203.0.113.1\"}],"
      "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}},"
      "{\"metadata\":{\"name\":\"d2\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}},"
      "\"status\":{\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"203.0.113.2\"}],"
      "\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\"}]}},"
      "{\"metadata\":{\"name\":\"u3\"},"
      "\"status\":{\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"203.0.113.3\"}],"
      "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}},"
      "{\"metadata\":{\"name\":\"ok4\",\"labels\":{\"turnfleet.hzmi.dev/relay-node\":\"true\"}},"
      "\"status\":{\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"203.0.113.4\"}],"
      "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}]}");
  root = respond(r, TF_ADMISSION_VALIDATE, out, NULL, 0, NULL, &allowed);
  ck_assert_str_eq(warnings(root),
                   "spec.replicas: 1 of 2 replicas placed: 1 relay identity on 1 of 4 nodes (one per eligible node address "
                   "of the family); not eligible: c1 (cordoned), d2 (NotReady), u3 (nodeSelector "
                   "turnfleet.hzmi.dev/relay-node=true)\n");
  cJSON_Delete(root);
  tf_nodes_free(out);
  tf_nodes_free(none);
  tf_nodes_free(one);
  tf_admission_free(r);
}
END_TEST

/* Another pool "demo" on the same nodes with this relay range and one udp listener. */
static tf_pool *demo_with(int start, int end, int port)
{
  char text[256];
  snprintf(text, sizeof(text),
           "metadata: {name: demo}\nspec:\n  relayPortRange: {start: %d, end: %d}\n"
           "  listeners: [{name: turn, protocol: udp, port: %d}]\n  auth: {realm: r.test, secretRef: {name: s}}\n",
           start, end, port);
  return tf_test_pool(text);
}

START_TEST(test_admission__cross_pool_conflict_denied)
{
  tf_admission *r = review_of("06-create-conflict"); /* "clash": HostNetwork on the same nodes and range as demo */
  tf_pool *demo = pool_of_review("02-update-replicas");
  tf_nodes *nodes = tf_test_relay_nodes(3);
  const tf_pool *pools[] = {demo, NULL};
  int allowed = 1;
  cJSON *root = respond(r, TF_ADMISSION_VALIDATE, nodes, pools, 2, NULL, &allowed);
  ck_assert_int_eq(allowed, 0);
  ck_assert_msg(strstr(denial(root), "spec.relayPortRange: address conflict with another pool") == denial(root), "%s",
                denial(root));
  ck_assert_ptr_nonnull(strstr(denial(root), "203.0.113.1 is in use by pool demo.default"));
  /* the denial says why: no placement warning beside it */
  ck_assert_ptr_null(strstr(warnings(root), "spec.replicas:"));
  cJSON_Delete(root);
  /* only a listener port on another pool's listener: the denial names that listener */
  tf_pool *lis = demo_with(60000, 60099, 3478);
  pools[0] = lis;
  root = respond(r, TF_ADMISSION_VALIDATE, nodes, pools, 1, NULL, &allowed);
  ck_assert_int_eq(allowed, 0);
  ck_assert_msg(strstr(denial(root), "spec.listeners[0].port: address conflict with another pool: port 3478") &&
                    !strstr(denial(root), "spec.relayPortRange"),
                "%s", denial(root));
  cJSON_Delete(root);
  tf_pool_free(lis);
  pools[0] = demo;
  /* a disjoint relay range on the same addresses is no conflict */
  tf_pool *other = demo_with(51000, 51099, 3479);
  pools[0] = other;
  root = respond(r, TF_ADMISSION_VALIDATE, nodes, pools, 1, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  cJSON_Delete(root);
  /* the pool's own entry in the cache (an UPDATE) is not a conflict with itself */
  tf_admission *upd = review_of("02-update-replicas");
  pools[0] = demo;
  root = respond(upd, TF_ADMISSION_VALIDATE, nodes, pools, 1, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  cJSON_Delete(root);
  tf_admission_free(upd);
  tf_pool_free(other);
  tf_pool_free(demo);
  tf_nodes_free(nodes);
  tf_admission_free(r);
}
END_TEST

START_TEST(test_admission__scale_checked)
{
  tf_admission *r = review_of("03-scale"); /* demo to 5 replicas */
  tf_admission_options o = TF_ADMISSION_OPTIONS_INIT;
  o.max_replicas = 4;
  int allowed = 1;
  cJSON *root = respond(r, TF_ADMISSION_VALIDATE, NULL, NULL, 0, &o, &allowed);
  ck_assert_int_eq(allowed, 0);
  ck_assert_str_eq(denial(root),
                   "spec.replicas: 5 is above this cluster's maximum of 4 (turnfleet-webhook --max-replicas)");
  cJSON_Delete(root);
  o.max_replicas = 5;
  tf_pool *demo = pool_of_review("02-update-replicas");
  tf_nodes *nodes = tf_test_relay_nodes(3);
  const tf_pool *pools[] = {demo};
  root = respond(r, TF_ADMISSION_VALIDATE, nodes, pools, 1, &o, &allowed);
  ck_assert_int_eq(allowed, 1);
  ck_assert_str_eq(warnings(root), "spec.replicas: 3 of 5 replicas placed: 3 relay identities on 3 of 3 nodes (one per "
                                   "eligible node address of the family)\n");
  cJSON_Delete(root);
  /* a negative or fractional count */
  static const char *const bad[][2] = {{"-1", "spec.replicas: -1 is negative"},
                                       {"1.5", "spec.replicas: must be an integer"},
                                       {"\"3\"", "spec.replicas: must be an integer"}};
  for (size_t i = 0; i < 3; i++) {
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"s%zu\","
             "\"operation\":\"UPDATE\",\"subResource\":\"scale\",\"resource\":{\"group\":\"turnfleet.hzmi.dev\","
             "\"resource\":\"turnpools\"},\"name\":\"demo\",\"namespace\":\"default\",\"object\":{\"spec\":"
             "{\"replicas\":%s}}}}",
             i, bad[i][0]);
    tf_admission *s = NULL;
    TF_OK_OR_FAIL(tf_admission_decode(&s, body, strlen(body), NULL));
    root = respond(s, TF_ADMISSION_VALIDATE, NULL, NULL, 0, NULL, &allowed);
    ck_assert_int_eq(allowed, 0);
    ck_assert_str_eq(denial(root), bad[i][1]);
    cJSON_Delete(root);
    tf_admission_free(s);
  }
  tf_nodes_free(nodes);
  tf_pool_free(demo);
  tf_admission_free(r);
}
END_TEST

START_TEST(test_admission__other_requests_allowed_as_is)
{
  const char *body = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"d\","
                     "\"operation\":\"DELETE\",\"resource\":{\"group\":\"turnfleet.hzmi.dev\",\"resource\":"
                     "\"turnpools\"},\"object\":null,\"oldObject\":{\"spec\":{\"replicas\":-3}}}}";
  tf_admission *r = NULL;
  TF_OK_OR_FAIL(tf_admission_decode(&r, body, strlen(body), NULL));
  int allowed = 0;
  cJSON *root = respond(r, TF_ADMISSION_VALIDATE, NULL, NULL, 0, NULL, &allowed);
  ck_assert_int_eq(allowed, 1);
  cJSON_Delete(root);
  char *out = NULL;
  ck_assert_int_eq(tf_admission_respond(&out, NULL, r, (tf_admission_kind)7, NULL, NULL, 0, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_admission_respond(&out, NULL, r, TF_ADMISSION_VALIDATE, NULL, NULL, 2, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_admission_respond(&out, NULL, NULL, TF_ADMISSION_VALIDATE, NULL, NULL, 0, NULL), TF_EINVALID);
  tf_admission_free(r);
  tf_admission_free(NULL);
}
END_TEST

Suite *tf_test_admission_suite(void)
{
  Suite *s = suite_create("admission");
  TCase *tc = tcase_create("admission");
  tcase_add_test(tc, test_admission__decode_captured_reviews);
  tcase_add_test(tc, test_admission__malformed_reviews_name_the_field);
  tcase_add_test(tc, test_admission__size_is_bounded);
  tcase_add_test(tc, test_admission__valid_pool_allowed_without_warnings);
  tcase_add_test(tc, test_admission__bad_pool_denied_with_field_paths);
  tcase_add_test(tc, test_admission__mutate_adds_defaults_only);
  tcase_add_test(tc, test_admission__patch_adds_inside_given_mappings);
  tcase_add_test(tc, test_admission__patch_takes_coturn_version_from_the_image_tag);
  tcase_add_test(tc, test_admission__warnings_partitioned_and_low_port);
  tcase_add_test(tc, test_admission__unplaceable_replicas_warned_with_why);
  tcase_add_test(tc, test_admission__cross_pool_conflict_denied);
  tcase_add_test(tc, test_admission__scale_checked);
  tcase_add_test(tc, test_admission__other_requests_allowed_as_is);
  suite_add_tcase(s, tc);
  return s;
}
