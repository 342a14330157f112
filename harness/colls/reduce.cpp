// reduce: the root gets the reduction of all inputs; other ranks' receive buffers are not defined (not checked).
// S = count * type size; busbw factor 1.
#include "collective.h"

namespace dfccl::harness {

const Collective kReduce{
    .kind = CollKind::Reduce,
    .name = "reduce",
    .has_op = true,
    .has_root = true,
    .count_from_bytes = [](size_t bytes, int, size_t ts) { return bytes / ts; },
    .bytes_from_count = [](size_t count, int, size_t ts) { return count * ts; },
    .send_elems = [](size_t count, int) { return count; },
    .recv_elems = [](size_t count, int) { return count; },
    .busbw_factor = [](int) { return 1.0; },
    .fill_send = [](void* buf, size_t count, int, int rank, int,
                    const verify::Params& p) { verify::fill_input(buf, count, p, rank, 0); },
    .check_recv = [](const void* buf, size_t count, int, int rank, int root, const verify::Params& p) -> int64_t {
      return rank == root ? verify::count_wrong_reduced(buf, count, p, 0) : 0;
    },
};

}  // namespace dfccl::harness
