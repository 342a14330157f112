// The survivors' agreement on the ranks that a shrink excludes (DESIGN invariant 10; docs/design.md, "Shrink").
// It runs in an area of shared memory that every caller has mapped (the shrink's segment on this host) and that
// starts zeroed; its ranks are the old communicator's. Epoch e (0, 1, ... < kEpochs) is one agreement: the shrink
// starts at 0 and goes to the next epoch when a rank of the agreed communicator fails before it is made.
//
// In epoch e, rank s:
//   1. writes its proposal P_s (the ranks it excludes), then marks itself arrived in e;
//   2. polls: U = P_s, the proposals of every rank arrived in e, and every rank not arrived in e whose process is
//      gone (`gone`, sound: never a live process). Once every rank outside U has arrived in e, it writes U as its
//      candidate and tries to install it as the decision of e with one compare-and-swap on the epoch's decision
//      word (naming the candidate's rank);
//   3. returns the installed candidate, its own or another rank's, as soon as the decision word is set.
// Every caller of epoch e returns the same set (one compare-and-swap wins), which holds every proposal of a rank that
// arrived before it was made and every rank that went before arriving: a rank that fails during the agreement is
// added, never ignored. A rank that arrived and then fails is in no set of e: the communicator made from e fails
// before it is complete and the next epoch excludes it (comm_shrink).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace dfccl {

class ShrinkAgreement {
 public:
  static constexpr int kEpochs = 4;
  static constexpr int kMaxRanks = 4096;  // a larger communicator cannot shrink (dfcclNotSupported)
  // The area's size for nranks ranks.
  static size_t bytes(int nranks);

  ShrinkAgreement(void* area, int nranks, int rank);

  // Epoch `epoch`'s agreed set as flags by rank ([r] = 1: excluded). proposal: nranks flags. gone(r): r's process
  // has exited. Waits at most timeout_ms for ranks outside the set that have not arrived, then throws dfcclTimeout
  // naming them. Called with increasing epochs.
  std::vector<uint8_t> agree(int epoch, const std::vector<uint8_t>& proposal, const std::function<bool(int)>& gone,
                             int timeout_ms);

 private:
  struct Record;
  Record* record(int rank) const;
  uint64_t* bits(int rank, int epoch, int which) const;  // which: 0 proposal, 1 candidate
  uint64_t* decision(int epoch) const;
  void* area_;
  int nranks_, rank_;
  size_t words_;  // 64-bit words of one set
};

}  // namespace dfccl
