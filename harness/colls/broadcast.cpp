// broadcast: every rank gets the root's count elements. S = count * type size; busbw factor 1.
#include "collective.h"

namespace dfccl::harness {

const Collective kBroadcast{
    .kind = CollKind::Broadcast,
    .name = "broadcast",
    .has_op = false,
    .has_root = true,
    .count_from_bytes = [](size_t bytes, int, size_t ts) { return bytes / ts; },
    .bytes_from_count = [](size_t count, int, size_t ts) { return count * ts; },
    .send_elems = [](size_t count, int) { return count; },
    .recv_elems = [](size_t count, int) { return count; },
    .busbw_factor = [](int) { return 1.0; },
    .fill_send = [](void* buf, size_t count, int, int rank, int,
                    const verify::Params& p) { verify::fill_input(buf, count, p, rank, 0); },
    .check_recv = [](const void* buf, size_t count, int, int, int root,
                     const verify::Params& p) { return verify::count_wrong_copy(buf, count, p, root, 0); },
};

}  // namespace dfccl::harness
