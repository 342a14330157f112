// What keeps a launch of the scheduler from leaving (kernels/core/scheduler/exit.h, kept_by_a_wait), checked on the
// host executor against a host side written the way Engine::wait_on_stream writes it: a listed stream wait whose probe
// has run and whose collective is pending keeps a daemon; it keeps a stand-in (a captured wait running the scheduler,
// inside a stream) only once the collective's doorbell has landed in its ring, since a doorbell not landed yet may be
// written behind the stand-in in its own stream. And how a launch's late block joins it (owner.h): the tags of a
// slot's stand-ins grow, and a block that finds a later launch's verdict joins only a launch that still owns the
// engine.
#include <gtest/gtest.h>

#include "../../kernels/core/scheduler/exit.h"
#include "../../kernels/core/scheduler/owner.h"
#include "../../kernels/host/exec_host.h"
#include "core_memory.h"

namespace dfccl::test {
namespace {

using namespace dfccl::core;
using X = host::HostExec;

struct Engine : CoreMemory {
  // As Engine::wait_on_stream: a wait on the collective `seq` in `slot`, posted at ring position `pos` of `ring` by a
  // stream (door) or by the host (no door); its probe has run.
  void list_wait(u32 slot, u64 seq, u32 ring, u64 pos, bool by_stream) {
    const u64 door = by_stream ? submission_tag(ring, ring_entry(pos, slot)) : 0;
    h->waits[h->nwaits] = WaitEntry{slot, seq, h->nwaits + 1, door};
    h->nwaits += 1;
    h->probe_done = h->nwaits;
  }
  bool kept(bool standin) {
    ev.p.standin = standin ? 1 : 0;
    return kept_by_a_wait<X>(ev);
  }
};

TEST(CoreExit, AWaitOnAPendingCollectiveKeepsTheDaemonWhereverItsDoorbellIs) {
  Engine e;
  EXPECT_FALSE(e.kept(false));
  e.list_wait(3, 5, 2, 7, true);  // its doorbell not written yet
  EXPECT_TRUE(e.kept(false));
  e.g->complete[3] = 5;  // done
  EXPECT_FALSE(e.kept(false));
}

TEST(CoreExit, AStandInStaysForAWaitOnlyOnceItsDoorbellLanded) {
  Engine e;
  e.list_wait(3, 5, 2, 7, true);
  EXPECT_FALSE(e.kept(true)) << "the doorbell may be behind the stand-in in its stream";
  e.g->ring[2][7] = ring_entry(7, 3) | kRingCopied;
  EXPECT_TRUE(e.kept(true));
  e.g->ring[2][7] = ring_entry(7 + kRingEntries, 9);  // a later lap of the ring: landed long ago
  EXPECT_TRUE(e.kept(true));
  e.g->complete[3] = 5;
  EXPECT_FALSE(e.kept(true)) << "done: nothing keeps it";

  Engine f;  // a wait at the next lap of the ring: the entry of the lap before is not its doorbell
  f.list_wait(3, 5, 2, 7 + kRingEntries, true);
  f.g->ring[2][7] = ring_entry(7, 3);
  EXPECT_FALSE(f.kept(true));
  f.g->ring[2][7] = ring_entry(7 + kRingEntries, 3);
  EXPECT_TRUE(f.kept(true));
}

TEST(CoreExit, AStandInStaysForAHostOrderedWaitAndForACapturedOne) {
  Engine e;
  e.list_wait(4, 2, 0, 0, false);  // posted by the host: its doorbell is not behind any stream
  EXPECT_TRUE(e.kept(true));
  e.g->complete[4] = 2;
  EXPECT_FALSE(e.kept(true));
  e.g->graph_waiters = 1;
  EXPECT_TRUE(e.kept(true));
}

TEST(CoreExit, AWaitWhoseProbeHasNotRunKeepsNoOne) {
  Engine e;
  e.list_wait(3, 5, 2, 7, false);
  e.h->probe_done = 0;  // a device-wide barrier issued before the wait may be pending: staying could deadlock
  EXPECT_FALSE(e.kept(false));
  EXPECT_FALSE(e.kept(true));
}

TEST(CoreOwner, AStandInTagGrowsWithItsInstanceAndACapturedOneIsAboveEveryEagerOne) {
  EXPECT_LT(standin_tag(5), standin_tag(6));
  EXPECT_LT(standin_tag(u64(1) << 40), standin_tag(kGraphSeqBase + 1)) << "a graph may take a slot eager ones used";
  EXPECT_LT(standin_tag(kGraphSeqBase + 1), standin_tag(kGraphSeqBase + 2));
  EXPECT_TRUE(is_standin(standin_tag(kGraphSeqBase + 1)));
  EXPECT_LT(owner_tag(standin_tag(kGraphSeqBase + 7) << 9 | kOwnerLeaving | 3), u64(1) << 55);
}

TEST(CoreOwner, ALateBlockThatFindsALaterVerdictJoinsOnlyALaunchThatStillOwns) {
  Engine e;
  const u64 mine = standin_tag(5), later = standin_tag(9);
  u64 verdict = (later << 1) | 1;  // the slot's next instance's wait decided after this launch's block 0 did
  e.g->owner = (mine << 9) | 1;    // this launch owns the engine, its block 0 in it
  EXPECT_TRUE(enter_launch<X>(e.ev, 1, mine, &verdict)) << "its launch runs: it must join";
  EXPECT_EQ(e.g->owner & kOwnerMembers, 2u);
  e.g->owner = (later << 9) | 1;  // another launch owns it
  EXPECT_FALSE(enter_launch<X>(e.ev, 1, mine, &verdict)) << "its launch did not run, or has left";
  e.g->owner = 0;
  EXPECT_FALSE(enter_launch<X>(e.ev, 1, mine, &verdict));
}

}  // namespace
}  // namespace dfccl::test
