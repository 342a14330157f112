// Broadcast, pipelined chain along the ring starting at the root.
//
// Purpose: every rank ends with the root's input. Use case: every size. One step per slice:
//   root            read input (copy it to own output unless in place), send
//   middle ranks    receive, write output, send
//   rank before root (last in the chain)   receive, write output
// Traffic: each rank but the last sends the buffer once.
#pragma once

#include "program.h"

namespace dfccl::core {

struct BroadcastChain {
  DFCCL_HD static u64 num_ops(const Geometry& g) { return div_up(g.chan.count, g.slice); }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const u64 base = g.chan.begin + i * g.slice;
    const u64 len = min_of(g.slice, g.chan.begin + g.chan.count - base);
    if (g.rank == g.root) return Op{kOpSrc | kOpSend | (g.in_place ? 0u : kOpDst), base, base, len};
    const bool last = ring_mod(g.rank + 1, g.nranks) == g.root;
    return Op{last ? (kOpRecv | kOpDst) : (kOpRecv | kOpDst | kOpSend), 0, base, len};
  }
};

}  // namespace dfccl::core
