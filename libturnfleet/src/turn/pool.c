/* pool: the TURNPool spec. Parse (JSON or YAML through one cJSON tree, a whole
 * object or just its spec), apply defaults, and validate.
 *
 * Problems are found in two places. While walking the document (in document
 * order) every problem one value shows on its own: a wrong type, an unknown
 * field, a value out of range, a malformed address or duration, a missing
 * field inside a mapping that was given. They are kept in pool->problems.
 * tf_pool_validate() then adds what needs more than one field (range end
 * below start, listener ports against the relay range and each other, the
 * addressing mode's sections, families) and the name, which
 * tf_pool_set_name() may still change. A field that already has a problem
 * is marked bad so it is not reported twice. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define TF_POOL__API_VERSION "turnfleet.hzmi.dev/v1alpha1"
#define TF_POOL__KIND "TURNPool"
#define TF_POOL__NAME_MAX 51 /* "<pool>-relay-xxxxx" stays within 63 */
#define TF_POOL__LISTENERS_MAX 64
#define TF_POOL__SELECTOR_MAX 64
#define TF_POOL__QUOTA_MAX 2147483647LL /* coturn reads quotas as int */
#define TF_POOL__DRAIN_MAX_MS 1000000000000000LL

/* pool->bad: a field that already has a problem from parsing. */
#define TF_POOL__BAD_NAME 0x0001u
#define TF_POOL__BAD_NAMESPACE 0x0002u
#define TF_POOL__BAD_MODE 0x0004u
#define TF_POOL__BAD_FAMILY 0x0008u
#define TF_POOL__BAD_RPN 0x0010u
#define TF_POOL__BAD_RANGE_START 0x0020u
#define TF_POOL__BAD_RANGE_END 0x0040u
#define TF_POOL__BAD_LISTENERS 0x0080u
#define TF_POOL__BAD_REALM 0x0100u
#define TF_POOL__BAD_SECRET 0x0200u
#define TF_POOL__BAD_EXTERNAL 0x0400u
#define TF_POOL__BAD_ADDRESSING 0x0800u
#define TF_POOL__BAD_AUTH 0x1000u

/* pool->listener_flags[i] */
#define TF_POOL__L_NAME_BAD 0x01u
#define TF_POOL__L_PROTOCOL_OK 0x02u
#define TF_POOL__L_PORT_BAD 0x04u
#define TF_POOL__L_TLS_GIVEN 0x08u

typedef struct tf_pool__ctx {
  tf_pool *pool;
  tf_err rc; /* TF_ENOMEM once an allocation failed */
  int have_listeners;
  int have_selector;
  char path[512];
  size_t len;
} tf_pool__ctx;

static const char *const tf_pool__mode_names[] = {"HostNetwork", "ExternalIPPool", "PodIP", "PartitionedIP"};
static const char *const tf_pool__family_names[] = {"IPv4", "IPv6", "DualStack"};
static const char *const tf_pool__protocol_names[] = {"udp", "tcp", "tls", "dtls"};

const char *tf_mode_name(tf_mode mode)
{
  return ((unsigned)mode < 4u) ? tf_pool__mode_names[mode] : NULL;
}

const char *tf_family_name(tf_family family)
{
  return ((unsigned)family < 3u) ? tf_pool__family_names[family] : NULL;
}

const char *tf_protocol_name(tf_protocol protocol)
{
  return ((unsigned)protocol < 4u) ? tf_pool__protocol_names[protocol] : NULL;
}

/* ---- paths and problems ---- */

/* Append to the path; a path that would not fit is cut (it stays bounded). */
static size_t tf_pool__append(tf_pool__ctx *c, const char *a, const char *b, const char *d)
{
  size_t old = c->len;
  size_t room = sizeof(c->path) - c->len;
  int n = snprintf(c->path + c->len, room, "%s%.64s%s", a, b, d);
  if (n < 0) n = 0;
  c->len = (size_t)n >= room ? sizeof(c->path) - 1 : c->len + (size_t)n;
  for (size_t i = old; i < c->len; i++) /* a key with a newline must not split a problem line */
    if ((unsigned char)c->path[i] < 0x20 || c->path[i] == 0x7f) c->path[i] = '?';
  return old;
}

/* Append ".key" (keys are cut at 64 bytes so a path stays short). */
static size_t tf_pool__push(tf_pool__ctx *c, const char *key) { return tf_pool__append(c, c->len ? "." : "", key, ""); }

static size_t tf_pool__push_index(tf_pool__ctx *c, size_t i)
{
  char num[32];
  snprintf(num, sizeof(num), "%zu", i);
  return tf_pool__append(c, "[", num, "]");
}

/* Append "[key]" for keys that contain dots (label keys). */
static size_t tf_pool__push_bracket(tf_pool__ctx *c, const char *key) { return tf_pool__append(c, "[", key, "]"); }

static void tf_pool__pop(tf_pool__ctx *c, size_t old)
{
  c->len = old;
  c->path[old] = '\0';
}

static void tf_pool__problem(tf_pool__ctx *c, const char *fmt, ...) TF__PRINTF(2, 3);
static void tf_pool__problem(tf_pool__ctx *c, const char *fmt, ...)
{
  if (c->rc < 0) return;
  va_list ap;
  va_start(ap, fmt);
  c->rc = tf_problems__addv(c->pool->problems, c->len ? c->path : "document", fmt, ap);
  va_end(ap);
}

static char *tf_pool__dup(tf_pool__ctx *c, const char *s)
{
  char *d = tf_strdup__(s);
  if (!d && c->rc == TF_OK) c->rc = tf_error__nomem();
  return d;
}

/* ---- value readers: report the type problem at the current path ---- */

static int tf_pool__is_map(tf_pool__ctx *c, const cJSON *v)
{
  if (cJSON_IsObject(v)) return 1;
  tf_pool__problem(c, "must be a mapping");
  return 0;
}

static int tf_pool__is_list(tf_pool__ctx *c, const cJSON *v)
{
  if (cJSON_IsArray(v)) return 1;
  tf_pool__problem(c, "must be a list");
  return 0;
}

/* A string into *dst (replacing it). 1 on success, 0 after a problem. */
static int tf_pool__str(tf_pool__ctx *c, const cJSON *v, char **dst)
{
  if (!cJSON_IsString(v) || !v->valuestring) {
    tf_pool__problem(c, "must be a string");
    return 0;
  }
  char *s = tf_pool__dup(c, v->valuestring);
  if (!s) return 0;
  free(*dst);
  *dst = s;
  return 1;
}

/* A non-empty string. */
static int tf_pool__str_nonempty(tf_pool__ctx *c, const cJSON *v, char **dst)
{
  if (cJSON_IsString(v) && v->valuestring && !v->valuestring[0]) {
    tf_pool__problem(c, "must not be empty");
    return 0;
  }
  return tf_pool__str(c, v, dst);
}

static int tf_pool__int(tf_pool__ctx *c, const cJSON *v, int64_t *out)
{
  if (!cJSON_IsNumber(v)) {
    tf_pool__problem(c, "must be an integer");
    return 0;
  }
  double d = v->valuedouble;
  if (!isfinite(d) || d != floor(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0) {
    tf_pool__problem(c, "must be an integer");
    return 0;
  }
  *out = (int64_t)d;
  return 1;
}

/* An integer within [min, max]. */
static int tf_pool__int_in(tf_pool__ctx *c, const cJSON *v, int64_t min, int64_t max, int64_t *out)
{
  int64_t x;
  if (!tf_pool__int(c, v, &x)) return 0;
  if (x < min || x > max) {
    tf_pool__problem(c, "%lld is not within %lld-%lld", (long long)x, (long long)min, (long long)max);
    return 0;
  }
  *out = x;
  return 1;
}

static int tf_pool__bool(tf_pool__ctx *c, const cJSON *v, int *out)
{
  if (!cJSON_IsBool(v)) {
    tf_pool__problem(c, "must be true or false");
    return 0;
  }
  *out = cJSON_IsTrue(v) ? 1 : 0;
  return 1;
}

/* One of @p names (n entries); *out its index. */
static int tf_pool__enum(tf_pool__ctx *c, const cJSON *v, const char *const *names, size_t n, int *out)
{
  char *s = NULL;
  if (!tf_pool__str(c, v, &s)) return 0;
  for (size_t i = 0; i < n; i++) {
    if (!strcmp(s, names[i])) {
      *out = (int)i;
      free(s);
      return 1;
    }
  }
  char list[128] = "";
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    int w = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", names[i]);
    if (w < 0 || (size_t)w >= sizeof(list) - used) break;
    used += (size_t)w;
  }
  tf_pool__problem(c, "\"%.64s\" is not one of %s", s, list);
  free(s);
  return 0;
}

/* ---- text rules ---- */

static int tf_pool__alnum_lower(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); }

