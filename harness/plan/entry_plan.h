// The vocabulary between the driver and whatever executes a step (backends/, gpu/): how this rank runs each
// collective of the step (EntryPlan), what it measures (EntryTiming, IterationTiming), and how it fails
// (BackendError).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "colls/collective.h"
#include "output/results.h"
#include "verify/types.h"

namespace dfccl::harness {

struct BackendError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One collective of the step as this rank executes it.
struct EntryPlan {
  int entry = 0;  // index in the step
  const Collective* coll = nullptr;
  int slot = -1;  // communicator; -1: this rank does not take part
  int group_rank = 0, group_size = 1;
  size_t count = 0;  // the count argument
  size_t send_elems = 0, recv_elems = 0;
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;  // in the group
  int priority = 0;
  uint64_t data_seed = 0;
};

struct EntryTiming {
  double e2e_us = kNaN;   // submit -> result usable (the backend's completion path)
  double core_us = kNaN;  // execution inside the library (dfccl only)
  int64_t preemptions = 0;
};

struct IterationTiming {
  double time_us = kNaN;             // the whole iteration on this rank
  std::vector<EntryTiming> entries;  // by entry index
};

}  // namespace dfccl::harness
