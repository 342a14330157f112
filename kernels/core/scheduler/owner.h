// Who runs the scheduler (docs/design.md, "CUDA graphs", "Stand-ins"): one launch at a time owns the engine's
// blocks, whether the host launched it (a daemon) or a captured wait stands in for one (graph_wait.h). The owner
// word is tag << 9 | leaving << 8 | members: the tag of the owning launch (a host launch's epoch, or a stand-in's
// kStandInTag | its instance's sequence number), whether it is deciding to leave or leaving (exit.h, should_exit),
// and how many of its blocks run now. A launch's block 0 decides whether the launch runs and publishes the verdict;
// each other block then joins the owner, unless that launch is already over. Waiting blocks idle (X::idle: the host
// executor's threads sleep, leaving the cores to the blocks that run).
#pragma once

#include "../block.h"
#include "../engine_memory.h"

namespace dfccl::core {

// The tag of the stand-in for the instance whose sequence number is seq. The tags of one slot's instances grow, also
// where a graph takes a slot that eager collectives used (a captured instance's tag is above every eager one's):
// enter_launch relies on it.
DFCCL_HD inline u64 standin_tag(u64 seq) {
  return kStandInTag | (seq > kGraphSeqBase ? kStandInCaptured : 0) | (seq & (kStandInCaptured - 1));
}

// Whether the instance that the stand-in ev waits for is done (its completion word: completion.h).
template <class X>
DFCCL_DEV bool standin_done(const EngineView& ev) {
  return X::load_acquire(&ev.g->complete[ev.p.standin - 1]) >= ev.p.standin_seq;
}

// Caller: thread 0 of block 0 of the launch `tag` (ev.p.standin: slot + 1 of a stand-in's collective, 0 for a host
// launch). Takes the engine for the launch, or returns false when the launch does not run:
// - a host launch yields to a stand-in that stays: that one serves the waits the host launched for (it stays for
//   captured waits, and for listed waits whose doorbells have landed: exit.h) and the host launches again for the
//   rest once it has left;
// - a stand-in yields to any owner that stays (its wait, counted in graph_waiters before this call, keeps that
//   owner), or gives up once its own instance is done.
// It waits while the owner is leaving. Invariant: at most one launch owns the engine.
template <class X>
DFCCL_DEV bool take_owner(const EngineView& ev, u64 tag) {
  const bool standin = is_standin(tag);
  for (;;) {
    const u64 o = X::load_acquire(&ev.g->owner);
    if (o == 0) {
      if (X::atomic_cas64(&ev.g->owner, 0, (tag << 9) | 1) == 0) return true;
      continue;
    }
    if ((o & kOwnerLeaving) == 0 && (standin || is_standin(owner_tag(o)))) return false;
    if (standin && standin_done<X>(ev)) return false;
    if (vload(ev.g->quit) != 0) return false;
    X::idle();
  }
}

// Caller: thread 0 of a block b > 0 of the launch `tag`, whose block 0 took the engine. Joins it; returns false if
// the launch has ended (left, ordered to leave, or quit) before this block came.
template <class X>
DFCCL_DEV bool join_owner(const EngineView& ev, u64 tag) {
  for (;;) {
    const u64 o = X::load_acquire(&ev.g->owner);
    if (owner_tag(o) != tag) return false;
    if ((o & kOwnerLeaving) != 0) {  // deciding (it may stay) or leaving
      if (exit_ordered(vload(ev.g->exit_request), tag) || vload(ev.g->quit) != 0) return false;
      X::idle();
      continue;
    }
    if (X::atomic_cas64(&ev.g->owner, o, o + 1) == o) return true;
  }
}

// Caller: thread 0 of every block of the launch `tag`, at its start. Block 0 decides (take_owner) and publishes the
// verdict in *verdict (EngineGlobal::verdict: tag << 1 | runs); the others wait for it and join. Returns whether this
// block runs the scheduler. The tags of one verdict word grow (epochs; a slot's instances' sequence numbers), so a
// block that finds a later launch's verdict came late: its block 0 decided long before, and it joins only if its
// launch still owns the engine (one that runs cannot leave without it).
template <class X>
DFCCL_DEV bool enter_launch(const EngineView& ev, u32 b, u64 tag, u64* verdict) {
  if (b == 0) {
    const u64 t_in = kProfile ? X::now_ns() : 0;
    const bool runs = take_owner<X>(ev, tag);
    if constexpr (kProfile) {
      const u64 k = X::atomic_add64(&ev.g->launches_traced, 1);
      ev.g->launch_trace[k % kLaunchTraceN] = LaunchStamp{tag, t_in, X::now_ns(), runs ? 1u : 0u, 0};
      if (runs) ev.g->owner_trace = k;
    }
    X::store_release(verdict, (tag << 1) | (runs ? 1 : 0));
    return runs;
  }
  u64 v;
  while (((v = X::load_acquire(verdict)) >> 1) != tag) {
    if ((v >> 1) > tag) return join_owner<X>(ev, tag);
    if (vload(ev.g->quit) != 0) return false;
    X::idle();
  }
  return (v & 1) != 0 && join_owner<X>(ev, tag);
}

// Caller: thread 0 of a block that ran the scheduler, after its last write of engine state (the block's threads
// synchronized before). The last block out releases the engine.
template <class X>
DFCCL_DEV void leave_owner(const EngineView& ev) {
  X::fence_device();
  const u64 o = X::atomic_add64(&ev.g->owner, ~u64(0)) - 1;
  if ((o & kOwnerMembers) == 0) X::atomic_cas64(&ev.g->owner, o, 0);  // fails if a late block joined meanwhile
}

// Caller: the block deciding its launch's exit (exit.h). Marks the owner leaving (a stand-in that comes now waits
// for the release instead of relying on it), or clears the mark when the launch stays after all.
template <class X>
DFCCL_DEV void mark_leaving(const EngineView& ev, bool leaving) {
  for (;;) {
    const u64 o = X::load_acquire(&ev.g->owner);
    const u64 n = leaving ? (o | kOwnerLeaving) : (o & ~kOwnerLeaving);
    if (owner_tag(o) != ev.p.epoch || X::atomic_cas64(&ev.g->owner, o, n) == o) return;
  }
}

}  // namespace dfccl::core
