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

#include "settings/env.h"
#include "settings/env_warn.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_name.h"

namespace dfccl {

using core::kMaxRings;
using core::kMaxSlots;

uint64_t host_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

std::mutex registry_mu;
std::map<std::tuple<int, int, int>, std::weak_ptr<Engine>> registry;

}  // namespace

bool lock_within(std::unique_lock<std::mutex>& lk, int ms) {
  for (int i = 0; i < ms && !lk.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return lk.owns_lock();
}

std::shared_ptr<Engine> Engine::acquire(dfcclExecutor_t executor, int device, dfcclMode_t mode) {
  env_warn_unknown();
  std::lock_guard<std::mutex> lk(registry_mu);
  auto key = std::make_tuple(int(executor), device, int(mode));
  if (auto e = registry[key].lock()) return e;
  std::unique_ptr<Executor> ex =
      executor == dfcclExecutorHost ? make_host_executor(device) : make_cuda_executor(device);
  std::shared_ptr<Engine> e(new Engine(std::move(ex), mode));
  registry[key] = e;
  return e;
}

Engine::Engine(std::unique_ptr<Executor> exec, dfcclMode_t mode) : exec_(std::move(exec)) {
  const EngineConfig c = EngineConfig::from_env(*exec_, mode);
  params_ = c.params;
  transport_ = c.transport;
  relaunch_min_ns_ = c.relaunch_min_ns;
  relaunch_max_ns_ = c.relaunch_max_ns;
  backoff_ns_ = c.relaunch_min_ns;
  probe_spin_ns_ = c.probe_spin_ns;
  sync_spin_ns_ = c.sync_spin_ns;
  wait_kernel_ = c.wait_kernel;
  const std::string serialized = exec_->serialization();
  if (!serialized.empty())
    log(LogLevel::Warn, LogSubsys::Engine,
        "kernel launches are serialized here ({}): a dfcclWait then holds the calling thread or every later kernel of "
        "the device until its collective completes, so ranks that wait in different orders can hang although they "
        "complete without {}; dfcclCommAbort still ends such a hang (docs/design.md, \"Serialized launches\")",
        serialized, serialized);
  log(LogLevel::Info, LogSubsys::Engine,
      "DFCCL {}.{}.{} engine on device {}: {} executor, {} mode, {} blocks x {} threads{}, stream waits by {}; {} "
      "slots x {} B per lane, {} sequence + {} persistent lanes per communicator",
      DFCCL_MAJOR, DFCCL_MINOR, DFCCL_PATCH, exec_->device(), exec_->kind() == dfcclExecutorHost ? "host" : "CUDA",
      params_.blocking ? "blocking" : "preemptive", params_.nblocks, exec_->threads_per_block(),
      params_.prefetch ? " + prefetcher" : "", wait_kernel_ ? "a polling kernel" : "a stream memory wait",
      transport_.nslots, transport_.slot_bytes, transport_.seq_lanes, transport_.persistent_lanes);
  stuck_warn_ns_ = uint64_t(env_int("DFCCL_STUCK_WARN_S")) * 1000000000ull;
  g_ = static_cast<core::EngineGlobal*>(exec_->alloc_device(sizeof(core::EngineGlobal)));
  ctx_ = static_cast<core::ChanCtx*>(exec_->alloc_device(sizeof(core::ChanCtx) * kMaxSlots * params_.nblocks));
  h_ = static_cast<core::EngineHost*>(exec_->alloc_pinned(sizeof(core::EngineHost)));
  free_slots_.reserve(kMaxSlots);
  for (uint32_t s = kMaxSlots; s-- > 0;) free_slots_.push_back(s);
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
  } catch (...) {
  }
  net_.clear();  // the proxies may still use the leftovers' regions
  for (const Leftovers& left : retired_) {
    try {
      for (const auto& [p, blob] : left.mapped) exec_->unmap_region(p, blob);
      for (const RegionBlob& r : left.regions) exec_->free_region(r);
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
  const bool host = exec_->kind() == dfcclExecutorHost;
  const int want = net::proxy_threads(host);
  while (int(net_.size()) < want) {
    auto p = net::Proxy::create(host);
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
      comm_outstanding_[i].store(0);
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
    const SlotUse& use = slots_[r.slot];
    if (use.req.get() != &r) return out;  // finished: its slot serves another collective or none
    d = h_->desc[r.slot];
    a = arrivals_of(use.comm);
  }
  return a ? a->missing_ranks(d) : out;
}

uint32_t Engine::ring_for_locked(cudaStream_t stream) {
  if (exec_->kind() == dfcclExecutorHost) stream = nullptr;  // the host executor has no streams: one ring
  int free_ring = -1;
  for (uint32_t r = 0; r < kMaxRings; ++r) {
    if (rings_[r].used && rings_[r].stream == stream) return r;
    if (free_ring < 0 && (!rings_[r].used || rings_[r].outstanding == 0)) free_ring = int(r);
  }
  // A ring whose collectives all completed has been read past by every block: it can serve another stream.
  if (free_ring < 0)
    throw Error(dfcclNoResources, fmt::format("collectives are outstanding on {} different streams of device {} "
                                              "(limit); wait for some before using another stream",
                                              kMaxRings, exec_->device()));
  Ring& ring = rings_[free_ring];
  ring.used = true;
  ring.stream = stream;
  return uint32_t(free_ring);
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
  if (free_slots_.size() < descs.size())
    throw Error(dfcclNoResources,
                fmt::format("{} collectives are outstanding on device {} (limit {}); this call needs {} more slots: "
                            "wait for some to complete before submitting more",
                            kMaxSlots - free_slots_.size(), exec_->device(), kMaxSlots, descs.size()));
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
  if (!running_) {
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
  const uint32_t ring = ring_for_locked(stream);
  const uint32_t slot = free_slots_.back();
  free_slots_.pop_back();
  d.seq = ++seq_;
  d.comm = uint16_t(comm_index);
  d.comm_gen = __atomic_load_n(&comm_gen_[comm_index], __ATOMIC_RELAXED);
  h_->desc[slot] = d;
  auto req = std::make_shared<RequestState>();
  req->seq = d.seq;
  req->slot = slot;
  req->settles = comm_settles_[comm_index];
  req->engine = shared_from_this();
  req->info.status = dfcclInProgress;
  req->info.submitNs = host_now_ns();
  slots_[slot] = SlotUse{req, comm_index, ring};
  Ring& rg = rings_[ring];
  const uint64_t pos = rg.next_pos++;
  rg.outstanding += 1;
  outstanding_ += 1;
  comm_outstanding_[comm_index].fetch_add(1);
  submitted_ += 1;
  // Posted before the doorbell, so that the daemon's prefetcher can copy the descriptor ahead of it
  // (scheduler/prefetcher.h, prefetch_descs): the record of posting number seq - 1, with the descriptor in it
  // (flagged.h, PostRecord). The descriptor also stays in desc[slot], where blocks read it when the copy is late; the
  // fence orders both before the doorbell.
  const uint64_t entry = core::ring_entry(pos, slot);
  const bool host_ordered = stream == DFCCL_NO_STREAM && params_.prefetch;
  core::write_post_record(h_->post_log[(d.seq - 1) % core::kMaxSlots], d.seq - 1,
                          core::submission_tag(ring, entry) | (host_ordered ? core::kPostHostOrdered : 0), d);
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t* door = &g_->ring[ring][pos % core::kRingEntries];
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
  if (stuck_warn_ns_ == 0 || outstanding_ == 0 || now - last_stuck_check_ns_ < 1000000000ull) return;
  last_stuck_check_ns_ = now;
  const SlotUse* oldest = nullptr;
  for (const SlotUse& use : slots_)
    if (use.req && (!oldest || use.req->seq < oldest->req->seq)) oldest = &use;
  if (!oldest || oldest->req->seq <= stuck_warned_seq_) return;
  const uint64_t submitted = oldest->req->info.submitNs;  // may be after `now`: submitted since it was read
  if (now < submitted || now - submitted < stuck_warn_ns_) return;
  const uint64_t age = now - submitted;
  stuck_warned_seq_ = oldest->req->seq;
  const core::Desc& d = h_->desc[oldest->req->slot];
  log(LogLevel::Warn, LogSubsys::Engine,
      "device {}: collective {} (communicator {}, rank {} of {}, kind {}, count {}) pending for {} s{}{}; "
      "{} collectives outstanding; dfcclDebugDump shows what each block holds",
      exec_->device(), d.seq, oldest->comm, d.cs.rank, d.cs.nranks, int(d.kind), d.count, age / 1000000000ull,
      oldest->waited ? ", a stream waits on it" : "", arrivals_text(oldest->comm, d), outstanding_);
}

void Engine::launch_locked(uint64_t now) {
  core::EngineView ev;
  ev.g = g_;
  ev.ctx = ctx_;
  ev.h = h_;
  ev.p = params_;
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
  if (running_ || outstanding_ == 0 || !fault_.empty()) return false;
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
    if (slots_[slot].req) taken.reqs.push_back(take_slot_locked(slot, true));
  compact_waits_locked();
  cv_.notify_all();
  return taken;
}

std::shared_ptr<RequestState> Engine::take_slot_locked(uint32_t slot, bool free_now) {
  SlotUse& use = slots_[slot];
  if (free_now) free_slots_.push_back(slot);
  rings_[use.ring].outstanding -= 1;
  use.waited = false;  // its entry in EngineHost::waits goes at the next compact_waits_locked
  comm_outstanding_[use.comm].fetch_sub(1);
  outstanding_ -= 1;
  return std::move(use.req);
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
      SlotUse& use = slots_[slot];
      done[n].info = info;
      done[n].failure = {dfcclSuccess, std::string()};
      done[n].desc = h_->desc[slot];
      if (info.status == core::kStatusAborted) {
        std::lock_guard<std::mutex> fl(failure_mu_);
        done[n].failure = failure_[use.comm];
      }
      const bool settles = use.req && use.req->settles;  // its slot is freed once it settles (finish_request)
      done[n++].req = take_slot_locked(slot, !settles);
      completed_ += 1;
      backoff_ns_ = relaunch_min_ns_;  // progress: the next stuck exit starts a new back-off
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
    complete_or_hold(req, status, error, done[k].desc);
  }
  return true;
}

void Engine::complete_or_hold(const std::shared_ptr<RequestState>& req, int status, const std::string& error,
                              const core::Desc& d) {
  if (status == dfcclSuccess) {  // the ranks' signatures first (the match board across hosts)
    Unsettled u{req, d, arrivals_of(d.comm), host_now_ns() + kSettleNs};
    if (u.arrivals) {
      if (!settle(u, false)) unsettled_.push_back(std::move(u));
      return;
    }
  }
  finish_request(req, status, error);
}

bool Engine::settle(const Unsettled& u, bool final) {
  bool pending = false;
  const std::string mismatch = u.arrivals->settled(u.desc, &pending);
  if (pending && !final) return false;
  finish_request(u.req, mismatch.empty() ? dfcclSuccess : dfcclInvalidUsage, mismatch);
  return true;
}

// The status first (complete_request), then the settled word: a stream that goes on finds the request final.
void Engine::finish_request(const std::shared_ptr<RequestState>& req, int status, const std::string& error) {
  complete_request(req, status, error);
  if (!req->settles) return;
  std::lock_guard<std::mutex> lk(mu_);
  __atomic_store_n(&h_->settled[req->slot], req->seq, __ATOMIC_RELEASE);
  free_slots_.push_back(req->slot);
  cv_.notify_all();
}

bool Engine::settle_unsettled(uint64_t now) {
  return std::erase_if(unsettled_, [&](const Unsettled& u) { return settle(u, now >= u.deadline); }) > 0;
}

void fold_part(const std::shared_ptr<RequestState>& parent, const RequestState& part, int status);

// Caller: the progress thread, for a request whose collective finished (its info already filled). Publishes the status
// and message, wakes its waiters, runs its callback, and folds it into its compound request.
void complete_request(const std::shared_ptr<RequestState>& req, int status, const std::string& error) {
  dfcclCallback_t cb = nullptr;
  void* arg = nullptr;
  dfcclRequest_t handle = nullptr;
  std::shared_ptr<RequestState> parent;  // read with the status: compound_request folds a part that finished before
  {
    std::lock_guard<std::mutex> lk(req->mu);
    parent = req->parent.lock();
    req->info.completeNs = host_now_ns();
    if (!error.empty()) req->error = error;
    req->info.status = dfcclResult_t(status);
    req->status.store(status, std::memory_order_release);
    cb = req->callback;
    arg = req->callback_arg;
    handle = req->handle;
    req->callback = nullptr;
    if (cb) {
      req->callback_running = true;
      req->callback_thread = std::this_thread::get_id();
    }
    req->cv.notify_all();
  }
  if (cb) {
    cb(handle, dfcclResult_t(status), arg);
    std::lock_guard<std::mutex> lk(req->mu);
    req->callback_running = false;
    req->cv.notify_all();
  }
  if (parent) fold_part(parent, *req, status);
}

// A part of a compound request finished with `status`: its report joins the compound's, and the last part
// completes it.
void fold_part(const std::shared_ptr<RequestState>& parent, const RequestState& part, int status) {
  int outcome = dfcclSuccess;
  std::string error;
  {
    std::lock_guard<std::mutex> lk(parent->mu);
    dfcclRequestInfo_t& i = parent->info;
    const dfcclRequestInfo_t& p = part.info;  // final: written before the part's status
    if (p.coreStartNs && (!i.coreStartNs || p.coreStartNs < i.coreStartNs)) i.coreStartNs = p.coreStartNs;
    i.coreEndNs = std::max(i.coreEndNs, p.coreEndNs);
    i.preemptions += p.preemptions;
    i.waitUs = std::max(i.waitUs, p.waitUs);
    if (status != dfcclSuccess && parent->error.empty() && i.status == dfcclInProgress) {
      i.status = dfcclResult_t(status);  // the first failure: kept until the last part
      parent->error = part.error;
    }
    if (--parent->parts_pending > 0) return;
    outcome = i.status == dfcclInProgress ? dfcclSuccess : int(i.status);
    error = parent->error;
  }
  complete_request(parent, outcome, error);
}

std::shared_ptr<RequestState> compound_request(std::vector<std::shared_ptr<RequestState>> parts) {
  auto r = std::make_shared<RequestState>();
  r->info.status = dfcclInProgress;
  r->info.submitNs = host_now_ns();
  if (!parts.empty()) {
    r->engine = parts.front()->engine;
    r->seq = parts.back()->seq;
  }
  r->parts_pending = parts.size();
  r->parts = std::move(parts);
  for (auto& p : r->parts) {
    int finished = dfcclInProgress;
    {
      std::lock_guard<std::mutex> lk(p->mu);
      p->parent = r;
      finished = p->status.load(std::memory_order_acquire);
    }
    if (finished != dfcclInProgress) fold_part(r, *p, finished);  // its completion did not see r
  }
  return r;
}

void Engine::progress_loop() {
  const bool host = exec_->kind() == dfcclExecutorHost;
  uint32_t quiet = 0;
  Failed failed;  // the requests a failed relaunch took out (fault_locked)
  while (!stop_) {
    bool busy = drain_completions();
    if (!unsettled_.empty()) busy = settle_unsettled(host_now_ns()) || busy;
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
      if (!busy && !running_ && outstanding_ == 0 && unsettled_.empty()) {
        cv_.wait_for(lk, std::chrono::milliseconds(50));
        continue;
      }
    }
    complete_failed(failed);
    if (busy) {
      quiet = 0;
    } else if (host || ++quiet > 1000) {
      std::this_thread::sleep_for(std::chrono::microseconds(host ? 50 : 5));
    } else {
      std::this_thread::yield();
    }
  }
  for (const Unsettled& u : unsettled_) settle(u, true);
  unsettled_.clear();
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
    if (outstanding_ > 0) late_doorbells_ += 1;  // submitted work the daemon had not seen yet
    next_launch_ns_ = now + relaunch_min_ns_;
    return true;
  }
  exits_stuck_ += 1;
  // No back-off while a stream waits on pending work (see wait_on_stream).
  const bool waited = __atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE) != 0;
  next_launch_ns_ = waited ? now : now + backoff_ns_;
  // INFO: a late peer, or ranks time-sliced on one GPU, climb it too; a real hang is named by the stuck warning
  // (warn_if_stuck_locked).
  if (backoff_ns_ < relaunch_max_ns_ && backoff_ns_ * 2 >= relaunch_max_ns_)
    log(LogLevel::Info, LogSubsys::Engine,
        "device {}: the daemon keeps leaving with every collective stuck ({} stuck exits): relaunches are now {} us "
        "apart (DFCCL_RELAUNCH_MAX_NS)",
        exec_->device(), exits_stuck_, relaunch_max_ns_ / 1000);
  backoff_ns_ = std::min(backoff_ns_ * 2, relaunch_max_ns_);
  return true;
}

