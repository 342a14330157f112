// The match board across hosts (match_board.h, "Across hosts"; docs/net-transport.md, "The match board across
// hosts"). A communicator whose ranks span hosts sends each of its posts through its first network proxy's board link
// (net/board_link.h) to the receiver of every other host (a point-to-point post: of the other side's host only): its
// lowest rank that has not left the communicator, as far as this host knows (a rank that destroys its communicator
// tells the other hosts' receivers: mirror_leave). That rank's proxy writes the post into its host's board in the
// sender's row and compares it, as a post does. A mismatch found on one host, by a submission or by a proxy, goes to
// the receiver of every other host as text, which its proxy publishes there; each rank's PeerWatch then fails the
// communicator with dfcclInvalidUsage.
//
// Application threads only queue (a short-held lock, no wait on the network); the proxy's thread sends, receives
// and writes the board. Nothing here is on the daemon's path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/desc.h"

struct dfcclComm;

namespace dfccl {

struct MatchKey;
struct P2pKey;

// Caller: comm_init, after the board exists and net_connect. When the ranks span hosts (host_hashes: every rank's),
// registers this rank's board with its first proxy under the hop id that net_connect reserved and published
// (NetLinks::endpoints: every rank's board id and first proxy); else does nothing. No bootstrap round of its own.
void mirror_connect(dfcclComm* c, const std::vector<uint64_t>& host_hashes);
// Caller: a submission whose post found no mismatch. Queues it for the receiver of every other host.
void mirror_post(dfcclComm* c, const MatchKey& key, const core::Desc& d);
// The same for a point-to-point post (d: a Send or Recv, root = the peer): for the peer's host, if not this one.
void mirror_post_p2p(dfcclComm* c, const P2pKey& key, const core::Desc& d);
// Caller: a submission that found a mismatch. Queues its text for the receiver of every other host.
void mirror_mismatch(dfcclComm* c, const std::string& text);
// Caller: destroy, once this rank is kLeft in its host's liveness words. Tells the ranks of the other hosts (their
// receivers) that this rank left after c->next_key order-matched collectives, so that they send their posts to the
// next rank of this host from then on and fail collectives of theirs that needed it (departed_early).
void mirror_leave(dfcclComm* c);
// Caller: release (and an abort that leaves the memory), before the proxies go: unregisters the board and drops the
// proxy. Idempotent; the queued messages still go.
void mirror_release(dfcclComm* c);

}  // namespace dfccl
