/* inventory: nodes from a Kubernetes NodeList (`kubectl get nodes -o json`).
 * Everything a node keeps lives in one arena owned by the tf_nodes, so a
 * 10,000-node inventory is a handful of allocations and one cheap free. */
#include <cjson/cJSON.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* ---- arena ---- */

#define TF__ARENA_CHUNK 65536u /* the largest chunk: the first is TF__ARENA_FIRST, each next one twice its size */
#define TF__ARENA_FIRST 2048u
#define TF__ARENA_ALIGN alignof(max_align_t)

struct tf_nodes__chunk {
  struct tf_nodes__chunk *next;
  size_t used;
  size_t cap;
  alignas(max_align_t) unsigned char data[];
};

static void *tf_arena__alloc(struct tf_nodes__chunk **head, size_t size)
{
  size = (size + TF__ARENA_ALIGN - 1) & ~(size_t)(TF__ARENA_ALIGN - 1);
  if (size == 0) size = TF__ARENA_ALIGN;
  struct tf_nodes__chunk *c = *head;
  if (!c || c->cap - c->used < size) {
    /* a few nodes take a few KiB, not a whole chunk: chunks grow with what the inventory holds */
    size_t step = !c ? TF__ARENA_FIRST : c->cap < TF__ARENA_CHUNK / 2 ? 2 * c->cap : TF__ARENA_CHUNK;
    int big = size > step / 4;
    size_t cap = big ? size : step;
    struct tf_nodes__chunk *n = malloc(sizeof(*n) + cap);
    if (!n) return NULL;
    n->used = 0;
    n->cap = cap;
    if (!big || !c) {
      n->next = c;
      *head = n;
    } else {
      /* a big block goes behind the current chunk so its free space stays usable */
      n->next = c->next;
      c->next = n;
    }
    c = n;
  }
  void *p = c->data + c->used;
  c->used += size;
  return p;
}

static char *tf_arena__strdup(struct tf_nodes__chunk **head, const char *s)
{
  size_t n = strlen(s) + 1;
  char *p = tf_arena__alloc(head, n);
  if (p) memcpy(p, s, n);
  return p;
}

static void tf_arena__free(struct tf_nodes__chunk *c)
{
  while (c) {
    struct tf_nodes__chunk *next = c->next;
    free(c);
    c = next;
  }
}

/* ---- helpers ---- */

/* Kubernetes node names are lowercase RFC 1123 subdomains. Checking them keeps
 * every name the planner writes out (JSON, pod specs) plain. */
int tf_inventory__valid_name(const char *s, size_t max)
{
  size_t n = strlen(s);
  if (n == 0 || n > max) return 0;
  size_t label = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (c == '.') {
      if (label == 0 || s[i - 1] == '-') return 0;
      label = 0;
      continue;
    }
    if (!alnum && c != '-') return 0;
    if (c == '-' && label == 0) return 0;
    if (++label > 63) return 0;
  }
  return s[n - 1] != '-' && s[n - 1] != '.';
}

static int tf_inventory__kv_cmp(const void *a, const void *b)
{
  return strcmp(((const tf_kv *)a)->key, ((const tf_kv *)b)->key);
}

static int tf_inventory__node_cmp(const void *a, const void *b)
{
  return strcmp(((const tf_node *)a)->name, ((const tf_node *)b)->name);
}

/* An optional member: absent and JSON null read the same. */
static const cJSON *tf_inventory__member(const cJSON *obj, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsNull(v) ? NULL : v;
}

