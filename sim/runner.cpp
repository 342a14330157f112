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

std::vector<SettingResult> run_models(const Scenario& scenario, const std::vector<ModelSpec>& models,
                                      const RunOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const int64_t n = opt.trials;
  const size_t nm = models.size();
  int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));

  std::vector<SettingResult> res(nm);
  std::vector<std::vector<int32_t>> stuck(nm, std::vector<int32_t>(n, 0));
  for (auto& r : res) {
    r.trials = n;
    r.deadlocked.assign(n, 0);
    r.completed.assign(n, 0);
  }
  std::vector<double> model_cpu(nm, 0.0);
  double generation_cpu = 0.0;

  std::atomic<int64_t> next{0}, done{0}, deadlocks{0};
  std::vector<std::atomic<int64_t>> best(nm);  // per model: lowest deadlocked trial whose cycle is stored
  for (auto& b : best) b = INT64_MAX;
  std::mutex mu;
  std::exception_ptr error;

  auto worker = [&](int id) {
    try {
      Engine engine(scenario);
      Programs programs;
      std::vector<double> my_model(nm, 0.0);
      double my_generation = 0.0;
      auto last = clock::now();
      for (;;) {
        const int64_t t = next.fetch_add(1, std::memory_order_relaxed);
        if (t >= n) break;
        auto a = clock::now();
        scenario.programs(opt.first_trial + static_cast<uint64_t>(t), programs);
        auto b = clock::now();
        my_generation += std::chrono::duration<double>(b - a).count();
        for (size_t mi = 0; mi < nm; ++mi) {
          a = b;
          const bool want_cycle = opt.verify_cycles || t < best[mi].load(std::memory_order_relaxed);
          Outcome o = engine.run(programs, models[mi], want_cycle);
          b = clock::now();
          my_model[mi] += std::chrono::duration<double>(b - a).count();
          res[mi].deadlocked[t] = o.deadlock;
          res[mi].completed[t] = o.completed;
          stuck[mi][t] = o.stuck_ranks;
          if (!o.deadlock) continue;
          deadlocks.fetch_add(1, std::memory_order_relaxed);
          if (want_cycle && !o.cycle)
            throw std::logic_error("trial " + std::to_string(opt.first_trial + t) + ", model " + models[mi].name() +
                                   ": stuck but the wait-for graph has no cycle (simulator bug)");
          std::lock_guard lock(mu);
          if (t < best[mi].load()) {
            best[mi] = t;
            res[mi].first_cycle = o.cycle->describe(scenario, opt.cycle_hops);
            res[mi].first_cycle_length = static_cast<int>(o.cycle->edges.size());
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
      std::lock_guard lock(mu);
      for (size_t mi = 0; mi < nm; ++mi) model_cpu[mi] += my_model[mi];
      generation_cpu += my_generation;
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

  const double wall = std::chrono::duration<double>(clock::now() - t0).count();
  const double per_trial = static_cast<double>(scenario.num_collectives());
  for (size_t mi = 0; mi < nm; ++mi) {
    auto& r = res[mi];
    double completed_fraction = 0.0, stuck_sum = 0.0;
    for (int64_t t = 0; t < n; ++t) {
      r.deadlocks += r.deadlocked[t];
      completed_fraction += static_cast<double>(r.completed[t]) / per_trial;
      if (r.deadlocked[t]) stuck_sum += stuck[mi][t];
    }
    r.first_deadlock_trial = r.deadlocks ? static_cast<int64_t>(opt.first_trial) + best[mi].load() : -1;
    r.rate = n ? static_cast<double>(r.deadlocks) / static_cast<double>(n) : 0.0;
    r.ci = wilson(r.deadlocks, n);
    r.mean_completed_fraction = n ? completed_fraction / static_cast<double>(n) : 1.0;
    r.mean_stuck_ranks = r.deadlocks ? stuck_sum / static_cast<double>(r.deadlocks) : 0.0;
    r.submissions = scenario.num_submissions() * n;
    r.seconds = wall;
    r.model_thread_seconds = model_cpu[mi];
    r.generation_thread_seconds = generation_cpu;
  }
  return res;
}

}  // namespace dfccl::sim
