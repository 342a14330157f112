// Collectives that disagree between ranks fail on every rank with dfcclInvalidUsage and a message naming the field,
// both values and the ranks (DESIGN invariant 7): never a silent success with wrong data, never a hang. Four processes
// (forked, host executor) form a communicator; rank 2 submits a collective that differs from the others' in one
// field, either before them or 150 ms after them. Each rank must see, within 2 s: its submission refused, or its
// collective fail, with dfcclInvalidUsage — or, where its own part needed nothing from rank 2 (a broadcast's root),
// success with its data intact and dfcclCommGetAsyncError reporting dfcclInvalidUsage — with the last error naming
// the field; dfcclCommDestroy returning within 1 s, and a second one refused. A second part checks what a pending
// collective's ranks are told about the peers that have not called it (dfcclDebugDump, the stuck warning).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "forked_rank.h"
#include "gpu_check.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRanks = 4;
constexpr int kOdd = 2;  // the rank whose collective differs
constexpr size_t kCount = 4096;

using dfccl::test::ms_since;

struct Call {
  const char* kind;  // "allreduce", "allgather", "broadcast"
  size_t count = kCount;
  dfcclDataType_t dtype = dfcclInt32;
  dfcclRedOp_t op = dfcclSum;
  int root = 0;
};

struct Case {
  const char* name;
  Call common, odd;
  const char* field;  // what the message must name
};

template <class T>
dfcclResult_t submit(const Call& c, const std::vector<T>& in, std::vector<T>& out, dfcclComm_t comm,
                     dfcclRequest_t* q) {
  const std::string k = c.kind;
  if (k == "allreduce") return dfcclAllReduce(in.data(), out.data(), c.count, c.dtype, c.op, comm, 0, nullptr, q);
  if (k == "allgather") return dfcclAllGather(in.data(), out.data(), c.count, c.dtype, comm, 0, nullptr, q);
  return dfcclBroadcast(in.data(), out.data(), c.count, c.dtype, c.root, comm, 0, nullptr, q);
}

// Whether out holds what call, run by agreeing ranks, leaves on this rank.
bool output_right(const Call& call, const std::vector<int32_t>& out, int rank) {
  const std::string k = call.kind;
  for (size_t i = 0; i < call.count; ++i) {
    if (k == "broadcast" && out[i] != call.root + 1) return false;
    if (k == "allreduce" && out[i] != kRanks * (kRanks + 1) / 2) return false;
  }
  if (k != "allgather") return true;
  for (size_t i = 0; i < call.count * kRanks; ++i)
    if (out[i] != int32_t(i / call.count) + 1) return false;
  return rank >= 0;
}

