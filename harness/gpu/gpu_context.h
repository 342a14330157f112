// What the two GPU backends (dfccl, nccl) share: the device, streams, device buffers of a step, CUDA-event timing of
// iterations (each one, or batches of them: plan/timing_plan.h), and the application-side operations of a scenario
// (forced device synchronization, host allocations, cudaFree, the first launch of a lazily loaded kernel, compute
// kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <string>
#include <vector>

#include "config/workload.h"
#include "plan/entry_plan.h"
#include "plan/timing_plan.h"

namespace dfccl::harness {

// Throws BackendError naming the call when a CUDA call fails.
void cuda_check(cudaError_t err, const char* what);

class GpuContext {
 public:
  GpuContext(int device, int num_streams);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const { return device_; }
  void make_current() const;  // cudaSetDevice in the calling thread
  cudaStream_t stream(int i) const { return streams_.at(static_cast<size_t>(i) % streams_.size()); }
  int num_streams() const { return static_cast<int>(streams_.size()); }

  // Buffers of a step: send and receive per entry, laid out by buffer_layout (in place: one buffer).
  void allocate(const std::vector<EntryPlan>& plans, const std::vector<std::vector<char>>& send_data);
  void* send(int entry) const { return bufs_.at(entry).send; }
  void* recv(int entry) const { return bufs_.at(entry).recv; }
  void download(int entry, void* dst);
  // Before the checked iteration: every output poisoned; an in-place entry's whole buffer poisoned and its input
  // uploaded again (the timed iterations overwrote it).
  void poison();
  void release();

  // Application-side operations (worker thread).
  void device_sync();
  void host_alloc(HostAllocKind kind, size_t bytes);
  void cuda_free();
  void lazy_kernel();
  void compute(double us);
  void release_host_allocations();  // frees the malloc_host allocations kept during a step

  // Timing with events on stream 0, where the plan opens and closes a span; the other streams join stream 0 at both
  // ends of every iteration whatever the plan (that orders the streams' work; it is not timing).
  // Graphs (the nccl-graph and dfccl-graph backends): the iterations of each span are captured on stream 0 (the other
  // streams join the capture as they join stream 0), then the graph is instantiated, uploaded and launched `replays`
  // times between the span's two events (the span's time is divided by `replays`); iterations outside spans run as
  // they are called. No per-entry events.
  void use_graphs(bool on, int replays) {
    graphs_ = on;
    replays_ = replays;
  }
  void begin_timing(const TimingPlan& plan);  // forgets earlier iterations
  void iteration_start(int iteration);
  void entry_start(int entry, int stream_index);  // per-entry events: only where the plan has per-entry marks
  void entry_end(int entry, int stream_index);
  void iteration_end();
  // Waits (polling, cancellable) until stream 0 has done everything enqueued so far.
  void wait_all(const std::atomic<bool>& cancel);
  // Per iteration: time and per-entry stream times (NaN where not recorded).
  std::vector<IterationTiming> timings(int num_entries);
  // Graphs: the host's time in each span's cudaGraphLaunch calls (µs), in span order since the backend began; a
  // launch that returns late leaves the GPU idle inside the span's events (run.diagnose prints them).
  const std::vector<double>& graph_launch_host_us() const { return launch_host_us_; }

 private:
  cudaEvent_t event();
  int device_;
  std::vector<cudaStream_t> streams_;
  struct Buffers {
    void* base[2] = {nullptr, nullptr};  // what was allocated (in place: base[0] only)
    void* send = nullptr;
    void* recv = nullptr;
    size_t recv_bytes = 0, poison_bytes = 0;  // 0: this rank does not take part
    bool in_place = false;
    std::vector<char> input;  // in place: the input, uploaded again by poison()
  };
  std::vector<Buffers> bufs_;
  std::vector<void*> kept_host_;
  int next_lazy_ = 0;
  std::vector<cudaEvent_t> pool_;
  size_t pool_used_ = 0;
  cudaEvent_t record(int stream_index);  // a pool event recorded on the stream
  void end_capture_and_replay();         // closes the span being captured (graphs_)
  void drop_capture();                   // ends a capture left open by a failed iteration, discarding it
  bool graphs_ = false;
  int replays_ = 1;  // graph launches per span
  bool capturing_ = false;
  std::vector<double> launch_host_us_;
  TimingPlan plan_;
  int iteration_ = -1;  // the iteration between iteration_start and iteration_end
  struct Span {
    int first = 0, last = 0;
    cudaEvent_t start = nullptr, end = nullptr;  // end: null until the span is closed
  };
  std::vector<Span> spans_;
  // Per iteration started, per entry (null when not submitted or the plan has no per-entry marks).
  std::vector<std::vector<std::pair<cudaEvent_t, cudaEvent_t>>> entry_events_;
};

}  // namespace dfccl::harness
