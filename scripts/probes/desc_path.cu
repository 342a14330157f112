// Probe: where should a collective's 144-byte descriptor travel from the host to the daemon? One GPU. A one-warp
// "daemon" kernel polls the doorbell word, reads the descriptor (nine 16-byte loads issued together), checks it and
// writes the completion word; the user's stream runs, per iteration, the doorbell and a one-thread waiting kernel
// (as dfccl's submit and dfcclWait). Modes:
//   pinned:  the host writes the descriptor into pinned memory before it enqueues the doorbell (dfccl today); the
//            doorbell is one cuStreamWriteValue64; the daemon reads the descriptor over PCIe;
//   stream:  the doorbell is one cuStreamBatchMemOp of 18 8-byte writes of the descriptor into device memory
//            and the doorbell write, each with the default barrier (the v2 API has no other), in that order;
//            the daemon reads the descriptor from device memory;
//   batch1:  the doorbell alone through cuStreamBatchMemOp (the API's own cost), the descriptor from pinned memory;
//   pinned9: as pinned, but nine threads of the warp issue one load each instead of one thread issuing nine;
//   pinned1: as pinned, one 16-byte load only (the round trip over PCIe, not the descriptor).
// Reported: GPU time per iteration (events around the loop only), and the daemon's time from seeing the doorbell to
// having the descriptor (globaltimer), and the descriptors that did not match (must be 0: the barrier's order).
// Build: target desc_path (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
//   desc_path [iters=200]
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"
#include "stream_ops.cuh"

constexpr int kWords = 18;  // 144 bytes

// One warp: lane 0 polls the doorbell; then `readers` lanes read the descriptor: 1 = lane 0 issues all nine 16-byte
// loads (dfccl's accept), 9 = lanes 0-8 one load each, 0 = lane 0 one load only (the link's round trip).
__global__ void daemon_like(const unsigned long long* bell, const unsigned long long* descs, unsigned long long* done,
                            unsigned long long n, unsigned long long* stats, int readers) {
  const int lane = int(threadIdx.x);
  unsigned long long read_ns = 0, bad = 0;
  for (unsigned long long i = 1; i <= n; ++i) {
    if (lane == 0) {
      unsigned long long v;
      do {
        asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(bell) : "memory");
      } while (v < i);
    }
    __syncwarp();
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    const uint4* d = reinterpret_cast<const uint4*>(descs + (i - 1) * kWords);
    uint4 w[kWords / 2];
    int first = 0, count = 0;
    if (readers == 1) {
      count = lane == 0 ? kWords / 2 : 0;
    } else if (readers == 9) {
      first = lane;
      count = lane < kWords / 2 ? 1 : 0;
    } else {
      count = lane == 0 ? 1 : 0;
    }
#pragma unroll
    for (int k = 0; k < kWords / 2; ++k)
      if (k < count) w[k] = __ldcg(d + first + k);
    unsigned long long sum = 0;
#pragma unroll
    for (int k = 0; k < kWords / 2; ++k) {
      if (k >= count) break;
      const int p = first + k;
      const unsigned long long lo = (static_cast<unsigned long long>(w[k].y) << 32) | w[k].x;
      const unsigned long long hi = (static_cast<unsigned long long>(w[k].w) << 32) | w[k].z;
      sum += (lo != i * 100 + 2 * p) + (hi != i * 100 + 2 * p + 1);
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);  // the warp has its loads back
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    read_ns += t1 - t0;
    bad += sum;
    if (lane == 0) asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(done), "l"(i) : "memory");
  }
  if (lane == 0) {
    stats[0] = read_ns;
    stats[1] = bad;
  }
}

