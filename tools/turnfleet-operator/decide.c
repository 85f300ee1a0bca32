/* The operator's pure decisions (decide.h): JSON in, JSON out, no I/O. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <turnfleet.h>

#include "decide.h"

#define GATE TF_MANIFEST_READINESS_GATE

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

static const char *str_at(const cJSON *o, const char *k)
{
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

void op_pod_clear(op_pod *p)
{
  if (!p) return;
  free(p->name);
  free(p->uid);
  free(p->relay);
  free(p->identity);
  free(p->config_hash);
  free(p->owner_uid);
  free(p->gate_reason);
  free(p->gate_message);
  free(p->gate_since);
  memset(p, 0, sizeof(*p));
  p->gate = -1;
  p->gate_index = -1;
}

int64_t op_time_parse(const char *text)
{
  int y, mo, d, h, mi, sec, used = 0;
  if (!text || sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 || used != 19)
    return -1;
  const char *rest = text + used;
  int64_t ms = 0;
  if (*rest == '.') {
    int digits = 0;
    for (rest++; *rest >= '0' && *rest <= '9'; rest++, digits++)
      if (digits < 3) ms = ms * 10 + (*rest - '0');
    if (!digits) return -1;
    for (; digits < 3; digits++) ms *= 10;
  }
  int offset_s = 0;
  if (*rest == '+' || *rest == '-') {
    int oh, om, n = 0;
    if (sscanf(rest + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5 || rest[6]) return -1;
    offset_s = (oh * 3600 + om * 60) * (*rest == '-' ? -1 : 1);
  } else if ((*rest != 'Z' && *rest != 'z') || rest[1]) {
    return -1;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return -1;
  struct tm tm;
  memset(&tm, 0, sizeof(tm));
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  time_t t = timegm(&tm);
  return t < 0 ? -1 : ((int64_t)t - offset_s) * 1000 + ms;
}

int op_pod_parse(op_pod *out, const char *json)
{
  memset(out, 0, sizeof(*out));
  op_pod_clear(out);
  cJSON *root = json ? cJSON_Parse(json) : NULL;
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
  const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
  const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
  const char *relay = str_at(labels, "turnfleet.hzmi.dev/relay");
  const char *addr = str_at(ann, "turnfleet.hzmi.dev/relay-address");
  const char *range = str_at(ann, "turnfleet.hzmi.dev/port-range");
  if (!relay || !addr || !range || !str_at(meta, "name")) {
    cJSON_Delete(root);
    return -1;
  }
  size_t n = strlen(addr) + strlen(range) + 2;
  out->identity = malloc(n);
  if (out->identity) snprintf(out->identity, n, "%s/%s", addr, range);
  out->name = dup_or_empty(str_at(meta, "name"));
  out->uid = dup_or_empty(str_at(meta, "uid"));
  out->relay = dup_or_empty(relay);
  out->config_hash = dup_or_empty(str_at(ann, "turnfleet.hzmi.dev/config-hash"));
  const cJSON *owners = cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences");
  const cJSON *o;
  const char *owner = NULL;
  cJSON_ArrayForEach(o, owners)
  {
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "controller"))) owner = str_at(o, "uid");
  }
  out->owner_uid = dup_or_empty(owner);
  out->deleting = cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp") != NULL &&
                  !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp"));
  int64_t due = op_time_parse(str_at(meta, "deletionTimestamp"));
  double grace = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(meta, "deletionGracePeriodSeconds"));
  if (out->deleting && due > 0) out->deleting_since_ms = due - (grace == grace && grace > 0 ? (int64_t)grace * 1000 : 0);
  const cJSON *status = cJSON_GetObjectItemCaseSensitive(root, "status");
  const char *phase = str_at(status, "phase");
  out->finished = phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
  const cJSON *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions");
  out->has_conditions = cJSON_IsArray(conds);
  int i = 0;
  cJSON_ArrayForEach(o, conds)
  {
    const char *type = str_at(o, "type");
    if (type && strcmp(type, "Ready") == 0) out->ready = str_at(o, "status") && strcmp(str_at(o, "status"), "True") == 0;
    if (type && strcmp(type, GATE) == 0) {
      const char *st = str_at(o, "status");
      out->gate = st && strcmp(st, "True") == 0 ? 1 : 0;
      out->gate_index = i;
      free(out->gate_reason);
      free(out->gate_message);
      out->gate_reason = dup_or_empty(str_at(o, "reason"));
      out->gate_message = dup_or_empty(str_at(o, "message"));
      free(out->gate_since);
      out->gate_since = dup_or_empty(str_at(o, "lastTransitionTime"));
    }
    i++;
  }
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "spec"), "containers"))
  {
    const char *cn = str_at(c, "name");
    if (!cn || strcmp(cn, "agent") != 0) continue;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(c, "ports"))
    {
      const char *pn = str_at(p, "name");
      double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(p, "containerPort"));
      if (pn && strcmp(pn, "agent") == 0 && v >= 1 && v <= 65535) out->agent_port = (uint16_t)v;
    }
  }
  cJSON_Delete(root);
  if (!out->identity || !out->name || !out->uid || !out->relay || !out->config_hash || !out->owner_uid ||
      (out->gate >= 0 && (!out->gate_reason || !out->gate_message || !out->gate_since))) {
    op_pod_clear(out);
    return -1;
  }
  return 0;
}

char *op_gate_patch(const op_pod *pod, int ready, const char *reason, const char *message, const char *now,
                    int *err)
{
  *err = 0;
  if (pod->gate == (ready ? 1 : 0) && (!reason || (pod->gate_reason && strcmp(pod->gate_reason, reason) == 0)))
    return NULL;
  cJSON *ops = cJSON_CreateArray();
  cJSON *cond = cJSON_CreateObject();
  cJSON_AddStringToObject(cond, "type", GATE);
  cJSON_AddStringToObject(cond, "status", ready ? "True" : "False");
  cJSON_AddStringToObject(cond, "reason", reason ? reason : (ready ? "AllocateSucceeded" : "AllocateFailed"));
  cJSON_AddStringToObject(cond, "message", message ? message : "");
  /* the status unchanged (only the reason: Ready to Full), its lastTransitionTime stays */
  int same = pod->gate == (ready ? 1 : 0) && pod->gate_since && *pod->gate_since;
  cJSON_AddStringToObject(cond, "lastTransitionTime", same ? pod->gate_since : now);
  char path[64];
  if (pod->gate_index >= 0) {
    snprintf(path, sizeof(path), "/status/conditions/%d/type", pod->gate_index);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "op", "test");
    cJSON_AddStringToObject(t, "path", path);
    cJSON_AddStringToObject(t, "value", GATE);
    cJSON_AddItemToArray(ops, t);
    snprintf(path, sizeof(path), "/status/conditions/%d", pod->gate_index);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "op", "replace");
    cJSON_AddStringToObject(r, "path", path);
    cJSON_AddItemToObject(r, "value", cond);
    cJSON_AddItemToArray(ops, r);
  } else if (pod->has_conditions) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "op", "add");
    cJSON_AddStringToObject(a, "path", "/status/conditions/-");
    cJSON_AddItemToObject(a, "value", cond);
    cJSON_AddItemToArray(ops, a);
  } else {
    cJSON *a = cJSON_CreateObject();
    cJSON *list = cJSON_CreateArray();
    cJSON_AddItemToArray(list, cond);
    cJSON_AddStringToObject(a, "op", "add");
    cJSON_AddStringToObject(a, "path", "/status/conditions");
    cJSON_AddItemToObject(a, "value", list);
    cJSON_AddItemToArray(ops, a);
  }
  char *text = cJSON_PrintUnformatted(ops);
  cJSON_Delete(ops);
  if (!text) *err = 1;
  return text;
}

