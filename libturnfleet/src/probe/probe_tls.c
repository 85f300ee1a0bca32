/* probe TLS: the handshake and the record layer over memory BIOs, so the
 * probe's own non-blocking socket I/O (probe_io.c) moves the ciphertext. */
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "probe_internal.h"

static int tls_context(probe *p)
{
  ERR_clear_error();
  p->ctx = SSL_CTX_new(TLS_client_method());
  if (!p->ctx) {
    tf_probe__fail(p, TF_ERROR, 0, NULL, "cannot create a TLS context");
    return -1;
  }
  /* coturn 4.6.1 speaks TLS 1.2 only; newer ones 1.3 */
  SSL_CTX_set_min_proto_version(p->ctx, TLS1_2_VERSION);
  if (!p->opts->o.insecure) {
    int ok = p->opts->o.ca_file ? SSL_CTX_load_verify_locations(p->ctx, p->opts->o.ca_file, NULL)
                                : SSL_CTX_set_default_verify_paths(p->ctx);
    if (!ok) {
      ERR_clear_error();
      tf_probe__fail(p, TF_ERROR, 0, NULL, "cannot load the CA certificates%s%s", p->opts->o.ca_file ? " of " : "",
                     p->opts->o.ca_file ? p->opts->o.ca_file : "");
      return -1;
    }
  }
  return 0;
}

void tf_probe__tls_start(leg *l)
{
  probe *p = l->p;
  if (p->phase == PH_A_OPEN || p->phase == PH_B_OPEN) tf_probe__stage_begin(p, TF_PROBE_STAGE_TLS);
  if (!p->ctx && tls_context(p) < 0) return;
  ERR_clear_error();
  l->ssl = SSL_new(p->ctx);
  BIO *r = BIO_new(BIO_s_mem());
  BIO *w = BIO_new(BIO_s_mem());
  if (!l->ssl || !r || !w) {
    BIO_free(r);
    BIO_free(w);
    p->fatal = TF_ENOMEM;
    tf_probe__fail(p, TF_ERROR, 0, NULL, "out of memory");
    return;
  }
  BIO_set_mem_eof_return(r, -1);
  SSL_set_bio(l->ssl, r, w);
  l->rbio = r;
  l->wbio = w;
  const char *host = tf_uri_host(p->uri);
  if (tf_uri_host_kind(p->uri) == TF_URI_HOST_NAME) SSL_set_tlsext_host_name(l->ssl, host);
  if (!p->opts->o.insecure) {
    X509_VERIFY_PARAM *vp = SSL_get0_param(l->ssl);
    int ok = tf_uri_host_kind(p->uri) == TF_URI_HOST_NAME ? X509_VERIFY_PARAM_set1_host(vp, host, 0)
                                                          : X509_VERIFY_PARAM_set1_ip_asc(vp, host);
    if (!ok) {
      tf_probe__fail(p, TF_ERROR, 0, NULL, "%scannot check the certificate against host %s", l->who, host);
      return;
    }
    SSL_set_verify(l->ssl, SSL_VERIFY_PEER, NULL);
  } else {
    SSL_set_verify(l->ssl, SSL_VERIFY_NONE, NULL);
  }
  SSL_set_connect_state(l->ssl);
  l->conn = CONN_TLS;
  tf_probe__tls_step(l);
}

/* OpenSSL's last error as text (then cleared). */
static void tls_error_text(char *buf, size_t size)
{
  snprintf(buf, size, "no detail");
  unsigned long ec = ERR_peek_last_error();
  if (ec) ERR_error_string_n(ec, buf, size);
  ERR_clear_error();
}

/* Drive the handshake as far as the bytes at hand allow. */
void tf_probe__tls_step(leg *l)
{
  probe *p = l->p;
  ERR_clear_error();
  int r = SSL_do_handshake(l->ssl);
  tf_probe__leg_flush(l);
  if (p->finished) return;
  if (r == 1) {
    l->conn = CONN_READY;
    tf_probe__log(p, TF_LOG_DEBUG, "%sTLS: %s %s", l->who, SSL_get_version(l->ssl), SSL_get_cipher_name(l->ssl));
    tf_probe__leg_ready(p, l, tf_probe__now_ms());
    return;
  }
  int e = SSL_get_error(l->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
  long vr = SSL_get_verify_result(l->ssl);
  if (!p->opts->o.insecure && vr != X509_V_OK) {
    tf_probe__fail(p, TF_ERROR, 0, NULL, "%sthe certificate of %s was not accepted: %s", l->who, p->server,
                   X509_verify_cert_error_string(vr));
    return;
  }
  char buf[256];
  tls_error_text(buf, sizeof(buf));
  tf_probe__fail(p, TF_EPROTO, 0, NULL, "%sTLS handshake with %s failed: %s", l->who, p->server, buf);
}

void tf_probe__tls_input(leg *l, const uint8_t *data, size_t len, double now)
{
  probe *p = l->p;
  uint32_t gen = l->gen;
  if (BIO_write(l->rbio, data, (int)len) != (int)len) {
    p->fatal = TF_ENOMEM;
    tf_probe__fail(p, TF_ERROR, 0, NULL, "out of memory");
    return;
  }
  if (l->conn == CONN_TLS) {
    tf_probe__tls_step(l);
    if (p->finished || l->gen != gen || l->conn != CONN_READY) return;
  }
  /* plaintext: as much as the rx buffer takes, frame by frame */
  for (;;) {
    size_t space = PROBE_RX_CAP - l->rx_len;
    if (space == 0) {
      tf_probe__fail(p, TF_EPROTO, 0, NULL, "%sthe stream from %s holds a frame too large", l->who, p->server);
      return;
    }
    ERR_clear_error();
    int r = SSL_read(l->ssl, l->rx + l->rx_len, (int)space);
    if (r <= 0) {
      int e = SSL_get_error(l->ssl, r);
      tf_probe__leg_flush(l);
      if (p->finished) return;
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
      if (e == SSL_ERROR_ZERO_RETURN) {
        tf_probe__fail(p, TF_ENET, 0, NULL, "%s%s closed the TLS connection", l->who, p->server);
        return;
      }
      char ebuf[256];
      tls_error_text(ebuf, sizeof(ebuf));
      tf_probe__fail(p, TF_EPROTO, 0, NULL, "%sTLS error on the connection to %s: %s", l->who, p->server, ebuf);
      return;
    }
    l->rx_len += (size_t)r;
    tf_probe__frames(l, now);
    if (p->finished || l->gen != gen) return;
  }
}

void tf_probe__tls_write(leg *l, const uint8_t *data, size_t len)
{
  ERR_clear_error();
  int n = SSL_write(l->ssl, data, (int)len);
  if (n <= 0) {
    tf_probe__fail(l->p, TF_EPROTO, 0, NULL, "%sTLS write to %s failed", l->who, l->p->server);
    return;
  }
  /* the ciphertext is in wbio: leg_flush moves it to tx */
  tf_probe__leg_flush(l);
}

void tf_probe__tls_pending(leg *l)
{
  while (l->wbio && l->tx_len < PROBE_TX_CAP && BIO_ctrl_pending(l->wbio) > 0) {
    int n = BIO_read(l->wbio, l->tx + l->tx_len, (int)(PROBE_TX_CAP - l->tx_len));
    if (n <= 0) break;
    l->tx_len += (size_t)n;
  }
}

int tf_probe__tls_wants_write(const leg *l) { return l->wbio && BIO_ctrl_pending(l->wbio) > 0; }
