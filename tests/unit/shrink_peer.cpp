// shrink_peer: one rank of the shrink tests across fake hosts (tests/netns/shrink_netns_test.sh starts one per rank,
// two ranks per host).
//   shrink_peer SCENARIO --rank R --nranks N --victim V --dir D [--late L]
// Rank 0 makes the unique id (its process hosts the rendezvous root) and writes it (hex) to D/id; the others wait up
// to 30 s for it. Every rank inits (host executor) and all-reduces exactly in a loop; it writes D/ready<R> after its
// first one. Then:
//   kill    the victim raises SIGKILL after its 20th all-reduce (V = 0: the rank whose process hosts the root);
//           every other rank's all-reduce fails with dfcclRemoteError naming V; it shrinks with excludeRanks NULL;
//   late    as kill, and rank L dies 300 ms after its failure instead of shrinking (its peers are in the shrink);
//   exclude every rank stops after 20 all-reduces and shrinks with excludeRanks {V}: V (alive) gets NULL and keeps
//           its old communicator (its shrink socket open) 1500 ms longer; the survivors' first collective on the
//           shrunk communicator must complete within 1000 ms of their call (they do not wait for V);
// then each survivor checks the new communicator (its size, its rank: the survivors in their old order), runs 20
// exact all-reduces and an all-gather of the old ranks on it, and prints "rank R: ok ... ms" with the time from its
// failure (kill, late) or its call (exclude) to its first completed collective on the shrunk communicator.
// Exit codes: 0 every check held, 1 usage or set-up error, 2 a check failed ("rank R: FAIL ..." on stderr).
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "peer_files.h"
#include "unique_id_hex.h"