static const cJSON *find_relay(const cJSON *relays, const char *name)
{
  const cJSON *r;
  cJSON_ArrayForEach(r, relays)
  {
    const char *n = str_at(r, "name");
    if (n && name && strcmp(n, name) == 0) return r;
  }
  return NULL;
}

char *op_status_stable(const char *desired, const char *observed_pool)
{
  cJSON *want = cJSON_Parse(desired);
  if (!want) return NULL;
  cJSON *seen = observed_pool ? cJSON_Parse(observed_pool) : NULL;
  const cJSON *seen_relays =
    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(seen, "status"), "relays");
  cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(want, "status"), "relays"))
  {
    cJSON *lp = cJSON_GetObjectItemCaseSensitive(r, "lastProbe");
    const cJSON *old = cJSON_GetObjectItemCaseSensitive(find_relay(seen_relays, str_at(r, "name")), "lastProbe");
    if (!cJSON_IsObject(lp) || !cJSON_IsObject(old)) continue;
    const cJSON *ok1 = cJSON_GetObjectItemCaseSensitive(lp, "ok"), *ok0 = cJSON_GetObjectItemCaseSensitive(old, "ok");
    const cJSON *c1 = cJSON_GetObjectItemCaseSensitive(lp, "errorCode");
    const cJSON *c0 = cJSON_GetObjectItemCaseSensitive(old, "errorCode");
    if (!ok0 || !c0 || cJSON_IsTrue(ok1) != cJSON_IsTrue(ok0) ||
        cJSON_GetNumberValue(c1) != cJSON_GetNumberValue(c0))
      continue;
    /* the time the outcome last changed stays; a failure's message is the current one (a relay failing
     * otherwise now says so), a pass's is kept */
    const char *keep[] = {"time", "message"};
    for (size_t k = 0; k < (cJSON_IsTrue(ok1) ? 2u : 1u); k++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(old, keep[k]);
      if (v) cJSON_ReplaceItemInObjectCaseSensitive(lp, keep[k], cJSON_Duplicate(v, 1));
    }
  }
  char *out = cJSON_Print(want);
  cJSON_Delete(want);
  cJSON_Delete(seen);
  return out;
}

