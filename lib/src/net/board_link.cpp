#include "net/board_link.h"

#include <cstring>

namespace dfccl::net {

namespace {

// The 8 bytes in front of every message: the receiving board's id.
struct Header {
  uint32_t board;
  uint32_t bytes;  // the payload's
};
static_assert(sizeof(Header) == 8);

std::vector<std::byte> frame(uint32_t board, const std::vector<std::byte>& payload) {
  std::vector<std::byte> out(sizeof(Header) + payload.size());
  const Header h{board, uint32_t(payload.size())};
  std::memcpy(out.data(), &h, sizeof(h));
  if (!payload.empty()) std::memcpy(out.data() + sizeof(h), payload.data(), payload.size());
  return out;
}

}  // namespace

void BoardLink::add(uint32_t board, std::shared_ptr<BoardSink> sink) {
  std::lock_guard<std::mutex> lk(mu_);
  boards_[board] = std::move(sink);
}

void BoardLink::remove(uint32_t board) {
  std::shared_ptr<BoardSink> gone;  // released after the lock
  std::lock_guard<std::mutex> lk(mu_);
  auto it = boards_.find(board);
  if (it == boards_.end()) return;
  gone = std::move(it->second);
  boards_.erase(it);
}

bool BoardLink::send(const BoardDest& dest, const std::vector<std::byte>& payload) {
  if (payload.size() + sizeof(Header) > kMaxBytes) return false;
  Out o;
  o.dest = dest;
  o.bytes = frame(dest.board, payload);
  std::lock_guard<std::mutex> lk(mu_);
  if (queue_.size() + in_flight_count_ >= kMaxQueued) return false;
  queue_.push_back(std::move(o));
  return true;
}

void BoardLink::answer(const BoardSink& sink, const std::string& text) {
  const std::vector<std::byte> payload = sink.encode_text(text);
  for (const BoardDest& d : sink.destinations()) {
    if (queue_.size() + in_flight_count_ >= kMaxQueued) return;
    Out o;
    o.dest = d;
    o.bytes = frame(d.board, payload);
    queue_.push_back(std::move(o));
  }
}

// Sends what was queued and reaps the sends that ended (whatever their outcome); true when something moved.
bool BoardLink::send_queued(Transport& t, const Connect& connect) {
  std::list<Out> fresh;
  {
    std::lock_guard<std::mutex> lk(mu_);
    fresh.splice(fresh.end(), queue_);
    in_flight_count_ += fresh.size();
  }
  bool moved = !fresh.empty();
  for (Out& o : fresh) {
    const Peer p = connect(o.dest);
    if (p == Peer{}) continue;
    auto r = t.isend(p, kBoardTag, o.bytes.data(), o.bytes.size());
    o.sent = r.ok();
    if (r.ok()) o.req = r.value;
  }
  in_flight_.splice(in_flight_.end(), fresh);
  const size_t ended =
      std::erase_if(in_flight_, [&](const Out& o) { return !o.sent || t.test(o.req).code != Code::kPending; });
  if (ended) {
    std::lock_guard<std::mutex> lk(mu_);
    in_flight_count_ -= ended;
  }
  return moved || ended > 0;
}

// Hands the messages that arrived to their boards and posts the free receives again; true when one came.
bool BoardLink::take_received(Transport& t) {
  bool came = false;
  for (size_t k = 0; k < kReceives; ++k) {
    if (posted_[k]) {
      const Completion c = t.test(req_[k]);
      if (c.code == Code::kPending) continue;
      posted_[k] = false;
      came = true;
      Header h{};
      if (c.code == Code::kOk && c.bytes >= sizeof(h)) {
        std::memcpy(&h, in_[k].data(), sizeof(h));
        std::lock_guard<std::mutex> lk(mu_);
        auto it = boards_.find(h.board);
        if (it != boards_.end() && h.bytes == c.bytes - sizeof(h)) {
          const std::string text = it->second->deliver(in_[k].data() + sizeof(h), h.bytes);
          if (!text.empty()) answer(*it->second, text);
        }
      }
    }
    auto r = t.irecv(kBoardTag, tags::kExact, in_[k].data(), kMaxBytes);
    if (!r.ok()) return came;
    req_[k] = r.value;
    posted_[k] = true;
  }
  return came;
}

bool BoardLink::step(Transport& t, const Connect& connect) {
  const bool came = take_received(t);
  return send_queued(t, connect) || came;
}

}  // namespace dfccl::net
