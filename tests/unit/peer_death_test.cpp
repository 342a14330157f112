// A peer process that dies, aborts or stops becomes an error that names it, on every survivor, in bounded time
// (DESIGN invariant 8). Four processes (forked, host executor) form a communicator over the unique id; 200 ms after
// init rank 3 is killed with SIGKILL, calls dfcclCommAbort, or stops itself with SIGSTOP (DFCCL_PEER_TIMEOUT_S=1),
// while the others wait in an all-reduce that needs it. Each survivor must see, within 2 s: the pending collective
// fail with dfcclRemoteError and dfcclGetLastError name rank 3 and what happened; dfcclCommGetAsyncError report
// dfcclRemoteError; a new submission refused with dfcclRemoteError; and dfcclCommDestroy return within 1 s.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dfccl.h"
#include "forked_rank.h"
#include "net/transport.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRanks = 4;
constexpr int kVictim = 3;

using dfccl::test::ms_since;

// A survivor's side; returns 0 when every check held, else prints why and returns 1. what: the words that the error
// must contain after "rank 3".
int survivor(dfcclComm_t comm, int rank, const std::string& what) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
    return ok;
  };
  std::vector<int32_t> in(4096, rank), out(4096);
  dfcclRequest_t q = nullptr;
  if (dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q) != dfcclSuccess)
    return check(false, std::string("dfcclAllReduce: ") + dfcclGetLastError(nullptr)), 1;
  // The victim is killed about 200 ms after init; the collective must fail within 2 s of that.
  const auto t0 = Clock::now();
  const dfcclResult_t st = dfcclSynchronize(q, 10000);
  const double ms = ms_since(t0);
  bool ok = check(st == dfcclRemoteError, std::string("the pending collective reported ") + dfcclGetErrorString(st));
  const std::string err = dfcclGetLastError(nullptr);
  ok &= check(err.find("rank 3") != std::string::npos && err.find(what) != std::string::npos,
              "the error does not say that rank 3 " + what + ": '" + err + "'");
  ok &= check(ms < 2500, "the failure took " + std::to_string(ms) + " ms");
  dfcclResult_t async = dfcclSuccess;
  dfcclCommGetAsyncError(comm, &async);
  ok &= check(async == dfcclRemoteError, std::string("async error ") + dfcclGetErrorString(async));
  dfcclRequest_t q2 = nullptr;
  const dfcclResult_t again =
      dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q2);
  ok &= check(again == dfcclRemoteError, std::string("a new submission returned ") + dfcclGetErrorString(again));
  ok &= check(std::string(dfcclGetLastError(nullptr)).find("rank 3") != std::string::npos,
              "the refusal does not name rank 3");
  dfcclRequestFree(q);
  const auto t1 = Clock::now();
  const dfcclResult_t d = dfcclCommDestroy(comm);
  ok &= check(d == dfcclSuccess, std::string("dfcclCommDestroy returned ") + dfcclGetErrorString(d));
  ok &= check(ms_since(t1) < 1000, "dfcclCommDestroy took " + std::to_string(ms_since(t1)) + " ms");
  std::printf("[ peer     ] rank %d: collective failed after %.0f ms: %s\n", rank, ms, err.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

// Stops: SIGSTOP, found by the peer watch's heartbeat words (DFCCL_PEER_TIMEOUT_S=1). StopsNet: SIGSTOP with every
// connection on the network and the peer watch's silence check off, found by the net proxies' heartbeats
// (DFCCL_NET_TIMEOUT_MS=1000).
enum class Victim { Killed, Aborts, Stops, StopsNet };

// Every connection through the net proxy, with its heartbeat timeout `net_timeout_ms` and no other silence check.
void use_network_only(const char* net_timeout_ms) {
  setenv("DFCCL_NET_FORCE", "1", 1);
  setenv("DFCCL_PEER_TIMEOUT_S", "0", 1);
  setenv("DFCCL_NET_TIMEOUT_MS", net_timeout_ms, 1);
}

// Runs the four ranks with rank 3 doing `how`; every survivor must pass its checks.
void run_case(Victim how, const std::string& what) {
  dfccl::test::ForkedId ids;
  // Survivors stay until every survivor has checked (done: one byte each; go: closed by the parent then), so that
  // the only failure a survivor can see is the victim's.
  int done[2], go[2];
  ASSERT_EQ(pipe(done), 0);
  ASSERT_EQ(pipe(go), 0);
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (how == Victim::Stops) setenv("DFCCL_PEER_TIMEOUT_S", "1", 1);
      if (how == Victim::StopsNet) use_network_only("1000");
      dfcclComm_t comm = dfccl::test::init_forked_rank(ids.get(rank, kRanks), rank, kRanks);
      if (rank == kVictim) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (how == Victim::Killed) raise(SIGKILL);
        if (how == Victim::Stops || how == Victim::StopsNet) raise(SIGSTOP);
        dfcclCommAbort(comm);
        std::this_thread::sleep_for(std::chrono::seconds(30));  // alive: the parent kills it
        _exit(0);
      }
      const int result = survivor(comm, rank, what);
      char byte = 0;
      close(go[1]);
      if (write(done[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 0) _exit(3);
      _exit(result);
    }
    pids.push_back(pid);
  }
  close(go[0]);
  close(done[1]);
  char byte = 0;
  for (int k = 0; k < kRanks - 1; ++k) ASSERT_EQ(read(done[0], &byte, 1), 1) << "a survivor ended early";
  close(go[1]);
  kill(pids[kVictim], SIGKILL);
  for (int rank = 0; rank < kRanks; ++rank) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[size_t(rank)], &status, 0), pids[size_t(rank)]);
    if (rank != kVictim) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "rank " << rank << " failed (status " << status << ")";
    }
  }
  close(done[0]);
}

