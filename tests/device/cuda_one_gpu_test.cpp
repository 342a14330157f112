// The engine on one GPU (CUDA executor, a one-rank communicator): what needs no peer GPU. A capture that cannot hold
// the call (a communicator without its graph lane, a persistent start, a wait for a collective called outside the
// capture) is refused, naming the stream, with nothing queued and the capture left as it was; the stream then serves
// the communicator as before. With DFCCL_GRAPHS=1 a captured all-reduce, and captured transfers and all-to-allv, are
// exact at every replay. The core's division helpers give on the GPU what the host's operators give.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "app_kernels.h"
#include "group.h"
#include "watchdog.h"

namespace dfccl::test {
namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

std::string last_error() { return dfcclGetLastError(nullptr); }

// Expects dfcclNotSupported from a call made on a capturing stream, with a message that names the stream and the
// capture.
void expect_capture_refused(dfcclResult_t r, const char *fn) {
  EXPECT_EQ(r, dfcclNotSupported) << fn << ": " << last_error();
  const std::string msg = last_error();
  EXPECT_NE(msg.find(fn), std::string::npos) << msg;
  EXPECT_NE(msg.find("'stream'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("graph"), std::string::npos) << msg;
}

uint64_t submitted(dfcclComm_t comm) {
  dfcclStats_t st = DFCCL_STATS_INITIALIZER;
  EXPECT_EQ(dfcclGetStats(comm, &st), dfcclSuccess);
  return st.submitted;
}

// n int32 elements of device memory on the current GPU, freed with the object.
struct DeviceInts {
  explicit DeviceInts(size_t n) { cudaMalloc(&p, n * sizeof(int32_t)); }
  ~DeviceInts() { cudaFree(p); }
  DeviceInts(const DeviceInts &) = delete;
  DeviceInts &operator=(const DeviceInts &) = delete;
  int32_t *p = nullptr;
};

// A one-rank communicator on GPU 0, made with the variables `vars` ("NAME=value") set, which are unset again once it
// is made (the engine reads them then; no communicator of this process is alive before).
class OneGpu {
 public:
  explicit OneGpu(std::initializer_list<const char *> vars) : g_((set(vars), 1), dfcclExecutorCuda) {
    for (const std::string &name : names_) unsetenv(name.c_str());
  }
  dfcclComm_t operator[](int r) const { return g_[r]; }

 private:
  void set(std::initializer_list<const char *> vars) {
    cudaSetDevice(0);
    for (const char *v : vars) {
      const std::string kv = v;
      names_.push_back(kv.substr(0, kv.find('=')));
      setenv(names_.back().c_str(), kv.substr(kv.find('=') + 1).c_str(), 1);
    }
  }
  std::vector<std::string> names_;  // before g_: filled while g_'s arguments are evaluated
  Group g_;
};

// The graph that stream s has captured since its cudaStreamBeginCapture, ended and instantiated by end(); destroyed
// with the object.
struct Captured {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t end(cudaStream_t s) {
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    return e == cudaSuccess ? cudaGraphInstantiate(&exec, graph, 0) : e;
  }
  ~Captured() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

TEST(CudaOneGpu, GraphCaptureIsRefusedNamingTheStreamAndQueuesNothing) {
  cudaSetDevice(0);
  Group g(1, dfcclExecutorCuda);
  const size_t n = 1 << 16;
  int32_t *in = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&in, n * 4));
  CUDA_OK(cudaMalloc(&out, n * 4));
  CUDA_OK(cudaMemset(in, 3, n * 4));
  CUDA_OK(cudaMemset(out, 0xff, n * 4));
  CUDA_OK(cudaDeviceSynchronize());  // a cudaMemset of device memory may return before it is done
  cudaStream_t s, other;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  dfcclPersistent_t p = nullptr;
  ASSERT_EQ(dfcclPrepareAllReduce(n, dfcclInt32, dfcclSum, g[0], 0, &p), dfcclSuccess) << last_error();
  // A collective submitted before the capture, on another stream: its wait cannot be captured either.
  dfcclRequest_t before = nullptr;
  ASSERT_EQ(dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, g[0], 0, other, &before), dfcclSuccess) << last_error();
  const uint64_t queued = submitted(g[0]);

  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  dfcclRequest_t req = nullptr;
  expect_capture_refused(dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, g[0], 0, s, &req), "dfcclAllReduce");
  EXPECT_EQ(req, nullptr);
  expect_capture_refused(dfcclAllGather(in, out, n, dfcclInt32, g[0], 0, s, &req), "dfcclAllGather");
  expect_capture_refused(dfcclBroadcast(in, out, n, dfcclInt32, 0, g[0], 0, s, &req), "dfcclBroadcast");
  expect_capture_refused(dfcclStart(p, in, out, 0, s, &req), "dfcclStart");
  EXPECT_EQ(req, nullptr);
  expect_capture_refused(dfcclWait(before, s), "dfcclWait");
  EXPECT_EQ(submitted(g[0]), queued) << "a refused submission was queued";
  // Nothing was recorded into the capture and it was not invalidated.
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  size_t nodes = 1;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 0u);
  CUDA_OK(cudaGraphDestroy(graph));

  // Host-ordered submissions make no CUDA call: not affected by a capture on this thread.
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  dfcclRequest_t host_ordered = nullptr;
  EXPECT_EQ(dfcclSynchronize(before, 60000), dfcclSuccess) << last_error();
  EXPECT_EQ(dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, g[0], 0, DFCCL_NO_STREAM, &host_ordered), dfcclSuccess)
      << last_error();
  EXPECT_EQ(dfcclSynchronize(host_ordered, 60000), dfcclSuccess) << last_error();
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  CUDA_OK(cudaGraphDestroy(graph));

  // After the capture the same stream serves the communicator: stream-ordered in and out, exact (one rank: out = in).
  CUDA_OK(cudaMemsetAsync(out, 0xff, n * 4, s));
  CUDA_OK(cudaMemsetAsync(in, 5, n * 4, s));
  dfcclRequest_t after = nullptr;
  ASSERT_EQ(dfcclStart(p, in, out, 0, s, &after), dfcclSuccess) << last_error();
  ASSERT_EQ(dfcclWait(after, s), dfcclSuccess) << last_error();
  EXPECT_EQ(count_not_equal(out, n, int32_t(0x05050505), s), 0u);
  EXPECT_EQ(dfcclSynchronize(after, 60000), dfcclSuccess) << last_error();
  EXPECT_EQ(submitted(g[0]), queued + 2);

  for (dfcclRequest_t r : {before, host_ordered, after}) dfcclRequestFree(r);
  dfcclPersistentFree(p);
  cudaStreamDestroy(s);
  cudaStreamDestroy(other);
  cudaFree(in);
  cudaFree(out);
}

