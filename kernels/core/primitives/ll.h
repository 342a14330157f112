// The low-latency (LL) protocol: one primitive of a small collective, data and flag in the same 8-byte word.
//
//   ll_op<X>(bs, i, budget_ns, unbounded, quit, waited) -> true when primitive i of the attempt's program (bs.at)
//   was done, false when it would block (nothing was changed); waited: thread 0's spin time (slot_op.h, run_op)
//
// Purpose: in the Simple protocol (slot_op.h) a hop costs the data's flight to the peer, the sender's system-scope
// fence (it waits until every store has landed) and then the flag's flight. Here each 16-byte line is two 8-byte
// words {4 data bytes, 32-bit flag}, each written by one single-copy-atomic store, with flag = the low 32 bits of
// the slot position + 1 (unique to this use of the slot): the receiver sees data and flag together as soon as they
// land, one flight per hop, and the sender goes on without a fence.
// Use case: op.flags & kOpLL (BlockShared::at.ll: the whole program), chosen by the program where the collective's
// data is channel 0's alone and fits kLLMaxBytes (collectives.h, uses_ll; the same decision on every rank: it depends
// on the descriptor only): every collective of up to 8 KiB per rank-sized block, rings of any size included. Lines
// live in a separate small buffer of each lane (region_ll, channel 0), so that stale Simple data can never look like a
// flag. Positions are shared with the Simple protocol: sender and receiver count every slot of the lane either way.
// Phases, as in slot_op.h:
//   1 check   send: a free slot at next (thread 0, the credit); recv: every thread polls its own lines until their
//             flags match, then a vote of the block; an empty step (a ring's chunk with no elements) has no line to
//             poll, so thread 0 waits for the sender's tail instead (consuming a slot before it was sent would put
//             the sender's credit count past its own position). Not everything ready within the budget: return
//             false (reads only, no side effect: DESIGN invariant 2).
//   2 move    read the lines again (L2), combine with the user input, write the output and/or next's lines.
//   3 post    send: the slot's size word (region.h) and the tail are written without a fence (the tail orders no
//             data: Simple receivers read it behind their own sender's fence, LL receivers only for empty steps; a
//             network proxy checks the lines' flags itself); recv: the credit (head), no fence, as in Simple. A
//             receiving step ends with a block barrier: the next step's threads read the receive position before their
//             first barrier, and thread 0 has just advanced it.
// Flag wrap: a lane's positions repeat their low 32 bits after 2^32 slots; a stale line could match only if its
// slot's last LL use was exactly a multiple of 2^32 positions earlier, with no LL use of that slot since.
#pragma once

#include "../block.h"
#include "../collectives/collectives.h"
#include "copy.h"
#include "wait.h"

namespace dfccl::core {

// An LL line of 8 data bytes under `flag`; whether line v carries `flag` in both words; its data.
DFCCL_HD DFCCL_FORCEINLINE Pack ll_line(u64 data, u32 flag) {
  return Pack{(data & 0xffffffffull) | (u64(flag) << 32), (data >> 32) | (u64(flag) << 32)};
}
DFCCL_HD DFCCL_FORCEINLINE bool ll_ready(Pack v, u32 flag) {
  return u32(v.lo >> 32) == flag && u32(v.hi >> 32) == flag;
}
DFCCL_HD DFCCL_FORCEINLINE u64 ll_data(Pack v) { return (v.lo & 0xffffffffull) | (v.hi << 32); }

// The `bytes` (<= 8, whole elements of es bytes) at p as the low bytes of a word (loads that skip the SM's own cache,
// X::ld_elem: the daemon outlives the kernels that write user buffers), and back.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE u64 ll_gather(const char* p, u32 bytes, u32 es) {
  if (bytes == 8 && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) return X::ld_elem(p, 8);
  u64 v = 0;
  for (u32 k = 0; k < bytes; k += es) v |= X::ld_elem(p + k, es) << (8 * k);
  return v;
}
DFCCL_HD DFCCL_FORCEINLINE void ll_scatter(char* p, u64 v, u32 bytes, u32 es) {
  if (bytes == 8 && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
    *reinterpret_cast<u64*>(p) = v;
    return;
  }
  for (u32 k = 0; k < bytes; k += es) {
    const u64 e = v >> (8 * k);
    switch (es) {
      case 1: *reinterpret_cast<u8*>(p + k) = u8(e); break;
      case 2: *reinterpret_cast<u16*>(p + k) = u16(e); break;
      case 4: *reinterpret_cast<u32*>(p + k) = u32(e); break;
      default: *reinterpret_cast<u64*>(p + k) = e; break;
    }
  }
}

// in0 OP in1 (then the avg division when divisor > 0) element-wise over the `bytes` of two words; with in1 absent
// (has_in1 false) only the division applies. The operand order is reduce_copy's: in0 is the received data.
template <class T, RedOp OP>
DFCCL_HD DFCCL_FORCEINLINE u64 ll_reduce(u64 in0, u64 in1, bool has_in1, u32 bytes, int divisor) {
  constexpr u32 kElems = 8 / sizeof(T);
  T a[kElems], b[kElems];
  memcpy(a, &in0, 8);
  memcpy(b, &in1, 8);
  for (u32 k = 0; k < kElems && k * sizeof(T) < bytes; ++k) {
    T v = has_in1 ? Reducer<T, OP>::apply(a[k], b[k]) : a[k];
    if (divisor > 0) v = Reducer<T, OP>::finish(v, divisor);
    a[k] = v;
  }
  u64 out;
  memcpy(&out, a, 8);
  return out;
}

