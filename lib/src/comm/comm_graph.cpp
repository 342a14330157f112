#include "comm/comm_graph.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "comm/comm_submit.h"
#include "util/clock.h"
#include "util/error.h"

namespace dfccl {

namespace {

// What one capture holds on one engine: the slots of its starts and its groups: the starts of one communicator that
// take their turns from one counter (its collectives' graph lane, or one (lane, direction, peer) of its captured
// transfers). Made by the capture's first call on the engine; released by the user object the graph retains
// (release_capture), when CUDA destroys the graph, onto the engine's GraphPool, which outlives the engine if need be.
struct Capture {
  struct Group {
    uint32_t index = 0;
    uint32_t gen = 0;
    uint64_t n = 0;  // starts captured in it so far
  };
  std::pair<unsigned long long, const void*> key;  // capture id, engine
  std::shared_ptr<GraphPool> pool;
  std::vector<uint32_t> slots, groups;
  std::map<std::pair<const dfcclComm*, const uint64_t*>, Group> by_counter;
};

std::mutex captures_mu;
std::map<std::pair<unsigned long long, const void*>, Capture*> captures;

// A CUDA host function (the user object's destructor): no CUDA call.
void release_capture(void* p) {
  auto* cap = static_cast<Capture*>(p);
  cap->pool->release(cap->slots, cap->groups);
  {
    std::lock_guard<std::mutex> lk(captures_mu);
    captures.erase(cap->key);
  }
  delete cap;
}

[[noreturn]] void cuda_failed(const char* fn, const char* what, cudaError_t e) {
  throw Error(dfcclUnhandledCudaError,
              fmt::format("{}: {} failed while capturing: {}", fn, what, cudaGetErrorString(e)));
}

struct CaptureInfo {
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
};

// The capture status of `stream`, with the capture's id and graph in *info; a CUDA error fails the call (fn).
cudaStreamCaptureStatus capture_status(cudaStream_t stream, const char* fn, CaptureInfo* info) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamGetCaptureInfo(stream, &status, &info->id, &info->graph);
  if (e != cudaSuccess) cuda_failed(fn, "cudaStreamGetCaptureInfo", e);
  return status;
}

CaptureInfo capture_info(cudaStream_t stream, const char* fn) {
  CaptureInfo info;
  if (capture_status(stream, fn, &info) != cudaStreamCaptureStatusActive)
    throw Error(dfcclInvalidUsage, fmt::format("{}: argument 'stream' is in an invalidated CUDA graph capture", fn));
  return info;
}

// Caller: holding captures_mu. The capture's record on engine e, made (and retained by the graph) the first time.
Capture& capture_of(const CaptureInfo& info, Engine& e, const char* fn) {
  const auto key = std::make_pair(info.id, static_cast<const void*>(&e));
  if (auto it = captures.find(key); it != captures.end()) return *it->second;
  auto* cap = new Capture;
  cap->key = key;
  cap->pool = e.graph_pool();
  cudaUserObject_t obj = nullptr;
  cudaError_t r = cudaUserObjectCreate(&obj, cap, release_capture, 1, cudaUserObjectNoDestructorSync);
  if (r != cudaSuccess) {
    delete cap;
    cuda_failed(fn, "cudaUserObjectCreate", r);
  }
  r = cudaGraphRetainUserObject(info.graph, obj, 1, cudaGraphUserObjectMove);
  if (r != cudaSuccess) {
    cudaUserObjectRelease(obj, 1);  // runs release_capture (nothing held yet) on a CUDA thread
    cuda_failed(fn, "cudaGraphRetainUserObject", r);
  }
  captures[key] = cap;
  return *cap;
}

// The checks of comm_capture and comm_capture_p2p: c can capture on `stream` (fn names the call). Returns c's engine.
std::shared_ptr<Engine> capturing_engine(dfcclComm* c, const char* fn) {
  if (c->net.any)
    throw Error(dfcclNotSupported, fmt::format("{}: argument 'stream' is capturing a CUDA graph, and this communicator "
                                               "spans hosts: collectives across hosts cannot be captured yet",
                                               fn));
  if (!c->graph_ready)
    throw Error(dfcclNotSupported, fmt::format("{}: argument 'stream' is capturing a CUDA graph, and this communicator "
                                               "was created without its graph lane: set DFCCL_GRAPHS=1 on every rank "
                                               "before creating it (docs/design.md, \"CUDA graphs\")",
                                               fn));
  std::shared_ptr<Engine> e = engine_ref(c);
  if (!e) throw_comm_ended(c);
  return e;
}

// The node that `stream`'s capture added last (the start node just recorded): the stream's one dependency.
void* last_node(cudaStream_t stream, const char* fn) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* deps = nullptr;
  size_t n = 0;
  const cudaError_t e = cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, nullptr, &n);
  if (e != cudaSuccess) cuda_failed(fn, "cudaStreamGetCaptureInfo", e);
  if (n != 1) throw Error(dfcclInternalError, fmt::format("{}: the captured start is not the stream's last node", fn));
  return deps[0];
}

