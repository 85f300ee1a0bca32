/* kube: the kubeconfig and in-cluster loaders on valid and invalid files, and
 * every request against the real stand-in (tests/kube), faults included.
 * API 127.0.0.210:16500, control 16501. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "kube_internal.h"
#include "tf_kube_test.h"
#include "tf_test.h"

#define TF_KT_ADDR "127.0.0.210"
#define TF_KT_PORT 16500

static tf_test_cluster tf_kt;
static char tf_kt_addr[64] = TF_KT_ADDR;
static int tf_kt_port = TF_KT_PORT;

/* TF_TEST_KUBE_ADDR / TF_TEST_KUBE_PORT move the stand-in (several trees testing on one machine) */
static void tf_kt_setup(void)
{
  const char *a = getenv("TF_TEST_KUBE_ADDR"), *p = getenv("TF_TEST_KUBE_PORT");
  if (a && *a) snprintf(tf_kt_addr, sizeof(tf_kt_addr), "%s", a);
  if (p && *p) tf_kt_port = atoi(p);
  tf_test_cluster_start(&tf_kt, tf_kt_addr, tf_kt_port, NULL);
}
static void tf_kt_teardown(void) { tf_test_cluster_stop(&tf_kt); }
static void tf_kt_each(void) { tf_test_reset(&tf_kt); }

/* ---- kubeconfig ---- */

static const char *const tf_kt_ca_pem = "-----BEGIN CERTIFICATE-----\nMIIBfake-ca\n-----END CERTIFICATE-----\n";
static const char *const tf_kt_cert_pem = "-----BEGIN CERTIFICATE-----\nMIIBfake-cert\n-----END CERTIFICATE-----\n";
static const char *const tf_kt_key_pem = "-----BEGIN PRIVATE KEY-----\nSECRETKEYMATERIAL42\n-----END PRIVATE KEY-----\n";
static const char *const tf_kt_token = "sEcReT-t0ken-value-77";

static char *tf_kt_b64(const char *s)
{
  size_t n = strlen(s);
  char *out = malloc(4 * ((n + 2) / 3) + 1);
  static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned char)s[i] << 16 | (i + 1 < n ? (unsigned char)s[i + 1] << 8 : 0) |
                 (i + 2 < n ? (unsigned char)s[i + 2] : 0);
    out[o++] = a[v >> 18 & 63];
    out[o++] = a[v >> 12 & 63];
    out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? a[v & 63] : '=';
  }
  out[o] = '\0';
  return out;
}

/* Write @p text to @p dir/@p name. */
static void tf_kt_put(const char *dir, const char *name, const char *text, int mode)
{
  char p[4200];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  tf_test_write(p, text, mode);
}

static tf_err tf_kt_parse(const char *yaml, const char *base, const char *ctx, tf_kube__config *c)
{
  return tf_kube__config_parse(c, yaml, strlen(yaml), base, ctx);
}

/* No credential ever appears in an error message. */
static void tf_kt_no_secret(const char *text)
{
  ck_assert_msg(!strstr(text, tf_kt_token), "token leaked: %s", text);
  ck_assert_msg(!strstr(text, "SECRETKEYMATERIAL42"), "key leaked: %s", text);
  char *b = tf_kt_b64(tf_kt_key_pem);
  ck_assert_msg(!strstr(text, b), "key data leaked: %s", text);
  free(b);
}

START_TEST(test_kube__kubeconfig_data_forms)
{
  char *ca = tf_kt_b64(tf_kt_ca_pem), *cert = tf_kt_b64(tf_kt_cert_pem), *key = tf_kt_b64(tf_kt_key_pem);
  char *y = tf_asprintf__("apiVersion: v1\nkind: Config\ncurrent-context: a\n"
                          "contexts:\n- name: a\n  context: {cluster: c1, user: u1, namespace: turn}\n"
                          "- name: b\n  context: {cluster: c2, user: u2}\n"
                          "clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443/\n"
                          "    certificate-authority-data: %s\n    tls-server-name: kubernetes.default\n"
                          "- name: c2\n  cluster: {server: 'https://h:1', insecure-skip-tls-verify: true}\n"
                          "users:\n- name: u1\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n"
                          "- name: u2\n  user: {token: %s}\n",
                          ca, cert, key, tf_kt_token);
  tf_kube__config c;
  TF_OK_OR_FAIL(tf_kt_parse(y, NULL, NULL, &c));
  ck_assert_str_eq(c.server, "https://10.0.0.1:6443");
  ck_assert_str_eq(c.ns, "turn");
  ck_assert_str_eq(c.tls_server_name, "kubernetes.default");
  ck_assert_int_eq(c.insecure, 0);
  ck_assert_str_eq(c.ca.ptr, tf_kt_ca_pem);
  ck_assert_str_eq(c.cert.ptr, tf_kt_cert_pem);
  ck_assert_str_eq(c.key.ptr, tf_kt_key_pem);
  ck_assert_ptr_null(c.token);
  tf_kube__config_dispose(&c);
  /* the other context: token, insecure, no namespace */
  TF_OK_OR_FAIL(tf_kt_parse(y, NULL, "b", &c));
  ck_assert_str_eq(c.server, "https://h:1");
  ck_assert_int_eq(c.insecure, 1);
  ck_assert_str_eq(c.token, tf_kt_token);
  ck_assert_ptr_null(c.ns);
  ck_assert_ptr_null(c.ca.ptr);
  tf_kube__config_dispose(&c);
  free(y);
  free(ca);
  free(cert);
  free(key);
}
END_TEST

START_TEST(test_kube__kubeconfig_file_forms)
{
  char *dir = tf_test_tmpdir();
  char p[4096];
  tf_kt_put(dir, "ca.pem", tf_kt_ca_pem, 0644);
  tf_kt_put(dir, "cert.pem", tf_kt_cert_pem, 0644);
  tf_kt_put(dir, "key.pem", tf_kt_key_pem, 0600);
  tf_kt_put(dir, "tok", tf_kt_token, 0600);
  /* relative paths are relative to the kubeconfig's directory */
  const char *y = "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
                  "clusters: [{name: c, cluster: {server: 'https://x:1', certificate-authority: ca.pem}}]\n"
                  "users: [{name: u, user: {client-certificate: cert.pem, client-key: key.pem, tokenFile: tok}}]\n";
  tf_kt_put(dir, "kubeconfig", y, 0600);
  snprintf(p, sizeof(p), "%s/kubeconfig", dir);
  tf_kube__config c;
  TF_OK_OR_FAIL(tf_kube__config_load(&c, p, NULL));
  ck_assert_str_eq(c.ca.ptr, tf_kt_ca_pem);
  ck_assert_str_eq(c.cert.ptr, tf_kt_cert_pem);
  ck_assert_str_eq(c.key.ptr, tf_kt_key_pem);
  char want[4200];
  snprintf(want, sizeof(want), "%s/tok", dir);
  ck_assert_str_eq(c.token_file, want);
  tf_kube__config_dispose(&c);
  /* a missing file is named, its would-be content is not */
  const char *y2 = "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
                   "clusters: [{name: c, cluster: {server: 'https://x:1'}}]\n"
                   "users: [{name: u, user: {client-certificate: nope.pem, client-key: key.pem}}]\n";
  tf_test_write(p, y2, 0600);
  ck_assert_int_eq(tf_kube__config_load(&c, p, NULL), TF_EIO);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "user.client-certificate"));
  tf_test_rmtree(dir);
  free(dir);
}
END_TEST

