// AllReduce on 2 ranks when a channel's data is small: each rank sends its input, then reduces the peer's input with
// its own.
//
// Purpose: the ring (allreduce_ring.h) needs 2n - 1 = 3 primitives and two dependent hops between the GPUs on 2 ranks
// (the peer's step 1 waits for my step 0, my step 2 for its step 1); here both ranks send at once and each waits for
// one hop: 2 primitives,
//   op 0   read input, send it                          (kOpSrc | kOpSend)
//   op 1   receive the peer's input, reduce with mine,  (kOpRecv | kOpSrc | kOpDst | kOpFinish)
//          finish (avg), write output
// Use case: 2 ranks, at most kMaxBytes of data per channel and one slot (up to 4 MiB on 64 channels). Above it the
// ring's half-size steps overlap better.
// Protocol: LL (primitives/ll.h) when the whole collective is channel 0's and fits kLLMaxBytes (8 KiB), as for every
// collective (collectives.h, uses_ll): one flight per hop instead of data, fence and flag; Simple above.
// Traffic per rank: the channel's data sent and received once, as in the ring (twice the bytes with LL). Both ranks
// compute peer op mine, which is the same value (every operator is commutative, and a half type rounds the same
// float result), so the outputs agree bit for bit.
#pragma once

#include "program.h"

namespace dfccl::core {

struct AllReduceOneShot {
  static constexpr u64 kMaxBytes = 64 * 1024;
  // Whether channel geometry g is this algorithm's use case (with_algorithm routes AllReduce here when it is).
  DFCCL_HD static bool fits(const Geometry& g) {
    return g.nranks == 2 && g.chan.count <= g.slice && g.chan.count * g.esize <= kMaxBytes;
  }
  DFCCL_HD static u64 num_ops(const Geometry&) { return 2; }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const u64 base = g.chan.begin, len = g.chan.count;
    if (i == 0) return Op{kOpSrc | kOpSend, base, base, len};
    return Op{kOpRecv | kOpSrc | kOpDst | kOpFinish, base, base, len};
  }
};

}  // namespace dfccl::core
