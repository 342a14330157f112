#include "net/proxy.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <random>

#include "core/region.h"
#include "settings/env.h"
#include "util/thread_name.h"

namespace dfccl::net {

namespace {

// A data message's channel field carries kLLChannel when its bytes are LL lines (channel 0 only: core/region.h).
constexpr uint32_t kLLChannel = 0x80;
constexpr Tag kAnyProtocol = tags::kExact & ~(Tag{kLLChannel} << tags::kChannelShift);
// The proxy thread's pause after a turn: none while turns move something, nor for kIdleSpins idle turns and then
// `spin` (DFCCL_NET_SPIN_NS); after that kIdleSleep per turn.
class Idler {
 public:
  explicit Idler(std::chrono::nanoseconds spin) : spin_(spin) {}
  void after_turn(bool moved) {
    idle_ = moved ? 0 : idle_ + 1;
    if (idle_ <= kIdleSpins) return;
    const auto now = std::chrono::steady_clock::now();
    if (idle_ == kIdleSpins + 1) since_ = now;
    if (now - since_ >= spin_) std::this_thread::sleep_for(kIdleSleep);
  }

 private:
  static constexpr unsigned kIdleSpins = 16;
  static constexpr auto kIdleSleep = std::chrono::microseconds(20);
  std::chrono::nanoseconds spin_;
  unsigned idle_ = 0;
  std::chrono::steady_clock::time_point since_{};
};
constexpr uint32_t kByeKind = 1;  // control message: "this proxy stops", 8 bytes: its engine id
constexpr Tag kByeTag = tags::make(tags::kControlHop, kByeKind, 0, 0);
constexpr uint32_t kBeatKind = 2;  // control message: a heartbeat, 8 bytes: the sender's engine id
constexpr Tag kBeatTag = tags::make(tags::kControlHop, kBeatKind, 0, 0);
// control message: "I aborted the communicator" or "rank r broke it", 8 bytes: the receiver's hop id, r + 1 above it
constexpr uint32_t kAbortKind = 3;
constexpr Tag kAbortTag = tags::make(tags::kControlHop, kAbortKind, 0, 0);
using SteadyClock = std::chrono::steady_clock;

uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// True when the `nlines` 16-byte LL lines at p all carry `flag` in both words (the GPU writes them without a fence).
bool lines_ready(const char* p, uint64_t nlines, uint32_t flag) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  for (uint64_t i = 0; i < 2 * nlines; ++i)
    if (uint32_t(__atomic_load_n(w + i, __ATOMIC_RELAXED) >> 32) != flag) return false;
  return true;
}

// Copies LL lines with one single-copy-atomic store per 8-byte word, so that a reader never sees a flag without its
// data.
void copy_lines(char* dst, const char* src, uint64_t nlines) {
  const uint64_t* s = reinterpret_cast<const uint64_t*>(src);
  uint64_t* d = reinterpret_cast<uint64_t*>(dst);
  for (uint64_t i = 0; i < 2 * nlines; ++i) __atomic_store_n(d + i, s[i], __ATOMIC_RELAXED);
}

}  // namespace

// One hop and its per-(channel, lane) rows. Send rows: positions [done, forwarded) are in flight; the head stored
// in self is min(credit, done). Receive rows: positions [tail, posted) have receives posted; credited is the last
// head sent back.
struct Proxy::Hop {
  HopSpec s;
  core::CommStatic geo{};
  uint64_t key = 0;
  Peer peer;
  bool failed = false, detaching = false;
  std::chrono::steady_clock::time_point heard{};  // when a data or credit message of the peer last came
  struct Row {
    uint64_t a = 0, b = 0, c = 0, d = 0;  // send: forwarded, done, credit, head; receive: posted, tail, credited
    uint64_t credit_buf = 0;              // receive: the credit message in flight
    Req credit_req;
    bool credit_pending = false;
  };
  std::vector<Row> rows;     // every (channel, lane) of the connection
  std::vector<size_t> mine;  // the rows of the channels this proxy carries (HopSpec::chan_first, chan_step)
  std::vector<Req> slots;    // [row * nslots + position % nslots]: the request of a position in flight
  Inbox credits;             // send hops: credit messages (the peer's head), tagged with this hop's channel and lane

  Req& slot(size_t row, uint64_t pos) { return slots[row * s.nslots + pos % s.nslots]; }
  std::pair<uint32_t, uint32_t> ch_lane(size_t row) const {
    return {uint32_t(row / s.nlanes), uint32_t(row % s.nlanes)};
  }
};

