// Which iterations of a trial a backend times, and how measured spans become per-iteration times (run.timing,
// run.batch; docs/harness.md, "Timing").
//
// `iteration` (the default): every iteration is its own span, measured on its own (warm-up and checked iterations
// too; the driver keeps only the timed ones). `batch`, nccl-tests' method: the timed iterations (after the warm-up,
// before the checked one) are cut into consecutive batches of run.batch iterations (the last one may be shorter);
// one span per batch, marked only before its first and after its last iteration, and each iteration of a batch gets
// the batch's mean. Every mark recorded between small operations adds to the GPU's timeline, so marking every
// iteration (and, for nccl, every collective) inflates small-size times.
//
// The same plan serves CUDA events (GpuContext) and the host clock (the host executor, dfccl with
// run.completion = host): a backend asks opens(it) / closes(it) around iteration `it`, keeps its spans, and
// per_iteration_times() turns them into one time per iteration, NaN for those no span covers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/workload.h"

namespace dfccl::harness {

// A measured span: iterations first..last (inclusive), elapsed_us between the mark before `first` and the mark
// after `last`.
struct TimedSpan {
  int first = 0, last = 0;
  double elapsed_us = 0;
};

class TimingPlan {
 public:
  TimingPlan() = default;  // iteration timing
  TimingPlan(bool batched, int warmup, int iterations, int batch);
  static TimingPlan of(const Workload& w);  // run.timing, run.warmup, run.iterations, run.batch

  bool batched() const { return batched_; }
  int batch() const { return batch_; }
  // A span starts before iteration `it` / ends after it.
  bool opens(int it) const;
  bool closes(int it) const;
  // Marks around each collective (nccl's per-entry stream times): only with iteration timing, as they would be
  // inside a batch's span.
  bool per_entry_marks() const { return !batched_; }

  // One time per iteration 0..count-1: a span's elapsed time divided by its iterations for each iteration it
  // covers, NaN for the others (batch timing: the warm-up and checked iterations).
  static std::vector<double> per_iteration_times(const std::vector<TimedSpan>& spans, int count);

  // How iterations are timed, in words, for BackendInfo::timing: `clock` takes the time ("CUDA events", "host
  // clock"), `where` says where ("on stream 0", or "").
  std::string describe(std::string_view clock, std::string_view where) const;

 private:
  bool timed(int it) const { return it >= warmup_ && it < warmup_ + iterations_; }

  bool batched_ = false;
  int warmup_ = 0, iterations_ = 0, batch_ = 1;
};

}  // namespace dfccl::harness
