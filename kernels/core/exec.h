// The executor layer: what the core needs from the machine it runs on.
//
// The core (scheduler, collective programs, primitives) is written once as templates over an executor type X and
// compiled twice: by nvcc for the CUDA executor (kernels/cuda/exec_cuda.cuh, X = CudaExec: a "block" is a CUDA
// thread block) and by the host compiler for the host executor (kernels/host/exec_host.h, X = HostExec: a "block" is
// one CPU thread). An executor provides, as static member functions:
//
//   int  tid(), nthreads()                      this thread's index in its block, and the block size
//   kWarp, u64 shfl(u64 v, u32 src), bool warp_all(bool v), void warp_sync()
//                                               threads 0 .. kWarp - 1 of a block that load together (a CUDA
//                                               warp: one instruction, one round trip over PCIe where one thread's
//                                               loads take one each; the host executor: 1), v of thread src to
//                                               each of them, whether v holds on all of them, and their barrier
//                                               (with memory ordering)
//   void sync()                                 barrier of the block
//   u64  load_acquire(const u64* p)             acquire load, system scope (peers write it)
//   void store_release(u64* p, u64 v)           release store, system scope (all prior writes of the block
//                                               that reached this thread through sync() become visible first)
//   void store_relaxed(u64* p, u64 v)           plain volatile store (device-local bookkeeping)
//   void fence_release()                        system-scope release fence: the block's writes (through sync())
//                                               become visible before the flag stores that follow
//   void fence_credit()                         the block's reads of a slot are done before a credit store
//   void store_flag(u64* p, u64 v)              relaxed system-scope store of a flag, after one of the fences
//   u64  load_relaxed(const u64* p)             plain volatile load
//   u32  atomic_add(u32* p, u32 v)              device-scope atomic add, returns the old value
//   u64  atomic_add64(u64* p, u64 v)
//   void atomic_max64(u64* p, u64 v)
//   u64  atomic_cas64(u64* p, u64 expected, u64 desired)  returns the old value
//   u32  atomic_exch32(u32* p, u32 v), u64 atomic_exch64(u64* p, u64 v)   returns the old value
//   u32  shared_inc(u32* p)                     atomic increment of block-shared memory, returns the old value
//   void fence_device(), fence_system()         memory fences
//   u64  now_ns()                               a clock in nanoseconds, monotonic, shared by the blocks
//   u64  cycles()                               a fine clock of this block (phase profile only)
//   void pause()                                back off inside a polling loop
//   void backoff(u64 waited_ns)                 back off inside a wait whose condition has not held for waited_ns:
//                                               a GPU pauses; a CPU thread spins a little, then sleeps for a part of
//                                               what it has waited (its peers may need the core: spin, then block)
//   bool kRests                                 the scheduler backs off (backoff) when a pass found nothing to run
//   void idle()                                 back off in a loop that found nothing to do (the prefetcher)
//   bool sync_and(bool v), sync_or(bool v)      barrier of the block that also combines one value of every thread
//   void st_ll(Pack* p, Pack v)                 LL line store: two 8-byte words, each single-copy atomic, no order
//   Pack ld_ll(const Pack* p)                   LL line load: two 8-byte words, each single-copy atomic, not cached
//   u64  ld_elem(const char* p, u32 es)         one element of es = 1, 2, 4 or 8 bytes, not from the SM's cache
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define DFCCL_HD __host__ __device__
#define DFCCL_DEV __device__
#define DFCCL_FORCEINLINE __forceinline__
#define DFCCL_UNROLL _Pragma("unroll")
#else
#define DFCCL_HD
#define DFCCL_DEV
#define DFCCL_FORCEINLINE inline __attribute__((always_inline))
#define DFCCL_UNROLL _Pragma("GCC unroll 4")
#endif

namespace dfccl::core {

using u8 = uint8_t;
using u16 = uint16_t;
using u32 = uint32_t;
using u64 = uint64_t;

// The smaller and the larger of a and b.
template <class T>
DFCCL_HD constexpr T min_of(T a, T b) {
  return a < b ? a : b;
}
template <class T>
DFCCL_HD constexpr T max_of(T a, T b) {
  return a < b ? b : a;
}
// Unsigned division and remainder on the cheapest path. The GPU has no integer divider (a 64-bit division is a long
// software routine): a power-of-two divisor shifts or masks, on both executors so that the host's tests run the same
// arithmetic; on the GPU other operands that fit in 32 bits take the 32-bit routine. A zero divisor is not a power of
// two: it still traps on the host. log2_pow2(b): log2 of b, a power of two.
DFCCL_HD DFCCL_FORCEINLINE u32 log2_pow2(u64 b) {
#if defined(__CUDA_ARCH__)
  return u32(__ffsll(static_cast<long long>(b)) - 1);
#else
  return u32(__builtin_ctzll(b));
#endif
}
DFCCL_HD DFCCL_FORCEINLINE u64 udiv(u64 a, u64 b) {
  if ((b & (b - 1)) == 0 && b != 0) return a >> log2_pow2(b);
#if defined(__CUDA_ARCH__)
  if (((a | b) >> 32) == 0) return u32(a) / u32(b);
#endif
  return a / b;
}
DFCCL_HD DFCCL_FORCEINLINE u64 umod(u64 a, u64 b) {
  if ((b & (b - 1)) == 0 && b != 0) return a & (b - 1);
#if defined(__CUDA_ARCH__)
  if (((a | b) >> 32) == 0) return u32(a) % u32(b);
#endif
  return a % b;
}

// a / b rounded up, and a rounded up to a multiple of b (b > 0).
template <class T>
DFCCL_HD constexpr T div_up(T a, T b) {
  return (a + b - 1) / b;
}
DFCCL_HD DFCCL_FORCEINLINE u64 div_up(u64 a, u64 b) { return udiv(a + b - 1, b); }
template <class T>
DFCCL_HD constexpr T round_up(T a, T b) {
  return div_up(a, b) * b;
}

// A word another agent writes, read anew each time: a volatile load on the GPU; on the host executor a relaxed
// atomic load (the same instruction on x86, and no data race in C++ terms for ThreadSanitizer).
template <class T>
DFCCL_HD DFCCL_FORCEINLINE T vload(const T& x) {
#if defined(__CUDA_ARCH__)
  return *const_cast<const volatile T*>(&x);
#else
  return __atomic_load_n(&x, __ATOMIC_RELAXED);
#endif
}

}  // namespace dfccl::core
