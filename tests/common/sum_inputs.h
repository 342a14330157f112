// Inputs whose sum over ranks is known, and the check of an all-reduce's output against it: rank r's element i is
// i % 1000 + r * 1000 (no overflow at any count or rank number a test uses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dfccl::test {

inline std::vector<int32_t> iota_input(size_t n, int rank) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int32_t(i % 1000) + rank * 1000;
  return v;
}

// Elements of out that are not the sum of iota_input(n, first + r) over ranks r < nranks.
inline size_t wrong_sum(const std::vector<int32_t>& out, int nranks, int first = 0) {
  size_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    int32_t want = 0;
    for (int r = 0; r < nranks; ++r) want += int32_t(i % 1000) + (first + r) * 1000;
    bad += out[i] != want;
  }
  return bad;
}

}  // namespace dfccl::test
