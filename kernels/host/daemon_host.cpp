// The host executor's daemon: the shared scheduler run by one CPU thread per block.
#include <sys/prctl.h>

#include <memory>

#include "../core/scheduler/daemon.h"
#include "../core/scheduler/graph_wait.h"
#include "exec_host.h"

namespace dfccl::host {
namespace {

// Every thread that runs blocks of the scheduler, first: its waits' threshold (HostExec::backoff) from the launch,
// and a timer slack of 1 us, so that their naps are as long as asked.
void enter_block_thread(const core::EngineView& ev) {
  HostExec::sleep_ns = ev.p.sleep_ns;
  prctl(PR_SET_TIMERSLACK, 1000UL);
}

}  // namespace

// See exec_host.h. The block's shared state is this thread's own (on the heap).
void run_daemon_block(const core::EngineView& ev, core::u32 b) {
  enter_block_thread(ev);
  auto bs = std::make_unique<core::BlockShared>();
  core::daemon_block<HostExec>(ev, b, *bs);
}

core::u64 post_graph_start(const core::GraphStart& s) { return core::graph_post<HostExec>(s); }

void run_graph_wait_block(const core::EngineView& ev, const core::GraphWait& w, core::u32 b) {
  enter_block_thread(ev);
  auto bs = std::make_unique<core::BlockShared>();
  core::graph_wait_block<HostExec>(ev, w, b, *bs);
}

void run_graph_start_wait_block(const core::EngineView& ev, const core::GraphStart& s, const core::GraphWait& w,
                                core::u32 b, core::u32 nb) {
  enter_block_thread(ev);
  auto bs = std::make_unique<core::BlockShared>();
  core::graph_start_wait_block<HostExec>(ev, s, w, b, nb, *bs);
}

}  // namespace dfccl::host
