// Communicator init over the bootstrap: agreement on the transport, exchange and mapping of connection regions, the
// peer watch, and split; with DFCCL_HIERARCHY, the stage communicators (comm_submit.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/comm_state.h"

namespace dfccl {

// Fills every -1 field of a config from the environment and defaults; rank picks the host executor's device.
dfcclConfig_t resolve_config(const dfcclConfig_t* config, int rank);

// gone: set on the bootstrap (Bootstrap::set_watch) so that its rounds fail fast on a rank that went (the shrink's
// init of the survivors); empty: rounds wait for every rank until the init timeout. root_gone: the bootstrap's
// (the shrink's across hosts: its coordinator, which hosts the id's root, went).
dfcclComm* comm_init(int nranks, const dfcclUniqueId& id, int rank, const dfcclConfig_t& resolved,
                     std::function<std::string(int)> gone = {}, const std::function<std::string()>& root_gone = {});
dfcclComm* comm_split(dfcclComm* parent, int color, int key, const dfcclConfig_t* config);
// Caller: comm_init, once c is connected (hosts[r]: rank r's host, alike on every rank). With DFCCL_HIERARCHY=1 and
// hosts laid out as above, splits c into its stage communicators (c->hierarchy; every rank of c splits, deciding
// alike); else does nothing.
void hierarchy_init(dfcclComm* c, const std::vector<uint64_t>& hosts);

}  // namespace dfccl
