/* See vantage.h: the lean probe's --vantage runs turnfleet-probe-vantage, the
 * executable installed beside it, with the same command line (its flags were
 * checked here first; the secret is read again there, never passed on). */
#include "vantage.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tool_io.h"

int vantage_run(const probe_vantage *v, const tf_probe_options *base, vantage_print_fn print, void *arg)
{
  (void)base, (void)print, (void)arg;
  char self[PATH_MAX], path[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    tool_say("turnfleet-probe", "--vantage", "cannot find this executable: %s", strerror(errno));
    return 2;
  }
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  *slash = '\0';
  snprintf(path, sizeof(path), "%s/turnfleet-probe-vantage", self);
  execv(path, v->argv);
  tool_say("turnfleet-probe", "--vantage", "cannot run %s: %s", path, strerror(errno));
  return 2;
}
