// The proxy's wire details that its two source files share (proxy.cpp: hops attached, detached and watched;
// proxy_data.cpp: their data and credits moved): the LL channel flag of data messages and the LL lines' loads and
// stores. Private to the proxy.
#pragma once

#include <chrono>
#include <cstdint>

#include "net/transport.h"

namespace dfccl::net {

// A data message's channel field carries kLLChannel when its bytes are LL lines (channel 0 only: core/region.h).
inline constexpr uint32_t kLLChannel = 0x80;
inline constexpr Tag kAnyProtocol = tags::kExact & ~(Tag{kLLChannel} << tags::kChannelShift);
using SteadyClock = std::chrono::steady_clock;

inline uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void store(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// True when the `nlines` 16-byte LL lines at p all carry `flag` in both words (the GPU writes them without a fence).
inline bool lines_ready(const char* p, uint64_t nlines, uint32_t flag) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  for (uint64_t i = 0; i < 2 * nlines; ++i)
    if (uint32_t(__atomic_load_n(w + i, __ATOMIC_RELAXED) >> 32) != flag) return false;
  return true;
}

// Copies LL lines with one single-copy-atomic store per 8-byte word, so that a reader never sees a flag without its
// data.
inline void copy_lines(char* dst, const char* src, uint64_t nlines) {
  const uint64_t* s = reinterpret_cast<const uint64_t*>(src);
  uint64_t* d = reinterpret_cast<uint64_t*>(dst);
  for (uint64_t i = 0; i < 2 * nlines; ++i) __atomic_store_n(d + i, s[i], __ATOMIC_RELAXED);
}

}  // namespace dfccl::net
