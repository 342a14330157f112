// The dfccl backends: `dfccl` and `dfccl-blocking` (CUDA executor, preemptive or blocking), `dfccl-graph` (CUDA
// executor, each timing span's collectives and their waits captured into a CUDA graph and launched
// run.graph_replays times, as nccl-graph does; the communicators are made with their graph lane, DFCCL_GRAPHS=1),
// `host` and `host-blocking` (the CPU executor, preemptive or blocking). One communicator per slot, all on this
// process's device (the node-local rank; a virtual device for the host executor), so that they share one engine.
// Requests are waited for as late as possible (end of the iteration).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "backend.h"
#include "dfccl.h"
#include "gpu/gpu_context.h"
#include "plan/timing_plan.h"
#include "runtime/hosts.h"
#include "runtime/thread_name.h"
#include "verify/verifiable.h"

namespace dfccl::harness {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void dfccl_check(dfcclResult_t r, const char* what, dfcclComm_t comm = nullptr) {
  if (r == dfcclSuccess || r == dfcclInProgress) return;
  const char* last = dfcclGetLastError(comm);
  throw BackendError(fmt::format("{}: {}{}", what, dfcclGetErrorString(r),
                                 last && *last ? fmt::format(" ({})", last) : std::string()));
}

double longer(double a, double b) { return std::isnan(a) ? b : std::max(a, b); }

class DfcclBackend final : public Backend {
 public:
  DfcclBackend(const BackendContext& ctx, std::string name, bool on_gpu, bool blocking, bool graphs = false)
      : ctx_(ctx),
        name_(std::move(name)),
        on_gpu_(on_gpu),
        blocking_(blocking),
        graphs_(graphs),
        timing_(TimingPlan::of(*ctx.workload)) {
    if (on_gpu_) {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) throw BackendError("no CUDA device");
      gpu_.emplace(ctx.local_rank % n, ctx.workload->streams == Streams::PerGroup ? kNumGroupKinds : 1);
      gpu_->use_graphs(graphs_, ctx.workload->graph_replays);
      host_completion_ = ctx.workload->completion != Completion::Stream;
      host_order_ = ctx.workload->order == SubmitOrder::Host;
    }
    callback_completion_ = ctx.workload->completion == Completion::Callback;
  }

  ~DfcclBackend() override { free_requests(); }

  BackendInfo info() const override {
    BackendInfo b;
    b.name = name_;
    b.executor = on_gpu_ ? "cuda" : "host";
    b.mode = blocking_ ? "blocking" : "preemptive";
    if (callback_completion_) {
      b.completion = "callback: dfcclRequestSetCallback at submission; the worker thread polls a flag the callback "
                     "sets (on dfccl's progress thread), per request at the end of the iteration";
      if (host_order_) b.completion += "; submitted host-ordered (DFCCL_NO_STREAM)";
      b.timing = timing_.describe("host clock", "") +
                 "; e2e (submit -> callback) and core from dfcclRequestGetInfo and the callback's host clock";
    } else if (!on_gpu_) {
      b.completion = "host: dfcclWait blocks the worker thread until the collective is done";
      b.timing = timing_.describe("host clock", "") + "; e2e and core from dfcclRequestGetInfo";
    } else if (host_completion_) {
      b.completion = "host: dfcclSynchronize(request) on the worker thread, per request at the end of the iteration";
      if (host_order_) b.completion += "; submitted host-ordered (DFCCL_NO_STREAM)";
      b.timing = timing_.describe("host clock", "") +
                 "; e2e (submit -> completion seen by the host) and core from dfcclRequestGetInfo";
    } else if (graphs_) {
      b.completion = "stream: dfcclWait(request, stream) at the end of the iteration, captured with the collectives "
                     "into one CUDA graph per timing span (the stream waits on the GPU)";
      b.timing = timing_.describe("CUDA events", "on stream 0") +
                 fmt::format(" around the graph's {} launch(es), divided by their count; no e2e "
                             "or core (a captured request is no instance's)",
                             ctx_.workload->graph_replays);
    } else {
      b.completion = "stream: dfcclWait(request, stream) at the end of the iteration (the stream waits on the GPU)";
      b.timing = timing_.describe("CUDA events", "on stream 0") +
                 ", iterations back to back; e2e (submit -> completion seen by the host) and core from "
                 "dfcclRequestGetInfo";
    }
    return b;
  }

