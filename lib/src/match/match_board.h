// The match board of a communicator: each rank posts the signature (kind, count, type, operator, root) of every
// collective it submits, under the collective's match key, in the communicator's bootstrap segment; the ranks compare
// signatures there (DESIGN invariant 7) and read there which peers have not called a pending collective yet.
//
// Posting is done by the submitting thread before the collective reaches the engine: it stores its entry, then
// (after a sequentially consistent fence) reads the peers' entries for the same key. Of two ranks that submit
// differing collectives under one key, at least one therefore sees the other's entry: that rank refuses its
// submission and publishes the mismatch, which every other rank's PeerWatch thread reads (comm_init.cpp, watch_peers).
//
// Keys: a collective matched by order has key n (the communicator's n-th such collective), kept in a ring of
// kRingKeys entries per rank; a peer more than kRingKeys keys ahead is not compared (it cannot be: it would need more
// collectives outstanding than an engine holds). A persistent collective has key (id, turn), one entry per id.
//
// Point-to-point transfers are posted the same way, per (lane, sender, receiver): the k-th transfer from src to dst
// has key k; the sender posts its count and type as src's send entry, the receiver as dst's receive entry, and each
// compares with the other's. Lanes: kP2pUser (dfcclSend/dfcclRecv) and kP2pAllToAll (the all-to-alls' transfers), and
// their captured counterparts kP2pUser + kP2pLanes and kP2pAllToAll + kP2pLanes (comm/comm_graph.h), posted at capture
// with k = the capture order on the pair. A side more than kP2pKeys transfers ahead of the other on one pair is not
// compared.
//
// Across hosts (board_mirror.h): each host has its own board, with a row for every rank of the communicator. Every
// post of a rank is also sent, through the network proxy, to one rank of each other host (a point-to-point post: to
// the other side's host only), whose proxy writes it into that host's board in the sender's row with mirror() or
// mirror_p2p(): the same store, fence and comparison as a post, so the argument above holds with the mirrored write
// in place of the other rank's post. Every host's board thus holds every rank's entries (the arrivals of remote
// ranks included, some network latency later), and a mismatch found on one host reaches the others as text
// (publish()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "engine/arrivals.h"

namespace dfccl {

struct MatchKey {
  int id = -1;     // persistent collective's id; -1: matched by order
  uint64_t n = 0;  // order number (id < 0) or the id's turn
};

// A point-to-point transfer's key: its lane, sender, receiver and number k on that (lane, sender, receiver).
struct P2pKey {
  uint32_t lane = 0;
  int src = 0, dst = 0;
  uint64_t k = 0;
};
// The eager lanes; a captured transfer of eager lane l runs on lane l + kP2pLanes (a connection of a communicator made
// with DFCCL_GRAPHS=1 has kP2pGraphLanes lanes, transport/p2p.h).
inline constexpr uint32_t kP2pUser = 0, kP2pAllToAll = 1, kP2pLanes = 2, kP2pGraphLanes = 2 * kP2pLanes;
inline constexpr bool p2p_captured_lane(uint32_t lane) { return lane >= kP2pLanes; }

class MatchBoard final : public ArrivalSource {
 public:
  static constexpr uint32_t kRingKeys = 2048;
  static constexpr uint32_t kP2pKeys = 2048;
  static size_t bytes(int nranks);  // the board's share of the bootstrap segment

  // seq_lanes: the communicator's sequence lanes (a Desc's lane and turn give its key).
  MatchBoard(std::shared_ptr<Bootstrap> segment, uint32_t seq_lanes);

