// The watchdog of a trial (main thread, every call MPI-collective over MPI_COMM_WORLD): it waits for the worker and,
// with every rank, decides whether the trial completed, failed, or deadlocked (run.timeout seconds without progress on
// any rank); a stopped trial is aborted, its worker released, and its row filled.
#pragma once

#include <string>
#include <thread>

#include "backends/backend.h"
#include "output/results.h"
#include "runtime/mpi_env.h"
#include "runtime/worker.h"

namespace dfccl::harness {

// What all ranks agreed on. The flags and times are reduced over ranks, so every rank takes the same decision.
struct WatchVerdict {
  bool any_running = false;    // some worker had not finished: the trial deadlocked (unless any_failed)
  bool any_failed = false;     // some worker ended with an error
  double decided_s = 0;        // trial start -> the decision (latest over ranks)
  double last_progress_s = 0;  // trial start -> the latest progress of any rank
  std::string error;           // this rank's worker error ("" if none, or still running)
  bool stopped() const { return any_running || any_failed; }
};

// Waits until every worker is done, some worker failed, or no rank has made progress for timeout_s while some
// worker runs. A slow trial that still progresses gets more time: only silence counts.
WatchVerdict watch_trial(WorkerState& sh, double timeout_s, Clock::time_point t0);

// run.diagnose: on stderr, rank by rank, where the worker is in its program and the backend's state.
void diagnose_trial(Backend& b, WorkerState& sh, int trial, const MpiWorld& world);

struct StopOutcome {
  bool joined = false;      // this rank's worker was released and joined
  bool stuck = false;       // some rank's worker could not be released: its backend is unusable from now on
  std::string abort_error;  // this rank's abort_comms() failure, "" if none
};

// Cancels the worker and aborts b's communicators (which releases a blocked worker), then joins the worker, or
// detaches it when it is not done after 20 s.
StopOutcome stop_trial(Backend& b, WorkerState& sh, std::thread& worker);

// Fills a stopped trial's row: status (failed, or deadlocked with its time to detect), the message agreed over
// ranks, and the counters summed over ranks (engine counters -1: not read).
void record_stopped_trial(const WatchVerdict& v, const StopOutcome& s, WorkerState& sh, double timeout_s,
                          TrialRow& row);

}  // namespace dfccl::harness
