// The start of a captured collective's instance (docs/design.md, "CUDA graphs"): what a graph's start node runs at
// each replay (the CUDA executor's one-thread kernel, kernels/cuda/daemon.cu), and what a host thread runs in its
// place on the host executor. The daemon picks the instance up from ring kGraphRing like any submission
// (scheduler/pickup.h, accept) and completes it without a completion-queue entry (scheduler/completion.h).
#pragma once

#include "../engine_memory.h"
#include "desc_copy.h"

namespace dfccl::core {

// Caller: one thread, once per replay of the start node (executions of one node never overlap: CUDA orders a graph's
// launches). Returns the first turn of this replay of group s.group: the first of the group's nodes to run in a
// replay claims it (host's count of the group's collectives turns from the communicator's counter); the others wait
// for it to be published. k: how many times this node ran before.
template <class X>
DFCCL_DEV u64 graph_replay_base(const GraphStart& s, u64 k) {
  GraphGroup& grp = s.g->graph_group[s.group];
  const u64 gen = u64(s.gen) << 32;
  const u64 want = gen | ((k + 1) & 0xffffffffu);
  if (X::load_acquire(&grp.ready) == want) return vload(grp.base);  // another node of this replay published it
  for (;;) {
    const u64 old = X::load_acquire(&grp.claim);
    if (old == want) break;  // another node of this replay claimed it
    // Replay k may claim only after replay k - 1's claim (replays never overlap); the first, over an earlier
    // owner's words.
    const bool claimable = k == 0 ? (old & ~u64(0xffffffffu)) != gen : old == (gen | (k & 0xffffffffu));
    if (!claimable) {
      X::pause();
      continue;
    }
    if (X::atomic_cas64(&grp.claim, old, want) != old) continue;
    const u64 n = vload(s.h->graph_group_n[s.group]);
    const u64 base = X::atomic_add64(s.turns, n);
    grp.base = base;
    X::fence_device();
    X::store_relaxed(&grp.ready, want);
    return base;
  }
  while (X::load_acquire(&grp.ready) != want) X::pause();
  return vload(grp.base);
}

// Caller: one thread (see graph_replay_base). Posts a new instance of the captured collective: waits until the
// slot's previous instance has completed (a replay whose wait was not captured may still run it), numbers and
// turns the instance, writes its descriptor, marks the slot pending and rings kGraphRing. Returns its seq.
// Invariant: at most one instance per slot is outstanding, so the ring (kRingEntries >= kMaxSlots) is never lapped
// while a block may still read an entry (the argument of Engine::ring_for_locked).
template <class X>
DFCCL_DEV u64 graph_post(const GraphStart& s) {
  EngineGlobal* g = s.g;
  const u32 slot = s.slot;
  const u64 t_in = kProfile ? X::now_ns() : 0;
  // The slot's words, written by this node's earlier runs only (ordered by their launches), in one round trip with
  // its state.
  const u64 gen_seen = vload(g->graph_gen[slot]);
  u64 k = vload(g->graph_runs[slot]);
  while (X::load_acquire(&g->graph_state[slot]) == kGraphPending) X::pause();
  if (gen_seen != s.gen) {  // the slot's first instance for this graph
    g->graph_gen[slot] = s.gen;
    k = 0;
  }
  g->graph_runs[slot] = k + 1;
  const u64 turn = graph_replay_base<X>(s, k) + s.index;
  // The instance's number and its ring position in one round trip; the entry is stored below, after the descriptor,
  // and the ring's readers wait for it in place.
  const u64 n = X::atomic_add64(&g->graph_seq, 1);
  const u64 pos = X::atomic_add64(&g->graph_ring_tail, 1);
  Desc d = s.desc;
  d.seq = kGraphSeqBase + 1 + n;  // in posting order: blocking mode's age
  d.turn = turn;
  Pack v[kDescPacks];
  memcpy(v, &d, sizeof(Desc));
  store_desc<X>(g->graph_desc[slot], v);
  X::store_relaxed(&g->graph_state[slot], kGraphPending);
  X::fence_device();  // the descriptor and state before the entry (the instance's readers are this device's)
  X::store_relaxed(&g->ring[kGraphRing][pos % kRingEntries], ring_entry(pos, slot));
  X::store_flag(&s.h->graph_posted[slot], d.seq);  // the progress thread: a daemon is needed
  if constexpr (kProfile) {
    graph_stamp(g->graph_trace, d.seq, kStampStart, t_in);
    graph_stamp(g->graph_trace, d.seq, kStampPosted, X::now_ns());
  }
  return d.seq;
}

}  // namespace dfccl::core
