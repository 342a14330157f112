// How an abort reaches the daemon. dfcclCommAbort writes pinned memory only (EngineHost::abort_gen, then the count:
// a stream write could be held behind an implicit synchronization that waits for the aborted collective itself,
// docs/design.md "Abort"); the daemon copies it into device memory, where every block reads it.
#pragma once

#include "../engine_memory.h"

namespace dfccl::core {

// How often the copy is refreshed: by the prefetcher (without one, by the last channel's block between passes), and
// by any thread 0 whose wait has lasted this long (a blocking-mode wait has no budget: it must see its abort).
inline constexpr u64 kAbortLookNs = 50000;

// Caller: one thread (the prefetcher's thread 0, a block's thread 0). Copies EngineHost's abort table, then its
// count, into EngineGlobal when the host's count is ahead. Invariant: the table lands before the count (device-scope
// fence), and both only rise (atomic max), so that a late copy never lowers a newer one and a block that reads the
// count, then fences, sees every abort it counts.
template <class X>
DFCCL_DEV void look_for_aborts(const EngineView& ev) {
  const u64 n = X::load_acquire(&ev.h->aborts);
  if (n <= vload(ev.g->aborts)) return;
  for (u32 i = 0; i < kMaxComms; ++i) {
    const u64 gen = vload(ev.h->abort_gen[i]);
    if (gen != 0) X::atomic_max64(&ev.g->abort_gen[i], gen);
  }
  X::fence_device();
  X::atomic_max64(&ev.g->aborts, n);
}

// Caller: as look_for_aborts. Runs it once `now` (the executor's clock) has reached look_at, then moves look_at
// kAbortLookNs ahead; returns whether it ran.
template <class X>
DFCCL_DEV bool look_for_aborts_when_due(const EngineView& ev, u64& look_at, u64 now) {
  if (now < look_at) return false;
  look_for_aborts<X>(ev);
  look_at = now + kAbortLookNs;
  return true;
}

// Caller: thread 0, after an acquire of a non-zero EngineGlobal::aborts. Returns whether collective d's communicator
// was aborted, as far as the daemon's copy says.
DFCCL_DEV inline bool comm_aborted(const EngineView& ev, const Desc& d) {
  return vload(ev.g->abort_gen[d.comm]) == d.comm_gen;
}

}  // namespace dfccl::core
