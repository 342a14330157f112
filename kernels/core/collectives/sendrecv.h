// Send and Recv: one direction of a point-to-point connection (the descriptor's cs is that connection, cs.next = peer).
//
// Purpose: count elements from the sender's buffer to the receiver's. Use case: dfcclSend / dfcclRecv, and each
// transfer of an all-to-all. One primitive per slice, in order:
//   Send   read input, send the slice to the peer
//   Recv   receive the slice from the peer, write output
// Sender and receiver compute the same slices from the same count, so the i-th slot sent is the i-th received.
// Traffic: the buffer once, over the connection (a rank's connection to itself is a FIFO in its own memory).
#pragma once

#include "program.h"

namespace dfccl::core {

struct SendRecvDirect {
  DFCCL_HD static u64 num_ops(const Geometry& g) { return div_up(g.chan.count, g.slice); }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const u64 base = g.chan.begin + i * g.slice;
    const u64 len = min_of(g.slice, g.chan.begin + g.chan.count - base);
    if (g.kind == Kind::Send) return Op{kOpSrc | kOpSend, base, 0, len};
    return Op{kOpRecv | kOpDst, 0, base, len};
  }
};

}  // namespace dfccl::core
