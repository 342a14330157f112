// The spin phase of a two-phase primitive.
//
//   spin_wait<X>(ready, quit, budget_ns, unbounded, waited_ns) -> true when ready() held within the budget
//
// Caller: one thread of the block (thread 0). It polls ready() (backing off between polls: X::backoff) until it
// holds (true), or until budget_ns has passed
// (false: the caller preempts, with no side effect done). With unbounded = true (blocking mode) the budget is
// ignored, but the loop still returns false as soon as quit(now) holds (communicator aborted, engine shut down; now:
// the clock reading of that check): no wait in DFCCL is without a way out (DESIGN invariant 1). waited_ns receives
// the time spent.
#pragma once

#include "../exec.h"

namespace dfccl::core {

template <class X, class Ready, class Quit>
DFCCL_DEV bool spin_wait(Ready&& ready, Quit&& quit, u64 budget_ns, bool unbounded, u64& waited_ns) {
  if (ready()) {
    waited_ns = 0;
    return true;
  }
  const u64 t0 = X::now_ns();
  u64 t = t0;  // the last clock reading
  for (u32 it = 1;; ++it) {
    X::backoff(t - t0);
    if (ready()) {
      waited_ns = X::now_ns() - t0;
      return true;
    }
    if (it % X::kPollsPerClock == 0) {
      t = X::now_ns();
      if ((!unbounded && t - t0 >= budget_ns) || quit(t)) {
        waited_ns = t - t0;
        return false;
      }
    }
  }
}

}  // namespace dfccl::core
