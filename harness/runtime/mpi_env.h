// MPI on the main thread: the world, node-local ranks (the GPU of a rank), the communicators of the tp x dp x pp
// groups, and collectives that poll with short sleeps instead of spinning (ranks that wait for the watchdog leave
// the cores to the ones still running: CI has 2 cores for 4 ranks).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "backends/backend.h"
#include "config/layout.h"

namespace dfccl::harness {

struct MpiWorld {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks of this rank's host (hosts.h): its GPU is local_rank % GPUs
  std::vector<std::string> hosts;      // per rank: its host identity (hosts.h)
  Layout layout;
  std::vector<CommSlot> slots;  // one per GroupKind (index = kind)
  std::vector<Membership> memberships;

  // hosts: rank_hosts() of every rank. Throws WorkloadError naming layout.* when the layout does not fit.
  static MpiWorld create(int tp, int dp, int pp, std::vector<std::string> hosts);
  void free();  // frees the group communicators (before MPI_Finalize)
};

// MPI_Barrier and MPI_Allreduce (in place) that wait by polling the nonblocking call with short sleeps. These and
// the string helpers below throw RunStopped (run_stop.h) when a signal came or a rank stopped responding.
void gentle_barrier(MPI_Comm comm);
void gentle_allreduce(void* inout, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
// Rank `root`'s string, on every rank.
std::string bcast_string(const std::string& s, int root, MPI_Comm comm);
// Every rank's string, on rank 0 (empty elsewhere).
std::vector<std::string> gather_strings(const std::string& s, MPI_Comm comm);
// Every rank's string, on every rank.
std::vector<std::string> allgather_strings(const std::string& s, MPI_Comm comm);
// Every rank's host identity (hosts.h: DFCCL_HOSTID, else MPI_Get_processor_name), on every rank of MPI_COMM_WORLD.
std::vector<std::string> rank_hosts();
// The same error text on every rank of MPI_COMM_WORLD ("" if no rank has one): the lowest failing rank's, prefixed
// with "rank R: " when the world has several ranks.
std::string agree_error(const std::string& local);

}  // namespace dfccl::harness
