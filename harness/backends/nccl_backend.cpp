// The NCCL baseline: the same workload on NCCL communicators. Nonblocking ones (ncclConfig_t.blocking = 0) where a
// deadlock is expected, so that the watchdog can recover it with ncclCommAbort even inside an enqueue; blocking ones
// for sweeps (run.nccl_comms). NCCL_NVLS_ENABLE=0 is set by main() when unset.
// nccl-graph: the same, with each timing span's iterations captured into a CUDA graph and launched run.graph_replays
// times, timed around the launches (GpuContext::use_graphs; nccl-tests -G): NCCL without its per-call host cost.
// Blocking communicators always (the workload check refuses nonblocking ones and what a graph cannot capture).
#include <fmt/format.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "backend.h"
#include "gpu/gpu_context.h"
#include "plan/timing_plan.h"
#include "runtime/thread_name.h"
#include "runtime/version_text.h"

namespace dfccl::harness {
namespace {

void nccl_check(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  std::string last = ncclGetLastError(comm) ? ncclGetLastError(comm) : "";
  throw BackendError(fmt::format("{}: {}{}", what, ncclGetErrorString(r), last.empty() ? "" : " (" + last + ")"));
}

// Nonblocking communicators: an operation may return ncclInProgress; waits (bounded by timeout_s, cancellable) until
// it is done. Polls without sleeping for the first 10 ms, so that no sleep is timed as NCCL latency.
void nccl_wait(ncclComm_t comm, const char* what, const std::atomic<bool>* cancel, double timeout_s) {
  auto t0 = std::chrono::steady_clock::now();
  while (true) {
    ncclResult_t state = ncclSuccess;
    nccl_check(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError", comm);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) nccl_check(state, what, comm);
    if (cancel && cancel->load()) throw BackendError(fmt::format("{}: cancelled by the watchdog", what));
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > timeout_s) throw BackendError(fmt::format("{}: not done after {:.0f} s", what, timeout_s));
    if (waited < 0.01) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

constexpr double kAbortTimeoutS = 30;

ncclDataType_t nccl_type(DataType t) { return static_cast<ncclDataType_t>(static_cast<int>(t)); }
ncclRedOp_t nccl_op(RedOp op) {
  return static_cast<ncclRedOp_t>(static_cast<int>(op == RedOp::None ? RedOp::Sum : op));
}

class NcclBackend final : public Backend {
 public:
  NcclBackend(const BackendContext& ctx, bool graphs)
      : ctx_(ctx),
        graphs_(graphs),
        timing_(TimingPlan::of(*ctx.workload)),
        gpu_(select_device(ctx), ctx.workload->streams == Streams::PerGroup ? kNumGroupKinds : 1) {
    gpu_.use_graphs(graphs, ctx.workload->graph_replays);
  }

  BackendInfo info() const override {
    int v = 0;
    ncclGetVersion(&v);
    std::string marks = !timing_.per_entry_marks() ? "no e2e (no events around the calls with batch timing)"
                        : graphs_                  ? "no e2e (no events inside a captured graph)"
                                  : "e2e = events around the call on its stream (includes waiting for peers)";
    return BackendInfo{
        graphs_ ? "nccl-graph" : "nccl",
        "cuda",
        fmt::format("nccl {}, {} communicators{}", nccl_version_text(v), blocking() ? "blocking" : "nonblocking",
                    graphs_ ? fmt::format(", each timing span captured into a CUDA graph and launched {} time(s)",
                                          ctx_.workload->graph_replays)
                            : ""),
        "stream order: the result is usable on the collective's stream after the call",
        fmt::format("{}{}, iterations back to back; {}; no core time", timing_.describe("CUDA events", "on stream 0"),
                    graphs_ ? " around the graph's launches, divided by their count" : "", marks),
        true,
        ""};
  }

  void create_comms(const std::vector<CommSlot>& slots) override {
    gpu_.make_current();
    slots_ = slots;
    comms_.assign(slots.size(), nullptr);
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].mpi == MPI_COMM_NULL) continue;
      ncclUniqueId id{};
      if (slots[i].rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, slots[i].mpi);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = blocking() ? 1 : 0;
      nccl_check(ncclCommInitRankConfig(&comms_[i], slots[i].size, id, slots[i].rank, &config),
                 "ncclCommInitRankConfig");
    }
    for (auto c : comms_)
      if (c) nccl_wait(c, "ncclCommInitRankConfig", nullptr, 120);
  }