using BatchFn = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int);

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 200;
  CUDA_CHECK(cudaSetDevice(0));
  const auto write64 = driver_entry<WriteFn>("cuStreamWriteValue64");
  const auto wait64 = driver_entry<WaitFn>("cuStreamWaitValue64");
  const auto batch = driver_entry<BatchFn>("cuStreamBatchMemOp");
  unsigned long long *bell, *done, *gate, *ddesc, *hdesc, *stats;
  CUDA_CHECK(cudaMalloc(&bell, 8));
  CUDA_CHECK(cudaMalloc(&done, 8));
  CUDA_CHECK(cudaMalloc(&ddesc, size_t(iters) * kWords * 8));
  CUDA_CHECK(cudaHostAlloc(&hdesc, size_t(iters) * kWords * 8, cudaHostAllocMapped));
  CUDA_CHECK(cudaHostAlloc(&stats, 16, cudaHostAllocMapped));
  CUDA_CHECK(cudaHostAlloc(&gate, 8, cudaHostAllocMapped));
  cudaStream_t ds, us;
  CUDA_CHECK(cudaStreamCreateWithFlags(&ds, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&us, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  waiter<<<1, 1, 0, us>>>(bell, 0);
  daemon_like<<<1, 32, 0, us>>>(bell, ddesc, done, 0, stats, 1);
  CUDA_CHECK(cudaStreamSynchronize(us));

  std::vector<CUstreamBatchMemOpParams> ops(kWords + 1);
  const char* names[5] = {"pinned", "stream", "batch1", "pinned9", "pinned1"};
  const int readers[5] = {1, 1, 1, 9, 0};
  for (int round = 0; round < 4; ++round)  // round 0 warms up
    for (int mode = 0; mode < 5; ++mode) {
      CUDA_CHECK(cudaMemset(bell, 0, 8));
      CUDA_CHECK(cudaMemset(done, 0, 8));
      CUDA_CHECK(cudaMemset(ddesc, 0, size_t(iters) * kWords * 8));
      for (size_t k = 0; k < size_t(iters) * kWords; ++k) hdesc[k] = 0;
      *reinterpret_cast<volatile unsigned long long*>(gate) = 0;
      CUDA_CHECK(cudaDeviceSynchronize());
      daemon_like<<<1, 32, 0, ds>>>(bell, mode == 1 ? ddesc : hdesc, done, iters, stats, readers[mode]);
      if (wait64(CUstream(us), CUdeviceptr(gate), 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
        probe_fail("cuStreamWaitValue64", "gate");
      CUDA_CHECK(cudaEventRecord(e0, us));
      for (int i = 1; i <= iters; ++i) {
        unsigned long long* slot = (mode == 1 ? ddesc : hdesc) + size_t(i - 1) * kWords;
        if (mode != 1 && mode != 2) {
          for (int k = 0; k < kWords; ++k) slot[k] = 100ull * i + k;
          if (write64(CUstream(us), CUdeviceptr(bell), i, 0) != CUDA_SUCCESS)
            probe_fail("cuStreamWriteValue64", "bell");
        } else {
          int n = 0;
          if (mode == 1)
            for (int k = 0; k < kWords; ++k, ++n) {
              ops[n] = {};
              ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
              ops[n].writeValue.address = CUdeviceptr(slot + k);
              ops[n].writeValue.value64 = 100ull * i + k;
              ops[n].writeValue.flags = 0;  // v2 API: no NO_MEMORY_BARRIER
            }
          else
            for (int k = 0; k < kWords; ++k) slot[k] = 100ull * i + k;
          ops[n] = {};
          ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
          ops[n].writeValue.address = CUdeviceptr(bell);
          ops[n].writeValue.value64 = i;
          ops[n].writeValue.flags = 0;
          ++n;
          const CUresult r = batch(CUstream(us), unsigned(n), ops.data(), 0);
          if (r != CUDA_SUCCESS) {
            const char* s = nullptr;
            cuGetErrorString(r, &s);
            probe_fail("cuStreamBatchMemOp", s ? s : "?");
          }
        }
        waiter<<<1, 1, 0, us>>>(done, i);
      }
      CUDA_CHECK(cudaEventRecord(e1, us));
      *reinterpret_cast<volatile unsigned long long*>(gate) = 1;  // go
      CUDA_CHECK(cudaStreamSynchronize(us));
      CUDA_CHECK(cudaStreamSynchronize(ds));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (round)
        std::printf("%-8s GPU %.2f us per iteration, doorbell -> descriptor read %.3f us, wrong descriptors %llu\n",
                    names[mode], ms * 1e3 / iters, double(stats[0]) / iters / 1e3, stats[1]);
    }
  return 0;
}
