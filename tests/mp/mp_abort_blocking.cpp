// dfcclCommAbort in blocking mode while an implicit synchronization of the aborting process waits for the daemon.
// Two ranks under mpirun (rank r on GPU r % n; one GPU: two processes time-sliced on it), three communicators in
// dfcclModeBlocking (world and two dfcclCommSplit copies). Each rank submits collectives that the other rank never
// matches, completed by host callbacks (no stream waits): rank 0 an all-gather on communicator 0, rank 1 a
// reduce-scatter on communicator 2 and an all-gather on communicator 1. Its daemon waits in them for good (blocking
// mode cannot leave), and its main thread then makes an implicit synchronization: rank 0 the first launch of a lazily
// loaded kernel, rank 1 the KIND given. A watchdog thread of each rank then calls dfcclGetStats and dfcclDebugDump
// and aborts the three communicators. Checked on each rank:
//   - both synchronizations are still waiting when the watchdog starts (else the case was not reached);
//   - dfcclGetStats and dfcclDebugDump return within 4 s, each dfcclCommAbort within 2.5 s (DFCCL_ABORT_TIMEOUT_MS is
//     1 s), whatever the synchronization holds;
//   - the synchronization returns within 10 s of the first abort, every request reports dfcclAborted (or
//     dfcclRemoteError, where the other rank's abort was seen first), and dfcclCommDestroy afterwards returns at
//     once with dfcclInvalidUsage.
// A call that does not return fails the test and ends the process (a hung CUDA call cannot be recovered).
//   mpirun -np 2 mp_abort_blocking KIND   (KIND: free, lazy, devsync or mallochost; exit 77 without a GPU)
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "app_kernels.h"
#include "dfccl.h"
#include "mp_test.h"

namespace {

using namespace dfccl::test::mp;

// Runs f on its own thread; fails the test if it has not returned within limit_ms. Returns its duration in ms.
template <class F>
double within(double limit_ms, const std::string& what, F f) {
  const auto t0 = Clock::now();
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(std::chrono::duration<double, std::milli>(limit_ms)) != std::future_status::ready)
    fail(what + " did not return within " + std::to_string(int(limit_ms)) + " ms");
  done.get();
  return ms_since(t0);
}

