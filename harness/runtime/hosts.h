// Where the ranks run: each rank's host as the dfccl library sees it (DFCCL_HOSTID when set, else the processor
// name), and what follows from it: the hosts in order, each rank's node-local rank (its GPU), whether the run may
// span them, and the console's lines. Pure functions; the MPI exchange is in mpi_env.cpp.
#pragma once

#include <string>
#include <vector>

#include "output/results.h"

namespace dfccl::harness {

// This process's host identity: `dfccl_hostid` (the variable DFCCL_HOSTID) when not empty, else `processor_name`.
std::string host_identity(const char* dfccl_hostid, const std::string& processor_name);

// The distinct hosts of host_of_rank, in the order of their first rank.
std::vector<std::string> unique_hosts(const std::vector<std::string>& host_of_rank);

// `rank`'s place among the ranks of its host (ranks in world order), and how many ranks its host has.
int node_local_rank(const std::vector<std::string>& host_of_rank, int rank);
int node_local_size(const std::vector<std::string>& host_of_rank, int rank);

// Whether a backend runs on the dfccl library (dfccl, dfccl-blocking, host, host-blocking), whose communicators
// need its network transport to span hosts (nccl brings its own).
bool uses_dfccl_library(const std::string& backend);

// "" when the run can go ahead: every rank on one host, or the library has the network transport (network), or no
// backend of the run uses the library. Else the refusal, naming the hosts and the backends.
std::string multi_host_problem(const std::vector<std::string>& host_of_rank, bool network,
                               const std::vector<std::string>& backends);

// The console's hosts line: "1 host: a (ranks 0-3)", "2 hosts: a (ranks 0-1), b (ranks 2-3)"; ranks listed as
// ranges ("0-1,4").
std::string hosts_line(const std::vector<std::string>& host_of_rank);

// dfcclTransport_t as the files name it: peer_memory, host_memory, shared_memory, network ("unknown N" otherwise).
std::string transport_name(int transport);

// The console's hops line of one backend: per group, how many ring hops use each transport, with the network hops
// listed (at most 8, then "..."): "world: 2 shared_memory, 2 network (1->2, 3->0)".
std::string hops_line(const std::vector<HopRow>& hops);

}  // namespace dfccl::harness
