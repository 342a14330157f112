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

class MatchBoard final : public ArrivalSource {
 public:
  static constexpr uint32_t kRingKeys = 2048;
  static size_t bytes(int nranks);  // the board's share of the bootstrap segment

  // seq_lanes: the communicator's sequence lanes (a Desc's lane and turn give its key).
  MatchBoard(std::shared_ptr<Bootstrap> segment, uint32_t seq_lanes);

  // Posts this rank's signature of d under key, then compares it with the peers' entries for key. Returns "" or the
  // message naming the field, both values and both ranks; the first such message is also published to every rank.
  std::string post(const MatchKey& key, const core::Desc& d);
  // The first mismatch any rank published ("" if none).
  std::string published() const;
  // ArrivalSource: "" when every peer has called d's collective, else which ones have not.
  std::string missing(const core::Desc& d) const override;
  // The ranks that have not posted key yet.
  std::vector<int> not_arrived(const MatchKey& key) const;

 private:
  struct Entry;
  struct Header;
  Header* header() const;
  Entry* ring(int rank) const;        // kRingKeys entries
  Entry* persistent(int rank) const;  // DFCCL_MAX_PERSISTENT_IDS entries
  Entry* slot(int rank, const MatchKey& key) const;
  std::string compare(const MatchKey& key, const Entry& mine, int peer, const Entry& theirs) const;
  void publish(const std::string& message);
  std::string published_wait() const;

  std::shared_ptr<Bootstrap> segment_;
  char* base_ = nullptr;
  int rank_ = 0, nranks_ = 0;
  uint32_t seq_lanes_ = 1;
};

}  // namespace dfccl
