// The host executor's daemon: the shared scheduler run by one CPU thread per block.
#include <memory>

#include "../core/scheduler/daemon.h"
#include "../core/scheduler/graph_wait.h"
#include "exec_host.h"

namespace dfccl::host {

// See exec_host.h. The block's shared state is this thread's own (on the heap).
void run_daemon_block(const core::EngineView& ev, core::u32 b) {
  HostExec::sleep_ns = ev.p.sleep_ns;
  auto bs = std::make_unique<core::BlockShared>();
  core::daemon_block<HostExec>(ev, b, *bs);
}

core::u64 post_graph_start(const core::GraphStart& s) { return core::graph_post<HostExec>(s); }

void run_graph_wait_block(const core::EngineView& ev, const core::GraphWait& w, core::u32 b) {
  HostExec::sleep_ns = ev.p.sleep_ns;
  auto bs = std::make_unique<core::BlockShared>();
  core::graph_wait_block<HostExec>(ev, w, b, *bs);
}

}  // namespace dfccl::host
