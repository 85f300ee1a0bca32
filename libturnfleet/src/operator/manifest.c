/* manifest: the Kubernetes bodies of a pool, built as cJSON trees in a fixed
 * key order and printed once; and the relay Pod read back (its labels and
 * annotations are one contract, adapter_internal.h). Pure: no clock, no I/O.
 * Only the Secret body carries configs; it is built, printed and wiped here. */
#include <ctype.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "adapter_internal.h"
#include "internal.h"

#define TF_MAN__API "turnfleet.hzmi.dev/v1alpha1"
#define TF_MAN__DEFAULT_STATE_DIR "/var/lib/turnfleet"
#define TF_MAN__UID 65532
#define TF_MAN__GRACE_EXTRA_S 30

tf_err tf_manifest_options_init(tf_manifest_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version < 1 || version > TF_MANIFEST_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "options.version: %u is not a known version", version);
  opts->version = version;
  opts->pool_uid = NULL;
  opts->agent_image = NULL;
  opts->agent_port = 9700;
  opts->state_dir = NULL;
  if (version >= 2) opts->metrics_token = NULL;
  return TF_OK;
}

/* The caller's options read up to its version; defaults for the rest. */
static tf_err tf_man__options(tf_manifest_options *o, const tf_manifest_options *in)
{
  tf_manifest_options_init(o, TF_MANIFEST_OPTIONS_VERSION);
  if (!in) return tf_error__set(TF_EINVALID, "options: required");
  if (in->version < 1 || in->version > TF_MANIFEST_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "options.version: %u is not a tf_manifest_options version (1-%d)", in->version,
                         TF_MANIFEST_OPTIONS_VERSION);
  o->pool_uid = in->pool_uid;
  o->agent_image = in->agent_image;
  o->agent_port = in->agent_port;
  o->state_dir = in->state_dir ? in->state_dir : TF_MAN__DEFAULT_STATE_DIR;
  o->metrics_token = in->version >= 2 ? in->metrics_token : NULL;
  if (o->metrics_token) {
    size_t n = strspn(o->metrics_token, "0123456789abcdef");
    if (n != 64 || o->metrics_token[n]) /* never the value in the message: it is a secret */
      return tf_error__set(TF_EINVALID, "options.metrics_token: must be 64 lowercase hex digits");
  }
  if (!o->pool_uid || !*o->pool_uid) return tf_error__set(TF_EINVALID, "options.pool_uid: required");
  if (strlen(o->pool_uid) > 128) return tf_error__set(TF_EINVALID, "options.pool_uid: longer than 128 characters");
  for (const char *p = o->pool_uid; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '-')
      return tf_error__set(TF_EINVALID, "options.pool_uid: only letters, digits and '-' are allowed");
  if (o->state_dir[0] != '/' || strpbrk(o->state_dir, "\"'\\\n\r "))
    return tf_error__set(TF_EINVALID, "options.state_dir: must be an absolute path without quotes or spaces");
  return TF_OK;
}

/* ---- building: every add latches a failure in the builder ---- */

typedef struct tf_man__b {
  int failed;
} tf_man__b;

static cJSON *tf_man__put(tf_man__b *b, cJSON *parent, const char *key, cJSON *item)
{
  if (!item) {
    b->failed = 1;
    return NULL;
  }
  if (!parent) return item;
  cJSON_bool ok = key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item);
  if (!ok) {
    cJSON_Delete(item);
    b->failed = 1;
    return NULL;
  }
  return item;
}

/* A NULL parent (an earlier failure) makes every add a no-op that fails. */
static cJSON *tf_man__obj(tf_man__b *b, cJSON *parent, const char *key)
{
  return parent ? tf_man__put(b, parent, key, cJSON_CreateObject()) : (b->failed = 1, NULL);
}
static cJSON *tf_man__arr(tf_man__b *b, cJSON *parent, const char *key)
{
  return parent ? tf_man__put(b, parent, key, cJSON_CreateArray()) : (b->failed = 1, NULL);
}
static void tf_man__str(tf_man__b *b, cJSON *parent, const char *key, const char *v)
{
  if (parent) tf_man__put(b, parent, key, cJSON_CreateString(v));
  else b->failed = 1;
}
static void tf_man__num(tf_man__b *b, cJSON *parent, const char *key, int64_t v)
{
  if (parent) tf_man__put(b, parent, key, cJSON_CreateNumber((double)v));
  else b->failed = 1;
}
static void tf_man__bool(tf_man__b *b, cJSON *parent, const char *key, int v)
{
  if (parent) tf_man__put(b, parent, key, cJSON_CreateBool(v));
  else b->failed = 1;
}
/* A string array from a NULL-terminated list. */
static void tf_man__strs(tf_man__b *b, cJSON *parent, const char *key, const char *const *v)
{
  cJSON *a = tf_man__arr(b, parent, key);
  for (; *v; v++) tf_man__str(b, a, NULL, *v);
}

/* Print @p root (consumed) into *out. */
static tf_err tf_man__finish(tf_man__b *b, cJSON *root, char **out)
{
  char *text = (!b->failed && root) ? cJSON_Print(root) : NULL;
  cJSON_Delete(root);
  if (!text) return tf_error__nomem();
  *out = tf_strdup__(text);
  cJSON_free(text);
  return *out ? TF_OK : tf_error__nomem();
}

/* metadata {name, namespace, labels, [annotations], ownerReferences}; returns it. */
static cJSON *tf_man__metadata(tf_man__b *b, cJSON *root, const tf_pool *pool, const tf_manifest_options *o,
                               const char *name, const char *relay)
{
  (void)o;
  cJSON *md = tf_man__obj(b, root, "metadata");
  tf_man__str(b, md, "name", name);
  tf_man__str(b, md, "namespace", tf_pool_namespace(pool));
  cJSON *labels = tf_man__obj(b, md, "labels");
  tf_man__str(b, labels, "app.kubernetes.io/name", "turnfleet");
  tf_man__str(b, labels, "app.kubernetes.io/instance", tf_pool_name(pool));
  tf_man__str(b, labels, "app.kubernetes.io/managed-by", "turnfleet-operator");
  tf_man__str(b, labels, TF_POD__LABEL_POOL, tf_pool_name(pool));
  if (relay) tf_man__str(b, labels, TF_POD__LABEL_RELAY, relay);
  return md;
}

static void tf_man__owner(tf_man__b *b, cJSON *md, const tf_pool *pool, const tf_manifest_options *o)
{
  cJSON *refs = tf_man__arr(b, md, "ownerReferences");
  cJSON *ref = tf_man__obj(b, refs, NULL);
  tf_man__str(b, ref, "apiVersion", TF_MAN__API);
  tf_man__str(b, ref, "kind", "TURNPool");
  tf_man__str(b, ref, "name", tf_pool_name(pool));
  tf_man__str(b, ref, "uid", o->pool_uid);
  tf_man__bool(b, ref, "controller", 1);
  tf_man__bool(b, ref, "blockOwnerDeletion", 1);
}

