// A collective program: the deterministic sequence of primitives that one channel of one rank runs.
//
// Every algorithm is a pair of pure functions over a Geometry (what this rank and channel must do):
//   num_ops(g)   how many primitives the channel runs
//   op(g, i)     primitive i: which of recv / send / read src / write dst / finish it does, on which elements
// so the dynamic context of a running collective is just the index of its next primitive (ChanCtx::op). Each
// primitive moves at most one slice (one connection slot). Sender and receiver compute matching sequences: the
// i-th primitive that sends on a connection pairs with the i-th one that receives on it.
#pragma once

#include "../desc.h"
#include "../patterns/ring.h"

namespace dfccl::core {

enum : u32 {
  kOpRecv = 1u,     // consume one slot from prev
  kOpSend = 2u,     // produce one slot for next
  kOpSrc = 4u,      // read the user input (reduced with the received slot when both are present)
  kOpDst = 8u,      // write the user output
  kOpFinish = 16u,  // apply the operator's final step (avg: divide by nranks)
  kOpLL = 32u       // through the LL protocol (primitives/ll.h): channel 0's data fits kLLMaxBytes (uses_ll)
};

struct Op {
  u32 flags;
  u64 src;    // element offset into the send buffer
  u64 dst;    // element offset into the receive buffer
  u64 nelem;  // elements moved (may be 0: the slot still changes hands, keeping both sides in step)
};

// Slice k of a chunk [begin, begin + count): at most `slice` elements, empty past the end.
DFCCL_HD inline Range sub_slice(u64 begin, u64 count, u64 slice, u64 k) {
  const u64 b = min_of(count, k * slice);
  return Range{begin + b, min_of(slice, count - b)};
}

struct Geometry {
  Kind kind;
  RedOp redop;
  int rank, nranks, root;
  u32 esize;
  u64 count;      // NCCL's count (see Desc)
  u64 slice;      // elements per slot
  u64 pipe;       // slices per ring step: a step's slices stream back to back (half the slots of a lane, rounded up)
  Range chan;     // this channel's part of the per-rank block
  bool in_place;  // the collective's own in-place condition holds
};

// The rounds of the block-wise rings (AllGather, ReduceScatter): round r covers `pipe` slices of each rank's block in
// this channel; op i is slice k of step s of its round. block_ring_num_ops: their primitives; block_ring_step: op i's
// step and the elements of the block it moves.
struct BlockStep {
  int step;
  Range piece;  // elements of the block (offsets inside one rank's block)
};

DFCCL_HD inline u64 block_ring_num_ops(const Geometry& g) {
  return div_up(g.chan.count, g.slice * g.pipe) * u64(g.nranks) * g.pipe;
}

DFCCL_HD inline BlockStep block_ring_step(const Geometry& g, u64 i) {
  const u64 per = u64(g.nranks) * g.pipe;
  const u64 round = udiv(i, per);
  const u64 base = g.chan.begin + round * g.slice * g.pipe;
  const u64 len = min_of(g.slice * g.pipe, g.chan.begin + g.chan.count - base);
  const u64 rem = i - round * per;
  const u64 step = udiv(rem, g.pipe);
  return BlockStep{int(step), sub_slice(base, len, g.slice, rem - step * g.pipe)};
}

}  // namespace dfccl::core
