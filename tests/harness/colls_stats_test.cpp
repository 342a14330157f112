// Bus-bandwidth factors and sizes (nccl-tests' doc/PERFORMANCE.md), statistics, the Wilson interval, the layout
// arithmetic and the rank-program generator.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "colls/collective.h"
#include "config/layout.h"
#include "config/workload.h"
#include "plan/rank_program.h"
#include "runtime/stats.h"

using namespace dfccl::harness;

TEST(Collectives, BusBandwidthFactorsAreNcclTests) {
  for (int n : {2, 4, 8}) {
    EXPECT_DOUBLE_EQ(kAllReduce.busbw_factor(n), 2.0 * (n - 1) / n);
    EXPECT_DOUBLE_EQ(kAllGather.busbw_factor(n), double(n - 1) / n);
    EXPECT_DOUBLE_EQ(kReduceScatter.busbw_factor(n), double(n - 1) / n);
    EXPECT_DOUBLE_EQ(kBroadcast.busbw_factor(n), 1.0);
    EXPECT_DOUBLE_EQ(kReduce.busbw_factor(n), 1.0);
  }
  EXPECT_DOUBLE_EQ(kAllReduce.busbw_factor(2), 1.0);
  for (int n : {2, 3, 4, 8}) {  // sendrecv_perf and alltoall_perf
    EXPECT_DOUBLE_EQ(kSendRecv.busbw_factor(n), 1.0);
    EXPECT_DOUBLE_EQ(kAllToAll.busbw_factor(n), double(n - 1) / n);
    EXPECT_DOUBLE_EQ(kP2p.busbw_factor(n), 1.0);
  }
}

TEST(Collectives, PointToPointSizesAndInPlace) {
  // sendrecv: S = count * type size, one buffer of count each way.
  EXPECT_EQ(kSendRecv.count_from_bytes(1024, 4, 4), 256u);
  EXPECT_EQ(kSendRecv.send_elems(256, 4), 256u);
  EXPECT_EQ(kSendRecv.recv_elems(256, 4), 256u);
  // all_to_all: count per peer; S = count * n * type size (a rank's whole input and output).
  EXPECT_EQ(kAllToAll.count_from_bytes(1024, 4, 4), 64u);
  EXPECT_EQ(kAllToAll.count_from_bytes(1024, 3, 4), 85u);
  EXPECT_EQ(kAllToAll.bytes_from_count(85, 3, 4), 1020u);
  EXPECT_EQ(kAllToAll.send_elems(64, 4), 256u);
  EXPECT_EQ(kAllToAll.recv_elems(64, 4), 256u);
  EXPECT_EQ(kP2p.count_from_bytes(1024, 8, 2), 512u);
  for (const Collective* c : {&kSendRecv, &kAllToAll, &kP2p}) EXPECT_TRUE(c->out_of_place_only) << c->name;
  for (const Collective* c : {&kAllReduce, &kAllGather, &kReduceScatter, &kBroadcast, &kReduce})
    EXPECT_FALSE(c->out_of_place_only) << c->name;
  EXPECT_TRUE(kP2p.pairwise);
  EXPECT_FALSE(kSendRecv.pairwise);
  EXPECT_EQ(find_collective("alltoall"), &kAllToAll);
  EXPECT_EQ(find_collective("sendrecv"), &kSendRecv);
  EXPECT_EQ(find_collective("p2p"), &kP2p);
  EXPECT_EQ(&collective(CollKind::P2p), &kP2p);
}

TEST(Collectives, SizesAreNcclTestsS) {
  // all_gather / reduce_scatter: S is the total buffer (n * count * type size).
  EXPECT_EQ(kAllGather.count_from_bytes(1024, 4, 4), 64u);
  EXPECT_EQ(kAllGather.recv_elems(64, 4), 256u);
  EXPECT_EQ(kReduceScatter.send_elems(64, 4), 256u);
  EXPECT_EQ(kReduceScatter.bytes_from_count(64, 4, 4), 1024u);
  EXPECT_EQ(kAllReduce.count_from_bytes(1024, 4, 2), 512u);
  EXPECT_EQ(find_collective("allreduce"), &kAllReduce);
  EXPECT_EQ(find_collective("all_to_al"), nullptr);
}

TEST(Stats, Summary) {
  Summary s = summarize({4, 1, 3, 2, NAN});
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.stddev, std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_NEAR(s.cv, std::sqrt(5.0 / 3.0) / 2.5, 1e-12);
  EXPECT_TRUE(std::isnan(summarize({}).median));
}

