// The C API's requests (wait, test, synchronize, callbacks, info, free) and the engine's queries (statistics, debug
// dump, device synchronization). No exception leaves an entry point (guard in util/error.h).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "api/argcheck.h"
#include "comm/comm.h"
#include "comm/comm_graph.h"
#include "engine/requests.h"
#include "transport/p2p.h"
#include "util/error.h"

using namespace dfccl;
using namespace dfccl::api;

namespace {

// A captured call's request names a collective of a graph, whose instances complete in the graph's replays.
void refuse_captured(const RequestState& r, const char* fn) {
  if (r.captured)
    throw Error(dfcclInvalidUsage, fmt::format("{}: argument 'request' names a collective captured into a CUDA graph: "
                                               "its replays complete on their streams (dfcclWait inside the capture); "
                                               "only dfcclWait there and dfcclRequestFree take it",
                                               fn));
}

}  // namespace

extern "C" {

dfcclResult_t dfcclWait(dfcclRequest_t request, cudaStream_t stream) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclWait");
    if (stream == DFCCL_NO_STREAM)
      bad("dfcclWait", "argument 'stream' is DFCCL_NO_STREAM: give the stream that must wait for the collective "
                       "(or wait on the host: dfcclSynchronize)");
    if (state->captured) {
      comm_capture_wait(*state, stream);
      return dfcclSuccess;
    }
    std::shared_ptr<Engine> engine = state->engine.lock();
    if (engine && stream_capturing(stream, engine->executor_kind(), "dfcclWait"))
      throw Error(dfcclNotSupported, "dfcclWait: argument 'stream' is capturing a CUDA graph, and argument 'request' "
                                     "names a collective called outside it: a graph can wait only for collectives "
                                     "captured in it (wait for this one before the capture)");
    // Where the engine waits on the host (the host executor, the CUDA executor under MPS), dfcclWait waits for the
    // collective here and answers with its status (aborted, a peer's failure).
    const bool host = engine ? engine->waits_on_host() : true;
    if (engine && state->status.load(std::memory_order_acquire) == dfcclInProgress)
      engine->wait_on_stream(state, stream);
    return host ? finished_status(*state) : dfcclSuccess;
  });
}

dfcclResult_t dfcclTest(dfcclRequest_t request, int* done) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclTest");
    refuse_captured(*state, "dfcclTest");
    if (!done) bad("dfcclTest", "argument 'done' is NULL");
    const int st = state->status.load(std::memory_order_acquire);
    *done = st != dfcclInProgress;
    return *done ? finished_status(*state) : dfcclSuccess;
  });
}

dfcclResult_t dfcclSynchronize(dfcclRequest_t request, int timeoutMs) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclSynchronize");
    refuse_captured(*state, "dfcclSynchronize");
    if (timeoutMs < 0) bad("dfcclSynchronize", fmt::format("argument 'timeoutMs' = {} must be >= 0", timeoutMs));
    if (!wait_request(*state, timeoutMs))
      throw Error(dfcclTimeout, fmt::format("dfcclSynchronize: the collective did not finish within {} ms", timeoutMs));
    return finished_status(*state);
  });
}

dfcclResult_t dfcclRequestSetCallback(dfcclRequest_t request, dfcclCallback_t fn, void* userArg) {
  return guard([&] {
    const char* name = "dfcclRequestSetCallback";
    const std::shared_ptr<RequestState> state = request_state(request, name);
    refuse_captured(*state, name);
    if (!fn) bad(name, "argument 'fn' is NULL");
    RequestState& s = *state;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      if (s.callback_set)
        throw Error(dfcclInvalidUsage,
                    fmt::format("{}: argument 'request' has a callback already (one per request)", name));
      s.callback_set = true;
      if (s.status.load() == dfcclInProgress) {
        s.callback = fn;
        s.callback_arg = userArg;
        return dfcclSuccess;
      }
    }
    fn(request, dfcclResult_t(s.status.load()), userArg);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclRequestGetInfo(dfcclRequest_t request, dfcclRequestInfo_t* info) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclRequestGetInfo");
    refuse_captured(*state, "dfcclRequestGetInfo");
    check_out_struct(info, "info", "dfcclRequestInfo_t", "dfcclRequestGetInfo");
    std::lock_guard<std::mutex> lk(state->mu);
    copy_out(info, state->info);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclRequestGetMissingRanks(dfcclRequest_t request, int* ranks, int capacity, int* count) {
  return guard([&] {
    const char* fn = "dfcclRequestGetMissingRanks";
    const std::shared_ptr<RequestState> state = request_state(request, fn);
    if (!count) bad(fn, "argument 'count' is NULL");
    if (capacity < 0) bad(fn, fmt::format("argument 'capacity' = {} is negative", capacity));
    if (capacity > 0 && !ranks) bad(fn, "argument 'ranks' is NULL");
    std::vector<int> missing;
    if (state->status.load(std::memory_order_acquire) == dfcclInProgress)
      if (std::shared_ptr<Engine> e = state->engine.lock()) missing = e->missing_ranks(*state);
    for (size_t i = 0; i < missing.size() && i < size_t(capacity); ++i) ranks[i] = missing[i];
    *count = int(missing.size());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclRequestFree(dfcclRequest_t request) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclRequestFree");
    {
      RequestState& s = *state;
      std::unique_lock<std::mutex> lk(s.mu);
      s.callback = nullptr;  // nobody is left to be called back with this handle
      s.handle = nullptr;
      // A callback already taken by the progress thread: wait until it returns, unless this is that callback.
      if (s.callback_thread != std::this_thread::get_id()) s.cv.wait(lk, [&] { return !s.callback_running; });
    }
    request_handle_free(request);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclGetStats(dfcclComm_t comm, dfcclStats_t* stats) {
  return guard([&] {
    const CommRef held = check_comm(comm, "dfcclGetStats");
    dfcclComm* c = held.get();
    check_out_struct(stats, "stats", "dfcclStats_t", "dfcclGetStats");
    copy_out(stats, live_engine(c, "dfcclGetStats")->stats());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclDebugDump(dfcclComm_t comm, int deviceState) {
  return guard([&] {
    const CommRef held = check_comm(comm, "dfcclDebugDump");
    dfcclComm* c = held.get();
    live_engine(c, "dfcclDebugDump")->debug_dump(stderr, deviceState != 0);
    std::fprintf(stderr, "%s\n", p2p_describe(c).c_str());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclDeviceSynchronize(dfcclComm_t comm) {
  return guard([&] {
    const CommRef held = check_comm(comm, "dfcclDeviceSynchronize");
    dfcclComm* c = held.get();
    live_engine(c, "dfcclDeviceSynchronize")->device_synchronize();  // our reference: an abort may release it meanwhile
    return dfcclSuccess;
  });
}

}  // extern "C"
