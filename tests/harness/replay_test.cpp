// The replay workload (kind replay, a [sim] table): parsing, errors that name the key, and the programs it runs,
// which must be the simulator's own (common/scenario.h) step for step.
#include <gtest/gtest.h>

#include "config/workload.h"
#include "plan/replay.h"
#include "workload_error.h"

using namespace dfccl::harness;
using dfccl::harness::test::error_of;

namespace {

const char* kRing4 =
    "[sim]\nlayout = 'groups:0,1;1,2;2,3;3,0;0,2'\ncolls = 10\ndisorder = 0.01\nsync = 0.05\nseed = 1\n";

}  // namespace

TEST(Replay, InferredFromTheSimTable) {
  Workload w = parse_workload(kRing4, "r.toml", {{"sim.first_trial", "7"}, {"sim.bytes", "128"}});
  EXPECT_EQ(w.kind, Workload::Kind::Replay);
  EXPECT_EQ(w.sim_layout, "groups:0,1;1,2;2,3;3,0;0,2");
  EXPECT_EQ(w.sim_colls, 10);
  EXPECT_DOUBLE_EQ(w.sim_disorder, 0.01);
  EXPECT_DOUBLE_EQ(w.sim_sync, 0.05);
  EXPECT_EQ(w.sim_seed, 1u);
  EXPECT_EQ(w.sim_first_trial, 7u);
  EXPECT_EQ(w.sim_bytes, 128u);
  EXPECT_EQ(w.sim_coll->name, "all_reduce");
  // The resolved configuration carries the [sim] table (scripts/validate_sim.py reads it).
  EXPECT_NE(w.resolved_toml.find("first_trial = 7"), std::string::npos);
  EXPECT_NE(w.resolved_toml.find("layout = 'groups:0,1;1,2;2,3;3,0;0,2'"), std::string::npos) << w.resolved_toml;
  // Other workloads are not replays.
  EXPECT_EQ(parse_workload("", "e.toml", {}).kind, Workload::Kind::Sweep);
}

TEST(Replay, ErrorsNameTheKey) {
  EXPECT_NE(error_of("kind = 'replay'\n").find("sim.layout"), std::string::npos);
  EXPECT_NE(error_of("[sim]\nlayout = 'megatron:2x2'\n").find("sim.layout"), std::string::npos);
  EXPECT_NE(error_of("[sim]\nlayout = 'groups:0'\n").find("sim.layout"), std::string::npos);
  EXPECT_NE(error_of("[sim]\nlayout = 'megatron:2x2x2'\ndisorder = 2\n").find("sim.disorder"), std::string::npos);
  EXPECT_NE(error_of("[sim]\nlayout = 'megatron:2x2x2'\nsync = -0.1\n").find("sim.sync"), std::string::npos);
  EXPECT_NE(error_of("[sim]\nlayout = 'megatron:2x2x2'\ncolls = 0\n").find("sim.colls"), std::string::npos);
  EXPECT_NE(error_of("[sim]\nlayout = 'megatron:2x2x2'\nseed = -1\n").find("sim.seed"), std::string::npos);
  EXPECT_NE(error_of("[sim]\nlayout = 'megatron:2x2x2'\ncoll = 'all_to_al'\n").find("sim.coll"), std::string::npos);
  EXPECT_NE(error_of("[sim]\nlayout = 'megatron:2x2x2'\nlayuot = 'x'\n").find("sim.layuot"), std::string::npos);
  // 4 bytes of float32 over a pair: all_gather needs one element per rank, i.e. 8 bytes.
  EXPECT_NE(error_of("[sim]\nlayout = 'megatron:2x2x2'\ncoll = 'all_gather'\nbytes = 4\n").find("sim.bytes"),
            std::string::npos);
  // The layout must have as many ranks as mpirun started.
  Workload w = parse_workload("[sim]\nlayout = 'megatron:2x2x2'\n", "m.toml", {});
  EXPECT_NO_THROW(replay::check_world(w, 8));
  try {
    replay::check_world(w, 4);
    ADD_FAILURE() << "a layout of 8 ranks accepted for 4";
  } catch (const WorkloadError& e) {
    EXPECT_NE(std::string(e.what()).find("sim.layout"), std::string::npos);
  }
}

