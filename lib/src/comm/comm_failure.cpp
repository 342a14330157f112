#include "comm/comm_failure.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/links.h"
#include "comm/peer_watch.h"
#include "match/board_mirror.h"
#include "match/match_board.h"
#include "transport/connection.h"
#include "transport/p2p.h"
#include "transport/persistent.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_name.h"

namespace dfccl {

namespace {

// Takes the communicator's memory out of it, sorted by what `how` does with it: `now` is freed at once, `left` is
// retired to the engine. This rank's regions are kept unless Free (a peer may still write into them); the peers'
// mappings and the device allocations are kept only by Retire.
void take_memory(dfcclComm* c, Release how, Engine::Leftovers& now, Engine::Leftovers& left) {
  now.transport = left.transport = c->transport;
  for (RegionBlob* r : {&c->region, &c->p2p.region})
    if (r->ptr) (how == Release::Free ? now : left).regions.push_back(*r);
  for (const RegionBlob& r : c->net.shadows) (how == Release::Free ? now : left).regions.push_back(r);
  c->net.shadows.clear();
  Engine::Leftovers& later = how == Release::Retire ? left : now;
  // A remote neighbour's "mapping" is a shadow (freed above), with no blob.
  if (c->next_ptr && c->next_blob.bytes) later.mapped.emplace_back(c->next_ptr, c->next_blob);
  if (c->prev_ptr && c->prev_ptr != c->next_ptr && c->prev_blob.bytes)
    later.mapped.emplace_back(c->prev_ptr, c->prev_blob);
  for (size_t q = 0; q < c->p2p.mapped.size(); ++q)
    if (int(q) != c->rank && c->p2p.mapped[q]) later.mapped.emplace_back(c->p2p.mapped[q], c->p2p.blobs[q]);
  for (void* p : {static_cast<void*>(c->lanes), static_cast<void*>(c->dev), static_cast<void*>(c->p2p.lanes)})
    if (p) later.device.push_back(p);
  persistent_take(c, how == Release::Free ? now : left, later, later);
  c->region = RegionBlob{};
  c->next_ptr = c->prev_ptr = nullptr;
  c->lanes = nullptr;
  c->dev = nullptr;
  c->p2p = P2pConnections{};
}

}  // namespace

void release(dfcclComm* c, Release how) {
  if (!c->engine) return;
  Executor& ex = c->engine->exec();
  if (c->index != ~0u) {
    c->engine->detach(c->index);
    c->index = ~0u;
  }
  // The network proxy may still use the regions until its hops are stopped: if they are not, the regions stay.
  if (!net_detach(c) && how == Release::Free) how = Release::KeepRegion;
  mirror_release(c);
  c->net.proxies.clear();
  c->net.keys.clear();
  Engine::Leftovers now, left;
  take_memory(c, how, now, left);
  for (const auto& [p, blob] : now.mapped) now.transport->unmap_region(p, blob);
  for (const RegionBlob& r : now.regions) now.transport->free_region(r);
  for (void* p : now.device) ex.free_device(p);
  if (!left.empty()) c->engine->retire(left);
  c->transport.reset();
  c->board.reset();
  c->bootstrap.reset();
  std::shared_ptr<Engine> last;  // the engine goes, if this was its last user, after engine_mu is left
  {
    std::lock_guard<std::mutex> lk(c->engine_mu);
    last.swap(c->engine);
  }
  if (how == Release::Retire && last.use_count() == 1)
    std::thread([e = std::move(last)] { name_this_thread("retire"); }).detach();
}

// True once next, and every point-to-point peer, has consumed every slot this rank sent it: after that no peer writes
// into this rank's regions.
bool peers_caught_up(dfcclComm* c) {
  return credits_returned(c->engine->exec(), c->host_dev.s) && p2p_caught_up(c) && persistent_caught_up(c);
}

// Waits, at most timeout_ms in all, until no submission that passed its liveness check before `alive` went false is
// still on its way into the engine (comm_submit), then until none of the communicator's collectives is pending;
// false if either still was at the end. Such a submission is queued with the communicator's attachment, so that an
// abort drops it and a destroy waits for it, before the memory goes.
bool wait_quiet(dfcclComm* c, int64_t timeout_ms) {
  const uint64_t deadline = host_now_ns() + uint64_t(timeout_ms) * 1000000ull;
  uint64_t now = host_now_ns();
  for (; c->submitting.load() != 0; now = host_now_ns()) {
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return c->engine->wait_comm_idle(c->index, now < deadline ? int64_t((deadline - now) / 1000000ull) : 0);
}

// The abort proper, once `alive` is false: the daemon drops the communicator's collectives; its memory is freed once
// none is pending, else left in place. A submission can be inside a CUDA call held by another thread's implicit
// synchronization until the daemon drops this communicator's collectives: it is waited for only after the abort is
// posted, and only until the timeout.
void abort_attached(dfcclComm* c, dfcclResult_t why = dfcclAborted, const std::string& message = {}) {
  if (!c->engine) return;
  // The peers learn of an abort of this rank's own here; of one that a peer's failure caused, from the peer watch's
  // relay (watch_peers: net_tell_failed).
  if (why == dfcclAborted && c->bootstrap) c->bootstrap->set_state(Bootstrap::kAborted);
  if (why == dfcclAborted) net_tell_aborted(c);
  c->engine->abort_comm(c->index, why, message);
  c->async_error = why;
  if (wait_quiet(c, c->settings.abort_timeout_ms)) {
    // Peers may still write into my region: keep it allocated (host: their mapping keeps it alive anyway). On the
    // GPU nothing is freed now: cudaFree and cudaIpcCloseMemHandle wait for the daemon, which in blocking mode may
    // stay for another communicator's collective while the application waits for this abort.
    release(c, c->engine->executor_kind() == dfcclExecutorHost ? Release::Free : Release::Retire);
  } else {
    // The daemon still holds the communicator's collectives, or one is still being submitted: leave its memory in
    // place, drop only our handles.
    log(LogLevel::Warn, LogSubsys::Abort,
        "dfcclCommAbort: rank {} of {}: {} collectives still pending after {} ms (DFCCL_ABORT_TIMEOUT_MS); they end "
        "when the daemon next runs, and the communicator's memory stays until the process exits",
        c->rank, c->nranks, c->engine->outstanding(c->index), c->settings.abort_timeout_ms);
    mirror_release(c);
    c->board.reset();
    c->bootstrap.reset();
  }
}

// Caller: destroy, once it owns the communicator's end. A mismatch published on the board that PeerWatch had not
// reported yet (a request that the engine failed with it, MatchBoard::settled, can come first) fails the
// communicator as PeerWatch would have, instead of a destroy that waits for peers that have failed; true if so.
bool fail_published_mismatch(dfcclComm* c) {
  const std::string m = c->board ? c->board->published() : std::string();
  if (m.empty() || c->fail_claimed.exchange(true)) return false;
  c->failure = m;
  c->fail_code.store(dfcclInvalidUsage, std::memory_order_release);
  log(LogLevel::Warn, LogSubsys::Abort, "rank {}: {}: the communicator's collectives fail with dfcclInvalidUsage",
      c->rank, m);
  abort_attached(c, dfcclInvalidUsage, m);
  return true;
}

std::string departed_early(const dfcclComm* c, int* rank) {
  if (!c->bootstrap) return {};
  const uint64_t mine = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(c->next_key)).load(std::memory_order_relaxed);
  for (int q = 0; q < c->nranks; ++q) {
    if (q == c->rank || c->bootstrap->peer_state(q) != Bootstrap::kLeft) continue;
    const uint64_t theirs = c->bootstrap->peer_count(q);
    if (theirs >= mine) continue;
    *rank = q;
    return fmt::format("destroyed its communicator after {} collectives, but this rank has called {}: collective #{} "
                       "(in submission order) and later ones need it",
                       theirs, mine, theirs);
  }
  return {};
}

// Caller: destroy, once it owns the communicator's end, while it waits for the collectives. A peer that left before
// collectives that need it fails the communicator as PeerWatch would have (its collectives then end at once,
// instead of the destroy's full timeout); true if so.
bool fail_departed(dfcclComm* c) {
  int rank = -1;
  const std::string why = departed_early(c, &rank);
  if (why.empty() || c->fail_claimed.exchange(true)) return false;
  c->failure =
      fmt::format("rank {} of the communicator (size {}; this process is rank {}) {}", rank, c->nranks, c->rank, why);
  c->fail_code.store(dfcclRemoteError, std::memory_order_release);
  c->bootstrap->set_failed(rank, Bootstrap::kCauseLeft);
  log(LogLevel::Warn, LogSubsys::Abort, "{}: its collectives fail with dfcclRemoteError", c->failure);
  abort_attached(c, dfcclRemoteError, c->failure);
  return true;
}

// wait_quiet in slices of 100 ms, failing the communicator when a peer turns out to have left before collectives
// that this rank still waits for (fail_departed). Quiet: true; *failed says whether it was failed instead.
bool wait_quiet_or_departed(dfcclComm* c, int64_t timeout_ms, bool* failed) {
  const uint64_t deadline = host_now_ns() + uint64_t(timeout_ms) * 1000000ull;
  for (;;) {
    const uint64_t now = host_now_ns();
    const int64_t left = now < deadline ? int64_t((deadline - now) / 1000000ull) : 0;
    if (wait_quiet(c, std::min<int64_t>(left, 100))) return true;
    if ((*failed = fail_departed(c))) return true;
    if (left <= 0) return false;
  }
}

namespace {
void destroy_stages(dfcclComm* c);
}  // namespace

void comm_destroy(dfcclComm* c) {
  destroy_stages(c);
  PeerWatch::remove(c);
  if (!c->alive.exchange(false)) return;  // another thread destroyed or aborted it meanwhile, or a peer died
  if (fail_published_mismatch(c)) return;
  const int64_t timeout = c->settings.destroy_timeout_ms;
  if (!c->engine) return;
  bool failed = false;
  const bool quiet = wait_quiet_or_departed(c, timeout, &failed);
  if (failed) return;
  if (!quiet) {
    const uint32_t left = c->engine->outstanding(c->index);
    abort_attached(c);
    throw Error(dfcclTimeout, fmt::format("dfcclCommDestroy: {} collectives of rank {} were still pending after {} ms "
                                          "(DFCCL_DESTROY_TIMEOUT_MS); the communicator was aborted instead",
                                          left, c->rank, timeout));
  }
  // The peers no longer count on this rank (nor its process) beyond its collectives so far; nor do those of other
  // hosts, once the message reaches them.
  c->bootstrap->set_left(c->next_key);
  mirror_leave(c);
  // The last writes a peer makes into my region are the credits for what I sent it: wait for them (not for the
  // peers to call destroy: destroy is local, as in NCCL), then free.
  const uint64_t t0 = host_now_ns();
  bool caught_up = peers_caught_up(c);
  while (!caught_up && host_now_ns() - t0 < uint64_t(timeout) * 1000000ull) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    caught_up = peers_caught_up(c);
  }
  release(c, caught_up ? Release::Free : Release::KeepRegion);
}

