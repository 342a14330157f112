// The end of a channel: finish_channel marks it done, and the last block of a collective publishes its completion
// (the completion word in device memory, the completion queue entry in pinned memory).
#pragma once

#include "../engine_memory.h"
#include "../primitives/copy.h"

namespace dfccl::core {

// What one channel has tallied over its attempts (ChanCtx fields), kept by thread 0 during an attempt and handed to
// finish_channel, which reads nothing back.
struct ChanTally {
  u64 t_start;
  u32 preemptions;
  u32 wait_us;
};

// Caller: one thread. Writes completion number pos into entry e: c in flagged words of entry_flag(pos) (flagged.h),
// two words per 16-byte store. No fence: the host takes the entry once every word carries its flag.
template <class X>
DFCCL_DEV void write_cq_entry(CqEntry& e, u64 pos, const CqInfo& c) {
  u32 p[kCqWords];
  memcpy(p, &c, sizeof(CqInfo));
  const u32 f = entry_flag(pos);
  Pack* dst = reinterpret_cast<Pack*>(e.w);
  for (u32 i = 0; i < kCqWords / 2; ++i)
    X::st_ll(dst + i, Pack{flagged_word(p[2 * i], f), flagged_word(p[2 * i + 1], f)});
}

// Caller: thread 0, after the block's last data movement for the collective in `slot`. Marks the channel done with
// `status`, passes the lane to the next turn (ls; null for an aborted collective) and adds tally t to the slot's
// words; the last block to finish publishes the completion word and queue entry. Invariant: the slot's words are
// reset before the completion is published, so that its next collective counts from zero.
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
  // The last block. The completion word first: it is read on this GPU only (stream waits, exit decisions) and the
  // data was written by this GPU's blocks, ordered by their fences and done_count, so a device-scope fence suffices.
  // done_count is reset before that fence: the host submits the slot's next collective only after the entry below.
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
  if (d.seq > kGraphSeqBase) {  // a captured collective's instance: no entry; its slot's next start may go
    if constexpr (kProfile) graph_stamp(ev.g->graph_trace, d.seq, kStampDone, now);
    X::fence_device();
    X::store_flag(&ev.g->graph_state[slot], kGraphDone);
    X::store_flag(&ev.h->graph_done[slot], d.seq);
    return;
  }
  const u64 pos = X::atomic_add64(&ev.g->cq_tail, 1);
  // Then the entry, with no fence: the host waits for every flag, and the data (device memory on a GPU, checked at
  // submission) is read by later GPU work, already ordered by the fence above.
  write_cq_entry<X>(ev.h->cq[pos % kCqEntries], pos, c);
}

}  // namespace dfccl::core