/* Shared checks: a valid pool with a name, options. */
static tf_err tf_man__begin(tf_manifest_options *o, const tf_pool *pool, const tf_manifest_options *in)
{
  if (!pool) return tf_error__set(TF_EINVALID, "pool: required");
  if (!*tf_pool_name(pool)) return tf_error__set(TF_EINVALID, "metadata.name: required");
  tf_err rc = tf_pool_validate(NULL, pool);
  if (rc < 0) return rc;
  return tf_man__options(o, in);
}

/* ---- the relay Pod ---- */

static void tf_man__security(tf_man__b *b, cJSON *c, int bind_low)
{
  cJSON *sc = tf_man__obj(b, c, "securityContext");
  tf_man__bool(b, sc, "allowPrivilegeEscalation", 0);
  tf_man__bool(b, sc, "readOnlyRootFilesystem", 1);
  tf_man__bool(b, sc, "runAsNonRoot", 1);
  cJSON *caps = tf_man__obj(b, sc, "capabilities");
  static const char *const drop[] = {"ALL", NULL};
  static const char *const add[] = {"NET_BIND_SERVICE", NULL};
  tf_man__strs(b, caps, "drop", drop);
  if (bind_low) tf_man__strs(b, caps, "add", add);
}

static void tf_man__mounts(tf_man__b *b, cJSON *c, const char *run_dir, int tls)
{
  cJSON *mounts = tf_man__arr(b, c, "volumeMounts");
  if (tls) {
    cJSON *t = tf_man__obj(b, mounts, NULL);
    tf_man__str(b, t, "name", "tls");
    tf_man__str(b, t, "mountPath", "/etc/turnfleet-tls");
    tf_man__bool(b, t, "readOnly", 1);
  }
  cJSON *m = tf_man__obj(b, mounts, NULL);
  tf_man__str(b, m, "name", "config");
  /* the directory, not a subPath file: the key is projected as turnserver.conf in it */
  tf_man__str(b, m, "mountPath", "/etc/turnfleet");
  tf_man__bool(b, m, "readOnly", 1);
  m = tf_man__obj(b, mounts, NULL);
  tf_man__str(b, m, "name", "run");
  tf_man__str(b, m, "mountPath", run_dir);
}

const char *tf_manifest_tls_secret(const tf_pool *pool)
{
  for (size_t i = 0; pool && i < tf_pool_listener_count(pool); i++) {
    tf_protocol p = tf_pool_listener_protocol(pool, i);
    if ((p == TF_PROTOCOL_TLS || p == TF_PROTOCOL_DTLS) && tf_pool_listener_tls_secret(pool, i))
      return tf_pool_listener_tls_secret(pool, i);
  }
  return NULL;
}

/* "ADDR:PORT" or "[ADDR]:PORT". */
static void tf_man__host_port(char *buf, size_t size, const tf_addr *a, uint16_t port)
{
  char text[64];
  tf_addr_format(text, sizeof(text), a);
  snprintf(buf, size, a->family == TF_AF_INET6 ? "[%s]:%u" : "%s:%u", text, (unsigned)port);
}

