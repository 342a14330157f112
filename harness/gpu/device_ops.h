// Kernels the harness launches on its own (compiled by nvcc in device_ops.cu; plain C interface, no fmt here):
// a compute kernel that spins for a given time, and a pool of kernels that have never been launched, whose first
// launch is one more implicit synchronization under CUDA's lazy module loading.
#pragma once

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

// Spins one block of one thread for `us` microseconds of GPU time (%globaltimer).
cudaError_t dfh_launch_spin(cudaStream_t stream, double us);
// Launches lazy kernel number `index` (0 <= index < dfh_lazy_kernel_count()): each one is a distinct function, so its
// first launch loads it.
cudaError_t dfh_launch_lazy(cudaStream_t stream, int index);
int dfh_lazy_kernel_count(void);

#ifdef __cplusplus
}
#endif