static const struct {
  const char *yaml;
  tf_err rc;
  const char *msg;
} tf_kt_bad[] = {
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: "
   "{server: 'https://x:1'}}]\nusers: [{name: u, user: {exec: {command: aws, apiVersion: "
   "client.authentication.k8s.io/v1}}}]\n",
   TF_EINVALID, "user.exec: credential plugins are not supported"},
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: "
   "{server: 'https://x:1'}}]\nusers: [{name: u, user: {auth-provider: {name: gcp}}}]\n",
   TF_EINVALID, "user.auth-provider: not supported"},
  {"current-context: zz\ncontexts: [{name: a, context: {cluster: c}}]\n", TF_ENOTFOUND, "contexts: no entry named \"zz\""},
  {"contexts: [{name: a, context: {cluster: c}}]\n", TF_EINVALID, "current-context: not set"},
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {}}]\n",
   TF_EINVALID, "cluster.server: required"},
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: "
   "'ftp://x'}}]\n",
   TF_EINVALID, "must be an http(s) URL"},
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: "
   "'https://x', certificate-authority-data: '!!notbase64'}}]\n",
   TF_EINVALID, "cluster.certificate-authority-data: not base64"},
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: "
   "{server: 'https://x'}}]\nusers: [{name: u, user: {client-certificate-data: QUJD}}]\n",
   TF_EINVALID, "client-certificate and client-key go together"},
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: "
   "{server: 'https://x', insecure-skip-tls-verify: 'yes please'}}]\n",
   TF_EINVALID, "insecure-skip-tls-verify: must be a boolean"},
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: "
   "{server: 'https://x'}}]\nusers: [{name: u, user: {username: admin, password: sEcReT-t0ken-value-77}}]\n",
   TF_EINVALID, "basic authentication is not supported"},
  {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: "
   "{server: 'https://x'}}]\nusers: [{name: u, user: {token: [sEcReT-t0ken-value-77]}}]\n",
   TF_EINVALID, "user.token: must be a string"},
  {"current-context: a\ncontexts: {a: 1}\n", TF_EINVALID, "contexts: must be a list"},
  {"key: [unclosed\n  token: sEcReT-t0ken-value-77\n", TF_EPROTO, ""},
  {"- just\n- a list\n", TF_EINVALID, "kubeconfig: must be a mapping"},
};

START_TEST(test_kube__kubeconfig_invalid)
{
  tf_kube__config c;
  tf_err rc = tf_kt_parse(tf_kt_bad[_i].yaml, NULL, NULL, &c);
  ck_assert_msg(rc == tf_kt_bad[_i].rc, "case %d: rc %d (%s)", _i, rc, tf_error_last()->message);
  ck_assert_msg(strstr(tf_error_last()->message, tf_kt_bad[_i].msg), "case %d: message %s", _i,
                tf_error_last()->message);
  tf_kt_no_secret(tf_error_last()->message);
  ck_assert_ptr_null(c.server);
}
END_TEST

