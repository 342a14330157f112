// AllGather, ring algorithm.
//
// Purpose: every rank ends with the inputs of all ranks, rank p's block at recvbuff + p*sendcount. Use case: every
// size. Each round moves `pipe` slices of each rank's block; n steps per round, slice by slice:
//   step 0          copy own slice to own output block (unless in place) and send it
//   steps 1..n-2    receive rank r-s's slice, write it, send it on
//   step n-1        receive rank r+1's slice, write it
// Traffic per rank: (n-1)/n of the output sent and received.
#pragma once

#include "program.h"

namespace dfccl::core {

struct AllGatherRing {
  DFCCL_HD static u64 num_ops(const Geometry& g) { return block_ring_num_ops(g); }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const int n = g.nranks, r = g.rank;
    const BlockStep st = block_ring_step(g, i);
    const Range piece = st.piece;
    if (st.step == 0)
      return Op{kOpSrc | kOpSend | (g.in_place ? 0u : kOpDst), piece.begin, u64(r) * g.count + piece.begin,
                piece.count};
    const int p = ring_mod(r - st.step, n);
    const u32 flags = st.step < n - 1 ? (kOpRecv | kOpDst | kOpSend) : (kOpRecv | kOpDst);
    return Op{flags, 0, u64(p) * g.count + piece.begin, piece.count};
  }
};

}  // namespace dfccl::core
