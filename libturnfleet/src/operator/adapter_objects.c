/* The adapter's object helpers (adapter_internal.h): what to write for an
 * owned object and the one write with its one retry, the steady status, the
 * finalizer, the expectations, the CLI port slots. JSON in, JSON out; only
 * tf_adapter__apply() does I/O. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "adapter_internal.h"
#include "internal.h"
#include "smap.h"

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

static const char *str_at(const cJSON *o, const char *k)
{
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}


int64_t tf_adapter__time_parse(const char *text)
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

void tf_adapter__pod_facts(tf_engine_relay_facts *f, const tf_adapter__pod *p, int64_t wall_ms, int64_t now_ms)
{
  tf_engine_relay_facts init = TF_ENGINE_RELAY_FACTS_INIT;
  *f = init;
  f->name = p->name;
  f->id = p->uid;
  f->running = !p->finished;
  f->waiting = !p->started; /* not probed before the kubelet runs it (unscheduled, pulling its image) */
  f->identity = p->identity;
  f->config_hash = p->config_hash;
  f->cli_port = p->cli_port;
  /* what the API says of it stands for what this process has not seen itself (a new leader): a pod being
   * deleted is draining since its deletion was asked, and its readiness gate is its last probe outcome */
  if (p->deleting) {
    int64_t ago = p->deleting_since_ms > 0 ? wall_ms - p->deleting_since_ms : 0;
    f->draining = 1;
    f->draining_since_ms = ago <= 0 ? now_ms : ago < now_ms ? now_ms - ago : 1;
  }
  f->held_back = !p->ready; /* published once the kubelet has seen its gate: turn-uris lists Ready pods only */
  if (p->gate >= 0) {
    int full = p->gate == 1 && p->gate_reason && strcmp(p->gate_reason, TF_POD__GATE_FULL) == 0;
    f->probe_ok = p->gate == 1 && !full;
    f->probe_error_code = full ? 508 : 0;
    f->probe_message = p->gate_message;
  }
}

static int by_name(const void *a, const void *b)
{
  const char *x = str_at(*(cJSON *const *)a, "name"), *y = str_at(*(cJSON *const *)b, "name");
  return strcmp(x ? x : "", y ? y : "");
}

/* The relays in name order: an order that changed alone is no change of the status. */
static void sort_by_name(cJSON *list)
{
  int n = cJSON_GetArraySize(list);
  cJSON **items = n > 1 ? calloc((size_t)n, sizeof(*items)) : NULL;
  if (!items) return;
  for (int i = n - 1; i >= 0; i--) items[i] = cJSON_DetachItemFromArray(list, i);
  qsort(items, (size_t)n, sizeof(*items), by_name);
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(list, items[i]);
  free(items);
}

char *tf_adapter__status_stable(const char *desired, const char *observed_pool)
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
  sort_by_name(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(want, "status"), "relays"));
  char *out = cJSON_Print(want);
  cJSON_Delete(want);
  cJSON_Delete(seen);
  return out;
}

