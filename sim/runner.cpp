#include "runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace dfccl::sim {

Interval wilson(int64_t k, int64_t n, double z) {
  if (n <= 0) return {0.0, 1.0};
  const double nn = static_cast<double>(n), p = static_cast<double>(k) / nn, z2 = z * z;
  const double denom = 1.0 + z2 / nn;
  const double center = (p + z2 / (2.0 * nn)) / denom;
  const double half = z * std::sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn)) / denom;
  Interval ci{std::max(0.0, center - half), std::min(1.0, center + half)};
  if (k == 0) ci.lo = 0.0;
  if (k == n) ci.hi = 1.0;
  return ci;
}

SettingResult run_setting(const Scenario& scenario, ModelSpec model, const RunOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const int64_t n = opt.trials;
  int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));

  SettingResult res;
  res.trials = n;
  res.deadlocked.assign(n, 0);
  res.completed.assign(n, 0);
  std::vector<int32_t> stuck(n, 0);

  std::atomic<int64_t> next{0}, done{0}, deadlocks{0};
  std::atomic<int64_t> best{INT64_MAX};  // lowest deadlocked trial whose cycle is stored
  std::mutex mu;
  std::exception_ptr error;

  auto worker = [&](int id) {
    try {
      Engine engine(scenario);
      Programs programs;
      auto last = clock::now();
      for (;;) {
        const int64_t t = next.fetch_add(1, std::memory_order_relaxed);
        if (t >= n) break;
        scenario.programs(opt.first_trial + static_cast<uint64_t>(t), programs);
        const bool want_cycle = opt.verify_cycles || t < best.load(std::memory_order_relaxed);
        Outcome o = engine.run(programs, model, want_cycle);
        res.deadlocked[t] = o.deadlock;
        res.completed[t] = o.completed;
        stuck[t] = o.stuck_ranks;
        if (o.deadlock) {
          deadlocks.fetch_add(1, std::memory_order_relaxed);
          if (want_cycle && !o.cycle)
            throw std::logic_error("trial " + std::to_string(opt.first_trial + t) +
                                   " is stuck but its wait-for graph has no cycle (simulator bug)");
          std::lock_guard lock(mu);
          if (t < best.load()) {
            best = t;
            res.first_cycle = o.cycle->describe(scenario, opt.cycle_hops);
            res.first_cycle_length = static_cast<int>(o.cycle->edges.size());
          }
        }
        const int64_t d = done.fetch_add(1, std::memory_order_relaxed) + 1;
        if (id == 0 && opt.progress) {
          const auto now = clock::now();
          if (now - last > std::chrono::seconds(5)) {
            last = now;
            opt.progress(d, deadlocks.load(std::memory_order_relaxed));
          }
        }
      }
    } catch (...) {
      std::lock_guard lock(mu);
      if (!error) error = std::current_exception();
      next.store(n);  // stop the others
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker, i);
  worker(0);
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);

  double completed_fraction = 0.0, stuck_sum = 0.0;
  const double per_trial = static_cast<double>(scenario.num_collectives());
  for (int64_t t = 0; t < n; ++t) {
    res.deadlocks += res.deadlocked[t];
    completed_fraction += static_cast<double>(res.completed[t]) / per_trial;
    if (res.deadlocked[t]) stuck_sum += stuck[t];
  }
  res.first_deadlock_trial = res.deadlocks ? static_cast<int64_t>(opt.first_trial) + best.load() : -1;
  res.rate = n ? static_cast<double>(res.deadlocks) / static_cast<double>(n) : 0.0;
  res.ci = wilson(res.deadlocks, n);
  res.mean_completed_fraction = n ? completed_fraction / static_cast<double>(n) : 1.0;
  res.mean_stuck_ranks = res.deadlocks ? stuck_sum / static_cast<double>(res.deadlocks) : 0.0;
  res.submissions = scenario.num_submissions() * n;
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

}  // namespace dfccl::sim
