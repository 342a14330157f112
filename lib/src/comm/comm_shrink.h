// dfcclCommShrink: a communicator of the survivors of a failure (docs/design.md, "Shrink"; DESIGN invariant 10).
#pragma once

#include "comm/comm_state.h"

namespace dfccl {

// Collective over the ranks of c that are not excluded. exclude: n ranks of c, or null for the ranks this rank's
// communicator found failed (comm_fail's rank and the peers whose processes exited). The survivors agree on the
// excluded set (on one host ShrinkAgreement, in a segment derived from c's token; where c's connections use the
// network ShrinkNetAgreement, over the ranks' shrink sockets), then make the communicator of
// the others, ranks in c's order, with c's config unless config is given; a rank that fails before it is made is
// excluded too (the next epoch). When the set is not empty, c fails with dfcclRemoteError naming its lowest rank
// (unless it had failed already). Returns null on a rank that the set excludes. Throws dfcclNotSupported for a
// communicator of more than ShrinkAgreement::kMaxRanks ranks.
dfcclComm* comm_shrink(dfcclComm* c, const int* exclude, int n, const dfcclConfig_t* config);

}  // namespace dfccl