// Caller: every thread of the block, from run_op when bs.at.ll (contract at the top of this file).
template <class X, class Quit>
DFCCL_DEV bool ll_op(BlockShared& bs, u64 i_op, u64 budget_ns, bool unbounded, Quit&& quit, u64& waited) {
  const u32 tid = X::tid(), nt = X::nthreads();
  const Op op = program_op(bs.at.geo, i_op);  // every thread: a two-step program, cheaper than a broadcast
  const Desc& d = bs.at.desc;
  const CommStatic& c = d.cs;
  const LaneView& lv = bs.at.lv;
  const u32 es = dtype_size(d.dtype);
  const u64 nbytes = op.nelem * es;
  const u64 nlines = div_up(nbytes, u64(8));
  const bool recv = (op.flags & kOpRecv) != 0, send = (op.flags & kOpSend) != 0;

  // Phase 1: conditions. The lines first (every thread), then the credit (thread 0).
  // Every thread reads the receive position here, before any barrier of this step: the previous receiving step
  // ended with a barrier after thread 0 advanced it (phase 3), and an attempt begins after one.
  u64 t0 = prof_now<X>();
  const Pack* in_lines = recv ? reinterpret_cast<const Pack*>(region_ll(c.self, c, lv.lane, bs.recvd)) : nullptr;
  const u32 in_flag = u32(bs.recvd + 1);
  waited = 0;  // thread 0's counts
  bool ok = true;
  if (recv && nlines == 0) {
    if (tid == 0) {
      const u64 recvd = bs.recvd;
      auto filled = [&]() { return X::load_acquire(&lv.recv_ctrl->tail) > recvd; };
      ok = spin_wait<X>(filled, quit, budget_ns, unbounded, waited);
    }
  } else if (recv) {
    u64 start = 0;
    for (u32 it = 0;; ++it) {
      bool mine = true;
      for (u64 i = tid; i < nlines && mine; i += nt) mine = ll_ready(X::ld_ll(in_lines + i), in_flag);
      if (X::sync_and(mine)) break;
      bool stop = false;
      if (tid == 0) {
        const u64 t = X::now_ns();
        if (it == 0) start = t;
        waited = t - start;
        stop = (!unbounded && waited >= budget_ns) || quit(t);
      }
      if (X::sync_or(stop)) {
        ok = false;
        break;
      }
      X::backoff(waited);  // thread 0's wait; the others' 0
    }
  }
  if (ok && send && tid == 0) {
    const u64 sent = bs.sent;
    auto credit = [&]() { return sent - X::load_acquire(&lv.send_ctrl->head) < c.nslots; };
    u64 w = 0;
    ok = spin_wait<X>(credit, quit, budget_ns, unbounded, w);
    waited += w;
  }
  if (tid == 0) bs.ok = ok ? 1u : 0u;
  X::sync();
  prof_add<X>(bs, kPhaseCheck, t0);
  if (!bs.ok) return false;

  // Phase 2: move, one line (8 data bytes) at a time.
  t0 = prof_now<X>();
  const char* src = (op.flags & kOpSrc) ? static_cast<const char*>(d.send) + op.src * es : nullptr;
  char* dst = (op.flags & kOpDst) ? static_cast<char*>(d.recv) + op.dst * es : nullptr;
  Pack* out_lines = send ? reinterpret_cast<Pack*>(region_ll(c.next_region, c, lv.lane, bs.sent)) : nullptr;
  const u32 out_flag = u32(bs.sent + 1);
  const int divisor = ((op.flags & kOpFinish) && d.op == RedOp::Avg && c.nranks > 1) ? c.nranks : 0;
  for (u64 i = tid; i < nlines; i += nt) {
    const u32 bytes = u32(min_of<u64>(8, nbytes - i * 8));
    const u64 mine = src ? ll_gather<X>(src + i * 8, bytes, es) : 0;
    u64 v = recv ? ll_data(X::ld_ll(in_lines + i)) : mine;
    if ((recv && src) || divisor > 0) {
      dispatch_dtype_op(d.dtype, d.op,
                        [&]<class T, RedOp OP>() { v = ll_reduce<T, OP>(v, mine, recv && src, bytes, divisor); });
    }
    if (dst) ll_scatter(dst + i * 8, v, bytes, es);
    if (out_lines) X::st_ll(out_lines + i, ll_line(v, out_flag));
  }
  X::sync();
  prof_add<X>(bs, kPhaseMove, t0);

  // Phase 3: post.
  t0 = prof_now<X>();
  if (tid == 0) {
    if (send) {
      X::store_flag(region_size(c.next_region, c, lv.ch, lv.lane, bs.sent), size_word(bs.sent, true, nlines * 16));
      X::store_flag(&lv.next_ctrl->tail, bs.sent + 1);
      bs.sent += 1;
    }
    if (recv) {
      X::fence_credit();
      X::store_flag(&lv.prev_ctrl->head, bs.recvd + 1);
      bs.recvd += 1;
    }
    bs.primitives += 1;
  }
  if (recv) X::sync();
  prof_add<X>(bs, kPhasePost, t0);
  return true;
}

}  // namespace dfccl::core