/* DNS-1123 label: lowercase alnum and '-', starting and ending alnum, at most @p max. */
static int tf_pool__is_label(const char *s, size_t max)
{
  size_t n = strlen(s);
  if (n == 0 || n > max) return 0;
  if (!tf_pool__alnum_lower(s[0]) || !tf_pool__alnum_lower(s[n - 1])) return 0;
  for (size_t i = 0; i < n; i++)
    if (!tf_pool__alnum_lower(s[i]) && s[i] != '-') return 0;
  return 1;
}

/* DNS-1123 subdomain (Secret names): labels joined by '.', at most 253. */
static int tf_pool__is_subdomain(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > 253) return 0;
  if (!tf_pool__alnum_lower(s[0]) || !tf_pool__alnum_lower(s[n - 1])) return 0;
  for (size_t i = 0; i < n; i++) {
    if (!tf_pool__alnum_lower(s[i]) && s[i] != '-' && s[i] != '.') return 0;
    if (s[i] == '.' && (!tf_pool__alnum_lower(s[i - 1]) || !tf_pool__alnum_lower(s[i + 1]))) return 0;
  }
  return 1;
}

/* Secret data key: [-._a-zA-Z0-9]+, at most 253. */
static int tf_pool__is_secret_key(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > 253) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
          ch == '_' || ch == '.'))
      return 0;
  }
  return 1;
}

/* No spaces or control characters: the value lands on a coturn config line. */
static int tf_pool__is_token(const char *s)
{
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p <= 0x20 || *p == 0x7f) return 0;
  return 1;
}

/* Go-style duration: one or more <decimal><unit>, units h, m, s, ms.
 * Returns 1 and *ms, 0 when malformed, -1 when negative, -2 when too long. */
static int tf_pool__duration(const char *s, int64_t *ms)
{
  const char *p = s;
  int negative = 0;
  if (*p == '-' || *p == '+') negative = *p++ == '-';
  if (*p == '\0') return 0;
  int64_t total = 0;
  while (*p) {
    uint64_t whole = 0, frac = 0, scale = 1;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
      if (whole > TF_POOL__DRAIN_MAX_MS) return -2;
      whole = whole * 10u + (uint64_t)(*p++ - '0');
      digits++;
    }
    if (*p == '.') {
      p++;
      while (*p >= '0' && *p <= '9') {
        if (scale < 1000000000u) {
          frac = frac * 10u + (uint64_t)(*p - '0');
          scale *= 10u;
        }
        p++;
        digits++;
      }
    }
    if (digits == 0) return 0;
    uint64_t unit;
    if (p[0] == 'm' && p[1] == 's') {
      unit = 1;
      p += 2;
    } else if (*p == 'h') {
      unit = 3600000u;
      p++;
    } else if (*p == 'm') {
      unit = 60000u;
      p++;
    } else if (*p == 's') {
      unit = 1000u;
      p++;
    } else {
      return 0;
    }
    if (whole > (uint64_t)TF_POOL__DRAIN_MAX_MS / unit) return -2;
    total += (int64_t)(whole * unit + frac * unit / scale);
    if (total > TF_POOL__DRAIN_MAX_MS) return -2;
  }
  if (negative && total > 0) return -1;
  *ms = total;
  return 1;
}

/* ---- mapping walker ---- */

typedef void (*tf_pool__field_fn)(tf_pool__ctx *c, int field, const cJSON *value, void *arg);

/* Visit each key of @p obj in document order with the key on the path. Known
 * keys (NULL-terminated @p names) go to @p fn unless their value is null
 * (null means "not given"); unknown keys are problems when @p strict. */
static void tf_pool__walk(tf_pool__ctx *c, const cJSON *obj, const char *const *names, int strict,
                          tf_pool__field_fn fn, void *arg)
{
  unsigned seen = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, obj)
  {
    const char *key = it->string ? it->string : "";
    int field = -1;
    for (int i = 0; names[i]; i++) {
      if (!strcmp(names[i], key)) {
        field = i;
        break;
      }
    }
    size_t old = tf_pool__push(c, key);
    if (field < 0) {
      if (strict) tf_pool__problem(c, "unknown field");
    } else if (seen & (1u << field)) {
      tf_pool__problem(c, "given more than once");
    } else {
      seen |= 1u << field;
      if (!cJSON_IsNull(it)) fn(c, field, it, arg);
    }
    tf_pool__pop(c, old);
    if (c->rc < 0) return;
  }
}

/* ---- sections ---- */

static void tf_pool__prefix_list(tf_pool__ctx *c, const cJSON *v, tf_prefix **out, size_t *count)
{
  if (!tf_pool__is_list(c, v)) return;
  size_t n = (size_t)cJSON_GetArraySize(v);
  free(*out);
  *out = NULL;
  *count = 0;
  if (n == 0) return;
  tf_prefix *items = calloc(n, sizeof(*items));
  if (!items) {
    c->rc = tf_error__nomem();
    return;
  }
  *out = items;
  *count = n;
  size_t i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, v)
  {
    size_t old = tf_pool__push_index(c, i);
    if (!cJSON_IsString(it) || !it->valuestring) {
      tf_pool__problem(c, "must be a string");
    } else if (tf_prefix_parse(&items[i], it->valuestring) < 0) {
      memset(&items[i], 0, sizeof(items[i])); /* family 0: skipped later */
      tf_pool__problem(c, "%s", tf_error_last()->message);
    }
    tf_pool__pop(c, old);
    i++;
  }
}

static void tf_pool__external_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  (void)field; /* addresses */
  tf_pool *p = c->pool;
  size_t before = p->problems->count;
  tf_pool__prefix_list(c, v, &p->external_prefixes, &p->external_prefix_count);
  if (p->problems->count != before) p->bad |= TF_POOL__BAD_EXTERNAL;
}

static void tf_pool__podip_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  (void)field; /* network */
  tf_pool__str_nonempty(c, v, &c->pool->pod_network);
}

static void tf_pool__partitioned_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  (void)field; /* relaysPerNode */
  int64_t x;
  if (tf_pool__int_in(c, v, 1, 65535, &x)) {
    c->pool->rpn = x;
    c->pool->present |= TF_POOL_HAS_RELAYS_PER_NODE;
  } else {
    c->pool->bad |= TF_POOL__BAD_RPN;
  }
}

static const char *const tf_pool__external_keys[] = {"addresses", NULL};
static const char *const tf_pool__podip_keys[] = {"network", NULL};
static const char *const tf_pool__partitioned_keys[] = {"relaysPerNode", NULL};

static void tf_pool__addressing_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  tf_pool *p = c->pool;
  int x;
  switch (field) {
  case 0: /* mode */
    if (tf_pool__enum(c, v, tf_pool__mode_names, 4, &x))
      p->mode = (tf_mode)x;
    else
      p->bad |= TF_POOL__BAD_MODE;
    break;
  case 1: /* family */
    if (tf_pool__enum(c, v, tf_pool__family_names, 3, &x))
      p->family = (tf_family)x;
    else
      p->bad |= TF_POOL__BAD_FAMILY;
    break;
  case 2: /* externalIPPool */
    p->present |= TF_POOL_HAS_EXTERNAL_IP_POOL;
    if (tf_pool__is_map(c, v))
      tf_pool__walk(c, v, tf_pool__external_keys, 1, tf_pool__external_field, NULL);
    else
      p->bad |= TF_POOL__BAD_EXTERNAL;
    break;
  case 3: /* podIP */
    p->present |= TF_POOL_HAS_POD_IP;
    if (tf_pool__is_map(c, v)) tf_pool__walk(c, v, tf_pool__podip_keys, 1, tf_pool__podip_field, NULL);
    break;
  case 4: /* partitionedIP */
    p->present |= TF_POOL_HAS_PARTITIONED_IP;
    if (tf_pool__is_map(c, v))
      tf_pool__walk(c, v, tf_pool__partitioned_keys, 1, tf_pool__partitioned_field, NULL);
    else
      p->bad |= TF_POOL__BAD_RPN;
    break;
  default:
    break;
  }
}

static const char *const tf_pool__addressing_keys[] = {"mode", "family", "externalIPPool", "podIP",
                                                       "partitionedIP", NULL};

static void tf_pool__dataplane_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  tf_pool *p = c->pool;
  if (field == 0) { /* image */
    if (tf_pool__str_nonempty(c, v, &p->image) && !tf_pool__is_token(p->image))
      tf_pool__problem(c, "\"%.64s\" must not contain spaces or control characters", p->image);
    return;
  }
  /* coturnVersion */
  if (!tf_pool__str(c, v, &p->coturn_version)) return;
  uint32_t ver;
  if (tf_version__parse(p->coturn_version, &ver) < 0) {
    tf_pool__problem(c, "\"%.64s\" is not a coturn version MAJOR.MINOR.PATCH (e.g. 4.6.1)", p->coturn_version);
  } else if (ver < ((4u << 16) | (6u << 8) | 1u)) {
    tf_pool__problem(c, "\"%.64s\" is older than 4.6.1, the oldest coturn Turnfleet supports", p->coturn_version);
  }
}

static const char *const tf_pool__dataplane_keys[] = {"image", "coturnVersion", NULL};

