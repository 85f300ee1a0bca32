/* Fuzz target: the Prometheus text parser (and coturn's allocation count on
 * top of it). Whatever parses, written back and parsed again, writes the same
 * bytes: the writer's output is a fixed point of parse + write. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tf_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *text = (const char *)data;
  int64_t allocs = -1;
  tf_err arc = tf_coturn_allocations_from_metrics(&allocs, text, size);
  TF_FUZZ_CHECK(arc == 0 ? allocs >= 0 : (arc == TF_EPROTO || arc == TF_ENOTFOUND || arc == TF_ENOMEM));

  tf_metrics *m = NULL;
  tf_err rc = tf_metrics_parse(&m, text, size);
  if (rc < 0) {
    TF_FUZZ_CHECK((rc == TF_EPROTO || rc == TF_ENOMEM) && m == NULL);
    TF_FUZZ_CHECK(arc < 0);
    return 0;
  }
  for (size_t i = 0; i < tf_metrics_sample_count(m); i++) {
    const char *name = NULL;
    double v;
    TF_FUZZ_CHECK(tf_metrics_sample(m, i, &name, &v) == 0 && name && *name);
    double sum;
    TF_FUZZ_CHECK(tf_metrics_sum(&sum, m, name) == 0);
  }
  char *once = NULL;
  TF_FUZZ_CHECK(tf_metrics_to_text(&once, m) == 0);
  tf_metrics *again = NULL;
  TF_FUZZ_CHECK(tf_metrics_parse(&again, once, strlen(once)) == 0);
  TF_FUZZ_CHECK(tf_metrics_sample_count(again) == tf_metrics_sample_count(m));
  char *twice = NULL;
  TF_FUZZ_CHECK(tf_metrics_to_text(&twice, again) == 0);
  TF_FUZZ_CHECK(strcmp(once, twice) == 0);
  tf_free(once);
  tf_free(twice);
  tf_metrics_free(again);
  tf_metrics_free(m);
  return 0;
}