// Caller: comm_capture_submit(_p2p)'s record, under c->mu. Records the starts into the capture `info` on `stream`, in
// their order, and when `join` a wait for each right after them; else fills req as the captured call's request.
// Takes every slot first, all or none (dfcclNoResources naming fn), so that a refused call records nothing.
void record_starts(dfcclComm* c, Engine& e, const CaptureInfo& info, const std::vector<CaptureStart>& starts,
                   cudaStream_t stream, RequestState* req, const char* fn) {
  std::lock_guard<std::mutex> lk(captures_mu);
  Capture& cap = capture_of(info, e, fn);
  std::vector<Capture::Group*> groups;
  for (const CaptureStart& st : starts) {
    auto it = cap.by_counter.find({c, st.turns});
    if (it == cap.by_counter.end()) {
      Capture::Group g;
      g.index = e.graph_take_group(&g.gen, fn);
      cap.groups.push_back(g.index);
      it = cap.by_counter.emplace(std::make_pair(c, st.turns), g).first;
    }
    groups.push_back(&it->second);
  }
  std::vector<uint32_t> slots;
  try {
    for (size_t i = 0; i < starts.size(); ++i) slots.push_back(e.graph_take_slot(fn));
  } catch (...) {
    cap.pool->release(slots, {});
    throw;
  }
  cap.slots.insert(cap.slots.end(), slots.begin(), slots.end());
  // A call without a request with one start (NCCL's form) is one node that posts and waits; with several (an
  // all-to-all's transfers), every start is posted before any wait.
  const bool one_node = !req && starts.size() == 1;
  std::vector<void*> nodes;
  for (size_t i = 0; i < starts.size(); ++i) {
    Capture::Group& g = *groups[i];
    e.graph_group_size(g.index, g.n + 1);
    e.graph_post(stream, starts[i].d, c->index, starts[i].turns, slots[i], g.index, uint32_t(g.n), g.gen, one_node);
    if (req) nodes.push_back(last_node(stream, fn));
    g.n += 1;
  }
  if (!req) {
    if (!one_node)
      for (uint32_t slot : slots) e.graph_wait(stream, slot, c->index);
    return;
  }
  req->captured = true;
  req->capture_id = info.id;
  req->captured_slots = slots;
  req->captured_starts = std::move(nodes);
  req->comm = c->index;
  req->engine = e.shared_from_this();
  req->info.status = dfcclInProgress;
  req->info.submitNs = host_now_ns();
}

}  // namespace

std::shared_ptr<RequestState> comm_capture(dfcclComm* c, core::Desc d, cudaStream_t stream, bool join, const char* fn) {
  const std::shared_ptr<Engine> e = capturing_engine(c, fn);
  const CaptureInfo info = capture_info(stream, fn);
  auto req = join ? nullptr : std::make_shared<RequestState>();
  comm_capture_submit(c, d, [&](const std::vector<CaptureStart>& starts) {
    record_starts(c, *e, info, starts, stream, req.get(), fn);
  });
  return req;
}

std::shared_ptr<RequestState> comm_capture_p2p(dfcclComm* c, std::vector<core::Desc> parts, uint32_t lane,
                                               cudaStream_t stream, bool join, const char* fn) {
  const std::shared_ptr<Engine> e = capturing_engine(c, fn);
  if (c->p2p.nchan > 0 && !c->p2p.graph_turns)
    throw Error(dfcclNotSupported, fmt::format("{}: argument 'stream' is capturing a CUDA graph, and this "
                                               "communicator's point-to-point connections have no captured lanes",
                                               fn));
  const CaptureInfo info = capture_info(stream, fn);
  auto req = join ? nullptr : std::make_shared<RequestState>();
  comm_capture_submit_p2p(c, std::move(parts), lane, [&](const std::vector<CaptureStart>& starts) {
    record_starts(c, *e, info, starts, stream, req.get(), fn);
  });
  return req;
}

void comm_capture_wait(RequestState& r, cudaStream_t stream) {
  const char* fn = "dfcclWait";
  const std::shared_ptr<Engine> e = r.engine.lock();
  CaptureInfo info;
  const cudaStreamCaptureStatus status =
      stream == DFCCL_NO_STREAM ? cudaStreamCaptureStatusNone : capture_status(stream, fn, &info);
  if (!e || status != cudaStreamCaptureStatusActive || info.id != r.capture_id)
    throw Error(dfcclInvalidUsage,
                fmt::format("{}: argument 'request' names a collective captured into a CUDA graph: only a dfcclWait "
                            "on a stream capturing that same graph can wait for it (its replays complete there)",
                            fn));
  // The wait nodes read their instance's sequence number where its start wrote it: they follow the starts in the
  // graph even where `stream` joined the capture before them (a stream forked before the call).
  std::vector<cudaGraphNode_t> starts;
  for (void* n : r.captured_starts) starts.push_back(static_cast<cudaGraphNode_t>(n));
  const cudaError_t err = cudaStreamUpdateCaptureDependencies(stream, starts.data(), nullptr, starts.size(),
                                                              cudaStreamAddCaptureDependencies);
  if (err != cudaSuccess) cuda_failed(fn, "cudaStreamUpdateCaptureDependencies", err);
  // One wait per instance stands in (its tag is the instance's); later ones poll only.
  bool poll_only = false;
  {
    std::lock_guard<std::mutex> lk(r.mu);
    poll_only = r.captured_waits++ > 0;
  }
  for (uint32_t slot : r.captured_slots) e->graph_wait(stream, slot, r.comm, poll_only);
}

}  // namespace dfccl
