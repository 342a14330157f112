// The rendezvous's wire format and socket helpers, shared by the root service (rendezvous_root.cpp) and the client
// (rendezvous.cpp), and the shrink's agreement across hosts (comm/shrink_net.cpp).
#pragma once

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "util/sha256.h"

namespace dfccl::net::wire {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr uint32_t kFrameMagic = 0x56524644u;  // "DFRV"
inline constexpr size_t kHeaderBytes = 16;            // magic 4, type 2, code 2, seq 4, body length 4

enum Type : uint16_t { kHello = 1, kRound = 2, kLeave = 3, kResult = 4, kFail = 5, kChallenge = 6 };
enum Kind : uint16_t { kRegister = 0, kAllgather = 1, kBarrier = 2 };

inline const char* kind_name(uint16_t kind) {
  return kind == kRegister ? "registration" : kind == kAllgather ? "allgather" : "barrier";
}

inline void put(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(char(uint8_t(v >> (8 * i))));
}
inline uint64_t get(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

inline std::string frame(uint16_t type, uint16_t code, uint32_t seq, const std::string& body) {
  std::string s;
  put(s, kFrameMagic, 4);
  put(s, type, 2);
  put(s, code, 2);
  put(s, seq, 4);
  put(s, body.size(), 4);
  return s + body;
}

// The registration's proof of the unique id's secret. The root opens every connection with a CHALLENGE of
// kNonceBytes random bytes; the client's HELLO body is hello_mac(key, nonce, fields) followed by `fields` (rank,
// nranks, timeout, host id), so the secret never crosses the network and a HELLO is good for one connection only.
// key: the id's token (8 bytes, little-endian) then its secret (RendezvousId::secret).
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline std::string auth_key(uint64_t token, const uint8_t* secret, size_t secret_bytes) {
  std::string k;
  for (int i = 0; i < 8; ++i) k.push_back(char(uint8_t(token >> (8 * i))));
  return k + std::string(reinterpret_cast<const char*>(secret), secret_bytes);
}
inline Digest256 hello_mac(const std::string& key, const std::string& nonce, std::string_view fields) {
  std::string m = "DFRV-HELLO";
  m += nonce;
  m += fields;
  return hmac_sha256(key, m);
}

struct Frame {
  uint16_t type = 0, code = 0;
  uint32_t seq = 0;
  std::string body;
};

// Takes one whole frame from the front of `buf`; false while it is incomplete. A bad magic or a body over
// `max_body` throws std::runtime_error (the connection is broken or not ours).
inline bool take_frame(std::string& buf, Frame& f, size_t max_body) {
  if (buf.size() < kHeaderBytes) return false;
  if (get(buf.data(), 4) != kFrameMagic) throw std::runtime_error("not a rendezvous message");
  const size_t len = get(buf.data() + 12, 4);
  if (len > max_body) throw std::runtime_error(fmt::format("message of {} bytes (at most {})", len, max_body));
  if (buf.size() < kHeaderBytes + len) return false;
  f.type = uint16_t(get(buf.data() + 4, 2));
  f.code = uint16_t(get(buf.data() + 6, 2));
  f.seq = uint32_t(get(buf.data() + 8, 4));
  f.body = buf.substr(kHeaderBytes, len);
  buf.erase(0, kHeaderBytes + len);
  return true;
}

inline std::string errno_text(int err) { return std::strerror(err); }

inline int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return int(std::clamp<int64_t>(left, 0, 100000000));
}

// The socket address of `addr` (family AF_INET: 4 bytes, else AF_INET6: 16 bytes; network byte order), port (host
// byte order) and IPv6 scope id.
inline sockaddr_storage socket_address(int family, const uint8_t* addr, uint16_t port, uint32_t scope_id) {
  sockaddr_storage a{};
  if (family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(a);
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    std::memcpy(&in.sin_addr, addr, 4);
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(a);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    in6.sin6_scope_id = scope_id;
    std::memcpy(&in6.sin6_addr, addr, 16);
  }
  return a;
}

// Sends all of `s` on a non-blocking socket before `deadline`; false if the connection broke or the deadline passed.
inline bool send_all(int fd, const std::string& s, Clock::time_point deadline) {
  for (size_t done = 0; done < s.size();) {
    const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, remaining_ms(deadline)) <= 0) return false;
  }
  return true;
}

inline socklen_t sockaddr_len(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

inline std::string address_text(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, buf, sizeof(buf));
    return fmt::format("{}:{}", buf, ntohs(in.sin_port));
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
  inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof(buf));
  return fmt::format("[{}]:{}", buf, ntohs(in6.sin6_port));
}

}  // namespace dfccl::net::wire
