#include "comm/comm_info.h"

#include "comm/links.h"
#include "engine/engine.h"
#include "match/match_board.h"
#include "transport/p2p.h"
#include "transport/persistent.h"
#include "transport/transport.h"

namespace dfccl {

namespace {

// The transport of c's ring hop to or from `peer` (a ring neighbour): the network for a remote rank, else the
// communicator's transport (transport/transport.h).
int hop_transport(const dfcclComm* c, int peer) {
  if (size_t(peer) < c->net.remote.size() && c->net.remote[size_t(peer)]) return dfcclTransportNetwork;
  return c->transport->kind();
}

}  // namespace

dfcclCommInfo_t comm_info(const dfcclComm* c, Engine& e) {
  const TransportParams& tp = e.transport();
  const core::CommStatic& s = c->host_dev.s;
  dfcclCommInfo_t out{};
  out.executor = c->config.executor;
  out.mode = c->config.mode;
  out.device = c->config.device;
  out.nranks = c->nranks;
  out.rank = c->rank;
  out.prev = s.prev;
  out.next = s.next;
  out.blocks = int(tp.nchan);
  out.threadsPerBlock = int(e.exec().threads_per_block());
  out.slots = int(tp.nslots);
  out.lanes = int(tp.seq_lanes);
  out.persistentLanes = int(tp.persistent_lanes);
  out.slotBytes = c->geometry.slot_bytes;
  out.connectionBytes =
      c->region.bytes + sizeof(core::LaneState) * tp.nchan * s.nlanes + c->net.shadow_bytes[0] + persistent_bytes(c);
  out.p2pChannels = int(c->p2p.nchan);
  out.p2pConnections = p2p_connections(c);
  // Per peer and direction: the lane states, and the captured lanes' turn counters.
  const size_t per_peer_dir =
      sizeof(core::LaneState) * tp.nchan * c->p2p.nlanes + (c->p2p.graph_turns ? sizeof(uint64_t) * kP2pLanes : 0);
  out.p2pBytes =
      c->p2p.region.bytes + (c->p2p.nchan ? per_peer_dir * 2 * size_t(c->nranks) : 0) + c->net.shadow_bytes[1];
  out.hierarchyRanksPerHost = c->hierarchy.intra ? c->hierarchy.local_size : 0;
  out.transportPrev = hop_transport(c, s.prev);
  out.transportNext = hop_transport(c, s.next);
  const bool net = out.transportPrev == dfcclTransportNetwork || out.transportNext == dfcclTransportNetwork;
  out.transport = net ? dfcclTransportNetwork : out.transportNext;
  return out;
}

}  // namespace dfccl
