#include "liveness.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "runtime/run_stop.h"
#include "runtime/thread_name.h"

namespace dfccl::harness::liveness {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kSelfStopped = std::chrono::seconds(1);  // a tick this late: this process was stopped or starved

int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// The heartbeat words of the host's ranks, and what the monitor thread saw of them.
struct Board {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win win = MPI_WIN_NULL;
  std::vector<int64_t*> words;  // per rank of the host (node rank), in the shared window
  std::vector<int> world_of;    // node rank -> world rank
  int me = 0;
  Clock::duration limit{};
  std::thread monitor;
  std::atomic<bool> quit{false};
  std::atomic<int64_t> last_tick_ns{0}, resumed_ns{0};
  std::mutex mu;  // guards seen and changed
  std::vector<int64_t> seen;
  std::vector<Clock::time_point> changed;  // when seen[r] last moved (this process's clock)
};

Board* g_board = nullptr;

// One tick of the monitor: its own heartbeat, then what moved. After a gap of its own, every rank counts as just seen.
void tick(Board& b, int64_t beat, Clock::time_point now, bool self_stopped) {
  std::atomic_ref<int64_t>(*b.words[b.me]).store(beat, std::memory_order_relaxed);
  std::lock_guard lock(b.mu);
  for (size_t r = 0; r < b.words.size(); ++r) {
    const int64_t v = std::atomic_ref<int64_t>(*b.words[r]).load(std::memory_order_relaxed);
    if (v != b.seen[r] || self_stopped) {
      b.seen[r] = v;
      b.changed[r] = now;
    }
  }
}

void monitor(Board& b) {
  name_this_thread("dfccl-live");
  Clock::time_point prev = Clock::now();
  int64_t beat = 0;
  while (!b.quit.load()) {
    std::this_thread::sleep_for(kTick);
    const Clock::time_point now = Clock::now();
    const bool self_stopped = now - prev > kSelfStopped;
    if (self_stopped) b.resumed_ns = ns_of(now);
    prev = now;
    tick(b, ++beat, now, self_stopped);
    b.last_tick_ns = ns_of(now);
  }
}

}  // namespace

void start(MPI_Comm world, double stall_limit_s, int host) {
  auto* b = new Board;
  int world_rank = 0;
  MPI_Comm_rank(world, &world_rank);
  MPI_Comm shared;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &shared);
  MPI_Comm_split(shared, host, world_rank, &b->node);
  MPI_Comm_free(&shared);
  int n = 1;
  MPI_Comm_rank(b->node, &b->me);
  MPI_Comm_size(b->node, &n);
  int64_t* mine = nullptr;
  MPI_Win_allocate_shared(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, b->node, &mine, &b->win);
  *mine = 0;
  b->world_of.resize(static_cast<size_t>(n));
  MPI_Allgather(&world_rank, 1, MPI_INT, b->world_of.data(), 1, MPI_INT, b->node);
  for (int r = 0; r < n; ++r) {
    MPI_Aint size = 0;
    int disp = 0;
    int64_t* p = nullptr;
    MPI_Win_shared_query(b->win, r, &size, &disp, &p);
    b->words.push_back(p);
  }
  MPI_Barrier(b->node);  // every word is initialized
  b->limit = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(stall_limit_s));
  b->seen.assign(static_cast<size_t>(n), 0);
  b->changed.assign(static_cast<size_t>(n), Clock::now());
  b->last_tick_ns = ns_of(Clock::now());
  b->monitor = std::thread(monitor, std::ref(*b));
  g_board = b;
}

void stop() {
  Board* b = g_board;
  if (!b) return;
  g_board = nullptr;
  b->quit = true;
  b->monitor.join();
  MPI_Win_free(&b->win);
  MPI_Comm_free(&b->node);
  delete b;
}

std::vector<int> stalled() {
  std::vector<int> out;
  Board* b = g_board;
  if (!b) return out;
  const Clock::time_point now = Clock::now();
  if (ns_of(now) - b->last_tick_ns.load() > std::chrono::nanoseconds(kSelfStopped).count()) return out;
  std::lock_guard lock(b->mu);
  for (size_t r = 0; r < b->words.size(); ++r)
    if (static_cast<int>(r) != b->me && now - b->changed[r] >= b->limit) out.push_back(b->world_of[r]);
  std::sort(out.begin(), out.end());
  return out;
}

void throw_if_stalled() {
  std::vector<int> ranks = stalled();
  if (ranks.empty()) return;
  const double limit_s = std::chrono::duration<double>(g_board->limit).count();
  const std::string status = fmt::format("stalled: rank{} {} stopped responding (no heartbeat for {:.1f} s)",
                                         ranks.size() > 1 ? "s" : "", fmt::join(ranks, ","), limit_s);
  throw RunStopped(status, kExitTrialsFailed, std::move(ranks));
}

int64_t resumed_ns() {
  Board* b = g_board;
  return b ? b->resumed_ns.load() : 0;
}

}  // namespace dfccl::harness::liveness
