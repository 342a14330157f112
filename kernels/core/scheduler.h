// The daemon's scheduler: what one block of the daemon does from launch to exit. Written once, run by the CUDA
// executor (one thread block per channel) and the host executor (one thread per channel).
//
// Every block runs channel b of every collective; a block is an independent scheduler:
//   1. pick up new submissions: poll the head of every submission ring (device memory), copy the descriptor of
//      each new collective from pinned memory into its context (once), and insert it in scheduling order;
//   2. one pass over the runnable collectives, in order (priority, then age; blocking mode: age only, and only the
//      oldest runs): an attempt resumes the collective's program at its saved step and runs primitives until the
//      program ends (the channel is done) or a primitive's spin budget runs out (preemption: the context — the
//      step index — is saved, and the block moves on to the next collective);
//   3. leave when told (engine shutdown, another block's exit request) or when no block made progress for
//      stuck_ns while collectives are pending (they wait on absent peers) or for idle_ns with nothing to do.
//      Contexts always live in device memory, so leaving saves nothing but the ring positions; the host relaunches
//      the daemon when work is pending (DESIGN invariants 3 and 4).
//
// Adaptive spin budget ("stickiness"), per collective and channel, between spin_min and spin_max:
//   - a wait that succeeds after w ns raises the budget to at least spin_grow * w: its peers are active, so waiting
//     for them is cheaper than switching;
//   - an attempt preempted before any progress halves it: its peers are elsewhere, so give the block to others.
// Ranks whose budgets grow on the same collective stay on it together: de-facto gang scheduling without talking.
#pragma once

#include "collectives/collectives.h"
#include "engine_memory.h"
#include "primitives/slot_op.h"

