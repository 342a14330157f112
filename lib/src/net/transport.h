// The network transport: non-blocking tagged messages between processes, possibly on other hosts, modelled on
// NCCL's net plugin API (ncclNet_t) and implemented on UCX's tag matching (transport_ucx.cpp). docs/net-transport.md
// states the contract; the summary:
//  - One Transport per engine. It owns one network context and one worker and is driven by one thread at a time
//    (the future net proxy): no call is thread-safe, none blocks except close() and the destructor, which are
//    bounded by a deadline. Nothing here throws or aborts on a peer's failure: every outcome is a Status.
//  - address() is this transport's worker address, to publish through a bootstrap; connect() to another
//    transport's address gives a Peer to send to. Receives are not bound to a peer: a receive matches the first
//    message whose tag agrees with (tag, mask) from any peer, in the order the sender sent them.
//  - isend/irecv return a Req at once; test() reports pending, done (with the received size and the sender's tag)
//    or an error, and forgets the Req once it has reported a final outcome. Buffers must stay valid until then.
//    Nothing moves unless progress() is called.
//  - A failed peer (its process died, its connection broke) is reported by take_peer_failures() and fails its
//    pending and later sends with Code::kPeerFailed; the message names the peer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dfccl::net {

using Tag = std::uint64_t;

// The outcome of a call or a request. kOk is success; kPending only comes from test().
enum class Code {
  kOk,
  kPending,
  kCancelled,    // cancel(), close() or the transport's destruction ended the request
  kPeerFailed,   // the peer's process died or its connection broke
  kTruncated,    // the matched message was larger than the receive buffer
  kTimeout,      // close() did not finish within its deadline
  kInvalid,      // a bad argument: unknown or closed handle, null buffer with a size
  kUnsupported,  // built without UCX, or an operation the transport cannot do
  kError,        // any other failure of the network library (the message says which)
};
const char* code_name(Code code);

struct Status {
  Code code = Code::kOk;
  std::string message;  // empty for kOk and kPending
  bool ok() const { return code == Code::kOk; }
};

// A value or the Status that says why there is none.
template <class T>
struct Result {
  T value{};
  Status status;
  bool ok() const { return status.ok(); }
};

// Handles: small values, meaningful only to the transport that issued them. A handle that was closed (Peer) or has
// reported its final outcome (Req) is invalid afterwards; using it gives kInvalid, never undefined behaviour.
struct Peer {
  std::uint32_t index = ~0u;
  friend bool operator==(Peer, Peer) = default;
};
struct Req {
  std::uint32_t index = ~0u;
  std::uint32_t generation = 0;
  friend bool operator==(Req, Req) = default;
};

// What test() found. `bytes` and `tag` are the matched message's size and full tag (receives), or the size sent
// (sends), and are meaningful only for kOk.
struct Completion {
  Code code = Code::kPending;
  std::size_t bytes = 0;
  Tag tag = 0;
  std::string message;
};

struct PeerFailure {
  Peer peer;
  std::string name;
  std::string message;
};

enum class CloseMode {
  kFlush,  // complete what was sent first (bounded by the deadline, then kForce)
  kForce,  // drop the connection now: its pending sends end with kCancelled
};

class Transport {
 public:
  virtual ~Transport() = default;
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // The bytes another transport passes to connect(). Stable for this transport's life.
  virtual const std::vector<std::byte>& address() const = 0;
  // Starts a connection to the transport whose address() is `address` and returns at once (the connection is
  // established by progress() as needed). `name` labels the peer in messages ("rank 3 on host a").
  virtual Result<Peer> connect(const std::vector<std::byte>& address, std::string_view name) = 0;

  virtual Result<Req> isend(Peer peer, Tag tag, const void* data, std::size_t bytes) = 0;
  // Matches a message whose tag t has (t & mask) == (tag & mask); mask ~0 matches exactly.
  virtual Result<Req> irecv(Tag tag, Tag mask, void* data, std::size_t bytes) = 0;
  // Does not progress. After a final outcome (anything but kPending) the Req is released.
  virtual Completion test(Req req) = 0;
  // Receives only: ends a pending receive, whose test() then reports kCancelled, or kOk if it matched first.
  virtual Status cancel(Req req) = 0;
  // Runs the network library's progress engine a bounded number of rounds; returns how many events it handled.
  virtual unsigned progress() = 0;

  // Ends the connection to `peer` (the handle is invalid afterwards) within `timeout`: a flush that does not finish
  // in time is forced; kTimeout if even the forced close is unconfirmed at the deadline (its resources are then
  // reclaimed by later progress() or by the destructor). Pending sends to the peer end with kCancelled.
  virtual Status close(Peer peer, CloseMode mode, std::chrono::milliseconds timeout) = 0;
  // The peers found failed since the last call (each reported once). A failed peer still needs close().
  virtual std::vector<PeerFailure> take_peer_failures() = 0;
  // The peer's name, for messages ("" for an unknown handle).
  virtual std::string peer_name(Peer peer) const = 0;
};

// Options of make_transport(). `ucx_config` overrides UCX settings by name without the UCX_ prefix (e.g. {"TLS",
// "tcp,self"}); a setting given here beats the environment.
struct Options {
  std::vector<std::pair<std::string, std::string>> ucx_config;
};

// True when the library was built with UCX (DFCCL_HAVE_UCX); otherwise make_transport() returns kUnsupported.
bool transport_available();
// The network library and its version ("UCX 1.13.1"), or why there is none.
std::string transport_description();
Result<std::unique_ptr<Transport>> make_transport(const Options& options = {});

// The tag layout DFCCL's proxy uses (the transport itself carries any 64-bit tag):
//   bits 63..40 hop id (24), 39..32 channel (8), 31..24 lane (8), 23..0 position (24).
// A hop id names one direction of one connection at the receiving engine (net/proxy.h). Hop id kControlHop is
// reserved for control messages (heartbeats, bootstrap rounds); there the channel field names the message kind.
namespace tags {
inline constexpr unsigned kHopShift = 40, kChannelShift = 32, kLaneShift = 24;
inline constexpr std::uint32_t kControlHop = 0xffffff;
inline constexpr Tag kHopMask = Tag{0xffffff} << kHopShift;
inline constexpr Tag kChannelMask = Tag{0xff} << kChannelShift;
inline constexpr Tag kLaneMask = Tag{0xff} << kLaneShift;
inline constexpr Tag kPositionMask = 0xffffffu;
inline constexpr Tag kExact = ~Tag{0};

constexpr Tag make(std::uint32_t hop, std::uint32_t channel, std::uint32_t lane, std::uint32_t position) {
  return (Tag{hop & 0xffffffu} << kHopShift) | (Tag{channel & 0xffu} << kChannelShift) |
         (Tag{lane & 0xffu} << kLaneShift) | (position & kPositionMask);
}
constexpr std::uint32_t hop(Tag t) { return static_cast<std::uint32_t>(t >> kHopShift) & 0xffffffu; }
constexpr std::uint32_t channel(Tag t) { return static_cast<std::uint32_t>(t >> kChannelShift) & 0xffu; }
constexpr std::uint32_t lane(Tag t) { return static_cast<std::uint32_t>(t >> kLaneShift) & 0xffu; }
constexpr std::uint32_t position(Tag t) { return static_cast<std::uint32_t>(t & kPositionMask); }
}  // namespace tags

}  // namespace dfccl::net
