/* Fuzz target: the watch stream. The input is fed to the line buffer in
 * chunks whose sizes come from the input itself; every complete line goes
 * through the event parser. The lines handed out must be exactly the input's
 * '\n'-separated lines (so no byte is parsed twice or lost), each under the
 * cap. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube_internal.h"
#include "tf_fuzz.h"

#define TF_FUZZ_CAP 4096

typedef struct {
  const uint8_t *data;
  size_t size;
  size_t expect; /* offset where the next line must start */
} tf_fuzz_state;

static int tf_fuzz_line(char *line, size_t len, void *arg)
{
  tf_fuzz_state *s = arg;
  TF_FUZZ_CHECK(len <= TF_FUZZ_CAP);
  /* the line is the next non-empty input line from `expect` (minus one '\r');
   * empty ones are skipped by the buffer */
  const uint8_t *nl;
  size_t want;
  for (;;) {
    nl = memchr(s->data + s->expect, '\n', s->size - s->expect);
    TF_FUZZ_CHECK(nl != NULL);
    want = (size_t)(nl - (s->data + s->expect));
    if (want && s->data[s->expect + want - 1] == '\r') want--;
    if (want) break;
    s->expect = (size_t)(nl - s->data) + 1;
  }
  TF_FUZZ_CHECK(want == len && memcmp(line, s->data + s->expect, len) == 0);
  s->expect = (size_t)(nl - s->data) + 1;
  cJSON *root = NULL, *obj = NULL;
  int type = -1;
  if (tf_kube__event_parse(line, len, &root, &type, &obj) == 0) {
    TF_FUZZ_CHECK(root && obj && type >= 0 && type <= 4);
    (void)tf_kube__meta_str(obj, "resourceVersion");
    cJSON_Delete(root);
  } else {
    TF_FUZZ_CHECK(root == NULL);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  unsigned step = data[0] % 61 + 1; /* chunk size */
  data++;
  size--;
  tf_fuzz_state s = {data, size, 0};
  tf_kube__lines l;
  tf_kube__lines_init(&l, TF_FUZZ_CAP);
  for (size_t off = 0; off < size; off += step) {
    size_t n = size - off < step ? size - off : step;
    int rc = tf_kube__lines_feed(&l, (const char *)data + off, n, tf_fuzz_line, &s);
    if (rc != 0) {
      TF_FUZZ_CHECK(rc == TF_EPROTO);
      break;
    }
    TF_FUZZ_CHECK(l.scan == l.len && l.len <= TF_FUZZ_CAP);
  }
  tf_kube__lines_dispose(&l);
  return 0;
}
