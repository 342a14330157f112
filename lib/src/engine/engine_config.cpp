#include "engine/engine_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "executor/executor.h"
#include "settings/env.h"
#include "util/error.h"

namespace dfccl {

EngineConfig EngineConfig::from_env(const Executor& exec, dfcclMode_t mode) {
  const bool host = exec.kind() == dfcclExecutorHost;
  // The executor's own variable: DFCCL_X for the CUDA executor, DFCCL_HOST_X for the host executor.
  auto pick = [&](const char* cuda_name, const char* host_name) { return env_int(host ? host_name : cuda_name); };
  EngineConfig c;
  core::DaemonParams& p = c.params;
  // Every daemon block must be resident at once: the default shrinks to what the device holds, a value set by the
  // user that does not fit is an error.
  const char* blocks_name = host ? "DFCCL_HOST_BLOCKS" : "DFCCL_BLOCKS";
  p.nblocks = uint32_t(env_int(blocks_name));
  const uint32_t resident = exec.resident_blocks();
  if (p.nblocks > resident) {
    if (env_is_set(blocks_name))
      throw Error(dfcclInvalidArgument, fmt::format("{}={}: this device holds at most {} daemon blocks at once",
                                                    blocks_name, p.nblocks, resident));
    p.nblocks = std::max<uint32_t>(1, resident);
  }
  p.blocking = mode == dfcclModeBlocking ? 1 : 0;
  p.spin_min_ns = uint64_t(pick("DFCCL_SPIN_MIN_NS", "DFCCL_HOST_SPIN_MIN_NS"));
  p.spin_init_ns = uint64_t(pick("DFCCL_SPIN_INIT_NS", "DFCCL_HOST_SPIN_INIT_NS"));
  p.spin_max_ns = uint64_t(pick("DFCCL_SPIN_MAX_NS", "DFCCL_HOST_SPIN_MAX_NS"));
  if (p.spin_min_ns > p.spin_max_ns || p.spin_init_ns > p.spin_max_ns)
    throw Error(dfcclInvalidArgument, "spin budgets: need SPIN_MIN_NS <= SPIN_INIT_NS <= SPIN_MAX_NS");
  p.spin_grow = uint32_t(env_int("DFCCL_SPIN_GROW"));
  p.min_chan_bytes = uint32_t(env_int("DFCCL_MIN_CHAN_BYTES"));
  p.idle_ns = uint64_t(pick("DFCCL_IDLE_NS", "DFCCL_HOST_IDLE_NS"));
  p.stuck_ns = uint64_t(pick("DFCCL_STUCK_NS", "DFCCL_HOST_STUCK_NS"));
  c.relaunch_min_ns = uint64_t(pick("DFCCL_RELAUNCH_NS", "DFCCL_HOST_RELAUNCH_NS"));
  c.relaunch_max_ns = uint64_t(pick("DFCCL_RELAUNCH_MAX_NS", "DFCCL_HOST_RELAUNCH_MAX_NS"));
  c.probe_spin_ns = uint64_t(env_int("DFCCL_PROBE_SPIN_NS"));
  // The host executor's daemon threads need the CPUs: its waits sleep at once.
  c.sync_spin_ns = host ? 0 : uint64_t(env_int("DFCCL_SYNC_SPIN_NS"));
  // A waiting kernel holds an SM slot until its collective is done: only where the daemon's blocks and one waiter
  // per submission ring (at most one runs per stream) fit at once, so that waiters can never keep a daemon out.
  c.wait_kernel = !host && env_int("DFCCL_WAIT_KERNEL") != 0 && p.nblocks + core::kMaxRings <= resident;
  c.check_host_order = !host && env_int("DFCCL_CHECK_HOST_ORDER") != 0;
  c.under_mps = !host && exec.under_mps();
  c.wait_on_host = host || (c.under_mps && env_str("DFCCL_MPS_WAIT") == "host");
  c.host_wait_timeout_ms = env_int("DFCCL_HOST_WAIT_TIMEOUT_MS");
  // The descriptor prefetcher is one more block, only where it leaves the waiters their room.
  p.prefetch = p.nblocks + 1 + (c.wait_kernel ? core::kMaxRings : 0) <= resident ? 1 : 0;

  TransportParams& t = c.transport;
  t.nchan = p.nblocks;
  const char* slot_name = host ? "DFCCL_HOST_SLOT_BYTES" : "DFCCL_SLOT_BYTES";
  t.slot_bytes = uint32_t(env_int(slot_name));
  if (t.slot_bytes % 16 != 0)
    throw Error(dfcclInvalidArgument, fmt::format("environment variable {} must be a multiple of 16", slot_name));
  t.nslots = uint32_t(pick("DFCCL_SLOTS", "DFCCL_HOST_SLOTS"));
  t.seq_lanes = uint32_t(env_int("DFCCL_LANES"));
  t.persistent_lanes = uint32_t(env_int("DFCCL_PERSISTENT_LANES"));
  t.graph_lane = uint32_t(env_int("DFCCL_GRAPHS"));
  t.p2p_chan = std::min(uint32_t(pick("DFCCL_P2P_CHANNELS", "DFCCL_HOST_P2P_CHANNELS")), t.nchan);
  t.p2p_arena = uint64_t(pick("DFCCL_P2P_ARENA_BYTES", "DFCCL_HOST_P2P_ARENA_BYTES"));
  return c;
}

}  // namespace dfccl