// DFCCL_GRAPHS=1: an all-reduce captured in NCCL's form (no request) and one with its wait captured later, replayed
// with new inputs each time: every replay computes the right result, seen by the stream's later work.
TEST(CudaOneGpu, CapturedAllReducesReplayExact) {
  OneGpu g({"DFCCL_GRAPHS=1"});
  const size_t n = 1 << 16;
  int32_t *in = nullptr, *out = nullptr, *out2 = nullptr;
  CUDA_OK(cudaMalloc(&in, n * 4));
  CUDA_OK(cudaMalloc(&out, n * 4));
  CUDA_OK(cudaMalloc(&out2, n * 4));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const uint64_t queued = submitted(g[0]);
  Captured graph;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  ASSERT_EQ(dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, g[0], 0, s, nullptr), dfcclSuccess) << last_error();
  dfcclRequest_t req = nullptr;
  ASSERT_EQ(dfcclAllReduce(out, out2, n, dfcclInt32, dfcclSum, g[0], 0, s, &req), dfcclSuccess) << last_error();
  int done = 0;
  EXPECT_EQ(dfcclTest(req, &done), dfcclInvalidUsage) << "a captured call's request is not an instance's";
  ASSERT_EQ(dfcclWait(req, s), dfcclSuccess) << last_error();
  CUDA_OK(graph.end(s));
  for (int k = 0; k < 50; ++k) {
    CUDA_OK(launch_fill(in, n, 10 + k, s));
    CUDA_OK(cudaGraphLaunch(graph.exec, s));
    ASSERT_EQ(count_not_equal(out2, n, 10 + k, s), 0u) << "replay " << k;
  }
  EXPECT_EQ(submitted(g[0]), queued) << "replays are not host submissions";
  dfcclRequestFree(req);
  cudaStreamDestroy(s);
  cudaFree(in);
  cudaFree(out);
  cudaFree(out2);
}

