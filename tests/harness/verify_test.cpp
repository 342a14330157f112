// Exact-check data: for every data type, operator and rank count 2..8, the expected results are exactly what a
// reduction in any order produces, and a wrong element is counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "colls/collective.h"
#include "verify/verifiable.h"

using namespace dfccl::harness;
using namespace dfccl::harness::verify;

namespace {

// A reduction the way a library might do it: element by element, in the type itself, in a given rank order.
template <class T, class Load, class Store>
void reduce_in_type(std::vector<std::vector<char>>& inputs, std::vector<char>& out, size_t count, RedOp op,
                    const std::vector<int>& order, Load load, Store store) {
  for (size_t i = 0; i < count; ++i) {
    T acc;
    std::memcpy(&acc, inputs[order[0]].data() + i * sizeof(T), sizeof(T));
    for (size_t k = 1; k < order.size(); ++k) {
      T v;
      std::memcpy(&v, inputs[order[k]].data() + i * sizeof(T), sizeof(T));
      acc = store(op, load(acc), load(v));
    }
    if (op == RedOp::Avg) acc = store(RedOp::None, load(acc) / static_cast<double>(order.size()), 0);
    std::memcpy(out.data() + i * sizeof(T), &acc, sizeof(T));
  }
}

double apply(RedOp op, double a, double b) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: return a + b;
    case RedOp::Prod: return a * b;
    case RedOp::Max: return std::max(a, b);
    case RedOp::Min: return std::min(a, b);
    case RedOp::None: return a;
  }
  return a;
}

// Floating-point reduction rounding to the type after every step.
std::vector<char> reduce_float(DataType t, std::vector<std::vector<char>>& inputs, size_t count, RedOp op,
                               const std::vector<int>& order) {
  std::vector<char> out(count * type_size(t));
  if (t == DataType::Float16 || t == DataType::Bfloat16) {
    auto load = [t](uint16_t v) {
      return static_cast<double>(t == DataType::Float16 ? half_to_float(v) : bf16_to_float(v));
    };
    auto store = [t](RedOp o, double a, double b) {
      float r = static_cast<float>(apply(o, a, b));
      return t == DataType::Float16 ? float_to_half(r) : float_to_bf16(r);
    };
    reduce_in_type<uint16_t>(inputs, out, count, op, order, load, store);
  } else if (t == DataType::Float32) {
    reduce_in_type<float>(
        inputs, out, count, op, order, [](float v) { return double(v); },
        [](RedOp o, double a, double b) { return static_cast<float>(static_cast<float>(apply(o, a, b))); });
  } else {
    reduce_in_type<double>(
        inputs, out, count, op, order, [](double v) { return v; },
        [](RedOp o, double a, double b) { return apply(o, a, b); });
  }
  return out;
}

template <class T>
std::vector<char> reduce_int(std::vector<std::vector<char>>& inputs, size_t count, RedOp op,
                             const std::vector<int>& order) {
  std::vector<char> out(count * sizeof(T));
  using U = std::make_unsigned_t<T>;
  for (size_t i = 0; i < count; ++i) {
    T acc;
    std::memcpy(&acc, inputs[order[0]].data() + i * sizeof(T), sizeof(T));
    for (size_t k = 1; k < order.size(); ++k) {
      T v;
      std::memcpy(&v, inputs[order[k]].data() + i * sizeof(T), sizeof(T));
      switch (op) {
        case RedOp::Sum:
        case RedOp::Avg: acc = static_cast<T>(static_cast<U>(acc) + static_cast<U>(v)); break;
        case RedOp::Prod: acc = static_cast<T>(static_cast<U>(acc) * static_cast<U>(v)); break;
        case RedOp::Max: acc = std::max(acc, v); break;
        case RedOp::Min: acc = std::min(acc, v); break;
        case RedOp::None: break;
      }
    }
    if (op == RedOp::Avg) acc = static_cast<T>(acc / static_cast<T>(order.size()));
    std::memcpy(out.data() + i * sizeof(T), &acc, sizeof(T));
  }
  return out;
}

std::vector<char> reduce_any(DataType t, std::vector<std::vector<char>>& inputs, size_t count, RedOp op,
                             const std::vector<int>& order) {
  switch (t) {
    case DataType::Int8: return reduce_int<int8_t>(inputs, count, op, order);
    case DataType::Uint8: return reduce_int<uint8_t>(inputs, count, op, order);
    case DataType::Int32: return reduce_int<int32_t>(inputs, count, op, order);
    case DataType::Uint32: return reduce_int<uint32_t>(inputs, count, op, order);
    case DataType::Int64: return reduce_int<int64_t>(inputs, count, op, order);
    case DataType::Uint64: return reduce_int<uint64_t>(inputs, count, op, order);
    default: return reduce_float(t, inputs, count, op, order);
  }
}

}  // namespace

TEST(Verify, HalfAndBfloat16ConversionsRoundTripSmallIntegers) {
  for (int v = -2048; v <= 2048; ++v) EXPECT_EQ(half_to_float(float_to_half(float(v))), float(v)) << v;
  for (int v = -256; v <= 256; ++v) EXPECT_EQ(bf16_to_float(float_to_bf16(float(v))), float(v)) << v;
  EXPECT_EQ(half_to_float(float_to_half(0.1f)), 0.0999755859375f);  // round to nearest even
  EXPECT_EQ(float_to_half(65504.f), 0x7bffu);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00u);  // overflow -> inf
}

