// The communicator's state (struct dfcclComm) and the state of its connections, which the subsystems that serve a
// communicator read and write, with the accessors that only read it (comm_state.cpp). Every subsystem can
// include it without including the others; comm.h declares the communicator's functions.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/region.h"
#include "core/types.h"
#include "dfccl.h"
#include "engine/engine_config.h"
#include "settings/settings.h"
#include "transport/transport.h"

namespace dfccl {

class Bootstrap;
class Engine;
class MatchBoard;
class ShrinkListener;  // comm/shrink_net.h
struct BoardMirror;  // board_mirror.cpp
namespace net {
class Proxy;
}

// Point-to-point connections to every rank (p2p.h).
struct P2pConnections {
  uint32_t nchan = 0;                // channels of a full connection (DFCCL_P2P_CHANNELS; 0: no point-to-point)
  uint32_t nlanes = 0;               // lanes of a connection: kP2pLanes, or kP2pGraphLanes with captured ones
  bool on_first_use = false;         // connections carved by p2p_claim (false: all at init)
  RegionBlob region{};               // mine: the arena
  std::vector<RegionBlob> blobs;     // every rank's arena
  std::vector<void*> mapped;         // every rank's arena as mapped here (mine: region.ptr)
  core::LaneState* lanes = nullptr;  // [peer][direction][engine blocks][lanes], device memory
  std::vector<uint8_t> connected;    // [peer]: cs[peer * 2 + 0 .. 1] are filled (under the communicator's mu)
  int connections = 0;               // how many are (atomic accesses: dfcclCommGetInfo reads it without the lock)
  std::vector<core::CommStatic> cs;  // [peer * 2 + direction]: what a Send (0) or Recv (1) descriptor carries
  std::vector<uint64_t> next;        // [(lane * 2 + direction) * nranks + peer]: the next transfer's key
  // Captured transfers (comm/comm_graph.h), indexed as `next` by their eager lane: the turns their replays took on
  // the captured lane (device memory, after the lane states; null without captured lanes), and the transfers
  // captured so far (the board's keys at capture, under the communicator's mu).
  uint64_t* graph_turns = nullptr;
  std::vector<uint64_t> graph_keys;
};
// The lanes of persistent collectives (persistent.h).
struct PersistentLane {
  RegionBlob mine{};  // this rank's lane region (allocated by the first prepare)
  RegionBlob next_blob{}, prev_blob{};
  void* next = nullptr;  // the neighbours' lane regions as mapped here (the first start)
  void* prev = nullptr;
  core::LaneState* lanes = nullptr;  // [engine blocks], device memory
  core::CommStatic cs{};             // what the id's descriptors carry, once mapped
  std::atomic<bool> mapped{false};
};

struct PersistentLanes {
  std::mutex mu;                                // the first prepare and the first start of an id
  PersistentLane lane[dfccl::core::kOwnLanes];  // the persistent ids, then the graph lane (core::kGraphLaneId)
};
// The connections through the network (comm/links.h).
// A rank's first network proxy as net_connect's first round published it, and the hop id that rank reserved in it
// for the communicator's messages outside its hops (the match board's: board_mirror.h). The net layer only reserves
// and publishes the id; what travels under it is the caller's.
struct NetEndpoint {
  std::vector<std::byte> address;  // the proxy's transport address
  uint64_t engine = 0;             // its engine_id()
  uint32_t reserved_id = 0;
};

struct NetLinks {
  std::vector<uint8_t> remote;      // [rank]: reached through the network
  std::vector<RegionBlob> shadows;  // allocated by this rank, freed with the communicator
  uint64_t shadow_bytes[2] = {};    // their sizes: the ring's, the point-to-point connections'
  // The engine's proxies that carry the communicator's channels (channel c: proxies[c % size]), and the key of its
  // hops in each (0: none attached).
  std::vector<std::shared_ptr<net::Proxy>> proxies;
  std::vector<uint64_t> keys;
  std::vector<NetEndpoint> endpoints;  // [rank], set by net_connect (empty when no rank is remote)
  bool any = false;                    // some rank is remote
};
}  // namespace dfccl

