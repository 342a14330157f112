// The connections of a communicator that go through the network (net/proxy.h): which ranks are remote, the shadow
// regions that stand for their connections on this host, and the hops handed to the engine's proxy.
//
// A rank is remote when its host id differs from this rank's (bootstrap.h, host_id; DFCCL_HOSTID overrides it) or, with
// DFCCL_NET_FORCE=1, whenever it is another rank. A communicator with a remote rank keeps all its regions in host
// memory (the proxy writes them; the CUDA executor maps them for the GPU), and its daemon writes into a shadow where
// it would write into a remote rank's mapped region.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine_config.h"
#include "net/proxy.h"

struct dfcclComm;

namespace dfccl {

// Caller: comm_init, once every rank's host hash is known. Fills c->net.remote; throws dfcclNotSupported when a rank
// is remote and the library has no network transport.
void net_plan(dfcclComm* c, const std::vector<uint64_t>& host_hashes);
// The connections' shape of c: the engine's transport, or, when some rank is remote, at most DFCCL_NET_CHANNELS
// channels (point-to-point ones too) of DFCCL_NET_SLOT_BYTES slots: their regions and shadows are pinned host memory,
// and each slot is one network message. Caller: comm_init, after net_plan.
TransportParams net_geometry(const dfcclComm* c, const TransportParams& engine);
// A zero-filled region of `bytes` in host memory (mapped for the GPU on the CUDA executor) that the daemon writes as
// the connection region of a remote rank (ring: for the ring, else for a point-to-point connection).
void* net_shadow(dfcclComm* c, uint64_t bytes, bool ring);
// Caller: comm_init, every rank together, after the ring's and the point-to-point regions exist: exchanges proxy
// addresses and hop ids through the bootstrap and hands this rank's hops to the engine's proxies. The communicator
// uses n = the smallest number of proxies among its ranks (DFCCL_NET_THREADS); channel c of every connection goes
// from the sender's proxy c % n to the receiver's proxy c % n. The first round also carries each rank's reserved hop
// id (c->net.endpoints), so that the communicator's own messages need no round of their own.
void net_connect(dfcclComm* c);
// Caller: release. Stops the communicator's hops (bounded); true when the proxy no longer uses its regions.
bool net_detach(dfcclComm* c);
// "" or why the communicator's network connections failed, with *rank the peer it names.
std::string net_failure(const dfcclComm* c, int* rank);
// Caller: the application's abort of c, before release. Tells every rank that c's hops reach that this rank aborted
// (queued; does not wait).
void net_tell_aborted(dfcclComm* c);
// Caller: c's failure caused by rank `origin` (once; cause: a Bootstrap::Cause). Tells every rank that c's hops
// reach that `origin` broke c, and how, so that ranks with no connection to it learn of it too, and a rank that sees
// this one go blames `origin` (queued; does not wait).
void net_tell_failed(dfcclComm* c, int origin, uint32_t cause = 0);
// The notices that came to c's hops, the first of each remote rank: one that aborted c (origin -1), or that told
// which rank broke it.
std::vector<net::Proxy::Notice> net_notices(const dfcclComm* c);

}  // namespace dfccl