  // Every communicator at once, one thread each. ncclCommAbort sets the communicator's abort flag (its kernels then
  // leave their wait loops) and frees its resources; freeing device memory waits for the whole device to be idle, so
  // aborting one communicator after another waits forever on the kernels of those not yet aborted. Bounded: an abort
  // that does not return within kAbortTimeoutS leaves the backend unusable (the driver stops the campaign's trials).
  void abort_comms() override {
    struct Pending {
      std::mutex mu;
      std::condition_variable cv;
      int left = 0;
    };
    auto pending = std::make_shared<Pending>();
    const int device = gpu_.device();
    for (auto& c : comms_) {
      if (!c) continue;
      ++pending->left;
      std::thread([pending, c, device] {
        name_this_thread("dfccl-ncclabort");
        cudaSetDevice(device);
        ncclCommAbort(c);
        std::lock_guard lock(pending->mu);
        if (--pending->left == 0) pending->cv.notify_all();
      }).detach();
      c = nullptr;
    }
    comms_.clear();
    std::unique_lock lock(pending->mu);
    if (!pending->cv.wait_for(lock, std::chrono::duration<double>(kAbortTimeoutS), [&] { return pending->left == 0; }))
      throw BackendError(
          fmt::format("ncclCommAbort: {} communicator(s) not aborted after {:.0f} s", pending->left, kAbortTimeoutS));
  }

  void destroy_comms() override {
    gpu_.make_current();
    for (auto& c : comms_) {
      if (!c) continue;
      if (ncclCommFinalize(c) == ncclInProgress) {
        try {
          nccl_wait(c, "ncclCommFinalize", nullptr, 30);
        } catch (const BackendError&) {
        }
      }
      ncclCommDestroy(c);
      c = nullptr;
    }
    comms_.clear();
  }

  void prepare(const std::vector<EntryPlan>& plans, const std::vector<std::vector<char>>& send_data) override {
    plans_ = plans;
    gpu_.allocate(plans, send_data);
  }
  void download(int entry, void* dst) override { gpu_.download(entry, dst); }

  void worker_begin(const std::atomic<bool>& cancel) override {
    cancel_ = &cancel;
    gpu_.make_current();
    gpu_.begin_timing(timing_);
  }
  void poison_outputs() override { gpu_.poison(); }
  void start_iteration(int iteration) override { gpu_.iteration_start(iteration); }

  // Posts an entry: a collective's call, or its point-to-point calls: ungrouped (a send, then a receive, as a user
  // writes them) except a sweep's sendrecv, which is grouped as nccl-tests does.
  void submit(int entry) override {
    const EntryPlan& p = plans_.at(entry);
    ncclComm_t comm = comms_.at(p.slot);
    int s = stream_of(p);
    cudaStream_t stream = gpu_.stream(s);
    void* send = gpu_.send(entry);
    void* recv = gpu_.recv(entry);
    gpu_.entry_start(entry, s);
    if (p.send_peer >= 0 || p.recv_peer >= 0) {
      const bool grouped = p.coll->kind == CollKind::SendRecv && ctx_.workload->kind == Workload::Kind::Sweep;
      if (grouped) nccl_check(ncclGroupStart(), "ncclGroupStart", comm);
      if (p.send_peer >= 0) enqueued(ncclSend(send, p.count, nccl_type(p.dtype), p.send_peer, comm, stream), comm);
      if (p.recv_peer >= 0) enqueued(ncclRecv(recv, p.count, nccl_type(p.dtype), p.recv_peer, comm, stream), comm);
      if (grouped) enqueued(ncclGroupEnd(), comm);
    } else if (p.coll->kind == CollKind::AllToAll) {
      all_to_all(p, send, recv, comm, stream);
    } else {
      enqueued(collective_call(p, send, recv, comm, stream), comm);
    }
    gpu_.entry_end(entry, s);
  }

  void device_sync() override { gpu_.device_sync(); }
  void host_alloc(HostAllocKind kind, size_t bytes) override { gpu_.host_alloc(kind, bytes); }
  void cuda_free() override { gpu_.cuda_free(); }
  void lazy_kernel() override { gpu_.lazy_kernel(); }
  void compute(double us) override { gpu_.compute(us); }
  void end_iteration() override { gpu_.iteration_end(); }

