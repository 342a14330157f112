// Execution models and the exact deadlock detector (sim/model.h): hand-built cases with known answers, the cycle
// report, a naive reference implementation of the model semantics, and implications between the models.
#include "model.h"

#include <gtest/gtest.h>

#include <deque>
#include <set>

namespace dfccl::sim {
namespace {

const ModelSpec A{Model::queue, 0}, B{Model::stream, 0}, D{Model::dfccl, 0};
ModelSpec C(int r) { return {Model::stream_limit, r}; }

// Hand-built programs in terms of (group, k) pairs; S is a sync.
struct Hand {
  Scenario s;
  explicit Hand(const char* layout, int colls = 1) : s(Layout::parse(layout, colls), {}) {}
  Step c(int g, int k = 0) const { return s.collective_id(g, k); }
  Outcome run(const std::vector<std::vector<Step>>& progs, ModelSpec m) const {
    Engine e(s);
    return e.run(Programs::from(progs), m, true);
  }
};
constexpr Step S = kSync;

TEST(Models, TwoRankCrossOrder) {
  Hand h("groups:0,1;0,1");
  const Step a = h.c(0), b = h.c(1);
  const std::vector<std::vector<Step>> cross = {{a, b}, {b, a}};
  const std::vector<std::vector<Step>> cross_sync = {{a, S, b}, {b, S, a}};

  // (a) one queue per GPU: each GPU's head waits for the other's.
  auto o = h.run(cross, A);
  EXPECT_TRUE(o.deadlock);
  EXPECT_EQ(o.completed, 0);
  EXPECT_EQ(o.stuck_ranks, 2);
  ASSERT_TRUE(o.cycle);
  EXPECT_EQ(o.cycle->ranks(), (std::vector<int>{0, 1}));
  EXPECT_EQ(o.cycle->edges[0].collective, a);
  EXPECT_EQ(o.cycle->edges[0].kind, WaitKind::queue_head);
  EXPECT_EQ(o.cycle->edges[1].collective, b);

  // (b) one stream per communicator: no deadlock without a sync, a deadlock with one on each side.
  o = h.run(cross, B);
  EXPECT_FALSE(o.deadlock);
  EXPECT_EQ(o.completed, 2);
  EXPECT_FALSE(o.cycle);
  o = h.run(cross_sync, B);
  EXPECT_TRUE(o.deadlock);
  ASSERT_TRUE(o.cycle);
  EXPECT_EQ(o.cycle->edges.size(), 2u);
  EXPECT_EQ(o.cycle->edges[0].kind, WaitKind::sync);
  // One sync is not enough: the other rank submits both collectives.
  EXPECT_FALSE(h.run({{a, S, b}, {b, a}}, B).deadlock);
  EXPECT_FALSE(h.run({{a, b}, {b, S, a}}, B).deadlock);

  // (c) with R resident collectives: R = 1 behaves as (a), R = 2 as (b).
  o = h.run(cross, C(1));
  EXPECT_TRUE(o.deadlock);
  ASSERT_TRUE(o.cycle);
  EXPECT_EQ(o.cycle->edges[0].kind, WaitKind::slot);
  EXPECT_FALSE(h.run(cross, C(2)).deadlock);
  EXPECT_TRUE(h.run(cross_sync, C(2)).deadlock);

  // (d) DFCCL: never.
  EXPECT_FALSE(h.run(cross, D).deadlock);
  o = h.run(cross_sync, D);
  EXPECT_FALSE(o.deadlock);
  EXPECT_EQ(o.completed, 2);
}

TEST(Models, SameOrderNeverDeadlocks) {
  Hand h("groups:0,1;0,1", 2);
  const std::vector<std::vector<Step>> same = {{h.c(0, 0), S, h.c(1, 0), h.c(0, 1), S, h.c(1, 1), S},
                                               {h.c(0, 0), h.c(1, 0), S, h.c(0, 1), h.c(1, 1)}};
  for (ModelSpec m : {A, B, C(1), C(2), D}) {
    const auto o = h.run(same, m);
    EXPECT_FALSE(o.deadlock) << m.name();
    EXPECT_EQ(o.completed, 4) << m.name();
  }
}

TEST(Models, QueueSyncWaitsForTheQueue) {
  // (a): rank 0's sync waits until g0#0 completed, which needs rank 1 to reach it: rank 1 gets there after g1#0,
  // which needs rank 2. No cycle: everything completes.
  Hand h("groups:0,1;1,2");
  const auto o = h.run({{h.c(0), S}, {h.c(1), h.c(0)}, {S, h.c(1)}}, A);
  EXPECT_FALSE(o.deadlock);
  EXPECT_EQ(o.completed, 2);
}

TEST(Models, ThreeRankCycleIsReported) {
  // g0 = {0,1}, g1 = {1,2}, g2 = {0,2}; each rank starts with a different group: 0 -> 1 -> 2 -> 0.
  Hand h("groups:0,1;1,2;0,2");
  const Step g0 = h.c(0), g1 = h.c(1), g2 = h.c(2);
  auto o = h.run({{g0, g2}, {g1, g0}, {g2, g1}}, A);
  ASSERT_TRUE(o.deadlock);
  ASSERT_TRUE(o.cycle);
  const auto& e = o.cycle->edges;
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(o.cycle->ranks(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(e[0].to, 1);
  EXPECT_EQ(e[0].collective, g0);
  EXPECT_EQ(e[1].to, 2);
  EXPECT_EQ(e[1].collective, g1);
  EXPECT_EQ(e[2].to, 0);
  EXPECT_EQ(e[2].collective, g2);
  EXPECT_EQ(o.cycle->describe(h.s),
            "3 ranks: rank 0 -(queue head: g0#0 g0(g:0,1))-> rank 1 -(queue head: g1#0 g1(g:1,2))-> rank 2 "
            "-(queue head: g2#0 g2(g:0,2))-> rank 0");
  EXPECT_EQ(o.cycle->describe(h.s, 1),
            "3 ranks: rank 0 -(queue head: g0#0 g0(g:0,1))-> rank 1 -> ... (2 more hops) -> rank 0");

  // The same cycle through syncs in (b).
  o = h.run({{g0, S, g2}, {g1, S, g0}, {g2, S, g1}}, B);
  ASSERT_TRUE(o.deadlock);
  ASSERT_TRUE(o.cycle);
  EXPECT_EQ(o.cycle->ranks(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(o.cycle->edges[0].kind, WaitKind::sync);
  // Two of the three syncs are not enough.
  EXPECT_FALSE(h.run({{g0, S, g2}, {g1, S, g0}, {g2, g1}}, B).deadlock);
}

TEST(Models, PartialDeadlockCountsStuckRanksAndCompletedCollectives) {
  // Ranks 0 and 1 cross; ranks 2 and 3 complete their three collectives.
  Hand h("groups:0,1;0,1;2,3", 3);
  const auto o = h.run({{h.c(0, 0), h.c(1, 0)},
                        {h.c(1, 0), h.c(0, 0)},
                        {h.c(2, 0), h.c(2, 1), h.c(2, 2)},
                        {h.c(2, 0), S, h.c(2, 1), h.c(2, 2)}},
                       A);
  EXPECT_TRUE(o.deadlock);
  EXPECT_EQ(o.stuck_ranks, 2);
  EXPECT_EQ(o.completed, 3);
}

TEST(Models, FindCycleOnGraphs) {
  EXPECT_FALSE(Engine::find_cycle(3, {{0, 1, 0, WaitKind::sync}, {1, 2, 0, WaitKind::sync}}));
  auto c = Engine::find_cycle(
      4, {{0, 1, 0, WaitKind::sync}, {1, 2, 0, WaitKind::sync}, {2, 3, 0, WaitKind::sync}, {3, 1, 0, WaitKind::sync}});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->ranks(), (std::vector<int>{1, 2, 3}));
  c = Engine::find_cycle(2, {{1, 1, 0, WaitKind::sync}});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->ranks(), (std::vector<int>{1}));
}

// A naive, independent implementation of the four models: sweep over all collectives and ranks until nothing moves.
struct Reference {
  bool deadlock;
  int64_t completed;
};
Reference reference(const Scenario& s, const Programs& p, ModelSpec m) {
  const int n = s.num_ranks();
  std::vector<size_t> pc(n, 0);
  std::vector<std::deque<Step>> queue(n);    // (a)
  std::vector<std::set<Step>> submitted(n);  // submitted collectives per rank
  std::set<Step> completed;
  auto pending = [&](int r) {
    int k = 0;
    for (Step x : submitted[r]) k += !completed.count(x);
    return k;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (Step c = 0; c < s.num_collectives(); ++c) {
      if (completed.count(c)) continue;
      bool all = true;
      for (int r : s.members(s.group_of(c)))
        all &= m.model == Model::queue ? (!queue[r].empty() && queue[r].front() == c) : submitted[r].count(c) > 0;
      if (!all) continue;
      completed.insert(c);
      if (m.model == Model::queue)
        for (int r : s.members(s.group_of(c))) queue[r].pop_front();
      moved = true;
    }
    for (int r = 0; r < n; ++r) {
      const auto prog = p.rank(r);
      if (pc[r] == prog.size()) continue;
      const Step x = prog[pc[r]];
      bool ok = true;
      if (x == kSync) {
        if (m.model == Model::queue) ok = queue[r].empty();
        if (m.model == Model::stream || m.model == Model::stream_limit) ok = pending(r) == 0;
      } else if (m.model == Model::stream_limit) {
        ok = pending(r) < m.limit;
      }
      if (!ok) continue;
      if (x != kSync) {
        submitted[r].insert(x);
        if (m.model == Model::queue) queue[r].push_back(x);
      }
      ++pc[r];
      moved = true;
    }
  }
  bool stuck = false;
  for (int r = 0; r < n; ++r) stuck |= pc[r] != p.rank(r).size() || pending(r) > 0;
  return {stuck, static_cast<int64_t>(completed.size())};
}

struct RandomCase {
  const char* layout;
  int colls;
  double pd, ps;
};

TEST(Models, MatchTheReferenceImplementation) {
  int deadlocks[4] = {};
  for (const RandomCase rc :
       {RandomCase{"groups:0,1;0,1;1,2;0,2", 4, 0.3, 0.3}, RandomCase{"random:6x3x3@4", 5, 0.2, 0.2},
        RandomCase{"megatron:2x2x2", 4, 0.3, 0.4}, RandomCase{"random:8x4x2@5", 6, 0.1, 0.5}}) {
    Scenario s(Layout::parse(rc.layout, rc.colls), {rc.pd, rc.ps, 77});
    Engine e(s);
    Programs p;
    for (uint64_t t = 0; t < 150; ++t) {
      s.programs(t, p);
      int i = 0;
      for (ModelSpec m : {A, B, C(1), C(2), D}) {
        const auto o = e.run(p, m, true);
        const auto ref = reference(s, p, m);
        ASSERT_EQ(o.deadlock, ref.deadlock) << rc.layout << " trial " << t << " model " << m.name();
        ASSERT_EQ(o.completed, ref.completed) << rc.layout << " trial " << t << " model " << m.name();
        if (o.deadlock) {
          ASSERT_TRUE(o.cycle) << "stuck without a cycle: " << m.name();
        }
        if (i < 4) deadlocks[i] += o.deadlock;
        ++i;
      }
    }
  }
  // The cases exercise deadlocks in every blocking model.
  EXPECT_GT(deadlocks[0], 20);
  EXPECT_GT(deadlocks[1], 5);
  EXPECT_GT(deadlocks[2], 20);
  EXPECT_GT(deadlocks[3], 5);
}

// Each edge of a reported cycle is a real wait: the waiting rank is stuck and the collective is one of its group's.
void check_cycle(const Scenario& s, const Cycle& c) {
  ASSERT_FALSE(c.edges.empty());
  for (size_t i = 0; i < c.edges.size(); ++i) {
    const auto& e = c.edges[i];
    EXPECT_EQ(e.to, c.edges[(i + 1) % c.edges.size()].from);
    const auto m = s.members(s.group_of(e.collective));
    EXPECT_NE(std::find(m.begin(), m.end(), e.from), m.end());
    EXPECT_NE(std::find(m.begin(), m.end(), e.to), m.end());
  }
}

TEST(Models, ImplicationsBetweenModels) {
  // On the same programs: (b) deadlocks => (a) and (c) deadlock; (c, R) deadlocks => (c, R-1) deadlocks;
  // (c, 1) == (a); (d) never; no disorder => no deadlock anywhere; no sync => (b) never.
  Scenario s(Layout::parse("random:16x4x3@9", 30), {0.05, 0.05, 3});
  Scenario calm(Layout::parse("random:16x4x3@9", 30), {0.0, 0.3, 3});
  Scenario nosync(Layout::parse("random:16x4x3@9", 30), {0.2, 0.0, 3});
  Engine e(s), ec(calm), en(nosync);
  Programs p;
  int da = 0, db = 0;
  for (uint64_t t = 0; t < 300; ++t) {
    s.programs(t, p);
    const bool a = e.run(p, A, false).deadlock;
    const auto ob = e.run(p, B, true);
    const bool b = ob.deadlock;
    if (b) check_cycle(s, *ob.cycle);
    bool c_prev = a;
    EXPECT_EQ(e.run(p, C(1), false).deadlock, a) << "trial " << t;
    for (int r = 2; r <= 4; ++r) {
      const bool c = e.run(p, C(r), false).deadlock;
      EXPECT_TRUE(!c || c_prev) << "(c, R=" << r << ") deadlocks but not R-1, trial " << t;
      EXPECT_TRUE(!b || c) << "(b) deadlocks but not (c, R=" << r << "), trial " << t;
      c_prev = c;
    }
    EXPECT_TRUE(!b || a) << "(b) deadlocks but not (a), trial " << t;
    EXPECT_FALSE(e.run(p, D, false).deadlock);
    da += a;
    db += b;
    calm.programs(t, p);
    for (ModelSpec m : {A, B, C(1), C(2), D}) EXPECT_FALSE(ec.run(p, m, false).deadlock) << m.name();
    nosync.programs(t, p);
    EXPECT_FALSE(en.run(p, B, false).deadlock);
    EXPECT_FALSE(en.run(p, D, false).deadlock);
  }
  EXPECT_GT(da, db);
  EXPECT_GT(db, 0);
}

TEST(Models, SyncsNeverChangeTheQueueModel) {
  // In (a) a collective reaches the head of the queue only after everything submitted before it completed, so a sync
  // (wait until the queue is empty) adds no dependency: the outcome is that of the same program without syncs.
  Scenario s(Layout::parse("random:12x3x3@4", 20), {0.005, 0.3, 8});
  Engine e(s);
  Programs p, no_sync;
  int deadlocks = 0;
  for (uint64_t t = 0; t < 200; ++t) {
    s.programs(t, p);
    std::vector<std::vector<Step>> stripped;
    for (int r = 0; r < s.num_ranks(); ++r) {
      stripped.emplace_back();
      for (Step x : p.rank(r))
        if (x != kSync) stripped.back().push_back(x);
    }
    no_sync = Programs::from(stripped);
    const auto with = e.run(p, A, false), without = e.run(no_sync, A, false);
    EXPECT_EQ(with.deadlock, without.deadlock) << "trial " << t;
    EXPECT_EQ(with.completed, without.completed) << "trial " << t;
    deadlocks += with.deadlock;
  }
  EXPECT_GT(deadlocks, 10);
  EXPECT_LT(deadlocks, 190);
}

TEST(Models, ParseNames) {
  EXPECT_EQ(ModelSpec::parse("a", 0).model, Model::queue);
  EXPECT_EQ(ModelSpec::parse("stream", 0).model, Model::stream);
  EXPECT_EQ(ModelSpec::parse("c", 3).limit, 3);
  EXPECT_EQ(ModelSpec::parse("stream-limit", 3).name(), "stream-limit(R=3)");
  EXPECT_EQ(ModelSpec::parse("dfccl", 0).letter(), "d");
  EXPECT_THROW(ModelSpec::parse("c", 0), std::invalid_argument);
  EXPECT_THROW(ModelSpec::parse("e", 0), std::invalid_argument);
}

}  // namespace
}  // namespace dfccl::sim