START_TEST(test_kube__in_cluster)
{
  char *dir = tf_test_tmpdir();
  char p[4096];
  tf_kt_put(dir, "ca.crt", tf_kt_ca_pem, 0644);
  tf_kt_put(dir, "token", tf_kt_token, 0600);
  tf_kt_put(dir, "namespace", "turnfleet-system\n", 0644);
  unsetenv("KUBERNETES_SERVICE_HOST");
  tf_kube__config c;
  ck_assert_int_eq(tf_kube__config_in_cluster(&c, dir), TF_EINVALID);
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  TF_OK_OR_FAIL(tf_kube__config_in_cluster(&c, dir));
  ck_assert_str_eq(c.server, "https://[fd00::1]:443");
  ck_assert_str_eq(c.ns, "turnfleet-system");
  ck_assert_str_eq(c.ca.ptr, tf_kt_ca_pem);
  ck_assert_ptr_null(c.token); /* never cached: the file is re-read */
  tf_kube__config_dispose(&c);
  /* through the public constructor */
  tf_kube_options o;
  TF_OK_OR_FAIL(tf_kube_options_init(&o, TF_KUBE_OPTIONS_VERSION));
  o.source = TF_KUBE_SOURCE_IN_CLUSTER;
  o.sa_dir = dir;
  tf_kube *k = NULL;
  TF_OK_OR_FAIL(tf_kube_new(&k, &o));
  ck_assert_str_eq(tf_kube_namespace(k), "turnfleet-system");
  ck_assert_str_eq(tf_kube_server(k), "https://[fd00::1]:443");
  tf_kube_free(k);
  /* a missing token file is a configuration error at once */
  snprintf(p, sizeof(p), "%s/token", dir);
  unlink(p);
  ck_assert_int_eq(tf_kube_new(&k, &o), TF_EIO);
  ck_assert_ptr_null(k);
  tf_test_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(test_kube__options_and_paths)
{
  tf_kube_options o;
  ck_assert_int_eq(tf_kube_options_init(&o, 0), TF_EINVALID);
  ck_assert_int_eq(tf_kube_options_init(&o, TF_KUBE_OPTIONS_VERSION + 1), TF_EINVALID);
  tf_kube *k = NULL;
  ck_assert_int_eq(tf_kube_new(&k, NULL), TF_EINVALID); /* no server */
  o.version = 99;
  ck_assert_int_eq(tf_kube_new(&k, &o), TF_EINVALID);
  char *p = NULL;
  TF_OK_OR_FAIL(tf_kube_path(&p, "/apis/turnfleet.hzmi.dev/v1alpha1", "turnpools", "turn", "edge", "scale"));
  ck_assert_str_eq(p, "/apis/turnfleet.hzmi.dev/v1alpha1/namespaces/turn/turnpools/edge/scale");
  tf_free(p);
  TF_OK_OR_FAIL(tf_kube_path(&p, "/api/v1", "nodes", NULL, NULL, NULL));
  ck_assert_str_eq(p, "/api/v1/nodes");
  tf_free(p);
  ck_assert_int_eq(tf_kube_path(&p, "/api/v1", "pods", "a/b", NULL, NULL), TF_EINVALID);
  ck_assert_int_eq(tf_kube_path(&p, "/api/v1", "pods", "ns", "..", NULL), TF_EINVALID);
  ck_assert_int_eq(tf_kube_path(&p, "/api/v1", "pods", "ns", "x?watch=1", NULL), TF_EINVALID);
  ck_assert_int_eq(tf_kube_path(&p, "/api/v1", "pods", "ns", NULL, "status"), TF_EINVALID);
  ck_assert_int_eq(tf_kube_path(&p, "v1", "pods", NULL, NULL, NULL), TF_EINVALID);
}
END_TEST

/* ---- Status ---- */

START_TEST(test_kube__status_parse)
{
  const char *body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"bad\","
                     "\"reason\":\"Invalid\",\"details\":{\"causes\":[{\"reason\":\"FieldValueInvalid\","
                     "\"message\":\"must be > 0\",\"field\":\"spec.replicas\"}],\"retryAfterSeconds\":3},\"code\":422}";
  tf_kube_status *s = tf_kube__status_parse(422, body, strlen(body), NULL);
  ck_assert_int_eq(tf_kube_status_code(s), 422);
  ck_assert_str_eq(tf_kube_status_reason(s), "Invalid");
  ck_assert_str_eq(tf_kube_status_message(s), "bad");
  ck_assert_int_eq(tf_kube_status_retry_after(s), 3);
  ck_assert_uint_eq(tf_kube_status_cause_count(s), 1);
  const char *t, *m, *f;
  TF_OK_OR_FAIL(tf_kube_status_cause(s, 0, &t, &m, &f));
  ck_assert_str_eq(t, "FieldValueInvalid");
  ck_assert_str_eq(m, "must be > 0");
  ck_assert_str_eq(f, "spec.replicas");
  ck_assert_int_eq(tf_kube_status_cause(s, 1, &t, &m, &f), TF_EINVALID);
  tf_kube_status_free(s);
  /* not a Status: named after the HTTP code; Retry-After header wins */
  s = tf_kube__status_parse(503, "<html>", 6, " 7\r\n");
  ck_assert_int_eq(tf_kube_status_code(s), 503);
  ck_assert_str_eq(tf_kube_status_reason(s), "ServiceUnavailable");
  ck_assert_int_eq(tf_kube_status_retry_after(s), 7);
  tf_kube_status_free(s);
  s = tf_kube__status_parse(429, NULL, 0, "Wed, 21 Oct 2015 07:28:00 GMT");
  ck_assert_int_eq(tf_kube_status_retry_after(s), 0);
  tf_kube_status_free(s);
  tf_kube_status_free(NULL);
  ck_assert_int_eq(tf_kube_status_code(NULL), 0);
  ck_assert_str_eq(tf_kube_status_reason(NULL), "");
}
END_TEST

/* ---- watch lines ---- */

typedef struct {
  int n;
  char last[64];
} tf_kt_lines_seen;

static int tf_kt_line(char *line, size_t len, void *arg)
{
  tf_kt_lines_seen *s = arg;
  s->n++;
  snprintf(s->last, sizeof(s->last), "%.*s", (int)len, line);
  return 0;
}

START_TEST(test_kube__watch_lines)
{
  tf_kube__lines l;
  tf_kube__lines_init(&l, 16);
  tf_kt_lines_seen s = {0};
  /* a line split over chunks, many lines in one chunk, CRLF, empty lines */
  ck_assert_int_eq(tf_kube__lines_feed(&l, "ab", 2, tf_kt_line, &s), 0);
  ck_assert_int_eq(s.n, 0);
  ck_assert_int_eq(tf_kube__lines_feed(&l, "c\nde\r\n\nf", 8, tf_kt_line, &s), 0);
  ck_assert_int_eq(s.n, 2);
  ck_assert_str_eq(s.last, "de");
  ck_assert_uint_eq(l.len, 1); /* "f" waits, already scanned */
  ck_assert_uint_eq(l.scan, 1);
  ck_assert_int_eq(tf_kube__lines_feed(&l, "\n", 1, tf_kt_line, &s), 0);
  ck_assert_str_eq(s.last, "f");
  /* the cap: a line that grows over it, with or without its newline */
  ck_assert_int_eq(tf_kube__lines_feed(&l, "0123456789abcdefXYZ", 19, tf_kt_line, &s), TF_EPROTO);
  tf_kube__lines_dispose(&l);
  tf_kube__lines_init(&l, 16);
  ck_assert_int_eq(tf_kube__lines_feed(&l, "0123456789abcdefX\n", 18, tf_kt_line, &s), TF_EPROTO);
  tf_kube__lines_dispose(&l);
  /* events */
  cJSON *root, *obj;
  int type;
  const char *ev = "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}";
  TF_OK_OR_FAIL(tf_kube__event_parse(ev, strlen(ev), &root, &type, &obj));
  ck_assert_int_eq(type, TF_KUBE_EVENT_BOOKMARK);
  ck_assert_str_eq(tf_kube__meta_str(obj, "resourceVersion"), "12");
  cJSON_Delete(root);
  ck_assert_int_eq(tf_kube__event_parse("{\"type\":\"X\",\"object\":{}}", 24, &root, &type, &obj), TF_EPROTO);
  ck_assert_int_eq(tf_kube__event_parse("{\"type\":\"ADDED\"", 15, &root, &type, &obj), TF_EPROTO);
  ck_assert_int_eq(tf_kube__event_parse("{\"type\":\"ADDED\",\"object\":1}", 27, &root, &type, &obj), TF_EPROTO);
}
END_TEST

/* ---- against the stand-in ---- */

static char *tf_kt_cm_path(const char *name)
{
  char *p = NULL;
  TF_OK_OR_FAIL(tf_kube_path(&p, "/api/v1", "configmaps", "default", name, NULL));
  return p;
}

/* The server's JSON, compacted, so text checks do not depend on its spacing. */
static char *tf_kt_compact(char *json)
{
  cJSON *d = cJSON_Parse(json);
  ck_assert_ptr_nonnull(d);
  char *c = cJSON_PrintUnformatted(d);
  cJSON_Delete(d);
  tf_free(json);
  return c;
}

static char *tf_kt_rv(const char *json)
{
  cJSON *d = cJSON_Parse(json);
  ck_assert_ptr_nonnull(d);
  char *rv = tf_strdup__(tf_kube__meta_str(d, "resourceVersion"));
  cJSON_Delete(d);
  return rv;
}

START_TEST(test_kube__crud)
{
  char *log = NULL;
  tf_kube *k = tf_test_kube(&tf_kt, &log);
  ck_assert_str_eq(tf_kube_namespace(k), "default");
  char *coll = NULL, *out = NULL;
  TF_OK_OR_FAIL(tf_kube_path(&coll, "/api/v1", "configmaps", "default", NULL, NULL));
  char *path = tf_kt_cm_path("crud");
  tf_kube_status *st = NULL;
  /* create: 201; again: 409 AlreadyExists */
  TF_OK_OR_FAIL(tf_kube_create(k, coll, "{\"metadata\":{\"name\":\"crud\",\"labels\":{\"a.b/c\":\"x_y\"}},"
                                        "\"data\":{\"k\":\"v\"}}", &out, &st));
  ck_assert_ptr_null(st);
  char *rv1 = tf_kt_rv(out);
  tf_free(out);
  ck_assert_int_eq(tf_kube_create(k, coll, "{\"metadata\":{\"name\":\"crud\"}}", NULL, &st), TF_ECONFLICT);
  ck_assert_int_eq(tf_kube_status_code(st), 409);
  ck_assert_str_eq(tf_kube_status_reason(st), "AlreadyExists");
  tf_kube_status_free(st);
  /* update: no RV -> refused before any request; stale RV -> 409 Conflict */
  int puts = tf_test_count(&tf_kt, "PUT", "/configmaps/crud", NULL);
  ck_assert_int_eq(tf_kube_update(k, path, "{\"metadata\":{\"name\":\"crud\"},\"data\":{}}", NULL, &st), TF_EINVALID);
  ck_assert_int_eq(tf_test_count(&tf_kt, "PUT", "/configmaps/crud", NULL), puts);
  char *body = tf_asprintf__("{\"metadata\":{\"name\":\"crud\",\"labels\":{\"a.b/c\":\"x_y\"},\"resourceVersion\":\"%s\"},\"data\":{\"k\":\"2\"}}", rv1);
  TF_OK_OR_FAIL(tf_kube_update(k, path, body, &out, NULL));
  tf_free(out);
  ck_assert_int_eq(tf_kube_update(k, path, body, NULL, &st), TF_ECONFLICT);
  ck_assert_str_eq(tf_kube_status_reason(st), "Conflict");
  tf_kube_status_free(st);
  free(body);
  /* every write carried fieldManager; JSON accepted */
  ck_assert_int_eq(tf_test_count(&tf_kt, "PUT", "/configmaps/crud", "fieldManager=turnfleet-test"), 2);
  /* merge patch; JSON patch with a failing test op -> 422 */
  TF_OK_OR_FAIL(tf_kube_patch(k, path, TF_KUBE_PATCH_MERGE, "{\"data\":{\"m\":\"1\",\"k\":null}}", &out, NULL));
  out = tf_kt_compact(out);
  ck_assert_ptr_nonnull(strstr(out, "\"m\":\"1\""));
  ck_assert_ptr_null(strstr(out, "\"k\":"));
  tf_free(out);
  ck_assert_int_eq(tf_kube_patch(k, path, TF_KUBE_PATCH_JSON, "[{\"op\":\"test\",\"path\":\"/data/m\",\"value\":\"2\"}]",
                                 NULL, &st),
                   TF_EINVALID);
  ck_assert_int_eq(tf_kube_status_code(st), 422);
  tf_kube_status_free(st);
  TF_OK_OR_FAIL(tf_kube_patch(k, path, TF_KUBE_PATCH_JSON,
                              "[{\"op\":\"test\",\"path\":\"/data/m\",\"value\":\"1\"},{\"op\":\"add\",\"path\":"
                              "\"/data/j\",\"value\":\"2\"}]",
                              NULL, NULL));
  cJSON *log_pm = tf_test_requests(&tf_kt, "PATCH", "/configmaps/crud", NULL);
  ck_assert_int_eq(cJSON_GetArraySize(log_pm), 3);
  ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(log_pm, 0), "contentType")->valuestring,
                   "application/merge-patch+json");
  ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(log_pm, 1), "contentType")->valuestring,
                   "application/json-patch+json");
  cJSON_Delete(log_pm);
  /* list with a label selector: the value is percent-encoded */
  tf_kube_list_options lo;
  TF_OK_OR_FAIL(tf_kube_list_options_init(&lo, TF_KUBE_LIST_OPTIONS_VERSION));
  lo.label_selector = "a.b/c in (x_y,z)";
  lo.limit = 50;
  TF_OK_OR_FAIL(tf_kube_list(k, coll, &lo, &out, NULL));
  out = tf_kt_compact(out);
  ck_assert_ptr_nonnull(strstr(out, "\"name\":\"crud\""));
  ck_assert_ptr_nonnull(strstr(out, "\"resourceVersion\""));
  tf_free(out);
  ck_assert_int_eq(tf_test_count(&tf_kt, "GET", "/configmaps", "labelSelector=a.b%2Fc%20in%20%28x_y%2Cz%29"), 1);
  lo.label_selector = "a.b/c=nope";
  TF_OK_OR_FAIL(tf_kube_list(k, coll, &lo, &out, NULL));
  ck_assert_ptr_null(strstr(out, "\"name\":\"crud\""));
  tf_free(out);
  lo.label_selector = "((";
  ck_assert_int_eq(tf_kube_list(k, coll, &lo, &out, &st), TF_EINVALID);
  ck_assert_int_eq(tf_kube_status_code(st), 400);
  tf_kube_status_free(st);
  /* delete: precondition mismatch -> 409; then gone -> 404 */
  tf_kube_delete_options dopt;
  TF_OK_OR_FAIL(tf_kube_delete_options_init(&dopt, TF_KUBE_DELETE_OPTIONS_VERSION));
  dopt.precondition_uid = "not-the-uid";
  dopt.propagation = TF_KUBE_PROPAGATION_BACKGROUND;
  dopt.grace_period_seconds = 0;
  ck_assert_int_eq(tf_kube_delete(k, path, &dopt, NULL, &st), TF_ECONFLICT);
  ck_assert_ptr_nonnull(strstr(tf_kube_status_message(st), "Precondition failed"));
  tf_kube_status_free(st);
  TF_OK_OR_FAIL(tf_kube_delete(k, path, NULL, &out, NULL));
  tf_free(out);
  ck_assert_int_eq(tf_kube_get(k, path, &out, &st), TF_ENOTFOUND);
  ck_assert_ptr_null(out);
  ck_assert_str_eq(tf_kube_status_reason(st), "NotFound");
  tf_kube_status_free(st);
  ck_assert_int_eq(tf_kube_delete(k, path, NULL, NULL, NULL), TF_ENOTFOUND);
  /* the token never reaches the log */
  ck_assert_ptr_nonnull(log);
  ck_assert_ptr_null(strstr(log, tf_kt.token));
  free(log);
  free(rv1);
  free(path);
  tf_free(coll);
  tf_kube_free(k);
}
END_TEST

