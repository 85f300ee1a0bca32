/* turnfleet.h alone, as C99 with -pedantic -Werror. */
#include <turnfleet.h>

#include <stdio.h>

int tf_headertest_cxx(void);

int main(void)
{
  int major = -1;
  tf_version(&major, NULL, NULL);
  if (major != TF_VERSION_MAJOR) return 1;
  if (tf_headertest_cxx() != 0) return 1;
  printf("turnfleet.h compiles as C99 and C++; runtime %s\n", tf_version_string());
  return 0;
}
