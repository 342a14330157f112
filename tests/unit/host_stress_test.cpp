// Disorder stress on the host executor: 4 ranks, 3 communicators per rank (all ranks, pairs {0,1}{2,3}, pairs
// {0,2}{1,3}), random per-rank orders across communicators (and any order at all for persistent collectives),
// point-to-point transfers between random ranks (a rank's own included) posted anywhere in those orders, emulated
// device synchronizations and host allocations between calls.
//   preemptive mode: 500 trials, 0 hangs, 0 wrong elements;
//   blocking mode (no preemption, like NCCL): the same workload hangs in most trials — the watchdog sees it and
//   recovers by aborting the communicators. This is the proof that the stress is real.
// HOST_STRESS_TRIALS=n, HOST_STRESS_BLOCKING_TRIALS=m: n preemptive and m blocking trials instead of 500 and 16. The
// variants over another data path (tests/unit/CMakeLists.txt: 4 blocks, the network transport) run fewer: the rare
// interleavings of the scheduler are the 500-trial run's to find, a variant's are that its path carries the same
// disorder exact and that its blocking mode still hangs in most trials (at least 8 trials, so that a majority means
// something).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "group.h"

namespace dfccl::test {
namespace {

constexpr int kRanks = 4;
constexpr int kComms = 3;

int trials_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

struct World {
  // comm[g][rank]: rank's communicator of group g.
  dfcclComm_t comm[kComms][kRanks] = {};
  dfcclPersistent_t persistent[kComms][kRanks] = {};
  size_t persistent_count = 1531;
  bool aborted = false;

