// Probe: what does the first launch of a lazily loaded kernel wait for, and what does it hold back?
// Run on the GPU machine with the default CUDA_MODULE_LOADING=LAZY. Each case prints one line;
// a case that does not finish within 3 s is reported as "blocked" (the process is then left to exit).
//   T1: stream A waits on a word (cuStreamWaitValue64); a never-launched kernel is launched on stream B; then an
//       already-loaded kernel that writes the word is launched on stream C. Does the writer run (everything done)?
//   T2: a persistent kernel P (loaded) spins until the host releases it through mapped memory; a never-launched
//       kernel is launched on stream B: does the launch call return before P ends? does the kernel run before P ends?
//       Then an already-loaded kernel is launched on stream C while P still runs: does it run?
//   T3: as T2, and after the lazy launch, a device-to-host cudaMemcpyAsync (pageable) on stream C: does it return
//       before P ends?
//   T4: as T2, and after the lazy launch, a cuStreamWriteValue64 into mapped host memory on stream C (what the
//       engine's barrier probe is): does the call return, and does the write land, before P ends?
// Build: target lazy_loading (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

using Clock = std::chrono::steady_clock;
static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

__global__ void writer(unsigned long long* w) { *reinterpret_cast<volatile unsigned long long*>(w) = 1; }
__global__ void loaded_noop(int* x) {
  if (x) x[0] = 1;
}
__global__ void persistent(volatile int* release) {
  while (*release == 0) {
  }
}
template <int N>
__global__ void lazy(int* x) {
  if (x && x[0] == -N) x[0] = N;
}

using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

static bool done_within(cudaStream_t s, double ms) {
  auto t0 = Clock::now();
  while (ms_since(t0) < ms) {
    if (cudaStreamQuery(s) == cudaSuccess) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return false;
}

int main() {
  cudaSetDevice(0);
  WaitFn wait_value = nullptr;
  cudaDriverEntryPointQueryResult q{};
  cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", reinterpret_cast<void**>(&wait_value), 12000,
                                   cudaEnableDefault, &q);
  cudaStream_t a, b, c, p;
  for (cudaStream_t* s : {&a, &b, &c, &p}) cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
  unsigned long long* word;
  cudaMalloc(&word, 8);
  cudaMemset(word, 0, 8);
  int* release;
  cudaHostAlloc(&release, sizeof(int), cudaHostAllocMapped);
  *release = 0;
  loaded_noop<<<1, 1, 0, c>>>(nullptr);  // load the helpers
  writer<<<1, 1, 0, c>>>(word);
  cudaStreamSynchronize(c);
  cudaMemset(word, 0, 8);
  cudaDeviceSynchronize();

  // T2 / T3
  for (int t = 2; t <= 3; ++t) {
    *release = 0;
    persistent<<<1, 32, 0, p>>>(release);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto t0 = Clock::now();
    std::atomic<bool> returned{false};
    std::thread th([&] {
      if (t == 2) lazy<2><<<1, 1, 0, b>>>(nullptr);
      else lazy<3><<<1, 1, 0, b>>>(nullptr);
      returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    bool b_done = cudaStreamQuery(b) == cudaSuccess;
    std::printf("T%d: lazy launch call %s after 200 ms; lazy kernel %s while P runs; ", t,
                returned ? "returned" : "NOT returned", b_done ? "ran" : "not run");
    std::fflush(stdout);
    if (t == 2) {
      std::atomic<bool> launched{false};
      std::thread l([&] {
        loaded_noop<<<1, 1, 0, c>>>(nullptr);
        launched = true;
      });
      bool c_done = done_within(c, 500);
      std::printf("loaded kernel on stream C: launch %s, stream %s while P runs; ",
                  launched ? "returned" : "NOT returned", c_done ? "done" : "blocked");
      l.detach();
    } else {
      std::atomic<bool> copied{false};
      std::thread m([&] {
        unsigned long long v = 0;
        cudaMemcpyAsync(&v, word, 8, cudaMemcpyDeviceToHost, c);
        copied = true;
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::printf("pageable D2H copy on stream C %s while P runs; ", copied ? "returned" : "blocked");
      m.detach();
    }
    *release = 1;
    bool p_done = done_within(p, 2000);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::printf("after releasing P (%s): lazy call %s, lazy kernel %s (%.1f ms)\n", p_done ? "ended" : "still running",
                returned ? "returned" : "NOT returned", cudaStreamQuery(b) == cudaSuccess ? "ran" : "not run",
                ms_since(t0));
    std::fflush(stdout);
    th.join();
  }
  // T4
  {
    using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
    WriteFn write_value = nullptr;
    cudaDriverEntryPointQueryResult wq{};
    cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", reinterpret_cast<void**>(&write_value), 12000,
                                     cudaEnableDefault, &wq);
    unsigned long long* probe_word = nullptr;
    cudaHostAlloc(&probe_word, 8, cudaHostAllocMapped);
    *probe_word = 0;
    *release = 0;
    persistent<<<1, 32, 0, p>>>(release);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto t0 = Clock::now();
    std::atomic<bool> returned{false}, wrote{false};
    std::thread th([&] {
      lazy<4><<<1, 1, 0, b>>>(nullptr);
      returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::thread w([&] {
      write_value(reinterpret_cast<CUstream>(c), reinterpret_cast<CUdeviceptr>(probe_word), 7, 0);
      wrote = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const bool landed = __atomic_load_n(probe_word, __ATOMIC_ACQUIRE) == 7;
    std::printf("T4: lazy launch call %s; stream write call %s, write %s while P runs; ",
                returned ? "returned" : "NOT returned", wrote ? "returned" : "NOT returned",
                landed ? "LANDED" : "not landed");
    *release = 1;
    bool p_done = done_within(p, 2000);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::printf("after releasing P (%s): write %s (%.1f ms)\n", p_done ? "ended" : "still running",
                __atomic_load_n(probe_word, __ATOMIC_ACQUIRE) == 7 ? "landed" : "not landed", ms_since(t0));
    std::fflush(stdout);
    th.join();
    w.join();
  }
  // T1
  {
    wait_value(reinterpret_cast<CUstream>(a), reinterpret_cast<CUdeviceptr>(word), 1, CU_STREAM_WAIT_VALUE_GEQ);
    auto t0 = Clock::now();
    std::atomic<bool> returned{false};
    std::thread th([&] {
      lazy<1><<<1, 1, 0, b>>>(nullptr);
      returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::printf("T1: lazy launch thread started; ");
    auto t1 = Clock::now();
    std::atomic<bool> writer_launched{false};  // an empty stream queries as done: say whether the launch returned
    std::thread w([&] {
      writer<<<1, 1, 0, c>>>(word);
      writer_launched = true;
    });
    bool c_done = done_within(c, 3000);
    bool a_done = done_within(a, 1000);
    unsigned long long v = 0;
    cudaError_t qa = cudaStreamQuery(a);
    std::thread m([&] { cudaMemcpy(&v, word, 8, cudaMemcpyDeviceToHost); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::printf("writer launch %s, writer stream %s, waiting stream %s (query: %s), lazy call %s, word read back %llu "
                "(%.1f ms)\n",
                writer_launched ? "returned" : "NOT returned", c_done ? "done" : "blocked", a_done ? "done" : "blocked",
                cudaGetErrorName(qa), returned ? "returned" : "NOT returned", v, ms_since(t1));
    m.detach();
    std::fflush(stdout);
    if (!c_done || !a_done) {
      std::printf("T1 blocked: stopping here\n");
      std::fflush(stdout);
      std::_Exit(0);
    }
    th.join();
    w.join();
  }
  std::_Exit(0);
}
