// Exact references for the collective tests: inputs that every data type represents exactly, and expected outputs
// computed independently of the library (plain loops over ranks, exact arithmetic in double or wrapping uint64),
// following the semantics documented in kernels/core/primitives/reduce.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dfccl.h"

namespace dfccl::test {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };
const char* coll_name(Coll c);
const char* type_name(dfcclDataType_t t);
const char* op_name(dfcclRedOp_t op);
size_t type_size(dfcclDataType_t t);

// Input element `index` of `rank` for a collective reducing with `op` (copies use dfcclMax's values).
double input_value(dfcclRedOp_t op, dfcclDataType_t t, int rank, uint64_t index);
// Writes `count` input elements (indices first .. first+count-1) of `rank` into dst.
void fill_input(void* dst, size_t count, dfcclRedOp_t op, dfcclDataType_t t, int rank, uint64_t first);
// The reduction over `nranks` ranks of element `index`, stored as the type's bytes into out (one element).
void expected_reduced(void* out, dfcclRedOp_t op, dfcclDataType_t t, int nranks, uint64_t index);

// One collective on every rank of a group, in one process: buffers, inputs, expectations and the check.
struct Case {
  Coll coll;
  dfcclDataType_t type;
  dfcclRedOp_t op;
  size_t count;  // NCCL's count of the collective
  int root;
  bool in_place;
};
std::string describe(const Case& c, int nranks);

class Buffers {
 public:
  Buffers(const Case& c, int nranks);
  const void* send(int rank) const;
  void* recv(int rank);
  // Wrong elements of rank's output (untouched poison counts as wrong; Reduce's non-root output must stay poison).
  size_t wrong(int rank) const;

  // The host storage behind send()/recv(), for tests that mirror it in device memory: send() lies in the send
  // storage (out of place) or in the receive storage (in place), at the given byte offset.
  std::vector<uint8_t>& send_storage(int rank) { return send_[size_t(rank)]; }
  std::vector<uint8_t>& recv_storage(int rank) { return recv_[size_t(rank)]; }
  bool send_in_recv_storage() const { return c_.in_place; }
  size_t send_offset(int rank) const;
  size_t recv_offset(int rank) const;

 private:
  Case c_;
  int n_;
  std::vector<std::vector<uint8_t>> send_, recv_;
};

}  // namespace dfccl::test
