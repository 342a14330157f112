// Round trip of a cache line between two host threads pinned to CPUs i and j, for every pair: on a virtual machine,
// the host's topology behind the vCPUs (two vCPUs on one physical core's hyperthreads share its caches and answer
// fastest). Runs 174-179 looked at it because the host-ordered loop, whose two host threads (the application's and
// the progress thread) spin, ran in its slow mode on some vCPU pairs only (docs/lab/performance-log.md, 40).
// Build: target core_to_core (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
//   core_to_core [round trips per pair = 20000]   prints, per pair, the median ns of batches of 1000 round trips
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
    std::fprintf(stderr, "cannot pin to CPU %d\n", cpu);
    std::exit(1);
  }
}

alignas(128) static std::atomic<uint64_t> line{0};

static double pair_ns(int a, int b, int trips) {
  line.store(0);
  std::thread echo([&] {
    pin(b);
    for (uint64_t k = 1; k <= uint64_t(trips); ++k) {
      while (line.load(std::memory_order_acquire) != 2 * k - 1) {
      }
      line.store(2 * k, std::memory_order_release);
    }
  });
  pin(a);
  std::vector<double> batch;
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t k = 1; k <= uint64_t(trips); ++k) {
    line.store(2 * k - 1, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != 2 * k) {
    }
    if (k % 1000 == 0) {
      const auto t1 = std::chrono::steady_clock::now();
      batch.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 1000.0);
      t0 = t1;
    }
  }
  echo.join();
  std::sort(batch.begin(), batch.end());
  return batch[batch.size() / 2];
}

int main(int argc, char** argv) {
  const int trips = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int n = int(sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("round trip ns, median of batches of 1000 (%d CPUs)\n    ", n);
  for (int j = 0; j < n; ++j) std::printf("%5d", j);
  std::printf("\n");
  for (int i = 0; i < n; ++i) {
    std::printf("%3d ", i);
    for (int j = 0; j < n; ++j) std::printf("%5.0f", i == j ? 0.0 : pair_ns(i, j, trips));
    std::printf("\n");
  }
  return 0;
}
