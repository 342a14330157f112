#include "types.h"

#include <array>
#include <bit>
#include <cstring>

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
      {"char", DataType::Int8},       {"int", DataType::Int32},       {"half", DataType::Float16},
      {"fp16", DataType::Float16},    {"float", DataType::Float32},   {"fp32", DataType::Float32},
      {"double", DataType::Float64},  {"fp64", DataType::Float64},    {"bf16", DataType::Bfloat16},
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

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf / nan
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (e <= 0) {                                               // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: still correct
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      out = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan stays nan
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace dfccl::harness