static void tf_pool__range_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  tf_pool *p = c->pool;
  int64_t x;
  if (tf_pool__int_in(c, v, 1024, 65535, &x)) {
    if (field == 0)
      p->range.start = (uint16_t)x;
    else
      p->range.end = (uint16_t)x;
  } else {
    p->bad |= field == 0 ? TF_POOL__BAD_RANGE_START : TF_POOL__BAD_RANGE_END;
  }
}

static const char *const tf_pool__range_keys[] = {"start", "end", NULL};

typedef struct tf_pool__secret_arg {
  tf_secret_ref *ref;
  int bad;
} tf_pool__secret_arg;

static void tf_pool__secret_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  tf_pool__secret_arg *a = arg;
  if (field == 0) { /* name */
    if (!tf_pool__str_nonempty(c, v, &a->ref->name)) {
      a->bad = 1;
    } else if (!tf_pool__is_subdomain(a->ref->name)) {
      tf_pool__problem(c,
                       "\"%.64s\" is not a Secret name (lowercase letters, digits, '-' and '.', starting and "
                       "ending with a letter or digit)",
                       a->ref->name);
    }
    return;
  }
  /* key */
  if (tf_pool__str_nonempty(c, v, &a->ref->key) && !tf_pool__is_secret_key(a->ref->key))
    tf_pool__problem(c, "\"%.64s\" is not a Secret key (letters, digits, '-', '_' and '.')", a->ref->key);
}

static const char *const tf_pool__secret_keys[] = {"name", "key", NULL};

/* A secretRef mapping; a given ref needs a name. Returns 0 when it has a problem. */
static int tf_pool__secret_ref(tf_pool__ctx *c, const cJSON *v, tf_secret_ref *ref)
{
  if (!tf_pool__is_map(c, v)) return 0;
  tf_pool__secret_arg a = {ref, 0};
  tf_pool__walk(c, v, tf_pool__secret_keys, 1, tf_pool__secret_field, &a);
  if (!ref->name && !a.bad) {
    size_t old = tf_pool__push(c, "name");
    tf_pool__problem(c, "required");
    tf_pool__pop(c, old);
    a.bad = 1;
  }
  if (!ref->name) ref->name = tf_pool__dup(c, ""); /* given, even though unnamed */
  return !a.bad;
}

static void tf_pool__auth_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  tf_pool *p = c->pool;
  switch (field) {
  case 0: /* realm */
    if (!tf_pool__str_nonempty(c, v, &p->realm)) {
      p->bad |= TF_POOL__BAD_REALM;
    } else if (!tf_pool__is_token(p->realm)) {
      tf_pool__problem(c, "\"%.64s\" must not contain spaces or control characters", p->realm);
    }
    break;
  case 1: /* secretRef */
    if (!tf_pool__secret_ref(c, v, &p->secret)) p->bad |= TF_POOL__BAD_SECRET;
    break;
  case 2: /* previousSecretRef */
    p->present |= TF_POOL_HAS_PREVIOUS_SECRET;
    tf_pool__secret_ref(c, v, &p->previous_secret);
    break;
  default:
    break;
  }
}

static const char *const tf_pool__auth_keys[] = {"realm", "secretRef", "previousSecretRef", NULL};

static void tf_pool__quota_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  int64_t x;
  if (!tf_pool__int(c, v, &x)) return;
  if (x < 0) {
    tf_pool__problem(c, "%lld is negative; 0 means unlimited", (long long)x);
  } else if (x > TF_POOL__QUOTA_MAX) {
    tf_pool__problem(c, "%lld is above %lld", (long long)x, TF_POOL__QUOTA_MAX);
  } else if (field == 0) {
    c->pool->user_quota = x;
  } else {
    c->pool->total_quota = x;
  }
}

static const char *const tf_pool__quota_keys[] = {"userQuota", "totalQuota", NULL};

static void tf_pool__peer_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  tf_pool *p = c->pool;
  if (field == 0)
    tf_pool__bool(c, v, &p->deny_private);
  else if (field == 1)
    tf_pool__prefix_list(c, v, &p->peer_allow, &p->peer_allow_count);
  else
    tf_pool__prefix_list(c, v, &p->peer_deny, &p->peer_deny_count);
}

static const char *const tf_pool__peer_keys[] = {"denyPrivate", "allow", "deny", NULL};

typedef struct tf_pool__listener_arg {
  tf_listener *l;
  uint8_t *flags;
  int protocol_given;
  int tls_bad;
} tf_pool__listener_arg;

static void tf_pool__tls_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)field; /* name */
  tf_pool__listener_arg *a = arg;
  if (!tf_pool__str_nonempty(c, v, &a->l->tls_secret)) {
    a->tls_bad = 1;
  } else if (!tf_pool__is_subdomain(a->l->tls_secret)) {
    tf_pool__problem(c,
                     "\"%.64s\" is not a Secret name (lowercase letters, digits, '-' and '.', starting and ending "
                     "with a letter or digit)",
                     a->l->tls_secret);
  }
}

static const char *const tf_pool__tls_keys[] = {"name", NULL};

static void tf_pool__listener_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  tf_pool__listener_arg *a = arg;
  int x;
  int64_t port;
  switch (field) {
  case 0: /* name */
    if (!tf_pool__str_nonempty(c, v, &a->l->name)) {
      *a->flags |= TF_POOL__L_NAME_BAD;
    } else if (!tf_pool__is_label(a->l->name, 63)) {
      *a->flags |= TF_POOL__L_NAME_BAD;
      tf_pool__problem(c,
                       "\"%.64s\" is not a DNS label (lowercase letters, digits and '-', starting and ending with "
                       "a letter or digit, at most 63 characters)",
                       a->l->name);
    }
    break;
  case 1: /* protocol */
    a->protocol_given = 1;
    if (tf_pool__enum(c, v, tf_pool__protocol_names, 4, &x)) {
      a->l->protocol = (tf_protocol)x;
      *a->flags |= TF_POOL__L_PROTOCOL_OK;
    }
    break;
  case 2: /* port */
    if (tf_pool__int_in(c, v, 1, 65535, &port))
      a->l->port = (uint16_t)port;
    else
      *a->flags |= TF_POOL__L_PORT_BAD;
    break;
  case 3: /* tlsSecretRef */
    *a->flags |= TF_POOL__L_TLS_GIVEN;
    if (!tf_pool__is_map(c, v)) break;
    tf_pool__walk(c, v, tf_pool__tls_keys, 1, tf_pool__tls_field, a);
    if (!a->l->tls_secret && !a->tls_bad) {
      size_t old = tf_pool__push(c, "name");
      tf_pool__problem(c, "required");
      tf_pool__pop(c, old);
    }
    break;
  default:
    break;
  }
}

static const char *const tf_pool__listener_keys[] = {"name", "protocol", "port", "tlsSecretRef", NULL};

static void tf_pool__listeners(tf_pool__ctx *c, const cJSON *v)
{
  tf_pool *p = c->pool;
  c->have_listeners = 1;
  if (!tf_pool__is_list(c, v)) {
    p->bad |= TF_POOL__BAD_LISTENERS;
    return;
  }
  size_t n = (size_t)cJSON_GetArraySize(v);
  if (n == 0) {
    tf_pool__problem(c, "at least one listener is required");
    p->bad |= TF_POOL__BAD_LISTENERS;
    return;
  }
  if (n > TF_POOL__LISTENERS_MAX) {
    tf_pool__problem(c, "%zu listeners; at most %d", n, TF_POOL__LISTENERS_MAX);
    p->bad |= TF_POOL__BAD_LISTENERS;
    return;
  }
  p->listeners = calloc(n, sizeof(*p->listeners));
  p->listener_flags = calloc(n, 1);
  if (!p->listeners || !p->listener_flags) {
    c->rc = tf_error__nomem();
    return;
  }
  p->listener_count = n;
  size_t i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, v)
  {
    tf_listener *l = &p->listeners[i];
    uint8_t *flags = &p->listener_flags[i];
    size_t old = tf_pool__push_index(c, i);
    i++;
    if (!tf_pool__is_map(c, it)) {
      *flags |= TF_POOL__L_NAME_BAD | TF_POOL__L_PORT_BAD;
      tf_pool__pop(c, old);
      continue;
    }
    tf_pool__listener_arg a = {l, flags, 0, 0};
    tf_pool__walk(c, it, tf_pool__listener_keys, 1, tf_pool__listener_field, &a);
    /* what one listener needs on its own */
    const char *missing[3] = {NULL, NULL, NULL};
    size_t m = 0;
    if (!l->name && !(*flags & TF_POOL__L_NAME_BAD)) missing[m++] = "name";
    if (!a.protocol_given) missing[m++] = "protocol";
    if (!l->port && !(*flags & TF_POOL__L_PORT_BAD)) missing[m++] = "port";
    for (size_t k = 0; k < m; k++) {
      size_t o = tf_pool__push(c, missing[k]);
      tf_pool__problem(c, "required");
      tf_pool__pop(c, o);
    }
    if (!l->port) *flags |= TF_POOL__L_PORT_BAD;
    if (!l->name) *flags |= TF_POOL__L_NAME_BAD;
    if (*flags & TF_POOL__L_PROTOCOL_OK) {
      int secure = l->protocol == TF_PROTOCOL_TLS || l->protocol == TF_PROTOCOL_DTLS;
      size_t o = tf_pool__push(c, "tlsSecretRef");
      if (secure && !(*flags & TF_POOL__L_TLS_GIVEN))
        tf_pool__problem(c, "required for a %s listener (the Secret with its certificate and key)",
                         tf_protocol_name(l->protocol));
      else if (!secure && (*flags & TF_POOL__L_TLS_GIVEN))
        tf_pool__problem(c, "only allowed for tls and dtls listeners");
      tf_pool__pop(c, o);
    }
    tf_pool__pop(c, old);
    if (c->rc < 0) return;
  }
}

