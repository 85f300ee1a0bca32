/* Fuzz target: coturn version strings ("4.6.1", "4.18.0-r0"). A version that
 * parses is written back as MAJOR.MINOR.PATCH, which the text starts with
 * (leading zeros aside) and which parses to the same number. */
#include <stdio.h>

#include "fuzz_check.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = tf_fuzz_text(data, size);
  if (!text) return 0;
  uint32_t v = 0;
  tf_err rc = tf_coturn_version_parse(&v, text);
  if (rc < 0) {
    TF_FUZZ_CHECK(rc == TF_EINVALID);
  } else {
    char back[32];
    snprintf(back, sizeof(back), "%u.%u.%u", (unsigned)(v >> 16), (unsigned)((v >> 8) & 0xff), (unsigned)(v & 0xff));
    uint32_t w = 0;
    TF_FUZZ_CHECK(v <= 0xffffff && tf_coturn_version_parse(&w, back) == 0 && w == v);
    TF_FUZZ_CHECK(strlen(back) <= strlen(text));
    unsigned features = tf_coturn_features(v);
    (void)features;
  }
  free(text);
  return 0;
}
