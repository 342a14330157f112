#include "transport/p2p.h"
#include "transport/p2p_table.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <chrono>

#include "bootstrap/bootstrap.h"
#include "comm/comm_state.h"
#include "comm/links.h"
#include "engine/engine.h"
#include "match/match_board.h"
#include "transport/connection.h"
#include "util/error.h"

namespace dfccl {

namespace {

using namespace p2p_table;

struct Table {
  TableHeader* header;
  ArenaUse* use;
  PairEntry* pairs;
  int n;
  PairEntry& pair(int a, int b) const { return pairs[size_t(std::min(a, b)) * size_t(n) + size_t(std::max(a, b))]; }
};

Table table(const dfcclComm* c) {
  auto* base = static_cast<char*>(c->bootstrap->p2p_area());
  Table t{};
  t.header = reinterpret_cast<TableHeader*>(base);
  t.use = reinterpret_cast<ArenaUse*>(t.header + 1);
  t.pairs = reinterpret_cast<PairEntry*>(t.use + c->nranks);
  t.n = c->nranks;
  return t;
}

// Holds the table's lock for one claim; gives up after the init timeout, naming the holder.
class TableLock {
 public:
  TableLock(const dfcclComm* c, const Table& t) : word_(&t.header->lock) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto limit = std::chrono::milliseconds(c->config.initTimeoutMs);
    for (uint64_t expect = 0;
         !__atomic_compare_exchange_n(word_, &expect, uint64_t(c->rank) + 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
         expect = 0) {
      if (std::chrono::steady_clock::now() - t0 > limit)
        throw Error(dfcclTimeout,
                    fmt::format("point-to-point: rank {} has held the communicator's connection table for {} ms "
                                "(it died while connecting?); nothing was queued",
                                expect - 1, c->config.initTimeoutMs));
      sched_yield();
    }
  }
  ~TableLock() { __atomic_store_n(word_, uint64_t(0), __ATOMIC_RELEASE); }
  TableLock(const TableLock&) = delete;
  TableLock& operator=(const TableLock&) = delete;

