// dfcclCommShrink with ranks as forked processes (host executor; DESIGN invariant 10, docs/design.md "Shrink").
// Four ranks all-reduce exactly in a loop; the parent kills one with SIGKILL at a random time; every survivor's
// pending or next collective fails with dfcclRemoteError naming it, the survivors shrink (excludeRanks NULL: the
// ranks they found failed) and run exact collectives on the communicator of three, whose ranks are the survivors in
// their old order; the old communicator's destroy returns at once. Also: a replacement process joins the survivors
// through a fresh id; an explicit exclusion of a live rank fails the old communicator's pending collective naming
// it; a rank that dies during the agreement is excluded too; ranks as threads of one process exclude one by list.
// ShrinkTrials: SHRINK_TRIALS trials (default 3) of a random victim killed at a random time (SHRINK_SEED), with the
// time from the kill to the first completed collective on the shrunk communicator (the issue's measure: <= 2 s).
// SHRINK_HOSTS=H: the forked ranks say they are on H hosts (DFCCL_HOSTID, ranks in blocks), so that the
// communicator spans hosts and its shrink agrees over TCP (ctest shrink_test_hosts; with DFCCL_NET_FORCE=1 the same
// agreement on one host). SHRINK_EXECUTOR=cuda (ctest shrink_test.*_cuda, label gpu): the forked ranks run the CUDA
// executor, all on GPU 0 (time-sliced), their buffers in managed memory; skipped without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "forked_rank.h"
#include "gpu_check.h"

