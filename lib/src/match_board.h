// The match board of a communicator: each rank posts the signature (kind, count, type, operator, root) of every
// collective it submits, under the collective's match key, in the communicator's bootstrap segment; the ranks compare
// signatures there (DESIGN invariant 7) and read there which peers have not called a pending collective yet.
//
// Posting is done by the submitting thread before the collective reaches the engine: it stores its entry, then
// (after a sequentially consistent fence) reads the peers' entries for the same key. Of two ranks that submit
// differing collectives under one key, at least one therefore sees the other's entry: that rank refuses its
// submission and publishes the mismatch, which every other rank's PeerWatch thread reads (comm.cpp).
//
// Keys: a collective matched by order has key n (the communicator's n-th such collective), kept in a ring of
// kRingKeys entries per rank; a peer more than kRingKeys keys ahead is not compared (it cannot be: it would need more
// collectives outstanding than an engine holds). A persistent collective has key (id, turn), one entry per id.
//
// Point-to-point transfers are posted the same way, per (lane, sender, receiver): the k-th transfer from src to dst
// has key k; the sender posts its count and type as src's send entry, the receiver as dst's receive entry, and each
// compares with the other's. Lanes: kP2pUser (dfcclSend/dfcclRecv) and kP2pAllToAll (the all-to-alls' transfers).
// A side more than kP2pKeys transfers ahead of the other on one pair is not compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap.h"
#include "engine.h"

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
inline constexpr uint32_t kP2pUser = 0, kP2pAllToAll = 1, kP2pLanes = 2;

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
  // ArrivalSource: "" when every peer has called d's collective, else which ones have not.
  std::string missing(const core::Desc& d) const override;
  std::vector<int> missing_ranks(const core::Desc& d) const override;
  // The ranks that have not posted key yet.
  std::vector<int> not_arrived(const MatchKey& key) const;

 private:
  struct Entry;
  struct Header;
  Header* header() const;
  Entry* ring(int rank) const;        // kRingKeys entries
  Entry* persistent(int rank) const;  // DFCCL_MAX_PERSISTENT_IDS entries
  Entry* slot(int rank, const MatchKey& key) const;
  struct P2pEntry;
  P2pEntry* p2p_slot(const P2pKey& key, bool send_side) const;
  std::string missing_p2p(const core::Desc& d) const;
  MatchKey key_of(const core::Desc& d) const;  // a collective's key from its lane and turn
  bool p2p_other_side_posted(const core::Desc& d) const;
  std::string compare(const MatchKey& key, const Entry& mine, int peer, const Entry& theirs) const;
  void publish(const std::string& message);
  // Publishes message unless another finding came first, and returns the first one (what every rank reports).
  std::string publish_first(const std::string& message);
  std::string published_wait() const;

  std::shared_ptr<Bootstrap> segment_;
  char* base_ = nullptr;
  int rank_ = 0, nranks_ = 0;
  uint32_t seq_lanes_ = 1;
};

}  // namespace dfccl
