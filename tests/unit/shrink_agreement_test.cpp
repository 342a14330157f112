// The shrink's agreement (lib/src/comm/shrink_agreement.h; DESIGN invariant 10) with ranks as threads over one zeroed
// area: every caller returns the same set; it holds every kept rank's proposal and every rank gone before it
// arrived; a rank that goes during the agreement is added; a live rank that never calls is named by a timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/shrink_agreement.h"
#include "util/error.h"

namespace {

using dfccl::ShrinkAgreement;
using Set = std::vector<uint8_t>;

Set set_of(int nranks, std::initializer_list<int> ranks) {
  Set s(size_t(nranks), 0);
  for (int r : ranks) s[size_t(r)] = 1;
  return s;
}

// Runs agree(epoch 0) on the ranks whose proposal is given (the others never call); gone(r) is read by every caller.
// Returns each caller's set (empty for the others).
std::vector<Set> run(int nranks, const std::vector<std::pair<int, Set>>& callers, std::function<bool(int)> gone,
                     int timeout_ms = 5000) {
  std::vector<uint64_t> area(ShrinkAgreement::bytes(nranks) / 8 + 1, 0);
  std::vector<Set> out(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (const auto& [rank, proposal] : callers)
    threads.emplace_back([&, rank, proposal] {
      ShrinkAgreement a(area.data(), nranks, rank);
      out[size_t(rank)] = a.agree(0, proposal, gone, timeout_ms);
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(ShrinkAgreement, DifferentFindingsGiveOneUnion) {
  // Rank 2 is dead; only rank 1 found it; rank 3 found nothing yet.
  const auto out = run(4, {{0, set_of(4, {})}, {1, set_of(4, {2})}, {3, set_of(4, {})}}, [](int r) { return r == 2; });
  for (int r : {0, 1, 3}) EXPECT_EQ(out[size_t(r)], set_of(4, {2})) << "rank " << r;
}

TEST(ShrinkAgreement, ARankGoneBeforeItCallsIsAddedByEveryCaller) {
  // Nobody proposes rank 3, whose process is gone: the agreement adds it.
  const auto out = run(4, {{0, set_of(4, {})}, {1, set_of(4, {})}, {2, set_of(4, {})}}, [](int r) { return r == 3; });
  for (int r : {0, 1, 2}) EXPECT_EQ(out[size_t(r)], set_of(4, {3})) << "rank " << r;
}

TEST(ShrinkAgreement, ARankThatDiesDuringTheAgreementIsAdded) {
  // Rank 3 is dead; rank 2 is alive (the callers wait for it) and dies 100 ms in without calling.
  std::atomic<bool> two_dead{false};
  const auto t0 = std::chrono::steady_clock::now();  // before the killer's sleep starts: elapsed >= its 100 ms
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    two_dead = true;
  });
  const auto out = run(5, {{0, set_of(5, {3})}, {1, set_of(5, {})}, {4, set_of(5, {3})}},
                       [&](int r) { return r == 3 || (r == 2 && two_dead.load()); });
  killer.join();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100)) << "decided without rank 2";
  for (int r : {0, 1, 4}) EXPECT_EQ(out[size_t(r)], set_of(5, {2, 3})) << "rank " << r;
}

TEST(ShrinkAgreement, AnExcludedCallerGetsTheSetWithItself) {
  // Rank 0 excludes rank 3 (alive, not calling), rank 1 excludes rank 2, which calls: all three return {2, 3}.
  const auto out = run(4, {{0, set_of(4, {3})}, {1, set_of(4, {2})}, {2, set_of(4, {})}}, [](int) { return false; });
  for (int r : {0, 1, 2}) EXPECT_EQ(out[size_t(r)], set_of(4, {2, 3})) << "rank " << r;
}

TEST(ShrinkAgreement, ALiveRankThatNeverCallsIsNamedByTheTimeout) {
  std::vector<uint64_t> area(ShrinkAgreement::bytes(3) / 8 + 1, 0);
  ShrinkAgreement a(area.data(), 3, 0);
  try {
    a.agree(
        0, set_of(3, {1}), [](int) { return false; }, 200);
    FAIL() << "no timeout";
  } catch (const dfccl::Error& e) {
    EXPECT_EQ(e.code(), dfcclTimeout);
    EXPECT_NE(std::string(e.what()).find("ranks [2]"), std::string::npos) << e.what();
  }
}

// Random findings, live ranks accused, deaths before and during the agreement, callers that start at random times
// (an excluded one may come after the decision, with a proposal of its own), two epochs in a row
// (the second with what the first agreed plus a death): every caller of an epoch gets the same set, which holds
// every kept caller's proposal and every rank that was gone before the callers started.
TEST(ShrinkAgreement, RandomFindingsAndDeathsAlwaysAgree) {
  constexpr int kRanks = 6, kTrials = 150;
  std::mt19937 rng(12345);
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<uint64_t> area(ShrinkAgreement::bytes(kRanks) / 8 + 1, 0);
    std::vector<std::atomic<bool>> dead(kRanks);
    Set dead_before(kRanks, 0), later(kRanks, 0);
    std::vector<Set> proposals(kRanks, Set(kRanks, 0));
    for (int r = 0; r < kRanks; ++r) {
      const int fate = int(rng() % 6);
      dead_before[size_t(r)] = fate == 0;
      later[size_t(r)] = fate == 1;  // dies during epoch 0, without calling
      dead[size_t(r)] = fate == 0;
    }
    if (std::count(dead_before.begin(), dead_before.end(), 1) + std::count(later.begin(), later.end(), 1) >= kRanks)
      continue;
    for (int r = 0; r < kRanks; ++r)
      for (int q = 0; q < kRanks; ++q)
        if (q != r && dead_before[size_t(q)] && rng() % 2) proposals[size_t(r)][size_t(q)] = 1;  // some found it
    for (int r = 0; r < kRanks; ++r)  // and some accuse a live rank (a silence, an explicit list)
      if (rng() % 4 == 0) proposals[size_t(r)][rng() % kRanks] = 1;
    std::vector<int> delay(kRanks);
    for (int& d : delay) d = int(rng() % 3000);
    const int death_us = int(rng() % 3000);
    std::vector<Set> got0(kRanks), got1(kRanks);
    std::vector<std::thread> threads;
    auto gone = [&](int r) { return dead[size_t(r)].load(); };
    for (int r = 0; r < kRanks; ++r) {
      if (dead_before[size_t(r)] || later[size_t(r)]) continue;
      threads.emplace_back([&, r] {
        std::this_thread::sleep_for(std::chrono::microseconds(delay[size_t(r)]));
        ShrinkAgreement a(area.data(), kRanks, r);
        got0[size_t(r)] = a.agree(0, proposals[size_t(r)], gone, 5000);
        if (got0[size_t(r)][size_t(r)]) return;
        Set next = got0[size_t(r)];
        next[size_t(kRanks - 1)] = 1;  // epoch 1: everybody also drops the last rank
        got1[size_t(r)] = a.agree(1, next, gone, 5000);
      });
    }
    std::thread killer([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(death_us));
      for (int r = 0; r < kRanks; ++r)
        if (later[size_t(r)]) dead[size_t(r)] = true;
    });
    for (auto& t : threads) t.join();
    killer.join();
    const Set* first = nullptr;
    for (int r = 0; r < kRanks; ++r) {
      if (got0[size_t(r)].empty()) continue;
      if (!first) first = &got0[size_t(r)];
      ASSERT_EQ(got0[size_t(r)], *first) << "trial " << trial << ": rank " << r << " disagrees";
      for (int q = 0; q < kRanks; ++q) {
        EXPECT_TRUE(!dead_before[size_t(q)] || (*first)[size_t(q)]) << "trial " << trial << ": dead rank " << q;
        EXPECT_TRUE(!later[size_t(q)] || (*first)[size_t(q)]) << "trial " << trial << ": rank " << q << " died";
        if (!(*first)[size_t(r)]) {
          EXPECT_TRUE(!proposals[size_t(r)][size_t(q)] || (*first)[size_t(q)])
              << "trial " << trial << ": rank " << r << "'s proposal of " << q << " lost";
        }
      }
    }
    const Set* first1 = nullptr;
    for (int r = 0; r < kRanks; ++r) {
      if (got1[size_t(r)].empty()) continue;
      if (!first1) first1 = &got1[size_t(r)];
      ASSERT_EQ(got1[size_t(r)], *first1) << "trial " << trial << ": epoch 1, rank " << r << " disagrees";
    }
  }
}

}  // namespace
