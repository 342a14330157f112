// Probe: how soon does a GPU see a record the host writes into pinned memory, polled as dfccl's prefetcher polls its
// post log (scheduler.h, prefetch_descs: one warp reads the 20-pack record in one instruction), with one poller warp
// or several? One GPU, one block. The host writes record i (20 packs of {i, i}) and spins on an acknowledgement in
// pinned memory, which the warp that finds record i first writes (a claim in shared memory, so exactly one writes).
// Each warp's turn: optionally the prefetcher's stop check (one volatile load of a device word, before the poll as in
// the prefetcher, or issued together with it), then the poll; with several warps, a warp issues its poll only when
// `gap` SM cycles have passed since the last poll of any warp (shared clock word), so the warps stay staggered.
// Reported: the host's time from starting to write record i to seeing its acknowledgement (median, p10, p90), per
// configuration, and the polls per record (how often the record was read).
// Build: target poll_warps (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
//   poll_warps [iters=4000]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"

constexpr int kPacks = 20;
struct alignas(16) Pack {
  unsigned long long lo, hi;
};

// stop: 0 no stop check, 1 before the poll (the prefetcher today), 2 issued with the poll.
__global__ void pollers(const Pack* rec, volatile unsigned long long* ack, const unsigned long long* quit_word,
                        unsigned long long n, int stop, long long gap, unsigned long long* polls_out) {
  __shared__ unsigned long long next;
  __shared__ long long last_issue;
  __shared__ unsigned long long polls;
  const unsigned lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    next = 1;
    last_issue = 0;
    polls = 0;
  }
  __syncthreads();
  for (;;) {
    const unsigned long long want = *const_cast<volatile unsigned long long*>(&next);
    if (want > n) break;
    unsigned long long q = 0;
    if (stop == 1 && lane == 0) q = *const_cast<const volatile unsigned long long*>(quit_word);
    q = __shfl_sync(0xffffffffu, q, 0);
    if (q == 12345) break;  // never: the load must complete before the poll, as in the prefetcher
    if (gap > 0 && lane == 0) {
      for (;;) {
        const long long last = *const_cast<volatile long long*>(&last_issue);
        const long long now = clock64();
        if (now - last >= gap && atomicCAS(reinterpret_cast<unsigned long long*>(&last_issue), (unsigned long long)last,
                                           (unsigned long long)now) == (unsigned long long)last)
          break;
      }
    }
    __syncwarp();
    Pack v{0, 0};
    unsigned long long q2 = 0;
    if (lane < kPacks)
      asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(rec + lane) : "memory");
    if (stop == 2 && lane == 31) q2 = *const_cast<const volatile unsigned long long*>(quit_word);
    q2 = __shfl_sync(0xffffffffu, q2, 31);
    if (q2 == 12345) break;
    const bool mine = lane >= kPacks || (v.lo == want && v.hi == want);
    const bool found = __all_sync(0xffffffffu, mine) != 0;
    if (lane == 0) atomicAdd(&polls, 1ull);
    if (found && lane == 0) {
      if (atomicCAS(&next, want, want + 1) == want) *ack = want;
    }
    __syncwarp();
  }
  __syncthreads();
  if (threadIdx.x == 0) *polls_out = polls;
}

int main(int argc, char** argv) {
  const unsigned long long iters = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4000;
  const unsigned long long warm = 200;
  Pack* rec = nullptr;
  unsigned long long* ack = nullptr;
  CUDA_CHECK(cudaHostAlloc(&rec, sizeof(Pack) * kPacks, cudaHostAllocMapped));
  CUDA_CHECK(cudaHostAlloc(&ack, 64, cudaHostAllocMapped));
  unsigned long long *quit_word = nullptr, *polls = nullptr;
  CUDA_CHECK(cudaMalloc(&quit_word, 8));
  CUDA_CHECK(cudaMemset(quit_word, 0, 8));
  CUDA_CHECK(cudaHostAlloc(&polls, 8, cudaHostAllocMapped));
  Pack* drec = nullptr;
  unsigned long long* dack = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&drec), rec, 0));
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dack), ack, 0));
  pollers<<<1, 32>>>(drec, dack, quit_word, 0, 0, 0, polls);  // load the module
  CUDA_CHECK(cudaDeviceSynchronize());

  struct Cfg {
    int warps, stop;
    long long gap;
    const char* what;
  };
  const Cfg cfgs[] = {
      {1, 1, 0, "1 warp, stop check before the poll (the prefetcher today)"},
      {1, 2, 0, "1 warp, stop check issued with the poll"},
      {1, 0, 0, "1 warp, no stop check"},
      {2, 2, 1200, "2 warps, gap 1200 cycles"},
      {2, 2, 600, "2 warps, gap 600 cycles"},
      {3, 2, 800, "3 warps, gap 800 cycles"},
      {4, 2, 600, "4 warps, gap 600 cycles"},
      {4, 2, 300, "4 warps, gap 300 cycles"},
      {8, 2, 300, "8 warps, gap 300 cycles"},
      {1, 1, 0, "1 warp, stop check before the poll (again)"},
  };
  volatile Pack* vrec = rec;
  volatile unsigned long long* vack = ack;
  for (const Cfg& c : cfgs) {
    for (int k = 0; k < kPacks; ++k) {
      vrec[k].lo = 0;
      vrec[k].hi = 0;
    }
    *vack = 0;
    const unsigned long long n = warm + iters;
    pollers<<<1, 32 * c.warps>>>(drec, dack, quit_word, n, c.stop, c.gap, polls);
    CUDA_CHECK(cudaGetLastError());
    std::vector<double> us;
    us.reserve(iters);
    for (unsigned long long i = 1; i <= n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < kPacks; ++k) {
        vrec[k].lo = i;
        vrec[k].hi = i;
      }
      while (*vack != i) {
      }
      const auto t1 = std::chrono::steady_clock::now();
      if (i > warm) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      // A pause between records, as between a loop's collectives: the write lands at a random point of a turn.
      const auto until = t1 + std::chrono::nanoseconds(2000 + (i * 7919) % 3000);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    std::sort(us.begin(), us.end());
    std::printf("POLL %-60s median %.2f us  p10 %.2f  p90 %.2f  polls per record %.1f\n", c.what, us[us.size() / 2],
                us[us.size() / 10], us[us.size() * 9 / 10], double(*polls) / double(n));
  }
  return 0;
}
