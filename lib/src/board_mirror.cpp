#include "board_mirror.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "comm.h"
#include "error.h"
#include "log.h"
#include "match_board.h"

namespace dfccl {

namespace {

// One message's payload (after the link's header). kPost: a collective's post (rank: its sender; id, n: the key;
// a, b: the signature's count and shape). kP2p: a point-to-point post (rank, peer: the sender and receiver; lane,
// n: the key; a: the signature; b: 1 for the send side). kText: a mismatch, its text after this struct.
enum : uint32_t { kPost = 1, kP2p = 2, kText = 3 };
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

// This host's board as the proxy's thread sees it.
class Sink final : public net::BoardSink {
 public:
  explicit Sink(std::shared_ptr<MatchBoard> board) : board_(std::move(board)) {}
  std::string deliver(const std::byte* payload, size_t bytes) override {
    Wire w{};
    if (bytes < sizeof(w)) return {};
    std::memcpy(&w, payload, sizeof(w));
    if (w.type == kPost) return board_->mirror(w.rank, MatchKey{w.id, w.n}, MatchBoard::Signature{w.a, w.b});
    if (w.type == kP2p) return board_->mirror_p2p(P2pKey{w.lane, w.rank, w.peer, w.n}, w.b != 0, w.a);
    if (w.type == kText && bytes > sizeof(w))
      board_->publish(std::string(reinterpret_cast<const char*>(payload) + sizeof(w), bytes - sizeof(w)));
    return {};
  }
  std::vector<std::byte> encode_text(const std::string& text) const override {
    Wire w{};
    w.type = kText;
    return encode(w, text);
  }

 private:
  std::shared_ptr<MatchBoard> board_;
};

}  // namespace

// A communicator's side of the mirroring (dfcclComm::mirror). `mu` guards proxy, which release drops while other
// threads may still queue (held briefly, never across a CUDA call).
struct BoardMirror {
  std::mutex mu;
  std::shared_ptr<net::Proxy> proxy;  // the communicator's first proxy; null once released
  uint32_t board = 0;                 // this rank's board id in it
  std::vector<net::BoardDest> dests;  // the lowest rank of every other host
  std::vector<int> dest_of;           // [rank]: its host's entry in dests, -1 for this host
  bool warned = false;                // a dropped message was logged
};

namespace {

// The communicator's first network proxy (links.h).
std::shared_ptr<net::Proxy> first_proxy(const dfcclComm* c) {
  return c->net.proxies.empty() ? nullptr : c->net.proxies[0];
}

// Queues w for dests[i] of every i in `to` (under m.mu; nothing if released); a full queue is logged once.
void queue(BoardMirror& m, int rank, const std::vector<int>& to, const std::vector<std::byte>& payload) {
  std::lock_guard<std::mutex> lk(m.mu);
  if (!m.proxy) return;
  for (int i : to) {
    if (m.proxy->board_link().send(m.dests[size_t(i)], payload) || m.warned) continue;
    m.warned = true;
    log(LogLevel::Warn, LogSubsys::Coll,
        "rank {}: the network proxy's queue of match board messages is full ({}); a post was not sent to {}, so a "
        "mismatch with that host may go unnoticed",
        rank, net::BoardLink::kMaxQueued, m.dests[size_t(i)].name);
  }
}

std::vector<int> every_dest(const BoardMirror& m) {
  std::vector<int> to(m.dests.size());
  for (size_t i = 0; i < to.size(); ++i) to[i] = int(i);
  return to;
}

}  // namespace

void mirror_connect(dfcclComm* c, const std::vector<uint64_t>& host_hashes) {
  if (std::all_of(host_hashes.begin(), host_hashes.end(), [&](uint64_t h) { return h == host_hashes[0]; })) return;
  auto m = std::make_shared<BoardMirror>();
  m->proxy = first_proxy(c);
  const std::vector<NetEndpoint>& ends = c->net.endpoints;
  if (!m->proxy || ends.size() != size_t(c->nranks))
    throw Error(dfcclInternalError, "communicator init: ranks on several hosts but no network proxy");
  m->board = ends[size_t(c->rank)].reserved_id;
  // The lowest rank of each other host receives this rank's posts.
  m->dest_of.assign(size_t(c->nranks), -1);
  for (int q = 0; q < c->nranks; ++q) {
    const uint64_t h = host_hashes[size_t(q)];
    if (h == host_hashes[size_t(c->rank)]) continue;
    const int lowest = int(std::find(host_hashes.begin(), host_hashes.end(), h) - host_hashes.begin());
    if (lowest == q) {
      const NetEndpoint& e = ends[size_t(q)];
      m->dests.push_back({e.address, e.engine, e.reserved_id, fmt::format("rank {} of {}", q, c->nranks)});
    }
    m->dest_of[size_t(q)] = m->dest_of[size_t(lowest)] >= 0 ? m->dest_of[size_t(lowest)] : int(m->dests.size()) - 1;
  }
  c->board->set_across_hosts();
  m->proxy->board_link().add(m->board, std::make_shared<Sink>(c->board), m->dests);
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
  queue(*c->mirror, c->rank, every_dest(*c->mirror), encode(w));
}

void mirror_post_p2p(dfcclComm* c, const P2pKey& key, const core::Desc& d) {
  const int peer = d.root;
  if (!c->mirror || c->mirror->dest_of[size_t(peer)] < 0) return;
  Wire w{};
  w.type = kP2p;
  w.rank = key.src;
  w.peer = key.dst;
  w.lane = key.lane;
  w.n = key.k;
  w.a = MatchBoard::p2p_signature(d);
  w.b = d.kind == core::Kind::Send ? 1 : 0;
  queue(*c->mirror, c->rank, {c->mirror->dest_of[size_t(peer)]}, encode(w));
}

void mirror_mismatch(dfcclComm* c, const std::string& text) {
  if (!c->mirror) return;
  Wire w{};
  w.type = kText;
  queue(*c->mirror, c->rank, every_dest(*c->mirror), encode(w, text));
}

void mirror_release(dfcclComm* c) {
  if (!c->mirror) return;
  std::shared_ptr<net::Proxy> proxy;  // released after the lock
  std::lock_guard<std::mutex> lk(c->mirror->mu);
  proxy.swap(c->mirror->proxy);
  if (proxy) proxy->board_link().remove(c->mirror->board);
}

}  // namespace dfccl