tf_err tf_manifest_relay_pod(char **out, const tf_pool *pool, const tf_reconcile *rec, size_t relay,
                             const tf_manifest_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(rec);
  *out = NULL;
  tf_manifest_options o;
  tf_err rc = tf_man__begin(&o, pool, opts);
  if (rc < 0) return rc;
  if (!o.agent_image || !*o.agent_image) return tf_error__set(TF_EINVALID, "options.agent_image: required");
  if (o.agent_port == 0) return tf_error__set(TF_EINVALID, "options.agent_port: must be 1-65535");
  const char *name = tf_reconcile_relay_name(rec, relay);
  if (!name) return tf_error__set(TF_ENOTFOUND, "relay %zu: out of range", relay);
  const tf_relay *r = tf_plan_find(tf_reconcile_plan(rec), name);
  const char *hash = tf_reconcile_relay_config_hash(rec, relay);
  if (!(tf_reconcile_relay_flags(rec, relay) & TF_RELAY_PLANNED) || !r || !hash)
    return tf_error__set(TF_ENOTFOUND, "relay %s: not planned (a leaving relay keeps the pod it has)", name);

  /* Ports: the agent's (+ slice), listeners (+ slice already), the relay range. */
  uint32_t slice = tf_relay_slice(r), slices = tf_pool_relays_per_node(pool);
  tf_port_range range = tf_relay_port_range(r), pool_range = tf_pool_relay_port_range(pool);
  if ((uint32_t)o.agent_port + slices - 1 > 65535)
    return tf_error__set(TF_EINVALID, "options.agent_port: %u + %u slices is past 65535", o.agent_port, slices);
  uint16_t agent_port = (uint16_t)(o.agent_port + slice);
  if (o.agent_port + slices - 1 >= pool_range.start && o.agent_port <= pool_range.end)
    return tf_error__set(TF_EINVALID, "options.agent_port: %u is inside spec.relayPortRange %u-%u", o.agent_port,
                         pool_range.start, pool_range.end);
  int coturn_low = range.start < 1024;
  const char *tls_secret = tf_manifest_tls_secret(pool);
  for (size_t i = 0; i < tf_pool_listener_count(pool); i++) {
    uint16_t lp = tf_pool_listener_port(pool, i);
    if (tf_relay_listener_port(r, i) < 1024) coturn_low = 1;
    /* relays sharing an address use port + slice for each: keep the agent's and the listeners' apart */
    if ((uint32_t)o.agent_port < (uint32_t)lp + slices && (uint32_t)lp < (uint32_t)o.agent_port + slices)
      return tf_error__set(TF_EINVALID, "options.agent_port: %u collides with spec.listeners[%zu].port %u", o.agent_port,
                           i, lp);
  }
  uint16_t metrics_port = tf_reconcile_relay_metrics_port(rec, relay);
  if (metrics_port && metrics_port == agent_port)
    return tf_error__set(TF_EINVALID, "options.agent_port: %u is the relay's Prometheus port", agent_port);

  tf_addr addrs[2];
  size_t naddr = tf_relay_address_count(r);
  if (naddr < 1 || naddr > 2) return tf_error__set(TF_EINVALID, "relay %s: has %zu addresses", name, naddr);
  char addr_list[96] = "", listen[80];
  for (size_t i = 0; i < naddr; i++) {
    char text[64];
    tf_relay_address(&addrs[i], r, i);
    tf_addr_format(text, sizeof(text), &addrs[i]);
    if (i) strcat(addr_list, ",");
    strcat(addr_list, text);
  }
  tf_man__host_port(listen, sizeof(listen), &addrs[0], agent_port);
  char port_range[16], deadline_s[24];
  snprintf(port_range, sizeof(port_range), "%u-%u", range.start, range.end);
  int64_t drain_s = (tf_pool_drain_timeout_ms(pool) + 999) / 1000;
  snprintf(deadline_s, sizeof(deadline_s), "%" PRId64, drain_s);
  char *run_dir = tf_asprintf__("%s/%s", o.state_dir, name);
  char *marker = run_dir ? tf_asprintf__("%s/drained", run_dir) : NULL;
  char *conf_key = tf_asprintf__("%s.conf", name);
  char *secret_name = tf_asprintf__("%s-relay-config", tf_pool_name(pool));
  /* The coturn container's preStop runs only for a pod being deleted (it has no probe the kubelet could kill it
   * for): it asks for the drain with a fresh id in `stopping` and waits for the marker that answers that id.
   * The agent's preStop, which a liveness kill also runs, drains only when that request is there. */
  char *wait_cmd = marker ? tf_asprintf__("id=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || echo \"$$-$(date +%%s)\"); "
                                          "echo \"$id\" > '%s/stopping.new' && mv -f '%s/stopping.new' '%s/stopping'; "
                                          "until grep -qx \"request=$id\" '%s' 2>/dev/null; do sleep 1; done",
                                          run_dir, run_dir, run_dir, marker)
                          : NULL;
  char *networks = NULL;
  int pod_ip = tf_pool_mode(pool) == TF_MODE_POD_IP;
  tf_man__b b = {0};
  if (!run_dir || !marker || !conf_key || !secret_name || !wait_cmd) b.failed = 1;

  /* Multus: ask the attachment for exactly the relay's addresses */
  const char *network = tf_pool_pod_network(pool);
  if (!b.failed && pod_ip && network && *network) {
    const char *slash = strchr(network, '/');
    cJSON *list = cJSON_CreateArray();
    cJSON *att = tf_man__obj(&b, list, NULL);
    char *ns = slash ? tf_strndup__(network, (size_t)(slash - network)) : NULL;
    tf_man__str(&b, att, "name", slash ? slash + 1 : network);
    tf_man__str(&b, att, "namespace", ns ? ns : tf_pool_namespace(pool));
    free(ns);
    cJSON *ips = tf_man__arr(&b, att, "ips");
    for (size_t i = 0; i < naddr; i++) {
      char text[64], cidr[72];
      tf_addr_format(text, sizeof(text), &addrs[i]);
      snprintf(cidr, sizeof(cidr), "%s/%d", text, addrs[i].family == TF_AF_INET6 ? 128 : 32);
      tf_man__str(&b, ips, NULL, cidr);
    }
    char *printed = (!b.failed && list) ? cJSON_PrintUnformatted(list) : NULL;
    networks = printed ? tf_strdup__(printed) : NULL;
    cJSON_free(printed);
    cJSON_Delete(list);
    if (!networks) b.failed = 1;
  }

  cJSON *root = cJSON_CreateObject();
  if (!root) b.failed = 1;
  tf_man__str(&b, root, "apiVersion", "v1");
  tf_man__str(&b, root, "kind", "Pod");
  cJSON *md = tf_man__metadata(&b, root, pool, &o, name, name);
  cJSON *ann = tf_man__obj(&b, md, "annotations");
  tf_man__str(&b, ann, TF_POD__ANN_ADDRESS, addr_list);
  tf_man__str(&b, ann, TF_POD__ANN_PORTS, port_range);
  tf_man__str(&b, ann, TF_POD__ANN_HASH, hash);
  /* its CLI port, so that the relays of other pools on its node are checked against it */
  char cli_port[8];
  snprintf(cli_port, sizeof(cli_port), "%u", (unsigned)tf_reconcile_relay_cli_port(rec, relay));
  if (cli_port[0] != '0') tf_man__str(&b, ann, TF_POD__ANN_CLI_PORT, cli_port);
  if (networks) tf_man__str(&b, ann, "k8s.v1.cni.cncf.io/networks", networks);
  tf_man__owner(&b, md, pool, &o);

  cJSON *spec = tf_man__obj(&b, root, "spec");
  tf_man__str(&b, spec, "nodeName", tf_relay_node(r));
  if (!pod_ip) {
    tf_man__bool(&b, spec, "hostNetwork", 1);
    tf_man__str(&b, spec, "dnsPolicy", "ClusterFirstWithHostNet");
  }
  tf_man__str(&b, spec, "restartPolicy", "Always");
  tf_man__num(&b, spec, "terminationGracePeriodSeconds", drain_s + TF_MAN__GRACE_EXTRA_S);
  tf_man__bool(&b, spec, "automountServiceAccountToken", 0);
  /* the agent checks that the CLI listener is coturn's (the PID in its pidfile) before it sends the password */
  tf_man__bool(&b, spec, "shareProcessNamespace", 1);
  tf_man__bool(&b, spec, "enableServiceLinks", 0);
  cJSON *gates = tf_man__arr(&b, spec, "readinessGates");
  tf_man__str(&b, tf_man__obj(&b, gates, NULL), "conditionType", TF_MANIFEST_READINESS_GATE);
  cJSON *psc = tf_man__obj(&b, spec, "securityContext");
  tf_man__bool(&b, psc, "runAsNonRoot", 1);
  tf_man__num(&b, psc, "runAsUser", TF_MAN__UID);
  tf_man__num(&b, psc, "runAsGroup", TF_MAN__UID);
  tf_man__num(&b, psc, "fsGroup", TF_MAN__UID);
  tf_man__str(&b, tf_man__obj(&b, psc, "seccompProfile"), "type", "RuntimeDefault");

  cJSON *containers = tf_man__arr(&b, spec, "containers");
  cJSON *c = tf_man__obj(&b, containers, NULL);
  tf_man__str(&b, c, "name", "coturn");
  tf_man__str(&b, c, "image", tf_pool_image(pool));
  const char *const coturn_cmd[] = {"turnserver", "-c", TF_MANIFEST_CONFIG_PATH, NULL};
  tf_man__strs(&b, c, "command", coturn_cmd);
  const char *const coturn_stop[] = {"/bin/sh", "-c", wait_cmd ? wait_cmd : "", NULL};
  tf_man__strs(&b, tf_man__obj(&b, tf_man__obj(&b, tf_man__obj(&b, c, "lifecycle"), "preStop"), "exec"), "command",
               coturn_stop);
  tf_man__mounts(&b, c, run_dir ? run_dir : "", tls_secret != NULL);
  tf_man__security(&b, c, coturn_low);

  c = tf_man__obj(&b, containers, NULL);
  tf_man__str(&b, c, "name", "agent");
  tf_man__str(&b, c, "image", o.agent_image);
  /* the token's file, never the token: argv is readable by anyone who lists the pod */
  const char *const agent_cmd[] = {"turnfleet", "agent", "--config", TF_MANIFEST_CONFIG_PATH, "--coturn-version",
                                   tf_pool_coturn_version(pool), "--listen", listen, "--namespace",
                                   tf_pool_namespace(pool), "--pool", tf_pool_name(pool), "--relay", name,
                                   o.metrics_token ? "--metrics-token-file" : NULL, TF_MANIFEST_METRICS_TOKEN_PATH,
                                   NULL};
  tf_man__strs(&b, c, "command", agent_cmd);
  const char *const agent_stop[] = {"turnfleet", "agent", "prestop", "--config", TF_MANIFEST_CONFIG_PATH,
                                    "--coturn-version", tf_pool_coturn_version(pool), "--marker", marker ? marker : "",
                                    "--deadline", deadline_s, NULL};
  tf_man__strs(&b, tf_man__obj(&b, tf_man__obj(&b, tf_man__obj(&b, c, "lifecycle"), "preStop"), "exec"), "command",
               agent_stop);
  cJSON *ports = tf_man__arr(&b, c, "ports");
  cJSON *p = tf_man__obj(&b, ports, NULL);
  tf_man__str(&b, p, "name", "agent");
  tf_man__num(&b, p, "containerPort", agent_port);
  tf_man__str(&b, p, "protocol", "TCP");
  {
    /* an exec of the agent's heartbeat check, not an HTTP GET: no connection to the agent's public port,
     * so no flood of it can fail the probe (and a Multus address the node cannot reach does not matter) */
    cJSON *live = tf_man__obj(&b, c, "livenessProbe");
    const char *const check[] = {"turnfleet", "agent", "healthz", "--config", TF_MANIFEST_CONFIG_PATH, NULL};
    tf_man__strs(&b, tf_man__obj(&b, live, "exec"), "command", check);
    tf_man__num(&b, live, "periodSeconds", 10);
    tf_man__num(&b, live, "timeoutSeconds", 5);
    tf_man__num(&b, live, "failureThreshold", 3);
  }
  tf_man__mounts(&b, c, run_dir ? run_dir : "", 0);
  if (o.metrics_token) {
    /* the token for the agent alone: coturn's container does not mount it */
    cJSON *t = tf_man__obj(&b, cJSON_GetObjectItemCaseSensitive(c, "volumeMounts"), NULL);
    tf_man__str(&b, t, "name", "metrics-token");
    tf_man__str(&b, t, "mountPath", "/etc/turnfleet-agent");
    tf_man__bool(&b, t, "readOnly", 1);
  }
  tf_man__security(&b, c, agent_port < 1024);

  cJSON *vols = tf_man__arr(&b, spec, "volumes");
  cJSON *v = tf_man__obj(&b, vols, NULL);
  tf_man__str(&b, v, "name", "config");
  cJSON *sv = tf_man__obj(&b, v, "secret");
  tf_man__str(&b, sv, "secretName", secret_name ? secret_name : "");
  tf_man__num(&b, sv, "defaultMode", 0400);
  cJSON *item = tf_man__obj(&b, tf_man__arr(&b, sv, "items"), NULL);
  tf_man__str(&b, item, "key", conf_key ? conf_key : "");
  tf_man__str(&b, item, "path", "turnserver.conf");
  v = tf_man__obj(&b, vols, NULL);
  tf_man__str(&b, v, "name", "run");
  tf_man__str(&b, tf_man__obj(&b, v, "emptyDir"), "medium", "Memory");
  if (o.metrics_token) {
    v = tf_man__obj(&b, vols, NULL);
    tf_man__str(&b, v, "name", "metrics-token");
    sv = tf_man__obj(&b, v, "secret");
    tf_man__str(&b, sv, "secretName", secret_name ? secret_name : "");
    tf_man__num(&b, sv, "defaultMode", 0400);
    item = tf_man__obj(&b, tf_man__arr(&b, sv, "items"), NULL);
    tf_man__str(&b, item, "key", TF_MANIFEST_METRICS_TOKEN_KEY);
    tf_man__str(&b, item, "path", "metrics-token");
  }
  if (tls_secret) {
    v = tf_man__obj(&b, vols, NULL);
    tf_man__str(&b, v, "name", "tls");
    sv = tf_man__obj(&b, v, "secret");
    tf_man__str(&b, sv, "secretName", tls_secret);
    tf_man__num(&b, sv, "defaultMode", 0440);
    cJSON *items = tf_man__arr(&b, sv, "items");
    static const char *const keys[] = {"tls.crt", "tls.key"};
    for (size_t k = 0; k < 2; k++) {
      item = tf_man__obj(&b, items, NULL);
      tf_man__str(&b, item, "key", keys[k]);
      tf_man__str(&b, item, "path", keys[k]);
    }
  }

  rc = tf_man__finish(&b, root, out);
  free(run_dir);
  free(marker);
  free(conf_key);
  free(secret_name);
  free(wait_cmd);
  free(networks);
  return rc;
}

