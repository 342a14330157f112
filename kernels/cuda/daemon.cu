// The CUDA executor's daemon kernel: the shared scheduler run by one thread block per channel.
#include "../core/scheduler.h"
#include "daemon.h"
#include "exec_cuda.cuh"

namespace dfccl::cuda {

__global__ void __launch_bounds__(kDaemonThreads, 1) daemon_kernel(const core::EngineView ev, bool preload) {
  __shared__ core::BlockShared bs;
  if (preload) return;
  core::daemon_block<CudaExec>(ev, blockIdx.x, bs);
}

cudaError_t launch_daemon(const core::EngineView& ev, unsigned threads, bool preload, cudaStream_t stream) {
  daemon_kernel<<<ev.p.nblocks, threads, 0, stream>>>(ev, preload);
  return cudaGetLastError();
}

}  // namespace dfccl::cuda
