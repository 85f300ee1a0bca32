/* Fuzz target: a <pool>-vantage ConfigMap body (anyone who may write ConfigMaps
 * in the pool's namespace can write one) through tf_vantage_condition().
 * Properties: the answer is always a condition, never an error: status True,
 * False or Unknown with a known reason, and a message of bounded length. The
 * first 8 bytes pick "now" relative to the body's time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tf_fuzz.h"
#include "turnfleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  int64_t now = 1764590400000LL; /* 2025-12-01T12:00:00Z */
  if (size >= 1) now += ((int64_t)data[0] - 128) * 60000; /* +-2 hours: fresh and stale */
  const char *st = NULL, *why = NULL;
  char *msg = NULL;
  tf_err rc = tf_vantage_condition(&st, &why, &msg, size >= 1 ? (const char *)data + 1 : "", size >= 1 ? size - 1 : 0,
                                   now, 0);
  if (rc == TF_ENOMEM) return 0;
  TF_FUZZ_CHECK(rc == 0 && st && why && msg);
  TF_FUZZ_CHECK(!strcmp(st, "True") || !strcmp(st, "False") || !strcmp(st, "Unknown"));
  static const char *const reasons[] = {"AllReachable", "Unreachable", "NoVantageResults", "NoURIsProbed",
                                        "StaleVantageResults", "BadVantageResults"};
  int known = 0;
  for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) known |= !strcmp(why, reasons[i]);
  TF_FUZZ_CHECK(known);
  TF_FUZZ_CHECK(strlen(msg) < 8192); /* at most eight URIs of 300 bytes and their reasons, or one error */
  tf_free(msg);
  return 0;
}
