// A stream that waits on a collective of a communicator across hosts goes on only once the collective's request has
// its final status, the ranks' signatures checked (docs/net-transport.md, "The match board across hosts"), on the
// CUDA executor. Two forked ranks on GPU 0 on two "hosts" by DFCCL_HOSTID (the network transport; builds with UCX).
// - Agreeing all-reduces: after dfcclWait on a stream and cudaStreamSynchronize, dfcclTest reports each one done with
//   dfcclSuccess, and the data is exact.
// - Differing operators submitted at the same time (an agreeing all-reduce first): each rank's submission is refused,
//   or, when its stream has gone on, its request has failed with dfcclInvalidUsage naming argument 'op' or its
//   communicator has (the mismatch found before the collective ran aborts it, and the abort releases the stream);
//   never success.
// Skipped without a GPU; the GPU check runs in a child, so that this process forks its ranks before any CUDA call.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
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

// What one all-reduce on a stream showed: the submission's result; then, right after the stream went on
// (dfcclWait, cudaStreamSynchronize), dfcclTest's done and status and whether the communicator had already failed
// (its asynchronous error dfcclInvalidUsage within 5 ms: an abort, not the collective, released the stream); and the
// request's final status (dfcclSynchronize).
struct Outcome {
  dfcclResult_t submitted = dfcclInProgress, status = dfcclInProgress, final_status = dfcclInProgress;
  int done = 0;
  bool comm_failed = false;
};

Outcome run_on_stream(dfcclComm_t comm, Gpu& g, dfcclRedOp_t op) {
  Outcome o;
  dfcclRequest_t q = nullptr;
  o.submitted = dfcclAllReduce(g.in, g.out, kCount, dfcclInt32, op, comm, 0, g.s, &q);
  if (o.submitted != dfcclSuccess) return o;
  if (dfcclWait(q, g.s) != dfcclSuccess || cudaStreamSynchronize(g.s) != cudaSuccess) {
    o.status = dfcclInternalError;
  } else {
    o.status = dfcclTest(q, &o.done);
    for (int i = 0; i < 50 && !o.done && !o.comm_failed; ++i) {
      dfcclResult_t async = dfcclSuccess;
      dfcclCommGetAsyncError(comm, &async);
      o.comm_failed = async == dfcclInvalidUsage;
      if (!o.comm_failed) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  o.final_status = dfcclSynchronize(q, 5000);
  dfcclRequestFree(q);
  return o;
}

int agreeing(dfcclComm_t comm, int rank) {
  Gpu g;
  std::vector<int32_t> host(kCount, rank + 1);
  if (!g.ok || cudaMemcpy(g.in, host.data(), kCount * 4, cudaMemcpyHostToDevice) != cudaSuccess)
    return fail(rank, "CUDA set-up failed");
  int not_final = 0;
  for (int i = 0; i < kAgreeing; ++i) {
    const Outcome o = run_on_stream(comm, g, dfcclSum);
    if (o.submitted != dfcclSuccess) return fail(rank, std::string("submission: ") + dfcclGetLastError(nullptr));
    if (!o.done) {
      ++not_final;
    } else if (o.status != dfcclSuccess) {
      return fail(rank, std::string("all-reduce ") + std::to_string(i) + ": " + dfcclGetErrorString(o.status));
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
  const Outcome first = run_on_stream(comm, g, dfcclSum);  // both ranks leave it within a network round
  if (first.submitted != dfcclSuccess || first.final_status != dfcclSuccess)
    return fail(rank, std::string("the first all-reduce: ") + dfcclGetLastError(nullptr));
  const Outcome o = run_on_stream(comm, g, rank == 0 ? dfcclSum : dfcclMax);
  const std::string err = dfcclGetLastError(nullptr);
  if (o.submitted == dfcclInvalidUsage) {
    std::printf("[ differing ] rank %d: submission refused: %s\n", rank, err.c_str());
  } else if (o.submitted != dfcclSuccess) {
    return fail(rank, std::string("submission: ") + dfcclGetErrorString(o.submitted));
  } else if (o.done ? o.status != dfcclInvalidUsage : !o.comm_failed) {
    return fail(rank, std::string("when the stream went on: done ") + std::to_string(o.done) + ", " +
                          dfcclGetErrorString(o.status) + ", communicator failed " + std::to_string(o.comm_failed));
  } else if (o.final_status != dfcclInvalidUsage) {
    return fail(rank, std::string("the request ended with ") + dfcclGetErrorString(o.final_status));
  } else {
    std::printf("[ differing ] rank %d: the stream went on with %s: %s\n", rank,
                o.done ? "the request failed" : "the communicator failed (abort)", err.c_str());
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
