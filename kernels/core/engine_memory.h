// The engine's memory, which the host runtime and the daemon share: its global state in device memory, its pinned
// host memory, the daemon's launch parameters. Everything here is trivially copyable. Where each piece lives and who
// writes it:
//
//   EngineGlobal   device memory   daemon (rings: host, through stream memory writes; quit: host, through the
//                                  engine's control stream; aborts: the daemon's copy of EngineHost's)
//   ChanCtx        device memory   daemon (one per outstanding collective and block: the saved context)
//   CommDev        device memory   host at init (through the control stream)
//   EngineHost     pinned host     descriptors, the post log and host-ordered doorbells: host (read by the
//                                  daemon's prefetcher, and by blocks without its copy); completion queue entries and
//                                  statistics: daemon (one write each); aborts: host (plain stores, no CUDA call),
//                                  copied into EngineGlobal by the daemon (scheduler/aborts.h, look_for_aborts)
#pragma once

#include <cstddef>

#include "flagged.h"

namespace dfccl::core {

// Exit requests (EngineGlobal::exit_request = epoch << 8 | kExit*). kExitPending: a block is deciding (announced in
// EngineHost::exit_announced, then the waits are scanned again); the blocks leave only on Idle, Stuck or Quit.
enum : u64 { kExitNone = 0, kExitIdle = 1, kExitStuck = 2, kExitQuit = 3, kExitPending = 4 };
// Whether exit request `req` orders the launch of `epoch` to leave (Idle, Stuck or Quit of that launch).
DFCCL_HD inline bool exit_ordered(u64 req, u64 epoch) {
  const u64 r = req & 0xff;
  return (req >> 8) == epoch && (r == kExitIdle || r == kExitStuck || r == kExitQuit);
}
// Launch tags (scheduler/owner.h): a host launch's is its epoch (below kStandInTag), a stand-in's has kStandInTag.
inline constexpr u64 kStandInTag = u64(1) << 54;
// In a stand-in's tag (scheduler/owner.h, standin_tag): the mark of a captured instance; the bits below it hold the
// low bits of the instance's sequence number.
inline constexpr u64 kStandInCaptured = kStandInTag >> 1;
DFCCL_HD inline bool is_standin(u64 tag) { return (tag & kStandInTag) != 0; }
// EngineGlobal::owner = tag << 9 | leaving << 8 | members (scheduler/owner.h).
inline constexpr u64 kOwnerLeaving = u64(1) << 8;
inline constexpr u64 kOwnerMembers = 0xff;
static_assert(kMaxBlocks + 1 <= kOwnerMembers, "the owner word counts the blocks of a launch in 8 bits");
DFCCL_HD inline u64 owner_tag(u64 owner) { return owner >> 9; }

// Captured collectives (docs/design.md, "CUDA graphs"; scheduler/graph_start.h). Each captured call owns a slot for
// the life of its graph; each replay posts a new instance of it into ring kGraphRing, which the host never uses, with
// a sequence number above kGraphSeqBase (host submissions stay below it). graph_state[slot]: kGraphIdle until the
// slot's first instance, kGraphPending from its post to its completion, then kGraphDone (what a captured dfcclWait
// waits for). kMaxGraphGroups: the starts of one graph that take their turns from one counter of one communicator
// (its graph lane's, or one (lane, direction, peer) of its captured transfers') form a group, whose replay takes
// consecutive turns from that counter.
inline constexpr u32 kGraphRing = kMaxRings - 1;
inline constexpr u64 kGraphSeqBase = u64(1) << 62;
enum : u64 { kGraphIdle = 0, kGraphPending = 1, kGraphDone = 2 };
inline constexpr u32 kMaxGraphGroups = 1024;
// kProfile builds: executor-clock stamps of each captured instance on its way, in EngineGlobal::graph_trace at
// (seq - kGraphSeqBase - 1) % kGraphTraceN: its start node entered and posted (graph_start.h), block 0 picked it up
// (pickup.h), the last block completed it (completion.h), its wait's block 0 entered and saw it done, and 1 where that
// wait stood in (graph_wait.h). Engine::log_graph_trace prints the medians of the phases between them.
enum GraphStamp : u32 {
  kStampStart,
  kStampPosted,
  kStampPicked,
  kStampDone,
  kStampWaitIn,
  kStampWaitSeen,
  kStampStoodIn,
  kGraphStamps
};
inline constexpr u32 kGraphTraceN = kProfile ? 4096 : 1;
// Caller: kProfile code only. Stamps phase k of the instance seq (none for an eager one).
DFCCL_HD inline void graph_stamp(u64 (*trace)[kGraphStamps], u64 seq, u32 k, u64 value) {
  if (seq > kGraphSeqBase) trace[(seq - kGraphSeqBase - 1) % kGraphTraceN][k] = value;
}
// kProfile builds: each launch that asked for the engine (scheduler/owner.h, enter_launch), the last kLaunchTraceN in
// EngineGlobal::launch_trace: its tag, block 0's entry and verdict (executor clock) and whether it ran, and when its
// block 0 left the scheduler (0: it did not run). Engine::log_graph_trace prints them around slow instances.
struct LaunchStamp {
  u64 tag, entry, decided, runs, left;
};
inline constexpr u32 kLaunchTraceN = kProfile ? 2048 : 1;

// A group's turns for one replay (EngineGlobal::graph_group): claim and ready are gen << 32 | replays claimed (resp.
// published), base the first turn of the replay that ready names.
struct GraphGroup {
  u64 claim;
  u64 ready;
  u64 base;
  u64 pad;
};

struct EngineGlobal {                   // device memory
  u64 ring[kMaxRings][kRingEntries];    // submission rings: (position + 1) << 16 | slot, maybe | kRingCopied
  u64 frontier[kMaxBlocks][kMaxRings];  // each block's next ring position, saved at exit
  u64 complete[kMaxSlots];              // completion words: seq of the last finished occupant (stream waits)
  u32 done_count[kMaxSlots];            // blocks finished with the slot's current instance
  u32 status[kMaxSlots];                // non-zero: some block failed the instance (e.g. aborted)
  u32 preemptions[kMaxSlots];           // summed over the blocks of the slot's current instance
  u32 wait_max_us[kMaxSlots];           // the longest ChanCtx::wait_us of the instance's channels
  u64 start_inv[kMaxSlots];             // ~(earliest block start time), max-combined; 0 = none yet
  // Descriptors copied from pinned memory by the first block that claims them, for the other blocks (one reader of
  // pinned memory per collective, not one per block). Tags name a submission: (ring + 1) << 48 | its ring entry.
  Desc desc[kMaxSlots];
  u64 desc_claim[kMaxSlots];  // tag of the submission whose copy a block has taken on
  u64 desc_ready[kMaxSlots];  // tag of the submission whose copy is in desc[]
  // The prefetcher's copies (scheduler/prefetcher.h), by slot, and the tag of the submission each holds.
  Desc pre_desc[kMaxSlots];
  u64 pre_ready[kMaxSlots];
  u64 pre_next;          // the prefetcher: next EngineHost::post_log record to copy
  u64 host_next;         // the prefetcher: next EngineHost::host_ring entry to forward
  u64 cq_tail;           // completion queue positions handed out
  u64 last_activity_ns;  // last time any block made progress or picked up work
  u64 exit_request;      // epoch << 8 | kExit*: all blocks of that launch leave
  u64 quit;              // host: leave now (engine shutdown)
  // The daemon's copy of EngineHost::aborts and abort_gen (scheduler/aborts.h, look_for_aborts): the count last, after
  // the table, and each only ever raised (atomic max), so that no copy, however late, lowers one.
  u64 aborts;                // communicators aborted so far
  u64 abort_gen[kMaxComms];  // by communicator index: attachment number of the last one aborted
  u32 busy[kMaxBlocks];      // block has collectives pending (exit decisions)
  // Captured collectives (scheduler/graph_start.h): each instance's descriptor, posted by its start; the slot's
  // state; its graph's generation and how many instances that graph has posted in it; the groups; the graph ring's
  // positions handed out; the captured waits running now (they keep the daemon: exit.h, kept_by_a_wait).
  alignas(16) Desc graph_desc[kMaxSlots];  // 16-byte stores (graph_post)
  u64 graph_state[kMaxSlots];
  u64 graph_gen[kMaxSlots];
  u64 graph_runs[kMaxSlots];
  GraphGroup graph_group[kMaxGraphGroups];
  u64 graph_ring_tail;
  u64 graph_seq;  // instances posted so far (their sequence numbers: kGraphSeqBase + 1 + this)
  // A slot's nodes that post and wait in one (graph_start_wait_block): the blocks that arrived at them so far, and
  // the last run whose instance their block 0 posted (run + 1).
  u64 graph_arrivals[kMaxSlots];
  u64 graph_announced[kMaxSlots];
  u64 graph_waiters;
  // The launch that runs the scheduler, and each launch's verdict (scheduler/owner.h): [0] the host's launches,
  // [1 + slot] the stand-ins of the slot's instances.
  u64 owner;
  u64 verdict[kMaxSlots + 1];
  // kProfile builds: the graph path's stamps (GraphStamp) of the last kGraphTraceN captured instances.
  u64 graph_trace[kGraphTraceN][kGraphStamps];
  u64 launches_traced;  // kProfile: launch_trace entries written; owner_trace: the owning launch's entry
  u64 owner_trace;
  LaunchStamp launch_trace[kLaunchTraceN];
};

struct BlockStats {  // accumulated by each block at each exit
  u64 preemptions;
  u64 switches;
  u64 exits;
  u64 primitives;
  u64 prof[8];     // DFCCL_PROFILE builds: cycles per phase (block.h, Phase)
  u64 prof_ns;     // DFCCL_PROFILE builds: executor nanoseconds of the launches (converts cycles)
  u64 prefetched;  // block 0: submissions whose descriptor it took from the prefetcher's copy
  u64 pad[2];
};

struct Heartbeat {  // written by each block about once a millisecond while the daemon runs (dfcclDebugDump)
  u64 now_ns;       // executor clock of the write
  u64 epoch;        // launch that wrote it
  u64 passes;       // scheduler passes of this launch so far
  u32 nactive;      // collectives the block holds
  u32 first_slot;   // the first of them in scheduling order (~0u if none)
};

// What a stream waits for (dfcclWait, the CUDA executor's waiting kernel): *word >= value, then, when settle_word is
// set, *settle_word >= value for at most settle_ns more (the signatures across hosts: Engine::wait_on_stream); it
// goes on at once when *abort_word == abort_value.
struct StreamWait {
  const u64* word;
  u64 value;
  const u64* abort_word;
  u64 abort_value;
  const u64* settle_word;
  u64 settle_ns;
};

// A wait that may stand in for the daemon (scheduler/graph_wait.h): the slot of its collective, the communicator's
// abort word and attachment number (an abort releases the wait), and seq: 0 for a captured wait (fixed at capture:
// each replay's instance has its own, read from graph_desc), else the eager instance's (Engine::wait_as_standin).
// poll_only: a later wait of the same captured call, which only polls (one instance, one tag: the first stands in).
struct GraphWait {
  const u64* abort_word;
  u64 abort_value;
  u64 seq;
  u32 slot;
  u32 poll_only;
};

struct WaitEntry {  // a stream waits until complete[slot] >= seq; probe: the barrier probe issued with the wait
  u64 slot;
  u64 seq;
  u64 probe;
  u64 door;  // the collective's submission tag where a stream writes its doorbell (submission_tag), 0 where not
};

// A submission ring's entry for ring position pos (EngineGlobal::ring), and the submission's tag: its ring + 1 in
// bits 48-55 above that entry (EngineGlobal::desc_claim, pre_ready, the post log).
DFCCL_HD inline u64 ring_entry(u64 pos, u32 slot) { return ((pos + 1) << 16) | slot; }
// Bit 15 of an entry that the prefetcher forwarded (a host-ordered doorbell) right after its own copy of the same
// submission's descriptor, behind that copy's fence: the blocks take EngineGlobal::pre_desc[slot] without first
// reading pre_ready (scheduler/prefetcher.h, forward_host_doorbell; scheduler/pickup.h, accept). Never part of a tag.
inline constexpr u64 kRingCopied = u64(1) << 15;
static_assert(kMaxSlots <= kRingCopied, "slots fit below the copied bit of a ring entry");
// A ring entry's slot; a submission's tag from its ring and ring entry, and back.
DFCCL_HD inline u32 ring_slot(u64 e) { return u32(e & (kRingCopied - 1)); }
DFCCL_HD inline u64 submission_tag(u32 ring, u64 entry) { return (u64(ring + 1) << 48) | entry; }
DFCCL_HD inline u32 tag_ring(u64 tag) { return u32((tag >> 48) & 0xffu) - 1; }
DFCCL_HD inline u64 tag_entry(u64 tag) { return tag & ((u64(1) << 48) - 1); }

// A host-ordered doorbell (EngineHost::host_ring) for host-ordered submission number n: the submission's tag
// (ring + 1 in bits 48-55, ring position + 1 in bits 16-47, slot in 0-15) and, in the top byte, the lap of n
// (n / kMaxSlots + 1, mod 256; a zeroed ring matches no lap). The prefetcher tells the doorbell it waits for from
// one of a lap earlier (not stored yet) by the lap alone.
inline constexpr u64 kHostRingTagMask = (u64(1) << 56) - 1;
// The lap of host-ordered submission n, and its doorbell for submission `tag`.
DFCCL_HD inline u32 host_ring_lap(u64 n) { return u32((n / kMaxSlots + 1) & 0xffu); }
DFCCL_HD inline u64 host_ring_entry(u64 n, u64 tag) { return (u64(host_ring_lap(n)) << 56) | tag; }

struct EngineHost {  // pinned host memory
  Desc desc[kMaxSlots];
  CqEntry cq[kCqEntries];  // completion queue (CqEntry), written by the daemon, drained by the host
  BlockStats stats[kMaxBlocks];
  u64 exit_reason;             // kExit* of the last daemon run
  u64 probe_done;              // device (probe stream): the last barrier probe that ran
  u64 nwaits;                  // host: entries of waits[] (released after the entries are written)
  u64 exit_announced;          // device: epoch of a daemon deciding to leave (0 after it decided to stay)
  u64 standin_runs;            // device: waits that ran the scheduler (scheduler/graph_wait.h)
  WaitEntry waits[kMaxSlots];  // host: stream waits (dfcclWait) issued; completed ones are removed lazily
  // Submissions as the host posts them, before their doorbells (scheduler/prefetcher.h): record n % kMaxSlots
  // = the n-th submission (whose seq is n + 1) with its descriptor (PostRecord).
  PostRecord post_log[kMaxSlots];
  // Doorbells of host-ordered submissions (DFCCL_NO_STREAM), stored by the host with no CUDA call and forwarded into
  // EngineGlobal::ring by the prefetcher (scheduler/prefetcher.h, forward_host_doorbell): entry n % kMaxSlots =
  // host_ring_entry(n, tag of the n-th host-ordered submission). The host cannot lap the prefetcher: an entry not yet
  // forwarded holds a slot until its collective completes, which needs the doorbell.
  u64 host_ring[kMaxSlots];
  Heartbeat heartbeat[kMaxBlocks];
  // dfcclCommAbort (Engine::abort_comm): the communicator's attachment number into abort_gen[its index], then the
  // count, released. Plain stores: a stream write could be held by another thread's implicit synchronization that
  // waits for the aborted collective itself (docs/design.md, "Abort").
  u64 aborts;
  u64 abort_gen[kMaxComms];
  // host (the progress thread): per slot, the sequence number of its last collective whose request has its final
  // status. Written only for communicators across hosts, whose slots stay taken until then (Engine::settle).
  u64 settled[kMaxSlots];
  // Captured collectives: the sequence number of a slot's last instance posted (written by its start) and completed
  // (by the daemon's last block), which tell the progress thread that a replay needs a daemon; how many collectives
  // each group has (host, while capturing).
  u64 graph_posted[kMaxSlots];
  u64 graph_done[kMaxSlots];
  u64 graph_group_n[kMaxGraphGroups];
};

// A captured collective's (or transfer's) start node's parameters (scheduler/graph_start.h, graph_post), fixed at
// capture: the descriptor without seq and turn, the slot it owns, its group (the starts of one graph that take turns
// from `turns`), its index in the group and the graph's generation (unique per group: it tells the group's and the
// slot's words of an earlier owner from this graph's).
struct GraphStart {
  Desc desc;  // first: 16-byte aligned
  EngineGlobal* g;
  EngineHost* h;
  u64* turns;  // device memory: the communicator's CommDev::graph_turn, or a captured transfer lane's counter
  u32 slot;
  u32 group;
  u32 index;
  u32 gen;
};

// Tunables of the daemon, passed by value at each launch (docs/environment.md).
struct DaemonParams {
  u64 epoch;  // launch number (tags exit requests)
  u32 nblocks;
  u32 blocking;        // 1: blocking mode (no preemption, no stuck exit, strict submission order)
  u64 spin_min_ns;     // lowest spin budget
  u64 spin_init_ns;    // budget of a new instance
  u64 spin_max_ns;     // highest spin budget
  u32 spin_grow;       // after a wait of w ns succeeds, budget >= spin_grow * w
  u32 min_chan_bytes;  // bytes per data channel below which fewer channels carry data
  u64 idle_ns;         // exit after this long with nothing to run
  u64 stuck_ns;        // exit after this long without progress while collectives are pending
  u32 prefetch;        // 1: block nblocks is the descriptor prefetcher (scheduler/prefetcher.h)
  u32 standin;         // 0: a host launch; slot + 1: a wait standing in for the daemon (graph_wait.h)
  u64 sleep_ns;        // host executor: a wait yields the core this long, then sleeps (X::backoff)
  u64 standin_seq;     // a stand-in: the instance it waits for (done once complete[standin - 1] >= standin_seq)
};

static_assert(offsetof(EngineGlobal, graph_desc) % 16 == 0, "graph_post stores 16-byte packs");

struct EngineView {  // what a daemon launch is given: its memory and parameters
  EngineGlobal* g;
  ChanCtx* ctx;  // [kMaxSlots][nblocks]
  EngineHost* h;
  DaemonParams p;
};

// The context of channel `block` of the collective in `slot`.
DFCCL_HD inline ChanCtx& chan_ctx(const EngineView& ev, u32 slot, u32 block) {
  return ev.ctx[u64(slot) * ev.p.nblocks + block];
}

}  // namespace dfccl::core