/* Parse an annotation: comma-separated addresses, spaces around commas allowed. */
static tf_err tf_inventory__annotation(struct tf_nodes__chunk **arena, tf_addr **out, size_t *count,
                                       const cJSON *annotations, const char *key, size_t item,
                                       int one_per_family)
{
  const cJSON *v = tf_inventory__member(annotations, key);
  *out = NULL;
  *count = 0;
  if (!v) return TF_OK;
  if (!cJSON_IsString(v))
    return tf_error__set(TF_EINVALID, "items[%zu].metadata.annotations[\"%s\"]: must be a string", item, key);
  const char *s = v->valuestring;
  size_t n = 1;
  for (const char *p = s; *p; p++)
    if (*p == ',') n++;
  tf_addr *addrs = tf_arena__alloc(arena, n * sizeof(tf_addr));
  if (!addrs) return tf_error__nomem();
  const char *ws = " \t";
  size_t k = 0;
  const char *p = s + strspn(s, ws);
  if (*p == '\0') return TF_OK; /* an empty annotation lists nothing */
  tf_map seen; /* the address bytes: a 200,000-entry list stays linear */
  tf_map__init(&seen);
  int family_seen[2] = {0, 0};
  tf_err rc = tf_map__reserve(&seen, n);
  while (rc == TF_OK) {
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    const char *b = p + strspn(p, ws);
    const char *e = end;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t')) e--;
    if (e == b) {
      rc = tf_error__set(TF_EINVALID, "items[%zu].metadata.annotations[\"%s\"]: empty address in the list", item,
                         key);
      break;
    }
    char text[TF_ADDR_STRLEN + 1];
    size_t len = (size_t)(e - b);
    if (len >= sizeof(text) || (memcpy(text, b, len), text[len] = '\0', tf_addr_parse(&addrs[k], text) < 0)) {
      rc = tf_error__set(TF_EINVALID,
                         "items[%zu].metadata.annotations[\"%s\"]: \"%.*s\" is not an IPv4 or IPv6 address", item,
                         key, (int)(len > 64 ? 64 : len), b);
      break;
    }
    int v6 = addrs[k].family == TF_AF_INET6;
    if (one_per_family && family_seen[v6]) {
      rc = tf_error__set(TF_EINVALID, "items[%zu].metadata.annotations[\"%s\"]: two %s addresses", item, key,
                         v6 ? "IPv6" : "IPv4");
      break;
    }
    family_seen[v6] = 1;
    int fresh = tf_map__insert(&seen, addrs[k].family, (const char *)addrs[k].bytes, v6 ? 16 : 4, k, NULL);
    if (fresh < 0) {
      rc = fresh;
      break;
    }
    if (!fresh) {
      char buf[TF_ADDR_STRLEN];
      tf_addr_format(buf, sizeof(buf), &addrs[k]);
      rc = tf_error__set(TF_EINVALID, "items[%zu].metadata.annotations[\"%s\"]: %s is listed twice", item, key, buf);
      break;
    }
    k++;
    if (!comma) break;
    p = comma + 1;
  }
  tf_map__dispose(&seen);
  if (rc < 0) return rc;
  *out = addrs;
  *count = k;
  return TF_OK;
}

