#include "match/board_mirror.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "bootstrap/bootstrap.h"
#include "comm/comm_state.h"
#include "comm/links.h"
#include "engine/engine.h"
#include "match/match_board.h"
#include "util/error.h"
#include "util/log.h"

namespace dfccl {

namespace {

// One message's payload (after the link's header). kPost: a collective's post (rank: its sender; id, n: the key;
// a, b: the signature's count and shape). kP2p: a point-to-point post (rank, peer: the sender and receiver; lane,
// n: the key; a: the signature; b: 1 for the send side). kText: a mismatch, its text after this struct. kLeave:
// rank destroyed its communicator after n order-matched collectives.
enum : uint32_t { kPost = 1, kP2p = 2, kText = 3, kLeave = 4 };
struct Wire {
  uint32_t type;
  int32_t rank, peer, id;
  uint32_t lane, pad;
  uint64_t n, a, b;
};
static_assert(sizeof(Wire) == 48);

std::vector<std::byte> encode(const Wire& w, const std::string& text = {}) {
  const size_t room = net::BoardLink::kMaxBytes - 8 - sizeof(Wire);
  const size_t n = std::min(text.size(), room);
  std::vector<std::byte> out(sizeof(Wire) + n);
  std::memcpy(out.data(), &w, sizeof(w));
  if (n) std::memcpy(out.data() + sizeof(w), text.data(), n);
  return out;
}

// Where a rank's messages go: for each other host, its lowest rank that has not left the communicator (its own
// leave message set kLeft in this host's liveness words: Bootstrap::set_peer_left). Immutable after init but for
// those words; shared by the communicator's side and the proxy's sink. Holds the segment weakly, so that it does not
// outlive the communicator's release; once it is gone, the lowest ranks receive.
struct Routes {
  std::weak_ptr<Bootstrap> segment;
  std::vector<net::BoardDest> of_rank;  // [rank]: its first proxy and board id
  std::vector<std::vector<int>> hosts;  // the ranks of each other host, ascending
  std::vector<int> host_of;             // [rank]: its index in hosts, -1 for this host

  // The receiver of other host h, or null when every rank of it has left.
  const net::BoardDest* receiver(int h) const {
    const std::shared_ptr<Bootstrap> words = segment.lock();
    for (int q : hosts[size_t(h)])
      if (!words || words->peer_state(q) != Bootstrap::kLeft) return &of_rank[size_t(q)];
    return nullptr;
  }
  std::vector<const net::BoardDest*> receivers() const {
    std::vector<const net::BoardDest*> out;
    for (size_t h = 0; h < hosts.size(); ++h)
      if (const net::BoardDest* d = receiver(int(h))) out.push_back(d);
    return out;
  }
};

// This host's board as the proxy's thread sees it.
class Sink final : public net::BoardSink {
 public:
  Sink(std::shared_ptr<MatchBoard> board, std::shared_ptr<const Routes> routes)
      : board_(std::move(board)), routes_(std::move(routes)) {}
  std::string deliver(const std::byte* payload, size_t bytes) override {
    Wire w{};
    if (bytes < sizeof(w)) return {};
    std::memcpy(&w, payload, sizeof(w));
    if (w.type == kPost) return board_->mirror(w.rank, MatchKey{w.id, w.n}, MatchBoard::Signature{w.a, w.b});
    if (w.type == kP2p) return board_->mirror_p2p(P2pKey{w.lane, w.rank, w.peer, w.n}, w.b != 0, w.a);
    if (w.type == kText && bytes > sizeof(w))
      board_->publish(std::string(reinterpret_cast<const char*>(payload) + sizeof(w), bytes - sizeof(w)));
    if (w.type == kLeave) leave(w.rank, w.n);
    return {};
  }
  std::vector<std::byte> encode_text(const std::string& text) const override {
    Wire w{};
    w.type = kText;
    return encode(w, text);
  }
  std::vector<net::BoardDest> destinations() const override {
    std::vector<net::BoardDest> out;
    for (const net::BoardDest* d : routes_->receivers()) out.push_back(*d);
    return out;
  }

 private:
  // A rank of another host destroyed its communicator: this host's senders skip it from now on.
  void leave(int rank, uint64_t collectives) const {
    const std::shared_ptr<Bootstrap> words = routes_->segment.lock();
    if (words && rank >= 0 && size_t(rank) < routes_->host_of.size() && routes_->host_of[size_t(rank)] >= 0)
      words->set_peer_left(rank, collectives);
  }

