#include "hosts.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace dfccl::harness {
namespace {

// "0-1,4": sorted ranks as ranges.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + (j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string host_identity(const char* dfccl_hostid, const std::string& processor_name) {
  return dfccl_hostid && *dfccl_hostid ? std::string(dfccl_hostid) : processor_name;
}

std::vector<std::string> unique_hosts(const std::vector<std::string>& host_of_rank) {
  std::vector<std::string> out;
  for (const auto& h : host_of_rank)
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  return out;
}

int node_local_rank(const std::vector<std::string>& host_of_rank, int rank) {
  const auto end = host_of_rank.begin() + rank;
  return static_cast<int>(std::count(host_of_rank.begin(), end, host_of_rank.at(static_cast<size_t>(rank))));
}

int node_local_size(const std::vector<std::string>& host_of_rank, int rank) {
  return static_cast<int>(
      std::count(host_of_rank.begin(), host_of_rank.end(), host_of_rank.at(static_cast<size_t>(rank))));
}

bool uses_dfccl_library(const std::string& backend) { return !backend.starts_with("nccl"); }

std::string multi_host_problem(const std::vector<std::string>& host_of_rank, bool network,
                               const std::vector<std::string>& backends) {
  const auto hosts = unique_hosts(host_of_rank);
  std::vector<std::string> library;
  std::copy_if(backends.begin(), backends.end(), std::back_inserter(library), uses_dfccl_library);
  if (hosts.size() <= 1 || network || library.empty()) return "";
  return fmt::format("the ranks run on {} hosts ({}), but this dfccl library was built without the network "
                     "transport (UCX), so backend {} cannot connect them: rebuild with libucx-dev installed "
                     "(dfccl-info shows the build's features), or start every rank on one host",
                     hosts.size(), fmt::join(hosts, ", "), fmt::join(library, ", "));
}

std::string hosts_line(const std::vector<std::string>& host_of_rank) {
  std::vector<std::string> parts;
  for (const auto& h : unique_hosts(host_of_rank)) {
    std::vector<int> ranks;
    for (size_t r = 0; r < host_of_rank.size(); ++r)
      if (host_of_rank[r] == h) ranks.push_back(static_cast<int>(r));
    parts.push_back(fmt::format("{} (rank{} {})", h, ranks.size() > 1 ? "s" : "", rank_ranges(ranks)));
  }
  return fmt::format("{} host{}: {}", parts.size(), parts.size() == 1 ? "" : "s", fmt::join(parts, ", "));
}

std::string transport_name(int transport) {
  static const char* const kNames[] = {"peer_memory", "host_memory", "shared_memory", "network"};
  if (transport >= 0 && transport < 4) return kNames[transport];
  return fmt::format("unknown {}", transport);
}

std::string hops_line(const std::vector<HopRow>& hops) {
  constexpr size_t kListed = 8;
  std::vector<std::string> groups, parts;
  for (const auto& h : hops)
    if (std::find(groups.begin(), groups.end(), h.group) == groups.end()) groups.push_back(h.group);
  for (const auto& g : groups) {
    std::map<std::string, int> count;
    std::vector<std::string> network;
    for (const auto& h : hops) {
      if (h.group != g) continue;
      ++count[h.transport];
      if (h.transport == "network") network.push_back(fmt::format("{}->{}", h.rank, h.peer));
    }
    std::vector<std::string> counts;
    for (const auto& [t, n] : count) {
      std::string c = fmt::format("{} {}", n, t);
      if (t == "network") {
        const size_t shown = std::min(network.size(), kListed);
        c += fmt::format(" ({}{})", fmt::join(network.begin(), network.begin() + static_cast<long>(shown), ", "),
                         network.size() > shown ? ", ..." : "");
      }
      counts.push_back(c);
    }
    parts.push_back(fmt::format("{}: {}", g, fmt::join(counts, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace dfccl::harness
