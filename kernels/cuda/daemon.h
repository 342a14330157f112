// The CUDA executor's entry points, callable from host code compiled by the host compiler.
#pragma once

#include <cuda_runtime_api.h>

#include "../core/engine_memory.h"

namespace dfccl::cuda {

// Threads per daemon block at most (the kernel's launch bound; a build option: -DDFCCL_MAX_THREADS=1024).
#ifndef DFCCL_MAX_THREADS
#define DFCCL_MAX_THREADS 512
#endif
inline constexpr unsigned kDaemonThreads = DFCCL_MAX_THREADS;

// Caller: the engine (lib/src/executor/executor_cuda.cpp). Launches the daemon (ev.p.nblocks blocks of `threads`
// threads, and the prefetcher block if ev.p.prefetch) on `stream`; returns the launch's error. preload: the kernel
// returns at once (it loads the module at engine creation, so that no later launch is a lazy-loading implicit
// synchronization).
cudaError_t launch_daemon(const core::EngineView& ev, unsigned threads, bool preload, cudaStream_t stream);

// Caller: dfcclWait on a stream. Makes `stream` wait as `w` says (core::StreamWait: a completion word, then maybe
// the request's settled word for a bounded time): one thread polls with system-scope acquire loads, holding a slot
// of one SM meanwhile, and wakes sooner after the write than a stream memory wait. It also ends once
// *w.abort_word == w.abort_value (pinned memory, read about every kAbortLookNs): after an abort no daemon may run to
// finish the collective (DESIGN invariant 4; docs/design.md, "Abort").
cudaError_t launch_stream_waiter(const core::StreamWait& w, cudaStream_t stream);

// Caller: the engine, capturing a collective on a stream (lib/src/engine/engine_graph.cpp). Queues on `stream` the
// one-thread kernel that posts a new instance of the captured collective at each replay (core::graph_post).
cudaError_t launch_graph_start(const core::GraphStart& s, cudaStream_t stream);

// Caller: the engine, capturing a wait for a captured collective (lib/src/engine/engine_graph.cpp). Queues on
// `stream` the wait node: ev.p.nblocks blocks of `threads` threads (and the prefetcher's), whose block 0 polls until
// the instance of w.slot is done, and which run the scheduler themselves when no daemon runs
// (core::graph_wait_block). preload (w.abort_word null): returns at once, as launch_daemon's.
cudaError_t launch_graph_wait(const core::EngineView& ev, const core::GraphWait& w, unsigned threads,
                              cudaStream_t stream);

// Caller: the engine, capturing a call without a request whose one collective's wait follows its start at once
// (NCCL's form; lib/src/engine/engine_graph.cpp). Queues one node of the wait node's shape whose block 0 first posts
// the replay's instance, as a start node does (core::graph_start_wait_block). preload (w.abort_word null): returns at
// once.
cudaError_t launch_graph_start_wait(const core::EngineView& ev, const core::GraphStart& s, const core::GraphWait& w,
                                    unsigned threads, cudaStream_t stream);

// Caller: the engine at creation. *blocks receives how many daemon blocks of `threads` threads the current device
// holds at once; returns the error of the queries.
cudaError_t resident_blocks(unsigned threads, unsigned* blocks);

}  // namespace dfccl::cuda
