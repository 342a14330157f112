// Where the ranks run (runtime/hosts.h): the host identity agrees with the library's (DFCCL_HOSTID first), node-local
// ranks pick GPUs per host, the multi-host refusal applies only to a library without the network transport, and
// the console's hosts and hops lines.
#include <gtest/gtest.h>

#include "runtime/hosts.h"

using namespace dfccl::harness;

TEST(Hosts, IdentityIsDfcclHostidElseTheProcessorName) {
  EXPECT_EQ(host_identity("node1", "machine"), "node1");
  EXPECT_EQ(host_identity("", "machine"), "machine");
  EXPECT_EQ(host_identity(nullptr, "machine"), "machine");
}

TEST(Hosts, NodeLocalRanksCountPerHostInWorldOrder) {
  const std::vector<std::string> h = {"a", "b", "a", "b", "b", "c"};
  EXPECT_EQ(unique_hosts(h), (std::vector<std::string>{"a", "b", "c"}));
  const int local[] = {0, 0, 1, 1, 2, 0}, size[] = {2, 3, 2, 3, 3, 1};
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(node_local_rank(h, r), local[r]) << "rank " << r;
    EXPECT_EQ(node_local_size(h, r), size[r]) << "rank " << r;
  }
}

TEST(Hosts, SpanningHostsNeedsTheNetworkTransportForDfcclBackends) {
  const std::vector<std::string> one = {"a", "a"}, two = {"a", "b", "a"};
  EXPECT_EQ(multi_host_problem(one, false, {"host"}), "");
  EXPECT_EQ(multi_host_problem({}, false, {"host"}), "");
  EXPECT_EQ(multi_host_problem(two, true, {"host", "dfccl"}), "");
  EXPECT_EQ(multi_host_problem(two, false, {"nccl"}), "");  // NCCL has its own network transport
  const std::string p = multi_host_problem(two, false, {"nccl", "host", "dfccl-blocking"});
  EXPECT_NE(p.find("2 hosts (a, b)"), std::string::npos) << p;
  EXPECT_NE(p.find("built without the network transport (UCX)"), std::string::npos) << p;
  EXPECT_NE(p.find("backend host, dfccl-blocking cannot"), std::string::npos) << p;
  EXPECT_EQ(p.find("nccl,"), std::string::npos) << p;
}

TEST(Hosts, ConsoleLines) {
  EXPECT_EQ(hosts_line({"a", "a", "a", "a"}), "1 host: a (ranks 0-3)");
  EXPECT_EQ(hosts_line({"a", "a", "b", "a", "c"}), "3 hosts: a (ranks 0-1,3), b (rank 2), c (rank 4)");
  EXPECT_EQ(transport_name(2), "shared_memory");
  EXPECT_EQ(transport_name(3), "network");
  EXPECT_EQ(transport_name(9), "unknown 9");
  std::vector<HopRow> hops;
  for (int r = 0; r < 4; ++r)
    hops.push_back(HopRow{"world", r, (r + 1) % 4, r % 2 ? "network" : "shared_memory", "", ""});
  hops.push_back(HopRow{"tp", 0, 1, "shared_memory", "", ""});
  EXPECT_EQ(hops_line(hops), "world: 2 network (1->2, 3->0), 2 shared_memory; tp: 1 shared_memory");
  std::vector<HopRow> many;
  for (int r = 0; r < 10; ++r) many.push_back(HopRow{"world", r, (r + 1) % 10, "network", "", ""});
  EXPECT_EQ(hops_line(many), "world: 10 network (0->1, 1->2, 2->3, 3->4, 4->5, 5->6, 6->7, 7->8, ...)");
}
