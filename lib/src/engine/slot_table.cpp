#include "engine/slot_table.h"

#include <fmt/format.h>

#include "core/engine_memory.h"
#include "util/error.h"

namespace dfccl {

SlotTable::SlotTable(int device, bool one_ring) : device_(device), one_ring_(one_ring) {
  free_.reserve(core::kMaxSlots);
  for (uint32_t s = core::kMaxSlots; s-- > 0;) free_.push_back(s);
}

uint32_t SlotTable::ring_for(cudaStream_t stream) {
  if (one_ring_) stream = nullptr;
  int free_ring = -1;
  for (uint32_t r = 0; r < core::kGraphRing; ++r) {  // the last ring is the graphs' (graph_start.h)
    if (rings_[r].used && rings_[r].stream == stream) return r;
    if (free_ring < 0 && (!rings_[r].used || rings_[r].outstanding == 0)) free_ring = int(r);
  }
  if (free_ring < 0)
    throw Error(dfcclNoResources, fmt::format("collectives are outstanding on {} different streams of device {} "
                                              "(limit); wait for some before using another stream",
                                              core::kGraphRing, device_));
  Ring& ring = rings_[free_ring];
  ring.used = true;
  ring.stream = stream;
  return uint32_t(free_ring);
}

uint32_t SlotTable::occupy(const std::shared_ptr<RequestState>& req, uint32_t comm, uint32_t ring, uint64_t* pos) {
  const uint32_t slot = free_.back();
  free_.pop_back();
  req->slot = slot;
  slots_[slot] = Use{req, comm, ring};
  Ring& rg = rings_[ring];
  *pos = rg.next_pos++;
  rg.outstanding += 1;
  outstanding_ += 1;
  comm_outstanding_[comm].fetch_add(1);
  return slot;
}

uint32_t SlotTable::take_for_graph() {
  const uint32_t slot = free_.back();
  free_.pop_back();
  return slot;
}

std::shared_ptr<RequestState> SlotTable::vacate(uint32_t slot, bool free_now) {
  Use& use = slots_[slot];
  if (free_now) free_.push_back(slot);
  rings_[use.ring].outstanding -= 1;
  use.waited = false;  // its entry in EngineHost::waits goes at the engine's next compaction
  use.standin = false;
  comm_outstanding_[use.comm].fetch_sub(1);
  outstanding_ -= 1;
  return std::move(use.req);
}

const SlotTable::Use* SlotTable::oldest() const {
  const Use* oldest = nullptr;
  for (const Use& use : slots_)
    if (use.req && (!oldest || use.req->seq < oldest->req->seq)) oldest = &use;
  return oldest;
}

}  // namespace dfccl
