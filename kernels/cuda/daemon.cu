// The CUDA executor's daemon kernel: the shared scheduler run by one thread block per channel.
#include "../core/scheduler/daemon.h"
#include "../core/scheduler/graph_wait.h"
#include "daemon.h"
#include "exec_cuda.cuh"

namespace dfccl::cuda {

// The daemon: block b runs core::daemon_block (see launch_daemon in daemon.h).
__global__ void __launch_bounds__(kDaemonThreads, 1) daemon_kernel(const core::EngineView ev, bool preload) {
  __shared__ core::BlockShared bs;
  if (preload) return;
  core::daemon_block<CudaExec>(ev, blockIdx.x, bs);
}

// The launches go through cudaLaunchKernel, whose result is the launch's own: an error the application left on the
// calling thread (its last error) is neither reported as ours nor taken from it.
cudaError_t launch_daemon(const core::EngineView& ev, unsigned threads, bool preload, cudaStream_t stream) {
  void* args[] = {const_cast<core::EngineView*>(&ev), &preload};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&daemon_kernel), dim3(ev.p.nblocks + ev.p.prefetch),
                          dim3(threads), args, 0, stream);
}

// Returns once w is satisfied (see launch_stream_waiter in daemon.h).
__device__ void wait_until(const core::StreamWait& w) {
  const uint64_t* word = w.word;
  uint64_t look_at = 0, settle_until = 0;
  for (;;) {
    uint64_t v, now;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory");
    if (v >= w.value && (w.settle_word == nullptr || word == w.settle_word)) return;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (v >= w.value) {  // the collective is done: now its request's final status
      word = w.settle_word;
      settle_until = now + w.settle_ns;
      continue;
    }
    if (settle_until != 0) {  // a host word, written by a host thread: look about every microsecond
      if (now >= settle_until) return;
      asm volatile("nanosleep.u32 1000;");
    }
    if (now >= look_at) {  // about every kAbortLookNs: a read over PCIe, off the path of the completion word
      if (look_at != 0) {
        asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(w.abort_word) : "memory");
        if (v == w.abort_value) return;
      }
      look_at = now + core::kAbortLookNs;
    }
  }
}

// See launch_stream_waiter in daemon.h. Thread 0 polls; the others return.
__global__ void __launch_bounds__(32) stream_waiter(const core::StreamWait w) {
  if (threadIdx.x != 0) return;
  wait_until(w);
}

cudaError_t launch_stream_waiter(const core::StreamWait& w, cudaStream_t stream) {
  void* args[] = {const_cast<core::StreamWait*>(&w)};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&stream_waiter), dim3(1), dim3(32), args, 0, stream);
}

// See launch_graph_start in daemon.h.
__global__ void __launch_bounds__(32) graph_start(const core::GraphStart s) {
  if (threadIdx.x == 0 && s.g) core::graph_post<CudaExec>(s);  // s.g null: the engine's preload
}

cudaError_t launch_graph_start(const core::GraphStart& s, cudaStream_t stream) {
  void* args[] = {const_cast<core::GraphStart*>(&s)};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&graph_start), dim3(1), dim3(32), args, 0, stream);
}

// See launch_graph_wait in daemon.h.
__global__ void __launch_bounds__(kDaemonThreads, 1) graph_wait(const core::EngineView ev, const core::GraphWait w) {
  __shared__ core::BlockShared bs;
  if (w.abort_word == nullptr) return;  // the engine's preload
  core::graph_wait_block<CudaExec>(ev, w, blockIdx.x, bs);
}

cudaError_t launch_graph_wait(const core::EngineView& ev, const core::GraphWait& w, unsigned threads,
                              cudaStream_t stream) {
  void* args[] = {const_cast<core::EngineView*>(&ev), const_cast<core::GraphWait*>(&w)};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&graph_wait), dim3(ev.p.nblocks + ev.p.prefetch), dim3(threads),
                          args, 0, stream);
}

// See launch_graph_start_wait in daemon.h.
__global__ void __launch_bounds__(kDaemonThreads, 1)
    graph_start_wait(const core::EngineView ev, const core::GraphStart s, const core::GraphWait w) {
  __shared__ core::BlockShared bs;
  if (w.abort_word == nullptr) return;  // the engine's preload
  core::graph_start_wait_block<CudaExec>(ev, s, w, blockIdx.x, gridDim.x, bs);
}

cudaError_t launch_graph_start_wait(const core::EngineView& ev, const core::GraphStart& s, const core::GraphWait& w,
                                    unsigned threads, cudaStream_t stream) {
  void* args[] = {const_cast<core::EngineView*>(&ev), const_cast<core::GraphStart*>(&s),
                  const_cast<core::GraphWait*>(&w)};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&graph_start_wait), dim3(ev.p.nblocks + ev.p.prefetch),
                          dim3(threads), args, 0, stream);
}

cudaError_t resident_blocks(unsigned threads, unsigned* blocks) {
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, daemon_kernel, int(threads), 0);
  *blocks = e == cudaSuccess ? unsigned(sms * per_sm) : 0;
  return e;
}

}  // namespace dfccl::cuda
