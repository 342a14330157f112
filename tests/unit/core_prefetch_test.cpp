// The descriptor prefetcher (kernels/core/scheduler.h, prefetch_descs) on the host executor, against a host side
// written here the way Engine::submit posts: the descriptor, then its post log entry (types.h, post_log_entry), then,
// for a host-ordered submission (DFCCL_NO_STREAM), its doorbell (EngineHost::host_ring). The prefetcher runs on a
// thread of its own; the test checks which copies it publishes (EngineGlobal::pre_desc and pre_ready), over several
// laps of the log, after falling more than a lap behind, and for a slot that already holds a later submission; and
// that it forwards every host-ordered doorbell into its ring (EngineGlobal::ring), also those stored while it was
// away and those interleaved with stream-ordered postings.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "../../kernels/core/scheduler.h"
#include "../../kernels/host/exec_host.h"

namespace dfccl::test {
namespace {

using namespace dfccl::core;

struct Prefetcher {
  std::unique_ptr<EngineGlobal> g = std::make_unique<EngineGlobal>();
  std::unique_ptr<EngineHost> h = std::make_unique<EngineHost>();
  std::thread th;
  u64 posted = 0;  // the host's posting count (Engine's seq_)

  Prefetcher() {
    std::memset(static_cast<void*>(g.get()), 0, sizeof(EngineGlobal));
    std::memset(static_cast<void*>(h.get()), 0, sizeof(EngineHost));
  }
  ~Prefetcher() { stop(); }
  void start() {
    __atomic_store_n(&g->quit, u64(0), __ATOMIC_RELEASE);
    EngineView ev{};
    ev.g = g.get();
    ev.h = h.get();
    ev.p.epoch = 1;
    th = std::thread([ev] { prefetch_descs<host::HostExec>(ev); });
  }
  void stop() {
    if (!th.joinable()) return;
    __atomic_store_n(&g->quit, u64(1), __ATOMIC_RELEASE);
    th.join();
  }
  // Posts the next submission on `slot` as Engine::submit does; returns its tag.
  u64 post(u32 slot) {
    const u64 n = posted++;
    Desc d{};
    d.seq = n + 1;
    d.count = 1000 + n;
    h->desc[slot] = d;
    const u64 tag = submission_tag(0, ring_entry(n, slot));  // ring 0, position n
    __atomic_store_n(&h->post_log[n % kMaxSlots], post_log_entry(n, tag), __ATOMIC_RELEASE);
    return tag;
  }
  // Posts the next host-ordered submission on `slot` (ring kHostRing, its next position), then stores its doorbell.
  static constexpr u32 kHostRing = 5;
  u64 host_posted = 0;  // host-ordered submissions (Engine's host_posted_), = ring kHostRing's next position
  u64 post_host(u32 slot) {
    const u64 n = posted++, pos = host_posted++;
    Desc d{};
    d.seq = n + 1;
    d.count = 1000 + n;
    h->desc[slot] = d;
    const u64 tag = submission_tag(kHostRing, ring_entry(pos, slot));
    __atomic_store_n(&h->post_log[n % kMaxSlots], post_log_entry(n, tag), __ATOMIC_RELEASE);
    __atomic_store_n(&h->host_ring[pos % kMaxSlots], post_log_entry(pos, tag), __ATOMIC_RELEASE);
    return tag;
  }
  // Waits up to 5 s for the doorbell of host-ordered position pos, on `slot`, in ring kHostRing.
  bool rung(u64 pos, u32 slot) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (__atomic_load_n(&g->ring[kHostRing][pos % kRingEntries], __ATOMIC_ACQUIRE) != ring_entry(pos, slot)) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(10));
    }
    return true;
  }
  // Waits up to 5 s for the prefetcher's copy of the submission `tag` in `slot`.
  bool copied(u32 slot, u64 tag) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (__atomic_load_n(&g->pre_ready[slot], __ATOMIC_ACQUIRE) != tag) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(10));
    }
    return true;
  }
};

TEST(CorePrefetch, LapOfAPosting) {
  EXPECT_EQ(post_log_lap(0), 1u);
  EXPECT_EQ(post_log_lap(kMaxSlots - 1), 1u);
  EXPECT_EQ(post_log_lap(kMaxSlots), 2u);
  EXPECT_EQ(post_log_lap(u64(255) * kMaxSlots), 0u);  // mod 256: only after every entry was written
  const u64 tag = submission_tag(kMaxRings - 1, ring_entry(0xfffffffe, kMaxSlots - 1));  // the widest tag Engine makes
  EXPECT_EQ(post_log_entry(3 * kMaxSlots, tag) & kPostTagMask, tag);
  EXPECT_EQ(post_log_entry(3 * kMaxSlots, tag) >> 56, 4u);
}

