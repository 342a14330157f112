// A stream that waits on a collective of a communicator across hosts goes on only once the collective's request has
// its final status, the ranks' signatures checked (docs/net-transport.md, "The match board across hosts"), on the
// CUDA executor. Two forked ranks on GPU 0 on two "hosts" by DFCCL_HOSTID (the network transport; builds with UCX).
// - Agreeing all-reduces: after dfcclWait on a stream and cudaStreamSynchronize, dfcclTest reports each one done with
//   dfcclSuccess, and the data is exact.
// - Differing operators submitted at the same time (an all-barrier first): each rank's submission is refused or,
//   once its stream has gone on, its request reports dfcclInvalidUsage naming argument 'op'; never success.
// Skipped without a GPU; the GPU check runs in a child, so that this process forks its ranks before any CUDA call.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dfccl.h"
#include "forked_rank.h"
#include "gpu_check.h"
#include "net/transport.h"

namespace {

constexpr size_t kCount = 16384;
constexpr int kAgreeing = 100;

// A rank's buffers and stream on GPU 0.
struct Gpu {
  int32_t *in = nullptr, *out = nullptr;
  cudaStream_t s = nullptr;
  bool ok = cudaMalloc(reinterpret_cast<void**>(&in), kCount * 4) == cudaSuccess &&
            cudaMalloc(reinterpret_cast<void**>(&out), kCount * 4) == cudaSuccess &&
            cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess;
};

int fail(int rank, const std::string& why) {
  std::fprintf(stderr, "rank %d: %s\n", rank, why.c_str());
  return 1;
}

// Submits an all-reduce with op on g's stream, makes the stream wait for it and synchronizes the stream; then asks
// dfcclTest at once. *submitted: the submission's result; *done, *status: dfcclTest's.
void run_on_stream(dfcclComm_t comm, Gpu& g, dfcclRedOp_t op, dfcclResult_t* submitted, int* done,
                   dfcclResult_t* status) {
  dfcclRequest_t q = nullptr;
  *done = 0;
  *status = dfcclInProgress;
  *submitted = dfcclAllReduce(g.in, g.out, kCount, dfcclInt32, op, comm, 0, g.s, &q);
  if (*submitted != dfcclSuccess) return;
  if (dfcclWait(q, g.s) != dfcclSuccess || cudaStreamSynchronize(g.s) != cudaSuccess) {
    *status = dfcclInternalError;
  } else {
    *status = dfcclTest(q, done);
  }
  dfcclSynchronize(q, 5000);
  dfcclRequestFree(q);
}

int agreeing(dfcclComm_t comm, int rank) {
  Gpu g;
  std::vector<int32_t> host(kCount, rank + 1);
  if (!g.ok || cudaMemcpy(g.in, host.data(), kCount * 4, cudaMemcpyHostToDevice) != cudaSuccess)
    return fail(rank, "CUDA set-up failed");
  int not_final = 0;
  for (int i = 0; i < kAgreeing; ++i) {
    dfcclResult_t submitted, status;
    int done = 0;
    run_on_stream(comm, g, dfcclSum, &submitted, &done, &status);
    if (submitted != dfcclSuccess) return fail(rank, std::string("submission: ") + dfcclGetLastError(nullptr));
    if (!done) {
      ++not_final;
    } else if (status != dfcclSuccess) {
      return fail(rank, std::string("all-reduce ") + std::to_string(i) + ": " + dfcclGetErrorString(status));
    }
    if (cudaMemcpy(host.data(), g.out, kCount * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
      return fail(rank, "copy back failed");
    for (size_t k = 0; k < kCount; ++k)
      if (host[k] != 3) return fail(rank, "wrong data at " + std::to_string(k) + ": " + std::to_string(host[k]));
    host.assign(kCount, rank + 1);
  }
  if (not_final > 0)
    return fail(rank, std::to_string(not_final) + " of " + std::to_string(kAgreeing) +
                          " requests were still in progress after their stream went on");
  std::printf("[ agreeing ] rank %d: %d all-reduces final when their stream went on, exact\n", rank, kAgreeing);
  return dfcclCommDestroy(comm) == dfcclSuccess ? 0 : fail(rank, "destroy failed");
}

int differing(dfcclComm_t comm, int rank) {
  Gpu g;
  if (!g.ok) return fail(rank, "CUDA set-up failed");
  dfcclResult_t submitted, status;
  int done = 0;
  run_on_stream(comm, g, dfcclSum, &submitted, &done, &status);  // both ranks leave it within a network round
  if (submitted != dfcclSuccess || status != dfcclSuccess)
    return fail(rank, std::string("the first all-reduce: ") + dfcclGetLastError(nullptr));
  run_on_stream(comm, g, rank == 0 ? dfcclSum : dfcclMax, &submitted, &done, &status);
  const std::string err = dfcclGetLastError(nullptr);
  if (submitted == dfcclInvalidUsage) {
    std::printf("[ differing ] rank %d: submission refused: %s\n", rank, err.c_str());
  } else if (submitted != dfcclSuccess) {
    return fail(rank, std::string("submission: ") + dfcclGetErrorString(submitted));
  } else if (!done || status != dfcclInvalidUsage) {
    return fail(rank, std::string("after the stream went on: done ") + std::to_string(done) + ", " +
                          dfcclGetErrorString(status));
  } else {
    std::printf("[ differing ] rank %d: the stream went on with the request failed: %s\n", rank, err.c_str());
  }
  if (err.find("argument 'op'") == std::string::npos)
    return fail(rank, "the error does not name argument 'op': " + err);
  dfcclCommAbort(comm);
  return 0;
}

bool have_gpu() {
  const int verdict = dfccl::test::gpus_or_skip_in_child(1);
  if (verdict != 77) {
    EXPECT_EQ(verdict, 0) << "DFCCL_REQUIRE_GPUS: no usable GPU";
  }
  return verdict == 0;
}

void on_two_hosts(int rank) { setenv("DFCCL_HOSTID", rank == 0 ? "node-a" : "node-b", 1); }

}  // namespace

TEST(MismatchHostsCuda, AgreeingCollectivesAreFinalWhenTheirStreamGoesOn) {
  if (!dfccl::net::transport_available()) GTEST_SKIP() << "built without a network transport";
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dfccl::test::run_forked_ranks(2, on_two_hosts, agreeing, dfcclExecutorCuda);
}

TEST(MismatchHostsCuda, DifferingOperatorsAtOnceNeverLetTheStreamGoOnWithSuccess) {
  if (!dfccl::net::transport_available()) GTEST_SKIP() << "built without a network transport";
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  dfccl::test::run_forked_ranks(2, on_two_hosts, differing, dfcclExecutorCuda);
}
