// How aborts reach the daemon: the copy of the host's abort table into device memory, and the check of a
// collective's communicator.
#pragma once

#include "../engine_memory.h"

namespace dfccl::core {

// Aborts reach the daemon through pinned memory: dfcclCommAbort stores the communicator's attachment number and
// raises a count there, with no CUDA call, because a stream write can be held by another thread's implicit
// synchronization (cudaFree, a lazy load) that itself waits for a stream waiting on the aborted collective
// (docs/design.md, "Abort"). One thread 0 copies them into device memory, where every block reads them: the table
// first, then the count (blocks read the count, then, after a fence, the table). Looked at every kAbortLookNs by the
// prefetcher (or, without one, by the last channel's block between its passes), and by any thread 0 whose wait has
// lasted that long (a blocking-mode wait has no budget: it must see the abort that ends it).
inline constexpr u64 kAbortLookNs = 50000;

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

// look_for_aborts once `now` (the executor's clock) has reached look_at, which then moves kAbortLookNs ahead.
template <class X>
DFCCL_DEV void look_for_aborts_when_due(const EngineView& ev, u64& look_at, u64 now) {
  if (now < look_at) return;
  look_for_aborts<X>(ev);
  look_at = now + kAbortLookNs;
}

// Whether the communicator of collective d was aborted, as far as the daemon has seen (after an acquire of
// EngineGlobal::aborts that was non-zero).
DFCCL_DEV inline bool comm_aborted(const EngineView& ev, const Desc& d) {
  return vload(ev.g->abort_gen[d.comm]) == d.comm_gen;
}

}  // namespace dfccl::core
