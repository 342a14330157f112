// The point-to-point carving bookkeeping's layout in the bootstrap segment (p2p.cpp carves, bootstrap.cpp places
// the table after the notes): shared by the ranks of one host, zeroed at creation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dfccl::p2p_table {

struct TableHeader {
  uint64_t lock;  // 0: free; else the holder's rank + 1
  uint64_t pad[7];
};
struct ArenaUse {      // one per rank
  uint64_t capacity;   // its arena's bytes (written at init, before the barrier that precedes any claim)
  uint64_t used;       // bytes carved
  uint64_t connected;  // connections carved (its connection with itself counts once)
  uint64_t pad;
};
struct PairEntry {  // the connection of ranks lo <= hi
  uint64_t ready;   // 1 once carved (release: the fields below first)
  uint32_t nchan, slot_bytes;
  uint64_t off_lo, off_hi;  // its slice in lo's arena and in hi's
};

// The table's share of the bootstrap segment.
inline size_t p2p_table_bytes(int nranks) {
  return sizeof(TableHeader) + sizeof(ArenaUse) * size_t(nranks) + sizeof(PairEntry) * size_t(nranks) * size_t(nranks);
}

}  // namespace dfccl::p2p_table
