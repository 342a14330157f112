// Rendezvous of the ranks of one communicator. Each host's ranks share a POSIX shared-memory segment named by the
// unique id's token and the host id (names never cross hosts): their claims on ranks, liveness words and the match
// board. The unique id also carries the address of a TCP rendezvous root (bootstrap/rendezvous.h) started by
// make_unique_id in the creating process: every rank registers there first, which tells it every rank's host. When
// all ranks share one host, the rounds run in the segment; otherwise they run through the root, whose connection
// is then kept for the communicator's life. Each round is bounded by a timeout (DESIGN invariant 5); the bootstrap
// is kept for the communicator's life (split, destroy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>
#include <string>

#include <memory>
#include <optional>
#include <vector>

#include "bootstrap/unique_id.h"
#include "dfccl.h"

namespace dfccl {
namespace net {
class Rendezvous;
class RendezvousRoot;
}

// A new id. It carries the address of a rendezvous root that this call starts (it runs on a thread of this process
// until its ranks have all registered and left); if none can be started, the id works for ranks on this host only
// (logged at WARN).
dfcclUniqueId make_unique_id();
// The same, also handing out the root it started (null if none), which stays in the process's list of roots.
dfcclUniqueId make_unique_id(std::shared_ptr<net::RendezvousRoot>* root);
UniqueIdData parse_unique_id(const dfcclUniqueId& id);  // throws InvalidArgument naming 'commId' if malformed
// An id with this token and no rendezvous root: its ranks meet in this host's segment only, and nothing runs for it
// in any process. The shrink derives such ids from its communicator's token (comm/comm_shrink.h).
dfcclUniqueId local_unique_id(uint64_t token);

// This process's host identity: DFCCL_HOSTID, else the host name and the kernel's boot id (as NCCL's host hash), so
// that two machines or containers that share a host name are still told apart.
std::string host_id();

class Bootstrap {
 public:
  static constexpr size_t kSlotBytes = 4096;  // largest allgather contribution

  // The shares of the segment that its users lay out (zeroed at creation): the match board's and the point-to-point
  // carving table's, for nranks ranks (the caller passes MatchBoard::bytes and p2p_table_bytes).
  struct Areas {
    size_t board_bytes = 0;
    size_t p2p_table_bytes = 0;
    size_t agreement_bytes = 0;  // the shrink's agreement (comm/shrink_agreement.h)
  };
  // Claims `rank` in this host's segment (a second claim is dfcclInvalidUsage naming the holder), then registers with
  // the id's root (if it has one) and waits there for every rank: dfcclTimeout naming the missing ones. root_gone:
  // asked while the root refuses connections (net::Rendezvous's abandon); empty: retry until the timeout.
  Bootstrap(const dfcclUniqueId& id, int rank, int nranks, int timeout_ms, Areas areas,
            const std::function<std::string()>& root_gone = {});
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // Every rank contributes `bytes` (<= kSlotBytes); `all` receives nranks * bytes, rank order.
  void allgather(const void* mine, size_t bytes, void* all, int timeout_ms = -1);
  void barrier(int timeout_ms = -1);
  // Makes the rounds fail fast on a rank that will never come: while a round waits, `gone(rank)` is asked (every
  // few ms) about each rank that has not entered it; a non-empty answer (why: "exited ...") for a rank still missing
  // after it fails the round with dfcclRemoteError naming the rank. gone must be sound (never a live rank); since a
  // gone rank's words are final, every waiting rank then fails the same round. Rounds through a rendezvous root
  // (ranks on several hosts) do not ask it.
  void set_watch(std::function<std::string(int rank)> gone) { gone_ = std::move(gone); }
  // Removes the segment's name once every rank has it mapped (the mapping stays valid).
  void unlink();