static tf_err tf_inventory__metadata(struct tf_nodes__chunk **arena, tf_node *node, const cJSON *item, size_t i)
{
  const cJSON *md = tf_inventory__member(item, "metadata");
  if (md && !cJSON_IsObject(md)) return tf_error__set(TF_EINVALID, "items[%zu].metadata: must be an object", i);
  const cJSON *name = md ? tf_inventory__member(md, "name") : NULL;
  if (!name) return tf_error__set(TF_EINVALID, "items[%zu].metadata.name: required", i);
  if (!cJSON_IsString(name)) return tf_error__set(TF_EINVALID, "items[%zu].metadata.name: must be a string", i);
  if (!tf_inventory__valid_name(name->valuestring, 253))
    return tf_error__set(TF_EINVALID,
                         "items[%zu].metadata.name: \"%.64s\" is not a valid node name (lowercase RFC 1123 subdomain)",
                         i, name->valuestring);
  node->name = tf_arena__strdup(arena, name->valuestring);
  if (!node->name) return tf_error__nomem();

  const cJSON *labels = tf_inventory__member(md, "labels");
  if (labels) {
    if (!cJSON_IsObject(labels)) return tf_error__set(TF_EINVALID, "items[%zu].metadata.labels: must be an object", i);
    size_t n = (size_t)cJSON_GetArraySize(labels);
    node->labels = tf_arena__alloc(arena, (n ? n : 1) * sizeof(tf_kv));
    if (!node->labels) return tf_error__nomem();
    const cJSON *l;
    cJSON_ArrayForEach(l, labels)
    {
      if (!cJSON_IsString(l))
        return tf_error__set(TF_EINVALID, "items[%zu].metadata.labels[\"%.200s\"]: must be a string", i, l->string);
      tf_kv *kv = &node->labels[node->label_count++];
      kv->key = tf_arena__strdup(arena, l->string);
      kv->value = tf_arena__strdup(arena, l->valuestring);
      if (!kv->key || !kv->value) return tf_error__nomem();
    }
    qsort(node->labels, node->label_count, sizeof(tf_kv), tf_inventory__kv_cmp);
  }

  const cJSON *ann = tf_inventory__member(md, "annotations");
  if (ann) {
    if (!cJSON_IsObject(ann))
      return tf_error__set(TF_EINVALID, "items[%zu].metadata.annotations: must be an object", i);
    tf_err rc;
    if ((rc = tf_inventory__annotation(arena, &node->relay_address, &node->relay_address_count, ann,
                                       TF_ANNOTATION_RELAY_ADDRESS, i, 1)) < 0 ||
        (rc = tf_inventory__annotation(arena, &node->external_addresses, &node->external_address_count, ann,
                                       TF_ANNOTATION_EXTERNAL_ADDRESSES, i, 0)) < 0 ||
        (rc = tf_inventory__annotation(arena, &node->pod_addresses, &node->pod_address_count, ann,
                                       TF_ANNOTATION_RELAY_POD_ADDRESSES, i, 0)) < 0)
      return rc;
  }
  return TF_OK;
}

static tf_err tf_inventory__spec(tf_node *node, const cJSON *item, size_t i)
{
  const cJSON *spec = tf_inventory__member(item, "spec");
  if (!spec) return TF_OK;
  if (!cJSON_IsObject(spec)) return tf_error__set(TF_EINVALID, "items[%zu].spec: must be an object", i);
  const cJSON *u = tf_inventory__member(spec, "unschedulable");
  if (u && !cJSON_IsBool(u)) return tf_error__set(TF_EINVALID, "items[%zu].spec.unschedulable: must be a boolean", i);
  node->unschedulable = cJSON_IsTrue(u);
  return TF_OK;
}

static tf_err tf_inventory__conditions(tf_node *node, const cJSON *status, size_t i)
{
  const cJSON *conds = tf_inventory__member(status, "conditions");
  if (!conds) return TF_OK;
  if (!cJSON_IsArray(conds)) return tf_error__set(TF_EINVALID, "items[%zu].status.conditions: must be a list", i);
  size_t j = 0;
  int seen = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, conds)
  {
    if (!cJSON_IsObject(c))
      return tf_error__set(TF_EINVALID, "items[%zu].status.conditions[%zu]: must be an object", i, j);
    const cJSON *type = tf_inventory__member(c, "type");
    if (!type) return tf_error__set(TF_EINVALID, "items[%zu].status.conditions[%zu].type: required", i, j);
    if (!cJSON_IsString(type))
      return tf_error__set(TF_EINVALID, "items[%zu].status.conditions[%zu].type: must be a string", i, j);
    if (strcmp(type->valuestring, "Ready") == 0) {
      const cJSON *st = tf_inventory__member(c, "status");
      if (!st) return tf_error__set(TF_EINVALID, "items[%zu].status.conditions[%zu].status: required", i, j);
      if (!cJSON_IsString(st))
        return tf_error__set(TF_EINVALID, "items[%zu].status.conditions[%zu].status: must be a string", i, j);
      int ready;
      if (strcmp(st->valuestring, "True") == 0) ready = 1;
      else if (strcmp(st->valuestring, "False") == 0) ready = 0;
      else if (strcmp(st->valuestring, "Unknown") == 0) ready = 0; /* NotReady: its node stopped reporting */
      else
        return tf_error__set(TF_EINVALID,
                             "items[%zu].status.conditions[%zu].status: \"%.64s\" is not True, False or Unknown", i,
                             j, st->valuestring);
      if (!seen) node->ready = ready; /* the first Ready condition counts */
      seen = 1;
    }
    j++;
  }
  return TF_OK;
}

