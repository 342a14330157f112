#include "ProcessGroupDFCCL.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <pthread.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>
#include <utility>

namespace dfccl_torch {
namespace {

[[noreturn]] void throwDist(const std::string& msg) { C10_THROW_ERROR(DistBackendError, msg); }

std::exception_ptr distError(const std::string& msg) {
  return std::make_exception_ptr(c10::DistBackendError({__func__, __FILE__, uint32_t(__LINE__)}, msg));
}

std::string describe(dfcclResult_t r) {
  std::string s = dfcclGetErrorString(r);
  const char* last = dfcclGetLastError(nullptr);
  if (last && *last) s += std::string(": ") + last;
  return s;
}

// The process's completion thread: DFCCL's callbacks (on DFCCL's progress thread) only push works here; this thread
// completes them, so that Future continuations (DDP comm hooks, Python callbacks taking the GIL) never run on DFCCL's
// thread. Never destroyed: works may complete while the interpreter exits.
class Completer {
 public:
  static Completer& get() {
    static Completer* c = new Completer();
    return *c;
  }
  void push(c10::intrusive_ptr<WorkDFCCL> w) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      q_.push_back(std::move(w));
    }
    cv_.notify_one();
  }

 private:
  Completer() {
    std::thread([this] {
      pthread_setname_np(pthread_self(), "dfccl-pgdone");
      loop();
    }).detach();
  }
  void loop() {
    for (;;) {
      c10::intrusive_ptr<WorkDFCCL> w;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return !q_.empty(); });
        w = std::move(q_.front());
        q_.pop_front();
      }
      try {
        w->complete();
      } catch (const std::exception& e) {
        TORCH_WARN("dfccl: completing ", w->name().str(), " failed: ", e.what());
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkDFCCL>> q_;
};

// What the watchdog does with a work pending longer than its group's timeout (TORCH_DFCCL_WATCHDOG): report it on
// stderr (default), also abort its group ("abort"), or nothing ("off" / "0").
enum class WatchdogMode { Off, Report, Abort };

WatchdogMode watchdogMode() {
  static const WatchdogMode mode = [] {
    const char* v = std::getenv("TORCH_DFCCL_WATCHDOG");
    const std::string s = v ? v : "report";
    if (s == "off" || s == "0") return WatchdogMode::Off;
    if (s == "abort") return WatchdogMode::Abort;
    if (s != "report" && s != "1")
      TORCH_WARN("dfccl: TORCH_DFCCL_WATCHDOG=", s, " is not one of report, abort, off: using report");
    return WatchdogMode::Report;
  }();
  return mode;
}

// The process's watchdog thread: every armed work is listed until it completes; a work pending longer than its
// group's timeout is reported once (stuckReport on stderr) and, in abort mode, its group's communicators are aborted,
// which fails every outstanding work of the group. Never destroyed, like the Completer.
class Watchdog {
 public:
  static Watchdog& get() {
    static Watchdog* w = new Watchdog();
    return *w;
  }
  void add(const c10::intrusive_ptr<WorkDFCCL>& w) {
    if (watchdogMode() == WatchdogMode::Off) return;
    std::lock_guard<std::mutex> lk(mu_);
    works_.emplace(w.get(), w);
  }
  void remove(WorkDFCCL* w) {
    std::lock_guard<std::mutex> lk(mu_);
    works_.erase(w);
  }

 private:
  Watchdog() {
    std::thread([this] {
      pthread_setname_np(pthread_self(), "dfccl-pgwatch");
      loop();
    }).detach();
  }
  void loop() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::vector<c10::intrusive_ptr<WorkDFCCL>> due;
      const auto now = std::chrono::steady_clock::now();
      {
        std::lock_guard<std::mutex> lk(mu_);
        for (auto& [_, w] : works_)
          if (w->dueForReport(now)) due.push_back(w);
      }
      for (auto& w : due) report(*w);
    }
  }
  static void report(WorkDFCCL& w) {
    const std::string text = "dfccl watchdog: " + w.name().str() + " " + w.stuckReport() + "\n";
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
    if (watchdogMode() != WatchdogMode::Abort) return;
    std::fputs(("dfccl watchdog: aborting group '" + w.group()->id + "' (TORCH_DFCCL_WATCHDOG=abort)\n").c_str(),
               stderr);
    w.group()->abortComms();
  }
  std::mutex mu_;
  std::unordered_map<WorkDFCCL*, c10::intrusive_ptr<WorkDFCCL>> works_;
};

