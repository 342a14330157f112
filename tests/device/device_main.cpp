// main() of the GPU tests: runs them where DFCCL_TEST_MIN_GPUS GPUs are present; otherwise skipped (exit 77) or
// failed under DFCCL_REQUIRE_GPUS (gpu_check.h). Listing the tests (--gtest_list_tests, ctest's discovery) needs no
// GPU.
#include <gtest/gtest.h>

#include "gpu_check.h"

#ifndef DFCCL_TEST_MIN_GPUS
#define DFCCL_TEST_MIN_GPUS 2
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!GTEST_FLAG_GET(list_tests))
    if (const int rc = dfccl::test::gpus_or_skip(DFCCL_TEST_MIN_GPUS)) return rc;
  return RUN_ALL_TESTS();
}
