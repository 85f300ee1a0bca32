/* turnfleet-probe --vantage POOL: read <pool>-turn-uris, probe every URI, write
 * <pool>-vantage (library: turnfleet/vantage.h). Two builds of the probe share
 * main.c: turnfleet-probe-vantage links vantage.c (the Kubernetes client, so
 * libcurl and libyaml); turnfleet-probe links vantage_exec.c, which hands a
 * --vantage command line to turnfleet-probe-vantage beside it, so a load test's
 * probe loads neither. */
#ifndef TURNFLEET_PROBE_VANTAGE_H
#define TURNFLEET_PROBE_VANTAGE_H

#include <turnfleet.h>

typedef struct probe_vantage {
  const char *pool;       /* --vantage */
  const char *ns;         /* --namespace, or NULL: the configuration's */
  const char *kubeconfig; /* --kubeconfig, or NULL: in-cluster */
  const char *runner;     /* --runner, or NULL: the host name */
  char **argv;            /* the whole command line (vantage_exec.c passes it on) */
} probe_vantage;

typedef void (*vantage_print_fn)(const tf_probe_result *r, void *arg);

/* Exit status: 0 the results were written (whatever the relays answered: the
 * condition carries that), 1 the API refused or failed, 2 bad input. */
int vantage_run(const probe_vantage *v, const tf_probe_options *base, vantage_print_fn print, void *arg);

#endif
