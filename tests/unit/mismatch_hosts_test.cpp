// The match board across hosts (DESIGN invariant 7; docs/net-transport.md, "The match board across hosts"). Four
// forked processes (host executor) on two "hosts" by DFCCL_HOSTID: ranks 0 and 1 on host A, ranks 2 and 3 on host
// B. Both ranks of host B submit a collective that differs from host A's in one field, 150 ms before host A, 150 ms
// after it or at the same time: each host agrees with itself, so only the comparison between hosts finds it. Every rank
// must see, within 2 s, its submission refused or its collective fail with dfcclInvalidUsage — or, where its own part
// needed nothing from host B (a broadcast's root side), success with its data intact and dfcclCommGetAsyncError
// reporting dfcclInvalidUsage — with the last error naming the field and a rank of each host. The same for a
// dfcclSend from rank 0 whose dfcclRecv on rank 2 has another count (ranks 1 and 3 learn it from the asynchronous
// error); and a persistent collective prepared with another count on host B. Ranks that agree run 2500 random
// collectives and transfers undisturbed (more than twice an engine's 1024 slots, which across hosts stay taken until
// each request settles), and the stuck diagnosis names a rank of the other host that has not called
// (and not one that has). When host B's lowest rank has destroyed its communicator, posts and mismatches still reach
// host B's other rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "forked_rank.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRanks = 4;
constexpr size_t kCount = 4096;

using dfccl::test::ms_since;
bool on_host_b(int rank) { return rank >= 2; }

struct Call {
  const char* kind;  // "allreduce", "allgather", "broadcast", "send0to2" (rank 0 sends, rank 2 receives)
  size_t count = kCount;
  dfcclDataType_t dtype = dfcclInt32;
  dfcclRedOp_t op = dfcclSum;
  int root = 0;
};

struct Case {
  const char* name;
  Call a, b;  // host A's call and host B's
  const char* field;
};

dfcclResult_t submit(const Call& c, const std::vector<int32_t>& in, std::vector<int32_t>& out, dfcclComm_t comm,
                     int rank, dfcclRequest_t* q) {
  const std::string k = c.kind;
  if (k == "allreduce") return dfcclAllReduce(in.data(), out.data(), c.count, c.dtype, c.op, comm, 0, nullptr, q);
  if (k == "allgather") return dfcclAllGather(in.data(), out.data(), c.count, c.dtype, comm, 0, nullptr, q);
  if (k == "broadcast") return dfcclBroadcast(in.data(), out.data(), c.count, c.dtype, c.root, comm, 0, nullptr, q);
  if (rank == 0) return dfcclSend(in.data(), c.count, c.dtype, 2, comm, 0, nullptr, q);
  if (rank == 2) return dfcclRecv(out.data(), c.count, c.dtype, 0, comm, 0, nullptr, q);
  return dfcclSuccess;  // ranks 1 and 3 take no part in the transfer
}

// Whether out holds what call, run by agreeing ranks, leaves on this rank.
bool output_right(const Call& call, const std::vector<int32_t>& out, int rank) {
  const std::string k = call.kind;
  for (size_t i = 0; i < call.count; ++i) {
    if (k == "broadcast" && out[i] != call.root + 1) return false;
    if (k == "allreduce" && out[i] != kRanks * (kRanks + 1) / 2) return false;
  }
  if (k == "send0to2") return rank != 2;
  if (k != "allgather") return true;
  for (size_t i = 0; i < call.count * kRanks; ++i)
    if (out[i] != int32_t(i / call.count) + 1) return false;
  return true;
}

