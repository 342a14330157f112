// Every collective x data type x operator x count x in/out-of-place x rank count on the host executor, exact
// against the independent reference (tests/common/reference.h).
#include <gtest/gtest.h>

#include "group.h"

namespace dfccl::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 17, 1009, size_t(1) << 20};  // empty, one, odd, prime, 1 Mi elements
constexpr dfcclRedOp_t kOps[] = {dfcclSum, dfcclProd, dfcclMax, dfcclMin, dfcclAvg};

class HostCollectives : public ::testing::TestWithParam<int> {
 protected:
  static void run_all(Coll coll) {
    const int n = GetParam();
    Group g(n, dfcclExecutorHost);
    const bool reduces = coll != Coll::AllGather && coll != Coll::Broadcast;
    size_t cases = 0;
    for (int t = 0; t < dfcclNumTypes; ++t)
      for (dfcclRedOp_t op : kOps) {
        if (!reduces && op != dfcclSum) continue;
        for (size_t count : kCounts)
          for (bool in_place : {false, true}) {
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
