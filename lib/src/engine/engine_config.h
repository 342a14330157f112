// An engine's settings, read once through the settings module (settings.h) when the engine is created: the daemon's
// parameters, the transport geometry every communicator of the engine uses, and the host runtime's timings.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/types.h"
#include "dfccl.h"
#include "settings/settings.h"

namespace dfccl {

class Executor;

// Transport geometry that every communicator of an engine uses (and that all ranks must agree on).
struct TransportParams {
  uint32_t nchan;  // = daemon blocks
  uint32_t slot_bytes;
  uint32_t nslots;
  uint32_t seq_lanes;  // lanes for collectives matched by order
  uint32_t persistent_lanes;
  uint32_t graph_lane;  // DFCCL_GRAPHS: each communicator makes its graph lane at init (comm/comm_graph.h)
  uint32_t p2p_chan;    // channels of a full point-to-point connection (0: none)
  uint64_t p2p_arena;   // bytes for a communicator's point-to-point connections per rank (p2p.h)
};

struct EngineConfig {
  core::DaemonParams params{};  // epoch 0: set at each launch
  TransportParams transport{};
  uint64_t relaunch_min_ns = 0, relaunch_max_ns = 0;  // back-off of a relaunch after a stuck exit
  uint64_t probe_spin_ns = 0;                         // dfcclWait: how long the host waits for its barrier probe
  uint64_t sync_spin_ns = 0;      // dfcclSynchronize: poll this long before sleeping (0: host executor)
  bool wait_kernel = false;       // dfcclWait on a stream by a polling kernel (see Executor::stream_wait)
  bool wait_standin = false;      // DFCCL_WAIT_KERNEL=2: every first dfcclWait stands in (Engine::wait_as_standin)
  bool check_host_order = false;  // DFCCL_CHECK_HOST_ORDER: host-ordered submissions settle the default streams
  // dfcclWait blocks the calling thread instead of making the stream wait on the GPU: the host executor, and the CUDA
  // executor on a device shared through MPS unless DFCCL_MPS_WAIT=stream (docs/design.md, "Several processes on one
  // GPU"); at most host_wait_timeout_ms (DFCCL_HOST_WAIT_TIMEOUT_MS).
  bool wait_on_host = false;
  bool under_mps = false;
  int64_t host_wait_timeout_ms = 0;
  uint64_t stuck_warn_ns = 0;  // DFCCL_STUCK_WARN_S (0: never)
  EngineSettings::Net net{};   // the engine's network proxies (net/proxy.h)

  // The host executor's progress thread, quiet for quiet_ns with work outstanding: how long it sleeps before it looks
  // again. Spin, then block (DFCCL_HOST_SLEEP_NS): 50 us, then an eighth of the quiet time up to 1 ms, so that a
  // completion is seen at most about 1/8 of its collective's time late.
  uint64_t progress_nap_ns(uint64_t quiet_ns) const {
    return quiet_ns < params.sleep_ns ? 50000 : std::clamp<uint64_t>(quiet_ns / 8, 50000, 1000000);
  }

  // From the executor's settings (EngineSettings::read for its kind: its defaults), checking
  // what only the device can tell: blocks that it holds at once. Throws dfcclInvalidArgument naming the variable.
  static EngineConfig make(const Executor& exec, dfcclMode_t mode, const EngineSettings& settings);
};

}  // namespace dfccl