  std::shared_ptr<MatchBoard> board_;
  std::shared_ptr<const Routes> routes_;
};

// Every rank's destination and the ranks of each other host (c's ranks span hosts; net_connect has run).
std::shared_ptr<Routes> make_routes(const dfcclComm* c, const std::vector<uint64_t>& host_hashes) {
  auto r = std::make_shared<Routes>();
  r->segment = c->bootstrap;
  r->host_of.assign(size_t(c->nranks), -1);
  std::vector<uint64_t> seen;  // the other hosts' hashes, in the order of their lowest ranks
  for (int q = 0; q < c->nranks; ++q) {
    const NetEndpoint& e = c->net.endpoints[size_t(q)];
    r->of_rank.push_back({e.address, e.engine, e.reserved_id, fmt::format("rank {} of {}", q, c->nranks)});
    const uint64_t h = host_hashes[size_t(q)];
    if (h == host_hashes[size_t(c->rank)]) continue;
    const size_t i = size_t(std::find(seen.begin(), seen.end(), h) - seen.begin());
    if (i == seen.size()) {
      seen.push_back(h);
      r->hosts.emplace_back();
    }
    r->hosts[i].push_back(q);
    r->host_of[size_t(q)] = int(i);
  }
  return r;
}

}  // namespace

// A communicator's side of the mirroring (dfcclComm::mirror). `mu` guards proxy, which release drops while other
// threads may still queue (held briefly, never across a CUDA call).
struct BoardMirror {
  std::mutex mu;
  std::shared_ptr<net::Proxy> proxy;     // the communicator's first proxy; null once released
  uint32_t board = 0;                    // this rank's board id in it
  std::shared_ptr<const Routes> routes;  // where the messages go
  bool warned = false;                   // a dropped message was logged
};

namespace {

// The communicator's first network proxy (links.h).
std::shared_ptr<net::Proxy> first_proxy(const dfcclComm* c) {
  return c->net.proxies.empty() ? nullptr : c->net.proxies[0];
}

// Queues payload for every destination in `to` (under m.mu; nothing if released); a full queue is logged once.
void queue(BoardMirror& m, int rank, const std::vector<const net::BoardDest*>& to,
           const std::vector<std::byte>& payload) {
  std::lock_guard<std::mutex> lk(m.mu);
  if (!m.proxy) return;
  for (const net::BoardDest* d : to) {
    if (m.proxy->board_link().send(*d, payload) || m.warned) continue;
    m.warned = true;
    log(LogLevel::Warn, LogSubsys::Coll,
        "rank {}: the network proxy's queue of match board messages is full ({}); a post was not sent to {}, so a "
        "mismatch with that host may go unnoticed",
        rank, net::BoardLink::kMaxQueued, d->name);
  }
}

}  // namespace

void mirror_connect(dfcclComm* c, const std::vector<uint64_t>& host_hashes) {
  if (std::all_of(host_hashes.begin(), host_hashes.end(), [&](uint64_t h) { return h == host_hashes[0]; })) return;
  auto m = std::make_shared<BoardMirror>();
  m->proxy = first_proxy(c);
  if (!m->proxy || c->net.endpoints.size() != size_t(c->nranks))
    throw Error(dfcclInternalError, "communicator init: ranks on several hosts but no network proxy");
  m->board = c->net.endpoints[size_t(c->rank)].reserved_id;
  m->routes = make_routes(c, host_hashes);
  c->board->set_across_hosts();
  m->proxy->board_link().add(m->board, std::make_shared<Sink>(c->board, m->routes));
  c->mirror = std::move(m);
}

void mirror_post(dfcclComm* c, const MatchKey& key, const core::Desc& d) {
  if (!c->mirror) return;
  const MatchBoard::Signature sig = MatchBoard::signature(d);
  Wire w{};
  w.type = kPost;
  w.rank = c->rank;
  w.id = key.id;
  w.n = key.n;
  w.a = sig.count;
  w.b = sig.shape;
  queue(*c->mirror, c->rank, c->mirror->routes->receivers(), encode(w));
}

void mirror_post_p2p(dfcclComm* c, const P2pKey& key, const core::Desc& d) {
  if (!c->mirror) return;
  const Routes& r = *c->mirror->routes;
  const int h = r.host_of[size_t(d.root)];  // the peer's host
  const net::BoardDest* to = h >= 0 ? r.receiver(h) : nullptr;
  if (!to) return;
  Wire w{};
  w.type = kP2p;
  w.rank = key.src;
  w.peer = key.dst;
  w.lane = key.lane;
  w.n = key.k;
  w.a = MatchBoard::p2p_signature(d);
  w.b = d.kind == core::Kind::Send ? 1 : 0;
  queue(*c->mirror, c->rank, {to}, encode(w));
}

void mirror_mismatch(dfcclComm* c, const std::string& text) {
  if (!c->mirror) return;
  Wire w{};
  w.type = kText;
  queue(*c->mirror, c->rank, c->mirror->routes->receivers(), encode(w, text));
}

void mirror_leave(dfcclComm* c) {
  if (!c->mirror) return;
  Wire w{};
  w.type = kLeave;
  w.rank = c->rank;
  w.n = c->next_key;
  queue(*c->mirror, c->rank, c->mirror->routes->receivers(), encode(w));
}

void mirror_release(dfcclComm* c) {
  if (!c->mirror) return;
  std::shared_ptr<net::Proxy> proxy;  // released after the lock
  std::lock_guard<std::mutex> lk(c->mirror->mu);
  proxy.swap(c->mirror->proxy);
  if (proxy) proxy->board_link().remove(c->mirror->board);
}

}  // namespace dfccl
