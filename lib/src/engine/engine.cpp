#include "engine/engine.h"
#include "net/proxy.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <tuple>

#include "settings/env_warn.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_name.h"

namespace dfccl {

using core::kMaxSlots;

namespace {

std::mutex registry_mu;
std::map<std::tuple<int, int, int>, std::weak_ptr<Engine>> registry;

}  // namespace

bool lock_within(std::unique_lock<std::mutex>& lk, int ms) {
  for (int i = 0; i < ms && !lk.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return lk.owns_lock();
}

std::shared_ptr<Engine> Engine::acquire(dfcclExecutor_t executor, int device, dfcclMode_t mode) {
  env_warn_unknown();
  if (executor == dfcclExecutorHost) {
    env_warn_ignored_by_host();
    env_warn_deprecated();
  }
  std::lock_guard<std::mutex> lk(registry_mu);
  auto key = std::make_tuple(int(executor), device, int(mode));
  if (auto e = registry[key].lock()) return e;
  // The engine's settings, read once here (settings.h).
  const EngineSettings settings = EngineSettings::read(executor == dfcclExecutorHost);
  std::unique_ptr<Executor> ex =
      executor == dfcclExecutorHost ? make_host_executor(device) : make_cuda_executor(device, settings.threads);
  std::shared_ptr<Engine> e(new Engine(std::move(ex), mode, settings));
  registry[key] = e;
  return e;
}

Engine::Engine(std::unique_ptr<Executor> exec, dfcclMode_t mode, const EngineSettings& settings)
    : exec_(std::move(exec)), slots_(exec_->device(), exec_->kind() == dfcclExecutorHost) {
  cfg_ = EngineConfig::make(*exec_, mode, settings);
  backoff_ns_ = cfg_.relaunch_min_ns;
  const std::string serialized = exec_->serialization();
  if (!serialized.empty())
    log(LogLevel::Warn, LogSubsys::Engine,
        "kernel launches are serialized here ({}): a dfcclWait then holds the calling thread or every later kernel of "
        "the device until its collective completes, so ranks that wait in different orders can hang although they "
        "complete without {}; dfcclCommAbort still ends such a hang (docs/design.md, \"Serialized launches\")",
        serialized, serialized);
  if (cfg_.under_mps && cfg_.wait_on_host)
    log(LogLevel::Warn, LogSubsys::Engine,
        "device {} is shared through CUDA MPS, where a stream waiting on the GPU for a collective can hang the "
        "clients: dfcclWait here blocks the calling thread until its collective finishes, as on the host executor "
        "(DFCCL_MPS_WAIT=host; docs/design.md, \"Several processes on one GPU\")",
        exec_->device());
  else if (cfg_.under_mps)
    log(LogLevel::Warn, LogSubsys::Engine,
        "device {} is shared through CUDA MPS and DFCCL_MPS_WAIT=stream: streams waiting on the GPU for collectives "
        "(dfcclWait) can hang the clients of the MPS server, and dfcclCommAbort may not release them: DFCCL's "
        "guarantee does not hold here (docs/design.md, \"Several processes on one GPU\")",
        exec_->device());
  log(LogLevel::Info, LogSubsys::Engine,
      "DFCCL {}.{}.{} engine on device {}: {} executor, {} mode, {} blocks x {} threads{} (at most {} daemon blocks "
      "resident at once), stream waits by {}; {} slots x {} B per lane, {} sequence + {} persistent lanes per "
      "communicator",
      DFCCL_MAJOR, DFCCL_MINOR, DFCCL_PATCH, exec_->device(), exec_->kind() == dfcclExecutorHost ? "host" : "CUDA",
      cfg_.params.blocking ? "blocking" : "preemptive", cfg_.params.nblocks, exec_->threads_per_block(),
      cfg_.params.prefetch ? " + prefetcher" : "", exec_->resident_blocks(),
      cfg_.wait_standin  ? "a kernel that stands in"
      : cfg_.wait_kernel ? "a polling kernel"
                         : "a stream memory wait",
      cfg_.transport.nslots, cfg_.transport.slot_bytes, cfg_.transport.seq_lanes, cfg_.transport.persistent_lanes);
  g_ = static_cast<core::EngineGlobal*>(exec_->alloc_device(sizeof(core::EngineGlobal)));
  ctx_ = static_cast<core::ChanCtx*>(exec_->alloc_device(sizeof(core::ChanCtx) * kMaxSlots * cfg_.params.nblocks));
  h_ = static_cast<core::EngineHost*>(exec_->alloc_pinned(sizeof(core::EngineHost)));
  progress_ = std::thread([this] {
    name_this_thread("progress");
    progress_loop();
  });
}

Engine::~Engine() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    cv_.notify_all();
  }
  if (progress_.joinable()) progress_.join();
  try {
    exec_->write_word(&g_->quit, 1);
    const uint64_t t0 = host_now_ns();
    while (running_ && !exec_->exited() && host_now_ns() - t0 < 5000000000ull) std::this_thread::yield();
    log_graph_trace();
  } catch (...) {
  }
  net_.clear();  // the proxies may still use the leftovers' regions
  for (const Leftovers& left : retired_) {
    try {
      for (const auto& [p, blob] : left.mapped) left.transport->unmap_region(p, blob);
      for (const RegionBlob& r : left.regions) left.transport->free_region(r);
      for (void* p : left.device) exec_->free_device(p);
    } catch (...) {
      // Teardown of an engine whose device faulted: what is left goes with the process.
    }
  }
  exec_->free_pinned(h_);
  exec_->free_device(ctx_);
  exec_->free_device(g_);
}

