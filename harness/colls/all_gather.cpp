// all_gather: rank r's sendcount elements land at r*sendcount of every receive buffer.
// S = sendcount * n * type size (the total output); busbw factor (n-1)/n.
#include "collective.h"

namespace dfccl::harness {

const Collective kAllGather{
    .kind = CollKind::AllGather,
    .name = "all_gather",
    .has_op = false,
    .has_root = false,
    .count_from_bytes = [](size_t bytes, int n, size_t ts) { return bytes / (ts * n); },
    .bytes_from_count = [](size_t count, int n, size_t ts) { return count * n * ts; },
    .send_elems = [](size_t count, int) { return count; },
    .recv_elems = [](size_t count, int n) { return count * n; },
    .busbw_factor = [](int n) { return double(n - 1) / n; },
    .fill_send = [](void* buf, size_t count, int, int rank, int,
                    const verify::Params& p) { verify::fill_input(buf, count, p, rank, 0); },
    .check_recv =
        [](const void* buf, size_t count, int n, int, int, const verify::Params& p) {
          int64_t wrong = 0;
          const char* bytes = static_cast<const char*>(buf);
          for (int r = 0; r < n; ++r)
            wrong += verify::count_wrong_copy(bytes + r * count * type_size(p.type), count, p, r, 0);
          return wrong;
        },
};

}  // namespace dfccl::harness
