// Picking up new submissions: the block's active list in scheduling order, and accept, which loads a new
// collective's descriptor and resets its context.
#pragma once

#include "../block.h"
#include "../engine_memory.h"
#include "desc_copy.h"

namespace dfccl::core {

// Block b's lane state for a collective (its communicator's lane array, row b).
DFCCL_HD inline LaneState* lane_state(const Desc& d, u32 b) { return &d.cs.lanes[u64(b) * d.cs.nlanes + d.lane]; }

// Thread 0: insert slot into the block's active list, in scheduling order (its key: priority and seq, kept beside
// the list in shared memory with its lane state, so that neither the insertion nor the attempt's first loads wait
// for the context in device memory).
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

// Thread 0: remove position k of the active list.
DFCCL_HD inline void remove_active(BlockShared& bs, u32 k) {
  for (u32 j = k + 1; j < bs.nactive; ++j) {
    bs.active[j - 1] = bs.active[j];
    bs.active_prio[j - 1] = bs.active_prio[j];
    bs.active_seq[j - 1] = bs.active_seq[j];
    bs.active_lane[j - 1] = bs.active_lane[j];
  }
  bs.nactive -= 1;
}

// A thread of a block >= 1: take on the copy of a submission's descriptor for the other blocks if no block has yet
// (an exchange on EngineGlobal::desc_claim): read it from pinned memory into v, copy it into EngineGlobal::desc and
// flag it ready. Returns false, v untouched, when another block had claimed it.
template <class X>
DFCCL_DEV bool claim_and_publish(const EngineView& ev, u32 slot, u64 tag, Pack* v) {
  if (X::atomic_exch64(&ev.g->desc_claim[slot], tag) == tag) return false;
  load_desc<X>(ev.h->desc[slot], v);
  publish_desc<X>(ev.g->desc[slot], v, &ev.g->desc_ready[slot], tag);
  return true;
}

// One thread per new submission (they run in parallel): load its static context and reset its dynamic context;
// its key goes to fresh_prio / fresh_seq, its lane state to fresh_lane, and its slot to fresh[k] (which held the
// ring entry's low bits). Every block takes the prefetcher's copy when it is there (usually: the host posts ahead of
// the stream), at once when the entry says kRingCopied, else after reading the copy's ready flag. Otherwise block 0
// (channel 0: a small collective's only data channel) reads the descriptor from pinned memory itself and goes on: it
// never waits for a copy's fence (about 0.5 us on a small collective's critical path: docs/performance-log.md, 15);
// of the other blocks, the first to claim the submission copies it into device memory (EngineGlobal::desc), and the
// rest wait for that copy.
//
// With `looks` (the pass's first new submission, k = 0 on thread 0, outside blocking mode), accept also starts its
// attempt's loads: the lane's turn and positions, issued as soon as the descriptor gives their address and returned
// in a LaneLook (thread 0's registers: passed by pointer, it went to the stack, whose stores waited for the loads
// here), and the descriptor goes into BlockShared::at. The loads then travel while the block does its bookkeeping
// (insert_active, the barriers) instead of after it (docs/performance-log.md, 36). attempt takes them only where
// nothing can have changed them: in the pass's first attempt, of the same slot.
struct LaneLook {
  u32 slot = ~0u;  // the slot whose lane was loaded; ~0u: none
  u64 turn = 0, sent = 0, recvd = 0;
};

template <class X>
DFCCL_DEV DFCCL_FORCEINLINE LaneLook accept(const EngineView& ev, BlockShared& bs, u32 b, u32 k, bool looks) {
  const u32 low = bs.fresh[k];
  const u32 slot = ring_slot(low);
  bs.fresh[k] = u16(slot);
  const u64 tag = bs.fresh_tag[k];
  ChanCtx& cx = chan_ctx(ev, slot, b);
  Pack* dst = reinterpret_cast<Pack*>(&cx.desc);
  Pack v[kDescPacks];
  if ((low & kRingCopied) != 0 || X::load_acquire(&ev.g->pre_ready[slot]) == tag) {
    load_desc<X>(ev.g->pre_desc[slot], v);  // the prefetcher's copy
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
  LaneState* ls = lane_state(d, b);
  LaneLook look;
  if (looks) {  // issued before the stores below: their round trip overlaps the rest of the pass's step 1
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

// All threads: take up to kAcceptPerRing new entries of every submission ring into BlockShared::fresh / fresh_tag
// (bs.nnew counts them; the caller zeroed it). A ring that has been used (frontier > 0) also has the entry after the
// next loaded, relaxed and issued first, so that both round trips overlap: a ring that had one new entry is done
// without a second round trip to look for another (330 cycles less on a new submission's way to its start:
// docs/performance-log.md, 33). An entry seen only there is loaded again with acquire before it is taken; one that
// came after that look waits for the next pass.
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

// All threads of block b: step 1 of a pass. Poll the rings, accept every new submission (one thread each) and insert
// them into the active list. look receives thread 0's LaneLook for the pass's first attempt (not in blocking mode,
// whose first attempt only checks aborts).
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void pick_up(const EngineView& ev, BlockShared& bs, u32 b, u32 tid, u32 nt, LaneLook& look) {
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