void Engine::wait_on_stream(const std::shared_ptr<RequestState>& r, cudaStream_t stream) {
  if (!r->parts.empty() && exec_->kind() != dfcclExecutorHost) {  // a compound request: the stream waits for each part
    for (const auto& part : r->parts)
      if (part->status.load(std::memory_order_acquire) == dfcclInProgress) wait_on_stream(part, stream);
    return;
  }
  if (exec_->kind() == dfcclExecutorHost) {
    const int64_t limit = env_int("DFCCL_HOST_WAIT_TIMEOUT_MS");
    if (!wait_request(*r, limit))
      throw Error(dfcclTimeout, fmt::format("dfcclWait (host executor): the collective did not finish within {} ms "
                                            "(DFCCL_HOST_WAIT_TIMEOUT_MS)",
                                            limit));
    return;
  }
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
    SlotUse& use = slots_[r->slot];
    if (use.req == r) {
      abort_word = &h_->abort_gen[use.comm];
      abort_value = __atomic_load_n(&comm_gen_[use.comm], __ATOMIC_RELAXED);
    }
    if (use.req == r && !use.waited) {
      use.waited = true;
      // At most one entry per occupied slot once compacted, so there is room after compacting.
      if (__atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE) >= core::kMaxSlots) compact_waits_locked();
      const uint64_t k = __atomic_load_n(&h_->nwaits, __ATOMIC_ACQUIRE);
      h_->waits[k] = core::WaitEntry{r->slot, r->seq, ++probes_};
      __atomic_store_n(&h_->nwaits, k + 1, __ATOMIC_RELEASE);
      exec_->probe(&h_->probe_done, probes_);
      if (!running_) launch_locked(host_now_ns());  // up before the stream waits (and before any later barrier)
      probe = probes_;
    }
  }
  // The stream's wait first: its host call (a kernel launch) overlaps the probe's round trip through the GPU. Both
  // run only after any pending barrier, whichever is issued first. Across hosts the stream then waits for the
  // request's final status too (the signatures: complete_or_hold), so that a mismatch found after the collective
  // finished is reported before the work behind the wait runs.
  const core::StreamWait w{
      &g_->complete[r->slot], r->seq, abort_word, abort_value, r->settles ? &h_->settled[r->slot] : nullptr,
      kSettleWaitNs};
  exec_->stream_wait(stream, w, wait_kernel_);
  if (probe != 0) confirm_wait(probe);
}

