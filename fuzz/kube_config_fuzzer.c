/* Fuzz target: the kubeconfig parser (YAML through the doc reader, then the
 * context/cluster/user resolution). No file is ever read: relative paths stay
 * unresolved (base NULL) and any path a case names must fail as TF_EIO. A
 * parsed configuration has a server; a failure leaves nothing behind. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"
#include "tf_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  tf_kube__config c;
  tf_err rc = tf_kube__config_parse(&c, (const char *)data, size, "/nonexistent-fuzz-dir", NULL);
  if (rc < 0) {
    TF_FUZZ_CHECK(c.server == NULL && c.token == NULL && c.key.ptr == NULL);
    TF_FUZZ_CHECK(tf_error_last()->message != NULL);
    return 0;
  }
  TF_FUZZ_CHECK(c.server && (strncmp(c.server, "https://", 8) == 0 || strncmp(c.server, "http://", 7) == 0));
  TF_FUZZ_CHECK(!c.insecure || c.ca.ptr == NULL);
  TF_FUZZ_CHECK(!c.cert.ptr == !c.key.ptr);
  tf_kube__config_dispose(&c);
  return 0;
}