std::string rankList(const GroupState& g, const std::vector<int>& ranks) {
  std::string group, global;
  for (int r : ranks) {
    group += (group.empty() ? "" : ", ") + std::to_string(r);
    global += (global.empty() ? "" : ", ") + std::to_string(g.globalRank(r));
  }
  return group + " (global " + global + ")";
}

std::optional<dfcclDataType_t> dtypeOf(at::ScalarType t) {
  switch (t) {
    case at::kChar: return dfcclInt8;
    case at::kByte:
    case at::kBool: return dfcclUint8;
    case at::kInt: return dfcclInt32;
    case at::kUInt32: return dfcclUint32;
    case at::kLong: return dfcclInt64;
    case at::kUInt64: return dfcclUint64;
    case at::kHalf: return dfcclFloat16;
    case at::kFloat: return dfcclFloat32;
    case at::kDouble: return dfcclFloat64;
    case at::kBFloat16: return dfcclBfloat16;
    default: return std::nullopt;
  }
}

// A reduction as DFCCL runs it. PREMUL_SUM is SUM after scaling the input by `factor`.
struct Reduction {
  dfcclDataType_t type;
  dfcclRedOp_t op;
  std::optional<c10::intrusive_ptr<c10d::NCCLPreMulSumSupplement>> premul;
};

Reduction reductionOf(const c10d::ReduceOp& rop, at::ScalarType t, const std::string& where) {
  const auto type = dtypeOf(t);
  if (!type) throwDist(where + ": dtype " + std::string(c10::toString(t)) + " is not supported by dfccl");
  const bool isBool = t == at::kBool;
  const bool isFloat = at::isFloatingType(t);
  switch (rop.op_) {
    case c10d::ReduceOp::SUM: return {*type, isBool ? dfcclMax : dfcclSum, std::nullopt};
    case c10d::ReduceOp::PRODUCT: return {*type, isBool ? dfcclMin : dfcclProd, std::nullopt};
    case c10d::ReduceOp::MIN: return {*type, dfcclMin, std::nullopt};
    case c10d::ReduceOp::MAX: return {*type, dfcclMax, std::nullopt};
    case c10d::ReduceOp::AVG:
      if (isBool) throwDist(where + ": ReduceOp.AVG is not supported for bool tensors");
      return {*type, dfcclAvg, std::nullopt};
    case c10d::ReduceOp::PREMUL_SUM:
      if (!isFloat) throwDist(where + ": ReduceOp.PREMUL_SUM needs a floating-point tensor");
      return {*type, dfcclSum, c10::static_intrusive_pointer_cast<c10d::NCCLPreMulSumSupplement>(rop.supplement_)};
    default: throwDist(where + ": ReduceOp " + std::to_string(int(rop.op_)) + " (BAND/BOR/BXOR) is not supported");
  }
}

// Scales t in place by the PREMUL_SUM factor (on the current stream for CUDA tensors).
void premultiply(at::Tensor& t, const Reduction& r) {
  if (!r.premul) return;
  const auto& s = **r.premul;
  if (s.tensor_factor.defined()) t.mul_(s.tensor_factor.to(t.device()));
  else t.mul_(s.double_factor);
}

void checkTensor(const at::Tensor& t, const std::string& where) {
  if (!t.defined()) throwDist(where + ": a tensor is undefined");
  if (t.layout() != at::kStrided) throwDist(where + ": only dense (strided) tensors are supported");
  if (!t.is_contiguous()) throwDist(where + ": the tensor must be contiguous");
}

size_t bytesOf(const at::Tensor& t) { return size_t(t.numel()) * t.element_size(); }

}  // namespace

std::string OpName::str() const { return "dfccl: group '" + group + "', op " + op + " #" + std::to_string(seq); }

// ---------------------------------------------------------------------------------------------------------------------
// WorkDFCCL