char *op_with_condition(const char *desired, const char *observed_pool, const char *type, const char *status,
                        const char *reason, const char *message, const char *now)
{
  cJSON *want = cJSON_Parse(desired), *seen = observed_pool ? cJSON_Parse(observed_pool) : NULL;
  cJSON *st = cJSON_GetObjectItemCaseSensitive(want, "status");
  char *out = NULL;
  if (!cJSON_IsObject(st)) goto done;
  const char *since = now;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(seen, "status"),
                                                         "conditions"))
  {
    const char *t = str_at(c, "type"), *s = str_at(c, "status");
    if (t && strcmp(t, type) == 0 && s && strcmp(s, status) == 0 && str_at(c, "lastTransitionTime"))
      since = str_at(c, "lastTransitionTime");
  }
  cJSON *conds = cJSON_GetObjectItemCaseSensitive(st, "conditions");
  if (!cJSON_IsArray(conds)) {
    cJSON_DeleteItemFromObjectCaseSensitive(st, "conditions");
    conds = cJSON_AddArrayToObject(st, "conditions");
  }
  for (int i = cJSON_GetArraySize(conds) - 1; i >= 0; i--) {
    const char *t = str_at(cJSON_GetArrayItem(conds, i), "type");
    if (t && strcmp(t, type) == 0) cJSON_DeleteItemFromArray(conds, i);
  }
  cJSON *cond = cJSON_CreateObject();
  if (!cond || !cJSON_AddStringToObject(cond, "type", type) || !cJSON_AddStringToObject(cond, "status", status) ||
      !cJSON_AddStringToObject(cond, "reason", reason) || !cJSON_AddStringToObject(cond, "message", message) ||
      !cJSON_AddStringToObject(cond, "lastTransitionTime", since)) {
    cJSON_Delete(cond);
    goto done;
  }
  cJSON_AddItemToArray(conds, cond);
  out = cJSON_Print(want);
done:
  cJSON_Delete(want);
  cJSON_Delete(seen);
  return out;
}

char *op_refused_status(const char *observed_pool, int64_t generation, const char *reason, const char *message,
                        const char *now)
{
  cJSON *seen = observed_pool ? cJSON_Parse(observed_pool) : NULL;
  const char *since = now;
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(seen, "status"),
                                                         "conditions"))
  {
    const char *t = str_at(c, "type"), *s = str_at(c, "status"), *r = str_at(c, "reason");
    if (t && strcmp(t, "Ready") == 0 && s && strcmp(s, "False") == 0 && r && strcmp(r, reason) == 0 &&
        str_at(c, "lastTransitionTime"))
      since = str_at(c, "lastTransitionTime");
  }
  cJSON *root = cJSON_CreateObject();
  cJSON *st = cJSON_AddObjectToObject(root, "status");
  cJSON_AddNumberToObject(st, "observedGeneration", (double)generation);
  cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
  cJSON *ready = cJSON_CreateObject();
  cJSON_AddStringToObject(ready, "type", "Ready");
  cJSON_AddStringToObject(ready, "status", "False");
  cJSON_AddStringToObject(ready, "reason", reason);
  cJSON_AddStringToObject(ready, "message", message);
  cJSON_AddStringToObject(ready, "lastTransitionTime", since);
  cJSON_AddNumberToObject(ready, "observedGeneration", (double)generation);
  cJSON_AddItemToArray(conds, ready);
  char *out = cJSON_Print(root);
  cJSON_Delete(root);
  cJSON_Delete(seen);
  return out;
}

int op_object_write(char **update, char **path, const char *desired, const char *observed)
{
  *update = NULL;
  if (path) *path = NULL;
  if (!observed) return OP_WRITE_CREATE;
  int matches = 0;
  char *where = NULL;
  if (tf_manifest_matches(&matches, &where, desired, strlen(desired), observed, strlen(observed)) < 0) return -1;
  if (matches) {
    tf_free(where);
    return OP_WRITE_NONE;
  }
  if (path) *path = where ? strdup(where) : NULL;
  tf_free(where);
  char *rv = op_meta_string(observed, "resourceVersion");
  cJSON *want = cJSON_Parse(desired);
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(want, "metadata");
  int rc = -1;
  if (rv && cJSON_IsObject(meta)) {
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
    cJSON_AddStringToObject(meta, "resourceVersion", rv);
    *update = cJSON_Print(want);
    rc = *update ? OP_WRITE_UPDATE : -1;
  }
  free(rv);
  cJSON_Delete(want);
  return rc;
}

