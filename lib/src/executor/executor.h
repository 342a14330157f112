// What the host runtime needs from an executor: memory, control writes, stream-ordered words, daemon launches and the
// device synchronization. Two implementations: executor_cuda.cpp (the GPU) and executor_host.cpp (CPU threads). The
// connection regions between ranks come from the intra-host transports (transport/transport.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/types.h"
#include "dfccl.h"

namespace dfccl {

class Executor {
 public:
  virtual ~Executor() = default;
  virtual dfcclExecutor_t kind() const = 0;
  virtual int device() const = 0;
  virtual unsigned threads_per_block() const = 0;
  // Daemon blocks that can run at once on this device (a persistent daemon needs all of its blocks resident).
  virtual unsigned resident_blocks() const = 0;
  // What serializes kernel launches in this process ("CUDA_LAUNCH_BLOCKING=1", "compute-sanitizer"), or "" if
  // nothing does. Under serialization a stream wait blocks the host or later kernels (docs/design.md).
  virtual std::string serialization() const { return {}; }
  // Whether this process's contexts on the device are shared through CUDA MPS (docs/design.md, "Several processes on
  // one GPU"): clients of one MPS server can hold each other's work, which separate contexts never do.
  virtual bool under_mps() const { return false; }

  // Memory the daemon sees as its device memory (zero-filled), and pinned host memory both sides see.
  virtual void* alloc_device(size_t bytes) = 0;
  virtual void free_device(void* p) = 0;
  virtual void* alloc_pinned(size_t bytes) = 0;
  virtual void free_pinned(void* p) = 0;

  // Host writes into device memory through the control stream: ordered, never behind application work.
  virtual void write_word(uint64_t* dev, uint64_t value) = 0;
  virtual void copy_to_device(void* dev, const void* host, size_t bytes) = 0;
  virtual void copy_from_device(void* host, const void* dev, size_t bytes) = 0;

  // dev = value through the control stream, not waited for (host executor: now): a host-ordered doorbell where no
  // prefetcher forwards it.
  virtual void post_word(uint64_t* dev, uint64_t value) = 0;
  // Stream-ordered: dev = value once the work queued on `stream` before it is done (host executor: now).
  virtual void stream_write(cudaStream_t stream, uint64_t* dev, uint64_t value) = 0;
  // Stream-ordered wait: work queued on `stream` after it waits as `w` says (core::StreamWait; CUDA only). by_kernel:
  // a one-thread kernel polls the words (goes on ~1.8 us after the write) instead of a stream memory wait (4.6-12.5
  // us). The kernel also goes on once *abort_word == abort_value (pinned: the collective's communicator was aborted);
  // a stream memory wait cannot watch a second word, so a wait with a settle word always takes the kernel.
  virtual void stream_wait(cudaStream_t stream, const core::StreamWait& w, bool by_kernel) = 0;
  // A captured collective's start (core::GraphStart, kernels/core/scheduler/graph_start.h): queued on `stream` as a
  // one-thread kernel, recorded by the stream's capture (CUDA); the host executor posts the instance now, on the
  // calling thread.
  virtual void graph_start(cudaStream_t stream, const core::GraphStart& s) = 0;
  // A captured wait (core::GraphWait, kernels/core/scheduler/graph_wait.h): queued on `stream` as a kernel of the
  // daemon's shape that polls until the instance is done and runs the scheduler itself while no daemon does (CUDA);
  // the host executor runs it now, on one thread per daemon block, and returns once it is done.
  virtual void graph_wait(cudaStream_t stream, const core::EngineView& ev, const core::GraphWait& w) = 0;
  // Both in one (core::graph_start_wait_block): queued on `stream` as one kernel of the wait's shape whose block 0
  // posts the instance first (CUDA); the host executor runs it now as graph_wait does.
  virtual void graph_start_wait(cudaStream_t stream, const core::EngineView& ev, const core::GraphStart& s,
                                const core::GraphWait& w) = 0;
  // Barrier probe: *host_word = value (pinned memory) as soon as the device runs new work, i.e. once no device-wide
  // barrier issued before this call (a lazy module load) holds it back. Host executor: at once.
  virtual void probe(uint64_t* host_word, uint64_t value) = 0;

  // The daemon: at most one launch at a time; exited() says whether the last one has finished.
  virtual void launch(const core::EngineView& ev) = 0;
  virtual bool exited() = 0;
  virtual void device_synchronize() = 0;
};

std::unique_ptr<Executor> make_host_executor(int device);
// threads: per daemon block (DFCCL_THREADS), a multiple of 32 in 64..cuda::kDaemonThreads (else dfcclInvalidArgument).
std::unique_ptr<Executor> make_cuda_executor(int device, unsigned threads);

}  // namespace dfccl
