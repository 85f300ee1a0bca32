/* kube configuration: kubeconfig (through the YAML reader of doc.c), the
 * in-cluster service account, and the file and base64 helpers they share.
 * Credentials never reach an error message: errors name the field only. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"

#define TF_KUBE__MAX_FILE (4u << 20)
#define TF_KUBE__SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static void tf_kube__blob_dispose(tf_kube__blob *b, int secret)
{
  if (b->ptr && secret) tf_crypto__wipe(b->ptr, b->len);
  free(b->ptr);
  b->ptr = NULL;
  b->len = 0;
}

static void tf_kube__secret_free(char *s)
{
  if (s) tf_crypto__wipe(s, strlen(s));
  free(s);
}

void tf_kube__config_dispose(tf_kube__config *c)
{
  if (!c) return;
  free(c->server);
  free(c->ns);
  free(c->tls_server_name);
  tf_kube__blob_dispose(&c->ca, 0);
  tf_kube__blob_dispose(&c->cert, 0);
  tf_kube__blob_dispose(&c->key, 1);
  tf_kube__secret_free(c->token);
  free(c->token_file);
  memset(c, 0, sizeof(*c));
}

tf_err tf_kube__read_file(const char *path, size_t max, tf_kube__blob *out)
{
  FILE *f = fopen(path, "rb");
  if (!f) return tf_error__set(TF_EIO, "%.200s: %s", path, strerror(errno));
  tf_buf b;
  tf_buf__init(&b);
  char chunk[4096];
  size_t n;
  int too_big = 0;
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    if (b.len + n > max) {
      too_big = 1;
      break;
    }
    tf_buf__putn(&b, chunk, n);
  }
  int failed = ferror(f);
  fclose(f);
  tf_crypto__wipe(chunk, sizeof(chunk));
  if (too_big || failed || b.failed) {
    tf_buf__dispose(&b, 1);
    if (too_big) return tf_error__set(TF_EINVALID, "%.200s: larger than %zu bytes", path, max);
    return failed ? tf_error__set(TF_EIO, "%.200s: cannot read", path) : tf_error__nomem();
  }
  if (!b.ptr) {
    b.ptr = calloc(1, 1);
    if (!b.ptr) return tf_error__nomem();
  }
  out->ptr = b.ptr;
  out->len = b.len;
  return TF_OK;
}

/* base64 (standard alphabet, whitespace ignored) into a blob. */
static tf_err tf_kube__b64(const char *field, const char *text, tf_kube__blob *out)
{
  size_t n = strlen(text);
  char *clean = malloc(n + 1);
  if (!clean) return tf_error__nomem();
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (!strchr(" \t\r\n", text[i])) clean[m++] = text[i];
  clean[m] = '\0';
  tf_err rc = TF_OK;
  unsigned char *dec = NULL;
  if (m == 0 || m % 4 != 0) {
    rc = tf_error__set(TF_EINVALID, "%s: not base64", field);
  } else if (!(dec = malloc(m / 4 * 3 + 1))) {
    rc = tf_error__nomem();
  } else {
    int len = EVP_DecodeBlock(dec, (const unsigned char *)clean, (int)m);
    if (len < 0) {
      rc = tf_error__set(TF_EINVALID, "%s: not base64", field);
    } else {
      /* EVP_DecodeBlock counts padding as zero bytes */
      if (clean[m - 1] == '=') len--;
      if (clean[m - 2] == '=') len--;
      dec[len] = '\0';
      out->ptr = (char *)dec;
      out->len = (size_t)len;
      dec = NULL;
    }
  }
  tf_crypto__wipe(clean, m);
  free(clean);
  if (dec) {
    tf_crypto__wipe(dec, m / 4 * 3 + 1);
    free(dec);
  }
  return rc;
}

static const cJSON *tf_kube__named(const cJSON *root, const char *list, const char *inner, const char *name,
                                   tf_err *rc)
{
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, list);
  if (arr && !cJSON_IsArray(arr)) {
    *rc = tf_error__set(TF_EINVALID, "%s: must be a list", list);
    return NULL;
  }
  size_t i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr)
  {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, inner);
      if (!cJSON_IsObject(v)) {
        *rc = tf_error__set(TF_EINVALID, "%s[%zu].%s: must be a mapping", list, i, inner);
        return NULL;
      }
      return v;
    }
    i++;
  }
  *rc = tf_error__set(TF_ENOTFOUND, "%s: no entry named \"%.100s\"", list, name);
  return NULL;
}

static tf_err tf_kube__str(const cJSON *obj, const char *key, const char *where, const char **out)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!v || cJSON_IsNull(v)) return TF_OK;
  if (!cJSON_IsString(v)) return tf_error__set(TF_EINVALID, "%s.%s: must be a string", where, key);
  *out = v->valuestring;
  return TF_OK;
}

