// Probe: where does the fixed cost of one small collective go, outside the daemon's own work? One process, one GPU,
// a communicator of one rank (no peer, no waiting), an 8-byte all-reduce, `iters` times in each of these loops:
//   stream: submit on a stream, dfcclWait(request, stream) (the harness's default path): host time of each call,
//           GPU time per iteration (events around the loop);
//   burst:  `iters` submissions, one dfcclWait at the end: GPU time per collective without a stream wait per op;
//   host:   submit, dfcclSynchronize: end-to-end host time, core time, and how long the daemon took to start
//           (coreStartNs - submitNs; %globaltimer against CLOCK_MONOTONIC, offset measured here by a ping-pong
//           through pinned memory, whose round trip is also printed: the floor of a host-driven loop); once submitted
//           on the legacy default stream, once host-ordered (DFCCL_NO_STREAM);
//   memops: the floor of the stream path without dfccl: a cuStreamWriteValue64 then a cuStreamWaitValue64 on the
//           word it wrote, per iteration; and a write to pinned host memory that the host spins on (round trip).
// Then the engine's counters.
// Build: target overhead_split (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
//   overhead_split [iters=600]
#include <cuda.h>
#include <cuda_runtime.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "probe_check.h"
#include "probe_stats.h"

static uint64_t clock_ns(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
static uint64_t mono() { return clock_ns(CLOCK_MONOTONIC); }

// Host <-> GPU ping-pong through pinned memory: the kernel waits for ping = i, stamps %globaltimer into pong[1] and
// answers pong[0] = i. The round trip is the floor of any host-driven loop through the GPU (a store each way over
// PCIe and a poll on each side); the stamp, against the host's clock around the round trip, gives the clocks' offset
// to within half the round trip's asymmetry.
__global__ void pingpong(volatile unsigned long long* ping, volatile unsigned long long* pong, int n) {
  for (int i = 1; i <= n; ++i) {
    while (*ping != static_cast<unsigned long long>(i)) {
    }
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    pong[1] = t;
    __threadfence_system();
    pong[0] = static_cast<unsigned long long>(i);
  }
}

// The smallest non-zero step of %globaltimer seen by one thread over many reads (its resolution on this GPU).
__global__ void globaltimer_step(unsigned long long* out) {
  unsigned long long prev, t, step = ~0ull;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(prev));
  for (int i = 0; i < 200000; ++i) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t != prev && t - prev < step) step = t - prev;
    prev = t;
  }
  *out = step;
}

