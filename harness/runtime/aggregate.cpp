#include "aggregate.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/mpi_env.h"
#include "runtime/stats.h"

namespace dfccl::harness {

EngineCounters read_counters(Backend& b, int rank) {
  try {
    return b.counters();
  } catch (const std::exception& e) {
    fmt::print(stderr, "dfccl-harness: rank {}: engine counters not read: {}\n", rank, e.what());
    return EngineCounters{};
  }
}

void record_completed_counters(const WorkerState& sh, const EngineCounters& before, const EngineCounters& after,
                               TrialRow& row) {
  const bool valid = after.valid && before.valid;
  int64_t counts[6] = {sh.reordered,
                       sh.syncs,
                       valid ? after.preemptions - before.preemptions : 0,
                       valid ? after.daemon_launches - before.daemon_launches : 0,
                       valid ? 0 : 1,
                       sh.executed.load()};
  gentle_allreduce(counts, 6, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  row.executed_steps = counts[5];
  row.reordered = counts[0];
  row.syncs = counts[1];
  row.preemptions = counts[4] ? -1 : counts[2];
  row.daemon_launches = counts[4] ? -1 : counts[3];
}

TimingMatrix::TimingMatrix(const std::vector<IterationTiming>& local, int iterations, size_t entries)
    : entries_(entries), width_(1 + 2 * entries), m_(static_cast<size_t>(iterations) * width_, -1.0) {
  for (size_t it = 0; it < local.size() && it < static_cast<size_t>(iterations); ++it) {
    auto put = [&](size_t k, double v) { m_[it * width_ + k] = std::isnan(v) ? -1.0 : v; };
    put(0, local[it].time_us);
    for (size_t e = 0; e < entries && e < local[it].entries.size(); ++e) {
      put(1 + e, local[it].entries[e].e2e_us);
      put(1 + entries + e, local[it].entries[e].core_us);
    }
  }
  gentle_allreduce(m_.data(), static_cast<int>(m_.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

double TimingMatrix::get(size_t it, size_t k) const {
  const double v = m_[it * width_ + k];
  return v < 0 ? kNaN : v;
}

EntryResults verify_entries(Backend& b, const std::vector<EntryPlan>& plans,
                            const std::vector<IterationTiming>& timings, bool check) {
  const size_t E = plans.size();
  std::vector<int64_t> per_entry(2 * E, 0);  // wrong elements, then preemptions
  for (const IterationTiming& t : timings)
    for (size_t e = 0; e < E && e < t.entries.size(); ++e) per_entry[E + e] += t.entries[e].preemptions;
  std::string error;
  if (check) {
    try {
      for (size_t e = 0; e < E; ++e) {
        const EntryPlan& p = plans[e];
        if (p.slot < 0 || p.recv_elems == 0) continue;  // p2p: the sender receives nothing
        std::vector<char> out(std::max<size_t>(1, p.recv_elems * type_size(p.dtype)));
        b.download(static_cast<int>(e), out.data());
        per_entry[e] = p.coll->check_recv(out.data(), p.count, p.group_size, p.group_rank, p.root,
                                          verify_params(*p.coll, p.dtype, p.op, p.group_size, p.data_seed));
      }
    } catch (const std::exception& ex) {
      error = ex.what();
    }
  }
  gentle_allreduce(per_entry.data(), static_cast<int>(per_entry.size()), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EntryResults r;
  r.wrong.assign(per_entry.begin(), per_entry.begin() + static_cast<std::ptrdiff_t>(E));
  r.preemptions.assign(per_entry.begin() + static_cast<std::ptrdiff_t>(E), per_entry.end());
  r.error = agree_error(error);
  return r;
}

void CaseAggregate::add_trial(const std::vector<StepEntry>& step, const std::vector<EntryPlan>& plans,
                              const TimingMatrix& m, const EntryResults& r, TrialRow& row) {
  const size_t E = step.size();
  const size_t first = static_cast<size_t>(w_.warmup), end_timed = first + static_cast<size_t>(w_.iterations);
  multi_ = E > 1;
  // With batch timing every timed iteration has its batch's mean (equal on a rank, so the MAX over ranks is equal
  // within a batch too).
  for (size_t e = 0; e < E; ++e) {
    const std::string key = row_key(step[e], e);
    auto [it, inserted] = accs_.try_emplace(key);
    Acc& a = it->second;
    if (inserted) {
      order_.push_back(key);
      a.row = identity(step[e], plans[e], e, row.case_index);
    }
    for (size_t i = first; i < end_timed; ++i) {
      a.times.push_back(E == 1 ? m.iteration(i) : m.e2e(i, e));
      a.e2e.push_back(m.e2e(i, e));
      a.core.push_back(m.core(i, e));
    }
    if (w_.check) {
      a.wrong += r.wrong[e];
      a.checked = true;
      row.wrong += r.wrong[e];
    }
    a.preemptions += r.preemptions[e];
  }
  if (E > 1) {
    if (step_.row.coll.empty()) step_.row = step_identity(step, row.case_index);
    for (size_t i = first; i < end_timed; ++i) step_.times.push_back(m.iteration(i));
    if (w_.check) {
      step_.wrong += row.wrong;
      step_.checked = true;
    }
  }
}

std::vector<CaseRow> CaseAggregate::rows() const {
  std::vector<CaseRow> out;
  for (const auto& key : order_) out.push_back(summarize_row(accs_.at(key), multi_ ? "e2e" : "iteration"));
  if (multi_ && !step_.times.empty()) out.push_back(summarize_row(step_, "step"));
  return out;
}

std::string CaseAggregate::row_key(const StepEntry& e, size_t index) const {
  if (e.sim_group >= 0) return fmt::format("g{:08}", e.sim_group);  // a replay: one row per group
  if (w_.kind == Workload::Kind::Mix)
    return fmt::format("{}|{}|{}|{}", e.coll->name, group_name(e.group), e.bytes, e.priority);
  return fmt::format("{:08}", index);
}

CaseRow CaseAggregate::identity(const StepEntry& e, const EntryPlan& p, size_t index, int64_t case_index) const {
  const int sg = e.sim_group;
  CaseRow r;
  r.entry = w_.kind == Workload::Kind::Mix || sg >= 0 ? -1 : static_cast<int64_t>(index);
  r.case_index = case_index;
  r.coll = std::string(e.coll->name);
  r.group = sg >= 0 ? replay_->group_kind(sg) : std::string(group_name(e.group));
  r.label = sg >= 0 ? replay_->group_name(sg) : e.label;
  r.dtype = std::string(type_name(p.dtype));
  r.op = e.coll->has_op ? std::string(op_name(p.op)) : "none";
  r.root = e.coll->has_root || e.coll->pairwise ? p.root : -1;  // p2p: the sender
  r.priority = p.priority;
  r.nranks = p.group_size;
  r.count = static_cast<int64_t>(p.count);
  r.bytes = static_cast<int64_t>(p.coll->bytes_from_count(p.count, p.group_size, type_size(p.dtype)));
  r.in_place = p.in_place;
  return r;
}

CaseRow CaseAggregate::step_identity(const std::vector<StepEntry>& step, int64_t case_index) const {
  CaseRow r;
  r.entry = -1;
  r.case_index = case_index;
  r.coll = "step";
  r.group = "world";
  r.dtype = std::string(type_name(w_.dtype));
  r.op = std::string(op_name(w_.op));
  r.root = -1;
  r.nranks = world_size_;
  int64_t bytes = 0;
  for (const auto& e : step) bytes += static_cast<int64_t>(e.bytes);
  r.bytes = bytes;
  r.in_place = !step.empty() && step.front().in_place;
  return r;
}

CaseRow CaseAggregate::summarize_row(const Acc& a, const char* time_kind) {
  CaseRow r = a.row;
  r.time_kind = time_kind;
  const Summary t = summarize(a.times);
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
    if (r.coll != "step") r.busbw_GBs = r.algbw_GBs * find_collective(r.coll)->busbw_factor(static_cast<int>(r.nranks));
  }
  return r;
}

}  // namespace dfccl::harness
