// The engine on 2 GPUs (CUDA executor): total preemption, implicit synchronizations while collectives wait on an
// absent peer (cudaDeviceSynchronize, cudaFree, cudaMallocHost/cudaFreeHost, cudaHostRegister, the first launch of
// a lazily loaded kernel), stream ordering of inputs and completions, the disorder stress (500 trials, 0 hangs,
// 0 wrong) and its blocking-mode twin (hangs, detected and recovered), abort, and device-memory argument checks.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "app_kernels.h"
#include "group.h"

namespace dfccl::test {
namespace {

using Clock = std::chrono::steady_clock;
#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

// Runs f on another thread; if it does not return within `limit`, the test fails and the process exits (a hung
// CUDA call cannot be recovered).
template <class F>
void must_return(const char* what, std::chrono::milliseconds limit, F&& f) {
  auto fut = std::async(std::launch::async, std::forward<F>(f));
  if (fut.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << what << " did not return within " << limit.count() << " ms";
    std::fflush(stdout);
    std::_Exit(1);
  }
  fut.get();
}

// An int32 all-reduce buffer pair on one GPU, inputs set to a byte pattern.
struct DevBuf {
  int dev;
  size_t n;
  int32_t *in = nullptr, *out = nullptr;
  DevBuf(int d, size_t count, uint8_t pattern) : dev(d), n(count) {
    cudaSetDevice(dev);
    cudaMalloc(&in, n * 4);
    cudaMalloc(&out, n * 4);
    cudaMemset(in, pattern, n * 4);
    cudaMemset(out, 0xff, n * 4);
    cudaDeviceSynchronize();  // visible to the device before any stream's or host-ordered collective reads them
  }
  ~DevBuf() {
    cudaSetDevice(dev);
    cudaFree(in);
    cudaFree(out);
  }
  size_t wrong(int32_t expect) const {
    cudaSetDevice(dev);
    return count_not_equal(out, n, expect, nullptr);
  }
};

int32_t word(uint8_t b) { return int32_t(uint32_t(b) * 0x01010101u); }

TEST(CudaEngine, CollectiveSurvivesDaemonExitsUntilItsPeerArrives) {
  Group g(2, dfcclExecutorCuda);
  const size_t n = size_t(16) << 20;  // 64 MiB: rank 0 fills its connection slots and then waits
  DevBuf b0(0, n, 1), b1(1, n, 2);
  dfcclRequest_t r0 = nullptr, r1 = nullptr;
  cudaSetDevice(0);
  ASSERT_EQ(dfcclAllReduce(b0.in, b0.out, n, dfcclInt32, dfcclSum, g[0], 0, nullptr, &r0), dfcclSuccess);
  dfcclStats_t st = DFCCL_STATS_INITIALIZER;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(dfcclGetStats(g[0], &st), dfcclSuccess);
  } while ((st.daemonExitsStuck < 3 || st.daemonLaunches < 4) && Clock::now() < deadline);
  ASSERT_GE(st.daemonExitsStuck, 3u);
  cudaSetDevice(1);
  ASSERT_EQ(dfcclAllReduce(b1.in, b1.out, n, dfcclInt32, dfcclSum, g[1], 0, nullptr, &r1), dfcclSuccess);
  ASSERT_EQ(dfcclSynchronize(r0, 60000), dfcclSuccess);
  ASSERT_EQ(dfcclSynchronize(r1, 60000), dfcclSuccess);
  EXPECT_EQ(b0.wrong(word(1) + word(2)), 0u);
  EXPECT_EQ(b1.wrong(word(1) + word(2)), 0u);
  dfcclRequestInfo_t info = DFCCL_REQUEST_INFO_INITIALIZER;
  ASSERT_EQ(dfcclRequestGetInfo(r0, &info), dfcclSuccess);
  EXPECT_GT(info.preemptions, 0u);
  std::printf("[ gpu      ] total preemption: %lu launches, %lu stuck exits before the peer came; %u preemptions\n",
              (unsigned long)st.daemonLaunches, (unsigned long)st.daemonExitsStuck, info.preemptions);
  dfcclRequestFree(r0);
  dfcclRequestFree(r1);
}

enum class Sync { DeviceSynchronize, Free, MallocFreeHost, HostRegister, LazyKernel };
const char* sync_name(Sync s) {
  static const char* names[] = {"cudaDeviceSynchronize", "cudaFree", "cudaMallocHost/cudaFreeHost", "cudaHostRegister",
                                "first launch of a lazily loaded kernel"};
  return names[int(s)];
}

class ImplicitSync : public ::testing::TestWithParam<Sync> {};

TEST_P(ImplicitSync, ReturnsWhileAPeerIsAbsentAndTheCollectiveCompletes) {
  Group g(2, dfcclExecutorCuda);
  const size_t n = size_t(1) << 20;
  DevBuf b0(0, n, 3), b1(1, n, 4);
  cudaSetDevice(0);
  void* victim = nullptr;
  CUDA_OK(cudaMalloc(&victim, 1 << 20));
  std::vector<char> host(1 << 20);
  dfcclRequest_t r0 = nullptr, r1 = nullptr;
  ASSERT_EQ(dfcclAllReduce(b0.in, b0.out, n, dfcclInt32, dfcclSum, g[0], 0, nullptr, &r0), dfcclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the collective is running, waiting for rank 1
  const Sync kind = GetParam();
  const auto t0 = Clock::now();
  must_return(sync_name(kind), std::chrono::seconds(20), [&] {
    cudaSetDevice(0);
    switch (kind) {
      case Sync::DeviceSynchronize: EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess); break;
      case Sync::Free:
        EXPECT_EQ(cudaFree(victim), cudaSuccess);
        victim = nullptr;
        break;
      case Sync::MallocFreeHost: {
        void* p = nullptr;
        EXPECT_EQ(cudaMallocHost(&p, 64 << 20), cudaSuccess);
        EXPECT_EQ(cudaFreeHost(p), cudaSuccess);
        break;
      }
      case Sync::HostRegister:
        EXPECT_EQ(cudaHostRegister(host.data(), host.size(), cudaHostRegisterDefault), cudaSuccess);
        EXPECT_EQ(cudaHostUnregister(host.data()), cudaSuccess);
        break;
      case Sync::LazyKernel: {
        float* f = nullptr;
        EXPECT_EQ(cudaMalloc(&f, 4096), cudaSuccess);
        EXPECT_EQ(launch_never_loaded_kernel(f, 1024, nullptr), cudaSuccess);
        EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
        cudaFree(f);
        break;
      }
    }
  });
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  int done = 1;
  ASSERT_EQ(dfcclTest(r0, &done), dfcclSuccess);
  EXPECT_EQ(done, 0) << "rank 1 has not submitted yet";
  cudaSetDevice(1);
  ASSERT_EQ(dfcclAllReduce(b1.in, b1.out, n, dfcclInt32, dfcclSum, g[1], 0, nullptr, &r1), dfcclSuccess);
  ASSERT_EQ(dfcclSynchronize(r0, 30000), dfcclSuccess);
  ASSERT_EQ(dfcclSynchronize(r1, 30000), dfcclSuccess);
  EXPECT_EQ(b0.wrong(word(3) + word(4)), 0u);
  EXPECT_EQ(b1.wrong(word(3) + word(4)), 0u);
  std::printf("[ gpu      ] %s returned after %.2f ms with a collective pending on an absent peer\n", sync_name(kind),
              ms);
  dfcclRequestFree(r0);
  dfcclRequestFree(r1);
  if (victim) cudaFree(victim);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ImplicitSync,
                         ::testing::Values(Sync::DeviceSynchronize, Sync::Free, Sync::MallocFreeHost,
                                           Sync::HostRegister, Sync::LazyKernel));

// The harness's stress trial 21 (docs/lab/gpu-runs.md, runs 16-17): a lazy load (a device-wide barrier) makes the
// daemon leave; a collective and its stream wait issued after it need a new daemon, and the thread's next call is
// cudaFree, which waits for that stream wait and holds every other thread's kernel launch. dfcclWait must have
// made sure a daemon runs after the barrier (Engine::confirm_wait); the peer arrives 300 ms later.
TEST(CudaEngine, StreamWaitAfterALazyLoadThenCudaFree) {
  // The daemon must be running when the lazy load comes (the barrier is then pending until it leaves), so it must
  // not leave on its own while x waits for rank 0: a stuck threshold of 2 s for the engines of this test.
  setenv("DFCCL_STUCK_NS", "2000000000", 1);
  Group g(2, dfcclExecutorCuda);
  unsetenv("DFCCL_STUCK_NS");
  const size_t n = size_t(1) << 20;
  DevBuf x0(0, n, 5), x1(1, n, 6), y0(0, n, 7), y1(1, n, 8);
  cudaSetDevice(1);
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* victim = nullptr;
  float* f = nullptr;
  CUDA_OK(cudaMalloc(&victim, 1 << 20));
  CUDA_OK(cudaMalloc(&f, 4096));
  // Load the module of the application kernels (another kernel of it): the first launch of a kernel of a module
  // already loaded is what holds later device work until the daemon leaves; a kernel of a module not yet loaded
  // did not (runs 20-21: this test then saw no barrier).
  CUDA_OK(launch_spin_kernel(1000, s));
  CUDA_OK(cudaStreamSynchronize(s));
  dfcclRequest_t rx0 = nullptr, rx1 = nullptr, ry0 = nullptr, ry1 = nullptr;
  ASSERT_EQ(dfcclAllReduce(x1.in, x1.out, n, dfcclInt32, dfcclSum, g[1], 0, s, &rx1), dfcclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // rank 1's daemon runs, x waits for rank 0
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cudaSetDevice(0);
    EXPECT_EQ(dfcclAllReduce(x0.in, x0.out, n, dfcclInt32, dfcclSum, g[0], 0, nullptr, &rx0), dfcclSuccess);
    EXPECT_EQ(dfcclAllReduce(y0.in, y0.out, n, dfcclInt32, dfcclSum, g[0], 0, nullptr, &ry0), dfcclSuccess);
  });
  const auto t0 = Clock::now();
  must_return("lazy load, collective, dfcclWait, cudaFree", std::chrono::seconds(20), [&] {
    cudaSetDevice(1);
    EXPECT_EQ(launch_second_never_loaded_kernel(f, 1024, s), cudaSuccess);
    EXPECT_EQ(dfcclAllReduce(y1.in, y1.out, n, dfcclInt32, dfcclSum, g[1], 0, s, &ry1), dfcclSuccess);
    EXPECT_EQ(dfcclWait(ry1, s), dfcclSuccess);
    EXPECT_EQ(cudaFree(victim), cudaSuccess);
  });
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  peer.join();
  EXPECT_GE(ms, 250.0) << "cudaFree must have waited for the stream wait, hence for rank 0";
  for (dfcclRequest_t r : {rx0, rx1, ry0, ry1}) ASSERT_EQ(dfcclSynchronize(r, 30000), dfcclSuccess);
  EXPECT_EQ(x0.wrong(word(5) + word(6)), 0u);
  EXPECT_EQ(x1.wrong(word(5) + word(6)), 0u);
  EXPECT_EQ(y0.wrong(word(7) + word(8)), 0u);
  EXPECT_EQ(y1.wrong(word(7) + word(8)), 0u);
  dfcclStats_t st = DFCCL_STATS_INITIALIZER;
  ASSERT_EQ(dfcclGetStats(g[1], &st), dfcclSuccess);
  EXPECT_GE(st.standbyLaunches, 1u) << "dfcclWait saw no pending barrier: the test did not reach its case";
  std::printf("[ gpu      ] lazy load, stream wait, cudaFree: returned after %.1f ms (peer after 300 ms); %lu "
              "standby launches, %lu launches\n",
              ms, (unsigned long)st.standbyLaunches, (unsigned long)st.daemonLaunches);
  for (dfcclRequest_t r : {rx0, rx1, ry0, ry1}) dfcclRequestFree(r);
  cudaSetDevice(1);
  cudaFree(f);
  cudaStreamDestroy(s);
}

