/* Shared by the fuzz targets: a failed property aborts, so libFuzzer keeps the input. */
#ifndef TF_FUZZ_CHECK_H
#define TF_FUZZ_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TF_FUZZ_CHECK(cond) \
  do {                      \
    if (!(cond)) abort();   \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a NUL-terminated string (a NUL inside ends it early, as argv would). */
static inline char *tf_fuzz_text(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  if (!text) return NULL;
  if (size) memcpy(text, data, size);
  text[size] = '\0';
  return text;
}

#endif