std::vector<std::shared_ptr<net::Proxy>> Engine::net_proxies() {
  std::lock_guard<std::mutex> lk(net_mu_);
  while (int(net_.size()) < cfg_.net.threads) {
    auto p = net::Proxy::create(cfg_.net);
    if (!p.ok())
      throw Error(p.status.code == net::Code::kUnsupported ? dfcclNotSupported : dfcclSystemError,
                  fmt::format("the network transport did not start: {}", p.status.message));
    net_.push_back(std::move(p.value));
  }
  return net_;
}

uint32_t Engine::attach(core::CommDev* dev_comm, std::shared_ptr<const ArrivalSource> arrivals) {
  std::lock_guard<std::mutex> lk(mu_);
  for (uint32_t i = 0; i < core::kMaxComms; ++i) {
    if (!__atomic_load_n(&comm_dev_[i], __ATOMIC_ACQUIRE)) {
      comm_settles_[i] = arrivals && arrivals->across_hosts();
      {
        std::lock_guard<std::mutex> fl(failure_mu_);
        failure_[i] = {dfcclSuccess, std::string()};
        arrivals_[i] = std::move(arrivals);
      }
      __atomic_store_n(&comm_dev_[i], dev_comm, __ATOMIC_RELEASE);
      __atomic_store_n(&comm_gen_[i], ++attachments_, __ATOMIC_RELAXED);
      slots_.reset_comm(i);
      return i;
    }
  }
  throw Error(dfcclNoResources, fmt::format("device {} already has {} communicators (limit); destroy some first",
                                            exec_->device(), core::kMaxComms));
}

void Engine::retire(const Leftovers& left) {
  std::lock_guard<std::mutex> lk(retired_mu_);
  retired_.push_back(left);
}

// The generation first, then the entry: attach reuses an entry only once it reads null, so the new attachment's
// generation is never overwritten by this detach.
void Engine::detach(uint32_t index) {
  std::shared_ptr<const ArrivalSource> gone;  // released after the lock
  {
    std::lock_guard<std::mutex> fl(failure_mu_);
    gone.swap(arrivals_[index]);
  }
  __atomic_store_n(&comm_gen_[index], uint64_t(0), __ATOMIC_RELAXED);
  __atomic_store_n(&comm_dev_[index], static_cast<core::CommDev*>(nullptr), __ATOMIC_RELEASE);
}

std::shared_ptr<const ArrivalSource> Engine::arrivals_of(uint32_t comm) {
  std::lock_guard<std::mutex> fl(failure_mu_);
  return arrivals_[comm];
}

std::string Engine::arrivals_text(uint32_t comm, const core::Desc& d) {
  const auto a = arrivals_of(comm);
  return a ? "; " + a->missing(d) : std::string();
}

