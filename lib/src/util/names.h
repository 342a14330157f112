// The C API's names of collective kinds, data types and operators, for messages (core numbering: desc.h).
#pragma once

#include <iterator>
#include <string>

#include "core/desc.h"

namespace dfccl {

inline constexpr const char* kKindNames[] = {"dfcclAllReduce", "dfcclAllGather", "dfcclReduceScatter", "dfcclBroadcast",
                                             "dfcclReduce",    "dfcclSend",      "dfcclRecv"};
inline constexpr const char* kTypeNames[] = {"dfcclInt8",    "dfcclUint8",   "dfcclInt32",   "dfcclUint32",
                                             "dfcclInt64",   "dfcclUint64",  "dfcclFloat16", "dfcclFloat32",
                                             "dfcclFloat64", "dfcclBfloat16"};
inline constexpr const char* kOpNames[] = {"dfcclSum", "dfcclProd", "dfcclMax", "dfcclMin", "dfcclAvg"};
static_assert(std::size(kKindNames) == core::kNumKinds && std::size(kTypeNames) == core::kNumDTypes &&
              std::size(kOpNames) == core::kNumOps);

// names[v], or v in decimal when it is out of range.
template <size_t N>
std::string name_of(const char* const (&names)[N], unsigned v) {
  return v < N ? names[v] : std::to_string(v);
}

}  // namespace dfccl
