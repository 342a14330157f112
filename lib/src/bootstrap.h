// Rendezvous of the ranks of one communicator through a POSIX shared-memory segment named by the unique id (all
// ranks on one host). It offers allgather and barrier rounds, each bounded by a timeout (DESIGN invariant 5), and
// is kept for the communicator's life (split, destroy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dfccl.h"

namespace dfccl {

struct UniqueIdData {
  uint64_t magic;
  uint64_t token;  // random: names the rendezvous segment
  uint32_t creator_pid;
  uint32_t pad;
};
static_assert(sizeof(UniqueIdData) <= DFCCL_UNIQUE_ID_BYTES);

dfcclUniqueId make_unique_id();
UniqueIdData parse_unique_id(const dfcclUniqueId& id);  // throws InvalidArgument naming 'commId' if malformed

class Bootstrap {
 public:
  static constexpr size_t kSlotBytes = 4096;  // largest allgather contribution

  Bootstrap(const dfcclUniqueId& id, int rank, int nranks, int timeout_ms);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // Every rank contributes `bytes` (<= kSlotBytes); `all` receives nranks * bytes, rank order.
  void allgather(const void* mine, size_t bytes, void* all, int timeout_ms = -1);
  void barrier(int timeout_ms = -1);
  // Removes the segment's name once every rank has it mapped (the mapping stays valid).
  void unlink();

  // Liveness words in the segment, which every rank keeps mapped for the communicator's life: how each rank's
  // communicator ended (kRunning until it aborts or is destroyed) and its heartbeat, written by its PeerWatch thread
  // and read by the peers' (comm.cpp, watch_peers).
  static constexpr uint64_t kRunning = 1, kAborted = 2, kLeft = 3;
  static uint64_t now_ns();
  void set_state(uint64_t state);
  void beat(uint64_t now_ns);
  uint64_t peer_state(int rank) const;
  uint64_t peer_heartbeat(int rank) const;

  // The match board's share of the segment (match_board.h): MatchBoard::bytes(nranks) bytes, zeroed at creation.
  void* board_area() const;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t token() const { return token_; }

 private:
  struct Header;
  std::string name_;
  uint64_t token_ = 0;
  int rank_ = 0, nranks_ = 0, timeout_ms_ = 0;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint64_t round_ = 0;
  uint64_t owner_ = 0;  // this caller's claim on its rank (RankWord::owner)
  bool unlinked_ = false;
};

}  // namespace dfccl
