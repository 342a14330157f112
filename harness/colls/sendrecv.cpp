// sendrecv: every rank sends count elements to rank+1 and receives count elements from rank-1 (nccl-tests'
// sendrecv_perf; one rank sends to itself). S = count * type size; busbw factor 1. Out of place only: nccl-tests runs
// an in-place measurement but does not check it.
#include "collective.h"

namespace dfccl::harness {

const Collective kSendRecv{
    .kind = CollKind::SendRecv,
    .name = "sendrecv",
    .has_op = false,
    .has_root = false,
    .count_from_bytes = [](size_t bytes, int, size_t ts) { return bytes / ts; },
    .bytes_from_count = [](size_t count, int, size_t ts) { return count * ts; },
    .send_elems = [](size_t count, int) { return count; },
    .recv_elems = [](size_t count, int) { return count; },
    .busbw_factor = [](int) { return 1.0; },
    .fill_send = [](void* buf, size_t count, int, int rank, int,
                    const verify::Params& p) { verify::fill_input(buf, count, p, rank, 0); },
    .check_recv =
        [](const void* buf, size_t count, int n, int rank, int, const verify::Params& p) {
          return verify::count_wrong_copy(buf, count, p, (rank + n - 1) % n, 0);
        },
    .out_of_place_only = true,
};

}  // namespace dfccl::harness
