// How an abort reaches the daemon (kernels/core/scheduler/aborts.h, look_for_aborts): dfcclCommAbort stores into host
// memory only (EngineHost::aborts and abort_gen) and the daemon copies them into its own (EngineGlobal), the table
// before the count, each only ever raised. Checked here on the host executor against a host side written the way
// Engine::abort_comm writes it: the copy itself, a stale copy that must not undo a newer one, and the prefetcher,
// which looks for aborts while it waits for postings. And what ends a wait early (wait_must_end, rings_have_new).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "../../kernels/core/scheduler/aborts.h"
#include "../../kernels/core/scheduler/attempt.h"
#include "../../kernels/core/scheduler/prefetcher.h"
#include "../../kernels/host/exec_host.h"
#include "core_memory.h"

namespace dfccl::test {
namespace {

using namespace dfccl::core;
using X = host::HostExec;

struct Engine : CoreMemory {
  // As Engine::abort_comm: the attachment number, then the count, released.
  void abort(u32 comm, u64 gen) {
    __atomic_store_n(&h->abort_gen[comm], gen, __ATOMIC_RELAXED);
    __atomic_store_n(&h->aborts, __atomic_load_n(&h->aborts, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
  }
  bool aborted(u32 comm, u64 gen) const {
    Desc d{};
    d.comm = comm;
    d.comm_gen = gen;
    return comm_aborted(ev, d);
  }
};

TEST(CoreAbort, TheDaemonSeesAnAbortOnlyAfterItLooked) {
  Engine e;
  e.abort(3, 7);
  EXPECT_EQ(e.g->aborts, 0u);
  EXPECT_FALSE(e.aborted(3, 7));
  look_for_aborts<X>(e.ev);
  EXPECT_EQ(e.g->aborts, 1u);
  EXPECT_TRUE(e.aborted(3, 7));
  EXPECT_FALSE(e.aborted(3, 5)) << "an earlier communicator at the same index";
  EXPECT_FALSE(e.aborted(3, 8)) << "a later communicator at the same index";
  EXPECT_FALSE(e.aborted(4, 7));
  e.abort(4, 8);
  look_for_aborts<X>(e.ev);
  EXPECT_EQ(e.g->aborts, 2u);
  EXPECT_TRUE(e.aborted(3, 7));
  EXPECT_TRUE(e.aborted(4, 8));
}

// Several thread 0s may look at once (waits and the prefetcher): one that read the host's table before a newer abort
// and writes after another copied it must not lower what the daemon has seen.
TEST(CoreAbort, ALateCopyLowersNothing) {
  Engine e;
  e.g->abort_gen[3] = 9;  // a newer communicator at index 3, aborted and already copied
  e.g->aborts = 5;
  e.h->abort_gen[3] = 7;  // what a late reader still sees
  e.h->aborts = 6;
  look_for_aborts<X>(e.ev);
  EXPECT_EQ(e.g->abort_gen[3], 9u);
  EXPECT_EQ(e.g->aborts, 6u);
  e.h->aborts = 4;  // an older count
  e.h->abort_gen[5] = 11;
  look_for_aborts<X>(e.ev);
  EXPECT_EQ(e.g->aborts, 6u);
  EXPECT_EQ(e.g->abort_gen[5], 0u) << "the table is read only when the host's count is ahead";
}

TEST(CoreAbort, ThePrefetcherLooksForAborts) {
  Engine e;
  std::thread th([ev = e.ev] { prefetch_descs<X>(ev); });
  e.abort(2, 4);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (__atomic_load_n(&e.g->aborts, __ATOMIC_ACQUIRE) == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  __atomic_store_n(&e.g->quit, u64(1), __ATOMIC_RELEASE);
  th.join();
  EXPECT_EQ(e.g->aborts, 1u);
  EXPECT_TRUE(e.aborted(2, 4));
}

// A wait ends on an abort since its pass began, on shutdown, and on its own launch's exit order; not on an exit
// being decided, nor on another launch's order.
TEST(CoreAbort, AWaitEndsOnAnAbortAShutdownOrItsLaunchsExit) {
  Engine e;
  EXPECT_FALSE(wait_must_end(e.ev, 0));
  e.g->aborts = 1;
  EXPECT_TRUE(wait_must_end(e.ev, 0)) << "an abort after the pass began";
  EXPECT_FALSE(wait_must_end(e.ev, 1)) << "an abort the pass had seen";
  e.g->exit_request = (u64(1) << 8) | kExitPending;
  EXPECT_FALSE(wait_must_end(e.ev, 1)) << "an exit being decided";
  e.g->exit_request = (u64(2) << 8) | kExitIdle;
  EXPECT_FALSE(wait_must_end(e.ev, 1)) << "another launch's order";
  for (u64 reason : {kExitIdle, kExitStuck, kExitQuit}) {
    e.g->exit_request = (u64(1) << 8) | reason;
    EXPECT_TRUE(wait_must_end(e.ev, 1)) << "this launch's exit, reason " << reason;
  }
  e.g->exit_request = 0;
  e.g->quit = 1;
  EXPECT_TRUE(wait_must_end(e.ev, 1)) << "shutdown";
}

// What a blocking-mode wait after an abort looks for in the rings (scheduler/pickup.h, rings_have_new): an entry at
// the block's frontier of any ring, i.e. one its pass did not take; not one it took, nor last lap's at that position.
TEST(CoreAbort, AWaitSeesOnlySubmissionsItsPassDidNotTake) {
  Engine e;
  auto bs = std::make_unique<BlockShared>();
  std::memset(static_cast<void*>(bs.get()), 0, sizeof(BlockShared));
  EXPECT_FALSE(rings_have_new<X>(e.ev, *bs)) << "empty rings";
  e.g->ring[5][0] = ring_entry(0, 3);
  e.g->ring[5][1] = ring_entry(1, 4);
  bs->frontier[5] = 2;
  EXPECT_FALSE(rings_have_new<X>(e.ev, *bs)) << "taken entries";
  e.g->ring[5][2] = ring_entry(2 + kRingEntries, 6);
  EXPECT_FALSE(rings_have_new<X>(e.ev, *bs)) << "an entry of a later lap at the frontier's place";
  const u64 pos = 3 * u64(kRingEntries) + 7;  // a ring gone round
  bs->frontier[kMaxRings - 1] = pos;
  e.g->ring[kMaxRings - 1][pos % kRingEntries] = ring_entry(pos - kRingEntries, 1);
  EXPECT_FALSE(rings_have_new<X>(e.ev, *bs)) << "last lap's entry at the frontier's place";
  e.g->ring[kMaxRings - 1][pos % kRingEntries] = ring_entry(pos, 2);
  EXPECT_TRUE(rings_have_new<X>(e.ev, *bs)) << "a new entry in the last ring";
  e.g->ring[kMaxRings - 1][pos % kRingEntries] = ring_entry(pos - kRingEntries, 1);
  e.g->ring[5][2] = ring_entry(2, 6);
  EXPECT_TRUE(rings_have_new<X>(e.ev, *bs)) << "a new entry in ring 5";
}

}  // namespace
}  // namespace dfccl::test
