// The multi-threaded runner, Wilson intervals, plans and the HDF5 output of dfccl-sim.
#include "runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "h5_table.h"
#include "output.h"
#include "plan.h"

namespace dfccl::sim {
namespace {

TEST(Wilson, KnownValues) {
  auto ci = wilson(5, 100);
  EXPECT_NEAR(ci.lo, 0.021543679, 1e-8);
  EXPECT_NEAR(ci.hi, 0.111750469, 1e-8);
  ci = wilson(0, 10);
  EXPECT_EQ(ci.lo, 0.0);
  EXPECT_NEAR(ci.hi, 0.277532800, 1e-8);
  ci = wilson(10, 10);
  EXPECT_NEAR(ci.lo, 0.722467200, 1e-8);
  EXPECT_EQ(ci.hi, 1.0);
  ci = wilson(70, 1000);
  EXPECT_NEAR(ci.lo, 0.055776364, 1e-8);
  EXPECT_NEAR(ci.hi, 0.087514648, 1e-8);
  ci = wilson(0, 0);
  EXPECT_EQ(ci.lo, 0.0);
  EXPECT_EQ(ci.hi, 1.0);
}

SettingResult run(const Scenario& s, ModelSpec m, int threads, int64_t trials, uint64_t first = 0) {
  RunOptions o;
  o.trials = trials;
  o.threads = threads;
  o.first_trial = first;
  return run_setting(s, m, o);
}

TEST(Runner, IndependentOfThreadCount) {
  Scenario s(Layout::parse("random:16x4x3@2", 40), {0.02, 0.02, 12345});
  for (ModelSpec m : {ModelSpec{Model::queue, 0}, ModelSpec{Model::stream, 0}}) {
    const auto r1 = run(s, m, 1, 400);
    const auto r2 = run(s, m, 2, 400);
    const auto r3 = run(s, m, 3, 400);
    EXPECT_GT(r1.deadlocks, 0) << m.name();
    for (const auto* r : {&r2, &r3}) {
      EXPECT_EQ(r->deadlocks, r1.deadlocks);
      EXPECT_EQ(r->deadlocked, r1.deadlocked);
      EXPECT_EQ(r->completed, r1.completed);
      EXPECT_EQ(r->first_deadlock_trial, r1.first_deadlock_trial);
      EXPECT_EQ(r->first_cycle, r1.first_cycle);
      EXPECT_EQ(r->mean_stuck_ranks, r1.mean_stuck_ranks);
    }
    EXPECT_FALSE(r1.first_cycle.empty());
    EXPECT_EQ(r1.deadlocked[r1.first_deadlock_trial], 1);
    for (int64_t t = 0; t < r1.first_deadlock_trial; ++t) EXPECT_EQ(r1.deadlocked[t], 0);
    EXPECT_DOUBLE_EQ(r1.rate, static_cast<double>(r1.deadlocks) / 400);
  }
}

TEST(Runner, TrialRangesCompose) {
  Scenario s(Layout::parse("megatron:2x2x2", 20), {0.05, 0.05, 9});
  const ModelSpec a{Model::queue, 0};
  const auto all = run(s, a, 2, 200);
  const auto lo = run(s, a, 2, 100, 0);
  const auto hi = run(s, a, 1, 100, 100);
  EXPECT_EQ(all.deadlocks, lo.deadlocks + hi.deadlocks);
  std::vector<uint8_t> joined = lo.deadlocked;
  joined.insert(joined.end(), hi.deadlocked.begin(), hi.deadlocked.end());
  EXPECT_EQ(joined, all.deadlocked);
  EXPECT_GT(all.deadlocks, 0);
}

TEST(Runner, DfcclNeverDeadlocks) {
  Scenario s(Layout::parse("random:32x4x3@3", 50), {0.2, 0.2, 4});
  const auto r = run(s, {Model::dfccl, 0}, 2, 200);
  EXPECT_EQ(r.deadlocks, 0);
  EXPECT_EQ(r.mean_completed_fraction, 1.0);
}

std::string temp_path(const char* name) {
  return std::string(::testing::TempDir()) + name + std::to_string(::getpid());
}

TEST(Plan, TomlFileAndExpansion) {
  const std::string path = temp_path("plan.toml");
  {
    std::ofstream f(path);
    f << "seed = 7\nthreads = 2\n"
         "[[sweep]]\nname = 'x'\nmodels = ['a', 'c']\nlimits = [1, 2]\nlayouts = ['random:8x2x2', 'megatron:2x2x2']\n"
         "colls = [10]\ndisorder = [0.1, 0.2]\nsync = [0.3, 0.4]\nzip = true\ntrials = 5\n"
         "[[sweep]]\nmodels = 'b'\nlayouts = 'groups:0,1'\ndisorder = [0.1, 0.2]\nsync = [0.3, 0.4]\n";
  }
  const Plan p = Plan::from_toml_file(path);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.threads, 2);
  ASSERT_EQ(p.blocks.size(), 2u);
  EXPECT_TRUE(p.blocks[0].zip);
  const auto settings = expand(p);
  // Block 0: 2 layouts x 1 colls x 2 zipped pairs x (a + c with 2 limits) = 12; block 1: 4 pairs x b = 4.
  ASSERT_EQ(settings.size(), 16u);
  EXPECT_EQ(settings[0].block, "x");
  EXPECT_EQ(settings[0].model.model, Model::queue);
  EXPECT_EQ(settings[1].model.limit, 1);
  EXPECT_EQ(settings[2].model.limit, 2);
  EXPECT_EQ(settings[3].p_disorder, 0.2);
  EXPECT_EQ(settings[3].p_sync, 0.4);
  EXPECT_EQ(settings[12].trials, 1000);
  // The resolved plan reads back to the same settings.
  {
    std::ofstream f(path);
    f << p.to_toml();
  }
  EXPECT_EQ(expand(Plan::from_toml_file(path)).size(), 16u);
  {
    std::ofstream f(path);
    f << "[[sweep]]\nmodles = ['a']\n";
  }
  EXPECT_THROW(Plan::from_toml_file(path), std::runtime_error);
  std::remove(path.c_str());
}

TEST(Output, Hdf5Columns) {
  Plan plan;
  plan.blocks.push_back({});
  plan.blocks[0].models = {"a", "d"};
  plan.blocks[0].layouts = {"groups:0,1;0,1"};
  plan.blocks[0].colls = {1};
  plan.blocks[0].disorder = {0.5};
  plan.blocks[0].sync = {0.0};
  plan.blocks[0].trials = 50;
  std::vector<Row> rows;
  for (const auto& st : expand(plan)) {
    Scenario s(Layout::parse(st.layout, st.colls), {st.p_disorder, st.p_sync, 1});
    Row row;
    row.setting = st;
    row.layout_spec = s.layout().spec;
    row.ranks = s.num_ranks();
    row.result = run(s, st.model, 1, st.trials);
    rows.push_back(row);
  }
  const std::string path = temp_path("sim.h5");
  h5::RunIdentity meta{"0.1.0", "abc", "2024-01-01T00:00:00Z", "host", "dfccl-sim x", plan.to_toml()};
  write_hdf5(path, meta, rows, true);
  auto f = h5::File::open_read(path);
  EXPECT_EQ(f.attr_string("/", "tool"), "dfccl-sim");
  EXPECT_EQ(f.attr_string("/", "git_revision"), "abc");
  EXPECT_EQ(f.read_strings("/sim/settings", "model"), (std::vector<std::string>{"a", "d"}));
  const auto deadlocks = f.read_ints("/sim/settings", "deadlocks");
  ASSERT_EQ(deadlocks.size(), 2u);
  EXPECT_GT(deadlocks[0], 0);  // (a) deadlocks on half of the trials (a 2-rank cross)
  EXPECT_EQ(deadlocks[1], 0);
  EXPECT_NEAR(f.read_doubles("/sim/settings", "rate")[0], deadlocks[0] / 50.0, 1e-12);
  EXPECT_EQ(f.read_ints("/sim/trials", "trial").size(), 100u);
  const auto dl = f.read_ints("/sim/trials", "deadlocked");
  int64_t sum = 0;
  for (int i = 0; i < 50; ++i) sum += dl[i];
  EXPECT_EQ(sum, deadlocks[0]);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dfccl::sim
