// Probe: what one small collective costs on the GPUs' timeline in a loop, dfccl beside NCCL, and what the harness's
// timing adds to it. Two GPUs, one process, one host thread per GPU (as one MPI rank per GPU: neither thread waits
// for the other's CUDA calls), a 2-rank communicator of each library (dfcclCommInitAll, ncclCommInitAll). Each
// thread runs `iters` iterations back to back on one stream: dfccl: submit, dfcclWait on the stream (the harness's
// stream path); NCCL: the collective. Timing:
//   batch:      one event before the loop and one after it (nccl-tests' method): GPU time per collective;
//   per-iter:   also two events around every iteration (the harness's method, for per-iteration statistics).
// Each line gives the GPU time per iteration (first event to last, the first quarter left out as warm-up), the host
// loop's time per iteration, and for dfccl the median submit and dfcclWait calls. `pad` us of host busy-wait after
// every iteration tells whether the host bounds the loop (the GPU time moves at once) or has slack.
// First, the host cost of the CUDA calls such a loop makes (medians): cudaPointerGetAttributes (the argument
// checks), cudaEventRecord, the launch of an empty kernel (the stream waiter is one) and cuStreamWriteValue64.
// Build: target stream_loop (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
// It links the NCCL that the harness's build finds (NCCL_HOME, the CUDA toolkit's, Python's nvidia.nccl).
//   [NGPUS=1] stream_loop [iters=2000] [pad_us=0]
#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "probe_check.h"
#include "probe_stats.h"

#define NCCL_CHECK(x)                                              \
  do {                                                             \
    const ncclResult_t n_ = (x);                                   \
    if (n_ != ncclSuccess) probe_fail(#x, ncclGetErrorString(n_)); \
  } while (0)

using Clock = std::chrono::steady_clock;
static double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

__global__ void empty_kernel() {}

// Median host time of `call`, over n calls.
template <class F>
static double call_us(int n, F call) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    const auto a = Clock::now();
    call();
    t.push_back(us_between(a, Clock::now()));
  }
  return median(t);
}

static void host_calls() {
  CUDA_CHECK(cudaSetDevice(0));
  float* p;
  CUDA_CHECK(cudaMalloc(&p, 1 << 20));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreate(&e));
  cudaPointerAttributes attr;
  const double attr_us = call_us(1000, [&] { CUDA_CHECK(cudaPointerGetAttributes(&attr, p + 17)); });
  const double event_us = call_us(1000, [&] { CUDA_CHECK(cudaEventRecord(e, s)); });
  CUDA_CHECK(cudaStreamSynchronize(s));
  const double launch_us = call_us(1000, [&] { empty_kernel<<<1, 1, 0, s>>>(); });
  CUDA_CHECK(cudaStreamSynchronize(s));
  // The doorbell's and the barrier probe's call (dfccl's submit and dfcclWait each make one).
  using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  const auto write64 = driver_entry<WriteFn>("cuStreamWriteValue64");
  uint64_t v = 0;
  const double write_us = call_us(1000, [&] {
    if (write64(CUstream(s), CUdeviceptr(p), ++v, 0) != CUDA_SUCCESS) probe_fail("cuStreamWriteValue64", "host calls");
  });
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::printf("host calls (median of 1000): cudaPointerGetAttributes %.2f us, cudaEventRecord %.2f us, empty kernel "
              "launch %.2f us, cuStreamWriteValue64 %.2f us\n",
              attr_us, event_us, launch_us, write_us);
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
  cudaFree(p);
}

struct Case {
  bool nccl;  // else dfccl
  int kind;   // 0 all-reduce of `count` floats, 1 all-gather of `count` floats per rank
  size_t count;
  bool per_iter;  // two events around every iteration
  double pad_us;
};

struct LoopResult {
  double gpu_us = 0, host_us = 0, submit_us = 0, wait_us = 0;
};

