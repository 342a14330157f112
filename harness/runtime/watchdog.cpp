#include "watchdog.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>

#include "plan/rank_program.h"
#include "runtime/liveness.h"
#include "runtime/signals.h"

namespace dfccl::harness {

namespace {

// Waits up to wait_s for the worker, in slices that check for a signal. Returns whether it is done (with its error).
bool wait_for_worker(WorkerState& sh, double wait_s, std::string& error) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
  std::unique_lock lock(sh.mu);
  while (true) {
    throw_if_signalled();
    const auto slice = std::min(until, Clock::now() + std::chrono::milliseconds(100));
    if (sh.cv.wait_until(lock, slice, [&] { return sh.done; })) {
      error = sh.error;
      return true;
    }
    if (Clock::now() >= until) return false;
  }
}

// This rank's latest progress, seconds since t0: the worker's, or the end of a stop of this process (SIGSTOP): a
// stopped process is not the backend's silence.
double latest_progress_s(const WorkerState& sh, Clock::time_point t0) {
  const double worker_s = static_cast<double>(sh.last_progress_ns.load()) * 1e-9;
  const int64_t resumed = liveness::resumed_ns();
  if (resumed == 0) return worker_s;
  const double resumed_s =
      static_cast<double>(resumed -
                          std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count()) *
      1e-9;
  return std::max(worker_s, resumed_s);
}

}  // namespace

WatchVerdict watch_trial(WorkerState& sh, double timeout_s, Clock::time_point t0) {
  WatchVerdict v;
  double wait_s = timeout_s;
  while (true) {
    const bool finished = wait_for_worker(sh, wait_s, v.error);
    // {still running, failed, latest progress, now}, each the maximum over ranks (seconds since the trial start).
    double state[4] = {finished ? 0.0 : 1.0, finished && !v.error.empty() ? 1.0 : 0.0, latest_progress_s(sh, t0),
                       seconds_since(t0)};
    gentle_allreduce(state, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    v.any_running = state[0] != 0;
    v.any_failed = state[1] != 0;
    v.last_progress_s = state[2];
    v.decided_s = state[3];
    if (!v.any_running || v.any_failed) return v;
    const double silent = v.decided_s - v.last_progress_s;
    if (silent >= timeout_s - 1e-3) return v;  // silent for run.timeout: deadlocked
    wait_s = std::max(timeout_s - silent, 1e-3);
  }
}

namespace {

// Where a worker is, in words, from WorkerState's at_iteration, at_op and at_kind.
std::string worker_position(bool done, int iteration, int op, int kind) {
  if (done) return "done";
  if (op == -3) return "finish (waiting for the last iteration)";
  if (op == -2) return fmt::format("end of iteration {}", iteration);
  if (op < 0) return "starting";
  return fmt::format("iteration {}, operation {} ({})", iteration, op,
                     program::op_kind_name(static_cast<program::OpKind>(kind)));
}

}  // namespace

void diagnose_trial(Backend& b, WorkerState& sh, int trial, const MpiWorld& world) {
  bool done;
  {
    std::lock_guard lock(sh.mu);
    done = sh.done;
  }
  const std::string where = worker_position(done, sh.at_iteration, sh.at_op, sh.at_kind);
  for (int round = 0; round < 2; ++round)
    for (int r = 0; r < world.size; ++r) {
      if (r == world.rank) {
        if (round == 0)
          fmt::print(stderr, "# diagnose trial {} rank {}: worker at {}; {} operations returned\n", trial, r, where,
                     sh.executed.load());
        std::fflush(stderr);
        std::string state;
        try {
          state = b.diagnostics(round);  // may write more lines to stderr itself
        } catch (const std::exception& e) {
          state = e.what();
        }
        if (!state.empty()) fmt::print(stderr, "# diagnose trial {} rank {}: {}\n", trial, r, state);
      }
      std::fflush(stderr);
      gentle_barrier(MPI_COMM_WORLD);
    }
}

StopOutcome stop_trial(Backend& b, WorkerState& sh, std::thread& worker) {
  StopOutcome s;
  sh.cancel = true;
  try {
    b.abort_comms();  // releases a blocked worker on this rank; peers do the same
  } catch (const std::exception& e) {
    s.abort_error = e.what();
  }
  std::string ignored;
  s.joined = s.abort_error.empty() && wait_for_worker(sh, 20.0, ignored);
  int stuck = s.joined ? 0 : 1;
  gentle_allreduce(&stuck, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  s.stuck = stuck != 0;
  if (s.joined) worker.join();
  else worker.detach();  // cannot be released: the backend is unusable from now on
  return s;
}

void record_stopped_trial(const WatchVerdict& v, const StopOutcome& s, WorkerState& sh, double timeout_s,
                          TrialRow& row) {
  if (v.any_failed && !v.any_running) {
    row.status = "failed";
  } else {
    row.status = "deadlocked";
    row.detect_s = v.decided_s - v.last_progress_s;
  }
  row.message = agree_error(v.any_failed ? v.error : "");
  if (row.message.empty() && v.any_running)
    row.message = fmt::format("no progress on any rank for run.timeout = {} s", timeout_s);
  if (s.stuck) {
    row.message += "; a worker could not be released after the abort";
    if (!s.abort_error.empty()) row.message += " (" + s.abort_error + ")";
  }
  // A worker that was not joined may still run: only its atomic counter is read.
  int64_t counts[3] = {s.joined ? sh.reordered : 0, s.joined ? sh.syncs : 0, sh.executed.load()};
  gentle_allreduce(counts, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  row.reordered = counts[0];
  row.syncs = counts[1];
  row.executed_steps = counts[2];
  row.preemptions = row.daemon_launches = -1;
}

}  // namespace dfccl::harness
