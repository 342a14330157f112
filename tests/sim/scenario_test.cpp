// The random scenario generator (common/scenario.h): layouts, canonical order, disorder, syncs, determinism.
#include "scenario.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace dfccl::scenario {
namespace {

std::vector<std::vector<int>> groups_of_layout(const Layout& l) { return l.groups; }

TEST(Layout, Megatron2x2x2) {
  const Layout l = Layout::parse("megatron:2x2x2", 5);
  EXPECT_EQ(l.num_ranks, 8);
  const std::vector<std::vector<int>> want = {{0, 1}, {2, 3}, {0, 2}, {1, 3},   // stage 0: tp groups, then dp groups
                                              {4, 5}, {6, 7}, {4, 6}, {5, 7},   // stage 1
                                              {0, 4}, {1, 5}, {2, 6}, {3, 7}};  // pipeline send/recv pairs
  EXPECT_EQ(groups_of_layout(l), want);
  EXPECT_EQ(l.kinds[0], GroupKind::tp);
  EXPECT_EQ(l.kinds[2], GroupKind::dp);
  EXPECT_EQ(l.kinds[8], GroupKind::pp);
  EXPECT_EQ(l.colls, std::vector<int>(12, 5));
  EXPECT_EQ(l.spec, "megatron:2x2x2:tp=5,dp=5,pp=5");
}

TEST(Layout, MegatronCountsAndSingletonGroups) {
  const Layout l = Layout::parse("megatron:4x1x3:tp=7,pp=2", 9);
  EXPECT_EQ(l.num_ranks, 12);
  int tp = 0, dp = 0, pp = 0;
  for (int g = 0; g < l.num_groups(); ++g) {
    if (l.kinds[g] == GroupKind::tp) {
      ++tp;
      EXPECT_EQ(l.colls[g], 7);
    }
    if (l.kinds[g] == GroupKind::dp) ++dp;
    if (l.kinds[g] == GroupKind::pp) {
      ++pp;
      EXPECT_EQ(l.colls[g], 2);
    }
  }
  EXPECT_EQ(tp, 3);  // one per stage
  EXPECT_EQ(dp, 0);  // dp = 1: groups of one rank are omitted
  EXPECT_EQ(pp, 8);  // 2 stage boundaries x 4 tp ranks
}

TEST(Layout, RandomRegular) {
  const Layout a = Layout::parse("random:24x4x3@7", 10);
  const Layout b = Layout::parse("random:24x4x3@7", 10);
  const Layout c = Layout::parse("random:24x4x3@8", 10);
  EXPECT_EQ(a.groups, b.groups);
  EXPECT_NE(a.groups, c.groups);
  EXPECT_EQ(a.num_groups(), 18);
  std::vector<int> per_rank(24, 0);
  for (const auto& g : a.groups) {
    EXPECT_EQ(g.size(), 4u);
    for (int r : g) ++per_rank[r];
  }
  EXPECT_EQ(per_rank, std::vector<int>(24, 3));
}

TEST(Layout, ExplicitAndErrors) {
  const Layout l = Layout::parse("groups:0,1;1-2;2,0", 3);
  EXPECT_EQ(l.num_ranks, 3);
  EXPECT_EQ(l.groups, (std::vector<std::vector<int>>{{0, 1}, {1, 2}, {0, 2}}));
  for (const char* bad : {"megatron:2x2", "megatron:2x2x2:xx=3", "random:10x3x1", "random:8x2", "groups:0",
                          "groups:0,0", "groups:0,a", "ring:8", "nonsense"}) {
    EXPECT_THROW(Layout::parse(bad, 3), std::invalid_argument) << bad;
  }
  try {
    Layout::parse("random:10x3x1", 3);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("random:10x3x1"), std::string::npos) << e.what();
  }
}