namespace {

using dfccl::test::read_file;
using dfccl::test::write_file;

constexpr size_t kCount = 4096;
constexpr int kWaitMs = 20000;

struct Args {
  std::string scenario, dir;
  int rank = -1, nranks = 0, victim = 1, late = -1;
};

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

int fail(const Args& a, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL %s\n", a.rank, what.c_str());
  return 2;
}

// An exact all-reduce of `value` on comm: its status; *wrong counts the elements that differ from `want`.
dfcclResult_t all_reduce(dfcclComm_t comm, int32_t value, int32_t want, int* wrong) {
  std::vector<int32_t> in(kCount, value), out(kCount, -1);
  dfcclRequest_t q = nullptr;
  dfcclResult_t st = dfcclAllReduce(in.data(), out.data(), kCount, dfcclInt32, dfcclSum, comm, 0, nullptr, &q);
  if (st == dfcclSuccess) st = dfcclSynchronize(q, kWaitMs);
  if (q) dfcclRequestFree(q);
  if (st == dfcclSuccess)
    for (int32_t v : out) *wrong += v != want;
  return st;
}

// The survivor's checks of the shrunk communicator nc, whose members are `members` (old ranks, in order).
int check_shrunk(const Args& a, dfcclComm_t nc, const std::vector<int>& members, double t0) {
  const int n = int(members.size());
  int size = 0, new_rank = -1, wrong = 0, want_rank = 0;
  dfcclCommCount(nc, &size);
  dfcclCommUserRank(nc, &new_rank);
  while (want_rank < n && members[size_t(want_rank)] != a.rank) ++want_rank;
  if (size != n || new_rank != want_rank)
    return fail(a, "the shrunk communicator is rank " + std::to_string(new_rank) + " of " + std::to_string(size));
  int32_t sum = 0;
  for (int q : members) sum += q + 1;
  if (all_reduce(nc, a.rank + 1, sum, &wrong) != dfcclSuccess)
    return fail(a, std::string("first collective of the shrunk communicator: ") + dfcclGetLastError(nullptr));
  const double first_ms = now_ms() - t0;
  if (a.scenario == "exclude" && first_ms > 1000)
    return fail(a, "the first collective came " + std::to_string(int(first_ms)) + " ms after the call (waited for V?)");
  for (int i = 2; i <= 20; ++i)
    if (all_reduce(nc, (a.rank + 1) * i, sum * i, &wrong) != dfcclSuccess)
      return fail(a, std::string("all-reduce on the shrunk communicator: ") + dfcclGetLastError(nullptr));
  std::vector<int32_t> mine(1, a.rank), all(size_t(n), -1);
  dfcclRequest_t q = nullptr;
  if (dfcclAllGather(mine.data(), all.data(), 1, dfcclInt32, nc, 0, nullptr, &q) != dfcclSuccess ||
      dfcclSynchronize(q, kWaitMs) != dfcclSuccess)
    return fail(a, std::string("all-gather on the shrunk communicator: ") + dfcclGetLastError(nullptr));
  dfcclRequestFree(q);
  for (int k = 0; k < n; ++k) wrong += all[size_t(k)] != members[size_t(k)];
  if (wrong) return fail(a, std::to_string(wrong) + " wrong elements");
  std::printf("rank %d: ok, rank %d of %d; failure or call to first collective %.0f ms\n", a.rank, new_rank, n,
              first_ms);
  dfcclCommDestroy(nc);
  return 0;
}

int run(const Args& a) {
  dfcclUniqueId id;
  if (a.rank == 0) {
    if (dfcclGetUniqueId(&id) != dfcclSuccess) return fail(a, "dfcclGetUniqueId");
    write_file(a.dir + "/id", dfccl::test::id_to_hex(id));
  } else if (!dfccl::test::id_from_hex(read_file(a.dir + "/id", 30000), &id)) {
    return fail(a, "no unique id within 30 s");
  }
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  dfcclComm_t comm = nullptr;
  if (dfcclCommInitRankConfig(&comm, a.nranks, id, a.rank, &cfg) != dfcclSuccess)
    return fail(a, std::string("init: ") + dfcclGetLastError(nullptr));
  const bool exclude = a.scenario == "exclude";
  int wrong = 0;
  dfcclResult_t st = dfcclSuccess;
  const int32_t all_sum = a.nranks * (a.nranks + 1) / 2;
  for (int i = 1; st == dfcclSuccess && !(exclude && i > 20); ++i) {
    st = all_reduce(comm, (a.rank + 1) * i, all_sum * i, &wrong);
    if (i == 1) write_file(a.dir + "/ready" + std::to_string(a.rank), "1");
    if (i == 20 && a.rank == a.victim && !exclude) raise(SIGKILL);
  }
  if (wrong) return fail(a, std::to_string(wrong) + " wrong elements before the failure");
  const double t0 = now_ms();
  if (!exclude) {
    const std::string err = dfcclGetLastError(nullptr);
    if (st != dfcclRemoteError || err.find("rank " + std::to_string(a.victim) + " ") == std::string::npos)
      return fail(a, std::string("the failure: ") + dfcclGetErrorString(st) + ": " + err);
    if (a.rank == a.late) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      raise(SIGKILL);
    }
  }
  dfcclComm_t nc = nullptr;
  const int excluded[1] = {a.victim};
  if (dfcclCommShrink(comm, exclude ? excluded : nullptr, exclude ? 1 : 0, &nc, nullptr) != dfcclSuccess)
    return fail(a, std::string("dfcclCommShrink: ") + dfcclGetLastError(nullptr));
  if (a.rank == a.victim) {
    if (nc) return fail(a, "the excluded rank got a communicator");
    std::printf("rank %d: ok, excluded (NULL)\n", a.rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    dfcclCommDestroy(comm);
    return 0;
  }
  if (!nc) return fail(a, "a survivor got NULL");
  dfcclCommDestroy(comm);
  std::vector<int> members;
  for (int q = 0; q < a.nranks; ++q)
    if (q != a.victim && q != a.late) members.push_back(q);
  return check_shrunk(a, nc, members, t0);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (argc < 2) return 1;
  a.scenario = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--rank") a.rank = std::atoi(v.c_str());
    else if (k == "--nranks") a.nranks = std::atoi(v.c_str());
    else if (k == "--victim") a.victim = std::atoi(v.c_str());
    else if (k == "--late") a.late = std::atoi(v.c_str());
    else if (k == "--dir") a.dir = v;
    else return std::fprintf(stderr, "shrink_peer: unknown option %s\n", k.c_str()), 1;
  }
  if (a.rank < 0 || a.nranks < 2 || a.dir.empty() ||
      (a.scenario != "kill" && a.scenario != "late" && a.scenario != "exclude"))
    return std::fprintf(stderr, "usage: shrink_peer kill|late|exclude --rank R --nranks N --victim V --dir D\n"), 1;
  return run(a);
}