// The verifier's own conversions at the edges: ties to even, subnormals, the overflow threshold, NaN and infinity.
TEST(Verify, HalfAndBfloat16ConversionsRoundAtTheEdges) {
  EXPECT_EQ(float_to_half(2049.f), 0x6800u);        // tie between 2048 and 2050: even (2048)
  EXPECT_EQ(float_to_half(2051.f), 0x6802u);        // tie between 2050 and 2052: even (2052)
  EXPECT_EQ(float_to_half(65519.f), 0x7bffu);       // below the threshold: the largest finite half
  EXPECT_EQ(float_to_half(65520.f), 0x7c00u);       // the threshold: infinity
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001u);      // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000u);      // tie with zero: even (zero)
  EXPECT_EQ(float_to_half(0x1.8p-25f), 0x0001u);    // above the tie
  EXPECT_EQ(float_to_half(0x1.ffcp-15f), 0x0400u);  // rounds up into the smallest normal
  EXPECT_EQ(float_to_half(-0.f), 0x8000u);
  EXPECT_EQ(float_to_half(-INFINITY), 0xfc00u);
  EXPECT_EQ(float_to_half(NAN) & 0x7e00u, 0x7e00u);  // a quiet NaN
  EXPECT_EQ(half_to_float(0x0001u), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x8400u), -0x1p-14f);
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00u)));
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80u);      // 1 + 2^-8: tie, even (1)
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82u);      // 1 + 3 * 2^-8: tie, even (1 + 2^-6)
  EXPECT_EQ(float_to_bf16(0x1.fffffep127f), 0x7f80u);  // the largest float rounds to infinity
  EXPECT_EQ(float_to_bf16(0x1p-149f), 0x0000u);        // below half a bf16 subnormal step
  EXPECT_EQ(float_to_bf16(0x1.fep-127f), 0x0080u);     // a float subnormal rounding up to 2^-126
  EXPECT_EQ(float_to_bf16(NAN) & 0x7fc0u, 0x7fc0u);
  EXPECT_EQ(bf16_to_float(0xc040u), -3.0f);
}

// Every type, every operator, 2..8 ranks, several reduction orders: the check counts zero wrong elements on what
// an exact in-type reduction produces, and finds a planted error.
TEST(Verify, ReductionsAreExactForEveryTypeOpAndRankCount) {
  const size_t count = 777;
  std::mt19937 gen(7);
  for (int t = 0; t < kNumDataTypes; ++t) {
    auto type = static_cast<DataType>(t);
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg}) {
      for (int n = 2; n <= 8; ++n) {
        Params p{type, op, n, 1234u + static_cast<uint64_t>(n)};
        std::vector<std::vector<char>> inputs(n, std::vector<char>(count * type_size(type)));
        for (int r = 0; r < n; ++r) fill_input(inputs[r].data(), count, p, r, 0);
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        for (int attempt = 0; attempt < 3; ++attempt) {
          std::shuffle(order.begin(), order.end(), gen);
          auto out = reduce_any(type, inputs, count, op, order);
          EXPECT_EQ(count_wrong_reduced(out.data(), count, p, 0), 0)
              << type_name(type) << " " << op_name(op) << " n=" << n;
        }
        auto out = reduce_any(type, inputs, count, op, order);
        std::memset(out.data() + 5 * type_size(type), verify::kPoisonByte, type_size(type));
        EXPECT_EQ(count_wrong_reduced(out.data(), count, p, 0), 1) << type_name(type) << " " << op_name(op);
      }
    }
  }
}

TEST(Verify, CollectivesCheckTheirOwnExpectedLayout) {
  const int n = 4;
  const size_t count = 100;
  for (const Collective* c : all_collectives()) {
    Params p = verify_params(*c, DataType::Float32, RedOp::Sum, n, 99);
    std::vector<std::vector<char>> send(n, std::vector<char>(c->send_elems(count, n) * 4));
    for (int r = 0; r < n; ++r) c->fill_send(send[r].data(), count, n, r, 1, p);
    for (int r = 0; r < n; ++r) {
      // Build the correct output for rank r by hand, from the inputs.
      std::vector<float> out(c->recv_elems(count, n), 0.f);
      auto in = [&](int src, size_t i) {
        float v;
        std::memcpy(&v, send[src].data() + i * 4, 4);
        return v;
      };
      for (size_t i = 0; i < out.size(); ++i) {
        switch (c->kind) {
          case CollKind::AllReduce:
          case CollKind::Reduce:
            for (int s = 0; s < n; ++s) out[i] += in(s, i);
            break;
          case CollKind::ReduceScatter:
            for (int s = 0; s < n; ++s) out[i] += in(s, r * count + i);
            break;
          case CollKind::AllGather: out[i] = in(static_cast<int>(i / count), i % count); break;
          case CollKind::Broadcast:
          case CollKind::P2p: out[i] = in(1, i); break;  // root 1: p2p's sender
          case CollKind::SendRecv: out[i] = in((r + n - 1) % n, i); break;
          case CollKind::AllToAll: out[i] = in(static_cast<int>(i / count), r * count + i % count); break;
        }
      }
      EXPECT_EQ(c->check_recv(out.data(), count, n, r, 1, p), 0) << c->name << " rank " << r;
      out[3] += 1;
      int64_t want = c->kind == CollKind::Reduce && r != 1 ? 0 : 1;
      EXPECT_EQ(c->check_recv(out.data(), count, n, r, 1, p), want) << c->name << " rank " << r;
    }
  }
}

TEST(Verify, PoisonIsNeverAValidResult) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    auto type = static_cast<DataType>(t);
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg, RedOp::None}) {
      Params p{type, op, 4, 5};
      std::vector<char> poison(64 * type_size(type), static_cast<char>(kPoisonByte));
      if (op == RedOp::None) EXPECT_EQ(count_wrong_copy(poison.data(), 64, p, 0, 0), 64) << type_name(type);
      else EXPECT_EQ(count_wrong_reduced(poison.data(), 64, p, 0), 64) << type_name(type) << op_name(op);
    }
  }
}
