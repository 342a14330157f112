// A stream that waits on a collective is released when the peer that the collective needs dies (DESIGN invariant 8),
// on the CUDA executor. Two forked ranks on GPU 0; rank 1 is killed (SIGKILL) 300 ms after init. Rank 0 submits an
// all-reduce on a stream, makes the stream wait for it (dfcclWait) and synchronizes the stream from another thread.
// Within 3 s of the kill: the synchronization returns, the request reports dfcclRemoteError and dfcclGetLastError
// names rank 1; destroy returns within 1 s. Run with both ranks on one host (the peer watch's pidfd) and with ranks on
// two hosts by DFCCL_HOSTID (the network transport's connection; builds with UCX). Skipped without a GPU; the GPU
// check runs in a child, so that this process forks its ranks before any CUDA call.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "dfccl.h"
#include "forked_rank.h"
#include "gpu_check.h"
#include "net/transport.h"

namespace {

using Clock = std::chrono::steady_clock;
using dfccl::test::ms_since;

// Rank 0's side: 0 when every check held, else 1 after printing why.
int survivor(dfcclComm_t comm) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "rank 0: %s\n", why.c_str());
    return 1;
  };
  const size_t n = size_t(1) << 18;
  int32_t *in = nullptr, *out = nullptr;
  cudaStream_t s = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&in), n * 4) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&out), n * 4) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return fail("CUDA set-up failed");
  dfcclRequest_t q = nullptr;
  if (dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, comm, 0, s, &q) != dfcclSuccess ||
      dfcclWait(q, s) != dfcclSuccess)
    return fail(std::string("submission: ") + dfcclGetLastError(nullptr));
  std::atomic<bool> released{false};
  std::atomic<int> sync_error{0};
  std::thread app([&] {
    sync_error = int(cudaStreamSynchronize(s));
    released = true;
  });
  const auto t0 = Clock::now();  // the peer is killed about 300 ms after init
  while (!released && ms_since(t0) < 5000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double release_ms = ms_since(t0);
  if (!released) {
    app.detach();
    return fail("the stream was not released within 5 s of the peer's death");
  }
  app.join();
  const dfcclResult_t st = dfcclSynchronize(q, 1000);
  const std::string err = dfcclGetLastError(nullptr);
  dfcclRequestFree(q);
  if (sync_error != int(cudaSuccess)) return fail("cudaStreamSynchronize: error " + std::to_string(sync_error));
  if (st != dfcclRemoteError) return fail(std::string("the collective reported ") + dfcclGetErrorString(st));
  if (err.find("rank 1") == std::string::npos) return fail("the error does not name rank 1: " + err);
  if (release_ms > 3000) return fail("the stream was released after " + std::to_string(release_ms) + " ms");
  const auto t1 = Clock::now();
  if (dfcclCommDestroy(comm) != dfcclSuccess) return fail(std::string("destroy: ") + dfcclGetLastError(nullptr));
  if (ms_since(t1) > 1000) return fail("destroy took " + std::to_string(ms_since(t1)) + " ms");
  std::printf("[ released ] stream released %.0f ms after the submission: %s\n", release_ms, err.c_str());
  std::fflush(stdout);
  return 0;
}

// Forks the two ranks with host ids host0 and host1; rank 1 dies 300 ms after init.
void run_case(const char* host0, const char* host1) {
  dfccl::test::ForkedId ids;
  std::fflush(stdout);
  pid_t pids[2];
  for (int rank = 0; rank < 2; ++rank) {
    pids[rank] = fork();
    ASSERT_GE(pids[rank], 0);
    if (pids[rank] != 0) continue;
    setenv("DFCCL_HOSTID", rank == 0 ? host0 : host1, 1);
    dfcclComm_t comm = dfccl::test::init_forked_rank(ids.get(rank, 2), rank, 2, dfcclExecutorCuda);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raise(SIGKILL);
    }
    std::fflush(nullptr);
    _exit(survivor(comm));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pids[0], &status, 0), pids[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 0 failed (status " << status << ")";
  waitpid(pids[1], &status, 0);
}

bool have_gpu() {
  const int verdict = dfccl::test::gpus_or_skip_in_child(1);
  if (verdict != 77) {
    EXPECT_EQ(verdict, 0) << "DFCCL_REQUIRE_GPUS: no usable GPU";
  }
  return verdict == 0;
}

}  // namespace

TEST(PeerDeathCuda, OneHost) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  run_case("node-a", "node-a");
}

TEST(PeerDeathCuda, TwoHosts) {
  if (!dfccl::net::transport_available()) GTEST_SKIP() << "built without a network transport";
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  run_case("node-a", "node-b");
}
