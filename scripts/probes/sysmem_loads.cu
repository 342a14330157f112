// Probe: do one thread's loads from pinned host memory overlap, or does each wait for the one before? For k = 1, 2,
// 4, 19 loads of 16 bytes issued back to back by one thread (the prefetcher's poll), the time per batch with three
// kinds of load: ld.volatile (the LL loads, primitives/ll.h), ld.relaxed.sys and ld.global.cg (__ldcg). One batch =
// one round trip if they overlap, k round trips if not (docs/lab/performance-log.md, 25). Then k lanes of one warp, one
// load each in one instruction: contiguous (coalesced) or one 128-byte line per lane.
// Build: target sysmem_loads (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

struct alignas(16) P {
  unsigned long long lo, hi;
};

template <int K, int Kind>
__global__ void batch(const P* src, unsigned long long* out, int reps) {
  unsigned long long acc = 0;
  const long long t0 = clock64();
  uint64_t g0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  for (int r = 0; r < reps; ++r) {
    P v[K];
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const P* p = src + ((r * K + i) % 64);
      if (Kind == 0)
        asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(v[i].lo), "=l"(v[i].hi) : "l"(p) : "memory");
      else if (Kind == 1)
        asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(v[i].lo), "=l"(v[i].hi) : "l"(p) : "memory");
      else {
        const uint4 w = __ldcg(reinterpret_cast<const uint4*>(p));
        v[i].lo = w.x + w.y;
        v[i].hi = w.z + w.w;
      }
    }
#pragma unroll
    for (int i = 0; i < K; ++i) acc += v[i].lo ^ v[i].hi;
  }
  uint64_t g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  out[0] = (g1 - g0);
  out[1] = acc + (clock64() - t0) * 0;
}

// k lanes of one warp, one 16-byte load each, in one instruction: Spread = 0: contiguous (coalesced, the 144 bytes
// of a descriptor for k = 9); Spread = 1: each lane in a different 128-byte line.
template <int Spread>
__global__ void lanes(const P* src, unsigned long long* out, int reps, int k) {
  const int lane = threadIdx.x;
  unsigned long long acc = 0;
  uint64_t g0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  for (int r = 0; r < reps; ++r) {
    if (lane < k) {
      const P* p = src + (Spread ? lane * 8 + (r % 8) : (r % 4) * 16 + lane);
      P v;
      asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(p) : "memory");
      acc += v.lo ^ v.hi;
    }
    __syncwarp();
  }
  uint64_t g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  if (lane == 0) out[0] = g1 - g0;
  if (acc == 12345) out[1] = acc;
}

template <int Spread>
double run_lanes(const P* src, unsigned long long* out, int k) {
  const int reps = 2000;
  lanes<Spread><<<1, 32>>>(src, out, 10, k);
  cudaDeviceSynchronize();
  lanes<Spread><<<1, 32>>>(src, out, reps, k);
  cudaDeviceSynchronize();
  return double(out[0]) / reps;
}

template <int K, int Kind>
double run(const P* src, unsigned long long* out) {
  const int reps = 2000;
  batch<K, Kind><<<1, 1>>>(src, out, 10);
  cudaDeviceSynchronize();
  batch<K, Kind><<<1, 1>>>(src, out, reps);
  cudaDeviceSynchronize();
  return double(out[0]) / reps;
}

int main() {
  P* host = nullptr;
  cudaHostAlloc(&host, 512 * sizeof(P), cudaHostAllocDefault);
  for (int i = 0; i < 512; ++i) host[i] = P{(unsigned long long)i, (unsigned long long)(2 * i)};
  unsigned long long* out = nullptr;
  cudaMallocManaged(&out, 2 * sizeof(unsigned long long));
  const char* names[3] = {"ld.volatile.v2.u64", "ld.relaxed.sys.v2.u64", "ld.global.cg.v4 (__ldcg)"};
  for (int kind = 0; kind < 3; ++kind) {
    double t[4];
    if (kind == 0) {
      t[0] = run<1, 0>(host, out);
      t[1] = run<2, 0>(host, out);
      t[2] = run<4, 0>(host, out);
      t[3] = run<19, 0>(host, out);
    }
    if (kind == 1) {
      t[0] = run<1, 1>(host, out);
      t[1] = run<2, 1>(host, out);
      t[2] = run<4, 1>(host, out);
      t[3] = run<19, 1>(host, out);
    }
    if (kind == 2) {
      t[0] = run<1, 2>(host, out);
      t[1] = run<2, 2>(host, out);
      t[2] = run<4, 2>(host, out);
      t[3] = run<19, 2>(host, out);
    }
    std::printf("%-26s pinned host memory, ns per batch of 1 / 2 / 4 / 19 loads: %.0f / %.0f / %.0f / %.0f\n",
                names[kind], t[0], t[1], t[2], t[3]);
  }
  std::printf(
      "lanes of one warp, ld.volatile, contiguous: ns per batch of 1 / 2 / 9 / 19 lanes: %.0f / %.0f / %.0f / %.0f\n",
      run_lanes<0>(host, out, 1), run_lanes<0>(host, out, 2), run_lanes<0>(host, out, 9), run_lanes<0>(host, out, 19));
  std::printf("lanes of one warp, ld.volatile, one line each: ns per batch of 1 / 2 / 9 / 19 lanes: %.0f / %.0f / %.0f "
              "/ %.0f\n",
              run_lanes<1>(host, out, 1), run_lanes<1>(host, out, 2), run_lanes<1>(host, out, 9),
              run_lanes<1>(host, out, 19));
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