static void tf_pool__selector(tf_pool__ctx *c, const cJSON *v)
{
  tf_pool *p = c->pool;
  c->have_selector = 1;
  if (!tf_pool__is_map(c, v)) return;
  size_t n = (size_t)cJSON_GetArraySize(v);
  if (n > TF_POOL__SELECTOR_MAX) {
    tf_pool__problem(c, "%zu labels; at most %d", n, TF_POOL__SELECTOR_MAX);
    return;
  }
  if (n == 0) return;
  p->node_selector = calloc(n, sizeof(*p->node_selector));
  if (!p->node_selector) {
    c->rc = tf_error__nomem();
    return;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, v)
  {
    const char *key = it->string ? it->string : "";
    size_t old = tf_pool__push_bracket(c, key);
    int dup = 0;
    for (size_t k = 0; k < p->node_selector_count; k++)
      if (!strcmp(p->node_selector[k].key, key)) dup = 1;
    if (!key[0]) {
      tf_pool__problem(c, "label key must not be empty");
    } else if (dup) {
      tf_pool__problem(c, "given more than once");
    } else if (!cJSON_IsString(it) || !it->valuestring) {
      tf_pool__problem(c, "must be a string (quote values such as \"true\")");
    } else {
      tf_kv *kv = &p->node_selector[p->node_selector_count];
      kv->key = tf_pool__dup(c, key);
      kv->value = tf_pool__dup(c, it->valuestring);
      p->node_selector_count++;
    }
    tf_pool__pop(c, old);
    if (c->rc < 0) return;
  }
}

static void tf_pool__spec_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  tf_pool *p = c->pool;
  int64_t x;
  switch (field) {
  case 0: /* replicas */
    if (!tf_pool__int(c, v, &x)) break;
    if (x < 0)
      tf_pool__problem(c, "%lld is negative", (long long)x);
    else if (x > TF_POOL__QUOTA_MAX)
      tf_pool__problem(c, "%lld is above %lld", (long long)x, TF_POOL__QUOTA_MAX);
    else
      p->replicas = x;
    break;
  case 1: /* dataplane */
    if (tf_pool__is_map(c, v)) tf_pool__walk(c, v, tf_pool__dataplane_keys, 1, tf_pool__dataplane_field, NULL);
    break;
  case 2: /* addressing */
    if (tf_pool__is_map(c, v))
      tf_pool__walk(c, v, tf_pool__addressing_keys, 1, tf_pool__addressing_field, NULL);
    else
      p->bad |= TF_POOL__BAD_ADDRESSING;
    break;
  case 3: /* nodeSelector */
    tf_pool__selector(c, v);
    break;
  case 4: /* relayPortRange */
    if (tf_pool__is_map(c, v))
      tf_pool__walk(c, v, tf_pool__range_keys, 1, tf_pool__range_field, NULL);
    else
      p->bad |= TF_POOL__BAD_RANGE_START | TF_POOL__BAD_RANGE_END;
    break;
  case 5: /* listeners */
    tf_pool__listeners(c, v);
    break;
  case 6: /* auth */
    if (tf_pool__is_map(c, v))
      tf_pool__walk(c, v, tf_pool__auth_keys, 1, tf_pool__auth_field, NULL);
    else
      p->bad |= TF_POOL__BAD_AUTH;
    break;
  case 7: /* quota */
    if (tf_pool__is_map(c, v)) tf_pool__walk(c, v, tf_pool__quota_keys, 1, tf_pool__quota_field, NULL);
    break;
  case 8: /* peerPolicy */
    if (tf_pool__is_map(c, v)) tf_pool__walk(c, v, tf_pool__peer_keys, 1, tf_pool__peer_field, NULL);
    break;
  case 9: { /* drainTimeout */
    if (cJSON_IsNumber(v)) {
      tf_pool__problem(c, "must be a duration with a unit (e.g. 600s, 10m, 1h30m), not a bare number");
      break;
    }
    char *s = NULL;
    if (!tf_pool__str(c, v, &s)) break;
    int64_t ms = 0;
    int r = tf_pool__duration(s, &ms);
    if (r == 1)
      p->drain_timeout_ms = ms;
    else if (r == -1)
      tf_pool__problem(c, "\"%.64s\" is negative", s);
    else if (r == -2)
      tf_pool__problem(c, "\"%.64s\" is too long", s);
    else
      tf_pool__problem(c, "\"%.64s\" is not a duration (e.g. 600s, 10m, 1h30m)", s);
    free(s);
    break;
  }
  default:
    break;
  }
}

static const char *const tf_pool__spec_keys[] = {"replicas",       "dataplane", "addressing", "nodeSelector",
                                                 "relayPortRange", "listeners", "auth",       "quota",
                                                 "peerPolicy",     "drainTimeout", NULL};

static void tf_pool__metadata_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  (void)arg;
  tf_pool *p = c->pool;
  if (field == 0) {
    if (tf_pool__str(c, v, &p->name))
      p->present |= TF_POOL_HAS_NAME;
    else
      p->bad |= TF_POOL__BAD_NAME;
  } else {
    if (!tf_pool__str(c, v, &p->ns)) p->bad |= TF_POOL__BAD_NAMESPACE;
  }
}

static const char *const tf_pool__metadata_keys[] = {"name", "namespace", NULL};

typedef struct tf_pool__top_arg {
  const cJSON *spec;
} tf_pool__top_arg;

static void tf_pool__top_field(tf_pool__ctx *c, int field, const cJSON *v, void *arg)
{
  tf_pool__top_arg *a = arg;
  switch (field) {
  case 0: /* apiVersion */
    if (cJSON_IsString(v) && v->valuestring && strcmp(v->valuestring, TF_POOL__API_VERSION))
      tf_pool__problem(c, "\"%.64s\" is not %s", v->valuestring, TF_POOL__API_VERSION);
    else if (!cJSON_IsString(v))
      tf_pool__problem(c, "must be a string");
    break;
  case 1: /* kind */
    if (cJSON_IsString(v) && v->valuestring && strcmp(v->valuestring, TF_POOL__KIND))
      tf_pool__problem(c, "\"%.64s\" is not %s", v->valuestring, TF_POOL__KIND);
    else if (!cJSON_IsString(v))
      tf_pool__problem(c, "must be a string");
    break;
  case 2: /* metadata: other keys (labels, uid, ...) are not ours */
    if (tf_pool__is_map(c, v))
      tf_pool__walk(c, v, tf_pool__metadata_keys, 0, tf_pool__metadata_field, NULL);
    else
      c->pool->bad |= TF_POOL__BAD_NAME | TF_POOL__BAD_NAMESPACE;
    break;
  case 3: /* spec: walked after the header so header problems come first */
    a->spec = v;
    break;
  default: /* status: ignored */
    break;
  }
}

static const char *const tf_pool__top_keys[] = {"apiVersion", "kind", "metadata", "spec", "status", NULL};

/* ---- pool life cycle ---- */

static void tf_pool__free_ref(tf_secret_ref *r)
{
  free(r->name);
  free(r->key);
}

void tf_pool_free(tf_pool *pool)
{
  if (!pool) return;
  free(pool->name);
  free(pool->ns);
  free(pool->image);
  free(pool->coturn_version);
  free(pool->external_prefixes);
  free(pool->pod_network);
  for (size_t i = 0; i < pool->node_selector_count; i++) {
    free(pool->node_selector[i].key);
    free(pool->node_selector[i].value);
  }
  free(pool->node_selector);
  for (size_t i = 0; i < pool->listener_count; i++) {
    free(pool->listeners[i].name);
    free(pool->listeners[i].tls_secret);
  }
  free(pool->listeners);
  free(pool->listener_flags);
  free(pool->realm);
  tf_pool__free_ref(&pool->secret);
  tf_pool__free_ref(&pool->previous_secret);
  free(pool->peer_allow);
  free(pool->peer_deny);
  tf_problems_free(pool->problems);
  free(pool);
}

