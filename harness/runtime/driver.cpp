#include "driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <thread>

#include "plan/rank_program.h"
#include "plan/replay.h"
#include "runtime/aggregate.h"
#include "runtime/hosts.h"
#include "runtime/liveness.h"
#include "runtime/run_stop.h"
#include "runtime/stats.h"
#include "runtime/watchdog.h"
#include "runtime/worker.h"

namespace dfccl::harness {
namespace {

// The stall limit is run.timeout, but at least this (a starved monitor thread must not look stopped).
constexpr double kMinStallLimitS = 2.0;

// One case: a fixed step (sweep, [[step]]) or a mix drawn per trial, out of place or in place.
struct Case {
  int index = 0;
  std::vector<StepEntry> step;  // empty for a mix
  bool in_place = false;        // every entry of the step (a mix's too) runs in place
};

// The variants run.in_place asks for, in nccl-tests' order: out of place, then in place.
std::vector<bool> in_place_variants(InPlace mode) {
  switch (mode) {
    case InPlace::Both: return {false, true};
    case InPlace::Only: return {true};
    default: return {false};
  }
}

// The steps of a workload: a replay's one step, one per collective and size of a sweep, the [[step]] entries, or
// one mix (its step drawn per trial).
std::vector<std::vector<StepEntry>> make_steps(const Workload& w, const replay::Replay* rp) {
  std::vector<std::vector<StepEntry>> steps;
  if (rp) {
    steps.push_back(rp->step());
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
        steps.push_back({e});
      }
  } else if (w.kind == Workload::Kind::Step) {
    steps.push_back(w.step);
  } else {
    steps.emplace_back();
  }
  return steps;
}

// The cases: each step in each variant of run.in_place, the variants of a step next to each other. Entries without
// an in-place variant (Collective::out_of_place_only) run out of place in an in-place case; a case of nothing else
// (a sweep of one) has no in-place variant.
std::vector<Case> make_cases(const Workload& w, const replay::Replay* rp) {
  std::vector<Case> cases;
  for (const auto& step : make_steps(w, rp)) {
    const bool any_in_place = step.empty() || std::any_of(step.begin(), step.end(), [](const StepEntry& e) {
                                return !e.coll->out_of_place_only;
                              });
    for (bool in_place : in_place_variants(w.in_place)) {
      if (in_place && !any_in_place) continue;
      Case c{static_cast<int>(cases.size()), step, in_place};
      for (StepEntry& e : c.step) e.in_place = in_place && !e.coll->out_of_place_only;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// One run of a workload on every rank (every method is MPI-collective over MPI_COMM_WORLD).
// Rank 0's view of report_hops's gather: per rank r, lines "group\tpeer\ttransport" of its hops; hosts: per rank.
std::vector<HopRow> parse_hops(const std::vector<std::string>& per_rank, const std::vector<std::string>& hosts) {
  std::vector<HopRow> rows;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    std::istringstream lines(per_rank[r]);
    for (std::string line; std::getline(lines, line);) {
      HopRow h;
      std::istringstream fields(line);
      std::string peer;
      std::getline(fields, h.group, '\t');
      std::getline(fields, peer, '\t');
      std::getline(fields, h.transport);
      h.rank = static_cast<int64_t>(r);
      h.peer = std::stoll(peer);
      h.host = hosts.at(r);
      h.peer_host = h.peer >= 0 ? hosts.at(static_cast<size_t>(h.peer)) : "";
      rows.push_back(std::move(h));
    }
  }
  return rows;
}

class Campaign {
 public:
  Campaign(const Workload& w, MpiWorld& world, Writer& writer) : w_(w), world_(world), writer_(writer) {}

  // Runs every backend in turn; returns the counts over all of them.
  // A RunStopped (a signal, a stalled rank) ends the run: what finished is recorded, and it propagates.
  DriverResult run() {
    if (w_.kind == Workload::Kind::Replay) make_replay_comms();
    for (const auto& name : w_.backends) run_backend(name);
    for (auto& s : replay_slots_)
      if (s.mpi != MPI_COMM_NULL) MPI_Comm_free(&s.mpi);
    replay_slots_.clear();
    return result_;
  }

  const DriverResult& result() const { return result_; }

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
  // One backend: created, its communicators built, every case run, its summary written. A backend that cannot be
  // created or cannot build its communicators has every trial skipped; one left with a stuck worker is never
  // destroyed.
  void run_backend(const std::string& name) {
    const auto t0 = Clock::now();
    std::unique_ptr<Backend> b;
    try {
      run_backend(name, t0, b);
    } catch (const RunStopped&) {
      // The peers may be stopped or gone: the backend is never destroyed (its teardown could wait for them), and
      // the summary of what finished is written without any MPI call.
      (void)b.release();
      result_.stuck_worker = true;
      if (backend_begun_) finish_backend(t0);
      throw;
    }
  }

  void run_backend(const std::string& name, Clock::time_point t0, std::unique_ptr<Backend>& b) {
    backend_begun_ = false;
    backend_t0_ = t0;
    mode_.clear();
    engine_.clear();
    BackendContext ctx{world_.rank, world_.size, world_.local_rank, world_.local_size, &w_};
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
      backend_begun_ = true;
      summary_.skipped = total_trials_;
      finish_backend(t0);
      return;
    }
    writer_.begin_backend(b->info());
    backend_begun_ = true;
    mode_ = b->info().mode;

    if (!create_comms(*b)) {
      summary_.failed = 0;
      summary_.skipped = total_trials_;
      finish_backend(t0);
      return;
    }
    report_hops(*b);

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

  // The running backend's summary from its counts so far: trials, rate and interval, mean busbw, wall time.
  BackendSummary summary_now(Clock::time_point t0) const {
    BackendSummary s = summary_;
    s.trials = s.completed + s.deadlocked + s.failed + s.stalled + s.skipped;
    const int64_t ran = s.trials - s.skipped;
    s.deadlock_rate = ran ? static_cast<double>(s.deadlocked) / static_cast<double>(ran) : 0.0;
    const Interval ci = wilson_interval(s.deadlocked, ran);
    s.ci_low = ci.low;
    s.ci_high = ci.high;
    double sum = 0;
    int n = 0;
    for (double v : busbw_)
      if (!std::isnan(v)) sum += v, ++n;
    s.busbw_mean_GBs = n ? sum / n : kNaN;
    s.wall_s = seconds_since(t0);
    s.engine = engine_;
    return s;
  }

  // Completes the backend's summary, adds it to the result and writes it. No MPI call (also called on a RunStopped).
  void finish_backend(Clock::time_point t0) {
    const BackendSummary s = summary_now(t0);
    busbw_.clear();
    backend_begun_ = false;
    add_backend(result_, s, mode_ == "preemptive");
    writer_.end_backend(s);
  }

  // The communicators the workload uses: a replay's groups, else the group kinds it names (MPI_COMM_NULL for the
  // others).
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

  // Builds the backend's communicators. On failure (on any rank) writes a failed trial naming the error, aborts what
  // was built, and returns false on every rank.
  bool create_comms(Backend& b) {
    std::string error;
    try {
      b.create_comms(used_slots());
      if (engine_.empty()) engine_ = b.engine_settings();
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
        b.abort_comms();  // gets rid of the communicators this rank did create
      } catch (const std::exception& e) {
        fmt::print(stderr, "dfccl-harness: rank {}: aborting after a failed creation: {}\n", world_.rank, e.what());
      }
      return false;
    }
    return true;
  }

  // After the backend's communicators exist (collective over MPI_COMM_WORLD): every rank's ring hops, with the
  // hosts of both ends, to the writers (rank 0), when the backend reports any.
  void report_hops(const Backend& b) {
    std::string mine;
    for (const HopRow& h : b.hops()) mine += fmt::format("{}\t{}\t{}\n", h.group, h.peer, h.transport);
    const std::vector<HopRow> rows = parse_hops(gather_strings(mine, MPI_COMM_WORLD), world_.hosts);
    if (!rows.empty()) writer_.add_hops(rows);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // How this rank runs each entry of a step: its communicator, count, buffers and data seed (a function of the run's
  // seed, the case, the mix generation, the entry and the group).
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
      program::assign_roles(e, world_.memberships[static_cast<int>(GroupKind::Pp)].rank, p);
      p.in_place = e.in_place;
      p.data_seed = program::Rng::seed_of({w_.seed, 0xDA7A, static_cast<uint64_t>(case_index), generation,
                                           static_cast<uint64_t>(i), group_key[0], group_key[1]});
      plans.push_back(p);
    }
    return plans;
  }

  // Fills the send buffers with their exact-check data and hands them to the backend. Returns false on every rank,
  // with the agreed error, when any rank fails.
  bool prepare(Backend& b, const std::vector<EntryPlan>& plans, std::string& error) {
    std::string local;
    try {
      std::vector<std::vector<char>> data(plans.size());
      for (size_t i = 0; i < plans.size(); ++i) {
        const EntryPlan& p = plans[i];
        if (p.slot < 0) continue;
        data[i].resize(p.send_elems * type_size(p.dtype));
        if (p.send_elems > 0)
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

  // Every trial of a case (a mix draws a new step, and new buffers, per generation), then the case's rows.
  void run_case(Backend& b, const Case& c, Clock::time_point backend_t0) {
    CaseAggregate agg(w_, replay_.get(), world_.size);
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
        for (StepEntry& e : step) e.in_place = c.in_place && !e.coll->out_of_place_only;
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
      run_trial(b, step, plans, row, agg);
      report_trial(row, backend_t0);
    }

    for (const CaseRow& r : agg.rows()) {
      writer_.add_case(r);
      busbw_.push_back(r.busbw_GBs);  // NaN where a row has none: summary_now leaves it out
    }
    writer_.checkpoint(summary_now(backend_t0));
  }

  // Writes a trial's row and the progress of the backend.
  void report_trial(const TrialRow& row, Clock::time_point backend_t0) {
    writer_.add_trial(row);
    writer_.checkpoint(summary_now(backend_t0));
    ++done_trials_;
    Progress p{summary_.backend,    done_trials_,    total_trials_,  summary_.completed,
               summary_.deadlocked, summary_.failed, summary_.wrong, seconds_since(backend_t0),
               w_.trials > 1};
    writer_.progress(p);
  }

  // A trial the watchdog stopped (failed, deadlocked): diagnosed, aborted, recorded; the communicators rebuilt.
  void stop_stopped_trial(Backend& b, WorkerState& sh, std::thread& worker, const WatchVerdict& verdict,
                          TrialRow& row) {
    if (w_.diagnose) diagnose_trial(b, sh, static_cast<int>(row.trial), world_);
    const StopOutcome stop = stop_trial(b, sh, worker);
    record_stopped_trial(verdict, stop, sh, w_.timeout_s, row);
    ++(row.status == "failed" ? summary_.failed : summary_.deadlocked);
    if (stop.stuck || !create_comms(b)) broken_ = true;
  }

  // A trial ended by a stalled rank (RunStopped with the ranks): its row, written; the run ends after it.
  void record_stalled_trial(const RunStopped& e, Clock::time_point t0, TrialRow& row) {
    row.status = "stalled";
    row.elapsed_s = seconds_since(t0);
    row.ranks = fmt::format("{}", fmt::join(e.stalled_ranks, ","));
    std::string what = e.what();
    row.message = what.starts_with("stalled: ") ? what.substr(9) : what;
    row.preemptions = row.daemon_launches = -1;
    summary_.stalled++;
    report_trial(row, backend_t0_);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // One trial: the worker runs this rank's programs while the watchdog watches; then either the stopped trial is
  // recorded (and the communicators rebuilt for the next one), or the completed one is reduced, verified and added.
  void run_trial(Backend& b, const std::vector<StepEntry>& step, const std::vector<EntryPlan>& plans, TrialRow& row,
                 CaseAggregate& agg) {
    const int iterations = w_.warmup + w_.iterations + (w_.check ? 1 : 0);
    auto sh = std::make_shared<WorkerState>();
    sh->step = step;
    sh->plans = plans;
    const EngineCounters before = read_counters(b, world_.rank);
    const Clock::time_point entered = Clock::now();
    std::thread worker;
    // A rank that stops responding anywhere in the trial (its start barrier, the run, the results' reductions)
    // ends it as stalled, naming the rank; the run ends after it.
    try {
      gentle_barrier(MPI_COMM_WORLD);
      WorkerJob job{
          &w_,        world_.rank,  static_cast<uint64_t>(row.trial) + (static_cast<uint64_t>(row.case_index) << 32),
          iterations, std::nullopt, Clock::now()};
      if (replay_) job.replayed = replay_->program(world_.rank, replay_->scenario_trial(row.trial));
      const Clock::time_point t0 = job.t0;  // the watchdog's clock starts once every rank is here
      worker = start_worker(b, sh, std::move(job));
      const WatchVerdict verdict = watch_trial(*sh, w_.timeout_s, t0);
      row.elapsed_s = verdict.decided_s;
      if (verdict.stopped()) {
        stop_stopped_trial(b, *sh, worker, verdict, row);
        return;
      }
      worker.join();
      record_completed_counters(*sh, before, read_counters(b, world_.rank), row);
      const TimingMatrix times(sh->timings, iterations, step.size());
      const EntryResults results = verify_entries(b, plans, sh->timings, w_.check);
      if (!results.error.empty()) row.message = "verification: " + results.error;
      agg.add_trial(step, plans, times, results, row);
    } catch (const RunStopped& e) {
      if (worker.joinable()) worker.detach();  // it may be blocked on a stopped peer: it ends with the process
      if (!e.stalled_ranks.empty()) record_stalled_trial(e, entered, row);
      throw;
    }
    row.status = "completed";
    summary_.completed++;
    summary_.wrong += row.wrong;
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
  bool backend_begun_ = false;      // begin_backend was written and end_backend not yet
  std::string engine_;              // the running backend's engine settings (Backend::engine_settings), once known
  std::string mode_;                // the running backend's mode (preemptive, blocking, nccl ...)
  Clock::time_point backend_t0_{};  // the running backend's start
};

}  // namespace

void add_backend(DriverResult& r, const BackendSummary& s, bool preemptive) {
  r.completed += s.completed;
  r.deadlocked += s.deadlocked;
  if (preemptive) r.deadlocked_preemptive += s.deadlocked;
  r.failed += s.failed;
  r.stalled += s.stalled;
  r.skipped += s.skipped;
  r.wrong += s.wrong;
}

DriverResult run_campaign(const Workload& w, MpiWorld& world, Writer& writer) {
  const auto hosts = unique_hosts(world.hosts);
  const auto host = std::find(hosts.begin(), hosts.end(), world.hosts.at(static_cast<size_t>(world.rank)));
  liveness::start(MPI_COMM_WORLD, std::max(w.timeout_s, kMinStallLimitS), static_cast<int>(host - hosts.begin()));
  DriverResult r = Campaign(w, world, writer).run();
  liveness::stop();
  return r;
}

}  // namespace dfccl::harness
