#include "verifiable.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace dfccl::harness::verify {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t element_hash(uint64_t seed, int rank, uint64_t index) {
  uint64_t h = splitmix64(seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(rank + 1)));
  return splitmix64(h ^ index);
}

// Largest value a sum of nranks generated values may reach and stay exact in the type and not wrap.
int64_t sum_cap(DataType t) {
  switch (t) {
    case DataType::Int8: return 127;
    case DataType::Uint8: return 127;  // stays clear of the poison byte 0xA5
    case DataType::Float16: return 2048;
    case DataType::Bfloat16: return 256;
    case DataType::Int32:
    case DataType::Uint32:
    case DataType::Float32: return int64_t{1} << 24;
    case DataType::Int64:
    case DataType::Uint64:
    case DataType::Float64: return int64_t{1} << 40;
  }
  return 1;
}

// [lo, hi) for max/min and copies.
void minmax_range(DataType t, int64_t& lo, int64_t& hi) {
  switch (t) {
    case DataType::Int8:
      lo = -64;
      hi = 64;
      return;  // 8-bit ranges stay clear of the poison byte 0xA5
    case DataType::Uint8:
      lo = 0;
      hi = 128;
      return;
    case DataType::Float16:
      lo = -2048;
      hi = 2048;
      return;
    case DataType::Bfloat16:
      lo = -256;
      hi = 256;
      return;
    case DataType::Uint32:
    case DataType::Uint64:
      lo = 0;
      hi = int64_t{1} << 20;
      return;
    default:
      lo = -(int64_t{1} << 20);
      hi = int64_t{1} << 20;
      return;
  }
}

int64_t input_int(const Params& p, int rank, uint64_t index) {
  uint64_t h = element_hash(p.seed, rank, index);
  switch (p.op) {
    case RedOp::Sum:
    case RedOp::Avg: {
      int64_t limit = std::max<int64_t>(1, sum_cap(p.type) / std::max(1, p.nranks));
      return static_cast<int64_t>(h % static_cast<uint64_t>(limit));
    }
    case RedOp::Prod: {
      if (p.type == DataType::Float16 && rank >= 14) return 1;  // keeps every product <= 2^14
      return (h & 3u) == 0 ? 2 : 1;
    }
    case RedOp::Max:
    case RedOp::Min:
    case RedOp::None: {
      int64_t lo, hi;
      minmax_range(p.type, lo, hi);
      return lo + static_cast<int64_t>(h % static_cast<uint64_t>(hi - lo));
    }
  }
  return 0;
}

// Storage types: the 16-bit floats are tagged wrappers.
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

template <class T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, Bf16>;

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) return Half{float_to_half(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, Bf16>) return Bf16{float_to_bf16(static_cast<float>(v))};
  else return static_cast<T>(v);
}

template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_to_float(v.bits);
  else if constexpr (std::is_same_v<T, Bf16>) return bf16_to_float(v.bits);
  else return static_cast<double>(v);
}

template <class T>
int mantissa_bits() {
  if constexpr (std::is_same_v<T, Half>) return 10;
  else if constexpr (std::is_same_v<T, Bf16>) return 7;
  else if constexpr (std::is_same_v<T, float>) return 23;
  else return 52;
}

template <class T>
int min_exponent() {  // exponent of the smallest normal number
  if constexpr (std::is_same_v<T, Half>) return -14;
  else if constexpr (std::is_same_v<T, Bf16>) return -126;
  else if constexpr (std::is_same_v<T, float>) return -126;
  else return -1022;
}

template <class T>
double ulp(double x) {
  int e = 0;
  if (x != 0) {
    std::frexp(x, &e);
    e -= 1;
  }
  e = std::max(e, min_exponent<T>());
  return std::ldexp(1.0, e - mantissa_bits<T>());
}

