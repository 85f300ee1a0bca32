/* The credential issuer's core (issuer.h): which relays a user gets, and the
 * credential for them. Pure: no clock, no I/O. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define TF_ISS__USER_MAX 128

typedef struct tf_iss__relay {
  char *name;
  char **uris;
  unsigned int *modes; /* TF_ISSUER_* bit of each URI (0: unusable transport) */
  int *families;       /* 4, 6, or 0 for a host name */
  size_t uri_count;
  int64_t in_use; /* -1 unknown */
  int64_t total;
  int eligible;
} tf_iss__relay;

struct tf_issuer_pool {
  tf_iss__relay *relays;
  size_t count;
  size_t eligible;
};

typedef struct tf_iss__chosen {
  char *name;
  char **uris;
  size_t uri_count;
} tf_iss__chosen;

struct tf_issuer_answer {
  char *username;
  char *password;
  int64_t ttl;
  tf_iss__chosen *relays;
  size_t count;
};

tf_err tf_issuer_options_init(tf_issuer_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_ISSUER_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_issuer_options version (1-%d)", version,
                         TF_ISSUER_OPTIONS_VERSION);
  tf_issuer_options init = TF_ISSUER_OPTIONS_INIT;
  *opts = init;
  opts->version = version;
  return TF_OK;
}

/* The options read up to the caller's version, defaults filled in, checked. */
static tf_err tf_iss__options_of(tf_issuer_options *l, const tf_issuer_options *o)
{
  tf_issuer_options d = TF_ISSUER_OPTIONS_INIT;
  *l = d;
  if (!o) return TF_OK;
  if (o->version == 0 || o->version > TF_ISSUER_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "opts.version: %u is not a tf_issuer_options version (1-%d)", o->version,
                         TF_ISSUER_OPTIONS_VERSION);
  /* version 1: every field */
  if (o->max_relays) l->max_relays = o->max_relays;
  if (o->ttl_default_s) l->ttl_default_s = o->ttl_default_s;
  if (o->ttl_min_s) l->ttl_min_s = o->ttl_min_s;
  if (o->ttl_max_s) l->ttl_max_s = o->ttl_max_s;
  if (o->pressure != 0) l->pressure = o->pressure;
  if (l->max_relays > 64) return tf_error__set(TF_EINVALID, "opts.max_relays: %zu is more than 64", l->max_relays);
  if (l->ttl_min_s < 1) return tf_error__set(TF_EINVALID, "opts.ttl_min_s: %lld is below 1", (long long)l->ttl_min_s);
  if (l->ttl_max_s < l->ttl_min_s)
    return tf_error__set(TF_EINVALID, "opts.ttl_max_s: %lld is below opts.ttl_min_s %lld", (long long)l->ttl_max_s,
                         (long long)l->ttl_min_s);
  if (l->ttl_default_s < l->ttl_min_s || l->ttl_default_s > l->ttl_max_s)
    return tf_error__set(TF_EINVALID, "opts.ttl_default_s: %lld is outside %lld-%lld", (long long)l->ttl_default_s,
                         (long long)l->ttl_min_s, (long long)l->ttl_max_s);
  if (!(l->pressure > 0 && l->pressure <= 1))
    return tf_error__set(TF_EINVALID, "opts.pressure: %g is not in (0, 1]", l->pressure);
  return TF_OK;
}

tf_err tf_issuer_transports_parse(unsigned int *out, const char *text)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text);
  unsigned int bits = 0;
  const char *p = text;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    static const struct {
      const char *name;
      unsigned int bit;
    } names[] = {{"udp", TF_ISSUER_UDP}, {"tcp", TF_ISSUER_TCP}, {"tls", TF_ISSUER_TLS}, {"dtls", TF_ISSUER_DTLS}};
    unsigned int bit = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
      if (strlen(names[i].name) == n && strncasecmp(p, names[i].name, n) == 0) bit = names[i].bit;
    if (!bit)
      return tf_error__set(TF_EINVALID, "transport: item %zu is not one of udp, tcp, tls, dtls",
                           (size_t)(p - text));
    bits |= bit;
    if (!comma) break;
    p = comma + 1;
  }
  *out = bits;
  return TF_OK;
}

