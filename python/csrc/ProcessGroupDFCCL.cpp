// ProcessGroupDFCCL's process-group glue: its communicators, the submission path every op goes through (makeWork,
// submitOne, run), abort and shutdown; and the helpers of Common.hpp.
#include "ProcessGroupDFCCL.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "Common.hpp"

namespace dfccl_torch {

[[noreturn]] void throwDist(const std::string& msg) { C10_THROW_ERROR(DistBackendError, msg); }

std::string describe(dfcclResult_t r) {
  std::string s = dfcclGetErrorString(r);
  const char* last = dfcclGetLastError(nullptr);
  if (last && *last) s += std::string(": ") + last;
  return s;
}

void checkTensor(const at::Tensor& t, const std::string& where) {
  if (!t.defined()) throwDist(where + ": a tensor is undefined");
  if (t.layout() != at::kStrided) throwDist(where + ": only dense (strided) tensors are supported");
  if (!t.is_contiguous()) throwDist(where + ": the tensor must be contiguous");
}

int GroupState::globalRank(int groupRank) const {
  return globalRanks.empty() || groupRank < 0 || size_t(groupRank) >= globalRanks.size()
             ? groupRank
             : int(globalRanks[size_t(groupRank)]);
}

// ---------------------------------------------------------------------------------------------------------------------
// ProcessGroupDFCCL: communicators and the submission path

ProcessGroupDFCCL::ProcessGroupDFCCL(const GroupParams& p)
    : c10d::Backend(p.rank, p.size), store_(p.store), groupId_(p.groupId), timeout_(p.timeout), params_(p) {
  globalRank_ = p.globalRanks.empty() ? p.rank : int(p.globalRanks.at(size_t(p.rank)));
  if (p.hostComm) {  // a shrunk group: the communicators exist
    hostComm_ = p.hostComm;
    cudaComm_ = p.cudaComm;
    cudaDevice_ = p.cudaComm ? p.cudaDevice : -1;
  } else {
    // Host executor: one virtual device per process (its global rank), so all groups of a process share one engine.
    hostComm_ = initComm(dfcclExecutorHost, "cpu", globalRank_);
    if (p.cudaDevice >= 0) {
      cudaDevice_ = p.cudaDevice;
      c10::cuda::CUDAGuard guard{c10::DeviceIndex(cudaDevice_)};
      cudaComm_ = initComm(dfcclExecutorCuda, "cuda", cudaDevice_);
    }
  }
  state_ = std::make_shared<GroupState>();
  state_->id = groupId_;
  state_->globalRanks = p.globalRanks;
  state_->host = hostComm_;
  state_->cuda = cudaComm_;
}

ProcessGroupDFCCL::~ProcessGroupDFCCL() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    TORCH_WARN("dfccl: group '", groupId_, "': shutdown failed: ", e.what());
  }
}

