#include "engine/requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "util/clock.h"
#include "util/error.h"

namespace dfccl {
namespace {

constexpr unsigned kIndexBits = 24;  // up to 16 M live requests; the generation takes the other 40 bits
constexpr uint64_t kIndexMask = (uint64_t(1) << kIndexBits) - 1;

struct Entry {
  uint64_t generation = 1;
  std::shared_ptr<RequestState> state;  // null: free
};

struct Table {
  std::mutex mu;
  std::vector<Entry> entries;
  std::vector<uint32_t> free;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: callbacks may run during static destruction
  return *t;
}

uint64_t encode(uint32_t index, uint64_t generation) { return (generation << kIndexBits) | (index + 1); }

// The entry a handle names, if it is live (under the table's lock).
Entry* find_locked(Table& t, dfcclRequest_t handle) {
  const uint64_t v = reinterpret_cast<uintptr_t>(handle);
  const uint64_t index_plus_one = v & kIndexMask;
  if (index_plus_one == 0 || index_plus_one > t.entries.size()) return nullptr;
  Entry& e = t.entries[index_plus_one - 1];
  return e.state && e.generation == (v >> kIndexBits) ? &e : nullptr;
}

}  // namespace

dfcclRequest_t request_handle_new(std::shared_ptr<RequestState> state) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  uint32_t index;
  if (!t.free.empty()) {
    index = t.free.back();
    t.free.pop_back();
  } else {
    if (t.entries.size() >= kIndexMask)
      throw Error(dfcclNoResources,
                  fmt::format("{} requests are allocated; free some with dfcclRequestFree", t.entries.size()));
    index = uint32_t(t.entries.size());
    t.entries.emplace_back();
  }
  Entry& e = t.entries[index];
  e.state = std::move(state);
  return reinterpret_cast<dfcclRequest_t>(uintptr_t(encode(index, e.generation)));
}

std::shared_ptr<RequestState> request_state(dfcclRequest_t handle, const char* fn) {
  if (!handle) throw Error(dfcclInvalidArgument, fmt::format("{}: argument 'request' is NULL", fn));
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  Entry* e = find_locked(t, handle);
  if (!e)
    throw Error(dfcclInvalidArgument,
                fmt::format("{}: argument 'request' is not a live request (freed already, or never one)", fn));
  return e->state;
}

void request_handle_free(dfcclRequest_t handle) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  Entry* e = find_locked(t, handle);
  if (!e) return;
  e->state.reset();
  e->generation = (e->generation + 1) & ((uint64_t(1) << (64 - kIndexBits)) - 1);
  if (e->generation == 0) e->generation = 1;
  t.free.push_back(uint32_t(e - t.entries.data()));
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

}  // namespace dfccl