static char *tf_kt_yaml_json(const char *rel)
{
  const char *src = getenv("TF_SOURCE_DIR");
  char p[4096];
  snprintf(p, sizeof(p), "%s/tests/kube/testdata/%s", src, rel);
  size_t n;
  char *y = tf_test_read(p, &n);
  cJSON *d = NULL;
  TF_OK_OR_FAIL(tf_doc__parse_yaml(&d, y, n, NULL));
  char *j = cJSON_PrintUnformatted(d);
  cJSON_Delete(d);
  free(y);
  return j;
}

START_TEST(test_kube__status_and_scale)
{
  tf_kube *k = tf_test_kube(&tf_kt, NULL);
  char *crd = tf_kt_yaml_json("crd.yaml"), *pool = tf_kt_yaml_json("pool.yaml"), *out = NULL;
  tf_kube_status *st = NULL;
  tf_err rc = tf_kube_create(k, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, NULL, &st);
  ck_assert_msg(rc == 0, "CRD: %s", tf_error_last()->message);
  const char *api = "/apis/turnfleet.hzmi.dev/v1alpha1";
  char *coll = NULL, *obj = NULL, *stp = NULL, *scp = NULL;
  TF_OK_OR_FAIL(tf_kube_path(&coll, api, "turnpools", "default", NULL, NULL));
  TF_OK_OR_FAIL(tf_kube_path(&obj, api, "turnpools", "default", "demo", NULL));
  TF_OK_OR_FAIL(tf_kube_path(&stp, api, "turnpools", "default", "demo", "status"));
  TF_OK_OR_FAIL(tf_kube_path(&scp, api, "turnpools", "default", "demo", "scale"));
  for (int i = 0; i < 50; i++) { /* served once established */
    rc = tf_kube_create(k, coll, pool, &out, NULL);
    if (rc != TF_ENOTFOUND) break;
    tf_test_sleep_ms(100);
  }
  ck_assert_msg(rc == 0, "pool: %s", tf_error_last()->message);
  tf_free(out);
  /* PUT without RV on a custom resource would be 422: the client refuses it first */
  ck_assert_int_eq(tf_kube_update(k, obj, pool, NULL, NULL), TF_EINVALID);
  /* /scale */
  TF_OK_OR_FAIL(tf_kube_get(k, scp, &out, NULL));
  out = tf_kt_compact(out);
  ck_assert_ptr_nonnull(strstr(out, "\"kind\":\"Scale\""));
  ck_assert_ptr_nonnull(strstr(out, "\"replicas\":2"));
  char *rv = tf_kt_rv(out);
  tf_free(out);
  char *body = tf_asprintf__("{\"kind\":\"Scale\",\"apiVersion\":\"autoscaling/v1\",\"metadata\":{\"name\":\"demo\","
                             "\"namespace\":\"default\",\"resourceVersion\":\"%s\"},\"spec\":{\"replicas\":3}}", rv);
  TF_OK_OR_FAIL(tf_kube_update(k, scp, body, NULL, NULL));
  free(body);
  free(rv);
  TF_OK_OR_FAIL(tf_kube_patch(k, scp, TF_KUBE_PATCH_MERGE, "{\"spec\":{\"replicas\":-1}}", NULL, &st) == 0 ? -1 : 0);
  ck_assert_int_eq(tf_kube_status_code(st), 422);
  tf_kube_status_free(st);
  /* /status takes only status; the main path keeps the stored status */
  TF_OK_OR_FAIL(tf_kube_patch(k, stp, TF_KUBE_PATCH_MERGE, "{\"status\":{\"replicas\":1},\"spec\":{\"replicas\":9}}",
                              &out, NULL));
  out = tf_kt_compact(out);
  ck_assert_ptr_nonnull(strstr(out, "\"replicas\":3"));
  tf_free(out);
  TF_OK_OR_FAIL(tf_kube_get(k, stp, &out, NULL));
  cJSON *d = cJSON_Parse(out);
  ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "status"), "replicas")->valueint, 1);
  ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "spec"), "replicas")->valueint, 3);
  cJSON_Delete(d);
  tf_free(out);
  /* strategic merge is never sent */
  ck_assert_int_eq(tf_test_count(&tf_kt, "PATCH", NULL, NULL) - tf_test_count(&tf_kt, "PATCH", "turnpools", NULL), 0);
  free(crd);
  free(pool);
  tf_free(coll);
  tf_free(obj);
  tf_free(stp);
  tf_free(scp);
  tf_kube_free(k);
}
END_TEST

