/* Fuzz target: `turnfleet up --addresses` ("127.0.0.11-13,fd00::1-3"). The
 * parser is a static function of tools/turnfleet/up.c: including the file
 * reaches it without changing the tool. A list that parses yields 1 to 256
 * canonical addresses per item, each of which parses back to itself. */
#include "../tools/turnfleet/up.c"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = tf_fuzz_text(data, size);
  cJSON *out = cJSON_CreateArray();
  if (!text || !out) {
    free(text);
    cJSON_Delete(out);
    return 0;
  }
  if (parse_addresses(text, out) == 0) {
    int n = cJSON_GetArraySize(out);
    size_t items = 1;
    for (const char *p = text; *p; p++) items += *p == ',';
    TF_FUZZ_CHECK(n >= 1 && (size_t)n <= 256 * items);
    const cJSON *a;
    cJSON_ArrayForEach(a, out)
    {
      tf_addr addr;
      char canon[TF_ADDR_STRLEN];
      TF_FUZZ_CHECK(cJSON_IsString(a) && tf_addr_parse(&addr, a->valuestring) == 0);
      TF_FUZZ_CHECK(tf_addr_format(canon, sizeof(canon), &addr) == 0 && strcmp(canon, a->valuestring) == 0);
    }
  }
  cJSON_Delete(out);
  free(text);
  return 0;
}
