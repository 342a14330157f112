// Probe: does a kernel of one process hold another process's synchronizations? Two processes on one GPU (forked
// before either touches CUDA). Process B launches a kernel that spins for HOLD_MS (it reads %globaltimer, so it ends
// by itself); process A, once B's kernel runs, times its own calls, one line each:
//   device_sync   cudaDeviceSynchronize with nothing of A's queued
//   stream_sync   cudaStreamSynchronize of a stream of A's that holds one finished kernel
//   free          cudaFree of a buffer of A's
//   malloc_host   cudaMallocHost of 1 MiB
//   lazy_launch   the first launch of a kernel never launched before (CUDA_MODULE_LOADING=LAZY, the default)
//   loaded_launch a launch of an already-launched kernel on a stream of A's, and its completion
// A line whose time is close to HOLD_MS says that A waited for B's kernel: the two processes are coupled. Run it
// time-sliced and under MPS (scripts/device/env.sh's mps_start) and compare.
//   mps_coupling [hold_ms (default 2000)]
// Build: target mps_coupling (cmake -DDFCCL_BUILD_PROBES=ON), in build/bin.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

using Clock = std::chrono::steady_clock;
static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Spins until *release is non-zero or hold_ns have passed; *running = 1 once it started.
__global__ void spin(volatile int* release, volatile int* running, unsigned long long hold_ns) {
  *running = 1;
  __threadfence_system();
  const unsigned long long t0 = now_ns();
  while (*release == 0 && now_ns() - t0 < hold_ns) {
  }
}
__global__ void loaded(int* x) {
  if (x) x[0] += 1;
}
__global__ void never_launched(int* x) {
  if (x) x[1] += 1;
}

static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Process B: the spinning kernel. Writes one byte to `ready` once it runs, exits when it ends.
static int run_b(int ready, double hold_ms) {
  check(cudaSetDevice(0), "B cudaSetDevice");
  int* flags = nullptr;  // [0] release, [1] running
  check(cudaHostAlloc(reinterpret_cast<void**>(&flags), 8, cudaHostAllocMapped), "B cudaHostAlloc");
  flags[0] = flags[1] = 0;
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "B cudaStreamCreate");
  const auto t0 = Clock::now();
  spin<<<1, 32, 0, s>>>(flags, flags + 1, static_cast<unsigned long long>(hold_ms * 1e6));
  while (reinterpret_cast<volatile int*>(flags)[1] == 0 && ms_since(t0) < 10000) {
  }
  const char c = 'r';
  if (write(ready, &c, 1) != 1) return 1;
  check(cudaStreamSynchronize(s), "B cudaStreamSynchronize");
  std::printf("B: a spinning kernel ran %.0f ms\n", ms_since(t0));
  return 0;
}

// Process A: waits for B's kernel to run, then times its own calls.
static int run_a(int ready, double hold_ms) {
  check(cudaSetDevice(0), "A cudaSetDevice");
  int* x = nullptr;
  void* victim = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&x), 64), "A cudaMalloc");
  check(cudaMemset(x, 0, 64), "A cudaMemset");
  check(cudaMalloc(&victim, 1 << 20), "A cudaMalloc");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "A cudaStreamCreate");
  loaded<<<1, 1, 0, s>>>(x);
  check(cudaDeviceSynchronize(), "A warm-up");
  char c;
  if (read(ready, &c, 1) != 1) return 1;
  int coupled = 0;
  auto timed = [&](const char* name, auto&& call) {
    const auto t0 = Clock::now();
    call();
    const double ms = ms_since(t0);
    const bool held = ms > 0.5 * hold_ms;
    coupled += held;
    std::printf("A: %-13s %9.2f ms%s\n", name, ms, held ? "  <- waited for B's kernel" : "");
  };
  timed("stream_sync", [&] { check(cudaStreamSynchronize(s), "cudaStreamSynchronize"); });
  timed("device_sync", [&] { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); });
  timed("free", [&] { check(cudaFree(victim), "cudaFree"); });
  timed("malloc_host", [&] {
    void* p = nullptr;
    check(cudaMallocHost(&p, 1 << 20), "cudaMallocHost");
    cudaFreeHost(p);
  });
  timed("lazy_launch", [&] {
    never_launched<<<1, 1, 0, s>>>(x);
    check(cudaStreamSynchronize(s), "lazy launch");
  });
  timed("loaded_launch", [&] {
    loaded<<<1, 1, 0, s>>>(x);
    check(cudaStreamSynchronize(s), "loaded launch");
  });
  std::printf("A: %d of 6 calls waited for the other process's kernel\n", coupled);
  return 0;
}

int main(int argc, char** argv) {
  const double hold_ms = argc > 1 ? std::atof(argv[1]) : 2000.0;
  int p[2];
  if (pipe(p) != 0) return 1;
  const pid_t b = fork();
  if (b == 0) {
    close(p[0]);
    return run_b(p[1], hold_ms);
  }
  close(p[1]);
  const int rc = run_a(p[0], hold_ms);
  int st = 0;
  waitpid(b, &st, 0);
  return rc != 0 ? rc : (WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}
