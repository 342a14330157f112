// Compile-time limits of an engine: how many collectives, rings, blocks, communicators and lanes it holds.
#pragma once

#include "exec.h"

namespace dfccl::core {

inline constexpr u32 kMaxSlots = 1024;          // collectives outstanding per engine
inline constexpr u32 kMaxRings = 64;            // submission rings per engine (one per user stream in use)
inline constexpr u32 kRingEntries = kMaxSlots;  // so a ring can hold every outstanding collective
inline constexpr u32 kMaxBlocks = 128;          // daemon blocks (= channels) per engine
inline constexpr u32 kMaxComms = 256;           // communicators attached to one engine at a time
inline constexpr u32 kMaxLanes = 64;            // lanes per communicator (sequence lanes + persistent lanes)
// Lanes of their own per communicator, each a one-lane connection made on first use (lib/src/transport/persistent.h):
// the persistent ids (DFCCL_MAX_PERSISTENT_IDS of dfccl.h), then the graph lane of captured collectives
// (docs/design.md, "CUDA graphs").
inline constexpr u32 kPersistentIds = 8;
inline constexpr u32 kGraphLaneId = kPersistentIds;
inline constexpr u32 kOwnLanes = kPersistentIds + 1;
inline constexpr u32 kCqEntries = kMaxSlots;    // completions can never outnumber outstanding collectives
inline constexpr u32 kAlignBytes = 16;          // chunk boundaries fall on multiples of 16 bytes

// Measurement builds (-DDFCCL_PROFILE=1): the daemon's phase profile (block.h) and the graph path's stamps
// (engine_memory.h, GraphStamp).
#ifndef DFCCL_PROFILE
#define DFCCL_PROFILE 0
#endif
inline constexpr bool kProfile = DFCCL_PROFILE != 0;

}  // namespace dfccl::core
