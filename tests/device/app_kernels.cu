#include "app_kernels.h"

#include "../../kernels/core/exec.h"

namespace dfccl::test {

__global__ void never_loaded_kernel(float* data, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) data[i] += 1.0f;
}

__global__ void second_never_loaded_kernel(float* data, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) data[i] *= 2.0f;
}

__global__ void spin_kernel(uint64_t ns) {
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}

__global__ void count_not_equal_kernel(const int32_t* data, size_t n, int32_t expect, unsigned long long* wrong) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    local += data[i] != expect;
  if (local) atomicAdd(wrong, local);
}

cudaError_t launch_never_loaded_kernel(float* data, size_t n, cudaStream_t stream) {
  never_loaded_kernel<<<64, 256, 0, stream>>>(data, n);
  return cudaGetLastError();
}

cudaError_t launch_second_never_loaded_kernel(float* data, size_t n, cudaStream_t stream) {
  second_never_loaded_kernel<<<64, 256, 0, stream>>>(data, n);
  return cudaGetLastError();
}

__global__ void fill_kernel(int32_t* data, size_t n, int32_t value) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) data[i] = value;
}

cudaError_t launch_fill(int32_t* data, size_t n, int32_t value, cudaStream_t stream) {
  fill_kernel<<<64, 256, 0, stream>>>(data, n, value);
  return cudaGetLastError();
}

cudaError_t launch_spin_kernel(uint64_t ns, cudaStream_t stream) {
  spin_kernel<<<1, 32, 0, stream>>>(ns);
  return cudaGetLastError();
}

size_t count_not_equal(const int32_t* data, size_t n, int32_t expect, cudaStream_t stream) {
  unsigned long long* wrong = nullptr;
  unsigned long long h = ~0ull;
  if (cudaMalloc(&wrong, sizeof(*wrong)) != cudaSuccess) return ~size_t(0);
  cudaError_t e = cudaMemsetAsync(wrong, 0, sizeof(*wrong), stream);
  if (e == cudaSuccess) {
    count_not_equal_kernel<<<256, 256, 0, stream>>>(data, n, expect, wrong);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(&h, wrong, sizeof(h), cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  cudaFree(wrong);
  return e == cudaSuccess ? size_t(h) : ~size_t(0);
}

__global__ void udiv_umod_kernel(const uint64_t* a, const uint64_t* b, uint64_t* q, uint64_t* r, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    q[i] = core::udiv(a[i], b[i]);
    r[i] = core::umod(a[i], b[i]);
  }
}

bool gpu_udiv_umod(const uint64_t* a, const uint64_t* b, uint64_t* q, uint64_t* r, size_t n) {
  uint64_t* d = nullptr;  // a, b, q, r
  const size_t bytes = n * sizeof(uint64_t);
  if (cudaMalloc(&d, 4 * bytes) != cudaSuccess) return false;
  bool ok = cudaMemcpy(d, a, bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
            cudaMemcpy(d + n, b, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  if (ok) {
    udiv_umod_kernel<<<4, 128>>>(d, d + n, d + 2 * n, d + 3 * n, n);
    ok = cudaGetLastError() == cudaSuccess && cudaMemcpy(q, d + 2 * n, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
         cudaMemcpy(r, d + 3 * n, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  cudaFree(d);
  return ok;
}

}  // namespace dfccl::test
