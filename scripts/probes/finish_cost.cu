// Probe: what the last block's way to a collective's completion word costs one thread (scheduler.h,
// finish_channel), and what dropping the slot count's reset would save. One thread of one block repeats, as the
// last block of a collective of one channel: a 16-byte store (its output), a max into start_inv (no return), a
// device-scope fence, the slot's count incremented with return; then
//   reset:   the count stored back to 0, a second fence, the completion word (today's finish_channel);
//   keep:    the count kept (a monotonic count: last when it reaches a multiple of the blocks), a fence with no
//            store of its own before it, the completion word;
//   nofence: the completion word straight after the count (a lower bound; not a correct publication).
// Cycles per repetition (median of 9 runs of 2000), and ns with the SM clock measured against %globaltimer.
// Build: target finish_cost (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe_check.h"

struct Words {
  uint4 out[64];
  unsigned long long start_inv, complete;
  unsigned count32;
  unsigned long long count64;
};

template <int Variant>
__global__ void loop(Words* w, int reps, unsigned long long* out) {
  if (threadIdx.x != 0) return;
  unsigned long long g0, g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  const long long t0 = clock64();
  unsigned long long sink = 0;
  for (int r = 0; r < reps; ++r) {
    asm volatile("st.global.cg.v4.u32 [%0], {%1, %1, %1, %1};" ::"l"(w->out + (r & 63)), "r"(r) : "memory");
    atomicMax(&w->start_inv, ~(unsigned long long)r);
    __threadfence();
    if (Variant == 0) {
      const unsigned old = atomicAdd(&w->count32, 1u);
      sink += old;
      *reinterpret_cast<volatile unsigned*>(&w->count32) = 0;
      __threadfence();
    } else {
      const unsigned long long old = atomicAdd(&w->count64, 1ull);
      sink += old;
      if (Variant == 1) __threadfence();
    }
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(&w->complete), "l"((unsigned long long)r) : "memory");
  }
  const long long t1 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  out[0] = t1 - t0;
  out[1] = g1 - g0;
  out[2] = sink;
}

template <int Variant>
void measure(const char* name, Words* w, unsigned long long* out) {
  constexpr int kReps = 2000, kRuns = 9;
  std::vector<double> cyc, ns;
  for (int run = 0; run < kRuns; ++run) {
    loop<Variant><<<1, 32>>>(w, kReps, out);
    CUDA_CHECK(cudaDeviceSynchronize());
    cyc.push_back(double(out[0]) / kReps);
    ns.push_back(double(out[1]) / kReps);
  }
  std::sort(cyc.begin(), cyc.end());
  std::sort(ns.begin(), ns.end());
  std::printf("FINISH %-8s %7.1f cycles, %6.1f ns per repetition\n", name, cyc[kRuns / 2], ns[kRuns / 2]);
}

int main() {
  Words* w = nullptr;
  unsigned long long* out = nullptr;
  CUDA_CHECK(cudaMalloc(&w, sizeof(Words)));
  CUDA_CHECK(cudaMemset(w, 0, sizeof(Words)));
  CUDA_CHECK(cudaMallocManaged(&out, 32));
  for (int pass = 0; pass < 2; ++pass) {
    measure<0>("reset", w, out);
    measure<1>("keep", w, out);
    measure<2>("nofence", w, out);
  }
  return 0;
}
