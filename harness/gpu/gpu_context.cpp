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
    size_t ts = type_size(p.dtype);
    void* s = nullptr;
    void* r = nullptr;
    if (p.slot >= 0) {
      cuda_check(cudaMalloc(&s, std::max<size_t>(1, p.send_elems * ts)), "cudaMalloc (send buffer)");
      cuda_check(cudaMalloc(&r, std::max<size_t>(1, p.recv_elems * ts)), "cudaMalloc (receive buffer)");
      if (!send_data[i].empty())
        cuda_check(cudaMemcpy(s, send_data[i].data(), send_data[i].size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    send_.push_back(s);
    recv_.push_back(r);
    recv_bytes_.push_back(p.slot >= 0 ? p.recv_elems * ts : 0);
  }
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after uploads)");
}

void GpuContext::download(int entry, void* dst) {
  make_current();
  if (recv_bytes_.at(entry) == 0) return;
  cuda_check(cudaMemcpy(dst, recv_.at(entry), recv_bytes_.at(entry), cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
}

void GpuContext::poison() {
  for (size_t i = 0; i < recv_.size(); ++i)
    if (recv_bytes_[i])
      cuda_check(cudaMemsetAsync(recv_[i], verify::kPoisonByte, recv_bytes_[i], streams_[0]), "cudaMemsetAsync");
  cuda_check(cudaStreamSynchronize(streams_[0]), "cudaStreamSynchronize (poison)");
}

void GpuContext::release() {
  for (auto p : send_) if (p) cudaFree(p);
  for (auto p : recv_) if (p) cudaFree(p);
  send_.clear();
  recv_.clear();
  recv_bytes_.clear();
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

void GpuContext::begin_timing() {
  pool_used_ = 0;
  iters_.clear();
}

void GpuContext::iteration_start() {
  IterEvents it;
  it.start = event();
  cuda_check(cudaEventRecord(it.start, streams_[0]), "cudaEventRecord");
  for (size_t s = 1; s < streams_.size(); ++s)
    cuda_check(cudaStreamWaitEvent(streams_[s], it.start, 0), "cudaStreamWaitEvent");
  iters_.push_back(std::move(it));
}

void GpuContext::entry_start(int entry, int stream_index) {
  auto& it = iters_.back();
  if (it.entries.size() <= static_cast<size_t>(entry)) it.entries.resize(entry + 1, {nullptr, nullptr});
  it.entries[entry].first = event();
  cuda_check(cudaEventRecord(it.entries[entry].first, stream(stream_index)), "cudaEventRecord");
}

void GpuContext::entry_end(int entry, int stream_index) {
  auto& it = iters_.back();
  it.entries[entry].second = event();
  cuda_check(cudaEventRecord(it.entries[entry].second, stream(stream_index)), "cudaEventRecord");
}

void GpuContext::iteration_end() {
  auto& it = iters_.back();
  for (size_t s = 1; s < streams_.size(); ++s) {
    cudaEvent_t e = event();
    cuda_check(cudaEventRecord(e, streams_[s]), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(streams_[0], e, 0), "cudaStreamWaitEvent");
  }
  it.end = event();
  cuda_check(cudaEventRecord(it.end, streams_[0]), "cudaEventRecord");
}

void GpuContext::wait_all(const std::atomic<bool>& cancel) {
  if (iters_.empty()) return;
  cudaEvent_t last = iters_.back().end;
  while (true) {
    cudaError_t err = cudaEventQuery(last);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) cuda_check(err, "cudaEventQuery");
    if (cancel.load()) throw BackendError("cancelled by the watchdog");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::vector<IterationTiming> GpuContext::timings(int num_entries) {
  std::vector<IterationTiming> out;
  for (const auto& it : iters_) {
    IterationTiming t;
    t.entries.resize(num_entries);
    float ms = 0;
    if (it.start && it.end && cudaEventElapsedTime(&ms, it.start, it.end) == cudaSuccess) t.time_us = ms * 1000.0;
    for (size_t e = 0; e < it.entries.size() && e < static_cast<size_t>(num_entries); ++e) {
      auto [a, b] = it.entries[e];
      if (a && b && cudaEventElapsedTime(&ms, a, b) == cudaSuccess) t.entries[e].e2e_us = ms * 1000.0;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace dfccl::harness
