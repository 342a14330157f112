// The engine's side of dfcclCommAbort and of a communicator's end: marking a communicator aborted for the daemon,
// and waiting until none of its collectives is outstanding. Neither takes the engine's lock (docs/design.md, "Abort").
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "util/clock.h"

namespace dfccl {

// Polls, without the engine's lock: the progress thread can hold it inside a daemon launch that another thread's
// implicit synchronization holds (cudaHostUnregister, cudaFree), and an abort must end even then (docs/design.md,
// "Abort").
bool Engine::wait_comm_idle(uint32_t comm_index, int64_t timeout_ms) {
  const uint64_t t0 = host_now_ns();
  for (;;) {
    if (slots_.comm_outstanding(comm_index) == 0) return true;
    if (host_now_ns() - t0 >= uint64_t(timeout_ms) * 1000000ull) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

uint32_t Engine::outstanding(uint32_t comm_index) { return slots_.comm_outstanding(comm_index); }

// Without the engine's lock (see wait_comm_idle). Concurrent aborts each store their entry, then count: the count's
// release orders the entry before it, and whichever count the daemon sees covers every entry stored before it.
void Engine::abort_comm(uint32_t comm_index, dfcclResult_t why, const std::string& message) {
  if (why != dfcclAborted) {
    std::lock_guard<std::mutex> fl(failure_mu_);
    failure_[comm_index] = {why, message};
  }
  __atomic_store_n(&h_->abort_gen[comm_index], __atomic_load_n(&comm_gen_[comm_index], __ATOMIC_RELAXED),
                   __ATOMIC_RELAXED);
  __atomic_fetch_add(&h_->aborts, uint64_t(1), __ATOMIC_RELEASE);
}

}  // namespace dfccl
