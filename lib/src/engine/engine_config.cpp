#include "engine/engine_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "executor/executor.h"
#include "settings/settings.h"
#include "util/error.h"

namespace dfccl {

EngineConfig EngineConfig::make(const Executor& exec, dfcclMode_t mode, const EngineSettings& s) {
  const bool host = exec.kind() == dfcclExecutorHost;
  EngineConfig c;
  core::DaemonParams& p = c.params;
  // Every daemon block must be resident at once: the default shrinks to what the device holds, a value set by the
  // user that does not fit is an error.
  p.nblocks = s.blocks;
  const uint32_t resident = exec.resident_blocks();
  if (p.nblocks > resident) {
    if (s.blocks_set)
      throw Error(dfcclInvalidArgument, fmt::format("{}={}: this device holds at most {} daemon blocks at once",
                                                    s.blocks_name, p.nblocks, resident));
    p.nblocks = std::max<uint32_t>(1, resident);
  }
  p.blocking = mode == dfcclModeBlocking ? 1 : 0;
  p.spin_min_ns = s.spin_min_ns;
  p.spin_init_ns = s.spin_init_ns;
  p.spin_max_ns = s.spin_max_ns;
  p.spin_grow = s.spin_grow;
  p.min_chan_bytes = s.min_chan_bytes;
  p.idle_ns = s.idle_ns;
  p.sleep_ns = host ? s.host_sleep_ns : ~0ull;
  p.stuck_ns = s.stuck_ns;
  c.relaunch_min_ns = s.relaunch_ns;
  c.relaunch_max_ns = s.relaunch_max_ns;
  c.probe_spin_ns = s.probe_spin_ns;
  // The host executor's daemon threads need the CPUs: its waits sleep at once.
  c.sync_spin_ns = host ? 0 : s.sync_spin_ns;
  // A waiting kernel holds an SM slot until its collective is done: only where the daemon's blocks and one waiter
  // per submission ring (at most one runs per stream) fit at once, so that waiters can never keep a daemon out.
  c.wait_kernel = !host && s.wait_kernel && p.nblocks + core::kMaxRings <= resident;
  c.wait_standin = !host && s.wait_standin;
  c.check_host_order = !host && s.check_host_order;
  c.under_mps = !host && exec.under_mps();
  c.wait_on_host = host || (c.under_mps && s.mps_wait_host);
  c.host_wait_timeout_ms = s.host_wait_timeout_ms;
  c.stuck_warn_ns = s.stuck_warn_ns;
  c.net = s.net;
  // The descriptor prefetcher is one more block, only where it leaves the waiters their room.
  p.prefetch = p.nblocks + 1 + (c.wait_kernel ? core::kMaxRings : 0) <= resident ? 1 : 0;

  TransportParams& t = c.transport;
  t.nchan = p.nblocks;
  t.slot_bytes = s.slot_bytes;  // a multiple of 16 (EngineSettings::read)
  t.nslots = s.slots;
  t.seq_lanes = s.lanes;
  t.persistent_lanes = s.persistent_lanes;
  t.graph_lane = s.graphs;
  t.p2p_chan = std::min(s.p2p_channels, t.nchan);
  t.p2p_arena = s.p2p_arena_bytes;
  return c;
}

}  // namespace dfccl
