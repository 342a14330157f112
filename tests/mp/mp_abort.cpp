// dfcclCommAbort while another thread of the process is inside an implicit synchronization that waits for the
// aborted collective (the case an application's watchdog aborts in). Two ranks under mpirun, rank r on GPU r % n
// (one GPU: two processes time-sliced on it). Rank 1 never submits. Rank 0 submits an all-reduce, makes a stream
// wait for it (dfcclWait), and then one thread calls an implicit synchronization (cudaFree, the first launch of a
// lazily loaded kernel, cudaDeviceSynchronize, cudaMallocHost): it waits for that stream, hence for the collective,
// and the daemon stays for the wait. The main thread then aborts the communicator. Checked for each kind:
//   - the synchronization is still waiting after 200 ms (else the case was not reached: the test fails);
//   - dfcclCommAbort returns within 5 s (DFCCL_ABORT_TIMEOUT_MS is 1 s);
//   - the synchronization returns within 10 s of the abort, the request reports dfcclAborted and the stream drains.
// A call that does not return fails the test and ends the process (a hung CUDA call cannot be recovered).
//   mpirun -np 2 mp_abort [KINDS]   (KINDS: a comma list of free, lazy, devsync, mallochost; default all four.
//                                    Exit 77 without a GPU)
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iterator>
#include <string>
#include <thread>

#include "app_kernels.h"
#include "dfccl.h"
#include "mp_test.h"

namespace {

using namespace dfccl::test::mp;

enum class Sync { Free, LazyKernel, DeviceSynchronize, MallocHost };
struct Kind {
  Sync sync;
  const char* arg;   // on the command line
  const char* name;  // in messages
};
constexpr Kind kKinds[] = {{Sync::Free, "free", "cudaFree"},
                           {Sync::LazyKernel, "lazy", "first launch of a lazily loaded kernel"},
                           {Sync::DeviceSynchronize, "devsync", "cudaDeviceSynchronize"},
                           {Sync::MallocHost, "mallochost", "cudaMallocHost"}};
constexpr int kNumKinds = int(std::size(kKinds));

// Rank 0's side of one case; returns the abort's duration in ms.
double abort_under(const Kind& kind, dfcclComm_t comm, int device) {
  const std::string name = kind.name;
  const size_t n = size_t(1) << 18;
  int32_t *in = nullptr, *out = nullptr;
  void* victim = nullptr;
  float* lazy_data = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&in), n * 4), "cudaMalloc");
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&out), n * 4), "cudaMalloc");
  cuda_ok(cudaMalloc(&victim, 4096), "cudaMalloc");
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&lazy_data), 4096), "cudaMalloc");
  cuda_ok(cudaMemset(in, 1, n * 4), "cudaMemset");
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaStream_t s = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  dfcclRequest_t q = nullptr;
  ok(dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, comm, 0, s, &q), "dfcclAllReduce");
  ok(dfcclWait(q, s), "dfcclWait");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the stream waits, the daemon runs and stays

  std::atomic<bool> returned{false};
  std::thread app([&] {
    cudaSetDevice(device);
    cudaError_t e = cudaSuccess;
    switch (kind.sync) {
      case Sync::Free:
        e = cudaFree(victim);
        victim = nullptr;
        break;
      case Sync::LazyKernel:
        e = dfccl::test::launch_never_loaded_kernel(lazy_data, 1024, nullptr);
        if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
        break;
      case Sync::DeviceSynchronize: e = cudaDeviceSynchronize(); break;
      case Sync::MallocHost: {
        void* p = nullptr;
        e = cudaMallocHost(&p, 1 << 20);
        if (e == cudaSuccess) e = cudaFreeHost(p);
        break;
      }
    }
    if (e != cudaSuccess) fail(name + ": " + cudaGetErrorString(e));
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (returned) fail(name + " returned while the collective was pending: the case was not reached");

  const auto t0 = Clock::now();
  auto aborted = std::async(std::launch::async, [&] { return dfcclCommAbort(comm); });
  if (aborted.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
    fail("dfcclCommAbort did not return within 5 s while a thread was in " + name);
  ok(aborted.get(), "dfcclCommAbort");
  const double abort_ms = ms_since(t0);
  while (!returned && ms_since(t0) < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!returned) fail(name + " did not return within 10 s of the abort");
  app.join();
  const dfcclResult_t r = dfcclSynchronize(q, 5000);
  if (r != dfcclAborted) fail(std::string("the aborted collective reported ") + dfcclGetErrorString(r));
  cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize (the stream that waited)");
  std::printf("rank 0: %s: abort returned after %.1f ms, the synchronization after %.1f ms\n", kind.name, abort_ms,
              ms_since(t0));
  std::fflush(stdout);
  dfcclRequestFree(q);
  cudaStreamDestroy(s);
  if (victim) cudaFree(victim);
  cudaFree(lazy_data);
  cudaFree(in);
  cudaFree(out);
  return abort_ms;
}

// The kinds named in a comma list; false if one is unknown.
bool parse_kinds(const std::string& kinds, bool run[kNumKinds]) {
  for (size_t pos = 0; pos <= kinds.size();) {
    const size_t end = std::min(kinds.find(',', pos), kinds.size());
    const std::string k = kinds.substr(pos, end - pos);
    int i = 0;
    while (i < kNumKinds && k != kKinds[i].arg) ++i;
    if (i == kNumKinds) return false;
    run[i] = true;
    pos = end + 1;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool run[kNumKinds] = {};
  const bool parsed = parse_kinds(argc > 1 ? argv[1] : "free,lazy,devsync,mallochost", run);
  if (const int rc = start(&argc, &argv, 2, parsed,
                           "mpirun -np 2 mp_abort [KINDS: comma list of free, lazy, devsync, "
                           "mallochost]");
      rc >= 0)
    return rc;
  int device = 0;
  cudaGetDevice(&device);
  // Load the module of the test's kernels with another of its kernels: the first launch of a kernel of a module
  // already loaded is the one that acts as a device-wide barrier (docs/design.md, "Implicit synchronizations").
  cuda_ok(dfccl::test::launch_spin_kernel(1000, nullptr), "launch_spin_kernel");
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  int ran = 0;
  for (int i = 0; i < kNumKinds; ++i) {
    if (!run[i]) continue;
    const Kind& kind = kKinds[i];
    ++ran;
    dfcclUniqueId id;
    if (g_rank == 0) ok(dfcclGetUniqueId(&id), "dfcclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
    cfg.executor = dfcclExecutorCuda;
    dfcclComm_t comm = nullptr;
    ok(dfcclCommInitRankConfig(&comm, 2, id, g_rank, &cfg), "dfcclCommInitRankConfig");
    if (g_rank == 0) abort_under(kind, comm, device);
    MPI_Barrier(MPI_COMM_WORLD);  // rank 1 never submitted: it leaves once rank 0 is done
    if (g_rank == 1) ok(dfcclCommAbort(comm), "dfcclCommAbort (rank 1)");
  }
  if (g_rank == 0)
    std::printf("PASSED: dfcclCommAbort returned and released the application under %d kind(s) of synchronization\n",
                ran);
  MPI_Finalize();
  return 0;
}
