// The descriptor prefetcher (kernels/core/scheduler/prefetcher.h, prefetch_descs) on the host executor, against a host
// side written here the way Engine::submit posts: the post record with the descriptor (types.h, write_post_record),
// then, for a host-ordered submission (DFCCL_NO_STREAM), its doorbell (EngineHost::host_ring). The prefetcher runs on a
// thread of its own; the test checks which copies it publishes (EngineGlobal::pre_desc and pre_ready), over several
// laps of the log, after falling more than a lap behind, for a record not yet whole (a word of an earlier lap), and
// for a slot posted twice; and that it forwards every host-ordered doorbell into its ring (EngineGlobal::ring), also
// those stored while it was away and those interleaved with stream-ordered postings.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "../../kernels/core/scheduler/prefetcher.h"
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
    const Desc d = desc_of(n);
    h->desc[slot] = d;
    const u64 tag = submission_tag(0, ring_entry(n, slot));  // ring 0, position n
    write_post_record(h->post_log[n % kMaxSlots], n, tag, d);
    return tag;
  }
  // Posting n's descriptor: every field that the copy must carry over set to something of its own.
  static Desc desc_of(u64 n) {
    Desc d;
    std::memset(static_cast<void*>(&d), 0, sizeof(d));  // padding too: copies are compared bytewise
    d.seq = n + 1;
    d.count = 1000 + n;
    d.turn = 7 * n + 3;
    d.priority = int32_t(n % 5) - 2;
    d.comm_gen = ~n;
    return d;
  }
  // Posts the next host-ordered submission on `slot` (ring kHostRing, its next position), then stores its doorbell.
  static constexpr u32 kHostRing = 5;
  u64 host_posted = 0;  // host-ordered submissions (Engine's host_posted_), = ring kHostRing's next position
  u64 post_host(u32 slot) {
    const u64 n = posted++, pos = host_posted++;
    const Desc d = desc_of(n);
    h->desc[slot] = d;
    const u64 tag = submission_tag(kHostRing, ring_entry(pos, slot));
    write_post_record(h->post_log[n % kMaxSlots], n, tag | kPostHostOrdered, d);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&h->host_ring[pos % kMaxSlots], host_ring_entry(pos, tag), __ATOMIC_RELEASE);
    return tag;
  }
  // Waits up to 5 s for the doorbell of host-ordered position pos, on `slot`, in ring kHostRing.
  bool rung(u64 pos, u32 slot) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((__atomic_load_n(&g->ring[kHostRing][pos % kRingEntries], __ATOMIC_ACQUIRE) & ~kRingCopied) !=
           ring_entry(pos, slot)) {
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

TEST(CorePrefetch, LapOfAHostOrderedDoorbellAndFlagOfAPosting) {
  EXPECT_EQ(host_ring_lap(0), 1u);
  EXPECT_EQ(host_ring_lap(kMaxSlots - 1), 1u);
  EXPECT_EQ(host_ring_lap(kMaxSlots), 2u);
  EXPECT_EQ(host_ring_lap(u64(255) * kMaxSlots), 0u);  // mod 256: only after every entry was written
  const u64 tag = submission_tag(kMaxRings - 1, ring_entry(0xfffffffe, kMaxSlots - 1));  // the widest tag Engine makes
  EXPECT_EQ(host_ring_entry(3 * kMaxSlots, tag) & kHostRingTagMask, tag);
  EXPECT_EQ(host_ring_entry(3 * kMaxSlots, tag) >> 56, 4u);
  EXPECT_EQ(tag & kPostHostOrdered, 0u);  // the host-ordered mark is free in every tag
  EXPECT_EQ(entry_flag(0), 1u);           // a zeroed record is no posting
  // The record carries the tag and the descriptor, each word flagged.
  auto rec = std::make_unique<PostRecord>();
  const Desc d = Prefetcher::desc_of(12345);
  write_post_record(*rec, 12345, tag | kPostHostOrdered, d);
  u32 p[kPostWords];
  for (u32 i = 0; i < kPostWords; ++i) {
    EXPECT_EQ(u32(rec->w[i]), entry_flag(12345)) << "word " << i;
    p[i] = u32(rec->w[i] >> 32);
  }
  EXPECT_EQ(u64(p[0]) | (u64(p[1]) << 32), tag | kPostHostOrdered);
  EXPECT_EQ(std::memcmp(p + 2, &d, sizeof(Desc)), 0);
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

// A slot posted twice (the first submission completed, the slot reused): both are copied, in posting order, so the
// slot ends with the later one's copy and tag.
TEST(CorePrefetch, ASlotPostedTwiceEndsWithTheLaterCopy) {
  Prefetcher pf;
  pf.post(2);
  pf.post(4);
  const u64 tag = pf.post(2);
  pf.start();
  ASSERT_TRUE(pf.copied(2, tag));
  EXPECT_EQ(pf.g->pre_desc[2].seq, 3u);
  EXPECT_EQ(pf.g->pre_desc[2].count, 1002u);
}

// A record whose words are not all of one posting yet (the host is still writing it; here one word still holds the
// same record's posting a lap earlier) is not taken; once whole, it is, with every field of its descriptor.
TEST(CorePrefetch, TakesARecordOnlyWhenWhole) {
  Prefetcher pf;
  for (u64 n = 0; n < kMaxSlots; ++n) pf.post(u32(n % 9));  // a lap, so that record 0 holds posting 0
  pf.start();
  ASSERT_TRUE(pf.copied(u32((kMaxSlots - 1) % 9), submission_tag(0, ring_entry(kMaxSlots - 1, (kMaxSlots - 1) % 9))));
  // Posting kMaxSlots goes to record 0, slot 20: write it whole aside, then all its words but one.
  const u64 n = pf.posted++;
  const Desc d = Prefetcher::desc_of(n);
  const u64 tag = submission_tag(0, ring_entry(n, 20));
  auto whole = std::make_unique<PostRecord>();
  write_post_record(*whole, n, tag, d);
  PostRecord& rec = pf.h->post_log[n % kMaxSlots];
  const u32 late = kPostWords / 2 + 1;
  for (u32 i = 0; i < kPostWords; ++i)
    if (i != late) __atomic_store_n(&rec.w[i], whole->w[i], __ATOMIC_RELAXED);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(__atomic_load_n(&pf.g->pre_ready[20], __ATOMIC_ACQUIRE), tag) << "a record missing a word was taken";
  __atomic_store_n(&rec.w[late], whole->w[late], __ATOMIC_RELAXED);
  ASSERT_TRUE(pf.copied(20, tag));
  EXPECT_EQ(std::memcmp(&pf.g->pre_desc[20], &d, sizeof(Desc)), 0);
}

TEST(CorePrefetch, TagsRingAndEntry) {
  const u64 entry = ring_entry(0xfffffffe, kMaxSlots - 1);
  EXPECT_EQ(tag_ring(submission_tag(kMaxRings - 1, entry)), kMaxRings - 1);
  EXPECT_EQ(tag_ring(submission_tag(0, entry)), 0u);
  EXPECT_EQ(tag_entry(submission_tag(kMaxRings - 1, entry)), entry);
}

// A forwarded doorbell says kRingCopied (the blocks then read pre_desc without its ready flag) only when the turn's
// own copy, fenced just before, was of the same submission; any other doorbell goes behind a fence of its own and
// unmarked. The mark is outside the slot and the tag.
TEST(CorePrefetch, MarksADoorbellCopiedOnlyAfterItsOwnCopy) {
  Prefetcher pf;  // not started: forward_host_doorbell called here
  EngineView ev{};
  ev.g = pf.g.get();
  ev.h = pf.h.get();
  const u32 slot = kMaxSlots - 1;
  const u64 pos = 41, entry = ring_entry(pos, slot);
  const u64 tag = submission_tag(Prefetcher::kHostRing, entry);
  const u64 door = host_ring_entry(pos, tag);
  u64& at = pf.g->ring[Prefetcher::kHostRing][pos % kRingEntries];
  ASSERT_FALSE(forward_host_doorbell<host::HostExec>(ev, pos + kMaxSlots, door, tag));  // a lap later: not stored
  EXPECT_EQ(at, 0u);
  ASSERT_TRUE(forward_host_doorbell<host::HostExec>(ev, pos, door, tag));
  EXPECT_EQ(at, entry | kRingCopied);
  EXPECT_EQ(ring_slot(at), slot);
  EXPECT_EQ(submission_tag(Prefetcher::kHostRing, at & ~kRingCopied), tag);
  for (const u64 other :
       {u64(0), submission_tag(Prefetcher::kHostRing, ring_entry(pos + 1, slot)), submission_tag(0, entry)}) {
    at = 0;
    ASSERT_TRUE(forward_host_doorbell<host::HostExec>(ev, pos, door, other));
    EXPECT_EQ(at, entry) << "marked copied after a copy of " << std::hex << other;
  }
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
    const Desc want = Prefetcher::desc_of(n);
    ASSERT_EQ(std::memcmp(&pf.g->pre_desc[slot], &want, sizeof(Desc)), 0) << "posting " << n;
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
