/* Fuzz target: what turnfleet-issuer reads from a pool (the turn-uris iceServers.json and the pool
 * status, which whoever may write that ConfigMap or status, or the state directory, controls) through
 * tf_issuer_pool_new(), then an answer for a user. The input is the two documents split at the first
 * NUL byte. Properties: a document is parsed or refused with TF_EINVALID/TF_EPROTO (never another
 * code, never a crash); an answer names 1 to max_relays relays, each of them eligible, and prints as
 * JSON with iceServers; or there is none (TF_ENOTFOUND) when no relay is eligible or none of the
 * eligible ones has a URI of a transport asked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tf_fuzz.h"
#include "turnfleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const uint8_t *nul = memchr(data, 0, size);
  size_t il = nul ? (size_t)(nul - data) : size;
  const char *status = nul ? (const char *)nul + 1 : "{}";
  size_t sl = nul ? size - il - 1 : 2;
  tf_issuer_pool *pool = NULL;
  tf_err rc = tf_issuer_pool_new(&pool, (const char *)data, il, status, sl);
  if (rc == TF_ENOMEM) return 0;
  TF_FUZZ_CHECK(rc == 0 || rc == TF_EINVALID || rc == TF_EPROTO);
  if (rc < 0) {
    TF_FUZZ_CHECK(pool == NULL);
    return 0;
  }
  tf_issuer_request req = TF_ISSUER_REQUEST_INIT;
  req.user = "fuzz-user";
  tf_issuer_options o = TF_ISSUER_OPTIONS_INIT;
  o.max_relays = 3;
  tf_issuer_answer *a = NULL;
  rc = tf_issuer_answer_new(&a, pool, "fuzz-secret", &req, &o, 1767225600);
  if (rc != TF_ENOMEM) {
    TF_FUZZ_CHECK(rc == 0 || rc == TF_ENOTFOUND);
    /* none when no relay is eligible, or when no eligible relay has a URI of a transport asked */
    TF_FUZZ_CHECK(rc == 0 || tf_issuer_pool_eligible(pool) == 0 ||
                  strstr(tf_error_last()->message, "transports and family") != NULL);
    if (rc == 0) {
      size_t n = tf_issuer_answer_relay_count(a);
      TF_FUZZ_CHECK(n >= 1 && n <= 3 && n <= tf_issuer_pool_eligible(pool));
      char *json = NULL;
      if (tf_issuer_answer_json(&json, a, TF_ISSUER_FORM_ICE) == 0) {
        TF_FUZZ_CHECK(strncmp(json, "{\"iceServers\":[", 15) == 0);
        tf_secret_free(json);
      }
    }
  }
  tf_issuer_answer_free(a);
  tf_issuer_pool_free(pool);
  return 0;
}
