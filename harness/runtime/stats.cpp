#include "stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dfccl::harness {

Summary summarize(std::vector<double> values) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  Summary s;
  s.n = static_cast<int64_t>(values.size());
  if (values.empty()) {
    double nan = std::numeric_limits<double>::quiet_NaN();
    s.min = s.median = s.max = s.mean = s.stddev = s.cv = nan;
    return s;
  }
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  s.min = values.front();
  s.max = values.back();
  s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / n;
  if (n >= 2) {
    double sq = 0;
    for (double v : values) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / (n - 1));
  }
  s.cv = s.mean != 0 ? s.stddev / s.mean : 0;
  return s;
}

Interval wilson_interval(int64_t k, int64_t n, double z) {
  if (n <= 0) return {0.0, 1.0};
  double p = static_cast<double>(k) / n;
  double z2 = z * z;
  double denom = 1 + z2 / n;
  double center = (p + z2 / (2.0 * n)) / denom;
  double half = z * std::sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / denom;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

}  // namespace dfccl::harness
