// A communicator as the daemon sees it (CommStatic), its connection region and how one lane of it is addressed.
#pragma once

#include "limits.h"

namespace dfccl::core {

// Connection region of one rank (docs/design.md, "Transport"): control words then receive buffers,
//   ctrl[nchan][nlanes] { tail: slots written by prev into my buffers; head: slots of mine consumed by next }
//   bufs[nchan][nlanes][nslots][slot_bytes]
struct LaneCtrl {
  u64 tail;
  u64 pad0[7];
  u64 head;
  u64 pad1[7];
};
static_assert(sizeof(LaneCtrl) == 128);

// Private bookkeeping of one (channel, lane) on one rank, touched only by the block that runs that channel.
struct LaneState {
  u64 turn;   // turn of the next instance allowed on this lane
  u64 sent;   // slots written to next so far
  u64 recvd;  // slots consumed from prev so far
  u64 pad;
};

// What never changes while the communicator lives. Each descriptor carries a copy (Desc::cs), so that an attempt
// needs no dependent load of the communicator before it can read its lane.
struct CommStatic {
  int32_t rank, nranks, prev, next;  // ring neighbours (the ring follows rank order)
  u32 nchan;                         // channels (= engine blocks)
  u32 nlanes;
  u32 nslots;  // slots per lane
  u32 slot_bytes;
  char* self;         // my connection region
  char* next_region;  // next rank's region (mapped)
  char* prev_region;  // previous rank's region (mapped)
  LaneState* lanes;   // [nchan][nlanes], private
};
static_assert(sizeof(CommStatic) == 64);

struct CommDev {  // a communicator in device memory
  CommStatic s;
  u64 graph_turn;  // turns handed out on the graph lane (scheduler/graph_start.h); 0 at init
};

// A connection region: the lanes' counters, the Simple protocol's slots (every channel), the LL protocol's slots
// (channel 0 only, the one channel of a collective small enough for LL: primitives/ll.h), and one size word per
// Simple slot (what the sender last wrote into it: a network proxy forwards that much, lib/src/net/proxy.cpp).
inline constexpr u32 kLLMaxBytes = 8192;              // data per LL slot
inline constexpr u32 kLLSlotBytes = 2 * kLLMaxBytes;  // an LL line carries 8 data bytes in 16
// Sizes in bytes: the control words, the Simple slots, and the whole region (LL slots included).
DFCCL_HD inline u64 region_ctrl_bytes(u32 nchan, u32 nlanes) { return u64(nchan) * nlanes * sizeof(LaneCtrl); }
DFCCL_HD inline u64 region_simple_bytes(u32 nchan, u32 nlanes, u32 nslots, u32 slot_bytes) {
  return u64(nchan) * nlanes * nslots * slot_bytes;
}
DFCCL_HD inline u64 region_bytes(u32 nchan, u32 nlanes, u32 nslots, u32 slot_bytes) {
  return region_ctrl_bytes(nchan, nlanes) + region_simple_bytes(nchan, nlanes, nslots, slot_bytes) +
         u64(nlanes) * nslots * kLLSlotBytes + u64(nchan) * nlanes * nslots * sizeof(u64);
}
// The control words of (channel ch, lane) in `region`, and its Simple slot for position pos (mod nslots).
DFCCL_HD inline LaneCtrl* region_ctrl(char* region, const CommStatic& c, u32 ch, u32 lane) {
  return reinterpret_cast<LaneCtrl*>(region) + (u64(ch) * c.nlanes + lane);
}
DFCCL_HD inline char* region_slot(char* region, const CommStatic& c, u32 ch, u32 lane, u64 pos) {
  u64 idx = (u64(ch) * c.nlanes + lane) * c.nslots + umod(pos, c.nslots);
  return region + region_ctrl_bytes(c.nchan, c.nlanes) + idx * c.slot_bytes;
}
// A lane's four counters as one rank sees them (Simple and LL primitives).
struct LaneView {
  LaneCtrl* recv_ctrl;  // mine: tail written by prev
  LaneCtrl* send_ctrl;  // mine: head written by next
  LaneCtrl* next_ctrl;  // next's: I write its tail
  LaneCtrl* prev_ctrl;  // prev's: I write its head
  u32 ch, lane;
};

// A collective's lane (Desc::lane: the communicator's sequence lanes, then its persistent ids) within the connection
// it runs on: a connection of one lane (a persistent id's own, lib/src/transport/persistent.h) has only lane 0.
DFCCL_HD inline u32 conn_lane(const CommStatic& c, u32 lane) { return c.nlanes == 1 ? 0u : lane; }

// The four control blocks of (channel ch, lane) as this rank sees them.
DFCCL_HD inline LaneView lane_view(const CommStatic& c, u32 ch, u32 desc_lane) {
  const u32 lane = conn_lane(c, desc_lane);
  LaneView v;
  v.recv_ctrl = region_ctrl(c.self, c, ch, lane);
  v.send_ctrl = v.recv_ctrl;
  v.next_ctrl = region_ctrl(c.next_region, c, ch, lane);
  v.prev_ctrl = region_ctrl(c.prev_region, c, ch, lane);
  v.ch = ch;
  v.lane = lane;
  return v;
}

// The LL slot of `lane` for position pos (mod nslots) in `region` (channel 0 only: primitives/ll.h).
DFCCL_HD inline char* region_ll(char* region, const CommStatic& c, u32 lane, u64 pos) {
  const u64 idx = u64(lane) * c.nslots + umod(pos, c.nslots);
  return region + region_ctrl_bytes(c.nchan, c.nlanes) +
         region_simple_bytes(c.nchan, c.nlanes, c.nslots, c.slot_bytes) + idx * kLLSlotBytes;
}

// The size word of (channel ch, lane) for position pos (mod nslots) in `region`, written by the sender with the slot
// (before the tail) and read only by a network proxy: size_word(pos, ll, bytes) says that position pos carried
// `bytes` bytes, of the Simple slot or (ll) of the LL slot; its position part tells a stale word from a fresh one.
DFCCL_HD inline u64* region_size(char* region, const CommStatic& c, u32 ch, u32 lane, u64 pos) {
  const u64 idx = (u64(ch) * c.nlanes + lane) * c.nslots + umod(pos, c.nslots);
  char* sizes = region + region_ctrl_bytes(c.nchan, c.nlanes) +
                region_simple_bytes(c.nchan, c.nlanes, c.nslots, c.slot_bytes) +
                u64(c.nlanes) * c.nslots * kLLSlotBytes;
  return reinterpret_cast<u64*>(sizes) + idx;
}
inline constexpr u64 kSizeLL = u64(1) << 31;
DFCCL_HD inline u64 size_word(u64 pos, bool ll, u64 bytes) {
  return (u64(u32(pos + 1)) << 32) | (ll ? kSizeLL : 0) | bytes;
}

}  // namespace dfccl::core
