// The end of a communicator: destroy, the application's abort, and failures (a peer that failed, collectives that
// disagree between ranks), each of which ends its stage communicators too; and the release of its memory.
#pragma once

#include <string>

#include "bootstrap/bootstrap.h"
#include "comm/comm_state.h"

namespace dfccl {

// Waits (bounded) for the communicator's collectives and its peers, then frees it. Throws dfcclTimeout when it had
// to give up waiting (the communicator is then aborted and freed anyway).
void comm_destroy(dfcclComm* comm);
// Callable from any thread, also while others submit on the communicator or wait on it; a second call does nothing.
void comm_abort(dfcclComm* comm);
// A peer of comm failed (PeerWatch's thread; reason: "exited", "aborted the communicator", ...): comm is aborted with
// dfcclRemoteError, every pending collective reports it with a message naming the rank, and so do later calls.
// The communicator's liveness word records the failed rank and `cause` first, so that peers that see this rank go
// name that rank, not this one (invariant 8).
void comm_fail(dfcclComm* comm, int rank, const std::string& reason, Bootstrap::Cause cause);
// "" or why comm cannot go on because a peer destroyed its communicator early: the first peer that left (kLeft)
// after fewer order-matched collectives than comm has submitted, with *rank that peer. Any thread.
std::string departed_early(const dfcclComm* comm, int* rank);
// The ranks of comm submitted differing collectives under one key (MatchBoard): comm is aborted with
// dfcclInvalidUsage and `message`, which every pending collective and later call reports.
void comm_fail_mismatch(dfcclComm* comm, const std::string& message);
// How release leaves the communicator's memory.
enum class Release {
  Free,        // free everything now (init failed, or destroy after the peers caught up)
  KeepRegion,  // the region may still be written by a peer: retired to the engine, the rest freed now
  Retire,      // an abort on the CUDA executor: everything retired to the engine, no CUDA call made
};
// Releases what a partially or fully initialised communicator holds (not the handle itself). With Release::Retire
// it makes no CUDA call and takes no lock held across one; if it drops the engine's last reference, the engine is
// torn down on a thread of its own (its teardown waits for the daemon).
void release(dfcclComm* c, Release how);
// Caller: comm_destroy, before c's own teardown: destroys the stage communicators. When one cannot be destroyed in
// time, c is aborted and its dfcclTimeout is thrown.
void hierarchy_destroy(dfcclComm* c);
// Caller: the communicator handles' table (api/comm_handles.h), once c was destroyed or aborted and no call holds it.
// Deletes c and its stage communicators; one that still holds its engine (an abort that gave up waiting left its
// memory in place for the daemon) is left as it is, until the process exits.
void comm_free(dfcclComm* c);

}  // namespace dfccl
