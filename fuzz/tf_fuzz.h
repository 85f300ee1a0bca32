/* Shared by the fuzz targets: the entry point and a check that aborts (the
 * fuzzer's and the replay driver's way of reporting a broken property). */
#ifndef TF_FUZZ_H
#define TF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define TF_FUZZ_CHECK(cond) \
  do {                      \
    if (!(cond)) abort();   \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
