// WorkDFCCL, the work object of every op, and its WorkCore: the DFCCL requests, their completion on the process's
// completion thread, the watchdog that reports (or aborts) ops pending past their group's timeout, and the report of
// what a pending op waits for.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>
#include <utility>

#include "Common.hpp"
#include "ProcessGroupDFCCL.hpp"

namespace dfccl_torch {
namespace {

std::exception_ptr distError(const std::string& msg) {
  return std::make_exception_ptr(c10::DistBackendError({__func__, __FILE__, uint32_t(__LINE__)}, msg));
}

// The process's completion thread: DFCCL's callbacks (on DFCCL's progress thread) only push ops here; this thread
// completes them, so that Future continuations (DDP comm hooks, Python callbacks taking the GIL) never run on DFCCL's
// thread. Never destroyed: works may complete while the interpreter exits.
class Completer {
 public:
  static Completer& get() {
    static Completer* c = new Completer();
    return *c;
  }
  void push(std::shared_ptr<WorkCore> w) {
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
      std::shared_ptr<WorkCore> w;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return !q_.empty(); });
        w = std::move(q_.front());
        q_.pop_front();
      }
      try {
        w->complete();
      } catch (const std::exception& e) {
        TORCH_WARN("dfccl: completing ", w->name.str(), " failed: ", e.what());
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<WorkCore>> q_;
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

// The process's watchdog thread: every armed op is listed until it completes; an op pending longer than its group's
// timeout is reported once (stuckReport on stderr) and, in abort mode, its group's communicators are aborted, which
// fails every outstanding op of the group. Never destroyed, like the Completer.
class Watchdog {
 public:
  static Watchdog& get() {
    static Watchdog* w = new Watchdog();
    return *w;
  }
  void add(const std::shared_ptr<WorkCore>& w) {
    if (watchdogMode() == WatchdogMode::Off) return;
    std::lock_guard<std::mutex> lk(mu_);
    works_.emplace(w.get(), w);
  }
  void remove(WorkCore* w) {
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
      std::vector<std::shared_ptr<WorkCore>> due;
      const auto now = std::chrono::steady_clock::now();
      {
        std::lock_guard<std::mutex> lk(mu_);
        for (auto& [_, w] : works_)
          if (w->dueForReport(now)) due.push_back(w);
      }
      for (auto& w : due) report(*w);
    }
  }
  static void report(WorkCore& w) {
    const std::string text = "dfccl watchdog: " + w.name.str() + " " + w.stuckReport() + "\n";
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
    if (watchdogMode() != WatchdogMode::Abort) return;
    std::fputs(("dfccl watchdog: aborting group '" + w.group->id + "' (TORCH_DFCCL_WATCHDOG=abort)\n").c_str(), stderr);
    w.group->abortComms();
  }
  std::mutex mu_;
  std::unordered_map<WorkCore*, std::shared_ptr<WorkCore>> works_;
};

std::string rankList(const GroupState& g, const std::vector<int>& ranks) {
  std::string group, global;
  for (int r : ranks) {
    group += (group.empty() ? "" : ", ") + std::to_string(r);
    global += (global.empty() ? "" : ", ") + std::to_string(g.globalRank(r));
  }
  return group + " (global " + global + ")";
}

}  // namespace

std::string OpName::str() const { return "dfccl: group '" + group + "', op " + op + " #" + std::to_string(seq); }

// ---------------------------------------------------------------------------------------------------------------------
// WorkCore

WorkCore::~WorkCore() {
  for (dfcclRequest_t r : requests_) dfcclRequestFree(r);
}

void WorkCore::arm(const c10::intrusive_ptr<WorkDFCCL>& work) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    work_ = work;
  }
  pending_.store(int(requests_.size()) + 1);
  self_ = shared_from_this();  // the callbacks' reference, handed to the completion thread by the last of them
  Watchdog::get().add(self_);
  for (dfcclRequest_t r : requests_)
    if (dfcclRequestSetCallback(r, &WorkCore::onRequestDone, this) != dfcclSuccess)
      onRequestDone(r, dfcclSuccess, this);
  onRequestDone(nullptr, dfcclSuccess, this);
}

