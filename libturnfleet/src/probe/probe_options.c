/* probe options: defaults per version, checks naming the field (never the
 * secret), and the private copy. A caller's struct is read only up to its
 * version, field by field: an older caller's struct is shorter than ours. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_internal.h"

#define FIELD_END(f) (offsetof(tf_probe_options, f) + sizeof(((tf_probe_options *)0)->f))

/* Bytes of a tf_probe_options of @p version (0 for an unknown version). */
static size_t options_size(unsigned int version)
{
  switch (version) {
  case 1: return FIELD_END(log_level);
  case 2: return FIELD_END(user_numbered);
  default: return 0;
  }
}

tf_err tf_probe_options_init(tf_probe_options *opts, unsigned int version)
{
  TF_ASSERT_ARG(opts);
  if (version == 0 || version > TF_PROBE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_probe_options version (1-%d)", version,
                         TF_PROBE_OPTIONS_VERSION);
  tf_probe_options init = TF_PROBE_OPTIONS_INIT;
  init.version = version;
  memcpy(opts, &init, options_size(version)); /* never past the caller's version */
  return TF_OK;
}

/* The caller's fields up to its version; the rest keep their defaults. */
static void options_read(tf_probe_options *dst, const tf_probe_options *o)
{
  tf_probe_options d = TF_PROBE_OPTIONS_INIT;
  *dst = d;
  dst->version = o->version;
  if (o->version >= 1) {
    dst->uri = o->uri;
    dst->secret = o->secret;
    dst->user = o->user;
    dst->ttl_s = o->ttl_s;
    dst->separator = o->separator;
    dst->family = o->family;
    dst->expect_address = o->expect_address;
    dst->expect_port_start = o->expect_port_start;
    dst->expect_port_end = o->expect_port_end;
    dst->peer_check = o->peer_check;
    dst->timeout_ms = o->timeout_ms;
    dst->rto_ms = o->rto_ms;
    dst->ca_file = o->ca_file;
    dst->insecure = o->insecure;
    dst->now = o->now;
    dst->lifetime_s = o->lifetime_s;
    dst->release = o->release;
    dst->log_cb = o->log_cb;
    dst->log_payload = o->log_payload;
    dst->log_level = o->log_level;
  }
  if (o->version >= 2) dst->user_numbered = o->user_numbered;
}

pmac *tf_probe__mac_ref(pmac *m)
{
  if (m) m->refs++;
  return m;
}

void tf_probe__mac_unref(pmac *m)
{
  if (!m || --m->refs > 0) return;
  tf_mac__wipe(&m->mac);
  tf_crypto__wipe(m->key, sizeof(m->key));
  free(m);
}

puser *tf_probe__user_new(const char *username, const char *password)
{
  size_t un = strlen(username) + 1, pn = strlen(password) + 1;
  puser *u = malloc(sizeof(*u) + un + pn);
  if (!u) return NULL;
  u->refs = 1;
  u->username = memcpy((char *)(u + 1), username, un);
  u->password = memcpy(u->username + un, password, pn);
  return u;
}

puser *tf_probe__user_ref(puser *u)
{
  u->refs++;
  return u;
}

void tf_probe__user_unref(puser *u)
{
  if (!u || --u->refs > 0) return;
  tf_crypto__wipe(u->password, strlen(u->password));
  free(u);
}

void tf_probe__cred_clear(pcred *k)
{
  tf_probe__user_unref(k->user);
  free(k->realm);
  tf_probe__mac_unref(k->mac);
  memset(k, 0, sizeof(*k));
}

void tf_probe__opts_unref(popts *c)
{
  if (!c || --c->refs > 0) return;
  if (c->o.secret) {
    tf_crypto__wipe((void *)c->o.secret, c->secret_len);
    free((void *)c->o.secret);
  }
  free((void *)c->o.uri);
  free((void *)c->o.user);
  free((void *)c->o.expect_address);
  free((void *)c->o.ca_file);
  tf_uri_free(c->uri);
  tf_probe__cred_clear(&c->cred[0]);
  tf_probe__cred_clear(&c->cred[1]);
  free(c);
}

