// Exact-check data for the harness (like nccl-tests' verifiable/): every rank's input is a function of (seed, rank,
// element index), chosen so that the result of every collective is exactly predictable for every data type,
// reduction operator and rank count:
//   sum, avg  small non-negative integers, at most cap(type)/nranks, so that every partial sum in any order is exact
//             (bfloat16: sums <= 256, float16: <= 2048) and no integer type wraps; avg = sum, then one division by
//             nranks (integers: truncating division; floats: compared within 2 ulp, as nccl-tests does);
//   prod      values in {1, 2}; integer products wrap identically in any order; float16 keeps products <= 2^14;
//   max, min  signed integers in a range exactly representable in the type;
//   none      (all_gather, broadcast) the same values as max/min.
// Checks run on the host, over the downloaded output, in chunks (no full-size expected buffer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "types.h"

namespace dfccl::harness::verify {

struct Params {
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;  // RedOp::None for copies
  int nranks = 1;
  uint64_t seed = 0;
};

// The value of element `index` of rank `rank`'s input, as a double (exactly representable in the type).
double input_value(const Params& p, int rank, uint64_t index);
// The value of the reduction over all ranks of element `index` (for avg on floats, the exact quotient: the stored
// expectation is its rounding to the type).
double reduced_value(const Params& p, uint64_t index);

// Writes `count` elements of rank `rank`'s input, indices index_offset .. index_offset+count-1, into dst.
void fill_input(void* dst, size_t count, const Params& p, int rank, uint64_t index_offset);

// Counts elements of got (count elements of p.type) that differ from the reduction over ranks of the inputs at
// indices index_offset + i.
int64_t count_wrong_reduced(const void* got, size_t count, const Params& p, uint64_t index_offset);
// Counts elements of got that differ from rank src_rank's input at indices index_offset + i.
int64_t count_wrong_copy(const void* got, size_t count, const Params& p, int src_rank, uint64_t index_offset);

// A value that no generated input or result takes (the receive buffers are filled with it before a checked run, so
// that a collective that writes nothing is caught): for each element size, one byte pattern.
inline constexpr unsigned char kPoisonByte = 0xA5;

}  // namespace dfccl::harness::verify