// The diagnostic dump is asked for when something hangs, and its device-side reads go through the control stream,
// which a pending cudaFree holds until the daemon leaves (run 102: a harness stuck in a dump). Here rank
// 1's daemon stays for a stream wait whose peer is absent while another thread is inside cudaFree: the dump must
// return (at most Engine::kDumpDeviceWaitMs for the device's side), whether or not that cudaFree holds its reads.
TEST(CudaEngine, DebugDumpReturnsWhileCudaFreeWaitsForTheDaemon) {
  setenv("DFCCL_STUCK_NS", "2000000000", 1);  // the daemon must not leave on its own while x waits for rank 0
  Group g(2, dfcclExecutorCuda);
  unsetenv("DFCCL_STUCK_NS");
  const size_t n = size_t(1) << 16;
  DevBuf x0(0, n, 3), x1(1, n, 4);
  cudaSetDevice(1);
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* victim = nullptr;
  CUDA_OK(cudaMalloc(&victim, 1 << 20));
  dfcclRequest_t rx0 = nullptr, rx1 = nullptr;
  ASSERT_EQ(dfcclAllReduce(x1.in, x1.out, n, dfcclInt32, dfcclSum, g[1], 0, s, &rx1), dfcclSuccess);
  ASSERT_EQ(dfcclWait(rx1, s), dfcclSuccess);
  std::thread freer([&] {
    cudaSetDevice(1);
    EXPECT_EQ(cudaFree(victim), cudaSuccess);  // waits for the stream wait, hence for rank 0
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::string dump;
  const auto t0 = Clock::now();
  must_return("dfcclDebugDump during cudaFree", std::chrono::seconds(10), [&] {
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(dfcclDebugDump(g[1], 1), dfcclSuccess);
    dump = ::testing::internal::GetCapturedStderr();
  });
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_NE(dump.find("host slot"), std::string::npos) << dump;
  const bool held = dump.find("device state not read within") != std::string::npos;
  EXPECT_TRUE(held || dump.find("device state\n") != std::string::npos) << dump;
  cudaSetDevice(0);
  ASSERT_EQ(dfcclAllReduce(x0.in, x0.out, n, dfcclInt32, dfcclSum, g[0], 0, nullptr, &rx0), dfcclSuccess);
  freer.join();
  for (dfcclRequest_t r : {rx0, rx1}) ASSERT_EQ(dfcclSynchronize(r, 30000), dfcclSuccess);
  EXPECT_EQ(x0.wrong(word(3) + word(4)), 0u);
  EXPECT_EQ(x1.wrong(word(3) + word(4)), 0u);
  std::printf("[ gpu      ] debug dump during cudaFree: returned after %.1f ms, device state %s\n", ms,
              held ? "held (not read)" : "read");
  for (dfcclRequest_t r : {rx0, rx1}) dfcclRequestFree(r);
  cudaSetDevice(1);
  cudaStreamDestroy(s);
}

TEST(CudaEngine, InputsAndCompletionsAreStreamOrdered) {
  Group g(2, dfcclExecutorCuda);
  const size_t n = size_t(4) << 20;
  DevBuf b0(0, n, 0), b1(1, n, 0);
  cudaStream_t s[2], after[2];
  dfcclRequest_t req[2];
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    CUDA_OK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&after[r], cudaStreamNonBlocking));
  }
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    DevBuf& b = r == 0 ? b0 : b1;
    // The input is written by work queued on s after a 20 ms kernel: the collective must wait for it.
    CUDA_OK(launch_spin_kernel(20000000, s[r]));
    CUDA_OK(cudaMemsetAsync(b.in, 5 + r, n * 4, s[r]));
    ASSERT_EQ(dfcclAllReduce(b.in, b.out, n, dfcclInt32, dfcclSum, g[r], 0, s[r], &req[r]), dfcclSuccess);
    // The consumer stream waits on the GPU; the host does not block.
    ASSERT_EQ(dfcclWait(req[r], after[r]), dfcclSuccess);
  }
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    DevBuf& b = r == 0 ? b0 : b1;
    EXPECT_EQ(count_not_equal(b.out, n, word(5) + word(6), after[r]), 0u) << "rank " << r;
    dfcclRequestFree(req[r]);
    cudaStreamDestroy(s[r]);
    cudaStreamDestroy(after[r]);
  }
}