// After listing a wait: make sure a daemon will run for it without another host call, which an implicit
// synchronization of another thread could hold (cudaFree holds kernel launches: docs/design.md). Spin until the
// wait's barrier probe has run, bounded by DFCCL_PROBE_SPIN_NS.
// - It ran: no barrier is pending. The running daemon stays for the wait unless it had already announced its exit
//   (EngineHost::exit_announced, read after seeing the probe: see should_exit); then launch the next one now.
// - It did not run: a barrier is probably pending; the running daemon will leave for it, and the work listed after
//   it needs a daemon launched after it. Launch one now, from this thread: the call returns once the barrier is
//   resolved (launches are held meanwhile) and before this thread's own next implicit synchronization.
// A launch while a daemon runs queues a standby behind it on the daemon stream (it starts when that one leaves).
void Engine::confirm_wait(uint64_t probe) {
  const uint64_t t0 = host_now_ns();
  bool ran = false;
  for (;;) {
    ran = __atomic_load_n(&h_->probe_done, __ATOMIC_ACQUIRE) >= probe;
    if (ran || host_now_ns() - t0 > probe_spin_ns_) break;
    cpu_relax();
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::lock_guard<std::mutex> lk(mu_);
  const bool leaving = __atomic_load_n(&h_->exit_announced, __ATOMIC_ACQUIRE) == epoch_;
  if (!running_ || !ran || leaving) {
    standby_launches_ += running_ ? 1 : 0;
    launch_locked(host_now_ns());
  }
}

// Whether the collective a listed wait is for is still pending as the host sees it (its slot not drained or reused).
bool Engine::wait_pending_locked(const core::WaitEntry& w) const {
  const SlotUse& use = slots_[w.slot];
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

// Polls, without the engine's lock: the progress thread can hold it inside a daemon launch that another thread's
// implicit synchronization holds (cudaHostUnregister, cudaFree), and an abort must end even then (docs/design.md,
// "Abort").
bool Engine::wait_comm_idle(uint32_t comm_index, int64_t timeout_ms) {
  const uint64_t t0 = host_now_ns();
  for (;;) {
    if (comm_outstanding_[comm_index].load() == 0) return true;
    if (host_now_ns() - t0 >= uint64_t(timeout_ms) * 1000000ull) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

uint32_t Engine::outstanding(uint32_t comm_index) { return comm_outstanding_[comm_index].load(); }

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

static_assert(sizeof(dfcclStats_t::profileNs) / sizeof(uint64_t) == core::kNumPhases);

dfcclStats_t Engine::stats() {
  dfcclStats_t s{};
  std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
  if (!lock_within(lk, kLockWaitMs))
    throw Error(dfcclTimeout, fmt::format("dfcclGetStats: the engine of device {} was busy for {} ms (a thread inside "
                                          "a CUDA call that an implicit synchronization holds?)",
                                          exec_->device(), kLockWaitMs));
  s.submitted = submitted_;
  s.completed = completed_;
  double cycles[core::kNumPhases] = {}, ns = 0;
  for (uint32_t b = 0; b < params_.nblocks; ++b) {
    s.preemptions += h_->stats[b].preemptions;
    s.contextSwitches += h_->stats[b].switches;
    s.primitives += h_->stats[b].primitives;
    for (uint32_t k = 0; k < core::kNumPhases; ++k) cycles[k] += double(h_->stats[b].prof[k]);
    ns += double(h_->stats[b].prof_ns);
  }
  s.descPrefetched = h_->stats[0].prefetched;  // block 0: every small collective's data channel
  // Phase profile: cycles of the blocks' clocks, converted with the launches' own cycles per nanosecond.
  if (cycles[core::kPhaseLaunch] > 0)
    for (uint32_t k = 0; k < core::kNumPhases; ++k)
      s.profileNs[k] = uint64_t(cycles[k] * ns / cycles[core::kPhaseLaunch]);
  s.daemonLaunches = launches_;
  s.daemonExitsIdle = exits_idle_;
  s.daemonExitsStuck = exits_stuck_;
  s.lateDoorbells = late_doorbells_;
  s.outstanding = outstanding_;
  s.streamWaited = waits_holding_locked();
  s.daemonRunning = running_ ? 1 : 0;
  s.standbyLaunches = standby_launches_;
  return s;
}

}  // namespace dfccl
