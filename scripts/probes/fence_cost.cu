// Probe: what each kind of fence costs one thread after a store, the pattern of the daemon's publications (a copy or
// a block's output, then the fence, then the flag that releases it: scheduler.h, publish_desc, forward_host_doorbell,
// finish_channel). For each fence, one thread of one block repeats: a 16-byte store to device memory, the fence, an
// 8-byte flag store; cycles per repetition (median of 9 runs of 2000) and the same converted to ns with the SM clock
// measured against %globaltimer. Fences: none; fence.acq_rel.gpu; fence.sc.gpu (__threadfence, the daemon's
// fence_device); fence.acq_rel.sys (fence_release, the primitives' posts); fence.sc.sys (__threadfence_system).
// Also with the store to pinned host memory instead (what a fence waits for when a system-scope write is pending).
// Build: target fence_cost (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CHECK(x)                                                    \
  do {                                                              \
    const cudaError_t e_ = (x);                                     \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      return 1;                                                     \
    }                                                               \
  } while (0)

template <int Kind>
__device__ __forceinline__ void fence() {
  if (Kind == 1) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  if (Kind == 2) asm volatile("fence.sc.gpu;" ::: "memory");
  if (Kind == 3) asm volatile("fence.acq_rel.sys;" ::: "memory");
  if (Kind == 4) asm volatile("fence.sc.sys;" ::: "memory");
}

template <int Kind>
__global__ void loop(uint4* data, unsigned long long* flag, int reps, unsigned long long* out) {
  if (threadIdx.x != 0) return;
  unsigned long long g0, g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  const long long t0 = clock64();
  for (int r = 0; r < reps; ++r) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %1, %1, %1};" ::"l"(data + (r & 63)), "r"(r) : "memory");
    fence<Kind>();
    *reinterpret_cast<volatile unsigned long long*>(flag) = r;
  }
  const long long t1 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  out[0] = t1 - t0;
  out[1] = g1 - g0;
}

template <int Kind>
int measure(const char* name, uint4* data, unsigned long long* flag, unsigned long long* out, const char* where) {
  constexpr int kReps = 2000, kRuns = 9;
  std::vector<double> cyc, ns;
  for (int run = 0; run < kRuns; ++run) {
    loop<Kind><<<1, 32>>>(data, flag, kReps, out);
    CHECK(cudaDeviceSynchronize());
    cyc.push_back(double(out[0]) / kReps);
    ns.push_back(double(out[1]) / kReps);
  }
  std::sort(cyc.begin(), cyc.end());
  std::sort(ns.begin(), ns.end());
  std::printf("%-18s store to %-6s: %7.1f cycles, %6.1f ns per store + fence + flag\n", name, where, cyc[kRuns / 2],
              ns[kRuns / 2]);
  return 0;
}

int main() {
  uint4* dev = nullptr;
  uint4* host = nullptr;
  unsigned long long *flag = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&dev, 64 * sizeof(uint4)));
  CHECK(cudaHostAlloc(&host, 64 * sizeof(uint4), cudaHostAllocMapped));
  CHECK(cudaMalloc(&flag, 8));
  CHECK(cudaMallocManaged(&out, 16));
  for (int pass = 0; pass < 2; ++pass) {
    uint4* data = pass == 0 ? dev : host;
    const char* where = pass == 0 ? "device" : "pinned";
    if (measure<0>("no fence", data, flag, out, where) || measure<1>("fence.acq_rel.gpu", data, flag, out, where) ||
        measure<2>("fence.sc.gpu", data, flag, out, where) || measure<3>("fence.acq_rel.sys", data, flag, out, where) ||
        measure<4>("fence.sc.sys", data, flag, out, where))
      return 1;
  }
  return 0;
}
