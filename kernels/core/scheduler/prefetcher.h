// The descriptor prefetcher: the first X::kWarp threads (a warp) of one more block after the channels' (where the
// device holds it: DaemonParams::prefetch), which runs no collective. It copies each descriptor the host posts
// (EngineHost::post_log, written before the doorbell) into device memory (EngineGlobal::pre_desc, by slot), in
// posting order, so that at the doorbell every block finds it there; and it forwards the doorbells of host-ordered
// submissions (EngineHost::host_ring) into the rings, each after its own descriptor's copy (docs/design.md,
// "Host-ordered submissions"). It also keeps the daemon's copy of the aborts (look_for_aborts).
#pragma once

#include "../engine_memory.h"
#include "aborts.h"
#include "desc_copy.h"

namespace dfccl::core {

// Caller: the prefetcher's thread 0. Forwards host_ring entry e, expected for host-ordered submission number hn,
// into EngineGlobal::ring; returns false, storing nothing, when e is a lap early (not stored yet). Invariant: the
// entry lands after everything published before it, behind a device-scope fence; when the submission is
// `just_copied` (copied and fenced in this turn) that fence serves, and the entry carries kRingCopied so that the
// blocks skip the copy's ready flag.
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

// Caller: every thread of the prefetcher's block (threads past the warp return). Loops until this launch's exit or
// quit: each turn polls post record pre_next and host_ring entry host_next in one warp instruction (a pack per
// thread), copies a record once all its words carry one flag (flagged.h, PostRecord) and forwards the doorbell.
// Invariant: copies go in posting order, and one fallen a lap behind resumes at the record it finds (a stale copy is
// harmless: its tag is never looked for again). Positions are saved at exit; every thread of the warp keeps them.
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
  u64 busy_at = X::kRests ? X::now_ns() : 0;  // a CPU thread: when a turn last copied or forwarded something
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
    const bool forwarded = X::shfl(rang, 0) != 0;
    if (forwarded) ++hn;
    if constexpr (X::kRests) {  // spin, then block, as every wait of the host executor (X::backoff)
      if (posted || forwarded) busy_at = X::now_ns();
      else X::backoff(X::now_ns() - busy_at);
    } else if (!forwarded && !posted) {
      X::idle();
    }
  }
  if (lane == 0) {
    ev.g->pre_next = next;
    ev.g->host_next = hn;
  }
}

}  // namespace dfccl::core
