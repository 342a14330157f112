// A wait that stands in for the daemon (docs/design.md, "CUDA graphs", "Stand-ins"): what a graph's wait node runs at
// each replay, and an eager dfcclWait where captured graphs exist (Engine::wait_as_standin), one block per daemon
// block (the CUDA executor's graph_wait kernel, kernels/cuda/daemon.cu). It holds its stream until its instance is
// done, and when no daemon runs it runs the scheduler itself until then (it stands in): a device-wide
// synchronization issued after it waits for it and holds any daemon launched after it, so it must not depend on one.
#pragma once

#include "daemon.h"
#include "graph_start.h"

namespace dfccl::core {

// Caller: every thread of block b of the wait, after its instance's start in stream order (graph_post, or the eager
// collective's doorbell). Block 0's thread 0 counts the wait in graph_waiters (which keeps any owner: exit.h) before
// deciding, so that an owner either stays for it or is seen leaving (owner.h). Returns once the instance is done, its
// communicator aborted, or the engine quits. Invariant: one such wait per instance (the launch's tag is the
// instance's: two would share their verdict); any other is poll_only (block 0 polls, the others return).
template <class X>
DFCCL_DEV void graph_wait_block(EngineView ev, const GraphWait& w, u32 b, BlockShared& bs) {
  const u32 tid = X::tid();
  const u64 seq = w.seq != 0 ? w.seq : vload(ev.g->graph_desc[w.slot].seq);
  ev.p.epoch = standin_tag(seq);
  ev.p.standin = w.slot + 1;
  ev.p.standin_seq = seq;
  bool runs = false;
  if (w.poll_only != 0 && (b != 0 || tid != 0)) return;
  if (w.poll_only == 0 && tid == 0) {
    if (b == 0) {
      if constexpr (kProfile) graph_stamp(ev.g->graph_trace, seq, kStampWaitIn, X::now_ns());
      X::atomic_add64(&ev.g->graph_waiters, 1);
      X::fence_system();
    }
    runs = enter_launch<X>(ev, b, ev.p.epoch, &ev.g->verdict[w.slot + 1]);
    if (b == 0 && runs) {
      X::atomic_add64(&ev.g->graph_waiters, ~u64(0));  // the owner is not a waiter
      ev.h->standin_runs += 1;                         // the owner's alone
    }
  }
  if (w.poll_only == 0) runs = X::sync_or(runs);
  if (runs) run_launch<X>(ev, b, bs);
  if (b != 0 || tid != 0) return;
  // The stand-in left once the instance was done (or on quit); a waiter polls until then.
  for (u64 k = 0;; ++k) {
    if (standin_done<X>(ev)) break;
    if ((k & 255) == 0 && (vload(*w.abort_word) == w.abort_value || vload(ev.g->quit) != 0)) break;
    X::pause();
  }
  if (!runs && w.poll_only == 0) X::atomic_add64(&ev.g->graph_waiters, ~u64(0));
  if constexpr (kProfile) {
    if (w.poll_only == 0) {
      graph_stamp(ev.g->graph_trace, seq, kStampWaitSeen, X::now_ns());
      graph_stamp(ev.g->graph_trace, seq, kStampStoodIn, runs ? 1 : 0);
    }
  }
}

// Caller: every thread of block b of nb, the node of a captured call whose wait follows its start at once (NCCL's
// form, one slot: Engine::graph_post with with_wait). Block 0's thread 0 posts the replay's instance (graph_post) and
// announces it; each other block learns from the announcement which instance it waits for; then each block is block
// b of that instance's wait (graph_wait_block, w.seq set). A block tells which run of the node it belongs to by the
// slot's count of arrivals: runs of one node never overlap, each has nb blocks, and only such nodes count there, so
// the count is a multiple of nb between runs.
template <class X>
DFCCL_DEV void graph_start_wait_block(EngineView ev, const GraphStart& s, GraphWait w, u32 b, u32 nb, BlockShared& bs) {
  if (X::tid() == 0) {
    const u64 run = X::atomic_add64(&ev.g->graph_arrivals[w.slot], 1) / nb;
    u64* announced = &ev.g->graph_announced[w.slot];
    if (b == 0) {
      bs.posted_seq = graph_post<X>(s);
      X::store_release(announced, run + 1);
    } else {
      u64 k = 0;
      while (X::load_acquire(announced) != run + 1 && ((++k & 255) != 0 || vload(ev.g->quit) == 0)) X::idle();
      bs.posted_seq = vload(ev.g->graph_desc[w.slot].seq);  // the slot's next post is this node's next run's
    }
  }
  X::sync();
  w.seq = bs.posted_seq;
  graph_wait_block<X>(ev, w, b, bs);
}

}  // namespace dfccl::core
