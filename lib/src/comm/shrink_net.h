// The survivors' agreement on the ranks that a shrink excludes, across hosts and with no process hosting it (DESIGN
// invariant 10; docs/design.md, "Shrink", states the protocol and why it is safe). Every rank of a communicator
// whose connections use the network listens on a TCP socket of its own from init on (ShrinkListener); the ranks
// know each other's addresses. A shrink's agreement runs between these sockets:
//   - each rank keeps an exclusion set U, which only grows: its proposal, every set it hears of, and every rank it
//     finds dead (a refused or dropped connection to its socket, or `gone`);
//   - its coordinator is the lowest rank outside U. A rank that is its own coordinator collects reports; any other
//     rank reports U to its coordinator, sends it again whenever U grows, and leaves it only on an answer (a
//     redirect carrying the coordinator's U) or when the connection drops (the coordinator is then added to U);
//   - a coordinator that finds itself in U redirects its reporters; one that has a report from every rank outside
//     U decides U, makes the new communicator's unique id (its process hosts that id's rendezvous) and sends both to
//     every connection it has. The first decision a rank receives, from anywhere, is its outcome.
//   - every message carries a MAC keyed by the communicator's unique id (a connection that sends one without it is
//     dropped), and a decision's id has its secret hidden, so that the secret never crosses the network in clear.
// Every wait is bounded by the caller's timeout: dfcclTimeout names the live ranks that never reported.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dfccl.h"

namespace dfccl {

// Where a rank's shrink socket listens (allgathered at init; plain bytes).
struct ShrinkEndpoint {
  uint16_t family = 0;  // AF_INET or AF_INET6; 0: the rank has none
  uint16_t port = 0;    // host byte order
  uint32_t scope = 0;   // IPv6 scope id
  uint8_t addr[16] = {};
  std::string to_string() const;
};

// A rank's listening socket and every rank's endpoint. Kept by the communicator from init to its destroy (a failure
// does not close it: the shrink runs after one).
class ShrinkListener {
 public:
  // Listens on the interface that DFCCL_SOCKET_IFNAME picks (bootstrap/rendezvous.h, pick_interface), port 0;
  // `ifname_spec` overrides it. dfcclSystemError if the socket cannot be made.
  explicit ShrinkListener(const std::string& ifname_spec);
  ~ShrinkListener();
  ShrinkListener(const ShrinkListener&) = delete;
  ShrinkListener& operator=(const ShrinkListener&) = delete;
  int fd() const { return fd_; }
  const ShrinkEndpoint& endpoint() const { return mine_; }
  std::vector<ShrinkEndpoint> endpoints;  // [rank], set by the caller after the allgather
  // The key of the shrink messages' MAC: the communicator's unique id's token and secret (net::wire::auth_key), set
  // by the caller at init. Every message carries a MAC under it, and a decision the new id with its secret hidden.
  std::string key;

 private:
  int fd_ = -1;
  ShrinkEndpoint mine_;
};

// Caller: comm_init, for a communicator whose connections use the network. The listener on DFCCL_SOCKET_IFNAME's
// interface, its key that of `id` (the unique id the communicator is made from: its token, and its secret where it
// carries a rendezvous).
std::shared_ptr<ShrinkListener> make_shrink_listener(const dfcclUniqueId& id);

// One rank's outcome of the agreement.
struct ShrinkDecision {
  std::vector<uint8_t> excluded;  // [rank] = 1: excluded
  dfcclUniqueId id{};             // the new communicator's
  int coordinator = -1;           // the rank that decided
  // While the new communicator is made: a participant's connection to the coordinator (its drop means the
  // coordinator, and the id's rendezvous, went), or -1; the coordinator's connections to its reporters.
  int link = -1;
  std::vector<std::pair<int, int>> reporters;  // (rank, connection), the ranks the decision keeps
  void close_links();
};

class ShrinkNetAgreement {
 public:
  struct Hooks {
    std::function<bool(int rank)> gone;      // sound (never a live rank); may be empty
    std::function<dfcclUniqueId()> make_id;  // the coordinator's: the new communicator's id
    std::function<bool()> crash;             // tests: true stops the caller as if it died (throws dfcclSystemError)
  };
  // shrink: the communicator's count of earlier shrinks (the same on every survivor), which the messages' MAC binds.
  ShrinkNetAgreement(const ShrinkListener& listener, uint32_t shrink, int rank, int nranks);
  // The agreed set, starting from `proposal` (nranks flags; the caller's own rank not in it). Throws dfcclTimeout
  // after timeout_ms, naming the live ranks outside U that did not report.
  ShrinkDecision agree(const std::vector<uint8_t>& proposal, const Hooks& hooks, int timeout_ms);

 private:
  struct Session;
  const ShrinkListener& listener_;
  uint32_t shrink_;
  int rank_, nranks_;
};

}  // namespace dfccl
