// Runs the trials of one setting on several threads; results do not depend on the number of threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model.h"
#include "scenario.h"

namespace dfccl::sim {

// Wilson score interval for k successes in n trials (z = 1.959964 for 95%). n == 0 gives [0, 1].
struct Interval {
  double lo = 0.0, hi = 1.0;
};
Interval wilson(int64_t k, int64_t n, double z = 1.959963984540054);

struct SettingResult {
  int64_t trials = 0;
  int64_t deadlocks = 0;
  double rate = 0.0;
  Interval ci;
  int64_t first_deadlock_trial = -1;  // lowest trial index that deadlocked
  std::string first_cycle;            // its cycle, described (empty when none)
  int first_cycle_length = 0;
  double mean_completed_fraction = 1.0;  // collectives completed / collectives per trial, over all trials
  double mean_stuck_ranks = 0.0;         // over deadlocked trials
  double seconds = 0.0;                  // wall time of the batch (the models run on the same programs together)
  // Time the worker threads spent in this model's simulation and in generating the batch's programs (shared by the
  // batch's models), summed over threads, by a monotonic clock: it includes time a thread was descheduled.
  double model_thread_seconds = 0.0;
  double generation_thread_seconds = 0.0;
  int64_t submissions = 0;  // submissions (rank, collective pairs) generated over all trials
  // Per trial (index = trial): 1 if deadlocked; completed collectives.
  std::vector<uint8_t> deadlocked;
  std::vector<int64_t> completed;
};

struct RunOptions {
  int64_t trials = 1000;
  uint64_t first_trial = 0;      // trial indices first_trial .. first_trial + trials - 1
  int threads = 0;               // 0: std::thread::hardware_concurrency()
  bool verify_cycles = false;    // search a cycle in every deadlocked trial and abort if none is found
  size_t cycle_hops = SIZE_MAX;  // hops shown in first_cycle
  // Called from time to time from one worker with (trials done, deadlocks so far); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

// Runs every model on the same programs: each trial's programs are generated once. One result per model.
std::vector<SettingResult> run_models(const Scenario& scenario, const std::vector<ModelSpec>& models,
                                      const RunOptions& options);
inline SettingResult run_setting(const Scenario& scenario, ModelSpec model, const RunOptions& options) {
  return run_models(scenario, {model}, options).front();
}

}  // namespace dfccl::sim
