#include "comm/shrink_net.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>

#include "bootstrap/bootstrap.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/rendezvous_wire.h"
#include "settings/settings.h"
#include "util/error.h"
#include "util/sha256.h"

namespace dfccl {

using net::wire::Clock;
using net::wire::get;
using net::wire::put;
using net::wire::remaining_ms;

namespace {

constexpr uint32_t kMagic = 0x4b534644u;  // "DFSK"
constexpr int kConnectMs = 2000;          // a rank whose socket does not answer a connect within this is gone
enum Type : uint32_t { kReport = 1, kProbe = 2, kRedirect = 3, kDecision = 4 };

struct Msg {
  uint32_t type = 0, from = 0, decider = 0;
  std::vector<uint8_t> set;
  dfcclUniqueId id{};
};

// A message's MAC: keyed by the communicator's unique id (ShrinkListener::key), bound to the shrink's number.
Digest256 seal(const ShrinkListener& l, uint32_t shrink, std::string_view body) {
  std::string m = "DFSK-MSG";
  put(m, shrink, 4);
  m.append(body);
  return hmac_sha256(l.key, m);
}

// XORs the secret of id's rendezvous payload with a pad drawn from the key, the shrink's number and the id's token,
// so that a decision carries the new id without its secret in clear (its own inverse: the receiver calls it too).
void hide_secret(const ShrinkListener& l, uint32_t shrink, dfcclUniqueId& id) {
  if (!net::has_rendezvous_id(id)) return;
  net::RendezvousId rid = net::parse_rendezvous_id(id);
  std::string m = "DFSK-ID";
  put(m, shrink, 4);
  put(m, rid.token, 8);
  const Digest256 pad = hmac_sha256(l.key, m);
  for (size_t i = 0; i < sizeof(rid.secret); ++i) rid.secret[i] ^= pad[i];
  net::encode_rendezvous_id(rid, id);
}

// A message: magic, type, sender, decider (kDecision), nranks, the set (one byte per rank), a unique id (its secret
// hidden), then the MAC of all that (seal).
std::string frame(const ShrinkListener& l, uint32_t shrink, uint32_t type, int from, int decider,
                  const std::vector<uint8_t>& set, const dfcclUniqueId* id) {
  std::string s;
  for (uint64_t v : {uint64_t(kMagic), uint64_t(type), uint64_t(from), uint64_t(decider), uint64_t(set.size())})
    put(s, v, 4);
  s.append(reinterpret_cast<const char*>(set.data()), set.size());
  dfcclUniqueId carried{};
  if (id) {
    carried = *id;
    hide_secret(l, shrink, carried);
  }
  s.append(reinterpret_cast<const char*>(&carried), sizeof(dfcclUniqueId));
  const Digest256 mac = seal(l, shrink, s);
  s.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  return s;
}

size_t frame_bytes(int nranks) { return 20 + size_t(nranks) + sizeof(dfcclUniqueId) + net::wire::kMacBytes; }

// One message from the front of `in`; false while incomplete. A malformed one, or one whose MAC is not the key's,
// throws (the connection is not one of this communicator's shrink).
bool take(const ShrinkListener& l, uint32_t shrink, std::string& in, int nranks, Msg& m) {
  if (in.size() < frame_bytes(nranks)) return false;
  if (get(in.data(), 4) != kMagic || get(in.data() + 16, 4) != uint64_t(nranks))
    throw std::runtime_error("not a shrink message of this communicator");
  const size_t body = frame_bytes(nranks) - net::wire::kMacBytes;
  const Digest256 mac = seal(l, shrink, std::string_view(in.data(), body));
  uint8_t diff = 0;
  for (size_t i = 0; i < mac.size(); ++i) diff |= uint8_t(mac[i] ^ uint8_t(in[body + i]));
  if (diff != 0) throw std::runtime_error("a shrink message without this communicator's MAC");
  m.type = uint32_t(get(in.data() + 4, 4));
  m.from = uint32_t(get(in.data() + 8, 4));
  m.decider = uint32_t(get(in.data() + 12, 4));
  m.set.assign(in.begin() + 20, in.begin() + 20 + nranks);
  std::memcpy(&m.id, in.data() + 20 + nranks, sizeof(m.id));
  if (m.type == kDecision) hide_secret(l, shrink, m.id);
  in.erase(0, frame_bytes(nranks));
  return true;
}

sockaddr_storage to_sockaddr(const ShrinkEndpoint& e) {
  return net::wire::socket_address(e.family, e.addr, e.port, e.scope);
}

// Sends all of s on a non-blocking socket within 1 s; false if the connection broke.
bool send_all(int fd, const std::string& s) {
  return net::wire::send_all(fd, s, Clock::now() + std::chrono::seconds(1));
}

// Reads what a non-blocking socket has into `in`; false once it has ended (closed, reset).
bool drain(int fd, std::string& in) {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) in.append(buf, size_t(n));
    else if (n == 0) return false;
    else return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

bool merge(std::vector<uint8_t>& into, const std::vector<uint8_t>& from) {
  bool grew = false;
  for (size_t r = 0; r < into.size() && r < from.size(); ++r)
    if (from[r] && !into[r]) into[r] = grew = true;
  return grew;
}

}  // namespace

std::string ShrinkEndpoint::to_string() const { return net::wire::address_text(to_sockaddr(*this)); }

ShrinkListener::ShrinkListener(const std::string& ifname_spec) {
  const net::Interface itf = net::pick_interface(ifname_spec);
  sockaddr_storage a = itf.addr;
  if (a.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(a).sin_port = 0;
  else reinterpret_cast<sockaddr_in6&>(a).sin6_port = 0;
  fd_ = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw_system("shrink: socket");
  socklen_t len = net::wire::sockaddr_len(a);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd_, 256) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    close(fd_);
    errno = err;
    throw_system(fmt::format("shrink: listen on {} ({})", net::wire::address_text(a), itf.name));
  }
  mine_.family = uint16_t(a.ss_family);
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    mine_.port = ntohs(in.sin_port);
    std::memcpy(mine_.addr, &in.sin_addr, 4);
  } else {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    mine_.port = ntohs(in6.sin6_port);
    mine_.scope = in6.sin6_scope_id;
    std::memcpy(mine_.addr, &in6.sin6_addr, 16);
  }
}