// The communicator's asynchronous error, waited for up to 2 s.
dfcclResult_t async_error(dfcclComm_t comm) {
  dfcclResult_t async = dfcclSuccess;
  for (int i = 0; i < 200 && async == dfcclSuccess; ++i) {
    dfcclCommGetAsyncError(comm, &async);
    if (async == dfcclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return async;
}

// One rank's side; returns 0 when every check held, else prints why and returns 1.
// When host B submits: kEarly 150 ms before host A, kLate 150 ms after it, kTogether at the same time (both hosts'
// collectives run: the mismatch is found by the proxies and the requests' check, MatchBoard::settled).
enum When { kEarly, kLate, kTogether };
const char* const kWhen[] = {"early", "late", "together"};

int rank_main(dfcclComm_t comm, int rank, const Case& tc, When when) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) std::fprintf(stderr, "[%s] rank %d: %s\n", tc.name, rank, what.c_str());
    return ok;
  };
  const Call& call = on_host_b(rank) ? tc.b : tc.a;
  if (when != kTogether && on_host_b(rank) == (when == kLate))
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  std::vector<int32_t> in(kCount * kRanks * 2, rank + 1), out(kCount * kRanks * 2, -1);
  const auto t0 = Clock::now();
  dfcclRequest_t q = nullptr;
  dfcclResult_t st = submit(call, in, out, comm, rank, &q);
  if (st == dfcclSuccess && q) st = dfcclSynchronize(q, 10000);
  std::string err = dfcclGetLastError(nullptr);
  bool ok = true;
  if (st == dfcclSuccess) {
    // A rank whose part needed nothing from the other host (or that takes no part) may finish: its data must be
    // right, and the mismatch must reach it through the asynchronous error within 2 s and its next call.
    ok &= check(output_right(call, out, rank), "the collective succeeded with wrong data");
    const dfcclResult_t async = async_error(comm);
    ok &= check(async == dfcclInvalidUsage, std::string("async error ") + dfcclGetErrorString(async));
    ok &= check(ms_since(t0) < 2000, "the asynchronous error took " + std::to_string(ms_since(t0)) + " ms");
    dfcclRequest_t q2 = nullptr;
    const dfcclResult_t again = dfcclAllReduce(in.data(), out.data(), 1, dfcclInt32, dfcclSum, comm, 0, nullptr, &q2);
    ok &= check(again == dfcclInvalidUsage, std::string("a later submission returned ") + dfcclGetErrorString(again));
    err = dfcclGetLastError(nullptr);
  } else {
    const double ms = ms_since(t0);
    ok &= check(st == dfcclInvalidUsage, std::string("the collective reported ") + dfcclGetErrorString(st));
    ok &= check(ms < 2000, "the failure took " + std::to_string(ms) + " ms");
    // A request that the engine failed (its collective finished before the mismatch was found: MatchBoard::settled)
    // can come before the communicator's failure (PeerWatch, within 100 ms).
    const dfcclResult_t async = async_error(comm);
    ok &= check(async == dfcclInvalidUsage, std::string("async error ") + dfcclGetErrorString(async));
    ok &= check(ms_since(t0) < 2000, "the asynchronous error took " + std::to_string(ms_since(t0)) + " ms");
  }
  const bool names_a = err.find("rank 0") != std::string::npos || err.find("rank 1") != std::string::npos;
  const bool names_b = err.find("rank 2") != std::string::npos || err.find("rank 3") != std::string::npos;
  ok &= check(err.find(tc.field) != std::string::npos && names_a && names_b,
              std::string("the error does not name ") + tc.field + " and a rank of each host: '" + err + "'");
  if (q) dfcclRequestFree(q);
  const auto t1 = Clock::now();
  const dfcclResult_t d = dfcclCommDestroy(comm);
  ok &= check(d == dfcclSuccess, std::string("dfcclCommDestroy returned ") + dfcclGetErrorString(d));
  // Far below the network timeout (20 s) that a destroy waiting for its peers would take; loaded machines take 1-2 s.
  ok &= check(ms_since(t1) < 3000, "dfcclCommDestroy took " + std::to_string(ms_since(t1)) + " ms");
  std::printf("[ mismatch ] %s, host B %s: rank %d after %.0f ms: %s: %s\n", tc.name, kWhen[when], rank, ms_since(t0),
              st == dfcclSuccess ? "finished, then the error" : "failed", err.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

// Forks kRanks processes on two hosts (ranks 0, 1: "mmhost-a"; 2, 3: "mmhost-b") that run body(comm, rank).
template <class Body>
void run_two_hosts(Body body) {
  dfccl::test::run_forked_ranks(
      kRanks, [](int rank) { setenv("DFCCL_HOSTID", on_host_b(rank) ? "mmhost-b" : "mmhost-a", 1); }, body);
}

const Case kCases[] = {
    {"count", {"allreduce"}, {"allreduce", kCount / 2}, "argument 'count'"},
    {"dtype", {"allreduce"}, {"allreduce", kCount, dfcclFloat32}, "argument 'datatype'"},
    {"op", {"allreduce"}, {"allreduce", kCount, dfcclInt32, dfcclMax}, "argument 'op'"},
    {"root", {"broadcast"}, {"broadcast", kCount, dfcclInt32, dfcclSum, 1}, "argument 'root'"},
    {"kind_allgather", {"allreduce"}, {"allgather"}, "dfcclAllGather"},
    {"kind_broadcast", {"allreduce"}, {"broadcast"}, "dfcclBroadcast"},
    {"p2p_count", {"send0to2"}, {"send0to2", kCount / 2}, "argument 'count'"},
};
constexpr int kNumCases = int(sizeof(kCases) / sizeof(kCases[0]));

class MismatchAcrossHosts : public testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(MismatchAcrossHosts, FailsOnEveryRankNamingTheField) {
  const Case& tc = kCases[std::get<0>(GetParam())];
  const When when = When(std::get<1>(GetParam()));
  run_two_hosts([&](dfcclComm_t comm, int rank) { return rank_main(comm, rank, tc, when); });
}

INSTANTIATE_TEST_SUITE_P(Fields, MismatchAcrossHosts,
                         testing::Combine(testing::Range(0, kNumCases), testing::Values(kEarly, kLate, kTogether)),
                         [](const testing::TestParamInfo<std::tuple<int, int>>& p) {
                           return std::string(kCases[std::get<0>(p.param)].name) + "_host_b_" +
                                  kWhen[std::get<1>(p.param)];
                         });

// Persistent collectives are matched by id between hosts too: host B prepares id 3 with a quarter of the count and
// starts it 150 ms after host A; every rank fails at its prepare, start or wait, naming the id and the count.
TEST(MismatchAcrossHosts, PersistentCollectivesAreComparedById) {
  run_two_hosts([](dfcclComm_t comm, int rank) {
    std::vector<int32_t> in(kCount, rank + 1), out(kCount);
    if (on_host_b(rank)) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    dfcclPersistent_t p = nullptr;
    const size_t count = on_host_b(rank) ? kCount / 4 : kCount;
    const auto t0 = Clock::now();
    dfcclResult_t st = dfcclPrepareAllReduce(count, dfcclInt32, dfcclSum, comm, 3, &p);
    dfcclRequest_t q = nullptr;
    if (st == dfcclSuccess) st = dfcclStart(p, in.data(), out.data(), 0, nullptr, &q);
    if (st == dfcclSuccess) st = dfcclSynchronize(q, 10000);
    const double ms = ms_since(t0);
    const std::string err = dfcclGetLastError(nullptr);
    if (st != dfcclInvalidUsage || ms > 2000 || err.find("persistent collective id 3") == std::string::npos ||
        err.find("argument 'count'") == std::string::npos) {
      std::fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, dfcclGetErrorString(st), ms, err.c_str());
      return 1;
    }
    return dfcclCommDestroy(comm) == dfcclSuccess ? 0 : 1;
  });
}

