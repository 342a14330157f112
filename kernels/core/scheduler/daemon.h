// The daemon's scheduler: what one block of the daemon does from launch to exit. Written once, run by the CUDA
// executor (one thread block per channel) and the host executor (one thread per channel).
//
// Every block runs channel b of every collective; a block is an independent scheduler. Each pass:
//   1. pick up new submissions (pickup.h): poll every submission ring (device memory), load the descriptor of each
//      new collective into its context (once), and insert it into the active list in scheduling order;
//   2. one attempt at each runnable collective, in order (priority, then age; blocking mode: age only, and only the
//      oldest runs) (attempt.h): resume its program at its saved step until it ends or a primitive's spin budget
//      runs out (preemption: the step index stays saved, and the block moves on);
//   3. leave when told (engine shutdown, another block's exit request) or when no block made progress for stuck_ns
//      with collectives pending or for idle_ns with none (exit.h); after a pass without progress a CPU thread backs
//      off (X::backoff), as every wait of a primitive does. Contexts live in device memory, so leaving saves
//      only the ring positions; the host relaunches the daemon while work is pending (DESIGN invariants 3 and 4).
// One more block, where the device holds it, is the descriptor prefetcher (prefetcher.h).
#pragma once

#include "attempt.h"
#include "exit.h"
#include "owner.h"
#include "pickup.h"
#include "prefetcher.h"

namespace dfccl::core {

static_assert(kNumPhases <= sizeof(BlockStats::prof) / sizeof(u64));

// Caller: every thread of block b, at launch. Loads the ring positions, resets the block's counters and restores
// its active list in scheduling order: the collectives it had not finished when the daemon last left (DESIGN
// invariant 3: their contexts are intact). Ends with a barrier.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void start_block(const EngineView& ev, u32 b, BlockShared& bs, u32 tid, u32 nt) {
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
    bs.kept_look_ns = 0;
    X::atomic_max64(&ev.g->last_activity_ns, X::now_ns());
  }
  X::sync();
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
}

// Caller: every thread of block b, after pick_up. One attempt at each active collective in order, removing those
// done; blocking mode first drops the collectives of aborted communicators wherever queued, then runs the oldest.
// aborts_seen was read before step 1; the fence after it makes every abort it counts visible to the checks (the
// daemon's copy has each entry before the count). look is used by the first attempt only.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void run_pass(const EngineView& ev, BlockShared& bs, u32 b, u32 tid, u64 aborts_seen,
                                          LaneLook& look) {
  if (aborts_seen != 0) X::fence_system();
  for (u32 k = 0; k < bs.nactive;) {
    const u32 res = attempt<X>(ev, bs, b, bs.active[k], bs.active_lane[k], aborts_seen, look, ev.p.blocking != 0);
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
  // The oldest's wait has no budget and ends only on an abort counted after aborts_seen: it starts only once this
  // pass took every waiting submission (fewer than kAcceptPerRing new ones), so that none of an aborted communicator
  // is left in a ring, unseen, behind a wait that its own abort no longer ends.
  if (ev.p.blocking && bs.nactive > 0 && bs.nnew < kAcceptPerRing) {
    const u32 res = attempt<X>(ev, bs, b, bs.active[0], bs.active_lane[0], aborts_seen, LaneLook{});
    if (tid == 0 && res != kAttemptBlocked) bs.progressed = 1;
    if (res == kAttemptDone) {
      if (tid == 0) remove_active(bs, 0);
      X::sync();
    }
  }
}

// Caller: every thread of block b, at exit. Saves the ring positions (device memory) and adds this launch's counters
// to the block's statistics (pinned memory).
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void end_block(const EngineView& ev, u32 b, BlockShared& bs, u32 tid, u32 nt,
                                           u64 ns_launch) {
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

// Caller: every thread of block b of a launch that owns the engine (owner.h; b == nblocks: the prefetcher). Runs the
// block's scheduler from launch to exit: start_block, then passes (pick_up, run_pass, should_exit) until an exit,
// then end_block, and leaves the owner.
template <class X>
DFCCL_DEV void run_launch(const EngineView& ev, u32 b, BlockShared& bs) {
  const u32 tid = X::tid(), nt = X::nthreads();
  if (b >= ev.p.nblocks) {
    prefetch_descs<X>(ev);  // one warp: the others return at once
    X::warp_sync();
    if (tid == 0) leave_owner<X>(ev);
    return;
  }
  const u64 t_launch = prof_now<X>(), ns_launch = kProfile ? X::now_ns() : 0;
  start_block<X>(ev, b, bs, tid, nt);
  for (;;) {
    // The abort count for step 2, loaded first so that its round trip overlaps step 1's.
    const u64 aborts_seen = X::load_relaxed(&ev.g->aborts);
    // 1. New submissions.
    LaneLook look;  // thread 0's, for the pass's first attempt
    pick_up<X>(ev, bs, b, tid, nt, look);
    // 2. One pass over the runnable collectives.
    run_pass<X>(ev, bs, b, tid, aborts_seen, look);
    // 3. Leave?
    const u64 t0 = prof_now<X>();
    if (tid == 0) {
      bs.exit = should_exit<X>(ev, bs, b) ? 1u : 0u;
      heartbeat<X>(ev, bs, b);
    }
    X::sync();
    prof_add<X>(bs, kPhaseExit, t0);
    if (bs.exit) break;
    // A pass without progress: a CPU thread backs off by how long the engine has been quiet (X::backoff).
    if constexpr (X::kRests)
      if (!bs.progressed) X::backoff(X::now_ns() - vload(ev.g->last_activity_ns));
  }
  prof_add<X>(bs, kPhaseLaunch, t_launch);
  if constexpr (kProfile)
    if (b == 0 && tid == 0) ev.g->launch_trace[ev.g->owner_trace % kLaunchTraceN].left = X::now_ns();
  end_block<X>(ev, b, bs, tid, nt, ns_launch);
  X::sync();
  if (tid == 0) leave_owner<X>(ev);
}

// Caller: every thread of block b of a daemon launch by the host. Runs the scheduler if the launch takes the engine
// (owner.h); a launch that yields to a stand-in reports an idle exit, and the host launches again while work waits.
template <class X>
DFCCL_DEV void daemon_block(const EngineView& ev, u32 b, BlockShared& bs) {
  bool runs = false;
  if (X::tid() == 0) {
    runs = enter_launch<X>(ev, b, ev.p.epoch, &ev.g->verdict[0]);
    if (b == 0 && !runs) ev.h->exit_reason = kExitIdle;
  }
  if (X::sync_or(runs)) run_launch<X>(ev, b, bs);
}

}  // namespace dfccl::core
