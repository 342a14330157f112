// Does a pinned page's latency over PCIe depend on the page? The host-ordered loop's end to end sits at 9.7 or
// 10.7 us per process of the same binary (docs/lab/performance-log.md, 35 and 39), and overhead_split's own ping-pong
// at 2.7 or 3.1 us, with neither the threads' placement nor the progress thread's yield deciding it (section 40).
// If the mode belonged to the page (an IOMMU's translation of a DMA address, the memory behind it), it would stay
// the same for one buffer across sweeps and differ between buffers of one process.
//
// For each of 16 pinned buffers (separate cudaHostAlloc of 4 KiB), 8 pages of one 2 MiB cudaHostAlloc and 4 pages
// of malloc'ed memory registered with cudaHostRegister, three sweeps of:
//   - the GPU's read of the page: one thread, 64 x 8 dependent volatile loads, cycles per load (median of the 64);
//   - a ping-pong: the host writes ping, the GPU thread polling it answers pong in the same page, the host polls
//     pong; 400 round trips, median and min.
// Then the read latency of each 64-byte line of two pages, to tell a page's latency from a line's.
// Prints the page's guest-physical frame (/proc/self/pagemap; 0 without the right to read it).
//
// Build: target pinned_pages (cmake -DDFCCL_BUILD_PROBES=ON; scripts/probes/CMakeLists.txt), in build/bin.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"
#include "probe_stats.h"

__global__ void read_latency(volatile unsigned long long* p, int n, unsigned long long* cycles) {
  unsigned long long v = 0;
  for (int i = 0; i < n; ++i) {
    const long long t0 = clock64();
    for (int k = 0; k < 8; ++k) v = p[v & 1];  // each load's address waits for the previous one (the page holds 0)
    cycles[i] = static_cast<unsigned long long>(clock64() - t0 + (v == 12345)) / 8;
  }
}

__global__ void pong_kernel(volatile unsigned long long* ping, volatile unsigned long long* pong, int n) {
  for (int i = 1; i <= n; ++i) {
    while (*ping != static_cast<unsigned long long>(i)) {
    }
    *pong = static_cast<unsigned long long>(i);
    __threadfence_system();
  }
}

// Median cycles per read of p by one GPU thread (the first 4 of kReads samples dropped: the kernel's start).
constexpr int kReads = 64;
static double read_cycles(volatile unsigned long long* p, unsigned long long* cycles) {
  read_latency<<<1, 1>>>(p, kReads, cycles);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned long long> hc(kReads);
  CUDA_CHECK(cudaMemcpy(hc.data(), cycles, kReads * 8, cudaMemcpyDeviceToHost));
  return median(std::vector<double>(hc.begin() + 4, hc.end()));
}

static uint64_t frame_of(const void* p) {
  static const int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return 0;
  uint64_t e = 0;
  const long page = sysconf(_SC_PAGESIZE);
  if (pread(fd, &e, 8, (reinterpret_cast<uintptr_t>(p) / page) * 8) != 8) return 0;
  return e & ((1ull << 55) - 1);
}

int main() {
  constexpr int kRounds = 400;
  CUDA_CHECK(cudaSetDevice(0));
  struct Buf {
    const char* kind;
    unsigned long long* p;
  };
  std::vector<Buf> bufs;
  for (int i = 0; i < 16; ++i) {
    void* p = nullptr;
    CUDA_CHECK(cudaHostAlloc(&p, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    bufs.push_back({"alloc4K", static_cast<unsigned long long*>(p)});
  }
  char* big = nullptr;
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&big), 2 << 20, cudaHostAllocMapped | cudaHostAllocPortable));
  for (int i = 0; i < 8; ++i) bufs.push_back({"big2M", reinterpret_cast<unsigned long long*>(big + i * 262144)});
  for (int i = 0; i < 4; ++i) {
    void* p = std::aligned_alloc(4096, 4096);
    CUDA_CHECK(cudaHostRegister(p, 4096, cudaHostRegisterMapped | cudaHostRegisterPortable));
    bufs.push_back({"register", static_cast<unsigned long long*>(p)});
  }
  unsigned long long* cycles = nullptr;
  CUDA_CHECK(cudaMalloc(&cycles, kReads * 8));
  std::printf("%-3s %-9s %14s | %s\n", "buf", "kind", "frame", "sweep: read cycles, ping-pong median/min us");
  std::vector<std::vector<double>> rows(bufs.size());
  for (int sweep = 0; sweep < 3; ++sweep) {
    for (size_t b = 0; b < bufs.size(); ++b) {
      volatile unsigned long long* page = bufs[b].p;
      for (int k = 0; k < 64; ++k) page[k] = 0;
      const double read = read_cycles(page, cycles);
      volatile unsigned long long* ping = page + 16;  // separate 128-byte lines, one page
      volatile unsigned long long* pong = page + 32;
      pong_kernel<<<1, 1>>>(ping, pong, kRounds);
      CUDA_CHECK(cudaGetLastError());
      std::vector<double> rtt;
      for (int i = 1; i <= kRounds; ++i) {
        const auto a = std::chrono::steady_clock::now();
        *ping = static_cast<unsigned long long>(i);
        while (*pong != static_cast<unsigned long long>(i)) {
        }
        rtt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
      }
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<double> tail(rtt.begin() + 40, rtt.end());  // after a warm-up
      rows[b].push_back(read);
      rows[b].push_back(median(tail));
      rows[b].push_back(*std::min_element(tail.begin(), tail.end()));
    }
  }
  for (size_t b = 0; b < bufs.size(); ++b) {
    std::printf("%-3zu %-9s %14llx |", b, bufs[b].kind, static_cast<unsigned long long>(frame_of(bufs[b].p)));
    for (int s = 0; s < 3; ++s)
      std::printf("  %5.0f %5.2f/%4.2f", rows[b][3 * s], rows[b][3 * s + 1], rows[b][3 * s + 2]);
    std::printf("\n");
  }
  // Within pages: the read latency of each 64-byte line of the 2 MiB buffer's first two pages.
  for (int pg = 0; pg < 2; ++pg) {
    std::printf("lines of big2M page %d (cycles per read):", pg);
    for (int line = 0; line < 64; ++line) {
      volatile unsigned long long* at = reinterpret_cast<unsigned long long*>(big + pg * 4096 + line * 64);
      at[0] = 0;
      at[1] = 0;
      std::printf(" %.0f", read_cycles(at, cycles));
    }
    std::printf("\n");
  }
  return 0;
}
