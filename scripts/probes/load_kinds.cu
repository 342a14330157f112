// Probe: what one thread's load of a word in device memory costs, by kind, the way the daemon's blocks poll their
// rings and decision words (scheduler.h: load_acquire = ld.acquire.sys on every ring head each pass; vload =
// ld.volatile). A dependent chain of loads (each address taken from the previous value) through 64 words spread
// over 64 lines, so that each load waits for the one before: ns per load, median of 9 runs of 4000. Kinds:
// ld.volatile, ld.relaxed.gpu, ld.acquire.gpu, ld.relaxed.sys, ld.acquire.sys; and ld.volatile followed by
// fence.acq_rel.gpu (an acquire only where a poll succeeds would cost this).
// Build: target load_kinds (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

template <int Kind>
__device__ __forceinline__ unsigned long long load(const unsigned long long* p) {
  unsigned long long v;
  if (Kind == 0) asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  if (Kind == 1) asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  if (Kind == 2) asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  if (Kind == 3) asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  if (Kind == 4) asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  if (Kind == 5) {
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  }
  return v;
}

// chain[i * 16] holds the index of the next word (16 words = one 128-byte line apart).
template <int Kind>
__global__ void chase(const unsigned long long* chain, int reps, unsigned long long* out) {
  if (threadIdx.x != 0) return;
  unsigned long long i = 0, g0, g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  for (int r = 0; r < reps; ++r) i = load<Kind>(chain + i * 16);
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  out[0] = g1 - g0;
  out[1] = i;
}

template <int Kind>
void measure(const char* name, const unsigned long long* chain, unsigned long long* out) {
  constexpr int kReps = 4000, kRuns = 9;
  std::vector<double> ns;
  for (int run = 0; run < kRuns; ++run) {
    chase<Kind><<<1, 32>>>(chain, kReps, out);
    cudaDeviceSynchronize();
    ns.push_back(double(out[0]) / kReps);
  }
  std::sort(ns.begin(), ns.end());
  std::printf("%-28s %6.1f ns per dependent load\n", name, ns[kRuns / 2]);
}

int main() {
  constexpr int kWords = 64;
  std::vector<unsigned long long> h(kWords * 16, 0);
  for (int i = 0; i < kWords; ++i) h[size_t(i) * 16] = (i * 37 + 11) % kWords;  // one cycle through all 64
  unsigned long long *chain = nullptr, *out = nullptr;
  if (cudaMalloc(&chain, h.size() * 8) != cudaSuccess || cudaMallocManaged(&out, 16) != cudaSuccess) return 1;
  cudaMemcpy(chain, h.data(), h.size() * 8, cudaMemcpyHostToDevice);
  measure<0>("ld.volatile", chain, out);
  measure<1>("ld.relaxed.gpu", chain, out);
  measure<2>("ld.acquire.gpu", chain, out);
  measure<3>("ld.relaxed.sys", chain, out);
  measure<4>("ld.acquire.sys", chain, out);
  measure<5>("ld.volatile + fence.acq_rel.gpu", chain, out);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
