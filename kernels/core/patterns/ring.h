// Peer-pattern arithmetic of the ring, pure functions shared by the collectives, the tests and the simulator.
//
// The ring follows rank order: rank r receives from prev = r-1 and sends to next = r+1 (mod n). Data is split
// across channels, then into rounds of at most one slice per rank and step; chunk boundaries fall on multiples of
// 16 bytes so that aligned buffers stay aligned in every primitive.
#pragma once

#include "../limits.h"

namespace dfccl::core {

struct Range {  // elements [begin, begin + count)
  u64 begin;
  u64 count;
};

// x mod n in [0, n), for negative x too (ring neighbours: ring_mod(r - 1, n)).
DFCCL_HD inline int ring_mod(int x, int n) { return ((x % n) + n) % n; }

// Piece i of `total` elements cut into pieces of `per` elements: the last pieces may be shorter or empty.
DFCCL_HD inline Range piece_of(u64 total, u64 per, u64 i) {
  const u64 b = min_of(total, per * i);
  return Range{b, min_of(total, b + per) - b};
}

// Piece i of `total` elements cut into `parts` pieces, boundaries on multiples of `align` elements; trailing
// pieces may be shorter or empty.
DFCCL_HD inline Range split_aligned(u64 total, u64 parts, u64 i, u64 align) {
  return piece_of(total, round_up(div_up(total, parts), align), i);
}

// Elements of esize bytes per kAlignBytes.
DFCCL_HD inline u64 align_elems(u32 esize) { return udiv(kAlignBytes, esize); }

// How many channels carry data for a collective moving `bytes` (per rank-sized block): at least min_chan_bytes per
// channel, at most nblocks. Every rank computes the same value from the same arguments.
DFCCL_HD inline u32 data_channels(u64 bytes, u32 nblocks, u32 min_chan_bytes) {
  u64 n = udiv(bytes, min_chan_bytes ? min_chan_bytes : 1);
  return u32(max_of<u64>(1, min_of<u64>(n, nblocks)));
}

// Elements per channel when nchan channels carry `total` elements: boundaries on 16 bytes.
DFCCL_HD inline u64 channel_share(u64 total, u32 nchan, u32 esize) {
  return round_up(div_up(total, u64(nchan)), align_elems(esize));
}

}  // namespace dfccl::core