// Integer reduction with the type's own wrap-around.
template <class T>
T reduce_int(const Params& p, uint64_t index) {
  using U = std::make_unsigned_t<T>;
  T acc = static_cast<T>(input_int(p, 0, index));
  for (int r = 1; r < p.nranks; ++r) {
    T v = static_cast<T>(input_int(p, r, index));
    switch (p.op) {
      case RedOp::Sum:
      case RedOp::Avg: acc = static_cast<T>(static_cast<U>(acc) + static_cast<U>(v)); break;
      case RedOp::Prod: acc = static_cast<T>(static_cast<U>(acc) * static_cast<U>(v)); break;
      case RedOp::Max: acc = std::max(acc, v); break;
      case RedOp::Min: acc = std::min(acc, v); break;
      case RedOp::None: break;
    }
  }
  if (p.op == RedOp::Avg) acc = static_cast<T>(acc / static_cast<T>(p.nranks));
  return acc;
}

double reduce_double(const Params& p, uint64_t index) {
  double acc = static_cast<double>(input_int(p, 0, index));
  for (int r = 1; r < p.nranks; ++r) {
    double v = static_cast<double>(input_int(p, r, index));
    switch (p.op) {
      case RedOp::Sum:
      case RedOp::Avg: acc += v; break;
      case RedOp::Prod: acc *= v; break;
      case RedOp::Max: acc = std::max(acc, v); break;
      case RedOp::Min: acc = std::min(acc, v); break;
      case RedOp::None: break;
    }
  }
  if (p.op == RedOp::Avg) acc /= p.nranks;
  return acc;
}

template <class F>
auto dispatch(DataType t, F&& f) {
  switch (t) {
    case DataType::Int8: return f(int8_t{});
    case DataType::Uint8: return f(uint8_t{});
    case DataType::Int32: return f(int32_t{});
    case DataType::Uint32: return f(uint32_t{});
    case DataType::Int64: return f(int64_t{});
    case DataType::Uint64: return f(uint64_t{});
    case DataType::Float16: return f(Half{});
    case DataType::Float32: return f(float{});
    case DataType::Float64: return f(double{});
    case DataType::Bfloat16: return f(Bf16{});
  }
  return f(float{});
}

template <class T>
bool same(T got, T want, bool tolerant) {
  if constexpr (kIsFloat<T>) {
    double g = to_double(got), w = to_double(want);
    if (std::isnan(g) || std::isnan(w)) return false;
    if (!tolerant) return g == w;
    return std::fabs(g - w) <= 2 * ulp<T>(w);
  } else {
    return got == want;
  }
}

}  // namespace

double input_value(const Params& p, int rank, uint64_t index) { return static_cast<double>(input_int(p, rank, index)); }

double reduced_value(const Params& p, uint64_t index) {
  return dispatch(p.type, [&](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (kIsFloat<T>) return reduce_double(p, index);
    else return static_cast<double>(reduce_int<T>(p, index));
  });
}

void fill_input(void* dst, size_t count, const Params& p, int rank, uint64_t index_offset) {
  dispatch(p.type, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dst);
    for (size_t i = 0; i < count; ++i) {
      int64_t v = input_int(p, rank, index_offset + i);
      if constexpr (kIsFloat<T>) out[i] = from_double<T>(static_cast<double>(v));
      else out[i] = static_cast<T>(v);
    }
    return 0;
  });
}

int64_t count_wrong_reduced(const void* got, size_t count, const Params& p, uint64_t index_offset) {
  return dispatch(p.type, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(got);
    bool tolerant = kIsFloat<T> && p.op == RedOp::Avg;
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      T want;
      if constexpr (kIsFloat<T>) want = from_double<T>(reduce_double(p, index_offset + i));
      else want = reduce_int<T>(p, index_offset + i);
      T have;
      std::memcpy(&have, in + i, sizeof(T));
      if (!same(have, want, tolerant)) ++wrong;
    }
    return wrong;
  });
}

int64_t count_wrong_copy(const void* got, size_t count, const Params& p, int src_rank, uint64_t index_offset) {
  return dispatch(p.type, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(got);
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      int64_t v = input_int(p, src_rank, index_offset + i);
      T want;
      if constexpr (kIsFloat<T>) want = from_double<T>(static_cast<double>(v));
      else want = static_cast<T>(v);
      T have;
      std::memcpy(&have, in + i, sizeof(T));
      if (!same(have, want, false)) ++wrong;
    }
    return wrong;
  });
}

}  // namespace dfccl::harness::verify
