// The data-moving loop of every primitive: all threads of a block move one slice together.
//
//   reduce_copy<X, T, OP>(in0, in1, out0, out1, n, divisor)
//     out0[i] (and out1[i] when out1 != nullptr) = finish(in1 ? OP(in0[i], in1[i]) : in0[i])
//     where finish divides by `divisor` for avg when divisor > 0.
//   copy_bytes<X>(in, out0, out1, bytes)
//
// Caller: every thread of the block, between two X::sync(). Result valid after the next X::sync().
// 16-byte vectors with 4 independent loads in flight per thread (8 for a plain copy, copy_bytes) when every pointer
// is 16-byte aligned; element by element otherwise.
#pragma once

#include "reduce.h"

// 16-byte loads in flight per thread in the vector loop (a build option: -DDFCCL_COPY_UNROLL=8).
#ifndef DFCCL_COPY_UNROLL
#define DFCCL_COPY_UNROLL 4
#endif

namespace dfccl::core {

struct alignas(16) Pack {  // 16 bytes, the unit of vector loads and stores
  u64 lo, hi;
};

// Whether p is 16-byte aligned; reduce_pack / finish_pack apply OP / the final step to a pack's elements.
DFCCL_HD DFCCL_FORCEINLINE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class T, RedOp OP>
DFCCL_HD DFCCL_FORCEINLINE Pack reduce_pack(Pack a, Pack b) {
  constexpr int kElems = 16 / sizeof(T);
  T x[kElems], y[kElems];
  memcpy(x, &a, 16);
  memcpy(y, &b, 16);
  DFCCL_UNROLL
  for (int e = 0; e < kElems; ++e) x[e] = Reducer<T, OP>::apply(x[e], y[e]);
  memcpy(&a, x, 16);
  return a;
}

template <class T, RedOp OP>
DFCCL_HD DFCCL_FORCEINLINE Pack finish_pack(Pack a, int divisor) {
  constexpr int kElems = 16 / sizeof(T);
  T x[kElems];
  memcpy(x, &a, 16);
  DFCCL_UNROLL
  for (int e = 0; e < kElems; ++e) x[e] = Reducer<T, OP>::finish(x[e], divisor);
  memcpy(&a, x, 16);
  return a;
}

// The vector loop over whole groups of kUnroll packs per thread; returns the first pack index it left to the caller.
template <class X, class T, RedOp OP, u64 kUnroll>
DFCCL_DEV DFCCL_FORCEINLINE u64 reduce_copy_groups(const Pack* a, const Pack* b, Pack* o0, Pack* o1, u64 npacks,
                                                   int divisor) {
  const u64 nt = X::nthreads();
  u64 i = X::tid();
  for (; i + (kUnroll - 1) * nt < npacks; i += kUnroll * nt) {
    Pack v[kUnroll];
    DFCCL_UNROLL
    for (u64 u = 0; u < kUnroll; ++u) v[u] = X::ld16(a + i + u * nt);
    if (b) {
      Pack w[kUnroll];
      DFCCL_UNROLL
      for (u64 u = 0; u < kUnroll; ++u) w[u] = X::ld16(b + i + u * nt);
      DFCCL_UNROLL
      for (u64 u = 0; u < kUnroll; ++u) v[u] = reduce_pack<T, OP>(v[u], w[u]);
    }
    if (divisor > 0) {
      DFCCL_UNROLL
      for (u64 u = 0; u < kUnroll; ++u) v[u] = finish_pack<T, OP>(v[u], divisor);
    }
    DFCCL_UNROLL
    for (u64 u = 0; u < kUnroll; ++u) X::st16(o0 + i + u * nt, v[u]);
    if (o1) {
      DFCCL_UNROLL
      for (u64 u = 0; u < kUnroll; ++u) X::st16(o1 + i + u * nt, v[u]);
    }
  }
  return i;
}

// Caller: every thread of the block (see the top of this file for the contract).
template <class X, class T, RedOp OP, u64 kUnroll = DFCCL_COPY_UNROLL>
DFCCL_DEV void reduce_copy(const T* in0, const T* in1, T* out0, T* out1, u64 n, int divisor) {
  const u64 tid = X::tid(), nt = X::nthreads();
  const bool vec = aligned16(in0) && (!in1 || aligned16(in1)) && aligned16(out0) && (!out1 || aligned16(out1));
  u64 done = 0;
  if (vec) {
    constexpr u64 kElems = 16 / sizeof(T);
    const u64 npacks = n / kElems;
    const Pack* a = reinterpret_cast<const Pack*>(in0);
    const Pack* b = reinterpret_cast<const Pack*>(in1);
    Pack* o0 = reinterpret_cast<Pack*>(out0);
    Pack* o1 = reinterpret_cast<Pack*>(out1);
    u64 i = reduce_copy_groups<X, T, OP, kUnroll>(a, b, o0, o1, npacks, divisor);
    for (; i < npacks; i += nt) {
      Pack v = X::ld16(a + i);
      if (b) v = reduce_pack<T, OP>(v, X::ld16(b + i));
      if (divisor > 0) v = finish_pack<T, OP>(v, divisor);
      X::st16(o0 + i, v);
      if (o1) X::st16(o1 + i, v);
    }
    done = npacks * kElems;
  }
  for (u64 i = done + tid; i < n; i += nt) {
    T v = in0[i];
    if (in1) v = Reducer<T, OP>::apply(v, in1[i]);
    if (divisor > 0) v = Reducer<T, OP>::finish(v, divisor);
    out0[i] = v;
    if (out1) out1[i] = v;
  }
}

// Caller: every thread of the block. A plain copy: the one-input case of reduce_copy on bytes (no operator applied),
// with twice the loads in flight, since the second input's registers are free.
template <class X>
DFCCL_DEV void copy_bytes(const void* in, void* out0, void* out1, u64 bytes) {
  reduce_copy<X, uint8_t, RedOp::Sum, 2 * DFCCL_COPY_UNROLL>(
      static_cast<const uint8_t*>(in), nullptr, static_cast<uint8_t*>(out0), static_cast<uint8_t*>(out1), bytes, 0);
}

}  // namespace dfccl::core