tf_err tf_issuer_family_parse(int *out, const char *text)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text);
  if (strcasecmp(text, "ipv4") == 0) *out = 4;
  else if (strcasecmp(text, "ipv6") == 0) *out = 6;
  else return tf_error__set(TF_EINVALID, "family: must be ipv4 or ipv6");
  return TF_OK;
}

static void tf_iss__relay_clear(tf_iss__relay *r)
{
  for (size_t i = 0; i < r->uri_count; i++) tf_free(r->uris[i]);
  free(r->uris);
  free(r->modes);
  free(r->families);
  tf_free(r->name);
}

void tf_issuer_pool_free(tf_issuer_pool *pool)
{
  if (!pool) return;
  for (size_t i = 0; i < pool->count; i++) tf_iss__relay_clear(&pool->relays[i]);
  free(pool->relays);
  free(pool);
}

size_t tf_issuer_pool_eligible(const tf_issuer_pool *pool) { return pool ? pool->eligible : 0; }

/* Canonical text of an address literal; 0, or -1 when it is none. */
static int tf_iss__canon(const char *text, size_t n, char out[INET6_ADDRSTRLEN], int *family)
{
  char buf[INET6_ADDRSTRLEN + 1];
  if (n >= sizeof(buf)) return -1;
  memcpy(buf, text, n);
  buf[n] = '\0';
  unsigned char bin[16];
  if (inet_pton(AF_INET, buf, bin) == 1) {
    *family = 4;
    return inet_ntop(AF_INET, bin, out, INET6_ADDRSTRLEN) ? 0 : -1;
  }
  if (inet_pton(AF_INET6, buf, bin) == 1) {
    *family = 6;
    return inet_ntop(AF_INET6, bin, out, INET6_ADDRSTRLEN) ? 0 : -1;
  }
  return -1;
}

/* The address set as one key: canonical addresses, IPv4 first, deduplicated, joined by ','. */
typedef struct tf_iss__key {
  char text[2 * INET6_ADDRSTRLEN + 2];
  char v4[INET6_ADDRSTRLEN], v6[INET6_ADDRSTRLEN];
  int ok; /* 0: something was no address, or more than one per family */
} tf_iss__key;

static void tf_iss__key_add(tf_iss__key *k, const char *canon, int family)
{
  char *slot = family == 4 ? k->v4 : k->v6;
  if (*slot && strcmp(slot, canon) != 0) k->ok = 0;
  else memcpy(slot, canon, strlen(canon) + 1);
}

static void tf_iss__key_done(tf_iss__key *k)
{
  snprintf(k->text, sizeof(k->text), "%s%s%s", k->v4, *k->v4 && *k->v6 ? "," : "", k->v6);
  if (!*k->text) k->ok = 0;
}

typedef struct tf_iss__status {
  const char *name;
  tf_iss__key key;
  int ready, draining, full;
  int64_t in_use, total;
  int used;
} tf_iss__status;

/* A port count: a whole number from @p min to INT32_MAX (what int64_t holds without overflow in the maths). */
static int tf_iss__count(const cJSON *v, double min)
{
  return cJSON_IsNumber(v) && v->valuedouble >= min && v->valuedouble <= 2147483647.0 &&
         v->valuedouble == (double)(int64_t)v->valuedouble;
}

