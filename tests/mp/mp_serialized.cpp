// Disordered stream waits while kernel launches may be serialized (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer). Two
// ranks under mpirun (rank r on GPU r % n), two communicators (world and a split). In each round rank 0 runs
// [A on communicator 0, B on communicator 1] and rank 1 [B, A]; for each collective the main thread fills its input
// with a kernel on a fill stream, synchronizes that stream, submits it host-ordered and joins it to a stream of its
// own with dfcclWait. A watchdog thread aborts both communicators if the rounds have not finished after LIMIT s.
// Passes (exit 0) when
//   - without serialization: every round completes and every output is exact;
//   - with it: the library warned at init, naming the setting (read back from this process's stderr), and every
//     round either completed exactly or was ended by the abort, after which every call returned (the documented
//     limit: a dfcclWait holds the host or later kernels there).
// Anything else exits 1 (a call that does not return after the abort is ended by ctest's timeout).
//   mpirun -np 2 mp_serialized [ROUNDS [LIMIT]]   (default 50 rounds, 20 s; exit 77 without a GPU)
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <unistd.h>

#include "app_kernels.h"
#include "dfccl.h"
#include "mp_test.h"

namespace {

using namespace dfccl::test::mp;

constexpr size_t kCount = 1 << 14;

// What serializes launches here, as the library detects it ("" if nothing).
std::string serialization() {
  const char* clb = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (clb && std::string(clb) == "1") return "CUDA_LAUNCH_BLOCKING=1";
  return std::getenv("NV_SANITIZER_INJECTION_TRANSPORT_TYPE") ? "compute-sanitizer" : "";
}

// This process's stderr, passed through and kept: the library's warnings are checked.
class StderrTap {
 public:
  StderrTap() {
    int fds[2];
    if (pipe(fds) != 0) fail("pipe");
    saved_ = dup(2);
    dup2(fds[1], 2);
    close(fds[1]);
    reader_ = std::thread([this, in = fds[0]] {
      char buf[4096];
      for (ssize_t n; (n = read(in, buf, sizeof(buf))) > 0;) {
        if (write(saved_, buf, size_t(n)) < 0) break;
        std::lock_guard<std::mutex> lk(mu_);
        text_.append(buf, size_t(n));
      }
      close(in);
    });
  }
  // Restores stderr and returns what was written to it.
  std::string finish() {
    std::fflush(stderr);
    dup2(saved_, 2);
    reader_.join();
    std::lock_guard<std::mutex> lk(mu_);
    return text_;
  }