TEST(PeerDeath, AKilledRankIsNamed) { run_case(Victim::Killed, "exited"); }
TEST(PeerDeath, ARankThatAbortsIsNamed) { run_case(Victim::Aborts, "aborted the communicator"); }
TEST(PeerDeath, AStoppedRankIsNamedAfterThePeerTimeout) { run_case(Victim::Stops, "has not been heard from"); }
TEST(PeerDeath, AStoppedRankIsNamedByTheNetworkHeartbeats) {
  if (!dfccl::net::transport_available()) GTEST_SKIP() << "built without a network transport";
  run_case(Victim::StopsNet, "proxy has not been heard from");
}

// A rank that calls its collective 3 s late, three times the network heartbeat timeout, is late, not dead: the
// proxies beat whatever the collectives do, and every rank's all-reduce completes exactly.
TEST(PeerDeath, ALateRankIsNotDead) {
  if (!dfccl::net::transport_available()) GTEST_SKIP() << "built without a network transport";
  dfccl::test::run_forked_ranks(
      kRanks, [](int) { use_network_only("1000"); },
      [](dfcclComm_t comm, int rank) {
        if (rank == kVictim) std::this_thread::sleep_for(std::chrono::seconds(3));
        std::vector<int32_t> in(4096, rank + 1), out(4096, 0);
        dfcclRequest_t q = nullptr;
        bool ok = dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q) ==
                      dfcclSuccess &&
                  dfcclSynchronize(q, 20000) == dfcclSuccess;
        if (!ok) std::fprintf(stderr, "rank %d: %s\n", rank, dfcclGetLastError(nullptr));
        for (int32_t v : out) ok = ok && v == kRanks * (kRanks + 1) / 2;
        dfcclRequestFree(q);
        ok = dfcclCommDestroy(comm) == dfcclSuccess && ok;
        return ok ? 0 : 1;
      });
}

}  // namespace

namespace {

// Two forked ranks that say they are on different hosts (DFCCL_HOSTID) form a communicator through the network
// transport and all-reduce exactly (30), or, in a build without it, are refused at init with dfcclNotSupported naming
// the missing transport on both sides (20); with the same id they form a shared-memory communicator (10). Both ring
// hops report the communicator's transport (else 4).
int host_id_child(const dfcclUniqueId& id, int rank, const char* host) {
  setenv("DFCCL_HOSTID", host, 1);
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.initTimeoutMs = 10000;
  dfcclComm_t comm = nullptr;
  const dfcclResult_t r = dfcclCommInitRankConfig(&comm, 2, id, rank, &cfg);
  if (r != dfcclSuccess) {
    const std::string m = dfcclGetLastError(nullptr);
    std::fprintf(stderr, "rank %d: %s\n", rank, m.c_str());
    return r == dfcclNotSupported && m.find("network transport") != std::string::npos ? 20 : 1;
  }
  dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
  if (dfcclCommGetInfo(comm, &info) != dfcclSuccess) return 2;
  std::vector<int32_t> in(4096, rank + 1), out(4096, 0);
  dfcclRequest_t q = nullptr;
  bool exact =
      dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q) == dfcclSuccess &&
      dfcclSynchronize(q, 10000) == dfcclSuccess;
  dfcclRequestFree(q);
  for (int32_t v : out) exact = exact && v == 3;
  if (dfcclCommDestroy(comm) != dfcclSuccess || !exact) return 3;
  const int hops[] = {info.transport, info.transportPrev, info.transportNext};  // 2 ranks: both hops the same
  if (hops[0] != hops[1] || hops[0] != hops[2]) return 4;
  return info.transport == dfcclTransportNetwork ? 30 : 10;
}

std::vector<int> host_id_run(const char* host0, const char* host1) {
  dfccl::test::ForkedId ids;
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(host_id_child(ids.get(r, 2), r, r == 0 ? host0 : host1));
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return codes;
}

}  // namespace

