#include "peer_watch.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace dfccl {
namespace {

int pidfd_open(int pid) { return int(syscall(SYS_pidfd_open, pid, 0)); }

struct Watched {
  std::vector<PeerProcess> peers;
  std::vector<int> fds;  // -1: could not be opened (the process is gone)
  std::function<void(int)> on_death;
  bool reported = false;
};

// The process's one watcher: its thread runs while something is watched. The map is guarded by mu; on_death runs
// with `busy` set to its owner and mu released, and remove() waits until no call for its owner runs.
struct Watcher {
  std::mutex mu;
  std::condition_variable cv;
  std::map<const void*, Watched> watched;
  const void* busy = nullptr;
  bool running = false;

  // The first dead peer of w, or -1.
  static int dead_rank(const Watched& w) {
    for (size_t i = 0; i < w.peers.size(); ++i) {
      if (w.fds[i] < 0) return w.peers[i].rank;
      pollfd p{w.fds[i], POLLIN, 0};
      if (::poll(&p, 1, 0) > 0) return w.peers[i].rank;
    }
    return -1;
  }

  void loop() {
    std::unique_lock<std::mutex> lk(mu);
    while (!watched.empty()) {
      for (auto it = watched.begin(); it != watched.end(); ++it) {
        Watched& w = it->second;
        if (w.reported) continue;
        const int rank = dead_rank(w);
        if (rank < 0) continue;
        w.reported = true;
        busy = it->first;
        std::function<void(int)> f = w.on_death;
        lk.unlock();
        f(rank);
        lk.lock();
        busy = nullptr;
        cv.notify_all();
        break;  // the map may have changed meanwhile
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

void PeerWatch::add(const void* owner, const std::vector<PeerProcess>& peers, std::function<void(int)> on_death) {
  Watched w;
  w.peers = peers;
  for (const PeerProcess& p : peers) w.fds.push_back(pidfd_open(p.pid));
  w.on_death = std::move(on_death);
  Watcher& wt = watcher();
  std::lock_guard<std::mutex> lk(wt.mu);
  wt.watched[owner] = std::move(w);
  if (!wt.running) {
    wt.running = true;
    std::thread([&wt] { wt.loop(); }).detach();
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

}  // namespace dfccl
