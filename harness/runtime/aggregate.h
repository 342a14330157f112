// What a completed trial adds to the results (main thread; the functions that reduce are MPI-collective over
// MPI_COMM_WORLD): the engine counters and per-iteration times reduced over ranks, the verification of every entry,
// and the accumulation of a case's rows over its trials.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "config/workload.h"
#include "output/results.h"
#include "plan/replay.h"
#include "runtime/worker.h"

namespace dfccl::harness {

// This rank's engine counters. When the backend cannot read them: invalid ones (the trial then records -1), and the
// error on stderr.
EngineCounters read_counters(Backend& b, int rank);

// Fills a completed trial's counters, summed over ranks: reordered rank-iterations, synchronizations, executed
// steps, and the preemptions and daemon launches between `before` and `after` (-1 when a rank has no valid counters).
void record_completed_counters(const WorkerState& sh, const EngineCounters& before, const EngineCounters& after,
                               TrialRow& row);

// Per iteration, the slowest rank's times (reduced with MAX on construction): the iteration's, and each entry's e2e
// and core. NaN where no rank measured one.
class TimingMatrix {
 public:
  TimingMatrix(const std::vector<IterationTiming>& local, int iterations, size_t entries);
  double iteration(size_t it) const { return get(it, 0); }
  double e2e(size_t it, size_t e) const { return get(it, 1 + e); }
  double core(size_t it, size_t e) const { return get(it, 1 + entries_ + e); }

 private:
  double get(size_t it, size_t k) const;
  size_t entries_, width_;
  std::vector<double> m_;  // -1: not measured (times are never negative)
};

// Per entry, summed over ranks: wrong elements (checked entries only) and preemptions; `error` is the first
// verification failure, the same on every rank ("" if none).
struct EntryResults {
  std::vector<int64_t> wrong, preemptions;
  std::string error;
};
// Downloads and checks (when `check`) every entry this rank takes part in.
EntryResults verify_entries(Backend& b, const std::vector<EntryPlan>& plans,
                            const std::vector<IterationTiming>& timings, bool check);

// The rows of one case, accumulated over its completed trials (timed iterations only: after the warm-up, before the
// checked one): one row per entry (a mix: per collective, group, size and priority; a replay: per group), and one
// for the whole step when it has several entries.
class CaseAggregate {
 public:
  CaseAggregate(const Workload& w, const replay::Replay* replay, int world_size)
      : w_(w), replay_(replay), world_size_(world_size) {}

  // Adds a completed trial; adds its wrong elements (checked runs) to row.wrong.
  void add_trial(const std::vector<StepEntry>& step, const std::vector<EntryPlan>& plans, const TimingMatrix& m,
                 const EntryResults& r, TrialRow& row);
  // The rows, in first-seen order, then the step's; statistics and bandwidths computed.
  std::vector<CaseRow> rows() const;

 private:
  struct Acc {
    CaseRow row;  // identity fields
    std::vector<double> times, e2e, core;
    int64_t wrong = 0, preemptions = 0;
    bool checked = false;
  };
  std::string row_key(const StepEntry& e, size_t index) const;  // the row an entry's samples go to
  // The identity fields of an entry's row, and of the whole step's.
  CaseRow identity(const StepEntry& e, const EntryPlan& p, size_t index, int64_t case_index) const;
  CaseRow step_identity(const std::vector<StepEntry>& step, int64_t case_index) const;
  static CaseRow summarize_row(const Acc& a, const char* time_kind);  // statistics, algbw and busbw of a row

  const Workload& w_;
  const replay::Replay* replay_;
  int world_size_;
  std::map<std::string, Acc> accs_;
  std::vector<std::string> order_;  // keys of accs_ in first-seen order
  Acc step_;
  bool multi_ = false;  // the step has several entries
};

}  // namespace dfccl::harness
