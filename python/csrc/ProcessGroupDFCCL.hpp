// The torch.distributed backend "dfccl": a c10d::Backend over DFCCL communicators.
//
// One ProcessGroupDFCCL serves one process group on one process: a host-executor communicator for CPU tensors and,
// when a GPU is present, a CUDA-executor communicator for CUDA tensors, both created in the constructor (never lazily:
// first collectives in rank-divergent order would otherwise meet inside communicator init). Each torch op becomes one
// or more DFCCL collectives submitted on the current CUDA stream (CPU: DFCCL_NO_STREAM) and one WorkDFCCL that holds
// the tensors until DFCCL reports completion.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <dfccl.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dfccl_torch {

// Names one op for messages: "dfccl: group '<group>', op <name> #<seq>".
struct OpName {
  std::string group;
  std::string op;
  uint64_t seq = 0;
  std::string str() const;
};

// What the watchdog and the error messages need of a process group, shared by the group and its works (a work may
// outlive its group). mu guards the communicator handles: shutdown and abort clear them under it, so a work never
// asks a freed communicator for its state.
struct GroupState {
  std::string id;
  std::vector<uint64_t> globalRanks;  // group rank -> global rank; empty: the same
  std::mutex mu;
  dfcclComm_t host = nullptr;
  dfcclComm_t cuda = nullptr;
  std::atomic<bool> aborted{false};
  int globalRank(int groupRank) const;
  // Aborts the communicators (dfcclCommAbort) and forgets them; later ops of the group raise. Takes mu.
  void abortComms();
};

// What a DFCCL request is, for the watchdog's words: `index` numbers it as dfcclDebugDump does (collectives and
// all-to-alls per communicator, send/recv per peer and direction).
enum class ReqKind { Collective, Send, Recv, AllToAll };

struct RequestMeta {
  dfcclRequest_t req = nullptr;
  bool cuda = false;
  ReqKind kind = ReqKind::Collective;
  int64_t index = 0;
  int peer = -1;     // send/recv: the peer's group rank
  size_t count = 0;  // the count argument
};

class WorkCore;

// One torch op as torch sees it: its outputs and a Future, over the op's WorkCore. The Future completes on the
// backend's completion thread, or when a stream is made to wait for the op.
// Contract: wait() on CPU tensors blocks until the op completed; wait() on CUDA tensors makes the current stream wait
// on the GPU and returns at once (the Future is then complete, its events on that stream).
// An op called on a stream that captures a CUDA graph (torch.cuda.graph, torch.compile's CUDA graphs) is captured:
// its requests name the graph's collectives, whose replays complete on the stream. Its work is complete once armed
// (its Future on the capturing stream), and wait() captures the stream's waits (dfcclWait in the capture).
class WorkDFCCL : public c10d::Work {
 public:
  WorkDFCCL(OpName name, int rank, c10d::OpType type, std::optional<at::Device> cuda, std::chrono::milliseconds timeout,
            std::vector<at::Tensor> outputs, std::shared_ptr<GroupState> group);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override;
  std::vector<at::Tensor> result() override { return outputs_; }

  // Called by the backend while it builds the work (submitting thread only).
  void addRequest(const RequestMeta& meta);
  void stash(const at::Tensor& t);
  void setPost(std::function<void()> post) { post_ = std::move(post); }
  // Its requests were captured into a CUDA graph (submitting thread, before arm()).
  void setCaptured() { captured_ = true; }
  // Registers the completion callbacks of every request added; after this the work completes on its own.
  void arm();
  // Completion thread (WorkCore::complete): records the outcome `err`, runs the copy-out of CPU ops, completes the
  // Future unless a stream wait did.
  void complete(std::exception_ptr err);
  const OpName& name() const;
  // The last strong reference is gone: the outputs, the Future and the copy-out go now.
  void release_resources() override;
  // After wait() made a stream wait for the op, the core no longer holds the work and completes the op without it:
  // these then read the op's outcome from the core.
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;

 private:
  bool waitHost(std::chrono::milliseconds timeout);
  bool releasedAndDone() const;  // wait() released the work to its caller and the core has completed the op
  void runPostOnce();
  void markFuture(std::exception_ptr err);