  std::vector<IterationTiming> finish(const std::atomic<bool>& cancel) override {
    gpu_.wait_all(cancel);
    gpu_.release_host_allocations();
    for (auto c : comms_)
      if (c) {
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(c, &state);
        if (state != ncclSuccess && state != ncclInProgress) nccl_check(state, "nccl asynchronous error", c);
      }
    return gpu_.timings(static_cast<int>(plans_.size()));
  }

  EngineCounters counters() override { return {}; }

 private:
  static ncclResult_t collective_call(const EntryPlan& p, const void* send, void* recv, ncclComm_t comm,
                                      cudaStream_t stream) {
    const ncclDataType_t type = nccl_type(p.dtype);
    switch (p.coll->kind) {
      case CollKind::AllReduce: return ncclAllReduce(send, recv, p.count, type, nccl_op(p.op), comm, stream);
      case CollKind::AllGather: return ncclAllGather(send, recv, p.count, type, comm, stream);
      case CollKind::ReduceScatter: return ncclReduceScatter(send, recv, p.count, type, nccl_op(p.op), comm, stream);
      case CollKind::Broadcast: return ncclBroadcast(send, recv, p.count, type, p.root, comm, stream);
      case CollKind::Reduce: return ncclReduce(send, recv, p.count, type, nccl_op(p.op), p.root, comm, stream);
      case CollKind::SendRecv:
      case CollKind::AllToAll:
      case CollKind::P2p: break;  // submit makes their calls
    }
    throw BackendError(fmt::format("{}: no single NCCL call", p.coll->name));
  }

  // As nccl-tests' alltoall_perf: ncclAlltoAll where the NCCL in use has it (2.28 and later), else a send and a
  // receive per peer inside one group.
  void all_to_all(const EntryPlan& p, const void* send, void* recv, ncclComm_t comm, cudaStream_t stream) {
    const ncclDataType_t type = nccl_type(p.dtype);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
    int version = 0;
    ncclGetVersion(&version);
    if (version >= NCCL_VERSION(2, 28, 0)) return enqueued(ncclAlltoAll(send, recv, p.count, type, comm, stream), comm);
#endif
    const size_t block = p.count * type_size(p.dtype);
    nccl_check(ncclGroupStart(), "ncclGroupStart", comm);
    for (int r = 0; r < p.group_size; ++r) {
      nccl_check(ncclSend(static_cast<const char*>(send) + r * block, p.count, type, r, comm, stream), "ncclSend",
                 comm);
      nccl_check(ncclRecv(static_cast<char*>(recv) + r * block, p.count, type, r, comm, stream), "ncclRecv", comm);
    }
    enqueued(ncclGroupEnd(), comm);
  }

  // Checks an NCCL call's result. An enqueue that does not finish (nonblocking communicators) is a hang like any
  // other: it waits until the watchdog cancels, which records a deadlock (a time limit here would record a failure).
  void enqueued(ncclResult_t r, ncclComm_t comm) {
    nccl_check(r, "nccl call", comm);
    if (r == ncclInProgress) nccl_wait(comm, "nccl enqueue", cancel_, std::numeric_limits<double>::infinity());
  }

  // Blocking communicators for sweeps: nonblocking ones add a host round trip per call (ncclInProgress, then
  // ncclCommGetAsyncError). ncclCommAbort still releases kernels that hang; only an enqueue that blocks cannot be
  // interrupted, which an in-order sweep does not risk.
  bool blocking() const {
    const Workload& w = *ctx_.workload;
    return graphs_ || w.nccl_comms == NcclComms::Blocking ||
           (w.nccl_comms == NcclComms::Auto && w.kind == Workload::Kind::Sweep);
  }
  static int select_device(const BackendContext& ctx) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) throw BackendError("no CUDA device");
    return ctx.local_rank % n;
  }
  int stream_of(const EntryPlan& p) const { return gpu_.num_streams() > 1 ? p.slot % gpu_.num_streams() : 0; }

  BackendContext ctx_;
  bool graphs_ = false;
  TimingPlan timing_;
  GpuContext gpu_;
  std::vector<CommSlot> slots_;
  std::vector<ncclComm_t> comms_;
  std::vector<EntryPlan> plans_;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(const BackendContext& ctx, bool graphs) {
  return std::make_unique<NcclBackend>(ctx, graphs);
}

}  // namespace dfccl::harness
