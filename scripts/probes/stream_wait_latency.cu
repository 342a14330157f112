// Probe: how soon does a stream waiting on a memory word (cuStreamWaitValue64, dfcclWait's mechanism) go on after
// the word is written? Stream A runs a kernel that spins for d microseconds, then writes the word and notes the
// time (%globaltimer); stream B, already blocked on the word, runs a kernel that notes the time when it starts. The
// difference, per delay d from 0 to 24 us, for the word in device memory and in pinned host memory; then the same
// with B waiting by a one-thread kernel that polls the word instead of a stream wait, and with that kernel followed
// by the stream wait (satisfied by then). A fixed polling period of the
// stream wait shows as a latency that saws between a floor and floor + period as d grows.
// Build: target stream_wait_latency (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
//   stream_wait_latency [repeats=20]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                       \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

__device__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins delay_ns, then notes the time and writes value to the word (system scope, visible to the stream wait).
__global__ void writer(unsigned long long* word, unsigned long long value, unsigned long long delay_ns,
                       unsigned long long* t_write) {
  const unsigned long long t0 = gtime();
  while (gtime() - t0 < delay_ns) {
  }
  *t_write = gtime();
  __threadfence_system();
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(word), "l"(value) : "memory");
}

__global__ void note(unsigned long long* t) { *t = gtime(); }

__global__ void poller(const unsigned long long* word, unsigned long long value, unsigned long long* t) {
  unsigned long long v;
  do {
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory");
  } while (v < value);
  *t = gtime();
}

using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  CK(cudaSetDevice(0));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &fn, 12000, cudaEnableDefault, &q));
  auto wait_value = reinterpret_cast<WaitFn>(fn);
  cudaStream_t a, b;
  CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  unsigned long long *dword, *hword, *times;
  CK(cudaMalloc(&dword, 8));
  CK(cudaHostAlloc(&hword, 8, cudaHostAllocMapped | cudaHostAllocPortable));
  CK(cudaMallocManaged(&times, 24));
  CK(cudaMemset(dword, 0, 8));
  *hword = 0;
  unsigned long long value = 0;
  // Warm up the kernels (module loading).
  note<<<1, 1, 0, a>>>(times);
  writer<<<1, 1, 0, a>>>(dword, 0, 0, times);
  poller<<<1, 1, 0, a>>>(dword, 0, times);
  CK(cudaDeviceSynchronize());
  const char* names[4] = {"stream wait, device word", "stream wait, pinned host word", "polling kernel, device word",
                          "polling kernel, then a stream wait (already satisfied), device word"};
  for (int mode = 0; mode < 4; ++mode) {
    unsigned long long* word = mode == 1 ? hword : dword;
    std::printf("%s: delay us -> median latency us (min, max)\n", names[mode]);
    for (int d = 0; d <= 24; d += 2) {
      std::vector<double> lat;
      for (int r = 0; r < repeats; ++r) {
        ++value;
        if (mode < 2) {
          if (wait_value(CUstream(b), CUdeviceptr(word), value, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
            std::fprintf(stderr, "cuStreamWaitValue64 failed\n");
            return 1;
          }
          note<<<1, 1, 0, b>>>(times + 1);
        } else if (mode == 2) {
          poller<<<1, 1, 0, b>>>(word, value, times + 1);
        } else {
          poller<<<1, 1, 0, b>>>(word, value, times + 2);
          if (wait_value(CUstream(b), CUdeviceptr(word), value, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
            std::fprintf(stderr, "cuStreamWaitValue64 failed\n");
            return 1;
          }
          note<<<1, 1, 0, b>>>(times + 1);
        }
        writer<<<1, 1, 0, a>>>(word, value, (unsigned long long)d * 1000, times);
        CK(cudaDeviceSynchronize());
        lat.push_back((double(times[1]) - double(times[0])) / 1e3);
      }
      std::sort(lat.begin(), lat.end());
      std::printf("  %2d us -> %6.2f (%6.2f, %6.2f)\n", d, lat[lat.size() / 2], lat.front(), lat.back());
    }
  }
  return 0;
}