  explicit World(dfcclMode_t mode) {
    dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
    cfg.executor = dfcclExecutorHost;
    cfg.mode = mode;
    if (dfcclCommInitAllConfig(comm[0], kRanks, nullptr, &cfg) != dfcclSuccess)
      throw std::runtime_error(dfcclGetLastError(nullptr));
    // Split is collective over the parent: every rank calls it from its own thread.
    std::vector<std::thread> ts;
    for (int r = 0; r < kRanks; ++r)
      ts.emplace_back([&, r] {
        dfcclCommSplit(comm[0][r], r / 2, r, &comm[1][r], nullptr);
        dfcclCommSplit(comm[0][r], r % 2, r, &comm[2][r], nullptr);
      });
    for (auto& t : ts) t.join();
    for (int g = 0; g < kComms; ++g)
      for (int r = 0; r < kRanks; ++r) {
        if (!comm[g][r]) throw std::runtime_error("split failed");
        if (dfcclPrepareAllReduce(persistent_count, dfcclInt32, dfcclSum, comm[g][r], 0, &persistent[g][r]) !=
            dfcclSuccess)
          throw std::runtime_error(dfcclGetLastError(nullptr));
      }
  }
  ~World() {
    for (int g = 0; g < kComms; ++g)
      for (int r = 0; r < kRanks; ++r) {
        if (persistent[g][r]) dfcclPersistentFree(persistent[g][r]);
        if (comm[g][r] && !aborted) dfcclCommDestroy(comm[g][r]);
      }
  }
  // The watchdog's recovery: aborts every communicator, one after the other (in blocking mode a communicator's
  // collectives may sit behind another's queue head; the abort must still return at once).
  void abort_all() {
    aborted = true;
    for (int g = 0; g < kComms; ++g)
      for (int r = 0; r < kRanks; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        dfcclCommAbort(comm[g][r]);
        slowest_abort = std::max(slowest_abort, std::chrono::steady_clock::now() - t0);
      }
  }
  std::chrono::steady_clock::duration slowest_abort{};
  // Members of group g that rank r belongs with, in rank order.
  static std::vector<int> members(int g, int r) {
    if (g == 0) return {0, 1, 2, 3};
    if (g == 1) return r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    return r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
  }
};

// One collective of a trial, identical on the members of its group, or a point-to-point transfer (src >= 0) on
// the communicator of all ranks.
struct Coll {
  int group;
  int persistent;  // 1: the group's persistent all-reduce (any order), 0: matched by order inside the group
  size_t count;
  int uid;  // makes inputs distinct per collective, so crossed data would be seen
  int src = -1, dst = -1;
};

enum class StepKind { Submit, DeviceSync, HostAlloc };
struct Step {
  StepKind kind;
  int coll;       // index into the trial's collectives
  bool recv = 0;  // a transfer's receiving side (its sending side otherwise)
};

struct Trial {
  std::vector<Coll> colls;
  std::vector<std::vector<Step>> program;  // per rank
};

int32_t input(int uid, int rank, size_t i) { return int32_t((uid * 131 + rank * 7919 + int(i)) & 0xffff); }

// Per trial: 2 ordered collectives per group plus each group's persistent one, and 3 transfers between random ranks;
// each rank merges its sequences in a random order (keeping the order inside a group, and among its sends to one
// rank and among its receives from one rank), places the persistent ones anywhere, and puts a device synchronization
// or a host allocation after a submission with probability 0.3.
Trial make_trial(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Trial t;
  for (int g = 0; g < kComms; ++g) {
    for (int k = 0; k < 2; ++k) t.colls.push_back({g, 0, size_t(1 + rng() % 20000), int(t.colls.size())});
    t.colls.push_back({g, 1, 1531, int(t.colls.size())});
  }
  for (int k = 0; k < 3; ++k) {
    Coll x{0, 0, size_t(rng() % 20000), int(t.colls.size())};
    x.src = int(rng() % kRanks);
    x.dst = int(rng() % kRanks);
    t.colls.push_back(x);
  }
  t.program.resize(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    // Queues: one per group, then one per (direction, peer) of the transfers; each keeps its order.
    std::vector<std::vector<Step>> queues(kComms + 2 * kRanks);
    std::vector<int> persistent;
    for (int c = 0; c < int(t.colls.size()); ++c) {
      const Coll& x = t.colls[size_t(c)];
      if (x.src >= 0) {
        if (x.src == r) queues[size_t(kComms + x.dst)].push_back({StepKind::Submit, c, false});
        if (x.dst == r) queues[size_t(kComms + kRanks + x.src)].push_back({StepKind::Submit, c, true});
      } else if (x.persistent) {
        persistent.push_back(c);
      } else {
        queues[size_t(x.group)].push_back({StepKind::Submit, c});
      }
    }
    std::vector<Step> order;
    size_t left = 0;
    for (const auto& q : queues) left += q.size();
    std::vector<size_t> head(queues.size(), 0);
    while (left > 0) {
      const size_t g = rng() % queues.size();
      if (head[g] < queues[g].size()) {
        order.push_back(queues[g][head[g]++]);
        --left;
      }
    }
    for (int p : persistent) order.insert(order.begin() + long(rng() % (order.size() + 1)), {StepKind::Submit, p});
    for (const Step& st : order) {
      t.program[size_t(r)].push_back(st);
      const uint64_t dice = rng() % 100;
      if (dice < 15) t.program[size_t(r)].push_back({StepKind::DeviceSync, -1});
      else if (dice < 30) t.program[size_t(r)].push_back({StepKind::HostAlloc, -1});
    }
  }
  return t;
}

struct Outcome {
  bool hung = false;
  size_t wrong = 0;
  std::string error;
};

// Runs one trial: one thread per rank; the watchdog gives them `timeout` and aborts the world on a hang.
Outcome run_trial(World& w, const Trial& t, std::chrono::milliseconds timeout) {
  const size_t nc = t.colls.size();
  // Buffers per rank and collective: send, recv.
  std::vector<std::vector<std::vector<int32_t>>> send(kRanks), recv(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    send[size_t(r)].resize(nc);
    recv[size_t(r)].resize(nc);
    for (size_t c = 0; c < nc; ++c) {
      send[size_t(r)][c].resize(t.colls[c].count);
      for (size_t i = 0; i < t.colls[c].count; ++i) send[size_t(r)][c][i] = input(t.colls[c].uid, r, i);
      recv[size_t(r)][c].assign(t.colls[c].count, -1);
    }
  }
  std::vector<std::string> errors(kRanks);
  auto rank_main = [&](int r) {
    std::vector<dfcclRequest_t> reqs;
    for (const Step& s : t.program[size_t(r)]) {
      dfcclResult_t res = dfcclSuccess;
      if (s.kind == StepKind::Submit) {
        const Coll& c = t.colls[size_t(s.coll)];
        dfcclComm_t comm = w.comm[c.group][r];
        dfcclRequest_t q = nullptr;
        int32_t* out = recv[size_t(r)][size_t(s.coll)].data();
        if (c.src >= 0 && s.recv) res = dfcclRecv(out, c.count, dfcclInt32, c.src, comm, 0, nullptr, &q);
        else if (c.src >= 0)
          res = dfcclSend(send[size_t(r)][size_t(s.coll)].data(), c.count, dfcclInt32, c.dst, comm, 0, nullptr, &q);
        else if (c.persistent)
          res = dfcclStart(w.persistent[c.group][r], send[size_t(r)][size_t(s.coll)].data(),
                           recv[size_t(r)][size_t(s.coll)].data(), 0, nullptr, &q);
        else
          res = dfcclAllReduce(send[size_t(r)][size_t(s.coll)].data(), recv[size_t(r)][size_t(s.coll)].data(), c.count,
                               dfcclInt32, dfcclSum, comm, 0, nullptr, &q);
        if (q) reqs.push_back(q);
      } else {
        // The host executor's device synchronization (a host allocation implies one on a GPU).
        res = dfcclDeviceSynchronize(w.comm[0][r]);
      }
      if (res != dfcclSuccess && errors[size_t(r)].empty()) errors[size_t(r)] = dfcclGetLastError(nullptr);
    }
    for (auto q : reqs) {
      const dfcclResult_t res = dfcclSynchronize(q, 600000);
      if (res != dfcclSuccess && errors[size_t(r)].empty()) errors[size_t(r)] = dfcclGetErrorString(res);
      dfcclRequestFree(q);
    }
  };
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < kRanks; ++r) ranks.push_back(std::async(std::launch::async, rank_main, r));
  Outcome out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& f : ranks)
    if (f.wait_until(deadline) != std::future_status::ready) out.hung = true;
  if (out.hung) w.abort_all();  // the watchdog's recovery: waits and device synchronizations return
  for (auto& f : ranks) f.wait();
  if (out.hung) return out;
  for (int r = 0; r < kRanks; ++r)
    if (!errors[size_t(r)].empty()) out.error = "rank " + std::to_string(r) + ": " + errors[size_t(r)];
  for (int r = 0; r < kRanks; ++r)
    for (size_t c = 0; c < nc; ++c) {
      const Coll& x = t.colls[c];
      const auto m = World::members(x.group, r);
      for (size_t i = 0; i < x.count; ++i) {
        int32_t want = 0;
        if (x.src < 0)
          for (int p : m) want += input(x.uid, p, i);
        else want = r == x.dst ? input(x.uid, x.src, i) : -1;  // untouched where nothing was received
        out.wrong += recv[size_t(r)][c][i] != want;
      }
    }
  return out;
}

