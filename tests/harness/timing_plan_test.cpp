// Timing plans (plan/timing_plan.h): which iterations a backend marks, and the per-iteration times it reports,
// driven the way the backends drive them (a mark where the plan opens or closes a span) with a fake clock.
#include <gtest/gtest.h>

#include <cmath>

#include "config/workload.h"
#include "plan/timing_plan.h"

using namespace dfccl::harness;

namespace {

// What a backend records over `count` iterations when iteration `it` takes cost(it) us: the spans, then their
// per-iteration times. Counts the marks (events, clock readings).
template <class Cost>
std::vector<double> run_iterations(const TimingPlan& plan, int count, Cost cost, int& marks) {
  std::vector<TimedSpan> spans;
  double clock = 0, start = 0;
  int first = 0;
  marks = 0;
  for (int it = 0; it < count; ++it) {
    if (plan.opens(it)) {
      first = it;
      start = clock;
      ++marks;
    }
    clock += cost(it);
    if (plan.closes(it)) {
      spans.push_back(TimedSpan{first, it, clock - start});
      ++marks;
    }
  }
  return TimingPlan::per_iteration_times(spans, count);
}

}  // namespace

TEST(TimingPlan, BatchesCoverTheTimedIterationsOnly) {
  // warm-up 2, timed 7 in batches of 3, then the checked iteration: iterations 0..9.
  Workload w = parse_workload("", "t.toml", {{"warmup", "2"}, {"iters", "7"}, {"timing", "batch"}, {"batch", "3"}});
  TimingPlan plan = TimingPlan::of(w);
  ASSERT_TRUE(plan.batched());
  EXPECT_FALSE(plan.per_entry_marks());
  std::vector<int> opens, closes;
  for (int it = 0; it < 10; ++it) {
    if (plan.opens(it)) opens.push_back(it);
    if (plan.closes(it)) closes.push_back(it);
  }
  EXPECT_EQ(opens, (std::vector<int>{2, 5, 8}));
  EXPECT_EQ(closes, (std::vector<int>{4, 7, 8}));  // the last batch has one iteration

  int marks = 0;
  auto t = run_iterations(
      plan, 10, [](int it) { return 10.0 * (it + 1); }, marks);
  EXPECT_EQ(marks, 6);
  ASSERT_EQ(t.size(), 10u);
  for (int it : {0, 1, 9}) EXPECT_TRUE(std::isnan(t[it])) << "untimed iteration " << it;
  for (int it : {2, 3, 4}) EXPECT_DOUBLE_EQ(t[it], (30 + 40 + 50) / 3.0) << it;
  for (int it : {5, 6, 7}) EXPECT_DOUBLE_EQ(t[it], (60 + 70 + 80) / 3.0) << it;
  EXPECT_DOUBLE_EQ(t[8], 90);
}

TEST(TimingPlan, IterationTimingMarksEveryIteration) {
  TimingPlan plan = TimingPlan::of(parse_workload("", "t.toml", {{"warmup", "1"}, {"iters", "3"}}));
  EXPECT_FALSE(plan.batched());
  EXPECT_TRUE(plan.per_entry_marks());
  int marks = 0;
  auto t = run_iterations(
      plan, 5, [](int it) { return 1.0 + it; }, marks);
  EXPECT_EQ(marks, 10);
  EXPECT_EQ(t, (std::vector<double>{1, 2, 3, 4, 5}));  // warm-up and checked too: the driver keeps the timed ones
}

TEST(TimingPlan, DescribesTheMethod) {
  EXPECT_EQ(TimingPlan().describe("host clock", ""), "host clock around each iteration");
  EXPECT_EQ(TimingPlan(true, 5, 20, 10).describe("CUDA events", "on stream 0"),
            "CUDA events around batches of 10 iterations on stream 0 (nccl-tests' method; per-iteration values are "
            "their batch's mean)");
  // A batch larger than the timed iterations: one batch of all of them.
  TimingPlan one(true, 1, 4, 100);
  EXPECT_TRUE(one.opens(1));
  EXPECT_FALSE(one.closes(3));
  EXPECT_TRUE(one.closes(4));
  EXPECT_FALSE(one.opens(5));
}
