// The engine's side of a stream or host that waits for a request (dfcclWait): the wait listed for the daemon, a
// daemon that will run for it, and the bookkeeping of listed waits.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "engine/engine.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

namespace dfccl {

using core::kMaxRings;
using core::kMaxSlots;

void Engine::wait_on_stream(const std::shared_ptr<RequestState>& r, cudaStream_t stream) {
  if (!r->parts.empty() && !cfg_.wait_on_host) {  // a compound request: the stream waits for each part
    for (const auto& part : r->parts)
      if (part->status.load(std::memory_order_acquire) == dfcclInProgress) wait_on_stream(part, stream);
    return;
  }
  if (cfg_.wait_on_host) {
    if (!wait_request(*r, cfg_.host_wait_timeout_ms))
      throw Error(dfcclTimeout, fmt::format("dfcclWait ({}): the collective did not finish within {} ms "
                                            "(DFCCL_HOST_WAIT_TIMEOUT_MS)",
                                            exec_->kind() == dfcclExecutorHost ? "host executor" : "under MPS",
                                            cfg_.host_wait_timeout_ms));
    return;
  }
  // Where graphs are captured, a wait node may own the engine (a stand-in) when this wait is queued behind it on the
  // same stream, and a stand-in does not stay for a listed wait whose doorbell that stream writes after it: nothing
  // would be left to run the collective if a synchronization then held the next launch. So the first wait of a
  // collective stands in itself (docs/design.md, "CUDA graphs", "Stand-ins").
  if ((cfg_.wait_standin || ngraph_slots_.load(std::memory_order_acquire) != 0) && wait_as_standin(r, stream)) return;
  // While a stream waits on a pending collective, an implicit device-wide synchronization issued later (the first
  // launch of a lazily loaded kernel: the device holds all later work until every earlier one, the daemon included,
  // has finished) cannot end before that collective, and holds back any relaunch: the daemon must stay until the
  // collective is done. But a barrier issued *before* this wait does not wait for it and waits for the daemon to
  // leave: staying for this wait would deadlock. The barrier probe tells the two apart: it runs at once unless such
  // a barrier is pending. The daemon itself decides, at its exit decisions, from the list of waits (pinned memory),
  // the probe word and its completion words, so that no host thread has to take part: the host's CUDA calls can be
  // held by another thread's implicit synchronization (docs/design.md, "Implicit synchronizations").
  uint64_t probe = 0;
  // The waiting kernel also ends if the collective's communicator is aborted (docs/design.md, "Abort"); ~0 matches
  // no attachment (a collective already complete needs no way out).
  const uint64_t* abort_word = &h_->aborts;
  uint64_t abort_value = ~uint64_t(0);
  {
    std::lock_guard<std::mutex> lk(mu_);
    SlotTable::Use& use = slots_.use(r->slot);
    if (use.req == r) {
      abort_word = &h_->abort_gen[use.comm];
      abort_value = __atomic_load_n(&comm_gen_[use.comm], __ATOMIC_RELAXED);
    }
    if (use.req == r && !use.waited) {
      use.waited = true;
      // At most one entry per occupied slot once compacted, so there is room after compacting.
      if (__atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE) >= core::kMaxSlots) compact_waits_locked();
      const uint64_t k = __atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE);
      h_->waits[k] = core::WaitEntry{r->slot, r->seq, ++probes_, use.door};
      __atomic_store_n(&h_->nwaits, k + 1, __ATOMIC_RELEASE);
      exec_->probe(&h_->probe_done, probes_);
      if (!running_) launch_locked(host_now_ns());  // up before the stream waits (and before any later barrier)
      probe = probes_;
    }
  }
  // The stream's wait first: its host call (a kernel launch) overlaps the probe's round trip through the GPU. Both
  // run only after any pending barrier, whichever is issued first. Across hosts the stream then waits for the
  // request's final status too (the signatures: Settlement), so that a mismatch found after the collective
  // finished is reported before the work behind the wait runs.
  uint64_t* settled = r->settles ? &h_->settled[r->slot] : nullptr;
  const core::StreamWait w{&g_->complete[r->slot], r->seq, abort_word, abort_value, settled, Settlement::kSettleWaitNs};
  exec_->stream_wait(stream, w, cfg_.wait_kernel);
  if (probe != 0) confirm_wait(probe);
}

