// Liveness of the other processes of this host's communicators (DESIGN invariant 8). One thread per process, every
// kPollMs, for each registered owner (a communicator):
//   - polls the pidfds of its peers in other processes (a process cannot fake its own exit, and a recycled pid is
//     never mistaken for the peer); `exited` says whom a peer's exit blames (none if it left cleanly);
//   - calls its probe, which beats this rank's heartbeat and reports a peer that aborted or fell silent.
// The first failure found is handed to on_failure(rank, reason) once, on that thread. Threads of one process
// (dfcclCommInitAll) are not registered: they share their fate.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dfccl {

struct PeerProcess {
  int rank;
  int pid;
};

struct PeerChecks {
  std::vector<PeerProcess> peers;  // watched through pidfds
  // The rank to name for the exit of peer `rank` (itself, with *reason "exited", or the rank whose failure ended the
  // peer's communicator, with *reason set), or -1 when the exit is no failure (it left cleanly). Unset: `rank`.
  std::function<int(int rank, std::string* reason)> exited;
  std::function<std::string(int* rank)> probe;  // "" or a reason, with *rank the peer it names
  std::function<void(int rank, const std::string& reason)> on_failure;
};

class PeerWatch {
 public:
  static constexpr int kPollMs = 100;
  // Starts watching for `owner`. Peers whose pidfd cannot be opened (already gone) are reported at the first poll.
  static void add(const void* owner, PeerChecks checks);
  // Stops watching for `owner`; after it returns, none of its functions is running or will run. Not callable from
  // them.
  static void remove(const void* owner);
  // Whether the process of `owner`'s peer `rank` has exited, by its pidfd (sound: never true for a live process, nor
  // for a recycled pid). False for a rank not watched (this process's, or none registered for owner). Any thread
  // but the watch's own.
  static bool exited(const void* owner, int rank);
};

}  // namespace dfccl