/* spec.dataplane.coturnVersion from an image's tag: "coturn/coturn:4.18.0-r0" -> "4.18.0" (the tag's
 * MAJOR.MINOR.PATCH, any -suffix dropped). A digest (`@sha256:...`) is ignored; no tag, a tag that
 * is not a version (`latest`, `4.18`) or one older than 4.6.1: a problem that says the field is needed. */
static void tf_pool__version_of_image(tf_pool__ctx *c)
{
  tf_pool *p = c->pool;
  const char *image = p->image, *slash = strrchr(image, '/');
  size_t name_len = strcspn(image, "@");
  const char *colon = memchr(slash ? slash : image, ':', name_len - (size_t)((slash ? slash : image) - image));
  char tag[64] = "";
  if (colon && (size_t)(image + name_len - colon - 1) < sizeof(tag))
    memcpy(tag, colon + 1, (size_t)(image + name_len - colon - 1)), tag[image + name_len - colon - 1] = '\0';
  uint32_t ver;
  size_t old = tf_pool__push(c, "spec.dataplane.coturnVersion");
  if (!tag[0] || tf_version__parse(tag, &ver) < 0) {
    tf_pool__problem(c,
                     "required: spec.dataplane.image \"%.96s\" has %s, so the coturn version cannot be taken from "
                     "it (set coturnVersion, e.g. \"4.18.0\")",
                     image, tag[0] ? "a tag that is not a version MAJOR.MINOR.PATCH[-suffix]"
                                   : (name_len < strlen(image) ? "only a digest, no tag" : "no tag"));
  } else if (ver < ((4u << 16) | (6u << 8) | 1u)) {
    tf_pool__problem(c, "\"%u.%u.%u\" (the tag of spec.dataplane.image) is older than 4.6.1, the oldest coturn "
                        "Turnfleet supports", ver >> 16, (ver >> 8) & 0xff, ver & 0xff);
  } else {
    p->coturn_version = tf_asprintf__("%u.%u.%u", ver >> 16, (ver >> 8) & 0xff, ver & 0xff);
    if (!p->coturn_version) c->rc = tf_error__nomem();
  }
  tf_pool__pop(c, old);
}

static tf_err tf_pool__defaults(tf_pool__ctx *c)
{
  tf_pool *p = c->pool;
  if (!p->name) p->name = tf_pool__dup(c, "");
  if (!p->ns) p->ns = tf_pool__dup(c, "default");
  if (!p->coturn_version && p->image) tf_pool__version_of_image(c);
  if (!p->coturn_version) p->coturn_version = tf_pool__dup(c, "4.6.1");
  if (!p->image && p->coturn_version) {
    p->image = tf_asprintf__("coturn/coturn:%s", p->coturn_version);
    if (!p->image) c->rc = tf_error__nomem();
  }
  p->relays_per_node = (p->mode == TF_MODE_PARTITIONED_IP && p->rpn >= 1) ? (uint32_t)p->rpn : 1u;
  if (!c->have_selector) {
    p->node_selector = calloc(1, sizeof(*p->node_selector));
    if (p->node_selector) {
      p->node_selector_count = 1;
      p->node_selector[0].key = tf_pool__dup(c, "turnfleet.hzmi.dev/relay-node");
      p->node_selector[0].value = tf_pool__dup(c, "true");
    } else {
      c->rc = tf_error__nomem();
    }
  }
  if (!c->have_listeners) {
    p->listeners = calloc(2, sizeof(*p->listeners));
    p->listener_flags = calloc(2, 1);
    if (p->listeners && p->listener_flags) {
      p->listener_count = 2;
      p->listeners[0].name = tf_pool__dup(c, "turn");
      p->listeners[0].protocol = TF_PROTOCOL_UDP;
      p->listeners[0].port = 3478;
      p->listeners[1].name = tf_pool__dup(c, "turn-tcp");
      p->listeners[1].protocol = TF_PROTOCOL_TCP;
      p->listeners[1].port = 3478;
      p->listener_flags[0] = p->listener_flags[1] = TF_POOL__L_PROTOCOL_OK;
    } else {
      c->rc = tf_error__nomem();
    }
  }
  if (p->secret.name && !p->secret.key) p->secret.key = tf_pool__dup(c, "secret");
  if (p->previous_secret.name && !p->previous_secret.key) p->previous_secret.key = tf_pool__dup(c, "secret");
  return c->rc;
}

tf_err tf_pool_parse(tf_pool **out, const char *text, size_t len, tf_format format)
{
  return tf_pool_parse_with(out, text, len, format, NULL);
}

tf_err tf_pool_parse_with(tf_pool **out, const char *text, size_t len, int format, const tf_parse_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(text || len == 0);
  TF_ASSERT_ARG(format == TF_FORMAT_AUTO || format == TF_FORMAT_JSON || format == TF_FORMAT_YAML);
  *out = NULL;
  if (format == TF_FORMAT_AUTO) {
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) i++;
    format = (i < len && text[i] == '{') ? TF_FORMAT_JSON : TF_FORMAT_YAML;
  }
  cJSON *root = NULL;
  tf_err rc = format == TF_FORMAT_JSON ? tf_doc__parse_json(&root, text, len, opts)
                                        : tf_doc__parse_yaml(&root, text, len, opts);
  if (rc < 0) return rc;
  rc = tf_pool__from_tree(out, root);
  cJSON_Delete(root);
  return rc;
}

tf_err tf_pool__from_tree(tf_pool **out, const cJSON *root)
{
  *out = NULL;
  if (!cJSON_IsObject(root))
    return tf_error__set(TF_EPROTO, "document: must be a mapping (a TURNPool object or its spec)");

  tf_pool *p = calloc(1, sizeof(*p));
  if (!p || !(p->problems = tf_problems__new())) {
    free(p);
    return tf_error__nomem();
  }
  p->replicas = 1;
  p->mode = TF_MODE_HOST_NETWORK;
  p->family = TF_FAMILY_IPV4;
  p->range.start = 49152;
  p->range.end = 65535;
  p->deny_private = 1;
  p->drain_timeout_ms = 600000;

  tf_pool__ctx c;
  memset(&c, 0, sizeof(c));
  c.pool = p;

  const cJSON *spec = root;
  int whole = cJSON_GetObjectItemCaseSensitive(root, "spec") || cJSON_GetObjectItemCaseSensitive(root, "kind") ||
              cJSON_GetObjectItemCaseSensitive(root, "apiVersion") ||
              cJSON_GetObjectItemCaseSensitive(root, "metadata");
  if (whole) {
    tf_pool__top_arg a = {NULL};
    tf_pool__walk(&c, root, tf_pool__top_keys, 1, tf_pool__top_field, &a);
    p->problems_head = p->problems->count;
    spec = a.spec;
  }
  if (spec && c.rc == TF_OK) {
    size_t old = tf_pool__push(&c, "spec");
    if (tf_pool__is_map(&c, spec))
      tf_pool__walk(&c, spec, tf_pool__spec_keys, 1, tf_pool__spec_field, NULL);
    else
      p->bad |= TF_POOL__BAD_AUTH; /* one problem, not "realm: required" as well */
    tf_pool__pop(&c, old);
  }
  if (c.rc == TF_OK) tf_pool__defaults(&c);
  if (c.rc < 0) {
    tf_pool_free(p);
    return tf_error__nomem();
  }
  *out = p;
  return TF_OK;
}

tf_err tf_pool_set_name(tf_pool *pool, const char *name)
{
  TF_ASSERT_ARG(pool);
  TF_ASSERT_ARG(name);
  char *copy = tf_strdup__(name);
  if (!copy) return tf_error__nomem();
  free(pool->name);
  pool->name = copy;
  pool->present |= TF_POOL_HAS_NAME;
  pool->bad &= ~TF_POOL__BAD_NAME;
  return TF_OK;
}

/* ---- validation: what needs more than one field ---- */

typedef struct tf_pool__vctx {
  tf_problems *out;
  tf_err rc;
} tf_pool__vctx;

static void tf_pool__vproblem(tf_pool__vctx *v, const char *path, const char *fmt, ...) TF__PRINTF(3, 4);
static void tf_pool__vproblem(tf_pool__vctx *v, const char *path, const char *fmt, ...)
{
  if (v->rc < 0) return;
  va_list ap;
  va_start(ap, fmt);
  v->rc = tf_problems__addv(v->out, path, fmt, ap);
  va_end(ap);
}

static void tf_pool__copy_problems(tf_pool__vctx *v, const tf_problems *from, size_t begin, size_t end)
{
  for (size_t i = begin; i < end && i < from->count; i++)
    tf_pool__vproblem(v, from->items[i].path, "%s", from->items[i].message);
}

