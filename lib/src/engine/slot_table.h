// The engine's slot table: which collective each of the kMaxSlots slots holds (its request, communicator and
// submission ring), the free slots, the submission rings of the user's streams, and the outstanding counts. The
// engine's lock guards it all (callers name their methods _locked), except the per-communicator counts, which an abort
// reads without any lock (Engine::wait_comm_idle).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/limits.h"
#include "engine/requests.h"

namespace dfccl {

class SlotTable {
 public:
  // An occupied slot.
  struct Use {
    std::shared_ptr<RequestState> req;  // null: free, or held by a graph (Engine::graph_take_slot)
    uint32_t comm = 0;
    uint32_t ring = 0;
    bool waited = false;   // a stream waits on it (dfcclWait): listed in EngineHost::waits
    bool standin = false;  // a stream waits on it by a wait that may stand in (Engine::wait_as_standin)
    uint64_t door = 0;    // its submission tag where a stream writes its doorbell, else 0 (core::WaitEntry::door)
  };
  // A submission ring: the stream it serves while it has outstanding collectives.
  struct Ring {
    cudaStream_t stream = nullptr;
    uint64_t next_pos = 0;
    uint32_t outstanding = 0;
    bool used = false;
  };

  // device: named in messages; one_ring: every stream shares one ring (the host executor has no streams).
  SlotTable(int device, bool one_ring);

  size_t free_count() const { return free_.size(); }
  // The ring that serves `stream`: its own, else one whose collectives all completed (every block has read past
  // them). dfcclNoResources, naming the limit, when every ring serves another stream with outstanding collectives.
  uint32_t ring_for(cudaStream_t stream);
  // Caller: a submission, with free_count() > 0. Takes a free slot for req's collective of communicator `comm` on
  // `ring` (req->slot is set) and counts it outstanding; *pos: its position in the ring.
  uint32_t occupy(const std::shared_ptr<RequestState>& req, uint32_t comm, uint32_t ring, uint64_t* pos);
  // Takes a free slot out of the table for good (a graph's: Engine::graph_take_slot), with free_count() > 0.
  uint32_t take_for_graph();
  // Caller: for an occupied slot whose collective the device no longer runs. Takes its request out and its counts
  // down; frees the slot unless !free_now (a request that still settles keeps it until give_back).
  std::shared_ptr<RequestState> vacate(uint32_t slot, bool free_now);
  void give_back(uint32_t slot) { free_.push_back(slot); }

  Use& use(uint32_t slot) { return slots_[slot]; }
  const Use& use(uint32_t slot) const { return slots_[slot]; }
  const Ring& ring(uint32_t r) const { return rings_[r]; }
  uint32_t outstanding() const { return outstanding_; }
  // The occupied slot with the oldest collective (lowest sequence number); null when none is.
  const Use* oldest() const;

  // Without the lock: a communicator's outstanding collectives; reset when an attachment takes its index.
  uint32_t comm_outstanding(uint32_t comm) const { return comm_outstanding_[comm].load(); }
  void reset_comm(uint32_t comm) { comm_outstanding_[comm].store(0); }

 private:
  int device_;
  bool one_ring_;
  std::vector<uint32_t> free_;
  std::array<Use, core::kMaxSlots> slots_{};
  std::array<Ring, core::kMaxRings> rings_{};
  uint32_t outstanding_ = 0;
  std::array<std::atomic<uint32_t>, core::kMaxComms> comm_outstanding_{};
};

}  // namespace dfccl
