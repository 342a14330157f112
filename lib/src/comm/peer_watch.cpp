#include "comm/peer_watch.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "util/thread_name.h"

namespace dfccl {
namespace {

int pidfd_open(int pid) { return int(syscall(SYS_pidfd_open, pid, 0)); }

struct Watched {
  PeerChecks checks;
  std::vector<int> fds;  // -1: could not be opened (the process is gone)
  bool reported = false;
};

// The process's one watcher: its thread runs while something is watched. The map is guarded by mu; an owner's
// functions run with `busy` set to it and mu released, and remove() waits until none runs for its owner.
struct Watcher {
  std::mutex mu;
  std::condition_variable cv;
  std::map<const void*, Watched> watched;
  const void* busy = nullptr;
  bool running = false;

  // The first failed peer of w (its rank, and why), or -1.
  static int failed(const Watched& w, std::string* reason) {
    for (size_t i = 0; i < w.checks.peers.size(); ++i) {
      const int rank = w.checks.peers[i].rank;
      bool gone = w.fds[i] < 0;
      if (!gone) {
        pollfd p{w.fds[i], POLLIN, 0};
        gone = ::poll(&p, 1, 0) > 0;
      }
      if (!gone) continue;
      *reason = "exited";
      const int named = w.checks.exited ? w.checks.exited(rank, reason) : rank;
      if (named >= 0) return named;
      reason->clear();
    }
    int rank = -1;
    if (w.checks.probe) *reason = w.checks.probe(&rank);
    return reason->empty() ? -1 : rank;
  }

  void loop() {
    std::unique_lock<std::mutex> lk(mu);
    while (!watched.empty()) {
      for (auto it = watched.begin(); it != watched.end(); ++it) {
        if (it->second.reported) continue;
        busy = it->first;  // its functions run without mu: remove() waits for them
        lk.unlock();
        std::string reason;
        const int rank = failed(it->second, &reason);
        if (rank >= 0) {
          it->second.reported = true;
          it->second.checks.on_failure(rank, reason);
        }
        lk.lock();
        busy = nullptr;
        cv.notify_all();
        if (rank >= 0) break;  // the map may have changed meanwhile
      }
      cv.wait_for(lk, std::chrono::milliseconds(PeerWatch::kPollMs));
    }
    running = false;
  }
};

Watcher& watcher() {
  static Watcher* w = new Watcher;  // never destroyed: its thread may outlive static destruction
  return *w;
}

}  // namespace

void PeerWatch::add(const void* owner, PeerChecks checks) {
  Watched w;
  for (const PeerProcess& p : checks.peers) w.fds.push_back(pidfd_open(p.pid));
  w.checks = std::move(checks);
  Watcher& wt = watcher();
  std::lock_guard<std::mutex> lk(wt.mu);
  wt.watched[owner] = std::move(w);
  if (!wt.running) {
    wt.running = true;
    std::thread([&wt] {
      name_this_thread("watch");
      wt.loop();
    }).detach();
  }
}

void PeerWatch::remove(const void* owner) {
  Watcher& wt = watcher();
  std::unique_lock<std::mutex> lk(wt.mu);
  wt.cv.wait(lk, [&] { return wt.busy != owner; });
  auto it = wt.watched.find(owner);
  if (it == wt.watched.end()) return;
  for (int fd : it->second.fds)
    if (fd >= 0) close(fd);
  wt.watched.erase(it);
  wt.cv.notify_all();
}

bool PeerWatch::exited(const void* owner, int rank) {
  Watcher& wt = watcher();
  std::lock_guard<std::mutex> lk(wt.mu);
  auto it = wt.watched.find(owner);
  if (it == wt.watched.end()) return false;
  const Watched& w = it->second;
  for (size_t i = 0; i < w.checks.peers.size(); ++i) {
    if (w.checks.peers[i].rank != rank) continue;
    if (w.fds[i] < 0) return true;
    pollfd p{w.fds[i], POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  return false;
}

}  // namespace dfccl
