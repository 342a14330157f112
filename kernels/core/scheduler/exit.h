// When the daemon leaves (should_exit, kept_by_a_wait), and the heartbeat each block writes for the host. Leaving
// saves nothing but the ring positions (contexts live in device memory); the host relaunches the daemon while work is
// pending (DESIGN invariants 3 and 4).
#pragma once

#include "../block.h"
#include "../engine_memory.h"
#include "aborts.h"
#include "owner.h"

namespace dfccl::core {

// Whether the doorbell of the submission tagged `door` (WaitEntry::door; 0: none written by a stream) is in its ring:
// the entry of its position, or of a later position of the same ring (rings wrap, and a ring's doorbells land in its
// stream's order).
template <class X>
DFCCL_DEV bool doorbell_landed(const EngineView& ev, u64 door) {
  if (door == 0) return true;
  const u64 ring = (door >> 48) - 1, pos = ((door & ((u64(1) << 48) - 1)) >> 16) - 1;
  return (X::load_acquire(&ev.g->ring[ring][pos % kRingEntries]) >> 16) >= pos + 1;
}

// Caller: thread 0, deciding an exit. Returns whether a listed stream wait keeps the launch: its barrier probe has run
// (a device-wide barrier issued after it would wait for its collective and hold any relaunch) and its collective has
// not completed (docs/design.md, "Implicit synchronizations"), or a captured wait runs (graph_start.h). A stand-in
// runs inside a stream, so a collective whose doorbell a stream has not written yet may be behind it in that stream:
// its wait keeps a stand-in only once the doorbell has landed (the host launches a daemon for the rest after the
// stand-in left). Reads host memory: never called in a loop.
template <class X>
DFCCL_DEV bool kept_by_a_wait(const EngineView& ev) {
  // A captured wait that runs was not held by a barrier issued before it: it is its own probe.
  if (vload(ev.g->graph_waiters) != 0) return true;
  const u64 nwaits = X::load_acquire(&ev.h->nwaits);
  const u64 probed = vload(ev.h->probe_done);
  for (u64 k = 0; k < nwaits; ++k) {
    const WaitEntry& w = ev.h->waits[k];
    if (vload(w.probe) > probed || vload(ev.g->complete[vload(w.slot)]) >= vload(w.seq)) continue;
    if (ev.p.standin == 0 || doorbell_landed<X>(ev, vload(w.door))) return true;
  }
  return false;
}

// Caller: thread 0 of block b, at the end of each pass. Publishes the block's activity (busy, last_activity_ns) and
// returns whether the daemon leaves now: an exit ordered for this launch, quit, or no progress for stuck_ns with work
// pending (idle_ns without), unless a stream wait keeps it. A stand-in (graph_wait.h) stays until its own collective is
// done instead, then leaves unless a wait keeps it. Invariant: one block decides (kExitPending), announcing before its
// last scan, so that a wait the host confirms meanwhile either keeps the daemon or sees the exit, and a captured wait
// that comes meanwhile either is seen or sees the owner leaving (owner.h).
template <class X>
DFCCL_DEV bool should_exit(const EngineView& ev, BlockShared& bs, u32 b) {
  const u64 now = X::now_ns();
  if (!ev.p.prefetch && b + 1 == ev.p.nblocks)  // no prefetcher to look for aborts
    look_for_aborts_when_due<X>(ev, bs.abort_look_ns, now);
  if (bs.progressed) X::atomic_max64(&ev.g->last_activity_ns, now);
  ev.g->busy[b] = bs.nactive > 0 ? 1u : 0u;
  // Three independent loads, issued together.
  const u64 req = vload(ev.g->exit_request), quit = vload(ev.g->quit), last = vload(ev.g->last_activity_ns);
  if (exit_ordered(req, ev.p.epoch)) return true;
  if (req == ((ev.p.epoch << 8) | kExitPending)) return false;  // another block is deciding
  if (quit != 0) return true;
  bool busy = false;
  if (ev.p.standin != 0) {  // leaves once its collective is done, unless waits keep it (look again every 10 us)
    if (!standin_done<X>(ev) || now < bs.kept_look_ns) return false;
    if (kept_by_a_wait<X>(ev)) {
      bs.kept_look_ns = now + 10000;
      return false;
    }
  } else {
    if (now <= last || now - last <= min_of(ev.p.idle_ns, ev.p.stuck_ns)) return false;
    for (u32 k = 0; k < ev.p.nblocks; ++k) busy = busy || vload(ev.g->busy[k]) != 0;
    if (busy && ev.p.blocking) return false;  // blocking mode waits, like NCCL: only idleness ends the daemon
    if (now - last <= (busy ? ev.p.stuck_ns : ev.p.idle_ns)) return false;
    if (kept_by_a_wait<X>(ev)) {
      X::atomic_max64(&ev.g->last_activity_ns, now);  // look again after another period
      return false;
    }
  }
  // Not before every block of the launch has joined it (owner.h): each joined block makes at least one pass, whose
  // exit check looks for aborts on the last block, before it leaves.
  if ((vload(ev.g->owner) & kOwnerMembers) < ev.p.nblocks + ev.p.prefetch) return false;
  // Decide in two steps. A host thread confirming a wait (dfcclWait: its probe has run) then reads exit_announced,
  // and a captured wait the owner word; this block announces, then scans again: either it sees the confirmed or
  // counted wait and stays, or the host sees the announcement and launches the next daemon itself
  // (Engine::confirm_wait), or the captured wait sees the owner leaving and takes the engine after it (owner.h).
  const u64 pending = (ev.p.epoch << 8) | kExitPending;
  if (X::atomic_cas64(&ev.g->exit_request, req, pending) != req) return false;
  mark_leaving<X>(ev, true);
  ev.h->exit_announced = ev.p.epoch;
  X::fence_system();
  if (kept_by_a_wait<X>(ev)) {
    ev.h->exit_announced = 0;
    mark_leaving<X>(ev, false);
    X::atomic_max64(&ev.g->last_activity_ns, now);
    X::fence_system();
    X::atomic_cas64(&ev.g->exit_request, pending, req);
    return false;
  }
  const u64 reason = busy ? kExitStuck : kExitIdle;
  if (ev.p.standin == 0) ev.h->exit_reason = reason;  // the host's launches' back-off
  X::atomic_cas64(&ev.g->exit_request, pending, (ev.p.epoch << 8) | reason);
  return true;
}

// Caller: thread 0 of block b, after should_exit. Counts the pass and, about once a millisecond and at exit, writes
// the block's Heartbeat (pinned memory): it is alive and what it holds.
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

}  // namespace dfccl::core