int proxy_threads(bool host_executor) {
  return int(env_int(host_executor ? "DFCCL_HOST_NET_THREADS" : "DFCCL_NET_THREADS"));
}

Result<std::shared_ptr<Proxy>> Proxy::create(bool host_executor, const Options& options) {
  auto t = make_transport(options);
  if (!t.ok()) return {nullptr, t.status};
  return {std::shared_ptr<Proxy>(new Proxy(std::move(t.value), host_executor)), {}};
}

Proxy::Proxy(std::unique_ptr<Transport> transport, bool host_executor)
    : t_(std::move(transport)), address_(t_->address()) {
  spin_ = std::chrono::nanoseconds(env_int(host_executor ? "DFCCL_HOST_NET_SPIN_NS" : "DFCCL_NET_SPIN_NS"));
  std::random_device rd;
  engine_id_ = (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  beat_period_ = std::chrono::milliseconds(env_int("DFCCL_NET_HEARTBEAT_MS"));
  silence_ = std::chrono::milliseconds(env_int("DFCCL_NET_TIMEOUT_MS"));
  thread_ = std::thread([this] {
    name_this_thread("proxy");
    loop();
  });
}

Proxy::~Proxy() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  hops_.clear();
  board_link_->step(*t_, [this](const BoardDest& d) { return board_peer(d); });  // queued mismatches, before the byes
  say_bye();
  drain();
  t_.reset();
  board_link_.reset();
}

// Tells every connected peer that this proxy stops (bounded: 200 ms for the sends to go out).
void Proxy::say_bye() {
  std::vector<Req> sent;
  for (const auto& [address, info] : peers_) {
    auto r = t_->isend(info.peer, kByeTag, &engine_id_, sizeof(engine_id_));
    if (r.ok()) sent.push_back(r.value);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (!sent.empty() && std::chrono::steady_clock::now() < deadline) {
    t_->progress();
    std::erase_if(sent, [&](Req q) { return t_->test(q).code != Code::kPending; });
  }
}

template <class Take>
bool Proxy::take_inbox(Inbox& in, Tag tag, Tag mask, bool repost, Take take, Status* error) {
  bool came = false;
  for (size_t k = 0; k < Inbox::kSize; ++k) {
    if (in.posted[k]) {
      const Completion c = t_->test(in.req[k]);
      if (c.code == Code::kPending) continue;
      in.posted[k] = false;
      came = true;
      if (!take(c, in.value[k])) return true;
    }
    if (!repost) continue;
    auto r = t_->irecv(tag, mask, &in.value[k], sizeof(uint64_t));
    if (!r.ok()) {
      if (error) *error = r.status;
      return came;
    }
    in.req[k] = r.value;
    in.posted[k] = true;
  }
  return came;
}

// The peers' goodbyes (their messages can only come from connected peers); true when one came.
bool Proxy::take_byes() {
  return take_inbox(byes_, kByeTag, tags::kExact, true, [&](const Completion& c, uint64_t engine) {
    if (c.code == Code::kOk) departed_.push_back(engine);
    return true;
  });
}

// Takes (as truncated) the messages that arrived for hops that are gone, for a bounded time, so that the transport
// goes without complaints about unmatched messages.
void Proxy::drain() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = t_->irecv(0, 0, nullptr, 0);
    if (!r.ok()) return;
    t_->progress();
    if (t_->test(r.value).code == Code::kPending) {
      t_->cancel(r.value);
      t_->progress();
      t_->test(r.value);
      return;
    }
  }
}

uint32_t Proxy::new_hop_id() {
  const uint32_t id = next_id_.fetch_add(1);
  if (id >= tags::kControlHop)
    throw std::runtime_error("the engine has used all its network hop ids (16 M); create fewer communicators");
  return id;
}

uint64_t Proxy::attach(std::vector<HopSpec> specs) {
  const uint64_t key = next_key_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lk(done_mu_);
    live_hops_[key] = int(specs.size());
  }
  std::lock_guard<std::mutex> lk(cmd_mu_);
  cmds_.push_back([this, key, specs = std::move(specs)]() mutable {
    for (HopSpec& s : specs) {
      auto h = std::make_unique<Hop>();
      h->s = std::move(s);
      h->key = key;
      h->geo.nchan = h->s.nchan;
      h->geo.nlanes = h->s.nlanes;
      h->geo.nslots = h->s.nslots;
      h->geo.slot_bytes = h->s.slot_bytes;
      h->rows.resize(size_t(h->s.nchan) * h->s.nlanes);
      for (size_t row = 0; row < h->rows.size(); ++row)
        if ((row / h->s.nlanes) % h->s.chan_step == h->s.chan_first) h->mine.push_back(row);
      h->slots.resize(h->rows.size() * h->s.nslots);
      h->peer = peer_for(h->s);
      hops_.push_back(std::move(h));
    }
  });
  has_cmds_ = true;
  return key;
}

