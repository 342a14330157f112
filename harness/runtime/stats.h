// Summary statistics of per-iteration times and the confidence interval of a deadlock rate.
#pragma once

#include <cstdint>
#include <vector>

namespace dfccl::harness {

struct Summary {
  int64_t n = 0;
  double min = 0, median = 0, max = 0, mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1); 0 for n < 2
  double cv = 0;      // stddev / mean (coefficient of variation); 0 when mean is 0
};

// NaN values are ignored; an empty input gives n = 0 and NaN statistics.
Summary summarize(std::vector<double> values);

// Wilson score interval for k successes out of n trials at the given z (1.96: 95 %). n = 0 gives [0, 1].
struct Interval {
  double low, high;
};
Interval wilson_interval(int64_t k, int64_t n, double z = 1.96);

}  // namespace dfccl::harness
