// Every survivor names the rank that failed, whoever leaves after it (DESIGN invariant 8). Each run forks 4 ranks
// (host executor) that all-reduce in a loop; a random rank is killed (SIGKILL), stopped (SIGSTOP), aborts its
// communicator or destroys it between collectives, at a random time 0-300 ms after every rank is running (after an
// abort or a destroy it exits or stays alive, at random). Each survivor's pending or next collective must fail with
// dfcclRemoteError naming that rank ("rank V of the communicator"); the survivor then destroys its communicator and
// exits at once, so that a survivor's exit is the next thing the others may see (a rank that leaves after a failure
// must never be named). Counted: right names, wrong names, other errors and hangs (no error within 8 s); the test
// fails on any of the last three.
// Environment: PEER_CHAOS_RUNS (50), PEER_CHAOS_SEED (the time), PEER_CHAOS_HOSTS=4: each rank on a host of its own
// (DFCCL_HOSTID; every connection through the network transport, silence found by its heartbeats).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "forked_rank.h"
#include "net/transport.h"

namespace {

using Clock = std::chrono::steady_clock;
using dfccl::test::ms_since;
constexpr int kRanks = 4;
constexpr int kHangMs = 8000;  // a survivor's collective that has not failed by then hangs
enum Fault { kKill, kStop, kAbort, kDestroy, kFaults };
const char* const kFaultNames[kFaults] = {"kill", "stop", "abort", "destroy"};

struct Plan {
  int victim = 0;
  Fault fault = kKill;
  int delay_ms = 0;   // after every rank is running
  bool stay = false;  // abort, destroy: the victim stays alive afterwards (else it exits)
  int hosts = 1;
};

// What a survivor sends the parent (one write: atomic on a pipe).
struct Report {
  int rank;
  int code;   // dfcclResult_t of the collective that ended the loop
  double ms;  // from the victim's fault (as this rank saw the shared start) to the error
  double destroy_ms;
  char message[400];
};
static_assert(sizeof(Report) < PIPE_BUF);

int env_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// One all-reduce; its status, and on success whether the sum is exact.
dfcclResult_t all_reduce(dfcclComm_t comm, int rank, int timeout_ms) {
  std::vector<int32_t> in(256, rank + 1), out(256, 0);
  dfcclRequest_t q = nullptr;
  dfcclResult_t st = dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q);
  if (st == dfcclSuccess) st = dfcclSynchronize(q, timeout_ms);
  if (q) dfcclRequestFree(q);
  if (st == dfcclSuccess)
    for (int32_t v : out)
      if (v != kRanks * (kRanks + 1) / 2) return dfcclInternalError;
  return st;
}

// The victim's side: all-reduces until its fault (abort, destroy; a kill or stop comes from the parent).
[[noreturn]] void victim(dfcclComm_t comm, int rank, const Plan& p, Clock::time_point start) {
  const auto fault_at = start + std::chrono::milliseconds(p.delay_ms);
  for (;;) {
    if ((p.fault == kAbort || p.fault == kDestroy) && Clock::now() >= fault_at) break;
    if (all_reduce(comm, rank, 20000) != dfcclSuccess) std::this_thread::sleep_for(std::chrono::seconds(30));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (p.fault == kAbort) {  // with a collective pending
    std::vector<int32_t> in(256, rank + 1), out(256, 0);
    dfcclRequest_t q = nullptr;
    dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q);
    dfcclCommAbort(comm);
  } else {
    dfcclCommDestroy(comm);
  }
  if (p.stay) std::this_thread::sleep_for(std::chrono::seconds(60));  // the parent kills it
  std::fflush(nullptr);
  _exit(0);
}

// A survivor: all-reduces until one fails, reports, destroys and exits at once.
[[noreturn]] void survivor(dfcclComm_t comm, int rank, const Plan& p, Clock::time_point start, int report_fd) {
  dfcclResult_t st = dfcclSuccess;
  while ((st = all_reduce(comm, rank, kHangMs)) == dfcclSuccess)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Report r{};
  r.rank = rank;
  r.code = st;
  r.ms = ms_since(start) - p.delay_ms;
  std::snprintf(r.message, sizeof(r.message), "%s", dfcclGetLastError(nullptr));
  const auto t0 = Clock::now();
  dfcclCommDestroy(comm);
  r.destroy_ms = ms_since(t0);
  [[maybe_unused]] const ssize_t n = write(report_fd, &r, sizeof(r));
  std::fflush(nullptr);
  _exit(0);
}

struct Tally {
  int runs = 0, right = 0, wrong = 0, other = 0, hangs = 0;
  double worst_ms = 0, worst_destroy_ms = 0;
};

