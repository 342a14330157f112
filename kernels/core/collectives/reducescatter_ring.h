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
  DFCCL_HD static u64 num_ops(const Geometry& g) {
    return div_up(g.chan.count, g.slice * g.pipe) * u64(g.nranks) * g.pipe;
  }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const int n = g.nranks, r = g.rank;
    const u64 per = u64(n) * g.pipe;
    const u64 round = i / per;
    const int s = int((i % per) / g.pipe);
    const u64 k = i % g.pipe;
    const u64 base = g.chan.begin + round * g.slice * g.pipe;
    const u64 len = min_of(g.slice * g.pipe, g.chan.begin + g.chan.count - base);
    const Range piece = sub_slice(base, len, g.slice, k);
    const int p = ring_mod(r - 1 - s, n);
    const u64 src = u64(p) * g.count + piece.begin;
    if (s == 0) return Op{kOpSrc | kOpSend, src, 0, piece.count};
    if (s < n - 1) return Op{kOpRecv | kOpSrc | kOpSend, src, 0, piece.count};
    return Op{kOpRecv | kOpSrc | kOpDst | kOpFinish, src, piece.begin, piece.count};
  }
};

}  // namespace dfccl::core
