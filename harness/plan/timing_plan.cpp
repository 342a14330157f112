#include "timing_plan.h"

#include <fmt/format.h>

#include "output/results.h"

namespace dfccl::harness {

TimingPlan::TimingPlan(bool batched, int warmup, int iterations, int batch)
    : batched_(batched), warmup_(warmup), iterations_(iterations), batch_(batch) {}

TimingPlan TimingPlan::of(const Workload& w) {
  return TimingPlan(w.timing == TimingMode::Batch, w.warmup, w.iterations, w.batch);
}

bool TimingPlan::opens(int it) const {
  if (!batched_) return true;
  return timed(it) && (it - warmup_) % batch_ == 0;
}

bool TimingPlan::closes(int it) const {
  if (!batched_) return true;
  return timed(it) && ((it - warmup_) % batch_ == batch_ - 1 || it == warmup_ + iterations_ - 1);
}

std::vector<double> TimingPlan::per_iteration_times(const std::vector<TimedSpan>& spans, int count) {
  std::vector<double> out(static_cast<size_t>(count), kNaN);
  for (const TimedSpan& s : spans) {
    const double mean = s.elapsed_us / (s.last - s.first + 1);
    for (int it = s.first; it <= s.last && it < count; ++it) out[static_cast<size_t>(it)] = mean;
  }
  return out;
}

std::string TimingPlan::describe(std::string_view clock, std::string_view where) const {
  const std::string at = where.empty() ? "" : fmt::format(" {}", where);
  if (!batched_) return fmt::format("{} around each iteration{}", clock, at);
  return fmt::format("{} around batches of {} iterations{} (nccl-tests' method; per-iteration values are their "
                     "batch's mean)",
                     clock, batch_, at);
}

}  // namespace dfccl::harness
