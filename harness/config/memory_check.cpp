#include "config/memory_check.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace dfccl::harness {
namespace {

// 1536 -> "1.5 KiB": sizes in messages.
std::string bytes_text(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.3g} {}", v, units[u]);
}

}  // namespace

uint64_t case_host_bytes(const Collective& coll, uint64_t bytes, int group_size, DataType dtype, InPlace in_place) {
  const size_t ts = type_size(dtype);
  const size_t count = coll.count_from_bytes(bytes, group_size, ts);
  const uint64_t send = uint64_t(coll.send_elems(count, group_size)) * ts;
  const uint64_t recv = uint64_t(coll.recv_elems(count, group_size)) * ts;
  if (coll.pairwise || (in_place == InPlace::Only && !coll.out_of_place_only)) return std::max(send, recv);
  return send + recv;
}

std::string sweep_memory_problem(const Workload& w, int group_size, int local_ranks, uint64_t host_bytes) {
  if (w.kind != Workload::Kind::Sweep || host_bytes == 0) return "";
  const std::vector<uint64_t> sizes = w.sizes();
  if (sizes.empty()) return "";
  const uint64_t largest = sizes.back();
  const Collective* worst = nullptr;
  uint64_t need = 0;
  for (const Collective* c : w.sweep_collectives) {
    const uint64_t b = case_host_bytes(*c, largest, group_size, w.dtype, w.in_place);
    if (b > need) need = b, worst = c;
  }
  const uint64_t ranks = uint64_t(std::max(1, local_ranks));
  if (!worst || need <= host_bytes / ranks) return "";  // need * ranks <= host_bytes, without overflow
  const std::string total = need > UINT64_MAX / ranks ? "more" : bytes_text(need * ranks);
  return fmt::format(
      "'sizes.end': the sweep's largest case, {} of {} in groups of {}, needs at least {} of host memory per rank "
      "(its input and output), {} for the {} ranks on this host, more than its {} of memory",
      worst->name, bytes_text(largest), group_size, bytes_text(need), total, ranks, bytes_text(host_bytes));
}

uint64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

}  // namespace dfccl::harness