int GroupState::globalRank(int groupRank) const {
  return globalRanks.empty() || groupRank < 0 || size_t(groupRank) >= globalRanks.size()
             ? groupRank
             : int(globalRanks[size_t(groupRank)]);
}

WorkDFCCL::WorkDFCCL(OpName name, int rank, c10d::OpType type, std::optional<at::Device> cuda,
                     std::chrono::milliseconds timeout, std::vector<at::Tensor> outputs,
                     std::shared_ptr<GroupState> group)
    : c10d::Work(rank, type),
      name_(std::move(name)),
      cuda_(cuda),
      timeout_(timeout),
      outputs_(std::move(outputs)),
      group_(std::move(group)) {
  std::vector<c10::Device> devices;
  if (cuda_) devices.push_back(*cuda_);
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
}

WorkDFCCL::~WorkDFCCL() {
  for (dfcclRequest_t r : requests_) dfcclRequestFree(r);
}

void WorkDFCCL::arm() {
  pending_.store(int(requests_.size()) + 1);
  // One reference for the callbacks, dropped by the last of them (or below when there is no request).
  Watchdog::get().add(c10::intrusive_ptr<WorkDFCCL>::unsafe_reclaim_from_nonowning(this));
  WorkDFCCL* self = c10::intrusive_ptr<WorkDFCCL>::unsafe_reclaim_from_nonowning(this).release();
  for (dfcclRequest_t r : requests_)
    if (dfcclRequestSetCallback(r, &WorkDFCCL::onRequestDone, self) != dfcclSuccess)
      onRequestDone(r, dfcclSuccess, self);
  onRequestDone(nullptr, dfcclSuccess, self);
}

void WorkDFCCL::onRequestDone(dfcclRequest_t, dfcclResult_t, void* arg) {
  auto* self = static_cast<WorkDFCCL*>(arg);
  if (self->pending_.fetch_sub(1) == 1) Completer::get().push(c10::intrusive_ptr<WorkDFCCL>::reclaim(self));
}

std::exception_ptr WorkDFCCL::collectError() {
  for (dfcclRequest_t r : requests_) {
    int done = 0;
    const dfcclResult_t st = dfcclTest(r, &done);
    if (st != dfcclSuccess) return distError(name_.str() + " failed: " + describe(st));
  }
  return nullptr;
}

void WorkDFCCL::complete() {
  Watchdog::get().remove(this);
  std::exception_ptr err = collectError();
  if (!err && !cuda_) {
    try {
      runPostOnce();
    } catch (...) {
      err = std::current_exception();
    }
  }
  finish(err);
  if (err) {
    future_->setError(err);
  } else if (cuda_) {
    // Events of the Future go on an idle stream: the host has seen the completion, so the data is already there.
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool(false, cuda_->index()));
    future_->markCompleted(c10::IValue(outputs_));
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  stash_.clear();
}

void WorkDFCCL::runPostOnce() {
  if (post_) std::call_once(postOnce_, post_);
}

bool WorkDFCCL::waitHost(std::chrono::milliseconds timeout) {
  bool done;
  {
    std::unique_lock<std::mutex> lk(mutex_);
    done = cv_.wait_for(lk, timeout, [&] { return completed_; });
    if (done && exception_) std::rethrow_exception(exception_);
  }
  if (done) {
    future_->wait();  // complete() marks the Future just after the Work: a returned wait() finds both done
    return true;
  }
  throwDist(name_.str() + ": not complete after " + std::to_string(timeout.count()) + " ms; " + stuckReport());
}

bool WorkDFCCL::dueForReport(std::chrono::steady_clock::time_point now) {
  if (timeout_.count() <= 0 || now - start_ < timeout_ || isCompleted()) return false;
  return !reported_.exchange(true);
}

