/* Fuzz target: the `pc` reader of coturn's telnet CLI (IAC stripping, the
 * total-current-allocs line): no crash, no read past the input, only the
 * documented codes, and the output untouched on failure. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"
#include "tf_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  int64_t allocs = -7;
  tf_err rc = tf_coturn_allocations_from_cli(&allocs, (const char *)data, size);
  if (rc == 0) TF_FUZZ_CHECK(allocs >= 0);
  else TF_FUZZ_CHECK((rc == TF_ENOTFOUND || rc == TF_EPROTO || rc == TF_ENOMEM) && allocs == -7);
  return 0;
}
