// A test's watchdog: calls on_stuck once (from its own thread) when a progress counter has not moved for stuck_ms,
// so that a test whose waits never return by themselves (a wait standing in for the daemon, a stream waiting on the
// GPU) ends, failed, instead of hanging: on_stuck typically dumps the engines and aborts the communicators. Stopped
// and joined when destroyed, also when the test returns early (an ASSERT).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace dfccl::test {

class Watchdog {
 public:
  Watchdog(const std::atomic<int>& progress, int stuck_ms, std::function<void()> on_stuck)
      : thread_([this, &progress, stuck_ms, on_stuck = std::move(on_stuck)] {
          int seen = -1;
          for (int ticks = 0; !over_.load(); std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
            const int now = progress.load();
            ticks = now == seen ? ticks + 1 : 0;
            seen = now;
            if (ticks == stuck_ms / 10 && !fired_.exchange(true)) on_stuck();
          }
        }) {}
  ~Watchdog() {
    over_.store(true);
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  // Whether on_stuck was called.
  bool fired() const { return fired_.load(); }

 private:
  std::atomic<bool> over_{false}, fired_{false};  // before thread_: set up before it starts
  std::thread thread_;
};

}  // namespace dfccl::test
