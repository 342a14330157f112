// Probe: what a small all-reduce costs per collective, one rank on one GPU, dfccl beside NCCL in one run, eager and
// captured into a CUDA graph (issue 53's four columns): dfccl eager (submit, dfcclWait on the stream), dfccl in a
// graph (the NCCL form, no request: one node that posts and waits), dfccl in a graph with a request and its
// dfcclWait captured after it (a start node and a wait node), NCCL eager, NCCL in a graph, and a device-to-device
// cudaMemcpyAsync of the same bytes, eager and in a graph (what NCCL runs for a one-rank communicator's
// out-of-place all-reduce: no kernel of its own, so its one-rank columns are a copy's cost). Each measure is
// `batch` collectives back to back on one stream, repeated `iters` times between two events after a warm-up: GPU
// time per collective, median over 5 rounds. Needs DFCCL_GRAPHS=1 (set here before the communicator is made).
// With `only` (one or two), it measures that dfccl graph form alone at 8 B, so that a -DDFCCL_PROFILE=1 build's
// trace of the graph path, printed when the engine ends (DFCCL_DEBUG=INFO), is that form's.
// Build: target graph_latency (cmake -DDFCCL_BUILD_PROBES=ON; it links the NCCL that the harness's build finds).
//   graph_latency [iters=100] [batch=20] [only]
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "dfccl.h"
#include "probe_check.h"
#include "probe_stats.h"

#define NCCL_CHECK(x)                                              \
  do {                                                             \
    const ncclResult_t n_ = (x);                                   \
    if (n_ != ncclSuccess) probe_fail(#x, ncclGetErrorString(n_)); \
  } while (0)

// GPU microseconds per collective of `iters` runs of `run` (each `batch` collectives) on s, median of 5 rounds.
static double per_coll_us(cudaStream_t s, int iters, int batch, const std::function<void()>& run) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) run();  // warm-up
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    CUDA_CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < iters; ++i) run();
    CUDA_CHECK(cudaEventRecord(b, s));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    rounds.push_back(double(ms) * 1000.0 / (double(iters) * batch));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(rounds);
}

static cudaGraphExec_t capture(cudaStream_t s, const std::function<void()>& calls) {
  cudaGraph_t g = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  calls();
  CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t e = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  CUDA_CHECK(cudaGraphDestroy(g));
  return e;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 100;
  const int batch = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::string only = argc > 3 ? argv[3] : "";
  if (!only.empty() && only != "one" && only != "two") probe_fail("argument 'only'", "must be one or two");
  setenv("DFCCL_GRAPHS", "1", 1);
  CUDA_CHECK(cudaSetDevice(0));
  dfcclComm_t dc = nullptr;
  int dev = 0;
  DFCCL_CHECK(dfcclCommInitAll(&dc, 1, &dev));
  ncclComm_t nc = nullptr;
  NCCL_CHECK(ncclCommInitAll(&nc, 1, &dev));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t max_bytes = 1 << 20;
  float *in = nullptr, *out = nullptr;
  CUDA_CHECK(cudaMalloc(&in, max_bytes));
  CUDA_CHECK(cudaMalloc(&out, max_bytes));
  std::printf("# one rank, all-reduce float32 out of place, us per collective (GPU time, %d x %d, median of 5)\n",
              iters, batch);
  std::printf("%10s %14s %14s %14s %14s %14s %14s %14s\n", "bytes", "dfccl eager", "dfccl graph", "graph 2 nodes",
              "nccl eager", "nccl graph", "memcpy eager", "memcpy graph");
  for (size_t bytes : {size_t(8), size_t(4096), size_t(262144)}) {
    const size_t n = bytes / 4;
    auto dfccl_eager = [&] {
      for (int k = 0; k < batch; ++k) {
        dfcclRequest_t r = nullptr;
        DFCCL_CHECK(dfcclAllReduce(in, out, n, dfcclFloat32, dfcclSum, dc, 0, s, &r));
        DFCCL_CHECK(dfcclWait(r, s));
        dfcclRequestFree(r);
      }
    };
    auto nccl_calls = [&] {
      for (int k = 0; k < batch; ++k) NCCL_CHECK(ncclAllReduce(in, out, n, ncclFloat32, ncclSum, nc, s));
    };
    const cudaGraphExec_t dg = capture(s, [&] {
      for (int k = 0; k < batch; ++k)
        DFCCL_CHECK(dfcclAllReduce(in, out, n, dfcclFloat32, dfcclSum, dc, 0, s, nullptr));
    });
    const cudaGraphExec_t dg2 = capture(s, [&] {
      for (int k = 0; k < batch; ++k) {
        dfcclRequest_t r = nullptr;
        DFCCL_CHECK(dfcclAllReduce(in, out, n, dfcclFloat32, dfcclSum, dc, 0, s, &r));
        DFCCL_CHECK(dfcclWait(r, s));
        dfcclRequestFree(r);
      }
    });
    const cudaGraphExec_t ng = capture(s, nccl_calls);
    auto copies = [&] {
      for (int k = 0; k < batch; ++k) CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, s));
    };
    const cudaGraphExec_t cg = capture(s, copies);
    if (!only.empty()) {
      const cudaGraphExec_t g = only == "one" ? dg : dg2;
      std::printf("%10zu dfccl graph (%s node%s): %.2f\n", bytes, only.c_str(), only == "one" ? "" : "s",
                  per_coll_us(s, iters, batch, [&] { CUDA_CHECK(cudaGraphLaunch(g, s)); }));
      for (cudaGraphExec_t e : {dg, dg2, ng, cg}) cudaGraphExecDestroy(e);
      break;
    }
    const double de = per_coll_us(s, iters, batch, dfccl_eager);
    const double dgr = per_coll_us(s, iters, batch, [&] { CUDA_CHECK(cudaGraphLaunch(dg, s)); });
    const double dgr2 = per_coll_us(s, iters, batch, [&] { CUDA_CHECK(cudaGraphLaunch(dg2, s)); });
    const double ne = per_coll_us(s, iters, batch, nccl_calls);
    const double ngr = per_coll_us(s, iters, batch, [&] { CUDA_CHECK(cudaGraphLaunch(ng, s)); });
    const double ce = per_coll_us(s, iters, batch, copies);
    const double cgr = per_coll_us(s, iters, batch, [&] { CUDA_CHECK(cudaGraphLaunch(cg, s)); });
    std::printf("%10zu %14.2f %14.2f %14.2f %14.2f %14.2f %14.2f %14.2f\n", bytes, de, dgr, dgr2, ne, ngr, ce, cgr);
    std::fflush(stdout);
    for (cudaGraphExec_t e : {dg, dg2, ng, cg}) cudaGraphExecDestroy(e);
  }
  DFCCL_CHECK(dfcclCommDestroy(dc));
  ncclCommDestroy(nc);
  return 0;
}
