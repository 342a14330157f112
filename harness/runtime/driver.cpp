#include "driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "replay/replay.h"
#include "program/rank_program.h"
#include "stats/stats.h"

namespace dfccl::harness {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One case: a fixed step (sweep, [[step]]) or a mix drawn per trial.
struct Case {
  int index = 0;
  std::vector<StepEntry> step;  // empty for a mix
};

std::vector<Case> make_cases(const Workload& w, const replay::Replay* rp) {
  std::vector<Case> cases;
  if (rp) {
    cases.push_back(Case{0, rp->step()});
  } else if (w.kind == Workload::Kind::Sweep) {
    for (const Collective* c : w.sweep_collectives)
      for (uint64_t bytes : w.sizes()) {
        StepEntry e;
        e.coll = c;
        e.group = w.sweep_group;
        e.bytes = bytes;
        e.dtype = w.dtype;
        e.op = w.op;
        e.root = w.root;
        e.priority = w.priority;
        cases.push_back(Case{static_cast<int>(cases.size()), {e}});
      }
  } else if (w.kind == Workload::Kind::Step) {
    cases.push_back(Case{0, w.step});
  } else {
    cases.push_back(Case{0, {}});
  }
  return cases;
}

// Statistics of one row, accumulated over trials.
struct Acc {
  CaseRow row;  // identity fields
  std::vector<double> times, e2e, core;
  int64_t wrong = 0, preemptions = 0;
  bool checked = false;
};

class Campaign {
 public:
  Campaign(const Workload& w, MpiWorld& world, Writer& writer) : w_(w), world_(world), writer_(writer) {}

  DriverResult run() {
    if (w_.kind == Workload::Kind::Replay) make_replay_comms();
    for (const auto& name : w_.backends) run_backend(name);
    for (auto& s : replay_slots_)
      if (s.mpi != MPI_COMM_NULL) MPI_Comm_free(&s.mpi);
    replay_slots_.clear();
    return result_;
  }

