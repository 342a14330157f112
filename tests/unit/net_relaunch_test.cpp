// A daemon that left stuck comes back when the network brings it something (lib/src/engine/engine.cpp, net_deliveries).
// Two forked ranks (host executor) with every connection on the network transport (DFCCL_NET_FORCE=1), a stuck exit
// after 1 ms and a relaunch back-off of a minute: rank 1 arrives 300 ms late, so rank 0's daemon leaves stuck and
// waits out the minute unless the data or credits that its proxies store relaunch it. Each rank runs a send/recv
// with the other and an all-reduce, both far larger than the connection's FIFO, and must finish them exactly within
// 20 s, after at least one stuck exit on rank 0 (else the case proves nothing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "forked_rank.h"

namespace {

constexpr size_t kCount = size_t(1) << 18;  // 1 MiB of int32: 32 slots of 32 KiB per connection

// Rank r's value at i in transfer t: distinct per rank, element and transfer.
int32_t value(int rank, size_t i, int t) { return int32_t(rank * 1000003 + int(i) * 7 + t * 13); }

// Queues the send/recv with the other rank and the all-reduce, and waits for the three (20 s each at most); false
// (after saying why) if any fails.
bool transfer_and_reduce(dfcclComm_t comm, int rank, std::vector<int32_t>& send, std::vector<int32_t>& recv,
                         std::vector<int32_t>& in, std::vector<int32_t>& sum) {
  const int peer = 1 - rank;
  dfcclRequest_t q[3] = {};
  bool ok = dfcclSend(send.data(), kCount, dfcclInt32, peer, comm, 0, nullptr, &q[0]) == dfcclSuccess &&
            dfcclRecv(recv.data(), kCount, dfcclInt32, peer, comm, 0, nullptr, &q[1]) == dfcclSuccess &&
            dfcclAllReduce(in.data(), sum.data(), kCount, dfcclInt32, dfcclSum, comm, 0, nullptr, &q[2]) == dfcclSuccess;
  for (dfcclRequest_t r : q) ok = ok && dfcclSynchronize(r, 20000) == dfcclSuccess;
  if (!ok) std::fprintf(stderr, "rank %d: %s\n", rank, dfcclGetLastError(nullptr));
  for (dfcclRequest_t r : q)
    if (r) dfcclRequestFree(r);
  return ok;
}

int run(dfcclComm_t comm, int rank) {
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int peer = 1 - rank;
  std::vector<int32_t> send(kCount), recv(kCount, -1), in(kCount), sum(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) {
    send[i] = value(rank, i, 0);
    in[i] = value(rank, i, 1);
  }
  if (!transfer_and_reduce(comm, rank, send, recv, in, sum)) return 1;
  for (size_t i = 0; i < kCount; ++i)
    if (recv[i] != value(peer, i, 0) || sum[i] != value(0, i, 1) + value(1, i, 1)) {
      std::fprintf(stderr, "rank %d: element %zu wrong\n", rank, i);
      return 1;
    }
  dfcclStats_t s = DFCCL_STATS_INITIALIZER;
  if (dfcclGetStats(comm, &s) != dfcclSuccess) return 1;
  std::printf("rank %d: %llu launches, %llu stuck exits\n", rank, (unsigned long long)s.daemonLaunches,
              (unsigned long long)s.daemonExitsStuck);
  if (rank == 0 && s.daemonExitsStuck == 0) {
    std::fprintf(stderr, "rank 0: no stuck exit: the case did not test the relaunch\n");
    return 1;
  }
  return dfcclCommDestroy(comm) == dfcclSuccess ? 0 : 1;
}

TEST(NetRelaunch, ADaemonThatLeftStuckReturnsWhenDataArrives) {
  dfccl::test::run_forked_ranks(
      2,
      [](int) {
        setenv("DFCCL_NET_FORCE", "1", 1);
        setenv("DFCCL_NET_SLOT_BYTES", "32768", 1);
        setenv("DFCCL_STUCK_NS", "1000000", 1);
        setenv("DFCCL_RELAUNCH_NS", "60000000000", 1);
        setenv("DFCCL_RELAUNCH_MAX_NS", "60000000000", 1);
      },
      run);
}

}  // namespace
