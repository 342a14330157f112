// The fault workload's MPI side (fault.h). Per backend and trial: rank 0 makes the trial's unique id and broadcasts
// it; every MPI rank starts its DFCCL rank as a child (this executable with --fault-child, exec'd at once after the
// fork) and hands it the plan; the victim's MPI rank kills its child (SIGKILL) a drawn 0..fault.kill_max_ms after
// the child's first collective completed; the others wait for their child's report (at most run.timeout, else the
// child hangs: it is killed and the trial is deadlocked). Rank 0 gathers the reports and the kill's time and writes
// the trial row with its fault columns (TrialRow: victim, kill_ms, fault_*).
#include <fmt/format.h>
#include <mpi.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "fault/fault.h"
#include "runtime/run_info.h"

namespace dfccl::harness::fault {
namespace {

using Clock = std::chrono::steady_clock;

// What each MPI rank sends rank 0 after a trial.
struct Outcome {
  int32_t reported = 0;    // its child's report came (survivors)
  int32_t hung = 0;        // its child neither reported nor exited within run.timeout
  int64_t kill_ns = 0;     // the victim's: when its child was killed
  char problem[200] = {};  // the MPI rank's own trouble (the child could not start, was not ready)
  Report report;
};

// A child of this MPI rank running `self --fault-child <plan fd> <report fd>`.
struct Child {
  pid_t pid = -1;
  int plan_fd = -1, report_fd = -1;  // the parent's ends

  bool start(const Plan& plan) {
    int to[2], from[2];
    if (pipe(to) != 0) return false;
    if (pipe(from) != 0) {
      close(to[0]), close(to[1]);
      return false;
    }
    const std::string a = std::to_string(to[0]), b = std::to_string(from[1]);
    std::fflush(nullptr);
    pid = fork();
    if (pid == 0) {  // only async-signal-safe calls until exec
      close(to[1]);
      close(from[0]);
      const char* argv[] = {"dfccl-harness", "--fault-child", a.c_str(), b.c_str(), nullptr};
      execv("/proc/self/exe", const_cast<char* const*>(argv));
      _exit(127);
    }
    close(to[0]);
    close(from[1]);
    plan_fd = to[1];
    report_fd = from[0];
    if (pid < 0) return false;
    return write(plan_fd, &plan, sizeof(plan)) == ssize_t(sizeof(plan));
  }
  // Reads n bytes within timeout_ms; false on timeout, or with *ended set when the child closed its end first.
  bool read_within(void* out, size_t n, int timeout_ms, bool* ended) {
    pollfd pf{report_fd, POLLIN, 0};
    if (poll(&pf, 1, timeout_ms) != 1) return false;
    const ssize_t got = read(report_fd, out, n);
    *ended = got != ssize_t(n);
    return !*ended;
  }
  void kill_and_reap() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  void reap() {
    if (pid > 0) waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~Child() {
    kill_and_reap();
    if (plan_fd >= 0) close(plan_fd);
    if (report_fd >= 0) close(report_fd);
  }
};

double seconds(int64_t ns) { return double(ns) * 1e-9; }

class Runner {
 public:
  Runner(const Workload& w, MpiWorld& world, Writer& writer) : w_(w), world_(world), writer_(writer) {}

  DriverResult run() {
    machines_ = machines();
    for (const std::string& b : w_.backends) run_backend(b);
    return result_;
  }

 private:
  // Collective: how many kernels (machines) the ranks run on, told by /proc/sys/kernel/random/boot_id; a rank that
  // cannot read it counts as a machine of its own. Fake hosts (network namespaces) share their machine's kernel.
  int machines() const {
    char mine[48] = {};
    if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      if (!std::fgets(mine, sizeof(mine), f)) mine[0] = 0;
      std::fclose(f);
    }
    if (!mine[0]) std::snprintf(mine, sizeof(mine), "unknown-%d", world_.rank);
    std::vector<char> all(sizeof(mine) * size_t(world_.size));
    MPI_Allgather(mine, int(sizeof(mine)), MPI_CHAR, all.data(), int(sizeof(mine)), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> ids;
    for (int r = 0; r < world_.size; ++r) ids.emplace_back(all.data() + size_t(r) * sizeof(mine));
    std::sort(ids.begin(), ids.end());
    return int(std::unique(ids.begin(), ids.end()) - ids.begin());
  }

