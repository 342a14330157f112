#include "transport/persistent.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "comm/comm_state.h"
#include "match/match_board.h"
#include "transport/connection.h"
#include "util/error.h"

namespace dfccl {

namespace {

// dfcclRemoteError when rank q destroyed or aborted the communicator; `when` ends the message.
void throw_if_peer_gone(const dfcclComm* c, int q, int id, const char* when) {
  const uint64_t state = c->bootstrap->peer_state(q);
  if (state == Bootstrap::kLeft || state == Bootstrap::kAborted || state == Bootstrap::kFailed)
    throw Error(dfcclRemoteError, fmt::format("dfcclStart: persistent id {}: rank {} of {} {} {}", id, q, c->nranks,
                                              state == Bootstrap::kLeft      ? "destroyed the communicator"
                                              : state == Bootstrap::kAborted ? "aborted the communicator"
                                                                             : "ended the communicator on a failure",
                                              when));
}

// Rank q's region for persistent id `id`, once q has prepared it (its note in the bootstrap segment). Throws when
// c ends, q leaves or aborts, or the init timeout passes first.
RegionBlob wait_for_lane(dfcclComm* c, int q, int id) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto limit = std::chrono::milliseconds(c->config.initTimeoutMs);
  auto sleep = std::chrono::microseconds(10);
  RegionBlob blob{};
  while (!c->bootstrap->read_note(q, id, &blob, sizeof(blob))) {
    if (!c->alive) throw_comm_ended(c);
    throw_if_peer_gone(c, q, id, "without preparing it");
    if (std::chrono::steady_clock::now() - t0 > limit)
      throw Error(dfcclTimeout,
                  fmt::format("dfcclStart: persistent id {}: rank {} of {} has not prepared it after {} ms (every "
                              "rank prepares an id before its first start; timeout: config.initTimeoutMs or "
                              "DFCCL_INIT_TIMEOUT_MS); nothing was queued",
                              id, q, c->nranks, c->config.initTimeoutMs));
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::milliseconds(1)) sleep *= 2;
  }
  return blob;
}

// Why rank q's lane can be gone when its note is there: the communicator failed (a mismatch that q found and
// aborted on, its death, ...) or q left. Throws that failure; returns when none is known.
void throw_if_lane_gone(dfcclComm* c, int q, int id) {
  if (std::string m = c->board ? c->board->published() : std::string(); !m.empty()) throw Error(dfcclInvalidUsage, m);
  const int code = c->fail_code.load(std::memory_order_acquire);
  if (code != dfcclSuccess) throw Error(dfcclResult_t(code), c->failure);
  throw_if_peer_gone(c, q, id, "before this rank mapped its lane");
}

// Maps rank q's lane region for `id`; the last of its readers (its ring neighbours) removes a shared-memory name.
void* map_lane(dfcclComm* c, int q, int id, const RegionBlob& blob) {
  Transport& t = *c->transport;
  void* p = nullptr;
  try {
    p = t.map_region(blob);
  } catch (const Error&) {
    throw_if_lane_gone(c, q, id);  // q freed it: say why
    throw;
  }
  const uint64_t readers = c->nranks <= 2 ? 1 : 2;
  if (c->bootstrap->take_note(q, id) == readers) t.mapped_by_all(blob);
  return p;
}

}  // namespace

bool persistent_in_region(const dfcclComm* c) { return c->net.any; }

void persistent_prepare(dfcclComm* c, int id) {
  if (persistent_in_region(c)) return;
  std::lock_guard<std::mutex> lk(c->persistent.mu);
  PersistentLane& l = c->persistent.lane[id];
  if (l.mine.ptr) return;  // a later prepare of the id (after dfcclPersistentFree) reuses its lane
  Executor& ex = c->engine->exec();
  const TransportParams& g = c->geometry;
  if (!l.lanes)
    l.lanes = static_cast<core::LaneState*>(ex.alloc_device(sizeof(core::LaneState) * c->engine->transport().nchan));
  l.mine = c->transport->alloc_region(core::region_bytes(g.nchan, 1, g.nslots, g.slot_bytes));
  c->bootstrap->post_note(id, &l.mine, sizeof(l.mine));
}

PersistentRef persistent_lane(dfcclComm* c, int id) {
  const uint32_t lane = c->engine->transport().seq_lanes + uint32_t(id);  // the board's key comes from it
  if (persistent_in_region(c)) return {c->host_dev.s, lane};
  PersistentLane& l = c->persistent.lane[id];
  if (!l.mapped.load(std::memory_order_acquire)) {
    // The neighbours' notes first, without the lock (they are only read): a thread waiting here for a neighbour's
    // prepare holds up no other id's first start.
    const int next = (c->rank + 1) % c->nranks, prev = (c->rank - 1 + c->nranks) % c->nranks;
    const RegionBlob next_blob = wait_for_lane(c, next, id);
    const RegionBlob prev_blob = prev == next ? next_blob : wait_for_lane(c, prev, id);
    std::lock_guard<std::mutex> lk(c->persistent.mu);
    if (!l.mapped.load(std::memory_order_relaxed)) {
      if (!l.next) {
        l.next_blob = next_blob;
        l.next = map_lane(c, next, id, l.next_blob);
      }
      if (!l.prev && prev == next) {
        l.prev = l.next;
      } else if (!l.prev) {
        l.prev_blob = prev_blob;
        l.prev = map_lane(c, prev, id, l.prev_blob);
      }
      l.cs = c->host_dev.s;
      l.cs.nlanes = 1;
      l.cs.self = reinterpret_cast<char*>(l.mine.ptr);
      l.cs.next_region = static_cast<char*>(l.next);
      l.cs.prev_region = static_cast<char*>(l.prev);
      l.cs.lanes = l.lanes;
      l.mapped.store(true, std::memory_order_release);
    }
  }
  return {l.cs, lane};  // one lane: the kernel runs it as the connection's lane 0 (core::conn_lane)
}

bool persistent_caught_up(dfcclComm* c) {
  for (PersistentLane& l : c->persistent.lane)
    if (l.mapped.load(std::memory_order_acquire) && !credits_returned(c->engine->exec(), l.cs)) return false;
  return true;
}

uint64_t persistent_bytes(const dfcclComm* c) {
  uint64_t bytes = 0;
  for (const PersistentLane& l : c->persistent.lane)
    if (l.mine.ptr) bytes += l.mine.bytes + sizeof(core::LaneState) * c->engine->transport().nchan;
  return bytes;
}

void persistent_take(dfcclComm* c, Engine::Leftovers& mine, Engine::Leftovers& peers, Engine::Leftovers& device) {
  std::lock_guard<std::mutex> lk(c->persistent.mu);
  for (PersistentLane& l : c->persistent.lane) {
    if (l.mine.ptr) mine.regions.push_back(l.mine);
    if (l.next) peers.mapped.emplace_back(l.next, l.next_blob);
    if (l.prev && l.prev != l.next) peers.mapped.emplace_back(l.prev, l.prev_blob);
    if (l.lanes) device.device.push_back(l.lanes);
    l.mine = l.next_blob = l.prev_blob = RegionBlob{};
    l.next = l.prev = nullptr;
    l.lanes = nullptr;
    l.mapped.store(false, std::memory_order_release);
  }
}

}  // namespace dfccl
