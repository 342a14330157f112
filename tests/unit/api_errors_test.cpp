// Bad input: every invalid argument returns an error code whose message names the argument; nothing crashes, and
// a collective queued before the bad calls still completes (DESIGN invariant 7).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "group.h"
#include "shm_names.h"

namespace dfccl::test {
namespace {

// Expects `call` to fail with `code` and the last error to mention `needle` (an argument name in quotes).
#define EXPECT_REJECTS(call, code, needle)                                             \
  do {                                                                                 \
    const dfcclResult_t r_ = (call);                                                   \
    EXPECT_EQ(r_, code) << #call;                                                      \
    EXPECT_NE(std::string(dfcclGetLastError(nullptr)).find(needle), std::string::npos) \
        << #call << " said: " << dfcclGetLastError(nullptr);                           \
  } while (0)

TEST(ApiErrors, EveryBadArgumentIsNamedAndNothingQueuedIsLost) {
  Group g(2, dfcclExecutorHost);
  dfcclComm_t c = g[0];
  std::vector<float> a(64, 1.0f), b(64, 0.0f), big(128, 1.0f), peer_in(64, 1.0f), peer_out(64);
  // A valid collective is queued first; the peer joins at the end.
  dfcclRequest_t queued = nullptr;
  ASSERT_EQ(dfcclAllReduce(a.data(), b.data(), 64, dfcclFloat32, dfcclSum, c, 0, nullptr, &queued), dfcclSuccess);

  const auto inv = dfcclInvalidArgument;
  EXPECT_REJECTS(dfcclAllReduce(nullptr, b.data(), 64, dfcclFloat32, dfcclSum, c, 0, nullptr, nullptr), inv,
                 "'sendbuff'");
  EXPECT_REJECTS(dfcclAllReduce(a.data(), nullptr, 64, dfcclFloat32, dfcclSum, c, 0, nullptr, nullptr), inv,
                 "'recvbuff'");
  EXPECT_REJECTS(dfcclAllReduce(a.data(), b.data(), 64, dfcclDataType_t(10), dfcclSum, c, 0, nullptr, nullptr), inv,
                 "'datatype'");
  EXPECT_REJECTS(dfcclAllReduce(a.data(), b.data(), 64, dfcclDataType_t(-1), dfcclSum, c, 0, nullptr, nullptr), inv,
                 "'datatype'");
  EXPECT_REJECTS(dfcclAllReduce(a.data(), b.data(), 64, dfcclFloat32, dfcclRedOp_t(5), c, 0, nullptr, nullptr), inv,
                 "'op'");
  EXPECT_REJECTS(dfcclAllReduce(a.data(), b.data(), size_t(-1), dfcclFloat32, dfcclSum, c, 0, nullptr, nullptr), inv,
                 "'count'");
  EXPECT_REJECTS(dfcclAllReduce(a.data(), b.data(), 64, dfcclFloat32, dfcclSum, nullptr, 0, nullptr, nullptr), inv,
                 "'comm'");
  auto* misaligned = reinterpret_cast<const float*>(reinterpret_cast<const char*>(a.data()) + 1);
  EXPECT_REJECTS(dfcclAllReduce(misaligned, b.data(), 8, dfcclFloat32, dfcclSum, c, 0, nullptr, nullptr), inv,
                 "aligned");
  int not_a_comm[64] = {};
  EXPECT_REJECTS(dfcclAllReduce(a.data(), b.data(), 64, dfcclFloat32, dfcclSum,
                                reinterpret_cast<dfcclComm_t>(not_a_comm), 0, nullptr, nullptr),
                 inv, "'comm'");
  EXPECT_REJECTS(dfcclAllGather(a.data(), nullptr, 32, dfcclFloat32, c, 0, nullptr, nullptr), inv, "'recvbuff'");
  EXPECT_REJECTS(dfcclAllGather(nullptr, b.data(), 32, dfcclFloat32, c, 0, nullptr, nullptr), inv, "'sendbuff'");
  EXPECT_REJECTS(dfcclReduceScatter(a.data(), b.data(), 32, dfcclFloat32, dfcclRedOp_t(9), c, 0, nullptr, nullptr), inv,
                 "'op'");
  EXPECT_REJECTS(dfcclReduceScatter(a.data(), b.data(), size_t(-5), dfcclFloat32, dfcclSum, c, 0, nullptr, nullptr),
                 inv, "'recvcount'");
  EXPECT_REJECTS(dfcclBroadcast(a.data(), b.data(), 64, dfcclFloat32, 2, c, 0, nullptr, nullptr), inv, "'root'");
  EXPECT_REJECTS(dfcclBroadcast(a.data(), b.data(), 64, dfcclFloat32, -1, c, 0, nullptr, nullptr), inv, "'root'");
  EXPECT_REJECTS(dfcclBroadcast(nullptr, b.data(), 64, dfcclFloat32, 0, c, 0, nullptr, nullptr), inv, "'sendbuff'");
  EXPECT_REJECTS(dfcclReduce(a.data(), b.data(), 64, dfcclFloat32, dfcclSum, 7, c, 0, nullptr, nullptr), inv, "'root'");
  EXPECT_REJECTS(dfcclReduce(a.data(), nullptr, 64, dfcclFloat32, dfcclSum, 0, c, 0, nullptr, nullptr), inv,
                 "'recvbuff'");

  // Init, split, config.
  dfcclComm_t nc = nullptr;
  dfcclUniqueId id;
  ASSERT_EQ(dfcclGetUniqueId(&id), dfcclSuccess);
  EXPECT_REJECTS(dfcclCommInitRank(nullptr, 2, id, 0), inv, "'comm'");
  EXPECT_REJECTS(dfcclCommInitRank(&nc, 0, id, 0), inv, "'nranks'");
  EXPECT_REJECTS(dfcclCommInitRank(&nc, 2, id, 2), inv, "'rank'");
  EXPECT_REJECTS(dfcclCommInitRank(&nc, 2, id, -1), inv, "'rank'");
  dfcclUniqueId junk{};
  EXPECT_REJECTS(dfcclCommInitRank(&nc, 2, junk, 0), inv, "'commId'");
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = 5;
  EXPECT_REJECTS(dfcclCommInitRankConfig(&nc, 1, id, 0, &cfg), inv, "'config->executor'");
  cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.mode = 3;
  EXPECT_REJECTS(dfcclCommInitRankConfig(&nc, 1, id, 0, &cfg), inv, "'config->mode'");
  dfcclConfig_t raw{};
  EXPECT_REJECTS(dfcclCommInitRankConfig(&nc, 1, id, 0, &raw), inv, "'config'");
  cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.version = DFCCL_VERSION_CODE + 1;
  EXPECT_REJECTS(dfcclCommInitRankConfig(&nc, 1, id, 0, &cfg), inv, "'config->version'");
  cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.device = -7;
  EXPECT_REJECTS(dfcclCommInitRankConfig(&nc, 1, id, 0, &cfg), inv, "'config->device'");
  cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.initTimeoutMs = 0;
  EXPECT_REJECTS(dfcclCommInitRankConfig(&nc, 1, id, 0, &cfg), inv, "'config->initTimeoutMs'");
  EXPECT_REJECTS(dfcclCommInitAll(nullptr, 2, nullptr), inv, "'comms'");
  EXPECT_REJECTS(dfcclCommInitAll(&nc, 0, nullptr), inv, "'ndev'");
  EXPECT_REJECTS(dfcclCommSplit(c, 0, 0, nullptr, nullptr), inv, "'newcomm'");
  EXPECT_REJECTS(dfcclCommSplit(c, -7, 0, &nc, nullptr), inv, "'color'");
  EXPECT_REJECTS(dfcclGetUniqueId(nullptr), inv, "'uniqueId'");
  EXPECT_REJECTS(dfcclCommCount(c, nullptr), inv, "'count'");
  EXPECT_REJECTS(dfcclCommUserRank(c, nullptr), inv, "'rank'");
  EXPECT_REJECTS(dfcclGetStats(c, nullptr), inv, "'stats'");
  EXPECT_REJECTS(dfcclDebugDump(nullptr, 0), inv, "'comm'");

  // Persistent collectives.
  dfcclPersistent_t p = nullptr;
  EXPECT_REJECTS(dfcclPrepareAllReduce(64, dfcclFloat32, dfcclSum, c, DFCCL_MAX_PERSISTENT_IDS, &p), inv, "'id'");
  EXPECT_REJECTS(dfcclPrepareAllReduce(64, dfcclFloat32, dfcclSum, c, -1, &p), inv, "'id'");
  EXPECT_REJECTS(dfcclPrepareAllReduce(64, dfcclFloat32, dfcclSum, c, 0, nullptr), inv, "'coll'");
  EXPECT_REJECTS(dfcclPrepareBroadcast(64, dfcclFloat32, 5, c, 0, &p), inv, "'root'");
  ASSERT_EQ(dfcclPrepareAllReduce(64, dfcclFloat32, dfcclSum, c, 1, &p), dfcclSuccess);
  dfcclPersistent_t dup = nullptr;
  EXPECT_REJECTS(dfcclPrepareAllReduce(64, dfcclFloat32, dfcclSum, c, 1, &dup), dfcclInvalidUsage, "already prepared");
  EXPECT_REJECTS(dfcclStart(p, nullptr, b.data(), 0, nullptr, nullptr), inv, "'sendbuff'");
  EXPECT_REJECTS(dfcclStart(nullptr, a.data(), b.data(), 0, nullptr, nullptr), inv, "'coll'");
  ASSERT_EQ(dfcclPersistentFree(p), dfcclSuccess);

  // Requests.
  int done = 0;
  EXPECT_REJECTS(dfcclTest(nullptr, &done), inv, "'request'");
  EXPECT_REJECTS(dfcclTest(queued, nullptr), inv, "'done'");
  EXPECT_REJECTS(dfcclSynchronize(queued, -1), inv, "'timeoutMs'");
  EXPECT_REJECTS(dfcclWait(nullptr, nullptr), inv, "'request'");
  EXPECT_REJECTS(dfcclRequestSetCallback(queued, nullptr, nullptr), inv, "'fn'");
  // One callback per request: a second is refused and the first stays.
  static std::atomic<int> first_calls{0}, second_calls{0};
  ASSERT_EQ(dfcclRequestSetCallback(
                queued, [](dfcclRequest_t, dfcclResult_t, void*) { ++first_calls; }, nullptr),
            dfcclSuccess);
  EXPECT_REJECTS(dfcclRequestSetCallback(
                     queued, [](dfcclRequest_t, dfcclResult_t, void*) { ++second_calls; }, nullptr),
                 dfcclInvalidUsage, "callback already");
  EXPECT_REJECTS(dfcclRequestGetInfo(queued, nullptr), inv, "'info'");

  // The queued collective was not disturbed by any of this.
  dfcclRequest_t peer = nullptr;  // waited for too: its daemon writes peer_out until it completes
  ASSERT_EQ(dfcclAllReduce(peer_in.data(), peer_out.data(), 64, dfcclFloat32, dfcclSum, g[1], 0, nullptr, &peer),
            dfcclSuccess);
  ASSERT_EQ(dfcclSynchronize(queued, 30000), dfcclSuccess);
  ASSERT_EQ(dfcclSynchronize(peer, 30000), dfcclSuccess);
  for (float v : b) EXPECT_EQ(v, 2.0f);
  for (float v : peer_out) EXPECT_EQ(v, 2.0f);
  ASSERT_EQ(dfcclRequestFree(queued), dfcclSuccess);  // returns once a callback taken has returned
  ASSERT_EQ(dfcclRequestFree(peer), dfcclSuccess);
  EXPECT_EQ(first_calls.load(), 1);
  EXPECT_EQ(second_calls.load(), 0);
  EXPECT_STREQ(dfcclGetErrorString(dfcclInvalidArgument), "invalid argument");
}

// Send and receive buffers that overlap other than by the kind's in-place rule are refused, naming both, before
// anything is queued (an all-reduce whose output started one element past its input used to return success with
// about half its elements wrong); exact in place is accepted and exact.
TEST(ApiErrors, PartlyOverlappingBuffersAreRefusedNamingBoth) {
  Group g(2, dfcclExecutorHost);
  const size_t n = 4096;
  std::vector<float> a(3 * n, 1.0f);
  float* x = a.data();
  const auto refused = [](dfcclResult_t r, const char* call) {
    EXPECT_EQ(r, dfcclInvalidArgument) << call;
    const std::string m = dfcclGetLastError(nullptr);
    EXPECT_NE(m.find("'sendbuff'"), std::string::npos) << call << " said: " << m;
    EXPECT_NE(m.find("'recvbuff'"), std::string::npos) << call << " said: " << m;
    EXPECT_NE(m.find("overlap"), std::string::npos) << call << " said: " << m;
  };
#define REFUSED(call) refused((call), #call)
  REFUSED(dfcclAllReduce(x, x + 1, n, dfcclFloat32, dfcclSum, g[0], 0, nullptr, nullptr));
  REFUSED(dfcclAllReduce(x + n - 1, x, n, dfcclFloat32, dfcclSum, g[0], 0, nullptr, nullptr));
  REFUSED(dfcclBroadcast(x + 3, x, n, dfcclFloat32, 0, g[0], 0, nullptr, nullptr));
  REFUSED(dfcclReduce(x, x + 5, n, dfcclFloat32, dfcclSum, 1, g[1], 0, nullptr, nullptr));
  // Rank 1's block of an all-gather's output is recvbuff + 1 * sendcount; rank 0's place is not rank 1's.
  REFUSED(dfcclAllGather(x, x, n, dfcclFloat32, g[1], 0, nullptr, nullptr));
  REFUSED(dfcclAllGather(x + n + 1, x, n, dfcclFloat32, g[1], 0, nullptr, nullptr));
  REFUSED(dfcclReduceScatter(x, x + 1, n, dfcclFloat32, dfcclSum, g[1], 0, nullptr, nullptr));
  REFUSED(dfcclReduceScatter(x, x, n, dfcclFloat32, dfcclSum, g[1], 0, nullptr, nullptr));
  dfcclPersistent_t p = nullptr;
  ASSERT_EQ(dfcclPrepareAllReduce(n, dfcclFloat32, dfcclSum, g[0], 0, &p), dfcclSuccess) << dfcclGetLastError(nullptr);
  REFUSED(dfcclStart(p, x, x + 2, 0, nullptr, nullptr));
  ASSERT_EQ(dfcclPersistentFree(p), dfcclSuccess);
#undef REFUSED
  // In place, as each kind's rule says: accepted, and exact on both ranks (the refused calls took no key).
  std::vector<float> r0(2 * n, 0.0f), r1(2 * n, 0.0f);
  for (size_t i = 0; i < n; ++i) r0[i] = float(i % 7), r1[n + i] = float(i % 5);
  dfcclRequest_t q[4] = {};
  ASSERT_EQ(dfcclAllGather(r0.data(), r0.data(), n, dfcclFloat32, g[0], 0, nullptr, &q[0]), dfcclSuccess)
      << dfcclGetLastError(nullptr);
  ASSERT_EQ(dfcclAllGather(r1.data() + n, r1.data(), n, dfcclFloat32, g[1], 0, nullptr, &q[1]), dfcclSuccess)
      << dfcclGetLastError(nullptr);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(dfcclSynchronize(q[i], 30000), dfcclSuccess);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(r0[i], float(i % 7)) << i;
    ASSERT_EQ(r0[n + i], float(i % 5)) << i;
  }
  EXPECT_EQ(r0, r1);
  ASSERT_EQ(dfcclAllReduce(r0.data(), r0.data(), 2 * n, dfcclFloat32, dfcclSum, g[0], 0, nullptr, &q[2]), dfcclSuccess)
      << dfcclGetLastError(nullptr);
  ASSERT_EQ(dfcclAllReduce(r1.data(), r1.data(), 2 * n, dfcclFloat32, dfcclSum, g[1], 0, nullptr, &q[3]), dfcclSuccess)
      << dfcclGetLastError(nullptr);
  for (int i = 2; i < 4; ++i) ASSERT_EQ(dfcclSynchronize(q[i], 30000), dfcclSuccess);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(r0[n + i], 2.0f * float(i % 5)) << i;
  EXPECT_EQ(r0, r1);
  for (dfcclRequest_t r : q) EXPECT_EQ(dfcclRequestFree(r), dfcclSuccess);
}

// A communicator larger than DFCCL_MAX_RANKS is refused before anything is made: no bootstrap segment of the id is
// left in /dev/shm.
TEST(ApiErrors, TooManyRanksAreRefusedAndLeaveNoSegment) {
  dfcclUniqueId id;
  ASSERT_EQ(dfcclGetUniqueId(&id), dfcclSuccess);
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.initTimeoutMs = 1000;
  dfcclComm_t c = nullptr;
  EXPECT_REJECTS(dfcclCommInitRankConfig(&c, INT_MAX, id, 0, &cfg), dfcclInvalidArgument, "'nranks'");
  EXPECT_REJECTS(dfcclCommInitRankConfig(&c, DFCCL_MAX_RANKS + 1, id, 5, &cfg), dfcclInvalidArgument, "'nranks'");
  EXPECT_EQ(c, nullptr);
  EXPECT_TRUE(bootstrap_segments(id).empty()) << "left: /dev/shm/" << bootstrap_segments(id).front();
  dfcclComm_t comms[1] = {};
  EXPECT_REJECTS(dfcclCommInitAllConfig(comms, DFCCL_MAX_RANKS + 1, nullptr, &cfg), dfcclInvalidArgument, "'ndev'");
}

TEST(ApiErrors, CudaExecutorWithoutGpuSaysSo) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) GTEST_SKIP() << "a GPU is present";
  dfcclUniqueId id;
  ASSERT_EQ(dfcclGetUniqueId(&id), dfcclSuccess);
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorCuda;
  cfg.device = 0;
  dfcclComm_t c = nullptr;
  EXPECT_EQ(dfcclCommInitRankConfig(&c, 1, id, 0, &cfg), dfcclNotSupported);
  EXPECT_NE(std::string(dfcclGetLastError(nullptr)).find("no GPU"), std::string::npos) << dfcclGetLastError(nullptr);
}

}  // namespace
}  // namespace dfccl::test