static tf_err tf_iss__status_parse(tf_iss__status **out, size_t *count, const cJSON *root)
{
  const cJSON *relays = cJSON_GetObjectItemCaseSensitive(root, "relays");
  const char *prefix = "relays";
  if (!relays) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "status");
    if (cJSON_IsObject(st)) relays = cJSON_GetObjectItemCaseSensitive(st, "relays"), prefix = "status.relays";
  }
  if (!relays) { /* a TURNPool whose status was never written: no relay yet */
    *out = NULL;
    *count = 0;
    return TF_OK;
  }
  if (!cJSON_IsArray(relays)) return tf_error__set(TF_EINVALID, "%s: must be an array", prefix);
  size_t n = (size_t)cJSON_GetArraySize(relays);
  tf_iss__status *s = calloc(n ? n : 1, sizeof(*s));
  if (!s) return tf_error__nomem();
  size_t i = 0;
  const cJSON *r;
  cJSON_ArrayForEach(r, relays)
  {
    tf_iss__status *e = &s[i];
    if (!cJSON_IsObject(r)) goto bad_item;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(r, "name");
    const cJSON *addr = cJSON_GetObjectItemCaseSensitive(r, "relayAddress");
    const cJSON *ready = cJSON_GetObjectItemCaseSensitive(r, "ready");
    const cJSON *draining = cJSON_GetObjectItemCaseSensitive(r, "draining");
    const cJSON *in_use = cJSON_GetObjectItemCaseSensitive(r, "portsInUse");
    const cJSON *total = cJSON_GetObjectItemCaseSensitive(r, "portsTotal");
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(r, "state");
    const char *field = NULL, *why = NULL;
    if (!cJSON_IsString(name) || !*name->valuestring) field = "name", why = "must be a non-empty string";
    else if (!cJSON_IsString(addr)) field = "relayAddress", why = "must be a string";
    else if (!cJSON_IsBool(ready)) field = "ready", why = "must be true or false";
    else if (draining && !cJSON_IsBool(draining)) field = "draining", why = "must be true or false";
    else if (in_use && !cJSON_IsNull(in_use) && !tf_iss__count(in_use, 0))
      field = "portsInUse", why = "must be a whole number from 0 to 2147483647, or null";
    else if (!tf_iss__count(total, 1)) field = "portsTotal", why = "must be a whole number from 1 to 2147483647";
    else if (state && !cJSON_IsString(state)) field = "state", why = "must be a string";
    if (field) {
      free(s);
      return tf_error__set(TF_EINVALID, "%s[%zu].%s: %s", prefix, i, field, why);
    }
    e->name = name->valuestring;
    e->ready = cJSON_IsTrue(ready);
    e->draining = cJSON_IsTrue(draining);
    e->total = (int64_t)total->valuedouble;
    e->in_use = cJSON_IsNumber(in_use) ? (int64_t)in_use->valuedouble : -1;
    e->full = (state && strcmp(state->valuestring, "Full") == 0) || (e->in_use >= 0 && e->in_use >= e->total);
    e->key.ok = 1;
    const char *p = addr->valuestring;
    for (;;) {
      const char *comma = strchr(p, ',');
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      char canon[INET6_ADDRSTRLEN];
      int fam = 0;
      if (tf_iss__canon(p, len, canon, &fam) < 0) {
        free(s);
        return tf_error__set(TF_EINVALID, "%s[%zu].relayAddress: must be one address, or an IPv4 and an IPv6 joined by ','",
                             prefix, i);
      }
      tf_iss__key_add(&e->key, canon, fam);
      if (!comma) break;
      p = comma + 1;
    }
    tf_iss__key_done(&e->key);
    i++;
    continue;
  bad_item:
    free(s);
    return tf_error__set(TF_EINVALID, "%s[%zu]: must be an object", prefix, i);
  }
  *out = s;
  *count = n;
  return TF_OK;
}

static unsigned int tf_iss__mode_bit(tf_uri_mode m)
{
  switch (m) {
  case TF_URI_MODE_UDP: return TF_ISSUER_UDP;
  case TF_URI_MODE_TCP: return TF_ISSUER_TCP;
  case TF_URI_MODE_TLS: return TF_ISSUER_TLS;
  case TF_URI_MODE_DTLS: return TF_ISSUER_DTLS;
  default: return 0;
  }
}

