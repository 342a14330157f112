// Probe: what the capture check costs each stream-ordered submission and dfcclWait (lib/src/api/argcheck.cpp,
// check_not_capturing: one cudaStreamIsCapturing per call). Host time per call, median of 21 batches of 100000
// calls, on a non-blocking stream, on the legacy default stream, and, for scale, cudaStreamQuery on the same stream.
// Build: target capture_query (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

template <class F>
double median_ns_per_call(F&& f) {
  constexpr int kBatches = 21, kCalls = 100000;
  std::vector<double> per_call;
  for (int b = 0; b < kBatches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) f();
    const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
    per_call.push_back(dt.count() / kCalls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[kBatches / 2];
}

int main() {
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 1;
  cudaStreamCaptureStatus st;
  int bad = 0;
  const double nonblocking = median_ns_per_call([&] { bad += cudaStreamIsCapturing(s, &st) != cudaSuccess; });
  const double legacy = median_ns_per_call([&] { bad += cudaStreamIsCapturing(cudaStreamLegacy, &st) != cudaSuccess; });
  const double query = median_ns_per_call([&] { bad += cudaStreamQuery(s) != cudaSuccess; });
  std::printf("cudaStreamIsCapturing: %.1f ns per call (non-blocking stream), %.1f ns (legacy stream); "
              "cudaStreamQuery %.1f ns; %d failed calls\n",
              nonblocking, legacy, query, bad);
  cudaStreamDestroy(s);
  return bad ? 1 : 0;
}