static tf_err tf_inventory__addresses(struct tf_nodes__chunk **arena, tf_node *node, const cJSON *status, size_t i)
{
  const cJSON *addrs = tf_inventory__member(status, "addresses");
  if (!addrs) return TF_OK;
  if (!cJSON_IsArray(addrs)) return tf_error__set(TF_EINVALID, "items[%zu].status.addresses: must be a list", i);
  size_t n = (size_t)cJSON_GetArraySize(addrs);
  node->external_ips = tf_arena__alloc(arena, (n ? n : 1) * sizeof(tf_addr));
  node->internal_ips = tf_arena__alloc(arena, (n ? n : 1) * sizeof(tf_addr));
  if (!node->external_ips || !node->internal_ips) return tf_error__nomem();
  size_t j = 0;
  const cJSON *a;
  cJSON_ArrayForEach(a, addrs)
  {
    if (!cJSON_IsObject(a)) return tf_error__set(TF_EINVALID, "items[%zu].status.addresses[%zu]: must be an object", i, j);
    const cJSON *type = tf_inventory__member(a, "type");
    if (!type) return tf_error__set(TF_EINVALID, "items[%zu].status.addresses[%zu].type: required", i, j);
    if (!cJSON_IsString(type))
      return tf_error__set(TF_EINVALID, "items[%zu].status.addresses[%zu].type: must be a string", i, j);
    int external = strcmp(type->valuestring, "ExternalIP") == 0;
    if (external || strcmp(type->valuestring, "InternalIP") == 0) {
      const cJSON *v = tf_inventory__member(a, "address");
      if (!v) return tf_error__set(TF_EINVALID, "items[%zu].status.addresses[%zu].address: required", i, j);
      if (!cJSON_IsString(v))
        return tf_error__set(TF_EINVALID, "items[%zu].status.addresses[%zu].address: must be a string", i, j);
      tf_addr *dst = external ? &node->external_ips[node->external_ip_count] : &node->internal_ips[node->internal_ip_count];
      if (tf_addr_parse(dst, v->valuestring) < 0)
        return tf_error__set(TF_EINVALID, "items[%zu].status.addresses[%zu].address: \"%.64s\" is not an IPv4 or IPv6 address",
                             i, j, v->valuestring);
      if (external) node->external_ip_count++;
      else node->internal_ip_count++;
    }
    j++;
  }
  return TF_OK;
}

static tf_err tf_inventory__parse(tf_nodes *nodes, const cJSON *root)
{
  if (!cJSON_IsObject(root)) return tf_error__set(TF_EINVALID, "document: must be a NodeList object");
  const cJSON *kind = tf_inventory__member(root, "kind");
  if (kind && !cJSON_IsString(kind)) return tf_error__set(TF_EINVALID, "kind: must be a string");
  if (kind && strcmp(kind->valuestring, "List") != 0 && strcmp(kind->valuestring, "NodeList") != 0)
    return tf_error__set(TF_EINVALID, "kind: \"%.64s\" is not List or NodeList", kind->valuestring);
  const cJSON *items = tf_inventory__member(root, "items");
  if (!items) return tf_error__set(TF_EINVALID, "items: required");
  if (!cJSON_IsArray(items)) return tf_error__set(TF_EINVALID, "items: must be a list");

  size_t n = (size_t)cJSON_GetArraySize(items);
  nodes->items = tf_arena__alloc(&nodes->chunks, (n ? n : 1) * sizeof(tf_node));
  if (!nodes->items) return tf_error__nomem();
  tf_map seen; /* node names, found in document order */
  tf_map__init(&seen);
  tf_err rc = tf_map__reserve(&seen, n);
  if (rc < 0) return rc;
  size_t i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, items)
  {
    tf_node *node = &nodes->items[i];
    memset(node, 0, sizeof(*node));
    node->ready = -1;
    if (!cJSON_IsObject(item)) {
      rc = tf_error__set(TF_EINVALID, "items[%zu]: must be an object", i);
      break;
    }
    if ((rc = tf_inventory__metadata(&nodes->chunks, node, item, i)) < 0) break;
    int fresh = tf_map__insert(&seen, 0, node->name, strlen(node->name), i, NULL);
    if (fresh <= 0) {
      rc = fresh < 0 ? fresh : tf_error__set(TF_EINVALID, "items[%zu].metadata.name: duplicate node \"%s\"", i, node->name);
      break;
    }
    if ((rc = tf_inventory__spec(node, item, i)) < 0) break;
    const cJSON *status = tf_inventory__member(item, "status");
    if (status && !cJSON_IsObject(status)) {
      rc = tf_error__set(TF_EINVALID, "items[%zu].status: must be an object", i);
      break;
    }
    if (status && ((rc = tf_inventory__conditions(node, status, i)) < 0 ||
                   (rc = tf_inventory__addresses(&nodes->chunks, node, status, i)) < 0))
      break;
    i++;
  }
  tf_map__dispose(&seen);
  if (rc < 0) return rc;
  nodes->count = i;
  qsort(nodes->items, nodes->count, sizeof(tf_node), tf_inventory__node_cmp);
  return TF_OK;
}