void comm_abort(dfcclComm* c) {
  c->user_aborted = true;
  PeerWatch::remove(c);
  const bool was_alive = c->alive.exchange(false);
  if (was_alive) c->async_error = dfcclAborted;
  for (dfcclComm* part : {c->hierarchy.intra, c->hierarchy.inter})  // first, as in fail_once
    if (part) comm_abort(part);
  if (was_alive) abort_attached(c);
}

namespace {
void fail_stages(dfcclComm* c, dfcclResult_t code, const std::string& message, const std::string& logged,
                 const char* outcome, const dfcclComm* from);

// The first failure of a communicator: its message and code stand (they are read without a lock once set), it is
// logged as "<logged>: <outcome>", and the communicator is aborted with it. Later failures are dropped.
// from: a stage communicator of c whose own failure this is (PeerWatch is running its check: not removed here).
void fail_once(dfcclComm* c, dfcclResult_t code, const std::string& message, LogLevel level, const std::string& logged,
               const char* outcome, const dfcclComm* from = nullptr) {
  if (c->fail_claimed.exchange(true)) return;
  c->failure = message;
  c->fail_code.store(code, std::memory_order_release);
  log(level, LogSubsys::Abort, "{}: {}", logged, outcome);
  const bool was_alive = c->alive.exchange(false);
  if (was_alive) c->async_error = code;  // before its requests can end (through the stage communicators')
  // The stage communicators fail first: once c's own collectives end, the application may destroy c, which destroys
  // them, and must find them ended too.
  fail_stages(c, code, message, logged, outcome, from);
  if (was_alive) abort_attached(c, code, message);
}

// c's stage communicators (comm_submit.h) share its failure: each, unless it is `from`, leaves the peer watch (its
// probe reads the board that its abort releases) and fails with code and message.
void fail_stages(dfcclComm* c, dfcclResult_t code, const std::string& message, const std::string& logged,
                 const char* outcome, const dfcclComm* from) {
  for (dfcclComm* part : {c->hierarchy.intra, c->hierarchy.inter}) {
    if (!part) continue;
    if (part != from) PeerWatch::remove(part);
    fail_once(part, code, message, LogLevel::Info, fmt::format("{} (a stage communicator of it)", logged), outcome);
  }
}

// Caller: comm_destroy, before c's own teardown. c's stage communicators go first: destroyed, or, once c has failed,
// failed with it (a peer may be gone, and their destroy would wait for it; the peer watch may still be on its way
// to them).
void destroy_stages(dfcclComm* c) {
  const int code = c->fail_code.load(std::memory_order_acquire);
  if (code == dfcclSuccess) return hierarchy_destroy(c);
  fail_stages(c, dfcclResult_t(code), c->failure, fmt::format("rank {}: {}", c->rank, c->failure), "ended with it",
              nullptr);
}

// The communicator that a failure found on c fails instead: a stage communicator's parent, which then leaves the
// peer watch (its probe reads the board that its abort releases; the caller runs in c's check, not the parent's).
// Null for any other communicator.
dfcclComm* failing_parent(const dfcclComm* c) {
  dfcclComm* parent = c->hierarchy.parent.load();
  if (parent) PeerWatch::remove(parent);
  return parent;
}
}  // namespace

