// ReduceScatter, ring algorithm.
//
// Purpose: rank r ends with op over all ranks of input block r (blocks of recvcount elements). Use case: every
// size. Each round moves `pipe` slices of every block; n steps per round, slice by slice:
//   step 0          send block r-1 (own input)
//   steps 1..n-2    receive block r-1-s, reduce with own input, send
//   step n-1        receive block r, reduce, finish (avg), write output
// Traffic per rank: (n-1)/n of the input sent and received.
#pragma once

#include "program.h"

namespace dfccl::core {

struct ReduceScatterRing {
  DFCCL_HD static u64 num_ops(const Geometry& g) { return block_ring_num_ops(g); }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const int n = g.nranks, r = g.rank;
    const BlockStep st = block_ring_step(g, i);
    const Range piece = st.piece;
    const u64 src = u64(ring_mod(r - 1 - st.step, n)) * g.count + piece.begin;
    if (st.step == 0) return Op{kOpSrc | kOpSend, src, 0, piece.count};
    if (st.step < n - 1) return Op{kOpRecv | kOpSrc | kOpSend, src, 0, piece.count};
    return Op{kOpRecv | kOpSrc | kOpDst | kOpFinish, src, piece.begin, piece.count};
  }
};

}  // namespace dfccl::core