static void tf_pool__check_metadata(tf_pool__vctx *v, const tf_pool *p)
{
  if (!(p->bad & TF_POOL__BAD_NAME)) {
    const char *name = p->name ? p->name : "";
    size_t n = strlen(name);
    if (!(p->present & TF_POOL_HAS_NAME) || n == 0)
      tf_pool__vproblem(v, "metadata.name", "required (give a whole TURNPool object or set the name)");
    else if (!tf_pool__is_label(name, 63))
      tf_pool__vproblem(v, "metadata.name",
                        "\"%.64s\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending "
                        "with a letter or digit)",
                        name);
    else if (n > TF_POOL__NAME_MAX)
      tf_pool__vproblem(v, "metadata.name", "\"%.64s\" is %zu characters; at most %d keep relay pod names within 63",
                        name, n, TF_POOL__NAME_MAX);
  }
  if (!(p->bad & TF_POOL__BAD_NAMESPACE) && p->ns && !tf_pool__is_label(p->ns, 63))
    tf_pool__vproblem(v, "metadata.namespace",
                      "\"%.64s\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending "
                      "with a letter or digit, at most 63 characters)",
                      p->ns);
}

static int tf_pool__range_ok(const tf_pool *p)
{
  return !(p->bad & (TF_POOL__BAD_RANGE_START | TF_POOL__BAD_RANGE_END)) && p->range.end >= p->range.start;
}

/* "ADDR/BITS", or the bare address for a host prefix; text holds TF_ADDR_STRLEN + 8. */
static void tf_pool__prefix_text(char *text, const tf_prefix *x)
{
  if (tf_addr_format(text, TF_ADDR_STRLEN, &x->addr) < 0) {
    text[0] = '\0';
    return;
  }
  unsigned max = x->addr.family == TF_AF_INET ? 32u : 128u;
  if (x->bits != max) snprintf(text + strlen(text), 8, "/%u", x->bits);
}

static void tf_pool__check_addressing(tf_pool__vctx *v, const tf_pool *p)
{
  if (p->bad & (TF_POOL__BAD_MODE | TF_POOL__BAD_ADDRESSING)) return;
  char path[96];
  /* the mode's own section */
  if (p->mode == TF_MODE_EXTERNAL_IP_POOL) {
    if (!(p->present & TF_POOL_HAS_EXTERNAL_IP_POOL)) {
      tf_pool__vproblem(v, "spec.addressing.externalIPPool",
                        "required with mode ExternalIPPool (the addresses relays may use)");
    } else {
      /* entries with a problem of their own have family 0 and count for neither */
      int bad = (p->bad & TF_POOL__BAD_EXTERNAL) != 0;
      size_t v4 = 0, v6 = 0;
      for (size_t i = 0; i < p->external_prefix_count; i++) {
        const tf_prefix *x = &p->external_prefixes[i];
        if (x->addr.family == TF_AF_INET) v4++;
        if (x->addr.family == TF_AF_INET6) v6++;
      }
      if (v4 + v6 == 0) {
        if (!bad)
          tf_pool__vproblem(v, "spec.addressing.externalIPPool.addresses", "at least one address or prefix is required");
      } else if (!(p->bad & TF_POOL__BAD_FAMILY)) {
        for (size_t i = 0; i < p->external_prefix_count; i++) {
          const tf_prefix *x = &p->external_prefixes[i];
          int want = p->family == TF_FAMILY_IPV4 ? TF_AF_INET : p->family == TF_FAMILY_IPV6 ? TF_AF_INET6 : 0;
          if (want && x->addr.family && x->addr.family != want) {
            char text[TF_ADDR_STRLEN + 8];
            tf_pool__prefix_text(text, x);
            snprintf(path, sizeof(path), "spec.addressing.externalIPPool.addresses[%zu]", i);
            tf_pool__vproblem(v, path, "\"%s\" is %s but spec.addressing.family is %s", text,
                              x->addr.family == TF_AF_INET ? "IPv4" : "IPv6", tf_family_name(p->family));
          }
        }
        if (!bad && p->family == TF_FAMILY_DUAL_STACK && (v4 == 0 || v6 == 0))
          tf_pool__vproblem(v, "spec.addressing.externalIPPool.addresses",
                            "DualStack needs IPv4 and IPv6 addresses; none is %s", v4 == 0 ? "IPv4" : "IPv6");
      }
    }
  }
  if (p->mode == TF_MODE_PARTITIONED_IP) {
    if (!(p->present & TF_POOL_HAS_PARTITIONED_IP))
      tf_pool__vproblem(v, "spec.addressing.partitionedIP", "required with mode PartitionedIP (set relaysPerNode)");
    else if (!(p->present & TF_POOL_HAS_RELAYS_PER_NODE) && !(p->bad & TF_POOL__BAD_RPN))
      tf_pool__vproblem(v, "spec.addressing.partitionedIP.relaysPerNode", "required with mode PartitionedIP");
    else if ((p->present & TF_POOL_HAS_RELAYS_PER_NODE) && tf_pool__range_ok(p) &&
             (uint32_t)p->rpn > tf_port_range_size(p->range))
      tf_pool__vproblem(v, "spec.addressing.partitionedIP.relaysPerNode",
                        "%lld relays cannot each have a slice of the %u ports of spec.relayPortRange", (long long)p->rpn,
                        tf_port_range_size(p->range));
  }
  /* sections of other modes */
  if ((p->present & TF_POOL_HAS_EXTERNAL_IP_POOL) && p->mode != TF_MODE_EXTERNAL_IP_POOL)
    tf_pool__vproblem(v, "spec.addressing.externalIPPool", "only allowed with mode ExternalIPPool");
  if ((p->present & TF_POOL_HAS_POD_IP) && p->mode != TF_MODE_POD_IP)
    tf_pool__vproblem(v, "spec.addressing.podIP", "only allowed with mode PodIP");
  if ((p->present & TF_POOL_HAS_PARTITIONED_IP) && p->mode != TF_MODE_PARTITIONED_IP)
    tf_pool__vproblem(v, "spec.addressing.partitionedIP", "only allowed with mode PartitionedIP");
}

static int tf_pool__is_plain(tf_protocol pr) { return pr == TF_PROTOCOL_UDP || pr == TF_PROTOCOL_TCP; }

static void tf_pool__check_listeners(tf_pool__vctx *v, const tf_pool *p)
{
  if (p->bad & TF_POOL__BAD_LISTENERS) return;
  /* PartitionedIP: relay slice i serves listener port + i */
  uint32_t rpn = p->relays_per_node ? p->relays_per_node : 1u;
  if (p->mode == TF_MODE_PARTITIONED_IP && (p->bad & TF_POOL__BAD_RPN)) rpn = 1;
  int range_ok = tf_pool__range_ok(p);
  size_t group_first[2] = {SIZE_MAX, SIZE_MAX}; /* first udp/tcp and first tls/dtls listener */
  char path[64], other[64];
  for (size_t i = 0; i < p->listener_count; i++) {
    const tf_listener *l = &p->listeners[i];
    uint8_t f = p->listener_flags[i];
    if (!(f & TF_POOL__L_NAME_BAD)) {
      for (size_t j = 0; j < i; j++) {
        if (!(p->listener_flags[j] & TF_POOL__L_NAME_BAD) && !strcmp(p->listeners[j].name, l->name)) {
          snprintf(path, sizeof(path), "spec.listeners[%zu].name", i);
          tf_pool__vproblem(v, path, "\"%.64s\" is also the name of spec.listeners[%zu]", l->name, j);
          break;
        }
      }
    }
    if (f & TF_POOL__L_PORT_BAD) continue;
    snprintf(path, sizeof(path), "spec.listeners[%zu].port", i);
    uint32_t last = (uint32_t)l->port + rpn - 1u;
    if (last > 65535u) {
      tf_pool__vproblem(v, path,
                        "%u relays per node serve ports %u-%u (one per relay), beyond 65535", rpn, l->port, last);
    } else if (range_ok && l->port <= p->range.end && last >= p->range.start) {
      if (rpn == 1)
        tf_pool__vproblem(v, path, "%u is inside spec.relayPortRange %u-%u", l->port, p->range.start, p->range.end);
      else
        tf_pool__vproblem(v, path, "ports %u-%u (one per relay on a node) overlap spec.relayPortRange %u-%u", l->port,
                          last, p->range.start, p->range.end);
    }
    if (!(f & TF_POOL__L_PROTOCOL_OK)) continue;
    int dup = 0;
    for (size_t j = 0; j < i; j++) {
      if ((p->listener_flags[j] & TF_POOL__L_PROTOCOL_OK) && !(p->listener_flags[j] & TF_POOL__L_PORT_BAD) &&
          p->listeners[j].protocol == l->protocol && p->listeners[j].port == l->port) {
        tf_pool__vproblem(v, path, "%s port %u is already served by spec.listeners[%zu]",
                          tf_protocol_name(l->protocol), l->port, j);
        dup = 1;
        break;
      }
    }
    if (dup) continue;
    int g = tf_pool__is_plain(l->protocol) ? 0 : 1;
    if (group_first[g] == SIZE_MAX) {
      group_first[g] = i;
    } else if (p->listeners[group_first[g]].port != l->port) {
      tf_pool__vproblem(v, path,
                        "%u differs from port %u of spec.listeners[%zu]; coturn serves every %s listener on one %s",
                        l->port, p->listeners[group_first[g]].port, group_first[g], g ? "tls and dtls" : "udp and tcp",
                        g ? "tls-listening-port" : "listening-port");
    }
  }
  /* the udp/tcp port and the tls/dtls port (each with its per-relay shifts) must not meet */
  if (group_first[0] != SIZE_MAX && group_first[1] != SIZE_MAX) {
    uint32_t a = p->listeners[group_first[0]].port, b = p->listeners[group_first[1]].port;
    if (a + rpn - 1u >= b && b + rpn - 1u >= a) {
      snprintf(path, sizeof(path), "spec.listeners[%zu].port", group_first[1]);
      snprintf(other, sizeof(other), "spec.listeners[%zu]", group_first[0]);
      if (rpn == 1)
        tf_pool__vproblem(v, path, "%u is also the udp/tcp port of %s; coturn needs a separate tls-listening-port", b,
                          other);
      else
        tf_pool__vproblem(v, path, "ports %u-%u (one per relay on a node) overlap ports %u-%u of %s", b, b + rpn - 1u,
                          a, a + rpn - 1u, other);
    }
  }
}