std::shared_ptr<ShrinkListener> make_shrink_listener(const dfcclUniqueId& id) {
  auto l = std::make_shared<ShrinkListener>(socket_ifname_setting());
  if (net::has_rendezvous_id(id)) {
    const net::RendezvousId rid = net::parse_rendezvous_id(id);
    l->key = net::wire::auth_key(rid.token, rid.secret, sizeof(rid.secret));
  } else {
    const uint8_t none[16] = {};
    l->key = net::wire::auth_key(parse_unique_id(id).token, none, sizeof(none));
  }
  return l;
}

ShrinkListener::~ShrinkListener() {
  if (fd_ >= 0) close(fd_);
}

void ShrinkDecision::close_links() {
  if (link >= 0) close(link);
  for (const auto& [rank, fd] : reporters) close(fd);
  link = -1;
  reporters.clear();
}

// One rank's run of the agreement (the protocol in shrink_net.h). Its connections: `inbound` (accepted: reports and
// probes of others), `probes` (the coordinator's, to ranks that have not reported: a refused or dropped one is a dead
// rank) and `link` (a participant's, to its coordinator).
struct ShrinkNetAgreement::Session {
  struct Conn {
    int fd = -1;
    std::string in;
    int rank = -1;  // inbound: the rank that reported on it; probe and link: the rank at the other end
    bool connecting = false;
    bool answered = false;      // a probe that got an answer (its end is no death)
    Clock::time_point started;  // when its connect began (start_connect)
  };
  const ShrinkListener& L;
  uint32_t shrink;  // the communicator's shrink number: the messages' MAC context
  int me, n;
  const Hooks& h;
  Clock::time_point deadline;
  std::vector<uint8_t> U, sent;
  std::vector<Conn> inbound;
  std::map<int, Conn> probes;
  std::vector<uint8_t> probed;  // ranks whose probe ended after an answer: not probed again
  Conn link;
  std::optional<ShrinkDecision> out;

  Session(const ShrinkListener& l, uint32_t shrink_no, int rank, int nranks, const Hooks& hooks, int timeout_ms)
      : L(l),
        shrink(shrink_no),
        me(rank),
        n(nranks),
        h(hooks),
        deadline(Clock::now() + std::chrono::milliseconds(timeout_ms)),
        probed(size_t(nranks), 0) {}

  ~Session() {
    for (Conn& c : inbound) close(c.fd);
    for (auto& [r, c] : probes) close(c.fd);
    if (link.fd >= 0) close(link.fd);
  }

  int coordinator() const {
    for (int r = 0; r < n; ++r)
      if (!U[size_t(r)]) return r;
    return -1;
  }

  void send(Conn& c, uint32_t type) {
    if (!send_all(c.fd, frame(L, shrink, type, me, -1, U, nullptr)))
      c.connecting = false;  // its end shows at the next read
  }

