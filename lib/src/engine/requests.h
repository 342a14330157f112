// Requests: the state of a submitted collective, its completion (status, waiters, callback) and compound requests;
// and their handles. A dfcclRequest_t is a number, never an address: the index of its slot in one process-wide table
// plus the slot's generation, raised when the handle is freed. A handle kept after dfcclRequestFree is therefore
// refused, even once its slot serves a newer request, instead of acting on that request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "util/clock.h"

namespace dfccl {

class Engine;

// One submitted collective, as the host sees it. Shared by the engine (until completion) and the user's handle.
struct RequestState {
  uint64_t seq = 0;
  uint32_t slot = 0;
  // Its communicator spans hosts (ArrivalSource::across_hosts): its slot stays taken until the request has its final
  // status, which then goes into EngineHost::settled[slot], and a stream waits for that (Engine::wait_on_stream).
  bool settles = false;
  std::weak_ptr<Engine> engine;  // alive while the request is pending (its communicator holds the engine)
  std::atomic<int> status{dfcclInProgress};
  dfcclRequestInfo_t info{};
  std::string error;  // why it failed, when a peer's failure ended it (under mu)
  std::mutex mu;
  std::condition_variable cv;
  dfcclCallback_t callback = nullptr;
  bool callback_set = false;  // dfcclRequestSetCallback was called (a second call is refused)
  void* callback_arg = nullptr;
  dfcclRequest_t handle = nullptr;  // passed to the callback
  // The callback taken by the progress thread and not yet returned: dfcclRequestFree waits for it (unless called
  // from the callback itself), so that nothing is called back after the free returns.
  bool callback_running = false;
  std::thread::id callback_thread{};
  // A compound request (an all-to-all) has parts, each a queued transfer; it completes when its last part does, with
  // the first failed part's status and message, the earliest core start, the latest end and the summed preemptions.
  // A part names its compound request (weak: a compound request nobody holds is not completed).
  std::vector<std::shared_ptr<RequestState>> parts;
  std::weak_ptr<RequestState> parent;
  size_t parts_pending = 0;  // under mu
  // A captured call's request (comm/comm_graph.h): it names the collective (or the transfers) of a graph, not an
  // instance, so only dfcclWait inside the same capture takes it (captured_slots: its starts'; captured_starts: their
  // graph nodes, cudaGraphNode_t; comm: its communicator's engine index; captured_waits: how many dfcclWait recorded).
  bool captured = false;
  unsigned long long capture_id = 0;
  std::vector<uint32_t> captured_slots;
  std::vector<void*> captured_starts;
  uint32_t comm = 0;
  uint32_t captured_waits = 0;
};
// A compound request of `parts`, each of which now names it (before any can complete: the caller holds the lock that
// their submission takes, or they are not yet queued).
std::shared_ptr<RequestState> compound_request(std::vector<std::shared_ptr<RequestState>> parts);
// Caller: the progress thread (and compound_request). The request's collective finished with `status` (and a
// failure's message): publishes them, wakes its waiters, runs its callback, folds it into its compound request.
void complete_request(const std::shared_ptr<RequestState>& req, int status, const std::string& error);

// A new handle for the request's state.
dfcclRequest_t request_handle_new(std::shared_ptr<RequestState> state);
// The state behind a live handle; throws dfcclInvalidArgument naming 'request' (in fn) when it is NULL, was never a
// handle or was freed.
std::shared_ptr<RequestState> request_state(dfcclRequest_t handle, const char* fn);
// Frees a live handle (request_state checked it); its later use is refused.
void request_handle_free(dfcclRequest_t handle);

}  // namespace dfccl
