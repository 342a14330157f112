// The CUDA executor: the daemon kernel on an internal non-blocking stream, control writes on a second internal
// stream (never behind application work), stream memory operations for doorbells and completion waits (its
// connection regions: transport/peer_memory.cpp and transport/host_memory.cpp).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/daemon.h"
#include "executor/executor.h"
#include "settings/settings.h"
#include "util/error.h"

namespace dfccl {
namespace {

using WriteValue64Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using WaitValue64Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

template <class Fn>
Fn driver_entry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  DFCCL_CUDA(cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || fn == nullptr)
    throw Error(dfcclNotSupported, fmt::format("CUDA driver has no {}", symbol));
  return reinterpret_cast<Fn>(fn);
}

void check_cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw Error(dfcclUnhandledCudaError, fmt::format("CUDA driver error {} in {}", int(r), what));
}

// For its scope, this thread's CUDA calls never count as unsafe for a capture that another thread (or this one) has
// open in global mode: the engine's calls on its own streams and events (a daemon launch, the query whether it has
// left) are not part of any capture, and in global mode CUDA would invalidate the application's capture for them.
class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// CUDA_LAUNCH_BLOCKING makes every launch return only once its work is done; compute-sanitizer runs one kernel of
// the device at a time (it announces itself to its target through NV_SANITIZER_* variables).
std::string detect_serialization() { return launch_serialization_setting(); }