// One rank's side; returns 0 when every check held, else prints why and returns 1.
int rank_main(dfcclComm_t comm, int rank, const Case& tc, bool odd_late) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) std::fprintf(stderr, "[%s] rank %d: %s\n", tc.name, rank, what.c_str());
    return ok;
  };
  const Call& call = rank == kOdd ? tc.odd : tc.common;  // the common calls are all dfcclInt32
  if ((rank == kOdd) == odd_late) std::this_thread::sleep_for(std::chrono::milliseconds(150));
  std::vector<int32_t> in(kCount * kRanks * 2, rank + 1), out(kCount * kRanks * 2, -1);
  const auto t0 = Clock::now();
  dfcclRequest_t q = nullptr;
  dfcclResult_t st = submit(call, in, out, comm, &q);
  if (st == dfcclSuccess) st = dfcclSynchronize(q, 10000);
  const double ms = ms_since(t0);
  std::string err = dfcclGetLastError(nullptr);
  bool ok = true;
  if (st == dfcclSuccess) {
    // A rank whose part needed nothing from rank 2 (a broadcast that reached it before rank 2) may finish: its data
    // must be right, and the mismatch must reach it through the asynchronous error and its next call.
    ok &= check(rank != kOdd && output_right(call, out, rank), "the collective succeeded with wrong data");
    dfcclResult_t async = dfcclSuccess;
    for (int i = 0; i < 200 && async == dfcclSuccess; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      dfcclCommGetAsyncError(comm, &async);
    }
    ok &= check(async == dfcclInvalidUsage, std::string("async error ") + dfcclGetErrorString(async));
    dfcclRequest_t q2 = nullptr;
    const dfcclResult_t again = submit(call, in, out, comm, &q2);
    ok &= check(again == dfcclInvalidUsage, std::string("a later submission returned ") + dfcclGetErrorString(again));
    err = dfcclGetLastError(nullptr);
  } else {
    ok &= check(st == dfcclInvalidUsage, std::string("the collective reported ") + dfcclGetErrorString(st));
    ok &= check(ms < 2000, "the failure took " + std::to_string(ms) + " ms");
    dfcclResult_t async = dfcclSuccess;
    dfcclCommGetAsyncError(comm, &async);
    ok &= check(async == dfcclInvalidUsage, std::string("async error ") + dfcclGetErrorString(async));
  }
  ok &= check(err.find(tc.field) != std::string::npos && err.find("rank 2") != std::string::npos,
              std::string("the error does not name ") + tc.field + " and rank 2: '" + err + "'");
  if (q) dfcclRequestFree(q);
  const auto t1 = Clock::now();
  const dfcclResult_t d = dfcclCommDestroy(comm);
  ok &= check(d == dfcclSuccess, std::string("dfcclCommDestroy returned ") + dfcclGetErrorString(d));
  ok &= check(ms_since(t1) < 1000, "dfcclCommDestroy took " + std::to_string(ms_since(t1)) + " ms");
  const dfcclResult_t d2 = dfcclCommDestroy(comm);  // a failed communicator is destroyed once, as any other
  ok &= check(d2 == dfcclInvalidUsage, std::string("a second dfcclCommDestroy returned ") + dfcclGetErrorString(d2));
  std::printf("[ mismatch ] %s, rank 2 %s: rank %d: %s: %s\n", tc.name, odd_late ? "late" : "early", rank,
              st == dfcclSuccess ? "finished, then the error" : "failed", err.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

// Forks kRanks processes that run body(comm, rank) after init; every one must exit 0.
template <class Body>
void run_ranks(Body body, dfcclExecutor_t executor = dfcclExecutorHost) {
  dfccl::test::run_forked_ranks(
      kRanks, [](int) {}, body, executor);
}

const Case kCases[] = {
    {"count", {"allreduce"}, {"allreduce", kCount / 2}, "argument 'count'"},
    {"dtype", {"allreduce"}, {"allreduce", kCount, dfcclFloat32}, "argument 'datatype'"},
    {"op", {"allreduce"}, {"allreduce", kCount, dfcclInt32, dfcclMax}, "argument 'op'"},
    {"root", {"broadcast"}, {"broadcast", kCount, dfcclInt32, dfcclSum, 1}, "argument 'root'"},
    {"kind_allgather", {"allreduce"}, {"allgather"}, "dfcclAllGather"},
    {"kind_broadcast", {"allreduce"}, {"broadcast"}, "dfcclBroadcast"},
};

class Mismatch : public testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(Mismatch, FailsOnEveryRankNamingTheField) {
  const Case& tc = kCases[std::get<0>(GetParam())];
  const bool late = std::get<1>(GetParam());
  run_ranks([&](dfcclComm_t comm, int rank) { return rank_main(comm, rank, tc, late); });
}

INSTANTIATE_TEST_SUITE_P(Fields, Mismatch, testing::Combine(testing::Range(0, 6), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<int, bool>>& p) {
                           return std::string(kCases[std::get<0>(p.param)].name) +
                                  (std::get<1>(p.param) ? "_odd_late" : "_odd_early");
                         });

// Ranks that agree are not disturbed: many collectives of varied shapes in one order on every rank all succeed.
TEST(Mismatch, AgreeingRanksRunUndisturbed) {
  run_ranks([](dfcclComm_t comm, int rank) {
    std::vector<int64_t> in(kCount * kRanks, rank + 1), out(kCount * kRanks);
    for (int i = 0; i < 300; ++i) {
      const Call c{i % 3 == 0 ? "allreduce" : (i % 3 == 1 ? "allgather" : "broadcast"), size_t(1 + i % 97),
                   i % 2 ? dfcclInt64 : dfcclFloat32, dfcclSum, i % kRanks};
      dfcclRequest_t q = nullptr;
      if (submit(c, in, out, comm, &q) != dfcclSuccess || dfcclSynchronize(q, 10000) != dfcclSuccess) {
        std::fprintf(stderr, "rank %d: collective %d: %s\n", rank, i, dfcclGetLastError(nullptr));
        return 1;
      }
      dfcclRequestFree(q);
    }
    return dfcclCommDestroy(comm) == dfcclSuccess ? 0 : 1;
  });
}

// Persistent collectives are matched by id: one prepared with another count on rank 2 fails at its first start.
TEST(Mismatch, PersistentCollectivesAreComparedById) {
  run_ranks([](dfcclComm_t comm, int rank) {
    std::vector<int32_t> in(kCount, rank + 1), out(kCount);
    dfcclPersistent_t p = nullptr;
    const size_t count = rank == kOdd ? kCount / 4 : kCount;
    // A rank that prepares after another found the mismatch is refused already at the prepare.
    dfcclResult_t st = dfcclPrepareAllReduce(count, dfcclInt32, dfcclSum, comm, 3, &p);
    dfcclRequest_t q = nullptr;
    if (st == dfcclSuccess) st = dfcclStart(p, in.data(), out.data(), 0, nullptr, &q);
    if (st == dfcclSuccess) st = dfcclSynchronize(q, 10000);
    const std::string err = dfcclGetLastError(nullptr);
    if (st != dfcclInvalidUsage || err.find("persistent collective id 3") == std::string::npos ||
        err.find("argument 'count'") == std::string::npos) {
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, dfcclGetErrorString(st), err.c_str());
      return 1;
    }
    return dfcclCommDestroy(comm) == dfcclSuccess ? 0 : 1;
  });
}

