// Step 2 of a scheduler pass, an attempt: one block resumes one channel of one collective at its saved primitive
// (ChanCtx::op) and runs primitives until the program ends (the channel is done) or one would block past its spin
// budget (preemption: the index is saved, DESIGN invariant 2). The budget adapts per channel ("stickiness"): a wait
// that succeeds after w ns raises it to at least spin_grow * w, an attempt preempted without progress halves it,
// within [spin_min, spin_max], so that ranks whose peers are active stay on the same collective.
#pragma once

#include "../collectives/collectives.h"
#include "../primitives/slot_op.h"
#include "aborts.h"
#include "completion.h"
#include "pickup.h"

namespace dfccl::core {

enum : u32 { kAttemptBlocked = 0, kAttemptProgress = 1, kAttemptDone = 2 };

// Caller: thread 0 in a wait of an attempt (the quit test of spin_wait). Returns whether the wait must end before its
// condition holds or its budget runs out: an abort since the pass read aborts_seen (the pass's count, so that an abort
// between the pass's check and this wait is not missed), engine shutdown, or this launch's exit ordered by another
// block (a blocking-mode wait has no budget: alone it would hold work that the relaunch must see). DESIGN invariant 1.
DFCCL_DEV inline bool wait_must_end(const EngineView& ev, u64 aborts_seen) {
  // Three independent loads, issued together.
  const u64 aborts = vload(ev.g->aborts), quit = vload(ev.g->quit), req = vload(ev.g->exit_request);
  return aborts != aborts_seen || quit != 0 || exit_ordered(req, ev.p.epoch);
}

// Caller: thread 0, the quit test of an attempt's waits (`now`: the wait's own clock reading; look_at: 0 at the
// attempt's start). Returns whether the wait ends: as wait_must_end says, or, with watch_rings (an unbounded wait
// after an abort: aborts_seen != 0), on a submission that the pass's poll did not take (rings_have_new). Such a one may
// belong to a communicator whose abort aborts_seen already counts (it passed its liveness check before the abort and
// was queued after), and only the next pass drops it. Both looks run once the wait has lasted kAbortLookNs, then
// every kAbortLookNs (look_for_aborts: a blocking-mode wait must see its abort itself).
template <class X>
DFCCL_DEV bool wait_quits(const EngineView& ev, const BlockShared& bs, u64 aborts_seen, bool watch_rings, u64& look_at,
                          u64 now) {
  if (look_at == 0) look_at = now + kAbortLookNs;  // the wait's first check: not due yet
  const bool looked = look_for_aborts_when_due<X>(ev, look_at, now);
  return (looked && watch_rings && rings_have_new<X>(ev, bs)) || wait_must_end(ev, aborts_seen);
}

// Whether the collective that d follows in its chain (Desc::after) has completed on this rank: the completion word of
// its slot holds the sequence number of the slot's last finished occupant, and sequence numbers only grow.
DFCCL_DEV inline bool predecessor_done(const EngineView& ev, const Desc& d) {
  return d.after == 0 || vload(ev.g->complete[d.after_slot]) >= d.seq - d.after;
}

// Thread 0's decision at the start of an attempt (attempt_setup), broadcast through BlockShared::ok.
enum : u32 { kDecideRun = 0, kDecideAbort = 1, kDecideWaitTurn = 2 };

// Caller: thread 0 at the start of an attempt. Decides (kDecide* into BlockShared::ok): abort (its communicator was
// aborted), wait (not its turn on the lane, its predecessor in a chain not done, or only_if_aborted), or run, and for a
// run sets up BlockShared::at (the descriptor, geometry, lane addresses) and the lane's positions for every thread.
// spin and tally receive the channel's saved budget and tally (a fresh collective's come from accept through look).
// Every load here is independent of the others: the attempt starts after one round trip to memory.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void attempt_setup(const EngineView& ev, BlockShared& bs, u32 b, u32 slot, LaneState* ls,
                                               u64 aborts_seen, const LaneLook& look, bool only_if_aborted, ChanCtx& cx,
                                               u64& spin, ChanTally& tally) {
  const bool fresh = look.slot == slot;
  Desc d;
  u64 turn, sent, recvd;
  u32 first_op, budget;
  if (fresh) {  // accept's reset (ChanCtx) and its loads
    d = bs.at.desc;
    turn = look.turn;
    sent = look.sent;
    recvd = look.recvd;  // tally: zero as accept left it
    budget = u32(ev.p.spin_init_ns);
    first_op = 0;
  } else {
    d = cx.desc;
    turn = vload(ls->turn);
    sent = ls->sent;
    recvd = ls->recvd;
    tally = ChanTally{cx.t_start, cx.preemptions, cx.wait_us};
    budget = cx.spin_ns;
    first_op = cx.op;
    bs.at.desc = d;
  }
  spin = budget;
  const bool aborted = aborts_seen != 0 && comm_aborted(ev, d);
  u32 decision = kDecideRun;
  if (aborted) {
    decision = kDecideAbort;
  } else if (only_if_aborted || turn != d.turn || !predecessor_done(ev, d)) {
    decision = kDecideWaitTurn;
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

// Caller: thread 0, after the attempt's primitives ran up to i (excluded). Stores only, what the attempt changed:
// the channel's next primitive, tally and spin budget (halved when preempted without progress) and the lane's
// positions; a done channel is finished (finish_channel).
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void attempt_save(const EngineView& ev, BlockShared& bs, u32 slot, ChanCtx& cx,
                                              LaneState* ls, ChanTally& tally, u64 i, bool done, bool progressed,
                                              u64 waited_ns, u64 spin) {
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

// Caller: every thread of block b, in a pass. Runs channel b of the collective in `slot` (lane state ls) until it
// ends or would block; returns kAttemptDone, kAttemptProgress or kAttemptBlocked. aborts_seen: EngineGlobal::aborts
// as read at the pass's start (0: no communicator's flag is read). only_if_aborted: finish it if aborted, else leave
// it untouched (blocking mode's queue behind its head). look: accept's loads, used when it names this slot.
template <class X>
DFCCL_DEV u32 attempt(const EngineView& ev, BlockShared& bs, u32 b, u32 slot, LaneState* ls, u64 aborts_seen,
                      LaneLook look, bool only_if_aborted = false) {
  u64 t_prog = prof_now<X>();
  ChanCtx& cx = chan_ctx(ev, slot, b);
  u64 spin = 0;       // thread 0: the adaptive spin budget
  ChanTally tally{};  // thread 0
  if (X::tid() == 0) attempt_setup<X>(ev, bs, b, slot, ls, aborts_seen, look, only_if_aborted, cx, spin, tally);
  X::sync();
  const u32 decision = bs.ok;
  const u64 first = bs.first_op;
  const u64 nops = bs.at.nops;
  X::sync();
  if (decision == kDecideWaitTurn) {
    prof_add<X>(bs, kPhaseProgram, t_prog);
    return kAttemptBlocked;
  }
  if (decision == kDecideAbort) {
    if (X::tid() == 0) finish_channel<X>(ev, slot, bs.at.desc, cx, nullptr, tally, kStatusAborted);
    X::sync();
    return kAttemptDone;
  }
  prof_add<X>(bs, kPhaseProgram, t_prog);

  const bool unbounded = ev.p.blocking != 0;
  const bool watch_rings = unbounded && aborts_seen != 0;
  u64 look_at = 0;  // thread 0
  auto quit = [&](u64 now) { return wait_quits<X>(ev, bs, aborts_seen, watch_rings, look_at, now); };
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
  if (X::tid() == 0) attempt_save<X>(ev, bs, slot, cx, ls, tally, i, done, progressed, waited_ns, spin);
  X::sync();
  return done ? kAttemptDone : (progressed ? kAttemptProgress : kAttemptBlocked);
}

}  // namespace dfccl::core
