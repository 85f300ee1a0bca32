// turnfleet.h alone, as C++ with -pedantic -Werror.
#include <turnfleet.h>

extern "C" int tf_headertest_cxx(void);

extern "C" int tf_headertest_cxx(void)
{
  tf_capacity_options copts = TF_CAPACITY_OPTIONS_INIT;
  tf_coturn_options topts = TF_COTURN_OPTIONS_INIT;
  return (copts.version == TF_CAPACITY_OPTIONS_VERSION && topts.version == TF_COTURN_OPTIONS_VERSION) ? 0 : 1;
}