// globaltimer - CLOCK_MONOTONIC, in ns, from the ping-pong with the smallest round trip; prints the round trips.
static double gpu_minus_mono() {
  constexpr int kRounds = 2000;
  unsigned long long *ping = nullptr, *pong = nullptr, *step = nullptr;
  CUDA_CHECK(cudaHostAlloc(&ping, 64, cudaHostAllocMapped));
  CUDA_CHECK(cudaHostAlloc(&pong, 64, cudaHostAllocMapped));
  CUDA_CHECK(cudaMallocManaged(&step, 8));
  *ping = 0;
  pong[0] = pong[1] = 0;
  volatile unsigned long long* vping = ping;
  volatile unsigned long long* vpong = pong;
  pingpong<<<1, 1>>>(ping, pong, kRounds);
  CUDA_CHECK(cudaGetLastError());
  std::vector<double> rtt;
  double best = 1e18, offset = 0;
  for (int i = 1; i <= kRounds; ++i) {
    const uint64_t a = mono();
    *vping = static_cast<unsigned long long>(i);
    while (*vpong != static_cast<unsigned long long>(i)) {
    }
    const uint64_t b = mono();
    const double r = double(b - a);
    rtt.push_back(r / 1e3);
    if (i > kRounds / 10 && r < best) {  // after a warm-up
      best = r;
      offset = double(vpong[1]) - (double(a) + double(b)) / 2;
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  globaltimer_step<<<1, 1>>>(step);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("pinned-memory ping-pong host -> GPU -> host: median %.2f us, min %.2f us (%d round trips); "
              "%%globaltimer step %llu ns\n",
              median(rtt), best / 1e3, kRounds, *step);
  cudaFreeHost(ping);
  cudaFreeHost(pong);
  cudaFree(step);
  return offset;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 600;
  CUDA_CHECK(cudaSetDevice(0));
  int dev = 0;
  dfcclComm_t comm;
  DFCCL_CHECK(dfcclCommInitAll(&comm, 1, &dev));
  float *in, *out;
  CUDA_CHECK(cudaMalloc(&in, 4096));
  CUDA_CHECK(cudaMalloc(&out, 4096));
  CUDA_CHECK(cudaMemset(in, 0, 4096));
  CUDA_CHECK(cudaDeviceSynchronize());  // the input visible to the device before host-ordered submissions
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  const double offset = gpu_minus_mono();
  std::printf("globaltimer - CLOCK_MONOTONIC: %.0f ns\n", offset);
  dfcclStats_t st0 = DFCCL_STATS_INITIALIZER, st1 = DFCCL_STATS_INITIALIZER;
  std::vector<dfcclRequest_t> reqs(iters);

  for (int round = 0; round < 2; ++round) {  // round 0 warms up
    // stream
    std::vector<double> submit_us, wait_us;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the daemon leaves and adds its counters
    DFCCL_CHECK(dfcclGetStats(comm, &st0));
    const uint64_t h0 = mono();
    CUDA_CHECK(cudaEventRecord(e0, s));
    for (int i = 0; i < iters; ++i) {
      const uint64_t a = mono();
      DFCCL_CHECK(dfcclAllReduce(in, out, 2, dfcclFloat32, dfcclSum, comm, 0, s, &reqs[i]));
      const uint64_t b = mono();
      DFCCL_CHECK(dfcclWait(reqs[i], s));
      const uint64_t c = mono();
      submit_us.push_back((b - a) / 1e3);
      wait_us.push_back((c - b) / 1e3);
    }
    CUDA_CHECK(cudaEventRecord(e1, s));
    const uint64_t h1 = mono();
    CUDA_CHECK(cudaStreamSynchronize(s));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::vector<double> core, start_lat, e2e;
    for (int i = 0; i < iters; ++i) {
      dfcclRequestInfo_t info = DFCCL_REQUEST_INFO_INITIALIZER;
      DFCCL_CHECK(dfcclRequestGetInfo(reqs[i], &info));
      core.push_back((info.coreEndNs - info.coreStartNs) / 1e3);
      start_lat.push_back((double(info.coreStartNs) - offset - double(info.submitNs)) / 1e3);
      dfcclRequestFree(reqs[i]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    DFCCL_CHECK(dfcclGetStats(comm, &st1));
    if (round)
      std::printf("stream: GPU %.2f us per iteration, host loop %.2f us; median submit call %.2f us, dfcclWait call "
                  "%.2f us; core %.2f us; submit -> core start %.2f us; daemon launches %llu\n",
                  ms * 1e3 / iters, (h1 - h0) / 1e3 / iters, median(submit_us), median(wait_us), median(core),
                  median(start_lat), (unsigned long long)(st1.daemonLaunches - st0.daemonLaunches));

    if (round) print_stats_delta("stream", st0, st1, iters);

    // burst
    DFCCL_CHECK(dfcclGetStats(comm, &st0));
    CUDA_CHECK(cudaEventRecord(e0, s));
    const uint64_t b0 = mono();
    for (int i = 0; i < iters; ++i) {
      DFCCL_CHECK(dfcclAllReduce(in, out, 2, dfcclFloat32, dfcclSum, comm, 0, s, &reqs[i]));
      if (i % 64 == 63 || i == iters - 1) {  // at most 64 outstanding (the engine's slot limit is larger)
        DFCCL_CHECK(dfcclWait(reqs[i], s));
      }
    }
    CUDA_CHECK(cudaEventRecord(e1, s));
    const uint64_t b1 = mono();
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::vector<double> bcore;
    for (int i = 0; i < iters; ++i) {
      dfcclRequestInfo_t info = DFCCL_REQUEST_INFO_INITIALIZER;
      DFCCL_CHECK(dfcclRequestGetInfo(reqs[i], &info));
      bcore.push_back((info.coreEndNs - info.coreStartNs) / 1e3);
      dfcclRequestFree(reqs[i]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    DFCCL_CHECK(dfcclGetStats(comm, &st1));
    if (round)
      std::printf("burst (a wait every 64): GPU %.2f us per collective, host %.2f us per submission; core %.2f us\n",
                  ms * 1e3 / iters, (b1 - b0) / 1e3 / iters, median(bcore));
    if (round) print_stats_delta("burst", st0, st1, iters);

    // host completion: submitted on the legacy default stream (a stream write rings the doorbell), then host-ordered
    // (DFCCL_NO_STREAM: a store into pinned memory that the daemon's prefetcher forwards)
    for (const cudaStream_t hs : {cudaStream_t(nullptr), DFCCL_NO_STREAM}) {
      const char* label = hs == DFCCL_NO_STREAM ? "host-ordered" : "host";
      std::vector<double> he2e, hsub, hcore, hstart, hwake;
      DFCCL_CHECK(dfcclGetStats(comm, &st0));
      for (int i = 0; i < iters; ++i) {
        dfcclRequest_t q;
        const uint64_t a = mono();
        DFCCL_CHECK(dfcclAllReduce(in, out, 2, dfcclFloat32, dfcclSum, comm, 0, hs, &q));
        const uint64_t a2 = mono();
        DFCCL_CHECK(dfcclSynchronize(q, 10000));
        const uint64_t b = mono();
        dfcclRequestInfo_t info = DFCCL_REQUEST_INFO_INITIALIZER;
        DFCCL_CHECK(dfcclRequestGetInfo(q, &info));
        he2e.push_back((b - a) / 1e3);
        hsub.push_back((a2 - a) / 1e3);
        hcore.push_back((info.coreEndNs - info.coreStartNs) / 1e3);
        hstart.push_back((double(info.coreStartNs) - offset - double(info.submitNs)) / 1e3);
        hwake.push_back((double(b) - double(info.completeNs)) / 1e3);
        dfcclRequestFree(q);
      }
      if (round)
        std::printf("%s: end-to-end %.2f us (submit call %.2f); core %.2f us; submit -> core start %.2f us; core end "
                    "-> host sees it %.2f us; host sees it -> dfcclSynchronize returns %.2f us\n",
                    label, median(he2e), median(hsub), median(hcore), median(hstart),
                    median(he2e) - median(hstart) - median(hcore) - median(hwake), median(hwake));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      DFCCL_CHECK(dfcclGetStats(comm, &st1));
      if (round) print_stats_delta(label, st0, st1, iters);
    }
  }

  // memops floor
  using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  void* fw = nullptr;
  void* fwt = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fw, 12000, cudaEnableDefault, &q));
  CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &fwt, 12000, cudaEnableDefault, &q));
  auto wr = reinterpret_cast<WriteFn>(fw);
  auto wt = reinterpret_cast<WriteFn>(fwt);
  uint64_t* word;
  CUDA_CHECK(cudaMalloc(&word, 8));
  CUDA_CHECK(cudaMemset(word, 0, 8));
  for (int round = 0; round < 2; ++round) {
    CUDA_CHECK(cudaEventRecord(e0, s));
    const uint64_t a = mono();
    for (int i = 0; i < iters; ++i) {
      const uint64_t v = uint64_t(round) * iters + i + 1;
      if (wr(CUstream(s), CUdeviceptr(word), v, 0) != CUDA_SUCCESS) probe_fail("cuStreamWriteValue64", "");
      if (wt(CUstream(s), CUdeviceptr(word), v, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
        probe_fail("cuStreamWaitValue64", "");
    }
    CUDA_CHECK(cudaEventRecord(e1, s));
    const uint64_t b = mono();
    CUDA_CHECK(cudaStreamSynchronize(s));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (round)
      std::printf("memops: write + wait on a stream: GPU %.2f us per pair, host %.2f us per pair\n", ms * 1e3 / iters,
                  (b - a) / 1e3 / iters);
  }
  uint64_t* pinned;
  CUDA_CHECK(cudaHostAlloc(&pinned, 8, cudaHostAllocMapped | cudaHostAllocPortable));
  *pinned = 0;
  std::vector<double> rtt;
  for (int i = 0; i < iters; ++i) {
    const uint64_t a = mono();
    if (wr(CUstream(s), CUdeviceptr(pinned), uint64_t(i + 1), 0) != CUDA_SUCCESS)
      probe_fail("cuStreamWriteValue64", "");
    while (__atomic_load_n(pinned, __ATOMIC_ACQUIRE) < uint64_t(i + 1)) {
    }
    rtt.push_back((mono() - a) / 1e3);
  }
  std::printf("memops: write to pinned host memory, host spins until it lands: %.2f us\n", median(rtt));
  DFCCL_CHECK(dfcclGetStats(comm, &st1));
  std::printf("engine: launches %llu, idle exits %llu, stuck exits %llu, standby launches %llu\n",
              (unsigned long long)st1.daemonLaunches, (unsigned long long)st1.daemonExitsIdle,
              (unsigned long long)st1.daemonExitsStuck, (unsigned long long)st1.standbyLaunches);
  dfcclCommDestroy(comm);
  return 0;
}