std::vector<int> Engine::missing_ranks(const RequestState& r) {
  std::vector<int> out;
  if (!r.parts.empty()) {
    for (const auto& part : r.parts)
      for (int q : missing_ranks(*part)) out.push_back(q);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  core::Desc d;
  std::shared_ptr<const ArrivalSource> a;
  {
    std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
    if (!lock_within(lk, kLockWaitMs))
      throw Error(dfcclTimeout, fmt::format("dfcclRequestGetMissingRanks: the engine of device {} was busy for {} ms "
                                            "(a thread inside a CUDA call that an implicit synchronization holds?)",
                                            exec_->device(), kLockWaitMs));
    const SlotTable::Use& use = slots_.use(r.slot);
    if (use.req.get() != &r) return out;  // finished: its slot serves another collective or none
    d = h_->desc[r.slot];
    a = arrivals_of(use.comm);
  }
  return a ? a->missing_ranks(d) : out;
}

std::shared_ptr<RequestState> Engine::submit(core::Desc d, uint32_t comm_index, cudaStream_t stream) {
  return submit_many({&d, 1}, comm_index, stream).front();
}

std::vector<std::shared_ptr<RequestState>> Engine::submit_many(std::span<const core::Desc> descs, uint32_t comm_index,
                                                               cudaStream_t stream) {
  const std::vector<uint32_t> comms(descs.size(), comm_index);
  return submit_chain(descs, comms, stream);
}

std::vector<std::shared_ptr<RequestState>> Engine::submit_chain(std::span<const core::Desc> descs,
                                                                std::span<const uint32_t> comms, cudaStream_t stream) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!fault_.empty()) throw Error(dfcclUnhandledCudaError, fault_);
  if (slots_.free_count() < descs.size())
    throw Error(dfcclNoResources,
                fmt::format("{} collectives are outstanding on device {} (limit {}); this call needs {} more slots: "
                            "wait for some to complete before submitting more",
                            kMaxSlots - slots_.free_count(), exec_->device(), kMaxSlots, descs.size()));
  std::vector<std::shared_ptr<RequestState>> reqs;
  reqs.reserve(descs.size());
  bool chained = comms.size() == descs.size();
  for (size_t i = 0; i < descs.size(); ++i) chained = chained && descs[i].after <= i;
  if (!chained) throw Error(dfcclInternalError, "submit_chain: a stage follows none of its call's collectives");
  for (size_t i = 0; i < descs.size(); ++i) {
    core::Desc d = descs[i];
    if (d.after) d.after_slot = uint16_t(reqs[i - d.after]->slot);  // consecutive sequence numbers, below
    reqs.push_back(submit_locked(d, comms[i], stream));
  }
  // On the CUDA executor a host-ordered submission makes no CUDA call (dfccl.h), so that nothing can hold it: where no
  // daemon runs, the progress thread launches one.
  if (!running_ && (stream != DFCCL_NO_STREAM || exec_->kind() == dfcclExecutorHost)) {
    Failed failed = relaunch_locked(host_now_ns());
    if (!failed.why.empty()) {
      lk.unlock();
      complete_failed(failed);
      throw Error(dfcclUnhandledCudaError, failed.why);
    }
  }
  cv_.notify_all();
  return reqs;
}