char *tf_adapter__with_condition(const char *desired, const char *observed_pool, const char *type, const char *status,
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

char *tf_adapter__refused_status(const char *observed_pool, int64_t generation, const char *reason, const char *message,
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
  /* a pool refused from its start shows 0 ready (kubectl's READY column), not a blank */
  if (!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(seen, "status"), "readyRelays"))
    cJSON_AddNumberToObject(st, "readyRelays", 0);
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

char *tf_adapter__condition_troubles(const char *body, const char *observed_pool)
{
  static const struct {
    const char *type, *bad;
  } trouble[] = {{"Ready", "False"},
                 {"ProbeSucceeded", "False"},
                 {"CapacityPressure", "True"},
                 {"AddressConflict", "True"},
                 {"ReachableFromVantage", "False"}};
  cJSON *now = cJSON_Parse(body), *was = observed_pool ? cJSON_Parse(observed_pool) : NULL;
  cJSON *out = now ? cJSON_CreateArray() : NULL;
  const cJSON *nst = cJSON_GetObjectItemCaseSensitive(now, "status");
  const cJSON *wc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(was, "status"), "conditions");
  const cJSON *cond;
  cJSON_ArrayForEach(cond, cJSON_GetObjectItemCaseSensitive(nst ? nst : now, "conditions"))
  {
    const char *type = str_at(cond, "type"), *status = str_at(cond, "status"), *reason = str_at(cond, "reason");
    if (!out || !type || !status || !reason) continue;
    int bad = 0;
    for (size_t i = 0; i < sizeof(trouble) / sizeof(*trouble); i++)
      bad |= !strcmp(type, trouble[i].type) && !strcmp(status, trouble[i].bad);
    if (!bad || (!strcmp(type, "Ready") && !strcmp(reason, "RelaysNotReady"))) continue;
    int same = 0;
    const cJSON *old;
    cJSON_ArrayForEach(old, wc)
    {
      const char *ot = str_at(old, "type"), *os = str_at(old, "status"), *orr = str_at(old, "reason");
      same |= ot && os && orr && !strcmp(ot, type) && !strcmp(os, status) && !strcmp(orr, reason);
    }
    if (same) continue;
    const char *m = str_at(cond, "message");
    size_t len = strlen(type) + (m ? strlen(m) : 0) + 3;
    char *text = malloc(len);
    cJSON *t = cJSON_CreateObject();
    if (text) snprintf(text, len, "%s: %s", type, m ? m : "");
    if (!text || !t || !cJSON_AddStringToObject(t, "reason", reason) || !cJSON_AddStringToObject(t, "message", text) ||
        !cJSON_AddItemToArray(out, t)) {
      cJSON_Delete(t);
      cJSON_Delete(out);
      out = NULL;
    }
    free(text);
  }
  char *text = out ? cJSON_PrintUnformatted(out) : NULL;
  cJSON_Delete(out);
  cJSON_Delete(now);
  cJSON_Delete(was);
  return text;
}

int tf_adapter__diff(char **update, char **path, const char *desired, const char *observed)
{
  *update = NULL;
  if (path) *path = NULL;
  if (!observed) return TF_ADAPTER__CREATE;
  int matches = 0;
  char *where = NULL;
  if (tf_manifest_matches(&matches, &where, desired, strlen(desired), observed, strlen(observed)) < 0) return -1;
  if (matches) {
    tf_free(where);
    return TF_ADAPTER__NONE;
  }
  if (path) *path = where ? strdup(where) : NULL;
  tf_free(where);
  char *rv = tf_adapter__meta_string(observed, "resourceVersion");
  cJSON *want = cJSON_Parse(desired);
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(want, "metadata");
  int rc = -1;
  if (rv && cJSON_IsObject(meta)) {
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
    cJSON_AddStringToObject(meta, "resourceVersion", rv);
    *update = cJSON_Print(want);
    rc = *update ? TF_ADAPTER__UPDATE : -1;
  }
  free(rv);
  cJSON_Delete(want);
  return rc;
}

int tf_adapter__same_owners(const char *desired, const char *observed)
{
  cJSON *d = cJSON_Parse(desired), *o = cJSON_Parse(observed);
  int rc = -1;
  if (cJSON_IsObject(d) && cJSON_IsObject(o)) {
    const cJSON *dr = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "metadata"), "ownerReferences");
    const cJSON *or = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "ownerReferences");
    int dn = cJSON_GetArraySize(dr), on = cJSON_GetArraySize(or);
    rc = dn == 0 && on == 0 ? 1 : dn == on && cJSON_Compare(dr, or, 1) ? 1 : 0;
  }
  cJSON_Delete(d);
  cJSON_Delete(o);
  return rc;
}

uint16_t tf_adapter__cli_port_base(const char *ns, const char *name, uint16_t base, unsigned slots, unsigned stride)
{
  uint32_t h = 2166136261u;
  const char *parts[] = {ns, "/", name};
  for (size_t k = 0; k < 3; k++)
    for (const unsigned char *p = (const unsigned char *)parts[k]; p && *p; p++) h = (h ^ *p) * 16777619u;
  return (uint16_t)(base + stride * (slots ? h % slots : 0));
}

int64_t tf_adapter__generation(const char *object)
{
  cJSON *root = cJSON_Parse(object);
  double g = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"),
                                                                   "generation"));
  cJSON_Delete(root);
  return g == g && g > 0 ? (int64_t)g : 0;
}

char *tf_adapter__meta_string(const char *object, const char *field)
{
  cJSON *root = cJSON_Parse(object);
  char *out = dup_or_empty(str_at(cJSON_GetObjectItemCaseSensitive(root, "metadata"), field));
  cJSON_Delete(root);
  return out;
}


