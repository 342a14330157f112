#include <utility>

#include "device_ops.h"

namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

__device__ int lazy_sink;

template <int N>
__global__ void lazy_kernel() {
  if (threadIdx.x == 0 && blockIdx.x == 0 && lazy_sink == -N) lazy_sink = N;  // never true: keeps each body distinct
}

constexpr int kLazyKernels = 64;

template <int... I>
cudaError_t launch_lazy(cudaStream_t stream, int index, std::integer_sequence<int, I...>) {
  using Fn = void (*)();
  static constexpr Fn table[] = {&lazy_kernel<I>...};
  table[index]<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t dfh_launch_spin(cudaStream_t stream, double us) {
  if (us <= 0) return cudaSuccess;
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(us * 1000.0));
  return cudaGetLastError();
}

extern "C" cudaError_t dfh_launch_lazy(cudaStream_t stream, int index) {
  if (index < 0 || index >= kLazyKernels) return cudaErrorInvalidValue;
  return launch_lazy(stream, index, std::make_integer_sequence<int, kLazyKernels>{});
}

extern "C" int dfh_lazy_kernel_count(void) { return kLazyKernels; }