/* ---- the relay-config Secret ---- */

/* base64 of @p text (secret): wiped by the caller with tf_crypto__wipe + free. */
static char *tf_man__base64(const char *text, size_t *out_len)
{
  size_t n = strlen(text);
  size_t cap = 4 * ((n + 2) / 3) + 1;
  char *enc = malloc(cap);
  if (!enc) return NULL;
  int len = EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)text, (int)n);
  *out_len = (size_t)len + 1;
  return enc;
}

/* Wipe every string value under @p node (the configs' base64). */
static void tf_man__wipe_tree(cJSON *node)
{
  for (cJSON *c = node; c; c = c->next) {
    if (cJSON_IsString(c) && c->valuestring) tf_crypto__wipe(c->valuestring, strlen(c->valuestring));
    if (c->child) tf_man__wipe_tree(c->child);
  }
}

tf_err tf_manifest_relay_config_secret(char **out, const tf_pool *pool, const tf_reconcile *rec, const char *observed,
                                       size_t observed_len, const tf_manifest_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(rec);
  *out = NULL;
  tf_manifest_options o;
  tf_err rc = tf_man__begin(&o, pool, opts);
  if (rc < 0) return rc;
  cJSON *seen = NULL, *seen_data = NULL;
  if (observed) {
    if ((rc = tf_doc__parse_json(&seen, observed, observed_len, NULL)) < 0) return rc;
    seen_data = cJSON_GetObjectItemCaseSensitive(seen, "data");
    if (seen_data && !cJSON_IsObject(seen_data) && !cJSON_IsNull(seen_data)) {
      tf_man__wipe_tree(seen);
      cJSON_Delete(seen);
      return tf_error__set(TF_EINVALID, "observed.data: must be an object");
    }
  }
  tf_man__b b = {0};
  char *name = tf_asprintf__("%s-relay-config", tf_pool_name(pool));
  cJSON *root = cJSON_CreateObject();
  if (!name || !root) b.failed = 1;
  tf_man__str(&b, root, "apiVersion", "v1");
  tf_man__str(&b, root, "kind", "Secret");
  cJSON *md = tf_man__metadata(&b, root, pool, &o, name ? name : "", NULL);
  tf_man__owner(&b, md, pool, &o);
  tf_man__str(&b, root, "type", "Opaque");
  cJSON *data = tf_man__obj(&b, root, "data");
  /* relays come sorted by name, so the keys are too */
  for (size_t i = 0; i < tf_reconcile_relay_count(rec) && !b.failed; i++) {
    const char *relay = tf_reconcile_relay_name(rec, i);
    const char *config = tf_reconcile_relay_config(rec, i);
    char key[TF_RELAY_NAME_MAX + 8];
    snprintf(key, sizeof(key), "%s.conf", relay);
    if (config) {
      size_t elen = 0;
      char *enc = tf_man__base64(config, &elen);
      if (!enc) {
        b.failed = 1;
        break;
      }
      tf_man__str(&b, data, key, enc);
      tf_crypto__wipe(enc, elen);
      free(enc);
    } else {
      /* leaving: keep what its pod mounts, if it is there */
      cJSON *kept = seen_data ? cJSON_GetObjectItemCaseSensitive(seen_data, key) : NULL;
      if (kept && !cJSON_IsString(kept)) {
        rc = tf_error__set(TF_EINVALID, "observed.data.%s: must be a string", key);
        break;
      }
      if (kept) tf_man__str(&b, data, key, kept->valuestring);
    }
  }
  /* the pool's metrics token: the one given, else the one its agents already mount */
  cJSON *token = seen_data ? cJSON_GetObjectItemCaseSensitive(seen_data, TF_MANIFEST_METRICS_TOKEN_KEY) : NULL;
  if (rc == TF_OK && !b.failed && o.metrics_token) {
    size_t elen = 0;
    char *enc = tf_man__base64(o.metrics_token, &elen);
    if (!enc) b.failed = 1;
    else tf_man__str(&b, data, TF_MANIFEST_METRICS_TOKEN_KEY, enc);
    if (enc) tf_crypto__wipe(enc, elen);
    free(enc);
  } else if (rc == TF_OK && token) {
    if (!cJSON_IsString(token)) rc = tf_error__set(TF_EINVALID, "observed.data.%s: must be a string",
                                                   TF_MANIFEST_METRICS_TOKEN_KEY);
    else tf_man__str(&b, data, TF_MANIFEST_METRICS_TOKEN_KEY, token->valuestring);
  }
  if (seen) {
    tf_man__wipe_tree(seen);
    cJSON_Delete(seen);
  }
  free(name);
  if (rc < 0) {
    tf_man__wipe_tree(root);
    cJSON_Delete(root);
    return rc;
  }
  char *text = (!b.failed && root) ? cJSON_Print(root) : NULL;
  tf_man__wipe_tree(root);
  cJSON_Delete(root);
  if (!text) return tf_error__nomem();
  *out = tf_strdup__(text);
  tf_crypto__wipe(text, strlen(text));
  cJSON_free(text);
  return *out ? TF_OK : tf_error__nomem();
}

