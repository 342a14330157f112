// Communicator handles. A dfcclComm_t is a number, never an address (as a request's handle is): a tag, the index of
// its entry in one process-wide table and the entry's generation. dfcclCommDestroy and dfcclCommAbort end the
// handle: its entry drops its reference to the communicator and takes the next generation, so that the entry serves
// the next communicator and nothing of the ended one stays behind. Every call on a communicator holds it through a
// CommRef for the call's length: a communicator ended by another thread (a watchdog's abort) is deleted once the
// last such call returns, never under one. A stale handle is refused (dfcclInvalidUsage), never a use of freed
// memory, also once its entry serves a newer communicator.
#pragma once

#include <memory>

#include "comm/comm_state.h"

namespace dfccl::api {

using CommRef = std::shared_ptr<dfcclComm>;

// Takes c (fully initialised) and returns its new handle. Throws (c aborted and freed) if the table is full.
dfcclComm_t comm_handle_new(dfcclComm* c);

// What a handle names: its communicator while live; else whether it is a handle this table ended and, while the
// entry still keeps that record (at least until a communicator created after it has ended), the asynchronous error
// it ended with.
struct CommLookup {
  CommRef comm;        // null unless live
  bool ended = false;  // a handle of this table whose communicator was destroyed or aborted
  bool ended_known = false;
  int ended_async = dfcclSuccess;
};
CommLookup comm_lookup(dfcclComm_t handle);

// Ends a live handle: later lookups find it ended, with the communicator's asynchronous error recorded. Its
// communicator goes once no CommRef holds it (comm_free). A handle already ended is left alone.
void comm_handle_end(dfcclComm_t handle);

}  // namespace dfccl::api
