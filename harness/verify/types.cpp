#include "types.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

namespace dfccl::harness {
namespace {

struct TypeInfo {
  std::string_view name;
  size_t size;
  bool is_float;
  bool is_signed;
};

constexpr std::array<TypeInfo, kNumDataTypes> kTypes = {{
    {"int8", 1, false, true},
    {"uint8", 1, false, false},
    {"int32", 4, false, true},
    {"uint32", 4, false, false},
    {"int64", 8, false, true},
    {"uint64", 8, false, false},
    {"float16", 2, true, true},
    {"float32", 4, true, true},
    {"float64", 8, true, true},
    {"bfloat16", 2, true, true},
}};

const TypeInfo& info(DataType t) { return kTypes.at(static_cast<size_t>(t)); }

}  // namespace

size_t type_size(DataType t) { return info(t).size; }
bool is_float(DataType t) { return info(t).is_float; }
bool is_signed(DataType t) { return info(t).is_signed; }
std::string_view type_name(DataType t) { return info(t).name; }

std::string_view op_name(RedOp op) {
  switch (op) {
    case RedOp::Sum: return "sum";
    case RedOp::Prod: return "prod";
    case RedOp::Max: return "max";
    case RedOp::Min: return "min";
    case RedOp::Avg: return "avg";
    case RedOp::None: return "none";
  }
  return "?";
}

std::optional<DataType> parse_type(std::string_view name) {
  for (int i = 0; i < kNumDataTypes; ++i)
    if (kTypes[i].name == name) return static_cast<DataType>(i);
  struct Alias {
    std::string_view name;
    DataType type;
  };
  static constexpr Alias aliases[] = {
      {"char", DataType::Int8},      {"int", DataType::Int32},     {"half", DataType::Float16},
      {"fp16", DataType::Float16},   {"float", DataType::Float32}, {"fp32", DataType::Float32},
      {"double", DataType::Float64}, {"fp64", DataType::Float64},  {"bf16", DataType::Bfloat16},
      {"uint", DataType::Uint32},
  };
  for (const auto& a : aliases)
    if (a.name == name) return a.type;
  return std::nullopt;
}

std::optional<RedOp> parse_op(std::string_view name) {
  for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg})
    if (op_name(op) == name) return op;
  return std::nullopt;
}

// The checker's own conversions, written independently of the library's (arithmetic rounding, not bit tricks), so
// that a rounding bug in the library cannot hide in the reference. NaN: quiet, sign kept; overflow: infinity.
namespace {

// a (>= 0) rounded to a multiple of 2^q_exp, ties to even (the default rounding mode); exact in double.
double round_to_quantum(double a, int q_exp) { return std::ldexp(std::nearbyint(std::ldexp(a, -q_exp)), q_exp); }

int floor_log2(double a) {  // a > 0
  int e = 0;
  std::frexp(a, &e);
  return e - 1;
}

}  // namespace

uint16_t float_to_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  if (std::isnan(f)) return sign | 0x7e00u;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00u;  // 65520 = 65504 + half a step: rounds to infinity
  if (a == 0) return sign;
  if (a < 0x1p-14) return sign | static_cast<uint16_t>(std::ldexp(round_to_quantum(a, -24), 24));  // subnormal
  const int e = floor_log2(a);
  const double m = std::ldexp(round_to_quantum(a, e - 10), -e);  // in [1, 2], rounded to 10 fraction bits
  // m == 2 (rounded up into the next binade) carries into the exponent field, which is the right encoding.
  return sign | static_cast<uint16_t>(((e + 15) << 10) + static_cast<int>(std::ldexp(m - 1, 10)));
}

float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const bool negative = (h & 0x8000u) != 0;
  if (exp == 0x1f)  // infinity, or NaN with its payload kept
    return std::bit_cast<float>((negative ? 0x80000000u : 0u) | 0x7f800000u | (static_cast<uint32_t>(mant) << 13));
  const double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return static_cast<float>(negative ? -v : v);
}

uint16_t float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet, payload's top bits kept
  const double a = std::fabs(static_cast<double>(f));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if (a == 0 || std::isinf(f)) return static_cast<uint16_t>(bits >> 16);
  // 8 significant bits; float's subnormals (below 2^-126) have a fixed quantum of 2^-133.
  const double r = round_to_quantum(a, std::max(floor_log2(a), -126) - 7);
  if (r >= 0x1p128) return sign | 0x7f80u;
  return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(r)) >> 16);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace dfccl::harness
