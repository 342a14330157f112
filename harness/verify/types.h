// Data types and reduction operators of the harness, numbered as in NCCL and dfccl.h, with their names and the
// host-side conversions for the 16-bit floating-point types (no CUDA header needed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dfccl::harness {

enum class DataType : int {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Float32 = 7,
  Float64 = 8,
  Bfloat16 = 9
};
inline constexpr int kNumDataTypes = 10;

// None: a collective without a reduction (all_gather, broadcast).
enum class RedOp : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4, None = -1 };
inline constexpr int kNumRedOps = 5;

size_t type_size(DataType t);
bool is_float(DataType t);
bool is_signed(DataType t);  // signed integers and floats
std::string_view type_name(DataType t);
std::string_view op_name(RedOp op);
// Accepts the canonical names and the usual aliases (float, half, double, bf16, int, char, ...).
std::optional<DataType> parse_type(std::string_view name);
std::optional<RedOp> parse_op(std::string_view name);

// IEEE binary16 and bfloat16 as bit patterns; float -> 16 bits rounds to nearest even.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t b);

}  // namespace dfccl::harness