namespace {

// The ranks of the request's communicator that have not called it (dfcclRequestGetMissingRanks); nullopt with the
// reason in `why` when DFCCL cannot tell.
std::optional<std::vector<int>> missingRanks(dfcclRequest_t req, std::string& why) {
  std::vector<int> ranks(16);
  for (;;) {
    int n = 0;
    const dfcclResult_t r = dfcclRequestGetMissingRanks(req, ranks.data(), int(ranks.size()), &n);
    if (r != dfcclSuccess) {
      why = describe(r);
      return std::nullopt;
    }
    if (size_t(n) <= ranks.size()) {
      ranks.resize(size_t(n));
      return ranks;
    }
    ranks.resize(size_t(n));
  }
}

// One pending request in words: which it is and who has not arrived.
std::string describeRequest(const GroupState& g, const RequestMeta& m) {
  std::string which;
  switch (m.kind) {
    case ReqKind::Collective: which = "collective #" + std::to_string(m.index) + " of its communicator"; break;
    case ReqKind::Send: which = "send #" + std::to_string(m.index) + " to rank " + rankList(g, {m.peer}); break;
    case ReqKind::Recv: which = "recv #" + std::to_string(m.index) + " from rank " + rankList(g, {m.peer}); break;
    case ReqKind::AllToAll: which = "all-to-all #" + std::to_string(m.index) + " of its communicator"; break;
  }
  std::string why;
  const auto ranks = missingRanks(m.req, why);
  if (!ranks) return which + ": the ranks that have not called it are not known (" + why + ")";
  if (ranks->empty()) return which + ": called by every rank (running or preempted; a rank may be slow)";
  return which + ": ranks that never arrived: " + rankList(g, *ranks);
}

}  // namespace

std::string WorkDFCCL::stuckReport() {
  // The watchdog and a timed-out wait() may ask at the same moment: one dump serves both.
  std::lock_guard<std::mutex> rlk(reportMutex_);
  const auto now = std::chrono::steady_clock::now();
  if (!report_.empty() && now - reportTime_ < std::chrono::seconds(1)) return report_;
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_);
  std::string text =
      "pending for " + std::to_string(age.count()) + " ms (timeout " + std::to_string(timeout_.count()) + " ms)";
  {
    std::lock_guard<std::mutex> lk(group_->mu);
    bool dumped[2] = {false, false};  // the engine's state for whoever reads stderr: once per communicator
    for (const RequestMeta& m : meta_) {
      int done = 0;
      dfcclTest(m.req, &done);
      if (done) continue;
      const dfcclComm_t comm = m.cuda ? group_->cuda : group_->host;
      if (!comm) {
        text += "; the group's communicators are gone (aborted or shut down)";
        break;
      }
      if (!std::exchange(dumped[m.cuda], true)) dfcclDebugDump(comm, 0);
      text += "; " + describeRequest(*group_, m);
    }
  }
  report_ = text;
  reportTime_ = now;
  return text;
}

