/* Fuzz target: the turn:/turns: URI parser; a parsed URI rebuilt from its
 * pieces (and an address host through tf_uri_format) parses back the same. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_fuzz.h"

static void tf_fuzz_same(const tf_uri *a, const tf_uri *b)
{
  TF_FUZZ_CHECK(tf_uri_secure(a) == tf_uri_secure(b));
  TF_FUZZ_CHECK(strcmp(tf_uri_scheme(a), tf_uri_scheme(b)) == 0);
  TF_FUZZ_CHECK(tf_uri_host_kind(a) == tf_uri_host_kind(b));
  TF_FUZZ_CHECK(tf_uri_port(a) == tf_uri_port(b));
  TF_FUZZ_CHECK(strcmp(tf_uri_transport(a), tf_uri_transport(b)) == 0);
  TF_FUZZ_CHECK(tf_uri_open_mode(a) == tf_uri_open_mode(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  if (!text) return 0;
  if (size) memcpy(text, data, size);
  text[size] = '\0';
  tf_uri *u = NULL;
  tf_err rc = tf_uri_parse(&u, text);
  if (rc < 0) {
    TF_FUZZ_CHECK(rc == TF_EINVALID && u == NULL);
    free(text);
    return 0;
  }
  const char *host = tf_uri_host(u), *transport = tf_uri_transport(u);
  TF_FUZZ_CHECK(host && *host && transport && *transport && tf_uri_port(u) > 0);
  TF_FUZZ_CHECK(strlen(host) < size && strlen(transport) < size);

  /* the pieces, written back explicitly, parse to the same URI */
  int v6 = tf_uri_host_kind(u) == TF_URI_HOST_IPV6;
  char *again = tf_asprintf__("%s:%s%s%s:%u?transport=%s", tf_uri_scheme(u), v6 ? "[" : "", host, v6 ? "]" : "",
                              (unsigned)tf_uri_port(u), transport);
  TF_FUZZ_CHECK(again != NULL);
  tf_uri *b = NULL;
  TF_FUZZ_CHECK(tf_uri_parse(&b, again) == 0);
  tf_fuzz_same(u, b);
  TF_FUZZ_CHECK(strcmp(tf_uri_host(b), host) == 0);
  TF_FUZZ_CHECK(tf_uri_port_explicit(b) && tf_uri_transport_explicit(b));
  tf_uri_free(b);
  free(again);

  /* an address host through tf_uri_format */
  tf_addr a, back;
  if (tf_uri_host_kind(u) != TF_URI_HOST_NAME) {
    TF_FUZZ_CHECK(tf_addr_parse(&a, host) == 0);
    if (strcmp(transport, "udp") == 0 || strcmp(transport, "tcp") == 0) {
      char *formatted = NULL;
      TF_FUZZ_CHECK(tf_uri_format(&formatted, tf_uri_secure(u), &a, tf_uri_port(u), transport) == 0);
      TF_FUZZ_CHECK(tf_uri_parse(&b, formatted) == 0);
      tf_fuzz_same(u, b);
      TF_FUZZ_CHECK(tf_addr_parse(&back, tf_uri_host(b)) == 0 && tf_addr_compare(&a, &back) == 0);
      tf_uri_free(b);
      tf_free(formatted);
    }
  }
  tf_uri_free(u);
  free(text);
  return 0;
}
