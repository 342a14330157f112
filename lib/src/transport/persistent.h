// The lanes of persistent collectives (docs/design.md, "Matching, lanes and in-flight data"): each persistent id of
// a communicator has a lane of its own, so that starts of different ids can come in any order on different ranks.
//
// Where every rank of the communicator shares this host, an id's lane is a one-lane connection of its own, made on
// first use and never by a collective: the id's first prepare on a rank allocates that rank's lane region and posts
// its handle in the bootstrap segment (no wait for anyone), and the id's first start maps the ring neighbours'
// (waiting, bounded by the init timeout, until they have prepared the id). Both happen inside the application's call,
// before anything is queued, so no collective ever waits for their CUDA calls (the rule of docs/design.md,
// "Transport and memory"). A communicator that prepares no persistent collective pays nothing for them. With network
// connections the lanes are made at init instead, after the sequence lanes in the communicator's region (the proxy
// carries that region).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "bootstrap/bootstrap.h"
#include "core/region.h"
#include "dfccl.h"
#include "engine/engine.h"
#include "executor/executor.h"

struct dfcclComm;

static_assert(DFCCL_MAX_PERSISTENT_IDS == dfccl::core::kPersistentIds, "dfccl.h and the core agree on the ids");
static_assert(dfccl::Bootstrap::kNoteSlots == int(dfccl::core::kOwnLanes), "a note per lane of its own");

namespace dfccl {

// Where a start of a persistent id runs: the connection its descriptor carries, and its lane: sequence lanes + id
// (the match board's key; on a one-lane connection the daemon runs it as lane 0).
struct PersistentRef {
  core::CommStatic cs;
  uint32_t lane;
};

// True when the persistent lanes are part of the communicator's region (made at init: network connections).
bool persistent_in_region(const dfcclComm* c);
// Caller: the id's prepare (any thread, not holding c->mu). Allocates and posts this rank's lane the first time.
void persistent_prepare(dfcclComm* c, int id);
// Caller: each start of the id, before it is queued (not holding c->mu; under a submission guard, so that an abort
// waits for it). Maps the neighbours' lanes the first time: dfcclTimeout naming the rank that has not prepared the
// id after the init timeout, dfcclRemoteError for one that left or aborted, dfcclInvalidUsage once c is aborted.
PersistentRef persistent_lane(dfcclComm* c, int id);
// True once the neighbour has returned every credit for the slots this rank sent on the persistent lanes (destroy).
bool persistent_caught_up(dfcclComm* c);
// This rank's memory for the persistent lanes made so far (regions and lane states).
uint64_t persistent_bytes(const dfcclComm* c);
// Caller: release. Moves the lanes' memory into `mine` (this rank's regions), `peers` (the neighbours' mappings)
// and `device` (the lane states), and forgets it.
void persistent_take(dfcclComm* c, Engine::Leftovers& mine, Engine::Leftovers& peers, Engine::Leftovers& device);

}  // namespace dfccl
