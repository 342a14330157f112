// The two-phase primitive: one step of a collective program on one connection slot.
//
//   run_op<X>(bs, i, budget_ns, unbounded, quit, waited) -> true when primitive i of the attempt's program (bs.at)
//   was done, false when it would block (nothing was changed); waited: thread 0's spin time in it (a register of
//   thread 0's, never shared memory: other threads may still read shared memory when thread 0's next call writes)
//
// Phase 1 (spin): thread 0 checks the step's conditions — a filled slot from prev (kOpRecv: the lane's tail is past
// our receive position) and a free slot at next (kOpSend: fewer than nslots of our slots unconsumed) — polling for
// at most the spin budget. If they do not hold, the step returns false before touching anything: the preempted
// collective resumes later at the same step (DESIGN invariant 2).
// Phase 2 (move): all threads move the slice (copy.h): inputs are the received slot and/or the user input, outputs
// the user output and/or next's slot; the operator's final step (avg) is applied where the program says.
// Phase 3 (post): thread 0 publishes the sent slot to next (tail) and frees the consumed slot for prev (head),
// behind one fence: a system-scope release when data was sent (the slot's size word before it), none for a receive
// credit alone (exec.h).
//
// Caller: every thread of the block. Positions (sent/received slot counts of the lane) live in BlockShared during
// an attempt; the scheduler loads them before and saves them after.
#pragma once

#include "../block.h"
#include "../collectives/collectives.h"
#include "copy.h"
#include "ll.h"
#include "wait.h"

namespace dfccl::core {

// Caller: every thread of the block, from attempt (contract at the top of this file).
template <class X, class Quit>
DFCCL_DEV bool run_op(BlockShared& bs, u64 i, u64 budget_ns, bool unbounded, Quit&& quit, u64& waited) {
  if (bs.at.ll) return ll_op<X>(bs, i, budget_ns, unbounded, quit, waited);
  // Phase 1: conditions. Thread 0 computes the primitive for everybody (BlockShared::at).
  u64 t0 = prof_now<X>();
  if (X::tid() == 0) {
    const Op op = program_op(bs.at.geo, i);
    bs.at.op = op;
    prof_add<X>(bs, kPhaseProgram, t0);
    t0 = prof_now<X>();
    const u64 recvd = bs.recvd, sent = bs.sent, nslots = bs.at.desc.cs.nslots;
    const LaneCtrl* recv_ctrl = bs.at.lv.recv_ctrl;
    const LaneCtrl* send_ctrl = bs.at.lv.send_ctrl;
    auto ready = [&]() {
      if ((op.flags & kOpRecv) && X::load_acquire(&recv_ctrl->tail) <= recvd) return false;
      if ((op.flags & kOpSend) && sent - X::load_acquire(&send_ctrl->head) >= nslots) return false;
      return true;
    };
    waited = 0;
    bs.ok = spin_wait<X>(ready, quit, budget_ns, unbounded, waited) ? 1u : 0u;
  }
  X::sync();
  prof_add<X>(bs, kPhaseCheck, t0);
  if (!bs.ok) return false;
  t0 = prof_now<X>();

  // Phase 2: move.
  const Op op = bs.at.op;
  const Desc& d = bs.at.desc;
  const CommStatic& c = d.cs;
  const LaneView& lv = bs.at.lv;
  const u32 es = dtype_size(d.dtype);
  const char* slot_in = (op.flags & kOpRecv) ? region_slot(c.self, c, lv.ch, lv.lane, bs.recvd) : nullptr;
  char* slot_out = (op.flags & kOpSend) ? region_slot(c.next_region, c, lv.ch, lv.lane, bs.sent) : nullptr;
  const char* src = (op.flags & kOpSrc) ? static_cast<const char*>(d.send) + op.src * es : nullptr;
  char* dst = (op.flags & kOpDst) ? static_cast<char*>(d.recv) + op.dst * es : nullptr;
  const char* in0 = slot_in ? slot_in : src;
  const char* in1 = slot_in ? src : nullptr;
  char* out0 = dst ? dst : slot_out;
  char* out1 = dst ? slot_out : nullptr;
  const int divisor = ((op.flags & kOpFinish) && d.op == RedOp::Avg && c.nranks > 1) ? c.nranks : 0;
  if (op.nelem > 0 && out0) {
    if (!in1 && divisor == 0) {
      copy_bytes<X>(in0, out0, out1, op.nelem * es);
    } else {
      dispatch_dtype_op(d.dtype, d.op, [&]<class T, RedOp OP>() {
        reduce_copy<X, T, OP>(reinterpret_cast<const T*>(in0), reinterpret_cast<const T*>(in1),
                              reinterpret_cast<T*>(out0), reinterpret_cast<T*>(out1), op.nelem, divisor);
      });
    }
  }
  X::sync();
  prof_add<X>(bs, kPhaseMove, t0);

  // Phase 3: post.
  t0 = prof_now<X>();
  if (X::tid() == 0) {
    const u32 flags = bs.at.op.flags;
    if (flags & kOpSend) {
      const LaneView& lv = bs.at.lv;
      X::store_flag(region_size(c.next_region, c, lv.ch, lv.lane, bs.sent), size_word(bs.sent, false, op.nelem * es));
      X::fence_release();
      X::store_flag(&bs.at.lv.next_ctrl->tail, bs.sent + 1);
      bs.sent += 1;
    } else {
      X::fence_credit();
    }
    if (flags & kOpRecv) {
      X::store_flag(&bs.at.lv.prev_ctrl->head, bs.recvd + 1);
      bs.recvd += 1;
    }
    bs.primitives += 1;
  }
  prof_add<X>(bs, kPhasePost, t0);
  return true;
}

}  // namespace dfccl::core
