// Step 1 of a scheduler pass, picking up new submissions: poll the submission rings (device memory), accept each
// new collective (its descriptor into its context, once) and insert it into the block's active list, which is kept
// in scheduling order (priority, then age; blocking mode: age only).
#pragma once

#include "../block.h"
#include "../engine_memory.h"
#include "desc_copy.h"

namespace dfccl::core {

// Returns block b's lane state for collective d (row b of its communicator's lane array).
DFCCL_HD inline LaneState* lane_state(const Desc& d, u32 b) {
  return &d.cs.lanes[u64(b) * d.cs.nlanes + conn_lane(d.cs, d.lane)];
}

// Caller: thread 0. Inserts slot into the active list at its place in scheduling order, with its key (priority, seq)
// and lane state beside it in BlockShared, so that neither the insertion nor an attempt's first loads wait for the
// context in device memory. Writes only positions >= the insertion point.
template <class X>
DFCCL_DEV void insert_active(const EngineView& ev, BlockShared& bs, u32 slot, int32_t priority, u64 seq,
                             LaneState* lane) {
  u32 k = bs.nactive;
  while (k > 0) {
    const bool before = ev.p.blocking ? seq < bs.active_seq[k - 1]
                                      : (priority > bs.active_prio[k - 1] ||
                                         (priority == bs.active_prio[k - 1] && seq < bs.active_seq[k - 1]));
    if (!before) break;
    bs.active[k] = bs.active[k - 1];
    bs.active_prio[k] = bs.active_prio[k - 1];
    bs.active_seq[k] = bs.active_seq[k - 1];
    bs.active_lane[k] = bs.active_lane[k - 1];
    --k;
  }
  bs.active[k] = u16(slot);
  bs.active_prio[k] = priority;
  bs.active_seq[k] = seq;
  bs.active_lane[k] = lane;
  bs.nactive += 1;
}

// Caller: thread 0. Removes position k of the active list, keeping the order of the rest.
DFCCL_HD inline void remove_active(BlockShared& bs, u32 k) {
  for (u32 j = k + 1; j < bs.nactive; ++j) {
    bs.active[j - 1] = bs.active[j];
    bs.active_prio[j - 1] = bs.active_prio[j];
    bs.active_seq[j - 1] = bs.active_seq[j];
    bs.active_lane[j - 1] = bs.active_lane[j];
  }
  bs.nactive -= 1;
}

// Caller: a thread of a block >= 1, accepting a submission that has no prefetched copy. Claims the copy for the
// other blocks (an exchange on EngineGlobal::desc_claim) and, if first, reads the descriptor from pinned memory into
// v and publishes it (EngineGlobal::desc, desc_ready). Returns false, v untouched, when another block had claimed it.
template <class X>
DFCCL_DEV bool claim_and_publish(const EngineView& ev, u32 slot, u64 tag, Pack* v) {
  if (X::atomic_exch64(&ev.g->desc_claim[slot], tag) == tag) return false;
  load_desc<X>(ev.h->desc[slot], v);
  publish_desc<X>(ev.g->desc[slot], v, &ev.g->desc_ready[slot], tag);
  return true;
}

// The lane of the pass's first new collective as accept loaded it (thread 0's registers), so that its first attempt
// starts without a round trip: valid only for that attempt, in the same pass, on the same slot (nothing else has run
// on the block since).
struct LaneLook {
  u32 slot = ~0u;  // the slot whose lane was loaded; ~0u: none
  u64 turn = 0, sent = 0, recvd = 0;
};

// Caller: one thread per new submission k of the pass, in parallel. Loads its descriptor, resets its context
// (ChanCtx) and leaves its key and lane state in fresh_prio / fresh_seq / fresh_lane and its slot in fresh[k]. Source:
// a captured collective's instance has its own (EngineGlobal::graph_desc); otherwise the prefetcher's copy when ready
// (at once under kRingCopied), else block 0 reads pinned memory and never waits for a copy, and the other blocks share
// one claimed copy. With `looks`, also issues the lane's loads early and returns them with the descriptor in
// BlockShared::at (LaneLook); otherwise the returned LaneLook names no slot.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE LaneLook accept(const EngineView& ev, BlockShared& bs, u32 b, u32 k, bool looks) {
  const u32 low = bs.fresh[k];
  const u32 slot = ring_slot(low);
  bs.fresh[k] = u16(slot);
  const u64 tag = bs.fresh_tag[k];
  ChanCtx& cx = chan_ctx(ev, slot, b);
  Pack* dst = reinterpret_cast<Pack*>(&cx.desc);
  Pack v[kDescPacks];
  if (tag_ring(tag) == kGraphRing) {
    load_desc<X>(ev.g->graph_desc[slot], v);  // a captured collective's instance (scheduler/graph_start.h)
  } else if ((low & kRingCopied) != 0 || X::load_acquire(&ev.g->pre_ready[slot]) == tag) {
    load_desc<X>(ev.g->pre_desc[slot], v);      // the prefetcher's copy
    if (b == 0) X::shared_inc(&bs.prefetched);  // dfcclStats_t::descPrefetched
  } else if (b == 0) {
    load_desc<X>(ev.h->desc[slot], v);  // pinned memory
  } else {
    u64 ready = X::load_acquire(&ev.g->desc_ready[slot]);
    if (ready == tag || !claim_and_publish<X>(ev, slot, tag, v)) {
      // Another block copied it or is copying it.
      while (ready != tag) {
        X::pause();
        ready = X::load_acquire(&ev.g->desc_ready[slot]);
      }
      load_desc<X>(ev.g->desc[slot], v);
    }
  }
  Desc d;
  memcpy(&d, v, sizeof(Desc));  // registers: no reload of what was just stored
  if constexpr (kProfile)
    if (b == 0 && tag_ring(tag) == kGraphRing) graph_stamp(ev.g->graph_trace, d.seq, kStampPicked, X::now_ns());
  LaneState* ls = lane_state(d, b);
  LaneLook look;
  if (looks) {  // issued before the stores below, so that their round trip overlaps the rest of step 1
    look.turn = vload(ls->turn);
    look.sent = ls->sent;
    look.recvd = ls->recvd;
    look.slot = slot;
    bs.at.desc = d;
  }
  for (int i = 0; i < kDescPacks; ++i) dst[i] = v[i];
  cx.t_start = 0;
  cx.op = 0;
  cx.spin_ns = u32(ev.p.spin_init_ns);
  cx.preemptions = 0;
  cx.wait_us = 0;
  cx.status = kStatusOk;
  cx.state = kCtxActive;
  bs.fresh_prio[k] = d.priority;
  bs.fresh_seq[k] = d.seq;
  bs.fresh_lane[k] = ls;
  return look;
}

