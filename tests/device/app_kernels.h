// Application kernels of the GPU tests (compiled by nvcc in app_kernels.cu): a kernel that nobody launched before
// (its first launch is a lazy-loading implicit synchronization), a compute kernel of a given duration, and a kernel
// that checks a collective's output on the stream that waited for it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dfccl::test {

// First launch of this kernel in the process loads its module (CUDA_MODULE_LOADING=LAZY, the default).
cudaError_t launch_never_loaded_kernel(float* data, size_t n, cudaStream_t stream);
// Another one, for a second test that needs a lazy load of its own.
cudaError_t launch_second_never_loaded_kernel(float* data, size_t n, cudaStream_t stream);
// data[i] = value for i < n, by a kernel on `stream`.
cudaError_t launch_fill(int32_t* data, size_t n, int32_t value, cudaStream_t stream);
// Busy for about `ns` nanoseconds on one block.
cudaError_t launch_spin_kernel(uint64_t ns, cudaStream_t stream);
// The elements of data (device memory of the current device) that differ from `expect`, counted by a kernel on
// `stream` after the work queued there (a collective's output, on the stream that waited for it); ~0 if a CUDA call
// failed.
size_t count_not_equal(const int32_t* data, size_t n, int32_t expect, cudaStream_t stream);

// The core's udiv and umod (kernels/core/exec.h) of a[i] and b[i] as the GPU computes them, into q[i] and r[i] (host
// arrays of n elements); false if a CUDA call failed.
bool gpu_udiv_umod(const uint64_t* a, const uint64_t* b, uint64_t* q, uint64_t* r, size_t n);

}  // namespace dfccl::test