void comm_fail(dfcclComm* c, int rank, const std::string& reason, Bootstrap::Cause cause) {
  const dfcclComm* from = nullptr;
  if (c->bootstrap) c->bootstrap->set_failed(rank, cause);  // before anything a peer could see this rank do
  if (dfcclComm* parent = failing_parent(c)) {              // named in the parent's ranks
    from = c;
    rank = c->hierarchy.parent_rank[size_t(rank)];
    c = parent;
    if (c->bootstrap) c->bootstrap->set_failed(rank, cause);
  }
  int none = -1;
  c->failed_rank.compare_exchange_strong(none, rank);
  const std::string msg = fmt::format("rank {} of the communicator (size {}; this process is rank {}) {}", rank,
                                      c->nranks, c->rank, reason);
  // A peer's own abort is the application's decision (its watchdog usually aborts every rank): INFO. A death or
  // silence is a failure: WARN.
  const bool aborted = reason == "aborted the communicator";
  fail_once(c, dfcclRemoteError, msg, aborted ? LogLevel::Info : LogLevel::Warn, msg,
            "its collectives fail with dfcclRemoteError", from);
}

void comm_fail_mismatch(dfcclComm* c, const std::string& message) {
  const dfcclComm* from = nullptr;
  if (dfcclComm* parent = failing_parent(c)) {
    from = c;
    c = parent;
  }
  fail_once(c, dfcclInvalidUsage, message, LogLevel::Warn, fmt::format("rank {}: {}", c->rank, message),
            "the communicator's collectives fail with dfcclInvalidUsage", from);
}

void hierarchy_destroy(dfcclComm* c) {
  std::exception_ptr failed;
  for (dfcclComm* part : {c->hierarchy.intra, c->hierarchy.inter}) {
    if (!part) continue;
    try {
      comm_destroy(part);
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (!failed) return;
  comm_abort(c);
  std::rethrow_exception(failed);
}

void comm_free(dfcclComm* c) {
  if (engine_ref(c)) return;
  for (dfcclComm* part : {c->hierarchy.intra, c->hierarchy.inter})
    if (part) comm_free(part);
  delete c;
}

}  // namespace dfccl
