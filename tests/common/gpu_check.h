// How a GPU test decides to run, skip or fail: it needs `needed` GPUs. With fewer it is skipped (exit 77), unless
// DFCCL_REQUIRE_GPUS=N says that this machine must have N usable GPUs and it has fewer: then it fails (exit 1), so
// that a GPU runner whose driver or devices are broken goes red instead of skipping everything.
#pragma once

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace dfccl::test {

// 0: enough GPUs, run; 77: skip; 1: fail. Prints why on stdout when not 0 (quiet: print nothing, e.g. ranks > 0).
inline int gpus_or_skip(int needed, bool quiet = false) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    n = 0;
  }
  if (n >= needed) return 0;
  const char* req = std::getenv("DFCCL_REQUIRE_GPUS");
  const int required = req ? std::atoi(req) : 0;
  if (n < required) {
    if (!quiet)
      std::printf("FAILED: DFCCL_REQUIRE_GPUS=%d but %d usable GPU(s) (cudaGetDeviceCount: %s)\n", required, n,
                  cudaGetErrorString(e));
    return 1;
  }
  if (!quiet) std::printf("skipped: %d GPU(s) present, %d needed\n", n, needed);
  return 77;
}

// gpus_or_skip asked in a forked child, so that the caller makes no CUDA call (it forks ranks after): 0, 77 or 1.
inline int gpus_or_skip_in_child(int needed) {
  const pid_t probe = fork();
  if (probe == 0) _exit(gpus_or_skip(needed));
  int status = 0;
  if (probe < 0 || waitpid(probe, &status, 0) != probe) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace dfccl::test
