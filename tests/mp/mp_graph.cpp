// Collectives captured into CUDA graphs (docs/design.md, "CUDA graphs"), 2 ranks (one GPU each, or time-sliced on
// one): each rank captures an all-reduce on communicator A and one on communicator B, rank 0 in the order A, B and
// rank 1 in the order B, A, with both waits after both starts, then replays the graph REPLAYS times with new inputs
// before each replay and a cudaDeviceSynchronize, a cudaFree or a lazy kernel's first launch after some of them.
// Every replay must be exact.
//   mp_graph deferred [REPLAYS]   waits captured after both starts, on the capturing stream
//   mp_graph forked [REPLAYS]     A on the capturing stream, B on a second stream forked from it and joined after
//   mp_graph joined [REPLAYS]     NCCL's form (no request: each call's wait right after it), same order on both ranks
//   mp_graph p2p [REPLAYS]        transfers instead: on A a send to the peer then a receive from it (both ranks send
//                                 first), on B an all-to-all in NCCL's form; rank 0 captures A then B, rank 1 B then A,
//                                 A's waits after both
//   mp_graph blocking             deferred in blocking mode (DFCCL_MODE=blocking): the first replay must hang; an
//                                 abort of both communicators then releases the stream
// Needs DFCCL_GRAPHS=1 (the ctest sets it).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "app_kernels.h"
#include "mp_test.h"

using namespace dfccl::test;
using namespace dfccl::test::mp;

namespace {

constexpr size_t kCount = 1 << 18;  // 1 MiB of int32 per collective

struct Bufs {
  int32_t *in = nullptr, *out = nullptr;
};

Bufs alloc_bufs() {
  Bufs b;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&b.in), kCount * 4), "cudaMalloc");
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&b.out), kCount * 4), "cudaMalloc");
  return b;
}

// Rank r's input of replay k for collective `which` (0: A, 1: B), and the sum both ranks must get.
int32_t input(int rank, int k, int which) { return 1 + rank * 100 + k * 3 + which * 7; }
int32_t sum(int k, int which) { return input(0, k, which) + input(1, k, which); }

// Records mode p2p's program into the capture on s: on A a send of ba.in to the peer and a receive into ba.out from it
// (waits deferred), on B an all-to-all of bb.in's halves into bb.out's (no request: its waits right after it).
void capture_p2p(dfcclComm_t a, dfcclComm_t b, const Bufs& ba, const Bufs& bb, cudaStream_t s) {
  const int peer = 1 - g_rank;
  dfcclRequest_t rs = nullptr, rr = nullptr;
  auto transfers = [&] {
    ok(dfcclSend(ba.in, kCount, dfcclInt32, peer, a, 0, s, &rs), "dfcclSend (captured)");
    ok(dfcclRecv(ba.out, kCount, dfcclInt32, peer, a, 0, s, &rr), "dfcclRecv (captured)");
  };
  auto all_to_all = [&] {
    ok(dfcclAllToAll(bb.in, bb.out, kCount / 2, dfcclInt32, b, 0, s, nullptr), "dfcclAllToAll (captured)");
  };
  if (g_rank == 0) {
    transfers();
    all_to_all();
  } else {
    all_to_all();
    transfers();
  }
  ok(dfcclWait(rs, s), "dfcclWait (captured)");
  ok(dfcclWait(rr, s), "dfcclWait (captured)");
  dfcclRequestFree(rs);
  dfcclRequestFree(rr);
}