static LoopResult run_loop(int dev, dfcclComm_t dc, ncclComm_t nc, const Case& c, int iters) {
  CUDA_CHECK(cudaSetDevice(dev));
  float *in, *out;
  CUDA_CHECK(cudaMalloc(&in, c.count * 4));
  CUDA_CHECK(cudaMalloc(&out, c.count * 8));
  CUDA_CHECK(cudaMemset(in, 0, c.count * 4));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int first = iters / 4;  // warm-up: not timed
  cudaEvent_t begin, end;
  CUDA_CHECK(cudaEventCreate(&begin));
  CUDA_CHECK(cudaEventCreate(&end));
  std::vector<cudaEvent_t> ev(c.per_iter ? 2 * iters : 0);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<dfcclRequest_t> reqs(c.nccl ? 0 : iters);
  std::vector<double> submit_us, wait_us;
  Clock::time_point h0;
  for (int i = 0; i < iters; ++i) {
    if (i == first) {
      h0 = Clock::now();
      CUDA_CHECK(cudaEventRecord(begin, s));
    }
    if (c.per_iter) CUDA_CHECK(cudaEventRecord(ev[2 * i], s));
    const auto a = Clock::now();
    if (c.nccl) {
      if (c.kind == 0) NCCL_CHECK(ncclAllReduce(in, out, c.count, ncclFloat32, ncclSum, nc, s));
      else NCCL_CHECK(ncclAllGather(in, out, c.count, ncclFloat32, nc, s));
    } else {
      if (c.kind == 0) DFCCL_CHECK(dfcclAllReduce(in, out, c.count, dfcclFloat32, dfcclSum, dc, 0, s, &reqs[i]));
      else DFCCL_CHECK(dfcclAllGather(in, out, c.count, dfcclFloat32, dc, 0, s, &reqs[i]));
      const auto b = Clock::now();
      DFCCL_CHECK(dfcclWait(reqs[i], s));
      submit_us.push_back(us_between(a, b));
      wait_us.push_back(us_between(b, Clock::now()));
    }
    if (c.per_iter) CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], s));
    const auto d = Clock::now();
    while (us_between(d, Clock::now()) < c.pad_us) {
    }
  }
  CUDA_CHECK(cudaEventRecord(end, s));
  const auto h1 = Clock::now();
  CUDA_CHECK(cudaStreamSynchronize(s));
  LoopResult r;
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  r.gpu_us = ms * 1e3 / (iters - first);
  r.host_us = us_between(h0, h1) / (iters - first);
  r.submit_us = median(submit_us);
  r.wait_us = median(wait_us);
  for (auto q : reqs) DFCCL_CHECK(dfcclSynchronize(q, 10000));
  for (auto q : reqs) dfcclRequestFree(q);
  for (auto& e : ev) cudaEventDestroy(e);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  cudaStreamDestroy(s);
  cudaFree(in);
  cudaFree(out);
  return r;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  const double pad = argc > 2 ? std::atof(argv[2]) : 0.0;
  host_calls();
  // NGPUS=1: one GPU with one-rank communicators (no peer): the host's calls and the stream path alone.
  const int ngpus = std::getenv("NGPUS") ? std::atoi(std::getenv("NGPUS")) : 2;
  if (ngpus != 1 && ngpus != 2) probe_fail("NGPUS", "must be 1 or 2");
  int devs[2] = {0, 1};
  std::vector<dfcclComm_t> dcomms(ngpus);
  DFCCL_CHECK(dfcclCommInitAll(dcomms.data(), ngpus, devs));
  std::vector<ncclComm_t> ncomms(ngpus);
  NCCL_CHECK(ncclCommInitAll(ncomms.data(), ngpus, devs));
  for (int kind : {0, 1})
    for (size_t count : {size_t(2), size_t(16384)})
      for (bool per_iter : {false, true})
        for (bool nccl : {false, true}) {
          const Case c{nccl, kind, count, per_iter, pad};
          std::vector<LoopResult> res(ngpus);
          std::vector<std::thread> threads;
          for (int r = 0; r < ngpus; ++r)
            threads.emplace_back([&, r] { res[r] = run_loop(r, dcomms[r], ncomms[r], c, iters); });
          for (auto& t : threads) t.join();
          for (int r = 0; r < ngpus; ++r) {
            std::printf("%-5s %s %7zu B %-8s pad %4.1f us rank %d: GPU %6.2f us/iter, host loop %6.2f us/iter",
                        nccl ? "nccl" : "dfccl", kind == 0 ? "all_reduce" : "all_gather", count * 4,
                        per_iter ? "per-iter" : "batch", pad, r, res[r].gpu_us, res[r].host_us);
            if (!nccl) std::printf(", submit %5.2f us, dfcclWait %5.2f us", res[r].submit_us, res[r].wait_us);
            std::printf("\n");
          }
          std::fflush(stdout);
        }
  for (auto c : dcomms) dfcclCommDestroy(c);
  for (auto c : ncomms) ncclCommDestroy(c);
  return 0;
}