// Two callers for one rank of a communicator: the second is refused at once, naming the process that holds the rank;
// the first completes its init with the real other rank.
TEST(ApiErrors, ARankClaimedTwiceIsNamed) {
  dfcclUniqueId id;
  ASSERT_EQ(dfcclGetUniqueId(&id), dfcclSuccess);
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.initTimeoutMs = 20000;
  dfcclComm_t first = nullptr, second = nullptr, other = nullptr;
  dfcclResult_t first_result = dfcclInternalError;
  std::thread t([&] { first_result = dfcclCommInitRankConfig(&first, 2, id, 0, &cfg); });
  // The first caller holds rank 0 and waits for rank 1: its segment exists (it claims the rank right after mapping
  // it), however long a loaded machine took to get there.
  for (int k = 0; k < 2000 && dfccl::test::bootstrap_segments(id).empty(); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_REJECTS(dfcclCommInitRankConfig(&second, 2, id, 0, &cfg), dfcclInvalidUsage,
                 "rank 0 is already claimed by process " + std::to_string(getpid()));
  cfg.device = 1;
  ASSERT_EQ(dfcclCommInitRankConfig(&other, 2, id, 1, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);
  t.join();
  ASSERT_EQ(first_result, dfcclSuccess);
  EXPECT_EQ(dfcclCommDestroy(first), dfcclSuccess);
  EXPECT_EQ(dfcclCommDestroy(other), dfcclSuccess);
}

// A request handle kept after dfcclRequestFree is refused, also once a newer request took its place in the table.
TEST(ApiErrors, AFreedRequestHandleIsRefusedNotAliased) {
  dfcclComm_t comms[2] = {};
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  ASSERT_EQ(dfcclCommInitAllConfig(comms, 2, nullptr, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);
  std::vector<int32_t> in(16, 1), out0(16), out1(16);
  auto all_reduce = [&](dfcclRequest_t* q0) {
    dfcclRequest_t q1 = nullptr;
    ASSERT_EQ(dfcclAllReduce(in.data(), out0.data(), 16, dfcclInt32, dfcclSum, comms[0], 0, nullptr, q0), dfcclSuccess);
    ASSERT_EQ(dfcclAllReduce(in.data(), out1.data(), 16, dfcclInt32, dfcclSum, comms[1], 0, nullptr, &q1),
              dfcclSuccess);
    ASSERT_EQ(dfcclSynchronize(q1, 30000), dfcclSuccess);
    ASSERT_EQ(dfcclRequestFree(q1), dfcclSuccess);
  };
  dfcclRequest_t old = nullptr, fresh = nullptr;
  all_reduce(&old);
  ASSERT_EQ(dfcclSynchronize(old, 30000), dfcclSuccess);
  ASSERT_EQ(dfcclRequestFree(old), dfcclSuccess);
  all_reduce(&fresh);  // takes the freed slot
  int done = 0;
  EXPECT_REJECTS(dfcclTest(old, &done), dfcclInvalidArgument, "not a live request");
  EXPECT_REJECTS(dfcclRequestFree(old), dfcclInvalidArgument, "not a live request");
  EXPECT_EQ(dfcclSynchronize(fresh, 30000), dfcclSuccess);  // the newer request is untouched
  EXPECT_EQ(dfcclRequestFree(fresh), dfcclSuccess);
  for (dfcclComm_t c : comms) EXPECT_EQ(dfcclCommDestroy(c), dfcclSuccess);
}

// A split whose local checks fail on one rank (here its config) fails at once on the others of its color too, naming
// that rank and its reason, instead of their waiting for it until the new communicator's init times out.
TEST(ApiErrors, ASplitThatFailsOnOneRankNamesItOnTheOthers) {
  dfccl::test::Group g(2, dfcclExecutorHost);
  dfcclConfig_t good = DFCCL_CONFIG_INITIALIZER, bad_cfg = DFCCL_CONFIG_INITIALIZER;
  good.executor = bad_cfg.executor = dfcclExecutorHost;
  good.initTimeoutMs = 30000;
  bad_cfg.initTimeoutMs = 0;  // refused: must be positive
  dfcclComm_t out[2] = {};
  dfcclResult_t res[2] = {};
  std::string msg[2];
  const auto t0 = std::chrono::steady_clock::now();
  std::thread other([&] {
    res[1] = dfcclCommSplit(g[1], 0, 0, &out[1], &bad_cfg);
    msg[1] = dfcclGetLastError(nullptr);
  });
  res[0] = dfcclCommSplit(g[0], 0, 0, &out[0], &good);
  msg[0] = dfcclGetLastError(nullptr);
  other.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "rank 0 waited for rank 1's init";
  EXPECT_EQ(res[1], dfcclInvalidArgument);
  EXPECT_NE(msg[1].find("initTimeoutMs"), std::string::npos) << msg[1];
  EXPECT_EQ(res[0], dfcclInvalidUsage);
  EXPECT_NE(msg[0].find("rank 1"), std::string::npos) << msg[0];
  EXPECT_NE(msg[0].find("initTimeoutMs"), std::string::npos) << msg[0];
  for (dfcclComm_t c : out)
    if (c) dfcclCommDestroy(c);
}

// Host executor: dfcclWait blocks for at most DFCCL_HOST_WAIT_TIMEOUT_MS and returns the collective's status.
TEST(ApiErrors, HostWaitIsBoundedAndReturnsTheStatus) {
  dfcclComm_t comms[2] = {};
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  setenv("DFCCL_HOST_WAIT_TIMEOUT_MS", "300", 1);  // read when the engine is created
  ASSERT_EQ(dfcclCommInitAllConfig(comms, 2, nullptr, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);
  unsetenv("DFCCL_HOST_WAIT_TIMEOUT_MS");
  std::vector<int32_t> in(16, 1), out(16);
  dfcclRequest_t q = nullptr;  // rank 1 never joins
  ASSERT_EQ(dfcclAllReduce(in.data(), out.data(), 16, dfcclInt32, dfcclSum, comms[0], 0, nullptr, &q), dfcclSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_REJECTS(dfcclWait(q, nullptr), dfcclTimeout, "DFCCL_HOST_WAIT_TIMEOUT_MS");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_EQ(dfcclCommAbort(comms[0]), dfcclSuccess);
  EXPECT_EQ(dfcclWait(q, nullptr), dfcclAborted);
  EXPECT_EQ(dfcclRequestFree(q), dfcclSuccess);
  EXPECT_EQ(dfcclCommDestroy(comms[1]), dfcclSuccess);
}

// dfcclCommGetInfo reports what init resolved: the host executor's defaults, the ring, and connection memory as
// docs/design.md's formula gives it: per lane 1 channel x (128 + 8 x (32 KiB + 8)) + 8 x 16 KiB + 32 B of lane state,
// for the sequence lanes at init, and for a persistent id's lane once it is prepared (not before).
TEST(ApiErrors, CommInfoReportsTheResolvedSettings) {
  dfcclComm_t comms[3] = {};
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  ASSERT_EQ(dfcclCommInitAllConfig(comms, 3, nullptr, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);
  dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
  ASSERT_EQ(dfcclCommGetInfo(comms[1], &info), dfcclSuccess) << dfcclGetLastError(nullptr);
  EXPECT_EQ(info.executor, dfcclExecutorHost);
  EXPECT_EQ(info.mode, dfcclModePreemptive);
  EXPECT_EQ(info.transport, dfcclTransportSharedMemory);
  EXPECT_EQ(info.transportPrev, dfcclTransportSharedMemory);
  EXPECT_EQ(info.transportNext, dfcclTransportSharedMemory);
  EXPECT_EQ(info.nranks, 3);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.prev, 0);
  EXPECT_EQ(info.next, 2);
  EXPECT_EQ(info.blocks, 1);
  EXPECT_EQ(info.slots, 8);
  EXPECT_EQ(info.lanes, 1);
  EXPECT_EQ(info.persistentLanes, 8);
  EXPECT_EQ(info.slotBytes, 32768u);
  const size_t lane_bytes = (128 + 8 * (32768 + 8)) + 8 * 16384 + 32;
  EXPECT_EQ(info.connectionBytes, size_t(info.lanes) * lane_bytes);
  dfcclPersistent_t p[3] = {};
  for (int r = 0; r < 3; ++r)
    ASSERT_EQ(dfcclPrepareAllReduce(64, dfcclFloat32, dfcclSum, comms[r], 5, &p[r]), dfcclSuccess)
        << dfcclGetLastError(nullptr);
  ASSERT_EQ(dfcclCommGetInfo(comms[1], &info), dfcclSuccess) << dfcclGetLastError(nullptr);
  EXPECT_EQ(info.connectionBytes, size_t(info.lanes + 1) * lane_bytes);
  EXPECT_REJECTS(dfcclCommGetInfo(comms[0], nullptr), dfcclInvalidArgument, "'info'");
  for (auto q : p) ASSERT_EQ(dfcclPersistentFree(q), dfcclSuccess);
  for (auto c : comms) ASSERT_EQ(dfcclCommDestroy(c), dfcclSuccess);
}

// The structs the library fills carry their size: one the caller did not set (or set for another dfccl.h) is refused
// naming the argument, and nothing is written into it; the library keeps a right size as it was.
TEST(ApiErrors, OutStructsOfAnotherSizeAreRefused) {
  dfcclComm_t comms[2] = {};
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  ASSERT_EQ(dfcclCommInitAllConfig(comms, 2, nullptr, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);

  dfcclCommInfo_t info{};  // size 0: not initialised
  info.nranks = -7;
  EXPECT_REJECTS(dfcclCommGetInfo(comms[0], &info), dfcclInvalidArgument, "'info': info->size = 0");
  EXPECT_EQ(info.nranks, -7);
  info.size = sizeof(info) - 8;  // an older, shorter struct
  EXPECT_REJECTS(dfcclCommGetInfo(comms[0], &info), dfcclInvalidArgument, "sizeof(dfcclCommInfo_t)");
  info = DFCCL_COMM_INFO_INITIALIZER;
  ASSERT_EQ(dfcclCommGetInfo(comms[0], &info), dfcclSuccess) << dfcclGetLastError(nullptr);
  EXPECT_EQ(info.size, sizeof(info));
  EXPECT_EQ(info.nranks, 2);

  dfcclStats_t stats{};
  EXPECT_REJECTS(dfcclGetStats(comms[0], &stats), dfcclInvalidArgument, "'stats': stats->size = 0");
  stats = DFCCL_STATS_INITIALIZER;
  ASSERT_EQ(dfcclGetStats(comms[0], &stats), dfcclSuccess) << dfcclGetLastError(nullptr);
  EXPECT_EQ(stats.size, sizeof(stats));

  std::vector<float> in(16, 1.0f), out(16);
  dfcclRequest_t q[2] = {};
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(dfcclAllReduce(in.data(), out.data(), 16, dfcclFloat32, dfcclSum, comms[r], 0, nullptr, &q[r]),
              dfcclSuccess);
  for (dfcclRequest_t r : q) ASSERT_EQ(dfcclSynchronize(r, 10000), dfcclSuccess);
  dfcclRequestInfo_t rinfo{};
  EXPECT_REJECTS(dfcclRequestGetInfo(q[0], &rinfo), dfcclInvalidArgument, "'info': info->size = 0");
  rinfo = DFCCL_REQUEST_INFO_INITIALIZER;
  ASSERT_EQ(dfcclRequestGetInfo(q[0], &rinfo), dfcclSuccess) << dfcclGetLastError(nullptr);
  EXPECT_EQ(rinfo.status, dfcclSuccess);
  EXPECT_EQ(rinfo.size, sizeof(rinfo));
  for (dfcclRequest_t r : q) ASSERT_EQ(dfcclRequestFree(r), dfcclSuccess);
  for (auto c : comms) ASSERT_EQ(dfcclCommDestroy(c), dfcclSuccess);
}

// dfcclGetFeatures says whether this build has the network transport: exactly when a communicator may span hosts.
TEST(ApiErrors, FeaturesNameTheNetworkTransport) {
  int features = -1;
  ASSERT_EQ(dfcclGetFeatures(&features), dfcclSuccess);
  EXPECT_EQ(features & ~DFCCL_FEATURE_NETWORK, 0);
#ifdef DFCCL_TEST_HAVE_UCX
  EXPECT_EQ(features, DFCCL_FEATURE_NETWORK);
#else
  EXPECT_EQ(features, 0);
#endif
  EXPECT_REJECTS(dfcclGetFeatures(nullptr), dfcclInvalidArgument, "'features'");
}
