/* Pool fuzzing, one format per target: parse, validate, and for a pool that
 * parses, the round trip parse -> JSON -> parse gives the same JSON. */
#ifndef TF_FUZZ_POOL_COMMON_H
#define TF_FUZZ_POOL_COMMON_H

#include "fuzz_check.h"
#include "internal.h"

static int tf_fuzz_pool(const uint8_t *data, size_t size, int format)
{
  tf_pool *p = NULL;
  tf_err rc = tf_pool_parse(&p, (const char *)data, size, format);
  if (rc < 0) {
    TF_FUZZ_CHECK((rc == TF_EPROTO || rc == TF_EINVALID) && p == NULL);
    TF_FUZZ_CHECK(tf_error_last()->message[0] != '\0');
    return 0;
  }
  tf_problems *problems = NULL;
  tf_err vrc = tf_pool_validate(&problems, p);
  TF_FUZZ_CHECK(vrc == 0 || vrc == TF_EINVALID);
  TF_FUZZ_CHECK((vrc == 0) == (tf_problems_count(problems) == 0));
  for (size_t i = 0; i < tf_problems_count(problems); i++)
    TF_FUZZ_CHECK(tf_problems_path(problems, i) && tf_problems_message(problems, i));
  tf_problems_free(problems);

  char *json = NULL;
  if (vrc == 0 && tf_pool_to_json(&json, p) == 0) {
    tf_pool *q = NULL;
    TF_FUZZ_CHECK(tf_pool_parse(&q, json, strlen(json), TF_FORMAT_JSON) == 0);
    TF_FUZZ_CHECK(tf_pool_validate(NULL, q) == 0);
    char *again = NULL;
    TF_FUZZ_CHECK(tf_pool_to_json(&again, q) == 0);
    TF_FUZZ_CHECK(strcmp(json, again) == 0);
    tf_free(again);
    tf_pool_free(q);
    tf_free(json);
  }
  tf_pool_free(p);
  return 0;
}

#endif
