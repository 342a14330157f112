#include "p2p.h"

#include "comm.h"

namespace dfccl {

uint64_t p2p_region_bytes(uint32_t nchan, uint32_t nslots, uint32_t slot_bytes, int nranks) {
  if (nchan == 0) return 0;
  const uint64_t conn = core::region_bytes(nchan, kP2pLanes, nslots, slot_bytes);
  return core::round_up(conn, uint64_t(4096)) * uint64_t(nranks);
}

void p2p_connect(dfcclComm* c, bool host_memory) {
  Engine& e = *c->engine;
  Executor& ex = e.exec();
  const TransportParams& tp = e.transport();
  const TransportParams& g = c->geometry;  // the connections' shape (the lane states cover every engine block)
  P2pConnections& p = c->p2p;
  p.nchan = g.p2p_chan;
  if (p.nchan == 0) return;  // every rank agrees (check_agreement)
  const int n = c->nranks;
  p.conn_bytes = p2p_region_bytes(p.nchan, g.nslots, g.slot_bytes, n) / uint64_t(n);
  p.region = ex.alloc_region(p.conn_bytes * uint64_t(n), host_memory);
  p.blobs.resize(size_t(n));
  c->bootstrap->allgather(&p.region, sizeof(RegionBlob), p.blobs.data());
  // peer[q]: q's connection for this rank, mapped (a remote q's: a shadow, net/links.h).
  p.mapped.assign(size_t(n), nullptr);
  std::vector<char*> peer(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    if (c->net.remote[size_t(q)]) {
      peer[size_t(q)] = static_cast<char*>(net_shadow(c, p.conn_bytes, false));
      continue;
    }
    p.mapped[size_t(q)] = q == c->rank ? reinterpret_cast<void*>(p.region.ptr) : ex.map_region(p.blobs[size_t(q)]);
    peer[size_t(q)] = static_cast<char*>(p.mapped[size_t(q)]) + uint64_t(c->rank) * p.conn_bytes;
  }
  c->bootstrap->barrier();
  ex.region_mapped_by_all(p.region);

  // Lane states for every engine block (a descriptor's blocks past its channels still take their turn).
  const size_t per_direction = size_t(tp.nchan) * kP2pLanes;
  p.lanes = static_cast<core::LaneState*>(ex.alloc_device(sizeof(core::LaneState) * per_direction * 2 * size_t(n)));
  p.cs.resize(2 * size_t(n));
  char* mine = reinterpret_cast<char*>(p.region.ptr);
  for (int q = 0; q < n; ++q) {
    for (int dir = 0; dir < 2; ++dir) {
      core::CommStatic& s = p.cs[size_t(q) * 2 + size_t(dir)];
      s.rank = c->rank;
      s.nranks = n;
      s.prev = s.next = q;
      s.nchan = p.nchan;
      s.nlanes = kP2pLanes;
      s.nslots = g.nslots;
      s.slot_bytes = g.slot_bytes;
      s.self = mine + uint64_t(q) * p.conn_bytes;
      s.next_region = s.prev_region = peer[size_t(q)];
      s.lanes = p.lanes + (size_t(q) * 2 + size_t(dir)) * per_direction;
    }
  }
  p.next.assign(size_t(kP2pLanes) * 2 * size_t(n), 0);
}

const core::CommStatic& p2p_static(const dfcclComm* c, int peer, int direction) {
  return c->p2p.cs[size_t(peer) * 2 + size_t(direction)];
}

bool p2p_caught_up(dfcclComm* c) {
  const P2pConnections& p = c->p2p;
  if (p.nchan == 0) return true;
  for (int q = 0; q < c->nranks; ++q) {
    if (q != c->rank && c->bootstrap->peer_state(q) == Bootstrap::kLeft) continue;  // it writes no more credits
    if (!credits_returned(c->engine->exec(), p2p_static(c, q, 0))) return false;    // heads: q's credits for my sends
  }
  return true;
}

}  // namespace dfccl
