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

namespace {

using clock = std::chrono::steady_clock;

// What the worker threads of one run_models call share.
struct Shared {
  Shared(size_t nm, int64_t n) : res(nm), stuck(nm, std::vector<int32_t>(n, 0)), model_cpu(nm, 0.0), best(nm) {
    for (auto& r : res) {
      r.trials = n;
      r.deadlocked.assign(n, 0);
      r.completed.assign(n, 0);
    }
    for (auto& b : best) b = INT64_MAX;
  }
  std::vector<SettingResult> res;           // per model; trial t's entries are written by its worker only
  std::vector<std::vector<int32_t>> stuck;  // per model and trial: stuck ranks
  std::vector<double> model_cpu;            // per model: thread time in the model (under mu)
  double generation_cpu = 0.0;              // thread time generating programs (under mu)
  std::atomic<int64_t> next{0}, done{0}, deadlocks{0};
  std::vector<std::atomic<int64_t>> best;  // per model: lowest deadlocked trial whose cycle is stored
  std::mutex mu;
  std::exception_ptr error;  // the first worker's exception (under mu)
};

// Runs trial t under every model on programs generated once; records its outcomes and, for the lowest deadlocked
// trial of a model, its cycle. Adds the thread's time to my_generation and my_model.
void run_trial(const Scenario& scenario, const std::vector<ModelSpec>& models, const RunOptions& opt, Shared& sh,
               Engine& engine, Programs& programs, int64_t t, double& my_generation, std::vector<double>& my_model) {
  auto a = clock::now();
  scenario.programs(opt.first_trial + static_cast<uint64_t>(t), programs);
  auto b = clock::now();
  my_generation += std::chrono::duration<double>(b - a).count();
  for (size_t mi = 0; mi < models.size(); ++mi) {
    a = b;
    const bool want_cycle = opt.verify_cycles || t < sh.best[mi].load(std::memory_order_relaxed);
    Outcome o = engine.run(programs, models[mi], want_cycle);
    b = clock::now();
    my_model[mi] += std::chrono::duration<double>(b - a).count();
    sh.res[mi].deadlocked[t] = o.deadlock;
    sh.res[mi].completed[t] = o.completed;
    sh.stuck[mi][t] = o.stuck_ranks;
    if (!o.deadlock) continue;
    sh.deadlocks.fetch_add(1, std::memory_order_relaxed);
    if (want_cycle && !o.cycle)
      throw std::logic_error("trial " + std::to_string(opt.first_trial + t) + ", model " + models[mi].name() +
                             ": stuck but the wait-for graph has no cycle (simulator bug)");
    std::lock_guard lock(sh.mu);
    if (t < sh.best[mi].load()) {
      sh.best[mi] = t;
      sh.res[mi].first_cycle = o.cycle->describe(scenario, opt.cycle_hops);
      sh.res[mi].first_cycle_length = static_cast<int>(o.cycle->edges.size());
    }
  }
}

// One worker thread: takes trials until none is left (or another worker failed); worker 0 reports progress.
void worker(int id, const Scenario& scenario, const std::vector<ModelSpec>& models, const RunOptions& opt, Shared& sh) {
  const int64_t n = opt.trials;
  try {
    Engine engine(scenario);
    Programs programs;
    std::vector<double> my_model(models.size(), 0.0);
    double my_generation = 0.0;
    auto last = clock::now();
    for (;;) {
      const int64_t t = sh.next.fetch_add(1, std::memory_order_relaxed);
      if (t >= n) break;
      run_trial(scenario, models, opt, sh, engine, programs, t, my_generation, my_model);
      const int64_t d = sh.done.fetch_add(1, std::memory_order_relaxed) + 1;
      if (id == 0 && opt.progress) {
        const auto now = clock::now();
        if (now - last > std::chrono::seconds(5)) {
          last = now;
          opt.progress(d, sh.deadlocks.load(std::memory_order_relaxed));
        }
      }
    }
    std::lock_guard lock(sh.mu);
    for (size_t mi = 0; mi < models.size(); ++mi) sh.model_cpu[mi] += my_model[mi];
    sh.generation_cpu += my_generation;
  } catch (...) {
    std::lock_guard lock(sh.mu);
    if (!sh.error) sh.error = std::current_exception();
    sh.next.store(n);  // stop the others
  }
}

}  // namespace

std::vector<SettingResult> run_models(const Scenario& scenario, const std::vector<ModelSpec>& models,
                                      const RunOptions& opt) {
  const auto t0 = clock::now();
  const int64_t n = opt.trials;
  const size_t nm = models.size();
  int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));

  Shared sh(nm, n);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i)
    pool.emplace_back(worker, i, std::cref(scenario), std::cref(models), std::cref(opt), std::ref(sh));
  worker(0, scenario, models, opt, sh);
  for (auto& th : pool) th.join();
  if (sh.error) std::rethrow_exception(sh.error);

  const double wall = std::chrono::duration<double>(clock::now() - t0).count();
  const double per_trial = static_cast<double>(scenario.num_collectives());
  for (size_t mi = 0; mi < nm; ++mi) {
    auto& r = sh.res[mi];
    double completed_fraction = 0.0, stuck_sum = 0.0;
    for (int64_t t = 0; t < n; ++t) {
      r.deadlocks += r.deadlocked[t];
      completed_fraction += static_cast<double>(r.completed[t]) / per_trial;
      if (r.deadlocked[t]) stuck_sum += sh.stuck[mi][t];
    }
    r.first_deadlock_trial = r.deadlocks ? static_cast<int64_t>(opt.first_trial) + sh.best[mi].load() : -1;
    r.rate = n ? static_cast<double>(r.deadlocks) / static_cast<double>(n) : 0.0;
    r.ci = wilson(r.deadlocks, n);
    r.mean_completed_fraction = n ? completed_fraction / static_cast<double>(n) : 1.0;
    r.mean_stuck_ranks = r.deadlocks ? stuck_sum / static_cast<double>(r.deadlocks) : 0.0;
    r.submissions = scenario.num_submissions() * n;
    r.seconds = wall;
    r.model_thread_seconds = sh.model_cpu[mi];
    r.generation_thread_seconds = sh.generation_cpu;
  }
  return std::move(sh.res);
}

}  // namespace dfccl::sim