namespace {

constexpr int kRanks = 4;
constexpr int kCount = 1024;
constexpr int kHangMs = 10000;  // a survivor that has not reported by then hangs

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int env_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// The forked ranks' executor: SHRINK_EXECUTOR=cuda, else the host's.
dfcclExecutor_t executor() {
  const char* v = std::getenv("SHRINK_EXECUTOR");
  return v && std::string(v) == "cuda" ? dfcclExecutorCuda : dfcclExecutorHost;
}

// Caller: a test's parent, before it forks. Skips the test on the CUDA executor without a GPU (asked in a child: the
// parent makes no CUDA call before its ranks fork).
#define SKIP_WITHOUT_THE_EXECUTOR()                                                                              \
  do {                                                                                                           \
    if (executor() == dfcclExecutorCuda && dfccl::test::gpus_or_skip_in_child(1) != 0) GTEST_SKIP() << "no GPU"; \
  } while (0)

// n elements the ranks' executor reads and writes, readable on the host after dfcclSynchronize: host memory, or
// on the CUDA executor managed memory (every rank's GPU is device 0).
template <class T>
class Buffer {
 public:
  Buffer(size_t n, T value) : n_(n) {
    if (executor() == dfcclExecutorCuda) {
      if (cudaMallocManaged(reinterpret_cast<void**>(&p_), n * sizeof(T)) != cudaSuccess) p_ = nullptr;
    } else {
      p_ = static_cast<T*>(std::malloc(n * sizeof(T)));
    }
    if (!p_) {
      std::fprintf(stderr, "no memory for a buffer of %zu elements\n", n);
      _exit(2);
    }
    for (size_t i = 0; i < n; ++i) p_[i] = value;
  }
  ~Buffer() {
    if (executor() == dfcclExecutorCuda) cudaFree(p_);
    else std::free(p_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* data() { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_[i]; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// What a survivor sends the parent (one write: atomic on a pipe).
struct Report {
  int rank = -1;
  int ok = 0;           // every check held
  int wrong = 0;        // wrong elements seen (old communicator before the failure, and the shrunk one)
  int64_t done_ns = 0;  // CLOCK_MONOTONIC when its first collective on the shrunk communicator completed
  double destroy_ms = 0;
  char why[400] = {};
  char trace[200] = {};  // elastic survivors: what happened when (ms of CLOCK_MONOTONIC), printed for slow trials
};
static_assert(sizeof(Report) < PIPE_BUF);

// An all-reduce of value (every element) on comm; its status, and *wrong the elements that differ from `want`.
dfcclResult_t all_reduce(dfcclComm_t comm, int32_t value, int32_t want, int* wrong) {
  Buffer<int32_t> in(kCount, value), out(kCount, -1);
  dfcclRequest_t q = nullptr;
  dfcclResult_t st = dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q);
  if (st == dfcclSuccess) st = dfcclSynchronize(q, kHangMs);
  if (q) dfcclRequestFree(q);
  if (st == dfcclSuccess)
    for (int32_t v : out) *wrong += v != want;
  return st;
}

// How a survivor's run goes; all fields known before the fork.
struct Plan {
  int victim = 3;
  int late_victim = -1;      // a survivor that dies 300 ms after its failure instead of shrinking
  bool replacement = false;  // a newcomer joins the survivors (rank 3 of a new communicator of 4)
  int join_fd = -1;          // where the survivors' rank 0 writes the fresh id for the newcomer
  int second_victim = -1;    // killed by the parent second_delay_ms after the victim (the survivors go elastic)
  int second_delay_ms = 0;
};

// A survivor's start: all-reduces exactly (as the victim does) until one fails (the victim's kill); r.rank is set,
// err receives the failure's message.
dfcclResult_t until_failure(dfcclComm_t comm, int rank, Report& r, std::string& err) {
  r.rank = rank;
  dfcclResult_t st = dfcclSuccess;
  for (int i = 2; st == dfcclSuccess; ++i) st = all_reduce(comm, (rank + 1) * i, 10 * i, &r.wrong);
  err = dfcclGetLastError(nullptr);
  return st;
}

// r with why = "rank <r.rank>: <why>".
Report failed(Report r, const std::string& why) {
  std::snprintf(r.why, sizeof(r.why), "rank %d: %s", r.rank, why.c_str());
  return r;
}

// A survivor: all-reduces exactly until one fails (the victim's kill), checks the failure, shrinks, checks the new
// communicator (size, ranks, exact all-reduces and an all-gather of the old ranks), destroys the old one; the first
// collective's completion time goes in the report.
Report survivor(dfcclComm_t comm, int rank, const Plan& p) {
  Report r;
  std::string err;
  dfcclResult_t st = until_failure(comm, rank, r, err);
  auto fail = [&](const std::string& why) { return failed(r, why); };
  if (st != dfcclRemoteError) return fail(std::string("the old collective returned ") + dfcclGetErrorString(st));
  if (err.find("rank " + std::to_string(p.victim) + " ") == std::string::npos)
    return fail("the failure does not name rank " + std::to_string(p.victim) + ": " + err);
  if (rank == p.late_victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    raise(SIGKILL);
  }
  dfcclComm_t nc = nullptr;
  if (dfcclCommShrink(comm, nullptr, 0, &nc, nullptr) != dfcclSuccess || !nc)
    return fail(std::string("dfcclCommShrink: ") + dfcclGetLastError(nullptr));
  std::vector<int> members;
  for (int q = 0; q < kRanks; ++q)
    if (q != p.victim && q != p.late_victim) members.push_back(q);
  const int n = int(members.size());
  int size = 0, new_rank = -1;
  dfcclCommCount(nc, &size);
  dfcclCommUserRank(nc, &new_rank);
  const int want_rank = int(std::find(members.begin(), members.end(), rank) - members.begin());
  if (size != n || new_rank != want_rank)
    return fail("the shrunk communicator is rank " + std::to_string(new_rank) + " of " + std::to_string(size));
  int32_t sum = 0;
  for (int q : members) sum += q + 1;
  if ((st = all_reduce(nc, rank + 1, sum, &r.wrong)) != dfcclSuccess)
    return fail(std::string("the first collective of the shrunk communicator: ") + dfcclGetLastError(nullptr));
  r.done_ns = mono_ns();
  for (int i = 2; i <= 20 && st == dfcclSuccess; ++i) st = all_reduce(nc, (rank + 1) * i, sum * i, &r.wrong);
  Buffer<int32_t> mine(1, rank), all(size_t(n), -1);
  dfcclRequest_t q = nullptr;
  if (st == dfcclSuccess) st = dfcclAllGather(mine.data(), all.data(), 1, dfcclInt32, nc, 0, nullptr, &q);
  if (st == dfcclSuccess) st = dfcclSynchronize(q, kHangMs);
  if (q) dfcclRequestFree(q);
  if (st != dfcclSuccess) return fail(std::string("the shrunk communicator: ") + dfcclGetLastError(nullptr));
  for (int k = 0; k < n; ++k) r.wrong += all[size_t(k)] != members[size_t(k)];
  const auto t0 = std::chrono::steady_clock::now();
  if (dfcclCommDestroy(comm) != dfcclSuccess) return fail(std::string("old destroy: ") + dfcclGetLastError(nullptr));
  r.destroy_ms = dfccl::test::ms_since(t0);
  if (p.replacement) {  // a fresh id from the survivors' rank 0, broadcast on the shrunk communicator
    dfcclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (new_rank == 0 && dfcclGetUniqueId(&id) != dfcclSuccess) return fail("dfcclGetUniqueId");
    Buffer<char> bytes(sizeof(id), 0);
    std::memcpy(bytes.data(), &id, sizeof(id));
    if (dfcclBroadcast(bytes.data(), bytes.data(), sizeof(id), dfcclInt8, 0, nc, 0, nullptr, &q) != dfcclSuccess ||
        dfcclSynchronize(q, kHangMs) != dfcclSuccess)
      return fail(std::string("broadcast of the id: ") + dfcclGetLastError(nullptr));
    std::memcpy(&id, bytes.data(), sizeof(id));
    dfcclRequestFree(q);
    if (new_rank == 0 && write(p.join_fd, &id, sizeof(id)) != ssize_t(sizeof(id))) return fail("id to the newcomer");
    dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
    cfg.executor = executor();
    dfcclComm_t joined = nullptr;
    if (dfcclCommInitRankConfig(&joined, n + 1, id, new_rank, &cfg) != dfcclSuccess)
      return fail(std::string("init with the newcomer: ") + dfcclGetLastError(nullptr));
    if (all_reduce(joined, rank + 1, sum + 100, &r.wrong) != dfcclSuccess)
      return fail(std::string("all-reduce with the newcomer: ") + dfcclGetLastError(nullptr));
    dfcclCommDestroy(joined);
  }
  dfcclCommDestroy(nc);
  r.ok = r.wrong == 0;
  if (!r.ok) return fail(std::to_string(r.wrong) + " wrong elements");
  return r;
}

// A survivor of a trial with two kills: as an elastic application, it shrinks again whenever its communicator
// fails, learns the members from an all-gather of the old ranks (itself at its new rank, in increasing order, never
// the first victim, which was dead before any shrink) and all-reduces exactly among them.
Report elastic_survivor(dfcclComm_t comm, int rank, const Plan& p) {
  Report r;
  std::string err;
  dfcclResult_t st = until_failure(comm, rank, r, err);
  auto fail = [&](const std::string& why) { return failed(r, why); };
  if (st != dfcclRemoteError) return fail(std::string("the old collective returned ") + dfcclGetErrorString(st));
  if (err.find("rank " + std::to_string(p.victim) + " ") == std::string::npos &&
      err.find("rank " + std::to_string(p.second_victim) + " ") == std::string::npos)
    return fail("the failure names neither victim: " + err);
  std::string trace;
  auto mark = [&](const char* what) {
    trace += std::string(what) + "@" + std::to_string(mono_ns() / 1000000 % 100000) + " ";
    std::snprintf(r.trace, sizeof(r.trace), "%s", trace.c_str());
  };
  mark("failed");
  for (int shrinks = 1;; ++shrinks) {
    if (shrinks > 3) return fail("still failing after 3 shrinks");
    dfcclComm_t nc = nullptr;
    if (dfcclCommShrink(comm, nullptr, 0, &nc, nullptr) != dfcclSuccess || !nc)
      return fail(std::string("dfcclCommShrink: ") + dfcclGetLastError(nullptr));
    mark("shrunk");
    const auto t0 = std::chrono::steady_clock::now();
    dfcclCommDestroy(comm);
    mark("destroyed");
    r.destroy_ms = std::max(r.destroy_ms, dfccl::test::ms_since(t0));
    comm = nc;
    int n = 0, new_rank = -1;
    dfcclCommCount(comm, &n);
    dfcclCommUserRank(comm, &new_rank);
    Buffer<int32_t> mine(1, rank), members(size_t(n), -1);
    dfcclRequest_t q = nullptr;
    st = dfcclAllGather(mine.data(), members.data(), 1, dfcclInt32, comm, 0, nullptr, &q);
    if (st == dfcclSuccess) st = dfcclSynchronize(q, kHangMs);
    if (q) dfcclRequestFree(q);
    if (st == dfcclRemoteError) {
      mark("gather-failed");
      continue;
    }
    if (st != dfcclSuccess) return fail(std::string("all-gather: ") + dfcclGetLastError(nullptr));
    mark("gathered");
    if (!r.done_ns) r.done_ns = mono_ns();
    int32_t sum = 0;
    for (int k = 0; k < n; ++k) {
      sum += members[size_t(k)] + 1;
      if ((k && members[size_t(k)] <= members[size_t(k - 1)]) || members[size_t(k)] == p.victim)
        return fail("the members are not the survivors in order");
    }
    if (members[size_t(new_rank)] != rank) return fail("not at its new rank");
    for (int i = 1; i <= 20 && st == dfcclSuccess; ++i) st = all_reduce(comm, (rank + 1) * i, sum * i, &r.wrong);
    if (st == dfcclRemoteError) {
      mark("reduce-failed");
      continue;
    }
    if (st != dfcclSuccess) return fail(std::string("all-reduce: ") + dfcclGetLastError(nullptr));
    break;
  }
  dfcclCommDestroy(comm);
  r.ok = r.wrong == 0;
  if (!r.ok) return fail(std::to_string(r.wrong) + " wrong elements");
  return r;
}

// The newcomer: reads the id, joins as the last rank, all-reduces 100.
int newcomer(int fd, int nranks) {
  pollfd pf{fd, POLLIN, 0};
  dfcclUniqueId id;
  if (poll(&pf, 1, kHangMs) != 1 || read(fd, &id, sizeof(id)) != ssize_t(sizeof(id))) return 2;
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = executor();
  dfcclComm_t comm = nullptr;
  if (dfcclCommInitRankConfig(&comm, nranks, id, nranks - 1, &cfg) != dfcclSuccess) return 3;
  int wrong = 0;
  int32_t sum = 100;
  for (int q = 0; q < kRanks - 1; ++q) sum += q + 1;  // the survivors of victim 3 (the case that uses a newcomer)
  if (all_reduce(comm, 100, sum, &wrong) != dfcclSuccess || wrong) return 4;
  dfcclCommDestroy(comm);
  return 0;
}

struct Outcome {
  std::vector<Report> reports;  // one per survivor that reported
  int hangs = 0;                // survivors that did not report within kHangMs
  double kill_to_first_ms = 0;  // the last survivor's first collective on the shrunk communicator, after the kill
  int64_t kill_ns = 0;
};

// Forks the four ranks (and the newcomer if asked); kills the victim `delay_ms` after every rank has completed a
// collective; collects the survivors' reports.
Outcome run(Plan p, int delay_ms) {
  Outcome o;
  dfccl::test::ForkedId ids;
  int ready[2], report[2], join[2];
  if (pipe(ready) || pipe(report) || pipe(join)) return o;
  p.join_fd = join[1];
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      close(report[0]);
      close(join[0]);
      // Two kills: a survivor whose last collective completed can destroy its communicator while a peer's failed
      // (the second victim died in between); that destroy waits for the dead peer's credits for
      // DFCCL_DESTROY_TIMEOUT_MS, and the peer's next shrink waits for it: keep that wait short.
      if (p.second_victim >= 0) setenv("DFCCL_DESTROY_TIMEOUT_MS", "1000", 1);
      if (const int hosts = env_or("SHRINK_HOSTS", 0); hosts > 0)
        setenv("DFCCL_HOSTID", ("shrink-host" + std::to_string(rank * hosts / kRanks)).c_str(), 1);
      dfcclComm_t comm = dfccl::test::init_forked_rank(ids.get(rank, kRanks), rank, kRanks, executor());
      int wrong = 0;
      const bool first = all_reduce(comm, rank + 1, 10, &wrong) == dfcclSuccess && wrong == 0;
      char byte = first ? 1 : 0;
      if (write(ready[1], &byte, 1) != 1) _exit(2);
      if (rank == p.victim) {  // all-reduces until the parent kills it
        for (int i = 2;; ++i) all_reduce(comm, (rank + 1) * i, 10 * i, &wrong);
      }
      const Report r = p.second_victim >= 0 ? elastic_survivor(comm, rank, p) : survivor(comm, rank, p);
      if (write(report[1], &r, sizeof(r)) != ssize_t(sizeof(r))) _exit(3);
      std::fflush(nullptr);
      _exit(0);
    }
    pids.push_back(pid);
  }
  pid_t joiner = -1;
  if (p.replacement) {
    joiner = fork();
    if (joiner == 0) _exit(newcomer(join[0], kRanks));
  }
  close(ready[1]);
  close(report[1]);
  close(join[0]);
  close(join[1]);
  char byte = 0;
  bool started = true;
  for (int k = 0; k < kRanks; ++k) started = read(ready[0], &byte, 1) == 1 && byte == 1 && started;
  EXPECT_TRUE(started) << "a rank's first all-reduce failed";
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  const int64_t kill_ns = mono_ns();
  o.kill_ns = kill_ns;
  kill(pids[size_t(p.victim)], SIGKILL);
  if (p.second_victim >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(p.second_delay_ms));
    kill(pids[size_t(p.second_victim)], SIGKILL);
  }
  // The survivors that must report: a second victim's report, if it came before its kill, is not counted.
  const int survivors = kRanks - 1 - (p.late_victim >= 0) - (p.second_victim >= 0);
  const auto t0 = std::chrono::steady_clock::now();
  while (int(o.reports.size()) < survivors) {
    const int left = kHangMs - int(dfccl::test::ms_since(t0));
    pollfd pf{report[0], POLLIN, 0};
    Report r;
    if (left <= 0 || poll(&pf, 1, left) != 1 || read(report[0], &r, sizeof(r)) != ssize_t(sizeof(r))) break;
    if (r.rank == p.second_victim) continue;
    o.reports.push_back(r);
    o.kill_to_first_ms = std::max(o.kill_to_first_ms, double(r.done_ns - kill_ns) / 1e6);
  }
  o.hangs = survivors - int(o.reports.size());
  for (pid_t pid : pids) kill(pid, SIGKILL);  // the survivors have reported (or hang)
  if (joiner > 0) {
    int status = 0;
    waitpid(joiner, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the newcomer failed (status " << status << ")";
  }
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  close(ready[0]);
  close(report[0]);
  return o;
}

// The bound on the time from the kill to the first collective of the shrunk communicator: the issue's 2 s when the
// trials are a measurement (SHRINK_TRIALS set), else 5 s: on a loaded CI machine a starved daemon thread can hold a
// survivor's abort of the old communicator for its whole DFCCL_ABORT_TIMEOUT_MS (1 s).
double kill_to_first_bound_ms() { return std::getenv("SHRINK_TRIALS") ? 2000 : 5000; }

void expect_all_ok(const Outcome& o) {
  EXPECT_EQ(o.hangs, 0) << "survivors that never reported";
  for (const Report& r : o.reports) {
    EXPECT_TRUE(r.ok) << r.why;
    EXPECT_EQ(r.wrong, 0) << "rank " << r.rank;
    EXPECT_LT(r.destroy_ms, 1000) << "rank " << r.rank << ": the old communicator's destroy";
  }
}

TEST(Shrink, SurvivorsOfAKillShrinkAndANewcomerJoins) {
  SKIP_WITHOUT_THE_EXECUTOR();
  Plan p;
  p.victim = 3;
  p.replacement = true;
  const Outcome o = run(p, 100);
  expect_all_ok(o);
  EXPECT_LT(o.kill_to_first_ms, kill_to_first_bound_ms());
  std::printf("[ shrink   ] kill to the first collective of the shrunk communicator: %.0f ms\n", o.kill_to_first_ms);
}

// Rank 0 made the unique id: its process hosted the rendezvous root (across hosts, the old communicator's rounds),
// which dies with it; the survivors' shrink needs nothing of it.
TEST(Shrink, TheRankThatHostedTheRendezvousRootIsKilled) {
  SKIP_WITHOUT_THE_EXECUTOR();
  Plan p;
  p.victim = 0;
  const Outcome o = run(p, 100);
  expect_all_ok(o);
  ASSERT_EQ(o.reports.size(), 3u);
  EXPECT_LT(o.kill_to_first_ms, kill_to_first_bound_ms());
}

TEST(Shrink, ARankThatDiesDuringTheShrinkIsExcludedToo) {
  SKIP_WITHOUT_THE_EXECUTOR();
  Plan p;
  p.victim = 1;
  p.late_victim = 2;  // fails with the others, then dies 300 ms later instead of shrinking
  const Outcome o = run(p, 50);
  expect_all_ok(o);
  ASSERT_EQ(o.reports.size(), 2u);
}

// Ranks 0-2 exclude rank 3, which is alive: their pending collective of the old communicator (which rank 3 never
// calls) fails with dfcclRemoteError naming it, its buffers intact; rank 3's own call excludes itself and returns
// NULL at once.
TEST(Shrink, AnExplicitExclusionFailsTheOldPendingCollective) {
  SKIP_WITHOUT_THE_EXECUTOR();
  dfccl::test::run_forked_ranks(
      kRanks, [](int) {},
      [](dfcclComm_t comm, int rank) {
        const int exclude[1] = {3};
        dfcclComm_t nc = nullptr;
        if (rank == 3) {
          const auto t0 = std::chrono::steady_clock::now();
          const bool ok = dfcclCommShrink(comm, exclude, 1, &nc, nullptr) == dfcclSuccess && nc == nullptr &&
                          dfccl::test::ms_since(t0) < 500;
          dfcclCommDestroy(comm);
          return ok ? 0 : 1;
        }
        Buffer<int32_t> in(kCount, rank + 1), out(kCount, -7);
        dfcclRequest_t pending = nullptr;
        if (dfcclAllReduce(in.data(), out.data(), kCount, dfcclInt32, dfcclSum, comm, 0, nullptr, &pending) !=
            dfcclSuccess)
          return 2;
        if (dfcclCommShrink(comm, exclude, 1, &nc, nullptr) != dfcclSuccess || !nc) {
          std::fprintf(stderr, "rank %d: %s\n", rank, dfcclGetLastError(nullptr));
          return 3;
        }
        const dfcclResult_t st = dfcclSynchronize(pending, 2000);
        const std::string err = dfcclGetLastError(nullptr);
        if (st != dfcclRemoteError || err.find("rank 3 ") == std::string::npos ||
            err.find("excluded by dfcclCommShrink") == std::string::npos) {
          std::fprintf(stderr, "rank %d: the pending collective: %s: %s\n", rank, dfcclGetErrorString(st), err.c_str());
          return 4;
        }
        for (int32_t v : in)
          if (v != rank + 1) return 5;  // the send buffer is the application's, untouched
        dfcclRequestInfo_t info = DFCCL_REQUEST_INFO_INITIALIZER;
        if (dfcclRequestGetInfo(pending, &info) != dfcclSuccess || info.status != dfcclRemoteError) return 6;
        dfcclRequestFree(pending);
        int wrong = 0;
        if (all_reduce(nc, rank + 1, 6, &wrong) != dfcclSuccess || wrong) return 7;
        const auto t0 = std::chrono::steady_clock::now();
        if (dfcclCommDestroy(comm) != dfcclSuccess || dfccl::test::ms_since(t0) > 1000) return 8;
        dfcclCommDestroy(nc);
        return 0;
      },
      executor());
}

// Ranks as threads of one process (dfcclCommInitAll): ranks 0-2 exclude rank 3 by list, rank 3 excludes itself and
// gets NULL; the three all-reduce exactly on the new communicator, ranks in their old order.
TEST(Shrink, ThreadsOfOneProcessExcludeOneByList) {
  if (executor() != dfcclExecutorHost) GTEST_SKIP() << "ranks as threads need a GPU each on the CUDA executor";
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  dfcclComm_t comms[kRanks] = {};
  ASSERT_EQ(dfcclCommInitAllConfig(comms, kRanks, nullptr, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);
  dfcclComm_t made[kRanks] = {};
  int wrong[kRanks] = {}, rank_of[kRanks] = {}, size_of[kRanks] = {};
  dfcclResult_t st[kRanks] = {}, sum_st[kRanks] = {};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      const int exclude[1] = {3};
      st[r] = dfcclCommShrink(comms[r], exclude, 1, &made[r], nullptr);
      if (st[r] != dfcclSuccess || !made[r]) return;
      dfcclCommUserRank(made[r], &rank_of[r]);
      dfcclCommCount(made[r], &size_of[r]);
      sum_st[r] = all_reduce(made[r], r + 1, 6, &wrong[r]);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(st[r], dfcclSuccess) << "rank " << r;
    if (r == 3) {
      EXPECT_EQ(made[r], nullptr);
      continue;
    }
    ASSERT_NE(made[r], nullptr) << "rank " << r;
    EXPECT_EQ(rank_of[r], r);
    EXPECT_EQ(size_of[r], 3);
    EXPECT_EQ(sum_st[r], dfcclSuccess) << "rank " << r;
    EXPECT_EQ(wrong[r], 0) << "rank " << r;
  }
  for (int r = 0; r < kRanks; ++r) {
    if (made[r]) dfcclCommDestroy(made[r]);
    EXPECT_EQ(dfcclCommDestroy(comms[r]), dfcclSuccess) << "rank " << r << ": " << dfcclGetLastError(nullptr);
  }
}

TEST(Shrink, BadArgumentsAreNamed) {
  SKIP_WITHOUT_THE_EXECUTOR();
  dfccl::test::run_forked_ranks(
      1, [](int) {},
      [](dfcclComm_t comm, int) {
        dfcclComm_t nc = nullptr;
        const int bad[1] = {5};
        bool ok = dfcclCommShrink(comm, nullptr, 1, &nc, nullptr) == dfcclInvalidArgument &&
                  std::string(dfcclGetLastError(nullptr)).find("nExclude") != std::string::npos;
        ok = ok && dfcclCommShrink(comm, bad, 1, &nc, nullptr) == dfcclInvalidArgument &&
             std::string(dfcclGetLastError(nullptr)).find("excludeRanks[0]") != std::string::npos;
        ok = ok && dfcclCommShrink(comm, nullptr, 0, nullptr, nullptr) == dfcclInvalidArgument;
        // Nothing failed: a shrink of one rank with nothing excluded is a copy of it.
        ok = ok && dfcclCommShrink(comm, nullptr, 0, &nc, nullptr) == dfcclSuccess && nc;
        int size = 0;
        ok = ok && dfcclCommCount(nc, &size) == dfcclSuccess && size == 1;
        dfcclCommDestroy(nc);
        dfcclCommDestroy(comm);
        return ok ? 0 : 1;
      },
      executor());
}

// SHRINK_TRIALS trials of a random victim killed 0-300 ms after every rank ran a collective: no hang, no wrong
// element, every survivor on the shrunk communicator; the time from the kill to the first completed collective on
// the shrunk communicator (the last survivor's) is printed, its median and maximum, and must stay under 2 s (5 s
// when SHRINK_TRIALS is not set: kill_to_first_bound_ms).
// SHRINK_SECOND_KILL=1: a second random rank is killed 0-150 ms after the first (before, during or after the
// survivors' shrink), and the survivors shrink again as often as their communicator fails.
TEST(ShrinkTrials, RandomVictimAndTime) {
  SKIP_WITHOUT_THE_EXECUTOR();
  const int trials = env_or("SHRINK_TRIALS", 3);
  const bool second = env_or("SHRINK_SECOND_KILL", 0) != 0;
  const unsigned seed = unsigned(env_or("SHRINK_SEED", int(time(nullptr))));
  std::mt19937 rng(seed);
  std::vector<double> ms;
  int hangs = 0, wrong = 0, failed = 0;
  for (int t = 0; t < trials; ++t) {
    Plan p;
    p.victim = int(rng() % kRanks);
    const int delay = int(rng() % 300);
    if (second) {
      p.second_victim = (p.victim + 1 + int(rng() % (kRanks - 1))) % kRanks;
      p.second_delay_ms = int(rng() % 150);
    }
    const Outcome o = run(p, delay);
    hangs += o.hangs;
    if (o.kill_to_first_ms > 1000) {
      std::printf("[ trial %3d] victim %d at %d ms, second victim %d %d ms later: %.0f ms; kill@%lld\n", t, p.victim,
                  delay, p.second_victim, p.second_delay_ms, o.kill_to_first_ms,
                  (long long)(o.kill_ns / 1000000 % 100000));
      for (const Report& r : o.reports) std::printf("    rank %d: %s\n", r.rank, r.trace);
    }
    if (o.hangs)
      std::printf("[ trial %3d] victim %d at %d ms, second victim %d %d ms later: %d survivors hang\n", t, p.victim,
                  delay, p.second_victim, p.second_delay_ms, o.hangs);
    for (const Report& r : o.reports) {
      wrong += r.wrong;
      if (!r.ok) {
        ++failed;
        std::printf("[ trial %3d] victim %d at %d ms: %s\n", t, p.victim, delay, r.why);
      }
    }
    if (o.hangs == 0) ms.push_back(o.kill_to_first_ms);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms.empty() ? 0 : ms[ms.size() / 2], worst = ms.empty() ? 0 : ms.back();
  std::printf("[ shrink   ] seed %u: %d trials, %d hangs, %d failed survivors, %d wrong elements; kill to the first "
              "collective of the shrunk communicator: median %.0f ms, max %.0f ms\n",
              seed, trials, hangs, failed, wrong, median, worst);
  EXPECT_EQ(hangs, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
  if (!second) {
    EXPECT_LT(worst, kill_to_first_bound_ms());  // the issue's measure: one kill, the defaults
  }
}

}  // namespace