void WorkCore::onRequestDone(dfcclRequest_t, dfcclResult_t, void* arg) {
  auto* self = static_cast<WorkCore*>(arg);
  if (self->pending_.fetch_sub(1) == 1) Completer::get().push(std::move(self->self_));
}

void WorkCore::streamWaits() {
  c10::intrusive_ptr<WorkDFCCL> work;  // dropped after the lock: the caller still holds the work
  std::vector<at::Tensor> stash;
  std::lock_guard<std::mutex> lk(mu_);
  work = std::move(work_);
  stash.swap(stash_);
}

std::exception_ptr WorkCore::collectError() {
  for (dfcclRequest_t r : requests_) {
    int finished = 0;
    const dfcclResult_t st = dfcclTest(r, &finished);
    if (st != dfcclSuccess) return distError(name.str() + " failed: " + describe(st));
  }
  return nullptr;
}

void WorkCore::complete() {
  Watchdog::get().remove(this);
  const std::exception_ptr err = collectError();
  c10::intrusive_ptr<WorkDFCCL> work;
  {
    std::lock_guard<std::mutex> lk(mu_);
    work = std::move(work_);  // null after a stream wait: the work is its caller's alone
    error_ = err;
  }
  done_.store(true);
  if (work) work->complete(err);
  std::vector<at::Tensor> stash;
  std::lock_guard<std::mutex> lk(mu_);
  stash.swap(stash_);
}

std::exception_ptr WorkCore::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

bool WorkCore::dueForReport(std::chrono::steady_clock::time_point now) {
  if (timeout.count() <= 0 || now - start_ < timeout || done()) return false;
  return !reported_.exchange(true);
}

// ---------------------------------------------------------------------------------------------------------------------
// WorkDFCCL

WorkDFCCL::WorkDFCCL(OpName name, int rank, c10d::OpType type, std::optional<at::Device> cuda,
                     std::chrono::milliseconds timeout, std::vector<at::Tensor> outputs,
                     std::shared_ptr<GroupState> group)
    : c10d::Work(rank, type),
      cuda_(cuda),
      outputs_(std::move(outputs)),
      core_(std::make_shared<WorkCore>(std::move(name), cuda.has_value(), timeout, std::move(group))) {
  std::vector<c10::Device> devices;
  if (cuda_) devices.push_back(*cuda_);
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
}

uint64_t WorkDFCCL::getSequencenumber() const { return core_->name.seq; }
void WorkDFCCL::addRequest(const RequestMeta& meta) { core_->addRequest(meta); }
void WorkDFCCL::stash(const at::Tensor& t) { core_->stash(t); }
const OpName& WorkDFCCL::name() const { return core_->name; }

void WorkDFCCL::release_resources() {
  outputs_.clear();
  future_.reset();
  post_ = nullptr;
}

// A work that wait() released (a stream waits for it) is never finished by the core: its outcome is the core's.
bool WorkDFCCL::releasedAndDone() const { return streamWaited_ && core_->done(); }

bool WorkDFCCL::isCompleted() { return c10d::Work::isCompleted() || releasedAndDone(); }

std::exception_ptr WorkDFCCL::exception() const {
  if (std::exception_ptr e = c10d::Work::exception()) return e;
  return releasedAndDone() ? core_->error() : nullptr;
}

bool WorkDFCCL::isSuccess() const { return exception() == nullptr; }

void WorkDFCCL::arm() {
  if (captured_) {  // nothing runs until a replay, on the stream: no callback, no watchdog, no completion thread
    finish(nullptr);
    markFuture(nullptr);  // its events on the current stream: the capturing one
    return;
  }
  core_->arm(c10::intrusive_ptr<WorkDFCCL>::unsafe_reclaim_from_nonowning(this));
}