tf_err tf_nodes_parse(tf_nodes **out, const char *json, size_t len)
{
  return tf_nodes_parse_with(out, json, len, NULL);
}

tf_err tf_nodes_parse_with(tf_nodes **out, const char *json, size_t len, const tf_parse_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(json || len == 0);
  *out = NULL;
  cJSON *root = NULL;
  tf_err rc = tf_doc__parse_json(&root, json ? json : "", len, opts);
  if (rc < 0) return rc;
  tf_nodes *nodes = calloc(1, sizeof(*nodes));
  if (!nodes) {
    cJSON_Delete(root);
    return tf_error__nomem();
  }
  rc = tf_inventory__parse(nodes, root);
  cJSON_Delete(root);
  if (rc < 0) {
    tf_nodes_free(nodes);
    return rc;
  }
  *out = nodes;
  return TF_OK;
}

tf_err tf_nodes_reserve_endpoint(tf_nodes *nodes, const tf_addr *addr, uint16_t port, const char *what)
{
  TF_ASSERT_ARG(nodes);
  TF_ASSERT_ARG(addr);
  TF_ASSERT_ARG(what);
  if (addr->family != TF_AF_INET && addr->family != TF_AF_INET6)
    return tf_error__set(TF_EINVALID, "addr: not an IPv4 or IPv6 address");
  if (port == 0) return tf_error__set(TF_EINVALID, "port: must be 1-65535");
  for (size_t i = 0; i < nodes->reserved_count; i++)
    if (nodes->reserved[i].port == port && tf_addr_compare(&nodes->reserved[i].addr, addr) == 0) return TF_OK;
  if (nodes->reserved_count == TF_NODES_RESERVED_MAX)
    return tf_error__set(TF_ERESOURCE, "at most %d reserved endpoints", TF_NODES_RESERVED_MAX);
  char *w = strdup(what);
  if (!w) return tf_error__nomem();
  nodes->reserved[nodes->reserved_count++] = (struct tf_nodes__reserved){*addr, port, w};
  return TF_OK;
}

/* The addresses of one subset's list (`addresses`, `notReadyAddresses`) into @p out. */
static tf_err tf_inventory__endpoint_ips(tf_addr *out, size_t *n, size_t cap, const cJSON *subset, size_t i,
                                         const char *list)
{
  const cJSON *arr = tf_inventory__member(subset, list);
  if (!arr) return TF_OK;
  if (!cJSON_IsArray(arr)) return tf_error__set(TF_EINVALID, "subsets[%zu].%s: must be a list", i, list);
  size_t j = 0;
  for (const cJSON *a = arr->child; a; a = a->next, j++) {
    const cJSON *ip = tf_inventory__member(a, "ip");
    if (*n == cap) return tf_error__set(TF_ERESOURCE, "subsets: more than %d endpoints", TF_NODES_RESERVED_MAX);
    if (!cJSON_IsString(ip) || tf_addr_parse(&out[*n], ip->valuestring) < 0)
      return tf_error__set(TF_EINVALID, "subsets[%zu].%s[%zu].ip: must be an IP address", i, list, j);
    (*n)++;
  }
  return TF_OK;
}

