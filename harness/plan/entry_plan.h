// The vocabulary between the driver and whatever executes a step (backends/, gpu/): how this rank runs each
// collective of the step (EntryPlan), what it measures (EntryTiming, IterationTiming), and how it fails
// (BackendError).
#pragma once

#include <algorithm>
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
  int root = 0;  // in the group; p2p: the sender
  // Point-to-point: the group rank this rank sends to and receives from in this entry (-1: none). sendrecv: rank+1
  // and rank-1; p2p: dst on the sender, src on the receiver (both on a rank that sends to itself).
  int send_peer = -1, recv_peer = -1;
  int priority = 0;
  uint64_t data_seed = 0;
  bool in_place = false;  // one buffer for input and output (BufferLayout)
};

// Where a backend puts an entry's input and output. Out of place: two buffers, each at offset 0. In place
// (nccl-tests' and dfccl.h's conventions): one buffer of max(send, recv) bytes; the smaller side lies at
// group_rank times its own size in it (all_gather: the input at group_rank * count; reduce_scatter: the output at
// group_rank * count), the larger one, or both when equal (all_reduce, broadcast, reduce), at 0.
struct BufferLayout {
  size_t send_bytes = 0, recv_bytes = 0;    // the collective's input and output
  size_t buffer_bytes = 0;                  // in place: the one buffer's size
  size_t send_offset = 0, recv_offset = 0;  // in place: byte offsets of the input and the output in it
};

inline BufferLayout buffer_layout(const EntryPlan& p) {
  BufferLayout l;
  const size_t ts = type_size(p.dtype);
  l.send_bytes = p.send_elems * ts;
  l.recv_bytes = p.recv_elems * ts;
  if (!p.in_place) return l;
  l.buffer_bytes = std::max(l.send_bytes, l.recv_bytes);
  const auto rank = static_cast<size_t>(p.group_rank);
  if (l.send_bytes < l.buffer_bytes) l.send_offset = rank * l.send_bytes;
  if (l.recv_bytes < l.buffer_bytes) l.recv_offset = rank * l.recv_bytes;
  return l;
}

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
