// Every collective x data type x operator x count (0, 1, 17, 1009, 64 Mi) x in/out-of-place on 2 GPUs (CUDA
// executor, one process), exact against the independent reference (tests/common/reference.h).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "group.h"

namespace dfccl::test {
namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

constexpr size_t kCounts[] = {0, 1, 17, 1009, size_t(64) << 20};
constexpr dfcclRedOp_t kOps[] = {dfcclSum, dfcclProd, dfcclMax, dfcclMin, dfcclAvg};

// Device mirror of a Buffers: the same layout (in-place pointers included) in each rank's GPU memory.
struct DeviceMirror {
  std::vector<void*> send, recv;  // storage bases
  DeviceMirror(Buffers& b, int n) : send(size_t(n), nullptr), recv(size_t(n), nullptr) {
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(r);
      if (!b.send_in_recv_storage()) {
        cudaMalloc(&send[size_t(r)], b.send_storage(r).size());
        cudaMemcpy(send[size_t(r)], b.send_storage(r).data(), b.send_storage(r).size(), cudaMemcpyHostToDevice);
      }
      cudaMalloc(&recv[size_t(r)], b.recv_storage(r).size());
      cudaMemcpy(recv[size_t(r)], b.recv_storage(r).data(), b.recv_storage(r).size(), cudaMemcpyHostToDevice);
    }
  }
  ~DeviceMirror() {
    for (size_t r = 0; r < send.size(); ++r) {
      cudaSetDevice(int(r));
      if (send[r]) cudaFree(send[r]);
      if (recv[r]) cudaFree(recv[r]);
    }
  }
  const void* send_ptr(Buffers& b, int r) const {
    const void* base = b.send_in_recv_storage() ? recv[size_t(r)] : send[size_t(r)];
    return static_cast<const char*>(base) + b.send_offset(r);
  }
  void* recv_ptr(Buffers& b, int r) const { return static_cast<char*>(recv[size_t(r)]) + b.recv_offset(r); }
  void download(Buffers& b, int r) const {
    cudaSetDevice(r);
    cudaMemcpy(b.recv_storage(r).data(), recv[size_t(r)], b.recv_storage(r).size(), cudaMemcpyDeviceToHost);
  }
};

dfcclResult_t submit_device(dfcclComm_t comm, const Case& c, const DeviceMirror& m, Buffers& b, int r, cudaStream_t s,
                            dfcclRequest_t* req) {
  const void* sb = m.send_ptr(b, r);
  void* rb = m.recv_ptr(b, r);
  switch (c.coll) {
    case Coll::AllReduce: return dfcclAllReduce(sb, rb, c.count, c.type, c.op, comm, 0, s, req);
    case Coll::AllGather: return dfcclAllGather(sb, rb, c.count, c.type, comm, 0, s, req);
    case Coll::ReduceScatter: return dfcclReduceScatter(sb, rb, c.count, c.type, c.op, comm, 0, s, req);
    case Coll::Broadcast: return dfcclBroadcast(sb, rb, c.count, c.type, c.root, comm, 0, s, req);
    case Coll::Reduce: return dfcclReduce(sb, rb, c.count, c.type, c.op, c.root, comm, 0, s, req);
  }
  return dfcclInvalidArgument;
}

class CudaCollectives : public ::testing::Test {
 protected:
  static void run_all(Coll coll) {
    const int n = 2;
    Group g(n, dfcclExecutorCuda);
    const bool reduces = coll != Coll::AllGather && coll != Coll::Broadcast;
    size_t cases = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < dfcclNumTypes; ++t)
      for (dfcclRedOp_t op : kOps) {
        if (!reduces && op != dfcclSum) continue;
        for (size_t count : kCounts)
          for (bool in_place : {false, true}) {
            const Case c{coll, dfcclDataType_t(t), op, count, int(count % size_t(n)), in_place};
            Buffers b(c, n);
            DeviceMirror m(b, n);
            std::vector<dfcclRequest_t> reqs(size_t(n), nullptr);
            for (int r = 0; r < n; ++r) {
              cudaSetDevice(r);
              const dfcclResult_t res = submit_device(g[r], c, m, b, r, nullptr, &reqs[size_t(r)]);
              ASSERT_EQ(res, dfcclSuccess) << describe(c, n) << ": " << dfcclGetLastError(nullptr);
            }
            for (int r = 0; r < n; ++r) {
              ASSERT_EQ(dfcclSynchronize(reqs[size_t(r)], 120000), dfcclSuccess) << describe(c, n);
              dfcclRequestFree(reqs[size_t(r)]);
            }
            size_t wrong = 0;
            for (int r = 0; r < n; ++r) {
              m.download(b, r);
              wrong += b.wrong(r);
            }
            EXPECT_EQ(wrong, 0u) << describe(c, n);
            ++cases;
          }
      }
    std::printf("[ gpu      ] %s: %zu cases on 2 GPUs in %.1f s\n", coll_name(coll), cases,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
};

TEST_F(CudaCollectives, AllReduce) { run_all(Coll::AllReduce); }
TEST_F(CudaCollectives, AllGather) { run_all(Coll::AllGather); }
TEST_F(CudaCollectives, ReduceScatter) { run_all(Coll::ReduceScatter); }
TEST_F(CudaCollectives, Broadcast) { run_all(Coll::Broadcast); }
TEST_F(CudaCollectives, Reduce) { run_all(Coll::Reduce); }

}  // namespace
}  // namespace dfccl::test
