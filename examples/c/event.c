/* The Kubernetes Event a controller writes on a TURNPool, with libturnfleet-kube (the manifest
 * builders) on top of libturnfleet (the pool parser). usage: event POOL.yaml REASON MESSAGE */
#include <stdio.h>
#include <stdlib.h>

#include <turnfleet.h>

static char *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) {
    buf[n] = '\0';
    *len = (size_t)n;
  }
  return buf;
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: %s POOL REASON MESSAGE\n", argv[0]);
    return 2;
  }
  size_t len = 0;
  char *text = slurp(argv[1], &len), *body = NULL;
  tf_pool *pool = NULL;
  tf_manifest_event ev = TF_MANIFEST_EVENT_INIT;
  tf_manifest_options opts = TF_MANIFEST_OPTIONS_INIT;
  int status = 1;
  if (!text) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    goto out;
  }
  opts.pool_uid = "0b9a4bd5-3e04-4c2c-9d6f-8a1f3c2e7d10"; /* the TURNPool's metadata.uid, as read from the API */
  ev.reason = argv[2];
  ev.message = argv[3];
  ev.first_time = "2024-05-01T12:00:00Z";
  if (tf_pool_parse(&pool, text, len, TF_FORMAT_AUTO) < 0 || tf_manifest_event_body(&body, pool, &ev, &opts) < 0) {
    fprintf(stderr, "error: %s\n", tf_error_last()->message);
    goto out;
  }
  printf("libturnfleet-kube %s: %s\n", tf_version_string(), body);
  status = 0;
out:
  tf_free(body);
  tf_pool_free(pool);
  free(text);
  return status;
}
