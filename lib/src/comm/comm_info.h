// What dfcclCommGetInfo reports of a communicator: its shape, transports and the memory its connections take.
#pragma once

#include "comm/comm_state.h"
#include "dfccl.h"

namespace dfccl {

// Caller: dfcclCommGetInfo, for a live communicator and its engine (held by the caller).
dfcclCommInfo_t comm_info(const dfcclComm* c, Engine& e);

}  // namespace dfccl