/* Every fault of a plain request: the code, the Status, the wait asked for. */
START_TEST(test_kube__request_faults)
{
  char *log = NULL;
  tf_kube *k = tf_test_kube(&tf_kt, &log);
  char *path = tf_kt_cm_path("faults"), *out = NULL;
  tf_kube_status *st = NULL;
  static const int codes[] = {500, 503, 504, 403};
  static const tf_err errs[] = {TF_EUNAVAILABLE, TF_EUNAVAILABLE, TF_EUNAVAILABLE, TF_EAUTH};
  for (int i = 0; i < 4; i++) {
    char *f = tf_asprintf__("{\"method\":\"GET\",\"path\":\"/configmaps/faults$\",\"status\":%d,\"count\":1}", codes[i]);
    tf_test_fault(&tf_kt, f);
    free(f);
    ck_assert_int_eq(tf_kube_get(k, path, &out, &st), errs[i]);
    ck_assert_int_eq(tf_kube_status_code(st), codes[i]);
    tf_kube_status_free(st);
  }
  /* 429 + Retry-After: sent again after the wait, twice at most (the third 429 is the answer) */
  tf_test_fault(&tf_kt, "{\"method\":\"GET\",\"path\":\"/configmaps/faults$\",\"status\":429,\"retryAfter\":1,\"count\":3}");
  ck_assert_int_eq(tf_kube_get(k, path, &out, &st), TF_EUNAVAILABLE);
  ck_assert_str_eq(tf_kube_status_reason(st), "TooManyRequests");
  ck_assert_int_eq(tf_kube_status_retry_after(st), 1);
  tf_kube_status_free(st);
  /* TCP reset (twice: libcurl itself retries once when a reused connection dies before any answer) */
  tf_test_fault(&tf_kt, "{\"method\":\"GET\",\"path\":\"/configmaps/faults$\",\"reset\":true,\"count\":2}");
  ck_assert_int_eq(tf_kube_get(k, path, &out, &st), TF_ENET);
  ck_assert_int_eq(tf_kube_status_code(st), 0);
  tf_kube_status_free(st);
  /* headers later than the client's timeout (5 s) */
  tf_test_fault(&tf_kt, "{\"method\":\"GET\",\"path\":\"/configmaps/faults$\",\"slowHeaders\":7,\"count\":1}");
  ck_assert_int_eq(tf_kube_get(k, path, &out, &st), TF_ETIMEOUT);
  ck_assert_str_eq(tf_kube_status_reason(st), "Timeout");
  tf_kube_status_free(st);
  /* a 200 that is not JSON (text/plain): an error, not an object */
  ck_assert_int_eq(tf_kube_get(k, "/readyz", &out, &st), TF_EPROTO);
  ck_assert_ptr_null(out);
  ck_assert_str_eq(tf_kube_status_reason(st), "Malformed");
  tf_kube_status_free(st);
  /* a truncated body: an error, never a crash */
  TF_OK_OR_FAIL(tf_kube_create(k, "/api/v1/namespaces/default/configmaps",
                               "{\"metadata\":{\"name\":\"faults\"},\"data\":{\"a\":\"0123456789012345678901234567890\"}}",
                               NULL, NULL));
  tf_test_fault(&tf_kt, "{\"method\":\"GET\",\"path\":\"/configmaps/faults$\",\"truncate\":true,\"count\":1}");
  ck_assert_int_lt(tf_kube_get(k, path, &out, &st), 0);
  ck_assert_ptr_null(out);
  tf_kube_status_free(st);
  TF_OK_OR_FAIL(tf_kube_get(k, path, &out, NULL));
  tf_free(out);
  /* 409 on the first PUT only */
  tf_test_fault(&tf_kt, "{\"method\":\"PUT\",\"path\":\"/configmaps/faults$\",\"status\":409,\"count\":1}");
  ck_assert_int_eq(tf_kube_update(k, path, "{\"metadata\":{\"name\":\"faults\",\"resourceVersion\":\"1\"}}", NULL, &st),
                   TF_ECONFLICT);
  tf_kube_status_free(st);
  /* the client never retried on its own but for the 429s: one request per call */
  int gets = tf_test_count(&tf_kt, "GET", "/configmaps/faults", NULL);
  ck_assert_msg(gets >= 11 && gets <= 12, "%d GETs for 9 calls (two of them sent again after a 429)", gets);
  ck_assert_ptr_null(strstr(log, tf_kt.token));
  free(log);
  free(path);
  tf_kube_delete(k, "/api/v1/namespaces/default/configmaps/faults", NULL, NULL, NULL);
  tf_kube_free(k);
}
END_TEST

/* Token rotation: the file changes and the old token is revoked; the next
 * request gets one 401, re-reads the file at once and succeeds. */
START_TEST(test_kube__token_rotation)
{
  char *dir = tf_test_tmpdir(), tokp[4096];
  snprintf(tokp, sizeof(tokp), "%s/token", dir);
  char *t1 = tf_test_new_token(&tf_kt, "rot", tokp);
  char *log = NULL;
  tf_kube *k = tf_test_kube_token(&tf_kt, tokp, NULL, &log);
  char *out = NULL;
  TF_OK_OR_FAIL(tf_kube_get(k, "/api/v1/namespaces/default", &out, NULL));
  tf_free(out);
  char *t2 = tf_test_new_token(&tf_kt, "rot", tokp);
  char *rev = tf_asprintf__("{\"token\":\"%s\"}", t1);
  cJSON_Delete(tf_test_control(&tf_kt, "POST", "/tokens/revoke", rev));
  free(rev);
  TF_OK_OR_FAIL(tf_kube_get(k, "/api/v1/namespaces/default", &out, NULL));
  tf_free(out);
  cJSON *reqs = tf_test_requests(&tf_kt, "GET", "/api/v1/namespaces/default", NULL);
  ck_assert_int_eq(cJSON_GetArraySize(reqs), 3);
  ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 1), "code")->valueint, 401);
  ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 2), "code")->valueint, 200);
  cJSON_Delete(reqs);
  /* revoked and the file not updated: one 401 retry, then TF_EAUTH */
  rev = tf_asprintf__("{\"token\":\"%s\"}", t2);
  cJSON_Delete(tf_test_control(&tf_kt, "POST", "/tokens/revoke", rev));
  free(rev);
  tf_kube_status *st = NULL;
  ck_assert_int_eq(tf_kube_get(k, "/api/v1/namespaces/default", &out, &st), TF_EAUTH);
  ck_assert_str_eq(tf_kube_status_reason(st), "Unauthorized");
  tf_kube_status_free(st);
  ck_assert_int_eq(tf_test_count(&tf_kt, "GET", "/api/v1/namespaces/default", NULL), 5);
  /* neither token in the log nor in the last error */
  ck_assert_ptr_nonnull(log);
  ck_assert_ptr_null(strstr(log, t1));
  ck_assert_ptr_null(strstr(log, t2));
  ck_assert_ptr_null(strstr(tf_error_last()->message, t2));
  free(log);
  free(t1);
  free(t2);
  tf_kube_free(k);
  tf_test_rmtree(dir);
  free(dir);
}
END_TEST

/* TLS is verified: a wrong CA fails; insecure only when asked; tls-server-name. */
START_TEST(test_kube__tls)
{
  char *dir = tf_test_tmpdir(), p[4096];
  snprintf(p, sizeof(p), "%s/kubeconfig", dir);
  char *ca_pem = tf_test_read(tf_kt.ca_path, NULL), *ca_data = tf_kt_b64(ca_pem);
  free(ca_pem);
  /* 0: the right CA, through a name in the certificate; 1: no CA (the system
   * store does not know the stand-in's CA); 2: insecure, explicitly; 3: a name
   * not in the certificate */
  static const tf_err want[] = {TF_OK, TF_ENET, TF_OK, TF_ENET};
  for (int i = 0; i < 4; i++) {
    char *cl = i == 0   ? tf_asprintf__("clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s, "
                                        "tls-server-name: kubernetes.default}}]\n",
                                        tf_kt.server, ca_data)
               : i == 1 ? tf_asprintf__("clusters: [{name: c, cluster: {server: '%s'}}]\n", tf_kt.server)
               : i == 2 ? tf_asprintf__("clusters: [{name: c, cluster: {server: '%s', insecure-skip-tls-verify: true}}]\n",
                                        tf_kt.server)
                        : tf_asprintf__("clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s, "
                                        "tls-server-name: wrong.example}}]\n",
                                        tf_kt.server, ca_data);
    char *y = tf_asprintf__("current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n%s"
                            "users: [{name: u, user: {tokenFile: %s}}]\n",
                            cl, tf_kt.token_path);
    tf_test_write(p, y, 0600);
    tf_kube_options o;
    TF_OK_OR_FAIL(tf_kube_options_init(&o, TF_KUBE_OPTIONS_VERSION));
    o.source = TF_KUBE_SOURCE_KUBECONFIG;
    o.kubeconfig = p;
    tf_kube *k = NULL;
    TF_OK_OR_FAIL(tf_kube_new(&k, &o));
    char *out = NULL;
    tf_err rc = tf_kube_get(k, "/api/v1/namespaces/default", &out, NULL);
    ck_assert_msg(rc == want[i], "variant %d: %d (%s)", i, rc, tf_error_last()->message);
    tf_free(out);
    tf_kube_free(k);
    free(cl);
    free(y);
  }
  free(ca_data);
  tf_test_rmtree(dir);
  free(dir);
}
END_TEST

