// main() of the GPU tests: exits with 77 (ctest: skipped) when fewer GPUs than DFCCL_TEST_MIN_GPUS are present.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

#ifndef DFCCL_TEST_MIN_GPUS
#define DFCCL_TEST_MIN_GPUS 2
#endif

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < DFCCL_TEST_MIN_GPUS) {
    std::printf("skipped: %d GPU(s) present, %d needed\n", n, DFCCL_TEST_MIN_GPUS);
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
