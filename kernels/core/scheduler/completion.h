// The end of a channel: finish_channel marks it done, and the last block of a collective publishes its completion
// (completion word, completion queue entry).
#pragma once

#include "../engine_memory.h"
#include "../primitives/copy.h"

namespace dfccl::core {

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

}  // namespace dfccl::core
