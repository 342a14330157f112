#include "links.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "../comm.h"
#include "../env.h"
#include "../error.h"
#include "../log.h"

namespace dfccl {

namespace {

// What each rank publishes in the first round: its engine proxy's address.
struct AddressInfo {
  uint64_t engine;  // Proxy::engine_id
  uint32_t bytes;
  std::byte address[Bootstrap::kSlotBytes - 12];
};

// The hop ids of this rank's side of every connection, in the second round: ring receive and send, then for each
// rank q the point-to-point receive and send (0 where the connection is not remote).
struct HopIds {
  std::vector<uint32_t> ids;
  explicit HopIds(int nranks) : ids(2 + 2 * size_t(nranks), 0) {}
  uint32_t& ring(bool send) { return ids[send ? 1 : 0]; }
  uint32_t& p2p(int q, bool send) { return ids[2 + 2 * size_t(q) + (send ? 1 : 0)]; }
};

net::HopSpec hop(dfcclComm* c, int peer, bool send, char* self, char* shadow, const core::CommStatic& geo,
                 uint32_t my_id, const std::vector<AddressInfo>& addrs) {
  net::HopSpec s;
  s.send = send;
  s.self = self;
  s.shadow = shadow;
  s.nchan = geo.nchan;
  s.nlanes = geo.nlanes;
  s.nslots = geo.nslots;
  s.slot_bytes = geo.slot_bytes;
  s.my_id = my_id;
  s.peer_rank = peer;
  s.peer_name = fmt::format("rank {} of {}", peer, c->nranks);
  const AddressInfo& a = addrs[size_t(peer)];
  s.peer_address.assign(a.address, a.address + a.bytes);
  s.peer_engine = a.engine;
  return s;
}

}  // namespace

void net_plan(dfcclComm* c, const std::vector<uint64_t>& host_hashes) {
  const bool force = env_int("DFCCL_NET_FORCE") != 0;
  NetLinks& n = c->net;
  n.remote.assign(host_hashes.size(), 0);
  for (size_t q = 0; q < host_hashes.size(); ++q) {
    for (size_t r = 0; r < host_hashes.size(); ++r) n.any = n.any || host_hashes[q] != host_hashes[r];
    n.remote[q] = int(q) != c->rank && (force || host_hashes[q] != host_hashes[size_t(c->rank)]);
  }
  n.any = n.any || (force && c->nranks > 1);
  if (n.any && !net::transport_available())
    throw Error(dfcclNotSupported,
                fmt::format("communicator init: its ranks span several hosts{} but this library was built without "
                            "a network transport ({})",
                            force ? " (DFCCL_NET_FORCE=1)" : "", net::transport_description()));
}

TransportParams net_geometry(const dfcclComm* c, const TransportParams& engine) {
  TransportParams g = engine;
  if (!c->net.any) return g;
  g.nchan = std::min(engine.nchan, uint32_t(env_int("DFCCL_NET_CHANNELS")));
  g.p2p_chan = std::min(engine.p2p_chan, g.nchan);
  g.slot_bytes = uint32_t(env_int("DFCCL_NET_SLOT_BYTES"));
  if (g.slot_bytes % 16 != 0)
    throw Error(dfcclInvalidArgument, fmt::format("DFCCL_NET_SLOT_BYTES={} is not a multiple of 16", g.slot_bytes));
  return g;
}

void* net_shadow(dfcclComm* c, uint64_t bytes, bool ring) {
  Executor& ex = c->engine->exec();
  RegionBlob blob = ex.alloc_region(bytes, true);
  c->net.shadows.push_back(blob);
  c->net.shadow_bytes[ring ? 0 : 1] += bytes;
  ex.region_mapped_by_all(blob);  // nobody else maps it: its name can go
  return reinterpret_cast<void*>(blob.ptr);
}

void net_connect(dfcclComm* c) {
  NetLinks& n = c->net;
  if (!n.any) return;
  n.proxy = c->engine->net_proxy();
  const int me = c->rank, nr = c->nranks;
  const int next = (me + 1) % nr, prev = (me - 1 + nr) % nr;

  auto mine = std::make_unique<AddressInfo>();
  const auto& address = n.proxy->address();
  if (address.size() > sizeof(mine->address))
    throw Error(dfcclInternalError, fmt::format("the network address has {} bytes; at most {} fit the bootstrap",
                                                address.size(), sizeof(mine->address)));
  mine->engine = n.proxy->engine_id();
  mine->bytes = uint32_t(address.size());
  std::memcpy(mine->address, address.data(), address.size());
  std::vector<AddressInfo> addrs(static_cast<size_t>(nr));
  c->bootstrap->allgather(mine.get(), sizeof(AddressInfo), addrs.data());

  HopIds ids(nr);
  const bool p2p = c->p2p.nchan > 0;
  if (n.remote[size_t(next)]) ids.ring(true) = n.proxy->new_hop_id();
  if (n.remote[size_t(prev)]) ids.ring(false) = n.proxy->new_hop_id();
  for (int q = 0; q < nr && p2p; ++q) {
    if (!n.remote[size_t(q)]) continue;
    ids.p2p(q, true) = n.proxy->new_hop_id();
    ids.p2p(q, false) = n.proxy->new_hop_id();
  }
  const size_t id_bytes = ids.ids.size() * sizeof(uint32_t);
  if (id_bytes > Bootstrap::kSlotBytes)
    throw Error(dfcclNotSupported, fmt::format("communicator init: network connections support at most {} ranks",
                                               Bootstrap::kSlotBytes / 8 - 1));
  std::vector<uint32_t> all(ids.ids.size() * size_t(nr));
  c->bootstrap->allgather(ids.ids.data(), id_bytes, all.data());
  auto theirs = [&](int q, size_t index) { return all[size_t(q) * ids.ids.size() + index]; };

  std::vector<net::HopSpec> hops;
  const core::CommStatic& ring = c->host_dev.s;
  char* self = reinterpret_cast<char*>(c->region.ptr);
  if (n.remote[size_t(next)]) {
    hops.push_back(hop(c, next, true, self, static_cast<char*>(c->next_ptr), ring, ids.ring(true), addrs));
    hops.back().their_id = theirs(next, 0);  // next's ring receive
  }
  if (n.remote[size_t(prev)]) {
    hops.push_back(hop(c, prev, false, self, static_cast<char*>(c->prev_ptr), ring, ids.ring(false), addrs));
    hops.back().their_id = theirs(prev, 1);  // prev's ring send
  }
  for (int q = 0; q < nr && p2p; ++q) {
    if (!n.remote[size_t(q)]) continue;
    const core::CommStatic& s = p2p_static(c, q, 0);
    hops.push_back(hop(c, q, true, s.self, s.next_region, s, ids.p2p(q, true), addrs));
    hops.back().their_id = theirs(q, 2 + 2 * size_t(me));  // q's receive from me
    hops.push_back(hop(c, q, false, s.self, s.prev_region, s, ids.p2p(q, false), addrs));
    hops.back().their_id = theirs(q, 2 + 2 * size_t(me) + 1);  // q's send to me
  }
  const size_t count = hops.size();
  if (!hops.empty()) n.key = n.proxy->attach(std::move(hops));
  log(LogLevel::Info, LogSubsys::Init, "rank {} of {}: {} network hops through the engine's proxy", me, nr, count);
}

bool net_detach(dfcclComm* c) {
  NetLinks& n = c->net;
  if (!n.proxy || n.key == 0) return true;
  // Receives end at once when cancelled; a send ends only when its peer receives it, which an aborted peer never
  // does: the wait is short, and the regions of a send left pending stay with the engine.
  const bool gone = n.proxy->detach(n.key, std::chrono::milliseconds(200));
  if (gone) n.key = 0;
  return gone;
}

std::string net_failure(const dfcclComm* c, int* rank) {
  const NetLinks& n = c->net;
  return n.proxy && n.key ? n.proxy->failure(n.key, rank) : std::string();
}

void net_tell_aborted(dfcclComm* c) {
  const NetLinks& n = c->net;
  if (n.proxy && n.key) n.proxy->tell_aborted(n.key);
}

int net_aborted_peer(const dfcclComm* c) {
  const NetLinks& n = c->net;
  return n.proxy && n.key ? n.proxy->aborted_peer(n.key) : -1;
}

}  // namespace dfccl