TEST(Bernoulli, Thresholds) {
  SplitMix64 rng(1);
  EXPECT_TRUE(Bernoulli(0.0).never());
  EXPECT_FALSE(Bernoulli(1e-18).never());  // floor(1e-18 * 2^64) = 18
  EXPECT_TRUE(Bernoulli(1e-20).never());   // below 2^-64: rounds to never
  const Bernoulli one(1.0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(one.test(rng));
  const Bernoulli half(0.5);
  int hits = 0;
  for (int i = 0; i < 100000; ++i) hits += half.test(rng);
  EXPECT_NEAR(hits / 100000.0, 0.5, 0.01);
  EXPECT_THROW(Bernoulli(-0.1), std::invalid_argument);
  EXPECT_THROW(Bernoulli(1.5), std::invalid_argument);
}

TEST(Scenario, CanonicalIsRoundRobinForEqualCounts) {
  // Rank 1 is in g0 = {0,1} and g1 = {1,2}.
  Scenario s(Layout::parse("groups:0,1;1,2", 3), {});
  const auto c = s.canonical(1);
  std::vector<std::string> names;
  for (Step x : c) names.push_back(s.collective_name(x));
  EXPECT_EQ(names, (std::vector<std::string>{"g0#0", "g1#0", "g0#1", "g1#1", "g0#2", "g1#2"}));
}

TEST(Scenario, CanonicalSpreadsUnequalCounts) {
  // g0 has 1 collective, g1 has 3: keys (2k+1)/(2C) are g0#0: 1/2, g1#0: 1/6, g1#1: 1/2, g1#2: 5/6; ties by group.
  Layout l = Layout::parse("groups:0,1;0,1", 1);
  l.colls = {1, 3};
  Scenario s(l, {});
  std::vector<std::string> names;
  for (Step x : s.canonical(0)) names.push_back(s.collective_name(x));
  EXPECT_EQ(names, (std::vector<std::string>{"g1#0", "g0#0", "g1#1", "g1#2"}));
}

TEST(Scenario, ZeroProbabilitiesGiveTheCanonicalOrder) {
  Scenario s(Layout::parse("megatron:2x2x2", 20), {0.0, 0.0, 99});
  std::vector<Step> prog;
  for (uint64_t trial : {0u, 1u, 17u})
    for (int r = 0; r < s.num_ranks(); ++r) {
      s.program(r, trial, prog);
      const auto c = s.canonical(r);
      EXPECT_EQ(prog, std::vector<Step>(c.begin(), c.end()));
    }
}

// Every rank's program holds each collective of its groups exactly once, keeps each group's order, and nothing else.
void check_program_properties(const Scenario& s, uint64_t trials) {
  std::vector<Step> prog;
  for (uint64_t t = 0; t < trials; ++t) {
    for (int r = 0; r < s.num_ranks(); ++r) {
      s.program(r, t, prog);
      std::multiset<Step> seen;
      std::map<int, int> next_k;
      for (Step x : prog) {
        if (x == kSync) continue;
        seen.insert(x);
        const int g = s.group_of(x);
        EXPECT_EQ(s.index_in_group(x), next_k[g]++) << "group order broken, rank " << r << " trial " << t;
      }
      std::multiset<Step> want;
      for (int g : s.groups_of(r))
        for (int k = 0; k < s.layout().colls[g]; ++k) want.insert(s.collective_id(g, k));
      ASSERT_EQ(seen, want) << "rank " << r << " trial " << t;
    }
  }
}

TEST(Scenario, EveryCollectiveExactlyOnce) {
  check_program_properties(Scenario(Layout::parse("random:12x3x3@2", 15), {0.3, 0.2, 5}), 20);
  check_program_properties(Scenario(Layout::parse("megatron:2x2x3:tp=9,dp=4,pp=6", 1), {0.5, 0.5, 6}), 20);
  check_program_properties(Scenario(Layout::parse("groups:0,1;0,1;0,1", 10), {1.0, 1.0, 7}), 3);
}

TEST(Scenario, SyncAndDisorderFrequencies) {
  const double pd = 0.05, ps = 0.1;
  Scenario s(Layout::parse("random:16x4x2@3", 500), {pd, ps, 11});
  std::vector<Step> prog;
  int64_t subs = 0, syncs = 0, out_of_order = 0, decisions = 0;
  for (uint64_t t = 0; t < 10; ++t)
    for (int r = 0; r < s.num_ranks(); ++r) {
      s.program(r, t, prog);
      // The first candidate at each submission is the earliest canonical collective not yet submitted.
      const auto canon = s.canonical(r);
      std::vector<uint8_t> taken(canon.size(), 0);
      std::map<Step, size_t> pos;
      for (size_t i = 0; i < canon.size(); ++i) pos[canon[i]] = i;
      size_t cursor = 0, nsub = 0;
      for (size_t i = 0; i < prog.size(); ++i) {
        if (prog[i] == kSync) {
          ++syncs;
          EXPECT_NE(prog[i - 1], kSync) << "at most one sync after a submission";
          continue;
        }
        ++subs;
        while (taken[cursor]) ++cursor;
        const size_t p = pos[prog[i]];
        // Both groups have collectives left (two candidates) until the last few submissions.
        if (nsub++ + 10 < canon.size()) {
          ++decisions;
          out_of_order += p != cursor;
        }
        taken[p] = 1;
      }
    }
  EXPECT_NEAR(static_cast<double>(syncs) / subs, ps, 0.01);
  // P(pass over the first of 2 candidates) = pd.
  EXPECT_NEAR(static_cast<double>(out_of_order) / decisions, pd, 0.01);
}

TEST(Scenario, DeterministicAndIndependentPerRank) {
  const Layout l = Layout::parse("random:16x4x2@3", 30);
  Scenario a(l, {0.1, 0.1, 42}), b(l, {0.1, 0.1, 42}), other_seed(l, {0.1, 0.1, 43});
  Programs all;
  a.programs(5, all);
  std::vector<Step> one, two;
  int differ_trial = 0, differ_seed = 0;
  for (int r = 0; r < l.num_ranks; ++r) {
    b.program(r, 5, one);
    EXPECT_EQ(std::vector<Step>(all.rank(r).begin(), all.rank(r).end()), one);  // same as generating all ranks
    a.program(r, 6, two);
    differ_trial += one != two;
    other_seed.program(r, 5, two);
    differ_seed += one != two;
  }
  EXPECT_GT(differ_trial, 8);
  EXPECT_GT(differ_seed, 8);
}

// The generator is a contract with the harness (it replays the same programs): pin its output.
TEST(Scenario, PinnedOutput) {
  Scenario s(Layout::parse("groups:0,1;0,1;1,2", 4), {0.25, 0.25, 2024});
  Programs p;
  s.programs(3, p);
  std::string text;
  for (int r = 0; r < s.num_ranks(); ++r) {
    text += 'r';
    text += std::to_string(r);
    text += ':';
    for (Step x : p.rank(r)) {
      text += ' ';
      text += x == kSync ? std::string("S") : s.collective_name(x);
    }
    text += '\n';
  }
  EXPECT_EQ(text, "r0: g0#0 g1#0 S g0#1 g1#1 g0#2 g0#3 g1#2 g1#3\n"
                  "r1: g0#0 g1#0 g2#0 S g0#1 g1#1 g0#2 g2#1 g1#2 g2#2 S g0#3 g2#3 S g1#3 S\n"
                  "r2: g2#0 S g2#1 g2#2 g2#3\n");
}

}  // namespace
}  // namespace dfccl::scenario