int64_t tf_adapter__deletion_ms(const char *object)
{
  cJSON *root = cJSON_Parse(object);
  const cJSON *ts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"),
                                                     "deletionTimestamp");
  int64_t at = cJSON_IsString(ts) ? tf_adapter__time_parse(ts->valuestring) : 0;
  cJSON_Delete(root);
  return at < 0 ? 1 : at; /* a malformed time is still a deletion */
}

char *tf_adapter__with_finalizer(const char *object, const char *finalizer, int want, int *err)
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

int tf_adapter__status_says(const char *object, const char *field)
{
  cJSON *root = cJSON_Parse(object);
  int yes = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "status"), field));
  cJSON_Delete(root);
  return yes;
}

static char *what_text(const char *verb, const char *coll, const char *name, const char *path, const char *why)
{
  return tf_asprintf__("%s %s/%s%s%s%s%s%s", verb, coll, name, path ? " (" : "", path ? path : "",
                       path ? " differs)" : "", why ? ": " : "", why ? why : "");
}

tf_err tf_adapter__apply(tf_kube *kube, const char *coll, const char *name, const char *desired,
                         const char *observed, int *written, char **what, char **learnt)
{
  if (written) *written = 0;
  if (what) *what = NULL;
  if (learnt) *learnt = NULL;
  char *answer = NULL;
  char *objpath = tf_asprintf__("%s/%s", coll, name), *fresh = NULL;
  if (!objpath) return TF_ENOMEM;
  tf_err rc = TF_OK;
  const char *verb = "create";
  char *path = NULL;
  tf_kube_status *st = NULL;
  /* at most two rounds: the write from what was observed, and after a 409 one from a fresh read */
  for (int round = 0; round < 2; round++) {
    char *update = NULL;
    free(path);
    path = NULL;
    int kind = tf_adapter__diff(&update, &path, desired, round ? fresh : observed);
    if (kind < 0) {
      rc = tf_error__set(TF_EPROTO, "%s: cannot compare the observed object", objpath);
      break;
    }
    if (kind == TF_ADAPTER__NONE) {
      rc = TF_OK;
      verb = NULL;
      if (round && fresh && learnt) *learnt = strdup(fresh); /* as the server has it, and as desired */
      break;
    }
    tf_kube_status_free(st);
    st = NULL;
    verb = kind == TF_ADAPTER__CREATE ? "create" : "update";
    tf_free(answer);
    answer = NULL;
    rc = kind == TF_ADAPTER__CREATE ? tf_kube_create(kube, coll, desired, &answer, &st)
                                    : tf_kube_update(kube, objpath, update, &answer, &st);
    free(update);
    if (rc != TF_ECONFLICT || round) break;
    /* someone wrote it since it was read (or made it): read it once more, and write once more if it still
     * differs */
    tf_err g = tf_kube_get(kube, objpath, &fresh, NULL);
    if (g == TF_ENOTFOUND) {
      tf_free(fresh);
      fresh = NULL;
    } else if (g < 0) {
      break;
    } else if (tf_adapter__same_owners(desired, fresh) != 1) {
      /* someone else's object of that name (a cache that does not hold it: one by label, say): never taken
       * over; the caller learns whose it is */
      if (learnt) *learnt = strdup(fresh);
      break;
    }
  }
  if (rc == TF_OK && verb && written) *written = 1;
  if (rc == TF_OK && verb && answer && learnt) *learnt = strdup(answer);
  if (answer) OPENSSL_cleanse(answer, strlen(answer)); /* a Secret's answer is its data */
  tf_free(answer);
  if (what && (verb || rc))
    *what = what_text(verb ? verb : "write", coll, name, path, rc ? (st ? tf_kube_status_message(st) : tf_error_last()->message) : NULL);
  tf_kube_status_free(st);
  tf_free(fresh);
  free(path);
  free(objpath);
  return rc;
}

