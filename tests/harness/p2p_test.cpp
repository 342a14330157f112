// Point-to-point in the workload model: p2p [[step]] entries, the pipeline's 1F1B step, the roles a rank takes in an
// entry, and the programs of steps with transfers (canonical per rank, or a random legal order that keeps every
// lane's order and every data dependency).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "config/layout.h"
#include "config/workload.h"
#include "plan/pipeline.h"
#include "plan/rank_program.h"
#include "workload_error.h"

using namespace dfccl::harness;
using dfccl::harness::test::error_of;

namespace {

// Rank `rank`'s plans of a step on the layout, as the driver makes them (slots = group kinds).
std::vector<EntryPlan> plans_of(const std::vector<StepEntry>& step, const Layout& l, int rank) {
  std::vector<EntryPlan> plans;
  for (size_t i = 0; i < step.size(); ++i) {
    const StepEntry& e = step[i];
    const Membership m = membership(l, e.group, rank);
    EntryPlan p;
    p.entry = static_cast<int>(i);
    p.coll = e.coll;
    p.slot = static_cast<int>(e.group);
    p.group_rank = m.rank;
    p.group_size = m.size;
    p.count = 16;
    p.send_elems = p.recv_elems = 16;
    program::assign_roles(e, membership(l, GroupKind::Pp, rank).rank, p);
    plans.push_back(p);
  }
  return plans;
}

std::vector<int> submissions(const std::vector<program::Op>& ops) {
  std::vector<int> out;
  for (const auto& op : ops)
    if (op.kind == program::OpKind::Submit) out.push_back(op.entry);
  return out;
}

std::vector<std::string> labels(const std::vector<StepEntry>& step, const std::vector<int>& order) {
  std::vector<std::string> out;
  for (int i : order) out.push_back(step[i].label);
  return out;
}

Workload pipeline_workload(const std::string& extra = "") {
  return parse_workload(
      "[layout]\npp = 2\ntp = 2\n[pipeline]\nmicro_batches = 4\ntp_per_pass = 1\ndp_buckets = 1\n" + extra,
      "pipeline.toml", {});
}

}  // namespace

TEST(P2p, StepEntriesTakeSrcAndDst) {
  Workload w = parse_workload("[[step]]\ncoll = 'p2p'\ngroup = 'pp'\nbytes = '1K'\nsrc = 1\ndst = 0\n"
                              "[[step]]\ncoll = 'p2p'\nbytes = '1K'\n",
                              "p.toml", {});
  ASSERT_EQ(w.step.size(), 2u);
  EXPECT_EQ(w.step[0].src, 1);
  EXPECT_EQ(w.step[0].dst, 0);
  EXPECT_EQ(w.step[1].src, 0);  // defaults: group rank 0 to group rank 1
  EXPECT_EQ(w.step[1].dst, 1);
  EXPECT_NE(error_of("[[step]]\ncoll = 'all_reduce'\nbytes = 8\nsrc = 1\n").find("step[0].src"), std::string::npos);
  EXPECT_NE(error_of("[[step]]\ncoll = 'p2p'\nbytes = 8\ndst = -1\n").find("step[0].dst"), std::string::npos);
  EXPECT_NE(error_of("[layout]\npp = 2\n[pipeline]\nmicro_batches = 2\n[[step]]\ncoll = 'p2p'\nbytes = 8\n")
                .find("'pipeline'"),
            std::string::npos);
}

TEST(P2p, RolesOfARank) {
  const Layout l{1, 1, 4};  // pp = 4: the pp group is the world
  StepEntry p2p;
  p2p.coll = &kP2p;
  p2p.group = GroupKind::Pp;
  p2p.src = 6;  // modulo 4: 2
  p2p.dst = 1;
  StepEntry ring;
  ring.coll = &kSendRecv;
  ring.group = GroupKind::Pp;
  StepEntry staged;
  staged.coll = &kAllReduce;
  staged.group = GroupKind::Tp;
  staged.stage = 3;
  const std::vector<StepEntry> step{p2p, ring, staged};
  auto sender = plans_of(step, l, 2), receiver = plans_of(step, l, 1), other = plans_of(step, l, 0);
  EXPECT_EQ(sender[0].send_peer, 1);
  EXPECT_EQ(sender[0].recv_peer, -1);
  EXPECT_EQ(sender[0].recv_elems, 0u);
  EXPECT_EQ(receiver[0].recv_peer, 2);
  EXPECT_EQ(receiver[0].root, 2);  // the sender, whose data the receiver checks
  EXPECT_EQ(receiver[0].send_elems, 0u);
  EXPECT_EQ(other[0].slot, -1);
  EXPECT_EQ(other[1].send_peer, 1);  // sendrecv: rank+1, rank-1
  EXPECT_EQ(other[1].recv_peer, 3);
  EXPECT_EQ(other[2].slot, -1);  // stage 3's collective
  EXPECT_EQ(plans_of(step, l, 3)[2].slot, static_cast<int>(GroupKind::Tp));
}

