#include "comm/links.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "comm/comm_state.h"
#include "engine/engine.h"
#include "util/error.h"
#include "util/log.h"

namespace dfccl {

namespace {

// What each rank publishes for one of its engine's proxies, one round per proxy.
struct AddressInfo {
  uint64_t engine;    // Proxy::engine_id
  uint32_t nproxies;  // how many proxies the engine runs
  uint32_t bytes;
  uint32_t reserved_id;  // round 0: NetEndpoint::reserved_id
  uint32_t pad;
  std::byte address[Bootstrap::kSlotBytes - 24];
};

// The hop ids of this rank's side of every connection, in the second round: ring receive and send, then for each
// rank q the point-to-point receive and send (0 where the connection is not remote).
struct HopIds {
  std::vector<uint32_t> ids;
  explicit HopIds(int nranks) : ids(2 + 2 * size_t(nranks), 0) {}
  uint32_t& ring(bool send) { return ids[send ? 1 : 0]; }
  uint32_t& p2p(int q, bool send) { return ids[2 + 2 * size_t(q) + (send ? 1 : 0)]; }
};

// The ids of this rank's hops to remote ranks, from `first`'s counter (one counter for the engine's proxies).
HopIds new_hop_ids(const dfcclComm* c, net::Proxy& first) {
  const NetLinks& n = c->net;
  const int nr = c->nranks, next = (c->rank + 1) % nr, prev = (c->rank - 1 + nr) % nr;
  HopIds ids(nr);
  if (n.remote[size_t(next)]) ids.ring(true) = first.new_hop_id();
  if (n.remote[size_t(prev)]) ids.ring(false) = first.new_hop_id();
  for (int q = 0; q < nr && c->p2p.nchan > 0; ++q) {
    if (!n.remote[size_t(q)]) continue;
    ids.p2p(q, true) = first.new_hop_id();
    ids.p2p(q, false) = first.new_hop_id();
  }
  return ids;
}

// Every rank's AddressInfo of its proxy k, for k below the smallest number of proxies among the ranks: [k][rank].
// Round k publishes this engine's proxy k; round 0 also tells how many rounds there are, and carries reserved_id.
using Addresses = std::vector<std::vector<AddressInfo>>;

Addresses exchange_addresses(dfcclComm* c, const std::vector<std::shared_ptr<net::Proxy>>& proxies,
                             uint32_t reserved_id) {
  Addresses all;
  size_t rounds = proxies.size();
  for (size_t k = 0; k < rounds; ++k) {
    const net::Proxy& p = *proxies[k];
    auto mine = std::make_unique<AddressInfo>();
    const auto& address = p.address();
    if (address.size() > sizeof(mine->address))
      throw Error(dfcclInternalError, fmt::format("the network address has {} bytes; at most {} fit the bootstrap",
                                                  address.size(), sizeof(mine->address)));
    mine->engine = p.engine_id();
    mine->nproxies = uint32_t(proxies.size());
    mine->bytes = uint32_t(address.size());
    mine->reserved_id = k == 0 ? reserved_id : 0;
    std::memcpy(mine->address, address.data(), address.size());
    all.emplace_back(size_t(c->nranks));
    c->bootstrap->allgather(mine.get(), sizeof(AddressInfo), all.back().data());
    if (k == 0)
      for (const AddressInfo& a : all[0]) rounds = std::min<size_t>(rounds, a.nproxies);
  }
  return all;
}

// Every rank's first proxy and reserved id, from round 0.
std::vector<NetEndpoint> endpoints(const std::vector<AddressInfo>& round0) {
  std::vector<NetEndpoint> out;
  for (const AddressInfo& a : round0) out.push_back({{a.address, a.address + a.bytes}, a.engine, a.reserved_id});
  return out;
}

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
  const bool force = c->settings.net_force;
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
  g.nchan = std::min(engine.nchan, c->settings.net_channels);
  g.p2p_chan = std::min(engine.p2p_chan, g.nchan);
  g.slot_bytes = c->settings.net_slot_bytes;  // a multiple of 16 (CommSettings::read)
  return g;
}

void* net_shadow(dfcclComm* c, uint64_t bytes, bool ring) {
  Transport& t = *c->transport;  // its regions are in host memory (comm_init: TransportNeeds::host_memory)
  RegionBlob blob = t.alloc_region(bytes);
  c->net.shadows.push_back(blob);
  c->net.shadow_bytes[ring ? 0 : 1] += bytes;
  t.mapped_by_all(blob);  // nobody else maps it: its name can go
  return reinterpret_cast<void*>(blob.ptr);
}

void net_connect(dfcclComm* c) {
  NetLinks& n = c->net;
  if (!n.any) return;
  const int me = c->rank, nr = c->nranks;
  const int next = (me + 1) % nr, prev = (me - 1 + nr) % nr;
  n.proxies = c->engine->net_proxies();
  const Addresses addrs = exchange_addresses(c, n.proxies, n.proxies[0]->new_hop_id());
  n.proxies.resize(addrs.size());
  n.endpoints = endpoints(addrs[0]);
  const bool p2p = c->p2p.nchan > 0;
  HopIds ids = new_hop_ids(c, *n.proxies[0]);
  const size_t id_bytes = ids.ids.size() * sizeof(uint32_t);
  if (id_bytes > Bootstrap::kSlotBytes)
    throw Error(dfcclNotSupported, fmt::format("communicator init: network connections support at most {} ranks",
                                               Bootstrap::kSlotBytes / 8 - 1));
  std::vector<uint32_t> all(ids.ids.size() * size_t(nr));
  c->bootstrap->allgather(ids.ids.data(), id_bytes, all.data());
  auto theirs = [&](int q, size_t index) { return all[size_t(q) * ids.ids.size() + index]; };

  // One hop per (connection direction, proxy k) that carries channels k, k + n, ... of the connection.
  std::vector<std::vector<net::HopSpec>> hops(n.proxies.size());
  auto add = [&](int peer, bool send, char* self, char* shadow, const core::CommStatic& geo, uint32_t my_id,
                 uint32_t their_id) {
    for (size_t k = 0; k < hops.size() && k < geo.nchan; ++k) {
      net::HopSpec s = hop(c, peer, send, self, shadow, geo, my_id, addrs[k]);
      s.their_id = their_id;
      s.chan_first = uint32_t(k);
      s.chan_step = uint32_t(hops.size());
      hops[k].push_back(std::move(s));
    }
  };
  const core::CommStatic& ring = c->host_dev.s;
  char* self = reinterpret_cast<char*>(c->region.ptr);
  if (n.remote[size_t(next)])  // to next's ring receive
    add(next, true, self, static_cast<char*>(c->next_ptr), ring, ids.ring(true), theirs(next, 0));
  if (n.remote[size_t(prev)])  // from prev's ring send
    add(prev, false, self, static_cast<char*>(c->prev_ptr), ring, ids.ring(false), theirs(prev, 1));
  for (int q = 0; q < nr && p2p; ++q) {
    if (!n.remote[size_t(q)]) continue;
    const core::CommStatic& s = p2p_static(c, q, 0);
    add(q, true, s.self, s.next_region, s, ids.p2p(q, true), theirs(q, 2 + 2 * size_t(me)));  // q's receive from me
    add(q, false, s.self, s.prev_region, s, ids.p2p(q, false), theirs(q, 2 + 2 * size_t(me) + 1));  // q's send to me
  }
  size_t count = 0;
  n.keys.assign(n.proxies.size(), 0);
  for (size_t k = 0; k < hops.size(); ++k) {
    count += hops[k].size();
    if (!hops[k].empty()) n.keys[k] = n.proxies[k]->attach(std::move(hops[k]));
  }
  log(LogLevel::Info, LogSubsys::Init, "rank {} of {}: {} network hops through {} of the engine's proxies", me, nr,
      count, n.proxies.size());
}

bool net_detach(dfcclComm* c) {
  NetLinks& n = c->net;
  // Receives end at once when cancelled; a send ends only when its peer receives it, which an aborted peer never
  // does: the wait is short, and the regions of a send left pending stay with the engine.
  for (size_t k = 0; k < n.keys.size(); ++k)
    if (n.keys[k]) n.proxies[k]->begin_detach(n.keys[k]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  bool gone = true;
  for (size_t k = 0; k < n.keys.size(); ++k) {
    if (n.keys[k] && n.proxies[k]->wait_detached(n.keys[k], deadline)) n.keys[k] = 0;
    gone = gone && n.keys[k] == 0;
  }
  return gone;
}

std::string net_failure(const dfcclComm* c, int* rank) {
  const NetLinks& n = c->net;
  for (size_t k = 0; k < n.keys.size(); ++k) {
    std::string why = n.keys[k] ? n.proxies[k]->failure(n.keys[k], rank) : std::string();
    if (!why.empty()) return why;
  }
  return {};
}

void net_tell_aborted(dfcclComm* c) { net_tell_failed(c, -1); }

void net_tell_failed(dfcclComm* c, int origin, uint32_t cause) {
  const NetLinks& n = c->net;
  for (size_t k = 0; k < n.keys.size(); ++k)
    if (n.keys[k]) n.proxies[k]->tell(n.keys[k], origin, cause);
}

std::vector<net::Proxy::Notice> net_notices(const dfcclComm* c) {
  const NetLinks& n = c->net;
  std::vector<net::Proxy::Notice> all;
  for (size_t k = 0; k < n.keys.size(); ++k)
    if (n.keys[k])
      for (const net::Proxy::Notice& got : n.proxies[k]->notices(n.keys[k])) all.push_back(got);
  return all;
}

}  // namespace dfccl