bool WorkDFCCL::wait(std::chrono::milliseconds timeout) {
  if (!cuda_ || timeout != kNoTimeout) {
    waitHost(timeout == kNoTimeout ? timeout_ : timeout);
    if (cuda_) runPostOnce();
    return true;
  }
  {
    std::lock_guard<std::mutex> lk(mutex_);
    if (exception_) std::rethrow_exception(exception_);
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(cuda_->index()).stream();
  for (dfcclRequest_t r : requests_) {
    const dfcclResult_t st = dfcclWait(r, stream);
    if (st != dfcclSuccess) throwDist(name_.str() + ": dfcclWait failed: " + describe(st));
  }
  runPostOnce();
  return true;
}

void WorkDFCCL::synchronize() { wait(kNoTimeout); }

c10::intrusive_ptr<c10::ivalue::Future> WorkDFCCL::getFuture() { return future_; }

// ---------------------------------------------------------------------------------------------------------------------
// ProcessGroupDFCCL: communicators and the submission path

ProcessGroupDFCCL::ProcessGroupDFCCL(const GroupParams& p)
    : c10d::Backend(p.rank, p.size), store_(p.store), groupId_(p.groupId), timeout_(p.timeout) {
  globalRank_ = p.globalRanks.empty() ? p.rank : int(p.globalRanks.at(size_t(p.rank)));
  // Host executor: one virtual device per process (its global rank), so all groups of a process share one engine.
  hostComm_ = initComm(dfcclExecutorHost, "cpu", globalRank_);
  if (p.cudaDevice >= 0) {
    cudaDevice_ = p.cudaDevice;
    c10::cuda::CUDAGuard guard{c10::DeviceIndex(cudaDevice_)};
    cudaComm_ = initComm(dfcclExecutorCuda, "cuda", cudaDevice_);
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
  return work;
}

// ---------------------------------------------------------------------------------------------------------------------
// Collectives

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allreduceImpl(std::vector<at::Tensor>& tensors,
                                                                const c10d::ReduceOp& rop, const std::string& name) {
  TORCH_CHECK(!tensors.empty(), "dfccl: ", name, ": no tensors");
  auto work = makeWork(name, c10d::OpType::ALLREDUCE, tensors[0], tensors);
  std::vector<Step> steps;
  for (at::Tensor& t : tensors) {
    checkTensor(t, work->name().str());
    const Reduction r = reductionOf(rop, t.scalar_type(), work->name().str());
    premultiply(t, r);
    work->stash(t);
    if (t.numel() == 0) continue;
    steps.push_back({t,
                     [t, r](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), r.type, r.op, c, 0, s, q);
                     },
                     size_t(t.numel())});
  }
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  return allreduceImpl(tensors, opts.reduceOp, "allreduce");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  return allreduceImpl(tensors, opts.reduceOp, "allreduce_coalesced");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "dfccl: broadcast takes one tensor per process");
  at::Tensor t = tensors[0];
  auto work = makeWork("broadcast", c10d::OpType::BROADCAST, t, tensors);
  checkTensor(t, work->name().str());
  work->stash(t);
  const int root = int(opts.rootRank);
  std::vector<Step> steps;
  if (t.numel() > 0)
    steps.push_back({t,
                     [t, root](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclBroadcast(t.data_ptr(), t.data_ptr(), bytesOf(t), dfcclUint8, root, c, 0, s, q);
                     },
                     bytesOf(t)});
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "dfccl: reduce takes one tensor per process");
  at::Tensor t = tensors[0];
  auto work = makeWork("reduce", c10d::OpType::REDUCE, t, tensors);
  checkTensor(t, work->name().str());
  const Reduction r = reductionOf(opts.reduceOp, t.scalar_type(), work->name().str());
  premultiply(t, r);
  work->stash(t);
  const int root = int(opts.rootRank);
  std::vector<Step> steps;
  if (t.numel() > 0)
    steps.push_back({t,
                     [t, r, root](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), r.type, r.op, root, c, 0, s,
                                          q);
                     },
                     size_t(t.numel())});
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions&) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "dfccl: allgather takes one tensor list per process");
  const at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = outputs[0];
  auto work = makeWork("allgather", c10d::OpType::ALLGATHER, in, outs);
  checkTensor(in, work->name().str());
  if (int(outs.size()) != getSize())
    throwDist(work->name().str() + ": the output list has " + std::to_string(outs.size()) + " tensors, the group " +
              std::to_string(getSize()) + " ranks");
  for (const at::Tensor& o : outs)
    if (o.numel() != in.numel() || o.scalar_type() != in.scalar_type() || o.device() != in.device())
      throwDist(work->name().str() + ": every output tensor must match the input's numel, dtype and device");
  // Gathered into one flat buffer, then copied out after completion (CPU: on the completion thread; CUDA: on the
  // stream that waits).
  const at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
  work->stash(in);
  work->stash(flat);
  work->setPost([flat, outs]() mutable {
    for (size_t i = 0; i < outs.size(); ++i)
      outs[i].copy_(flat.narrow(0, int64_t(i) * outs[i].numel(), outs[i].numel()).view_as(outs[i]));
  });
  std::vector<Step> steps;
  if (in.numel() > 0)
    steps.push_back({in,
                     [in, flat](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclAllGather(in.data_ptr(), flat.data_ptr(), bytesOf(in), dfcclUint8, c, 0, s, q);
                     },
                     bytesOf(in)});
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allgatherBase(std::vector<at::Tensor>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const std::string& name, c10d::OpType type) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(), "dfccl: ", name, ": inputs and outputs differ");
  auto work = makeWork(name, type, inputs[0], outputs);
  std::vector<Step> steps;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor in = inputs[i], out = outputs[i];
    checkTensor(in, work->name().str());
    checkTensor(out, work->name().str());
    if (out.numel() != in.numel() * getSize() || out.scalar_type() != in.scalar_type())
      throwDist(work->name().str() + ": the output must hold group size x the input's numel, in the input's dtype");
    work->stash(in);
    work->stash(out);
    if (in.numel() == 0) continue;
    steps.push_back({in,
                     [in, out](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclAllGather(in.data_ptr(), out.data_ptr(), bytesOf(in), dfcclUint8, c, 0, s, q);
                     },
                     bytesOf(in)});
  }
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions&) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgatherBase(outs, ins, "_allgather_base", c10d::OpType::_ALLGATHER_BASE);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                  std::vector<at::Tensor>& inputs,
                                                                                  const c10d::AllgatherOptions&) {
  return allgatherBase(outputs, inputs, "allgather_into_tensor_coalesced", c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::reduceScatterBase(std::vector<at::Tensor>& outputs,
                                                                    std::vector<at::Tensor>& inputs,
                                                                    const c10d::ReduceOp& rop, const std::string& name,
                                                                    c10d::OpType type) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(), "dfccl: ", name, ": inputs and outputs differ");
  auto work = makeWork(name, type, inputs[0], outputs);
  std::vector<Step> steps;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor in = inputs[i];
    const at::Tensor out = outputs[i];
    checkTensor(in, work->name().str());
    checkTensor(out, work->name().str());
    if (in.numel() != out.numel() * getSize() || out.scalar_type() != in.scalar_type())
      throwDist(work->name().str() + ": the input must hold group size x the output's numel, in the output's dtype");
    const Reduction r = reductionOf(rop, in.scalar_type(), work->name().str());
    if (r.premul) {
      in = in.clone();  // the input is not the caller's to scale
      premultiply(in, r);
    }
    work->stash(in);
    work->stash(out);
    if (out.numel() == 0) continue;
    steps.push_back({in,
                     [in, out, r](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclReduceScatter(in.data_ptr(), out.data_ptr(), size_t(out.numel()), r.type, r.op, c, 0,
                                                 s, q);
                     },
                     size_t(out.numel())});
  }
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduceScatterBase(outs, ins, opts.reduceOp, "_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  return reduceScatterBase(outputs, inputs, opts.reduceOp, "reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1, "dfccl: reduce_scatter takes one tensor list per process");
  const std::string where = "dfccl: group '" + groupId_ + "', op reduce_scatter";
  if (int(inputs[0].size()) != getSize())
    throwDist(where + ": the input list has " + std::to_string(inputs[0].size()) + " tensors, the group " +
              std::to_string(getSize()) + " ranks");
  for (const at::Tensor& t : inputs[0])
    if (t.numel() != outputs[0].numel() || t.scalar_type() != outputs[0].scalar_type())
      throwDist(where + ": every input tensor must match the output's numel and dtype");
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : inputs[0]) flat.push_back(t.reshape({-1}));
  std::vector<at::Tensor> ins{at::cat(flat)};
  return reduceScatterBase(outputs, ins, opts.reduceOp, "reduce_scatter", c10d::OpType::REDUCE_SCATTER);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::barrier(const c10d::BarrierOptions&) {
  // A one-byte all-reduce on the host communicator: the host waits, whatever the tensors' devices.
  std::vector<at::Tensor> t{at::zeros({1}, at::TensorOptions().dtype(at::kByte))};
  return allreduceImpl(t, c10d::ReduceOp(c10d::ReduceOp::MAX), "barrier");
}