tf_err tf_nodes_reserve_endpoints(tf_nodes *nodes, const char *json, size_t len, const char *what)
{
  TF_ASSERT_ARG(nodes && (json || len == 0) && what);
  cJSON *root = NULL;
  tf_err rc = tf_doc__parse_json(&root, json ? json : "", len, NULL);
  if (rc < 0) return rc;
  /* collected first: nothing is reserved when any part is refused */
  struct {
    tf_addr addr;
    uint16_t port;
  } found[TF_NODES_RESERVED_MAX];
  size_t nfound = 0;
  const cJSON *subsets = tf_inventory__member(root, "subsets");
  if (!cJSON_IsObject(root)) rc = tf_error__set(TF_EINVALID, "endpoints: must be an object");
  else if (subsets && !cJSON_IsArray(subsets)) rc = tf_error__set(TF_EINVALID, "subsets: must be a list");
  size_t i = 0;
  for (const cJSON *sub = subsets ? subsets->child : NULL; rc == TF_OK && sub; sub = sub->next, i++) {
    tf_addr ips[TF_NODES_RESERVED_MAX];
    size_t nips = 0;
    rc = tf_inventory__endpoint_ips(ips, &nips, TF_NODES_RESERVED_MAX, sub, i, "addresses");
    if (rc == TF_OK) rc = tf_inventory__endpoint_ips(ips, &nips, TF_NODES_RESERVED_MAX, sub, i, "notReadyAddresses");
    const cJSON *ports = tf_inventory__member(sub, "ports");
    if (rc == TF_OK && ports && !cJSON_IsArray(ports)) rc = tf_error__set(TF_EINVALID, "subsets[%zu].ports: must be a list", i);
    size_t k = 0;
    for (const cJSON *p = ports ? ports->child : NULL; rc == TF_OK && p; p = p->next, k++) {
      const cJSON *port = tf_inventory__member(p, "port");
      if (!cJSON_IsNumber(port) || port->valuedouble < 1 || port->valuedouble > 65535 ||
          port->valuedouble != (double)(int)port->valuedouble) {
        rc = tf_error__set(TF_EINVALID, "subsets[%zu].ports[%zu].port: must be an integer 1-65535", i, k);
        break;
      }
      for (size_t a = 0; rc == TF_OK && a < nips; a++) {
        if (nfound == TF_NODES_RESERVED_MAX)
          rc = tf_error__set(TF_ERESOURCE, "subsets: more than %d endpoints", TF_NODES_RESERVED_MAX);
        else found[nfound].addr = ips[a], found[nfound++].port = (uint16_t)port->valueint;
      }
    }
  }
  cJSON_Delete(root);
  /* the room for all of them, then each (an endpoint already reserved takes none) */
  size_t room = TF_NODES_RESERVED_MAX - nodes->reserved_count;
  for (size_t f = 0; rc == TF_OK && f < nfound; f++) {
    int known = 0;
    for (size_t r = 0; r < nodes->reserved_count; r++)
      known |= nodes->reserved[r].port == found[f].port && tf_addr_compare(&nodes->reserved[r].addr, &found[f].addr) == 0;
    for (size_t g = 0; g < f; g++)
      known |= found[g].port == found[f].port && tf_addr_compare(&found[g].addr, &found[f].addr) == 0;
    if (!known && room-- == 0)
      rc = tf_error__set(TF_ERESOURCE, "at most %d reserved endpoints", TF_NODES_RESERVED_MAX);
  }
  for (size_t f = 0; rc == TF_OK && f < nfound; f++) rc = tf_nodes_reserve_endpoint(nodes, &found[f].addr, found[f].port, what);
  return rc;
}

