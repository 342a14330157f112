// Persistent collectives' lanes, made on first use (lib/src/transport/persistent.h): a prepare allocates and posts the
// rank's lane without waiting, the first start maps the neighbours' (waiting, bounded, for their prepare), ranks may
// prepare ids in any order, and a shared-memory lane's name is gone once its readers mapped it. Host executor.
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "forked_rank.h"
#include "gpu_check.h"
#include "sum_inputs.h"

namespace {

using dfccl::test::iota_input;
using dfccl::test::wrong_sum;

dfcclConfig_t host_config(int init_timeout_ms = -1) {
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = dfcclExecutorHost;
  cfg.initTimeoutMs = init_timeout_ms;
  return cfg;
}

// Shared-memory names of this process's regions still in /dev/shm (dfccl-rg-<pid namespace>-<pid>-...).
int own_region_names() {
  const std::string pid = "-" + std::to_string(getpid()) + "-";
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      const size_t ns_end = name.rfind("dfccl-rg-", 0) == 0 ? name.find('-', 9) : std::string::npos;
      n += ns_end != std::string::npos && name.compare(ns_end, pid.size(), pid) == 0;
    }
    closedir(d);
  }
  return n;
}

// Rank 0 prepares and starts an id 300 ms before rank 1 prepares it: rank 0's start waits in the call for rank 1's
// lane, and both finish exactly.
TEST(PersistentLanes, AFirstStartWaitsForTheNeighboursPrepare) {
  dfcclComm_t comms[2] = {};
  const dfcclConfig_t cfg = host_config();
  ASSERT_EQ(dfcclCommInitAllConfig(comms, 2, nullptr, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);
  const size_t n = 5000;
  std::vector<int32_t> in0 = iota_input(n, 0), in1 = iota_input(n, 1), out0(n, -1), out1(n, -1);
  dfcclPersistent_t p0 = nullptr, p1 = nullptr;
  dfcclRequest_t q0 = nullptr, q1 = nullptr;
  double start_ms = 0;
  std::thread t([&] {
    ASSERT_EQ(dfcclPrepareAllReduce(n, dfcclInt32, dfcclSum, comms[0], 4, &p0), dfcclSuccess);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(dfcclStart(p0, in0.data(), out0.data(), 0, nullptr, &q0), dfcclSuccess) << dfcclGetLastError(nullptr);
    start_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(dfcclPrepareAllReduce(n, dfcclInt32, dfcclSum, comms[1], 4, &p1), dfcclSuccess);
  ASSERT_EQ(dfcclStart(p1, in1.data(), out1.data(), 0, nullptr, &q1), dfcclSuccess) << dfcclGetLastError(nullptr);
  t.join();
  ASSERT_EQ(dfcclSynchronize(q0, 10000), dfcclSuccess) << dfcclGetLastError(nullptr);
  ASSERT_EQ(dfcclSynchronize(q1, 10000), dfcclSuccess) << dfcclGetLastError(nullptr);
  EXPECT_GE(start_ms, 200) << "rank 0's start did not wait for rank 1's lane";
  EXPECT_EQ(wrong_sum(out0, 2), 0u);
  EXPECT_EQ(wrong_sum(out1, 2), 0u);
  for (auto q : {q0, q1}) dfcclRequestFree(q);
  for (auto p : {p0, p1}) ASSERT_EQ(dfcclPersistentFree(p), dfcclSuccess);
  for (auto c : comms) ASSERT_EQ(dfcclCommDestroy(c), dfcclSuccess);
}

// An id that rank 1 never prepares: rank 0's start gives up after the init timeout naming rank 1, queues nothing
// (an ordinary all-reduce then matches on every rank as if the start had not been made), and destroy returns.
TEST(PersistentLanes, AnIdAPeerNeverPreparesTimesOutNamingIt) {
  dfcclComm_t comms[3] = {};
  const dfcclConfig_t cfg = host_config(400);
  ASSERT_EQ(dfcclCommInitAllConfig(comms, 3, nullptr, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);
  const size_t n = 1000;
  std::vector<int32_t> in = iota_input(n, 0), out(n);
  dfcclPersistent_t p = nullptr;
  ASSERT_EQ(dfcclPrepareAllReduce(n, dfcclInt32, dfcclSum, comms[0], 1, &p), dfcclSuccess);
  dfcclRequest_t q = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(dfcclStart(p, in.data(), out.data(), 0, nullptr, &q), dfcclTimeout);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::string err = dfcclGetLastError(nullptr);
  EXPECT_NE(err.find("rank 1 of 3 has not prepared it"), std::string::npos) << err;
  EXPECT_EQ(q, nullptr);
  EXPECT_GE(ms, 350);
  EXPECT_LT(ms, 3000);
  std::vector<std::vector<int32_t>> ins, outs(3, std::vector<int32_t>(n, -1));
  std::vector<dfcclRequest_t> reqs(3);
  for (int r = 0; r < 3; ++r) ins.push_back(iota_input(n, r));
  for (int r = 0; r < 3; ++r)
    ASSERT_EQ(dfcclAllReduce(ins[r].data(), outs[r].data(), n, dfcclInt32, dfcclSum, comms[r], 0, nullptr, &reqs[r]),
              dfcclSuccess);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(dfcclSynchronize(reqs[r], 10000), dfcclSuccess) << dfcclGetLastError(nullptr);
    EXPECT_EQ(wrong_sum(outs[r], 3), 0u) << "rank " << r;
    dfcclRequestFree(reqs[r]);
  }
  ASSERT_EQ(dfcclPersistentFree(p), dfcclSuccess);
  for (auto c : comms) ASSERT_EQ(dfcclCommDestroy(c), dfcclSuccess);
}

// A start that rank 1 has not made yet, after an ordinary all-reduce that both ranks ran: its missing ranks are
// those of the persistent id's start #0 (rank 1), not those of the communicator's collective #0 (none).
TEST(PersistentLanes, APendingStartNamesTheRankThatHasNotStartedIt) {
  dfcclComm_t comms[2] = {};
  const dfcclConfig_t cfg = host_config();
  ASSERT_EQ(dfcclCommInitAllConfig(comms, 2, nullptr, &cfg), dfcclSuccess) << dfcclGetLastError(nullptr);
  const size_t n = 256;
  std::vector<int32_t> in = iota_input(n, 0), out(n), out1(n);
  dfcclRequest_t q[2] = {};
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(dfcclAllReduce(in.data(), r ? out1.data() : out.data(), n, dfcclInt32, dfcclSum, comms[r], 0, nullptr,
                             &q[r]),
              dfcclSuccess);
  for (auto x : q) {
    ASSERT_EQ(dfcclSynchronize(x, 10000), dfcclSuccess);
    dfcclRequestFree(x);
  }
  dfcclPersistent_t p[2] = {};
  for (int r = 0; r < 2; ++r) ASSERT_EQ(dfcclPrepareAllReduce(n, dfcclInt32, dfcclSum, comms[r], 3, &p[r]), dfcclSuccess);
  ASSERT_EQ(dfcclStart(p[0], in.data(), out.data(), 0, nullptr, &q[0]), dfcclSuccess) << dfcclGetLastError(nullptr);
  int ranks[4] = {}, count = -1;
  ASSERT_EQ(dfcclRequestGetMissingRanks(q[0], ranks, 4, &count), dfcclSuccess) << dfcclGetLastError(nullptr);
  ASSERT_EQ(count, 1);
  EXPECT_EQ(ranks[0], 1);
  ASSERT_EQ(dfcclStart(p[1], in.data(), out1.data(), 0, nullptr, &q[1]), dfcclSuccess) << dfcclGetLastError(nullptr);
  for (auto x : q) {
    ASSERT_EQ(dfcclSynchronize(x, 10000), dfcclSuccess);
    dfcclRequestFree(x);
  }
  for (auto x : p) ASSERT_EQ(dfcclPersistentFree(x), dfcclSuccess);
  for (auto c : comms) ASSERT_EQ(dfcclCommDestroy(c), dfcclSuccess);
}

// A rank's buffers on the host, or on its GPU for the CUDA executor (allocated in the forked child).
struct Buffer {
  Buffer(size_t count, bool cuda) : host(count), cuda(cuda) {
    if (cuda && cudaMalloc(&dev, count * sizeof(int32_t)) != cudaSuccess) dev = nullptr;
  }
  ~Buffer() {
    if (dev) cudaFree(dev);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  int32_t* ptr() { return cuda ? static_cast<int32_t*>(dev) : host.data(); }
  bool put() { return !cuda || cudaMemcpy(dev, host.data(), host.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess; }
  bool get() { return !cuda || cudaMemcpy(host.data(), dev, host.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess; }
  std::vector<int32_t> host;
  bool cuda;
  void* dev = nullptr;
};

constexpr int kAnyOrderRanks = 3, kAnyOrderIds = 3;
constexpr size_t kAnyOrderSizes[kAnyOrderIds] = {7, 3000, 70000};

// One round of any_order_rank: starts ids 0-2 in this rank's order and checks each result. 0 when all held.
int any_order_round(dfcclPersistent_t* p, int rank, bool cuda, int iter) {
  std::deque<Buffer> in, out;  // never moved: each owns its device memory
  for (int id = 0; id < kAnyOrderIds; ++id) {
    in.emplace_back(kAnyOrderSizes[id], cuda);
    out.emplace_back(kAnyOrderSizes[id], cuda);
    in.back().host = iota_input(kAnyOrderSizes[id], rank);
    if (!in.back().put() || !out.back().put()) return 5;
  }
  dfcclRequest_t q[kAnyOrderIds] = {};
  for (int k = 0; k < kAnyOrderIds; ++k) {
    const int id = (kAnyOrderIds - 1 - k + 2 * rank) % kAnyOrderIds;
    if (dfcclStart(p[id], in[id].ptr(), out[id].ptr(), 0, nullptr, &q[id]) != dfcclSuccess) {
      std::fprintf(stderr, "rank %d: start %d: %s\n", rank, id, dfcclGetLastError(nullptr));
      return 1;
    }
  }
  for (int id = 0; id < kAnyOrderIds; ++id) {
    if (dfcclSynchronize(q[id], 10000) != dfcclSuccess || !out[id].get() || wrong_sum(out[id].host, kAnyOrderRanks) != 0) {
      std::fprintf(stderr, "rank %d: id %d iteration %d: %s\n", rank, id, iter, dfcclGetLastError(nullptr));
      return 1;
    }
    dfcclRequestFree(q[id]);
  }
  return 0;
}

// One of three forked ranks: prepares ids 0-2 in an order of its own and starts them in another order of its own,
// 20 times, checking each result; after the first round no name of its regions is left in /dev/shm (its neighbours
// mapped its lanes). Returns 0 when all held.
int any_order_rank(dfcclComm_t comm, int rank, bool cuda) {
  dfcclPersistent_t p[kAnyOrderIds] = {};
  for (int k = 0; k < kAnyOrderIds; ++k) {
    const int id = (k + rank) % kAnyOrderIds;
    if (dfcclPrepareAllReduce(kAnyOrderSizes[id], dfcclInt32, dfcclSum, comm, id, &p[id]) != dfcclSuccess) return 1;
  }
  for (int iter = 0; iter < 20; ++iter) {
    if (int rc = any_order_round(p, rank, cuda, iter); rc != 0) return rc;
    if (iter == 0 && own_region_names() != 0) {
      std::fprintf(stderr, "rank %d: %d region names left in /dev/shm\n", rank, own_region_names());
      return 1;
    }
  }
  for (auto x : p) dfcclPersistentFree(x);
  return dfcclCommDestroy(comm) == dfcclSuccess ? 0 : 1;
}

TEST(PersistentLanes, ProcessesPrepareAndStartIdsInAnyOrder) {
  dfccl::test::run_forked_ranks(3, [](int) {}, [](dfcclComm_t comm, int rank) { return any_order_rank(comm, rank, false); });
}

// The same with three ranks on GPU 0 (CUDA IPC lanes). The GPU check runs in a child, so that this process forks its
// ranks before any CUDA call.
TEST(PersistentLanes, ProcessesPrepareAndStartIdsInAnyOrderOnTheCudaExecutor) {
  const int verdict = dfccl::test::gpus_or_skip_in_child(1);
  if (verdict == 77) GTEST_SKIP() << "no GPU";
  ASSERT_EQ(verdict, 0) << "DFCCL_REQUIRE_GPUS: no usable GPU";
  dfccl::test::run_forked_ranks(
      3, [](int) {}, [](dfcclComm_t comm, int rank) { return any_order_rank(comm, rank, true); }, dfcclExecutorCuda);
}

}  // namespace