/* ---- the turn-uris ConfigMap ---- */

tf_err tf_manifest_turn_uris(char **out, const tf_pool *pool, const tf_reconcile *rec, const tf_manifest_options *opts)
{
  TF_ASSERT_ARG(out);
  TF_ASSERT_ARG(rec);
  *out = NULL;
  tf_manifest_options o;
  tf_err rc = tf_man__begin(&o, pool, opts);
  if (rc < 0) return rc;
  char *ice = NULL;
  if ((rc = tf_reconcile_ice_servers_json(&ice, rec)) < 0) return rc;
  tf_buf uris;
  tf_buf__init(&uris);
  for (size_t i = 0; i < tf_reconcile_uri_count(rec); i++) {
    tf_buf__puts(&uris, tf_reconcile_uri(rec, i));
    tf_buf__puts(&uris, "\n");
  }
  tf_buf__puts(&uris, "");
  tf_man__b b = {0};
  char *name = tf_asprintf__("%s-turn-uris", tf_pool_name(pool));
  cJSON *root = cJSON_CreateObject();
  if (!name || !root || uris.failed) b.failed = 1;
  tf_man__str(&b, root, "apiVersion", "v1");
  tf_man__str(&b, root, "kind", "ConfigMap");
  cJSON *md = tf_man__metadata(&b, root, pool, &o, name ? name : "", NULL);
  tf_man__owner(&b, md, pool, &o);
  cJSON *data = tf_man__obj(&b, root, "data");
  tf_man__str(&b, data, "iceServers.json", ice);
  tf_man__str(&b, data, "uris", uris.ptr ? uris.ptr : "");
  free(name);
  tf_free(ice);
  tf_buf__dispose(&uris, 0);
  return tf_man__finish(&b, root, out);
}

/* ---- the status body ---- */