// One step of the agreeing stress: the same on every rank (one seed), each rank's own buffers.
int stress_step(dfcclComm_t comm, int rank, std::mt19937& rng, std::vector<int64_t>& in, std::vector<int64_t>& out) {
  const int kind = int(rng() % 5);
  const size_t count = 1 + rng() % 3000;
  const dfcclDataType_t dtype = rng() % 2 ? dfcclInt64 : dfcclFloat64;
  const int root = int(rng() % kRanks), src = int(rng() % kRanks), dst = int((src + 1 + rng() % 3) % kRanks);
  std::vector<dfcclRequest_t> qs;
  dfcclRequest_t q = nullptr;
  dfcclResult_t st = dfcclSuccess;
  if (kind == 0) st = dfcclAllReduce(in.data(), out.data(), count, dtype, dfcclSum, comm, 0, nullptr, &q);
  if (kind == 1) st = dfcclAllGather(in.data(), out.data(), count, dtype, comm, 0, nullptr, &q);
  if (kind == 2) st = dfcclBroadcast(in.data(), out.data(), count, dtype, root, comm, 0, nullptr, &q);
  if (kind == 3) st = dfcclReduce(in.data(), out.data(), count, dtype, dfcclMax, root, comm, 0, nullptr, &q);
  if (kind == 4 && rank == src) st = dfcclSend(in.data(), count, dtype, dst, comm, 0, nullptr, &q);
  if (kind == 4 && rank == dst) st = dfcclRecv(out.data(), count, dtype, src, comm, 0, nullptr, &q);
  if (st == dfcclSuccess && q) st = dfcclSynchronize(q, 20000);
  if (q) dfcclRequestFree(q);
  return st == dfcclSuccess ? 0 : 1;
}

