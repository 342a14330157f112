// The host memory of a sweep, checked before anything is allocated: a sweep whose largest case cannot fit in the
// memory of a host is refused by main (exit 2) instead of failing every trial of that case.
#pragma once

#include <cstdint>
#include <string>

#include "config/workload.h"

namespace dfccl::harness {

// The least host memory one rank takes for the sweep's case `coll` at `bytes` in a group of `group_size` ranks: its
// input and its output (one buffer of the larger in place only), which every backend holds in host memory (the host
// backends as their buffers, the GPU backends as the uploaded input and the downloaded output); a pairwise transfer
// (p2p) takes the larger of the two.
uint64_t case_host_bytes(const Collective& coll, uint64_t bytes, int group_size, DataType dtype, InPlace in_place);

// "" when `local_ranks` ranks of this host each fit the sweep's largest case (case_host_bytes over its collectives at
// its largest size) in `host_bytes` of memory; else the problem, naming the sizes. Other workload kinds: "".
std::string sweep_memory_problem(const Workload& w, int group_size, int local_ranks, uint64_t host_bytes);

// This host's physical memory in bytes (0 when unknown: nothing is refused).
uint64_t host_memory_bytes();

}  // namespace dfccl::harness