  std::optional<at::Device> cuda_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<WorkCore> core_;
  std::function<void()> post_;
  std::once_flag postOnce_;
  bool captured_ = false;
  std::atomic<bool> streamWaited_{false};  // wait() released the work from its core
  std::atomic<bool> futureMarked_{false};
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// What completes one torch op and reports it stuck, without its outputs: its DFCCL requests (several for coalesced
// ops), the tensors they read and write, and what the watchdog says of them. Shared by the op's work, the requests'
// callbacks, the completion thread and the watchdog, none of which keeps the outputs: the core keeps its work (and so
// the outputs) alive until every request has finished, unless a stream was made to wait for the op (WorkDFCCL::wait
// on CUDA tensors): from then on the work and its tensors live as long as their caller keeps them, and the core never
// takes a reference to the work again (a reference taken by the completion thread could be the last one, and free
// the tensors later than the caller dropped them).
class WorkCore : public std::enable_shared_from_this<WorkCore> {
 public:
  WorkCore(OpName name, bool cuda, std::chrono::milliseconds timeout, std::shared_ptr<GroupState> group)
      : name(std::move(name)), cuda(cuda), timeout(timeout), group(std::move(group)) {}
  ~WorkCore();  // frees the requests

  // Submitting thread, before arm().
  void addRequest(const RequestMeta& meta) {
    requests_.push_back(meta.req);
    meta_.push_back(meta);
  }
  void stash(const at::Tensor& t) { stash_.push_back(t); }
  const std::vector<dfcclRequest_t>& requests() const { return requests_; }
  // Registers the completion callbacks of every request added and keeps `work` until complete(); after this the op
  // completes on its own.
  void arm(const c10::intrusive_ptr<WorkDFCCL>& work);
  // A stream now waits for the op: the stash goes (the stream's later work reuses its memory after the op) and the
  // work is no longer kept.
  void streamWaits();
  // Completion thread, once every request's callback has run: completes the work unless a stream wait released it
  // (its Future too, unless a stream wait marked it), records the outcome and releases the stash.
  void complete();
  // The first failed request's error, else null.
  std::exception_ptr collectError();
  bool done() const { return done_.load(); }
  // The op's outcome once complete() has run (null: success or not complete yet).
  std::exception_ptr error() const;
  // Watchdog: whether the op has been pending longer than its timeout and not reported yet (then marks it reported).
  bool dueForReport(std::chrono::steady_clock::time_point now);
  // What is known about why the op is not complete, in words ("pending for T ms (timeout T ms); ..."): per pending
  // request, the ranks that have not called it (dfcclRequestGetMissingRanks); also writes dfcclDebugDump of the
  // communicators involved to stderr. Never blocks for long (DFCCL waits at most about a second for an engine).
  std::string stuckReport();

  const OpName name;
  const bool cuda;
  const std::chrono::milliseconds timeout;
  const std::shared_ptr<GroupState> group;  // a work may outlive its group

 private:
  static void onRequestDone(dfcclRequest_t req, dfcclResult_t status, void* arg);

  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::vector<dfcclRequest_t> requests_;
  std::vector<RequestMeta> meta_;
  mutable std::mutex mu_;  // guards stash_, work_, error_
  std::vector<at::Tensor> stash_;
  c10::intrusive_ptr<WorkDFCCL> work_;  // kept from arm() to complete() or streamWaits()
  std::exception_ptr error_;            // set by complete()
  std::shared_ptr<WorkCore> self_;  // the callbacks' reference, from arm() to the last callback
  std::atomic<int> pending_{0};
  std::atomic<bool> done_{false};
  std::atomic<bool> reported_{false};
  std::mutex reportMutex_;
  std::string report_;  // the last stuckReport() and when it was made (one dump serves callers within a second)
  std::chrono::steady_clock::time_point reportTime_;
};

// The work of a coalesced block (startCoalescing .. endCoalescing): the works of the ops issued inside it, each
// submitted when it was issued. It completes, and its Future with every op's outputs, once all of them have; the
// first error among them is its error. wait() waits for each op's work in issue order (so CUDA tensors make the
// current stream wait, as each op's own wait does).
class CoalescedWork : public c10d::Work {
 public:
  // The way to make one (the constructor only gathers the outputs; create() hooks the works' Futures).
  static c10::intrusive_ptr<CoalescedWork> create(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works);
  CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works);
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override { wait(kNoTimeout); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }

 private:
  void oneDone();
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::vector<at::Tensor> outputs_;
  std::atomic<size_t> pending_{0};
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Construction parameters, from torch's _DistributedBackendOptions.
struct GroupParams {
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  std::string groupId;
  std::vector<uint64_t> globalRanks;
  int cudaDevice = -1;  // the GPU of the CUDA communicator; -1: none (CPU tensors only)
  // A shrunk group's communicators, made by dfcclCommShrink (Shrink.cpp): the group takes them instead of making its
  // own (store unused).
  dfcclComm_t hostComm = nullptr;
  dfcclComm_t cudaComm = nullptr;
};

class ProcessGroupDFCCL : public c10d::Backend {
 public:
  explicit ProcessGroupDFCCL(const GroupParams& params);
  ~ProcessGroupDFCCL() override;

  const std::string getBackendName() const override { return "dfccl"; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  // The group's timeout, name and global ranks.
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // COMM_ERROR once the group is aborted, else SUCCESS.
  c10d::ErrorType getError() override;
  // Ops are numbered per group from 0 on every rank (the #seq of messages): nothing to agree on.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  // The deprecated list form of allgather_into_tensor_coalesced: one all-gather per input, copied out on completion.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  // Sparse (COO) tensors, reduced densely: each is made dense, all-reduced, and written back as a coalesced sparse
  // tensor (in place) on completion. allreduce takes sparse tensors the same way.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // A barrier waited for on the host for at most opts.timeout (unset: the group's); when it runs out, raises
  // DistBackendError naming the ranks that never arrived (all of them, whatever waitAllRanks says).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks = false) override;
  // Ops issued between startCoalescing and endCoalescing are submitted as they come (DFCCL needs no grouping);
  // endCoalescing returns one CoalescedWork for all of them. supportsCoalescing stays false, so torch's own
  // batch_isend_irecv issues its ops alone; torch's _coalescing_manager(group, device) reaches these.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // Point-to-point (dfcclSend/dfcclRecv, any dtype, moved as bytes; tags are ignored: the k-th send from a to b
  // matches the k-th recv at b from a) and all-to-all (dfcclAllToAll for equal splits, else dfcclAllToAllv).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  // Raises DistBackendError: DFCCL matches every receive with one named peer.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  // Rooted ops as one all-to-all (dfcclAllToAllv, bytes): gather sends every other rank's input to the root, which
  // copies them out into its gather list on completion; scatter sends the root's list (one packed copy) to every
  // other rank's output. The root copies its own part itself (no transfer to itself). Non-roots pass no list.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;

  // Survivors after a failure (Shrink.cpp; python/README.md, "Surviving a dead rank"). torch's dist.shrink_group
  // reaches shrink(); dfccl_torch.shrink_group calls prepareShrink first, which agrees on the excluded ranks
  // (dfcclCommShrink of the host communicator, with `exclude` or, empty, the ranks this rank found failed, then of the
  // CUDA communicator with the agreed set) and returns them (group ranks, increasing); shrink() then hands over the
  // group it made when asked for exactly those ranks, else shrinks itself and raises DistBackendError when the
  // survivors agreed on another set than ranks_to_exclude (torch's bookkeeping would be wrong). This group's
  // communicators end (dfcclRemoteError) when the set is not empty; its outstanding works fail. Refused after
  // abort(): an aborted communicator cannot be shrunk. Called by every survivor; not by an excluded rank.
  bool supportsShrinking() const override { return true; }
  std::vector<int64_t> prepareShrink(const std::vector<int64_t>& exclude);
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude, int shrink_flags = 0,
                                           const c10::intrusive_ptr<Options>& opts_override = nullptr) override;
  // The group ranks of the group this one was shrunk from, per rank of this group (empty: not a shrunk group).
  const std::vector<int64_t>& parentRanks() const { return parentRanks_; }