// ---- disorder stress on GPUs -----------------------------------------------------------------------------------
struct GpuWorld {
  static constexpr int kComms = 3;
  dfcclComm_t comm[kComms][2] = {};
  dfcclPersistent_t persistent[kComms][2] = {};
  cudaStream_t stream[2] = {};
  std::vector<DevBuf*> bufs[2];  // per rank: kComms * 3 collectives
  bool aborted = false;
  static constexpr size_t kCount = 70000;

  explicit GpuWorld(dfcclMode_t mode) {
    dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
    cfg.executor = dfcclExecutorCuda;
    cfg.mode = mode;
    if (dfcclCommInitAllConfig(comm[0], 2, nullptr, &cfg) != dfcclSuccess)
      throw std::runtime_error(dfcclGetLastError(nullptr));
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r)
      ts.emplace_back([&, r] {
        cudaSetDevice(r);
        dfcclCommSplit(comm[0][r], 0, r, &comm[1][r], nullptr);
        dfcclCommSplit(comm[0][r], 0, r, &comm[2][r], nullptr);
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(r);
      cudaStreamCreateWithFlags(&stream[r], cudaStreamNonBlocking);
      for (int g = 0; g < kComms; ++g) {
        dfcclPrepareAllReduce(kCount, dfcclInt32, dfcclSum, comm[g][r], 0, &persistent[g][r]);
        for (int k = 0; k < 3; ++k) bufs[r].push_back(new DevBuf(r, kCount, 0));
      }
    }
  }
  ~GpuWorld() {
    for (int r = 0; r < 2; ++r) {
      for (auto* b : bufs[r]) delete b;
      for (int g = 0; g < kComms; ++g) {
        if (persistent[g][r]) dfcclPersistentFree(persistent[g][r]);
        if (!aborted) dfcclCommDestroy(comm[g][r]);
      }
      cudaSetDevice(r);
      cudaStreamDestroy(stream[r]);
    }
  }
  void abort_all() {
    aborted = true;
    std::vector<std::thread> ts;
    for (int g = 0; g < kComms; ++g)
      for (int r = 0; r < 2; ++r) ts.emplace_back([this, g, r] { dfcclCommAbort(comm[g][r]); });
    for (auto& t : ts) t.join();
  }
};

