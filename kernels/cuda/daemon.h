// The CUDA executor's entry points, callable from host code compiled by the host compiler.
#pragma once

#include <cuda_runtime_api.h>

#include "../core/types.h"

namespace dfccl::cuda {

inline constexpr unsigned kDaemonThreads = 512;  // threads per daemon block (the kernel's launch bound)

// Launches the daemon (ev.p.nblocks blocks of `threads` threads) on `stream`. preload: return at once (loads the
// module, so that no later launch of ours is a lazy-loading implicit synchronization).
cudaError_t launch_daemon(const core::EngineView& ev, unsigned threads, bool preload, cudaStream_t stream);

}  // namespace dfccl::cuda
