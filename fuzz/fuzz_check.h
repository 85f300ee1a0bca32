/* Shared by the fuzz targets: a failed property aborts, so libFuzzer keeps the input. */
#ifndef TF_FUZZ_CHECK_H
#define TF_FUZZ_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turnfleet.h>

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

/* The fixed pool and inventory the plan and reconcile targets run against:
 * pool "f" (ports 50000-50000+ports-1, @p replicas), nodes a and b (192.0.2.1, .2). */
static inline void tf_fuzz_fixture(tf_pool **pool, tf_nodes **nodes, int replicas, int ports)
{
  char yaml[256];
  int n = snprintf(yaml, sizeof(yaml),
                   "metadata: {name: f}\nspec:\n  replicas: %d\n  relayPortRange: {start: 50000, end: %d}\n"
                   "  auth: {realm: r, secretRef: {name: s}}\n",
                   replicas, 50000 + ports - 1);
  static const char json[] =
    "{\"items\": [{\"metadata\": {\"name\": \"a\", \"labels\": {\"turnfleet.hzmi.dev/relay-node\": \"true\"}},"
    " \"status\": {\"addresses\": [{\"type\": \"InternalIP\", \"address\": \"192.0.2.1\"}]}},"
    "{\"metadata\": {\"name\": \"b\", \"labels\": {\"turnfleet.hzmi.dev/relay-node\": \"true\"}},"
    " \"status\": {\"addresses\": [{\"type\": \"InternalIP\", \"address\": \"192.0.2.2\"}]}}]}";
  TF_FUZZ_CHECK(n > 0 && (size_t)n < sizeof(yaml));
  TF_FUZZ_CHECK(tf_pool_parse(pool, yaml, (size_t)n, TF_FORMAT_YAML) == 0);
  TF_FUZZ_CHECK(tf_nodes_parse(nodes, json, sizeof(json) - 1) == 0);
}

#endif