// Agreeing ranks on two hosts are not disturbed: 2500 random collectives and transfers, in one order on every rank,
// all succeed and leave the communicator without an error (and a slot that stayed taken after its request settled
// would run the engine's 1024 out).
TEST(MismatchAcrossHosts, AgreeingRanksRunUndisturbed) {
  run_two_hosts([](dfcclComm_t comm, int rank) {
    std::mt19937 rng(20261204);
    std::vector<int64_t> in(3000 * kRanks, rank + 1), out(3000 * kRanks);
    const auto t0 = Clock::now();
    for (int i = 0; i < 2500; ++i) {
      if (stress_step(comm, rank, rng, in, out) != 0) {
        std::fprintf(stderr, "rank %d: step %d: %s\n", rank, i, dfcclGetLastError(nullptr));
        return 1;
      }
    }
    dfcclResult_t async = dfcclSuccess;
    dfcclCommGetAsyncError(comm, &async);
    if (async != dfcclSuccess) {
      std::fprintf(stderr, "rank %d: async error %s: %s\n", rank, dfcclGetErrorString(async),
                   dfcclGetLastError(nullptr));
      return 1;
    }
    if (rank == 0) std::printf("[ stress   ] 2500 steps across two hosts in %.0f ms\n", ms_since(t0));
    return dfcclCommDestroy(comm) == dfcclSuccess ? 0 : 1;
  });
}

// One transfer between hosts, rank 3 against rank 0 or 1 (step i: 0->3, 3->0, 1->3, 3->1), of count + i elements; a
// rank that takes no part returns 0 at once. Returns 0 when it succeeded with the sender's data, else 1.
int transfer_with_3(dfcclComm_t comm, int rank, int i, size_t count) {
  const int other = (i / 2) % 2, src = i % 2 ? 3 : other, dst = i % 2 ? other : 3;
  if (rank != src && rank != dst) return 0;
  std::vector<int32_t> in(count, src * 1000 + i), out(count, -1);
  dfcclRequest_t q = nullptr;
  dfcclResult_t st = rank == src ? dfcclSend(in.data(), count, dfcclInt32, dst, comm, 0, nullptr, &q)
                                 : dfcclRecv(out.data(), count, dfcclInt32, src, comm, 0, nullptr, &q);
  if (st == dfcclSuccess) st = dfcclSynchronize(q, 10000);
  if (q) dfcclRequestFree(q);
  if (st != dfcclSuccess) std::fprintf(stderr, "rank %d: step %d: %s\n", rank, i, dfcclGetLastError(nullptr));
  const bool right = rank == src || st != dfcclSuccess || out == in;
  if (!right) std::fprintf(stderr, "rank %d: step %d: wrong data\n", rank, i);
  return st == dfcclSuccess && right ? 0 : 1;
}