tf_err tf_probe__opts_new(popts **out, const tf_probe_options *caller)
{
  TF_ASSERT_ARG(caller);
  if (caller->version == 0 || caller->version > TF_PROBE_OPTIONS_VERSION)
    return tf_error__set(TF_EINVALID, "version: %u is not a tf_probe_options version (1-%d)", caller->version,
                         TF_PROBE_OPTIONS_VERSION);
  tf_probe_options opts;
  options_read(&opts, caller);
  const tf_probe_options *o = &opts;
  if (!o->uri || !*o->uri) return tf_error__set(TF_EINVALID, "uri: required");
  tf_uri *uri = NULL;
  if (tf_uri_parse(&uri, o->uri) < 0) {
    const tf_error *e = tf_error_last();
    return tf_error__set(e->code == TF_ENOMEM ? TF_ENOMEM : TF_EINVALID, "uri: %s", e->message);
  }
  tf_err rc = TF_OK;
  tf_uri_mode mode = tf_uri_open_mode(uri);
  const char *user = o->user ? o->user : PROBE_DEFAULT_USER;
  tf_addr expect;
  memset(&expect, 0, sizeof(expect));
  if (mode == TF_URI_MODE_DTLS)
    rc = tf_error__set(TF_EINVALID, "uri: turns: over udp (DTLS) is not supported by the probe");
  else if (mode != TF_URI_MODE_UDP && mode != TF_URI_MODE_TCP && mode != TF_URI_MODE_TLS)
    rc = tf_error__set(TF_EINVALID, "uri: transport \"%s\" is not supported (udp or tcp)", tf_uri_transport(uri));
  else if (!o->secret || !*o->secret)
    rc = tf_error__set(TF_EINVALID, "secret: required");
  else if (o->ttl_s <= 0 || o->ttl_s > 10L * 365 * 86400)
    rc = tf_error__set(TF_EINVALID, "ttl_s: %lld is not a lifetime in seconds (1 to 10 years)", (long long)o->ttl_s);
  else if (o->separator < 0 || o->separator > 0x7e || (o->separator && o->separator < 0x21))
    rc = tf_error__set(TF_EINVALID, "separator: must be 0 or a printable ASCII character");
  else if (o->family != 0 && o->family != TF_AF_INET && o->family != TF_AF_INET6)
    rc = tf_error__set(TF_EINVALID, "family: %d is not 0, TF_AF_INET or TF_AF_INET6", o->family);
  else if (o->expect_address && tf_addr_parse(&expect, o->expect_address) < 0)
    rc = tf_error__set(TF_EINVALID, "expect_address: %s", tf_error_last()->message);
  else if (o->expect_port_start == 0 && o->expect_port_end != 0)
    rc = tf_error__set(TF_EINVALID, "expect_port_start: required with expect_port_end");
  else if (o->expect_port_start != 0 && o->expect_port_end < o->expect_port_start)
    rc = tf_error__set(TF_EINVALID, "expect_port_end: %u is below start %u", o->expect_port_end,
                       o->expect_port_start);
  else if (o->timeout_ms <= 0)
    rc = tf_error__set(TF_EINVALID, "timeout_ms: %d is not positive", o->timeout_ms);
  else if (o->rto_ms <= 0)
    rc = tf_error__set(TF_EINVALID, "rto_ms: %d is not positive", o->rto_ms);
  else if (o->now < 0)
    rc = tf_error__set(TF_EINVALID, "now: %lld is negative", (long long)o->now);
  else if (o->release != 0 && o->release != 1)
    rc = tf_error__set(TF_EINVALID, "release: %d is not 0 or 1", o->release);
  else if (o->peer_check != 0 && o->peer_check != 1)
    rc = tf_error__set(TF_EINVALID, "peer_check: %d is not 0 or 1", o->peer_check);
  else if (o->insecure != 0 && o->insecure != 1)
    rc = tf_error__set(TF_EINVALID, "insecure: %d is not 0 or 1", o->insecure);
  else if (o->ca_file && !o->insecure && access(o->ca_file, R_OK) != 0)
    rc = tf_error__set(TF_EINVALID, "ca_file: %.200s: %s", o->ca_file, strerror(errno));
  else if ((int)o->log_level < (int)TF_LOG_DEBUG || (int)o->log_level > (int)TF_LOG_ERROR)
    rc = tf_error__set(TF_EINVALID, "log_level: %d is not a tf_log_level", (int)o->log_level);
  else if (o->user_numbered != 0 && o->user_numbered != 1)
    rc = tf_error__set(TF_EINVALID, "user_numbered: %d is not 0 or 1", o->user_numbered);
  if (rc == TF_OK) {
    /* the user part must make a valid credential (cred owns those rules), numbered too */
    char *u = NULL, *p = NULL;
    char *numbered = o->user_numbered ? tf_asprintf__("%s18446744073709551615", user) : NULL;
    tf_err mrc = o->user_numbered && !numbered ? tf_error__nomem()
                                               : tf_cred_mint(&u, &p, o->secret, numbered ? numbered : user, 1,
                                                              o->separator);
    if (mrc < 0)
      rc = tf_error__set(mrc == TF_ENOMEM ? TF_ENOMEM : TF_EINVALID, "user: %s", tf_error_last()->message);
    if (p) tf_crypto__wipe(p, strlen(p));
    free(numbered);
    tf_free(u);
    tf_free(p);
  }
  if (rc < 0) {
    tf_uri_free(uri);
    return rc;
  }
  popts *c = calloc(1, sizeof(*c));
  if (!c) {
    tf_uri_free(uri);
    return tf_error__nomem();
  }
  c->refs = 1;
  c->uri = uri;
  c->o = opts;
  c->o.version = TF_PROBE_OPTIONS_VERSION;
  c->o.uri = tf_strdup__(o->uri);
  c->secret_len = strlen(o->secret);
  c->o.secret = tf_strndup__(o->secret, c->secret_len);
  c->o.user = tf_strdup__(user);
  c->o.expect_address = o->expect_address ? tf_strdup__(o->expect_address) : NULL;
  c->o.ca_file = o->ca_file ? tf_strdup__(o->ca_file) : NULL;
  c->expect = expect;
  c->has_expect = o->expect_address != NULL;
  if (!c->o.uri || !c->o.secret || !c->o.user || (o->expect_address && !c->o.expect_address) ||
      (o->ca_file && !c->o.ca_file)) {
    tf_probe__opts_unref(c);
    return tf_error__nomem();
  }
  *out = c;
  return TF_OK;
}
