#include "engine/requests.h"

#include <fmt/format.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "util/error.h"

namespace dfccl {
namespace {

constexpr unsigned kIndexBits = 24;  // up to 16 M live requests; the generation takes the other 40 bits
constexpr uint64_t kIndexMask = (uint64_t(1) << kIndexBits) - 1;

struct Entry {
  uint64_t generation = 1;
  std::shared_ptr<RequestState> state;  // null: free
};

struct Table {
  std::mutex mu;
  std::vector<Entry> entries;
  std::vector<uint32_t> free;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: callbacks may run during static destruction
  return *t;
}

uint64_t encode(uint32_t index, uint64_t generation) { return (generation << kIndexBits) | (index + 1); }

// The entry a handle names, if it is live (under the table's lock).
Entry* find_locked(Table& t, dfcclRequest_t handle) {
  const uint64_t v = reinterpret_cast<uintptr_t>(handle);
  const uint64_t index_plus_one = v & kIndexMask;
  if (index_plus_one == 0 || index_plus_one > t.entries.size()) return nullptr;
  Entry& e = t.entries[index_plus_one - 1];
  return e.state && e.generation == (v >> kIndexBits) ? &e : nullptr;
}

}  // namespace

dfcclRequest_t request_handle_new(std::shared_ptr<RequestState> state) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  uint32_t index;
  if (!t.free.empty()) {
    index = t.free.back();
    t.free.pop_back();
  } else {
    if (t.entries.size() >= kIndexMask)
      throw Error(dfcclNoResources,
                  fmt::format("{} requests are allocated; free some with dfcclRequestFree", t.entries.size()));
    index = uint32_t(t.entries.size());
    t.entries.emplace_back();
  }
  Entry& e = t.entries[index];
  e.state = std::move(state);
  return reinterpret_cast<dfcclRequest_t>(uintptr_t(encode(index, e.generation)));
}

std::shared_ptr<RequestState> request_state(dfcclRequest_t handle, const char* fn) {
  if (!handle) throw Error(dfcclInvalidArgument, fmt::format("{}: argument 'request' is NULL", fn));
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  Entry* e = find_locked(t, handle);
  if (!e)
    throw Error(dfcclInvalidArgument,
                fmt::format("{}: argument 'request' is not a live request (freed already, or never one)", fn));
  return e->state;
}

void request_handle_free(dfcclRequest_t handle) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  Entry* e = find_locked(t, handle);
  if (!e) return;
  e->state.reset();
  e->generation = (e->generation + 1) & ((uint64_t(1) << (64 - kIndexBits)) - 1);
  if (e->generation == 0) e->generation = 1;
  t.free.push_back(uint32_t(e - t.entries.data()));
}

}  // namespace dfccl