// ---------------------------------------------------------------------------------------------------------------------
// Point-to-point and all-to-all

namespace {

// t (contiguous) as a flat byte tensor sharing its memory.
at::Tensor byteView(const at::Tensor& t) { return t.reshape({-1}).view(at::kByte); }

// Bytes per row of dim 0 of t (dim >= 1).
size_t rowBytes(const at::Tensor& t) {
  size_t n = size_t(t.element_size());
  for (int64_t d = 1; d < t.dim(); ++d) n *= size_t(t.size(d));
  return n;
}

// Bytes and displacements of one side of alltoall_base: rows of dim 0 per peer from splits, or equal parts when
// splits is empty. Raises naming `side` when they do not fit the tensor.
struct Parts {
  std::vector<size_t> bytes, displs;
};

Parts partsOf(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const std::string& where,
              const std::string& side) {
  if (t.dim() < 1) throwDist(where + ": the " + side + " tensor needs at least one dimension");
  const int64_t rows = t.size(0);
  std::vector<int64_t> r = splits;
  if (r.empty()) {
    if (rows % size != 0)
      throwDist(where + ": the " + side + "'s " + std::to_string(rows) + " rows do not split equally over " +
                std::to_string(size) + " ranks");
    r.assign(size_t(size), rows / size);
  }
  if (int(r.size()) != size)
    throwDist(where + ": " + side + " split sizes has " + std::to_string(r.size()) + " entries, the group " +
              std::to_string(size) + " ranks");
  int64_t sum = 0;
  for (int64_t v : r) {
    if (v < 0) throwDist(where + ": a negative " + side + " split size");
    sum += v;
  }
  if (sum != rows)
    throwDist(where + ": the " + side + " split sizes add up to " + std::to_string(sum) + ", the tensor has " +
              std::to_string(rows) + " rows");
  Parts p;
  size_t at = 0;
  for (int64_t v : r) {
    p.bytes.push_back(size_t(v) * rowBytes(t));
    p.displs.push_back(at);
    at += p.bytes.back();
  }
  return p;
}

bool allEqual(const std::vector<size_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](size_t x) { return x == v.front(); });
}

