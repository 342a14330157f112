// The proxy's data path: the send and receive sides of a hop, their credits, and the reaping of finished requests
// (contract at the top of proxy.h).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/region.h"
#include "net/proxy.h"
#include "net/proxy_wire.h"

namespace dfccl::net {

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

}  // namespace dfccl::net
