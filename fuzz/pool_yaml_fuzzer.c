/* Fuzz target: a TURNPool as YAML (libyaml events into the one document tree). */
#include "pool_parse_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return tf_fuzz_pool(data, size, TF_FORMAT_YAML); }
