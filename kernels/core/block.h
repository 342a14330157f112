// State that the threads of one daemon block share: CUDA shared memory, or the host thread's own memory.
#pragma once

#include "collectives/program.h"

namespace dfccl::core {

inline constexpr u32 kAcceptPerRing = 8;  // submissions a block takes from one ring in one pass

// Phase profile (builds with -DDFCCL_PROFILE=1, kProfile): thread 0 of each block adds the executor cycles
// (X::cycles()) it spends in each phase; the sums reach dfcclStats_t at each daemon exit. Off: no clock reads.
enum Phase : u32 {
  kPhaseCheck = 0,  // a primitive's phase 1: conditions (spin) and the barrier after it
  kPhaseMove,       // phase 2: data movement and the barrier after it
  kPhasePost,       // phase 3: fence and flag stores
  kPhaseProgram,    // attempt set-up (communicator, geometry, turn) and program_op of each primitive
  kPhasePoll,       // scheduler step 1: submission rings and descriptors
  kPhaseExit,       // scheduler step 3: exit decision and heartbeat
  kPhaseLaunch,     // the whole launch (the rest is the scheduler's own bookkeeping)
  kNumPhases
};

// The working set of the block's current attempt, written by thread 0 when the attempt starts (scheduler/attempt.h)
// and before each primitive (op), read by every thread from here rather than held in each thread's registers.
struct AttemptShared {
  Desc desc;     // the collective's static context
  Geometry geo;  // this channel's part of it
  LaneView lv;   // the lane's control blocks
  u64 nops;      // primitives in the channel's program
  u32 ll;        // 1: the program's primitives use the LL protocol (primitives/ll.h)
  Op op;         // the primitive being run (Simple protocol)
};

// What one block shares between its threads (CUDA: __shared__; host: the thread's own).
struct BlockShared {
  AttemptShared at;                // the current attempt
  u64 frontier[kMaxRings];         // next position of each submission ring
  u16 active[kMaxSlots];           // slots this block runs, in scheduling order
  int32_t active_prio[kMaxSlots];  // their scheduling keys: priority, then submission order
  u64 active_seq[kMaxSlots];
  LaneState* active_lane[kMaxSlots];  // and their lane states (an attempt's first loads need no context)
  u32 nactive;
  u32 nnew;                                        // new submissions found in this pass
  u16 fresh[kMaxRings * kAcceptPerRing];           // new slots found in this pass
  u64 fresh_tag[kMaxRings * kAcceptPerRing];       // their submissions' tags (EngineGlobal::desc_claim)
  int32_t fresh_prio[kMaxRings * kAcceptPerRing];  // and their keys
  u64 fresh_seq[kMaxRings * kAcceptPerRing];
  LaneState* fresh_lane[kMaxRings * kAcceptPerRing];
  u64 sent, recvd;            // positions of the lane used by the current attempt
  u32 ok;                     // thread 0's decision for the block (attempt: kDecide*; primitive: conditions met)
  u32 first_op;               // broadcast of thread 0: the primitive an attempt resumes at
  u32 last_slot;              // last slot this block ran (context-switch counting)
  u64 preemptions, switches;  // counters of this run
  u32 exit;
  u32 progressed;
  u64 passes, heartbeat_ns;  // scheduler passes of this launch; last heartbeat written
  u64 abort_look_ns;         // the last channel's block without a prefetcher: next look for aborts (exit.h)
  u64 kept_look_ns;          // a stand-in kept by waits: next look at them (exit.h)
  u64 primitives;            // primitives run in this launch
  u32 prefetched;            // block 0: submissions accepted from the prefetcher's copy in this launch
  u64 prof[kNumPhases];      // kProfile: cycles per phase (thread 0)
  u64 posted_seq;            // graph_start_wait_block: the instance the block waits for (thread 0's)
};

// Caller: every thread; thread 0 only counts. kProfile: start / end of a timed phase (prof_add adds the cycles since
// t0 to phase p). Compiled out otherwise.
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE u64 prof_now() {
  if constexpr (kProfile) return X::cycles();
  return 0;
}
template <class X>
DFCCL_DEV DFCCL_FORCEINLINE void prof_add(BlockShared& bs, Phase p, u64 t0) {
  if constexpr (kProfile)
    if (X::tid() == 0) bs.prof[p] += X::cycles() - t0;
}

}  // namespace dfccl::core
