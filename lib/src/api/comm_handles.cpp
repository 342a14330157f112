#include "api/comm_handles.h"

#include <fmt/format.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "comm/comm_failure.h"
#include "util/error.h"

namespace dfccl::api {
namespace {

// A handle: generation << 32 | index << 8 | kTag. The tag is odd: no aligned address of a real object, and so no
// pointer that an application passes by mistake, reads as a handle.
constexpr uint64_t kTag = 0xc3;
constexpr uint64_t kMaxEntries = uint64_t(1) << 24;

struct Entry {
  uint32_t generation = 1;
  CommRef comm;                   // null: free
  uint32_t ended_generation = 0;  // the last handle of this entry that was ended, and its asynchronous error
  int ended_async = dfcclSuccess;
};

struct Table {
  std::mutex mu;
  std::vector<Entry> entries;
  std::vector<uint32_t> free;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: a watchdog thread may end a handle during static destruction
  return *t;
}

// The entry a handle's index names (whatever its generation), and the generation; no entry for anything else.
std::optional<std::pair<Entry*, uint32_t>> decode_locked(Table& t, dfcclComm_t handle) {
  const uint64_t v = reinterpret_cast<uintptr_t>(handle);
  const uint64_t index = (v >> 8) & (kMaxEntries - 1);
  if ((v & 0xff) != kTag || index >= t.entries.size()) return std::nullopt;
  return std::make_pair(&t.entries[index], uint32_t(v >> 32));
}

}  // namespace

dfcclComm_t comm_handle_new(dfcclComm* c) {
  CommRef ref(c, comm_free);
  Table& t = table();
  std::unique_lock<std::mutex> lk(t.mu);
  uint32_t index;
  if (!t.free.empty()) {
    index = t.free.back();
    t.free.pop_back();
  } else if (t.entries.size() < kMaxEntries) {
    index = uint32_t(t.entries.size());
    t.entries.emplace_back();
  } else {
    lk.unlock();
    comm_abort(c);
    throw Error(dfcclNoResources,
                fmt::format("{} communicators are live in this process; destroy some first", kMaxEntries));
  }
  Entry& e = t.entries[index];
  e.comm = std::move(ref);
  return reinterpret_cast<dfcclComm_t>(uintptr_t((uint64_t(e.generation) << 32) | (uint64_t(index) << 8) | kTag));
}

CommLookup comm_lookup(dfcclComm_t handle) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  const auto d = decode_locked(t, handle);
  if (!d) return {};
  const auto [e, generation] = *d;
  CommLookup r;
  if (e->comm && e->generation == generation) {
    r.comm = e->comm;
  } else if (generation != 0 && generation < e->generation) {
    r.ended = true;
    r.ended_known = generation == e->ended_generation;
    r.ended_async = e->ended_async;
  }
  return r;
}

void comm_handle_end(dfcclComm_t handle) {
  CommRef last;  // the communicator goes, if no call holds it, after the table's lock is left
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  const auto d = decode_locked(t, handle);
  if (!d) return;
  const auto [e, generation] = *d;
  if (!e->comm || e->generation != generation) return;
  e->ended_generation = generation;
  e->ended_async = e->comm->async_error.load();
  last.swap(e->comm);
  e->generation = generation + 1 == 0 ? 1 : generation + 1;
  t.free.push_back(uint32_t(e - t.entries.data()));
}

}  // namespace dfccl::api