// Caller: every thread of the block, between barriers, bs.nnew zeroed. Takes up to kAcceptPerRing new entries of
// each ring (thread r % nthreads polls ring r) into fresh / fresh_tag, counted in nnew, and advances frontier. A used
// ring has its next two entries loaded at once, so that a single new entry costs one round trip; an entry seen only
// in the early, relaxed load is loaded again with acquire before it is taken.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void poll_rings(const EngineView& ev, BlockShared& bs, u32 tid, u32 nt) {
  for (u32 r = tid; r < kMaxRings; r += nt) {
    u64 pos = bs.frontier[r];
    u64 ahead = pos != 0 ? X::load_relaxed(&ev.g->ring[r][(pos + 1) % kRingEntries]) : ~0ull;
    for (u32 taken = 0; taken < kAcceptPerRing; ++taken) {
      const u64 e = X::load_acquire(&ev.g->ring[r][pos % kRingEntries]);
      if ((e >> 16) != pos + 1) break;
      const u32 k = X::shared_inc(&bs.nnew);
      bs.fresh[k] = u16(e & 0xffffu);  // the slot and kRingCopied (accept)
      bs.fresh_tag[k] = submission_tag(r, e & ~kRingCopied);
      bs.frontier[r] = ++pos;
      if (ahead != ~0ull && (ahead >> 16) != pos + 1) break;
      ahead = ~0ull;  // looked at once: the loop's next load is the acquire
    }
  }
}

// Caller: thread 0, in a wait of an attempt, after poll_rings. Returns whether a submission ring has an entry at the
// block's frontier: one that the pass's poll did not take, as it landed during or after the poll (a pass whose
// blocking-mode head runs took fewer than kAcceptPerRing from each ring: run_pass). Relaxed loads, independent of each
// other; the next pass loads the entry again with acquire.
template <class X>
DFCCL_DEV bool rings_have_new(const EngineView& ev, const BlockShared& bs) {
  u32 hits = 0;
  for (u32 r = 0; r < kMaxRings; ++r) {
    const u64 pos = bs.frontier[r];
    hits |= (X::load_relaxed(&ev.g->ring[r][pos % kRingEntries]) >> 16) == pos + 1 ? 1u : 0u;
  }
  return hits != 0;
}

// Caller: every thread of block b, at the start of a pass. Polls the rings, accepts every new submission (a thread
// each), inserts them into the active list and marks the block busy when it took any. look receives thread 0's
// LaneLook for the pass's first attempt (none in blocking mode, whose first attempt only checks aborts).
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void pick_up(const EngineView& ev, BlockShared& bs, u32 b, u32 tid, u32 nt,
                                         LaneLook& look) {
  const u64 t0 = prof_now<X>();
  if (tid == 0) bs.nnew = 0;
  X::sync();
  poll_rings<X>(ev, bs, tid, nt);
  X::sync();
  for (u32 k = tid; k < bs.nnew; k += nt) {
    const LaneLook l = accept<X>(ev, bs, b, k, k == 0 && !ev.p.blocking);
    if (k == 0) look = l;
  }
  X::sync();
  if (tid == 0) {
    for (u32 k = 0; k < bs.nnew; ++k)
      insert_active<X>(ev, bs, bs.fresh[k], bs.fresh_prio[k], bs.fresh_seq[k], bs.fresh_lane[k]);
    bs.progressed = bs.nnew > 0 ? 1u : 0u;
    // Busy from now, not from the pass's end (should_exit): the pass may wait in what it just took, in blocking
    // mode with no budget, and meanwhile the other blocks must not judge the daemon idle.
    if (bs.nnew > 0) ev.g->busy[b] = 1u;
  }
  X::sync();
  prof_add<X>(bs, kPhasePoll, t0);
}

}  // namespace dfccl::core
