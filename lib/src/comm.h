// Communicators: init over the bootstrap (agreement on the transport, exchange and mapping of connection regions),
// submission (sequence keys and lanes), split, destroy and abort.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm_state.h"
#include "engine.h"

namespace dfccl {

// Fills every -1 field of a config from the environment and defaults; rank picks the host executor's device.
dfcclConfig_t resolve_config(const dfcclConfig_t* config, int rank);

dfcclComm* comm_init(int nranks, const dfcclUniqueId& id, int rank, const dfcclConfig_t& resolved);
dfcclComm* comm_split(dfcclComm* parent, int color, int key, const dfcclConfig_t* config);
// Waits (bounded) for the communicator's collectives and its peers, then frees it. Throws dfcclTimeout when it had
// to give up waiting (the communicator is then aborted and freed anyway).
void comm_destroy(dfcclComm* comm);
// Callable from any thread, also while others submit on the communicator or wait on it; a second call does nothing.
void comm_abort(dfcclComm* comm);
// A peer of comm failed (PeerWatch's thread; reason: "exited", "aborted the communicator", ...): comm is aborted with
// dfcclRemoteError, every pending collective reports it with a message naming the rank, and so do later calls.
void comm_fail(dfcclComm* comm, int rank, const std::string& reason);
// The ranks of comm submitted differing collectives under one key (MatchBoard): comm is aborted with
// dfcclInvalidUsage and `message`, which every pending collective and later call reports.
void comm_fail_mismatch(dfcclComm* comm, const std::string& message);
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
// the peers submitted differently fails parts[0].comm (and so every part: hierarchy.h) and throws.
std::vector<std::shared_ptr<RequestState>> comm_submit_chain(std::vector<ChainPart> parts, cudaStream_t stream);

}  // namespace dfccl
