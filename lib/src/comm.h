// Communicators: init over the bootstrap (agreement on the transport, exchange and mapping of connection regions),
// submission (sequence keys and lanes), split, destroy and abort.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap.h"
#include "engine.h"
#include "match_board.h"
#include "net/links.h"
#include "p2p.h"
#include "persistent.h"

namespace dfccl {
struct BoardMirror;  // board_mirror.cpp
}

struct dfcclComm {
  static constexpr uint32_t kMagic = 0xdfcc0c03u;
  uint32_t magic = kMagic;
  std::atomic<bool> alive{true};
  // Submissions past their liveness check and not yet queued (comm_submit): an abort from another thread, which
  // takes no lock, waits for them before it frees anything (comm_abort).
  std::atomic<int> submitting{0};
  std::mutex mu;
  // Reset by an abort or destroy (release) while other threads may be inside calls that use the engine (a device
  // synchronization that the abort is meant to end): those calls take their own reference (engine_ref); engine_mu
  // guards the pointer only, for a copy or a swap, never across a call.
  std::mutex engine_mu;
  std::shared_ptr<dfccl::Engine> engine;
  std::shared_ptr<dfccl::Bootstrap> bootstrap;
  std::shared_ptr<dfccl::MatchBoard> board;  // in the bootstrap segment; also held by the engine (arrivals)
  // The board's messages to and from other hosts (board_mirror.h); null on one host. Set at init, kept until the
  // handle goes (mirror_release empties it).
  std::shared_ptr<dfccl::BoardMirror> mirror;
  dfcclConfig_t config{};  // resolved: no -1 fields
  int rank = 0, nranks = 0;
  bool host_path = false;  // connection regions in shared host memory (no peer access between the neighbours)
  uint32_t index = ~0u;    // in the engine's communicator table
  dfccl::core::CommDev host_dev{};
  dfccl::core::CommDev* dev = nullptr;
  dfccl::core::LaneState* lanes = nullptr;
  dfccl::RegionBlob region{}, next_blob{}, prev_blob{};
  void* next_ptr = nullptr;
  void* prev_ptr = nullptr;
  uint64_t next_key = 0;
  dfccl::P2pConnections p2p;  // point-to-point connections to every rank (p2p.h)
  dfccl::NetLinks net;        // the connections through the network (net/links.h)
  // The connections' shape: the engine's transport, or, with network connections, their own (net_geometry).
  dfccl::TransportParams geometry{};
  uint32_t persistent_lanes = 0;  // DFCCL_PERSISTENT_LANES at init: ids 0 .. persistent_lanes - 1
  dfccl::PersistentLanes persistent;  // their lanes, made on first use (persistent.h)
  uint64_t persistent_turn[DFCCL_MAX_PERSISTENT_IDS] = {};
  bool persistent_prepared[DFCCL_MAX_PERSISTENT_IDS] = {};
  std::atomic<int> async_error{dfcclSuccess};
  // A failure that ended the communicator without the application's abort: a peer that died, aborted or fell silent
  // (dfcclRemoteError) or collectives that disagree between ranks (dfcclInvalidUsage); `failure` names the rank or
  // the field and is written before `fail_code`.
  std::atomic<bool> fail_claimed{false};  // the first failure claims it (comm.cpp, fail_once)
  std::atomic<int> fail_code{dfcclSuccess};
  std::string failure;
  std::atomic<bool> user_aborted{false};  // dfcclCommAbort was called (a destroy after it is refused)
  // DFCCL_HIERARCHY: the communicators of the hierarchical all-reduce's stages (hierarchy.h), made at init, owned by
  // this one and sharing its fate; null where it has none.
  struct Hierarchy {
    dfcclComm* intra = nullptr;  // this host's ranks
    dfcclComm* inter = nullptr;  // the ranks of this rank's local rank, one per host
    int local_size = 0, local_rank = 0;
    // In a stage communicator: the one it serves and the rank there of each of its ranks (its failures are that
    // one's, named in its ranks).
    std::atomic<dfcclComm*> parent{nullptr};  // set after parent_rank, once the stage communicators exist
    std::vector<int> parent_rank;
  } hierarchy;
};

struct dfcclPersistent {
  static constexpr uint32_t kMagic = 0xdfcc0f01u;
  uint32_t magic = kMagic;
  dfcclComm* comm = nullptr;
  dfccl::core::Desc desc{};
  int id = -1;
};

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
// True once the receiver of every slot sent through connection s (a communicator's ring, or one point-to-point
// connection's sending side) has returned its credit: the heads in s.self equal the lane states' sent counts.
bool credits_returned(Executor& ex, const core::CommStatic& s);
// Caller: a call that found comm no longer alive. Throws the failure that ended it (as check_comm in api.cpp does),
// or dfcclInvalidUsage when the application destroyed or aborted it.
[[noreturn]] void throw_comm_ended(const dfcclComm* comm);
// The communicator's engine, kept alive for the caller's use; null once released (aborted or destroyed).
std::shared_ptr<Engine> engine_ref(dfcclComm* comm);
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
