/* Plan a TURNPool on a node inventory with libturnfleet and print each relay.
 * usage: plan POOL.yaml NODES.json */
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
  if (argc != 3) {
    fprintf(stderr, "usage: %s POOL NODES\n", argv[0]);
    return 2;
  }
  size_t plen = 0, nlen = 0;
  char *ptext = slurp(argv[1], &plen), *ntext = slurp(argv[2], &nlen);
  tf_pool *pool = NULL;
  tf_nodes *nodes = NULL;
  tf_plan *plan = NULL;
  int status = 1;
  if (!ptext || !ntext) {
    fprintf(stderr, "cannot read %s or %s\n", argv[1], argv[2]);
    goto out;
  }
  if (tf_pool_parse(&pool, ptext, plen, TF_FORMAT_AUTO) < 0 || tf_nodes_parse(&nodes, ntext, nlen) < 0 ||
      tf_plan_new(&plan, pool, nodes, NULL) < 0) {
    fprintf(stderr, "error: %s\n", tf_error_last()->message);
    goto out;
  }
  printf("libturnfleet %s: pool %s, %zu relays\n", tf_version_string(), tf_plan_pool_name(plan),
         tf_plan_relay_count(plan));
  for (size_t i = 0; i < tf_plan_relay_count(plan); i++) {
    const tf_relay *r = tf_plan_relay(plan, i);
    printf("%s %s on %s, %u ports\n", tf_relay_name(r), tf_relay_identity(r), tf_relay_node(r),
           tf_relay_ports_total(r));
  }
  status = 0;
out:
  tf_plan_free(plan);
  tf_nodes_free(nodes);
  tf_pool_free(pool);
  free(ptext);
  free(ntext);
  return status;
}