uint16_t op_cli_port_base(const char *ns, const char *name, uint16_t base, unsigned slots, unsigned stride)
{
  uint32_t h = 2166136261u;
  const char *parts[] = {ns, "/", name};
  for (size_t k = 0; k < 3; k++)
    for (const unsigned char *p = (const unsigned char *)parts[k]; p && *p; p++) h = (h ^ *p) * 16777619u;
  return (uint16_t)(base + stride * (slots ? h % slots : 0));
}

int64_t op_generation(const char *object)
{
  cJSON *root = cJSON_Parse(object);
  double g = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"),
                                                                   "generation"));
  cJSON_Delete(root);
  return g == g && g > 0 ? (int64_t)g : 0;
}

char *op_meta_string(const char *object, const char *field)
{
  cJSON *root = cJSON_Parse(object);
  char *out = dup_or_empty(str_at(cJSON_GetObjectItemCaseSensitive(root, "metadata"), field));
  cJSON_Delete(root);
  return out;
}

int op_tls_pair_check(const char *crt, const char *key, char digest[65], char *why, size_t why_len)
{
  digest[0] = '\0';
  BIO *cb = crt ? BIO_new_mem_buf(crt, -1) : NULL, *kb = key ? BIO_new_mem_buf(key, -1) : NULL;
  X509 *cert = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
  EVP_PKEY *pk = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
  int rc = -1;
  if (!cert) snprintf(why, why_len, "tls.crt: %s", crt ? "no PEM certificate" : "missing");
  else if (!pk) snprintf(why, why_len, "tls.key: %s", key ? "no PEM private key (or one with a passphrase)" : "missing");
  else if (X509_check_private_key(cert, pk) != 1) snprintf(why, why_len, "tls.key: not the key of tls.crt");
  else rc = 0;
  if (rc == 0) {
    unsigned char md[32];
    unsigned int n = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, crt, strlen(crt)) &&
        EVP_DigestUpdate(ctx, key, strlen(key)) && EVP_DigestFinal_ex(ctx, md, &n) && n == 32) {
      for (unsigned int i = 0; i < 32; i++) snprintf(digest + 2 * i, 3, "%02x", md[i]);
    } else {
      snprintf(why, why_len, "tls: cannot hash the certificate");
      rc = -1;
    }
    EVP_MD_CTX_free(ctx);
  }
  X509_free(cert);
  EVP_PKEY_free(pk);
  BIO_free(cb);
  BIO_free(kb);
  return rc;
}

int64_t op_deletion_ms(const char *object)
{
  cJSON *root = cJSON_Parse(object);
  const cJSON *ts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"),
                                                     "deletionTimestamp");
  int64_t at = cJSON_IsString(ts) ? op_time_parse(ts->valuestring) : 0;
  cJSON_Delete(root);
  return at < 0 ? 1 : at; /* a malformed time is still a deletion */
}

char *op_with_finalizer(const char *object, const char *finalizer, int want, int *err)
{
  *err = 1;
  cJSON *root = cJSON_Parse(object);
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
  char *out = NULL;
  if (!cJSON_IsObject(meta)) goto done;
  cJSON *list = cJSON_GetObjectItemCaseSensitive(meta, "finalizers");
  if (list && !cJSON_IsArray(list)) goto done;
  int at = -1, i = 0;
  const cJSON *f;
  cJSON_ArrayForEach(f, list)
  {
    if (cJSON_IsString(f) && strcmp(f->valuestring, finalizer) == 0) at = i;
    i++;
  }
  *err = 0;
  if ((at >= 0) == (want != 0)) goto done; /* as wanted already */
  *err = 1;
  if (want) {
    if (!list && !(list = cJSON_AddArrayToObject(meta, "finalizers"))) goto done;
    cJSON *s = cJSON_CreateString(finalizer);
    if (!s || !cJSON_AddItemToArray(list, s)) {
      cJSON_Delete(s);
      goto done;
    }
  } else {
    cJSON_DeleteItemFromArray(list, at);
  }
  cJSON_DeleteItemFromObjectCaseSensitive(root, "status"); /* the main resource's PUT ignores it */
  out = cJSON_PrintUnformatted(root);
  *err = out == NULL;
done:
  cJSON_Delete(root);
  return out;
}

int op_status_says(const char *object, const char *field)
{
  cJSON *root = cJSON_Parse(object);
  int yes = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "status"), field));
  cJSON_Delete(root);
  return yes;
}