TEST(CorePrefetch, ResumesAfterFallingLapsBehind) {
  Prefetcher pf;
  pf.start();
  u64 tag = pf.post(3);
  ASSERT_TRUE(pf.copied(3, tag));
  pf.stop();
  for (u64 n = 0; n < 2 * kMaxSlots + 100; ++n) tag = pf.post(u32(n % 11));
  const u32 last_slot = u32((2 * kMaxSlots + 99) % 11);
  pf.start();
  ASSERT_TRUE(pf.copied(last_slot, tag)) << "the latest posting was not copied after the prefetcher fell behind";
  EXPECT_EQ(pf.g->pre_desc[last_slot].seq, pf.posted);
  // And it goes on with new postings.
  tag = pf.post(5);
  ASSERT_TRUE(pf.copied(5, tag));
  EXPECT_EQ(pf.g->pre_desc[5].seq, pf.posted);
}

// A slot whose descriptor already belongs to a later submission is not copied under the earlier one's tag.
TEST(CorePrefetch, SkipsASlotHoldingALaterSubmission) {
  Prefetcher pf;
  const u64 old_tag = pf.post(2);  // posting 0 on slot 2 ...
  pf.post(4);
  pf.h->desc[2].seq = 99;          // ... completed, and slot 2 reused by a later submission
  const u64 tag = pf.post(6);
  pf.start();
  ASSERT_TRUE(pf.copied(6, tag));
  EXPECT_NE(__atomic_load_n(&pf.g->pre_ready[2], __ATOMIC_ACQUIRE), old_tag);
  EXPECT_EQ(pf.g->pre_desc[2].seq, 0u);
}

TEST(CorePrefetch, TagsRingAndEntry) {
  const u64 entry = ring_entry(0xfffffffe, kMaxSlots - 1);
  EXPECT_EQ(tag_ring(submission_tag(kMaxRings - 1, entry)), kMaxRings - 1);
  EXPECT_EQ(tag_ring(submission_tag(0, entry)), 0u);
  EXPECT_EQ(tag_entry(submission_tag(kMaxRings - 1, entry)), entry);
}

// Every submission of three laps of the log is copied, each before the next is posted (the dependent loop); every
// other one is host-ordered, and its doorbell reaches its ring position too (three laps of EngineHost::host_ring
// take six of the log).
TEST(CorePrefetch, CopiesEveryPostingAndRingsEveryHostOrderedOne) {
  Prefetcher pf;
  pf.start();
  for (u64 n = 0; n < 6 * kMaxSlots + 10; ++n) {
    const u32 slot = u32(n % 7);
    const bool host_ordered = n % 2 == 1;
    const u64 tag = host_ordered ? pf.post_host(slot) : pf.post(slot);
    ASSERT_TRUE(pf.copied(slot, tag)) << "posting " << n << ": no copy within 5 s";
    ASSERT_EQ(pf.g->pre_desc[slot].seq, n + 1);
    ASSERT_EQ(pf.g->pre_desc[slot].count, 1000 + n);
    if (host_ordered) {
      ASSERT_TRUE(pf.rung(pf.host_posted - 1, slot)) << "posting " << n << ": no doorbell within 5 s";
    }
  }
  for (u32 r = 1; r < kMaxRings; ++r)  // ring 0: the stream-ordered postings' (rung by their streams, not here)
    if (r != Prefetcher::kHostRing) {
      ASSERT_EQ(pf.g->ring[r][0], 0u) << "ring " << r;
    }
  EXPECT_EQ(pf.g->ring[0][0], 0u);
}

// Doorbells stored while the prefetcher is away (the daemon left) are forwarded, all of them, when it comes back;
// interleaved with stream-ordered postings, whose doorbells it must not write.
TEST(CorePrefetch, ForwardsDoorbellsStoredWhileAwayAndInterleaved) {
  Prefetcher pf;
  pf.start();
  pf.post_host(1);
  ASSERT_TRUE(pf.rung(0, 1));
  pf.stop();
  for (u32 k = 0; k < 600; ++k) {  // fewer than kMaxSlots outstanding, as the engine's slot limit guarantees
    if (k % 3 == 0) pf.post(u32(100 + k % 50));
    pf.post_host(u32(200 + k % 70));
  }
  pf.start();
  for (u32 k = 0; k < 600; ++k)
    ASSERT_TRUE(pf.rung(1 + k, u32(200 + k % 70))) << "doorbell " << 1 + k << " stored while away was not forwarded";
  EXPECT_EQ(pf.g->ring[0][0], 0u);  // the stream-ordered postings' ring: rung by their streams, not here
  pf.stop();
  EXPECT_EQ(pf.g->host_next, 601u);
}

}  // namespace
}  // namespace dfccl::test