tf_err tf_manifest_status(char **out, const tf_pool *pool, const char *status_json, size_t len, int64_t generation)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  if (!pool) return tf_error__set(TF_EINVALID, "pool: required");
  if (!status_json) return tf_error__set(TF_EINVALID, "status: required");
  if (generation < 0) return tf_error__set(TF_EINVALID, "generation: must be >= 0, got %" PRId64, generation);
  cJSON *in = NULL;
  tf_err rc = tf_doc__parse_json(&in, status_json, len, NULL);
  if (rc < 0) return rc;
  /* a whole object with a status, or the status itself */
  cJSON *st = cJSON_GetObjectItemCaseSensitive(in, "status");
  if (!cJSON_IsObject(st)) st = in;
  cJSON *relays = cJSON_GetObjectItemCaseSensitive(st, "relays");
  cJSON *conds = cJSON_GetObjectItemCaseSensitive(st, "conditions");
  if (!cJSON_IsObject(st)) rc = tf_error__set(TF_EINVALID, "status: must be an object");
  else if (!cJSON_IsArray(relays)) rc = tf_error__set(TF_EINVALID, "status.relays: must be an array");
  else if (!cJSON_IsArray(conds)) rc = tf_error__set(TF_EINVALID, "status.conditions: must be an array");
  int64_t ready = 0;
  size_t i = 0;
  for (cJSON *r = relays ? relays->child : NULL; rc == 0 && r; r = r->next, i++) {
    cJSON *name = cJSON_GetObjectItemCaseSensitive(r, "name");
    if (!cJSON_IsObject(r) || !cJSON_IsString(name))
      rc = tf_error__set(TF_EINVALID, "status.relays[%zu].name: must be a string", i);
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ready")))
      ready++;
  }
  i = 0;
  for (cJSON *c = conds ? conds->child : NULL; rc == 0 && c; c = c->next, i++) {
    if (!cJSON_IsObject(c) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "type")))
      rc = tf_error__set(TF_EINVALID, "status.conditions[%zu].type: must be a string", i);
  }
  if (rc < 0) {
    cJSON_Delete(in);
    return rc;
  }
  tf_man__b b = {0};
  char *selector = tf_asprintf__(TF_POD__LABEL_POOL "=%s", tf_pool_name(pool));
  cJSON *root = cJSON_CreateObject();
  if (!root || !selector) b.failed = 1;
  cJSON *s = tf_man__obj(&b, root, "status");
  tf_man__num(&b, s, "observedGeneration", generation);
  tf_man__num(&b, s, "replicas", tf_pool_replicas(pool));
  tf_man__num(&b, s, "readyRelays", ready);
  /* the published URIs as the status JSON lists them (what turn-uris says) */
  cJSON *uris = cJSON_GetObjectItemCaseSensitive(st, "turnURIs");
  cJSON *ul = tf_man__arr(&b, s, "turnURIs");
  for (cJSON *u = cJSON_IsArray(uris) ? uris->child : NULL; u && ul; u = u->next)
    if (cJSON_IsString(u)) tf_man__put(&b, ul, NULL, cJSON_CreateString(u->valuestring));
  tf_man__str(&b, s, "selector", selector ? selector : "");
  cJSON *rel = cJSON_DetachItemViaPointer(st, relays);
  if (s && rel) cJSON_AddItemToObject(s, "relays", rel);
  else cJSON_Delete(rel), b.failed = 1;
  cJSON *cl = tf_man__arr(&b, s, "conditions");
  for (cJSON *c = conds->child; c && cl; c = c->next) {
    cJSON *copy = tf_man__obj(&b, cl, NULL);
    static const char *const keys[] = {"type", "status", "reason", "message", "lastTransitionTime"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]) && copy; k++) {
      cJSON *v = cJSON_GetObjectItemCaseSensitive(c, keys[k]);
      if (v) tf_man__put(&b, copy, keys[k], cJSON_Duplicate(v, 1));
    }
    tf_man__num(&b, copy, "observedGeneration", generation);
  }
  /* a pool whose relays all drain (it is being deleted): what is left and until when */
  cJSON *sd = cJSON_GetObjectItemCaseSensitive(st, "shutdown");
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "stopping")) && cJSON_IsObject(sd)) {
    cJSON *yes = cJSON_CreateTrue();
    if (s && yes) cJSON_AddItemToObject(s, "stopping", yes);
    else cJSON_Delete(yes), b.failed = 1;
    tf_man__put(&b, s, "shutdown", cJSON_Duplicate(sd, 1));
  }
  cJSON_Delete(in);
  free(selector);
  return tf_man__finish(&b, root, out);
}

/* ---- Events ---- */

/* "YYYY-MM-DDTHH:MM:SSZ" */
static int tf_man__rfc3339(const char *t)
{
  static const char shape[] = "dddd-dd-ddTdd:dd:ddZ";
  if (!t || strlen(t) != sizeof(shape) - 1) return 0;
  for (size_t i = 0; shape[i]; i++)
    if (shape[i] == 'd' ? !isdigit((unsigned char)t[i]) : t[i] != shape[i]) return 0;
  return 1;
}

tf_err tf_manifest_event_init(tf_manifest_event *ev, unsigned int version)
{
  TF_ASSERT_ARG(ev);
  if (version == 0 || version > TF_MANIFEST_EVENT_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_manifest_event version (1-%d)", version,
                         TF_MANIFEST_EVENT_VERSION);
  tf_manifest_event init = TF_MANIFEST_EVENT_INIT; /* one version so far: the whole struct is version 1's */
  *ev = init;
  ev->version = version;
  return TF_OK;
}

tf_err tf_manifest_event_body(char **out, const tf_pool *pool, const tf_manifest_event *ev,
                              const tf_manifest_options *opts)
{
  TF_ASSERT_ARG(out);
  *out = NULL;
  tf_manifest_options o;
  tf_err rc = tf_man__begin(&o, pool, opts);
  if (rc < 0) return rc;
  if (!ev) return tf_error__set(TF_EINVALID, "event: required");
  if (ev->version < 1 || ev->version > TF_MANIFEST_EVENT_VERSION)
    return tf_error__set(TF_EINVALID, "event.version: %u is not a tf_manifest_event version (1-%d)", ev->version,
                         TF_MANIFEST_EVENT_VERSION);
  if (!ev->type || (strcmp(ev->type, "Normal") != 0 && strcmp(ev->type, "Warning") != 0))
    return tf_error__set(TF_EINVALID, "event.type: must be Normal or Warning");
  size_t rlen = ev->reason ? strlen(ev->reason) : 0;
  if (rlen < 1 || rlen > 128 || !isupper((unsigned char)ev->reason[0]))
    return tf_error__set(TF_EINVALID, "event.reason: must be CamelCase, 1-128 characters");
  for (size_t i = 0; i < rlen; i++)
    if (!isalnum((unsigned char)ev->reason[i]))
      return tf_error__set(TF_EINVALID, "event.reason: only letters and digits are allowed");
  if (!ev->message) return tf_error__set(TF_EINVALID, "event.message: required");
  if (strlen(ev->message) > 1024) return tf_error__set(TF_EINVALID, "event.message: longer than 1024 bytes");
  if (ev->count < 1) return tf_error__set(TF_EINVALID, "event.count: must be >= 1");
  if (!tf_man__rfc3339(ev->first_time))
    return tf_error__set(TF_EINVALID, "event.first_time: must be RFC 3339 UTC (2024-05-01T12:00:00Z)");
  const char *last = ev->last_time ? ev->last_time : ev->first_time;
  if (!tf_man__rfc3339(last))
    return tf_error__set(TF_EINVALID, "event.last_time: must be RFC 3339 UTC (2024-05-01T12:00:00Z)");

  /* the name: the same event again is the same object */
  unsigned char digest[SHA256_DIGEST_LENGTH];
  tf_buf key;
  tf_buf__init(&key);
  tf_buf__printf(&key, "%s\n%s\n%s\n%s", o.pool_uid, ev->type, ev->reason, ev->message);
  if (key.failed) {
    tf_buf__dispose(&key, 0);
    return tf_error__nomem();
  }
  SHA256((const unsigned char *)key.ptr, key.len, digest);
  tf_buf__dispose(&key, 0);
  char *name = tf_asprintf__("%s.%02x%02x%02x%02x%02x%02x%02x%02x", tf_pool_name(pool), digest[0], digest[1],
                             digest[2], digest[3], digest[4], digest[5], digest[6], digest[7]);

  tf_man__b b = {0};
  cJSON *root = cJSON_CreateObject();
  if (!root || !name) b.failed = 1;
  tf_man__str(&b, root, "apiVersion", "v1");
  tf_man__str(&b, root, "kind", "Event");
  tf_man__metadata(&b, root, pool, &o, name ? name : "", NULL);
  cJSON *inv = tf_man__obj(&b, root, "involvedObject");
  tf_man__str(&b, inv, "apiVersion", TF_MAN__API);
  tf_man__str(&b, inv, "kind", "TURNPool");
  tf_man__str(&b, inv, "name", tf_pool_name(pool));
  tf_man__str(&b, inv, "namespace", tf_pool_namespace(pool));
  tf_man__str(&b, inv, "uid", o.pool_uid);
  tf_man__str(&b, root, "reason", ev->reason);
  tf_man__str(&b, root, "message", ev->message);
  tf_man__str(&b, root, "type", ev->type);
  tf_man__num(&b, root, "count", ev->count);
  tf_man__str(&b, root, "firstTimestamp", ev->first_time);
  tf_man__str(&b, root, "lastTimestamp", last);
  tf_man__str(&b, tf_man__obj(&b, root, "source"), "component", "turnfleet-operator");
  tf_man__str(&b, root, "reportingComponent", "turnfleet-operator");
  free(name);
  return tf_man__finish(&b, root, out);
}

