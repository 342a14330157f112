// The CUDA executor's machine layer (see kernels/core/exec.h): a "block" is a CUDA thread block. Peers' memory is
// reached through peer access or CUDA IPC mappings; ordering with peers and the host uses system-scope operations.
// Each member's contract is its line in the table of exec.h; the comments here say how this machine meets it.
#pragma once

#include "../core/primitives/copy.h"

namespace dfccl::cuda {

struct CudaExec {
  using u32 = core::u32;
  using u64 = core::u64;
  using Pack = core::Pack;
  static constexpr u32 kPollsPerClock = 16;
  static constexpr u32 kWarp = 32;
  __device__ static __forceinline__ u64 shfl(u64 v, u32 src) { return __shfl_sync(0xffffffffu, v, int(src)); }
  __device__ static __forceinline__ bool warp_all(bool v) { return __all_sync(0xffffffffu, v) != 0; }
  __device__ static __forceinline__ void warp_sync() { __syncwarp(); }
  __device__ static __forceinline__ u32 tid() { return threadIdx.x; }
  __device__ static __forceinline__ u32 nthreads() { return blockDim.x; }
  __device__ static __forceinline__ void sync() { __syncthreads(); }
  __device__ static __forceinline__ u64 load_acquire(const u64* p) {
    u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  // Cumulative: writes of other threads of the block that precede a __syncthreads() before the fence are ordered
  // before the stores that follow it. A primitive's post (slot_op.h) puts one fence before all of its flag stores.
  __device__ static __forceinline__ void fence_release() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
  // Before a receive credit alone (the slot may be overwritten after it): the block's loads of the slot have
  // returned, since every loaded value was stored before the barrier that precedes the post. No fence, as in NCCL's
  // receive posts.
  __device__ static __forceinline__ void fence_credit() {}
  __device__ static __forceinline__ void store_flag(u64* p, u64 v) {
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ static __forceinline__ void store_relaxed(u64* p, u64 v) { *reinterpret_cast<volatile u64*>(p) = v; }
  __device__ static __forceinline__ u64 load_relaxed(const u64* p) { return *reinterpret_cast<const volatile u64*>(p); }
  // A release store: the fence, then the relaxed store.
  __device__ static __forceinline__ void store_release(u64* p, u64 v) {
    fence_release();
    store_flag(p, v);
  }
  __device__ static __forceinline__ u32 atomic_add(u32* p, u32 v) { return atomicAdd(p, v); }
  __device__ static __forceinline__ u64 atomic_add64(u64* p, u64 v) {
    return atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  }
  __device__ static __forceinline__ u32 atomic_max32(u32* p, u32 v) { return atomicMax(p, v); }
  __device__ static __forceinline__ void atomic_max64(u64* p, u64 v) {
    atomicMax(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  }
  __device__ static __forceinline__ u64 atomic_cas64(u64* p, u64 expected, u64 desired) {
    return atomicCAS(reinterpret_cast<unsigned long long*>(p), expected, desired);
  }
  __device__ static __forceinline__ u32 atomic_exch32(u32* p, u32 v) { return atomicExch(p, v); }
  __device__ static __forceinline__ u64 atomic_exch64(u64* p, u64 v) {
    return atomicExch(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  }
  __device__ static __forceinline__ u32 shared_inc(u32* p) { return atomicAdd(p, 1u); }
  __device__ static __forceinline__ void fence_device() { __threadfence(); }
  __device__ static __forceinline__ void fence_system() { __threadfence_system(); }
  __device__ static __forceinline__ u64 now_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ static __forceinline__ u64 cycles() { return clock64(); }  // SM clock (phase profile)
  __device__ static __forceinline__ void pause() {}
  static constexpr bool kRests = false;
  __device__ static __forceinline__ void backoff(u64) {}
  __device__ static __forceinline__ void idle() {}
  // Loads at L2 (.cg): slots are rewritten by peers, so L1 must not keep old lines.
  __device__ static __forceinline__ Pack ld16(const Pack* p) {
    const uint4 v = __ldcg(reinterpret_cast<const uint4*>(p));
    Pack out;
    out.lo = (u64(v.y) << 32) | v.x;
    out.hi = (u64(v.w) << 32) | v.z;
    return out;
  }
  __device__ static __forceinline__ bool sync_and(bool v) { return __syncthreads_and(v) != 0; }
  __device__ static __forceinline__ bool sync_or(bool v) { return __syncthreads_or(v) != 0; }
  // LL lines (primitives/ll.h): a vector of two u64 is two 8-byte accesses, each single-copy atomic; volatile
  // accesses are relaxed at system scope (the peer GPU polls them), and bypass L1.
  __device__ static __forceinline__ void st_ll(Pack* p, Pack v) {
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.lo), "l"(v.hi) : "memory");
  }
  __device__ static __forceinline__ Pack ld_ll(const Pack* p) {
    Pack v;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(p) : "memory");
    return v;
  }
  __device__ static __forceinline__ u64 ld_elem(const char* p, u32 es) {
    switch (es) {
      case 1: return __ldcg(reinterpret_cast<const unsigned char*>(p));
      case 2: return __ldcg(reinterpret_cast<const unsigned short*>(p));
      case 4: return __ldcg(reinterpret_cast<const unsigned int*>(p));
      default: return __ldcg(reinterpret_cast<const unsigned long long*>(p));
    }
  }
  __device__ static __forceinline__ void st16(Pack* p, Pack v) {
    uint4 w = make_uint4(u32(v.lo), u32(v.lo >> 32), u32(v.hi), u32(v.hi >> 32));
    __stcg(reinterpret_cast<uint4*>(p), w);
  }
};

}  // namespace dfccl::cuda
