// The CUDA executor's entry points, callable from host code compiled by the host compiler.
#pragma once

#include <cuda_runtime_api.h>

#include "../core/engine_memory.h"

namespace dfccl::cuda {

// Threads per daemon block at most (the kernel's launch bound; -DDFCCL_MAX_THREADS=1024 builds for measurements).
#ifndef DFCCL_MAX_THREADS
#define DFCCL_MAX_THREADS 512
#endif
inline constexpr unsigned kDaemonThreads = DFCCL_MAX_THREADS;

// Launches the daemon (ev.p.nblocks blocks of `threads` threads, and the prefetcher block if ev.p.prefetch) on
// `stream`. preload: return at once (loads the module, so that no later launch of ours is a lazy-loading implicit
// synchronization).
cudaError_t launch_daemon(const core::EngineView& ev, unsigned threads, bool preload, cudaStream_t stream);

// Makes `stream` wait until *word >= value: one thread polls the word (system-scope acquire loads). A stream
// memory wait (cuStreamWaitValue64) is polled by the GPU's front end about every 8 us, so it goes on 4.6-12.5 us
// after the write; this kernel, 1.8 us (docs/performance-log.md, 7). It holds a slot of one SM while it waits.
// It also ends once *abort_word == abort_value (pinned memory: the collective's communicator was aborted, looked at
// about every 50 us), because no daemon may be running to finish the collective: its launch can be held by an
// implicit synchronization that waits for this very kernel (docs/design.md, "Abort").
cudaError_t launch_stream_waiter(const uint64_t* word, uint64_t value, const uint64_t* abort_word, uint64_t abort_value,
                                 cudaStream_t stream);

// How many daemon blocks of `threads` threads the current device can hold at once.
cudaError_t resident_blocks(unsigned threads, unsigned* blocks);

}  // namespace dfccl::cuda