tf_err tf_pool_validate(tf_problems **out, const tf_pool *pool)
{
  if (out) *out = NULL;
  TF_ASSERT_ARG(pool);
  tf_pool__vctx v = {tf_problems__new(), TF_OK};
  if (!v.out) return tf_error__nomem();
  const tf_problems *parsed = pool->problems;
  size_t head = parsed ? pool->problems_head : 0;
  if (parsed) tf_pool__copy_problems(&v, parsed, 0, head);
  tf_pool__check_metadata(&v, pool);
  if (parsed) tf_pool__copy_problems(&v, parsed, head, parsed->count);
  if (!(pool->bad & (TF_POOL__BAD_RANGE_START | TF_POOL__BAD_RANGE_END)) && pool->range.end < pool->range.start)
    tf_pool__vproblem(&v, "spec.relayPortRange.end", "%u is below start %u", pool->range.end, pool->range.start);
  tf_pool__check_addressing(&v, pool);
  tf_pool__check_listeners(&v, pool);
  if (!(pool->bad & (TF_POOL__BAD_AUTH | TF_POOL__BAD_REALM)) && !pool->realm)
    tf_pool__vproblem(&v, "spec.auth.realm", "required (the TURN realm, e.g. turn.example.com)");
  if (!(pool->bad & (TF_POOL__BAD_AUTH | TF_POOL__BAD_SECRET)) && !pool->secret.name)
    tf_pool__vproblem(&v, "spec.auth.secretRef", "required (the Secret holding the shared TURN secret)");
  if (v.rc < 0) {
    tf_problems_free(v.out);
    return v.rc;
  }
  size_t n = v.out->count;
  tf_err rc = TF_OK;
  if (n > 0) {
    if (n == 1)
      rc = tf_error__set(TF_EINVALID, "%s: %s", v.out->items[0].path, v.out->items[0].message);
    else
      rc = tf_error__set(TF_EINVALID, "%s: %s (and %zu more problem%s)", v.out->items[0].path,
                         v.out->items[0].message, n - 1, n == 2 ? "" : "s");
  }
  if (out)
    *out = v.out;
  else
    tf_problems_free(v.out);
  return rc;
}

/* ---- canonical JSON ---- */

static int tf_pool__json_prefixes(cJSON *parent, const char *key, const tf_prefix *items, size_t n)
{
  cJSON *arr = cJSON_AddArrayToObject(parent, key);
  if (!arr) return -1;
  for (size_t i = 0; i < n; i++) {
    const tf_prefix *x = &items[i];
    if (x->addr.family != TF_AF_INET && x->addr.family != TF_AF_INET6) continue;
    char text[TF_ADDR_STRLEN + 8];
    tf_pool__prefix_text(text, x);
    cJSON *s = cJSON_CreateString(text);
    if (!s) return -1;
    cJSON_AddItemToArray(arr, s);
  }
  return 0;
}

static int tf_pool__json_ref(cJSON *parent, const char *key, const tf_secret_ref *r)
{
  cJSON *o = cJSON_AddObjectToObject(parent, key);
  if (!o) return -1;
  if (!cJSON_AddStringToObject(o, "name", r->name)) return -1;
  if (r->key && !cJSON_AddStringToObject(o, "key", r->key)) return -1;
  return 0;
}

/* Build the object; returns NULL when out of memory. */
static cJSON *tf_pool__json(const tf_pool *p)
{
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  int ok = 1;
#define TF__J(expr) \
  do {              \
    if (ok && !(expr)) ok = 0; \
  } while (0)
  TF__J(cJSON_AddStringToObject(root, "apiVersion", TF_POOL__API_VERSION));
  TF__J(cJSON_AddStringToObject(root, "kind", TF_POOL__KIND));
  cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
  TF__J(meta);
  if (ok && (p->present & TF_POOL_HAS_NAME)) TF__J(cJSON_AddStringToObject(meta, "name", p->name ? p->name : ""));
  if (ok) TF__J(cJSON_AddStringToObject(meta, "namespace", p->ns ? p->ns : "default"));
  cJSON *spec = ok ? cJSON_AddObjectToObject(root, "spec") : NULL;
  TF__J(spec);
  if (ok) TF__J(cJSON_AddNumberToObject(spec, "replicas", (double)p->replicas));
  cJSON *dp = ok ? cJSON_AddObjectToObject(spec, "dataplane") : NULL;
  TF__J(dp);
  if (ok) TF__J(cJSON_AddStringToObject(dp, "image", p->image ? p->image : ""));
  if (ok) TF__J(cJSON_AddStringToObject(dp, "coturnVersion", p->coturn_version ? p->coturn_version : ""));
  cJSON *ad = ok ? cJSON_AddObjectToObject(spec, "addressing") : NULL;
  TF__J(ad);
  if (ok) TF__J(cJSON_AddStringToObject(ad, "mode", tf_mode_name(p->mode) ? tf_mode_name(p->mode) : ""));
  if (ok) TF__J(cJSON_AddStringToObject(ad, "family", tf_family_name(p->family) ? tf_family_name(p->family) : ""));
  if (ok && (p->mode == TF_MODE_EXTERNAL_IP_POOL || (p->present & TF_POOL_HAS_EXTERNAL_IP_POOL))) {
    cJSON *e = cJSON_AddObjectToObject(ad, "externalIPPool");
    TF__J(e);
    if (ok) TF__J(tf_pool__json_prefixes(e, "addresses", p->external_prefixes, p->external_prefix_count) == 0);
  }
  if (ok && (p->mode == TF_MODE_POD_IP || (p->present & TF_POOL_HAS_POD_IP))) {
    cJSON *e = cJSON_AddObjectToObject(ad, "podIP");
    TF__J(e);
    if (ok && p->pod_network) TF__J(cJSON_AddStringToObject(e, "network", p->pod_network));
  }
  if (ok && (p->mode == TF_MODE_PARTITIONED_IP || (p->present & TF_POOL_HAS_PARTITIONED_IP))) {
    cJSON *e = cJSON_AddObjectToObject(ad, "partitionedIP");
    TF__J(e);
    if (ok && p->rpn >= 1) TF__J(cJSON_AddNumberToObject(e, "relaysPerNode", (double)p->rpn));
  }
  cJSON *sel = ok ? cJSON_AddObjectToObject(spec, "nodeSelector") : NULL;
  TF__J(sel);
  for (size_t i = 0; ok && i < p->node_selector_count; i++)
    TF__J(cJSON_AddStringToObject(sel, p->node_selector[i].key, p->node_selector[i].value));
  cJSON *rr = ok ? cJSON_AddObjectToObject(spec, "relayPortRange") : NULL;
  TF__J(rr);
  if (ok) TF__J(cJSON_AddNumberToObject(rr, "start", p->range.start));
  if (ok) TF__J(cJSON_AddNumberToObject(rr, "end", p->range.end));
  cJSON *ls = ok ? cJSON_AddArrayToObject(spec, "listeners") : NULL;
  TF__J(ls);
  for (size_t i = 0; ok && i < p->listener_count; i++) {
    const tf_listener *l = &p->listeners[i];
    cJSON *o = cJSON_CreateObject();
    TF__J(o);
    if (!ok) break;
    cJSON_AddItemToArray(ls, o);
    if (l->name) TF__J(cJSON_AddStringToObject(o, "name", l->name));
    if (ok && tf_protocol_name(l->protocol))
      TF__J(cJSON_AddStringToObject(o, "protocol", tf_protocol_name(l->protocol)));
    if (ok && l->port) TF__J(cJSON_AddNumberToObject(o, "port", l->port));
    if (ok && l->tls_secret) {
      cJSON *t = cJSON_AddObjectToObject(o, "tlsSecretRef");
      TF__J(t);
      if (ok) TF__J(cJSON_AddStringToObject(t, "name", l->tls_secret));
    }
  }
  cJSON *au = ok ? cJSON_AddObjectToObject(spec, "auth") : NULL;
  TF__J(au);
  if (ok && p->realm) TF__J(cJSON_AddStringToObject(au, "realm", p->realm));
  if (ok && p->secret.name) TF__J(tf_pool__json_ref(au, "secretRef", &p->secret) == 0);
  if (ok && p->previous_secret.name) TF__J(tf_pool__json_ref(au, "previousSecretRef", &p->previous_secret) == 0);
  cJSON *q = ok ? cJSON_AddObjectToObject(spec, "quota") : NULL;
  TF__J(q);
  if (ok) TF__J(cJSON_AddNumberToObject(q, "userQuota", (double)p->user_quota));
  if (ok) TF__J(cJSON_AddNumberToObject(q, "totalQuota", (double)p->total_quota));
  cJSON *pp = ok ? cJSON_AddObjectToObject(spec, "peerPolicy") : NULL;
  TF__J(pp);
  if (ok) TF__J(cJSON_AddBoolToObject(pp, "denyPrivate", p->deny_private ? 1 : 0));
  if (ok) TF__J(tf_pool__json_prefixes(pp, "allow", p->peer_allow, p->peer_allow_count) == 0);
  if (ok) TF__J(tf_pool__json_prefixes(pp, "deny", p->peer_deny, p->peer_deny_count) == 0);
  if (ok) {
    char dt[32];
    if (p->drain_timeout_ms % 1000 == 0)
      snprintf(dt, sizeof(dt), "%llds", (long long)(p->drain_timeout_ms / 1000));
    else
      snprintf(dt, sizeof(dt), "%lldms", (long long)p->drain_timeout_ms);
    TF__J(cJSON_AddStringToObject(spec, "drainTimeout", dt));
  }
#undef TF__J
  if (!ok) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

tf_err tf_pool_to_json(char **out, const tf_pool *pool)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(pool);
  return tf_doc__print(out, tf_pool__json(pool));
}