// Caller: submit_many, under mu_, with a free slot.
std::shared_ptr<RequestState> Engine::submit_locked(core::Desc d, uint32_t comm_index, cudaStream_t stream) {
  const uint32_t ring = slots_.ring_for(stream);
  d.seq = ++seq_;
  d.comm = uint16_t(comm_index);
  d.comm_gen = __atomic_load_n(&comm_gen_[comm_index], __ATOMIC_RELAXED);
  auto req = std::make_shared<RequestState>();
  req->seq = d.seq;
  req->settles = comm_settles_[comm_index];
  req->engine = shared_from_this();
  req->info.status = dfcclInProgress;
  req->info.submitNs = host_now_ns();
  uint64_t pos = 0;
  const uint32_t slot = slots_.occupy(req, comm_index, ring, &pos);
  h_->desc[slot] = d;
  submitted_ += 1;
  // Posted before the doorbell, so that the daemon's prefetcher can copy the descriptor ahead of it
  // (scheduler/prefetcher.h, prefetch_descs): the record of posting number seq - 1, with the descriptor in it
  // (flagged.h, PostRecord). The descriptor also stays in desc[slot], where blocks read it when the copy is late; the
  // fence orders both before the doorbell.
  const uint64_t entry = core::ring_entry(pos, slot);
  const bool host_ordered = stream == DFCCL_NO_STREAM && cfg_.params.prefetch;
  core::write_post_record(h_->post_log[(d.seq - 1) % core::kMaxSlots], d.seq - 1,
                          core::submission_tag(ring, entry) | (host_ordered ? core::kPostHostOrdered : 0), d);
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t* door = &g_->ring[ring][pos % core::kRingEntries];
  slots_.use(slot).door = stream != DFCCL_NO_STREAM ? core::submission_tag(ring, entry) : 0;
  if (stream != DFCCL_NO_STREAM) {
    exec_->stream_write(stream, door, entry);
  } else if (host_ordered) {
    // Host-ordered: a store into pinned memory, forwarded into the ring by the daemon's prefetcher
    // (forward_host_doorbell). No CUDA call: nothing can hold it, and it skips the stream's front end.
    __atomic_store_n(&h_->host_ring[host_posted_ % core::kMaxSlots],
                     core::host_ring_entry(host_posted_, core::submission_tag(ring, entry)), __ATOMIC_RELEASE);
    ++host_posted_;
  } else {
    exec_->post_word(door, entry);  // no prefetcher on this device: the executor's control stream
  }
  return req;
}

// At most once a second: the oldest pending collective, if it has been pending longer than DFCCL_STUCK_WARN_S, is
// named in a warning (once per collective).
void Engine::warn_if_stuck_locked(uint64_t now) {
  if (cfg_.stuck_warn_ns == 0 || slots_.outstanding() == 0 || now - last_stuck_check_ns_ < 1000000000ull) return;
  last_stuck_check_ns_ = now;
  const SlotTable::Use* oldest = slots_.oldest();
  if (!oldest || oldest->req->seq <= stuck_warned_seq_) return;
  const uint64_t submitted = oldest->req->info.submitNs;  // may be after `now`: submitted since it was read
  if (now < submitted || now - submitted < cfg_.stuck_warn_ns) return;
  const uint64_t age = now - submitted;
  stuck_warned_seq_ = oldest->req->seq;
  const core::Desc& d = h_->desc[oldest->req->slot];
  log(LogLevel::Warn, LogSubsys::Engine,
      "device {}: collective {} (communicator {}, rank {} of {}, kind {}, count {}) pending for {} s{}{}; "
      "{} collectives outstanding; dfcclDebugDump shows what each block holds",
      exec_->device(), d.seq, oldest->comm, d.cs.rank, d.cs.nranks, int(d.kind), d.count, age / 1000000000ull,
      oldest->waited ? ", a stream waits on it" : "", arrivals_text(oldest->comm, d), slots_.outstanding());
}

void Engine::launch_locked(uint64_t now) {
  core::EngineView ev;
  ev.g = g_;
  ev.ctx = ctx_;
  ev.h = h_;
  ev.p = cfg_.params;
  ev.p.epoch = ++epoch_;
  __atomic_store_n(&h_->exit_reason, uint64_t(core::kExitNone), __ATOMIC_RELEASE);
  net_seen_ = net_deliveries();
  exec_->launch(ev);
  running_ = true;
  launches_ += 1;
  next_launch_ns_ = now;
}

// A stuck exit's back-off waits for peers that have not arrived; data or credits from another host mean that one
// has (its daemon may be backing off too: waiting out both back-offs stalls a transfer for milliseconds).
bool Engine::relaunch_due_locked(uint64_t now) {
  if (running_ || (slots_.outstanding() == 0 && !graph_pending()) || !fault_.empty()) return false;
  if (now < next_launch_ns_ && net_deliveries() != net_seen_) next_launch_ns_ = now;
  return now >= next_launch_ns_;
}

Engine::Failed Engine::relaunch_locked(uint64_t now) {
  try {
    launch_locked(now);
    return {};
  } catch (const std::exception& e) {
    return fault_locked(e.what());
  }
}

void Engine::complete_failed(Failed& failed) {
  for (const auto& r : failed.reqs) complete_request(r, dfcclUnhandledCudaError, failed.why);
  failed = {};
}