// Per trial and rank: the 9 collectives (3 per communicator: 2 ordered + the persistent one) in a random order
// that keeps each communicator's ordered pair in order, with a device synchronization, a pinned allocation or a
// host registration after each submission with probability 0.3. Returns {hung, wrong}.
std::pair<bool, size_t> gpu_trial(GpuWorld& w, int trial, std::chrono::milliseconds timeout) {
  std::vector<std::future<void>> ranks;
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      cudaSetDevice(r);
      std::mt19937_64 rng(uint64_t(trial) * 1000003 + uint64_t(r));
      std::vector<int> order;  // collective k of group g = g*3 + k; k = 2 is the persistent one
      std::vector<int> head(3, 0);
      std::vector<int> persistent = {2, 5, 8};
      while (order.size() < 6) {
        const int g = int(rng() % 3);
        if (head[size_t(g)] < 2) order.push_back(g * 3 + head[size_t(g)]++);
      }
      for (int p : persistent) order.insert(order.begin() + long(rng() % (order.size() + 1)), p);
      std::vector<dfcclRequest_t> reqs;
      for (int c : order) {
        DevBuf& b = *w.bufs[r][size_t(c)];
        cudaMemsetAsync(b.in, uint8_t(trial * 3 + c + r * 40), b.n * 4, w.stream[r]);
        dfcclRequest_t q = nullptr;
        dfcclResult_t res;
        if (c % 3 == 2) res = dfcclStart(w.persistent[c / 3][r], b.in, b.out, 0, w.stream[r], &q);
        else res = dfcclAllReduce(b.in, b.out, b.n, dfcclInt32, dfcclSum, w.comm[c / 3][r], 0, w.stream[r], &q);
        if (res != dfcclSuccess) errors[size_t(r)] = dfcclGetLastError(nullptr);
        if (q) reqs.push_back(q);
        const uint64_t dice = rng() % 100;
        if (dice < 10) {
          cudaDeviceSynchronize();
        } else if (dice < 20) {
          void* p = nullptr;
          cudaMallocHost(&p, 1 << 20);
          cudaFreeHost(p);
        } else if (dice < 30) {
          static thread_local std::vector<char> host(1 << 16);
          cudaHostRegister(host.data(), host.size(), cudaHostRegisterDefault);
          cudaHostUnregister(host.data());
        }
      }
      for (auto q : reqs) {
        const dfcclResult_t res = dfcclSynchronize(q, 600000);
        if (res != dfcclSuccess && errors[size_t(r)].empty()) errors[size_t(r)] = dfcclGetErrorString(res);
        dfcclRequestFree(q);
      }
    }));
  }
  bool hung = false;
  const auto deadline = Clock::now() + timeout;
  for (auto& f : ranks)
    if (f.wait_until(deadline) != std::future_status::ready) hung = true;
  if (hung) w.abort_all();
  for (auto& f : ranks) {
    if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      ADD_FAILURE() << "a rank did not return after abort";
      std::fflush(stdout);
      std::_Exit(1);
    }
  }
  if (hung) return {true, 0};
  size_t wrong = 0;
  for (int c = 0; c < 9; ++c) {
    const int32_t want = word(uint8_t(trial * 3 + c)) + word(uint8_t(trial * 3 + c + 40));
    for (int r = 0; r < 2; ++r) wrong += w.bufs[r][size_t(c)]->wrong(want);
  }
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(errors[size_t(r)].empty()) << errors[size_t(r)];
  return {false, wrong};
}

