// The host executor: the daemon's blocks are CPU threads; "device memory" is process memory (its connection regions:
// transport/shared_memory.cpp).
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "executor/executor.h"
#include "host/exec_host.h"
#include "util/error.h"
#include "util/thread_name.h"

namespace dfccl {
namespace {

class HostExecutor final : public Executor {
 public:
  explicit HostExecutor(int device) : device_(device) {}
  ~HostExecutor() override {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return running_blocks_ == 0; });  // the engine made the daemon leave first
    }
    join();
  }

  dfcclExecutor_t kind() const override { return dfcclExecutorHost; }
  int device() const override { return device_; }
  unsigned threads_per_block() const override { return 1; }
  unsigned resident_blocks() const override { return core::kMaxBlocks; }

  void* alloc_device(size_t bytes) override {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) throw Error(dfcclSystemError, fmt::format("host executor: cannot allocate {} bytes", bytes));
    std::memset(p, 0, bytes);
    return p;
  }
  void free_device(void* p) override { std::free(p); }
  void* alloc_pinned(size_t bytes) override { return alloc_device(bytes); }
  void free_pinned(void* p) override { std::free(p); }

  void write_word(uint64_t* dev, uint64_t value) override { __atomic_store_n(dev, value, __ATOMIC_RELEASE); }
  void copy_to_device(void* dev, const void* host, size_t bytes) override {
    std::memcpy(dev, host, bytes);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
  }
  void copy_from_device(void* host, const void* dev, size_t bytes) override {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    std::memcpy(host, dev, bytes);
  }
  void post_word(uint64_t* dev, uint64_t value) override { stream_write(nullptr, dev, value); }
  void stream_write(cudaStream_t, uint64_t* dev, uint64_t value) override {
    __atomic_store_n(dev, value, __ATOMIC_RELEASE);
  }
  void probe(uint64_t* host_word, uint64_t value) override { __atomic_store_n(host_word, value, __ATOMIC_RELEASE); }
  void stream_wait(cudaStream_t, const core::StreamWait&, bool) override {
    throw Error(dfcclInternalError, "host executor: stream waits are done on the host");
  }
  void graph_start(cudaStream_t, const core::GraphStart& s) override { host::post_graph_start(s); }
  void graph_wait(cudaStream_t, const core::EngineView& ev, const core::GraphWait& w) override {
    run_blocks(ev, [&](uint32_t b, uint32_t) { host::run_graph_wait_block(ev, w, b); });
  }
  void graph_start_wait(cudaStream_t, const core::EngineView& ev, const core::GraphStart& s,
                        const core::GraphWait& w) override {
    run_blocks(ev, [&](uint32_t b, uint32_t nb) { host::run_graph_start_wait_block(ev, s, w, b, nb); });
  }

  void launch(const core::EngineView& ev) override {
    join();
    std::lock_guard<std::mutex> lk(mu_);
    running_blocks_ = ev.p.nblocks + ev.p.prefetch;
    ++launched_;
    for (uint32_t b = 0; b < ev.p.nblocks + ev.p.prefetch; ++b) {
      threads_.emplace_back([this, ev, b] {
        if (b < ev.p.nblocks) name_this_thread("hb", b);
        else name_this_thread("prefetch");
        host::run_daemon_block(ev, b);
        std::lock_guard<std::mutex> lk2(mu_);
        if (--running_blocks_ == 0) {
          finished_ = launched_;
          cv_.notify_all();
        }
      });
    }
  }

  bool exited() override {
    std::lock_guard<std::mutex> lk(mu_);
    return running_blocks_ == 0;
  }

  // The emulated cudaDeviceSynchronize: waits for the daemon launch running now (not later ones) to end.
  void device_synchronize() override {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t target = running_blocks_ ? launched_ : finished_;
    cv_.wait(lk, [&] { return finished_ >= target; });
  }

 private:
  // A captured node's launch, run now: block(b, nb) on one thread per daemon block, joined before returning.
  template <class F>
  static void run_blocks(const core::EngineView& ev, const F& block) {
    const uint32_t nb = ev.p.nblocks + ev.p.prefetch;
    std::vector<std::thread> blocks;
    for (uint32_t b = 0; b < nb; ++b)
      blocks.emplace_back([&block, b, nb] {
        name_this_thread("gw", b);
        block(b, nb);
      });
    for (auto& t : blocks) t.join();
  }

  void join() {
    std::vector<std::thread> old;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (running_blocks_ != 0 && !threads_.empty()) return;  // still running: nothing to join yet
      old.swap(threads_);
    }
    for (auto& t : old) t.join();
  }

  int device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
  uint32_t running_blocks_ = 0;
  uint64_t launched_ = 0, finished_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_host_executor(int device) { return std::make_unique<HostExecutor>(device); }

}  // namespace dfccl
