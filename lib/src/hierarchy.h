// The hierarchical all-reduce across hosts (DFCCL_HIERARCHY=1; docs/net-transport.md, "Hierarchical all-reduce"). A
// communicator of H >= 2 hosts with the same L >= 2 ranks on each, host after host, runs an all-reduce of a multiple
// of L elements as three stages chained in the daemon (Desc::after): a reduce-scatter among the host's ranks, an
// all-reduce of each rank's share among the ranks of its local rank (L rings between the hosts at once), and an
// all-gather among the host's ranks. A host then sends 2(H-1)/H of the data over the network instead of the ring's
// 2(N-1)/N. The stages run on two communicators split from this one at init, which share its fate.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/types.h"
#include "engine.h"

struct dfcclComm;

namespace dfccl {

// Caller: comm_init, once c is connected (hosts[r]: rank r's host, alike on every rank). With DFCCL_HIERARCHY=1 and
// hosts laid out as above, splits c into its stage communicators (c->hierarchy; every rank of c splits, deciding
// alike); else does nothing.
void hierarchy_init(dfcclComm* c, const std::vector<uint64_t>& hosts);
// Caller: comm_destroy, before c's own teardown: destroys the stage communicators. When one cannot be destroyed in
// time, c is aborted and its dfcclTimeout is thrown.
void hierarchy_destroy(dfcclComm* c);
// Whether all-reduce d of c runs as the stages: c has them, the count is a positive multiple of L and the operator is
// not an average (whose two divisions would round differently from the ring's one).
bool hierarchy_routes(const dfcclComm* c, const core::Desc& d);
// Queues all-reduce d of c: a marker on c (count 0, posted with d's signature: its place in c's order, so that ranks
// that call something else there are told apart) and the three chained stages. Returns their compound request.
std::shared_ptr<RequestState> hierarchy_submit(dfcclComm* c, const core::Desc& d, cudaStream_t stream);

}  // namespace dfccl
