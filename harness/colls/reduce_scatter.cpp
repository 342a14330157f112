// reduce_scatter: rank q gets block q (recvcount elements) of the reduction of all inputs (n*recvcount elements).
// S = recvcount * n * type size (the total input); busbw factor (n-1)/n.
#include "collective.h"

namespace dfccl::harness {

const Collective kReduceScatter{
    .kind = CollKind::ReduceScatter,
    .name = "reduce_scatter",
    .has_op = true,
    .has_root = false,
    .count_from_bytes = [](size_t bytes, int n, size_t ts) { return bytes / (ts * n); },
    .bytes_from_count = [](size_t count, int n, size_t ts) { return count * n * ts; },
    .send_elems = [](size_t count, int n) { return count * n; },
    .recv_elems = [](size_t count, int) { return count; },
    .busbw_factor = [](int n) { return double(n - 1) / n; },
    .fill_send = [](void* buf, size_t count, int n, int rank, int,
                    const verify::Params& p) { verify::fill_input(buf, count * n, p, rank, 0); },
    .check_recv =
        [](const void* buf, size_t count, int, int rank, int, const verify::Params& p) {
          return verify::count_wrong_reduced(buf, count, p, static_cast<uint64_t>(rank) * count);
        },
};

}  // namespace dfccl::harness