/* One published relay (an iceServers entry) into @p r and its address key. */
static tf_err tf_iss__published(tf_iss__relay *r, tf_iss__key *key, const cJSON *entry, size_t idx)
{
  if (!cJSON_IsObject(entry)) return tf_error__set(TF_EINVALID, "iceServers[%zu]: must be an object", idx);
  const cJSON *urls = cJSON_GetObjectItemCaseSensitive(entry, "urls");
  if (cJSON_IsString(urls)) return tf_error__set(TF_EINVALID, "iceServers[%zu].urls: must be an array", idx);
  if (!cJSON_IsArray(urls) || cJSON_GetArraySize(urls) < 1)
    return tf_error__set(TF_EINVALID, "iceServers[%zu].urls: must be a non-empty array of turn: URIs", idx);
  size_t n = (size_t)cJSON_GetArraySize(urls);
  r->uris = calloc(n, sizeof(*r->uris));
  r->modes = calloc(n, sizeof(*r->modes));
  r->families = calloc(n, sizeof(*r->families));
  if (!r->uris || !r->modes || !r->families) return tf_error__nomem();
  memset(key, 0, sizeof(*key));
  key->ok = 1;
  const cJSON *u;
  size_t j = 0;
  cJSON_ArrayForEach(u, urls)
  {
    if (!cJSON_IsString(u)) return tf_error__set(TF_EINVALID, "iceServers[%zu].urls[%zu]: must be a string", idx, j);
    tf_uri *uri = NULL;
    if (tf_uri_parse(&uri, u->valuestring) < 0)
      return tf_error__set(TF_EINVALID, "iceServers[%zu].urls[%zu]: %s", idx, j, tf_error_last()->message);
    r->modes[j] = tf_iss__mode_bit(tf_uri_open_mode(uri));
    const char *host = tf_uri_host(uri);
    char canon[INET6_ADDRSTRLEN];
    int fam = 0;
    if (tf_uri_host_kind(uri) != TF_URI_HOST_NAME && tf_iss__canon(host, strlen(host), canon, &fam) == 0)
      tf_iss__key_add(key, canon, fam);
    else
      key->ok = 0; /* a host name matches no relay address */
    r->families[j] = fam;
    tf_uri_free(uri);
    r->uris[j] = tf_strdup__(u->valuestring);
    if (!r->uris[j]) return tf_error__nomem();
    r->uri_count = ++j;
  }
  tf_iss__key_done(key);
  return TF_OK;
}

tf_err tf_issuer_pool_new(tf_issuer_pool **out, const char *ice_servers, size_t ice_len, const char *status,
                          size_t status_len)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(ice_servers);
  TF_ASSERT_ARG(status);
  cJSON *ice = NULL, *st = NULL;
  tf_iss__status *rel = NULL;
  size_t rel_count = 0;
  tf_err rc = tf_doc__parse_json(&ice, ice_servers, ice_len, NULL);
  if (rc < 0) return tf_error__set(rc, "iceServers: %s", tf_error_last()->message);
  if (!cJSON_IsArray(ice)) {
    cJSON_Delete(ice);
    return tf_error__set(TF_EINVALID, "iceServers: must be an array");
  }
  rc = tf_doc__parse_json(&st, status, status_len, NULL);
  if (rc < 0) {
    cJSON_Delete(ice);
    return tf_error__set(rc, "status: %s", tf_error_last()->message);
  }
  if (!cJSON_IsObject(st)) {
    rc = tf_error__set(TF_EINVALID, "status: must be an object");
    goto done;
  }
  if ((rc = tf_iss__status_parse(&rel, &rel_count, st)) < 0) goto done;
  tf_issuer_pool *p = calloc(1, sizeof(*p));
  size_t n = (size_t)cJSON_GetArraySize(ice);
  if (!p || !(p->relays = calloc(n ? n : 1, sizeof(*p->relays)))) {
    free(p);
    rc = tf_error__nomem();
    goto done;
  }
  const cJSON *entry;
  size_t i = 0;
  cJSON_ArrayForEach(entry, ice)
  {
    tf_iss__relay *r = &p->relays[i];
    tf_iss__key key;
    p->count = i + 1;
    if ((rc = tf_iss__published(r, &key, entry, i)) < 0) {
      tf_issuer_pool_free(p);
      goto done;
    }
    /* the status relay on these addresses: a ready, non-draining one first (PartitionedIP puts several on
     * one address; both documents list relays in name order, so the k-th published is the k-th ready one) */
    tf_iss__status *m = NULL;
    for (int pass = 0; pass < 2 && !m && key.ok; pass++)
      for (size_t k = 0; k < rel_count && !m; k++)
        if (!rel[k].used && rel[k].key.ok && strcmp(rel[k].key.text, key.text) == 0 &&
            (pass == 1 || (rel[k].ready && !rel[k].draining)))
          m = &rel[k];
    if (m) {
      m->used = 1;
      r->name = tf_strdup__(m->name);
      r->in_use = m->in_use;
      r->total = m->total;
      r->eligible = m->ready && !m->draining && !m->full;
    } else {
      r->name = tf_asprintf__("%s", key.ok ? key.text : "(unmatched)");
      r->in_use = -1;
      r->total = 1;
    }
    if (!r->name) {
      tf_issuer_pool_free(p);
      rc = tf_error__nomem();
      goto done;
    }
    if (r->eligible) p->eligible++;
    i++;
  }
  *out = p;
