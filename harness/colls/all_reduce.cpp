// all_reduce: every rank gets the reduction of all inputs. S = count * type size; busbw factor 2(n-1)/n.
#include "collective.h"

namespace dfccl::harness {

const Collective kAllReduce{
    .kind = CollKind::AllReduce,
    .name = "all_reduce",
    .has_op = true,
    .has_root = false,
    .count_from_bytes = [](size_t bytes, int, size_t ts) { return bytes / ts; },
    .bytes_from_count = [](size_t count, int, size_t ts) { return count * ts; },
    .send_elems = [](size_t count, int) { return count; },
    .recv_elems = [](size_t count, int) { return count; },
    .busbw_factor = [](int n) { return 2.0 * (n - 1) / n; },
    .fill_send = [](void* buf, size_t count, int, int rank, int,
                    const verify::Params& p) { verify::fill_input(buf, count, p, rank, 0); },
    .check_recv = [](const void* buf, size_t count, int, int, int,
                     const verify::Params& p) { return verify::count_wrong_reduced(buf, count, p, 0); },
};

}  // namespace dfccl::harness