void WorkDFCCL::markFuture(std::exception_ptr err) {
  if (futureMarked_.exchange(true)) return;
  if (err) future_->setError(err);
  else future_->markCompleted(c10::IValue(outputs_));
}

void WorkDFCCL::complete(std::exception_ptr err) {
  if (!err && !cuda_) {
    try {
      runPostOnce();
    } catch (...) {
      err = std::current_exception();
    }
  }
  finish(err);
  if (cuda_ && !err) {
    // Events of the Future go on an idle stream: the host has seen the completion, so the data is already there.
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool(false, cuda_->index()));
    markFuture(nullptr);
  } else {
    markFuture(err);
  }
}

void WorkDFCCL::runPostOnce() {
  std::call_once(postOnce_, [this] {
    std::function<void()> post = std::move(post_);  // its tensors go once it has run
    if (post) post();
  });
}

bool WorkDFCCL::waitHost(std::chrono::milliseconds timeout) {
  if (streamWaited_) {  // a stream already waits for it: the core completes the op without the work
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!releasedAndDone() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (releasedAndDone()) {
      if (std::exception_ptr e = core_->error()) std::rethrow_exception(e);
      return true;
    }
  } else {
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
  }
  throwDist(name().str() + ": not complete after " + std::to_string(timeout.count()) + " ms; " + core_->stuckReport());
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

std::string WorkCore::stuckReport() {
  // The watchdog and a timed-out wait() may ask at the same moment: one dump serves both.
  std::lock_guard<std::mutex> rlk(reportMutex_);
  const auto now = std::chrono::steady_clock::now();
  if (!report_.empty() && now - reportTime_ < std::chrono::seconds(1)) return report_;
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_);
  std::string text =
      "pending for " + std::to_string(age.count()) + " ms (timeout " + std::to_string(timeout.count()) + " ms)";
  {
    std::lock_guard<std::mutex> lk(group->mu);
    bool dumped[2] = {false, false};  // the engine's state for whoever reads stderr: once per communicator
    for (const RequestMeta& m : meta_) {
      int done = 0;
      dfcclTest(m.req, &done);
      if (done) continue;
      const dfcclComm_t comm = m.cuda ? group->cuda : group->host;
      if (!comm) {
        text += "; the group's communicators are gone (aborted or shut down)";
        break;
      }
      if (!std::exchange(dumped[m.cuda], true)) dfcclDebugDump(comm, 0);
      text += "; " + describeRequest(*group, m);
    }
  }
  report_ = text;
  reportTime_ = now;
  return text;
}

bool WorkDFCCL::wait(std::chrono::milliseconds timeout) {
  if (!cuda_ || (timeout != kNoTimeout && !captured_)) {
    waitHost(timeout == kNoTimeout ? core_->timeout : timeout);
    if (cuda_) runPostOnce();
    return true;
  }
  {
    std::lock_guard<std::mutex> lk(mutex_);
    if (exception_) std::rethrow_exception(exception_);
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(cuda_->index()).stream();
  for (dfcclRequest_t r : core_->requests()) {
    const dfcclResult_t st = dfcclWait(r, stream);
    if (st != dfcclSuccess) throwDist(name().str() + ": dfcclWait failed: " + describe(st));
  }
  runPostOnce();
  if (!captured_) {       // the stream now waits for the op: nothing of it needs keeping beyond what the caller keeps
    markFuture(nullptr);  // its events on the current stream, after the wait
    streamWaited_ = true;
    core_->streamWaits();
  }
  return true;
}

void WorkDFCCL::synchronize() { wait(kNoTimeout); }

c10::intrusive_ptr<c10::ivalue::Future> WorkDFCCL::getFuture() { return future_; }

}  // namespace dfccl_torch
