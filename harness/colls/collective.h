// One small descriptor per collective (as nccl-tests' testColl): how a size in bytes maps to the count argument,
// the buffer sizes, the bus-bandwidth factor, and how to fill and check the buffers exactly. The shared driver
// (runtime/driver.cpp) does the rest. One file per collective: all_reduce.cpp, all_gather.cpp, ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "verify/verifiable.h"

namespace dfccl::harness {

enum class CollKind : int {
  AllReduce = 0,
  AllGather = 1,
  ReduceScatter = 2,
  Broadcast = 3,
  Reduce = 4,
  SendRecv = 5,  // every rank sends to rank+1 and receives from rank-1 (nccl-tests' sendrecv_perf)
  AllToAll = 6,  // count elements from every rank to every rank (nccl-tests' alltoall_perf)
  P2p = 7        // one transfer from group rank src to group rank dst; the other ranks do not take part
};

struct Collective {
  CollKind kind;
  std::string_view name;  // as in workload files and HDF5: all_reduce, all_gather, ..., sendrecv, all_to_all, p2p
  bool has_op;
  bool has_root;
  // The size S of nccl-tests (the bytes algbw divides by) <-> the count argument of the call.
  size_t (*count_from_bytes)(size_t bytes, int nranks, size_t type_size);
  size_t (*bytes_from_count)(size_t count, int nranks, size_t type_size);
  size_t (*send_elems)(size_t count, int nranks);
  size_t (*recv_elems)(size_t count, int nranks);
  // busbw = algbw * factor (nccl-tests' doc/PERFORMANCE.md).
  double (*busbw_factor)(int nranks);
  // Fills this rank's send buffer (send_elems elements).
  void (*fill_send)(void* buf, size_t count, int nranks, int rank, int root, const verify::Params& p);
  // Counts wrong elements of this rank's receive buffer (recv_elems elements); 0 where nothing is defined (reduce,
  // non-root ranks).
  // p2p: `root` is the sender's group rank (check_recv runs on the receiver only).
  int64_t (*check_recv)(const void* buf, size_t count, int nranks, int rank, int root, const verify::Params& p);
  // No in-place variant: run.in_place runs it out of place only (nccl-tests does not check its in-place run).
  bool out_of_place_only = false;
  // A point-to-point transfer between two ranks of the group (p2p): send_elems and recv_elems are the sender's and
  // the receiver's; the driver gives the other side none.
  bool pairwise = false;
};

extern const Collective kAllReduce;
extern const Collective kAllGather;
extern const Collective kReduceScatter;
extern const Collective kBroadcast;
extern const Collective kReduce;
extern const Collective kSendRecv;
extern const Collective kAllToAll;
extern const Collective kP2p;

std::span<const Collective* const> all_collectives();
const Collective& collective(CollKind kind);
const Collective* find_collective(std::string_view name);  // nullptr if unknown

// The verification parameters of a collective (op None where it has no reduction).
inline verify::Params verify_params(const Collective& c, DataType type, RedOp op, int nranks, uint64_t seed) {
  return verify::Params{type, c.has_op ? op : RedOp::None, nranks, seed};
}

}  // namespace dfccl::harness
