#include "collective.h"

#include <array>

namespace dfccl::harness {

std::span<const Collective* const> all_collectives() {
  static const std::array<const Collective*, 8> all = {&kAllReduce, &kAllGather, &kReduceScatter, &kBroadcast,
                                                       &kReduce,    &kSendRecv,  &kAllToAll,      &kP2p};
  return all;
}

const Collective& collective(CollKind kind) { return *all_collectives()[static_cast<size_t>(kind)]; }

const Collective* find_collective(std::string_view name) {
  for (const Collective* c : all_collectives())
    if (c->name == name) return c;
  // nccl-tests' spellings
  if (name == "allreduce") return &kAllReduce;
  if (name == "allgather") return &kAllGather;
  if (name == "reducescatter") return &kReduceScatter;
  if (name == "bcast") return &kBroadcast;
  if (name == "alltoall") return &kAllToAll;
  return nullptr;
}

}  // namespace dfccl::harness