// One run; adds its survivors' outcomes to t (and to by_fault).
void run_once(const Plan& p, Tally& t, Tally& by_fault, int number) {
  dfccl::test::ForkedId ids;
  int ready[2], report[2], start[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(report), 0);
  ASSERT_EQ(pipe(start), 0);
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(ready[0]);
      close(report[0]);
      close(start[1]);
      setenv("DFCCL_PEER_TIMEOUT_S", "1", 1);
      setenv("DFCCL_NET_TIMEOUT_MS", "1000", 1);
      if (p.hosts > 1) setenv("DFCCL_HOSTID", ("chaos-host" + std::to_string(rank % p.hosts)).c_str(), 1);
      dfcclComm_t comm = dfccl::test::init_forked_rank(ids.get(rank, kRanks), rank, kRanks);
      if (all_reduce(comm, rank, 20000) != dfcclSuccess) _exit(3);  // every connection is up
      char byte = 0;
      if (write(ready[1], &byte, 1) != 1 || read(start[0], &byte, 1) != 0) _exit(3);  // start: the parent's close
      const auto t0 = Clock::now();
      if (rank == p.victim) victim(comm, rank, p, t0);
      survivor(comm, rank, p, t0, report[1]);
    }
    pids.push_back(pid);
  }
  close(ready[1]);
  close(report[1]);
  close(start[0]);
  char byte = 0;
  int up = 0;
  for (pollfd f{ready[0], POLLIN, 0}; up < kRanks && poll(&f, 1, 30000) == 1 && read(ready[0], &byte, 1) == 1;) ++up;
  EXPECT_EQ(up, kRanks) << "run " << number << ": only " << up << " ranks came up";
  close(start[1]);  // go
  if (p.fault == kKill || p.fault == kStop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(p.delay_ms));
    kill(pids[size_t(p.victim)], p.fault == kKill ? SIGKILL : SIGSTOP);
  }
  std::vector<Report> got;
  const auto deadline = Clock::now() + std::chrono::milliseconds(p.delay_ms + kHangMs + 4000);
  while (up == kRanks && got.size() < size_t(kRanks - 1)) {
    pollfd f{report[0], POLLIN, 0};
    const int left = int(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    Report r{};
    if (poll(&f, 1, left) != 1 || read(report[0], &r, sizeof(r)) != ssize_t(sizeof(r))) break;
    got.push_back(r);
  }
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  for (int fd : {ready[0], report[0]}) close(fd);

  const std::string who = "rank " + std::to_string(p.victim) + " of the communicator";
  std::string line = "run " + std::to_string(number) + ": victim " + std::to_string(p.victim) + " " +
                     kFaultNames[p.fault] + (p.stay ? " (stays)" : "") + " after " + std::to_string(p.delay_ms) +
                     " ms:";
  for (Tally* x : {&t, &by_fault}) {
    ++x->runs;
    x->hangs += kRanks - 1 - int(got.size());
  }
  for (const Report& r : got) {
    const std::string m = r.message;
    const bool named = m.find(who) != std::string::npos;
    const bool hang = r.code == dfcclTimeout;
    for (Tally* x : {&t, &by_fault}) {
      if (hang) ++x->hangs;
      else if (r.code != dfcclRemoteError) ++x->other;
      else if (named) ++x->right;
      else ++x->wrong;
      x->worst_ms = std::max(x->worst_ms, r.ms);
      x->worst_destroy_ms = std::max(x->worst_destroy_ms, r.destroy_ms);
    }
    char buf[96];
    std::snprintf(buf, sizeof(buf), " rank %d %s %.0f ms (destroy %.0f ms)", r.rank,
                  dfcclGetErrorString(dfcclResult_t(r.code)), r.ms, r.destroy_ms);
    line += buf;
    if (hang || r.code != dfcclRemoteError || !named) line += " WRONG: '" + m + "'";
  }
  if (got.size() < size_t(kRanks - 1)) line += " HANG: " + std::to_string(kRanks - 1 - int(got.size())) + " silent";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

TEST(PeerChaos, EverySurvivorNamesTheFailedRank) {
  const int hosts = env_or("PEER_CHAOS_HOSTS", 1);
  if (hosts > 1 && !dfccl::net::transport_available()) GTEST_SKIP() << "built without a network transport";
  const int runs = env_or("PEER_CHAOS_RUNS", 50);
  const unsigned seed = unsigned(env_or("PEER_CHAOS_SEED", int(time(nullptr) & 0x7fffffff)));
  std::printf("PeerChaos: %d runs, %d host(s), seed %u (PEER_CHAOS_SEED to repeat)\n", runs, hosts, seed);
  std::mt19937 rng(seed);
  Tally all;
  std::map<int, Tally> by;
  const auto t0 = Clock::now();
  for (int i = 0; i < runs; ++i) {
    Plan p;
    p.victim = int(rng() % kRanks);
    p.fault = Fault(rng() % kFaults);
    p.delay_ms = int(rng() % 301);
    p.stay = rng() % 2 == 0;
    p.hosts = hosts;
    run_once(p, all, by[p.fault], i);
    if (HasFatalFailure()) return;
  }
  for (const auto& [f, x] : by)
    std::printf("  %-8s %2d runs: %3d named right, %d wrong, %d other errors, %d hangs; slowest error %.0f ms after "
                "the fault, slowest destroy %.0f ms\n",
                kFaultNames[f], x.runs, x.right, x.wrong, x.other, x.hangs, x.worst_ms, x.worst_destroy_ms);
  std::printf("PeerChaos: %d runs in %.1f s: %d survivors named the failed rank, %d named another, %d other errors, "
              "%d hangs\n",
              all.runs, ms_since(t0) / 1000, all.right, all.wrong, all.other, all.hangs);
  EXPECT_EQ(all.wrong, 0);
  EXPECT_EQ(all.other, 0);
  EXPECT_EQ(all.hangs, 0);
  EXPECT_EQ(all.right, 3 * all.runs);
}

}  // namespace
