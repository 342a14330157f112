// Every collective x data type x operator x count x in/out-of-place x rank count on the host executor, exact
// against the independent reference (tests/common/reference.h), except at the largest count: there (what crosses
// slots, chunks and channels, which see bytes, not types) each operator and placement runs with one type, rotating
// so that each collective with an operator meets every type at that count once (all-gather and broadcast two); the
// arithmetic of every type with every operator is the smaller counts'.
// HOST_COLLECTIVES_TYPES=rotated: one type per case at every count (the variants over another data path,
// tests/unit/CMakeLists.txt: 4 blocks, the network transport): each collective with an operator meets every type at
// every count, all-gather and broadcast 8 of the 10 over the counts.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "group.h"

namespace dfccl::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 17, 1009, size_t(1) << 20};  // empty, one, odd, prime, 1 Mi elements
constexpr dfcclRedOp_t kOps[] = {dfcclSum, dfcclProd, dfcclMax, dfcclMin, dfcclAvg};
constexpr int kNumCounts = int(sizeof(kCounts) / sizeof(kCounts[0]));

bool all_rotated() {
  const char* v = std::getenv("HOST_COLLECTIVES_TYPES");
  return v && std::strcmp(v, "rotated") == 0;
}

// Whether the case of type t runs: always, unless its count is rotated; then the type of (collective, operator,
// count, placement) is one of dfcclNumTypes, a bijection over the 10 (operator, placement) pairs at each count.
bool runs(int t, Coll coll, int op, int count_index, bool in_place, bool rotated) {
  if (!rotated && count_index != kNumCounts - 1) return true;
  return t == (2 * op + int(in_place) + 3 * count_index + int(coll)) % dfcclNumTypes;
}

class HostCollectives : public ::testing::TestWithParam<int> {
 protected:
  static void run_all(Coll coll) {
    const int n = GetParam();
    Group g(n, dfcclExecutorHost);
    const bool reduces = coll != Coll::AllGather && coll != Coll::Broadcast;
    const bool rotated = all_rotated();
    size_t cases = 0;
    for (int t = 0; t < dfcclNumTypes; ++t)
      for (int o = 0; o < int(sizeof(kOps) / sizeof(kOps[0])); ++o) {
        const dfcclRedOp_t op = kOps[o];
        if (!reduces && op != dfcclSum) continue;
        for (int k = 0; k < kNumCounts; ++k)
          for (bool in_place : {false, true}) {
            if (!runs(t, coll, o, k, in_place, rotated)) continue;
            const size_t count = kCounts[k];
            const int root = int(count % size_t(n));
            const Case c{coll, dfcclDataType_t(t), op, count, root, in_place};
            std::string error;
            const size_t wrong = run_case(g, c, 60000, &error);
            ASSERT_TRUE(error.empty()) << describe(c, n) << ": " << error;
            EXPECT_EQ(wrong, 0u) << describe(c, n);
            ++cases;
          }
      }
    EXPECT_GT(cases, 0u);
  }
};

TEST_P(HostCollectives, AllReduce) { run_all(Coll::AllReduce); }
TEST_P(HostCollectives, AllGather) { run_all(Coll::AllGather); }
TEST_P(HostCollectives, ReduceScatter) { run_all(Coll::ReduceScatter); }
TEST_P(HostCollectives, Broadcast) { run_all(Coll::Broadcast); }
TEST_P(HostCollectives, Reduce) { run_all(Coll::Reduce); }

INSTANTIATE_TEST_SUITE_P(Ranks, HostCollectives, ::testing::Values(2, 3, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace dfccl::test
