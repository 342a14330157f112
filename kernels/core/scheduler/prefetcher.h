// The descriptor prefetcher: one warp that copies posted descriptors into device memory ahead of their doorbells
// and forwards host-ordered doorbells.
#pragma once

#include "../engine_memory.h"
#include "aborts.h"
#include "desc_copy.h"

namespace dfccl::core {

// A host-ordered doorbell (EngineHost::host_ring, entry e of host-ordered submission number hn): false if it is not
// stored yet (an earlier lap's entry); else its ring entry goes into EngineGlobal::ring, after a device-scope fence
// (whatever the prefetcher published before, the submission's descriptor copy included, is seen first). When the
// submission is `just_copied` (the tag this thread copied and fenced in the same turn), that fence already orders its
// copy before the entry: no second one, and the entry carries kRingCopied, so that the blocks skip the copy's ready
// flag (docs/performance-log.md, 30).
template <class X>
DFCCL_DEV bool forward_host_doorbell(const EngineView& ev, u64 hn, u64 e, u64 just_copied) {
  if (u32(e >> 56) != host_ring_lap(hn)) return false;
  const u64 tag = e & kHostRingTagMask;
  const u32 ring = tag_ring(tag);
  const u64 entry = tag_entry(tag);
  if (ring < kMaxRings) {
    const bool copied = tag == just_copied;
    if (!copied) X::fence_device();
    X::store_relaxed(&ev.g->ring[ring][((entry >> 16) - 1) % kRingEntries], entry | (copied ? kRingCopied : 0));
  }
  return true;
}

// The prefetcher: the first X::kWarp threads (a warp) of one more block after the channels' (when the device holds
// it: DaemonParams::prefetch), which takes part in no collective. It copies each descriptor the host has posted
// (EngineHost::post_log, written before the doorbell) from pinned memory into device memory (EngineGlobal::pre_desc,
// by slot), in posting order, as soon as it is posted, so that at the doorbell every block, block 0 included, finds
// it there (two round trips to L2 instead of reading pinned memory, or waiting for another block's copy:
// docs/performance-log.md, 18 and 20). It polls the record of the next posting, one 16-byte pack per thread in one
// instruction: one thread's loads from pinned memory go one round trip after another, one instruction of the warp's
// takes one (about 0.6 us; section 25). The record holds the descriptor in flagged words (types.h, PostRecord), so
// the poll that finds the posting has its descriptor too (section 28). Fallen a lap or more behind (records
// overwritten), it resumes at the record it finds. A copy of a submission that has completed meanwhile is harmless:
// its tag is never looked for again, and the slot's next submission is copied after it (posting order).
// It also rings the doorbells of host-ordered submissions (EngineHost::host_ring, one per turn, in their order),
// polled in the same instruction; a doorbell is forwarded after the turn's copy (the host stores it after the
// record; for a host-ordered posting whose doorbell was not stored yet at the poll, it is read again at once), so
// that the blocks find the copy at the doorbell (docs/design.md, "Host-ordered submissions"). Leaves with the other
// blocks (exit request of this launch, or quit). Also looks for aborts (look_for_aborts). Every thread of the warp
// keeps the same positions.
template <class X>
DFCCL_DEV void prefetch_descs(const EngineView& ev) {
  constexpr u32 W = X::kWarp;
  constexpr u32 kMine = (kPostPacks + W - 1) / W;           // record packs per thread: 1, or all on the host
  constexpr u32 kMineDesc = (u32(kDescPacks) + W - 1) / W;  // descriptor packs per thread
  constexpr u32 kDoorLane = kPostPacks % W;                 // the thread that polls the doorbell beside them
  const u32 lane = X::tid();
  if (lane >= W) return;
  u64 next = ev.g->pre_next;
  u64 hn = ev.g->host_next;
  u64 look_at = 0;
  for (;;) {
    u64 stop = 0;
    if (lane == 0) {
      const u64 req = vload(ev.g->exit_request), quit = vload(ev.g->quit);
      stop = quit != 0 || exit_ordered(req, ev.p.epoch) ? 1 : 0;
      if (!stop) look_for_aborts_when_due<X>(ev, look_at, X::now_ns());
    }
    if (X::shfl(stop, 0) != 0) break;
    // The record of posting `next` and the next host-ordered doorbell, one round trip.
    const Pack* rec = reinterpret_cast<const Pack*>(ev.h->post_log[next % kMaxSlots].w);
    const u64* door_at = &ev.h->host_ring[hn % kMaxSlots];
    Pack v[kMine];
    u64 mine_door = 0;
    for (u32 j = 0; j < kMine; ++j) v[j] = lane + j * W < kPostPacks ? X::ld_ll(rec + lane + j * W) : Pack{};
    if (lane == kDoorLane) mine_door = X::load_relaxed(door_at);
    u64 door = X::shfl(mine_door, kDoorLane);
    // Whole when every word carries the flag of the first; then `ahead` postings past `next` (a multiple of
    // kMaxSlots when the host went round the log), or a lap earlier (not posted yet: "negative").
    const u32 flag = word_flag(X::shfl(v[0].lo, 0));
    bool same = true;
    for (u32 j = 0; j < kMine; ++j)
      if (lane + j * W < kPostPacks) same = same && word_flag(v[j].lo) == flag && word_flag(v[j].hi) == flag;
    const u32 ahead = flag - entry_flag(next);
    const bool posted = X::warp_all(same) && ahead < (1u << 31) && ahead % kMaxSlots == 0;
    u64 copied = 0;  // the tag copied and fenced in this turn (forward_host_doorbell)
    if (posted) {
      next += ahead + 1;
      // Each pack's 8 bytes of payload (the high halves of its words): pack 0 the tag, packs 2k+1 and 2k+2 the
      // descriptor's pack k.
      u64 pay[kMine];
      for (u32 j = 0; j < kMine; ++j) pay[j] = word_payload(v[j].lo) | (u64(word_payload(v[j].hi)) << 32);
      const u64 posted_tag = X::shfl(pay[0], 0);
      const u64 tag = posted_tag & ~kPostHostOrdered;
      const u32 slot = u32(tag & 0xffffu);
      Pack d[kMineDesc] = {};
      for (u32 k = 0; k < u32(kDescPacks); ++k) {
        const u32 a = 2 * k + 1, b = 2 * k + 2;
        const u64 lo = X::shfl(pay[a / W], a % W), hi = X::shfl(pay[b / W], b % W);
        if (lane == k % W) d[k / W] = Pack{lo, hi};
      }
      // A host-ordered posting whose doorbell was not stored yet at the poll: read it again now.
      const bool door_seen = u32(door >> 56) == host_ring_lap(hn);
      if ((posted_tag & kPostHostOrdered) != 0 && !door_seen) {
        u64 again = 0;
        if (lane == kDoorLane) again = X::load_relaxed(door_at);
        door = X::shfl(again, kDoorLane);
      }
      if (slot < kMaxSlots) {
        Pack* dst = reinterpret_cast<Pack*>(&ev.g->pre_desc[slot]);
        for (u32 j = 0; j < kMineDesc; ++j)
          if (lane + j * W < u32(kDescPacks)) X::st16(dst + lane + j * W, d[j]);
        X::warp_sync();  // the warp's stores before thread 0's fence and ready flag
        if (lane == 0) {
          X::fence_device();
          X::store_relaxed(&ev.g->pre_ready[slot], tag);
        }
        copied = tag;
      }
    }
    u64 rang = 0;
    if (lane == 0) rang = forward_host_doorbell<X>(ev, hn, door, copied) ? 1 : 0;
    if (X::shfl(rang, 0) != 0)
      ++hn;
    else if (!posted)
      X::idle();
  }
  if (lane == 0) {
    ev.g->pre_next = next;
    ev.g->host_next = hn;
  }
}

}  // namespace dfccl::core
