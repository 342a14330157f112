// all_to_all: block p (count elements at p*count) of rank r's input goes to rank p, which stores it at r*count.
// count is per peer; S = count * n * type size (a rank's whole input, nccl-tests' alltoall_perf, without its
// rounding of count to 16 bytes, as all_gather); busbw factor (n-1)/n. Out of place only (nccl-tests: not checked
// in place; dfccl.h: sendbuff and recvbuff must not overlap).
// Rank r's input is its elements 0 .. n*count-1, so the block rank q receives from r holds r's indices q*count ...
#include "collective.h"

namespace dfccl::harness {

const Collective kAllToAll{
    .kind = CollKind::AllToAll,
    .name = "all_to_all",
    .has_op = false,
    .has_root = false,
    .count_from_bytes = [](size_t bytes, int n, size_t ts) { return bytes / (ts * n); },
    .bytes_from_count = [](size_t count, int n, size_t ts) { return count * n * ts; },
    .send_elems = [](size_t count, int n) { return count * n; },
    .recv_elems = [](size_t count, int n) { return count * n; },
    .busbw_factor = [](int n) { return double(n - 1) / n; },
    .fill_send = [](void* buf, size_t count, int n, int rank, int,
                    const verify::Params& p) { verify::fill_input(buf, count * n, p, rank, 0); },
    .check_recv =
        [](const void* buf, size_t count, int n, int rank, int, const verify::Params& p) {
          int64_t wrong = 0;
          const char* bytes = static_cast<const char*>(buf);
          const auto at = static_cast<uint64_t>(rank) * count;
          for (int src = 0; src < n; ++src)
            wrong += verify::count_wrong_copy(bytes + src * count * type_size(p.type), count, p, src, at);
          return wrong;
        },
    .out_of_place_only = true,
};

}  // namespace dfccl::harness
