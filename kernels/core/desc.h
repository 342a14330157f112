// A collective instance: its kind, type and operator, its static context (Desc) and the dynamic context of one of its
// channels (ChanCtx).
#pragma once

#include "region.h"

namespace dfccl::core {

// Kinds, data types and operators, in NCCL's numbering. Send and Recv are one direction of a point-to-point
// connection (collectives/sendrecv.h); an all-to-all is a set of them.
enum class Kind : u8 { AllReduce = 0, AllGather = 1, ReduceScatter = 2, Broadcast = 3, Reduce = 4, Send = 5, Recv = 6 };
inline constexpr u32 kNumKinds = 7;
DFCCL_HD constexpr bool is_p2p(Kind k) { return k == Kind::Send || k == Kind::Recv; }
enum class DType : u8 { I8 = 0, U8, I32, U32, I64, U64, F16, F32, F64, BF16 };
inline constexpr u32 kNumDTypes = 10;
enum class RedOp : u8 { Sum = 0, Prod, Max, Min, Avg };
inline constexpr u32 kNumOps = 5;

// Bytes per element of type t.
DFCCL_HD constexpr u32 dtype_size(DType t) {
  switch (t) {
    case DType::I8:
    case DType::U8: return 1;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32: return 4;
    default: return 8;
  }
}

// Status values of a finished collective (the C API's dfcclResult_t numbering).
inline constexpr u32 kStatusOk = 0;
inline constexpr u32 kStatusAborted = 9;

// The static context: one per submitted collective, written by the host into pinned memory.
struct Desc {
  u64 seq;           // engine-wide submission number (> 0); also the value written to the completion word
  u64 count;         // NCCL's count: AllReduce/Broadcast/Reduce count, AllGather sendcount, ReduceScatter recvcount
  const void* send;  // user buffers (device pointers for the CUDA executor)
  void* recv;
  u64 turn;        // this instance's turn on its lane (docs/design.md, "Lanes")
  u16 comm;        // index in the engine's communicator table (< kMaxComms)
  u16 lane;        // which lane of the communicator's connections this instance uses (< kMaxLanes)
  u16 after;       // > 0: a stage of a chain (Engine::submit_chain); it starts once the collective submitted `after`
                   // submissions before it (sequence number seq - after) has completed on this rank, aborted or not
  u16 after_slot;  // that collective's slot
  Kind kind;
  DType dtype;
  RedOp op;
  u8 esize_log2;  // log2 of the element size (set_channels)
  int32_t root;
  int32_t priority;
  u32 nchan;       // channels that carry data (the others have empty programs)
  CommStatic cs;   // the connection's fixed part (a copy: no dependent load before the lane's): the communicator's
                   // ring, or for Send/Recv the point-to-point connection with peer cs.next (= cs.prev)
  u64 comm_gen;    // the communicator's attachment to the engine (Engine::attach): aborted once
                   // EngineGlobal::abort_gen[comm] equals it
  u64 chan_share;  // elements per data channel, a multiple of kAlignBytes (set_channels)
};
static_assert(sizeof(Desc) == 144 && sizeof(Desc) % 16 == 0, "Desc is read in 16-byte loads, all issued at once");

// The dynamic context of one channel of one instance, saved in device memory (ChanCtx::state values first).
enum : u32 { kCtxFree = 0, kCtxActive = 1, kCtxDone = 2 };

struct ChanCtx {
  Desc desc;        // copy of the static context
  u64 t_start;      // executor clock when this channel ran its first primitive (0: not started)
  u32 op;           // next primitive of the channel's program: all that is needed to resume
  u32 spin_ns;      // adaptive spin budget of this channel (stickiness)
  u32 state;        // kCtxFree / kCtxActive / kCtxDone
  u32 preemptions;  // attempts of this channel that ended in preemption
  u32 status;       // kStatusOk or kStatusAborted
  u32 wait_us;      // time this channel's primitives spent in their spin phase (waiting for peers), microseconds
};
static_assert(sizeof(ChanCtx) == 176);

}  // namespace dfccl::core
