// Probe: while one thread is inside a host-synchronous implicit synchronization (cudaFree, cudaMallocHost,
// cudaDeviceSynchronize) that cannot finish before a pending stream wait is satisfied, which CUDA calls of another
// thread still return? The answer decides whether a library thread can relaunch the daemon that would satisfy it.
// One case per process (a blocked case leaves the process unusable):
//   sync_vs_threads <sync: free|mallochost|devsync> <call: rt_launch|drv_launch|write_value|event_query|mapped>
// Stream A waits (cuStreamWaitValue64) on a device word; thread S enters <sync>; 100 ms later thread H makes <call>,
// which (except event_query) sets the word: a runtime launch of a writer kernel, a driver-API launch of it, a
// cuStreamWriteValue64 on stream C, or a host store to mapped memory watched by a kernel already running (control).
// Prints whether H's call returned and whether <sync> returned, each within 3 s.
// Build: target sync_vs_threads (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

using Clock = std::chrono::steady_clock;
static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

__global__ void writer(unsigned long long* w) { *reinterpret_cast<volatile unsigned long long*>(w) = 1; }
__global__ void watcher(volatile int* flag, unsigned long long* w) {
  while (*flag == 0) {
  }
  *reinterpret_cast<volatile unsigned long long*>(w) = 1;
}

using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);

template <class F>
static F entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
  return reinterpret_cast<F>(p);
}

static bool wait_flag(const std::atomic<bool>& f, double ms) {
  auto t0 = Clock::now();
  while (!f.load() && ms_since(t0) < ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return f.load();
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s free|mallochost|devsync rt_launch|drv_launch|write_value|event_query|mapped\n",
                 argv[0]);
    return 2;
  }
  const std::string sync = argv[1], call = argv[2];
  cudaSetDevice(0);
  auto wait_value = entry<WaitFn>("cuStreamWaitValue64");
  auto write_value = entry<WriteFn>("cuStreamWriteValue64");
  auto launch = entry<LaunchFn>("cuLaunchKernel");
  cudaStream_t a, c, k;
  for (cudaStream_t* s : {&a, &c, &k}) cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
  unsigned long long* word;
  cudaMalloc(&word, 8);
  cudaMemset(word, 0, 8);
  int* flag;
  cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped);
  *flag = 1;
  writer<<<1, 1, 0, c>>>(word);  // load both kernels before the test
  watcher<<<1, 1, 0, c>>>(flag, word);
  cudaEvent_t ev;
  cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  cudaDeviceSynchronize();
  cudaMemset(word, 0, 8);
  cudaDeviceSynchronize();
  *flag = 0;
  void* victim = nullptr;
  cudaMalloc(&victim, 1 << 20);

  if (call == "mapped") watcher<<<1, 1, 0, k>>>(flag, word);  // already running when the synchronization starts
  wait_value(reinterpret_cast<CUstream>(a), reinterpret_cast<CUdeviceptr>(word), 1, CU_STREAM_WAIT_VALUE_GEQ);
  cudaEventRecord(ev, a);

  std::atomic<bool> sync_done{false}, call_done{false};
  std::thread s([&] {
    void* h = nullptr;
    if (sync == "free") cudaFree(victim);
    else if (sync == "mallochost") cudaMallocHost(&h, 1 << 20);
    else cudaDeviceSynchronize();
    sync_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread h([&] {
    if (call == "rt_launch") {
      writer<<<1, 1, 0, c>>>(word);
    } else if (call == "drv_launch") {
      CUfunction f = nullptr;
      cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&f), reinterpret_cast<const void*>(writer));
      void* args[] = {&word};
      launch(f, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(c), args, nullptr);
    } else if (call == "write_value") {
      write_value(reinterpret_cast<CUstream>(c), reinterpret_cast<CUdeviceptr>(word), 1, 0);
    } else if (call == "event_query") {
      cudaEventQuery(ev);
    } else {
      __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    }
    call_done = true;
  });
  const bool call_ok = wait_flag(call_done, 3000);
  if (!call_ok && call == "event_query") {  // release the synchronization anyway, from this thread
    writer<<<1, 1, 0, c>>>(word);
  }
  const bool sync_ok = wait_flag(sync_done, 3000);
  std::printf("sync %-10s call %-11s: call %s, sync %s\n", sync.c_str(), call.c_str(), call_ok ? "returned" : "BLOCKED",
              sync_ok ? "returned" : "BLOCKED");
  std::fflush(stdout);
  std::_Exit(0);  // a blocked thread must not hold the process
}
