// A kernel fault for device_fault_cuda_test: a store through an address that is no allocation (CUDA error 700, which
// leaves the process's context failed for good).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace {
__global__ void store_through_bad_address(int* p) { *p = 1; }
}  // namespace

// Launches the faulting kernel on s and returns what synchronizing s reports (cudaErrorIllegalAddress).
cudaError_t fault_the_context(cudaStream_t s) {
  store_through_bad_address<<<1, 1, 0, s>>>(reinterpret_cast<int*>(uintptr_t(16)));
  return cudaStreamSynchronize(s);
}