static char *tf_kube__resolve(const char *base_dir, const char *path)
{
  if (!base_dir || path[0] == '/') return tf_strdup__(path);
  return tf_asprintf__("%s/%s", base_dir, path);
}

/* The `<key>-data` (base64) or `<key>` (file) form of one credential. */
static tf_err tf_kube__pem(const cJSON *obj, const char *key, const char *where, const char *base_dir,
                           tf_kube__blob *out)
{
  char data_key[64];
  snprintf(data_key, sizeof(data_key), "%s-data", key);
  const char *data, *file;
  tf_err rc;
  if ((rc = tf_kube__str(obj, data_key, where, &data)) < 0) return rc;
  if ((rc = tf_kube__str(obj, key, where, &file)) < 0) return rc;
  if (data && *data) {
    char field[96];
    snprintf(field, sizeof(field), "%s.%s", where, data_key);
    return tf_kube__b64(field, data, out);
  }
  if (file && *file) {
    char *p = tf_kube__resolve(base_dir, file);
    if (!p) return tf_error__nomem();
    rc = tf_kube__read_file(p, TF_KUBE__MAX_FILE, out);
    if (rc < 0) tf_error__set(rc, "%s.%s: %s", where, key, tf_error_last()->message);
    free(p);
  }
  return rc;
}

static tf_err tf_kube__config_from(tf_kube__config *c, const cJSON *root, const char *base_dir, const char *context)
{
  tf_err rc = TF_OK;
  if (!cJSON_IsObject(root)) return tf_error__set(TF_EINVALID, "kubeconfig: must be a mapping");
  const char *ctx_name = context;
  if (!ctx_name && (rc = tf_kube__str(root, "current-context", "kubeconfig", &ctx_name)) < 0) return rc;
  if (!ctx_name || !*ctx_name) return tf_error__set(TF_EINVALID, "current-context: not set and no context given");
  const cJSON *ctx = tf_kube__named(root, "contexts", "context", ctx_name, &rc);
  if (!ctx) return rc;
  const char *cluster_name, *user_name, *ns;
  if ((rc = tf_kube__str(ctx, "cluster", "context", &cluster_name)) < 0) return rc;
  if ((rc = tf_kube__str(ctx, "user", "context", &user_name)) < 0) return rc;
  if ((rc = tf_kube__str(ctx, "namespace", "context", &ns)) < 0) return rc;
  if (!cluster_name) return tf_error__set(TF_EINVALID, "context.cluster: required");
  const cJSON *cl = tf_kube__named(root, "clusters", "cluster", cluster_name, &rc);
  if (!cl) return rc;
  const char *server, *sni;
  if ((rc = tf_kube__str(cl, "server", "cluster", &server)) < 0) return rc;
  if ((rc = tf_kube__str(cl, "tls-server-name", "cluster", &sni)) < 0) return rc;
  if (!server || !*server) return tf_error__set(TF_EINVALID, "cluster.server: required");
  if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
    return tf_error__set(TF_EINVALID, "cluster.server: must be an http(s) URL");
  const cJSON *insecure = cJSON_GetObjectItemCaseSensitive(cl, "insecure-skip-tls-verify");
  if (insecure && !cJSON_IsBool(insecure))
    return tf_error__set(TF_EINVALID, "cluster.insecure-skip-tls-verify: must be a boolean");
  if (cJSON_GetObjectItemCaseSensitive(cl, "proxy-url"))
    return tf_error__set(TF_EINVALID, "cluster.proxy-url: not supported");
  c->insecure = cJSON_IsTrue(insecure);
  if (!(c->server = tf_strdup__(server))) return tf_error__nomem();
  /* a trailing slash would double the one every path starts with */
  size_t sl = strlen(c->server);
  while (sl > 0 && c->server[sl - 1] == '/') c->server[--sl] = '\0';
  if (sni && *sni && !(c->tls_server_name = tf_strdup__(sni))) return tf_error__nomem();
  if (ns && *ns && !(c->ns = tf_strdup__(ns))) return tf_error__nomem();
  if ((rc = tf_kube__pem(cl, "certificate-authority", "cluster", base_dir, &c->ca)) < 0) return rc;
  if (c->insecure && c->ca.ptr)
    return tf_error__set(TF_EINVALID, "cluster: certificate-authority and insecure-skip-tls-verify exclude each other");

  if (!user_name) return TF_OK;
  const cJSON *user = tf_kube__named(root, "users", "user", user_name, &rc);
  if (!user) return rc;
  if (cJSON_GetObjectItemCaseSensitive(user, "exec"))
    return tf_error__set(TF_EINVALID, "user.exec: credential plugins are not supported (use a token, tokenFile or a "
                                      "client certificate)");
  if (cJSON_GetObjectItemCaseSensitive(user, "auth-provider"))
    return tf_error__set(TF_EINVALID, "user.auth-provider: not supported (use a token, tokenFile or a client "
                                      "certificate)");
  if (cJSON_GetObjectItemCaseSensitive(user, "username") || cJSON_GetObjectItemCaseSensitive(user, "password"))
    return tf_error__set(TF_EINVALID, "user.username/password: basic authentication is not supported");
  const char *token, *token_file;
  if ((rc = tf_kube__str(user, "token", "user", &token)) < 0) return rc;
  if ((rc = tf_kube__str(user, "tokenFile", "user", &token_file)) < 0) return rc;
  if (token && *token && !(c->token = tf_strdup__(token))) return tf_error__nomem();
  if (token_file && *token_file && !(c->token_file = tf_kube__resolve(base_dir, token_file)))
    return tf_error__nomem();
  if ((rc = tf_kube__pem(user, "client-certificate", "user", base_dir, &c->cert)) < 0) return rc;
  if ((rc = tf_kube__pem(user, "client-key", "user", base_dir, &c->key)) < 0) return rc;
  if (!c->cert.ptr != !c->key.ptr)
    return tf_error__set(TF_EINVALID, "user: client-certificate and client-key go together");
  return TF_OK;
}