done:
  free(rel);
  cJSON_Delete(ice);
  cJSON_Delete(st);
  return rc;
}

/* 64-bit FNV-1a of "user\nname", finished with the splitmix64 mixer: stable across builds and versions
 * (the same user keeps its relays after an upgrade). */
static uint64_t tf_iss__hash(const char *user, const char *name)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char *s = (const unsigned char *)user; *s; s++) h = (h ^ *s) * 0x100000001b3ULL;
  h = (h ^ '\n') * 0x100000001b3ULL;
  for (const unsigned char *s = (const unsigned char *)name; *s; s++) h = (h ^ *s) * 0x100000001b3ULL;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

typedef struct tf_iss__cand {
  const tf_iss__relay *r;
  double score;
  int pressured;
} tf_iss__cand;

static int tf_iss__by_score(const void *a, const void *b)
{
  const tf_iss__cand *x = a, *y = b;
  if (x->pressured != y->pressured) return x->pressured - y->pressured;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return strcmp(x->r->name, y->r->name);
}

/* least loaded first: most free ports, unknown counts after known ones, then by name */
static int tf_iss__by_load(const void *a, const void *b)
{
  const tf_iss__relay *x = ((const tf_iss__cand *)a)->r, *y = ((const tf_iss__cand *)b)->r;
  int xk = x->in_use >= 0, yk = y->in_use >= 0;
  if (xk != yk) return yk - xk;
  if (xk) {
    int64_t fx = x->total - x->in_use, fy = y->total - y->in_use;
    if (fx != fy) return fx > fy ? -1 : 1;
  }
  return strcmp(x->name, y->name);
}

static int tf_iss__uri_passes(const tf_iss__relay *r, size_t j, unsigned int transports, int family)
{
  return (r->modes[j] & transports) && (!family || r->families[j] == family);
}

static tf_err tf_iss__check_user(const char *user)
{
  if (!user || !*user) return tf_error__set(TF_EINVALID, "user: is required");
  size_t n = strlen(user);
  if (n > TF_ISS__USER_MAX) return tf_error__set(TF_EINVALID, "user: longer than %d bytes", TF_ISS__USER_MAX);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)user[i];
    if (c <= 0x20 || c >= 0x7f || c == ':')
      return tf_error__set(TF_EINVALID, "user: byte %zu is not printable ASCII other than ':' and space", i);
  }
  return TF_OK;
}

void tf_issuer_answer_free(tf_issuer_answer *a)
{
  if (!a) return;
  tf_free(a->username);
  tf_secret_free(a->password);
  for (size_t i = 0; i < a->count; i++) {
    for (size_t j = 0; j < a->relays[i].uri_count; j++) tf_free(a->relays[i].uris[j]);
    free(a->relays[i].uris);
    tf_free(a->relays[i].name);
  }
  free(a->relays);
  free(a);
}