// The last part of PostsReachAHostWhoseLowestRankLeft on ranks 0, 1 and 3: rank 0 sends kCount elements to rank 3,
// which receives half as many. Each must see, within 2 s, its transfer end in dfcclInvalidUsage or success, the
// asynchronous error dfcclInvalidUsage and its next submission refused naming the count; returns 0 if so.
int count_mismatch_after_leave(dfcclComm_t comm, int rank) {
  std::vector<int32_t> in(kCount, 1), out(kCount, -1);
  const auto t0 = Clock::now();
  dfcclRequest_t q = nullptr;
  dfcclResult_t st = dfcclSuccess;
  if (rank == 0) st = dfcclSend(in.data(), kCount, dfcclInt32, 3, comm, 0, nullptr, &q);
  if (rank == 3) st = dfcclRecv(out.data(), kCount / 2, dfcclInt32, 0, comm, 0, nullptr, &q);
  if (st == dfcclSuccess && q) st = dfcclSynchronize(q, 10000);
  if (q) dfcclRequestFree(q);
  const dfcclResult_t async = async_error(comm);
  const double ms = ms_since(t0);
  dfcclRequest_t q2 = nullptr;
  const dfcclResult_t again = dfcclAllReduce(in.data(), out.data(), 1, dfcclInt32, dfcclSum, comm, 0, nullptr, &q2);
  const std::string err = dfcclGetLastError(nullptr);
  std::printf("[ left     ] rank %d: the transfer %s, the asynchronous error %s after %.0f ms, then %s: %s\n", rank,
              dfcclGetErrorString(st), dfcclGetErrorString(async), ms, dfcclGetErrorString(again), err.c_str());
  return (st == dfcclSuccess || st == dfcclInvalidUsage) && async == dfcclInvalidUsage && ms < 2000 &&
                 again == dfcclInvalidUsage && err.find("argument 'count'") != std::string::npos
             ? 0
             : 1;
}

// Rank 2, the lowest rank of host B, destroys its communicator; ranks 0, 1 and 3 go on with it. Posts must reach
// host B through rank 3 from then on: 50 transfers between rank 3 and ranks 0 and 1 complete in under 5 s (a post
// lost on the way to host B holds each of rank 3's requests 200 ms, MatchBoard::settled: 10 s), and a count that
// differs between rank 0's send and rank 3's receive fails every remaining rank with dfcclInvalidUsage.
TEST(MismatchAcrossHosts, PostsReachAHostWhoseLowestRankLeft) {
  const std::string left = testing::TempDir() + "dfccl-left-" + std::to_string(getpid());
  std::remove(left.c_str());
  run_two_hosts([&](dfcclComm_t comm, int rank) {
    if (rank == 2) {
      const dfcclResult_t d = dfcclCommDestroy(comm);
      std::ofstream(left).put('1');
      return d == dfcclSuccess ? 0 : 1;
    }
    for (int i = 0; i < 100 && !std::ifstream(left).good(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // for its message to reach host A
    const auto t0 = Clock::now();
    for (int i = 0; i < 50; ++i)
      if (transfer_with_3(comm, rank, i, 1000 + size_t(i)) != 0) return 1;
    const double ms = ms_since(t0);
    std::printf("[ left     ] rank %d: 50 transfers between hosts after rank 2 left in %.0f ms\n", rank, ms);
    const int rc = count_mismatch_after_leave(comm, rank);
    dfcclCommDestroy(comm);
    return ms < 5000 ? rc : 1;
  });
  std::remove(left.c_str());
}

// A collective that rank 3 (host B) has not called: the stuck warning (DFCCL_STUCK_WARN_S=1), dfcclDebugDump and
// dfcclRequestGetMissingRanks of ranks 0 and 1 (host A) and 2 (host B) name rank 3 alone: rank 2's arrival reaches
// host A through the mirrored board.
TEST(StuckDiagnosisAcrossHosts, NamesTheRankOfTheOtherHostThatHasNotCalled) {
  // A folder of its own: a done-file that an earlier run left would release rank 3 at once.
  const dfccl::test::ScratchDir scratch("dfccl-stuck-hosts");
  ASSERT_FALSE(scratch.path().empty());
  const std::string& dir = scratch.path();
  setenv("DFCCL_STUCK_WARN_S", "1", 1);
  setenv("DFCCL_DEBUG_FILE", (dir + "%p.log").c_str(), 1);
  run_two_hosts([&](dfcclComm_t comm, int rank) { return dfccl::test::check_stuck_diagnosis(comm, rank, dir); });
  unsetenv("DFCCL_STUCK_WARN_S");
  unsetenv("DFCCL_DEBUG_FILE");
}

}  // namespace
