// The engine's side of captured collectives (docs/design.md, "CUDA graphs"): slots and groups held by graphs, the
// start and wait nodes a capture records, and whether a replay has posted work that needs a daemon.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "engine/engine.h"
#include "util/error.h"

namespace dfccl {

void GraphPool::release(const std::vector<uint32_t>& slots, const std::vector<uint32_t>& groups) {
  std::lock_guard<std::mutex> lk(mu);
  free_slots.insert(free_slots.end(), slots.begin(), slots.end());
  free_groups.insert(free_groups.end(), groups.begin(), groups.end());
}

uint32_t Engine::graph_take_slot(const char* fn) {
  {
    std::lock_guard<std::mutex> pk(graph_pool_->mu);
    if (!graph_pool_->free_slots.empty()) {
      const uint32_t slot = graph_pool_->free_slots.back();
      graph_pool_->free_slots.pop_back();
      return slot;
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (slots_.free_count() <= kHostSlotsKept)
    throw Error(dfcclNoResources,
                fmt::format("{}: captured graphs hold {} of device {}'s {} collective slots, and {} are taken by "
                            "collectives outside graphs: capturing another would leave fewer than {} for those; "
                            "destroy graphs that are no longer replayed",
                            fn, ngraph_slots_.load(), exec_->device(), core::kMaxSlots,
                            core::kMaxSlots - slots_.free_count() - ngraph_slots_.load(), kHostSlotsKept));
  const uint32_t slot = slots_.take_for_graph();
  const uint32_t n = ngraph_slots_.load();
  graph_slots_[n] = slot;
  ngraph_slots_.store(n + 1, std::memory_order_release);
  return slot;
}

uint32_t Engine::graph_take_group(uint32_t* gen, const char* fn) {
  std::lock_guard<std::mutex> pk(graph_pool_->mu);
  GraphPool& p = *graph_pool_;
  uint32_t group;
  if (!p.free_groups.empty()) {
    group = p.free_groups.back();
    p.free_groups.pop_back();
  } else if (p.groups_made < core::kMaxGraphGroups) {
    group = p.groups_made++;
  } else {
    throw Error(dfcclNoResources,
                fmt::format("{}: {} groups (a communicator's collectives, or its transfers in one direction with one "
                            "peer, in one graph) are captured on device {} (limit): destroy graphs that are no longer "
                            "replayed",
                            fn, core::kMaxGraphGroups, exec_->device()));
  }
  p.next_gen = p.next_gen == 0xffffffffu ? 1 : p.next_gen + 1;  // 0 is no graph's (zeroed words)
  *gen = p.next_gen;
  __atomic_store_n(&h_->graph_group_n[group], uint64_t(0), __ATOMIC_RELEASE);
  return group;
}

void Engine::graph_group_size(uint32_t group, uint64_t n) {
  __atomic_store_n(&h_->graph_group_n[group], n, __ATOMIC_RELEASE);
}

void Engine::graph_post(cudaStream_t stream, core::Desc d, uint32_t comm_index, uint64_t* turns, uint32_t slot,
                        uint32_t group, uint32_t index, uint32_t gen, bool with_wait) {
  d.comm = uint16_t(comm_index);
  d.comm_gen = __atomic_load_n(&comm_gen_[comm_index], __ATOMIC_RELAXED);
  const core::GraphStart s{d, g_, h_, turns, slot, group, index, gen};
  if (with_wait) exec_->graph_start_wait(stream, standin_view(), s, standin_args(slot, 0, comm_index, false));
  else exec_->graph_start(stream, s);
  cv_.notify_all();  // the host executor posted it now: the progress thread launches a daemon
}

void Engine::graph_wait(cudaStream_t stream, uint32_t slot, uint32_t comm_index, bool poll_only) {
  queue_standin(stream, slot, 0, comm_index, poll_only);
}

bool Engine::wait_as_standin(const std::shared_ptr<RequestState>& r, cudaStream_t stream) {
  uint32_t comm = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    SlotTable::Use& use = slots_.use(r->slot);
    if (r->settles || use.req != r || use.waited || use.standin) return false;
    use.standin = true;
    comm = use.comm;
  }
  queue_standin(stream, r->slot, r->seq, comm, false);
  return true;
}

void Engine::queue_standin(cudaStream_t stream, uint32_t slot, uint64_t seq, uint32_t comm_index, bool poll_only) {
  exec_->graph_wait(stream, standin_view(), standin_args(slot, seq, comm_index, poll_only));
}

core::EngineView Engine::standin_view() const {
  core::EngineView ev;
  ev.g = g_;
  ev.ctx = ctx_;
  ev.h = h_;
  ev.p = cfg_.params;
  return ev;
}

core::GraphWait Engine::standin_args(uint32_t slot, uint64_t seq, uint32_t comm_index, bool poll_only) const {
  return core::GraphWait{&h_->abort_gen[comm_index], __atomic_load_n(&comm_gen_[comm_index], __ATOMIC_RELAXED), seq,
                         slot, poll_only ? 1u : 0u};
}

bool Engine::graph_pending() const {
  const uint32_t n = ngraph_slots_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t s = graph_slots_[i];
    if (__atomic_load_n(&h_->graph_posted[s], __ATOMIC_ACQUIRE) > __atomic_load_n(&h_->graph_done[s], __ATOMIC_ACQUIRE))
      return true;
  }
  return false;
}

}  // namespace dfccl