/* Client certificates in data and file forms reach libcurl (a valid pair
 * connects; a key that does not match the certificate fails), and neither the
 * key nor the token shows in the log or the error. The stand-in does not ask
 * for client certificates, so the bearer token still authenticates. */
START_TEST(test_kube__client_certificates)
{
  char crt[4200], key[4200], wrong[4200];
  snprintf(crt, sizeof(crt), "%s/kc/apiserver.crt", tf_kt.dir);
  snprintf(key, sizeof(key), "%s/kc/apiserver.key", tf_kt.dir);
  snprintf(wrong, sizeof(wrong), "%s/kc/ca.key", tf_kt.dir);
  char *crt_pem = tf_test_read(crt, NULL), *key_pem = tf_test_read(key, NULL), *ca_pem = tf_test_read(tf_kt.ca_path, NULL);
  char *crt_b64 = tf_kt_b64(crt_pem), *key_b64 = tf_kt_b64(key_pem), *ca_b64 = tf_kt_b64(ca_pem);
  char *dir = tf_test_tmpdir(), p[4096];
  snprintf(p, sizeof(p), "%s/kubeconfig", dir);
  for (int i = 0; i < 3; i++) {
    char *user = i == 0 ? tf_asprintf__("{client-certificate-data: %s, client-key-data: %s, tokenFile: %s}", crt_b64,
                                        key_b64, tf_kt.token_path)
                 : i == 1 ? tf_asprintf__("{client-certificate: %s, client-key: %s, tokenFile: %s}", crt, key,
                                          tf_kt.token_path)
                          : tf_asprintf__("{client-certificate: %s, client-key: %s, tokenFile: %s}", crt, wrong,
                                          tf_kt.token_path);
    char *y = tf_asprintf__("current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
                            "clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s}}]\n"
                            "users: [{name: u, user: %s}]\n",
                            tf_kt.server, ca_b64, user);
    tf_test_write(p, y, 0600);
    char *log = NULL;
    tf_kube_options o;
    TF_OK_OR_FAIL(tf_kube_options_init(&o, TF_KUBE_OPTIONS_VERSION));
    o.source = TF_KUBE_SOURCE_KUBECONFIG;
    o.kubeconfig = p;
    o.log = tf_test_log_cb;
    o.log_payload = &log;
    o.log_level = TF_LOG_DEBUG;
    tf_kube *k = NULL;
    TF_OK_OR_FAIL(tf_kube_new(&k, &o));
    char *out = NULL;
    tf_err rc = tf_kube_get(k, "/api/v1/namespaces/default", &out, NULL);
    if (i < 2) ck_assert_msg(rc == 0, "form %d: %s", i, tf_error_last()->message);
    else ck_assert_msg(rc == TF_ENET, "mismatched key: %d (%s)", rc, tf_error_last()->message);
    tf_free(out);
    tf_kube_free(k);
    /* no key material or token in the log or the error */
    const char *texts[] = {log ? log : "", tf_error_last()->message};
    for (int t = 0; t < 2; t++) {
      ck_assert_ptr_null(strstr(texts[t], tf_kt.token));
      ck_assert_ptr_null(strstr(texts[t], "PRIVATE KEY"));
      ck_assert_ptr_null(strstr(texts[t], key_b64));
    }
    free(log);
    free(user);
    free(y);
  }
  free(crt_pem);
  free(key_pem);
  free(ca_pem);
  free(crt_b64);
  free(key_b64);
  free(ca_b64);
  tf_test_rmtree(dir);
  free(dir);
}
END_TEST

/* The in-cluster flow end to end: the service-account directory and the
 * KUBERNETES_SERVICE_* variables pointing at the stand-in. */
START_TEST(test_kube__in_cluster_live)
{
  char *dir = tf_test_tmpdir();
  char *ca = tf_test_read(tf_kt.ca_path, NULL);
  tf_kt_put(dir, "ca.crt", ca, 0644);
  tf_kt_put(dir, "token", tf_kt.token, 0600);
  tf_kt_put(dir, "namespace", "kube-system\n", 0644);
  free(ca);
  char port[16];
  snprintf(port, sizeof(port), "%d", tf_kt_port);
  setenv("KUBERNETES_SERVICE_HOST", tf_kt_addr, 1);
  setenv("KUBERNETES_SERVICE_PORT", port, 1);
  tf_kube_options o;
  TF_OK_OR_FAIL(tf_kube_options_init(&o, TF_KUBE_OPTIONS_VERSION));
  o.source = TF_KUBE_SOURCE_IN_CLUSTER;
  o.sa_dir = dir;
  tf_kube *k = NULL;
  TF_OK_OR_FAIL(tf_kube_new(&k, &o));
  ck_assert_str_eq(tf_kube_namespace(k), "kube-system");
  char *out = NULL;
  TF_OK_OR_FAIL(tf_kube_get(k, "/api/v1/namespaces/kube-system", &out, NULL));
  tf_free(out);
  tf_kube_free(k);
  tf_test_rmtree(dir);
  free(dir);
}
END_TEST

typedef struct {
  int added, deleted, bookmarks, errors;
  char last_rv[32];
} tf_kt_watch_seen;

static int tf_kt_on_event(tf_kube_event_type type, const char *object, void *payload)
{
  tf_kt_watch_seen *s = payload;
  if (type == TF_KUBE_EVENT_ADDED) s->added++;
  if (type == TF_KUBE_EVENT_DELETED) s->deleted++;
  if (type == TF_KUBE_EVENT_BOOKMARK) s->bookmarks++;
  if (type == TF_KUBE_EVENT_ERROR) s->errors++;
  cJSON *d = cJSON_Parse(object);
  const char *rv = tf_kube__meta_str(d, "resourceVersion");
  if (rv) snprintf(s->last_rv, sizeof(s->last_rv), "%s", rv);
  cJSON_Delete(d);
  return 0;
}

