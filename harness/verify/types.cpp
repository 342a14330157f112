#include "types.h"

#include "../../kernels/core/primitives/reduce.h"

#include <array>
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

// The conversions are the library's own (kernels/core/primitives/reduce.h): one implementation of the rounding.
uint16_t float_to_half(float f) { return core::to_f16(f).bits; }
float half_to_float(uint16_t h) { return core::to_float(core::f16{h}); }
uint16_t float_to_bf16(float f) { return core::to_bf16(f).bits; }
float bf16_to_float(uint16_t b) { return core::to_float(core::bf16{b}); }

}  // namespace dfccl::harness