 private:
  // A replay: the scenario, and one MPI communicator per group of its layout (MPI_COMM_NULL where this rank is not a
  // member), ordered by world rank as the group's members are.
  void make_replay_comms() {
    replay_ = std::make_unique<replay::Replay>(w_);
    for (int g = 0; g < replay_->num_groups(); ++g) {
      const bool member = replay_->rank_in_group(g, world_.rank) >= 0;
      CommSlot slot;
      MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, world_.rank, &slot.mpi);
      if (slot.mpi != MPI_COMM_NULL) {
        MPI_Comm_rank(slot.mpi, &slot.rank);
        MPI_Comm_size(slot.mpi, &slot.size);
      }
      slot.name = replay_->group_name(g);
      replay_slots_.push_back(slot);
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  void run_backend(const std::string& name) {
    auto t0 = Clock::now();
    BackendContext ctx{world_.rank, world_.size, world_.local_rank, world_.local_size, &w_};
    std::unique_ptr<Backend> b;
    std::string error;
    try {
      b = make_backend(name, ctx);
    } catch (const std::exception& e) {
      error = e.what();
    }
    error = agree_error(error);
    cases_ = make_cases(w_, replay_.get());
    std::erase_if(cases_, [&](const Case& c) {  // sizes too small for one element per rank (nccl-tests' count 0)
      return std::any_of(c.step.begin(), c.step.end(), [&](const StepEntry& e) {
        if (e.sim_group >= 0) return false;  // a replay: checked when the workload was read (sim.bytes)
        int n = world_.memberships[static_cast<int>(e.group)].size;
        return e.coll->count_from_bytes(e.bytes, n, type_size(e.dtype)) == 0;
      });
    });
    total_trials_ = static_cast<int64_t>(cases_.size()) * w_.trials;
    summary_ = BackendSummary{};
    summary_.backend = name;
    summary_.workload = w_.name;
    done_trials_ = 0;
    broken_ = false;
    if (!error.empty()) {
      b.reset();
      BackendInfo info{name, "", "", "", "", false, error};
      writer_.begin_backend(info);
      summary_.skipped = total_trials_;
      finish_backend(t0);
      return;
    }
    writer_.begin_backend(b->info());

    if (!create_comms(*b)) {
      summary_.failed = 0;
      summary_.skipped = total_trials_;
      finish_backend(t0);
      return;
    }

    for (const Case& c : cases_) run_case(*b, c, t0);

    if (!broken_) {
      b->destroy_comms();
    }
    finish_backend(t0);
    if (broken_) {
      result_.stuck_worker = true;
      (void)b.release();  // a worker may still be inside it: never destroy it
    }
  }

  void finish_backend(Clock::time_point t0) {
    BackendSummary& s = summary_;
    s.trials = s.completed + s.deadlocked + s.failed + s.skipped;
    int64_t ran = s.completed + s.deadlocked + s.failed;
    s.deadlock_rate = ran ? static_cast<double>(s.deadlocked) / ran : 0.0;
    Interval ci = wilson_interval(s.deadlocked, ran);
    s.ci_low = ci.low;
    s.ci_high = ci.high;
    double sum = 0;
    int n = 0;
    for (double v : busbw_) if (!std::isnan(v)) sum += v, ++n;
    s.busbw_mean_GBs = n ? sum / n : kNaN;
    busbw_.clear();
    s.wall_s = seconds_since(t0);
    result_.deadlocked += s.deadlocked;
    result_.failed += s.failed;
    result_.wrong += s.wrong;
    writer_.end_backend(s);
  }

  // The same error string on every rank ("" if none): the first failing rank's.
  std::string agree_error(const std::string& local) {
    int who = local.empty() ? INT_MAX : world_.rank;
    gentle_allreduce(&who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (who == INT_MAX) return "";
    std::string msg = bcast_string(local, who, MPI_COMM_WORLD);
    return world_.size > 1 ? fmt::format("rank {}: {}", who, msg) : msg;
  }

  std::vector<CommSlot> used_slots() const {
    if (replay_) return replay_slots_;  // one per group of the scenario's layout
    std::vector<bool> used(kNumGroupKinds, false);
    if (w_.kind == Workload::Kind::Sweep) used[static_cast<int>(w_.sweep_group)] = true;
    for (const auto& e : w_.step) used[static_cast<int>(e.group)] = true;
    if (w_.kind == Workload::Kind::Mix)
      for (GroupKind g : w_.mix_groups) used[static_cast<int>(g)] = true;
    std::vector<CommSlot> slots = world_.slots;
    for (int k = 0; k < kNumGroupKinds; ++k)
      if (!used[k]) slots[k].mpi = MPI_COMM_NULL;
    return slots;
  }

  bool create_comms(Backend& b) {
    std::string error;
    try {
      b.create_comms(used_slots());
    } catch (const std::exception& e) {
      error = e.what();
    }
    error = agree_error(error);
    if (!error.empty()) {
      TrialRow t;
      t.status = "failed";
      t.message = "creating communicators: " + error;
      writer_.add_trial(t);
      try {
        b.abort_comms();
      } catch (...) {
      }
      return false;
    }
    return true;
  }

  // ---------------------------------------------------------------------------------------------------------------
  std::vector<EntryPlan> make_plans(const std::vector<StepEntry>& step, int case_index, uint64_t generation) {
    std::vector<EntryPlan> plans;
    for (size_t i = 0; i < step.size(); ++i) {
      const StepEntry& e = step[i];
      EntryPlan p;
      p.entry = static_cast<int>(i);
      p.coll = e.coll;
      uint64_t group_key[2];
      if (e.sim_group >= 0) {  // a replay: the scenario's group; ranks outside it do not take part
        const int g = e.sim_group, r = replay_->rank_in_group(g, world_.rank);
        p.slot = r >= 0 ? g : -1;
        p.group_rank = std::max(r, 0);
        p.group_size = static_cast<int>(replay_->members(g).size());
        group_key[0] = 0x5EED;
        group_key[1] = static_cast<uint64_t>(g);
      } else {
        const Membership& m = world_.memberships[static_cast<int>(e.group)];
        p.slot = static_cast<int>(e.group);
        p.group_rank = m.rank;
        p.group_size = m.size;
        group_key[0] = static_cast<uint64_t>(m.kind);
        group_key[1] = static_cast<uint64_t>(m.color);
      }
      p.dtype = e.dtype;
      p.op = e.op;
      p.root = e.root % p.group_size;
      p.priority = e.priority;
      p.count = e.coll->count_from_bytes(e.bytes, p.group_size, type_size(e.dtype));
      p.send_elems = e.coll->send_elems(p.count, p.group_size);
      p.recv_elems = e.coll->recv_elems(p.count, p.group_size);
      p.data_seed = program::Rng::seed_of({w_.seed, 0xDA7A, static_cast<uint64_t>(case_index), generation,
                                            static_cast<uint64_t>(i), group_key[0], group_key[1]});
      plans.push_back(p);
    }
    return plans;
  }

  bool prepare(Backend& b, const std::vector<EntryPlan>& plans, std::string& error) {
    std::string local;
    try {
      std::vector<std::vector<char>> data(plans.size());
      for (size_t i = 0; i < plans.size(); ++i) {
        const EntryPlan& p = plans[i];
        if (p.slot < 0) continue;
        data[i].resize(p.send_elems * type_size(p.dtype));
        p.coll->fill_send(data[i].data(), p.count, p.group_size, p.group_rank, p.root,
                          verify_params(*p.coll, p.dtype, p.op, p.group_size, p.data_seed));
      }
      b.prepare(plans, data);
    } catch (const std::exception& e) {
      local = e.what();
    }
    error = agree_error(local);
    return error.empty();
  }

  void run_case(Backend& b, const Case& c, Clock::time_point backend_t0) {
    std::map<std::string, Acc> accs;
    std::vector<std::string> order;  // keys in first-seen order
    Acc step_acc;
    bool multi = false;
    std::vector<StepEntry> step;
    std::vector<EntryPlan> plans;
    bool prepared = false;
    uint64_t prepared_generation = UINT64_MAX;

    for (int trial = 0; trial < w_.trials; ++trial) {
      TrialRow row;
      row.case_index = c.index;
      row.trial = trial;
      if (replay_) {
        row.scenario_trial = static_cast<int64_t>(replay_->scenario_trial(trial));
        auto st = replay_->trial_stats(replay_->scenario_trial(trial));
        row.program_steps = st.steps;
        row.program_submissions = st.submissions;
        row.program_syncs = st.syncs;
        row.disordered_ranks = st.disordered_ranks;
      }
      if (broken_) {
        row.status = "skipped";
        row.message = "backend unusable after a worker could not be released";
        summary_.skipped++;
        report_trial(row, backend_t0);
        continue;
      }
      uint64_t generation = c.step.empty() && w_.mix_per_trial ? static_cast<uint64_t>(trial) : 0;
      if (!prepared || generation != prepared_generation) {
        step = c.step.empty() ? program::draw_mix(w_, generation) : c.step;
        plans = make_plans(step, c.index, generation);
        std::string error;
        if (!prepare(b, plans, error)) {
          row.status = "failed";
          row.message = "preparing buffers: " + error;
          summary_.failed++;
          report_trial(row, backend_t0);
          prepared = false;
          continue;
        }
        prepared = true;
        prepared_generation = generation;
      }
      multi = step.size() > 1;
      run_trial(b, step, plans, row, accs, order, step_acc);
      report_trial(row, backend_t0);
    }

    // Rows of the case.
    for (const auto& key : order) emit_row(accs[key], multi ? "e2e" : "iteration");
    if (multi && !step_acc.times.empty()) emit_row(step_acc, "step");
  }

  // run.diagnose: one line per rank on stderr, rank by rank, about a trial the watchdog is about to stop.
  void diagnose(Backend& b, int trial, bool done, int iteration, int op, int kind, int64_t executed) {
    std::string where = done           ? std::string("done")
                        : op == -3     ? std::string("finish (waiting for the last iteration)")
                        : op == -2     ? fmt::format("end of iteration {}", iteration)
                        : op < 0       ? std::string("starting")
                                       : fmt::format("iteration {}, operation {} ({})", iteration, op,
                                                     program::op_kind_name(static_cast<program::OpKind>(kind)));
    for (int round = 0; round < 2; ++round)
      for (int r = 0; r < world_.size; ++r) {
        if (r == world_.rank) {
          if (round == 0)
            fmt::print(stderr, "# diagnose trial {} rank {}: worker at {}; {} operations returned\n", trial, r, where,
                       executed);
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

  void report_trial(const TrialRow& row, Clock::time_point backend_t0) {
    writer_.add_trial(row);
    ++done_trials_;
    Progress p{summary_.backend, done_trials_, total_trials_, summary_.completed, summary_.deadlocked,
               summary_.failed, summary_.wrong, seconds_since(backend_t0), w_.trials > 1};
    writer_.progress(p);
  }

  std::string row_key(const StepEntry& e, size_t index) const {
    if (e.sim_group >= 0) return fmt::format("g{:08}", e.sim_group);  // a replay: one row per group
    if (w_.kind == Workload::Kind::Mix)
      return fmt::format("{}|{}|{}|{}", e.coll->name, group_name(e.group), e.bytes, e.priority);
    return fmt::format("{:08}", index);
  }

  // ---------------------------------------------------------------------------------------------------------------
  void run_trial(Backend& b, const std::vector<StepEntry>& step, const std::vector<EntryPlan>& plans, TrialRow& row,
                 std::map<std::string, Acc>& accs, std::vector<std::string>& order, Acc& step_acc) {
    const int iterations = w_.warmup + w_.iterations + (w_.check ? 1 : 0);
    // State shared with the worker, owned jointly: a worker that cannot be released outlives this call.
    struct Shared {
      std::atomic<bool> cancel{false};
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      std::string error;
      std::vector<IterationTiming> timings;
      std::atomic<int64_t> last_progress_ns{0};
      std::atomic<int64_t> executed{0};  // program operations returned from (submissions, synchronizations)
      // Where the worker is (run.diagnose): iteration, index of the operation in its program (-1: between
      // programs, -2: end of iteration, -3: finish), its kind.
      std::atomic<int> at_iteration{-1}, at_op{-1}, at_kind{-1};
      int64_t reordered = 0, syncs = 0;
      std::vector<StepEntry> step;
      std::vector<EntryPlan> plans;
    };
    auto sh = std::make_shared<Shared>();
    sh->step = step;
    sh->plans = plans;

    EngineCounters before{};
    try {
      before = b.counters();
    } catch (...) {
    }
    gentle_barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    const int rank = world_.rank;
    const uint64_t trial = static_cast<uint64_t>(row.trial) + (static_cast<uint64_t>(row.case_index) << 32);
    const Workload* wp = &w_;
    // A replay runs the scenario's program of this trial in every iteration.
    std::optional<replay::Replay::Program> replayed;
    if (replay_) replayed = replay_->program(rank, replay_->scenario_trial(row.trial));

    std::thread worker([sh, &b, wp, t0, rank, trial, iterations, replayed] {
      const Workload& w = *wp;
      auto progress = [sh, t0] {
        sh->last_progress_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
      };
      std::string err;
      try {
        b.set_progress_hook(progress);  // collectives seen complete while the worker waits are progress too
        b.worker_begin(sh->cancel);
        for (int it = 0; it < iterations; ++it) {
          if (w.check && it == iterations - 1) b.poison_outputs();
          std::vector<program::Op> prog;
          if (replayed) {
            prog = replayed->ops;
            if (replayed->disordered) ++sh->reordered;
          } else {
            prog = program::rank_program(sh->step, w, rank, trial, static_cast<uint64_t>(it));
            if (!program::in_step_order(prog)) ++sh->reordered;
          }
          b.start_iteration(it);
          sh->at_iteration = it;
          for (size_t k = 0; k < prog.size(); ++k) {
            const program::Op& op = prog[k];
            if (sh->cancel.load()) throw BackendError("cancelled by the watchdog");
            sh->at_op = static_cast<int>(k);
            sh->at_kind = static_cast<int>(op.kind);
            switch (op.kind) {
              case program::OpKind::Submit:
                if (sh->plans[op.entry].slot >= 0) b.submit(op.entry);
                break;
              case program::OpKind::DeviceSync: ++sh->syncs; b.device_sync(); break;
              case program::OpKind::HostAlloc: ++sh->syncs; b.host_alloc(op.alloc, w.host_alloc_bytes); break;
              case program::OpKind::CudaFree: ++sh->syncs; b.cuda_free(); break;
              case program::OpKind::LazyKernel: ++sh->syncs; b.lazy_kernel(); break;
              case program::OpKind::Compute: b.compute(w.compute_us); break;
              case program::OpKind::WaitAll: break;
            }
            sh->executed.fetch_add(1);
            progress();
          }
          sh->at_op = -2;
          b.end_iteration();
          progress();
        }
        sh->at_op = -3;
        auto timings = b.finish(sh->cancel);
        std::lock_guard lock(sh->mu);
        sh->timings = std::move(timings);
      } catch (const std::exception& e) {
        err = e.what();
      }
      std::lock_guard lock(sh->mu);
      sh->error = err;
      sh->done = true;
      sh->cv.notify_all();
    });

    // The watchdog: a trial is declared deadlocked once no rank has made progress (returned from a step of its
    // program) for run.timeout seconds while some rank is not done. A trial that is slow but still progressing (a
    // loaded machine) gets more time: its steps are finite, so it either completes or falls silent. Every rank waits,
    // then all agree over MPI on the worst state and on the time of the latest progress of any rank; the decision is
    // taken from these reduced values only, so that every rank takes the same one.
    bool finished = false;
    std::string error;
    double wait_s = w_.timeout_s, decided_s = 0, last = 0;
    bool any_timeout = false, any_error = false;
    while (true) {
      {
        std::unique_lock lock(sh->mu);
        finished = sh->cv.wait_for(lock, std::chrono::duration<double>(wait_s), [&] { return sh->done; });
        if (finished) error = sh->error;
      }
      // {still running, failed, latest progress, now}, each the maximum over ranks (seconds since the trial start).
      double state[4] = {finished ? 0.0 : 1.0, finished && !error.empty() ? 1.0 : 0.0,
                         static_cast<double>(sh->last_progress_ns.load()) * 1e-9, seconds_since(t0)};
      gentle_allreduce(state, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      any_timeout = state[0] != 0;
      any_error = state[1] != 0;
      last = state[2];
      decided_s = state[3];
      if (!any_timeout || any_error) break;
      const double silent = decided_s - last;
      if (silent >= w_.timeout_s - 1e-3) break;  // silent for run.timeout: deadlocked
      wait_s = std::max(w_.timeout_s - silent, 1e-3);
    }
    row.elapsed_s = decided_s;

    if (any_timeout || any_error) {
      if (w_.diagnose) diagnose(b, row.trial, sh->done, sh->at_iteration, sh->at_op, sh->at_kind, sh->executed);
      sh->cancel = true;
      std::string abort_error;
      try {
        b.abort_comms();  // releases a blocked worker on this rank; peers do the same
      } catch (const std::exception& e) {
        abort_error = e.what();
      }
      bool joined;
      {
        std::unique_lock lock(sh->mu);
        joined = abort_error.empty() && sh->cv.wait_for(lock, std::chrono::seconds(20), [&] { return sh->done; });
      }
      int stuck = joined ? 0 : 1;
      gentle_allreduce(&stuck, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      if (joined) worker.join();
      else worker.detach();  // cannot be released: the backend is unusable from now on
      if (any_error && !any_timeout) {
        row.status = "failed";
        summary_.failed++;
      } else {
        row.status = "deadlocked";
        row.detect_s = decided_s - last;
        summary_.deadlocked++;
      }
      row.message = agree_error(any_error ? error : "");
      if (row.message.empty() && any_timeout)
        row.message = fmt::format("no progress on any rank for run.timeout = {} s", w_.timeout_s);
      if (stuck) {
        broken_ = true;
        row.message += "; a worker could not be released after the abort";
        if (!abort_error.empty()) row.message += " (" + abort_error + ")";
      } else if (!create_comms(b)) {
        broken_ = true;
      }
      int64_t counts[3] = {joined ? sh->reordered : 0, joined ? sh->syncs : 0, sh->executed.load()};
      gentle_allreduce(counts, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      row.reordered = counts[0];
      row.syncs = counts[1];
      row.executed_steps = counts[2];
      row.preemptions = row.daemon_launches = -1;
      return;
    }
    worker.join();

    // Completed on every rank: engine counters, timings, verification.
    EngineCounters after{};
    try {
      after = b.counters();
    } catch (...) {
    }
    const std::vector<IterationTiming>& timings = sh->timings;
    int64_t counts[6] = {sh->reordered, sh->syncs, after.valid && before.valid ? after.preemptions - before.preemptions : 0,
                         after.valid && before.valid ? after.daemon_launches - before.daemon_launches : 0,
                         after.valid && before.valid ? 0 : 1, sh->executed.load()};
    gentle_allreduce(counts, 6, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    row.executed_steps = counts[5];
    row.status = "completed";
    summary_.completed++;
    row.reordered = counts[0];
    row.syncs = counts[1];
    row.preemptions = counts[4] ? -1 : counts[2];
    row.daemon_launches = counts[4] ? -1 : counts[3];

    const size_t E = step.size();
    const size_t width = 1 + 2 * E;
    std::vector<double> m(static_cast<size_t>(iterations) * width, -1.0);
    for (size_t it = 0; it < timings.size() && it < static_cast<size_t>(iterations); ++it) {
      auto put = [&](size_t k, double v) { m[it * width + k] = std::isnan(v) ? -1.0 : v; };
      put(0, timings[it].time_us);
      for (size_t e = 0; e < E && e < timings[it].entries.size(); ++e) {
        put(1 + e, timings[it].entries[e].e2e_us);
        put(1 + E + e, timings[it].entries[e].core_us);
      }
    }
    gentle_allreduce(m.data(), static_cast<int>(m.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    auto get = [&](size_t it, size_t k) { double v = m[it * width + k]; return v < 0 ? kNaN : v; };

    std::vector<int64_t> per_entry(2 * E, 0);  // wrong, preemptions
    for (size_t it = 0; it < timings.size(); ++it)
      for (size_t e = 0; e < E && e < timings[it].entries.size(); ++e) per_entry[E + e] += timings[it].entries[e].preemptions;
    std::string verify_error;
    if (w_.check) {
      try {
        for (size_t e = 0; e < E; ++e) {
          const EntryPlan& p = plans[e];
          if (p.slot < 0) continue;
          std::vector<char> out(std::max<size_t>(1, p.recv_elems * type_size(p.dtype)));
          b.download(static_cast<int>(e), out.data());
          per_entry[e] = p.coll->check_recv(out.data(), p.count, p.group_size, p.group_rank, p.root,
                                            verify_params(*p.coll, p.dtype, p.op, p.group_size, p.data_seed));
        }
      } catch (const std::exception& ex) {
        verify_error = ex.what();
      }
    }
    gentle_allreduce(per_entry.data(), static_cast<int>(per_entry.size()), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    verify_error = agree_error(verify_error);
    if (!verify_error.empty()) row.message = "verification: " + verify_error;

    // Accumulate (timed iterations only: after the warm-up, before the checked one). With batch timing each of them
    // has its batch's mean (equal on a rank, so the MAX over ranks is equal within a batch too); the untimed ones,
    // NaN, are left out here.
    const size_t first = static_cast<size_t>(w_.warmup), end_timed = first + static_cast<size_t>(w_.iterations);
    for (size_t e = 0; e < E; ++e) {
      std::string key = row_key(step[e], e);
      auto [it, inserted] = accs.try_emplace(key);
      Acc& a = it->second;
      if (inserted) {
        order.push_back(key);
        const EntryPlan& p = plans[e];
        const int sg = step[e].sim_group;
        a.row.entry = w_.kind == Workload::Kind::Mix || sg >= 0 ? -1 : static_cast<int64_t>(e);
        a.row.case_index = row.case_index;
        a.row.coll = std::string(step[e].coll->name);
        a.row.group = sg >= 0 ? replay_->group_kind(sg) : std::string(group_name(step[e].group));
        a.row.label = sg >= 0 ? replay_->group_name(sg) : step[e].label;
        a.row.dtype = std::string(type_name(p.dtype));
        a.row.op = step[e].coll->has_op ? std::string(op_name(p.op)) : "none";
        a.row.root = step[e].coll->has_root ? p.root : -1;
        a.row.priority = p.priority;
        a.row.nranks = p.group_size;
        a.row.count = static_cast<int64_t>(p.count);
        a.row.bytes = static_cast<int64_t>(p.coll->bytes_from_count(p.count, p.group_size, type_size(p.dtype)));
      }
      for (size_t i = first; i < end_timed && i < static_cast<size_t>(iterations); ++i) {
        a.times.push_back(E == 1 ? get(i, 0) : get(i, 1 + e));
        a.e2e.push_back(get(i, 1 + e));
        a.core.push_back(get(i, 1 + E + e));
      }
      if (w_.check) {
        a.wrong += per_entry[e];
        a.checked = true;
        row.wrong += per_entry[e];
      }
      a.preemptions += per_entry[E + e];
    }
    if (E > 1) {
      if (step_acc.row.coll.empty()) {
        step_acc.row.entry = -1;
        step_acc.row.case_index = row.case_index;
        step_acc.row.coll = "step";
        step_acc.row.group = "world";
        step_acc.row.dtype = std::string(type_name(w_.dtype));
        step_acc.row.op = std::string(op_name(w_.op));
        step_acc.row.root = -1;
        step_acc.row.nranks = world_.size;
        int64_t bytes = 0;
        for (const auto& e : step) bytes += static_cast<int64_t>(e.bytes);
        step_acc.row.bytes = bytes;
      }
      for (size_t i = first; i < end_timed && i < static_cast<size_t>(iterations); ++i) step_acc.times.push_back(get(i, 0));
      if (w_.check) {
        step_acc.wrong += row.wrong;
        step_acc.checked = true;
      }
    }
    summary_.wrong += row.wrong;
  }

  void emit_row(Acc& a, const char* time_kind) {
    CaseRow r = a.row;
    r.time_kind = time_kind;
    Summary t = summarize(a.times);
    r.samples = t.n;
    r.time_min_us = t.min;
    r.time_median_us = t.median;
    r.time_max_us = t.max;
    r.time_mean_us = t.mean;
    r.cv = t.cv;
    r.e2e_median_us = summarize(a.e2e).median;
    r.core_median_us = summarize(a.core).median;
    r.wrong = a.checked ? a.wrong : -1;
    r.preemptions = a.preemptions;
    r.times_us = a.times;
    if (t.n > 0 && t.median > 0) {
      r.algbw_GBs = static_cast<double>(r.bytes) / (t.median * 1e-6) / 1e9;
      if (r.coll != "step") {
        const Collective* c = find_collective(r.coll);
        r.busbw_GBs = r.algbw_GBs * c->busbw_factor(static_cast<int>(r.nranks));
        busbw_.push_back(r.busbw_GBs);
      }
    }
    writer_.add_case(r);
  }

  const Workload& w_;
  MpiWorld& world_;
  Writer& writer_;
  DriverResult result_;
  std::vector<Case> cases_;
  std::unique_ptr<replay::Replay> replay_;  // a replay workload's scenario
  std::vector<CommSlot> replay_slots_;      // its groups' MPI communicators
  BackendSummary summary_;
  std::vector<double> busbw_;
  int64_t total_trials_ = 0, done_trials_ = 0;
  bool broken_ = false;
};

}  // namespace

DriverResult run_campaign(const Workload& w, MpiWorld& world, Writer& writer) {
  return Campaign(w, world, writer).run();
}

}  // namespace dfccl::harness