  void create_comms(const std::vector<CommSlot>& slots) override {
    if (gpu_) gpu_->make_current();
    slots_ = slots;
    comms_.assign(slots.size(), nullptr);
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].mpi == MPI_COMM_NULL) continue;
      dfcclUniqueId id{};
      if (slots[i].rank == 0) dfccl_check(dfcclGetUniqueId(&id), "dfcclGetUniqueId");
      MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, slots[i].mpi);
      dfcclConfig_t config = DFCCL_CONFIG_INITIALIZER;
      config.executor = on_gpu_ ? dfcclExecutorCuda : dfcclExecutorHost;
      config.mode = blocking_ ? dfcclModeBlocking : dfcclModePreemptive;
      config.device = gpu_ ? gpu_->device() : ctx_.local_rank;  // one engine per process for all its communicators
      const GraphLane lane(graphs_);
      dfccl_check(dfcclCommInitRankConfig(&comms_[i], slots[i].size, id, slots[i].rank, &config),
                  "dfcclCommInitRankConfig");
      if (settings_.empty()) settings_ = describe(comms_[i]);
    }
  }

  std::string engine_settings() const override { return settings_; }

  std::vector<HopRow> hops() const override {
    std::vector<HopRow> out;
    for (size_t i = 0; i < comms_.size(); ++i) {
      dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
      if (!comms_[i] || dfcclCommGetInfo(comms_[i], &info) != dfcclSuccess) continue;
      out.push_back(HopRow{slots_[i].name, ctx_.world_rank, world_rank(slots_[i].mpi, info.next),
                           transport_name(info.transportNext), "", ""});
    }
    return out;
  }

  // The world rank of rank `rank` of comm.
  static int world_rank(MPI_Comm comm, int rank) {
    MPI_Group group, world;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int out = -1;
    MPI_Group_translate_ranks(group, 1, &rank, world, &out);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    return out;
  }

  // dfcclCommGetInfo of c in words: the engine's shape, the connection memory and the transport to the neighbours.
  static std::string describe(dfcclComm_t c) {
    dfcclCommInfo_t i = DFCCL_COMM_INFO_INITIALIZER;
    if (dfcclCommGetInfo(c, &i) != dfcclSuccess) return std::string("dfcclCommGetInfo: ") + dfcclGetLastError(c);
    static const char* const kTransport[] = {"GPU peer memory", "shared host memory registered with CUDA",
                                             "POSIX shared memory", "the network transport (net proxy)"};
    auto words = [](int t) { return t >= 0 && t < 4 ? kTransport[t] : "?"; };
    return fmt::format("{} blocks x {} threads; {} slots x {} B per lane; {} + {} persistent lanes; {:.1f} MiB of "
                       "connection memory per communicator; from rank {} through {}, to rank {} through {}",
                       i.blocks, i.threadsPerBlock, i.slots, i.slotBytes, i.lanes, i.persistentLanes,
                       double(i.connectionBytes) / (1 << 20), i.prev, words(i.transportPrev), i.next,
                       words(i.transportNext)) +
           (i.hierarchyRanksPerHost ? fmt::format("; all-reduce hierarchical over hosts of {} ranks (DFCCL_HIERARCHY)",
                                                  i.hierarchyRanksPerHost)
                                    : std::string());
  }

  // Aborts all communicators at once, one thread each, so that their abort times do not add up.
  void abort_comms() override {
    std::vector<std::thread> threads;
    for (auto& c : comms_)
      if (c)
        threads.emplace_back([c] {
          name_this_thread("dfccl-abort");
          dfcclCommAbort(c);
        });
    for (auto& t : threads) t.join();
    comms_.clear();
  }

  void destroy_comms() override {
    if (ctx_.workload->diagnose && gpu_ && graphs_ && !gpu_->graph_launch_host_us().empty()) {
      std::string line;
      for (double us : gpu_->graph_launch_host_us()) line += fmt::format(" {:.0f}", us);
      std::fprintf(stderr, "# graph launch calls rank %d (host us, span order):%s\n", ctx_.world_rank, line.c_str());
    }
    if (ctx_.workload->diagnose)  // run.diagnose: the engine's life over the whole backend run, one line per rank
      for (auto c : comms_) {
        dfcclStats_t s = DFCCL_STATS_INITIALIZER;
        if (!c || dfcclGetStats(c, &s) != dfcclSuccess) continue;
        std::fprintf(stderr,
                     "# engine rank %d: %llu collectives, %llu daemon launches (%llu standby), exits %llu idle / %llu "
                     "stuck, %llu waits stood in, %llu preemptions, %llu primitives, %llu descriptors prefetched\n",
                     ctx_.world_rank, (unsigned long long)s.completed, (unsigned long long)s.daemonLaunches,
                     (unsigned long long)s.standbyLaunches, (unsigned long long)s.daemonExitsIdle,
                     (unsigned long long)s.daemonExitsStuck, (unsigned long long)s.standinRuns,
                     (unsigned long long)s.preemptions, (unsigned long long)s.primitives,
                     (unsigned long long)s.descPrefetched);
        if (s.profileNs[dfcclProfileLaunch])  // a -DDFCCL_PROFILE=1 build: thread 0's time, summed over blocks, in ms
          std::fprintf(stderr,
                       "# engine rank %d profile (ms, all blocks): check %.1f move %.1f post %.1f program %.1f poll "
                       "%.1f exit %.1f launches %.1f\n",
                       ctx_.world_rank, s.profileNs[dfcclProfileCheck] / 1e6, s.profileNs[dfcclProfileMove] / 1e6,
                       s.profileNs[dfcclProfilePost] / 1e6, s.profileNs[dfcclProfileProgram] / 1e6,
                       s.profileNs[dfcclProfilePoll] / 1e6, s.profileNs[dfcclProfileExit] / 1e6,
                       s.profileNs[dfcclProfileLaunch] / 1e6);
        break;
      }
    for (auto& c : comms_)
      if (c) {
        dfcclCommDestroy(c);
        c = nullptr;
      }
    comms_.clear();
    free_requests();
  }

  void prepare(const std::vector<EntryPlan>& plans, const std::vector<std::vector<char>>& send_data) override {
    plans_ = plans;
    if (gpu_) {
      gpu_->allocate(plans, send_data);
      return;
    }
    host_send_.assign(plans.size(), {});
    host_recv_.assign(plans.size(), {});
    layouts_.assign(plans.size(), {});
    for (size_t i = 0; i < plans.size(); ++i) {
      if (plans[i].slot < 0) continue;
      const BufferLayout l = layouts_[i] = buffer_layout(plans[i]);
      host_send_[i].assign(send_data[i].begin(), send_data[i].end());  // in place: kept for poison_outputs
      host_send_[i].resize(std::max<size_t>(1, l.send_bytes));
      host_recv_[i].resize(std::max<size_t>(1, plans[i].in_place ? l.buffer_bytes : l.recv_bytes));
      if (plans[i].in_place) std::memcpy(host_recv_[i].data() + l.send_offset, send_data[i].data(), l.send_bytes);
    }
  }

  void download(int entry, void* dst) override {
    if (gpu_) return gpu_->download(entry, dst);
    const EntryPlan& p = plans_.at(entry);
    if (p.slot >= 0) std::memcpy(dst, host_recv(entry), layouts_[entry].recv_bytes);
  }

  // The host executor's buffers (buffer_layout): out of place host_send_ and host_recv_; in place host_recv_ alone
  // (host_send_ keeps the input for poison_outputs).
  const void* host_send(int entry) {
    return plans_[entry].in_place ? host_recv_[entry].data() + layouts_[entry].send_offset : host_send_[entry].data();
  }
  void* host_recv(int entry) { return host_recv_[entry].data() + layouts_[entry].recv_offset; }

  void worker_begin(const std::atomic<bool>& cancel) override {
    cancel_ = &cancel;
    free_requests();
    host_spans_.clear();
    if (gpu_) {
      gpu_->make_current();
      gpu_->begin_timing(timing_);
    }
  }

  void poison_outputs() override {
    if (gpu_) return gpu_->poison();
    for (size_t i = 0; i < host_recv_.size(); ++i) {
      std::memset(host_recv_[i].data(), verify::kPoisonByte, host_recv_[i].size());
      if (plans_[i].in_place && plans_[i].slot >= 0)  // the input again, where earlier iterations wrote
        std::memcpy(host_recv_[i].data() + layouts_[i].send_offset, host_send_[i].data(), layouts_[i].send_bytes);
    }
  }

  void start_iteration(int iteration) override {
    iter_reqs_.emplace_back();
    iteration_ = iteration;
    if (gpu_ && !host_completion_) return gpu_->iteration_start(iteration);
    if (timing_.opens(iteration)) {
      span_first_ = iteration;
      span_start_ns_ = now_ns();
    }
  }

  // Posts an entry: a collective's one call, or its point-to-point calls (a send, then a receive; never grouped).
  void submit(int entry) override {
    const EntryPlan& p = plans_.at(entry);
    Call c;
    c.comm = comms_.at(p.slot);
    c.send = gpu_ ? gpu_->send(entry) : host_send(entry);
    c.recv = gpu_ ? gpu_->recv(entry) : host_recv(entry);
    // Host-ordered: the inputs are ready (uploaded, or written by collectives the host has seen complete).
    c.stream = !gpu_ ? nullptr : host_order_ ? DFCCL_NO_STREAM : gpu_->stream(stream_of(p));
    c.type = static_cast<dfcclDataType_t>(static_cast<int>(p.dtype));
    c.op = static_cast<dfcclRedOp_t>(static_cast<int>(p.op == RedOp::None ? RedOp::Sum : p.op));
    if (p.send_peer >= 0)
      post(entry, "dfcclSend", [&](dfcclRequest_t* r) {
        return dfcclSend(c.send, p.count, c.type, p.send_peer, c.comm, p.priority, c.stream, r);
      });
    if (p.recv_peer >= 0)
      post(entry, "dfcclRecv", [&](dfcclRequest_t* r) {
        return dfcclRecv(c.recv, p.count, c.type, p.recv_peer, c.comm, p.priority, c.stream, r);
      });
    if (p.send_peer < 0 && p.recv_peer < 0)
      post(entry, "dfccl collective", [&](dfcclRequest_t* r) { return collective_call(p, c, r); });
  }

  void device_sync() override {
    if (gpu_) return gpu_->device_sync();
    host_sync("dfcclDeviceSynchronize (forced)");
  }
  void host_alloc(HostAllocKind kind, size_t bytes) override {
    if (gpu_) return gpu_->host_alloc(kind, bytes);
    // CPU executor: a pinned allocation synchronizes the device; emulate it, then allocate for real.
    host_sync("dfcclDeviceSynchronize (host allocation)");
    void* p = std::malloc(std::max<size_t>(bytes, 1));
    std::free(p);
  }
  void cuda_free() override {
    if (gpu_) return gpu_->cuda_free();
    host_sync("dfcclDeviceSynchronize (cudaFree)");
  }
  void lazy_kernel() override {
    if (gpu_) return gpu_->lazy_kernel();
    host_sync("dfcclDeviceSynchronize (first kernel launch)");
  }
  void compute(double us) override {
    if (gpu_) return gpu_->compute(us);
    auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(us * 1000));
    while (std::chrono::steady_clock::now() < until) {
    }
  }

  void end_iteration() override {
    auto& reqs = iter_reqs_.back();
    if (gpu_ && !host_completion_) {
      for (auto& r : reqs) {
        dfccl_check(dfcclWait(r.req, gpu_->stream(stream_of(plans_[r.entry]))), "dfcclWait");
        if (graphs_) {  // a captured request names no instance: nothing more to ask it
          dfcclRequestFree(r.req);
          r.req = nullptr;
        }
      }
      gpu_->iteration_end();
      return;
    }
    for (auto& r : reqs) wait_request(r);
    if (timing_.closes(iteration_))
      host_spans_.push_back({span_first_, iteration_, static_cast<double>(now_ns() - span_start_ns_) / 1000.0});
  }

  std::vector<IterationTiming> finish(const std::atomic<bool>& cancel) override {
    std::vector<IterationTiming> out;
    if (gpu_ && !host_completion_) {
      gpu_->wait_all(cancel);
      out = gpu_->timings(static_cast<int>(plans_.size()));
      for (auto& t : out)  // the stream times of the events are not the collectives' (dfccl does not join the stream)
        for (auto& e : t.entries) e.e2e_us = kNaN;
    } else {
      for (double t : TimingPlan::per_iteration_times(host_spans_, static_cast<int>(iter_reqs_.size())))
        out.push_back(IterationTiming{t, {}});
    }
    if (gpu_) gpu_->release_host_allocations();
    for (size_t i = 0; i < iter_reqs_.size() && i < out.size(); ++i) {
      out[i].entries.resize(plans_.size());
      for (auto& r : iter_reqs_[i]) {
        if (!r.req) continue;  // dfccl-graph: freed once captured
        // The stream has seen the completion; the host may see it a little later.
        dfcclResult_t status = dfcclSynchronize(r.req, 5000);
        if (status == dfcclTimeout) throw BackendError("dfccl: a request is not done after its iteration completed");
        dfccl_check(status, "dfccl collective", comms_.empty() ? nullptr : comms_.at(r.slot));
        add_request_info(r, out[i].entries[r.entry]);
      }
    }
    free_requests();
    return out;
  }

  EngineCounters counters() override {
    for (auto c : comms_) {
      if (!c) continue;
      dfcclStats_t s = DFCCL_STATS_INITIALIZER;
      if (dfcclGetStats(c, &s) != dfcclSuccess) return {};
      return EngineCounters{true, static_cast<int64_t>(s.preemptions), static_cast<int64_t>(s.daemonLaunches)};
    }
    return {};
  }

  std::string diagnostics(int round) override {  // dfcclDebugDump prints it all (round 1: device memory too)
    for (auto c : comms_)
      if (c) {
        dfcclDebugDump(c, round > 0 ? 1 : 0);
        return "";
      }
    return "no communicator";
  }

 private:
  // The arguments of an entry's calls.
  struct Call {
    dfcclComm_t comm = nullptr;
    const void* send = nullptr;
    void* recv = nullptr;
    cudaStream_t stream = nullptr;
    dfcclDataType_t type{};
    dfcclRedOp_t op{};
  };

  static dfcclResult_t collective_call(const EntryPlan& p, const Call& c, dfcclRequest_t* req) {
    switch (p.coll->kind) {
      case CollKind::AllReduce:
        return dfcclAllReduce(c.send, c.recv, p.count, c.type, c.op, c.comm, p.priority, c.stream, req);
      case CollKind::AllGather:
        return dfcclAllGather(c.send, c.recv, p.count, c.type, c.comm, p.priority, c.stream, req);
      case CollKind::ReduceScatter:
        return dfcclReduceScatter(c.send, c.recv, p.count, c.type, c.op, c.comm, p.priority, c.stream, req);
      case CollKind::Broadcast:
        return dfcclBroadcast(c.send, c.recv, p.count, c.type, p.root, c.comm, p.priority, c.stream, req);
      case CollKind::Reduce:
        return dfcclReduce(c.send, c.recv, p.count, c.type, c.op, p.root, c.comm, p.priority, c.stream, req);
      case CollKind::AllToAll: return dfcclAllToAll(c.send, c.recv, p.count, c.type, c.comm, p.priority, c.stream, req);
      case CollKind::SendRecv:
      case CollKind::P2p: break;  // their calls are dfcclSend and dfcclRecv (submit)
    }
    throw BackendError(fmt::format("{}: no single dfccl call", p.coll->name));
  }

  // Makes one call of an entry (retried under back-pressure) and keeps its request for the end of the iteration.
  template <class F>
  void post(int entry, const char* what, F&& call) {
    const EntryPlan& p = plans_[entry];
    dfcclComm_t comm = comms_.at(p.slot);
    for (int attempt = 0;; ++attempt) {
      dfcclRequest_t req = nullptr;
      const dfcclResult_t r = call(&req);
      if (r == dfcclNoResources && attempt < 1000000) {  // back-pressure: let the oldest outstanding one finish
        wait_oldest();
        continue;
      }
      dfccl_check(r, what, comm);
      iter_reqs_.back().push_back({entry, req, p.slot, nullptr});
      if (callback_completion_) {
        Req& q = iter_reqs_.back().back();
        q.fired = std::make_unique<Fired>();
        dfccl_check(dfcclRequestSetCallback(req, on_complete, q.fired.get()), "dfcclRequestSetCallback", comm);
      }
      return;
    }
  }

  // Set by the callback (callback completion): when it ran (host clock, never 0 once set) and the status it got.
  struct Fired {
    std::atomic<uint64_t> ns{0};
    std::atomic<int> status{dfcclInProgress};
  };
  struct Req {
    int entry;
    dfcclRequest_t req;
    int slot;
    std::unique_ptr<Fired> fired;  // callback completion only; dfcclRequestFree returns after any running callback
  };

  // A done request's times and preemptions, into its entry's (an entry of several calls: the longest times).
  static void add_request_info(const Req& r, EntryTiming& e) {
    dfcclRequestInfo_t info = DFCCL_REQUEST_INFO_INITIALIZER;
    if (dfcclRequestGetInfo(r.req, &info) != dfcclSuccess) return;
    const uint64_t seen = r.fired ? r.fired->ns.load() : info.completeNs;  // callback: when it was called
    if (seen > info.submitNs) e.e2e_us = longer(e.e2e_us, static_cast<double>(seen - info.submitNs) / 1000.0);
    if (info.coreEndNs > info.coreStartNs)
      e.core_us = longer(e.core_us, static_cast<double>(info.coreEndNs - info.coreStartNs) / 1000.0);
    e.preemptions += info.preemptions;
  }

  static void on_complete(dfcclRequest_t, dfcclResult_t status, void* arg) {
    auto* f = static_cast<Fired*>(arg);
    f->status.store(status, std::memory_order_relaxed);
    f->ns.store(std::max<uint64_t>(now_ns(), 1), std::memory_order_release);
  }

  int stream_of(const EntryPlan& p) const { return gpu_ && gpu_->num_streams() > 1 ? p.slot % gpu_->num_streams() : 0; }

  dfcclComm_t any_comm() const {
    for (auto c : comms_)
      if (c) return c;
    throw BackendError("no communicator");
  }

  void host_sync(const char* what) { dfccl_check(dfcclDeviceSynchronize(any_comm()), what); }

  // Waits for one request: the host executor's dfcclWait blocks (dfcclCommAbort releases it); on the GPU with host
  // completion, dfcclSynchronize in slices so that the watchdog's cancel is seen.
  void wait_request(const Req& r) {
    if (r.fired) {  // callback completion: poll the flag the callback sets, checking the watchdog now and then
      for (uint32_t k = 1; r.fired->ns.load(std::memory_order_acquire) == 0; ++k) {
        if (k % 4096 == 0) {
          if (cancel_ && cancel_->load()) throw BackendError("cancelled by the watchdog");
          std::this_thread::yield();
        }
      }
      dfccl_check(static_cast<dfcclResult_t>(r.fired->status.load()), "dfccl collective (callback)");
      report_progress();
      return;
    }
    if (!gpu_) {
      dfcclResult_t res = dfcclWait(r.req, nullptr);
      if (cancel_ && cancel_->load()) throw BackendError("cancelled by the watchdog");
      dfccl_check(res, "dfcclWait");
      report_progress();
      return;
    }
    while (true) {
      dfcclResult_t res = dfcclSynchronize(r.req, 100);
      if (res != dfcclTimeout) {
        dfccl_check(res, "dfcclSynchronize");
        report_progress();
        return;
      }
      if (cancel_ && cancel_->load()) throw BackendError("cancelled by the watchdog");
    }
  }

  void wait_oldest() {
    for (auto& it : iter_reqs_)
      for (auto& r : it) {
        int done = 0;
        dfcclTest(r.req, &done);
        if (done) continue;
        dfcclResult_t res = dfcclSynchronize(r.req, 100);
        if (res != dfcclTimeout && res != dfcclSuccess) dfccl_check(res, "dfcclSynchronize");
        if (cancel_ && cancel_->load()) throw BackendError("cancelled by the watchdog");
        return;
      }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

  void free_requests() {
    for (auto& it : iter_reqs_)
      for (auto& r : it)
        if (r.req) dfcclRequestFree(r.req);
    iter_reqs_.clear();
  }

  // DFCCL_GRAPHS=1 while a communicator of dfccl-graph is made (its graph lane: dfccl.h, "CUDA graphs"), restored
  // after, so that the run's other backends make theirs as the environment says.
  struct GraphLane {
    explicit GraphLane(bool on) : on_(on) {
      if (!on_) return;
      const char* v = std::getenv("DFCCL_GRAPHS");
      had_ = v != nullptr;
      if (had_) old_ = v;
      setenv("DFCCL_GRAPHS", "1", 1);
    }
    ~GraphLane() {
      if (!on_) return;
      if (had_) setenv("DFCCL_GRAPHS", old_.c_str(), 1);
      else unsetenv("DFCCL_GRAPHS");
    }
    bool on_, had_ = false;
    std::string old_;
  };

  BackendContext ctx_;
  std::string name_;
  bool on_gpu_, blocking_, graphs_;
  TimingPlan timing_;
  bool host_completion_ = true;
  bool callback_completion_ = false;
  bool host_order_ = false;  // run.order = host: submitted with DFCCL_NO_STREAM
  std::optional<GpuContext> gpu_;
  std::vector<dfcclComm_t> comms_;
  std::string settings_;         // engine_settings(), from the first communicator created
  std::vector<CommSlot> slots_;  // as create_comms got them (comms_[i] is slots_[i]'s)
  std::vector<EntryPlan> plans_;
  std::vector<std::vector<char>> host_send_, host_recv_;
  std::vector<BufferLayout> layouts_;  // host executor: per entry
  std::vector<std::vector<Req>> iter_reqs_;
  // Host-clock timing (host executor, run.completion = host): the spans measured, the one open.
  std::vector<TimedSpan> host_spans_;
  int iteration_ = -1, span_first_ = 0;
  uint64_t span_start_ns_ = 0;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_dfccl_backend(const BackendContext& ctx, const std::string& name) {
  if (name == "dfccl") return std::make_unique<DfcclBackend>(ctx, name, true, false);
  if (name == "dfccl-blocking") return std::make_unique<DfcclBackend>(ctx, name, true, true);
  if (name == "dfccl-graph") return std::make_unique<DfcclBackend>(ctx, name, true, false, true);
  if (name == "host") return std::make_unique<DfcclBackend>(ctx, name, false, false);
  return std::make_unique<DfcclBackend>(ctx, name, false, true);
}

}  // namespace dfccl::harness