void Proxy::begin_detach(uint64_t key) {
  std::lock_guard<std::mutex> lk(cmd_mu_);
  cmds_.push_back([this, key] {
    for (auto& h : hops_)
      if (h->key == key) h->detaching = true;
  });
  has_cmds_ = true;
}

bool Proxy::wait_detached(uint64_t key, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lk(done_mu_);
  const bool gone = done_cv_.wait_until(lk, deadline, [&] { return live_hops_.count(key) == 0; });
  if (gone) failures_.erase(key);
  if (gone) notices_in_.erase(key);
  return gone;
}

void Proxy::tell(uint64_t key, int origin) {
  std::lock_guard<std::mutex> lk(cmd_mu_);
  cmds_.push_back([this, key, origin] {
    for (auto& h : hops_) {
      if (h->key != key || h->failed || h->peer == Peer{}) continue;
      Outgoing& n = notices_.emplace_back();
      n.word = uint64_t(h->s.their_id) | uint64_t(uint32_t(origin + 1)) << 32;
      auto r = t_->isend(h->peer, kAbortTag, &n.word, sizeof(n.word));
      if (r.ok()) n.req = r.value;
      else notices_.pop_back();
    }
  });
  has_cmds_ = true;
}

Proxy::Notice Proxy::notice(uint64_t key) const {
  std::lock_guard<std::mutex> lk(done_mu_);
  auto it = notices_in_.find(key);
  return it == notices_in_.end() ? Notice{} : it->second;
}

// The peers' notices: each names the hop (of this engine) whose communicator its sender aborted, or that the origin
// rank it carries broke.
bool Proxy::take_aborts() {
  return take_inbox(aborts_, kAbortTag, tags::kExact, true, [&](const Completion& c, uint64_t word) {
    if (c.code != Code::kOk) return true;
    const uint32_t hop = uint32_t(word);
    const int origin = int(uint32_t(word >> 32)) - 1;
    for (auto& h : hops_)
      if (h->s.my_id == hop && !h->detaching) {
        std::lock_guard<std::mutex> lk(done_mu_);
        notices_in_.emplace(h->key, Notice{h->s.peer_rank, origin});
      }
    return true;
  });
}

// Drops the abort notices whose sends ended; true when one did.
bool Proxy::reap_notices() {
  return std::erase_if(notices_, [&](const Outgoing& n) { return t_->test(n.req).code != Code::kPending; }) > 0;
}

std::string Proxy::failure(uint64_t key, int* rank) const {
  std::lock_guard<std::mutex> lk(done_mu_);
  auto it = failures_.find(key);
  if (it == failures_.end()) return {};
  *rank = it->second.first;
  return it->second.second;
}

// A connection to a board message's destination: the one the hops use, or a new one (heartbeats included).
Peer Proxy::board_peer(const BoardDest& d) {
  HopSpec s;
  s.peer_address = d.address;
  s.peer_engine = d.engine;
  s.peer_name = d.name;
  return peer_for(s);
}

Peer Proxy::peer_for(const HopSpec& s) {
  auto it = peers_.find(s.peer_address);
  if (it != peers_.end()) return it->second.peer;
  auto r = t_->connect(s.peer_address, s.peer_name);
  if (!r.ok()) return Peer{};
  PeerInfo info;
  info.peer = r.value;
  info.engine = s.peer_engine;
  info.heard = info.beat_sent = SteadyClock::now();  // silence is counted from the connection on
  peers_.emplace(s.peer_address, info);
  return r.value;
}

// Sends each connected peer a heartbeat every beat_period_, and fails the hops of a peer not heard from for
// silence_ (0: never), counted from this proxy's last stall at most (proxy.h); true when a message went or came.
bool Proxy::heartbeats() {
  bool moved = take_beats();
  const auto now = SteadyClock::now();
  if (last_turn_ != SteadyClock::time_point{} && silence_.count() > 0 && now - last_turn_ > silence_ / 2) {
    stall_ = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_turn_);
    resumed_ = now;
  }
  for (auto& [address, p] : peers_) {
    moved = send_beat(p, now) || moved;
    judge(p, now);
  }
  last_turn_ = now;
  return moved;
}

