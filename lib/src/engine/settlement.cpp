#include "engine/settlement.h"

#include "engine/arrivals.h"

namespace dfccl {

void Settlement::finish_or_hold(const std::shared_ptr<RequestState>& req, int status, const std::string& error,
                                const core::Desc& d, std::shared_ptr<const ArrivalSource> arrivals, uint64_t now) {
  if (status == dfcclSuccess && arrivals) {  // the ranks' signatures first (the match board across hosts)
    Held h{req, d, std::move(arrivals), now + kSettleNs};
    if (!settle(h, false)) held_.push_back(std::move(h));
    return;
  }
  finish_(req, status, error);
}

bool Settlement::settle(const Held& h, bool final) {
  bool pending = false;
  const std::string mismatch = h.arrivals->settled(h.desc, &pending);
  if (pending && !final) return false;
  finish_(h.req, mismatch.empty() ? dfcclSuccess : dfcclInvalidUsage, mismatch);
  return true;
}

bool Settlement::settle_due(uint64_t now) {
  return std::erase_if(held_, [&](const Held& h) { return settle(h, now >= h.deadline); }) > 0;
}

void Settlement::settle_all() {
  for (const Held& h : held_) settle(h, true);
  held_.clear();
}

}  // namespace dfccl