  // The reason the backend cannot run here ("" when it can), the same on every rank.
  std::string unavailable(const std::string& name) const {
    if (machines_ > 1)
      return "the ranks span machines (their kernels' boot ids differ): the recovery is timed from the kill with the "
             "victim's CLOCK_MONOTONIC, which other machines do not share (hosts of one machine, network namespaces, "
             "run)";
    if (name == "dfccl" && gpu_count() == 0) return "no GPU";
    return "";
  }

  void run_backend(const std::string& name) {
    const auto t0 = Clock::now();
    BackendInfo info{name,
                     name == "dfccl" ? "cuda" : "host",
                     "preemptive",
                     "dfcclSynchronize in a child process per rank (killed: SIGKILL)",
                     "CLOCK_MONOTONIC of the host, from the kill",
                     true,
                     ""};
    info.skip_reason = unavailable(name);
    info.available = info.skip_reason.empty();
    writer_.begin_backend(info);
    summary_ = BackendSummary{};
    summary_.backend = name;
    summary_.workload = w_.name;
    std::vector<double> recover;
    for (int t = 0; t < w_.trials; ++t) {
      TrialRow row;
      row.trial = t;
      if (!info.available) {
        row.status = "skipped";
        row.message = info.skip_reason;
        summary_.skipped++;
      } else {
        run_trial(name == "dfccl", t, row);
        if (row.status == "completed") recover.push_back(row.fault_recover_s);
      }
      writer_.add_trial(row);
      summary_.trials++;
      summary_.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
      writer_.checkpoint(summary_);
    }
    if (world_.rank == 0 && !recover.empty()) {
      std::sort(recover.begin(), recover.end());
      fmt::print("# fault ({}): {} trials, {} completed, {} hung, {} failed, {} wrong elements; kill to the first "
                 "collective of the shrunk communicator: median {:.0f} ms, max {:.0f} ms\n",
                 name, summary_.trials, summary_.completed, summary_.deadlocked, summary_.failed, summary_.wrong,
                 recover[recover.size() / 2] * 1e3, recover.back() * 1e3);
    }
    summary_.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    writer_.end_backend(summary_);
    add_backend(result_, summary_, true);
  }