/* ---- desired vs observed ---- */

static int tf_man__match(tf_buf *path, const cJSON *want, const cJSON *have, int exact_keys);

static int tf_man__match_member(tf_buf *path, const cJSON *w, const cJSON *have)
{
  size_t mark = path->len;
  if (mark) tf_buf__puts(path, ".");
  tf_buf__puts(path, w->string);
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(have, w->string);
  /* under data/stringData every key is owned: the observed one must have exactly these */
  int owned = !strcmp(w->string, "data") || !strcmp(w->string, "stringData");
  int ok = h && tf_man__match(path, w, h, owned);
  if (ok) {
    path->len = mark;
    if (path->ptr) path->ptr[mark] = '\0';
  }
  return ok;
}

/* 1 when @p have has what @p want says; else 0 with the path of the difference in @p path. */
static int tf_man__match(tf_buf *path, const cJSON *want, const cJSON *have, int exact_keys)
{
  if (cJSON_IsObject(want)) {
    if (!cJSON_IsObject(have)) return 0;
    for (const cJSON *w = want->child; w; w = w->next)
      if (!tf_man__match_member(path, w, have)) return 0;
    if (exact_keys)
      for (const cJSON *h = have->child; h; h = h->next)
        if (!cJSON_GetObjectItemCaseSensitive(want, h->string)) {
          tf_buf__printf(path, "%s%s", path->len ? "." : "", h->string);
          return 0;
        }
    return 1;
  }
  if (cJSON_IsArray(want)) {
    if (!cJSON_IsArray(have) || cJSON_GetArraySize(want) != cJSON_GetArraySize(have)) return 0;
    size_t i = 0;
    for (const cJSON *w = want->child, *h = have->child; w && h; w = w->next, h = h->next, i++) {
      size_t mark = path->len;
      tf_buf__printf(path, "[%zu]", i);
      if (!tf_man__match(path, w, h, 0)) return 0;
      path->len = mark;
      path->ptr[mark] = '\0';
    }
    return 1;
  }
  return cJSON_Compare(want, have, 1) ? 1 : 0;
}

tf_err tf_manifest_matches(int *matches, char **path, const char *desired, size_t desired_len, const char *observed,
                           size_t observed_len)
{
  TF_ASSERT_ARG(matches);
  TF_ASSERT_ARG(desired);
  TF_ASSERT_ARG(observed);
  *matches = 0;
  if (path) *path = NULL;
  cJSON *want = NULL, *have = NULL;
  tf_err rc = tf_doc__parse_json(&want, desired, desired_len, NULL);
  if (rc < 0) return tf_error__set(rc, "desired: %s", tf_error_last()->message);
  if ((rc = tf_doc__parse_json(&have, observed, observed_len, NULL)) < 0) {
    cJSON_Delete(want);
    return tf_error__set(rc, "observed: %s", tf_error_last()->message);
  }
  /* apiVersion and kind are the type, not content: the items of a list (an informer's cache) carry
   * neither, and comparing them made every object of a fresh cache look different (a write storm) */
  if (cJSON_IsObject(want)) {
    cJSON_DeleteItemFromObjectCaseSensitive(want, "apiVersion");
    cJSON_DeleteItemFromObjectCaseSensitive(want, "kind");
  }
  tf_buf where;
  tf_buf__init(&where);
  tf_buf__puts(&where, "");
  where.len = 0;
  int ok = tf_man__match(&where, want, have, 0);
  /* the configs under a Secret's data were compared; leave no copy behind */
  tf_man__wipe_tree(want);
  tf_man__wipe_tree(have);
  cJSON_Delete(want);
  cJSON_Delete(have);
  if (where.failed) {
    tf_buf__dispose(&where, 0);
    return tf_error__nomem();
  }
  *matches = ok;
  if (!ok && path) {
    if (where.ptr) where.ptr[where.len] = '\0';
    if (!where.len) tf_buf__puts(&where, "(the whole object)");
    rc = tf_buf__detach(&where, path);
    return rc;
  }
  tf_buf__dispose(&where, 0);
  return TF_OK;
}

/* ---- the relay Pod read back (adapter_internal.h) ---- */

static char *tf_man__dup_or_empty(const char *s) { return strdup(s ? s : ""); }

