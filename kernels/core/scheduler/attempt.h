// An attempt: one block runs one channel of one collective from its saved step until it ends or would block.
#pragma once

#include "../collectives/collectives.h"
#include "../primitives/slot_op.h"
#include "aborts.h"
#include "completion.h"
#include "pickup.h"

namespace dfccl::core {

enum : u32 { kAttemptBlocked = 0, kAttemptProgress = 1, kAttemptDone = 2 };

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

// Thread 0's decision at the start of an attempt (attempt_setup), broadcast through BlockShared::ok.
enum : u32 { kDecideRun = 0, kDecideAbort = 1, kDecideWaitTurn = 2 };

// Thread 0 decides, everybody follows: aborted communicator, not this collective's turn on its lane, or run.
// Every load here is independent of the others, so the attempt starts after one round trip to memory: the
// descriptor, the lane's turn and positions (its address came with the active list) and the channel's dynamic
// context. Only after an abort somewhere does the communicator's flag cost a second. Thread 0 leaves what the
// attempt needs in BlockShared::at for the others (the descriptor, the geometry, the lane's addresses).
// The decision (kDecide*) goes to BlockShared::ok; spin and tally receive the channel's saved budget and tally.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void attempt_setup(const EngineView& ev, BlockShared& bs, u32 b, u32 slot, LaneState* ls,
                                              u64 aborts_seen, const LaneLook& look, bool only_if_aborted,
                                              ChanCtx& cx, u64& spin, ChanTally& tally) {
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
  } else if (only_if_aborted || turn != d.turn) {
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

// Thread 0, after the attempt's primitives ran up to i (excluded): stores only, what the attempt changed (the channel's next primitive i, its tally and
// spin budget, the lane's positions); a preempted attempt that made no progress halves the budget, and a done one
// finishes the channel (finish_channel).
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
  if (X::tid() == 0) attempt_save<X>(ev, bs, slot, cx, ls, tally, i, done, progressed, waited_ns, spin);
  X::sync();
  return done ? kAttemptDone : (progressed ? kAttemptProgress : kAttemptBlocked);
}

}  // namespace dfccl::core
