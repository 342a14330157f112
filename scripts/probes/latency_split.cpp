// Probe: where does a small dfccl all-reduce on 2 GPUs spend its time? One process drives both GPUs
// (dfcclCommInitAll), so no MPI, no stream wait and no skew between two hosts' threads: for each size, `iters`
// rounds of { submit on GPU 0, submit on GPU 1, dfcclSynchronize both } ("single"), then rounds of 16 submissions per
// GPU before synchronizing ("burst"). Prints medians per rank of: core time (first block start -> last block end),
// wait (the longest time a channel spent in spin phases, i.e. waiting for the peer), start skew between the ranks'
// core starts (executor clocks of two GPUs: only comparable if their global timers agree), and end-to-end host time.
// Then, per collective and rank, the primitives the daemon ran and, when libdfccl was built with -DDFCCL_PROFILE=1,
// where thread 0 of the blocks spent its time, summed over them (dfcclStats_t.profileNs; read after the daemon exits
// idle).
// Run on the GPU machine by scripts/device/perf.sh.
// Build: target latency_split (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
//   latency_split [iters=200]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "probe_check.h"
#include "probe_stats.h"

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 200;
  int devs[2] = {0, 1};
  dfcclComm_t comms[2];
  DFCCL_CHECK(dfcclCommInitAll(comms, 2, devs));
  const size_t max_count = size_t(64) << 20;  // 256 MiB of float32
  float *in[2], *out[2];
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    cudaMalloc(&in[r], max_count * 4);
    cudaMalloc(&out[r], max_count * 4);
    cudaMemset(in[r], 0, max_count * 4);
  }
  for (int burst : {1, 16}) {
    for (size_t count : {size_t(2), size_t(256), size_t(16384), size_t(262144), size_t(2) << 20, size_t(64) << 20}) {
      if (burst > 1 && count > (size_t(1) << 20)) continue;
      std::vector<double> core[2], wait[2], e2e[2], skew;
      // The daemon adds its statistics when it exits: let it go idle before and after the measurement.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      dfcclStats_t before[2] = {DFCCL_STATS_INITIALIZER, DFCCL_STATS_INITIALIZER}, after[2] = {before[0], before[1]};
      for (int r = 0; r < 2; ++r) DFCCL_CHECK(dfcclGetStats(comms[r], &before[r]));
      for (int it = 0; it < iters + 10; ++it) {
        std::vector<dfcclRequest_t> reqs[2];
        for (int k = 0; k < burst; ++k)
          for (int r = 0; r < 2; ++r) {
            dfcclRequest_t q = nullptr;
            cudaSetDevice(r);
            DFCCL_CHECK(dfcclAllReduce(in[r], out[r], count, dfcclFloat32, dfcclSum, comms[r], 0, nullptr, &q));
            reqs[r].push_back(q);
          }
        for (int r = 0; r < 2; ++r)
          for (auto q : reqs[r]) DFCCL_CHECK(dfcclSynchronize(q, 10000));
        for (int k = 0; k < burst; ++k) {
          dfcclRequestInfo_t info[2] = {DFCCL_REQUEST_INFO_INITIALIZER, DFCCL_REQUEST_INFO_INITIALIZER};
          for (int r = 0; r < 2; ++r) DFCCL_CHECK(dfcclRequestGetInfo(reqs[r][k], &info[r]));
          if (it >= 10) {
            for (int r = 0; r < 2; ++r) {
              core[r].push_back((info[r].coreEndNs - info[r].coreStartNs) / 1e3);
              wait[r].push_back(info[r].waitUs);
              e2e[r].push_back((info[r].completeNs - info[r].submitNs) / 1e3);
            }
            skew.push_back((double(info[1].coreStartNs) - double(info[0].coreStartNs)) / 1e3);
          }
        }
        for (int r = 0; r < 2; ++r)
          for (auto q : reqs[r]) dfcclRequestFree(q);
      }
      std::printf("%-6s %9zu B: core %7.1f / %7.1f us, wait %6.1f / %6.1f us, e2e %7.1f / %7.1f us, start skew "
                  "(rank1 - rank0) %7.1f us, busbw from core %.1f GB/s\n",
                  burst == 1 ? "single" : "burst", count * 4, median(core[0]), median(core[1]), median(wait[0]),
                  median(wait[1]), median(e2e[0]), median(e2e[1]), median(skew),
                  double(count * 4) / (1e3 * std::max(median(core[0]), median(core[1]))));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (int r = 0; r < 2; ++r) {
        DFCCL_CHECK(dfcclGetStats(comms[r], &after[r]));
        print_stats_delta(r == 0 ? "rank 0" : "rank 1", before[r], after[r], double(iters + 10) * burst);
      }
      std::fflush(stdout);
    }
  }
  for (int r = 0; r < 2; ++r) dfcclCommDestroy(comms[r]);
  return 0;
}
