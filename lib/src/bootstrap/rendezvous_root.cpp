// The rendezvous root service (rendezvous.h, docs/net-transport.md "Rendezvous across hosts").
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "bootstrap/rendezvous_wire.h"
#include "settings/settings.h"
#include "util/error.h"
#include "util/thread_name.h"

namespace dfccl::net {

using namespace wire;

namespace {

constexpr size_t kMaxClientBody = Rendezvous::kMaxBytes + 64 + Rendezvous::kMaxHostId;

// Random bytes from the kernel (getrandom); throws dfcclSystemError if it has none.
std::string random_bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t got = 0; got < n;) {
    const ssize_t r = getrandom(s.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw_system("rendezvous: getrandom");
    got += size_t(r);
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The root service: one thread, poll() over the listening socket, the connections and a wake pipe.

struct RendezvousRoot::Service {
  struct Conn {
    std::string peer;  // "10.77.0.2:41234"
    std::string in, out;
    std::string nonce;  // its challenge; emptied by the one HELLO it may answer with
    Clock::time_point accepted;
    int rank = -1;  // registered rank, or -1
    bool close_after_write = false, dead = false;
    bool unregistered() const { return !nonce.empty() && !dead && !close_after_write; }
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
  std::string key;  // wire::auth_key of the token and the secret
  int listen_fd = -1;
  Clock::time_point accept_paused_until;  // after the process ran out of file descriptors
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
  // fail_registration: its reason, taken by the service thread at its wake; once taken, every registration is refused.
  std::mutex abandon_mu;
  std::string abandon_msg;
  bool abandoned = false;

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

  // A registration: its proof (wire::hello_mac of this connection's challenge) first; a connection gets one try.
  void on_hello(int fd, Conn& c, const Frame& f) {
    if (f.body.size() < kMacBytes + 12) throw std::runtime_error("short registration");
    const std::string nonce = std::exchange(c.nonce, std::string());
    Digest256 mac;
    std::memcpy(mac.data(), f.body.data(), kMacBytes);
    const std::string fields = f.body.substr(kMacBytes);
    if (nonce.empty() || !digest_equal(mac, hello_mac(key, nonce, fields)))
      return refuse(fd, dfcclInvalidArgument,
                    "rendezvous: the registration does not prove the unique id's secret: its token or secret does "
                    "not match this root's (a stale or foreign id?)");
    const int rank = int(int32_t(get(fields.data(), 4)));
    const int n = int(int32_t(get(fields.data() + 4, 4)));
    const int timeout = int(int32_t(get(fields.data() + 8, 4)));
    const std::string host = fields.substr(12);
    if (n < 1 || n > Rendezvous::kMaxRanks || rank < 0 || rank >= n)
      return refuse(fd, dfcclInvalidArgument, fmt::format("rendezvous: rank {} of nranks {} is out of range", rank, n));
    if (abandoned) return refuse(fd, dfcclRemoteError, abandon_msg);
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
    if (round.kind == kRegister) complete_registration();
    round.open = false;
    ++next_seq;
  }

  // The group is complete: nobody else may register, so the service stops listening and drops every connection that
  // has not registered.
  void complete_registration() {
    complete = true;
    if (listen_fd >= 0) close(listen_fd);
    listen_fd = -1;
    for (auto& [fd, c] : conns)
      if (c.rank < 0 && !c.close_after_write) c.dead = true;
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
    if (c.close_after_write) return;  // refused: what it sends after the refusal is not read
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

  // Accepts every waiting connection and challenges it. Beyond kMaxUnregistered connections that have not registered,
  // the oldest of them is closed; a process out of file descriptors pauses accepting for 100 ms (the listening
  // socket would otherwise stay readable and spin the thread).
  void accept_all() {
    for (;;) {
      sockaddr_storage a{};
      socklen_t len = sizeof(a);
      const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          accept_paused_until = Clock::now() + milliseconds(100);
        return;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Conn& c = conns[fd];
      c.peer = address_text(a);
      c.accepted = Clock::now();
      c.nonce = random_bytes(kNonceBytes);
      c.out = frame(kChallenge, 0, 0, c.nonce);
      cap_unregistered();
    }
  }

  void cap_unregistered() {
    int count = 0;
    Conn* oldest = nullptr;
    for (auto& [fd, c] : conns) {
      if (!c.unregistered()) continue;
      ++count;
      if (!oldest || c.accepted < oldest->accepted) oldest = &c;
    }
    if (count > RendezvousRoot::kMaxUnregistered) oldest->dead = true;
  }

  // Connections that have not registered within kHelloMs of their accept are closed.
  void expire_unregistered() {
    const auto limit = Clock::now() - milliseconds(RendezvousRoot::kHelloMs);
    for (auto& [fd, c] : conns)
      if (c.unregistered() && c.accepted < limit) c.dead = true;
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

  // The wake pipe's bytes: false on a stop (1); a fail_registration (2) fails a group still registering.
  bool take_wake() {
    char b[16];
    bool stop = false;
    for (ssize_t n; (n = read(wake[0], b, sizeof(b))) > 0;)
      for (ssize_t i = 0; i < n; ++i) stop = stop || b[i] == 1;
    if (stop) return false;
    std::lock_guard<std::mutex> lk(abandon_mu);
    if (!abandon_msg.empty() && !complete && !abandoned) {
      abandoned = true;
      if (!failed) fail_group(dfcclRemoteError, abandon_msg);
    }
    return true;
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      const bool accepting = listen_fd >= 0 && Clock::now() >= accept_paused_until;
      fds.assign({{wake[0], POLLIN, 0}, {accepting ? listen_fd : -1, POLLIN, 0}});
      for (auto& [fd, c] : conns) fds.push_back({fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      if (poll(fds.data(), fds.size(), poll_timeout()) < 0 && errno != EINTR) break;
      if (fds[0].revents && !take_wake()) break;
      if (fds[1].revents & POLLIN) accept_all();
      read_ready(fds);
      check_deadline();
      expire_unregistered();
      for (auto& [fd, c] : conns)
        if (!c.dead) write_conn(fd, c);
      if (sweep()) break;
    }
    finished = true;
  }
};

RendezvousRoot::RendezvousRoot(uint64_t token) : RendezvousRoot(token, socket_ifname_setting()) {}

RendezvousRoot::RendezvousRoot(uint64_t token, const std::string& ifname_spec) : service_(new Service) {
  const Interface itf = pick_interface(ifname_spec);
  ifname_ = itf.name;
  Service& s = *service_;
  s.token = token;
  const std::string secret = random_bytes(sizeof(id_.secret));
  std::memcpy(id_.secret, secret.data(), sizeof(id_.secret));
  s.key = auth_key(token, id_.secret, sizeof(id_.secret));
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

void RendezvousRoot::fail_registration(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(service_->abandon_mu);
    if (service_->abandon_msg.empty()) service_->abandon_msg = why;
  }
  const char c = 2;
  [[maybe_unused]] const ssize_t n = write(service_->wake[1], &c, 1);
}

}  // namespace dfccl::net
