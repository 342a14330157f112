// A kernel of the application faults while a collective is pending: the process's CUDA context has failed, so the
// daemon can never run again. The collective then fails with dfcclUnhandledCudaError naming the launch's CUDA
// error, later submissions are refused the same way, and nothing terminates the process (the progress thread's
// relaunch used to throw out of the thread). Two forked ranks on GPU 0; rank 1 never submits, so that rank 0's
// all-reduce is pending (its daemon leaving stuck and coming back) when rank 0's own kernel faults. Skipped without a
// GPU; the GPU check runs in a child, so that this process forks its ranks before any CUDA call.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "dfccl.h"
#include "forked_rank.h"
#include "gpu_check.h"

cudaError_t fault_the_context(cudaStream_t s);  // device_fault_kernel.cu

namespace {

using Clock = std::chrono::steady_clock;
using dfccl::test::ms_since;

// Rank 0's side: 0 when every check held, else 1 after printing why.
int faulting_rank(dfcclComm_t comm) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "rank 0: %s\n", why.c_str());
    return 1;
  };
  const size_t n = size_t(1) << 16;
  int32_t *in = nullptr, *out = nullptr;
  cudaStream_t s = nullptr, app = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&in), n * 4) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&out), n * 4) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&app, cudaStreamNonBlocking) != cudaSuccess)
    return fail("CUDA set-up failed");
  dfcclRequest_t q = nullptr;
  if (dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, comm, 0, s, &q) != dfcclSuccess)
    return fail(std::string("submission: ") + dfcclGetLastError(nullptr));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the daemon leaves stuck: its peer never submits
  const cudaError_t fault = fault_the_context(app);
  if (fault != cudaErrorIllegalAddress) return fail("the faulting kernel reported CUDA error " + std::to_string(fault));
  const auto t0 = Clock::now();
  const dfcclResult_t st = dfcclSynchronize(q, 3000);
  const double failed_ms = ms_since(t0);
  const std::string err = dfcclGetLastError(nullptr);
  if (st != dfcclUnhandledCudaError)
    return fail(std::string("the pending collective reported ") + dfcclGetErrorString(st) + ": " + err);
  if (err.find("cannot be launched") == std::string::npos) return fail("the error does not say why: " + err);
  dfcclRequestFree(q);
  const dfcclResult_t later = dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, comm, 0, s, &q);
  if (later != dfcclUnhandledCudaError)
    return fail(std::string("a later submission reported ") + dfcclGetErrorString(later) + ": " +
                dfcclGetLastError(comm));
  std::printf("[ failed ] the pending all-reduce failed %.0f ms after the fault: %s\n", failed_ms, err.c_str());
  std::fflush(stdout);
  dfcclCommDestroy(comm);  // its CUDA calls fail on the failed context; it must return
  return 0;
}

TEST(DeviceFaultCuda, PendingCollectiveFails) {
  const int verdict = dfccl::test::gpus_or_skip_in_child(1);
  if (verdict == 77) GTEST_SKIP() << "no GPU";
  ASSERT_EQ(verdict, 0) << "DFCCL_REQUIRE_GPUS: no usable GPU";
  dfccl::test::ForkedId ids;
  std::fflush(stdout);
  pid_t pids[2];
  for (int rank = 0; rank < 2; ++rank) {
    pids[rank] = fork();
    ASSERT_GE(pids[rank], 0);
    if (pids[rank] != 0) continue;
    dfcclComm_t comm = dfccl::test::init_forked_rank(ids.get(rank, 2), rank, 2, dfcclExecutorCuda);
    if (rank == 1) {  // present, silent: rank 0's collective stays pending until its own context fails
      std::this_thread::sleep_for(std::chrono::seconds(8));
      _exit(0);
    }
    std::fflush(nullptr);
    _exit(faulting_rank(comm));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pids[0], &status, 0), pids[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 0 failed (status " << status << ")";
  kill(pids[1], SIGKILL);
  waitpid(pids[1], &status, 0);
}

}  // namespace