// The implicit synchronization of one rank's main thread: true once it returned.
cudaError_t synchronize_by(const std::string& kind, int device, float* lazy_data) {
  cudaSetDevice(device);
  if (kind == "free") {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, 4096);
    return e == cudaSuccess ? cudaFree(p) : e;
  }
  if (kind == "lazy") {
    cudaError_t e = dfccl::test::launch_never_loaded_kernel(lazy_data, 1024, nullptr);
    return e == cudaSuccess ? cudaStreamSynchronize(nullptr) : e;
  }
  if (kind == "devsync") return cudaDeviceSynchronize();
  void* p = nullptr;  // mallochost
  cudaError_t e = cudaMallocHost(&p, 1 << 20);
  return e == cudaSuccess ? cudaFreeHost(p) : e;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("CUDA_MODULE_LOADING", "LAZY", 1);
  const std::string kind = argc > 1 ? argv[1] : "";
  const bool known = kind == "free" || kind == "lazy" || kind == "devsync" || kind == "mallochost";
  if (const int rc = start(&argc, &argv, 2, known,
                           "mpirun -np 2 mp_abort_blocking KIND (free, lazy, devsync or "
                           "mallochost)");
      rc >= 0)
    return rc;
  int device = 0;
  cudaGetDevice(&device);
  // Load the test kernels' module with another of its kernels: the first launch of a kernel of a loaded module is
  // the lazy load that acts as a device-wide barrier.
  cuda_ok(dfccl::test::launch_spin_kernel(1000, nullptr), "launch_spin_kernel");
  float* lazy_data = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&lazy_data), 4096), "cudaMalloc");
  const size_t n = 1 << 16;  // elements per rank
  int32_t *in = nullptr, *out = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&in), 2 * n * 4), "cudaMalloc");
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&out), 2 * n * 4), "cudaMalloc");
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  dfcclUniqueId id;
  if (g_rank == 0) ok(dfcclGetUniqueId(&id), "dfcclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorCuda;
  cfg.mode = dfcclModeBlocking;
  dfcclComm_t comms[3] = {};
  ok(dfcclCommInitRankConfig(&comms[0], 2, id, g_rank, &cfg), "dfcclCommInitRankConfig");
  ok(dfcclCommSplit(comms[0], 0, g_rank, &comms[1], nullptr), "dfcclCommSplit (1)");
  ok(dfcclCommSplit(comms[0], 0, g_rank, &comms[2], nullptr), "dfcclCommSplit (2)");
  MPI_Barrier(MPI_COMM_WORLD);

  std::atomic<int> called{0};
  auto count = [](dfcclRequest_t, dfcclResult_t, void* arg) { static_cast<std::atomic<int>*>(arg)->fetch_add(1); };
  std::vector<dfcclRequest_t> reqs;
  dfcclRequest_t q = nullptr;
  if (g_rank == 0) {
    ok(dfcclAllGather(in, out, n, dfcclInt32, comms[0], 0, DFCCL_NO_STREAM, &q), "dfcclAllGather (comm 0)");
    reqs.push_back(q);
  } else {
    ok(dfcclReduceScatter(in, out, n, dfcclInt32, dfcclSum, comms[2], 0, DFCCL_NO_STREAM, &q),
       "dfcclReduceScatter (comm 2)");
    reqs.push_back(q);
    ok(dfcclAllGather(in, out, n, dfcclInt32, comms[1], 0, DFCCL_NO_STREAM, &q), "dfcclAllGather (comm 1)");
    reqs.push_back(q);
  }
  for (dfcclRequest_t r : reqs) ok(dfcclRequestSetCallback(r, count, &called), "dfcclRequestSetCallback");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the daemon picks them up and waits in them

  const std::string sync_kind = g_rank == 0 ? "lazy" : kind;
  std::atomic<bool> returned{false};
  std::thread app([&] {
    const cudaError_t e = synchronize_by(sync_kind, device, lazy_data);
    if (e != cudaSuccess) fail(sync_kind + ": " + cudaGetErrorString(e));
    returned = true;
  });

  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    if (returned) fail(sync_kind + " returned while the collectives were pending: the case was not reached");
    const double stats_ms = within(4000, "dfcclGetStats", [&] {
      dfcclStats_t st = DFCCL_STATS_INITIALIZER;
      const dfcclResult_t r = dfcclGetStats(comms[0], &st);  // dfcclTimeout is allowed: the engine may be busy
      if (r != dfcclSuccess && r != dfcclTimeout) ok(r, "dfcclGetStats");
    });
    const double dump_ms = within(4000, "dfcclDebugDump", [&] { ok(dfcclDebugDump(comms[0], 1), "dfcclDebugDump"); });
    const auto t0 = Clock::now();
    double abort_ms[3];
    for (int k = 0; k < 3; ++k)
      abort_ms[k] = within(2500, "dfcclCommAbort of communicator " + std::to_string(k),
                           [&] { ok(dfcclCommAbort(comms[k]), "dfcclCommAbort"); });
    while (!returned && ms_since(t0) < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!returned) fail(sync_kind + " did not return within 10 s of the first abort");
    std::printf("rank %d: %s: stats %.1f ms, dump %.1f ms, aborts %.1f, %.1f, %.1f ms, synchronization back after "
                "%.1f ms\n",
                g_rank, sync_kind.c_str(), stats_ms, dump_ms, abort_ms[0], abort_ms[1], abort_ms[2], ms_since(t0));
    std::fflush(stdout);
  });
  watchdog.join();
  app.join();

  for (dfcclRequest_t r : reqs) {
    // dfcclRemoteError where the other rank's abort was seen first (both ranks abort).
    const dfcclResult_t s = dfcclSynchronize(r, 5000);
    if (s != dfcclAborted && s != dfcclRemoteError)
      fail(std::string("an aborted collective reported ") + dfcclGetErrorString(s));
    ok(dfcclRequestFree(r), "dfcclRequestFree");
  }
  if (called.load() != int(reqs.size())) fail("callbacks ran " + std::to_string(called.load()) + " times");
  for (dfcclComm_t c : comms) {
    const double ms = within(1000, "dfcclCommDestroy after the abort", [&] {
      if (dfcclCommDestroy(c) != dfcclInvalidUsage) fail("dfcclCommDestroy after an abort did not say so");
    });
    (void)ms;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("PASSED: blocking mode, %s on rank 1 and a lazy load on rank 0: every abort returned, the "
                "synchronizations returned\n",
                kind.c_str());
  cudaFree(in);
  cudaFree(out);
  cudaFree(lazy_data);
  MPI_Finalize();
  return 0;
}