// DFCCL_GRAPHS=1: a captured all-reduce waited for twice, first on a stream that joined the capture before the call
// (its wait must still follow the call's start in the graph), then on the call's own stream (a wait that only
// polls), each followed by a copy of the result: every replay, with new inputs, is exact on both streams.
TEST(CudaOneGpu, CapturedWaitsOnAForkedStreamAndTwiceReplayExact) {
  OneGpu g({"DFCCL_GRAPHS=1"});
  const size_t n = 1 << 20;
  DeviceInts in(n), out(n), seen_forked(n), seen_own(n);
  cudaStream_t s, s2;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  Captured graph;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaEventRecord(fork, s));
  CUDA_OK(cudaStreamWaitEvent(s2, fork));  // s2 joins the capture before the call
  dfcclRequest_t req = nullptr;
  ASSERT_EQ(dfcclAllReduce(in.p, out.p, n, dfcclInt32, dfcclSum, g[0], 0, s, &req), dfcclSuccess) << last_error();
  ASSERT_EQ(dfcclWait(req, s2), dfcclSuccess) << last_error();
  CUDA_OK(cudaMemcpyAsync(seen_forked.p, out.p, n * 4, cudaMemcpyDeviceToDevice, s2));
  ASSERT_EQ(dfcclWait(req, s), dfcclSuccess) << last_error();
  CUDA_OK(cudaMemcpyAsync(seen_own.p, out.p, n * 4, cudaMemcpyDeviceToDevice, s));
  CUDA_OK(cudaEventRecord(join, s2));
  CUDA_OK(cudaStreamWaitEvent(s, join));
  CUDA_OK(graph.end(s));
  for (int k = 0; k < 50; ++k) {
    CUDA_OK(launch_fill(in.p, n, 10 + k, s));
    CUDA_OK(cudaGraphLaunch(graph.exec, s));
    ASSERT_EQ(count_not_equal(seen_forked.p, n, 10 + k, s), 0u) << "replay " << k << ", the forked stream's copy";
    ASSERT_EQ(count_not_equal(seen_own.p, n, 10 + k, s), 0u) << "replay " << k << ", the call's stream's copy";
  }
  dfcclRequestFree(req);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
}

// DFCCL_GRAPHS=1: a send to itself and its receive (the receive in NCCL's form: no request) and an all-to-allv,
// captured and replayed with new inputs, with an eager send and receive on the same stream between replays (an order of
// their own): every replay and every eager transfer is exact.
TEST(CudaOneGpu, CapturedTransfersReplayExact) {
  OneGpu g({"DFCCL_GRAPHS=1"});
  const size_t n = 1 << 16;
  int32_t *in = nullptr, *out = nullptr, *a2a_out = nullptr, *side_in = nullptr, *side_out = nullptr;
  for (int32_t **p : {&in, &out, &a2a_out, &side_in, &side_out}) CUDA_OK(cudaMalloc(p, n * 4));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t counts[1] = {n / 2}, displs[1] = {0};
  Captured graph;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  dfcclRequest_t sreq = nullptr, areq = nullptr;
  ASSERT_EQ(dfcclSend(in, n, dfcclInt32, 0, g[0], 0, s, &sreq), dfcclSuccess) << last_error();
  ASSERT_EQ(dfcclRecv(out, n, dfcclInt32, 0, g[0], 0, s, nullptr), dfcclSuccess) << last_error();
  ASSERT_EQ(dfcclAllToAllv(in, counts, displs, a2a_out, counts, displs, dfcclInt32, g[0], 0, s, &areq), dfcclSuccess)
      << last_error();
  int done = 0;
  EXPECT_EQ(dfcclTest(areq, &done), dfcclInvalidUsage) << "a captured call's request is not an instance's";
  ASSERT_EQ(dfcclWait(sreq, s), dfcclSuccess) << last_error();
  ASSERT_EQ(dfcclWait(areq, s), dfcclSuccess) << last_error();
  CUDA_OK(graph.end(s));
  for (int k = 0; k < 50; ++k) {
    CUDA_OK(launch_fill(in, n, 10 + k, s));
    CUDA_OK(launch_fill(side_in, n, 1000 + k, s));
    CUDA_OK(cudaGraphLaunch(graph.exec, s));
    ASSERT_EQ(dfcclSend(side_in, n, dfcclInt32, 0, g[0], 0, s, nullptr), dfcclSuccess) << last_error();
    dfcclRequest_t rreq = nullptr;  // an eager receive: the stream waits for it only when asked
    ASSERT_EQ(dfcclRecv(side_out, n, dfcclInt32, 0, g[0], 0, s, &rreq), dfcclSuccess) << last_error();
    ASSERT_EQ(dfcclWait(rreq, s), dfcclSuccess) << last_error();
    dfcclRequestFree(rreq);
    ASSERT_EQ(count_not_equal(out, n, 10 + k, s), 0u) << "replay " << k;
    ASSERT_EQ(count_not_equal(a2a_out, n / 2, 10 + k, s), 0u) << "replay " << k << ", all-to-allv";
    ASSERT_EQ(count_not_equal(side_out, n, 1000 + k, s), 0u) << "eager transfer after replay " << k;
  }
  dfcclRequestFree(sreq);
  dfcclRequestFree(areq);
  cudaStreamDestroy(s);
  for (int32_t *p : {in, out, a2a_out, side_in, side_out}) cudaFree(p);
}

