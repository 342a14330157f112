// Communicators: init over the bootstrap (agreement on the transport, exchange and mapping of connection regions),
// submission (sequence keys and lanes), split, shrink, destroy and abort. The state is comm_state.h; the functions
// are declared by concern in comm_init.h, comm_shrink.h, comm_submit.h and comm_failure.h, which this header gathers
// for the API.
#pragma once

#include "comm/comm_failure.h"
#include "comm/comm_init.h"
#include "comm/comm_shrink.h"
#include "comm/comm_state.h"
#include "comm/comm_submit.h"