dfcclComm_t ProcessGroupDFCCL::initComm(int executor, const std::string& key, int device) {
  const std::string where = "dfccl: group '" + groupId_ + "': " + key + " communicator";
  dfcclUniqueId id;
  const std::string storeKey = "dfccl/uid/" + key;
  if (getRank() == 0) {
    const dfcclResult_t r = dfcclGetUniqueId(&id);
    if (r != dfcclSuccess) throwDist(where + ": dfcclGetUniqueId failed: " + describe(r));
    store_->set(storeKey, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    const std::vector<uint8_t> v = store_->get(storeKey);
    if (v.size() != sizeof(id.internal)) throwDist(where + ": the unique id in the store has the wrong size");
    std::memcpy(id.internal, v.data(), v.size());
  }
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = executor;
  cfg.device = device;
  dfcclComm_t comm = nullptr;
  const dfcclResult_t r = dfcclCommInitRankConfig(&comm, getSize(), id, getRank(), &cfg);
  if (r != dfcclSuccess) throwDist(where + ": dfcclCommInitRankConfig failed: " + describe(r));
  return comm;
}

void ProcessGroupDFCCL::checkOpen(const std::string& op) const {
  if (state_->aborted) throwDist("dfccl: group '" + groupId_ + "', op " + op + ": the process group was aborted");
  if (shutDown_) throwDist("dfccl: group '" + groupId_ + "', op " + op + ": the process group was shut down");
}

void ProcessGroupDFCCL::unsupported(const std::string& op, const std::string& why) const {
  throwDist("dfccl: group '" + groupId_ + "': op " + op + " is not supported: " + why);
}

// Caller holds state_->mu (submitOne): the handles are the live ones, null once aborted or shut down.
dfcclComm_t ProcessGroupDFCCL::commFor(const at::Tensor& t, const std::string& op) {
  checkOpen(op);
  if (t.is_cpu()) return state_->host;
  if (!t.is_cuda()) unsupported(op, "tensors on device " + t.device().str());
  if (!cudaComm_) unsupported(op, "CUDA tensors: this process group has no CUDA communicator");
  if (t.device().index() != cudaDevice_)
    unsupported(op, "a tensor on " + t.device().str() + "; the group's GPU is cuda:" + std::to_string(cudaDevice_));
  return state_->cuda;
}

c10::intrusive_ptr<WorkDFCCL> ProcessGroupDFCCL::makeWork(const std::string& op, c10d::OpType type,
                                                          const at::Tensor& like, std::vector<at::Tensor> outputs) {
  checkOpen(op);
  {
    std::lock_guard<std::mutex> lk(countsMutex_);
    ++opCounts_[op];
  }
  std::optional<at::Device> cuda;
  if (like.is_cuda()) cuda = like.device();
  return c10::make_intrusive<WorkDFCCL>(OpName{groupId_, op, ++seq_}, getRank(), type, cuda, timeout_,
                                        std::move(outputs), state_);
}

int64_t ProcessGroupDFCCL::Counters::next(ReqKind kind, int peer) {
  switch (kind) {
    case ReqKind::Collective: return int64_t(colls++);
    case ReqKind::AllToAll: return int64_t(allToAlls++);
    default: return int64_t(transfers[{peer, kind == ReqKind::Send}]++);
  }
}

void ProcessGroupDFCCL::submitOne(WorkDFCCL& work, const Step& step) {
  const cudaStream_t stream =
      step.device.is_cuda() ? c10::cuda::getCurrentCUDAStream(step.device.device().index()).stream() : DFCCL_NO_STREAM;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (stream != DFCCL_NO_STREAM && cudaStreamIsCapturing(stream, &capture) != cudaSuccess)
    capture = cudaStreamCaptureStatusNone;  // DFCCL's call reports the stream's state itself
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    dfcclRequest_t req = nullptr;
    dfcclResult_t r;
    {
      // Per attempt, not across the back-pressure sleeps: abort and the watchdog take this lock too.
      std::lock_guard<std::mutex> lk(state_->mu);
      r = step.submit(commFor(step.device, work.name().op), stream, &req);
    }
    if (r == dfcclSuccess) {
      if (capture == cudaStreamCaptureStatusActive) {  // a graph's collective: numbered apart from the eager ones
        work.setCaptured();
        work.addRequest(RequestMeta{req, true, step.kind, -1, step.peer, step.count});
        return;
      }
      Counters& counts = step.device.is_cuda() ? cudaCounts_ : hostCounts_;
      RequestMeta meta{req, step.device.is_cuda(), step.kind, counts.next(step.kind, step.peer), step.peer, step.count};
      work.addRequest(meta);
      return;
    }
    // Back-pressure: too many outstanding collectives on the engine; completions free room.
    if (r == dfcclNoResources && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    throwDist(work.name().str() + ": submission failed: " + describe(r));
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::run(const c10::intrusive_ptr<WorkDFCCL>& work,
                                                      const std::vector<Step>& steps) {
  std::lock_guard<std::mutex> lk(submitMutex_);
  try {
    for (const Step& s : steps) submitOne(*work, s);
  } catch (...) {
    work->arm();  // what was submitted completes and releases its tensors
    throw;
  }
  work->arm();
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

void ProcessGroupDFCCL::startCoalescing() {
  std::lock_guard<std::mutex> lk(submitMutex_);
  if (coalescing_) throwDist("dfccl: group '" + groupId_ + "': startCoalescing: a coalesced block is already open");
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::endCoalescing() {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  {
    std::lock_guard<std::mutex> lk(submitMutex_);
    if (!coalescing_) throwDist("dfccl: group '" + groupId_ + "': endCoalescing without startCoalescing");
    coalescing_ = false;
    works.swap(coalesced_);
  }
  return CoalescedWork::create(getRank(), std::move(works));
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupDFCCL::getBackendOptions() {
  auto o = c10::make_intrusive<Options>("dfccl", timeout_);
  o->group_name = groupId_;
  o->global_ranks_in_group = state_->globalRanks;
  return o;
}

c10d::ErrorType ProcessGroupDFCCL::getError() {
  return state_->aborted ? c10d::ErrorType::COMM_ERROR : c10d::ErrorType::SUCCESS;
}

void ProcessGroupDFCCL::monitoredBarrier(const c10d::BarrierOptions& opts, bool) {
  auto work = barrier(opts);
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  work->wait(timeout);  // raises with the ranks that never arrived (WorkDFCCL::stuckReport)
}

// ---------------------------------------------------------------------------------------------------------------------
// CoalescedWork

c10::intrusive_ptr<CoalescedWork> CoalescedWork::create(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works) {
  auto w = c10::make_intrusive<CoalescedWork>(rank, std::move(works));
  w->pending_.store(w->works_.size() + 1);
  for (auto& sub : w->works_) sub->getFuture()->addCallback([w](c10::ivalue::Future&) { w->oneDone(); });
  w->oneDone();
  return w;
}

CoalescedWork::CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works)
    : c10d::Work(rank, c10d::OpType::COALESCED), works_(std::move(works)) {
  std::vector<c10::Device> devices;
  for (auto& sub : works_) {
    for (const at::Tensor& t : sub->result()) {
      outputs_.push_back(t);
      if (t.is_cuda() && std::find(devices.begin(), devices.end(), t.device()) == devices.end())
        devices.push_back(t.device());
    }
  }
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
}

void CoalescedWork::oneDone() {
  if (pending_.fetch_sub(1) != 1) return;
  std::exception_ptr err;
  for (auto& sub : works_)
    if (sub->getFuture()->hasError()) {
      err = sub->getFuture()->exception_ptr();
      break;
    }
  finish(err);
  if (err) future_->setError(err);
  else future_->markCompleted(c10::IValue(outputs_));
}

bool CoalescedWork::wait(std::chrono::milliseconds timeout) {
  for (auto& sub : works_) sub->wait(timeout);
  return true;
}

// ---------------------------------------------------------------------------------------------------------------------
// The lifecycle

void GroupState::abortComms() {
  std::lock_guard<std::mutex> lk(mu);
  if (aborted.exchange(true)) return;
  for (dfcclComm_t c : {host, cuda})
    if (c) dfcclCommAbort(c);
  host = cuda = nullptr;
}

void ProcessGroupDFCCL::abort() {
  if (!shutDown_) state_->abortComms();
}

void ProcessGroupDFCCL::shutdown() {
  if (state_->aborted || shutDown_.exchange(true)) return;
  std::lock_guard<std::mutex> lk(submitMutex_);
  std::lock_guard<std::mutex> slk(state_->mu);
  std::string failed;
  for (dfcclComm_t c : {hostComm_, cudaComm_}) {
    if (!c) continue;
    const dfcclResult_t r = dfcclCommDestroy(c);
    if (r != dfcclSuccess) failed += " " + describe(r);
  }
  state_->host = state_->cuda = nullptr;
  if (!failed.empty()) throwDist("dfccl: group '" + groupId_ + "': shutdown:" + failed);
}

std::map<std::string, std::pair<size_t, size_t>> ProcessGroupDFCCL::memory() const {
  std::map<std::string, std::pair<size_t, size_t>> out;
  std::lock_guard<std::mutex> lk(state_->mu);
  for (auto [key, c] : {std::pair<const char*, dfcclComm_t>{"cpu", state_->host}, {"cuda", state_->cuda}}) {
    dfcclCommInfo_t info = DFCCL_COMM_INFO_INITIALIZER;
    if (c && dfcclCommGetInfo(c, &info) == dfcclSuccess) out[key] = {info.connectionBytes, info.p2pBytes};
  }
  return out;
}

std::map<std::string, uint64_t> ProcessGroupDFCCL::opCounts() const {
  std::lock_guard<std::mutex> lk(countsMutex_);
  return opCounts_;
}

}  // namespace dfccl_torch
