/* The Kubernetes source of turnfleet-issuer: informers on TURNPools, the operator's ConfigMaps (label
 * turnfleet.hzmi.dev/pool) and Secrets. Every answer reads the caches afresh: the pool's status
 * (relays ready, draining, ports in use), `<pool>-turn-uris`'s iceServers.json and the current secret
 * (spec.auth.secretRef; a rotation's previousSecretRef is never used to mint). */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source_internal.h"

struct is_kube {
  tf_informer *pools, *configmaps, *secrets;
};

static int informer(tf_informer **out, tf_kube *kube, const char *api, const char *resource, const char *ns,
                    const char *label, tf_log_cb log, char *err, size_t errlen)
{
  char *path = NULL;
  tf_informer_options o;
  tf_informer_options_init(&o, TF_INFORMER_OPTIONS_VERSION);
  if (tf_kube_path(&path, api, resource, ns, NULL, NULL) < 0) goto fail;
  o.path = path;
  o.label_selector = label;
  o.log = log;
  o.log_level = TF_LOG_WARN;
  if (tf_informer_new(out, kube, &o) < 0 || tf_informer_start(*out) < 0) goto fail;
  tf_free(path);
  return 0;
fail:
  snprintf(err, errlen, "%s informer: %s", resource, tf_error_last()->message);
  tf_free(path);
  return -1;
}

is_kube *is__kube_new(tf_kube *kube, const char *ns, tf_log_cb log, char *err, size_t errlen)
{
  is_kube *k = calloc(1, sizeof(*k));
  if (!k) return snprintf(err, errlen, "out of memory"), NULL;
  if (informer(&k->pools, kube, "/apis/turnfleet.hzmi.dev/v1alpha1", "turnpools", ns, NULL, log, err, errlen) < 0 ||
      informer(&k->configmaps, kube, "/api/v1", "configmaps", ns, "turnfleet.hzmi.dev/pool", log, err, errlen) < 0 ||
      informer(&k->secrets, kube, "/api/v1", "secrets", ns, NULL, log, err, errlen) < 0) {
    is__kube_free(k);
    return NULL;
  }
  return k;
}

void is__kube_free(is_kube *k)
{
  if (!k) return;
  tf_informer_free(k->pools);
  tf_informer_free(k->configmaps);
  tf_informer_free(k->secrets);
  free(k);
}

int is__kube_ready(is_kube *k, char *why, size_t whylen)
{
  const char *what = !tf_informer_has_synced(k->pools)        ? "turnpools"
                     : !tf_informer_has_synced(k->configmaps) ? "configmaps"
                     : !tf_informer_has_synced(k->secrets)    ? "secrets"
                                                              : NULL;
  if (what) snprintf(why, whylen, "the %s cache is not synced yet", what);
  return what == NULL;
}

/* data[key] of a Secret, base64-decoded, one trailing line ending dropped; NULL with @p why. Read from the
 * cached object by its tape: no parse, no copy of the object. */
static char *secret_value(const tf_informer_object *secret, const char *key, const char *where, char *why,
                          size_t whylen)
{
  char *b64 = NULL, *out = NULL;
  if (tf_informer_object_string(secret, (const char *const[]){"data", key, NULL}, &b64) < 0 || !*b64) {
    snprintf(why, whylen, "the Secret %s has no key %s", where, key);
  } else {
    size_t n = strlen(b64);
    unsigned char *buf = malloc(n + 4);
    int len = buf ? EVP_DecodeBlock(buf, (const unsigned char *)b64, (int)n) : -1;
    if (len >= 0) { /* EVP_DecodeBlock counts the padding as bytes */
      for (size_t i = n; i > 0 && b64[i - 1] == '='; i--) len--;
      if (len > 0 && buf[len - 1] == '\n') len--;
      if (len > 0 && buf[len - 1] == '\r') len--;
    }
    if (len <= 0 || memchr(buf, '\0', (size_t)len) || memchr(buf, '\n', (size_t)len)) {
      snprintf(why, whylen, "the Secret %s key %s is not one line of base64 text", where, key);
    } else if ((out = malloc((size_t)len + 1))) {
      memcpy(out, buf, (size_t)len);
      out[len] = '\0';
    }
    if (buf) OPENSSL_cleanse(buf, n + 4), free(buf);
  }
  if (b64) OPENSSL_cleanse(b64, strlen(b64)), tf_free(b64);
  return out;
}

int is__kube_get(is_kube *k, const char *ns, const char *name, is_snapshot **out, char *why, size_t whylen)
{
  char key[600];
  tf_informer_object *pool = NULL, *cm = NULL, *secret_obj = NULL;
  char *ref = NULL, *ref_key = NULL, *ice = NULL, *secret = NULL;
  int code = 503;
  snprintf(key, sizeof(key), "%s/%s", ns, name);
  if (tf_informer_get_object(k->pools, key, &pool) < 0) {
    if (!tf_informer_has_synced(k->pools)) snprintf(why, whylen, "the turnpools cache is not synced yet");
    else snprintf(why, whylen, "pool: no TURNPool %s", key), code = 404;
    goto done;
  }
  if (tf_informer_object_string(pool, (const char *const[]){"spec", "auth", "secretRef", "name", NULL}, &ref) < 0) {
    snprintf(why, whylen, "the TURNPool %s has no spec.auth.secretRef.name", key);
    goto done;
  }
  (void)tf_informer_object_string(pool, (const char *const[]){"spec", "auth", "secretRef", "key", NULL}, &ref_key);
  snprintf(key, sizeof(key), "%s/%s-turn-uris", ns, name);
  if (tf_informer_get_object(k->configmaps, key, &cm) < 0) {
    snprintf(why, whylen, "the ConfigMap %s does not exist yet", key);
    goto done;
  }
  if (tf_informer_object_string(cm, (const char *const[]){"data", "iceServers.json", NULL}, &ice) < 0) {
    snprintf(why, whylen, "the ConfigMap %s has no data.iceServers.json", key);
    goto done;
  }
  snprintf(key, sizeof(key), "%s/%s", ns, ref);
  if (tf_informer_get_object(k->secrets, key, &secret_obj) < 0) {
    snprintf(why, whylen, "the Secret %s does not exist", key);
    goto done;
  }
  secret = secret_value(secret_obj, ref_key ? ref_key : "secret", key, why, whylen);
  if (!secret) goto done;
  size_t pool_len;
  const char *pool_json = tf_informer_object_json(pool, &pool_len);
  *out = is__snapshot_new(ice, strlen(ice), pool_json, pool_len, secret, why, whylen);
  secret = NULL; /* taken */
  if (*out) code = 200;
done:
  tf_informer_object_release(pool);
  tf_informer_object_release(cm);
  tf_informer_object_release(secret_obj);
  tf_free(ref);
  tf_free(ref_key);
  tf_free(ice);
  return code;
}