// The same on the CUDA executor (four ranks on GPU 0, device buffers): an all-reduce whose count differs on rank 2,
// and an all-gather against the others' all-reduce, fail on every rank with dfcclInvalidUsage. The GPU check runs in
// a child, so that this process forks its ranks before any CUDA call.
TEST(Mismatch, OnTheCudaExecutor) {
  const int verdict = dfccl::test::gpus_or_skip_in_child(1);
  if (verdict == 77) GTEST_SKIP() << "no GPU";
  ASSERT_EQ(verdict, 0) << "DFCCL_REQUIRE_GPUS: no usable GPU";
  for (const bool kind : {false, true}) {
    run_ranks(
        [kind](dfcclComm_t comm, int rank) {
          int32_t *in = nullptr, *out = nullptr;
          if (cudaMalloc(reinterpret_cast<void**>(&in), kCount * kRanks * 4) != cudaSuccess ||
              cudaMalloc(reinterpret_cast<void**>(&out), kCount * kRanks * 4) != cudaSuccess)
            return 5;
          const size_t count = rank == kOdd && !kind ? kCount / 2 : kCount;
          dfcclRequest_t q = nullptr;
          dfcclResult_t st = rank == kOdd && kind
                                 ? dfcclAllGather(in, out, count, dfcclInt32, comm, 0, nullptr, &q)
                                 : dfcclAllReduce(in, out, count, dfcclInt32, dfcclSum, comm, 0, nullptr, &q);
          if (st == dfcclSuccess) st = dfcclSynchronize(q, 10000);
          const std::string err = dfcclGetLastError(nullptr);
          const char* field = kind ? "dfcclAllGather" : "argument 'count'";
          if (st != dfcclInvalidUsage || err.find(field) == std::string::npos) {
            std::printf("rank %d: %s: %s\n", rank, dfcclGetErrorString(st), err.c_str());
            return 1;
          }
          if (rank == 0) std::printf("[ mismatch ] CUDA executor: %s\n", err.c_str());
          return dfcclCommDestroy(comm) == dfcclSuccess ? 0 : 1;
        },
        dfcclExecutorCuda);
  }
}

// A collective that rank 3 has not called: the stuck warning (DFCCL_STUCK_WARN_S=1) and dfcclDebugDump of the other
// ranks name rank 3 as the one that has not called it.
TEST(StuckDiagnosis, NamesTheRanksThatHaveNotCalled) {
  // A folder of its own: a done-file that an earlier run left would release rank 3 at once.
  const dfccl::test::ScratchDir scratch("dfccl-stuck");
  ASSERT_FALSE(scratch.path().empty());
  const std::string& dir = scratch.path();
  setenv("DFCCL_STUCK_WARN_S", "1", 1);
  setenv("DFCCL_DEBUG_FILE", (dir + "%p.log").c_str(), 1);
  run_ranks([&](dfcclComm_t comm, int rank) { return dfccl::test::check_stuck_diagnosis(comm, rank, dir); });
  unsetenv("DFCCL_STUCK_WARN_S");
  unsetenv("DFCCL_DEBUG_FILE");
}

}  // namespace