tf_err tf_issuer_answer_new(tf_issuer_answer **out, const tf_issuer_pool *pool, const char *secret,
                            const tf_issuer_request *req, const tf_issuer_options *opts, int64_t now_s)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(pool);
  TF_ASSERT_ARG(req);
  tf_issuer_options o;
  tf_err rc = tf_iss__options_of(&o, opts);
  if (rc < 0) return rc;
  if (req->version == 0 || req->version > TF_ISSUER_REQUEST_VERSION)
    return tf_error__set(TF_EINVALID, "request.version: %u is not a tf_issuer_request version (1-%d)",
                         req->version, TF_ISSUER_REQUEST_VERSION);
  /* version 1: every field */
  if ((rc = tf_iss__check_user(req->user)) < 0) return rc;
  if (!secret || !*secret) return tf_error__set(TF_EINVALID, "secret: is empty");
  unsigned int transports = req->transports ? req->transports : TF_ISSUER_TRANSPORTS_DEFAULT;
  if (transports & ~(TF_ISSUER_UDP | TF_ISSUER_TCP | TF_ISSUER_TLS | TF_ISSUER_DTLS))
    return tf_error__set(TF_EINVALID, "transport: unknown bits 0x%x", transports);
  if (req->family != 0 && req->family != 4 && req->family != 6)
    return tf_error__set(TF_EINVALID, "family: %d is not 0, 4 or 6", req->family);
  int64_t ttl = req->ttl_s ? req->ttl_s : o.ttl_default_s;
  if (ttl < o.ttl_min_s || ttl > o.ttl_max_s)
    return tf_error__set(TF_EINVALID, "ttl: %lld is outside %lld-%lld seconds", (long long)ttl,
                         (long long)o.ttl_min_s, (long long)o.ttl_max_s);
  if (now_s < 0 || now_s > INT64_MAX - ttl)
    return tf_error__set(TF_EINVALID, "now: %lld is not a Unix time an expiry can follow", (long long)now_s);

  tf_iss__cand *c = calloc(pool->count ? pool->count : 1, sizeof(*c));
  if (!c) return tf_error__nomem();
  size_t n = 0;
  for (size_t i = 0; i < pool->count; i++) {
    const tf_iss__relay *r = &pool->relays[i];
    if (!r->eligible) continue;
    size_t pass = 0;
    for (size_t j = 0; j < r->uri_count; j++) pass += (size_t)tf_iss__uri_passes(r, j, transports, req->family);
    if (!pass) continue;
    /* weighted rendezvous: -w / ln(u), u uniform in (0, 1) from the hash */
    double u = ((double)(tf_iss__hash(req->user, r->name) >> 11) + 0.5) / 9007199254740992.0;
    c[n].r = r;
    c[n].score = -(double)r->total / log(u);
    c[n].pressured = r->in_use >= 0 && (double)r->in_use >= o.pressure * (double)r->total;
    n++;
  }
  if (!n) {
    free(c);
    if (!pool->eligible) return tf_error__set(TF_ENOTFOUND, "no relay of the pool is ready, published and not draining");
    return tf_error__set(TF_ENOTFOUND, "no ready relay has a URI for the transports and family asked");
  }
  qsort(c, n, sizeof(*c), tf_iss__by_score);
  if (n > o.max_relays) n = o.max_relays;
  qsort(c, n, sizeof(*c), tf_iss__by_load);

  tf_issuer_answer *a = calloc(1, sizeof(*a));
  if (!a || !(a->relays = calloc(n, sizeof(*a->relays)))) {
    free(a);
    free(c);
    return tf_error__nomem();
  }
  a->ttl = ttl;
  for (size_t i = 0; i < n; i++) {
    const tf_iss__relay *r = c[i].r;
    tf_iss__chosen *ch = &a->relays[i];
    a->count = i + 1;
    ch->name = tf_strdup__(r->name);
    ch->uris = calloc(r->uri_count, sizeof(*ch->uris));
    if (!ch->name || !ch->uris) goto nomem;
    for (size_t j = 0; j < r->uri_count; j++) {
      if (!tf_iss__uri_passes(r, j, transports, req->family)) continue;
      if (!(ch->uris[ch->uri_count] = tf_strdup__(r->uris[j]))) goto nomem;
      ch->uri_count++;
    }
  }
  free(c);
  if ((rc = tf_cred_mint(&a->username, &a->password, secret, req->user, now_s + ttl, 0)) < 0) {
    tf_issuer_answer_free(a);
    return rc;
  }
  *out = a;
  return TF_OK;
