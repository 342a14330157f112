// State that the threads of one daemon block share: CUDA shared memory, or the host thread's own memory.
#pragma once

#include "types.h"

namespace dfccl::core {

inline constexpr u32 kAcceptPerRing = 8;  // submissions a block takes from one ring in one pass

// What one block shares between its threads (CUDA: __shared__; host: the thread's own).
struct BlockShared {
  u64 frontier[kMaxRings];      // next position of each submission ring
  u16 active[kMaxSlots];        // slots this block runs, in scheduling order
  u32 nactive;
  u32 nnew;                     // new submissions found in this pass
  u16 fresh[kMaxRings * kAcceptPerRing];  // new slots found in this pass
  u64 sent, recvd;              // positions of the lane used by the current attempt
  u64 waited;                   // spin time of the last wait
  u32 ok;                       // broadcast of a decision of thread 0
  u32 last_slot;                // last slot this block ran (context-switch counting)
  u64 preemptions, switches;    // counters of this run
  u32 exit;
  u32 progressed;
  u64 passes, heartbeat_ns;     // scheduler passes of this launch; last heartbeat written
};

}  // namespace dfccl::core
