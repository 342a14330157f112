// The table of collectives: which algorithm each kind runs, and the geometry of one channel of one instance.
// Add an algorithm: write <kind>_<algorithm>.h with num_ops/op, then route to it in with_algorithm.
#pragma once

#if !defined(__CUDA_ARCH__)
#include <cstdio>
#endif

#include "allgather_ring.h"
#include "allreduce_oneshot.h"
#include "allreduce_ring.h"
#include "broadcast_chain.h"
#include "local_copy.h"
#include "reduce_chain.h"
#include "reducescatter_ring.h"
#include "sendrecv.h"

namespace dfccl::core {

// Elements per rank-sized block that channels split: the whole buffer for AllReduce/Broadcast/Reduce, one rank's
// block for AllGather/ReduceScatter.
DFCCL_HD inline u64 block_count(const Desc& d) { return d.count; }

// Whether collective d runs in place on `rank`, by its kind's rule (AllGather: send is rank's block of recv;
// ReduceScatter: recv is rank's block of send; Send and Recv: never; the others: send == recv).
DFCCL_HD inline bool in_place(const Desc& d, int rank) {
  if (is_p2p(d.kind)) return false;
  const auto s = reinterpret_cast<uintptr_t>(d.send), r = reinterpret_cast<uintptr_t>(d.recv);
  const u64 block_bytes = d.count * dtype_size(d.dtype);
  switch (d.kind) {
    case Kind::AllGather: return s == r + u64(rank) * block_bytes;
    case Kind::ReduceScatter: return r == s + u64(rank) * block_bytes;
    default: return s == r;
  }
}

// Slices per ring step: half the lane's slots, rounded up (3 slots: 2), so that a step's sends never need more room
// than the FIFO has and a neighbour finishing its previous step still finds room to go on (core_programs_test runs
// every program over bounded FIFOs of 2, 3 and 8 slots: no credit deadlock).
DFCCL_HD inline u64 pipe_slices(u32 nslots) { return max_of<u64>(1, nslots - nslots / 2); }

// Caller: the host, once per submission after the kind, type and count are set (comm_submit; tests that build
// descriptors). Sets the part of the geometry that is the same for every channel: nchan data channels, the element
// size's log2 and each channel's share, so that a block's own set-up needs no division.
DFCCL_HD inline void set_channels(Desc& d, u32 nchan) {
  const u32 esize = dtype_size(d.dtype);
  d.nchan = nchan;
  d.esize_log2 = u8(log2_pow2(esize));
  d.chan_share = channel_share(block_count(d), nchan, esize);
}

// Caller: thread 0 at an attempt's set-up (and the tests). Returns channel ch's geometry of collective d on `rank`.
// Invariant: it depends only on the descriptor and the channel, so every rank computes matching programs. On the
// host executor, a descriptor whose channels were not set by set_channels for its type and count traps.
DFCCL_HD inline Geometry make_geometry(const Desc& d, int rank, int nranks, u32 ch, u32 slot_bytes, u32 nslots) {
#if !defined(__CUDA_ARCH__)
  // A descriptor whose channels were not set by set_channels (or whose type or count changed after) would run a
  // wrong geometry without a sign; the host executor, which runs every host test, plans it again and stops there.
  Desc planned = d;
  set_channels(planned, d.nchan);
  if (d.nchan == 0 || planned.chan_share != d.chan_share || planned.esize_log2 != d.esize_log2) {
    std::fprintf(stderr, "dfccl core: descriptor %llu: channels not set (set_channels) for its type and count\n",
                 static_cast<unsigned long long>(d.seq));
    __builtin_trap();
  }
#endif
  Geometry g;
  g.kind = d.kind;
  g.redop = d.op;
  g.rank = rank;
  g.nranks = nranks;
  g.root = d.root;
  g.esize = 1u << d.esize_log2;
  g.count = d.count;
  g.slice = slot_bytes >> d.esize_log2;
  g.chan = ch < d.nchan ? piece_of(block_count(d), d.chan_share, ch) : Range{0, 0};
  // No more slices per step than the data needs: every primitive costs a full handshake with the peer even when
  // its slice is empty.
  const u64 parts = d.kind == Kind::AllReduce ? u64(nranks) : 1;
  g.pipe = min_of(pipe_slices(nslots), max_of<u64>(1, div_up(g.chan.count, g.slice * parts)));
  g.in_place = in_place(d, rank);
  return g;
}

// Calls f(A{}) with the algorithm A that channel geometry g runs, and returns its result: the one place where a kind
// is routed to its algorithms. f's result for an unknown kind is its value-initialized type.
template <class F>
DFCCL_HD DFCCL_FORCEINLINE auto with_algorithm(const Geometry& g, F&& f) {
  if (is_p2p(g.kind)) return f(SendRecvDirect{});  // a rank's send to itself meets its own receive
  if (g.nranks == 1) return f(LocalCopy{});
  switch (g.kind) {
    case Kind::AllReduce: return AllReduceOneShot::fits(g) ? f(AllReduceOneShot{}) : f(AllReduceRing{});
    case Kind::AllGather: return f(AllGatherRing{});
    case Kind::ReduceScatter: return f(ReduceScatterRing{});
    case Kind::Broadcast: return f(BroadcastChain{});
    case Kind::Reduce: return f(ReduceChain{});
    default: break;
  }
  return decltype(f(LocalCopy{})){};
}

// Primitives in the channel's program (0 when the channel has no data).
DFCCL_HD inline u64 program_num_ops(const Geometry& g) {
  if (g.chan.count == 0) return 0;
  return with_algorithm(g, [&](auto a) { return decltype(a)::num_ops(g); });
}

// The LL protocol (primitives/ll.h) carries every step of a collective whose data is channel 0's alone and fits one
// LL slot (kLLMaxBytes: 8 KiB per rank-sized block): each hop is then one flight to the peer, without the Simple
// protocol's system-scope fence and separate flag. The decision depends on the descriptor only, so every rank makes
// the same one (sender and receiver of a slot must agree on its protocol).
DFCCL_HD inline bool uses_ll(const Geometry& g) {
  return (g.nranks > 1 || is_p2p(g.kind)) && g.chan.begin == 0 && g.chan.count == g.count &&
         g.chan.count * g.esize <= kLLMaxBytes;
}

// Primitive i of the channel's algorithm, without its protocol.
DFCCL_HD inline Op algorithm_op(const Geometry& g, u64 i) {
  return with_algorithm(g, [&](auto a) { return decltype(a)::op(g, i); });
}

// Primitive i of the channel's program: the algorithm's step, and kOpLL where the collective goes through LL.
DFCCL_HD inline Op program_op(const Geometry& g, u64 i) {
  Op op = algorithm_op(g, i);
  if (uses_ll(g)) op.flags |= kOpLL;
  return op;
}

}  // namespace dfccl::core
