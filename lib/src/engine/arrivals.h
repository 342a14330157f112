// What a communicator's ranks have called, as the engine asks it (the match board implements it: match/match_board.h):
// for the stuck warning, dfcclDebugDump and dfcclRequestGetMissingRanks, and the settlement of collectives across
// hosts (engine/settlement.h).
#pragma once

#include <string>
#include <vector>

#include "core/desc.h"

namespace dfccl {

class ArrivalSource {
 public:
  virtual ~ArrivalSource() = default;
  // Which of d's ranks have not called d's collective yet, as text; callable from any thread.
  virtual std::string missing(const core::Desc& d) const = 0;
  // The same as ranks of the communicator, in increasing order.
  virtual std::vector<int> missing_ranks(const core::Desc& d) const = 0;
  // Caller: the progress thread, for d's collective that finished on this rank, before its request reports success.
  // "" when every rank's signature of d known here agrees with this rank's; the mismatch's text when one differs;
  // *pending when some rank's is not known here yet (on its way from another host). Default: nothing to check.
  virtual std::string settled(const core::Desc& d, bool* pending) const {
    *pending = false;
    (void)d;
    return {};
  }
  // Whether settled() can hold a request back (the communicator spans hosts); fixed once the engine has it.
  virtual bool across_hosts() const { return false; }
};

}  // namespace dfccl