Engine::Failed Engine::fault_locked(const std::string& why) {
  if (fault_.empty()) {
    fault_ = fmt::format("device {}: the daemon cannot be launched any more ({}); its pending collectives failed and "
                         "later submissions are refused",
                         exec_->device(), why);
    log(LogLevel::Warn, LogSubsys::Engine, "{}", fault_);
  }
  Failed taken{{}, fault_};
  for (uint32_t slot = 0; slot < core::kMaxSlots; ++slot)
    if (slots_.use(slot).req) taken.reqs.push_back(slots_.vacate(slot, true));
  compact_waits_locked();
  cv_.notify_all();
  return taken;
}

uint64_t Engine::net_deliveries() {
  std::lock_guard<std::mutex> lk(net_mu_);
  uint64_t n = 0;
  for (const auto& p : net_) n += p->deliveries();
  return n;
}

// The completions the daemon queued since the last call: the slots' bookkeeping under one hold of the engine's lock
// (the application's submissions and waits take it too), then each request's result outside it. An entry whose
// first words have landed but not yet all the others (flagged.h, CqEntry) is taken at a later turn: they are on their
// way, and the lock is not held meanwhile.
bool Engine::drain_completions() {
  core::CqInfo info;
  const auto next_entry = [&] { return core::read_cq_entry(h_->cq[cq_head_ % core::kCqEntries], cq_head_, &info); };
  if (!next_entry()) return false;
  struct Done {
    std::shared_ptr<RequestState> req;
    core::CqInfo info;
    std::pair<dfcclResult_t, std::string> failure;  // a peer's failure that aborted it (dfcclSuccess: none)
    core::Desc desc;                                // its comm field names the communicator
  };
  std::array<Done, 32> done;
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    do {
      std::atomic_thread_fence(std::memory_order_acquire);  // the host executor: the collective's data
      ++cq_head_;
      const uint32_t slot = info.slot;
      const SlotTable::Use& use = slots_.use(slot);
      done[n].info = info;
      done[n].failure = {dfcclSuccess, std::string()};
      done[n].desc = h_->desc[slot];
      if (info.status == core::kStatusAborted) {
        std::lock_guard<std::mutex> fl(failure_mu_);
        done[n].failure = failure_[use.comm];
      }
      const bool settles = use.req && use.req->settles;  // its slot is freed once it settles (finish_request)
      done[n++].req = slots_.vacate(slot, !settles);
      completed_ += 1;
      backoff_ns_ = cfg_.relaunch_min_ns;  // progress: the next stuck exit starts a new back-off
    } while (n < done.size() && next_entry());
    compact_waits_locked();
    cv_.notify_all();
  }
  for (size_t k = 0; k < n; ++k) {
    const std::shared_ptr<RequestState>& req = done[k].req;
    if (!req) continue;
    const core::CqInfo& info = done[k].info;
    int status = info.status == core::kStatusOk ? dfcclSuccess : int(info.status);
    std::string error;
    if (status == dfcclAborted && done[k].failure.first != dfcclSuccess) {
      status = done[k].failure.first;  // aborted because a peer failed: the request reports why
      error = done[k].failure.second;
    }
    {
      std::lock_guard<std::mutex> lk(req->mu);
      req->info.coreStartNs = info.t_start;
      req->info.coreEndNs = info.t_end;
      req->info.preemptions = info.preemptions;
      req->info.waitUs = info.wait_us;
    }
    // Its ranks' signatures first where they come from other hosts (Settlement).
    const core::Desc& d = done[k].desc;
    settlement_.finish_or_hold(req, status, error, d, status == dfcclSuccess ? arrivals_of(d.comm) : nullptr,
                               host_now_ns());
  }
  return true;
}

// The status first (complete_request), then the settled word: a stream that goes on finds the request final.
void Engine::finish_request(const std::shared_ptr<RequestState>& req, int status, const std::string& error) {
  complete_request(req, status, error);
  if (!req->settles) return;
  std::lock_guard<std::mutex> lk(mu_);
  __atomic_store_n(&h_->settled[req->slot], req->seq, __ATOMIC_RELEASE);
  slots_.give_back(req->slot);
  cv_.notify_all();
}

