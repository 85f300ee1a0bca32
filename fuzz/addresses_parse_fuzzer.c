/* Fuzz target: `turnfleet up --addresses` ("127.0.0.11-13,fd00::1-3,127.0.0.80/30"),
 * parsed by tf_addr_list_parse(). A list that parses yields 1 to 256 addresses
 * per item, each of which formats to a canonical text that parses back to itself. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "turnfleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = tf_fuzz_text(data, size);
  enum { MAX = 4096 };
  tf_addr *out = malloc(MAX * sizeof(tf_addr));
  size_t n = 0;
  if (text && out && tf_addr_list_parse(out, MAX, &n, text) == 0) {
    size_t items = 1;
    for (const char *p = text; *p; p++) items += *p == ',';
    TF_FUZZ_CHECK(n >= 1 && n <= 256 * items);
    for (size_t i = 0; i < n; i++) {
      tf_addr back;
      char canon[TF_ADDR_STRLEN];
      TF_FUZZ_CHECK(tf_addr_format(canon, sizeof(canon), &out[i]) == 0);
      TF_FUZZ_CHECK(tf_addr_parse(&back, canon) == 0 && tf_addr_compare(&back, &out[i]) == 0);
    }
  }
  free(out);
  free(text);
  return 0;
}