/* The doc reader bounds the depth (64), so recursion is bounded. */
static void tf_kube__wipe_tree(cJSON *n)
{
  for (; n; n = n->next) {
    if (cJSON_IsString(n) && n->valuestring) tf_crypto__wipe(n->valuestring, strlen(n->valuestring));
    tf_kube__wipe_tree(n->child);
  }
}

tf_err tf_kube__config_parse(tf_kube__config *out, const char *text, size_t len, const char *base_dir,
                             const char *context)
{
  TF_ASSERT_ARG(out && text);
  memset(out, 0, sizeof(*out));
  cJSON *root = NULL;
  tf_err rc = tf_doc__parse_yaml(&root, text, len, NULL); /* the default input limits */
  if (rc < 0) return rc;
  rc = tf_kube__config_from(out, root, base_dir, context);
  /* the tree holds the token and key data: wipe the strings before freeing */
  tf_kube__wipe_tree(root);
  cJSON_Delete(root);
  if (rc < 0) tf_kube__config_dispose(out);
  return rc;
}

tf_err tf_kube__config_load(tf_kube__config *out, const char *path, const char *context)
{
  TF_ASSERT_ARG(out && path);
  tf_kube__blob b = {0};
  tf_err rc = tf_kube__read_file(path, TF_KUBE__MAX_FILE, &b);
  if (rc < 0) return rc;
  char *dir = tf_strdup__(path);
  if (!dir) {
    tf_kube__blob_dispose(&b, 1);
    return tf_error__nomem();
  }
  char *slash = strrchr(dir, '/');
  if (slash)
    *(slash == dir ? slash + 1 : slash) = '\0';
  rc = tf_kube__config_parse(out, b.ptr, b.len, slash ? dir : NULL, context);
  if (rc < 0) tf_error__set(rc, "%.200s: %s", path, tf_error_last()->message);
  free(dir);
  tf_kube__blob_dispose(&b, 1);
  return rc;
}

tf_err tf_kube__config_in_cluster(tf_kube__config *out, const char *sa_dir)
{
  TF_ASSERT_ARG(out);
  memset(out, 0, sizeof(*out));
  const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port)
    return tf_error__set(TF_EINVALID, "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  if (strspn(port, "0123456789") != strlen(port))
    return tf_error__set(TF_EINVALID, "in-cluster: KUBERNETES_SERVICE_PORT: not a number");
  const char *dir = sa_dir ? sa_dir : TF_KUBE__SA_DIR;
  int v6 = strchr(host, ':') != NULL;
  out->server = tf_asprintf__("https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
  out->token_file = tf_asprintf__("%s/token", dir);
  char *ca = tf_asprintf__("%s/ca.crt", dir), *nsf = tf_asprintf__("%s/namespace", dir);
  tf_err rc = TF_OK;
  if (!out->server || !out->token_file || !ca || !nsf) {
    rc = tf_error__nomem();
  } else if ((rc = tf_kube__read_file(ca, TF_KUBE__MAX_FILE, &out->ca)) == TF_OK) {
    tf_kube__blob nb = {0};
    if (tf_kube__read_file(nsf, 4096, &nb) == TF_OK) {
      size_t n = strcspn(nb.ptr, " \t\r\n");
      nb.ptr[n] = '\0';
      if (n) out->ns = nb.ptr;
      else free(nb.ptr);
    }
  }
  free(ca);
  free(nsf);
  if (rc < 0) tf_kube__config_dispose(out);
  return rc;
}