START_TEST(test_kube__watch)
{
  tf_kube *k = tf_test_kube(&tf_kt, NULL);
  const char *coll = "/api/v1/namespaces/default/configmaps";
  for (int i = 0; i < 3; i++) {
    char *b = tf_asprintf__("{\"metadata\":{\"name\":\"w%d\",\"labels\":{\"w\":\"1\"}}}", i);
    TF_OK_OR_FAIL(tf_kube_create(k, coll, b, NULL, NULL));
    free(b);
  }
  tf_kube_list_options lo;
  TF_OK_OR_FAIL(tf_kube_list_options_init(&lo, TF_KUBE_LIST_OPTIONS_VERSION));
  lo.label_selector = "w=1";
  lo.resource_version = "0";
  lo.timeout_seconds = 1;
  lo.allow_bookmarks = 1;
  tf_kt_watch_seen s = {0};
  tf_kube_status *st = NULL;
  /* synthetic ADDED for each, then a clean end at timeoutSeconds */
  TF_OK_OR_FAIL(tf_kube_watch(k, coll, &lo, tf_kt_on_event, &st, &s));
  ck_assert_int_eq(s.added, 3);
  ck_assert_int_ge(s.bookmarks, 1);
  ck_assert_int_eq(tf_test_wait_count(&tf_kt, "GET", "/configmaps", "allowWatchBookmarks=true&timeoutSeconds=1", 1), 1);
  /* ERROR event 410 mid-stream */
  memset(&s, 0, sizeof(s));
  tf_test_fault(&tf_kt, "{\"path\":\"/configmaps$\",\"query\":\"watch=1\",\"expireMidStream\":true,\"afterEvents\":1,\"count\":1}");
  ck_assert_int_eq(tf_kube_watch(k, coll, &lo, tf_kt_on_event, &st, &s), TF_EEXPIRED);
  ck_assert_int_eq(s.added, 1);
  ck_assert_int_eq(s.errors, 1);
  ck_assert_int_eq(tf_kube_status_code(st), 410);
  ck_assert_str_eq(tf_kube_status_reason(st), "Expired");
  tf_kube_status_free(st);
  /* HTTP 410 on the watch request itself */
  tf_test_fault(&tf_kt, "{\"path\":\"/configmaps$\",\"query\":\"watch=1\",\"status\":410,\"count\":1}");
  ck_assert_int_eq(tf_kube_watch(k, coll, &lo, tf_kt_on_event, &st, &s), TF_EEXPIRED);
  ck_assert_int_eq(tf_kube_status_code(st), 410);
  tf_kube_status_free(st);
  /* a truncated line: the events before it count, the stream is an error */
  memset(&s, 0, sizeof(s));
  tf_test_fault(&tf_kt, "{\"path\":\"/configmaps$\",\"query\":\"watch=1\",\"truncate\":true,\"afterEvents\":2,\"count\":1}");
  ck_assert_int_lt(tf_kube_watch(k, coll, &lo, tf_kt_on_event, &st, &s), 0);
  ck_assert_int_eq(s.added, 2);
  tf_kube_status_free(st);
  /* reset mid-stream */
  memset(&s, 0, sizeof(s));
  tf_test_fault(&tf_kt, "{\"path\":\"/configmaps$\",\"query\":\"watch=1\",\"resetMidStream\":true,\"afterEvents\":1,\"count\":1}");
  ck_assert_int_lt(tf_kube_watch(k, coll, &lo, tf_kt_on_event, &st, &s), 0);
  ck_assert_int_eq(s.added, 1);
  tf_kube_status_free(st);
  /* stalled: headers then silence; the watchdog (2 s) ends it */
  memset(&s, 0, sizeof(s));
  lo.timeout_seconds = 60;
  lo.stall_seconds = 2;
  tf_test_fault(&tf_kt, "{\"path\":\"/configmaps$\",\"query\":\"watch=1\",\"stall\":true,\"stallSeconds\":30,\"count\":1}");
  ck_assert_int_eq(tf_kube_watch(k, coll, &lo, tf_kt_on_event, &st, &s), TF_ETIMEOUT);
  ck_assert_ptr_nonnull(strstr(tf_error_last()->message, "watchdog"));
  ck_assert_int_eq(s.added, 0);
  tf_kube_status_free(st);
  for (int i = 0; i < 3; i++) {
    char p[64];
    snprintf(p, sizeof(p), "%s/w%d", coll, i);
    TF_OK_OR_FAIL(tf_kube_delete(k, p, NULL, NULL, NULL));
  }
  tf_kube_free(k);
}
END_TEST

/* ---- write gate, Retry-After ---- */

typedef struct tf_kt_gate {
  int calls;
  long allow;
} tf_kt_gate;

static long tf_kt_gate_cb(const char *method, const char *path, void *payload)
{
  (void)method, (void)path;
  tf_kt_gate *g = payload;
  __atomic_add_fetch(&g->calls, 1, __ATOMIC_SEQ_CST);
  return __atomic_load_n(&g->allow, __ATOMIC_SEQ_CST);
}

/* Wait (up to 20 s) until @p f(arg) holds. */
static int tf_kt_until(int (*f)(void *), void *arg)
{
  for (int i = 0; i < 400; i++) {
    if (f(arg)) return 1;
    tf_test_sleep_ms(50);
  }
  return f(arg);
}

static int tf_kt_leads(void *e) { return tf_elector_is_leader(e); }

typedef struct tf_kt_lease_puts {
  int want;
} tf_kt_lease_puts;

static int tf_kt_lease_put_count(void)
{
  cJSON *r = tf_test_requests(&tf_kt, "PUT", "/leases/gate-lease", NULL);
  int n = 0;
  cJSON *it;
  cJSON_ArrayForEach(it, r) n += cJSON_GetObjectItem(it, "code")->valueint == 200;
  cJSON_Delete(r);
  return n;
}

static int tf_kt_lease_puts_reach(void *arg) { return tf_kt_lease_put_count() >= ((tf_kt_lease_puts *)arg)->want; }

/* A write goes out only when the gate says so, asked right before it (never for a GET); a
 * refused write sends nothing and says TF_EREFUSED; the elector as the gate: writes only while
 * it leads, its own Lease requests never gated. */
START_TEST(test_kube__write_gate)
{
  tf_kube *k = tf_test_kube(&tf_kt, NULL);
  tf_kt_gate g = {0, 0};
  ck_assert_int_eq(tf_kube_set_write_gate(NULL, tf_kt_gate_cb, &g), TF_EINVALID);
  TF_OK_OR_FAIL(tf_kube_set_write_gate(k, tf_kt_gate_cb, &g));
  const char *coll = "/api/v1/namespaces/default/configmaps", *obj = "/api/v1/namespaces/default/configmaps/gated";
  tf_kube_status *st = NULL;
  char *out = NULL;
  ck_assert_int_eq(tf_kube_create(k, coll, "{\"metadata\":{\"name\":\"gated\"}}", NULL, &st), TF_EREFUSED);
  ck_assert_str_eq(tf_kube_status_reason(st), "Refused");
  ck_assert_int_eq(tf_kube_status_code(st), 0);
  tf_kube_status_free(st);
  ck_assert_int_eq(g.calls, 1);
  ck_assert_int_eq(tf_test_count(&tf_kt, "POST", "/configmaps", NULL), 0);
  ck_assert_int_eq(tf_kube_get(k, obj, &out, NULL), TF_ENOTFOUND);
  ck_assert_int_eq(g.calls, 1); /* a GET never asks */
  g.allow = 10000;
  TF_OK_OR_FAIL(tf_kube_create(k, coll, "{\"metadata\":{\"name\":\"gated\"}}", NULL, NULL));
  ck_assert_int_ge(g.calls, 2);
  int before = g.calls;
  TF_OK_OR_FAIL(tf_kube_patch(k, obj, TF_KUBE_PATCH_MERGE, "{\"data\":{\"a\":\"1\"}}", NULL, NULL));
  ck_assert_int_gt(g.calls, before);
  g.allow = 0;
  ck_assert_int_eq(tf_kube_delete(k, obj, NULL, NULL, NULL), TF_EREFUSED);
  ck_assert_int_eq(tf_test_count(&tf_kt, "DELETE", "/configmaps/gated", NULL), 0);

  /* the elector as the gate */
  tf_elector_options eo;
  TF_OK_OR_FAIL(tf_elector_options_init(&eo, TF_ELECTOR_OPTIONS_VERSION));
  eo.lease_namespace = "default";
  eo.lease_name = "gate-lease";
  eo.identity = "gate-test";
  eo.lease_seconds = 3;
  eo.renew_deadline_ms = 2000;
  eo.retry_ms = 400;
  tf_elector *e = NULL;
  TF_OK_OR_FAIL(tf_elector_new(&e, k, &eo));
  ck_assert_int_eq(tf_elector_write_gate("PATCH", obj, NULL), 0);
  ck_assert_int_eq(tf_elector_write_gate("PATCH", obj, e), 0); /* not started: not leading */
  TF_OK_OR_FAIL(tf_kube_set_write_gate(k, tf_elector_write_gate, e));
  ck_assert_int_eq(tf_kube_patch(k, obj, TF_KUBE_PATCH_MERGE, "{\"data\":{\"a\":\"2\"}}", NULL, NULL), TF_EREFUSED);
  TF_OK_OR_FAIL(tf_elector_start(e));
  ck_assert_msg(tf_kt_until(tf_kt_leads, e), "the elector never led");
  long left = tf_elector_write_gate("PATCH", obj, e);
  ck_assert_msg(left > 0 && left <= 2000, "%ld ms left of a 2000 ms renew deadline", left);
  TF_OK_OR_FAIL(tf_kube_patch(k, obj, TF_KUBE_PATCH_MERGE, "{\"data\":{\"a\":\"3\"}}", NULL, NULL));
  /* a gate that refuses everything does not stop the Lease renewals */
  TF_OK_OR_FAIL(tf_kube_set_write_gate(k, tf_kt_gate_cb, &g));
  tf_kt_lease_puts lp = {tf_kt_lease_put_count() + 3};
  ck_assert_msg(tf_kt_until(tf_kt_lease_puts_reach, &lp), "the Lease was not renewed behind a refusing gate");
  ck_assert(tf_elector_is_leader(e));
  TF_OK_OR_FAIL(tf_kube_set_write_gate(k, tf_elector_write_gate, e));
  tf_elector_stop(e); /* released: no longer leading */
  ck_assert_int_eq(tf_elector_write_gate("PATCH", obj, e), 0);
  ck_assert_int_eq(tf_kube_patch(k, obj, TF_KUBE_PATCH_MERGE, "{\"data\":{\"a\":\"4\"}}", NULL, NULL), TF_EREFUSED);
  TF_OK_OR_FAIL(tf_kube_set_write_gate(k, NULL, NULL));
  TF_OK_OR_FAIL(tf_kube_delete(k, obj, NULL, NULL, NULL));
  tf_elector_free(e);
  tf_kube_free(k);
}
END_TEST

