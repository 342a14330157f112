// The choice of a communicator's intra-host transport (transport.h).
#include "transport/transport.h"

#include <fmt/format.h>

#include "executor/executor.h"
#include "util/error.h"

namespace dfccl {

namespace {

// The transports of ex's executor, best first; the last reaches every rank of the host.
std::vector<std::shared_ptr<Transport>> candidates(Executor& ex) {
  if (ex.kind() == dfcclExecutorHost) return {make_shared_memory_transport(ex)};
  return {make_peer_memory_transport(ex), make_host_memory_transport(ex)};
}

}  // namespace

uint32_t transport_offer(Executor& ex, const std::vector<int>& peer_devices, const TransportNeeds& needs) {
  const std::vector<std::shared_ptr<Transport>> all = candidates(ex);
  uint32_t offer = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    Transport& t = *all[i];
    bool ok = (!needs.host_memory || t.in_host_memory()) && (needs.peer_memory || t.kind() != dfcclTransportPeerMemory);
    for (size_t k = 0; ok && k < peer_devices.size(); ++k) ok = t.can_connect(peer_devices[k]);
    if (ok) offer |= 1u << i;
  }
  return offer;
}

std::shared_ptr<Transport> choose_transport(Executor& ex, const std::vector<uint32_t>& offers) {
  uint32_t common = ~0u;
  for (uint32_t o : offers) common &= o;
  const std::vector<std::shared_ptr<Transport>> all = candidates(ex);
  for (size_t i = 0; i < all.size(); ++i)
    if (common & (1u << i)) return all[i];
  throw Error(dfcclInternalError, fmt::format("communicator init: no transport is offered by every rank (the {} "
                                              "ranks' offers have no bit in common)",
                                              offers.size()));
}

}  // namespace dfccl
