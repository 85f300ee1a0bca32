/* Fuzz target: a TURNPool as JSON (cJSON plus the key, NUL and UTF-8 checks). */
#include "pool_parse_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return tf_fuzz_pool(data, size, TF_FORMAT_JSON); }
