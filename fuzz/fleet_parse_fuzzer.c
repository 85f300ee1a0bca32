/* Fuzz target: fleet records (`--existing`). Records that parse plan against
 * a fixed pool and inventory, and the plan's own JSON parses back as records
 * (it is documented as valid `--existing` input). */
#include "fuzz_check.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  tf_existing *fleet = NULL;
  tf_err rc = tf_existing_parse(&fleet, (const char *)data, size);
  if (rc < 0) {
    TF_FUZZ_CHECK((rc == TF_EPROTO || rc == TF_EINVALID) && fleet == NULL);
    return 0;
  }
  tf_pool *pool = NULL;
  tf_nodes *nodes = NULL;
  tf_fuzz_fixture(&pool, &nodes, 3, 100);
  tf_plan *plan = NULL;
  rc = tf_plan_new(&plan, pool, nodes, fleet);
  TF_FUZZ_CHECK(rc == 0 || rc == TF_EINVALID);
  if (rc == 0) {
    char *json = NULL;
    TF_FUZZ_CHECK(tf_plan_to_json(&json, plan) == 0);
    tf_existing *back = NULL;
    TF_FUZZ_CHECK(tf_existing_parse(&back, json, strlen(json)) == 0);
    TF_FUZZ_CHECK(tf_existing_count(back) == tf_plan_relay_count(plan));
    tf_existing_free(back);
    tf_free(json);
  }
  tf_plan_free(plan);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
  tf_existing_free(fleet);
  return 0;
}
