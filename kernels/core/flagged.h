// Flagged words: the encodings of the completion queue's entries and of the post records, which one side writes
// word by word and the other takes once every word has landed, with no fence between them.
#pragma once

#include <cstring>

#include "desc.h"

namespace dfccl::core {

// What the last block of a collective reports to the host (dfcclRequestInfo), in its completion queue entry.
struct CqInfo {
  u64 seq;
  u64 t_start;
  u64 t_end;
  u32 slot;
  u32 status;
  u32 preemptions;
  u32 wait_us;  // the longest time a channel spent waiting for peers
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
// in flagged words of entry_flag(pos), written by write_cq_entry (scheduler/completion.h). The host takes the entry
// once every flag is its own.
inline constexpr u32 kCqWords = u32(sizeof(CqInfo) / 4);
struct alignas(16) CqEntry {
  u64 w[kCqWords];
};
static_assert(kCqWords % 2 == 0, "a completion queue entry is stored in 16-byte stores");
// Caller: the host, draining the queue. Returns whether entry e holds completion pos in full (every word landed);
// if so, *out receives its CqInfo.
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

// A post record (EngineHost::post_log, record n % kMaxSlots for posting number n, a submission's seq - 1): the
// submission's tag and its descriptor in flagged words of entry_flag(n), as a completion queue entry. The prefetcher
// reads a record in one instruction of its warp and takes it once every word carries one flag: the posting, its
// descriptor and which posting it is (a record a lap earlier: not posted yet; later: it fell behind) in one read.
// The tag's top bit says that the submission is host-ordered (its doorbell follows in EngineHost::host_ring). A
// zeroed record is taken for no posting of the first 2^31.
inline constexpr u32 kPostWords = u32((sizeof(u64) + sizeof(Desc)) / 4);  // the tag, then the descriptor
inline constexpr u32 kPostPacks = kPostWords / 2;
inline constexpr u64 kPostHostOrdered = u64(1) << 63;
struct alignas(16) PostRecord {
  u64 w[kPostWords];
};
static_assert(sizeof(Desc) % 16 == 0 && kPostWords % 2 == 0, "a post record is read in 16-byte packs");
// Caller: the host, before the submission's doorbell. Writes posting n of submission `tag` (kPostHostOrdered or'ed
// in for a host-ordered one) with its descriptor into r. Word order does not matter: each word carries its flag.
inline void write_post_record(PostRecord& r, u64 n, u64 tag, const Desc& d) {
  u32 p[kPostWords];
  p[0] = u32(tag);
  p[1] = u32(tag >> 32);
  memcpy(p + 2, &d, sizeof(Desc));
  for (u32 i = 0; i < kPostWords; ++i) __atomic_store_n(&r.w[i], flagged_word(p[i], entry_flag(n)), __ATOMIC_RELAXED);
}

}  // namespace dfccl::core