// DFCCL_GRAPHS=1 and a daemon that leaves as soon as it is idle: after each replay of a captured all-reduce (its wait
// node may own the engine, standing in), an eager all-reduce on the same stream, dfcclWait for it there, and at once a
// cudaFree (a device-wide synchronization, which holds any daemon launched after it until the stream's work is done).
// Every round completes exact (docs/design.md, "CUDA graphs", "Stand-ins"). A round stuck for 20 s is reported; the
// communicator's abort then releases the stream.
TEST(CudaOneGpu, EagerWaitBehindAReplayThenAFreeCompletes) {
  OneGpu g({"DFCCL_GRAPHS=1", "DFCCL_IDLE_NS=0"});
  const size_t n = 1 << 14;
  DeviceInts in(n), out(n), side_in(n), side_out(n);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Captured graph;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  ASSERT_EQ(dfcclAllReduce(in.p, out.p, n, dfcclInt32, dfcclSum, g[0], 0, s, nullptr), dfcclSuccess) << last_error();
  CUDA_OK(graph.end(s));
  std::atomic<int> round{0};
  const Watchdog watchdog(round, 20000, [&] { dfcclCommAbort(g[0]); });
  const int rounds = 300;
  for (int k = 0; k < rounds && !watchdog.fired(); ++k, round.store(k)) {
    CUDA_OK(launch_fill(in.p, n, 10 + k, s));
    CUDA_OK(launch_fill(side_in.p, n, 1000 + k, s));
    CUDA_OK(cudaGraphLaunch(graph.exec, s));
    dfcclRequest_t req = nullptr;
    if (dfcclAllReduce(side_in.p, side_out.p, n, dfcclInt32, dfcclSum, g[0], 0, s, &req) != dfcclSuccess) break;
    if (dfcclWait(req, s) != dfcclSuccess) break;
    { DeviceInts scratch(16); }  // cudaFree right after: a synchronization before the host's next daemon launch
    dfcclRequestFree(req);
    if (watchdog.fired()) break;
    ASSERT_EQ(count_not_equal(out.p, n, 10 + k, s), 0u) << "replay " << k;
    ASSERT_EQ(count_not_equal(side_out.p, n, 1000 + k, s), 0u) << "eager all-reduce after replay " << k;
  }
  EXPECT_FALSE(watchdog.fired()) << "stuck at round " << round.load() << " of " << rounds;
  EXPECT_EQ(round.load(), rounds) << last_error();
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
}

// Eager sends to itself and their receives on one stream, each send after a kernel that writes its input and each
// receive waited for on the stream (dfcclWait): every receive holds what its send's stream order wrote, with and
// without the graph lanes.
void eager_self_transfers_follow_their_stream(bool graphs) {
  OneGpu g({graphs ? "DFCCL_GRAPHS=1" : "DFCCL_GRAPHS=0"});
  const size_t n = 1 << 16;
  int32_t *in = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&in, n * 4));
  CUDA_OK(cudaMalloc(&out, n * 4));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int k = 0; k < 300; ++k) {
    CUDA_OK(launch_fill(in, n, 1000 + k, s));
    ASSERT_EQ(dfcclSend(in, n, dfcclInt32, 0, g[0], 0, s, nullptr), dfcclSuccess) << last_error();
    dfcclRequest_t req = nullptr;
    ASSERT_EQ(dfcclRecv(out, n, dfcclInt32, 0, g[0], 0, s, &req), dfcclSuccess) << last_error();
    ASSERT_EQ(dfcclWait(req, s), dfcclSuccess) << last_error();
    dfcclRequestFree(req);
    ASSERT_EQ(count_not_equal(out, n, 1000 + k, s), 0u) << "transfer " << k;
  }
  cudaStreamDestroy(s);
  cudaFree(in);
  cudaFree(out);
}

TEST(CudaOneGpu, EagerSelfTransfersFollowTheirStream) { eager_self_transfers_follow_their_stream(false); }
TEST(CudaOneGpu, EagerSelfTransfersFollowTheirStreamWithGraphLanes) { eager_self_transfers_follow_their_stream(true); }

