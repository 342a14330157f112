// Helpers on one connection (a communicator's ring, a point-to-point connection, a persistent lane), shared by
// the subsystems that own connections (comm_failure.cpp, p2p.cpp, persistent.cpp).
#pragma once

#include "core/types.h"
#include "executor/executor.h"

namespace dfccl {

// True once the receiver of every slot sent through connection s (a communicator's ring, or one point-to-point
// connection's sending side) has returned its credit: the heads in s.self equal the lane states' sent counts.
bool credits_returned(Executor& ex, const core::CommStatic& s);

}  // namespace dfccl