class CudaExecutor final : public Executor {
 public:
  CudaExecutor(int device, unsigned threads) : device_(device), threads_(threads) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
      throw Error(dfcclNotSupported, fmt::format("CUDA executor: no GPU available ({})", cudaGetErrorString(e)));
    if (device < 0 || device >= count)
      throw Error(dfcclInvalidArgument,
                  fmt::format("CUDA executor: device {} does not exist ({} GPUs)", device, count));
    DFCCL_CUDA(cudaSetDevice(device_));
    if (threads_ < 64 || threads_ > cuda::kDaemonThreads || threads_ % 32 != 0)
      throw Error(dfcclInvalidArgument,
                  fmt::format("DFCCL_THREADS={} must be a multiple of 32 in 64..{}", threads_, cuda::kDaemonThreads));
    write_value_ = driver_entry<WriteValue64Fn>("cuStreamWriteValue64");
    wait_value_ = driver_entry<WaitValue64Fn>("cuStreamWaitValue64");
    DFCCL_CUDA(cudaStreamCreateWithFlags(&daemon_stream_, cudaStreamNonBlocking));
    DFCCL_CUDA(cudaStreamCreateWithFlags(&control_stream_, cudaStreamNonBlocking));
    DFCCL_CUDA(cudaStreamCreateWithFlags(&probe_stream_, cudaStreamNonBlocking));
    DFCCL_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    // Load the daemon now: under lazy module loading its first launch would otherwise wait for the device, which
    // can hang behind a pending collective (docs/design.md, "Lazy loading").
    core::EngineView none{};
    none.p.nblocks = 1;
    DFCCL_CUDA(cuda::launch_daemon(none, threads_, /*preload=*/true, daemon_stream_));
    DFCCL_CUDA(cudaMalloc(reinterpret_cast<void**>(&zero_word_), sizeof(uint64_t)));
    DFCCL_CUDA(cudaMemsetAsync(zero_word_, 0, sizeof(uint64_t), daemon_stream_));
    // Loads the stream waiter and the graphs' start and wait kernels too: a graph's first replay must not be a lazy
    // load, a device-wide barrier that would hold the daemon's launch behind the graph's own wait.
    DFCCL_CUDA(cuda::launch_stream_waiter(core::StreamWait{zero_word_, 0, zero_word_, 0, nullptr, 0}, daemon_stream_));
    DFCCL_CUDA(cuda::launch_graph_start(core::GraphStart{}, daemon_stream_));
    DFCCL_CUDA(cuda::launch_graph_wait(none, core::GraphWait{}, threads_, daemon_stream_));
    DFCCL_CUDA(cuda::launch_graph_start_wait(none, core::GraphStart{}, core::GraphWait{}, threads_, daemon_stream_));
    DFCCL_CUDA(cudaStreamSynchronize(daemon_stream_));
    DFCCL_CUDA(cuda::resident_blocks(threads_, &resident_));
  }

  ~CudaExecutor() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(daemon_stream_);
    cudaEventDestroy(done_);
    cudaFree(zero_word_);
    cudaStreamDestroy(control_stream_);
    cudaStreamDestroy(probe_stream_);
    cudaStreamDestroy(daemon_stream_);
  }

  dfcclExecutor_t kind() const override { return dfcclExecutorCuda; }
  int device() const override { return device_; }
  unsigned threads_per_block() const override { return threads_; }
  unsigned resident_blocks() const override { return resident_; }
  std::string serialization() const override { return detect_serialization(); }
  bool under_mps() const override {
    int mps = 0;
    return cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, device_) == cudaSuccess && mps != 0;
  }

  void* alloc_device(size_t bytes) override {
    DFCCL_CUDA(cudaSetDevice(device_));
    void* p = nullptr;
    DFCCL_CUDA(cudaMalloc(&p, bytes));
    DFCCL_CUDA(cudaMemsetAsync(p, 0, bytes, control_stream_));
    DFCCL_CUDA(cudaStreamSynchronize(control_stream_));
    return p;
  }
  void free_device(void* p) override {
    cudaSetDevice(device_);
    cudaFree(p);
  }
  void* alloc_pinned(size_t bytes) override {
    DFCCL_CUDA(cudaSetDevice(device_));
    void* p = nullptr;
    DFCCL_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    std::memset(p, 0, bytes);
    return p;
  }
  void free_pinned(void* p) override { cudaFreeHost(p); }

  void write_word(uint64_t* dev, uint64_t value) override {
    DFCCL_CUDA(cudaSetDevice(device_));
    check_cu(write_value_(reinterpret_cast<CUstream>(control_stream_), reinterpret_cast<CUdeviceptr>(dev), value, 0),
             "cuStreamWriteValue64 (control)");
    DFCCL_CUDA(cudaStreamSynchronize(control_stream_));
  }
  void copy_to_device(void* dev, const void* host, size_t bytes) override {
    DFCCL_CUDA(cudaSetDevice(device_));
    DFCCL_CUDA(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, control_stream_));
    DFCCL_CUDA(cudaStreamSynchronize(control_stream_));
  }
  void copy_from_device(void* host, const void* dev, size_t bytes) override {
    DFCCL_CUDA(cudaSetDevice(device_));
    DFCCL_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, control_stream_));
    DFCCL_CUDA(cudaStreamSynchronize(control_stream_));
  }
  void post_word(uint64_t* dev, uint64_t value) override { stream_write(control_stream_, dev, value); }
  void stream_write(cudaStream_t stream, uint64_t* dev, uint64_t value) override {
    check_cu(write_value_(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(dev), value, 0),
             "cuStreamWriteValue64 (doorbell)");
  }
  void stream_wait(cudaStream_t stream, const core::StreamWait& w, bool by_kernel) override {
    if (by_kernel || w.settle_word != nullptr) {
      DFCCL_CUDA(cuda::launch_stream_waiter(w, stream));
      return;
    }
    check_cu(wait_value_(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(w.word), w.value,
                         CU_STREAM_WAIT_VALUE_GEQ),
             "cuStreamWaitValue64 (completion)");
  }

  void graph_start(cudaStream_t stream, const core::GraphStart& s) override {
    DFCCL_CUDA(cuda::launch_graph_start(s, stream));
  }
  void graph_wait(cudaStream_t stream, const core::EngineView& ev, const core::GraphWait& w) override {
    DFCCL_CUDA(cuda::launch_graph_wait(ev, w, threads_, stream));
  }
  void graph_start_wait(cudaStream_t stream, const core::EngineView& ev, const core::GraphStart& s,
                        const core::GraphWait& w) override {
    DFCCL_CUDA(cuda::launch_graph_start_wait(ev, s, w, threads_, stream));
  }

  void probe(uint64_t* host_word, uint64_t value) override {
    const RelaxedCapture relaxed;
    DFCCL_CUDA(cudaSetDevice(device_));
    check_cu(
        write_value_(reinterpret_cast<CUstream>(probe_stream_), reinterpret_cast<CUdeviceptr>(host_word), value, 0),
        "cuStreamWriteValue64 (barrier probe)");
  }

  void launch(const core::EngineView& ev) override {
    const RelaxedCapture relaxed;
    DFCCL_CUDA(cudaSetDevice(device_));
    DFCCL_CUDA(cuda::launch_daemon(ev, threads_, /*preload=*/false, daemon_stream_));
    DFCCL_CUDA(cudaEventRecord(done_, daemon_stream_));
  }
  bool exited() override {
    const RelaxedCapture relaxed;
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    DFCCL_CUDA(e);
    return true;
  }
  void device_synchronize() override {
    DFCCL_CUDA(cudaSetDevice(device_));
    DFCCL_CUDA(cudaDeviceSynchronize());
  }

 private:
  int device_;
  unsigned threads_;  // per daemon block: DFCCL_THREADS
  unsigned resident_ = 0;
  cudaStream_t daemon_stream_ = nullptr, control_stream_ = nullptr, probe_stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  uint64_t* zero_word_ = nullptr;  // a word that is 0: the stream waiter's preload launch waits on it
  WriteValue64Fn write_value_ = nullptr;
  WaitValue64Fn wait_value_ = nullptr;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(int device, unsigned threads) {
  return std::make_unique<CudaExecutor>(device, threads);
}

}  // namespace dfccl
