/* Fuzz target: a previous status (`status.json`, or a whole TURNPool with
 * one) read back by the reconcile core; a status that is accepted feeds a
 * reconcile without failing, and that reconcile's status is accepted again. */
#include "fuzz_check.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  tf_observed *obs = NULL;
  TF_FUZZ_CHECK(tf_observed_new(&obs) == 0);
  tf_err rc = tf_observed_set_status(obs, (const char *)data, size);
  TF_FUZZ_CHECK(rc == 0 || rc == TF_EPROTO || rc == TF_EINVALID);
  if (rc == 0) {
    tf_pool *pool = NULL;
    tf_nodes *nodes = NULL;
    tf_fuzz_fixture(&pool, &nodes, 1, 10);
    static const char *const secrets[] = {"fuzz-secret"};
    tf_coturn_options copts = TF_COTURN_OPTIONS_INIT;
    copts.secrets = secrets;
    copts.secrets_count = 1;
    tf_reconcile_options opts = TF_RECONCILE_OPTIONS_INIT;
    opts.coturn = &copts;
    tf_reconcile *rec = NULL;
    rc = tf_reconcile_new(&rec, pool, nodes, obs, 1700000000000LL, &opts);
    TF_FUZZ_CHECK(rc == 0);
    char *status = NULL;
    TF_FUZZ_CHECK(tf_reconcile_status_json(&status, rec) == 0);
    tf_observed *again = NULL;
    TF_FUZZ_CHECK(tf_observed_new(&again) == 0);
    TF_FUZZ_CHECK(tf_observed_set_status(again, status, strlen(status)) == 0);
    tf_observed_free(again);
    tf_free(status);
    tf_reconcile_free(rec);
    tf_nodes_free(nodes);
    tf_pool_free(pool);
  }
  tf_observed_free(obs);
  return 0;
}
