/* Fuzz target: the reader of a relay's rendered turnserver.conf for the
 * agent (tf_relayctl_config_parse): no crash, no read past the input, only
 * the documented codes, nothing handed out on failure, and what it accepts is
 * consistent (a CLI port, at least one address, an ordered range). */
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  tf_relayctl_config *c = (tf_relayctl_config *)&c;
  tf_err rc = tf_relayctl_config_parse(&c, (const char *)data, size);
  if (rc < 0) {
    TF_FUZZ_CHECK((rc == TF_EINVALID || rc == TF_ENOMEM) && c == NULL);
    return 0;
  }
  TF_FUZZ_CHECK(tf_relayctl_config_cli_port(c) > 0);
  TF_FUZZ_CHECK(tf_relayctl_config_address_count(c) > 0);
  tf_port_range r = tf_relayctl_config_port_range(c);
  TF_FUZZ_CHECK(r.start <= r.end);
  const char *pidfile = tf_relayctl_config_pidfile(c);
  TF_FUZZ_CHECK(!pidfile || pidfile[0] == '/');
  tf_relayctl_request req;
  TF_FUZZ_CHECK(tf_relayctl_config_request(&req, c, TF_RELAYCTL_COUNT, 1000) == 0 && req.password && *req.password);
  tf_relayctl_config_free(c);
  return 0;
}
