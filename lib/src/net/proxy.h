// A net proxy: a thread with its own transport (transport.h) that carries connections to ranks on other hosts (or
// every connection, with DFCCL_NET_FORCE=1). An engine runs DFCCL_NET_THREADS of them, and each communicator splits
// its channels among them (links.h). docs/net-transport.md, "The proxy", has the whole picture; the contract:
//  - The daemon is unchanged. A connection to a remote rank is two regions of the usual layout (core/region.h) on
//    this host: the rank's own (`self`) and a `shadow` standing for the peer's. The daemon writes slots, size words
//    and tails into the shadow and heads (credits) into it as it would into a mapped peer region; it reads tails and
//    heads in `self` as always.
//  - A send hop forwards each slot that the shadow's tail publishes (the size word says how many bytes, and whether
//    they are LL lines, whose flags it checks first) as one message tagged (their hop id, channel, lane, position),
//    and stores in `self` the heads that the peer's credit messages bring, once its own send of those slots is done.
//  - A receive hop posts, for every free slot, a receive into `self` (an LL message lands in the Simple slot and is
//    copied into the LL slot line by line with 8-byte atomic stores), publishes the tail in order, and sends the
//    heads the daemon writes into the shadow back to the sender as credit messages.
//  - The thread polls only memory and the transport: it makes no CUDA call and takes no lock that an application
//    thread holds across one. Commands from other threads (attach, detach) go through a short-held queue lock.
//  - A failure (a peer's process died, a send failed) marks that peer's hops failed; failure() reports it, naming the
//    rank, and the communicator's peer watch turns it into dfcclRemoteError (comm_init.cpp). So does a peer proxy not
//    heard from for DFCCL_NET_TIMEOUT_MS: every proxy sends each connected peer a heartbeat every
//    DFCCL_NET_HEARTBEAT_MS, whatever the collectives do (a stopped process or a cut link sends none; a late rank
//    still does). Any message of the peer (heartbeat, data, credit) counts as hearing it, and silence counts only
//    while this proxy could listen: after a turn that came more than half the timeout after the previous one (this
//    thread or process was descheduled or stopped), from that turn on. A proxy that stops (its engine goes) first tells
//    every peer it leaves; the broken connections to it are then no failure: what made a rank's engine go is that
//    rank's to report (its abort, or the failure that ended its communicators).
//  - A communicator that its application aborts tells the peer of each of its hops (tell); the peer's proxy records it
//    for that peer's communicator (notice), whose peer watch reports "aborted the communicator". A communicator that a
//    peer's failure broke tells them the same way which rank broke it and how, so that ranks with no connection to
//    that rank fail too and a rank that sees this one go blames that rank; a peer given up for its silence alone is
//    told too (it may run again: it then learns that it is the one its peers gave up).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/region.h"
#include "net/board_link.h"
#include "net/transport.h"
#include "settings/settings.h"

namespace dfccl::net {

// One direction of one connection between this rank and a rank reached through the network.
struct HopSpec {
  bool send = false;       // true: this rank sends through `shadow`; false: it receives into `self`
  char* self = nullptr;    // send: heads land here; receive: slots, LL lines and tails land here
  char* shadow = nullptr;  // send: the daemon's slots, size words and tails; receive: the daemon's heads
  uint32_t nchan = 0, nlanes = 0, nslots = 0, slot_bytes = 0;  // the connection's geometry (core::CommStatic)
  uint32_t chan_first = 0, chan_step = 1;  // the channels this proxy carries: chan_first + k * chan_step (< nchan)
  uint32_t my_id = 0;                      // messages for this hop carry it (receive: data; send: credits)
  uint32_t their_id = 0;                   // the peer's hop of this connection
  int peer_rank = -1;
  std::string peer_name;  // "rank 3 (host b)", for messages
  std::vector<std::byte> peer_address;
  uint64_t peer_engine = 0;  // the peer proxy's engine_id()
};

class Proxy {
 public:
  // Creates the transport and starts the thread; kUnsupported without UCX. The thread polls without pause while
  // anything moved within the last settings.spin_ns (DFCCL_NET_SPIN_NS, the engine's executor's value), then sleeps
  // between turns; it beats every heartbeat_ms and gives a peer up after timeout_ms of silence (0: never). The caller
  // (the engine) runs settings.threads of them.
  static Result<std::shared_ptr<Proxy>> create(const EngineSettings::Net& settings, const Options& options = {});
  ~Proxy();  // stops the thread; the transport's destruction ends every request (bounded)
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // This engine's transport address and a random id of this proxy, for the peers' hops. Stable.
  const std::vector<std::byte>& address() const { return address_; }
  uint64_t engine_id() const { return engine_id_; }
  // A hop id never used before by this engine (messages for a detached hop can still arrive). Thread-safe.
  uint32_t new_hop_id();
  // Hands the hops of one communicator to the thread and returns their key; the regions must stay until detach()
  // returned true.
  uint64_t attach(std::vector<HopSpec> hops);
  // Stops the hops of `key`: cancels their receives and ends their requests (begin_detach queues that; the thread
  // does it). wait_detached: true when none is left by `deadline` (their memory may go); false: keep it (the proxy
  // still uses it until it is destroyed).
  void begin_detach(uint64_t key);
  bool wait_detached(uint64_t key, std::chrono::steady_clock::time_point deadline);
  // "" or why the hops of `key` failed, with *rank the peer it names.
  std::string failure(uint64_t key, int* rank) const;
  // Caller: the abort of the communicator whose hops are `key`, before it detaches them (origin -1), or its failure
  // caused by rank `origin` (how: `cause`, a Bootstrap::Cause the proxy carries as a number). Queues, for the peer
  // of each hop, a notice that this rank aborted the communicator, or that `origin` broke it (sent by the thread; it
  // does not wait).
  void tell(uint64_t key, int origin, uint32_t cause = 0);
  // The notices that came to the hops of `key`, the first of each peer in arrival order: the peer that sent it, its
  // origin (-1: the peer aborted) and cause.
  struct Notice {
    int from = -1, origin = -1;
    uint32_t cause = 0;
  };
  std::vector<Notice> notices(uint64_t key) const;
  // The match board's messages to and from other hosts that this proxy carries (board_link.h).
  BoardLink& board_link() { return *board_link_; }
  // How many times this thread has stored a tail (data arrived) or a head (credits arrived) for the daemon: the
  // engine relaunches a daemon that left stuck as soon as this moves (Engine::relaunch_due_locked). Any thread.
  uint64_t deliveries() const { return deliveries_.load(std::memory_order_relaxed); }

