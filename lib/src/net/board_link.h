// The match board's messages between hosts (match_board.h, "Across hosts"; the encoding is board_mirror.cpp's),
// carried by a network proxy (proxy.h) as control messages of kind kBoardKind: tag (kControlHop, kBoardKind, 0, 0),
// at most kMaxBytes bytes: an 8-byte header naming the receiving board (an id unique in the receiving engine, never
// reused) and an opaque payload.
//  - Application threads only queue: send() copies the message into a bounded queue under a short-held lock and
//    returns; a full queue (kMaxQueued messages waiting or in flight) drops the message and says so (the caller logs
//    it). add() and remove() register a board under that lock too; after remove() returns the proxy's thread no
//    longer touches that board's sink.
//  - The proxy's thread (step()) sends what is queued, reaps what was sent, keeps kReceives receives posted and
//    hands each message for a registered board to its sink (under the lock; the sink writes shared memory only);
//    a sink's answer (a mismatch it found) goes to the destinations that the sink names at that moment. Messages
//    for boards that are not (or no longer) registered are dropped. It makes no CUDA call and blocks on nothing.
//  - A message that cannot be sent (its peer failed) is dropped: the proxy's hops report the peer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/transport.h"

namespace dfccl::net {

inline constexpr uint32_t kBoardKind = 4;  // control hop kinds: 1 bye, 2 heartbeat, 3 abort notice (proxy.cpp)
inline constexpr Tag kBoardTag = tags::make(tags::kControlHop, kBoardKind, 0, 0);

// Where a board's messages go: the first proxy of one rank on another host, and that rank's board id.
struct BoardDest {
  std::vector<std::byte> address;  // the proxy's transport address
  uint64_t engine = 0;             // its engine_id()
  uint32_t board = 0;              // the receiving board's id
  std::string name;                // "rank 2 of 4", for the transport's messages
};

// What a registered board does with a message for it (the proxy's thread, under the link's lock): "" or a text to
// send to every destination of the board (a mismatch that it found).
class BoardSink {
 public:
  virtual ~BoardSink() = default;
  virtual std::string deliver(const std::byte* payload, size_t bytes) = 0;
  // The message that carries `text` to another board (the answer's encoding).
  virtual std::vector<std::byte> encode_text(const std::string& text) const = 0;
  // Where an answer goes now (under the link's lock: reads memory only, takes no lock).
  virtual std::vector<BoardDest> destinations() const = 0;
};

class BoardLink {
 public:
  static constexpr size_t kMaxBytes = 640;                // header included
  static constexpr size_t kMaxQueued = 8192;              // messages queued or in flight
  static constexpr size_t kReceives = 16;                 // receives kept posted
  using Connect = std::function<Peer(const BoardDest&)>;  // the proxy's connection to a destination (Peer{}: none)

  // Application threads.
  void add(uint32_t board, std::shared_ptr<BoardSink> sink);
  void remove(uint32_t board);
  // Queues payload (at most kMaxBytes - 8 bytes) for dest; false when the queue was full or it was too long.
  bool send(const BoardDest& dest, const std::vector<std::byte>& payload);

  // The proxy's thread: one turn; true when something moved. The link must outlive the transport (its receives and
  // sends use the link's buffers until the transport ends them).
  bool step(Transport& t, const Connect& connect);

 private:
  struct Out {
    BoardDest dest;
    std::vector<std::byte> bytes;
    Req req;
    bool sent = false;
  };
  bool send_queued(Transport& t, const Connect& connect);
  bool take_received(Transport& t);
  void answer(const BoardSink& sink, const std::string& text);  // under mu_

  std::mutex mu_;  // held briefly by application threads and the proxy's thread; never across a CUDA call
  std::map<uint32_t, std::shared_ptr<BoardSink>> boards_;
  std::list<Out> queue_;        // queued by send() or an answer, not taken by the thread yet
  size_t in_flight_count_ = 0;  // in_flight_.size(), for send()'s bound
  // The proxy's thread only.
  std::list<Out> in_flight_;
  std::array<std::array<std::byte, kMaxBytes>, kReceives> in_{};
  std::array<Req, kReceives> req_{};
  std::array<bool, kReceives> posted_{};
};

}  // namespace dfccl::net