TEST(HostId, RanksOnDifferentHostsConnectThroughTheNetwork) {
  const int remote = dfccl::net::transport_available() ? 30 : 20;
  EXPECT_EQ(host_id_run("node-a", "node-b"), (std::vector<int>{remote, remote}));
  const char* force = std::getenv("DFCCL_NET_FORCE");  // then every rank is remote (peer_death_test_net)
  const int local = force && std::string(force) == "1" ? remote : 10;
  EXPECT_EQ(host_id_run("node-a", "node-a"), (std::vector<int>{local, local}));
}

namespace {

// A rank that destroys its communicator tells its peers how many collectives it called: a peer whose collective it
// never called fails with dfcclRemoteError naming it, instead of waiting forever (and its destroy returns at once
// instead of waiting DFCCL_DESTROY_TIMEOUT_MS). Parameters: the ranks' hosts (1: one host; 4: a host each by
// DFCCL_HOSTID, every connection on the network) and whether the ranks that left stay alive or exit.
class Departure : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    if (std::get<0>(GetParam()) > 1 && !dfccl::net::transport_available())
      GTEST_SKIP() << "built without a network transport";
  }
  // Forks the 4 ranks: `leaves(rank)` ranks destroy after one exact all-reduce; every other rank all-reduces again
  // `delay_ms` later and must fail naming one of those that left, within 2 s; its destroy must take under 1 s.
  void run(const std::function<bool(int)>& leaves, int delay_ms, bool destroy_at_once = false) {
    const int hosts = std::get<0>(GetParam());
    const bool stay = std::get<1>(GetParam());
    dfccl::test::run_forked_ranks(
        kRanks,
        [hosts](int rank) {
          setenv("DFCCL_NET_TIMEOUT_MS", "3000", 1);
          if (hosts > 1) setenv("DFCCL_HOSTID", ("departure-host" + std::to_string(rank)).c_str(), 1);
        },
        [&](dfcclComm_t comm, int rank) {
          std::vector<int32_t> in(4096, rank + 1), out(4096, 0);
          dfcclRequest_t q = nullptr;
          if (dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q) !=
                  dfcclSuccess ||
              dfcclSynchronize(q, 10000) != dfcclSuccess)
            return std::fprintf(stderr, "rank %d: first all-reduce: %s\n", rank, dfcclGetLastError(nullptr)), 1;
          dfcclRequestFree(q);
          if (leaves(rank)) {
            const dfcclResult_t d = dfcclCommDestroy(comm);
            if (stay) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            return d == dfcclSuccess ? 0 : 1;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
          const auto t0 = Clock::now();
          const dfcclResult_t sub =
              dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q);
          dfcclResult_t st = sub;
          double destroy_ms = -1;
          if (sub == dfcclSuccess && destroy_at_once) {  // the destroy must not wait for the collective's peers
            const auto t1 = Clock::now();
            dfcclCommDestroy(comm);
            destroy_ms = ms_since(t1);
            comm = nullptr;
          }
          if (sub == dfcclSuccess) st = dfcclSynchronize(q, 10000);
          const std::string err = dfcclGetLastError(nullptr);
          const double ms = ms_since(t0);
          if (q) dfcclRequestFree(q);
          if (comm) {
            const auto t1 = Clock::now();
            dfcclCommDestroy(comm);
            destroy_ms = ms_since(t1);
          }
          std::printf("[ departed ] rank %d: %s after %.0f ms, destroy %.0f ms: %s\n", rank, dfcclGetErrorString(st),
                      ms, destroy_ms, err.c_str());
          bool named = false;
          for (int r = 0; r < kRanks; ++r)
            named = named || (leaves(r) && err.find("rank " + std::to_string(r) + " of the communicator") == 0);
          bool ok = st == dfcclRemoteError && named && err.find("destroyed its communicator") != std::string::npos;
          ok = ok && ms < 2000 && destroy_ms < 1000;
          if (!ok)
            std::fprintf(stderr, "rank %d: FAIL: the collective did not fail in time naming a rank that left\n", rank);
          return ok ? 0 : 1;
        });
  }
};

// Rank 3 destroys its communicator after the first all-reduce; the others' second all-reduce names it.
TEST_P(Departure, ARankThatDestroysBeforeACollectiveIsNamed) {
  run([](int r) { return r == 3; }, 200);
}

// The same, each survivor destroying its communicator right after submitting.
TEST_P(Departure, ADestroyRightAfterASubmissionReturnsAtOnce) {
  run([](int r) { return r == 3; }, 200, true);
}

// Ranks 1-3 destroy theirs; rank 0 calls a collective 300 ms later, when nobody is left to run it.
TEST_P(Departure, ACollectiveAfterEveryoneLeftFailsNamingOne) {
  run([](int r) { return r != 0; }, 300);
}

INSTANTIATE_TEST_SUITE_P(Hosts, Departure, ::testing::Combine(::testing::Values(1, 4), ::testing::Values(false, true)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == 1 ? "OneHost" : "FourHosts") +
                                  (std::get<1>(info.param) ? "Stay" : "Exit");
                         });

}  // namespace