TEST(Stats, WilsonInterval) {
  // Reference values: k=0, n=10 -> [0, 0.2775]; k=5, n=10 -> [0.2366, 0.7634]; k=10, n=10 -> [0.7225, 1].
  Interval a = wilson_interval(0, 10);
  EXPECT_DOUBLE_EQ(a.low, 0.0);
  EXPECT_NEAR(a.high, 0.27753, 1e-4);
  Interval b = wilson_interval(5, 10);
  EXPECT_NEAR(b.low, 0.23659, 1e-4);
  EXPECT_NEAR(b.high, 0.76341, 1e-4);
  Interval c = wilson_interval(10, 10);
  EXPECT_NEAR(c.low, 0.72247, 1e-4);
  EXPECT_DOUBLE_EQ(c.high, 1.0);
  Interval d = wilson_interval(0, 0);
  EXPECT_EQ(d.low, 0.0);
  EXPECT_EQ(d.high, 1.0);
}

TEST(Layout, MegatronOrder) {
  Layout l{2, 2, 2};                                // 8 ranks
  Membership tp = membership(l, GroupKind::Tp, 5);  // tp=1, dp=0, pp=1
  EXPECT_EQ(tp.members, (std::vector<int>{4, 5}));
  EXPECT_EQ(tp.rank, 1);
  Membership dp = membership(l, GroupKind::Dp, 5);
  EXPECT_EQ(dp.members, (std::vector<int>{5, 7}));
  EXPECT_EQ(dp.rank, 0);
  Membership pp = membership(l, GroupKind::Pp, 5);
  EXPECT_EQ(pp.members, (std::vector<int>{1, 5}));
  EXPECT_EQ(pp.rank, 1);
  EXPECT_EQ(group_count(l, GroupKind::Tp), 4);
  // Every rank is in exactly one group of each kind; colors tell groups apart.
  for (int k = 0; k < kNumGroupKinds; ++k) {
    std::set<int> colors;
    for (int r = 0; r < 8; ++r) {
      Membership m = membership(l, static_cast<GroupKind>(k), r);
      colors.insert(m.color);
      EXPECT_EQ(m.members[m.rank], r);
    }
    EXPECT_EQ(static_cast<int>(colors.size()), group_count(l, static_cast<GroupKind>(k)));
  }
}

TEST(Scenario, ProgramsKeepEachGroupsOrderAndAreDeterministic) {
  Workload w = parse_workload("[mix]\ncount = 12\ncollectives = { all_reduce = 1, all_gather = 1 }\n"
                              "groups = ['tp', 'dp', 'world']\n[order]\nprobability = 1.0\n"
                              "[sync]\nprobability = 0.3\n[host_alloc]\nprobability = 0.2\n",
                              "s.toml", {});
  auto step = program::draw_mix(w, 3);
  ASSERT_EQ(step.size(), 12u);
  EXPECT_EQ(program::draw_mix(w, 3).size(), 12u);
  int reordered = 0, syncs = 0;
  for (int rank = 0; rank < 4; ++rank) {
    for (uint64_t it = 0; it < 20; ++it) {
      auto prog = program::rank_program(step, w, rank, 3, it);
      auto again = program::rank_program(step, w, rank, 3, it);
      ASSERT_EQ(prog.size(), again.size());
      std::vector<int> last(kNumGroupKinds, -1);
      int submits = 0;
      for (const auto& op : prog) {
        if (op.kind == program::OpKind::DeviceSync) ++syncs;
        if (op.kind != program::OpKind::Submit) continue;
        ++submits;
        int g = static_cast<int>(step[op.entry].group);
        EXPECT_GT(op.entry, last[g]) << "a group's own order was broken";
        last[g] = op.entry;
      }
      EXPECT_EQ(submits, 12);
      EXPECT_EQ(prog.back().kind, program::OpKind::WaitAll);
      if (!program::in_step_order(prog)) ++reordered;
    }
  }
  EXPECT_GT(reordered, 40);  // with probability 1, nearly every program interleaves differently
  EXPECT_GT(syncs, 0);
  // No perturbation: the step's order, no extra operations.
  Workload plain = parse_workload("[mix]\ncount = 6\n", "p.toml", {});
  auto prog = program::rank_program(program::draw_mix(plain, 0), plain, 1, 0, 0);
  EXPECT_TRUE(program::in_step_order(prog));
  EXPECT_EQ(prog.size(), 7u);
}