size_t tf_adapter__cli_collisions(const tf_adapter__pod *pods, size_t n, const char *owner_uid, char *why,
                                  size_t why_len)
{
  size_t count = 0, used = 0;
  if (why && why_len) why[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    const tf_adapter__pod *a = &pods[i];
    if (strcmp(a->owner_uid, owner_uid) != 0 || !a->cli_port || !a->host_network || a->finished || !*a->node)
      continue;
    for (size_t j = 0; j < n; j++) {
      const tf_adapter__pod *b = &pods[j];
      if (j == i || b->cli_port != a->cli_port || !b->host_network || b->finished || strcmp(b->node, a->node) != 0)
        continue;
      /* a pair within the pool is named once */
      if (strcmp(b->owner_uid, owner_uid) == 0 && j < i) continue;
      count++;
      if (why && why_len > used + 1) {
        int k = snprintf(why + used, why_len - used, "%srelay %s and relay %s on node %s share CLI port %u",
                         used ? "; " : "", a->name, b->name, a->node, a->cli_port);
        used = k < 0 ? used : used + (size_t)k < why_len ? used + (size_t)k : why_len - 1;
      }
      break;
    }
  }
  return count;
}

/* ---- expectations ---- */

typedef struct tf_adapter__expectation {
  char *key, *uid;
  int deleting; /* 0: a create; 1: a delete */
  int64_t due_ms;
} tf_adapter__expectation;

struct tf_adapter__expect {
  int64_t ttl_ms;
  tf_adapter__expectation *items;
  size_t count;
};

tf_adapter__expect *tf_adapter__expect_new(int64_t ttl_ms)
{
  tf_adapter__expect *e = calloc(1, sizeof(*e));
  if (e) e->ttl_ms = ttl_ms > 0 ? ttl_ms : 1;
  return e;
}

static void expect_remove(tf_adapter__expect *e, size_t i)
{
  free(e->items[i].key);
  free(e->items[i].uid);
  e->items[i] = e->items[--e->count];
}

void tf_adapter__expect_free(tf_adapter__expect *e)
{
  if (!e) return;
  while (e->count) expect_remove(e, 0);
  free(e->items);
  free(e);
}

static tf_adapter__expectation *expect_find(const tf_adapter__expect *e, const char *key, int deleting)
{
  for (size_t i = 0; e && i < e->count; i++)
    if (e->items[i].deleting == deleting && strcmp(e->items[i].key, key) == 0) return &e->items[i];
  return NULL;
}

static int expect_add(tf_adapter__expect *e, const char *key, const char *uid, int deleting, int64_t now_ms)
{
  tf_adapter__expectation *x = expect_find(e, key, deleting);
  if (!x) {
    tf_adapter__expectation *grown = realloc(e->items, (e->count + 1) * sizeof(*grown));
    if (!grown) return -1;
    e->items = grown;
    x = &e->items[e->count];
    memset(x, 0, sizeof(*x));
    if (!(x->key = strdup(key))) return -1;
    x->deleting = deleting;
    e->count++;
  }
  char *u = strdup(uid ? uid : "");
  if (!u) return -1;
  free(x->uid);
  x->uid = u;
  x->due_ms = now_ms + e->ttl_ms;
  return 0;
}

int tf_adapter__expect_create(tf_adapter__expect *e, const char *key, const char *uid, int64_t now_ms)
{
  return e && key ? expect_add(e, key, uid, 0, now_ms) : -1;
}

int tf_adapter__expect_delete(tf_adapter__expect *e, const char *key, const char *uid, int64_t now_ms)
{
  return e && key ? expect_add(e, key, uid, 1, now_ms) : -1;
}

void tf_adapter__expect_observe(tf_adapter__expect *e, const char *key, const char *uid, int deleting,
                                int64_t now_ms)
{
  for (size_t i = 0; e && i < e->count;) {
    tf_adapter__expectation *x = &e->items[i];
    int mine = strcmp(x->key, key) == 0;
    int settled = now_ms >= x->due_ms;
    /* the created pod is seen, or another that is not going (an old pod being deleted is no answer) */
    if (mine && !x->deleting) settled = settled || (uid && (strcmp(uid, x->uid) == 0 || !deleting));
    if (mine && x->deleting) settled = settled || !uid || deleting || strcmp(uid, x->uid) != 0;
    if (settled && (mine || now_ms >= x->due_ms)) {
      expect_remove(e, i);
      continue;
    }
    i++;
  }
}

const char *tf_adapter__expect_creating(const tf_adapter__expect *e, const char *key, int64_t now_ms)
{
  const tf_adapter__expectation *x = key ? expect_find(e, key, 0) : NULL;
  return x && now_ms < x->due_ms ? x->uid : NULL;
}

int tf_adapter__expect_deleting(const tf_adapter__expect *e, const char *key, const char *uid, int64_t now_ms)
{
  const tf_adapter__expectation *x = key ? expect_find(e, key, 1) : NULL;
  return x && now_ms < x->due_ms && uid && strcmp(uid, x->uid) == 0;
}