// A communicator; the application holds it through a handle (api/comm_handles.h), which keeps it alive.
struct dfcclComm {
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
  // The DFCCL_* settings read at init: abort and destroy use these and never read the environment.
  dfccl::CommSettings settings{};
  int rank = 0, nranks = 0;
  // Where its connection regions live, chosen at init (transport/transport.h); every region and mapping of the
  // communicator is made and released by it. Null before the choice and after release.
  std::shared_ptr<dfccl::Transport> transport;
  uint32_t index = ~0u;  // in the engine's communicator table
  dfccl::core::CommDev host_dev{};
  dfccl::core::CommDev* dev = nullptr;
  dfccl::core::LaneState* lanes = nullptr;
  dfccl::RegionBlob region{}, next_blob{}, prev_blob{};
  void* next_ptr = nullptr;
  void* prev_ptr = nullptr;
  uint64_t next_key = 0;
  uint64_t graph_keys = 0;             // collectives captured so far: the graph lane's board keys (comm/comm_graph.h)
  bool graph_ready = false;            // DFCCL_GRAPHS=1: the graph lane was made at init, with
  dfccl::core::CommStatic graph_cs{};  // its connection (what a captured descriptor carries)
  uint32_t graph_lane = 0;             // and its lane number (the match board's key)
  dfccl::P2pConnections p2p;           // point-to-point connections to every rank (p2p.h)
  dfccl::NetLinks net;                 // the connections through the network (comm/links.h)
  // The connections' shape: the engine's transport, or, with network connections, their own (net_geometry).
  dfccl::TransportParams geometry{};
  uint32_t persistent_lanes = 0;      // DFCCL_PERSISTENT_LANES at init: ids 0 .. persistent_lanes - 1
  dfccl::PersistentLanes persistent;  // their lanes, made on first use (persistent.h)
  uint64_t persistent_turn[DFCCL_MAX_PERSISTENT_IDS] = {};
  bool persistent_prepared[DFCCL_MAX_PERSISTENT_IDS] = {};
  std::atomic<int> async_error{dfcclSuccess};
  // A failure that ended the communicator without the application's abort: a peer that died, aborted or fell silent
  // (dfcclRemoteError) or collectives that disagree between ranks (dfcclInvalidUsage); `failure` names the rank or
  // the field and is written before `fail_code`.
  std::atomic<bool> fail_claimed{false};  // the first failure claims it (comm_failure.cpp, fail_once)
  std::atomic<int> fail_code{dfcclSuccess};
  std::string failure;
  std::atomic<int> failed_rank{-1};  // dfcclRemoteError: the rank its failure named (the shrink's proposal)
  // What a shrink needs after a failure released the bootstrap (comm/comm_shrink.h): the id's token, whether every
  // rank shares this host's segment, and the shrinks of this communicator so far (each derives its own ids).
  uint64_t token = 0;
  bool one_host = false;
  uint32_t shrinks = 0;
  // The shrink's socket and every rank's address (comm/shrink_net.h), when the connections use the network
  // (ranks on several hosts, or DFCCL_NET_FORCE=1); null otherwise. Kept until the handle goes.
  std::shared_ptr<dfccl::ShrinkListener> shrink_listener;
  std::atomic<bool> user_aborted{false};  // dfcclCommAbort was called (a destroy after it is refused)
  std::atomic<bool> destroyed{false};     // dfcclCommDestroy was called (a second one is refused)
  // DFCCL_HIERARCHY: the communicators of the hierarchical all-reduce's stages (comm_submit.h), made at init, owned by
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
  dfcclComm_t comm = nullptr;  // its communicator's handle (a stale one is refused)
  dfccl::core::Desc desc{};
  int id = -1;
};

namespace dfccl {

// Caller: a call that found comm no longer alive. Throws the failure that ended it (as check_comm in api.cpp does),
// or dfcclInvalidUsage when the application destroyed or aborted it.
[[noreturn]] void throw_comm_ended(const dfcclComm* comm);
// The communicator's engine, kept alive for the caller's use; null once released (aborted or destroyed).
std::shared_ptr<Engine> engine_ref(dfcclComm* comm);
// The descriptor fixed part for a transfer with `peer` in one direction (0: send, 1: receive); peer connected.
const core::CommStatic& p2p_static(const dfcclComm* c, int peer, int direction);

}  // namespace dfccl
