// Probe: what does the stream path itself cost per collective, without any collective? One GPU. A one-thread
// "daemon" kernel on its own stream answers each doorbell at once (it polls the doorbell word, then writes the
// completion word); the user's stream runs, per iteration, the doorbell and then the wait for the completion word,
// as dfccl's submit and dfcclWait enqueue them. The user's stream is held on a gate until all iterations are
// enqueued, so that the host's calls are not timed (keep iters * 4 well below the ~1000 commands a stream queues
// before the host's calls block: with 500, the probe hung behind its own gate): GPU time per iteration, for
//   memop + kernel:   doorbell by cuStreamWriteValue64, wait by a one-thread polling kernel (dfccl today);
//   kernel + kernel:  doorbell by a one-thread kernel that stores the word, wait by the polling kernel;
//   memop + memop:    doorbell by cuStreamWriteValue64, wait by cuStreamWaitValue64 (DFCCL_WAIT_KERNEL=0);
// each also with two event records per iteration (what the harness adds around an iteration).
// Build: target doorbell_path (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
//   doorbell_path [iters=100]
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"
#include "stream_ops.cuh"

__global__ void daemon_like(const unsigned long long* bell, unsigned long long* done, unsigned long long n) {
  for (unsigned long long i = 1; i <= n; ++i) {
    unsigned long long v;
    do {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(bell) : "memory");
    } while (v < i);
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(done), "l"(i) : "memory");
  }
}

__global__ void bell_kernel(unsigned long long* bell, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(bell), "l"(v) : "memory");
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 100;
  CUDA_CHECK(cudaSetDevice(0));
  const auto write64 = driver_entry<WriteFn>("cuStreamWriteValue64");
  const auto wait64 = driver_entry<WaitFn>("cuStreamWaitValue64");
  unsigned long long *bell, *done, *gate;
  CUDA_CHECK(cudaMalloc(&bell, 8));
  CUDA_CHECK(cudaMalloc(&done, 8));
  CUDA_CHECK(cudaHostAlloc(&gate, 8, cudaHostAllocMapped));
  cudaStream_t ds, us;
  CUDA_CHECK(cudaStreamCreateWithFlags(&ds, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&us, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> ev(2 * iters + 2);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  // Load every kernel before timing (lazy loading would be a device-wide barrier).
  bell_kernel<<<1, 1, 0, us>>>(bell, 0);
  waiter<<<1, 1, 0, us>>>(bell, 0);
  daemon_like<<<1, 1, 0, us>>>(bell, done, 0);
  CUDA_CHECK(cudaStreamSynchronize(us));

  const char* names[3] = {"memop + kernel", "kernel + kernel", "memop + memop"};
  for (int round = 0; round < 2; ++round)  // round 0 warms up
    for (int events = 0; events < 2; ++events)
      for (int mode = 0; mode < 3; ++mode) {
        CUDA_CHECK(cudaMemset(bell, 0, 8));
        CUDA_CHECK(cudaMemset(done, 0, 8));
        *reinterpret_cast<volatile unsigned long long*>(gate) = 0;
        CUDA_CHECK(cudaDeviceSynchronize());
        daemon_like<<<1, 1, 0, ds>>>(bell, done, iters);
        if (wait64(CUstream(us), CUdeviceptr(gate), 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
          probe_fail("cuStreamWaitValue64", "gate");
        CUDA_CHECK(cudaEventRecord(ev[0], us));
        for (int i = 1; i <= iters; ++i) {
          if (events) CUDA_CHECK(cudaEventRecord(ev[2 * i], us));
          if (mode == 1) bell_kernel<<<1, 1, 0, us>>>(bell, i);
          else if (write64(CUstream(us), CUdeviceptr(bell), i, 0) != CUDA_SUCCESS)
            probe_fail("cuStreamWriteValue64", "doorbell");
          if (mode == 2) {
            if (wait64(CUstream(us), CUdeviceptr(done), i, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
              probe_fail("cuStreamWaitValue64", "completion");
          } else {
            waiter<<<1, 1, 0, us>>>(done, i);
          }
          if (events) CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], us));
        }
        CUDA_CHECK(cudaEventRecord(ev[1], us));
        *reinterpret_cast<volatile unsigned long long*>(gate) = 1;  // go
        CUDA_CHECK(cudaStreamSynchronize(us));
        CUDA_CHECK(cudaStreamSynchronize(ds));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        if (round)
          std::printf("%-16s %s: GPU %.2f us per iteration\n", names[mode], events ? "+ 2 events" : "          ",
                      ms * 1e3 / iters);
      }
  return 0;
}
