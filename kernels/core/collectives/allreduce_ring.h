// AllReduce, ring algorithm.
//
// Purpose: every rank ends with op(input of all ranks). Use case: every size (2 ranks, small channels: one-shot).
// Each round covers nranks chunks of at most `pipe` slices; 2n-1 steps per round (NCCL's ring), each step moving
// its chunk slice by slice so that consecutive slices of a step are in flight together:
//   step 0          send chunk r-1 (own input)
//   steps 1..n-2    receive chunk r-1-s, reduce with own input, send
//   step n-1        receive chunk r, reduce, finish (avg), write output, send   -> chunk r is final
//   steps n..2n-3   receive a final chunk, write output, send
//   step 2n-2       receive the last final chunk (r+1), write output
// Traffic per rank: 2(n-1)/n of the buffer sent and received.
#pragma once

#include "program.h"

namespace dfccl::core {

struct AllReduceRing {
  // num_ops and op as program.h says; a round is 2n - 1 steps of `pipe` primitives each.
  DFCCL_HD static u64 ops_per_round(const Geometry& g) { return (2u * u64(g.nranks) - 1) * g.pipe; }
  DFCCL_HD static u64 num_ops(const Geometry& g) {
    return div_up(g.chan.count, g.slice * g.pipe * g.nranks) * ops_per_round(g);
  }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const int n = g.nranks, r = g.rank;
    const u64 per = ops_per_round(g);
    const u64 round = udiv(i, per);
    const u64 rem = i - round * per;
    const int s = int(udiv(rem, g.pipe));
    const u64 k = rem - u64(s) * g.pipe;
    const u64 round_len = g.slice * g.pipe * n;
    const u64 base = g.chan.begin + round * round_len;
    const u64 len = min_of(round_len, g.chan.begin + g.chan.count - base);
    int c;
    u32 flags;
    if (s == 0) {
      c = ring_mod(r - 1, n);
      flags = kOpSrc | kOpSend;
    } else if (s < n - 1) {
      c = ring_mod(r - 1 - s, n);
      flags = kOpRecv | kOpSrc | kOpSend;
    } else if (s == n - 1) {
      c = r;
      flags = kOpRecv | kOpSrc | kOpDst | kOpSend | kOpFinish;
    } else if (s < 2 * n - 2) {
      c = ring_mod(r - (s - n + 1), n);
      flags = kOpRecv | kOpDst | kOpSend;
    } else {
      c = ring_mod(r + 1, n);
      flags = kOpRecv | kOpDst;
    }
    const Range chunk = split_aligned(len, n, c, align_elems(g.esize));
    const Range piece = sub_slice(base + chunk.begin, chunk.count, g.slice, k);
    return Op{flags, piece.begin, piece.begin, piece.count};
  }
};

}  // namespace dfccl::core
