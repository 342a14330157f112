// Element-wise reduction operators for every data type, identical on the host and the GPU.
//
// Semantics (the reference in tests/ and harness/verify/ follows the same rules):
//   - integers wrap (two's complement), so sum and prod are exact in any order;
//   - float16 and bfloat16 are computed in float32 and rounded to nearest-even after every operation;
//   - avg is a sum whose final value is divided once by the number of ranks (integers: C division, truncation
//     toward zero; floating types: in the type's compute precision, then rounded).
#pragma once

#include <cstring>
#include <type_traits>

#include "../desc.h"

namespace dfccl::core {

// The half types as their bits, and their exact conversions to and from float (round to nearest-even).
struct f16 {
  u16 bits;
};
struct bf16 {
  u16 bits;
};

DFCCL_HD DFCCL_FORCEINLINE u32 float_bits(float f) {
  u32 u;
  memcpy(&u, &f, 4);
  return u;
}
DFCCL_HD DFCCL_FORCEINLINE float bits_float(u32 u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

DFCCL_HD inline float to_float(f16 h) {
  u32 sign = u32(h.bits & 0x8000u) << 16;
  u32 exp = (h.bits >> 10) & 0x1fu;
  u32 mant = h.bits & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    int e = -14;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --e;
    }
    mant &= 0x3ffu;
    return bits_float(sign | (u32(e + 127) << 23) | (mant << 13));
  }
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

DFCCL_HD inline f16 to_f16(float f) {
  u32 x = float_bits(f);
  u32 sign = (x >> 16) & 0x8000u;
  u32 exp = (x >> 23) & 0xffu;
  u32 mant = x & 0x7fffffu;
  if (exp == 0xff) return f16{u16(sign | 0x7c00u | (mant ? 0x200u : 0u))};
  int e = int(exp) - 127 + 15;
  if (e >= 0x1f) return f16{u16(sign | 0x7c00u)};
  if (e <= 0) {
    if (e < -10) return f16{u16(sign)};
    mant |= 0x800000u;
    u32 shift = u32(14 - e);
    u32 h = mant >> shift;
    u32 rem = mant & ((1u << shift) - 1u);
    u32 halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return f16{u16(sign | h)};
  }
  u32 h = (u32(e) << 10) | (mant >> 13);
  u32 rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is the right result
  return f16{u16(sign | h)};
}

DFCCL_HD inline float to_float(bf16 b) { return bits_float(u32(b.bits) << 16); }

DFCCL_HD inline bf16 to_bf16(float f) {
  u32 x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return bf16{u16((x >> 16) | 0x40u)};  // NaN stays NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return bf16{u16(x >> 16)};
}

// Reducer<T, OP>::apply(a, b) and ::finish(v, n) (the avg division; identity for the other operators).
template <class T, RedOp OP>
struct Reducer {
  using U = std::make_unsigned_t<T>;  // integers wrap: compute in the unsigned twin
  DFCCL_HD static DFCCL_FORCEINLINE T apply(T a, T b) {
    if constexpr (OP == RedOp::Sum || OP == RedOp::Avg) return T(U(U(a) + U(b)));
    if constexpr (OP == RedOp::Prod) return T(U(U(a) * U(b)));
    if constexpr (OP == RedOp::Max) return a < b ? b : a;
    if constexpr (OP == RedOp::Min) return b < a ? b : a;
  }
  DFCCL_HD static DFCCL_FORCEINLINE T finish(T v, int n) {
    if constexpr (OP == RedOp::Avg) return T(v / T(n));
    return v;
  }
};

// Floating types compute in their own precision; half types compute in float and round after every operation.
template <class F, RedOp OP>
struct FloatReducer {
  DFCCL_HD static DFCCL_FORCEINLINE F apply(F a, F b) {
    if constexpr (OP == RedOp::Sum || OP == RedOp::Avg) return a + b;
    if constexpr (OP == RedOp::Prod) return a * b;
    if constexpr (OP == RedOp::Max) return a < b ? b : a;  // NaN handling follows the comparison, as in NCCL
    if constexpr (OP == RedOp::Min) return b < a ? b : a;
  }
  DFCCL_HD static DFCCL_FORCEINLINE F finish(F v, int n) {
    if constexpr (OP == RedOp::Avg) return v / F(n);
    return v;
  }
};
template <RedOp OP>
struct Reducer<float, OP> : FloatReducer<float, OP> {};
template <RedOp OP>
struct Reducer<double, OP> : FloatReducer<double, OP> {};

DFCCL_HD DFCCL_FORCEINLINE f16 from_float(float f, f16) { return to_f16(f); }
DFCCL_HD DFCCL_FORCEINLINE bf16 from_float(float f, bf16) { return to_bf16(f); }

template <class H, RedOp OP>
struct HalfReducer {
  DFCCL_HD static DFCCL_FORCEINLINE H round(float f) { return from_float(f, H{}); }
  DFCCL_HD static DFCCL_FORCEINLINE H apply(H a, H b) {
    return round(FloatReducer<float, OP>::apply(to_float(a), to_float(b)));
  }
  DFCCL_HD static DFCCL_FORCEINLINE H finish(H v, int n) {
    if constexpr (OP == RedOp::Avg) return round(to_float(v) / float(n));
    return v;
  }
};
template <RedOp OP>
struct Reducer<f16, OP> : HalfReducer<f16, OP> {};
template <RedOp OP>
struct Reducer<bf16, OP> : HalfReducer<bf16, OP> {};

// Calls f.template operator()<T, OP>() for the run-time (dtype, op) pair.
template <class F>
DFCCL_HD DFCCL_FORCEINLINE void dispatch_dtype_op(DType t, RedOp op, F&& f) {
#define DFCCL_OPS(T)                                                  \
  switch (op) {                                                       \
    case RedOp::Sum: f.template operator()<T, RedOp::Sum>(); break;   \
    case RedOp::Prod: f.template operator()<T, RedOp::Prod>(); break; \
    case RedOp::Max: f.template operator()<T, RedOp::Max>(); break;   \
    case RedOp::Min: f.template operator()<T, RedOp::Min>(); break;   \
    case RedOp::Avg: f.template operator()<T, RedOp::Avg>(); break;   \
  }                                                                   \
  break;
  switch (t) {
    case DType::I8: DFCCL_OPS(int8_t)
    case DType::U8: DFCCL_OPS(uint8_t)
    case DType::I32: DFCCL_OPS(int32_t)
    case DType::U32: DFCCL_OPS(uint32_t)
    case DType::I64: DFCCL_OPS(int64_t)
    case DType::U64: DFCCL_OPS(uint64_t)
    case DType::F16: DFCCL_OPS(f16)
    case DType::F32: DFCCL_OPS(float)
    case DType::F64: DFCCL_OPS(double)
    case DType::BF16: DFCCL_OPS(bf16)
  }
#undef DFCCL_OPS
}

}  // namespace dfccl::core
