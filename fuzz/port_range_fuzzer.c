/* Fuzz target: port ranges ("49152-65535", `--expect-port-range`, plan
 * identities). A range that parses has 1 <= start <= end, and written back
 * as START-END it parses to the same range. */
#include <stdio.h>

#include "fuzz_check.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = tf_fuzz_text(data, size);
  if (!text) return 0;
  tf_port_range r;
  tf_err rc = tf_port_range_parse(&r, text);
  if (rc < 0) {
    TF_FUZZ_CHECK(rc == TF_EINVALID);
  } else {
    TF_FUZZ_CHECK(r.start >= 1 && r.start <= r.end);
    TF_FUZZ_CHECK(tf_port_range_size(r) == (uint32_t)r.end - r.start + 1u);
    char back[16];
    snprintf(back, sizeof(back), "%u-%u", (unsigned)r.start, (unsigned)r.end);
    tf_port_range again;
    TF_FUZZ_CHECK(tf_port_range_parse(&again, back) == 0 && again.start == r.start && again.end == r.end);
  }
  free(text);
  return 0;
}