// Sends p its heartbeat when the period has passed and the previous one is no longer pending; true when it went.
bool Proxy::send_beat(PeerInfo& p, SteadyClock::time_point now) {
  if (p.beat_pending && t_->test(p.beat).code != Code::kPending) p.beat_pending = false;
  if (p.beat_pending || now - p.beat_sent < beat_period_) return false;
  auto r = t_->isend(p.peer, kBeatTag, &engine_id_, sizeof(engine_id_));
  p.beat_sent = now;
  p.beat_pending = r.ok();
  if (r.ok()) p.beat = r.value;
  return true;
}

// Fails p's hops when nothing of p's came for silence_ while this proxy listened; the message says what this proxy
// did meanwhile (its last beat to p, its previous turn, its last stall), for the diagnosis.
void Proxy::judge(PeerInfo& p, SteadyClock::time_point now) {
  const bool left = std::find(departed_.begin(), departed_.end(), p.engine) != departed_.end();
  if (p.silent || left || silence_.count() == 0) return;
  auto since = std::max(p.heard, resumed_);
  for (const auto& h : hops_)
    if (h->peer == p.peer) since = std::max(since, h->heard);
  if (now - since < silence_) return;
  p.silent = true;
  auto ms = [&](SteadyClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - t).count();
  };
  const std::string why = fmt::format(
      "its proxy has not been heard from for {} ms (stopped, hung or cut off; DFCCL_NET_TIMEOUT_MS); this proxy's "
      "last heartbeat to it went {} ms ago ({}), its previous turn was {} ms ago, its last stall {}",
      ms(since), ms(p.beat_sent), p.beat_pending ? "still pending" : "sent", ms(last_turn_),
      resumed_ == SteadyClock::time_point{} ? std::string("none")
                                            : fmt::format("{} ms long, ended {} ms ago", stall_.count(), ms(resumed_)));
  for (auto& h : hops_)
    if (h->peer == p.peer) fail(*h, why);
}

// The peers' heartbeats: the sender is known by the engine id it carries. Reposted receives match beats already
// queued at once, so a few rounds take a backlog (after a stall) in one turn.
bool Proxy::take_beats() {
  bool came = false;
  for (int round = 0; round < 4; ++round) {
    const bool more = take_inbox(beats_, kBeatTag, tags::kExact, true, [&](const Completion& c, uint64_t engine) {
      for (auto& [address, p] : peers_)
        if (c.code == Code::kOk && p.engine == engine) p.heard = SteadyClock::now();
      return true;
    });
    if (!more) break;
    came = true;
  }
  return came;
}

void Proxy::fail(Hop& h, const std::string& why) {
  if (h.failed) return;
  h.failed = true;
  std::lock_guard<std::mutex> lk(done_mu_);
  failures_.emplace(h.key,
                    std::make_pair(h.s.peer_rank, fmt::format("network connection to {}: {}", h.s.peer_name, why)));
}

void Proxy::run_commands() {
  std::vector<std::function<void()>> cmds;
  {
    std::lock_guard<std::mutex> lk(cmd_mu_);
    cmds.swap(cmds_);
    has_cmds_ = false;
  }
  for (auto& f : cmds) f();
}