  // Posts this rank's signature of d under key, then compares it with the peers' entries for key. Returns "" or the
  // message naming the field, both values and both ranks; the first such message is also published to every rank.
  std::string post(const MatchKey& key, const core::Desc& d);
  // The same for a point-to-point transfer: this rank is key.src (a Send) or key.dst (a Recv).
  std::string post_p2p(const P2pKey& key, const core::Desc& d);
  // The first mismatch any rank published ("" if none).
  std::string published() const;
  // A rank's signature as it travels to other hosts: its count and its shape (kind, type, operator, root).
  struct Signature {
    uint64_t count = 0, shape = 0;
  };
  static Signature signature(const core::Desc& d);
  // A point-to-point transfer's signature: count | dtype << 56.
  static uint64_t p2p_signature(const core::Desc& d);
  // Caller: the network proxy, for a post of `rank` (on another host) that it received. Writes it into rank's row
  // and compares it with the other rows for key, as post() does; returns "" or the published mismatch.
  std::string mirror(int rank, const MatchKey& key, const Signature& sig);
  // The same for a point-to-point post of key.src (send_side) or key.dst.
  std::string mirror_p2p(const P2pKey& key, bool send_side, uint64_t word);
  // Publishes a mismatch found elsewhere (another host) unless one was published already.
  void publish(const std::string& message);
  // How the board's messages name ranks and collectives: a stage communicator of a hierarchical all-reduce
  // (comm_submit.h) names them as the application knows them, in its parent's ranks and counts, and reports which
  // ranks have not called the parent's collective that a pending stage belongs to (set_parent_key).
  struct Names {
    std::vector<int> ranks;                    // the name of each of the board's ranks
    int nranks = 0;                            // the named communicator's size (by default the board's)
    uint64_t count_scale = 1;                  // a count named is this many times the board's
    std::string collective;                    // what a collective of this board is ("of ... stage")
    std::shared_ptr<const MatchBoard> parent;  // the board of the communicator named
  };
  // Caller: hierarchy_init, before the first post. Every message from then on uses names.
  void set_names(Names names);
  // Caller: comm_submit_chain, under the parent's lock, for a stage collective posted here under key: the key of the
  // application's collective it belongs to on names.parent.
  void set_parent_key(const MatchKey& key, const MatchKey& parent_key);
  // Caller: board_mirror's connect, before the engine sees the board. From then on settled() checks d's signatures.
  void set_across_hosts() { across_hosts_ = true; }
  bool across_hosts() const override { return across_hosts_; }
  // ArrivalSource: across hosts, whether every rank's entry for d's key is here and agrees with this rank's (a
  // collective whose ranks submitted within the mirror's latency of each other may finish before the mismatch is
  // found: its request reports it instead of success). On one host: nothing to check (post() did).
  std::string settled(const core::Desc& d, bool* pending) const override;
  // ArrivalSource: "" when every peer has called d's collective, else which ones have not.
  std::string missing(const core::Desc& d) const override;
  std::vector<int> missing_ranks(const core::Desc& d) const override;
  // The ranks that have not posted key yet.
  std::vector<int> not_arrived(const MatchKey& key) const;
  // "#<n> of its communicator" and which ranks have not posted key yet (as missing()).
  std::string missing_key(const MatchKey& key) const;

 private:
  struct Entry;
  struct Header;
  Header* header() const;
  Entry* ring(int rank) const;        // kRingKeys entries
  Entry* persistent(int rank) const;  // core::kOwnLanes entries: the persistent ids, then the graph lane
  Entry* slot(int rank, const MatchKey& key) const;
  struct P2pEntry;
  P2pEntry* p2p_slot(const P2pKey& key, bool send_side) const;
  std::string missing_p2p(const core::Desc& d) const;
  MatchKey key_of(const core::Desc& d) const;  // a collective's key from its lane and turn
  bool p2p_other_side_posted(const core::Desc& d) const;
  std::string place(int rank, const MatchKey& key, const Signature& sig);
  std::string place_p2p(const P2pKey& key, bool send_side, uint64_t word);
  std::string compare(const MatchKey& key, int rank, const Entry& mine, int peer, const Entry& theirs) const;
  std::string p2p_message(const P2pKey& key, uint64_t send_word, uint64_t recv_word) const;
  std::string settled_p2p(const core::Desc& d, bool* pending) const;
  // Publishes message unless another finding came first, and returns the first one (what every rank reports).
  std::string publish_first(const std::string& message);
  std::string published_wait() const;
  int name_of_rank(int rank) const { return names_.ranks.empty() ? rank : names_.ranks[size_t(rank)]; }

  std::shared_ptr<Bootstrap> segment_;
  char* base_ = nullptr;
  int rank_ = 0, nranks_ = 0;
  uint32_t seq_lanes_ = 1;
  bool across_hosts_ = false;
  Names names_;
  // With names_.parent: per key of the ring, the parent key + 1 of the collective it belongs to (0: none).
  std::unique_ptr<std::atomic<uint64_t>[]> parent_keys_;
  bool parent_key_known(const MatchKey& key, MatchKey* parent) const;
};

}  // namespace dfccl
