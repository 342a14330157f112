// Reduce, pipelined chain along the ring ending at the root.
//
// Purpose: the root ends with op(input of all ranks). Use case: every size. One step per slice:
//   rank after root (first in the chain)   read input, send
//   middle ranks                           receive, reduce with own input, send
//   root                                   receive, reduce, finish (avg), write output
// Traffic: each rank but the root sends the buffer once.
#pragma once

#include "program.h"

namespace dfccl::core {

struct ReduceChain {
  DFCCL_HD static u64 num_ops(const Geometry& g) { return div_up(g.chan.count, g.slice); }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const u64 base = g.chan.begin + i * g.slice;
    const u64 len = min_of(g.slice, g.chan.begin + g.chan.count - base);
    if (g.rank == g.root) return Op{kOpRecv | kOpSrc | kOpDst | kOpFinish, base, base, len};
    const bool first = ring_mod(g.root + 1, g.nranks) == g.rank;
    return Op{first ? (kOpSrc | kOpSend) : (kOpRecv | kOpSrc | kOpSend), base, 0, len};
  }
};

}  // namespace dfccl::core
