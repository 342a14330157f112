// The host's clock and the pause of a spin loop, for the engine's waits and the requests' timestamps.
#pragma once

#include <cstdint>
#include <thread>

namespace dfccl {

// CLOCK_MONOTONIC in nanoseconds.
uint64_t host_now_ns();

// One turn of a spin loop: the CPU's pause hint, or a yield where it has none.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace dfccl
