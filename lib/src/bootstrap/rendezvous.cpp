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

#include "settings/env.h"
#include "util/error.h"
#include "util/thread_name.h"

namespace dfccl::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kIdMagic = 0x3130565243434644ull;  // "DFCCRV01", little-endian
constexpr uint32_t kFrameMagic = 0x56524644u;         // "DFRV"
constexpr size_t kHeaderBytes = 16;                   // magic 4, type 2, code 2, seq 4, body length 4
constexpr size_t kMaxClientBody = Rendezvous::kMaxBytes + 64 + Rendezvous::kMaxHostId;
constexpr int kGraceMs = 2000;  // a client waits this much longer than the root's deadline for the root's answer

enum Type : uint16_t { kHello = 1, kRound = 2, kLeave = 3, kResult = 4, kFail = 5 };
enum Kind : uint16_t { kRegister = 0, kAllgather = 1, kBarrier = 2 };

const char* kind_name(uint16_t kind) {
  return kind == kRegister ? "registration" : kind == kAllgather ? "allgather" : "barrier";
}

void put(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(char(uint8_t(v >> (8 * i))));
}
uint64_t get(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

std::string frame(uint16_t type, uint16_t code, uint32_t seq, const std::string& body) {
  std::string s;
  put(s, kFrameMagic, 4);
  put(s, type, 2);
  put(s, code, 2);
  put(s, seq, 4);
  put(s, body.size(), 4);
  return s + body;
}

struct Frame {
  uint16_t type = 0, code = 0;
  uint32_t seq = 0;
  std::string body;
};

// Takes one whole frame from the front of `buf`; false while it is incomplete. A bad magic or a body over
// `max_body` throws std::runtime_error (the connection is broken or not ours).
bool take_frame(std::string& buf, Frame& f, size_t max_body) {
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

std::string errno_text(int err) { return std::strerror(err); }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return int(std::clamp<int64_t>(left, 0, 100000000));
}

socklen_t sockaddr_len(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

std::string address_text(const sockaddr_storage& a) {
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

sockaddr_storage to_sockaddr(const RendezvousId& id) {
  sockaddr_storage a{};
  if (id.family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(a);
    in.sin_family = AF_INET;
    in.sin_port = htons(id.port);
    std::memcpy(&in.sin_addr, id.addr, 4);
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(a);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(id.port);
    in6.sin6_scope_id = id.scope_id;
    std::memcpy(&in6.sin6_addr, id.addr, 16);
  }
  return a;
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
  static_assert(kRendezvousIdBytes == 40);
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
// The root service: one thread, poll() over the listening socket, the connections and a wake pipe.

struct RendezvousRoot::Service {
  struct Conn {
    std::string peer;  // "10.77.0.2:41234"
    std::string in, out;
    int rank = -1;  // registered rank, or -1
    bool close_after_write = false, dead = false;
  };
  struct Round {
    bool open = false;
    uint32_t seq = 0;
    uint16_t kind = 0;
    size_t bytes = 0;
    int timeout_ms = 0;
    Clock::time_point deadline;
    std::vector<std::optional<std::string>> data;
  };

  uint64_t token = 0;
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  std::map<int, Conn> conns;  // by file descriptor
  // The group: fixed by the first registration, reset when every registered rank is gone before it completed.
  int nranks = 0;
  std::vector<int> rank_fd;  // the connection of each rank; -1: not (or no longer) connected
  std::vector<std::string> hosts;
  std::vector<bool> gone;  // the rank left or dropped after the group completed
  bool complete = false;
  uint32_t next_seq = 0;
  Round round;
  std::optional<std::pair<dfcclResult_t, std::string>> failed;
  std::atomic<bool> finished{false};

  ~Service() {
    for (auto& [fd, c] : conns) close(fd);
    for (int fd : {listen_fd, wake[0], wake[1]})
      if (fd >= 0) close(fd);
  }

  std::string who(int r) const { return fmt::format("rank {} (host {})", r, hosts[size_t(r)]); }

  void send(int fd, uint16_t type, uint16_t code, uint32_t seq, const std::string& body) {
    auto it = conns.find(fd);
    if (it != conns.end() && !it->second.dead) it->second.out += frame(type, code, seq, body);
  }

  void refuse(int fd, dfcclResult_t code, const std::string& msg) {
    send(fd, kFail, uint16_t(code), 0, msg);
    conns[fd].close_after_write = true;
  }

  // Fails the group: every connected rank is told now, and every later message gets the same answer.
  void fail_group(dfcclResult_t code, const std::string& msg) {
    failed.emplace(code, msg);
    round.open = false;
    for (int fd : rank_fd)
      if (fd >= 0) send(fd, kFail, uint16_t(code), 0, msg);
  }

  void reset_group() {
    nranks = 0;
    rank_fd.clear();
    hosts.clear();
    gone.clear();
    complete = false;
    next_seq = 0;
    round = Round{};
    failed.reset();
  }

  void on_hello(int fd, Conn& c, const Frame& f) {
    if (f.body.size() < 20) throw std::runtime_error("short registration");
    const uint64_t tok = get(f.body.data(), 8);
    const int rank = int(int32_t(get(f.body.data() + 8, 4)));
    const int n = int(int32_t(get(f.body.data() + 12, 4)));
    const int timeout = int(int32_t(get(f.body.data() + 16, 4)));
    const std::string host = f.body.substr(20);
    if (tok != token)
      return refuse(fd, dfcclInvalidArgument,
                    "rendezvous: the unique id's token does not match this root's "
                    "(a stale or foreign id?)");
    if (n < 1 || n > Rendezvous::kMaxRanks || rank < 0 || rank >= n)
      return refuse(fd, dfcclInvalidArgument, fmt::format("rendezvous: rank {} of nranks {} is out of range", rank, n));
    if (failed) return refuse(fd, failed->first, failed->second);
    if (nranks == 0) {
      nranks = n;
      rank_fd.assign(size_t(n), -1);
      hosts.assign(size_t(n), "?");
      gone.assign(size_t(n), false);
    }
    if (n != nranks) return refuse_nranks(fd, rank, n, host);
    if (rank_fd[size_t(rank)] >= 0 || gone[size_t(rank)] || complete) return refuse_duplicate(fd, c, rank, host);
    rank_fd[size_t(rank)] = fd;
    hosts[size_t(rank)] = host;
    c.rank = rank;
    contribute(rank, 0, kRegister, timeout, host);
  }

  // An nranks disagreement fails the whole group: it cannot complete.
  void refuse_nranks(int fd, int rank, int n, const std::string& host) {
    const int other = int(std::find_if(rank_fd.begin(), rank_fd.end(), [](int x) { return x >= 0; }) - rank_fd.begin());
    const std::string msg =
        fmt::format("rendezvous: rank {} (host {}) was initialised with nranks={} but {} with nranks={}", rank, host, n,
                    other < nranks ? who(other) : "another rank", nranks);
    refuse(fd, dfcclInvalidUsage, msg);
    fail_group(dfcclInvalidUsage, msg);
  }

  // A second registration of a rank is refused; the group goes on with the first.
  void refuse_duplicate(int fd, const Conn& c, int rank, const std::string& host) {
    const auto holder = conns.find(rank_fd[size_t(rank)]);
    refuse(fd, dfcclInvalidUsage,
           fmt::format("rendezvous: rank {} is already registered by host {} ({}); each rank of a communicator must "
                       "be initialised exactly once (refused: host {}, {})",
                       rank, hosts[size_t(rank)], holder == conns.end() ? "gone" : holder->second.peer, host, c.peer));
  }

  void contribute(int rank, uint32_t seq, uint16_t kind, int timeout_ms, const std::string& data) {
    if (!round.open) {
      round = Round{true, seq, kind, data.size(), timeout_ms, Clock::now() + milliseconds(timeout_ms), {}};
      round.data.assign(size_t(nranks), std::nullopt);
      if (seq != next_seq)
        return fail_group(dfcclInvalidUsage, fmt::format("rendezvous: {} entered round {} but the group is at round "
                                                         "{} (ranks called allgather/barrier different numbers of "
                                                         "times)",
                                                         who(rank), seq, next_seq));
    }
    const bool sized = kind == kRegister || data.size() == round.bytes;
    if (seq != round.seq || kind != round.kind || !sized) {
      const int first = int(std::find_if(round.data.begin(), round.data.end(), [](auto& d) { return d.has_value(); }) -
                            round.data.begin());
      return fail_group(
          dfcclInvalidUsage,
          fmt::format("rendezvous round {}: {} called {} with {} bytes but {} called {} with {} bytes", round.seq,
                      who(rank), kind_name(kind), data.size(), who(first), kind_name(round.kind), round.bytes));
    }
    if (round.data[size_t(rank)]) throw std::runtime_error("a second contribution to one round");
    round.data[size_t(rank)] = data;
    if (std::all_of(round.data.begin(), round.data.end(), [](auto& d) { return d.has_value(); })) finish_round();
  }

  void finish_round() {
    std::string body;
    for (const auto& d : round.data) {
      put(body, d->size(), 4);
      body += *d;
    }
    for (int fd : rank_fd) send(fd, kResult, 0, round.seq, body);
    if (round.kind == kRegister) complete = true;
    round.open = false;
    ++next_seq;
  }

  void check_deadline() {
    if (!round.open || Clock::now() < round.deadline) return;
    std::string missing;
    int count = 0;
    for (int r = 0; r < nranks; ++r)
      if (!round.data[size_t(r)] && count++ < 16) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
    fail_group(dfcclTimeout,
               fmt::format("rendezvous round {} ({}): {} {}{} of {} never arrived within {} ms (do all ranks call "
                           "init with the same id and nranks, and allgather/barrier equally often? timeout: "
                           "DFCCL_INIT_TIMEOUT_MS or config.initTimeoutMs)",
                           round.seq, kind_name(round.kind), count == 1 ? "rank" : "ranks", missing,
                           count > 16 ? ", ..." : "", nranks, round.timeout_ms));
  }

  void on_frame(int fd, Conn& c, const Frame& f) {
    if (f.type == kHello && c.rank < 0) return on_hello(fd, c, f);
    if (c.rank < 0) throw std::runtime_error("a message before registration");
    if (f.type == kLeave) return on_leave(c);
    if (f.type != kRound || f.body.size() < 4) throw std::runtime_error("an unknown message");
    if (failed) return send(fd, kFail, uint16_t(failed->first), f.seq, failed->second);
    contribute(c.rank, f.seq, f.code, int(int32_t(get(f.body.data(), 4))), f.body.substr(4));
  }

  void on_leave(Conn& c) {
    const int r = std::exchange(c.rank, -1);
    c.close_after_write = true;
    rank_fd[size_t(r)] = -1;
    if (complete) gone[size_t(r)] = true;
    if (round.open && !failed)
      fail_group(dfcclInvalidUsage, fmt::format("rendezvous round {} ({}): {} left (its communicator was "
                                                "destroyed) while the others were in the round",
                                                round.seq, kind_name(round.kind), who(r)));
  }

  // A connection that ended without a goodbye (EOF, reset, malformed): a registered rank fails the group.
  void on_drop(Conn& c, const std::string& why) {
    c.dead = true;
    if (c.rank < 0) return;
    const int r = std::exchange(c.rank, -1);
    rank_fd[size_t(r)] = -1;
    if (complete) gone[size_t(r)] = true;
    if (!failed)
      fail_group(
          dfcclRemoteError,
          fmt::format("rendezvous: rank {} (host {}, {}) dropped its connection to the root{} ({}: its "
                      "process died or its network failed)",
                      r, hosts[size_t(r)], c.peer, round.open ? fmt::format(" during round {}", round.seq) : "", why));
  }

  void read_conn(int fd, Conn& c) {
    char buf[65536];
    std::string ended;  // why the stream ended, if it did
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.in.append(buf, size_t(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      ended = n == 0 ? "closed" : errno_text(errno);
      break;
    }
    try {  // the frames before the end first: a goodbye followed by the close is not a drop
      Frame f;
      while (!c.dead && take_frame(c.in, f, kMaxClientBody)) on_frame(fd, c, f);
    } catch (const std::runtime_error& e) {
      return on_drop(c, std::string("protocol error: ") + e.what());
    }
    if (!ended.empty()) on_drop(c, ended);
  }

  void write_conn(int fd, Conn& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, size_t(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0 && errno == EINTR) continue;
      return on_drop(c, errno_text(errno));
    }
    if (c.close_after_write) c.dead = true;
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage a{};
      socklen_t len = sizeof(a);
      const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      conns[fd].peer = address_text(a);
    }
  }

  // Closes dead connections; returns whether the service is over (the group completed and every rank is gone).
  bool sweep() {
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->second.dead) {
        close(it->first);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    const bool anyone = std::any_of(rank_fd.begin(), rank_fd.end(), [](int fd) { return fd >= 0; });
    if (!anyone && complete) return true;
    if (!anyone && nranks > 0) reset_group();  // an incomplete or failed group: the id may be used again
    return false;
  }

  int poll_timeout() const {
    if (!round.open) return 100;
    return std::min(100, remaining_ms(round.deadline) + 1);
  }

  // Reads every connection that poll() found readable (or ended): fds[2...].
  void read_ready(const std::vector<pollfd>& fds) {
    for (size_t i = 2; i < fds.size(); ++i) {
      auto it = conns.find(fds[i].fd);
      if (it != conns.end() && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) read_conn(it->first, it->second);
    }
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.assign({{wake[0], POLLIN, 0}, {listen_fd, POLLIN, 0}});
      for (auto& [fd, c] : conns) fds.push_back({fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      if (poll(fds.data(), fds.size(), poll_timeout()) < 0 && errno != EINTR) break;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) accept_all();
      read_ready(fds);
      check_deadline();
      for (auto& [fd, c] : conns)
        if (!c.dead) write_conn(fd, c);
      if (sweep()) break;
    }
    finished = true;
  }
};

RendezvousRoot::RendezvousRoot(uint64_t token) : RendezvousRoot(token, env_str("DFCCL_SOCKET_IFNAME")) {}

RendezvousRoot::RendezvousRoot(uint64_t token, const std::string& ifname_spec) : service_(new Service) {
  const Interface itf = pick_interface(ifname_spec);
  ifname_ = itf.name;
  Service& s = *service_;
  s.token = token;
  sockaddr_storage a = itf.addr;
  if (a.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(a).sin_port = 0;
  else reinterpret_cast<sockaddr_in6&>(a).sin6_port = 0;
  s.listen_fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s.listen_fd < 0) throw_system("rendezvous: socket");
  socklen_t len = sockaddr_len(a);
  if (bind(s.listen_fd, reinterpret_cast<sockaddr*>(&a), len) != 0)
    throw_system(fmt::format("rendezvous: bind to {} ({})", address_text(a), itf.name));
  if (listen(s.listen_fd, 1024) != 0) throw_system("rendezvous: listen");
  if (getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) throw_system("rendezvous: getsockname");
  if (pipe2(s.wake, O_CLOEXEC | O_NONBLOCK) != 0) throw_system("rendezvous: pipe");
  id_.token = token;
  id_.family = a.ss_family;
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    std::memcpy(id_.addr, &in.sin_addr, 4);
    id_.port = ntohs(in.sin_port);
  } else {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    std::memcpy(id_.addr, &in6.sin6_addr, 16);
    id_.port = ntohs(in6.sin6_port);
    id_.scope_id = in6.sin6_scope_id;
  }
  thread_ = std::thread([&s] {
    name_this_thread("rvroot");
    s.run();
  });
}

RendezvousRoot::~RendezvousRoot() {
  if (thread_.joinable()) {
    const char c = 1;
    [[maybe_unused]] const ssize_t n = write(service_->wake[1], &c, 1);
    thread_.join();
  }
}

bool RendezvousRoot::finished() const { return service_->finished; }

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
int connect_to(const RendezvousId& id, Clock::time_point deadline, int rank) {
  const sockaddr_storage a = to_sockaddr(id);
  int err = 0;
  bool late = false;
  do {
    const int fd = connect_once(a, deadline, err);
    if (fd >= 0) return fd;
    late = err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN;
    if (late && Clock::now() < deadline) usleep(20000);
  } while (late && Clock::now() < deadline);
  throw Error(late ? dfcclTimeout : dfcclRemoteError,
              fmt::format("rendezvous: rank {} could not connect to the root at {}: {}", rank, id.to_string(),
                          errno_text(err)));
}

// Sends all of `s` before `deadline`; false if the connection broke or the deadline passed.
bool send_all(int fd, const std::string& s, Clock::time_point deadline) {
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

}  // namespace

Rendezvous::Rendezvous(const RendezvousId& id, int rank, int nranks, const std::string& host_id, int timeout_ms)
    : id_(id), rank_(rank), nranks_(nranks), timeout_ms_(timeout_ms) {
  if (nranks < 1 || nranks > kMaxRanks)
    throw Error(dfcclInvalidArgument, fmt::format("argument 'nranks' = {}: expected 1..{}", nranks, kMaxRanks));
  if (rank < 0 || rank >= nranks)
    throw Error(dfcclInvalidArgument, fmt::format("argument 'rank' = {}: expected 0..{}", rank, nranks - 1));
  if (host_id.size() > kMaxHostId)
    throw Error(dfcclInvalidArgument, fmt::format("host id '{}' is longer than {} bytes", host_id, kMaxHostId));
  if (timeout_ms < 1) throw Error(dfcclInvalidArgument, fmt::format("timeout {} ms: expected >= 1", timeout_ms));
  fd_ = connect_to(id, Clock::now() + milliseconds(timeout_ms), rank);
  std::string body;
  put(body, id.token, 8);
  put(body, uint32_t(rank), 4);
  put(body, uint32_t(nranks), 4);
  put(body, uint32_t(timeout_ms), 4);
  body += host_id;
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
