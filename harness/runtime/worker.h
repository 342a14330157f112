// The worker of a trial: a thread that runs this rank's program of every iteration on a backend, while the main
// thread watches it (watchdog.h). The two share a WorkerState, owned jointly: a worker that cannot be released
// outlives the trial.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "config/workload.h"
#include "plan/replay.h"

namespace dfccl::harness {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct WorkerState {
  std::atomic<bool> cancel{false};  // set by the watchdog: the worker throws at its next operation or wait
  std::mutex mu;                    // guards done, error and timings
  std::condition_variable cv;       // notified once, when done is set
  bool done = false;
  std::string error;  // the worker's exception, "" if it finished normally
  std::vector<IterationTiming> timings;
  std::atomic<int64_t> last_progress_ns{0};  // since the trial's start: the latest operation or wait that returned
  std::atomic<int64_t> executed{0};          // program operations returned from (submissions, synchronizations)
  // Where the worker is (run.diagnose): iteration, index of the operation in its program (-1: between programs,
  // -2: end of iteration, -3: finish), its kind.
  std::atomic<int> at_iteration{-1}, at_op{-1}, at_kind{-1};
  int64_t reordered = 0, syncs = 0;  // read only once the worker is done
  std::vector<StepEntry> step;
  std::vector<EntryPlan> plans;
};

struct WorkerJob {
  const Workload* workload = nullptr;
  int rank = 0;
  uint64_t trial_key = 0;                           // (case << 32) + trial: seeds the rank programs
  int iterations = 0;                               // warm-up + timed + the checked one
  std::optional<replay::Replay::Program> replayed;  // a replay: this program in every iteration
  Clock::time_point t0;                             // the trial's start, which progress is measured from
};

// Starts the worker thread. It runs the job's iterations on b (the "worker" methods of Backend), reports progress
// in sh, then sets sh.done (with sh.error, or sh.timings on success) and notifies sh.cv. Never throws from the thread.
std::thread start_worker(Backend& b, std::shared_ptr<WorkerState> sh, WorkerJob job);

}  // namespace dfccl::harness