int64_t tf_adapter__expect_next_ms(const tf_adapter__expect *e, int64_t now_ms)
{
  int64_t next = 0;
  for (size_t i = 0; e && i < e->count; i++)
    if (e->items[i].due_ms > now_ms && (!next || e->items[i].due_ms < next)) next = e->items[i].due_ms;
  return next;
}

/* ---- views ahead of the caches ---- */

typedef struct view {
  char *stale_rv; /* the resourceVersion the cache showed when this was learnt; "" when it lacked the object */
  char *json;     /* the object as the server had it then */
  int64_t kept_ms; /* when (the caller's clock) */
} view;

struct tf_adapter__views {
  tf_smap *map; /* key -> view */
};

static void view_free(void *p)
{
  view *v = p;
  if (!v) return;
  if (v->json) OPENSSL_cleanse(v->json, strlen(v->json));
  free(v->json);
  free(v->stale_rv);
  free(v);
}

tf_adapter__views *tf_adapter__views_new(void)
{
  tf_adapter__views *v = calloc(1, sizeof(*v));
  if (v && !(v->map = tf_smap__new(view_free))) {
    free(v);
    v = NULL;
  }
  return v;
}

void tf_adapter__views_free(tf_adapter__views *v)
{
  if (!v) return;
  tf_smap__free(v->map);
  free(v);
}

const char *tf_adapter__views_pick(tf_adapter__views *v, const char *key, const char *cached)
{
  view *kept = v ? tf_smap__get(v->map, key) : NULL;
  if (!kept) return cached;
  char *rv = cached ? tf_adapter__meta_string(cached, "resourceVersion") : strdup("");
  int stale = rv && strcmp(rv, kept->stale_rv) == 0;
  free(rv);
  if (stale) return kept->json;
  tf_smap__del(v->map, key); /* the cache moved on: it is believed again */
  return cached;
}

int tf_adapter__views_keep(tf_adapter__views *v, const char *key, const char *seen, const char *fresh, int64_t now_ms)
{
  if (!v) return 0;
  if (!fresh) {
    tf_smap__del(v->map, key);
    return 0;
  }
  /* what pick answered was the kept object (its copy, or its resourceVersion): the cache still shows the
   * resourceVersion kept with it */
  view *kept = tf_smap__get(v->map, key);
  char *seen_rv = seen ? tf_adapter__meta_string(seen, "resourceVersion") : strdup("");
  char *kept_rv = kept ? tf_adapter__meta_string(kept->json, "resourceVersion") : NULL;
  view *nv = seen_rv ? calloc(1, sizeof(*nv)) : NULL;
  if (nv) {
    nv->stale_rv = kept && kept_rv && strcmp(seen_rv, kept_rv) == 0 ? strdup(kept->stale_rv) : strdup(seen_rv);
    nv->json = strdup(fresh);
    nv->kept_ms = now_ms;
  }
  free(seen_rv);
  free(kept_rv);
  if (!nv || !nv->stale_rv || !nv->json || tf_smap__put(v->map, key, nv) < 0) {
    view_free(nv); /* (a put fails only for a key it does not hold) */
    tf_smap__del(v->map, key);
    return -1;
  }
  return 0;
}

void tf_adapter__views_expire(tf_adapter__views *v, int64_t before_ms)
{
  if (!v) return;
  size_t pos = 0, n = 0;
  const char *key;
  void *val;
  char **old = calloc(tf_smap__count(v->map) + 1, sizeof(char *));
  while (old && tf_smap__next(v->map, &pos, &key, &val))
    if (((view *)val)->kept_ms < before_ms && !(old[n++] = strdup(key))) break;
  for (size_t i = 0; i < n; i++) {
    if (old[i]) tf_smap__del(v->map, old[i]);
    free(old[i]);
  }
  free(old);
}

void tf_adapter__views_forget(tf_adapter__views *v, const char *prefix)
{
  if (!v) return;
  size_t n = strlen(prefix);
  for (int again = 1; again;) {
    again = 0;
    size_t pos = 0;
    const char *key;
    void *val;
    while (tf_smap__next(v->map, &pos, &key, &val))
      if (strncmp(key, prefix, n) == 0) {
        tf_smap__del(v->map, key);
        again = 1; /* the map changed: iterate anew */
        break;
      }
  }
}
