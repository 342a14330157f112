// Any collective on a communicator of one rank: a local copy of the input to the output (nothing when in place).
#pragma once

#include "program.h"

namespace dfccl::core {

struct LocalCopy {
  DFCCL_HD static u64 num_ops(const Geometry& g) { return g.in_place ? 0 : div_up(g.chan.count, g.slice); }
  DFCCL_HD static Op op(const Geometry& g, u64 i) {
    const u64 base = g.chan.begin + i * g.slice;
    const u64 len = min_of(g.slice, g.chan.begin + g.chan.count - base);
    return Op{kOpSrc | kOpDst, base, base, len};
  }
};

}  // namespace dfccl::core
