#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "bootstrap/rendezvous_wire.h"
#include "settings/env.h"
#include "util/error.h"
#include "util/thread_name.h"

namespace dfccl::net {

using namespace wire;

namespace {

constexpr uint64_t kIdMagic = 0x3130565243434644ull;  // "DFCCRV01", little-endian
constexpr int kGraceMs = 2000;  // a client waits this much longer than the root's deadline for the root's answer

sockaddr_storage to_sockaddr(const RendezvousId& id) {
  return socket_address(id.family, id.addr, id.port, id.scope_id);
}

// Whether interface `name` is chosen by the DFCCL_SOCKET_IFNAME list `spec` ("eth,ib", "=eth0", "^docker,lo").
bool name_matches(const std::string& spec, const std::string& name) {
  std::string list = spec;
  const bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list.erase(0, 1);
  const bool exact = !list.empty() && list[0] == '=';
  if (exact) list.erase(0, 1);
  bool hit = false;
  for (size_t b = 0; b <= list.size();) {
    const size_t e = std::min(list.find(',', b), list.size());
    const std::string item = list.substr(b, e - b);
    if (!item.empty() && (exact ? name == item : name.rfind(item, 0) == 0)) hit = true;
    b = e + 1;
  }
  return hit != exclude;
}

std::vector<Interface> list_interfaces() {
  std::vector<Interface> out;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) throw_system("rendezvous: getifaddrs");
  for (ifaddrs* i = all; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    const int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    Interface itf;
    itf.name = i->ifa_name;
    std::memcpy(&itf.addr, i->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    itf.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(itf);
  }
  freeifaddrs(all);
  return out;
}

// The first of `all` that `want` accepts, IPv4 before IPv6.
std::optional<Interface> first_of(const std::vector<Interface>& all, const auto& want) {
  for (int fam : {AF_INET, AF_INET6})
    for (const auto& i : all)
      if (i.addr.ss_family == fam && want(i)) return i;
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The id

std::string RendezvousId::to_string() const { return address_text(to_sockaddr(*this)); }

void encode_rendezvous_id(const RendezvousId& rid, dfcclUniqueId& id) {
  std::string s;
  put(s, kIdMagic, 8);
  put(s, rid.token, 8);
  put(s, uint16_t(rid.family == AF_INET6 ? 6 : 4), 2);
  put(s, rid.port, 2);
  put(s, rid.scope_id, 4);
  s.append(reinterpret_cast<const char*>(rid.addr), 16);
  s.append(reinterpret_cast<const char*>(rid.secret), sizeof(rid.secret));
  static_assert(kRendezvousIdBytes == 56);
  std::memcpy(id.internal + kRendezvousIdOffset, s.data(), kRendezvousIdBytes);
}

bool has_rendezvous_id(const dfcclUniqueId& id) { return get(id.internal + kRendezvousIdOffset, 8) == kIdMagic; }

RendezvousId parse_rendezvous_id(const dfcclUniqueId& id) {
  const char* p = id.internal + kRendezvousIdOffset;
  if (get(p, 8) != kIdMagic)
    throw Error(dfcclInvalidArgument, "argument 'commId' carries no rendezvous address (not made by a root service)");
  RendezvousId r;
  r.token = get(p + 8, 8);
  const uint64_t fam = get(p + 16, 2);
  r.port = uint16_t(get(p + 18, 2));
  r.scope_id = uint32_t(get(p + 20, 4));
  std::memcpy(r.addr, p + 24, 16);
  std::memcpy(r.secret, p + 40, sizeof(r.secret));
  if (fam != 4 && fam != 6)
    throw Error(dfcclInvalidArgument, fmt::format("argument 'commId': unknown address family {} (4 or 6)", fam));
  if (r.port == 0) throw Error(dfcclInvalidArgument, "argument 'commId': the rendezvous port is 0");
  r.family = fam == 4 ? AF_INET : AF_INET6;
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Choosing the interface

Interface pick_interface(const std::string& spec) {
  const std::vector<Interface> all = list_interfaces();
  std::optional<Interface> hit;
  if (spec.empty()) {
    hit = first_of(all, [](const Interface& i) { return !i.loopback; });
    if (!hit) hit = first_of(all, [](const Interface& i) { return i.loopback; });
  } else {
    hit = first_of(all, [&](const Interface& i) { return name_matches(spec, i.name); });
  }
  if (hit) return *hit;
  std::string have;
  for (const auto& i : all) have += fmt::format("{}{} {}", have.empty() ? "" : ", ", i.name, address_text(i.addr));
  throw Error(dfcclInvalidArgument, fmt::format("DFCCL_SOCKET_IFNAME='{}' matches no interface that is up with an "
                                                "address (interfaces: {})",
                                                spec, have.empty() ? "none" : have));
}

// ---------------------------------------------------------------------------------------------------------------
// The client

namespace {

// One non-blocking connect to `a`, finished before `deadline`: the socket, or -1 with the reason in `err`.
int connect_once(const sockaddr_storage& a, Clock::time_point deadline, int& err) {
  const int fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw_system("rendezvous: socket");
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sockaddr_len(a)) == 0) return fd;
  err = errno;
  if (err == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    socklen_t len = sizeof(err);
    if (poll(&p, 1, remaining_ms(deadline)) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
      return fd;
    if (err == EINPROGRESS) err = ETIMEDOUT;
  }
  close(fd);
  return -1;
}

// Connects to the root before `deadline`, retrying while nobody listens yet (or the network is slow to answer).
int connect_to(const RendezvousId& id, Clock::time_point deadline, int rank,
               const std::function<std::string()>& abandon) {
  const sockaddr_storage a = to_sockaddr(id);
  int err = 0;
  bool late = false;
  do {
    const int fd = connect_once(a, deadline, err);
    if (fd >= 0) return fd;
    late = err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN;
    if (late && abandon)
      if (std::string why = abandon(); !why.empty())
        throw Error(dfcclRemoteError, fmt::format("rendezvous: rank {} could not connect to the root at {}: {}", rank,
                                                  id.to_string(), why));
    if (late && Clock::now() < deadline) usleep(20000);
  } while (late && Clock::now() < deadline);
  throw Error(late ? dfcclTimeout : dfcclRemoteError,
              fmt::format("rendezvous: rank {} could not connect to the root at {}: {}", rank, id.to_string(),
                          errno_text(err)));
}

// The root's CHALLENGE, the first frame of a connection, received before `deadline`: its nonce, or "" if the
// connection ended first (the root closes the oldest unregistered connections when it has too many: try again).
// Anything else is dfcclRemoteError naming the root.
std::string read_challenge(int fd, const RendezvousId& id, Clock::time_point deadline, int rank) {
  std::string in;
  char buf[256];
  Frame f;
  for (;;) {
    try {
      if (take_frame(in, f, kNonceBytes)) break;
    } catch (const std::runtime_error& e) {
      throw Error(dfcclRemoteError, fmt::format("rendezvous: rank {}: the root at {} sent a bad challenge: {}", rank,
                                                id.to_string(), e.what()));
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, remaining_ms(deadline)) <= 0)
      throw Error(dfcclTimeout,
                  fmt::format("rendezvous: rank {}: the root at {} sent no challenge in time", rank, id.to_string()));
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) in.append(buf, size_t(n));
    else if (n == 0 || (errno != EINTR && errno != EAGAIN)) return "";
  }
  if (f.type != kChallenge || f.body.size() != kNonceBytes)
    throw Error(dfcclRemoteError, fmt::format("rendezvous: rank {}: the root at {} opened with message {}, not a "
                                              "challenge (a root of another version?)",
                                              rank, id.to_string(), f.type));
  return f.body;
}

}  // namespace

Rendezvous::Rendezvous(const RendezvousId& id, int rank, int nranks, const std::string& host_id, int timeout_ms,
                       const std::function<std::string()>& abandon)
    : id_(id), rank_(rank), nranks_(nranks), timeout_ms_(timeout_ms) {
  if (nranks < 1 || nranks > kMaxRanks)
    throw Error(dfcclInvalidArgument, fmt::format("argument 'nranks' = {}: expected 1..{}", nranks, kMaxRanks));
  if (rank < 0 || rank >= nranks)
    throw Error(dfcclInvalidArgument, fmt::format("argument 'rank' = {}: expected 0..{}", rank, nranks - 1));
  if (host_id.size() > kMaxHostId)
    throw Error(dfcclInvalidArgument, fmt::format("host id '{}' is longer than {} bytes", host_id, kMaxHostId));
  if (timeout_ms < 1) throw Error(dfcclInvalidArgument, fmt::format("timeout {} ms: expected >= 1", timeout_ms));
  const auto deadline = Clock::now() + milliseconds(timeout_ms);
  std::string nonce;
  while (nonce.empty()) {
    fd_ = connect_to(id, deadline, rank, abandon);
    try {
      nonce = read_challenge(fd_, id, deadline, rank);
    } catch (...) {
      close(fd_);
      throw;
    }
    if (nonce.empty()) {
      close(fd_);
      if (Clock::now() >= deadline)
        throw Error(dfcclRemoteError, fmt::format("rendezvous: rank {}: the root at {} closed every connection "
                                                  "before its challenge",
                                                  rank, id.to_string()));
      usleep(20000);
    }
  }
  std::string fields;
  put(fields, uint32_t(rank), 4);
  put(fields, uint32_t(nranks), 4);
  put(fields, uint32_t(timeout_ms), 4);
  fields += host_id;
  const Digest256 mac = hello_mac(auth_key(id.token, id.secret, sizeof(id.secret)), nonce, fields);
  const std::string body = std::string(reinterpret_cast<const char*>(mac.data()), mac.size()) + fields;
  try {
    if (!send_all(fd_, frame(kHello, 0, 0, body), Clock::now() + milliseconds(timeout_ms)))
      throw Error(dfcclRemoteError,
                  fmt::format("rendezvous: rank {} could not register with the root at {}", rank, id.to_string()));
    hosts_ = await(0, timeout_ms);
  } catch (...) {
    close(fd_);
    throw;
  }
}

Rendezvous::~Rendezvous() {
  if (fd_ < 0) return;
  send_all(fd_, frame(kLeave, 0, 0, ""), Clock::now() + milliseconds(100));
  shutdown(fd_, SHUT_WR);
  close(fd_);
}

// The root's next message, received within `wait_ms`; every way of not getting one is a dfccl::Error. `in` holds
// what was received but not yet taken (the start of the next message), from one call to the next.
static Frame receive(int fd, std::string& in, const RendezvousId& id, int rank, int nranks, uint32_t seq, int wait_ms) {
  const auto deadline = Clock::now() + milliseconds(wait_ms);
  const size_t max_body = size_t(nranks) * (Rendezvous::kMaxBytes + 4) + 4096;
  char buf[65536];
  Frame f;
  for (;;) {
    try {
      if (take_frame(in, f, max_body)) return f;
    } catch (const std::runtime_error& e) {
      throw Error(dfcclRemoteError,
                  fmt::format("rendezvous: the root at {} sent a bad message: {}", id.to_string(), e.what()));
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, remaining_ms(deadline));
    if (ready == 0)
      throw Error(dfcclTimeout, fmt::format("rendezvous: rank {} of {}: the root at {} did not answer round {} "
                                            "within {} ms",
                                            rank, nranks, id.to_string(), seq, wait_ms));
    const ssize_t n = ready > 0 ? recv(fd, buf, sizeof(buf), 0) : -1;
    if (n > 0) {
      in.append(buf, size_t(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      throw Error(dfcclRemoteError,
                  fmt::format("rendezvous: rank {} of {}: the root at {} closed the connection "
                              "during round {} ({}; did the process that made the id end?)",
                              rank, nranks, id.to_string(), seq, n == 0 ? "end of stream" : errno_text(errno)));
    }
  }
}

std::vector<std::string> Rendezvous::await(uint32_t seq, int timeout_ms) {
  const Frame f = receive(fd_, in_, id_, rank_, nranks_, seq, timeout_ms + kGraceMs);
  if (f.type == kFail) throw Error(dfcclResult_t(f.code), f.body);
  if (f.type != kResult || f.seq != seq)
    throw Error(dfcclRemoteError, fmt::format("rendezvous: the root at {} answered round {} with message {} for "
                                              "round {}",
                                              id_.to_string(), seq, f.type, f.seq));
  std::vector<std::string> out;
  for (size_t at = 0; out.size() < size_t(nranks_) && at + 4 <= f.body.size();) {
    const size_t len = get(f.body.data() + at, 4);
    out.push_back(f.body.substr(at + 4, len));
    at += 4 + len;
  }
  if (out.size() != size_t(nranks_))
    throw Error(dfcclRemoteError, fmt::format("rendezvous: the root's answer to round {} is malformed", seq));
  return out;
}

std::vector<std::string> Rendezvous::round(uint16_t kind, const void* data, size_t bytes, int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = timeout_ms_;
  const uint32_t seq = ++seq_;
  std::string body;
  put(body, uint32_t(timeout_ms), 4);
  if (bytes) body.append(static_cast<const char*>(data), bytes);
  if (!send_all(fd_, frame(kRound, kind, seq, body), Clock::now() + milliseconds(timeout_ms)))
    throw Error(dfcclRemoteError, fmt::format("rendezvous: rank {} could not send round {} to the root at {}", rank_,
                                              seq, id_.to_string()));
  return await(seq, timeout_ms);
}

void Rendezvous::allgather(const void* mine, size_t bytes, void* all, int timeout_ms) {
  if (bytes > kMaxBytes)
    throw Error(dfcclInvalidArgument,
                fmt::format("rendezvous allgather: {} bytes per rank (at most {})", bytes, kMaxBytes));
  const auto parts = round(kAllgather, mine, bytes, timeout_ms);
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].size() != bytes)
      throw Error(dfcclRemoteError,
                  fmt::format("rendezvous allgather: rank {} contributed {} bytes, not {}", r, parts[r].size(), bytes));
    std::memcpy(static_cast<char*>(all) + r * bytes, parts[r].data(), bytes);
  }
}

void Rendezvous::barrier(int timeout_ms) { round(kBarrier, nullptr, 0, timeout_ms); }

}  // namespace dfccl::net