TEST(Replay, ProgramsAreTheSimulatorsStepForStep) {
  Workload w = parse_workload(kRing4, "r.toml", {{"sim.first_trial", "100"}});
  replay::Replay r(w);
  EXPECT_EQ(r.num_ranks(), 4);
  EXPECT_EQ(r.num_groups(), 5);
  EXPECT_EQ(r.scenario_trial(3), 103u);
  // One step entry per collective id, on its group.
  auto step = r.step();
  ASSERT_EQ(step.size(), 50u);
  for (size_t id = 0; id < step.size(); ++id) {
    EXPECT_EQ(step[id].sim_group, r.scenario().group_of(static_cast<dfccl::scenario::Step>(id)));
    EXPECT_EQ(step[id].label, r.scenario().collective_name(static_cast<dfccl::scenario::Step>(id)));
    EXPECT_EQ(step[id].bytes, 64u);
  }
  // Members and ranks in the group (the communicator's rank order is the world rank order).
  EXPECT_EQ(r.rank_in_group(3, 0), 0);  // g3 = {0, 3}
  EXPECT_EQ(r.rank_in_group(3, 3), 1);
  EXPECT_EQ(r.rank_in_group(3, 1), -1);
  EXPECT_EQ(r.group_name(3), "g3(g:0,3)");
  EXPECT_EQ(r.group_kind(3), "g");

  // Every rank's program of many trials: exactly Scenario::program, then WaitAll.
  int64_t disordered = 0, syncs = 0;
  for (uint64_t t = 0; t < 200; ++t) {
    replay::Replay::TrialStats sum;
    for (int rank = 0; rank < 4; ++rank) {
      std::vector<dfccl::scenario::Step> want;
      r.scenario().program(rank, t, want);
      auto p = r.program(rank, t);
      ASSERT_EQ(p.ops.size(), want.size() + 1);
      for (size_t i = 0; i < want.size(); ++i) {
        if (want[i] == dfccl::scenario::kSync) {
          EXPECT_EQ(p.ops[i].kind, program::OpKind::DeviceSync);
        } else {
          EXPECT_EQ(p.ops[i].kind, program::OpKind::Submit);
          EXPECT_EQ(p.ops[i].entry, want[i]);
        }
      }
      EXPECT_EQ(p.ops.back().kind, program::OpKind::WaitAll);
      auto canon = r.scenario().canonical(rank);
      std::vector<dfccl::scenario::Step> subs;
      for (auto s : want)
        if (s != dfccl::scenario::kSync) subs.push_back(s);
      EXPECT_EQ(p.disordered, !std::equal(subs.begin(), subs.end(), canon.begin(), canon.end()));
      EXPECT_EQ(p.submissions, static_cast<int64_t>(subs.size()));
      EXPECT_EQ(p.syncs + p.submissions, p.steps);
      sum.steps += p.steps;
      sum.syncs += p.syncs;
      sum.disordered_ranks += p.disordered;
      sum.submissions += p.submissions;
    }
    auto st = r.trial_stats(t);
    EXPECT_EQ(st.steps, sum.steps);
    EXPECT_EQ(st.syncs, sum.syncs);
    EXPECT_EQ(st.disordered_ranks, sum.disordered_ranks);
    EXPECT_EQ(st.submissions, r.scenario().num_submissions());
    disordered += st.disordered_ranks;
    syncs += st.syncs;
  }
  EXPECT_GT(disordered, 0);  // disorder 0.01 over 200 trials: some swaps
  EXPECT_GT(syncs, 0);

  auto info = r.info();
  EXPECT_TRUE(info.present);
  EXPECT_EQ(info.ranks, 4);
  EXPECT_EQ(info.groups, 5);
  EXPECT_EQ(info.collectives, 50);
  EXPECT_EQ(info.submissions, 100);
  EXPECT_EQ(info.first_trial, 100);
  EXPECT_EQ(info.layout_spec, "groups:0,1;1,2;2,3;0,3;0,2");
  ASSERT_EQ(info.group_names.size(), 5u);
}