 private:
  int saved_ = -1;
  std::thread reader_;
  std::mutex mu_;
  std::string text_;
};

struct Coll {
  dfcclComm_t comm = nullptr;
  int32_t *in = nullptr, *out = nullptr;
  cudaStream_t stream = nullptr;  // the stream that waits for it
};

// One collective of a round: fill, synchronize the fill stream, submit host-ordered, join its stream. False once
// the communicator was aborted (the round then stops).
bool run_one(Coll& c, int32_t value, cudaStream_t fill, dfcclRequest_t* q) {
  cuda_ok(dfccl::test::launch_fill(c.in, kCount, value, fill), "launch_fill");
  cuda_ok(cudaStreamSynchronize(fill), "cudaStreamSynchronize (fill)");
  const dfcclResult_t r = dfcclAllReduce(c.in, c.out, kCount, dfcclInt32, dfcclSum, c.comm, 0, DFCCL_NO_STREAM, q);
  if (r == dfcclInvalidUsage || r == dfcclRemoteError) return false;  // aborted meanwhile, here or by the peer
  if (r != dfcclSuccess) fail(std::string("dfcclAllReduce: ") + dfcclGetLastError(nullptr));
  if (dfcclWait(*q, c.stream) != dfcclSuccess) fail(std::string("dfcclWait: ") + dfcclGetLastError(nullptr));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
  const int limit_s = argc > 2 ? std::atoi(argv[2]) : 20;
  if (const int rc = start(&argc, &argv, 2, rounds >= 1 && limit_s >= 1,
                           "mpirun -np 2 mp_serialized [ROUNDS >= 1 [LIMIT s >= 1]]");
      rc >= 0)
    return rc;
  const std::string serialized = serialization();
  StderrTap tap;
  dfcclUniqueId id;
  if (g_rank == 0 && dfcclGetUniqueId(&id) != dfcclSuccess) fail("dfcclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  Coll coll[2];
  if (dfcclCommInitRank(&coll[0].comm, 2, id, g_rank) != dfcclSuccess) fail(dfcclGetLastError(nullptr));
  if (dfcclCommSplit(coll[0].comm, 0, g_rank, &coll[1].comm, nullptr) != dfcclSuccess) fail(dfcclGetLastError(nullptr));
  for (Coll& c : coll) {
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&c.in), kCount * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&c.out), kCount * 4), "cudaMalloc");
    cuda_ok(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  cudaStream_t fill = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&fill, cudaStreamNonBlocking), "cudaStreamCreate");
  MPI_Barrier(MPI_COMM_WORLD);

  std::atomic<bool> finished{false}, aborted{false};
  std::thread watchdog([&] {
    const auto t0 = std::chrono::steady_clock::now();
    while (!finished && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(limit_s))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (finished) return;
    std::printf("rank %d: rounds not finished after %d s: aborting both communicators\n", g_rank, limit_s);
    std::fflush(stdout);
    aborted = true;
    for (Coll& c : coll)
      if (dfcclCommAbort(c.comm) != dfcclSuccess) fail("dfcclCommAbort");
  });
  int done = 0;
  for (int r = 0; r < rounds && !aborted; ++r, ++done) {
    dfcclRequest_t q[2] = {};
    bool ran = true;
    for (int k = 0; k < 2 && ran; ++k) {
      const int which = g_rank == 0 ? k : 1 - k;  // rank 0: A then B; rank 1: B then A
      ran = run_one(coll[which], r + which + 1, fill, &q[which]);
    }
    for (int k = 0; k < 2; ++k) {
      if (!q[k]) continue;
      cuda_ok(cudaStreamSynchronize(coll[k].stream), "cudaStreamSynchronize (waiting stream)");
      const dfcclResult_t st = dfcclSynchronize(q[k], 30000);
      if (st == dfcclSuccess) {
        const size_t wrong = dfccl::test::count_not_equal(coll[k].out, kCount, 2 * (r + k + 1), coll[k].stream);
        if (wrong != 0) fail("round " + std::to_string(r) + ": " + std::to_string(wrong) + " wrong elements");
      } else if (st == dfcclRemoteError) {
        aborted = true;  // the peer's watchdog aborted first: this round ended by an abort all the same
      } else if (!(aborted && st == dfcclAborted)) {
        fail(std::string("a collective reported ") + dfcclGetErrorString(st));
      }
      dfcclRequestFree(q[k]);
    }
    if (!ran) break;
  }
  finished = true;
  watchdog.join();
  std::printf("rank %d: %s: %d of %d rounds completed\n", g_rank, aborted ? "ABORTED after a hang" : "COMPLETED", done,
              rounds);
  std::fflush(stdout);
  if (!aborted)
    for (Coll& c : coll)
      if (dfcclCommDestroy(c.comm) != dfcclSuccess)
        fail(std::string("dfcclCommDestroy: ") + dfcclGetLastError(nullptr));
  const std::string err = tap.finish();
  const bool warned = err.find("kernel launches are serialized here (" + serialized + ")") != std::string::npos;
  int outcome = 0;
  if (serialized.empty() && aborted) {
    std::fprintf(stderr, "rank %d: FAILED: a round hung without serialized launches\n", g_rank);
    outcome = 1;
  }
  if (!serialized.empty() && !warned) {
    std::fprintf(stderr, "rank %d: FAILED: no warning about %s at init\n", g_rank, serialized.c_str());
    outcome = 1;
  }
  if (outcome == 0 && !serialized.empty())
    std::printf("rank %d: PASSED under %s: warned at init; %s\n", g_rank, serialized.c_str(),
                aborted ? "the hang was ended by the abort (the documented limit)" : "every round completed");
  MPI_Finalize();
  return outcome;
}
