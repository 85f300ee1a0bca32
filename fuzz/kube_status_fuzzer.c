/* Fuzz target: the Status parser. Whatever the body, a Status comes back
 * (or NULL on memory) with non-NULL strings, a code and a bounded Retry-After;
 * causes are readable by index. The first input byte picks the HTTP code and
 * whether the tail doubles as a Retry-After header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"
#include "tf_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const int codes[] = {400, 401, 403, 404, 409, 410, 415, 422, 429, 500, 503, 504, 200, 302, 418, 599};
  if (size < 1) return 0;
  int code = codes[data[0] & 15];
  int header = data[0] & 16;
  char *body = malloc(size);
  if (!body) return 0;
  memcpy(body, data + 1, size - 1);
  body[size - 1] = '\0';
  tf_kube_status *s = tf_kube__status_parse(code, body, size - 1, header ? body : NULL);
  if (s) {
    TF_FUZZ_CHECK(tf_kube_status_reason(s) != NULL && tf_kube_status_message(s) != NULL);
    TF_FUZZ_CHECK(tf_kube_status_code(s) >= 0 && tf_kube_status_code(s) < 1000);
    TF_FUZZ_CHECK(tf_kube_status_retry_after(s) >= 0 && tf_kube_status_retry_after(s) <= 3600);
    size_t n = tf_kube_status_cause_count(s);
    for (size_t i = 0; i < n; i++) {
      const char *t, *m, *f;
      TF_FUZZ_CHECK(tf_kube_status_cause(s, i, &t, &m, &f) == 0 && t && m && f);
    }
    TF_FUZZ_CHECK(tf_kube_status_cause(s, n, NULL, NULL, NULL) == TF_EINVALID);
    TF_FUZZ_CHECK(tf_kube__code_err(code) <= 0);
  }
  tf_kube_status_free(s);
  free(body);
  return 0;
}