  // Fails every outstanding collective of the group with DistBackendError; returns within about 1 s.
  void abort() override;
  // Waits (bounded) for outstanding collectives and frees the communicators. Idempotent.
  void shutdown() override;

  bool hasCudaComm() const { return cudaComm_ != nullptr; }
  const std::string& groupName() const { return groupId_; }
  // Connection memory of this rank per communicator, from dfcclCommGetInfo: {"cpu"|"cuda": (connectionBytes,
  // p2pBytes)}; empty after shutdown or abort.
  std::map<std::string, std::pair<size_t, size_t>> memory() const;
  // Ops issued on this rank so far, by op name (the backend's: allreduce, _allgather_base, send, ...); every op
  // counts once when it is issued, whether or not it succeeds.
  std::map<std::string, uint64_t> opCounts() const;

 private:
  using Submit = std::function<dfcclResult_t(dfcclComm_t, cudaStream_t, dfcclRequest_t*)>;
  struct Step {
    at::Tensor device;  // the tensor whose device picks the communicator and stream
    Submit submit;
    size_t count = 0;  // the count argument, for the watchdog
    ReqKind kind = ReqKind::Collective;
    int peer = -1;  // send/recv: the peer (group rank)
  };

  dfcclComm_t initComm(int executor, const std::string& key, int device);
  dfcclComm_t commFor(const at::Tensor& t, const std::string& op);
  c10::intrusive_ptr<WorkDFCCL> makeWork(const std::string& op, c10d::OpType type, const at::Tensor& like,
                                         std::vector<at::Tensor> outputs);
  c10::intrusive_ptr<c10d::Work> run(const c10::intrusive_ptr<WorkDFCCL>& work, const std::vector<Step>& steps);
  void submitOne(WorkDFCCL& work, const Step& step);
  void checkOpen(const std::string& op) const;
  [[noreturn]] void unsupported(const std::string& op, const std::string& why) const;
  c10::intrusive_ptr<c10d::Work> allreduceImpl(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op,
                                               const std::string& name);
  c10::intrusive_ptr<c10d::Work> allgatherBase(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                               const std::string& name, c10d::OpType type);
  int checkPeer(int peer, const std::string& where) const;
  c10::intrusive_ptr<c10d::Work> p2p(std::vector<at::Tensor>& tensors, int peer, bool isSend);
  c10::intrusive_ptr<c10d::Work> sparseAllreduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op,
                                                 const std::string& name);
  c10::intrusive_ptr<c10d::Work> reduceScatterBase(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                   const c10d::ReduceOp& op, const std::string& name,
                                                   c10d::OpType type);

  c10::intrusive_ptr<c10d::Store> store_;
  std::string groupId_;
  std::shared_ptr<GroupState> state_;
  // What has been submitted on each communicator, numbered as DFCCL numbers it (RequestMeta::index).
  struct Counters {
    uint64_t colls = 0, allToAlls = 0;
    std::map<std::pair<int, bool>, uint64_t> transfers;  // (peer, is a send) -> transfers so far
    int64_t next(ReqKind kind, int peer);
  };
  Counters hostCounts_, cudaCounts_;
  std::chrono::milliseconds timeout_;
  int globalRank_ = 0;
  dfcclComm_t hostComm_ = nullptr;
  dfcclComm_t cudaComm_ = nullptr;
  int cudaDevice_ = -1;
  uint64_t seq_ = 0;
  mutable std::mutex countsMutex_;
  std::map<std::string, uint64_t> opCounts_;
  std::atomic<bool> shutDown_{false};
  std::mutex submitMutex_;  // one submission at a time: collectives of a communicator match by submission order
  bool coalescing_ = false;  // between startCoalescing and endCoalescing (guarded by submitMutex_)
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
  GroupParams params_;                              // as constructed (a shrink derives its group's from them)
  std::vector<int64_t> parentRanks_;                // parentRanks()
  c10::intrusive_ptr<ProcessGroupDFCCL> prepared_;  // prepareShrink's group, until shrink() takes it
  std::vector<int64_t> preparedExcluded_;           // the set it was agreed with
  int shrinks_ = 0;                                 // shrinks of this group so far (names the new groups)
};

}  // namespace dfccl_torch
