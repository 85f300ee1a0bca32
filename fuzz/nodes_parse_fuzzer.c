/* Fuzz target: a NodeList (`kubectl get nodes -o json`). A parsed inventory
 * has unique names in sorted order, and every node answers the address and
 * eligibility questions without failing in any other way. */
#include "fuzz_check.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  tf_nodes *nodes = NULL;
  tf_err rc = tf_nodes_parse(&nodes, (const char *)data, size);
  if (rc < 0) {
    TF_FUZZ_CHECK((rc == TF_EPROTO || rc == TF_EINVALID) && nodes == NULL);
    return 0;
  }
  tf_pool *pool = NULL;
  tf_nodes *fixture_nodes = NULL;
  tf_fuzz_fixture(&pool, &fixture_nodes, 1, 10);
  tf_nodes_free(fixture_nodes);
  size_t n = tf_nodes_count(nodes);
  for (size_t i = 0; i < n; i++) {
    const char *name = tf_nodes_name(nodes, i);
    TF_FUZZ_CHECK(name && *name);
    if (i) TF_FUZZ_CHECK(strcmp(tf_nodes_name(nodes, i - 1), name) < 0);
    int e = tf_nodes_eligible(nodes, i, pool);
    TF_FUZZ_CHECK(e == 0 || e == 1);
    for (int af = TF_AF_INET; af <= TF_AF_INET6; af += TF_AF_INET6 - TF_AF_INET) {
      tf_addr a;
      rc = tf_nodes_host_address(&a, nodes, i, af);
      TF_FUZZ_CHECK(rc == 0 || rc == TF_ENOTFOUND);
      if (rc == 0) TF_FUZZ_CHECK(a.family == af);
    }
  }
  TF_FUZZ_CHECK(tf_nodes_name(nodes, n) == NULL);
  tf_pool_free(pool);
  tf_nodes_free(nodes);
  return 0;
}
