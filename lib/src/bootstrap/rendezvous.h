// The rendezvous of a communicator's ranks across hosts over TCP: the network replacement for the shared-memory
// segment's rounds (bootstrap.h). docs/net-transport.md, "Rendezvous across hosts", states the protocol. In short:
//  - RendezvousRoot is the root service, started by the process that creates the unique id. It listens on one
//    address (DFCCL_SOCKET_IFNAME, else the first non-loopback IPv4 interface, else loopback; port 0) and answers
//    from one service thread until every rank of its group has left or its owner destroys it. A connection that has
//    not registered within kHelloMs is closed, at most kMaxUnregistered are kept (the oldest goes first), and the
//    service stops listening once its group has registered.
//  - RendezvousId is what a unique id carries to reach it (magic, token, IPv4/IPv6 address, port), encoded at
//    kRendezvousIdOffset of dfcclUniqueId, after today's UniqueIdData.
//  - Rendezvous is one rank's client: it registers (rank, nranks, host id, with a keyed hash of the root's challenge
//    that proves it knows the id's token and secret without sending them), then runs allgather and barrier
//    rounds. Every call is bounded by a timeout; failures are dfccl::Error: dfcclTimeout naming the ranks that never
//    arrived, dfcclInvalidUsage for a duplicate rank or an nranks disagreement, dfcclRemoteError naming a rank whose
//    connection dropped (or the root's), dfcclInvalidArgument for a malformed id or argument.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/unique_id.h"

namespace dfccl::net {

// Where a root service listens: the address a unique id carries.
struct RendezvousId {
  uint64_t token = 0;             // names the group; a client with another token is refused
  uint8_t secret[16] = {};        // random, with the token the key of the registration's proof (rendezvous_wire.h)
  int family = 0;                 // AF_INET or AF_INET6
  uint8_t addr[16] = {};          // network byte order; IPv4 uses the first 4 bytes
  uint32_t scope_id = 0;          // IPv6 link-local scope (interface index); 0 otherwise
  uint16_t port = 0;              // host byte order
  std::string to_string() const;  // "10.77.0.1:40123", "[fd00::1]:40123"
};

// The payload's place and size in dfcclUniqueId::internal: after UniqueIdData, which stays as it is.
constexpr size_t kRendezvousIdOffset = 32;
constexpr size_t kRendezvousIdBytes = 56;  // magic 8, token 8, family 2, port 2, scope 4, address 16, secret 16
static_assert(sizeof(UniqueIdData) <= kRendezvousIdOffset);
static_assert(kRendezvousIdOffset + kRendezvousIdBytes <= DFCCL_UNIQUE_ID_BYTES);

// Writes the payload at kRendezvousIdOffset of `id` (the other bytes are left as they are): integers little-endian,
// the address in network byte order (docs/net-transport.md has the layout).
void encode_rendezvous_id(const RendezvousId& rid, dfcclUniqueId& id);
// Reads it back; a missing magic, an unknown family or port 0 is dfcclInvalidArgument naming 'commId'.
RendezvousId parse_rendezvous_id(const dfcclUniqueId& id);
// Whether `id` carries the payload at all (its magic).
bool has_rendezvous_id(const dfcclUniqueId& id);

// An address of an interface that is up.
struct Interface {
  std::string name;
  sockaddr_storage addr{};
  bool loopback = false;
};
// The interface to listen on. `spec` is DFCCL_SOCKET_IFNAME's syntax (NCCL_SOCKET_IFNAME's): a comma list of name
// prefixes, "=" in front for exact names, "^" in front to exclude them instead. Empty: the first non-loopback IPv4
// address, else a non-loopback IPv6 one, else loopback. IPv4 beats IPv6 among the matches. No match is
// dfcclInvalidArgument naming DFCCL_SOCKET_IFNAME and listing the interfaces.
Interface pick_interface(const std::string& spec);

class RendezvousRoot {
 public:
  static constexpr int kHelloMs = 3000;        // a connection's time to register after it was accepted
  static constexpr int kMaxUnregistered = 64;  // connections kept that have not registered yet
  // Listens on pick_interface(ifname_spec) with a random secret of its own; the id carries both.
  // Starts the service thread. Throws dfcclSystemError if the socket cannot be made.
  RendezvousRoot(uint64_t token, const std::string& ifname_spec);
  // The same with DFCCL_SOCKET_IFNAME.
  explicit RendezvousRoot(uint64_t token);
  // Stops the service (within about 100 ms: every socket is non-blocking) and closes every connection; ranks still
  // waiting in a round then fail with dfcclRemoteError naming the root.
  ~RendezvousRoot();
  RendezvousRoot(const RendezvousRoot&) = delete;
  RendezvousRoot& operator=(const RendezvousRoot&) = delete;

  const RendezvousId& id() const { return id_; }
  const std::string& interface_name() const { return ifname_; }
  // Whether the service has ended by itself: its group was complete and every rank has since left or dropped.
  bool finished() const;
  // Fails the group with dfcclRemoteError `why` if its registration has not completed (every registered rank is
  // told, and every later registration is refused); after it completed, does nothing. Any thread.
  void fail_registration(const std::string& why);

 private:
  struct Service;
  RendezvousId id_;
  std::string ifname_;
  std::unique_ptr<Service> service_;
  std::thread thread_;
};

class Rendezvous {
 public:
  static constexpr size_t kMaxBytes = 4096;  // largest allgather contribution
  static constexpr size_t kMaxHostId = 255;  // longest host id
  static constexpr int kMaxRanks = DFCCL_MAX_RANKS;

  // Connects to the root (within timeout_ms) and registers; returns once every rank has registered. The root fails
  // the registration for everybody when a rank has not arrived within timeout_ms of the first, naming the missing
  // ranks; this rank waits for the root's answer at most timeout_ms plus 2 s.
  // abandon: asked while the root refuses connections (not listening yet, or gone); a non-empty answer ends the
  // wait with dfcclRemoteError saying it (the shrink's new communicator, whose root may have died with its process).
  Rendezvous(const RendezvousId& id, int rank, int nranks, const std::string& host_id, int timeout_ms,
             const std::function<std::string()>& abandon = {});
  // Tells the root that this rank leaves (a rank that vanishes without leaving fails the others' rounds) and closes.
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Every rank contributes `bytes` (<= kMaxBytes, the same on every rank); `all` receives nranks * bytes in rank
  // order. The round fails for everybody when a rank has not entered it within timeout_ms (default: the
  // constructor's) of the first rank, or when a rank's connection drops.
  void allgather(const void* mine, size_t bytes, void* all, int timeout_ms = -1);
  void barrier(int timeout_ms = -1);

  // Every rank's host id, in rank order (from the registration).
  const std::vector<std::string>& hosts() const { return hosts_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  std::vector<std::string> round(uint16_t kind, const void* data, size_t bytes, int timeout_ms);
  std::vector<std::string> await(uint32_t seq, int timeout_ms);

  RendezvousId id_;
  int fd_ = -1;
  int rank_ = 0, nranks_ = 0, timeout_ms_ = 0;
  uint32_t seq_ = 0;
  std::string in_;  // received from the root, not yet taken
  std::vector<std::string> hosts_;
};

}  // namespace dfccl::net