// Records the program of `mode` into a graph on s (s2: the forked stream).
cudaGraphExec_t capture(const std::string& mode, dfcclComm_t a, dfcclComm_t b, const Bufs& ba, const Bufs& bb,
                        cudaStream_t s, cudaStream_t s2) {
  cudaGraph_t graph = nullptr;
  cuda_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  auto allreduce = [&](dfcclComm_t c, const Bufs& bf, cudaStream_t st, dfcclRequest_t* req) {
    ok(dfcclAllReduce(bf.in, bf.out, kCount, dfcclInt32, dfcclSum, c, 0, st, req), "dfcclAllReduce (captured)");
  };
  if (mode == "p2p") {
    capture_p2p(a, b, ba, bb, s);
  } else if (mode == "joined") {
    allreduce(a, ba, s, nullptr);
    allreduce(b, bb, s, nullptr);
  } else {  // deferred and blocking on s; forked: B on s2, forked from s and joined back
    const bool forked = mode == "forked";
    const cudaStream_t sb = forked ? s2 : s;
    cudaEvent_t fork = nullptr, join = nullptr;
    if (forked) {
      cuda_ok(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "cudaEventCreate");
      cuda_ok(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "cudaEventCreate");
      cuda_ok(cudaEventRecord(fork, s), "cudaEventRecord");
      cuda_ok(cudaStreamWaitEvent(s2, fork), "cudaStreamWaitEvent");
    }
    dfcclRequest_t ra = nullptr, rb = nullptr;
    if (g_rank == 0) {
      allreduce(a, ba, s, &ra);
      allreduce(b, bb, sb, &rb);
    } else {
      allreduce(b, bb, sb, &rb);
      allreduce(a, ba, s, &ra);
    }
    ok(dfcclWait(ra, s), "dfcclWait (captured)");
    ok(dfcclWait(rb, sb), "dfcclWait (captured)");
    if (forked) {
      cuda_ok(cudaEventRecord(join, s2), "cudaEventRecord");
      cuda_ok(cudaStreamWaitEvent(s, join), "cudaStreamWaitEvent");
    }
    dfcclRequestFree(ra);
    dfcclRequestFree(rb);
  }
  cuda_ok(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cuda_ok(cudaGraphDestroy(graph), "cudaGraphDestroy");  // the exec keeps what it needs
  return exec;
}

// After replay k: now and then an implicit synchronization while the next replay may already wait for peers.
void disturb(int k, float* scratch) {
  if (k % 7 == 3) cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (k % 11 == 5) {
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, 1 << 20), "cudaMalloc");
    cuda_ok(cudaFree(p), "cudaFree");
  }
  if (k == 100) cuda_ok(launch_never_loaded_kernel(scratch, 256, cudaStreamPerThread), "lazy kernel");
  if (k == 200) cuda_ok(launch_second_never_loaded_kernel(scratch, 256, cudaStreamPerThread), "lazy kernel");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "deferred";
  const bool known = mode == "deferred" || mode == "forked" || mode == "joined" || mode == "p2p" || mode == "blocking";
  if (const int rc = start(&argc, &argv, 2, known, "mp_graph deferred|forked|joined|p2p|blocking [REPLAYS]"); rc >= 0)
    return rc;
  const int replays = mode == "blocking" ? 1 : (argc > 2 ? std::atoi(argv[2]) : 1000);
  if (mode == "blocking") setenv("DFCCL_MODE", "blocking", 1);
  dfcclComm_t a = comm_of_world(), b = comm_of_world();
  const Bufs ba = alloc_bufs(), bb = alloc_bufs();
  float* scratch = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&scratch), 1024 * sizeof(float)), "cudaMalloc");
  cudaStream_t s, s2;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cuda_ok(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "cudaStreamCreate");
  const cudaGraphExec_t exec = capture(mode, a, b, ba, bb, s, s2);
  std::printf("rank %d: captured (%s)\n", g_rank, mode.c_str());
  std::fflush(stdout);
  // A replay that takes over 20 s: the engine's state into the log (dfcclDebugDump), once.
  std::atomic<int> replays_done{0};
  std::thread([&] {
    int seen = -1;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(20));
      if (replays_done.load() == seen) {
        std::printf("rank %d: no replay finished for 20 s (at replay %d): dumping\n", g_rank, seen);
        std::fflush(stdout);
        dfcclDebugDump(a, 1);
        return;
      }
      seen = replays_done.load();
    }
  }).detach();
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int k = 0; k < replays; ++k) {
    cuda_ok(launch_fill(ba.in, kCount, input(g_rank, k, 0), s), "fill");
    cuda_ok(launch_fill(bb.in, kCount, input(g_rank, k, 1), s), "fill");
    cuda_ok(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    if (mode == "blocking") {
      const auto until = Clock::now() + std::chrono::seconds(3);
      while (cudaStreamQuery(s) == cudaErrorNotReady && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (cudaStreamQuery(s) != cudaErrorNotReady) fail("blocking mode completed the replay: the hazard did not show");
      std::printf("rank %d: blocking mode: the replay hangs (3 s), as NCCL's semantics do; aborting\n", g_rank);
      ok(dfcclCommAbort(a), "dfcclCommAbort");
      ok(dfcclCommAbort(b), "dfcclCommAbort");
      cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize after the abort");
      std::printf("rank %d: PASSED: the abort released the stream\n", g_rank);
      std::fflush(stdout);
      MPI_Finalize();
      return 0;
    }
    disturb(k, scratch);
    // p2p: A brings the peer's input; B's half q comes from rank q.
    const bool p2p = mode == "p2p";
    const size_t wrong_a = count_not_equal(ba.out, kCount, p2p ? input(1 - g_rank, k, 0) : sum(k, 0), s);
    const size_t wrong_b = p2p ? count_not_equal(bb.out, kCount / 2, input(0, k, 1), s) +
                                     count_not_equal(bb.out + kCount / 2, kCount / 2, input(1, k, 1), s)
                               : count_not_equal(bb.out, kCount, sum(k, 1), s);
    if (wrong_a != 0 || wrong_b != 0)
      fail("replay " + std::to_string(k) + ": " + std::to_string(wrong_a) + " wrong on A, " + std::to_string(wrong_b) +
           " wrong on B");
    replays_done.store(k + 1);
    if ((k + 1) % 250 == 0) std::printf("rank %d: %d replays exact (%.0f ms)\n", g_rank, k + 1, ms_since(t0));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::printf("rank %d: PASSED: %s, %d replays exact in %.0f ms (%.1f us a replay)\n", g_rank, mode.c_str(), replays,
              ms_since(t0), ms_since(t0) * 1000.0 / replays);
  cudaGraphExecDestroy(exec);
  ok(dfcclCommDestroy(a), "dfcclCommDestroy");
  ok(dfcclCommDestroy(b), "dfcclCommDestroy");
  MPI_Finalize();
  return 0;
}
