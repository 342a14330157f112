// Plain data shared by the host runtime and both executors: the descriptor of a collective instance (its static
// context), the dynamic context of one channel of an instance, the communicator as the daemon sees it, and the
// engine's global state. Everything here is trivially copyable. Where each piece lives and who writes it:
//
//   EngineGlobal   device memory   daemon (rings: host, through stream memory writes; quit: host, through the
//                                  engine's control stream; aborts: the daemon's copy of EngineHost's)
//   ChanCtx        device memory   daemon (one per outstanding collective and block: the saved context)
//   CommDev        device memory   host at init (through the control stream)
//   EngineHost     pinned host     descriptors, the post log and host-ordered doorbells: host (read by the
//                                  daemon's prefetcher, and by blocks without its copy); completion queue entries and
//                                  statistics: daemon (one write each); aborts: host (plain stores, no CUDA call),
//                                  copied into EngineGlobal by the daemon (scheduler.h, look_for_aborts)
#pragma once

#include <cstring>

#include "exec.h"

namespace dfccl::core {

// ---- limits (compile time) -------------------------------------------------------------------------------------
inline constexpr u32 kMaxSlots = 1024;          // collectives outstanding per engine
inline constexpr u32 kMaxRings = 64;            // submission rings per engine (one per user stream in use)
inline constexpr u32 kRingEntries = kMaxSlots;  // so a ring can hold every outstanding collective
inline constexpr u32 kMaxBlocks = 128;          // daemon blocks (= channels) per engine
inline constexpr u32 kMaxComms = 256;           // communicators attached to one engine at a time
inline constexpr u32 kMaxLanes = 64;            // lanes per communicator (sequence lanes + persistent lanes)
inline constexpr u32 kCqEntries = kMaxSlots;    // completions can never outnumber outstanding collectives
inline constexpr u32 kAlignBytes = 16;          // chunk boundaries fall on multiples of 16 bytes

// ---- kinds, data types and operators (NCCL's numbering) ---------------------------------------------------------
enum class Kind : u8 { AllReduce = 0, AllGather = 1, ReduceScatter = 2, Broadcast = 3, Reduce = 4 };
inline constexpr u32 kNumKinds = 5;
enum class DType : u8 { I8 = 0, U8, I32, U32, I64, U64, F16, F32, F64, BF16 };
inline constexpr u32 kNumDTypes = 10;
enum class RedOp : u8 { Sum = 0, Prod, Max, Min, Avg };
inline constexpr u32 kNumOps = 5;

DFCCL_HD constexpr u32 dtype_size(DType t) {
  switch (t) {
    case DType::I8:
    case DType::U8:
      return 1;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32:
      return 4;
    default:
      return 8;
  }
}

// Status values of a finished collective (the C API's dfcclResult_t numbering).
inline constexpr u32 kStatusOk = 0;
inline constexpr u32 kStatusAborted = 9;

// ---- a communicator as the daemon sees it ----------------------------------------------------------------------
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
// needs no dependent load of the communicator before it can read its lane (docs/performance-log.md, 7).
struct CommStatic {
  int32_t rank, nranks, prev, next;  // ring neighbours (the ring follows rank order)
  u32 nchan;                         // channels (= engine blocks)
  u32 nlanes;
  u32 nslots;                        // slots per lane
  u32 slot_bytes;
  char* self;                        // my connection region
  char* next_region;                 // next rank's region (mapped)
  char* prev_region;                 // previous rank's region (mapped)
  LaneState* lanes;                  // [nchan][nlanes], private
};
static_assert(sizeof(CommStatic) == 64);

struct CommDev {
  CommStatic s;
};

// ---- the static context: one per submitted collective, written by the host into pinned memory ------------------
struct Desc {
  u64 seq;           // engine-wide submission number (> 0); also the value written to the completion word
  u64 count;         // NCCL's count: AllReduce/Broadcast/Reduce count, AllGather sendcount, ReduceScatter recvcount
  const void* send;  // user buffers (device pointers for the CUDA executor)
  void* recv;
  u64 turn;          // this instance's turn on its lane (docs/design.md, "Lanes")
  u32 comm;          // index in the engine's communicator table
  u32 lane;          // which lane of the communicator's connections this instance uses
  Kind kind;
  DType dtype;
  RedOp op;
  u8 esize_log2;     // log2 of the element size (set_channels)
  int32_t root;
  int32_t priority;
  u32 nchan;         // channels that carry data (the others have empty programs)
  CommStatic cs;     // the communicator's fixed part (a copy: no dependent load before the lane's)
  u64 comm_gen;      // the communicator's attachment to the engine (Engine::attach): aborted once
                     // EngineGlobal::abort_gen[comm] equals it
  u64 chan_share;    // elements per data channel, a multiple of kAlignBytes (set_channels)
};
static_assert(sizeof(Desc) == 144 && sizeof(Desc) % 16 == 0, "Desc is read in 16-byte loads, all issued at once");

// ---- the dynamic context of one channel of one instance, saved in device memory ----------------------------------
enum : u32 { kCtxFree = 0, kCtxActive = 1, kCtxDone = 2 };

struct ChanCtx {
  Desc desc;        // copy of the static context
  u64 t_start;      // executor clock when this channel ran its first primitive (0: not started)
  u32 op;           // next primitive of the channel's program: all that is needed to resume
  u32 spin_ns;      // adaptive spin budget of this channel (stickiness)
  u32 state;        // kCtxFree / kCtxActive / kCtxDone
  u32 preemptions;  // attempts of this channel that ended in preemption
  u32 status;       // kStatusOk or kStatusAborted
  u32 wait_us;      // time this channel's primitives spent in their spin phase (waiting for peers), microseconds
};
static_assert(sizeof(ChanCtx) == 176);

// A connection region: the lanes' counters, the Simple protocol's slots (every channel), and the LL protocol's
// slots (channel 0 only, the one channel of a collective small enough for LL: primitives/ll.h).
inline constexpr u32 kLLMaxBytes = 8192;               // data per LL slot
inline constexpr u32 kLLSlotBytes = 2 * kLLMaxBytes;   // an LL line carries 8 data bytes in 16
DFCCL_HD inline u64 region_ctrl_bytes(u32 nchan, u32 nlanes) { return u64(nchan) * nlanes * sizeof(LaneCtrl); }
DFCCL_HD inline u64 region_simple_bytes(u32 nchan, u32 nlanes, u32 nslots, u32 slot_bytes) {
  return u64(nchan) * nlanes * nslots * slot_bytes;
}
DFCCL_HD inline u64 region_bytes(u32 nchan, u32 nlanes, u32 nslots, u32 slot_bytes) {
  return region_ctrl_bytes(nchan, nlanes) + region_simple_bytes(nchan, nlanes, nslots, slot_bytes) +
         u64(nlanes) * nslots * kLLSlotBytes;
}
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

DFCCL_HD inline LaneView lane_view(const CommStatic& c, u32 ch, u32 lane) {
  LaneView v;
  v.recv_ctrl = region_ctrl(c.self, c, ch, lane);
  v.send_ctrl = v.recv_ctrl;
  v.next_ctrl = region_ctrl(c.next_region, c, ch, lane);
  v.prev_ctrl = region_ctrl(c.prev_region, c, ch, lane);
  v.ch = ch;
  v.lane = lane;
  return v;
}

DFCCL_HD inline char* region_ll(char* region, const CommStatic& c, u32 lane, u64 pos) {
  const u64 idx = u64(lane) * c.nslots + umod(pos, c.nslots);
  return region + region_ctrl_bytes(c.nchan, c.nlanes) +
         region_simple_bytes(c.nchan, c.nlanes, c.nslots, c.slot_bytes) + idx * kLLSlotBytes;
}

// ---- the engine ---------------------------------------------------------------------------------------------------
// Exit requests / reasons.
// Exit requests (EngineGlobal::exit_request = epoch << 8 | kExit*). kExitPending: a block is deciding (announced in
// EngineHost::exit_announced, then the waits are scanned again); the blocks leave only on Idle, Stuck or Quit.
enum : u64 { kExitNone = 0, kExitIdle = 1, kExitStuck = 2, kExitQuit = 3, kExitPending = 4 };
// Whether exit request `req` orders the launch of `epoch` to leave (Idle, Stuck or Quit of that launch).
DFCCL_HD inline bool exit_ordered(u64 req, u64 epoch) {
  const u64 r = req & 0xff;
  return (req >> 8) == epoch && (r == kExitIdle || r == kExitStuck || r == kExitQuit);
}

struct EngineGlobal {                          // device memory
  u64 ring[kMaxRings][kRingEntries];           // submission rings: (position + 1) << 16 | slot, maybe | kRingCopied
  u64 frontier[kMaxBlocks][kMaxRings];         // each block's next ring position, saved at exit
  u64 complete[kMaxSlots];                     // completion words: seq of the last finished occupant (stream waits)
  u32 done_count[kMaxSlots];                   // blocks finished with the slot's current instance
  u32 status[kMaxSlots];                       // non-zero: some block failed the instance (e.g. aborted)
  u32 preemptions[kMaxSlots];                  // summed over the blocks of the slot's current instance
  u32 wait_max_us[kMaxSlots];                  // the longest ChanCtx::wait_us of the instance's channels
  u64 start_inv[kMaxSlots];                    // ~(earliest block start time), max-combined; 0 = none yet
  // Descriptors copied from pinned memory by the first block that accepts them, for the others: reads of pinned
  // memory cost about 40-60 ns each on the GPU's link, so 64 blocks reading it all took 14-22 us per collective
  // (docs/performance-log.md, 7). Tags name a submission: (ring + 1) << 48 | its ring entry.
  Desc desc[kMaxSlots];
  u64 desc_claim[kMaxSlots];                   // tag of the submission whose copy a block has taken on
  u64 desc_ready[kMaxSlots];                   // tag of the submission whose copy is in desc[]
  // The prefetcher's copies (scheduler.h, prefetch_descs), by slot, and the tag of the submission each holds.
  Desc pre_desc[kMaxSlots];
  u64 pre_ready[kMaxSlots];
  u64 pre_next;                                // the prefetcher: next EngineHost::post_log record to copy
  u64 host_next;                               // the prefetcher: next EngineHost::host_ring entry to forward
  u64 cq_tail;                                 // completion queue positions handed out
  u64 last_activity_ns;                        // last time any block made progress or picked up work
  u64 exit_request;                            // epoch << 8 | kExit*: all blocks of that launch leave
  u64 quit;                                    // host: leave now (engine shutdown)
  // The daemon's copy of EngineHost::aborts and abort_gen (scheduler.h, look_for_aborts): the count last, after
  // the table, and each only ever raised (atomic max), so that no copy, however late, lowers one.
  u64 aborts;                                  // communicators aborted so far
  u64 abort_gen[kMaxComms];                    // by communicator index: attachment number of the last one aborted
  u32 busy[kMaxBlocks];                        // block has collectives pending (exit decisions)
};

// What the last block of a collective reports to the host (dfcclRequestInfo), in its completion queue entry.
struct CqInfo {
  u64 seq;
  u64 t_start;
  u64 t_end;
  u32 slot;
  u32 status;
  u32 preemptions;
  u32 wait_us;      // the longest time a channel spent waiting for peers
};
// Flagged words, as in the LL protocol (primitives/ll.h), for the completion queue's entries and the post records:
// each 8-byte word carries the flag of its entry's number n in its low half and 4 bytes of payload in its high half,
// and is stored and loaded whole (single-copy atomic), so that a reader takes an entry once every word carries its
// flag, with no fence ordering the words before a separate flag. A zeroed word carries no flag of the first 2^32 - 1
// entries.
DFCCL_HD inline u32 entry_flag(u64 n) { return u32(n + 1); }
DFCCL_HD inline u64 flagged_word(u32 payload, u32 flag) { return (u64(payload) << 32) | flag; }
DFCCL_HD inline u32 word_flag(u64 w) { return u32(w); }
DFCCL_HD inline u32 word_payload(u64 w) { return u32(w >> 32); }

// A completion queue entry (EngineHost::cq, entry pos % kCqEntries for the daemon's pos-th completion): the CqInfo
// in flagged words of entry_flag(pos). The host takes the entry once every flag is its own: no system-scope fence
// orders the words before a separate flag (it cost 0.77 us of each collective's completion:
// docs/performance-log.md, 26).
inline constexpr u32 kCqWords = u32(sizeof(CqInfo) / 4);
struct alignas(16) CqEntry {
  u64 w[kCqWords];
};
static_assert(kCqWords % 2 == 0, "a completion queue entry is stored in 16-byte stores");
// The host's side: whether entry e holds completion pos in full (every word landed); if so, its CqInfo.
inline bool read_cq_entry(const CqEntry& e, u64 pos, CqInfo* out) {
  u32 p[kCqWords];
  for (u32 i = 0; i < kCqWords; ++i) {
    const u64 w = __atomic_load_n(&e.w[i], __ATOMIC_RELAXED);
    if (word_flag(w) != entry_flag(pos)) return false;
    p[i] = word_payload(w);
  }
  memcpy(out, p, sizeof(CqInfo));
  return true;
}

struct BlockStats {  // accumulated by each block at each exit
  u64 preemptions;
  u64 switches;
  u64 exits;
  u64 primitives;
  u64 prof[8];       // DFCCL_PROFILE builds: cycles per phase (block.h, Phase)
  u64 prof_ns;       // DFCCL_PROFILE builds: executor nanoseconds of the launches (converts cycles)
  u64 prefetched;    // block 0: submissions whose descriptor it took from the prefetcher's copy
  u64 pad[2];
};

struct Heartbeat {  // written by each block about once a millisecond while the daemon runs (dfcclDebugDump)
  u64 now_ns;       // executor clock of the write
  u64 epoch;        // launch that wrote it
  u64 passes;       // scheduler passes of this launch so far
  u32 nactive;      // collectives the block holds
  u32 first_slot;   // the first of them in scheduling order (~0u if none)
};

struct WaitEntry {  // a stream waits until complete[slot] >= seq; probe: the barrier probe issued with the wait
  u64 slot;
  u64 seq;
  u64 probe;
};

// A submission ring's entry for ring position pos (EngineGlobal::ring), and the submission's tag: its ring + 1 in
// bits 48-55 above that entry (EngineGlobal::desc_claim, pre_ready, the post log).
DFCCL_HD inline u64 ring_entry(u64 pos, u32 slot) { return ((pos + 1) << 16) | slot; }
// Bit 15 of an entry that the prefetcher forwarded (a host-ordered doorbell) right after its own copy of the same
// submission's descriptor, behind that copy's fence: the blocks take EngineGlobal::pre_desc[slot] without first
// reading pre_ready (scheduler.h, forward_host_doorbell and accept). Never part of a tag.
inline constexpr u64 kRingCopied = u64(1) << 15;
static_assert(kMaxSlots <= kRingCopied, "slots fit below the copied bit of a ring entry");
DFCCL_HD inline u32 ring_slot(u64 e) { return u32(e & (kRingCopied - 1)); }
DFCCL_HD inline u64 submission_tag(u32 ring, u64 entry) { return (u64(ring + 1) << 48) | entry; }
DFCCL_HD inline u32 tag_ring(u64 tag) { return u32((tag >> 48) & 0xffu) - 1; }
DFCCL_HD inline u64 tag_entry(u64 tag) { return tag & ((u64(1) << 48) - 1); }

// A host-ordered doorbell (EngineHost::host_ring) for host-ordered submission number n: the submission's tag
// (ring + 1 in bits 48-55, ring position + 1 in bits 16-47, slot in 0-15) and, in the top byte, the lap of n
// (n / kMaxSlots + 1, mod 256; a zeroed ring matches no lap). The prefetcher tells the doorbell it waits for from
// one of a lap earlier (not stored yet) by the lap alone.
inline constexpr u64 kHostRingTagMask = (u64(1) << 56) - 1;
DFCCL_HD inline u32 host_ring_lap(u64 n) { return u32((n / kMaxSlots + 1) & 0xffu); }
DFCCL_HD inline u64 host_ring_entry(u64 n, u64 tag) { return (u64(host_ring_lap(n)) << 56) | tag; }

// A post record (EngineHost::post_log, record n % kMaxSlots for posting number n, a submission's seq - 1): the
// submission's tag and its descriptor in flagged words of entry_flag(n), as a completion queue entry. The prefetcher
// reads a record in one instruction of its warp and takes it once every word carries one flag: the posting, its
// descriptor and which posting it is (a record a lap earlier: not posted yet; later: it fell behind) in one round
// trip over PCIe (docs/performance-log.md, 28). The tag's top bit says that the submission is host-ordered (its
// doorbell follows in EngineHost::host_ring). A zeroed record is taken for no posting of the first 2^31.
inline constexpr u32 kPostWords = u32((sizeof(u64) + sizeof(Desc)) / 4);  // the tag, then the descriptor
inline constexpr u32 kPostPacks = kPostWords / 2;
inline constexpr u64 kPostHostOrdered = u64(1) << 63;
struct alignas(16) PostRecord {
  u64 w[kPostWords];
};
static_assert(sizeof(Desc) % 16 == 0 && kPostWords % 2 == 0, "a post record is read in 16-byte packs");
// The host's side: posting n of submission `tag` (kPostHostOrdered or'ed in for a host-ordered one) with its
// descriptor. Word order does not matter: each word carries its flag.
inline void write_post_record(PostRecord& r, u64 n, u64 tag, const Desc& d) {
  u32 p[kPostWords];
  p[0] = u32(tag);
  p[1] = u32(tag >> 32);
  memcpy(p + 2, &d, sizeof(Desc));
  for (u32 i = 0; i < kPostWords; ++i) __atomic_store_n(&r.w[i], flagged_word(p[i], entry_flag(n)), __ATOMIC_RELAXED);
}

struct EngineHost {                // pinned host memory
  Desc desc[kMaxSlots];
  CqEntry cq[kCqEntries];          // completion queue (CqEntry), written by the daemon, drained by the host
  BlockStats stats[kMaxBlocks];
  u64 exit_reason;                 // kExit* of the last daemon run
  u64 probe_done;                  // device (probe stream): the last barrier probe that ran
  u64 nwaits;                      // host: entries of waits[] (released after the entries are written)
  u64 exit_announced;              // device: epoch of a daemon deciding to leave (0 after it decided to stay)
  WaitEntry waits[kMaxSlots];      // host: stream waits (dfcclWait) issued; completed ones are removed lazily
  // Submissions as the host posts them, before their doorbells (scheduler.h, prefetch_descs): record n % kMaxSlots
  // = the n-th submission (whose seq is n + 1) with its descriptor (PostRecord).
  PostRecord post_log[kMaxSlots];
  // Doorbells of host-ordered submissions (DFCCL_NO_STREAM), stored by the host with no CUDA call and forwarded into
  // EngineGlobal::ring by the prefetcher (scheduler.h, forward_host_doorbell): entry n % kMaxSlots =
  // host_ring_entry(n, tag of the n-th host-ordered submission). The host cannot lap the prefetcher: an entry not yet
  // forwarded holds a slot until its collective completes, which needs the doorbell.
  u64 host_ring[kMaxSlots];
  Heartbeat heartbeat[kMaxBlocks];
  // dfcclCommAbort (Engine::abort_comm): the communicator's attachment number into abort_gen[its index], then the
  // count, released. Plain stores: a stream write could be held by another thread's implicit synchronization that
  // waits for the aborted collective itself (docs/design.md, "Abort").
  u64 aborts;
  u64 abort_gen[kMaxComms];
};

// Tunables of the daemon, passed by value at each launch (docs/environment.md).
struct DaemonParams {
  u64 epoch;           // launch number (tags exit requests)
  u32 nblocks;
  u32 blocking;        // 1: blocking mode (no preemption, no stuck exit, strict submission order)
  u64 spin_min_ns;     // lowest spin budget
  u64 spin_init_ns;    // budget of a new instance
  u64 spin_max_ns;     // highest spin budget
  u32 spin_grow;       // after a wait of w ns succeeds, budget >= spin_grow * w
  u32 min_chan_bytes;  // bytes per data channel below which fewer channels carry data
  u64 idle_ns;         // exit after this long with nothing to run
  u64 stuck_ns;        // exit after this long without progress while collectives are pending
  u32 prefetch;        // 1: block nblocks is the descriptor prefetcher (scheduler.h, prefetch_descs)
  u32 pad;
};

struct EngineView {
  EngineGlobal* g;
  ChanCtx* ctx;  // [kMaxSlots][nblocks]
  EngineHost* h;
  DaemonParams p;
};

DFCCL_HD inline ChanCtx& chan_ctx(const EngineView& ev, u32 slot, u32 block) {
  return ev.ctx[u64(slot) * ev.p.nblocks + block];
}

}  // namespace dfccl::core