static const char *tf_man__str_at(const cJSON *o, const char *k)
{
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

void tf_adapter__pod_clear(tf_adapter__pod *p)
{
  if (!p) return;
  free(p->name);
  free(p->ns);
  free(p->node);
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

int tf_adapter__pod_parse(tf_adapter__pod *out, const char *json)
{
  cJSON *root = json ? cJSON_Parse(json) : NULL;
  int rc = tf_adapter__pod_from_tree(out, root);
  cJSON_Delete(root);
  return rc;
}

int tf_adapter__pod_from_tree(tf_adapter__pod *out, const cJSON *root)
{
  memset(out, 0, sizeof(*out));
  tf_adapter__pod_clear(out);
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
  const cJSON *labels = cJSON_GetObjectItemCaseSensitive(meta, "labels");
  const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
  const char *relay = tf_man__str_at(labels, TF_POD__LABEL_RELAY);
  const char *addr = tf_man__str_at(ann, TF_POD__ANN_ADDRESS);
  const char *range = tf_man__str_at(ann, TF_POD__ANN_PORTS);
  if (!relay || !addr || !range || !tf_man__str_at(meta, "name")) {
    return -1;
  }
  size_t n = strlen(addr) + strlen(range) + 2;
  out->identity = malloc(n);
  if (out->identity) snprintf(out->identity, n, "%s/%s", addr, range);
  out->name = tf_man__dup_or_empty(tf_man__str_at(meta, "name"));
  out->ns = tf_man__dup_or_empty(tf_man__str_at(meta, "namespace"));
  out->uid = tf_man__dup_or_empty(tf_man__str_at(meta, "uid"));
  out->relay = tf_man__dup_or_empty(relay);
  out->config_hash = tf_man__dup_or_empty(tf_man__str_at(ann, TF_POD__ANN_HASH));
  const cJSON *owners = cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences");
  const cJSON *o;
  const char *owner = NULL;
  cJSON_ArrayForEach(o, owners)
  {
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "controller"))) owner = tf_man__str_at(o, "uid");
  }
  out->owner_uid = tf_man__dup_or_empty(owner);
  out->deleting = cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp") != NULL &&
                  !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp"));
  int64_t due = tf_adapter__time_parse(tf_man__str_at(meta, "deletionTimestamp"));
  double grace = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(meta, "deletionGracePeriodSeconds"));
  if (out->deleting && due > 0) out->deleting_since_ms = due - (grace == grace && grace > 0 ? (int64_t)grace * 1000 : 0);
  const cJSON *status = cJSON_GetObjectItemCaseSensitive(root, "status");
  const char *phase = tf_man__str_at(status, "phase");
  out->finished = phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
  out->started = out->finished || (phase && strcmp(phase, "Running") == 0);
  const cJSON *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions");
  out->has_conditions = cJSON_IsArray(conds);
  int i = 0;
  cJSON_ArrayForEach(o, conds)
  {
    const char *type = tf_man__str_at(o, "type");
    if (type && strcmp(type, "Ready") == 0) out->ready = tf_man__str_at(o, "status") && strcmp(tf_man__str_at(o, "status"), "True") == 0;
    if (type && strcmp(type, TF_MANIFEST_READINESS_GATE) == 0) {
      const char *st = tf_man__str_at(o, "status");
      out->gate = st && strcmp(st, "True") == 0 ? 1 : 0;
      out->gate_index = i;
      free(out->gate_reason);
      free(out->gate_message);
      out->gate_reason = tf_man__dup_or_empty(tf_man__str_at(o, "reason"));
      out->gate_message = tf_man__dup_or_empty(tf_man__str_at(o, "message"));
      free(out->gate_since);
      out->gate_since = tf_man__dup_or_empty(tf_man__str_at(o, "lastTransitionTime"));
    }
    i++;
  }
  const char *cli = tf_man__str_at(ann, TF_POD__ANN_CLI_PORT);
  char *end = NULL;
  long cp = cli ? strtol(cli, &end, 10) : 0;
  if (cli && end && !*end && cp > 0 && cp <= 65535) out->cli_port = (uint16_t)cp;
  const cJSON *spec = cJSON_GetObjectItemCaseSensitive(root, "spec");
  out->node = tf_man__dup_or_empty(tf_man__str_at(spec, "nodeName"));
  out->host_network = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec, "hostNetwork"));
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "containers"))
  {
    const char *cn = tf_man__str_at(c, "name");
    if (!cn || strcmp(cn, "agent") != 0) continue;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(c, "ports"))
    {
      const char *pn = tf_man__str_at(p, "name");
      double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(p, "containerPort"));
      if (pn && strcmp(pn, "agent") == 0 && v >= 1 && v <= 65535) out->agent_port = (uint16_t)v;
    }
  }
  if (!out->identity || !out->name || !out->ns || !out->node || !out->uid || !out->relay || !out->config_hash || !out->owner_uid ||
      (out->gate >= 0 && (!out->gate_reason || !out->gate_message || !out->gate_since))) {
    tf_adapter__pod_clear(out);
    return -1;
  }
  return 0;
}

/* One JSON Patch operation onto @p ops (@p value taken). */
static void tf_man__patch_op(cJSON *ops, const char *op, const char *path, cJSON *value)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "op", op);
  cJSON_AddStringToObject(o, "path", path);
  cJSON_AddItemToObject(o, "value", value);
  cJSON_AddItemToArray(ops, o);
}

char *tf_adapter__gate_patch(const tf_adapter__pod *pod, int ready, const char *reason, const char *message, const char *now,
                    int *err)
{
  *err = 0;
  if (pod->gate == (ready ? 1 : 0) && (!reason || (pod->gate_reason && strcmp(pod->gate_reason, reason) == 0)))
    return NULL;
  cJSON *ops = cJSON_CreateArray();
  cJSON *cond = cJSON_CreateObject();
  cJSON_AddStringToObject(cond, "type", TF_MANIFEST_READINESS_GATE);
  cJSON_AddStringToObject(cond, "status", ready ? "True" : "False");
  cJSON_AddStringToObject(cond, "reason", reason ? reason : (ready ? "AllocateSucceeded" : "AllocateFailed"));
  cJSON_AddStringToObject(cond, "message", message ? message : "");
  /* the status unchanged (only the reason: Ready to Full), its lastTransitionTime stays */
  int same = pod->gate == (ready ? 1 : 0) && pod->gate_since && *pod->gate_since;
  cJSON_AddStringToObject(cond, "lastTransitionTime", same ? pod->gate_since : now);
  char path[64], test[64];
  if (pod->gate_index >= 0) {
    snprintf(test, sizeof(test), "/status/conditions/%d/type", pod->gate_index);
    snprintf(path, sizeof(path), "/status/conditions/%d", pod->gate_index);
    tf_man__patch_op(ops, "test", test, cJSON_CreateString(TF_MANIFEST_READINESS_GATE));
    tf_man__patch_op(ops, "replace", path, cond);
  } else if (pod->has_conditions) {
    tf_man__patch_op(ops, "add", "/status/conditions/-", cond);
  } else {
    cJSON *list = cJSON_CreateArray();
    cJSON_AddItemToArray(list, cond);
    tf_man__patch_op(ops, "add", "/status/conditions", list);
  }
  char *text = cJSON_PrintUnformatted(ops);
  cJSON_Delete(ops);
  if (!text) *err = 1;
  return text;
}
