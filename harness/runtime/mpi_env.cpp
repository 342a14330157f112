#include "mpi_env.h"

#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

#include "config/workload.h"
#include "runtime/hosts.h"
#include "runtime/liveness.h"
#include "runtime/signals.h"

namespace dfccl::harness {

MpiWorld MpiWorld::create(int tp, int dp, int pp, std::vector<std::string> hosts) {
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  w.local_rank = node_local_rank(hosts, w.rank);
  w.local_size = node_local_size(hosts, w.rank);
  w.hosts = std::move(hosts);

  if (dp == 0) {
    if (w.size % (tp * pp) != 0)
      throw WorkloadError(fmt::format("layout.tp x layout.pp = {} does not divide the {} ranks", tp * pp, w.size));
    dp = w.size / (tp * pp);
  }
  w.layout = Layout{tp, dp, pp};
  if (w.layout.world() != w.size)
    throw WorkloadError(
        fmt::format("layout.tp x layout.dp x layout.pp = {} x {} x {} = {}, but mpirun started {} ranks", tp, dp, pp,
                    w.layout.world(), w.size));
  for (int k = 0; k < kNumGroupKinds; ++k) {
    Membership m = membership(w.layout, static_cast<GroupKind>(k), w.rank);
    CommSlot slot;
    MPI_Comm_split(MPI_COMM_WORLD, m.color, w.rank, &slot.mpi);
    MPI_Comm_rank(slot.mpi, &slot.rank);
    MPI_Comm_size(slot.mpi, &slot.size);
    slot.name = std::string(group_name(m.kind));
    w.slots.push_back(slot);
    w.memberships.push_back(std::move(m));
  }
  return w;
}

void MpiWorld::free() {
  for (auto& s : slots)
    if (s.mpi != MPI_COMM_NULL) MPI_Comm_free(&s.mpi);
  slots.clear();
}

namespace {
// Polls req until it completes. Throws RunStopped when a signal came or a rank stopped responding (checked every
// 100 ms): the request is then left pending, and the caller must make no further MPI call but exit.
void wait_gently(MPI_Request& req) {
  int done = 0;
  auto pause = std::chrono::microseconds(20);
  auto next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (true) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    throw_if_signalled();
    if (std::chrono::steady_clock::now() >= next_check) {
      liveness::throw_if_stalled();
      next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}
}  // namespace

void gentle_barrier(MPI_Comm comm) {
  MPI_Request req;
  MPI_Ibarrier(comm, &req);
  wait_gently(req);
}

void gentle_allreduce(void* inout, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  MPI_Request req;
  MPI_Iallreduce(MPI_IN_PLACE, inout, count, type, op, comm, &req);
  wait_gently(req);
}

std::string bcast_string(const std::string& s, int root, MPI_Comm comm) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  long long n = rank == root ? static_cast<long long>(s.size()) : 0;
  MPI_Request req;
  MPI_Ibcast(&n, 1, MPI_LONG_LONG, root, comm, &req);
  wait_gently(req);
  std::string out = rank == root ? s : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) {
    MPI_Ibcast(out.data(), static_cast<int>(n), MPI_CHAR, root, comm, &req);
    wait_gently(req);
  }
  return out;
}

std::vector<std::string> gather_strings(const std::string& s, MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int n = static_cast<int>(s.size());
  std::vector<int> lens(size);
  MPI_Request req;
  MPI_Igather(&n, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm, &req);
  wait_gently(req);
  std::vector<int> displs(size, 0);
  int total = 0;
  for (int i = 0; i < size; ++i) {
    displs[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<size_t>(rank == 0 ? total : 0), '\0');
  MPI_Igatherv(s.data(), n, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, comm, &req);
  wait_gently(req);
  std::vector<std::string> out;
  if (rank == 0)
    for (int i = 0; i < size; ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

std::vector<std::string> allgather_strings(const std::string& s, MPI_Comm comm) {
  std::string joined;
  for (const auto& one : gather_strings(s, comm)) joined += one + '\0';  // rank 0's list; strings hold no NUL
  joined = bcast_string(joined, 0, comm);
  std::vector<std::string> out;
  for (size_t at = 0; at < joined.size();) {
    const size_t end = joined.find('\0', at);
    out.push_back(joined.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::vector<std::string> rank_hosts() {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  return allgather_strings(host_identity(std::getenv("DFCCL_HOSTID"), std::string(name, static_cast<size_t>(len))),
                           MPI_COMM_WORLD);
}

std::string agree_error(const std::string& local) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int who = local.empty() ? INT_MAX : rank;
  gentle_allreduce(&who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (who == INT_MAX) return "";
  std::string msg = bcast_string(local, who, MPI_COMM_WORLD);
  return size > 1 ? fmt::format("rank {}: {}", who, msg) : msg;
}

}  // namespace dfccl::harness