void Engine::progress_loop() {
  const bool host = exec_->kind() == dfcclExecutorHost;
  uint32_t quiet = 0;
  uint64_t busy_ns = host_now_ns();  // when a turn last found something to do
  Failed failed;  // the requests a failed relaunch took out (fault_locked)
  while (!stop_) {
    bool busy = drain_completions();
    if (!settlement_.empty()) busy = settlement_.settle_due(host_now_ns()) || busy;
    // Whether the daemon has left is a CUDA call (an event query), which competes for the driver's locks with the
    // application's calls and this engine's submissions and waits. Ask only once the daemon has said that it leaves
    // (exit_reason), or every kExitQueryNs otherwise (a launch that failed, a fault, a quit).
    const uint64_t now = host_now_ns();
    const bool query_due = __atomic_load_n(&h_->exit_reason, __ATOMIC_ACQUIRE) != uint64_t(core::kExitNone) ||
                           now - last_exit_query_ns_ >= kExitQueryNs;
    // While the daemon runs and no query is due, nothing below is due either: leave the engine's lock to the
    // application's submissions and waits instead of taking it in every turn.
    if (!running_ || query_due) {
      std::unique_lock<std::mutex> lk(mu_);
      if (running_ && query_due && daemon_gone_locked(now)) busy = true;
      warn_if_stuck_locked(now);
      if (relaunch_due_locked(now)) {
        failed = relaunch_locked(now);
        busy = true;
      }
      // Nothing to do: wait for a submission, briefly where graphs exist (a replay's starts wake no one).
      if (!busy && !running_ && slots_.outstanding() == 0 && settlement_.empty()) {
        cv_.wait_for(lk, ngraph_slots_.load() ? std::chrono::microseconds(20) : std::chrono::microseconds(50000));
        busy_ns = host_now_ns();  // the quiet time of new work counts from here
        continue;
      }
    }
    complete_failed(failed);
    if (busy) {
      quiet = 0;
      busy_ns = now;
    } else if (host) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(cfg_.progress_nap_ns(now - busy_ns)));
    } else if (++quiet > 1000) {
      std::this_thread::sleep_for(std::chrono::microseconds(5));
    } else {
      std::this_thread::yield();
    }
  }
  settlement_.settle_all();
}

// Caller: the progress thread, holding mu_, while the daemon runs and an exit query is due. Asks the executor whether
// the daemon has left; if it has, records why (a stuck exit doubles the relaunch back-off, an idle one resets it) and
// when the next launch may start, and returns true.
bool Engine::daemon_gone_locked(uint64_t now) {
  last_exit_query_ns_ = now;
  bool gone = false;
  try {
    gone = exec_->exited();
  } catch (const std::exception&) {
    gone = true;  // a failed launch (e.g. a CUDA fault): stop, the error surfaces on the next call
  }
  if (!gone) return false;
  running_ = false;
  const uint64_t reason = __atomic_load_n(&h_->exit_reason, __ATOMIC_ACQUIRE);
  if (reason != core::kExitStuck) {
    exits_idle_ += 1;
    if (slots_.outstanding() > 0) late_doorbells_ += 1;  // submitted work the daemon had not seen yet
    next_launch_ns_ = now + cfg_.relaunch_min_ns;
    return true;
  }
  exits_stuck_ += 1;
  // No back-off while a stream waits on pending work (see wait_on_stream).
  const bool waited = __atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE) != 0;
  next_launch_ns_ = waited ? now : now + backoff_ns_;
  // INFO: a late peer, or ranks time-sliced on one GPU, climb it too; a real hang is named by the stuck warning
  // (warn_if_stuck_locked).
  if (backoff_ns_ < cfg_.relaunch_max_ns && backoff_ns_ * 2 >= cfg_.relaunch_max_ns)
    log(LogLevel::Info, LogSubsys::Engine,
        "device {}: the daemon keeps leaving with every collective stuck ({} stuck exits): relaunches are now {} us "
        "apart (DFCCL_RELAUNCH_MAX_NS)",
        exec_->device(), exits_stuck_, cfg_.relaunch_max_ns / 1000);
  backoff_ns_ = std::min(backoff_ns_ * 2, cfg_.relaunch_max_ns);
  return true;
}

}  // namespace dfccl