 private:
  struct PeerInfo;
  // A few receives of 8-byte messages (credits, heartbeats, goodbyes) kept posted for one (tag, mask).
  struct Inbox {
    static constexpr size_t kSize = 8;
    std::array<uint64_t, kSize> value{};
    std::array<Req, kSize> req{};
    std::array<bool, kSize> posted{};
  };
  // One hop and its per-(channel, lane) rows. Send rows: positions [done, forwarded) are in flight; the head stored
  // in self is min(credit, done). Receive rows: positions [tail, posted) have receives posted; credited is the last
  // head sent back.
  struct Hop {
    HopSpec s;
    core::CommStatic geo{};
    uint64_t key = 0;
    Peer peer;
    bool failed = false, detaching = false;
    bool silent = false;  // failed by silence alone (judge): its connection may still carry a notice to the peer
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
  // Calls take(completion, value) for each message of `in` that arrived (or receive that ended otherwise), then posts
  // the free receives again unless `repost` is false; stops early when take returns false. Returns whether any ended,
  // and sets *error when a receive could not be posted.
  template <class Take>
  bool take_inbox(Inbox& in, Tag tag, Tag mask, bool repost, Take take, Status* error = nullptr);
  Proxy(std::unique_ptr<Transport> transport, const EngineSettings::Net& settings);
  void loop();
  void run_commands();
  bool step(Hop& h);
  bool step_send(Hop& h);
  bool forward(Hop& h, size_t row);
  bool step_recv(Hop& h);
  bool take_credits(Hop& h);
  bool flush_credits(Hop& h);
  Code return_credit(Hop& h, size_t row, bool* sent, std::string* why);
  bool reap(Hop& h);
  void fail(Hop& h, const std::string& why);
  Peer peer_for(const HopSpec& s);
  void handle_peer_failures();
  bool take_byes();
  bool heartbeats();
  bool send_beat(PeerInfo& p, std::chrono::steady_clock::time_point now);
  void judge(PeerInfo& p, std::chrono::steady_clock::time_point now);
  bool take_beats();
  bool take_aborts();
  bool reap_notices();
  void say_bye();
  void drain();
  Peer board_peer(const BoardDest& d);

  std::unique_ptr<Transport> t_;
  std::vector<std::byte> address_;
  uint64_t engine_id_ = 0;
  std::atomic<uint32_t> next_id_{1};
  std::atomic<uint64_t> next_key_{1};

  std::mutex cmd_mu_;  // held only to queue or take commands
  std::vector<std::function<void()>> cmds_;
  std::atomic<bool> has_cmds_{false};

  mutable std::mutex done_mu_;  // detach's waiters and the failures, written by the thread
  std::condition_variable done_cv_;
  std::map<uint64_t, int> live_hops_;  // key -> hops the thread still holds
  std::map<uint64_t, std::pair<int, std::string>> failures_;
  std::map<uint64_t, std::vector<Notice>> notices_in_;  // key -> the first notice of each peer, in arrival order

  // The thread's own state.
  std::vector<std::unique_ptr<Hop>> hops_;
  // A connected peer proxy: its heartbeats (DFCCL_NET_HEARTBEAT_MS) and when a message of its (heartbeat, data or
  // credit: see also Hop::heard) last came.
  struct PeerInfo {
    Peer peer;
    uint64_t engine = 0;
    std::chrono::steady_clock::time_point heard, beat_sent;
    Req beat;
    bool beat_pending = false, silent = false;
  };
  std::map<std::vector<std::byte>, PeerInfo> peers_;
  std::chrono::milliseconds beat_period_{100}, silence_{20000};  // DFCCL_NET_HEARTBEAT_MS, DFCCL_NET_TIMEOUT_MS
  std::chrono::nanoseconds spin_{0};                             // DFCCL_NET_SPIN_NS
  Inbox beats_;                                                  // heartbeats received: the sender's engine id
  std::vector<uint64_t> departed_;                               // engine ids of proxies that said they stop
  Inbox byes_;                                                   // their messages
  Inbox aborts_;                                                 // abort notices: the id of the receiving hop
  // When heartbeats() last ran, and the turn after the last stall (a gap over silence_ / 2) with that gap's length:
  // silence is counted from max(heard, resumed_).
  std::chrono::steady_clock::time_point last_turn_{}, resumed_{};
  std::chrono::milliseconds stall_{0};
  // Notices in flight: the message (the peer's hop id, and origin + 1 above it) stays here until its send ends.
  struct Outgoing {
    uint64_t word = 0;
    Req req;
  };
  std::list<Outgoing> notices_;
  // Destroyed after the transport (its requests use the link's buffers).
  std::unique_ptr<BoardLink> board_link_ = std::make_unique<BoardLink>();
  std::atomic<uint64_t> deliveries_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Defined in the header (contract at the declaration): proxy.cpp and proxy_data.cpp both take inboxes.
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

}  // namespace dfccl::net
