// The settlement of collectives across hosts: a collective that finished on this rank before every rank's signature
// of it was known on this host (ArrivalSource::settled: the match board's mirror brings them from other hosts) keeps
// its request pending until they are, so that a mismatch found after it finished is its request's status. Only the
// progress thread uses it (docs/net-transport.md, "The match board across hosts").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/desc.h"
#include "engine/requests.h"

namespace dfccl {

class ArrivalSource;

class Settlement {
 public:
  // How long a request waits for the signatures at most, from its collective's end as the progress thread saw it;
  // then it succeeds (a peer merely late to post).
  static constexpr uint64_t kSettleNs = 200000000;
  // How long a stream waits for a finished collective's settled word (EngineHost::settled) at most: longer than
  // kSettleNs, yet bounded, since the progress thread can be held in a launch by an implicit synchronization that
  // waits for the stream.
  static constexpr uint64_t kSettleWaitNs = kSettleNs + 100000000;

  // finish: what ends a request (the engine's: its completion, then its settled word and slot).
  using Finish = std::function<void(const std::shared_ptr<RequestState>& req, int status, const std::string& error)>;
  explicit Settlement(Finish finish) : finish_(std::move(finish)) {}

  // Caller: the progress thread, for a finished collective's request (d: its descriptor; arrivals: its
  // communicator's, may be null). Finishes it now, unless it succeeded and some rank's signature of d is not known
  // here yet: then it is held until settle_due finds them all, or its deadline passes.
  void finish_or_hold(const std::shared_ptr<RequestState>& req, int status, const std::string& error,
                      const core::Desc& d, std::shared_ptr<const ArrivalSource> arrivals, uint64_t now);
  // Caller: the progress thread, each turn. Finishes the held requests whose signatures are all known (success, or
  // dfcclInvalidUsage with the mismatch) or whose deadline has passed; true when one finished.
  bool settle_due(uint64_t now);
  // Caller: the progress thread, as it ends: finishes every held request with what is known.
  void settle_all();
  bool empty() const { return held_.empty(); }

 private:
  struct Held {
    std::shared_ptr<RequestState> req;
    core::Desc desc;
    std::shared_ptr<const ArrivalSource> arrivals;
    uint64_t deadline = 0;
  };
  // Finishes h's request unless its signatures are still pending and !final; true when it did.
  bool settle(const Held& h, bool final);

  Finish finish_;
  std::vector<Held> held_;
};

}  // namespace dfccl