void tf_nodes_free(tf_nodes *nodes)
{
  if (!nodes) return;
  for (size_t i = 0; i < nodes->reserved_count; i++) free(nodes->reserved[i].what);
  if (nodes->items_heap) free(nodes->items);
  tf_arena__free(nodes->chunks);
  free(nodes);
}

tf_err tf_nodes_new(tf_nodes **out)
{
  TF_ASSERT_ARG(out);
  *out = calloc(1, sizeof(**out));
  if (!*out) return tf_error__nomem();
  (*out)->items_heap = 1;
  return TF_OK;
}

static tf_addr *tf_inventory__addr_copy(struct tf_nodes__chunk **arena, const tf_addr *src, size_t n, int *ok)
{
  if (!n) return NULL;
  tf_addr *dst = tf_arena__alloc(arena, n * sizeof(tf_addr));
  if (dst) memcpy(dst, src, n * sizeof(tf_addr));
  else *ok = 0;
  return dst;
}

tf_err tf_node_info_init(tf_node_info *info, unsigned int version)
{
  TF_ASSERT_ARG(info);
  if (version == 0 || version > TF_NODE_INFO_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_node_info version (1-%d)", version, TF_NODE_INFO_VERSION);
  tf_node_info init = TF_NODE_INFO_INIT; /* one version so far: the whole struct is version 1's */
  *info = init;
  info->version = version;
  return TF_OK;
}

tf_err tf_nodes_add(tf_nodes *nodes, const tf_node_info *info)
{
  TF_ASSERT_ARG(nodes);
  TF_ASSERT_ARG(info);
  if (info->version == 0 || info->version > TF_NODE_INFO_VERSION)
    return tf_error__set(TF_EINVALID, "info.version: %u is not a tf_node_info version (1-%d)", info->version,
                         TF_NODE_INFO_VERSION);
  if (!info->name || !tf_inventory__valid_name(info->name, 253))
    return tf_error__set(TF_EINVALID, "info.name: \"%.64s\" is not a lowercase RFC 1123 subdomain",
                         info->name ? info->name : "");
  size_t at = 0;
  while (at < nodes->count && strcmp(nodes->items[at].name, info->name) < 0) at++;
  if (at < nodes->count && strcmp(nodes->items[at].name, info->name) == 0)
    return tf_error__set(TF_EINVALID, "info.name: duplicate node \"%s\"", info->name);
  if (info->label_count && (!info->label_keys || !info->label_values))
    return tf_error__set(TF_EINVALID, "info.label_keys: required with label_count");
  for (size_t i = 0; i < info->label_count; i++)
    if (!info->label_keys[i] || !info->label_values[i])
      return tf_error__set(TF_EINVALID, "info.label_keys[%zu]: a key and a value are required", i);
  for (size_t i = 0; i < info->relay_address_count; i++)
    for (size_t j = 0; j < i; j++)
      if (info->relay_addresses[i].family == info->relay_addresses[j].family)
        return tf_error__set(TF_EINVALID, "info.relay_addresses[%zu]: at most one address per family", i);
  /* room first, so that nothing is added on failure */
  if (!nodes->items_heap || nodes->count == nodes->cap) {
    size_t cap = nodes->cap > nodes->count ? nodes->cap : (nodes->count + 1) * 2;
    tf_node *grown = malloc(cap * sizeof(tf_node));
    if (!grown) return tf_error__nomem();
    if (nodes->count) memcpy(grown, nodes->items, nodes->count * sizeof(tf_node));
    if (nodes->items_heap) free(nodes->items);
    nodes->items = grown;
    nodes->items_heap = 1;
    nodes->cap = cap;
  }
  tf_node node;
  memset(&node, 0, sizeof(node));
  int ok = (node.name = tf_arena__strdup(&nodes->chunks, info->name)) != NULL;
  node.ready = info->ready < 0 ? -1 : info->ready ? 1 : 0;
  node.unschedulable = info->unschedulable ? 1 : 0;
  if (ok && info->label_count) {
    node.labels = tf_arena__alloc(&nodes->chunks, info->label_count * sizeof(tf_kv));
    ok = node.labels != NULL;
    for (size_t i = 0; ok && i < info->label_count; i++) {
      node.labels[i].key = tf_arena__strdup(&nodes->chunks, info->label_keys[i]);
      node.labels[i].value = tf_arena__strdup(&nodes->chunks, info->label_values[i]);
      ok = node.labels[i].key && node.labels[i].value;
    }
    node.label_count = info->label_count;
    if (ok) qsort(node.labels, node.label_count, sizeof(tf_kv), tf_inventory__kv_cmp);
  }
#define TF__COPY(dst, src, n)                                                 \
  node.dst = tf_inventory__addr_copy(&nodes->chunks, info->src, info->n, &ok); \
  node.n = info->n
  TF__COPY(internal_ips, internal_ips, internal_ip_count);
  TF__COPY(external_ips, external_ips, external_ip_count);
  TF__COPY(relay_address, relay_addresses, relay_address_count);
  TF__COPY(external_addresses, external_addresses, external_address_count);
  TF__COPY(pod_addresses, pod_addresses, pod_address_count);
#undef TF__COPY
  if (!ok) return tf_error__nomem(); /* the arena keeps the bytes until the inventory goes */
  memmove(&nodes->items[at + 1], &nodes->items[at], (nodes->count - at) * sizeof(tf_node));
  nodes->items[at] = node;
  nodes->count++;
  return TF_OK;
}

size_t tf_nodes_count(const tf_nodes *nodes) { return nodes ? nodes->count : 0; }

const char *tf_nodes_name(const tf_nodes *nodes, size_t i)
{
  return (nodes && i < nodes->count) ? nodes->items[i].name : NULL;
}

static const char *tf_inventory__label(const tf_node *node, const char *key)
{
  size_t lo = 0, hi = node->label_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(node->labels[mid].key, key);
    if (c == 0) return node->labels[mid].value;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

int tf_inventory__development(const tf_node *node)
{
  const char *v = tf_inventory__label(node, TF_LABEL_DEVELOPMENT);
  return v && !strcmp(v, "true");
}

const char *tf_inventory__excluded(const tf_node *node, const tf_pool *pool, const tf_kv **selector)
{
  *selector = NULL;
  if (node->unschedulable) return "cordoned";
  if (node->ready == 0) return "NotReady";
  for (size_t k = 0; k < pool->node_selector_count; k++) {
    const char *v = tf_inventory__label(node, pool->node_selector[k].key);
    if (!v || strcmp(v, pool->node_selector[k].value) != 0) {
      *selector = &pool->node_selector[k];
      return "nodeSelector";
    }
  }
  return NULL;
}

int tf_nodes_eligible(const tf_nodes *nodes, size_t i, const tf_pool *pool)
{
  if (!nodes || !pool || i >= nodes->count) return 0;
  const tf_kv *selector;
  return tf_inventory__excluded(&nodes->items[i], pool, &selector) == NULL;
}

static const tf_addr *tf_inventory__first(const tf_addr *addrs, size_t n, int af)
{
  for (size_t k = 0; k < n; k++)
    if (addrs[k].family == af) return &addrs[k];
  return NULL;
}

const tf_addr *tf_inventory__host_address(const tf_node *node, int af)
{
  const tf_addr *a = tf_inventory__first(node->relay_address, node->relay_address_count, af);
  if (!a) a = tf_inventory__first(node->external_ips, node->external_ip_count, af);
  if (!a) a = tf_inventory__first(node->internal_ips, node->internal_ip_count, af);
  return a;
}

tf_err tf_nodes_host_address(tf_addr *out, const tf_nodes *nodes, size_t i, int af)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(nodes);
  TF_ASSERT_ARG(i < nodes->count);
  TF_ASSERT_ARG(af == TF_AF_INET || af == TF_AF_INET6);
  const tf_addr *a = tf_inventory__host_address(&nodes->items[i], af);
  if (!a)
    return tf_error__set(TF_ENOTFOUND, "node \"%s\": no %s address", nodes->items[i].name,
                         af == TF_AF_INET ? "IPv4" : "IPv6");
  *out = *a;
  return TF_OK;
}
