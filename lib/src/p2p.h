// Point-to-point connections of a communicator (send/recv and all-to-all; core: collectives/sendrecv.h).
//
// Each rank owns one region of nranks connections; connection q of rank r's region receives what rank q sends to r
// (slots, LL lines, tail) and holds the credits (head) for what r sends to q. Every rank maps every peer's region at
// init: after init no transfer needs a CUDA call (docs/design.md, "Point-to-point"). A connection has two lanes
// (kP2pUser: dfcclSend/dfcclRecv; kP2pAllToAll: all-to-alls), each a FIFO of nslots slots per channel, and each
// direction of a lane keeps its own private lane state (turn and position), so that a rank's send to itself and its
// receive from itself take turns independently.
#pragma once

#include <cstdint>
#include <vector>

#include "core/region.h"
#include "executor.h"

struct dfcclComm;

namespace dfccl {

struct P2pConnections {
  uint32_t nchan = 0;                // channels per connection (0: no point-to-point)
  uint64_t conn_bytes = 0;           // one connection's share of a region
  RegionBlob region{};               // mine: nranks connections
  std::vector<RegionBlob> blobs;     // every rank's region
  std::vector<void*> mapped;         // every rank's region as mapped here (mine: region.ptr)
  core::LaneState* lanes = nullptr;  // [peer][direction][engine blocks][lanes], device memory
  std::vector<core::CommStatic> cs;  // [peer * 2 + direction]: what a Send (0) or Recv (1) descriptor carries
  std::vector<uint64_t> next;        // [(lane * 2 + direction) * nranks + peer]: the next transfer's key
};

// Caller: comm_init, every rank together, after the ring's regions (bootstrap rounds). Allocates this rank's region,
// maps every peer's, and fills c->p2p. host_memory: regions in shared host memory (as the ring's).
void p2p_connect(dfcclComm* c, bool host_memory);
// The descriptor fixed part for a transfer with `peer` in one direction (0: send, 1: receive).
const core::CommStatic& p2p_static(const dfcclComm* c, int peer, int direction);
// True once every peer still in the communicator has consumed every slot this rank sent it (destroy: no peer writes
// into the region after). A send that its peer never receives keeps it false until that peer leaves.
bool p2p_caught_up(dfcclComm* c);
// This rank's point-to-point memory for one communicator: the region, at the engine's transport parameters.
uint64_t p2p_region_bytes(uint32_t nchan, uint32_t nslots, uint32_t slot_bytes, int nranks);

}  // namespace dfccl