// The legacy default stream while a blocking stream captures in global mode: CUDA cannot tell whether work on it
// would join the capture; the call is refused with its own message.
TEST(CudaOneGpu, LegacyStreamDuringAGlobalCaptureIsRefused) {
  cudaSetDevice(0);
  Group g(1, dfcclExecutorCuda);
  const size_t n = 1024;
  int32_t *in = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&in, n * 4));
  CUDA_OK(cudaMalloc(&out, n * 4));
  cudaStream_t blocking;
  CUDA_OK(cudaStreamCreate(&blocking));
  const uint64_t queued = submitted(g[0]);
  CUDA_OK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal));
  dfcclRequest_t req = nullptr;
  const dfcclResult_t r = dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, g[0], 0, cudaStreamLegacy, &req);
  const std::string msg = last_error();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(blocking, &graph);  // CUDA may have invalidated it: either is fine
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
  EXPECT_EQ(r, dfcclNotSupported) << msg << " (cudaStreamEndCapture: " << cudaGetErrorString(end) << ")";
  EXPECT_NE(msg.find("'stream' is the legacy default stream"), std::string::npos) << msg;
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(submitted(g[0]), queued);
  cudaStreamDestroy(blocking);
  cudaFree(in);
  cudaFree(out);
}

// An error the application left on its thread (a failed cudaFree) is not taken for the daemon's launch or a stream
// waiter's: the collectives submitted after it, each relaunching the daemon once it has gone idle, succeed exactly.
TEST(CudaOneGpu, AnApplicationsStaleErrorDoesNotFailASubmission) {
  cudaSetDevice(0);
  Group g(1, dfcclExecutorCuda);
  const size_t n = 1024;
  DeviceInts in_buf(n), out_buf(n);
  int32_t *in = in_buf.p, *out = out_buf.p;
  ASSERT_TRUE(in && out);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaMemsetAsync(in, 1, n * 4, s));  // on the collective's stream: ordered before it
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the daemon goes idle (DFCCL_IDLE_NS): relaunched
    ASSERT_NE(cudaFree(reinterpret_cast<void *>(0x1000)), cudaSuccess);  // the application's own, left unread
    CUDA_OK(cudaMemsetAsync(out, 0xff, n * 4, s));
    dfcclRequest_t req = nullptr;
    ASSERT_EQ(dfcclAllReduce(in, out, n, dfcclInt32, dfcclSum, g[0], 0, s, &req), dfcclSuccess) << last_error();
    ASSERT_EQ(dfcclWait(req, s), dfcclSuccess) << last_error();
    ASSERT_EQ(dfcclSynchronize(req, 10000), dfcclSuccess) << last_error();
    dfcclRequestFree(req);
    std::vector<int32_t> h(n);
    CUDA_OK(cudaMemcpy(h.data(), out, n * 4, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < n; ++k) ASSERT_EQ(h[k], 0x01010101) << "round " << i << " element " << k;
  }
  cudaGetLastError();
  cudaStreamDestroy(s);
}

// udiv / umod on the GPU (kernels/core/exec.h: a shift for powers of two, the 32-bit division for operands that fit,
// the 64-bit routine otherwise) against / and % on the host, over every pairing of the operands below.
TEST(CudaOneGpu, DivisionHelpersMatchTheHostOperators) {
  const uint64_t dividends[] = {
      0, 1, 2, 3, 7, 8, 1000, 123457, (1ull << 32) - 1, 1ull << 32, (1ull << 32) + 5, 0x123456789abcdefull, ~0ull};
  const uint64_t divisors[] = {
      1, 2, 3, 4, 5, 7, 8, 16, 24, 128, 1000, 1ull << 31, (1ull << 32) - 1, 1ull << 32, 3ull << 32, 1ull << 63, ~0ull};
  std::vector<uint64_t> a, b;
  for (uint64_t x : dividends)
    for (uint64_t y : divisors) {
      a.push_back(x);
      b.push_back(y);
    }
  std::vector<uint64_t> q(a.size(), 0), r(a.size(), 0);
  ASSERT_TRUE(gpu_udiv_umod(a.data(), b.data(), q.data(), r.data(), a.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(q[i], a[i] / b[i]) << a[i] << " / " << b[i];
    EXPECT_EQ(r[i], a[i] % b[i]) << a[i] << " % " << b[i];
  }
}

}  // namespace
}  // namespace dfccl::test