 private:
  uint64_t* word_;
};

// What arena `r` can give each of k connections carved now: an equal share of what is left once the smallest
// connection (min_conn) is kept for each of its other ranks not yet connected. At least min_conn: the invariant
// used + (nranks - connected) * min_conn <= capacity holds from init on (capacity >= nranks * min_conn).
uint64_t share(const Table& t, int r, uint64_t k, uint64_t min_conn) {
  const ArenaUse& u = t.use[r];
  const uint64_t keep = (uint64_t(t.n) - u.connected - k) * min_conn;
  return (u.capacity - u.used - keep) / k;
}

// A connection's channels and slot size.
struct Shape {
  uint32_t nchan, slot_bytes;
};

// The slot sizes a connection may take, largest first: the configured one, then halves down to kMinSlotBytes.
constexpr uint32_t kMinSlotBytes = 32768;
std::vector<uint32_t> slot_sizes(uint32_t slot_bytes) {
  std::vector<uint32_t> s{slot_bytes};
  while (s.back() / 2 >= kMinSlotBytes && s.back() % 32 == 0) s.push_back(s.back() / 2);
  return s;
}

// The largest shape that fits `bytes`: up to nchan channels of the largest slots that still give it min(4, nchan)
// channels (more channels move more at once than larger slots do), else as many channels of the smallest slots as
// fit (at least 1: the arena's invariant keeps that much).
Shape shape_within(uint64_t bytes, uint32_t nchan, uint32_t nlanes, uint32_t nslots, uint32_t slot_bytes) {
  const std::vector<uint32_t> sizes = slot_sizes(slot_bytes);
  Shape best{1, sizes.back()};
  for (uint32_t s : sizes) {
    uint32_t k = nchan;
    while (k > 1 && p2p_conn_bytes(k, nlanes, nslots, s) > bytes) --k;
    best = {k, s};
    if (k >= std::min<uint32_t>(4, nchan)) break;
  }
  return best;
}

// Fills the descriptors' fixed parts of the connection with q: my slice, q's slice (mapped or its shadow), shape.
void fill(dfcclComm* c, int q, Shape shape, char* mine, char* theirs) {
  P2pConnections& p = c->p2p;
  const TransportParams& g = c->geometry;
  const size_t per_direction = size_t(c->engine->transport().nchan) * p.nlanes;
  for (int dir = 0; dir < 2; ++dir) {
    core::CommStatic& s = p.cs[size_t(q) * 2 + size_t(dir)];
    s.rank = c->rank;
    s.nranks = c->nranks;
    s.prev = s.next = q;
    s.nchan = shape.nchan;
    s.nlanes = p.nlanes;
    s.nslots = g.nslots;
    s.slot_bytes = shape.slot_bytes;
    s.self = mine;
    s.next_region = s.prev_region = theirs;
    s.lanes = p.lanes + (size_t(q) * 2 + size_t(dir)) * per_direction;
  }
  p.connected[size_t(q)] = 1;
  __atomic_fetch_add(&p.connections, 1, __ATOMIC_RELAXED);
}

// Network connections: every connection carved at init, full, at q's index in my arena and mine in q's (a remote
// q's: a shadow, comm/links.h).
void connect_all(dfcclComm* c) {
  P2pConnections& p = c->p2p;
  const TransportParams& g = c->geometry;
  const uint64_t conn = p2p_conn_bytes(p.nchan, p.nlanes, g.nslots, g.slot_bytes);
  char* mine = reinterpret_cast<char*>(p.region.ptr);
  for (int q = 0; q < c->nranks; ++q) {
    char* theirs = c->net.remote[size_t(q)] ? static_cast<char*>(net_shadow(c, conn, false))
                                            : static_cast<char*>(p.mapped[size_t(q)]) + uint64_t(c->rank) * conn;
    fill(c, q, {p.nchan, g.slot_bytes}, mine + uint64_t(q) * conn, theirs);
  }
}

}  // namespace

uint64_t p2p_conn_bytes(uint32_t nchan, uint32_t nlanes, uint32_t nslots, uint32_t slot_bytes) {
  return core::round_up(core::region_bytes(nchan, nlanes, nslots, slot_bytes), uint64_t(4096));
}

uint64_t p2p_min_conn_bytes(uint32_t nlanes, uint32_t nslots, uint32_t slot_bytes) {
  return p2p_conn_bytes(1, nlanes, nslots, slot_sizes(slot_bytes).back());
}

uint64_t p2p_arena_bytes(uint32_t nchan, uint32_t nlanes, uint32_t nslots, uint32_t slot_bytes, int nranks,
                         uint64_t arena_bytes, bool all_at_init) {
  if (nchan == 0) return 0;
  if (all_at_init) return p2p_conn_bytes(nchan, nlanes, nslots, slot_bytes) * uint64_t(nranks);
  const uint64_t least = p2p_min_conn_bytes(nlanes, nslots, slot_bytes) * uint64_t(nranks);
  return std::max(least, core::round_up(arena_bytes, uint64_t(4096)));
}

void p2p_connect(dfcclComm* c) {
  Engine& e = *c->engine;
  Executor& ex = e.exec();
  Transport& t = *c->transport;
  const TransportParams& tp = e.transport();
  const TransportParams& g = c->geometry;  // the connections' shape (the lane states cover every engine block)
  P2pConnections& p = c->p2p;
  p.nchan = g.p2p_chan;
  if (p.nchan == 0) return;  // every rank agrees (check_agreement)
  const int n = c->nranks;
  p.on_first_use = !c->net.any;
  const bool graphs = tp.graph_lane && p.on_first_use;  // as the communicator's graph lane (comm_init)
  p.nlanes = graphs ? kP2pGraphLanes : kP2pLanes;
  p.region =
      t.alloc_region(p2p_arena_bytes(p.nchan, p.nlanes, g.nslots, g.slot_bytes, n, g.p2p_arena, !p.on_first_use));
  if (p.on_first_use) table(c).use[c->rank].capacity = p.region.bytes;  // before the barrier below
  p.blobs.resize(size_t(n));
  c->bootstrap->allgather(&p.region, sizeof(RegionBlob), p.blobs.data());
  p.mapped.assign(size_t(n), nullptr);
  for (int q = 0; q < n; ++q) {
    if (c->net.remote[size_t(q)]) continue;
    p.mapped[size_t(q)] = q == c->rank ? reinterpret_cast<void*>(p.region.ptr) : t.map_region(p.blobs[size_t(q)]);
  }
  c->bootstrap->barrier();
  t.mapped_by_all(p.region);

  // Lane states for every engine block (a descriptor's blocks past its channels still take their turn), then the
  // captured lanes' turn counters (zeroed).
  const size_t per_direction = size_t(tp.nchan) * p.nlanes, nstates = per_direction * 2 * size_t(n);
  const size_t nturns = graphs ? size_t(kP2pLanes) * 2 * size_t(n) : 0;
  p.lanes =
      static_cast<core::LaneState*>(ex.alloc_device(sizeof(core::LaneState) * nstates + sizeof(uint64_t) * nturns));
  p.graph_turns = graphs ? reinterpret_cast<uint64_t*>(p.lanes + nstates) : nullptr;
  p.graph_keys.assign(nturns, 0);
  p.cs.assign(2 * size_t(n), core::CommStatic{});
  p.connected.assign(size_t(n), 0);
  p.next.assign(size_t(kP2pLanes) * 2 * size_t(n), 0);
  if (!p.on_first_use) connect_all(c);
}

void p2p_claim(dfcclComm* c, const std::vector<int>& peers) {
  P2pConnections& p = c->p2p;
  std::vector<int> todo;
  for (int q : peers)
    if (!p.connected[size_t(q)] && std::find(todo.begin(), todo.end(), q) == todo.end()) todo.push_back(q);
  if (todo.empty()) return;
  const TransportParams& g = c->geometry;
  const Table t = table(c);
  const int me = c->rank;
  {
    TableLock lock(c, t);
    std::vector<int> fresh;  // connections no rank has carved yet
    for (int q : todo)
      if (!__atomic_load_n(&t.pair(me, q).ready, __ATOMIC_ACQUIRE)) fresh.push_back(q);
    const uint64_t min_conn = p2p_min_conn_bytes(p.nlanes, g.nslots, g.slot_bytes);
    const uint64_t mine = fresh.empty() ? 0 : share(t, me, fresh.size(), min_conn);
    for (int q : fresh) {
      const uint64_t fits = q == me ? mine : std::min(mine, share(t, q, 1, min_conn));
      const Shape shape = shape_within(fits, p.nchan, p.nlanes, g.nslots, g.slot_bytes);
      const uint64_t bytes = p2p_conn_bytes(shape.nchan, p.nlanes, g.nslots, shape.slot_bytes);
      const auto carve = [&](int r) {  // the slice's offset in r's arena
        ArenaUse& u = t.use[r];
        u.used += bytes;
        u.connected += 1;
        return u.used - bytes;
      };
      PairEntry& e = t.pair(me, q);
      e.nchan = shape.nchan;
      e.slot_bytes = shape.slot_bytes;
      e.off_lo = carve(std::min(me, q));
      e.off_hi = q == me ? e.off_lo : carve(std::max(me, q));
      __atomic_store_n(&e.ready, uint64_t(1), __ATOMIC_RELEASE);
    }
  }
  for (int q : todo) {
    const PairEntry& e = t.pair(me, q);
    const uint64_t off_mine = me <= q ? e.off_lo : e.off_hi, off_theirs = me <= q ? e.off_hi : e.off_lo;
    fill(c, q, {e.nchan, e.slot_bytes}, reinterpret_cast<char*>(p.region.ptr) + off_mine,
         static_cast<char*>(p.mapped[size_t(q)]) + off_theirs);
  }
}

std::string p2p_describe(dfcclComm* c) {
  const P2pConnections& p = c->p2p;
  std::string s = fmt::format("rank {} of {}: point-to-point ", c->rank, c->nranks);
  if (p.nchan == 0) return s + "off (DFCCL_P2P_CHANNELS=0)";
  s += fmt::format("arena {:.1f} MiB{}", double(p.region.bytes) / (1 << 20), p.on_first_use ? "" : " (all at init)");
  std::unique_lock<std::mutex> lk(c->mu, std::try_to_lock);
  if (!lk.owns_lock()) return s + ", connections not read (a submission holds the communicator)";
  const char* sep = ", connected with ";
  for (int q = 0; q < c->nranks; ++q) {
    if (!p.connected[size_t(q)]) continue;
    const core::CommStatic& cs = p2p_static(c, q, 0);
    s += fmt::format("{}{} ({} x {} KiB)", sep, q, cs.nchan, cs.slot_bytes / 1024);
    sep = ", ";
  }
  return s;
}

int p2p_connections(const dfcclComm* c) { return __atomic_load_n(&c->p2p.connections, __ATOMIC_RELAXED); }

bool p2p_caught_up(dfcclComm* c) {
  const P2pConnections& p = c->p2p;
  if (p.nchan == 0) return true;
  for (int q = 0; q < c->nranks; ++q) {
    if (!p.connected[size_t(q)]) continue;                                          // never used: nothing sent
    if (q != c->rank && c->bootstrap->peer_state(q) == Bootstrap::kLeft) continue;  // it writes no more credits
    if (!credits_returned(c->engine->exec(), p2p_static(c, q, 0))) return false;    // heads: q's credits for my sends
  }
  return true;
}

}  // namespace dfccl
