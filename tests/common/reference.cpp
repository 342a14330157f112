#include "reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "../../kernels/core/primitives/reduce.h"

namespace dfccl::test {
namespace {

constexpr uint8_t kPoison = 0xA5;

template <class F>
void with_type(dfcclDataType_t t, F&& f) {
  switch (t) {
    case dfcclInt8: f(int8_t{}); break;
    case dfcclUint8: f(uint8_t{}); break;
    case dfcclInt32: f(int32_t{}); break;
    case dfcclUint32: f(uint32_t{}); break;
    case dfcclInt64: f(int64_t{}); break;
    case dfcclUint64: f(uint64_t{}); break;
    case dfcclFloat16: f(core::f16{}); break;
    case dfcclFloat32: f(float{}); break;
    case dfcclFloat64: f(double{}); break;
    case dfcclBfloat16: f(core::bf16{}); break;
    default: throw std::invalid_argument("bad type");
  }
}

bool is_unsigned(dfcclDataType_t t) { return t == dfcclUint8 || t == dfcclUint32 || t == dfcclUint64; }

// Stores an exactly representable value (integers: wrapped modulo 2^bits) as type T.
template <class T>
void store(void* out, double v) {
  T x;
  if constexpr (std::is_same_v<T, core::f16>) x = core::to_f16(float(v));
  else if constexpr (std::is_same_v<T, core::bf16>) x = core::to_bf16(float(v));
  else if constexpr (std::is_floating_point_v<T>) x = T(v);
  else x = T(uint64_t(int64_t(v)));
  std::memcpy(out, &x, sizeof(T));
}

// Runs f(begin, end) over [0, n) on several threads when n is large (the GPU cases have 64 Mi elements).
template <class F>
void parallel_for(size_t n, F&& f) {
  const size_t kSerial = size_t(1) << 20;
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), 32);
  if (n <= kSerial || threads == 1) {
    f(size_t(0), n);
    return;
  }
  std::vector<std::thread> ts;
  const size_t per = (n + threads - 1) / threads;
  for (size_t k = 0; k < threads; ++k) {
    const size_t b = std::min(n, k * per), e = std::min(n, b + per);
    if (b < e) ts.emplace_back([&f, b, e] { f(b, e); });
  }
  for (auto& t : ts) t.join();
}

}  // namespace

