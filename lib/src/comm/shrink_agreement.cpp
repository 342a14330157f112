#include "comm/shrink_agreement.h"

#include <fmt/format.h>

#include <chrono>
#include <string>
#include <thread>

#include "util/error.h"

namespace dfccl {

// Layout: kEpochs decision words (0: none yet, else the winner's rank + 1), then one record per rank: its arrival
// word (the last epoch it arrived in, + 1), then its proposals and candidates, kEpochs sets of each.
struct ShrinkAgreement::Record {
  uint64_t arrived;
};

size_t ShrinkAgreement::bytes(int nranks) {
  const size_t words = (size_t(nranks) + 63) / 64;
  return sizeof(uint64_t) * kEpochs + size_t(nranks) * (sizeof(Record) + 2 * kEpochs * words * sizeof(uint64_t));
}

ShrinkAgreement::ShrinkAgreement(void* area, int nranks, int rank)
    : area_(area), nranks_(nranks), rank_(rank), words_((size_t(nranks) + 63) / 64) {}

uint64_t* ShrinkAgreement::decision(int epoch) const { return static_cast<uint64_t*>(area_) + epoch; }

ShrinkAgreement::Record* ShrinkAgreement::record(int rank) const {
  char* base = static_cast<char*>(area_) + sizeof(uint64_t) * kEpochs;
  return reinterpret_cast<Record*>(base + size_t(rank) * (sizeof(Record) + 2 * kEpochs * words_ * sizeof(uint64_t)));
}

uint64_t* ShrinkAgreement::bits(int rank, int epoch, int which) const {
  return reinterpret_cast<uint64_t*>(record(rank) + 1) + (size_t(which) * kEpochs + size_t(epoch)) * words_;
}

namespace {

void store_set(uint64_t* dst, const std::vector<uint64_t>& set) {
  for (size_t w = 0; w < set.size(); ++w) __atomic_store_n(&dst[w], set[w], __ATOMIC_RELAXED);
}

void or_set(std::vector<uint64_t>& set, const uint64_t* src) {
  for (size_t w = 0; w < set.size(); ++w) set[w] |= __atomic_load_n(&src[w], __ATOMIC_RELAXED);
}

bool has(const std::vector<uint64_t>& set, int r) { return (set[size_t(r) / 64] >> (r % 64)) & 1; }

}  // namespace

std::vector<uint8_t> ShrinkAgreement::agree(int epoch, const std::vector<uint8_t>& proposal,
                                            const std::function<bool(int)>& gone, int timeout_ms) {
  if (epoch < 0 || epoch >= kEpochs)
    throw Error(dfcclInternalError, fmt::format("shrink agreement: epoch {} out of 0..{}", epoch, kEpochs - 1));
  std::vector<uint64_t> mine(words_, 0);
  for (int r = 0; r < nranks_; ++r)
    if (proposal[size_t(r)]) mine[size_t(r) / 64] |= uint64_t(1) << (r % 64);
  store_set(bits(rank_, epoch, 0), mine);
  __atomic_store_n(&record(rank_)->arrived, uint64_t(epoch) + 1, __ATOMIC_RELEASE);

  const auto t0 = std::chrono::steady_clock::now();
  auto sleep = std::chrono::microseconds(20);
  std::vector<int> missing;
  uint64_t winner = 0;
  for (;;) {
    winner = __atomic_load_n(decision(epoch), __ATOMIC_ACQUIRE);
    if (winner) break;
    std::vector<uint64_t> set = mine;
    std::vector<uint8_t> arrived(size_t(nranks_), 0);
    for (int r = 0; r < nranks_; ++r) {
      if (__atomic_load_n(&record(r)->arrived, __ATOMIC_ACQUIRE) < uint64_t(epoch) + 1) continue;
      arrived[size_t(r)] = 1;
      or_set(set, bits(r, epoch, 0));
    }
    missing.clear();
    for (int r = 0; r < nranks_; ++r) {
      if (arrived[size_t(r)] || has(set, r)) continue;
      // Gone: its arrival, read again after the answer, is final.
      if (gone(r) && __atomic_load_n(&record(r)->arrived, __ATOMIC_ACQUIRE) < uint64_t(epoch) + 1)
        set[size_t(r) / 64] |= uint64_t(1) << (r % 64);
      else missing.push_back(r);
    }
    if (missing.empty()) {
      store_set(bits(rank_, epoch, 1), set);
      uint64_t none = 0;
      const uint64_t me = uint64_t(rank_) + 1;
      winner = __atomic_compare_exchange_n(decision(epoch), &none, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
                   ? me
                   : none;
      break;
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(timeout_ms)) {
      std::string list;
      for (size_t k = 0; k < missing.size() && k < 16; ++k) list += (k ? "," : "") + std::to_string(missing[k]);
      throw Error(dfcclTimeout,
                  fmt::format("dfcclCommShrink: rank {} of {} waited {} ms for ranks [{}]{}, which have not called "
                              "dfcclCommShrink and whose processes are alive (timeout: config.initTimeoutMs or "
                              "DFCCL_INIT_TIMEOUT_MS)",
                              rank_, nranks_, timeout_ms, list, missing.size() > 16 ? ",..." : ""));
    }
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::microseconds(1000)) sleep *= 2;
  }
  std::vector<uint64_t> agreed(words_, 0);
  or_set(agreed, bits(int(winner - 1), epoch, 1));
  std::vector<uint8_t> out(size_t(nranks_), 0);
  for (int r = 0; r < nranks_; ++r) out[size_t(r)] = has(agreed, r) ? 1 : 0;
  return out;
}

}  // namespace dfccl
