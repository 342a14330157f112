// What net_transport_test and its peer process (net_transport_peer) share: payload patterns, the message sizes of
// the exchange, address encoding for a pipe, and bounded loops that drive a transport.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "net/transport.h"

namespace dfccl::nettest {

using net::Tag;
using Clock = std::chrono::steady_clock;

// Tags of the exchange (tags::make(hop, channel, lane, position)): the parent sends kToChild + i, the child answers
// kToParent + i; kHello and kBye are zero-byte handshakes.
inline constexpr Tag kToChild = net::tags::make(1, 2, 3, 0);
inline constexpr Tag kToParent = net::tags::make(2, 2, 3, 0);
inline constexpr Tag kHello = net::tags::make(net::tags::kControlHop, 1, 0, 0);
inline constexpr Tag kBye = net::tags::make(net::tags::kControlHop, 2, 0, 0);

// Zero-byte, small, eager and one message past the rendezvous threshold (several MiB).
inline const std::vector<std::size_t> kSizes = {0, 1, 8, 0, 4096, 65537, (6u << 20) + 3, 100};

inline std::uint8_t pattern(Tag tag, std::size_t i) {
  return static_cast<std::uint8_t>((tag * 131u) ^ (i * 7u) ^ (i >> 9) ^ (tag >> 48));
}
inline std::vector<std::uint8_t> payload(Tag tag, std::size_t bytes) {
  std::vector<std::uint8_t> b(bytes);
  for (std::size_t i = 0; i < bytes; ++i) b[i] = pattern(tag, i);
  return b;
}
// The index of the first byte that differs from payload(tag, bytes), or -1.
inline long first_mismatch(const std::uint8_t* p, std::size_t bytes, Tag tag) {
  for (std::size_t i = 0; i < bytes; ++i)
    if (p[i] != pattern(tag, i)) return static_cast<long>(i);
  return -1;
}

inline std::string to_hex(const std::vector<std::byte>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::byte b : bytes) {
    s += digits[std::to_integer<unsigned>(b) >> 4];
    s += digits[std::to_integer<unsigned>(b) & 15];
  }
  return s;
}
inline std::vector<std::byte> from_hex(const std::string& s) {
  auto nibble = [](char c) { return static_cast<unsigned>(c <= '9' ? c - '0' : c - 'a' + 10); };
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(std::byte(nibble(s[i]) << 4 | nibble(s[i + 1])));
  return out;
}

// UCX_TLS set to `tls`, or UCX's own choice (the environment's UCX_TLS, else all transports) when `tls` is empty.
inline net::Options options_for(const std::string& tls) {
  return tls.empty() ? net::Options{} : net::Options{{{"TLS", tls}}};
}

// Progresses `t` until every request in `reqs` has a final outcome or `timeout` passes. Returns the outcomes in the
// order of `reqs`; a request still pending at the deadline reports kPending.
inline std::vector<net::Completion> drive(net::Transport& t, const std::vector<net::Req>& reqs,
                                          std::chrono::milliseconds timeout) {
  std::vector<net::Completion> out(reqs.size());
  std::vector<bool> final(reqs.size(), false);
  std::size_t left = reqs.size();
  const auto deadline = Clock::now() + timeout;
  while (left > 0 && Clock::now() < deadline) {
    if (t.progress() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (final[i]) continue;
      out[i] = t.test(reqs[i]);
      if (out[i].code != net::Code::kPending) final[i] = true, --left;
    }
  }
  return out;
}

// Progresses `t` for `duration` (the peer's messages arrive, nothing is posted for them).
inline void progress_for(net::Transport& t, std::chrono::milliseconds duration) {
  const auto end = Clock::now() + duration;
  while (Clock::now() < end)
    if (t.progress() == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace dfccl::nettest
