// Point-to-point connections of a communicator (send/recv and all-to-all; core: collectives/sendrecv.h).
//
// The connection of ranks r and q (q == r: a rank with itself) is a slice of r's memory and a slice of q's, of one
// geometry: r's slice receives what q sends to r (slots, LL lines, tail) and holds the credits (head) for what r
// sends to q. A connection has two lanes (kP2pUser: dfcclSend/dfcclRecv; kP2pAllToAll: all-to-alls), each a FIFO of
// nslots slots per channel, and each direction of a lane keeps its own private lane state (turn and position), so
// that a rank's send to itself and its receive from itself take turns independently. With DFCCL_GRAPHS=1 (on one
// host) it has two more, kP2pLanes + those two, for transfers captured into CUDA graphs (comm/comm_graph.h), whose
// turns each replay takes on the device from P2pConnections::graph_turns.
//
// Where the slices come from (docs/design.md, "Point-to-point"):
//  - Every rank allocates one arena at init and maps every peer's: after init no transfer needs a CUDA call.
//  - On one host, a connection is carved out of the two arenas the first time either rank submits a transfer with
//    the other (p2p_claim): host bookkeeping in the bootstrap segment under a lock held for a few loads and stores,
//    with no CUDA call and no wait for the peer, so it cannot wait in a cycle (DESIGN section 5). The peer finds the
//    carved connection there at its own first transfer.
//  - Sizes: a claim for k connections at once (an all-to-all's new peers, or one send/recv peer) gives each an equal
//    share of what both arenas have left after keeping the smallest connection for each of their other ranks not
//    yet connected. A connection takes up to DFCCL_P2P_CHANNELS channels of the configured slots; where those do
//    not give it 4 channels, slots of half and a quarter the size (not below 32 KiB) first, then fewer channels. A
//    pipeline's first peers get full connections, an all-to-all's peers equal ones, and every rank can always be
//    connected.
//  - A communicator with network connections carves every connection at init with DFCCL_P2P_CHANNELS channels (the
//    proxies' hops are made at init), its arena holding nranks of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/region.h"

struct dfcclComm;

namespace dfccl {

// Caller: comm_init, every rank together, after the ring's regions (bootstrap rounds). Allocates this rank's arena
// and maps every peer's through the communicator's transport (c->transport), and fills c->p2p.
void p2p_connect(dfcclComm* c);
// Caller: a submission, under c->mu, before it reads p2p_static for these peers. Connects this rank with each of
// them that it is not connected with yet: carves the connections no peer has carved (see above), reads the others.
// Throws dfcclTimeout naming the rank that holds the segment's lock past the init timeout (a process that died
// inside its claim).
void p2p_claim(dfcclComm* c, const std::vector<int>& peers);
// True once every connected peer still in the communicator has consumed every slot this rank sent it (destroy: no
// peer writes into the region after). A send that its peer never receives keeps it false until that peer leaves.
bool p2p_caught_up(dfcclComm* c);
// Bytes of a connection of nchan channels of nlanes lanes of slot_bytes slots (rounded to 4 KiB), of the smallest
// connection (one channel of the smallest slots a connection takes), and of the arena of a rank of nranks: at init
// with network connections, nranks full connections; else max(arena_bytes, nranks smallest connections).
uint64_t p2p_conn_bytes(uint32_t nchan, uint32_t nlanes, uint32_t nslots, uint32_t slot_bytes);
uint64_t p2p_min_conn_bytes(uint32_t nlanes, uint32_t nslots, uint32_t slot_bytes);
uint64_t p2p_arena_bytes(uint32_t nchan, uint32_t nlanes, uint32_t nslots, uint32_t slot_bytes, int nranks,
                         uint64_t arena_bytes, bool all_at_init);
// Connections of this rank carved so far (dfcclCommGetInfo).
int p2p_connections(const dfcclComm* c);
// One line for dfcclDebugDump: this rank's arena and each connection's shape, e.g. "rank 0 of 4: point-to-point
// arena 16.0 MiB, connected with 1 (8 x 128 KiB), 3 (5 x 128 KiB)". Does not wait for a submission that holds the
// communicator's lock (says so instead).
std::string p2p_describe(dfcclComm* c);

}  // namespace dfccl
