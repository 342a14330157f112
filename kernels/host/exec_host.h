// The host executor's machine layer (see kernels/core/exec.h): a "block" is one CPU thread. Memory is ordinary or
// POSIX shared memory; atomics are the compiler's; the clock is CLOCK_MONOTONIC. Each member's contract is its line
// in the table of exec.h.
#pragma once

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "../core/engine_memory.h"
#include "../core/primitives/copy.h"

namespace dfccl::host {

struct HostExec {
  using u32 = core::u32;
  using u64 = core::u64;
  using Pack = core::Pack;
  static constexpr u32 kPollsPerClock = 1;
  static constexpr u32 kWarp = 1;
  static u64 shfl(u64 v, u32) { return v; }
  static bool warp_all(bool v) { return v; }
  static void warp_sync() {}
  static u32 tid() { return 0; }
  static u32 nthreads() { return 1; }
  static void sync() {}
  static u64 load_acquire(const u64* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static void store_release(u64* p, u64 v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static void store_relaxed(u64* p, u64 v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
  static u64 load_relaxed(const u64* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
  static void fence_release() { __atomic_thread_fence(__ATOMIC_RELEASE); }
  static void fence_credit() { __atomic_thread_fence(__ATOMIC_RELEASE); }
  static void store_flag(u64* p, u64 v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
  static u32 atomic_add(u32* p, u32 v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
  static u64 atomic_add64(u64* p, u64 v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
  static u32 atomic_max32(u32* p, u32 v) {
    u32 old = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
    return old;
  }
  static void atomic_max64(u64* p, u64 v) {
    u64 old = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
  }
  static u64 atomic_cas64(u64* p, u64 expected, u64 desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return expected;
  }
  static u32 atomic_exch32(u32* p, u32 v) { return __atomic_exchange_n(p, v, __ATOMIC_ACQ_REL); }
  static u64 atomic_exch64(u64* p, u64 v) { return __atomic_exchange_n(p, v, __ATOMIC_ACQ_REL); }
  static u32 shared_inc(u32* p) { return (*p)++; }
  static void fence_device() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
  static void fence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
  static u64 now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return u64(ts.tv_sec) * 1000000000ull + u64(ts.tv_nsec);
  }
  static u64 cycles() { return now_ns(); }
  static void pause() { sched_yield(); }
  // Spin, then block: a wait yields the core for its first sleep_ns (DaemonParams::sleep_ns, DFCCL_HOST_SLEEP_NS,
  // this thread's launch), then sleeps an eighth of what it has waited (within [kNapMinNs, kNapMaxNs]), so that a
  // wait costs at most about 1/8 more than its condition took, and ranks that outnumber the cores leave them to the
  // ranks that have work. The daemon's threads sleep with a timer slack of 1 us, so that a nap is
  // as long as asked (daemon_host.cpp).
  static constexpr u64 kNapMinNs = 2000, kNapMaxNs = 200000;
  static constexpr bool kRests = true;
  static inline thread_local u64 sleep_ns = ~0ull;  // set when the thread starts running blocks (daemon_host.cpp)
  static void backoff(u64 waited_ns) {
    if (waited_ns < sleep_ns) {
      sched_yield();
      return;
    }
    const u64 nap = std::clamp(waited_ns / 8, kNapMinNs, kNapMaxNs);
    const timespec ts{time_t(nap / 1000000000ull), long(nap % 1000000000ull)};
    nanosleep(&ts, nullptr);
  }
  // A block waiting for the engine's owner (owner.h): its thread sleeps, leaving the cores to the blocks that run.
  static void idle() { std::this_thread::sleep_for(std::chrono::microseconds(20)); }
  static Pack ld16(const Pack* p) {
    Pack v;
    memcpy(&v, p, sizeof(v));
    return v;
  }
  static void st16(Pack* p, Pack v) { memcpy(p, &v, sizeof(v)); }
  static u64 ld_elem(const char* p, u32 es) {
    u64 v = 0;
    memcpy(&v, p, es);  // little-endian: the element in the low bytes
    return v;
  }
  static bool sync_and(bool v) { return v; }
  static bool sync_or(bool v) { return v; }
  static void st_ll(Pack* p, Pack v) {
    __atomic_store_n(&p->lo, v.lo, __ATOMIC_RELAXED);
    __atomic_store_n(&p->hi, v.hi, __ATOMIC_RELAXED);
  }
  static Pack ld_ll(const Pack* p) {
    Pack v;
    v.lo = __atomic_load_n(&p->lo, __ATOMIC_RELAXED);
    v.hi = __atomic_load_n(&p->hi, __ATOMIC_RELAXED);
    return v;
  }
};

// Caller: a daemon thread of the host executor (lib/src/executor/executor_host.cpp). Runs block b of the daemon on the
// calling thread until the daemon decides to leave.
void run_daemon_block(const core::EngineView& ev, core::u32 b);

// Caller: the host executor's start of a captured collective's instance (Executor::graph_start), on the calling
// thread: what a graph's start node runs on a GPU (core::graph_post). Returns the instance's sequence number.
core::u64 post_graph_start(const core::GraphStart& s);
// Block b of a captured wait (core::graph_wait_block), on the calling thread.
void run_graph_wait_block(const core::EngineView& ev, const core::GraphWait& w, core::u32 b);
// Block b of nb of a captured call's node that posts and waits (core::graph_start_wait_block), on the calling thread.
void run_graph_start_wait_block(const core::EngineView& ev, const core::GraphStart& s, const core::GraphWait& w,
                                core::u32 b, core::u32 nb);

}  // namespace dfccl::host
