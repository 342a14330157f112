// Collectives and point-to-point transfers captured into CUDA graphs (docs/design.md, "CUDA graphs"). A call on a
// stream that is capturing records a start node per collective or transfer: each replay posts a new instance of it,
// preemptible like any other. Collectives run on the communicator's graph lane (a one-lane connection made at init,
// transport/persistent.h) and match across ranks by their capture order on the communicator; transfers run on the
// captured lanes of their connections (transport/p2p.h) and match by their capture order on their (sender, receiver)
// pair, an all-to-all's apart from dfcclSend/dfcclRecv's (the board checks both at capture). Each replay of a graph
// takes, in capture order, the next turns of each counter its starts use (a group per communicator and counter). A
// captured call without a request also records a wait node per start (NCCL's idiom: the stream's later work sees the
// result); with one, dfcclWait on the capturing stream records the waits where it is called. The slots and groups a
// graph holds go back to the engine when CUDA destroys the graph (a user object).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "comm/comm_state.h"
#include "engine/requests.h"

namespace dfccl {

// Caller: a collective's entry, for a stream that is capturing (api/api_coll.cpp). Records d's start into the
// capture, and its wait right after when `join`. Returns the captured call's request when !join (else null).
// dfcclNotSupported, naming fn, where a capture cannot hold d (a communicator across hosts, a blocking-mode engine's
// all-reduce split into stages); dfcclNoResources when the engine's slots or groups run out.
std::shared_ptr<RequestState> comm_capture(dfcclComm* c, core::Desc d, cudaStream_t stream, bool join, const char* fn);
// The same for point-to-point transfers (api/api_coll.cpp: dfcclSend, dfcclRecv, an all-to-all's parts) of eager lane
// `lane`, recorded all or none; dfcclNotSupported also where c's connections have no captured lanes.
std::shared_ptr<RequestState> comm_capture_p2p(dfcclComm* c, std::vector<core::Desc> parts, uint32_t lane,
                                               cudaStream_t stream, bool join, const char* fn);

// Caller: dfcclWait on a stream, for a request of a captured call (RequestState::captured). Records the wait into the
// stream's capture, after the call's start nodes whatever the stream's own dependencies; dfcclInvalidUsage unless the
// stream is capturing the graph that captured the call. The first wait of a call may stand in, later ones poll.
void comm_capture_wait(RequestState& r, cudaStream_t stream);

}  // namespace dfccl
