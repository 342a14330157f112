#include "net/proxy.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <random>

#include "core/region.h"
#include "net/proxy_wire.h"
#include "util/thread_name.h"

namespace dfccl::net {

namespace {

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
}  // namespace

Result<std::shared_ptr<Proxy>> Proxy::create(const EngineSettings::Net& settings, const Options& options) {
  auto t = make_transport(options);
  if (!t.ok()) return {nullptr, t.status};
  return {std::shared_ptr<Proxy>(new Proxy(std::move(t.value), settings)), {}};
}

Proxy::Proxy(std::unique_ptr<Transport> transport, const EngineSettings::Net& settings)
    : t_(std::move(transport)), address_(t_->address()) {
  spin_ = std::chrono::nanoseconds(settings.spin_ns);
  std::random_device rd;
  engine_id_ = (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  beat_period_ = std::chrono::milliseconds(settings.heartbeat_ms);
  silence_ = std::chrono::milliseconds(settings.timeout_ms);
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

void Proxy::tell(uint64_t key, int origin, uint32_t cause) {
  std::lock_guard<std::mutex> lk(cmd_mu_);
  cmds_.push_back([this, key, origin, cause] {
    for (auto& h : hops_) {
      // A peer given up for its silence may be alive (stopped, cut off): it is told too, so that it learns, once it
      // runs again, that its peers gave it up (its own failure, not theirs).
      if (h->key != key || (h->failed && !h->silent) || h->peer == Peer{}) continue;
      Outgoing& n = notices_.emplace_back();
      n.word =
          uint64_t(h->s.their_id) | uint64_t(uint32_t(origin + 1) & 0xffffffu) << 32 | uint64_t(cause & 0xff) << 56;
      auto r = t_->isend(h->peer, kAbortTag, &n.word, sizeof(n.word));
      if (r.ok()) n.req = r.value;
      else notices_.pop_back();
    }
  });
  has_cmds_ = true;
}

std::vector<Proxy::Notice> Proxy::notices(uint64_t key) const {
  std::lock_guard<std::mutex> lk(done_mu_);
  auto it = notices_in_.find(key);
  return it == notices_in_.end() ? std::vector<Notice>{} : it->second;
}

// The peers' notices: each names the hop (of this engine) whose communicator its sender aborted, or that the origin
// rank it carries broke (word: the hop id, origin + 1 in bits 32..55, the cause in bits 56..63).
bool Proxy::take_aborts() {
  return take_inbox(aborts_, kAbortTag, tags::kExact, true, [&](const Completion& c, uint64_t word) {
    if (c.code != Code::kOk) return true;
    const uint32_t hop = uint32_t(word);
    const int origin = int(uint32_t(word >> 32) & 0xffffffu) - 1;
    const uint32_t cause = uint32_t(word >> 56);
    for (auto& h : hops_)
      if (h->s.my_id == hop && !h->detaching) {
        std::lock_guard<std::mutex> lk(done_mu_);
        std::vector<Notice>& got = notices_in_[h->key];
        if (std::none_of(got.begin(), got.end(), [&](const Notice& n) { return n.from == h->s.peer_rank; }))
          got.push_back(Notice{h->s.peer_rank, origin, cause});
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
    if (h->peer == p.peer && !h->failed) {
      h->silent = true;
      fail(*h, why);
    }
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