TEST(CudaEngine, DisorderStressNeverHangsAndIsExact) {
  GpuWorld w(dfcclModePreemptive);
  const int trials = 500;
  int hung = 0;
  size_t wrong = 0;
  const auto t0 = Clock::now();
  for (int k = 0; k < trials; ++k) {
    auto [h, bad] = gpu_trial(w, k, std::chrono::seconds(60));
    ASSERT_FALSE(h) << "trial " << k << " hung";
    hung += h;
    wrong += bad;
  }
  dfcclStats_t st = DFCCL_STATS_INITIALIZER;
  ASSERT_EQ(dfcclGetStats(w.comm[0][0], &st), dfcclSuccess);
  std::printf("[ gpu      ] stress: %d trials in %.1f s, %d hangs, %zu wrong; GPU 0: %lu collectives, %lu "
              "preemptions, %lu daemon launches (%lu stuck exits)\n",
              trials, std::chrono::duration<double>(Clock::now() - t0).count(), hung, wrong,
              (unsigned long)st.completed, (unsigned long)st.preemptions, (unsigned long)st.daemonLaunches,
              (unsigned long)st.daemonExitsStuck);
  EXPECT_EQ(hung, 0);
  EXPECT_EQ(wrong, 0u);
}

TEST(CudaEngine, BlockingModeHangsInMostTrials) {
  const int trials = 8;
  int hung = 0;
  for (int k = 0; k < trials; ++k) {
    GpuWorld w(dfcclModeBlocking);
    auto [h, bad] = gpu_trial(w, k, std::chrono::milliseconds(1000));
    hung += h;
    if (!h) {
      EXPECT_EQ(bad, 0u);
    }
  }
  std::printf("[ gpu      ] blocking mode: %d of %d trials deadlocked (watchdog + abort recovered each)\n", hung,
              trials);
  EXPECT_GT(hung, trials / 2);
}