// One all-to-all of bytes: dfcclAllToAll where every part has the same size on both sides, else dfcclAllToAllv.
// The arrays are copied into the step (DFCCL reads them during the call only).
std::function<dfcclResult_t(dfcclComm_t, cudaStream_t, dfcclRequest_t*)> allToAllSubmit(const at::Tensor& in,
                                                                                        const at::Tensor& out,
                                                                                        Parts send, Parts recv) {
  if (allEqual(send.bytes) && allEqual(recv.bytes) && send.bytes.front() == recv.bytes.front()) {
    const size_t each = send.bytes.front();
    return [in, out, each](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
      return dfcclAllToAll(in.data_ptr(), out.data_ptr(), each, dfcclUint8, c, 0, s, q);
    };
  }
  return [in, out, send, recv](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
    return dfcclAllToAllv(in.data_ptr(), send.bytes.data(), send.displs.data(), out.data_ptr(), recv.bytes.data(),
                          recv.displs.data(), dfcclUint8, c, 0, s, q);
  };
}

}  // namespace

int ProcessGroupDFCCL::checkPeer(int peer, const std::string& where) const {
  if (peer < 0 || peer >= getSize())
    throwDist(where + ": peer rank " + std::to_string(peer) + " is not in the group (size " +
              std::to_string(getSize()) + ")");
  return peer;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::p2p(std::vector<at::Tensor>& tensors, int peer, bool isSend) {
  const std::string op = isSend ? "send" : "recv";
  TORCH_CHECK(tensors.size() == 1, "dfccl: ", op, " takes one tensor");
  const at::Tensor t = tensors[0];
  auto work = makeWork(op, isSend ? c10d::OpType::SEND : c10d::OpType::RECV, t, tensors);
  checkTensor(t, work->name().str());
  checkPeer(peer, work->name().str());
  work->stash(t);
  std::vector<Step> steps;
  if (t.numel() > 0) {
    Submit submit = isSend ? Submit([t, peer](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
      return dfcclSend(t.data_ptr(), bytesOf(t), dfcclUint8, peer, c, 0, s, q);
    })
                           : Submit([t, peer](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                               return dfcclRecv(t.data_ptr(), bytesOf(t), dfcclUint8, peer, c, 0, s, q);
                             });
    steps.push_back({t, std::move(submit), bytesOf(t), isSend ? ReqKind::Send : ReqKind::Recv, peer});
  }
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::send(std::vector<at::Tensor>& tensors, int dstRank, int) {
  return p2p(tensors, dstRank, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::recv(std::vector<at::Tensor>& tensors, int srcRank, int) {
  return p2p(tensors, srcRank, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::recvAnysource(std::vector<at::Tensor>&, int) {
  unsupported("recvAnysource",
              "a receive from any source (recv without src) cannot be matched: DFCCL pairs each receive with the "
              "k-th send of one named peer; pass src");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplits,
                                                                std::vector<int64_t>& inputSplits,
                                                                const c10d::AllToAllOptions&) {
  auto work = makeWork("alltoall_base", c10d::OpType::ALLTOALL_BASE, input, {output});
  const std::string where = work->name().str();
  checkTensor(input, where);
  checkTensor(output, where);
  if (input.scalar_type() != output.scalar_type() || input.device() != output.device())
    throwDist(where + ": input and output differ in dtype or device");
  if (input.numel() > 0 && output.numel() > 0 && input.data_ptr() == output.data_ptr())
    throwDist(where + ": input and output are the same memory (all-to-all is not in place)");
  Parts send = partsOf(input, inputSplits, getSize(), where, "input");
  Parts recv = partsOf(output, outputSplits, getSize(), where, "output");
  work->stash(input);
  work->stash(output);
  std::vector<Step> steps{{input, allToAllSubmit(input, output, send, recv), 0, ReqKind::AllToAll}};
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions&) {
  TORCH_CHECK(!inputs.empty(), "dfccl: alltoall: no tensors");
  auto work = makeWork("alltoall", c10d::OpType::ALLTOALL, inputs[0], outputs);
  const std::string where = work->name().str();
  if (int(inputs.size()) != getSize() || int(outputs.size()) != getSize())
    throwDist(where + ": the lists have " + std::to_string(inputs.size()) + " inputs and " +
              std::to_string(outputs.size()) + " outputs, the group " + std::to_string(getSize()) + " ranks");
  Parts send, recv;
  std::vector<at::Tensor> ins;
  for (size_t p = 0; p < inputs.size(); ++p) {
    for (const at::Tensor* t : {&inputs[p], &outputs[p]}) {
      checkTensor(*t, where);
      if (t->device() != inputs[0].device()) throwDist(where + ": the tensors are on different devices");
    }
    send.displs.push_back(send.bytes.empty() ? 0 : send.displs.back() + send.bytes.back());
    send.bytes.push_back(bytesOf(inputs[p]));
    recv.displs.push_back(recv.bytes.empty() ? 0 : recv.displs.back() + recv.bytes.back());
    recv.bytes.push_back(bytesOf(outputs[p]));
    ins.push_back(byteView(inputs[p]));
  }
  // Sent from one packed buffer into another, copied out on completion (CPU) or when the stream waits (CUDA).
  const at::Tensor in = at::cat(ins);
  const at::Tensor out = at::empty({int64_t(recv.displs.back() + recv.bytes.back())}, in.options());
  work->stash(in);
  work->stash(out);
  std::vector<at::Tensor> outs = outputs;
  work->setPost([out, outs, recv]() mutable {
    for (size_t p = 0; p < outs.size(); ++p)
      byteView(outs[p]).copy_(out.narrow(0, int64_t(recv.displs[p]), int64_t(recv.bytes[p])));
  });
  std::vector<Step> steps{{in, allToAllSubmit(in, out, send, recv), 0, ReqKind::AllToAll}};
  return run(work, steps);
}

// ---------------------------------------------------------------------------------------------------------------------
// Not implemented, and the lifecycle

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::gather(std::vector<std::vector<at::Tensor>>&,
                                                         std::vector<at::Tensor>&, const c10d::GatherOptions&) {
  unsupported("gather", "not implemented in this version (use all_gather)");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::scatter(std::vector<at::Tensor>&,
                                                          std::vector<std::vector<at::Tensor>>&,
                                                          const c10d::ScatterOptions&) {
  unsupported("scatter", "not implemented in this version (use broadcast)");
}

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
    dfcclCommInfo_t info{};
    if (c && dfcclCommGetInfo(c, &info) == dfcclSuccess) out[key] = {info.connectionBytes, info.p2pBytes};
  }
  return out;
}

}  // namespace dfccl_torch