/* The log time of the matching requests, in order (at most @p max); returns how many. */
static int tf_kt_times(const char *method, const char *path, double *t, int *code, int max)
{
  cJSON *r = tf_test_requests(&tf_kt, method, path, NULL);
  int n = 0;
  cJSON *it;
  cJSON_ArrayForEach(it, r)
  {
    if (n == max) break;
    t[n] = cJSON_GetObjectItem(it, "time")->valuedouble;
    code[n] = cJSON_GetObjectItem(it, "code")->valueint;
    n++;
  }
  cJSON_Delete(r);
  return n;
}

/* Retry-After on writes: a 429 PATCH is sent again no sooner than the wait; every other
 * request of the client (another object, a POST) waits too; a wait longer than the client's
 * timeout refuses at once without sending. */
START_TEST(test_kube__retry_after_on_writes)
{
  tf_kube *k = tf_test_kube(&tf_kt, NULL);
  const char *coll = "/api/v1/namespaces/default/configmaps";
  TF_OK_OR_FAIL(tf_kube_create(k, coll, "{\"metadata\":{\"name\":\"ra1\"}}", NULL, NULL));
  tf_test_reset(&tf_kt);
  tf_test_fault(&tf_kt, "{\"method\":\"PATCH\",\"path\":\"/configmaps/ra1$\",\"status\":429,\"retryAfter\":1,\"count\":1}");
  TF_OK_OR_FAIL(tf_kube_patch(k, "/api/v1/namespaces/default/configmaps/ra1", TF_KUBE_PATCH_MERGE,
                              "{\"data\":{\"a\":\"1\"}}", NULL, NULL));
  double t[8];
  int code[8];
  ck_assert_int_eq(tf_kt_times("PATCH", "/configmaps/ra1", t, code, 8), 2);
  ck_assert_int_eq(code[0], 429);
  ck_assert_int_eq(code[1], 200);
  ck_assert_msg(t[1] - t[0] >= 0.95, "sent again %.3f s after a 429 asking for 1 s", t[1] - t[0]);
  /* a 429 on one write holds the next write of another object */
  tf_test_reset(&tf_kt);
  tf_test_fault(&tf_kt, "{\"method\":\"PATCH\",\"path\":\"/configmaps/ra1$\",\"status\":429,\"retryAfter\":2,\"count\":3}");
  tf_kube_status *st = NULL;
  ck_assert_int_eq(tf_kube_patch(k, "/api/v1/namespaces/default/configmaps/ra1", TF_KUBE_PATCH_MERGE,
                                 "{\"data\":{\"a\":\"2\"}}", NULL, &st), TF_EUNAVAILABLE);
  ck_assert_int_eq(tf_kube_status_retry_after(st), 2);
  tf_kube_status_free(st);
  TF_OK_OR_FAIL(tf_kube_create(k, coll, "{\"metadata\":{\"name\":\"ra2\"}}", NULL, NULL));
  ck_assert_int_eq(tf_kt_times("PATCH", "/configmaps/ra1", t, code, 8), 3); /* sent, then again twice */
  double last429 = t[2];
  for (int i = 1; i < 3; i++) ck_assert_msg(t[i] - t[i - 1] >= 1.95, "PATCH %d %.3f s after a 429 asking for 2 s", i, t[i] - t[i - 1]);
  ck_assert_int_eq(tf_kt_times("POST", "/namespaces/default/configmaps", t, code, 8), 1);
  ck_assert_msg(t[0] - last429 >= 1.95, "a POST %.3f s after a 429 asking for 2 s", t[0] - last429);
  /* longer than the client's 5 s timeout: refused at once, nothing sent */
  tf_test_fault(&tf_kt, "{\"method\":\"PATCH\",\"path\":\"/configmaps/ra1$\",\"status\":429,\"retryAfter\":30,\"count\":1}");
  ck_assert_int_eq(tf_kube_patch(k, "/api/v1/namespaces/default/configmaps/ra1", TF_KUBE_PATCH_MERGE,
                                 "{\"data\":{\"a\":\"3\"}}", NULL, NULL), TF_EUNAVAILABLE);
  int sent = tf_test_count(&tf_kt, NULL, "/configmaps/ra", NULL);
  ck_assert_int_eq(tf_kube_delete(k, "/api/v1/namespaces/default/configmaps/ra2", NULL, NULL, &st), TF_EUNAVAILABLE);
  ck_assert_str_eq(tf_kube_status_reason(st), "TooManyRequests");
  ck_assert_int_ge(tf_kube_status_retry_after(st), 25);
  tf_kube_status_free(st);
  ck_assert_int_eq(tf_test_count(&tf_kt, NULL, "/configmaps/ra", NULL), sent);
  tf_kube_free(k);
  /* another client is not held */
  k = tf_test_kube(&tf_kt, NULL);
  TF_OK_OR_FAIL(tf_kube_delete(k, "/api/v1/namespaces/default/configmaps/ra1", NULL, NULL, NULL));
  TF_OK_OR_FAIL(tf_kube_delete(k, "/api/v1/namespaces/default/configmaps/ra2", NULL, NULL, NULL));
  tf_kube_free(k);
}
END_TEST

Suite *tf_test_kube_suite(void)
{
  Suite *s = suite_create("kube");
  TCase *offline = tcase_create("config");
  tcase_add_test(offline, test_kube__kubeconfig_data_forms);
  tcase_add_test(offline, test_kube__kubeconfig_file_forms);
  tcase_add_loop_test(offline, test_kube__kubeconfig_invalid, 0, (int)(sizeof(tf_kt_bad) / sizeof(tf_kt_bad[0])));
  tcase_add_test(offline, test_kube__in_cluster);
  tcase_add_test(offline, test_kube__options_and_paths);
  tcase_add_test(offline, test_kube__status_parse);
  tcase_add_test(offline, test_kube__watch_lines);
  suite_add_tcase(s, offline);
  TCase *live = tcase_create("standin");
  tcase_add_unchecked_fixture(live, tf_kt_setup, tf_kt_teardown);
  tcase_add_checked_fixture(live, tf_kt_each, NULL);
  tcase_set_timeout(live, 120);
  tcase_add_test(live, test_kube__crud);
  tcase_add_test(live, test_kube__status_and_scale);
  tcase_add_test(live, test_kube__request_faults);
  tcase_add_test(live, test_kube__token_rotation);
  tcase_add_test(live, test_kube__tls);
  tcase_add_test(live, test_kube__client_certificates);
  tcase_add_test(live, test_kube__in_cluster_live);
  tcase_add_test(live, test_kube__watch);
  tcase_add_test(live, test_kube__write_gate);
  tcase_add_test(live, test_kube__retry_after_on_writes);
  suite_add_tcase(s, live);
  return s;
}