TEST(CudaEngine, AbortReturnsWithinASecondWhileThePeerIsAbsent) {
  Group g(2, dfcclExecutorCuda);
  DevBuf b0(0, 1 << 20, 1);
  cudaSetDevice(0);
  dfcclRequest_t q = nullptr;
  ASSERT_EQ(dfcclAllReduce(b0.in, b0.out, b0.n, dfcclInt32, dfcclSum, g[0], 0, nullptr, &q), dfcclSuccess);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ASSERT_EQ(dfcclWait(q, s), dfcclSuccess);  // a stream waiting on the collective must be released by the abort
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto t0 = Clock::now();
  ASSERT_EQ(dfcclCommAbort(g[0]), dfcclSuccess);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(dfcclSynchronize(q, 5000), dfcclAborted);
  must_return("a stream waiting on an aborted collective", std::chrono::seconds(10),
              [&] { EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess); });
  cudaStreamDestroy(s);
  dfcclRequestFree(q);
  g.comms[0] = nullptr;
}

// GPUs without peer access use connection regions in shared host memory; DFCCL_P2P_DISABLE=1 forces that path.
TEST(CudaEngine, HostMemoryPathWithoutPeerAccess) {
  setenv("DFCCL_P2P_DISABLE", "1", 1);
  {
    Group g(2, dfcclExecutorCuda);
    const size_t n = size_t(4) << 20;
    DevBuf b0(0, n, 7), b1(1, n, 8);
    dfcclRequest_t r[2];
    for (int rank = 0; rank < 2; ++rank) {
      cudaSetDevice(rank);
      DevBuf& b = rank == 0 ? b0 : b1;
      ASSERT_EQ(dfcclAllReduce(b.in, b.out, n, dfcclInt32, dfcclSum, g[rank], 0, nullptr, &r[rank]), dfcclSuccess);
    }
    for (auto q : r) {
      ASSERT_EQ(dfcclSynchronize(q, 60000), dfcclSuccess);
      dfcclRequestFree(q);
    }
    EXPECT_EQ(b0.wrong(word(7) + word(8)), 0u);
    EXPECT_EQ(b1.wrong(word(7) + word(8)), 0u);
  }
  unsetenv("DFCCL_P2P_DISABLE");
}

TEST(CudaEngine, BuffersMustBeDeviceMemoryOfTheCommunicatorsGpu) {
  Group g(2, dfcclExecutorCuda);
  std::vector<int32_t> host(1024);
  DevBuf other(1, 1024, 0), mine(0, 1024, 0);
  cudaSetDevice(0);
  EXPECT_EQ(dfcclAllReduce(host.data(), mine.out, 1024, dfcclInt32, dfcclSum, g[0], 0, nullptr, nullptr),
            dfcclInvalidArgument);
  EXPECT_NE(std::string(dfcclGetLastError(nullptr)).find("'sendbuff'"), std::string::npos)
      << dfcclGetLastError(nullptr);
  EXPECT_EQ(dfcclAllReduce(mine.in, other.out, 1024, dfcclInt32, dfcclSum, g[0], 0, nullptr, nullptr),
            dfcclInvalidArgument);
  EXPECT_NE(std::string(dfcclGetLastError(nullptr)).find("'recvbuff'"), std::string::npos)
      << dfcclGetLastError(nullptr);
}

}  // namespace
}  // namespace dfccl::test
