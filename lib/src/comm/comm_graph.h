// Collectives captured into CUDA graphs (docs/design.md, "CUDA graphs"). A collective called on a stream that is
// capturing records a start node: each replay posts a new instance of it, preemptible like any other, on the
// communicator's graph lane (a one-lane connection made by the communicator's first capture, transport/persistent.h).
// The collectives a communicator captures are matched across ranks by their capture order (the board checks their
// signatures at capture); each replay of a graph takes the next turns of that lane for its collectives, in capture
// order. A captured call without a request also records a wait node (NCCL's idiom: the stream's later work sees the
// result); with one, dfcclWait on the capturing stream records the wait where it is called. The slots and groups a
// graph holds go back to the engine when CUDA destroys the graph (a user object).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "comm/comm_state.h"
#include "engine/requests.h"

namespace dfccl {

// Caller: a collective's entry, for a stream that is capturing (api/api_coll.cpp). Records d's start into the
// capture, and its wait right after when `join`. Returns the captured call's request when !join (else null).
// dfcclNotSupported, naming fn, where a capture cannot hold d (a communicator across hosts, a blocking-mode engine's
// all-reduce split into stages); dfcclNoResources when the engine's slots or groups run out.
std::shared_ptr<RequestState> comm_capture(dfcclComm* c, core::Desc d, cudaStream_t stream, bool join, const char* fn);

// Caller: dfcclWait on a stream, for a request of a captured call (RequestState::captured). Records the wait into the
// stream's capture; dfcclInvalidUsage unless the stream is capturing the graph that captured the call.
void comm_capture_wait(const RequestState& r, cudaStream_t stream);

}  // namespace dfccl
