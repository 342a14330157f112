// p2p: one point-to-point transfer inside a group: group rank src sends count elements, group rank dst receives
// them (src == dst: a send to itself); the other ranks of the group do not take part. A program entry of pipeline
// and stress workloads (dfcclSend / dfcclRecv, ncclSend / ncclRecv, never grouped). S = count * type size; busbw
// factor 1. Out of place only.
#include "collective.h"

namespace dfccl::harness {

const Collective kP2p{
    .kind = CollKind::P2p,
    .name = "p2p",
    .has_op = false,
    .has_root = false,
    .count_from_bytes = [](size_t bytes, int, size_t ts) { return bytes / ts; },
    .bytes_from_count = [](size_t count, int, size_t ts) { return count * ts; },
    .send_elems = [](size_t count, int) { return count; },
    .recv_elems = [](size_t count, int) { return count; },
    .busbw_factor = [](int) { return 1.0; },
    .fill_send = [](void* buf, size_t count, int, int rank, int,
                    const verify::Params& p) { verify::fill_input(buf, count, p, rank, 0); },
    .check_recv = [](const void* buf, size_t count, int, int, int src,
                     const verify::Params& p) { return verify::count_wrong_copy(buf, count, p, src, 0); },
    .out_of_place_only = true,
    .pairwise = true,
};

}  // namespace dfccl::harness
