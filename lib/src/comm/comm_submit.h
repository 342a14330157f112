// Submission on a communicator: sequence keys and lanes, persistent ids, point-to-point transfers and chains.
//
// The hierarchical all-reduce across hosts (DFCCL_HIERARCHY=1; docs/net-transport.md, "Hierarchical all-reduce"). A
// communicator of H >= 2 hosts with the same L >= 2 ranks on each, host after host, runs an all-reduce of a multiple
// of L elements as three stages chained in the daemon (Desc::after): a reduce-scatter among the host's ranks, an
// all-reduce of each rank's share among the ranks of its local rank (L rings between the hosts at once), and an
// all-gather among the host's ranks. A host then sends 2(H-1)/H of the data over the network instead of the ring's
// 2(N-1)/N. The stages run on two communicators split from this one at init, which share its fate. comm_submit routes
// such an all-reduce (hierarchy_routes, hierarchy_submit); comm_init.h makes the stage communicators and comm_failure.h
// ends them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/comm_state.h"
#include "engine/engine.h"

namespace dfccl {

// Caller: a prepare of persistent id `id` (not holding c->mu): makes this rank's lane for it (persistent.h).
void comm_prepare(dfcclComm* comm, int id);
// persistent_id < 0: matched by order (sequence lanes); else by id (its own lane).
std::shared_ptr<RequestState> comm_submit(dfcclComm* comm, core::Desc d, int persistent_id, cudaStream_t stream);
// Point-to-point transfers (Send/Recv descriptors, root = the peer) on `lane` (kP2pUser or kP2pAllToAll), queued
// all or none: each takes the next key of its (lane, sender, receiver). Returns one request per descriptor.
std::vector<std::shared_ptr<RequestState>> comm_submit_p2p(dfcclComm* comm, std::vector<core::Desc> parts,
                                                           uint32_t lane, cudaStream_t stream);
// One collective of a chain (comm_submit_chain): d on `comm` under its sequence key next_key + ahead, with the
// board's signature `signature` (a marker queues nothing but takes a key: count 0 against the caller's count).
struct ChainPart {
  dfcclComm* comm;
  core::Desc d;
  uint64_t ahead;
  core::Desc signature;
};
// Queues the parts on one stream, all or none, each on its communicator (parts[0].comm first: the one the caller
// called), as a chain (Desc::after as set in them); each communicator's next key moves past its parts. A part that
// the peers submitted differently fails parts[0].comm (and so every part: the stage communicators above) and throws.
std::vector<std::shared_ptr<RequestState>> comm_submit_chain(std::vector<ChainPart> parts, cudaStream_t stream);

// A start to record into a capture (comm/comm_graph.cpp): the descriptor as the daemon runs it (lane, connection and
// channels set; seq and turn left to each replay), and the counter on the device from which its replays take turns.
struct CaptureStart {
  core::Desc d;
  uint64_t* turns;
};
using CaptureRecord = std::function<void(const std::vector<CaptureStart>&)>;

// Caller: a capture (comm/comm_graph.cpp), for c with its graph lane (made at init). Under c->mu and a submission
// guard, posts d's signature on the board under the graph lane's next key (its capture order on c), sets d's lane,
// connection and channels, and calls record with d (turns: CommDev::graph_turn), which records the start into the
// capture. Throws the mismatch, failing c, when the peers captured a different collective there; nothing is recorded
// then, and nothing when record throws.
void comm_capture_submit(dfcclComm* c, core::Desc d, const CaptureRecord& record);
// The same for point-to-point transfers of eager lane `lane` (as comm_submit_p2p, all or none): each runs on the
// captured lane lane + kP2pLanes, is posted on the board under that lane's next key of its (sender, receiver) (the
// pair's capture order), and takes its replays' turns from P2pConnections::graph_turns. dfcclNotSupported when c has
// no captured lanes.
void comm_capture_submit_p2p(dfcclComm* c, std::vector<core::Desc> parts, uint32_t lane, const CaptureRecord& record);

// Whether all-reduce d of c runs as the stages: c has them, the count is a positive multiple of L and the operator is
// not an average (whose two divisions would round differently from the ring's one).
bool hierarchy_routes(const dfcclComm* c, const core::Desc& d);
// Queues all-reduce d of c: a marker on c (count 0, posted with d's signature: its place in c's order, so that ranks
// that call something else there are told apart) and the three chained stages. Returns their compound request.
std::shared_ptr<RequestState> hierarchy_submit(dfcclComm* c, const core::Desc& d, cudaStream_t stream);

}  // namespace dfccl
