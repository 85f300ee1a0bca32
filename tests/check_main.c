/* The one check runner: every suite of tests/check_<module>.c. ctest runs one
 * suite per test with CK_RUN_SUITE=<module>. Tests run in fork mode. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#define TF_SUITE(m) Suite *tf_test_##m##_suite(void);
#include "tf_suites.h"
#undef TF_SUITE

int main(void)
{
  SRunner *sr = srunner_create(NULL);
#define TF_SUITE(m) srunner_add_suite(sr, tf_test_##m##_suite());
#include "tf_suites.h"
#undef TF_SUITE
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  int run = srunner_ntests_run(sr);
  srunner_free(sr);
  /* a suite name that matches nothing (CK_RUN_SUITE) must not pass */
  if (run == 0) {
    fprintf(stderr, "tf_check: no test ran (CK_RUN_SUITE=%s)\n", getenv("CK_RUN_SUITE") ? getenv("CK_RUN_SUITE") : "");
    return EXIT_FAILURE;
  }
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