tf_err tf_pool_with_replicas(tf_pool **out, const tf_pool *pool, int64_t replicas)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  TF_ASSERT_ARG(pool);
  if (replicas < 0) return tf_error__set(TF_EINVALID, "replicas: must be >= 0, not %lld", (long long)replicas);
  /* a copy through the canonical form: one parser, so the copy is what a reader of that JSON would get */
  cJSON *root = tf_pool__json(pool);
  char *text = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!text) return tf_error__nomem();
  tf_pool *copy = NULL;
  tf_err rc = tf_pool_parse(&copy, text, strlen(text), TF_FORMAT_JSON);
  cJSON_free(text);
  if (rc < 0) return rc;
  copy->replicas = replicas;
  *out = copy;
  return TF_OK;
}

/* ---- accessors ---- */

const char *tf_pool_image(const tf_pool *pool) { return pool && pool->image ? pool->image : ""; }

tf_err tf_pool_secret_ref(const tf_pool *pool, int previous, const char **name, const char **key)
{
  if (name) *name = NULL;
  if (key) *key = NULL;
  TF_ASSERT_ARG(pool);
  const tf_secret_ref *r = previous ? &pool->previous_secret : &pool->secret;
  if (!r->name) return tf_error__set(TF_ENOTFOUND, "spec.auth.%s: absent", previous ? "previousSecretRef" : "secretRef");
  if (name) *name = r->name;
  if (key) *key = r->key ? r->key : "secret";
  return TF_OK;
}

tf_err tf_pool_check_secret(const tf_pool *pool, int previous, const char *value, size_t len)
{
  const char *name, *key;
  tf_err rc = tf_pool_secret_ref(pool, previous, &name, &key);
  if (rc < 0) return rc;
  const char *ref = previous ? "previousSecretRef" : "secretRef", *why = NULL;
  size_t ctl = 0;
  while (value && ctl < len && ((unsigned char)value[ctl] >= 0x20 && value[ctl] != 0x7f)) ctl++;
  if (!value) why = "no such key";
  else if (len == 0) why = "must not be empty";
  else if (len > TF_POOL_SECRET_MAX)
    return tf_error__set(TF_EINVALID, "spec.auth.%s: Secret %s/%s, key %s: %zu bytes, more than the cap of %d bytes",
                         ref, tf_pool_namespace(pool), name, key, len, TF_POOL_SECRET_MAX);
  else if (memchr(value, '\n', len) || memchr(value, '\r', len)) why = "must not contain a line break";
  else if (memchr(value, '"', len)) why = "must not contain a double quote";
  else if (ctl < len) why = "must not contain a control character or NUL";
  if (!why) return TF_OK;
  return tf_error__set(TF_EINVALID, "spec.auth.%s: Secret %s/%s, key %s: %s", ref, tf_pool_namespace(pool), name, key,
                       why);
}

const char *tf_pool_listener_tls_secret(const tf_pool *pool, size_t i)
{
  return pool && i < pool->listener_count ? pool->listeners[i].tls_secret : NULL;
}

size_t tf_pool_node_selector_count(const tf_pool *pool) { return pool ? pool->node_selector_count : 0; }

const char *tf_pool_node_selector_key(const tf_pool *pool, size_t i)
{
  return pool && i < pool->node_selector_count ? pool->node_selector[i].key : NULL;
}

const char *tf_pool_node_selector_value(const tf_pool *pool, size_t i)
{
  return pool && i < pool->node_selector_count ? pool->node_selector[i].value : NULL;
}

const char *tf_pool_pod_network(const tf_pool *pool) { return pool ? pool->pod_network : NULL; }

size_t tf_pool_external_prefix_count(const tf_pool *pool) { return pool ? pool->external_prefix_count : 0; }

static tf_err tf_pool__prefix_at(tf_prefix *out, const tf_prefix *items, size_t n, size_t i, const char *what)
{
  TF_ASSERT_ARG(out);
  if (i >= n) return tf_error__set(TF_ENOTFOUND, "%s[%zu]: out of range (%zu)", what, i, n);
  *out = items[i];
  return TF_OK;
}

tf_err tf_pool_external_prefix(tf_prefix *out, const tf_pool *pool, size_t i)
{
  TF_ASSERT_ARG(pool);
  return tf_pool__prefix_at(out, pool->external_prefixes, pool->external_prefix_count, i,
                            "spec.addressing.externalIPPool.addresses");
}

int64_t tf_pool_quota(const tf_pool *pool, int total)
{
  return pool ? (total ? pool->total_quota : pool->user_quota) : 0;
}

int tf_pool_peer_deny_private(const tf_pool *pool) { return pool ? pool->deny_private : 1; }

size_t tf_pool_peer_prefix_count(const tf_pool *pool, int deny)
{
  return pool ? (deny ? pool->peer_deny_count : pool->peer_allow_count) : 0;
}

tf_err tf_pool_peer_prefix(tf_prefix *out, const tf_pool *pool, int deny, size_t i)
{
  TF_ASSERT_ARG(pool);
  return deny ? tf_pool__prefix_at(out, pool->peer_deny, pool->peer_deny_count, i, "spec.peerPolicy.deny")
              : tf_pool__prefix_at(out, pool->peer_allow, pool->peer_allow_count, i, "spec.peerPolicy.allow");
}

const char *tf_pool_name(const tf_pool *pool) { return pool && pool->name ? pool->name : ""; }

const char *tf_pool_namespace(const tf_pool *pool) { return pool && pool->ns ? pool->ns : ""; }

int64_t tf_pool_replicas(const tf_pool *pool) { return pool ? pool->replicas : 0; }

tf_mode tf_pool_mode(const tf_pool *pool) { return pool ? pool->mode : TF_MODE_HOST_NETWORK; }

tf_family tf_pool_family(const tf_pool *pool) { return pool ? pool->family : TF_FAMILY_IPV4; }

tf_port_range tf_pool_relay_port_range(const tf_pool *pool)
{
  tf_port_range none = {0, 0};
  return pool ? pool->range : none;
}

uint32_t tf_pool_relays_per_node(const tf_pool *pool) { return pool ? pool->relays_per_node : 0; }

size_t tf_pool_listener_count(const tf_pool *pool) { return pool ? pool->listener_count : 0; }

const char *tf_pool_listener_name(const tf_pool *pool, size_t i)
{
  return pool && i < pool->listener_count ? pool->listeners[i].name : NULL;
}

int tf_pool_listener_protocol(const tf_pool *pool, size_t i)
{
  return pool && i < pool->listener_count ? (int)pool->listeners[i].protocol : -1;
}

uint16_t tf_pool_listener_port(const tf_pool *pool, size_t i)
{
  return pool && i < pool->listener_count ? pool->listeners[i].port : 0;
}

const char *tf_pool_realm(const tf_pool *pool) { return pool && pool->realm ? pool->realm : ""; }

const char *tf_pool_coturn_version(const tf_pool *pool)
{
  return pool && pool->coturn_version ? pool->coturn_version : "";
}

int64_t tf_pool_drain_timeout_ms(const tf_pool *pool) { return pool ? pool->drain_timeout_ms : 0; }