TEST(Pipeline, OneFOneBPerStage) {
  Workload w = parse_workload("[layout]\npp = 2\n[pipeline]\nmicro_batches = 4\ndp_buckets = 1\n", "p.toml", {});
  // tp = 1: no tp all-reduces. 2 x 4 transfers each way... 4 activations, 4 gradients, one dp bucket per stage.
  ASSERT_EQ(w.kind, Workload::Kind::Step);
  ASSERT_EQ(w.step.size(), 10u);
  const Layout l{1, 1, 2};
  Workload plain = w;
  plain.order_probability = 0;
  auto order = [&](int rank) {
    return labels(w.step, submissions(program::rank_program(w.step, plans_of(w.step, l, rank), plain, rank, 0, 0).ops));
  };
  // Stage 0: one forward in the warm-up, then forward / backward, then the last backward; then its dp bucket.
  EXPECT_EQ(order(0), (std::vector<std::string>{"mb0 activation s0->s1", "mb1 activation s0->s1", "mb0 gradient s1->s0",
                                                "mb2 activation s0->s1", "mb1 gradient s1->s0", "mb3 activation s0->s1",
                                                "mb2 gradient s1->s0", "mb3 gradient s1->s0", "s0 dp bucket 0"}));
  // The last stage: no warm-up.
  EXPECT_EQ(order(1), (std::vector<std::string>{"mb0 activation s0->s1", "mb0 gradient s1->s0", "mb1 activation s0->s1",
                                                "mb1 gradient s1->s0", "mb2 activation s0->s1", "mb2 gradient s1->s0",
                                                "mb3 activation s0->s1", "mb3 gradient s1->s0", "s1 dp bucket 0"}));
}

TEST(Pipeline, RandomLegalOrdersKeepLanesAndDependencies) {
  Workload w = pipeline_workload("[order]\nprobability = 1.0\n");
  const Layout l{2, 1, 2};  // tp = 2, pp = 2: 4 ranks
  int reordered = 0;
  std::map<int, std::vector<int>> seen_first;  // rank -> the first entries of its programs
  for (int rank = 0; rank < 4; ++rank) {
    const auto plans = plans_of(w.step, l, rank);
    Workload in_order = w;
    in_order.order_probability = 0;
    const auto canonical = submissions(program::rank_program(w.step, plans, in_order, rank, 0, 0).ops);
    for (uint64_t it = 0; it < 50; ++it) {
      const auto rp = program::rank_program(w.step, plans, w, rank, 7, it);
      const auto again = program::rank_program(w.step, plans, w, rank, 7, it);
      const auto order = submissions(rp.ops);
      ASSERT_EQ(order, submissions(again.ops)) << "not deterministic";
      ASSERT_TRUE(std::is_permutation(order.begin(), order.end(), canonical.begin(), canonical.end()))
          << "not the rank's entries";
      std::map<int, size_t> pos;
      for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = k;
      for (int i : order) {  // every dependency this rank takes part in comes first
        for (int d : w.step[i].after)
          if (pos.count(d)) {
            EXPECT_LT(pos[d], pos[i]) << w.step[d].label << " before " << w.step[i].label;
          }
      }
      // Each lane keeps the canonical order: the tp collectives, the transfers of each direction.
      auto lane_order = [&](const std::vector<int>& o, auto pred) {
        std::vector<int> out;
        for (int i : o)
          if (pred(w.step[i])) out.push_back(i);
        return out;
      };
      for (auto pred : {+[](const StepEntry& e) { return e.group == GroupKind::Tp; },
                        +[](const StepEntry& e) { return e.coll->pairwise && e.src < e.dst; },
                        +[](const StepEntry& e) { return e.coll->pairwise && e.src > e.dst; }})
        EXPECT_EQ(lane_order(order, pred), lane_order(canonical, pred));
      if (rp.reordered) ++reordered;
      EXPECT_EQ(rp.reordered, order != canonical);
    }
  }
  EXPECT_GT(reordered, 100);  // of 200 rank-iterations: orders are really drawn
}

TEST(Pipeline, TransfersMatchInTheSameOrderOnBothSides) {
  Workload w = pipeline_workload();
  w.order_probability = 0;
  for (int pp : {2, 3, 4}) {
    program::PipelineShape shape;
    shape.stages = pp;
    shape.micro_batches = 5;
    shape.tp_per_pass = 2;
    shape.dp_buckets = 2;
    shape.activation_bytes = shape.tp_bytes = shape.dp_bytes = 64;
    const auto step = program::pipeline_step(shape);
    const Layout l{1, 1, pp};
    std::vector<std::vector<int>> programs;
    for (int r = 0; r < pp; ++r)
      programs.push_back(submissions(program::rank_program(step, plans_of(step, l, r), w, r, 0, 0).ops));
    for (int a = 0; a < pp; ++a)
      for (int b = 0; b < pp; ++b) {
        if (a == b) continue;
        auto between = [&](int r) {  // the transfers a -> b in rank r's program
          std::vector<int> out;
          for (int i : programs[r])
            if (step[i].coll->pairwise && step[i].src == a && step[i].dst == b) out.push_back(i);
          return out;
        };
        EXPECT_EQ(between(a), between(b)) << pp << " stages, " << a << " -> " << b;
      }
    // Every stage runs micro_batches forward and backward passes: 2 * 5 * 2 tp all-reduces and 2 dp ones.
    for (int r = 0; r < pp; ++r) {
      int tp = 0, dp = 0;
      for (int i : programs[r]) {
        tp += step[i].group == GroupKind::Tp;
        dp += step[i].group == GroupKind::Dp;
      }
      EXPECT_EQ(tp, 20);
      EXPECT_EQ(dp, 2);
    }
  }
}

TEST(P2p, MixDrawsTransfersAndKeepsOtherMixesAsTheyWere) {
  Workload w =
      parse_workload("[mix]\ncount = 40\ncollectives = { all_reduce = 1, p2p = 1, all_to_all = 1 }\n", "m.toml", {});
  const auto step = program::draw_mix(w, 0);
  int p2p = 0;
  std::map<int, int> srcs;
  for (const auto& e : step)
    if (e.coll->pairwise) {
      ++p2p;
      ++srcs[e.src % 4];
    }
  EXPECT_GT(p2p, 5);
  EXPECT_GT(srcs.size(), 1u);
}