  // One trial on every rank; rank 0 fills row.
  void run_trial(bool cuda, int t, TrialRow& row) {
    const auto t0 = Clock::now();
    const uint64_t h = mix(w_.seed * 1000003 + uint64_t(t));
    const int victim = int(h % uint64_t(world_.size));
    const int kill_ms = int((h >> 20) % uint64_t(w_.fault_kill_max_ms + 1));
    Plan plan;
    dfcclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    int made = world_.rank == 0 ? int(dfcclGetUniqueId(&id) == dfcclSuccess) : 1;
    MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(id.internal, int(sizeof(id.internal)), MPI_BYTE, 0, MPI_COMM_WORLD);
    std::memcpy(plan.id, id.internal, sizeof(plan.id));
    plan.rank = world_.rank;
    plan.nranks = world_.size;
    plan.executor = cuda ? dfcclExecutorCuda : dfcclExecutorHost;
    plan.device = cuda ? world_.local_rank % std::max(1, gpu_count()) : world_.rank;
    plan.after = w_.fault_after;
    plan.inflight = w_.fault_inflight;
    plan.timeout_ms = int(w_.timeout_s * 1000);
    plan.seed = mix(h);
    const std::vector<uint64_t> sizes = w_.sizes();
    plan.nsizes = int(std::min<size_t>(sizes.size(), std::size(plan.sizes)));
    std::copy(sizes.begin(), sizes.begin() + plan.nsizes, plan.sizes);

    Outcome mine;
    auto problem = [&](const std::string& why) {
      std::snprintf(mine.problem, sizeof(mine.problem), "rank %d: %s", world_.rank, why.c_str());
    };
    Child child;
    char ready = 0;
    bool ended = false;
    if (!made) {
      problem("dfcclGetUniqueId failed on rank 0");
    } else if (!child.start(plan)) {
      problem("could not start its child");
    } else if (!child.read_within(&ready, 1, plan.timeout_ms, &ended) || ready != 'R') {
      problem(ended ? "its child ended before its first collective completed"
                    : "its child's first collective did not complete within run.timeout");
    } else if (world_.rank == victim) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kill_ms));
      mine.kill_ns = mono_ns();
      child.kill_and_reap();
    } else if (child.read_within(&mine.report, sizeof(mine.report), plan.timeout_ms, &ended)) {
      mine.reported = 1;
      child.reap();
    } else if (ended) {
      problem("its child ended without a report");
    } else {
      mine.hung = 1;
      child.kill_and_reap();
    }
    std::vector<Outcome> all(world_.rank == 0 ? size_t(world_.size) : 0);
    MPI_Gather(&mine, int(sizeof(mine)), MPI_BYTE, all.data(), int(sizeof(mine)), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (world_.rank == 0) describe(all, victim, kill_ms, row);
    row.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // Rank 0: the trial's row from every rank's outcome.
  void describe(const std::vector<Outcome>& all, int victim, int kill_ms, TrialRow& row) {
    row.victim = victim;
    row.kill_ms = kill_ms;
    const int64_t kill_ns = all[size_t(victim)].kill_ns;
    int64_t detect = 0, shrunk = 0, first = 0;
    std::string message, hung;
    bool ok = true;
    for (size_t r = 0; r < all.size(); ++r) {
      const Outcome& o = all[r];
      if (o.problem[0]) message = message.empty() ? o.problem : message;
      if (int(r) == victim) continue;
      if (o.hung) hung += (hung.empty() ? "" : ",") + std::to_string(r);
      if (!o.reported) {
        ok = false;
        continue;
      }
      const Report& p = o.report;
      row.wrong += p.wrong;
      row.fault_lost = std::max<int64_t>(row.fault_lost, p.lost);
      if (!p.ok) {
        ok = false;
        if (message.empty()) message = p.message;
        continue;
      }
      row.fault_survivors++;
      row.fault_resumed_at = p.resumed_at;
      detect = std::max(detect, p.detect_ns);
      shrunk = std::max(shrunk, p.shrunk_ns);
      first = std::max(first, p.first_ns);
    }
    if (!hung.empty()) {
      row.status = "deadlocked";
      row.ranks = hung;
      row.message = fmt::format("ranks {} neither reported nor exited within {} s after the kill of rank {}", hung,
                                w_.timeout_s, victim);
      summary_.deadlocked++;
    } else if (!ok || kill_ns == 0) {
      row.status = "failed";
      row.message = message.empty() ? "a survivor did not report" : message;
      summary_.failed++;
    } else {
      row.status = "completed";
      row.fault_detect_s = seconds(detect - kill_ns);
      row.fault_shrink_s = seconds(shrunk - detect);
      row.fault_recover_s = seconds(first - kill_ns);
      summary_.completed++;
    }
    summary_.wrong += row.wrong;
  }

  const Workload& w_;
  MpiWorld& world_;
  Writer& writer_;
  BackendSummary summary_;
  DriverResult result_;
  int machines_ = 1;
};

}  // namespace

DriverResult run_campaign(const Workload& w, MpiWorld& world, Writer& writer) { return Runner(w, world, writer).run(); }

}  // namespace dfccl::harness::fault
