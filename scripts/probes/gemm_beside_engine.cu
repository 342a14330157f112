// Probe: does a dfccl engine slow down compute on its GPU while it has nothing to do? (issue #4: a GEMM beside an
// idle engine loses <= 2 %.) A tiled float32 GEMM (4096^3, every SM) runs on GPU 0, timed with CUDA events, in
// rounds that alternate: no engine; engine idle (communicators on GPUs 0 and 1, or on GPU 0 alone on a one-GPU
// machine, a few all-reduces done, then 20 ms for the daemon to exit idle); again without. With DFCCL_IDLE_NS set
// very high the daemon stays resident while idle, which shows what exiting saves.
// Build: target gemm_beside_engine (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
//   gemm_beside_engine [rounds=3]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "probe_check.h"

constexpr int kTile = 64, kK = 16;  // 64 x 64 output tile per block, 256 threads of 4 x 4 outputs

__global__ void __launch_bounds__(256) sgemm(const float* a, const float* b, float* c, int n) {
  __shared__ float as[kK][kTile], bs[kK][kTile];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < n; k0 += kK) {
    for (int i = threadIdx.x; i < kK * kTile; i += 256) {
      const int kk = i / kTile, m = i % kTile;
      as[kk][m] = a[size_t(row0 + m) * n + k0 + kk];
      bs[kk][m] = b[size_t(k0 + kk) * n + col0 + m];
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty * 4 + i], bv[i] = bs[kk][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) c[size_t(row0 + ty * 4 + i) * n + col0 + tx * 4 + j] = acc[i][j];
}

static double gemm_tflops(const float* a, const float* b, float* c, int n, int reps) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const dim3 grid(n / kTile, n / kTile);
  sgemm<<<grid, 256>>>(a, b, c, n);  // warm-up
  cudaEventRecord(e0);
  for (int r = 0; r < reps; ++r) sgemm<<<grid, 256>>>(a, b, c, n);
  cudaEventRecord(e1);
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * double(n) * n * n * reps / (ms * 1e-3) / 1e12;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  const int n = 4096, reps = 20;
  CUDA_CHECK(cudaSetDevice(0));
  float *a, *b, *c;
  CUDA_CHECK(cudaMalloc(&a, size_t(n) * n * 4));
  CUDA_CHECK(cudaMalloc(&b, size_t(n) * n * 4));
  CUDA_CHECK(cudaMalloc(&c, size_t(n) * n * 4));
  cudaMemset(a, 0, size_t(n) * n * 4);
  cudaMemset(b, 0, size_t(n) * n * 4);
  const char* idle = std::getenv("DFCCL_IDLE_NS");
  std::printf("DFCCL_IDLE_NS=%s\n", idle ? idle : "(default)");
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  const int ndev = count >= 2 ? 2 : 1;  // the engine's communicator: GPUs 0 and 1, or GPU 0 alone
  std::printf("engine on %d GPU(s)\n", ndev);
  std::vector<double> without, with;
  for (int round = 0; round < rounds; ++round) {
    const double t0 = gemm_tflops(a, b, c, n, reps);
    int devs[2] = {0, 1};
    dfcclComm_t comms[2];
    DFCCL_CHECK(dfcclCommInitAll(comms, ndev, devs));
    float* buf[2];
    for (int r = 0; r < ndev; ++r) {
      CUDA_CHECK(cudaSetDevice(r));
      CUDA_CHECK(cudaMalloc(&buf[r], 1 << 20));
    }
    for (int it = 0; it < 10; ++it) {
      dfcclRequest_t q[2];
      for (int r = 0; r < ndev; ++r) {
        CUDA_CHECK(cudaSetDevice(r));
        DFCCL_CHECK(dfcclAllReduce(buf[r], buf[r], 1 << 18, dfcclFloat32, dfcclSum, comms[r], 0, nullptr, &q[r]));
      }
      for (int r = 0; r < ndev; ++r) {
        DFCCL_CHECK(dfcclSynchronize(q[r], 10000));
        dfcclRequestFree(q[r]);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CUDA_CHECK(cudaSetDevice(0));
    dfcclStats_t st = DFCCL_STATS_INITIALIZER;
    DFCCL_CHECK(dfcclGetStats(comms[0], &st));
    const double t1 = gemm_tflops(a, b, c, n, reps);
    std::printf("round %d: GEMM %.2f TFLOPS without an engine, %.2f beside an engine (daemon running: %d, %llu "
                "launches), ratio %.4f\n",
                round, t0, t1, st.daemonRunning, (unsigned long long)st.daemonLaunches, t1 / t0);
    std::fflush(stdout);
    without.push_back(t0);
    with.push_back(t1);
    for (int r = 0; r < ndev; ++r) {
      CUDA_CHECK(cudaSetDevice(r));
      cudaFree(buf[r]);
      dfcclCommDestroy(comms[r]);
    }
    CUDA_CHECK(cudaSetDevice(0));
  }
  double s0 = 0, s1 = 0;
  for (size_t i = 0; i < without.size(); ++i) s0 += without[i], s1 += with[i];
  std::printf("mean: %.2f TFLOPS without, %.2f beside the engine: %.2f %% lost\n", s0 / rounds, s1 / rounds,
              100.0 * (1.0 - s1 / s0));
  return 0;
}