void Proxy::handle_peer_failures() {
  for (const PeerFailure& f : t_->take_peer_failures()) {
    for (auto& h : hops_) {
      const bool left = std::find(departed_.begin(), departed_.end(), h->s.peer_engine) != departed_.end();
      if (h->peer == f.peer && !left) fail(*h, f.message);
    }
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (it->second.peer == f.peer) {
        t_->close(f.peer, CloseMode::kForce, std::chrono::milliseconds(0));
        it = peers_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

// The send side of one hop (contract at the top of proxy.h); true when something moved.
bool Proxy::step_send(Hop& h) {
  bool moved = take_credits(h);
  for (size_t i = 0; i < h.mine.size() && !h.failed; ++i) {
    const size_t row = h.mine[i];
    Hop::Row& r = h.rows[row];
    const auto [ch, lane] = h.ch_lane(row);
    for (; r.b < r.a; ++r.b, moved = true) {  // sends done, in order
      const Completion c = t_->test(h.slot(row, r.b));
      if (c.code == Code::kPending) break;
      if (c.code != Code::kOk) {
        fail(h, c.message);
        return true;
      }
    }
    if (forward(h, row)) moved = true;
    if (h.failed) return true;
    const uint64_t head = std::min(r.c, r.b);
    if (head > r.d) {
      store(&core::region_ctrl(h.s.self, h.geo, ch, lane)->head, r.d = head);
      deliveries_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return moved;
}

// Sends the slots of one send row that the shadow's tail published and whose size words (and LL flags) are visible,
// at most nslots beyond the last completed send; true when it sent any.
bool Proxy::forward(Hop& h, size_t row) {
  Hop::Row& r = h.rows[row];
  const uint32_t nslots = h.s.nslots;
  const auto [ch, lane] = h.ch_lane(row);
  const uint64_t tail = load(&core::region_ctrl(h.s.shadow, h.geo, ch, lane)->tail);
  bool sent = false;
  for (; r.a < tail && r.a < r.b + nslots; ++r.a, sent = true) {
    const uint64_t pos = r.a;
    const uint64_t w = load(core::region_size(h.s.shadow, h.geo, ch, lane, pos));
    if (uint32_t(w >> 32) != uint32_t(pos + 1)) break;  // the size word is not visible yet
    const bool ll = (w & core::kSizeLL) != 0;
    const uint64_t bytes = w & (core::kSizeLL - 1);
    const char* src =
        ll ? core::region_ll(h.s.shadow, h.geo, lane, pos) : core::region_slot(h.s.shadow, h.geo, ch, lane, pos);
    if (ll && !lines_ready(src, bytes / 16, uint32_t(pos + 1))) break;
    const Tag tag = tags::make(h.s.their_id, ch | (ll ? kLLChannel : 0), lane, uint32_t(pos));
    auto s = t_->isend(h.peer, tag, bytes ? src : nullptr, bytes);
    if (!s.ok()) {
      fail(h, s.status.message);
      return true;
    }
    h.slot(row, pos) = s.value;
  }
  return sent;
}

// Credit messages for a send hop: 8 bytes (the peer's head) tagged with this hop's id, channel and lane.
bool Proxy::take_credits(Hop& h) {
  auto take = [&](const Completion& c, uint64_t head) {
    if (c.code != Code::kOk) {
      fail(h, c.message);
      return false;
    }
    h.heard = SteadyClock::now();
    const size_t row = size_t(tags::channel(c.tag)) * h.s.nlanes + tags::lane(c.tag);
    if (row < h.rows.size()) h.rows[row].c = std::max(h.rows[row].c, head);
    return true;
  };
  Status error;
  const bool moved =
      take_inbox(h.credits, tags::make(h.s.my_id, 0, 0, 0), tags::kHopMask, !h.detaching && !h.failed, take, &error);
  if (!error.ok()) fail(h, error.message);
  return moved || !error.ok();
}

// The receive side of one hop (contract at the top of proxy.h); true when something moved.
bool Proxy::step_recv(Hop& h) {
  bool moved = false;
  const uint32_t nslots = h.s.nslots;
  for (size_t i = 0; i < h.mine.size() && !h.failed; ++i) {
    const size_t row = h.mine[i];
    Hop::Row& r = h.rows[row];
    const auto [ch, lane] = h.ch_lane(row);
    const uint64_t consumed = load(&core::region_ctrl(h.s.shadow, h.geo, ch, lane)->head);
    for (; r.a < consumed + nslots; ++r.a, moved = true) {  // receives into free slots
      char* dst = core::region_slot(h.s.self, h.geo, ch, lane, r.a);
      auto s = t_->irecv(tags::make(h.s.my_id, ch, lane, uint32_t(r.a)), ch == 0 ? kAnyProtocol : tags::kExact, dst,
                         h.s.slot_bytes);
      if (!s.ok()) {
        fail(h, s.status.message);
        return true;
      }
      h.slot(row, r.a) = s.value;
    }
    for (; r.b < r.a; ++r.b, moved = true) {  // arrivals, published in order
      const Completion c = t_->test(h.slot(row, r.b));
      if (c.code == Code::kPending) break;
      if (c.code != Code::kOk) {
        fail(h, c.message);
        return true;
      }
      h.heard = SteadyClock::now();
      if (tags::channel(c.tag) & kLLChannel)
        copy_lines(core::region_ll(h.s.self, h.geo, lane, r.b), core::region_slot(h.s.self, h.geo, ch, lane, r.b),
                   c.bytes / 16);
      store(&core::region_ctrl(h.s.self, h.geo, ch, lane)->tail, r.b + 1);
      deliveries_.fetch_add(1, std::memory_order_relaxed);
    }
    bool sent = false;
    std::string why;
    const Code credit = return_credit(h, row, &sent, &why);
    if (credit != Code::kOk && credit != Code::kPending) {
      fail(h, why);
      return true;
    }
    moved = moved || sent;
  }
  return moved;
}

// A detaching receive hop first returns the daemon's last heads to the sender (whose destroy waits for them); true
// once every row's newest head has gone out (or the hop failed; send hops have nothing to return).
bool Proxy::flush_credits(Hop& h) {
  if (h.s.send || h.failed) return true;
  bool flushed = true;
  for (size_t row : h.mine) {
    bool sent = false;
    std::string why;
    const Code credit = return_credit(h, row, &sent, &why);
    if (credit == Code::kPending) flushed = false;
    else if (credit != Code::kOk) return true;  // the peer is gone: nobody waits for it
  }
  return flushed;
}

// Returns row's newest head (what the daemon wrote into the shadow) to the sender, with at most one credit message
// of the row in flight. kOk: none in flight; kPending: one is (*sent: it went now); else the failure, its message in
// *why.
Code Proxy::return_credit(Hop& h, size_t row, bool* sent, std::string* why) {
  Hop::Row& r = h.rows[row];
  const auto [ch, lane] = h.ch_lane(row);
  if (r.credit_pending) {
    const Completion c = t_->test(r.credit_req);
    if (c.code == Code::kPending) return Code::kPending;
    r.credit_pending = false;
    if (c.code != Code::kOk) {
      *why = c.message;
      return c.code;
    }
  }
  const uint64_t consumed = load(&core::region_ctrl(h.s.shadow, h.geo, ch, lane)->head);
  if (consumed <= r.c) return Code::kOk;
  r.credit_buf = r.c = consumed;
  auto s = t_->isend(h.peer, tags::make(h.s.their_id, ch, lane, 0), &r.credit_buf, sizeof(uint64_t));
  if (!s.ok()) {
    *why = s.status.message;
    return s.status.code;
  }
  r.credit_req = s.value;
  r.credit_pending = true;
  *sent = true;
  return Code::kPending;
}

// A detaching hop: cancels its receives and reaps its requests (a reaped request tests kInvalid); true once none is
// pending.
bool Proxy::reap(Hop& h) {
  bool left = false;
  auto settle = [&](Req q, bool receive) {
    if (receive) t_->cancel(q);
    if (t_->test(q).code == Code::kPending) left = true;
  };
  for (size_t row : h.mine) {
    const Hop::Row& r = h.rows[row];
    for (uint64_t p = r.b; p < r.a; ++p) settle(h.slot(row, p), !h.s.send);
    if (r.credit_pending) settle(r.credit_req, false);
  }
  for (size_t k = 0; k < Inbox::kSize; ++k)
    if (h.credits.posted[k]) settle(h.credits.req[k], true);
  return !left;
}

bool Proxy::step(Hop& h) {
  if (h.failed && !h.detaching) return false;
  if (h.peer == Peer{}) {
    fail(h, "could not connect");
    return false;
  }
  return h.s.send ? step_send(h) : step_recv(h);
}

void Proxy::loop() {
  Idler idler(spin_);
  while (!stop_) {
    if (has_cmds_) run_commands();
    bool moved = t_->progress() > 0;
    moved = take_byes() || moved;
    moved = take_aborts() || moved;
    moved = reap_notices() || moved;
    handle_peer_failures();
    moved = heartbeats() || moved;
    moved = board_link_->step(*t_, [this](const BoardDest& d) { return board_peer(d); }) || moved;
    for (auto it = hops_.begin(); it != hops_.end();) {
      Hop& h = **it;
      if (h.detaching) {
        t_->progress();
        if (!flush_credits(h) || !reap(h)) {
          ++it;
          continue;
        }
        std::lock_guard<std::mutex> lk(done_mu_);
        if (--live_hops_[h.key] == 0) live_hops_.erase(h.key);
        done_cv_.notify_all();
        it = hops_.erase(it);
        continue;
      }
      moved = step(h) || moved;
      ++it;
    }
    idler.after_turn(moved);
  }
}

}  // namespace dfccl::net