class HostStress : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Shorter exit thresholds than the defaults so that 500 trials of synchronizations take seconds.
    setenv("DFCCL_STUCK_NS", "1000000", 1);
    setenv("DFCCL_IDLE_NS", "1000000", 1);
    // An abort's wait for the daemon to drop its collectives, far above what a loaded two-core machine adds to it
    // (see BlockingModeHangsInMostTrials).
    setenv("DFCCL_ABORT_TIMEOUT_MS", "8000", 1);
  }
};

TEST_F(HostStress, PreemptiveNeverHangsAndIsExact) {
  World w(dfcclModePreemptive);
  const int trials = trials_or("HOST_STRESS_TRIALS", 500);
  int hung = 0;
  size_t wrong = 0;
  for (int k = 0; k < trials; ++k) {
    const Outcome o = run_trial(w, make_trial(1000 + uint64_t(k)), std::chrono::seconds(60));
    ASSERT_FALSE(o.hung) << "trial " << k << " hung";
    ASSERT_TRUE(o.error.empty()) << "trial " << k << ": " << o.error;
    hung += o.hung;
    wrong += o.wrong;
  }
  EXPECT_EQ(hung, 0);
  EXPECT_EQ(wrong, 0u);
  dfcclStats_t st = DFCCL_STATS_INITIALIZER;
  ASSERT_EQ(dfcclGetStats(w.comm[0][0], &st), dfcclSuccess);
  EXPECT_GT(st.preemptions, 0u) << "the stress never made a collective wait for an absent peer";
  EXPECT_GT(st.daemonExitsStuck + st.daemonExitsIdle, 0u);
  std::printf("[ stress   ] %d trials, 0 hangs, %zu wrong; rank 0: %lu collectives, %lu preemptions, %lu context "
              "switches, %lu daemon launches (%lu stuck exits)\n",
              trials, wrong, (unsigned long)st.completed, (unsigned long)st.preemptions,
              (unsigned long)st.contextSwitches, (unsigned long)st.daemonLaunches, (unsigned long)st.daemonExitsStuck);
}

TEST_F(HostStress, BlockingModeHangsInMostTrials) {
  const int trials = std::max(8, trials_or("HOST_STRESS_BLOCKING_TRIALS", 16));
  int hung = 0;
  for (int k = 0; k < trials; ++k) {
    World w(dfcclModeBlocking);
    const Outcome o = run_trial(w, make_trial(1000 + uint64_t(k)), std::chrono::milliseconds(500));
    hung += o.hung;
    // Every abort drops its collectives at once, also those queued behind another communicator's head: an abort
    // that waits for its timeout (DFCCL_ABORT_TIMEOUT_MS, 8 s here) left them in place. The bound is half of it.
    // Once in about 900 trials an abort waited its whole timeout (in CI at b22e7ad; with a 1 s timeout, the 1.0-2.7 s
    // aborts once put down to a loaded machine were most likely the same): a block stayed alone in a blocking-mode wait
    // after the others had left, so nobody dropped a later collective of the aborted communicator (scheduler/attempt.h,
    // wait_must_end; host_engine_test.BlockingModeDaemonStaysWhileABlockWaitsAndAnAbortElsewhereEndsAtOnce).
    // Fixed: none of 2144 trials (two runs side by side on two cores) had an abort over 2 s. A submission that passed
    // its liveness check before its communicator's abort and was queued after the daemon's pass polled could also stay
    // unseen behind the head's wait: host_engine_test.BlockingModeAbortDropsASubmissionQueuedBehindTheHeadsWait.
    ASSERT_LT(w.slowest_abort, std::chrono::seconds(4)) << "trial " << k;
    if (!o.hung) {
      EXPECT_EQ(o.wrong, 0u) << "trial " << k;
    }
  }
  std::printf("[ stress   ] blocking mode: %d of %d trials deadlocked (detected by the watchdog, recovered by abort)\n",
              hung, trials);
  EXPECT_GT(hung, trials / 2);
}

}  // namespace
}  // namespace dfccl::test
