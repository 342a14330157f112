// The probes' error checks: the first failed call stops the probe, named with its error.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "dfccl.h"

[[noreturn]] inline void probe_fail(const char* call, const char* error) {
  std::fprintf(stderr, "%s: %s\n", call, error);
  std::exit(1);
}

#define DFCCL_CHECK(x)                                               \
  do {                                                               \
    const dfcclResult_t r_ = (x);                                    \
    if (r_ != dfcclSuccess) probe_fail(#x, dfcclGetErrorString(r_)); \
  } while (0)
#define CUDA_CHECK(x)                                              \
  do {                                                             \
    const cudaError_t e_ = (x);                                    \
    if (e_ != cudaSuccess) probe_fail(#x, cudaGetErrorString(e_)); \
  } while (0)

// A CUDA driver function by name, through the runtime (the probes do not link libcuda's symbols by version).
template <class Fn>
Fn driver_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
  if (!fn) probe_fail(name, "not found");
  return reinterpret_cast<Fn>(fn);
}
