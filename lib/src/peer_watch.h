// Liveness of the other processes of this host's communicators (DESIGN invariant 8). A communicator registers the
// process ids of its peers that run in other processes; one thread per process polls their pidfds (a process
// cannot fake its own exit, and a recycled pid is never mistaken for the peer) every kPollMs and, when one has
// exited, calls the communicator's on_death with the rank. Threads of one process (dfcclCommInitAll) are not
// watched: they share their fate.
#pragma once

#include <functional>
#include <vector>

namespace dfccl {

struct PeerProcess {
  int rank;
  int pid;
};

class PeerWatch {
 public:
  static constexpr int kPollMs = 100;
  // Starts watching `peers` for `owner`; on_death(rank) runs once, on the watch's thread, for the first peer seen
  // dead. Peers whose pidfd cannot be opened (already gone) are reported at the first poll.
  static void add(const void* owner, const std::vector<PeerProcess>& peers, std::function<void(int rank)> on_death);
  // Stops watching for `owner`; after it returns, on_death is not running and will not run. Not callable from
  // on_death itself.
  static void remove(const void* owner);
};

}  // namespace dfccl