namespace dfccl::core {

static_assert(kNumPhases <= sizeof(BlockStats::prof) / sizeof(u64));

enum : u32 { kAttemptBlocked = 0, kAttemptProgress = 1, kAttemptDone = 2 };

// A word another agent writes, read anew each time: a volatile load on the GPU; on the host executor a relaxed
// atomic load (the same instruction on x86, and no data race in C++ terms for ThreadSanitizer).
template <class T>
DFCCL_HD DFCCL_FORCEINLINE T vload(const T& x) {
#if defined(__CUDA_ARCH__)
  return *const_cast<const volatile T*>(&x);
#else
  return __atomic_load_n(&x, __ATOMIC_RELAXED);
#endif
}

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

// A descriptor as nine 16-byte packs: all loads issued first (one round trip), and a copy published for other blocks
// (the stores, a device-scope fence, then the ready flag naming the submission).
inline constexpr int kDescPacks = int(sizeof(Desc) / sizeof(Pack));
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void load_desc(const Desc& d, Pack* v) {
  const Pack* src = reinterpret_cast<const Pack*>(&d);
  for (int i = 0; i < kDescPacks; ++i) v[i] = X::ld16(src + i);
}
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void publish_desc(Desc& d, const Pack* v, u64* ready, u64 tag) {
  Pack* dst = reinterpret_cast<Pack*>(&d);
  for (int i = 0; i < kDescPacks; ++i) X::st16(dst + i, v[i]);
  X::fence_device();
  X::store_relaxed(ready, tag);
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

// Aborts reach the daemon through pinned memory: dfcclCommAbort stores the communicator's attachment number and
// raises a count there, with no CUDA call, because a stream write can be held by another thread's implicit
// synchronization (cudaFree, a lazy load) that itself waits for a stream waiting on the aborted collective
// (docs/design.md, "Abort"). One thread 0 copies them into device memory, where every block reads them: the table
// first, then the count (blocks read the count, then, after a fence, the table). Looked at every kAbortLookNs by the
// prefetcher (or, without one, by the last channel's block between its passes), and by any thread 0 whose wait has
// lasted that long (a blocking-mode wait has no budget: it must see the abort that ends it).
inline constexpr u64 kAbortLookNs = 50000;

template <class X>
DFCCL_DEV void look_for_aborts(const EngineView& ev) {
  const u64 n = X::load_acquire(&ev.h->aborts);
  if (n <= vload(ev.g->aborts)) return;
  for (u32 i = 0; i < kMaxComms; ++i) {
    const u64 gen = vload(ev.h->abort_gen[i]);
    if (gen != 0) X::atomic_max64(&ev.g->abort_gen[i], gen);
  }
  X::fence_device();
  X::atomic_max64(&ev.g->aborts, n);
}

// look_for_aborts once `now` (the executor's clock) has reached look_at, which then moves kAbortLookNs ahead.
template <class X>
DFCCL_DEV void look_for_aborts_when_due(const EngineView& ev, u64& look_at, u64 now) {
  if (now < look_at) return;
  look_for_aborts<X>(ev);
  look_at = now + kAbortLookNs;
}

// Whether the communicator of collective d was aborted, as far as the daemon has seen (after an acquire of
// EngineGlobal::aborts that was non-zero).
DFCCL_DEV inline bool comm_aborted(const EngineView& ev, const Desc& d) {
  return vload(ev.g->abort_gen[d.comm]) == d.comm_gen;
}

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

// What one channel of a collective has tallied over its attempts (ChanCtx fields), read by thread 0 at the start of
// an attempt together with the lane, and handed to finish_channel: the finish reads nothing back.
struct ChanTally {
  u64 t_start;
  u32 preemptions;
  u32 wait_us;
};

// Completion pos's entry (types.h, CqEntry): c in flagged words, two per 16-byte store.
template <class X>
DFCCL_DEV void write_cq_entry(CqEntry& e, u64 pos, const CqInfo& c) {
  u32 p[kCqWords];
  memcpy(p, &c, sizeof(CqInfo));
  const u32 f = entry_flag(pos);
  Pack* dst = reinterpret_cast<Pack*>(e.w);
  for (u32 i = 0; i < kCqWords / 2; ++i)
    X::st_ll(dst + i, Pack{flagged_word(p[2 * i], f), flagged_word(p[2 * i + 1], f)});
}

// Thread 0, after the block's last data movement for this collective: mark the channel done (ls: pass the lane to
// the collective's next turn, d.turn + 1, which this attempt found current); the last block to finish publishes the
// completion (completion word in device memory, completion queue entry in pinned memory).
template <class X>
DFCCL_DEV void finish_channel(const EngineView& ev, u32 slot, const Desc& d, ChanCtx& cx, LaneState* ls,
                              const ChanTally& t, u32 status) {
  cx.state = kCtxDone;
  cx.status = status;
  if (ls) ls->turn = d.turn + 1;
  if (status != kStatusOk) X::atomic_max32(&ev.g->status[slot], status);
  if (t.preemptions) X::atomic_add(&ev.g->preemptions[slot], t.preemptions);
  if (t.wait_us) X::atomic_max32(&ev.g->wait_max_us[slot], t.wait_us);
  if (t.t_start) X::atomic_max64(&ev.g->start_inv[slot], ~t.t_start);
  X::fence_device();
  const u32 old = X::atomic_add(&ev.g->done_count[slot], 1u);
  if (old + 1 < ev.p.nblocks) return;
  // The last block: publish to the GPU first, then gather what the others left in the slot's words, reset them, and
  // publish to the host. The completion word is read on this GPU only (dfcclWait's stream wait, the daemon's exit
  // decisions), and the collective's data was written by this GPU's blocks, ordered before it by their fences and
  // done_count: a device-scope fence suffices, and the stream goes on without waiting for the work below, about 1-2 us
  // (docs/performance-log.md, 9). done_count is reset before that fence: the slot's next collective, which the host
  // submits only after the completion queue entry, counts from zero.
  ev.g->done_count[slot] = 0;
  X::fence_device();
  X::store_flag(&ev.g->complete[slot], d.seq);
  const u64 now = X::now_ns();
  const u64 start_inv = X::atomic_exch64(&ev.g->start_inv[slot], 0);
  CqInfo c;
  c.seq = d.seq;
  c.t_start = start_inv ? ~start_inv : now;
  c.t_end = now;
  c.slot = slot;
  c.preemptions = X::atomic_exch32(&ev.g->preemptions[slot], 0);
  c.wait_us = X::atomic_exch32(&ev.g->wait_max_us[slot], 0);
  c.status = X::atomic_exch32(&ev.g->status[slot], 0u);
  const u64 pos = X::atomic_add64(&ev.g->cq_tail, 1);
  // The entry in flagged words, with no fence: the host waits for every flag. The collective's data needs none for
  // the host either: on a GPU it is device memory (checked at submission), read by later GPU work, which the
  // device-scope fence above already orders (the host executor's fences are the CPU's, and the host takes the entry
  // with an acquire fence).
  write_cq_entry<X>(ev.h->cq[pos % kCqEntries], pos, c);
}

// Thread 0 in a wait of an attempt: whether the wait must end before its condition holds or its budget runs out.
//   - An abort of any communicator: the next pass finishes this collective if it was its own, and in blocking mode
//     drops that communicator's collectives queued behind this one. The count is the pass's (aborts_seen): an abort
//     that came after the pass checked its queue but before this wait began must end the wait too (read at the
//     wait, it would be missed and hold that abort until its timeout: host_stress_test_4blocks caught it).
//   - Engine shutdown (quit).
//   - This launch's exit, ordered by another block (idle or stuck): the block leaves with the others, and the host
//     relaunches the daemon for what is pending. A blocking-mode wait has no budget: staying in it alone, it would be
//     the only block to see later submissions, and a collective queued behind its own would never be taken by the
//     blocks that left, not even to be dropped by an abort (host_stress_test_4blocks: an abort that waited for its
//     8 s timeout, about once in 900 trials).
DFCCL_DEV inline bool wait_must_end(const EngineView& ev, u64 aborts_seen) {
  // Three independent loads, issued together.
  const u64 aborts = vload(ev.g->aborts), quit = vload(ev.g->quit), req = vload(ev.g->exit_request);
  return aborts != aborts_seen || quit != 0 || exit_ordered(req, ev.p.epoch);
}

// All threads: run channel b of the collective in `slot` (lane state ls: BlockShared::active_lane) until it ends or
// would block. only_if_aborted: finish it if its communicator was aborted, else leave it untouched (blocking mode's
// queue behind its head). aborts_seen: EngineGlobal::aborts as read at the start of the scheduler pass, before its
// collectives were checked for aborts (0: none was ever aborted, and the communicator's flag is not read).
//
// look: the lane as accept loaded it in this pass (LaneLook), for the pass's first attempt only (nothing else has
// run on the block since); when it names this slot, the collective is new: its descriptor is already in
// BlockShared::at, its dynamic context is accept's reset, and the attempt starts without a round trip to memory.
template <class X>
DFCCL_DEV u32 attempt(const EngineView& ev, BlockShared& bs, u32 b, u32 slot, LaneState* ls, u64 aborts_seen,
                      LaneLook look, bool only_if_aborted = false) {
  u64 t_prog = prof_now<X>();
  ChanCtx& cx = chan_ctx(ev, slot, b);

  // Thread 0 decides, everybody follows: aborted communicator, not this collective's turn on its lane, or run.
  // Every load here is independent of the others, so the attempt starts after one round trip to memory: the
  // descriptor, the lane's turn and positions (its address came with the active list) and the channel's dynamic
  // context. Only after an abort somewhere does the communicator's flag cost a second. Thread 0 leaves what the
  // attempt needs in BlockShared::at for the others (the descriptor, the geometry, the lane's addresses).
  enum : u32 { kRun = 0, kAbort = 1, kWaitTurn = 2 };
  u64 spin = 0;   // thread 0: the adaptive spin budget
  ChanTally tally{};  // thread 0
  if (X::tid() == 0) {
    const bool fresh = look.slot == slot;
    Desc d;
    u64 turn, sent, recvd;
    u32 first_op;
    if (fresh) {  // accept's reset (ChanCtx) and its loads
      d = bs.at.desc;
      turn = look.turn;
      sent = look.sent;
      recvd = look.recvd;  // tally: zero as accept left it
      spin = u32(ev.p.spin_init_ns);
      first_op = 0;
    } else {
      d = cx.desc;
      turn = vload(ls->turn);
      sent = ls->sent;
      recvd = ls->recvd;
      tally = ChanTally{cx.t_start, cx.preemptions, cx.wait_us};
      spin = cx.spin_ns;
      first_op = cx.op;
      bs.at.desc = d;
    }
    const bool aborted = aborts_seen != 0 && comm_aborted(ev, d);
    u32 decision = kRun;
    if (aborted) {
      decision = kAbort;
    } else if (only_if_aborted || turn != d.turn) {
      decision = kWaitTurn;
    } else {
      const CommStatic& c = d.cs;
      const Geometry g = make_geometry(d, c.rank, c.nranks, b, c.slot_bytes, c.nslots);  // registers, not reloaded
      const u64 nops = program_num_ops(g);
      bs.at.geo = g;
      bs.at.nops = nops;
      bs.at.ll = nops > 0 && uses_ll(g) ? 1u : 0u;
      bs.at.lv = lane_view(c, b, d.lane);
      bs.sent = sent;
      bs.recvd = recvd;
      bs.first_op = first_op;
      if (tally.t_start == 0) {
        tally.t_start = X::now_ns();
        cx.t_start = tally.t_start;
      }
      if (bs.last_slot != slot) {
        bs.switches += bs.last_slot != ~0u ? 1 : 0;
        bs.last_slot = slot;
      }
    }
    bs.ok = decision;
  }
  X::sync();
  const u32 decision = bs.ok;
  const u64 first = bs.first_op;
  const u64 nops = bs.at.nops;
  X::sync();
  if (decision == kWaitTurn) {
    prof_add<X>(bs, kPhaseProgram, t_prog);
    return kAttemptBlocked;
  }
  if (decision == kAbort) {
    if (X::tid() == 0) finish_channel<X>(ev, slot, bs.at.desc, cx, nullptr, tally, kStatusAborted);
    X::sync();
    return kAttemptDone;
  }
  prof_add<X>(bs, kPhaseProgram, t_prog);

  const bool unbounded = ev.p.blocking != 0;
  // A wait ends early as wait_must_end says. A wait that has lasted kAbortLookNs looks for aborts itself
  // (look_for_aborts). `now`: the wait's own clock reading.
  u64 look_at = 0;  // thread 0
  auto quit = [&](u64 now) {
    if (look_at == 0) look_at = now + kAbortLookNs;  // the wait's first check: not due yet
    look_for_aborts_when_due<X>(ev, look_at, now);
    return wait_must_end(ev, aborts_seen);
  };
  u64 i = first;
  bool progressed = false;
  u64 waited_ns = 0;  // thread 0: spin phases of this attempt
  while (i < nops) {
    u64 waited = 0;  // thread 0's
    const bool ran = run_op<X>(bs, i, spin, unbounded, quit, waited);
    if (X::tid() == 0) waited_ns += waited;
    if (!ran) break;
    ++i;
    progressed = true;
    if (X::tid() == 0 && waited > 0) spin = min_of(ev.p.spin_max_ns, max_of(spin, u64(ev.p.spin_grow) * waited));
  }
  const bool done = i == nops;
  if (X::tid() == 0) {  // stores only: what the attempt changed
    cx.op = u32(i);
    if (waited_ns >= 1000) {
      tally.wait_us += u32(waited_ns / 1000);
      cx.wait_us = tally.wait_us;
    }
    ls->sent = bs.sent;
    ls->recvd = bs.recvd;
    if (!done) {
      bs.preemptions += 1;
      tally.preemptions += 1;
      cx.preemptions = tally.preemptions;
      if (!progressed) spin = max_of(ev.p.spin_min_ns, spin / 2);
    }
    cx.spin_ns = u32(spin);
    if (done) finish_channel<X>(ev, slot, bs.at.desc, cx, ls, tally, kStatusOk);
  }
  X::sync();
  return done ? kAttemptDone : (progressed ? kAttemptProgress : kAttemptBlocked);
}

// Whether a listed stream wait keeps the daemon: its barrier probe has run (no device-wide barrier was pending when
// it was issued: a barrier issued later waits for its collective and holds any relaunch) and its collective is not
// finished (docs/design.md, "Implicit synchronizations"). Host memory, read only at exit decisions.
template <class X>
DFCCL_DEV bool kept_by_a_wait(const EngineView& ev) {
  const u64 nwaits = X::load_acquire(&ev.h->nwaits);
  const u64 probed = vload(ev.h->probe_done);
  for (u64 k = 0; k < nwaits; ++k) {
    const WaitEntry& w = ev.h->waits[k];
    if (vload(w.probe) <= probed && vload(ev.g->complete[vload(w.slot)]) < vload(w.seq)) return true;
  }
  return false;
}

// Thread 0: should the daemon leave now?
template <class X>
DFCCL_DEV bool should_exit(const EngineView& ev, BlockShared& bs, u32 b) {
  const u64 now = X::now_ns();
  if (!ev.p.prefetch && b + 1 == ev.p.nblocks)  // no prefetcher to look for aborts
    look_for_aborts_when_due<X>(ev, bs.abort_look_ns, now);
  if (bs.progressed) X::atomic_max64(&ev.g->last_activity_ns, now);
  ev.g->busy[b] = bs.nactive > 0 ? 1u : 0u;
  // Three independent loads, issued together (one round trip to L2 per pass, not three).
  const u64 req = vload(ev.g->exit_request), quit = vload(ev.g->quit), last = vload(ev.g->last_activity_ns);
  if (exit_ordered(req, ev.p.epoch)) return true;
  if (req == ((ev.p.epoch << 8) | kExitPending)) return false;  // another block is deciding
  if (quit != 0) return true;
  if (now <= last || now - last <= min_of(ev.p.idle_ns, ev.p.stuck_ns)) return false;
  bool busy = false;
  for (u32 k = 0; k < ev.p.nblocks; ++k) busy = busy || vload(ev.g->busy[k]) != 0;
  if (busy && ev.p.blocking) return false;  // blocking mode waits, like NCCL: only idleness ends the daemon
  if (now - last <= (busy ? ev.p.stuck_ns : ev.p.idle_ns)) return false;
  if (kept_by_a_wait<X>(ev)) {
    X::atomic_max64(&ev.g->last_activity_ns, now);  // look again after another period
    return false;
  }
  // Decide in two steps. A host thread confirming a wait (dfcclWait: its probe has run) then reads exit_announced;
  // this block announces, then scans again: either it sees the confirmed wait and stays, or the host sees the
  // announcement and launches the next daemon itself (Engine::confirm_wait).
  const u64 pending = (ev.p.epoch << 8) | kExitPending;
  if (X::atomic_cas64(&ev.g->exit_request, req, pending) != req) return false;
  ev.h->exit_announced = ev.p.epoch;
  X::fence_system();
  if (kept_by_a_wait<X>(ev)) {
    ev.h->exit_announced = 0;
    X::atomic_max64(&ev.g->last_activity_ns, now);
    X::fence_system();
    X::atomic_cas64(&ev.g->exit_request, pending, req);
    return false;
  }
  const u64 reason = busy ? kExitStuck : kExitIdle;
  ev.h->exit_reason = reason;
  X::atomic_cas64(&ev.g->exit_request, pending, (ev.p.epoch << 8) | reason);
  return true;
}

// Thread 0: about once a millisecond, tell the host (pinned memory) that this block is alive and what it holds.
template <class X>
DFCCL_DEV void heartbeat(const EngineView& ev, BlockShared& bs, u32 b) {
  bs.passes += 1;
  const u64 now = X::now_ns();
  if (now - bs.heartbeat_ns < 1000000 && !bs.exit) return;
  bs.heartbeat_ns = now;
  Heartbeat& hb = ev.h->heartbeat[b];
  hb.now_ns = now;
  hb.epoch = ev.p.epoch;
  hb.passes = bs.passes;
  hb.nactive = bs.nactive;
  hb.first_slot = bs.nactive ? bs.active[0] : ~0u;
}

// All threads of block b: the daemon's life, from launch to exit.
template <class X>
DFCCL_DEV void daemon_block(const EngineView& ev, u32 b, BlockShared& bs) {
  if (b >= ev.p.nblocks) {
    prefetch_descs<X>(ev);
    return;
  }
  const u32 tid = X::tid(), nt = X::nthreads();
  const u64 t_launch = prof_now<X>(), ns_launch = kProfile ? X::now_ns() : 0;
  for (u32 r = tid; r < kMaxRings; r += nt) bs.frontier[r] = ev.g->frontier[b][r];
  if (tid == 0) {
    bs.primitives = 0;
    bs.prefetched = 0;
    for (u32 k = 0; k < kNumPhases; ++k) bs.prof[k] = 0;
    bs.nactive = 0;
    bs.nnew = 0;
    bs.preemptions = 0;
    bs.switches = 0;
    bs.last_slot = ~0u;
    bs.exit = 0;
    bs.passes = 0;
    bs.heartbeat_ns = 0;
    bs.abort_look_ns = 0;
    X::atomic_max64(&ev.g->last_activity_ns, X::now_ns());
  }
  X::sync();
  // Restore: the collectives this block had not finished when the daemon last left (their contexts are intact).
  for (u32 s = tid; s < kMaxSlots; s += nt)
    if (chan_ctx(ev, s, b).state == kCtxActive) bs.active[X::shared_inc(&bs.nnew)] = u16(s);
  X::sync();
  if (tid == 0) {  // in-place insertion sort: insert_active writes only positions <= k, already read
    const u32 found = bs.nnew;
    bs.nactive = 0;
    for (u32 k = 0; k < found; ++k) {
      const Desc& d = chan_ctx(ev, bs.active[k], b).desc;
      insert_active<X>(ev, bs, bs.active[k], d.priority, d.seq, lane_state(d, b));
    }
  }
  X::sync();
  for (;;) {
    // The abort count for step 2, loaded first so that its round trip overlaps step 1's (see below).
    const u64 aborts_seen = X::load_relaxed(&ev.g->aborts);
    // 1. New submissions.
    u64 t0 = prof_now<X>();
    if (tid == 0) bs.nnew = 0;
    X::sync();
    // A ring that has been used (frontier > 0) also has the entry after the next loaded, relaxed and issued first, so
    // that both round trips overlap: a ring that had one new entry is done without a second round trip to look for
    // another (330 cycles less on a new submission's way to its start: docs/performance-log.md, 33). An entry seen only
    // there is loaded again with acquire before it is taken; one that came after that look waits for the next pass.
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
    X::sync();
    LaneLook look;  // thread 0's, for the pass's first attempt (not in blocking mode, whose first only checks aborts)
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

    // 2. One pass over the runnable collectives. Blocking mode: first drop the collectives of aborted
    // communicators wherever they are queued (an abort must not wait behind another communicator's queue head),
    // then run only the oldest. The daemon's copy of the aborts has each communicator's entry before the count
    // (look_for_aborts): a count read first (then the fence: acquire) guarantees that the checks below see every
    // abort it counts; no count, no abort to check (the attempts then skip the table; a later abort still ends every
    // wait through its quit test).
    if (aborts_seen != 0) X::fence_system();
    for (u32 k = 0; k < bs.nactive;) {
      const u32 res =
          attempt<X>(ev, bs, b, bs.active[k], bs.active_lane[k], aborts_seen, look, ev.p.blocking != 0);
      look.slot = ~0u;  // a later attempt may follow one on the same lane
      if (res == kAttemptDone) {
        if (tid == 0) {
          remove_active(bs, k);
          bs.progressed = 1;
        }
        X::sync();
        continue;
      }
      if (res == kAttemptProgress && tid == 0) bs.progressed = 1;
      ++k;
    }
    if (ev.p.blocking && bs.nactive > 0) {
      const u32 res = attempt<X>(ev, bs, b, bs.active[0], bs.active_lane[0], aborts_seen, LaneLook{});
      if (tid == 0 && res != kAttemptBlocked) bs.progressed = 1;
      if (res == kAttemptDone) {
        if (tid == 0) remove_active(bs, 0);
        X::sync();
      }
    }

    // 3. Leave?
    t0 = prof_now<X>();
    if (tid == 0) {
      bs.exit = should_exit<X>(ev, bs, b) ? 1u : 0u;
      heartbeat<X>(ev, bs, b);
    }
    X::sync();
    prof_add<X>(bs, kPhaseExit, t0);
    if (bs.exit) break;
  }
  prof_add<X>(bs, kPhaseLaunch, t_launch);
  for (u32 r = tid; r < kMaxRings; r += nt) ev.g->frontier[b][r] = bs.frontier[r];
  if (tid == 0) {
    BlockStats& st = ev.h->stats[b];
    st.preemptions += bs.preemptions;
    st.switches += bs.switches;
    st.exits += 1;
    st.primitives += bs.primitives;
    st.prefetched += bs.prefetched;
    if constexpr (kProfile) {
      for (u32 k = 0; k < kNumPhases; ++k) st.prof[k] += bs.prof[k];
      st.prof_ns += X::now_ns() - ns_launch;
    }
  }
}

}  // namespace dfccl::core