// After listing a wait: make sure a daemon will run for it without another host call, which an implicit
// synchronization of another thread could hold (cudaFree holds kernel launches: docs/design.md). Spin until the
// wait's barrier probe has run, bounded by DFCCL_PROBE_SPIN_NS.
// - It ran: no barrier is pending. The running daemon (or a stand-in) stays for the wait unless it had already
//   announced its exit (EngineHost::exit_announced, read after seeing the probe: see should_exit); then launch the
//   next one now.
// - It did not run: a barrier is probably pending; the running daemon will leave for it, and the work listed after
//   it needs a daemon launched after it. Launch one now, from this thread: the call returns once the barrier is
//   resolved (launches are held meanwhile) and before this thread's own next implicit synchronization.
// A launch while a daemon runs queues a standby behind it on the daemon stream (it starts when that one leaves).
void Engine::confirm_wait(uint64_t probe) {
  const uint64_t t0 = host_now_ns();
  bool ran = false;
  for (;;) {
    ran = __atomic_load_n(&h_->probe_done, __ATOMIC_ACQUIRE) >= probe;
    if (ran || host_now_ns() - t0 > cfg_.probe_spin_ns) break;
    cpu_relax();
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::lock_guard<std::mutex> lk(mu_);
  // A stand-in's announcement counts too (a captured wait running the scheduler: core::graph_wait_block).
  const uint64_t announced = __atomic_load_n(&h_->exit_announced, __ATOMIC_ACQUIRE);
  const bool leaving = announced == epoch_ || core::is_standin(announced);
  if (!running_ || !ran || leaving) {
    standby_launches_ += running_ ? 1 : 0;
    launch_locked(host_now_ns());
  }
}

// Whether the collective a listed wait is for is still pending as the host sees it (its slot not drained or reused).
bool Engine::wait_pending_locked(const core::WaitEntry& w) const {
  const SlotTable::Use& use = slots_.use(w.slot);
  return use.waited && use.req && use.req->seq == w.seq;
}

// Drops the waits whose collective the host has seen complete. Entries move only towards the front and the count
// is lowered last, so a daemon reading concurrently never misses a live entry.
void Engine::compact_waits_locked() {
  const uint64_t n = __atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE);
  uint64_t kept = 0;
  for (uint64_t k = 0; k < n; ++k) {
    const core::WaitEntry w = h_->waits[k];
    if (!wait_pending_locked(w)) continue;
    if (kept != k) h_->waits[kept] = w;
    ++kept;
  }
  __atomic_store_n(&h_->nwaits, kept, __ATOMIC_RELEASE);
}

// Waits that keep the daemon now: probe run, collective pending (what the daemon computes at its exit decisions).
uint64_t Engine::waits_holding_locked() {
  const uint64_t n = __atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE);
  const uint64_t probed = __atomic_load_n(&h_->probe_done, __ATOMIC_ACQUIRE);
  uint64_t holding = 0;
  for (uint64_t k = 0; k < n; ++k) {
    const core::WaitEntry& w = h_->waits[k];
    holding += w.probe <= probed && wait_pending_locked(w) ? 1 : 0;
  }
  return holding;
}

bool wait_request(RequestState& r, int64_t timeout_ms) {
  if (r.status.load(std::memory_order_acquire) != dfcclInProgress) return true;
  // A small collective completes within tens of microseconds: poll first, which saves the sleeping thread's
  // wake-up.
  uint64_t spin_ns = 0;
  if (auto e = r.engine.lock()) spin_ns = e->sync_spin_ns();
  if (timeout_ms >= 0) spin_ns = std::min<uint64_t>(spin_ns, uint64_t(timeout_ms) * 1000000ull);
  if (spin_ns > 0) {
    const uint64_t t0 = host_now_ns();
    while (host_now_ns() - t0 < spin_ns) {
      if (r.status.load(std::memory_order_acquire) != dfcclInProgress) return true;
      cpu_relax();
    }
  }
  std::unique_lock<std::mutex> lk(r.mu);
  auto done = [&] { return r.status.load(std::memory_order_acquire) != dfcclInProgress; };
  if (timeout_ms < 0) {
    r.cv.wait(lk, done);
    return true;
  }
  return r.cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), done);
}

}  // namespace dfccl