const char* coll_name(Coll c) {
  static const char* names[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"};
  return names[int(c)];
}
const char* type_name(dfcclDataType_t t) {
  static const char* names[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                "uint64", "float16", "float32", "float64", "bfloat16"};
  return names[int(t)];
}
const char* op_name(dfcclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[int(op)];
}
size_t type_size(dfcclDataType_t t) { return core::dtype_size(core::DType(t)); }

double input_value(dfcclRedOp_t op, dfcclDataType_t t, int rank, uint64_t index) {
  const uint64_t r = uint64_t(rank), i = index;
  switch (op) {
    case dfcclSum:
    case dfcclAvg: return double((r * 7 + i * 13 + 3) & 15);  // 0..15: sums of up to 8 ranks stay exact in every type
    case dfcclProd:
      return ((r + i * 5) & 3) == 0 ? 2.0 : 1.0;  // products up to 2^8: exact in floats, wrap in 8-bit integers
    default: {
      const double v = double((r * 29 + i * 17 + (i >> 4)) & 31);
      return is_unsigned(t) ? v : v - 16.0;
    }
  }
}

void fill_input(void* dst, size_t count, dfcclRedOp_t op, dfcclDataType_t t, int rank, uint64_t first) {
  with_type(t, [&](auto tag) {
    using T = decltype(tag);
    auto* p = static_cast<uint8_t*>(dst);
    parallel_for(count, [&](size_t b, size_t e) {
      for (size_t k = b; k < e; ++k) store<T>(p + k * sizeof(T), input_value(op, t, rank, first + k));
    });
  });
}

template <class T>
T reduce_expected(dfcclRedOp_t op, dfcclDataType_t t, int nranks, uint64_t index) {
  T out;
  if (op == dfcclProd) {
    uint64_t prod = 1;  // exact, and wrapping like the integer types
    for (int r = 0; r < nranks; ++r) prod *= uint64_t(input_value(op, t, r, index));
    store<T>(&out, double(prod));
    return out;
  }
  if (op == dfcclMax || op == dfcclMin) {
    double best = input_value(op, t, 0, index);
    for (int r = 1; r < nranks; ++r) {
      const double v = input_value(op, t, r, index);
      best = op == dfcclMax ? std::max(best, v) : std::min(best, v);
    }
    store<T>(&out, best);
    return out;
  }
  double sum = 0;
  for (int r = 0; r < nranks; ++r) sum += input_value(op, t, r, index);
  if (op == dfcclSum || nranks == 1) {
    store<T>(&out, sum);
    return out;
  }
  // avg: the exact sum in the type, then one division in the type's compute precision.
  if constexpr (std::is_same_v<T, core::f16> || std::is_same_v<T, core::bf16>) {
    store<T>(&out, double(float(sum) / float(nranks)));
  } else if constexpr (std::is_same_v<T, float>) {
    out = float(sum) / float(nranks);
  } else if constexpr (std::is_same_v<T, double>) {
    out = sum / double(nranks);
  } else {
    out = T(T(int64_t(sum)) / T(nranks));
  }
  return out;
}

void expected_reduced(void* out, dfcclRedOp_t op, dfcclDataType_t t, int nranks, uint64_t index) {
  with_type(t, [&](auto tag) {
    using T = decltype(tag);
    const T v = reduce_expected<T>(op, t, nranks, index);
    std::memcpy(out, &v, sizeof(T));
  });
}

std::string describe(const Case& c, int nranks) {
  return std::string(coll_name(c.coll)) + " " + type_name(c.type) + " " + op_name(c.op) +
         " count=" + std::to_string(c.count) + " root=" + std::to_string(c.root) +
         (c.in_place ? " in-place" : " out-of-place") + " nranks=" + std::to_string(nranks);
}

// Sizes in elements of each rank's send and receive buffers.
static void sizes(const Case& c, int n, size_t& send, size_t& recv) {
  switch (c.coll) {
    case Coll::AllGather:
      send = c.count;
      recv = c.count * size_t(n);
      break;
    case Coll::ReduceScatter:
      send = c.count * size_t(n);
      recv = c.count;
      break;
    default:
      send = c.count;
      recv = c.count;
      break;
  }
}

static dfcclRedOp_t input_op(const Case& c) {
  return (c.coll == Coll::AllGather || c.coll == Coll::Broadcast) ? dfcclMax : c.op;
}

Buffers::Buffers(const Case& c, int nranks) : c_(c), n_(nranks) {
  const size_t es = type_size(c.type);
  size_t ns = 0, nr = 0;
  sizes(c, nranks, ns, nr);
  send_.resize(size_t(nranks));
  recv_.resize(size_t(nranks));
  for (int r = 0; r < nranks; ++r) {
    recv_[size_t(r)].assign(std::max<size_t>(nr, 1) * es, kPoison);
    if (c.in_place) {
      // The input lives inside the output buffer, where the collective's in-place rule puts it.
      uint8_t* base = recv_[size_t(r)].data();
      switch (c.coll) {
        case Coll::AllGather: fill_input(base + size_t(r) * c.count * es, c.count, input_op(c), c.type, r, 0); break;
        case Coll::ReduceScatter:
          recv_[size_t(r)].assign(std::max<size_t>(ns, 1) * es, kPoison);
          fill_input(recv_[size_t(r)].data(), ns, input_op(c), c.type, r, 0);
          break;
        default: fill_input(base, c.count, input_op(c), c.type, r, 0); break;
      }
    } else {
      send_[size_t(r)].assign(std::max<size_t>(ns, 1) * es, 0);
      fill_input(send_[size_t(r)].data(), ns, input_op(c), c.type, r, 0);
    }
  }
}

size_t Buffers::send_offset(int rank) const {
  const uint8_t* base = c_.in_place ? recv_[size_t(rank)].data() : send_[size_t(rank)].data();
  return size_t(static_cast<const uint8_t*>(send(rank)) - base);
}

size_t Buffers::recv_offset(int rank) const {
  return size_t(static_cast<const uint8_t*>(const_cast<Buffers*>(this)->recv(rank)) - recv_[size_t(rank)].data());
}

const void* Buffers::send(int rank) const {
  const size_t es = type_size(c_.type);
  if (!c_.in_place) return send_[size_t(rank)].data();
  const uint8_t* base = recv_[size_t(rank)].data();
  if (c_.coll == Coll::AllGather) return base + size_t(rank) * c_.count * es;
  return base;  // ReduceScatter: the whole input; others: the buffer itself
}

void* Buffers::recv(int rank) {
  const size_t es = type_size(c_.type);
  uint8_t* base = recv_[size_t(rank)].data();
  if (c_.in_place && c_.coll == Coll::ReduceScatter) return base + size_t(rank) * c_.count * es;
  return base;
}

size_t Buffers::wrong(int rank) const {
  const size_t es = type_size(c_.type);
  const uint8_t* out = static_cast<const uint8_t*>(const_cast<Buffers*>(this)->recv(rank));
  size_t bad = 0;
  with_type(c_.type, [&](auto tag) {
    using T = decltype(tag);
    auto same = [&](const uint8_t* got, const T& want) { return std::memcmp(got, &want, sizeof(T)) == 0; };
    T want;
    switch (c_.coll) {
      case Coll::AllReduce:
      case Coll::ReduceScatter: {
        const uint64_t first = c_.coll == Coll::ReduceScatter ? uint64_t(rank) * c_.count : 0;
        std::atomic<size_t> wrong{0};
        parallel_for(c_.count, [&](size_t b, size_t e) {
          size_t local = 0;
          for (size_t i = b; i < e; ++i) {
            const T w = reduce_expected<T>(c_.op, c_.type, n_, first + i);
            local += std::memcmp(out + i * es, &w, sizeof(T)) != 0;
          }
          wrong += local;
        });
        bad += wrong;
        break;
      }
      case Coll::Reduce:
        for (size_t i = 0; i < c_.count; ++i) {
          if (rank == c_.root) want = reduce_expected<T>(c_.op, c_.type, n_, i);
          else if (c_.in_place) store<T>(&want, input_value(c_.op, c_.type, rank, i));  // non-root: left alone
          else std::memset(&want, kPoison, sizeof(T));
          bad += !same(out + i * es, want);
        }
        break;
      case Coll::AllGather:
        for (int p = 0; p < n_; ++p)
          for (size_t i = 0; i < c_.count; ++i) {
            store<T>(&want, input_value(dfcclMax, c_.type, p, i));
            bad += !same(out + (size_t(p) * c_.count + i) * es, want);
          }
        break;
      case Coll::Broadcast:
        for (size_t i = 0; i < c_.count; ++i) {
          store<T>(&want, input_value(dfcclMax, c_.type, c_.root, i));
          bad += !same(out + i * es, want);
        }
        break;
    }
  });
  return bad;
}

}  // namespace dfccl::test
