#include "gpu_context.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gpu/device_ops.h"
#include "verify/verifiable.h"

namespace dfccl::harness {

void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw BackendError(fmt::format("{}: {}", what, cudaGetErrorString(err)));
}

GpuContext::GpuContext(int device, int num_streams) : device_(device) {
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  for (int i = 0; i < std::max(1, num_streams); ++i) {
    cudaStream_t s;
    cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    streams_.push_back(s);
  }
}

GpuContext::~GpuContext() {
  cudaSetDevice(device_);
  drop_capture();
  release();
  release_host_allocations();
  for (auto e : pool_) cudaEventDestroy(e);
  for (auto s : streams_) cudaStreamDestroy(s);
}

void GpuContext::make_current() const { cuda_check(cudaSetDevice(device_), "cudaSetDevice"); }

void GpuContext::allocate(const std::vector<EntryPlan>& plans, const std::vector<std::vector<char>>& send_data) {
  make_current();
  release();
  for (size_t i = 0; i < plans.size(); ++i) {
    const EntryPlan& p = plans[i];
    const BufferLayout l = buffer_layout(p);
    Buffers b;
    if (p.slot >= 0 && p.in_place) {
      cuda_check(cudaMalloc(&b.base[0], std::max<size_t>(1, l.buffer_bytes)), "cudaMalloc (in-place buffer)");
      b.send = static_cast<char*>(b.base[0]) + l.send_offset;
      b.recv = static_cast<char*>(b.base[0]) + l.recv_offset;
      b.poison_bytes = l.buffer_bytes;
      b.in_place = true;
      b.input = send_data[i];
    } else if (p.slot >= 0) {
      cuda_check(cudaMalloc(&b.base[0], std::max<size_t>(1, l.send_bytes)), "cudaMalloc (send buffer)");
      cuda_check(cudaMalloc(&b.base[1], std::max<size_t>(1, l.recv_bytes)), "cudaMalloc (receive buffer)");
      b.send = b.base[0];
      b.recv = b.base[1];
      b.poison_bytes = l.recv_bytes;
    }
    if (p.slot >= 0) {
      b.recv_bytes = l.recv_bytes;
      if (!send_data[i].empty())
        cuda_check(cudaMemcpy(b.send, send_data[i].data(), send_data[i].size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    bufs_.push_back(std::move(b));
  }
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after uploads)");
}

void GpuContext::download(int entry, void* dst) {
  make_current();
  const Buffers& b = bufs_.at(entry);
  if (b.recv_bytes == 0) return;
  cuda_check(cudaMemcpy(dst, b.recv, b.recv_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
}

void GpuContext::poison() {
  for (const Buffers& b : bufs_) {
    if (b.poison_bytes == 0) continue;
    cuda_check(cudaMemsetAsync(b.in_place ? b.base[0] : b.recv, verify::kPoisonByte, b.poison_bytes, streams_[0]),
               "cudaMemsetAsync");
    if (b.in_place && !b.input.empty())  // in place: the input again, where the collectives of earlier iterations wrote
      cuda_check(cudaMemcpyAsync(b.send, b.input.data(), b.input.size(), cudaMemcpyHostToDevice, streams_[0]),
                 "cudaMemcpyAsync (in-place input)");
  }
  cuda_check(cudaStreamSynchronize(streams_[0]), "cudaStreamSynchronize (poison)");
}

void GpuContext::release() {
  for (const Buffers& b : bufs_)
    for (void* p : b.base)
      if (p) cudaFree(p);
  bufs_.clear();
}

void GpuContext::device_sync() { cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (forced)"); }

void GpuContext::host_alloc(HostAllocKind kind, size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  switch (kind) {
    case HostAllocKind::MallocHost: {
      void* p = nullptr;
      cuda_check(cudaMallocHost(&p, bytes), "cudaMallocHost");
      kept_host_.push_back(p);
      break;
    }
    case HostAllocKind::FreeHost: {
      void* p = nullptr;
      cuda_check(cudaMallocHost(&p, bytes), "cudaMallocHost");
      cuda_check(cudaFreeHost(p), "cudaFreeHost");
      break;
    }
    case HostAllocKind::HostRegister: {
      void* p = std::malloc(bytes);
      if (!p) throw BackendError("malloc for cudaHostRegister failed");
      cudaError_t err = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
      if (err == cudaSuccess) err = cudaHostUnregister(p);
      std::free(p);
      cuda_check(err, "cudaHostRegister/cudaHostUnregister");
      break;
    }
  }
}

void GpuContext::release_host_allocations() {
  for (void* p : kept_host_) cudaFreeHost(p);
  kept_host_.clear();
}

void GpuContext::cuda_free() {
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, 256), "cudaMalloc (implicit sync)");
  cuda_check(cudaFree(p), "cudaFree");
}

void GpuContext::lazy_kernel() {
  int n = dfh_lazy_kernel_count();
  cuda_check(dfh_launch_lazy(streams_[0], next_lazy_ % n), "lazy kernel launch");
  ++next_lazy_;  // after n launches the pool is loaded: later launches are ordinary ones
}

void GpuContext::compute(double us) { cuda_check(dfh_launch_spin(streams_[0], us), "compute kernel launch"); }

cudaEvent_t GpuContext::event() {
  if (pool_used_ == pool_.size()) {
    cudaEvent_t e;
    cuda_check(cudaEventCreate(&e), "cudaEventCreate");
    pool_.push_back(e);
  }
  return pool_[pool_used_++];
}

cudaEvent_t GpuContext::record(int stream_index) {
  cudaEvent_t e = event();
  cuda_check(cudaEventRecord(e, stream(stream_index)), "cudaEventRecord");
  return e;
}

void GpuContext::begin_timing(const TimingPlan& plan) {
  drop_capture();
  plan_ = plan;
  pool_used_ = 0;
  iteration_ = -1;
  spans_.clear();
  entry_events_.clear();
}

void GpuContext::iteration_start(int iteration) {
  iteration_ = iteration;
  entry_events_.emplace_back();
  cudaEvent_t start = nullptr;  // the point of stream 0 where the iteration starts
  if (plan_.opens(iteration) && graphs_) {
    // The span's events go around the replay (end_capture_and_replay); stream 0 is idle meanwhile. Relaxed: a
    // capture that a failed trial left open can be ended by the next trial's worker thread (drop_capture).
    cuda_check(cudaStreamBeginCapture(streams_[0], cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    capturing_ = true;
    spans_.push_back(Span{iteration, iteration, nullptr, nullptr});
    if (streams_.size() > 1) start = record(0);  // captured: the other streams join the capture here
  } else if (plan_.opens(iteration)) {
    start = record(0);
    spans_.push_back(Span{iteration, iteration, start, nullptr});
  } else if (streams_.size() > 1) {
    start = record(0);  // only for the join below, not timed
  }
  for (size_t s = 1; s < streams_.size(); ++s)
    cuda_check(cudaStreamWaitEvent(streams_[s], start, 0), "cudaStreamWaitEvent");
}

void GpuContext::entry_start(int entry, int stream_index) {
  if (!plan_.per_entry_marks() || graphs_) return;
  auto& entries = entry_events_.back();
  if (entries.size() <= static_cast<size_t>(entry)) entries.resize(entry + 1, {nullptr, nullptr});
  entries[entry].first = record(stream_index);
}

void GpuContext::entry_end(int entry, int stream_index) {
  if (!plan_.per_entry_marks() || graphs_) return;
  entry_events_.back()[entry].second = record(stream_index);
}

void GpuContext::iteration_end() {
  for (size_t s = 1; s < streams_.size(); ++s)
    cuda_check(cudaStreamWaitEvent(streams_[0], record(static_cast<int>(s)), 0), "cudaStreamWaitEvent");
  if (plan_.closes(iteration_)) {
    Span& span = spans_.back();
    span.last = iteration_;
    if (graphs_) end_capture_and_replay();
    else span.end = record(0);
  }
}

void GpuContext::end_capture_and_replay() {
  cudaGraph_t graph = nullptr;
  capturing_ = false;
  cuda_check(cudaStreamEndCapture(streams_[0], &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  cuda_check(err, "cudaGraphInstantiate");
  // Uploaded before the first event, so that the span times the replay, not the graph's first copy to the device.
  // The executable graph is freed once its replay has completed (CUDA defers the destruction of one in flight).
  Span& span = spans_.back();
  cudaError_t e = cudaGraphUpload(exec, streams_[0]);
  if (e == cudaSuccess) {
    span.start = record(0);
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < replays_ && e == cudaSuccess; ++k) e = cudaGraphLaunch(exec, streams_[0]);
    launch_host_us_.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (e == cudaSuccess) span.end = record(0);
  }
  cudaGraphExecDestroy(exec);
  cuda_check(e, "cudaGraphUpload/cudaGraphLaunch");
}

void GpuContext::drop_capture() {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(streams_[0], &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

void GpuContext::wait_all(const std::atomic<bool>& cancel) {
  // An event of its own after everything: with batch timing the last iterations (the checked one) have none.
  cudaEvent_t last = record(0);
  while (true) {
    cudaError_t err = cudaEventQuery(last);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) cuda_check(err, "cudaEventQuery");
    if (cancel.load()) throw BackendError("cancelled by the watchdog");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::vector<IterationTiming> GpuContext::timings(int num_entries) {
  auto elapsed_us = [](cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    return a && b && cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms * 1000.0 : kNaN;
  };
  std::vector<TimedSpan> spans;
  const double launches = graphs_ ? replays_ : 1;
  for (const Span& s : spans_) spans.push_back(TimedSpan{s.first, s.last, elapsed_us(s.start, s.end) / launches});
  const int count = static_cast<int>(entry_events_.size());
  const std::vector<double> times = TimingPlan::per_iteration_times(spans, count);
  std::vector<IterationTiming> out(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    IterationTiming& t = out[static_cast<size_t>(i)];
    t.time_us = times[static_cast<size_t>(i)];
    t.entries.resize(num_entries);
    const auto& entries = entry_events_[static_cast<size_t>(i)];
    for (size_t e = 0; e < entries.size() && e < static_cast<size_t>(num_entries); ++e)
      t.entries[e].e2e_us = elapsed_us(entries[e].first, entries[e].second);
  }
  return out;
}

}  // namespace dfccl::harness