nomem:
  free(c);
  tf_issuer_answer_free(a);
  return tf_error__nomem();
}

size_t tf_issuer_answer_relay_count(const tf_issuer_answer *a) { return a ? a->count : 0; }

const char *tf_issuer_answer_relay_name(const tf_issuer_answer *a, size_t i)
{
  return a && i < a->count ? a->relays[i].name : NULL;
}

int64_t tf_issuer_answer_ttl(const tf_issuer_answer *a) { return a ? a->ttl : 0; }

/* Add the URIs of @p ch to @p arr; 0, or -1 out of memory. */
static int tf_iss__add_uris(cJSON *arr, const tf_iss__chosen *ch)
{
  for (size_t j = 0; j < ch->uri_count; j++)
    if (!cJSON_AddItemToArray(arr, cJSON_CreateString(ch->uris[j]))) return -1;
  return 0;
}

/* Wipe every string of @p node's tree (the password has copies in it) before it is freed. */
static void tf_iss__tree_wipe(cJSON *node)
{
  for (; node; node = node->next) {
    if (node->valuestring) tf_crypto__wipe(node->valuestring, strlen(node->valuestring));
    tf_iss__tree_wipe(node->child);
  }
}

tf_err tf_issuer_answer_json(char **out, const tf_issuer_answer *a, tf_issuer_form form)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(a);
  if (form != TF_ISSUER_FORM_ICE && form != TF_ISSUER_FORM_REST)
    return tf_error__set(TF_EINVALID, "form: %d is not an answer form", (int)form);
  cJSON *root = cJSON_CreateObject();
  int failed = !root;
  if (!failed && form == TF_ISSUER_FORM_ICE) {
    cJSON *servers = cJSON_AddArrayToObject(root, "iceServers");
    failed = !servers;
    for (size_t i = 0; i < a->count && !failed; i++) {
      cJSON *s = cJSON_CreateObject();
      if (!s || !cJSON_AddItemToArray(servers, s)) {
        cJSON_Delete(s);
        failed = 1;
        break;
      }
      cJSON *urls = cJSON_AddArrayToObject(s, "urls");
      failed = !urls || tf_iss__add_uris(urls, &a->relays[i]) < 0 ||
               !cJSON_AddStringToObject(s, "username", a->username) ||
               !cJSON_AddStringToObject(s, "credential", a->password);
    }
    if (!failed && !cJSON_AddNumberToObject(root, "ttl", (double)a->ttl)) failed = 1;
  } else if (!failed) {
    cJSON *uris = NULL;
    failed = !cJSON_AddStringToObject(root, "username", a->username) ||
             !cJSON_AddStringToObject(root, "password", a->password) ||
             !cJSON_AddNumberToObject(root, "ttl", (double)a->ttl) || !(uris = cJSON_AddArrayToObject(root, "uris"));
    for (size_t i = 0; i < a->count && !failed; i++)
      if (tf_iss__add_uris(uris, &a->relays[i]) < 0) failed = 1;
  }
  char *text = failed ? NULL : cJSON_PrintUnformatted(root);
  if (root) tf_iss__tree_wipe(root->child);
  cJSON_Delete(root);
  if (!text) return tf_error__nomem();
  *out = tf_strdup__(text);
  tf_crypto__wipe(text, strlen(text));
  cJSON_free(text);
  return *out ? TF_OK : tf_error__nomem();
}