  void adopt(const Msg& m, Conn* from) {
    if (out) return;
    out.emplace();
    out->excluded = m.set;
    out->id = m.id;
    out->coordinator = int(m.decider);
    if (from == &link && link.rank == out->coordinator) {
      out->link = link.fd;
      link.fd = -1;
    }
  }

  // A message on connection c (any kind): sets merge, a probe is answered with this rank's set, a decision is taken.
  void on_msg(Conn& c, const Msg& m, bool is_inbound) {
    if (m.type == kDecision) return adopt(m, &c);
    merge(U, m.set);
    if (m.type == kReport && is_inbound) c.rank = int(m.from);
    if (m.type == kProbe && is_inbound) send(c, kRedirect);
    if (m.type == kRedirect && &c == &link) {
      close(link.fd);
      link = Conn{};
    }
    if (!is_inbound && &c != &link) c.answered = true;
  }

  // Reads c; false once it has ended. Its messages are handled in order.
  bool read(Conn& c, bool is_inbound) {
    const bool open = drain(c.fd, c.in);
    Msg m;
    try {
      while (c.fd >= 0 && take(L, shrink, c.in, n, m)) on_msg(c, m, is_inbound);
    } catch (const std::runtime_error&) {
      return false;
    }
    return open;
  }

  void service_inbound() {
    for (;;) {
      const int fd = accept4(L.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      Conn c;
      c.fd = fd;
      inbound.push_back(std::move(c));
    }
    for (size_t i = 0; i < inbound.size();) {
      if (read(inbound[i], true)) {
        ++i;
        continue;
      }
      if (inbound[i].rank >= 0 && !out) U[size_t(inbound[i].rank)] = 1;  // a reporter that went: it died
      close(inbound[i].fd);
      inbound.erase(inbound.begin() + long(i));
    }
  }

  void check_gone() {
    for (int r = 0; r < n; ++r)
      if (r != me && !U[size_t(r)] && h.gone && h.gone(r)) U[size_t(r)] = 1;
  }

  bool reported(int r) const {
    for (const Conn& c : inbound)
      if (c.rank == r) return true;
    return false;
  }

  // Starts a non-blocking connect to rank r's socket; a refusal at once makes r dead.
  bool start_connect(Conn& c, int r) {
    const sockaddr_storage a = to_sockaddr(L.endpoints[size_t(r)]);
    c = Conn{socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), {}, r, true, false, Clock::now()};
    if (c.fd < 0) throw_system("shrink: socket");
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c.fd, reinterpret_cast<const sockaddr*>(&a), net::wire::sockaddr_len(a)) == 0 || errno == EINPROGRESS)
      return true;
    close(c.fd);
    c.fd = -1;
    return false;
  }

  // A connect in progress: true once connected (then sends `hello`); a refusal or kConnectMs without an answer
  // makes its rank dead (U) and closes it.
  bool finish_connect(Conn& c, uint32_t hello) {
    pollfd p{c.fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&p, 1, 0) == 1) {
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) {
        c.connecting = false;
        send(c, hello);
        return true;
      }
    } else if (Clock::now() - c.started < std::chrono::milliseconds(kConnectMs)) {
      return false;
    }
    U[size_t(c.rank)] = 1;
    close(c.fd);
    c.fd = -1;
    return false;
  }

  // The coordinator's turn: probes the ranks outside U that have not reported; decides once all have.
  void coordinate() {
    bool all = true;
    for (int r = 0; r < n; ++r) {
      if (r == me || U[size_t(r)] || reported(r)) continue;
      all = false;
      if (probed[size_t(r)]) continue;
      auto it = probes.find(r);
      if (it == probes.end()) {
        Conn c;
        if (!start_connect(c, r)) {
          U[size_t(r)] = 1;
          continue;
        }
        it = probes.emplace(r, c).first;
      }
      Conn& c = it->second;
      if (c.connecting && !finish_connect(c, kProbe)) {
        if (c.fd < 0) probes.erase(it);
        continue;
      }
      if (!read(c, false)) {
        if (!c.answered && !out) U[size_t(r)] = 1;
        probed[size_t(r)] = c.answered;
        close(c.fd);
        probes.erase(it);
      }
    }
    if (all && !U[size_t(me)] && !out) decide();
  }

  void decide() {
    Msg m;
    m.decider = uint32_t(me);
    m.set = U;
    m.id = h.make_id();
    adopt(m, nullptr);
  }

  // A participant's turn: reports to coordinator k (connecting first), sends U again when it grew, and leaves the
  // coordinator only on its answer or its end (then it is dead).
  void participate(int k) {
    if (link.fd < 0) {
      if (!start_connect(link, k)) {
        U[size_t(k)] = 1;
        link = Conn{};
        return;
      }
      sent.clear();
    }
    if (link.connecting) {
      if (!finish_connect(link, kReport)) {
        if (link.fd < 0) link = Conn{};
        return;
      }
      sent = U;
    }
    const int at = link.rank;
    const bool open = read(link, false);
    if (link.fd < 0) return;  // redirected, or the decision came
    if (!open) {
      close(link.fd);
      link = Conn{};
      if (!out) U[size_t(at)] = 1;
      return;
    }
    if (link.fd >= 0 && U != sent) {
      send(link, kReport);
      sent = U;
    }
  }

  // This rank is excluded: the ranks that reported to it go to their next coordinator with its set.
  void redirect_inbound() {
    for (size_t i = 0; i < inbound.size();) {
      if (inbound[i].rank < 0) {
        ++i;
        continue;
      }
      send(inbound[i], kRedirect);
      close(inbound[i].fd);
      inbound.erase(inbound.begin() + long(i));
    }
  }

  // The decision: forwarded on every connection (a rank that waits on this one learns it too); the decider keeps
  // its reporters' connections.
  ShrinkDecision finish() {
    ShrinkDecision d = std::move(*out);
    const std::string f = frame(L, shrink, kDecision, me, d.coordinator, d.excluded, &d.id);
    for (Conn& c : inbound) {
      send_all(c.fd, f);
      if (d.coordinator == me && c.rank >= 0 && !d.excluded[size_t(c.rank)]) {
        d.reporters.emplace_back(c.rank, c.fd);
        c.fd = -1;
      }
    }
    std::erase_if(inbound, [](const Conn& c) { return c.fd < 0; });
    for (auto& [r, c] : probes)
      if (!c.connecting) send_all(c.fd, f);
    if (link.fd >= 0) send_all(link.fd, f);
    return d;
  }

  [[noreturn]] void timeout() {
    const int k = coordinator();
    if (k != me)
      throw Error(dfcclTimeout, fmt::format("dfcclCommShrink: rank {}: no decision in time from its coordinator, rank "
                                            "{} (alive, but not deciding: a rank it waits for has not called "
                                            "dfcclCommShrink)",
                                            me, k));
    std::string missing;
    for (int r = 0; r < n; ++r)
      if (r != me && !U[size_t(r)] && !reported(r)) missing += fmt::format("{}{}", missing.empty() ? "" : ",", r);
    throw Error(dfcclTimeout, fmt::format("dfcclCommShrink: rank {}: no decision in time; ranks [{}] have not called "
                                          "dfcclCommShrink and whose processes are alive (coordinator: rank {})",
                                          me, missing, coordinator()));
  }

  void wait() {
    std::vector<pollfd> fds{{L.fd(), POLLIN, 0}};
    for (const Conn& c : inbound) fds.push_back({c.fd, POLLIN, 0});
    for (const auto& [r, c] : probes) fds.push_back({c.fd, short(c.connecting ? POLLOUT : POLLIN), 0});
    if (link.fd >= 0) fds.push_back({link.fd, short(link.connecting ? POLLOUT : POLLIN), 0});
    poll(fds.data(), fds.size(), 10);
  }

  ShrinkDecision run() {
    for (;;) {
      if (h.crash && h.crash()) throw Error(dfcclSystemError, fmt::format("shrink: rank {} stopped (test)", me));
      service_inbound();
      check_gone();
      const int k = coordinator();
      if (!out && (link.fd >= 0 || (k >= 0 && k != me))) participate(link.fd >= 0 ? link.rank : k);
      else if (!out && k == me) coordinate();
      if (U[size_t(me)]) redirect_inbound();
      if (out) return finish();
      if (k < 0) throw Error(dfcclRemoteError, "dfcclCommShrink: every rank is excluded");
      if (Clock::now() > deadline) timeout();
      wait();
    }
  }
};

ShrinkNetAgreement::ShrinkNetAgreement(const ShrinkListener& listener, uint32_t shrink, int rank, int nranks)
    : listener_(listener), shrink_(shrink), rank_(rank), nranks_(nranks) {
  if (int(listener.endpoints.size()) != nranks)
    throw Error(dfcclInternalError, "shrink: the listener does not know every rank's endpoint");
}

ShrinkDecision ShrinkNetAgreement::agree(const std::vector<uint8_t>& proposal, const Hooks& hooks, int timeout_ms) {
  Session s(listener_, shrink_, rank_, nranks_, hooks, timeout_ms);
  s.U = proposal;
  s.U.resize(size_t(nranks_), 0);
  return s.run();
}

}  // namespace dfccl