  // Liveness words in the segment, which every rank keeps mapped for the communicator's life: how each rank's
  // communicator ended (kRunning until it aborts, fails or is destroyed) and its heartbeat, written by its PeerWatch
  // thread and read by the peers' (comm_init.cpp, watch_peers). The first end stands: a later set_* of an ended rank
  // changes nothing. kFailed: another rank's failure ended the communicator (peer_cause names it and how), so that a
  // rank that leaves after a failure never takes the blame (invariant 8). kLeft: destroyed after peer_count
  // order-matched collectives.
  static constexpr uint64_t kRunning = 1, kAborted = 2, kLeft = 3, kFailed = 4;
  // How a rank failed, as the rank that saw it first recorded it (kFailed).
  enum Cause : uint32_t { kCauseOther = 0, kCauseExited, kCauseSilent, kCauseAborted, kCauseNetwork, kCauseLeft };
  struct PeerCause {
    int origin = -1;  // the rank that failed
    Cause cause = kCauseOther;
  };
  static uint64_t now_ns();
  void set_state(uint64_t state);  // kAborted
  void set_failed(int origin, Cause cause);
  void set_left(uint64_t collectives);
  void beat(uint64_t now_ns);
  uint64_t peer_state(int rank) const;
  uint64_t peer_heartbeat(int rank) const;
  PeerCause peer_cause(int rank) const;
  uint64_t peer_count(int rank) const;
  // A rank on another host: its end as its messages tell it (its own words are in its host's segment); an end
  // already recorded stands.
  void set_peer_state(int rank, uint64_t state);
  void set_peer_failed(int rank, int origin, Cause cause);
  void set_peer_left(int rank, uint64_t collectives);
  // Whether `rank` is on this rank's host (shares the segment; its liveness words and process are visible here).
  bool local(int rank) const { return hosts_.empty() || hosts_[size_t(rank)] == hosts_[size_t(rank_)]; }
  bool all_local() const { return !rv_; }

  // The match board's share of the segment (match_board.h): Areas::board_bytes, zeroed at creation.
  void* board_area() const;

  // Notes: records a rank posts after init without waiting for anyone (ranks on this host only; persistent.h posts
  // its lanes' region handles). Each rank has kNoteSlots of at most kNoteBytes, each posted at most once.
  // read_note copies rank's note `slot` into out and returns true once it is posted. take_note counts the readers
  // that are done with a note and returns the count with this one.
  // The point-to-point connections' carving table (p2p_table.h): Areas::p2p_table_bytes after the notes, zeroed.
  void* p2p_area() const;
  // The shrink's agreement area (Areas::agreement_bytes after the carving table), zeroed at creation.
  void* agreement_area() const;
  static constexpr int kNoteSlots = 9;  // the persistent ids and the graph lane (core::kOwnLanes; persistent.h checks)
  static constexpr size_t kNoteBytes = 128;
  void post_note(int slot, const void* data, size_t bytes);
  bool read_note(int rank, int slot, void* out, size_t bytes) const;
  uint64_t take_note(int rank, int slot);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t host_hash() const { return host_hash_; }  // of host_id(), which names this host's segment
  uint64_t token() const { return token_; }
  // Caller: tests. How many ranks of the segment `name` (/dev/shm's name with a leading '/') are claimed, with the
  // claimant's pid namespace written (from then on the next init judges the segment by that claimant's life).
  static int claimed_ranks(const std::string& name);

 private:
  struct Header;
  struct RankWord;
  void open_segment();
  // Removes this host's segments of other ids whose ranks' processes have all exited without removing them (killed
  // during init): every init sweeps them before it opens its own. A segment still claimed by a live process, or by
  // one of another pid namespace, stays.
  void remove_orphans() const;
  static bool orphaned(const std::string& name, uint64_t pidns);
  template <class F>
  static std::optional<time_t> visit_words(const std::string& name, F&& visit);
  RankWord* words() const;  // the segment's liveness words, one per rank
  struct Note;
  Note* note(int rank, int slot) const;
  void wait_round(uint64_t seq, int timeout_ms) const;
  void close_segment();
  std::string name_;
  uint64_t token_ = 0, host_hash_ = 0;
  int rank_ = 0, nranks_ = 0, timeout_ms_ = 0;
  Areas areas_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint64_t round_ = 0;
  uint64_t owner_ = 0;  // this caller's claim on its rank (RankWord::owner)
  bool unlinked_ = false;
  std::vector<std::string> hosts_;       // every rank's host id (empty: the id has no root; all on this host)
  std::unique_ptr<net::Rendezvous> rv_;  // the rounds, when the ranks are on several hosts
  std::function<std::string(int)> gone_;  // set_watch
};

}  // namespace dfccl
