#include "settings/settings.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "dfccl.h"
#include "settings/env.h"
#include "util/error.h"

namespace dfccl {
namespace {

uint32_t u32(const char* name) { return uint32_t(env_int(name)); }
uint64_t u64(const char* name) { return uint64_t(env_int(name)); }

void require_multiple_of_16(const char* name, uint64_t value) {
  if (value % 16 != 0)
    throw Error(dfcclInvalidArgument, fmt::format("environment variable {}={} must be a multiple of 16", name, value));
}

}  // namespace

void check_all_settings() {
  for (const EnvVar& v : env_table())
    for (const Exec exec : {Exec::Cuda, Exec::Host}) {
      if (v.choices) env_str(v.name, exec);
      else env_int(v.name, exec);
    }
  CommSettings::read();
  EngineSettings::read(false);
  EngineSettings::read(true);
}

CommSettings CommSettings::read() {
  CommSettings s;
  s.executor_host = env_str("DFCCL_EXECUTOR") == "host";
  s.mode_blocking = env_str("DFCCL_MODE") == "blocking";
  s.init_timeout_ms = env_int("DFCCL_INIT_TIMEOUT_MS");
  s.destroy_timeout_ms = env_int("DFCCL_DESTROY_TIMEOUT_MS");
  s.abort_timeout_ms = env_int("DFCCL_ABORT_TIMEOUT_MS");
  s.peer_timeout_ns = u64("DFCCL_PEER_TIMEOUT_S") * 1000000000ull;
  s.p2p_disable = env_int("DFCCL_P2P_DISABLE") != 0;
  s.net_force = env_int("DFCCL_NET_FORCE") != 0;
  s.net_channels = u32("DFCCL_NET_CHANNELS");
  s.net_slot_bytes = u32("DFCCL_NET_SLOT_BYTES");
  require_multiple_of_16("DFCCL_NET_SLOT_BYTES", s.net_slot_bytes);
  s.hierarchy = env_int("DFCCL_HIERARCHY") != 0;
  return s;
}

EngineSettings EngineSettings::read(bool host) {
  // A variable with a default per executor is read with this executor's default (and, on the host executor, its
  // deprecated DFCCL_HOST_* name where it is unset).
  const Exec exec = host ? Exec::Host : Exec::Cuda;
  auto get = [&](const char* name) { return uint64_t(env_int(name, exec)); };
  EngineSettings s;
  s.blocks = uint32_t(get("DFCCL_BLOCKS"));
  s.blocks_set = env_is_set("DFCCL_BLOCKS", exec);
  s.blocks_name = env_source("DFCCL_BLOCKS", exec);
  s.threads = u32("DFCCL_THREADS");
  if (s.threads % 32 != 0)
    throw Error(dfcclInvalidArgument,
                fmt::format("environment variable DFCCL_THREADS={} must be a multiple of 32", s.threads));
  s.spin_min_ns = get("DFCCL_SPIN_MIN_NS");
  s.spin_init_ns = get("DFCCL_SPIN_INIT_NS");
  s.spin_max_ns = get("DFCCL_SPIN_MAX_NS");
  if (s.spin_min_ns > s.spin_max_ns || s.spin_init_ns > s.spin_max_ns)
    throw Error(
        dfcclInvalidArgument,
        fmt::format("spin budgets of the {} executor: need {} and {} <= {} (have {}, {}, {})", host ? "host" : "CUDA",
                    env_source("DFCCL_SPIN_MIN_NS", exec), env_source("DFCCL_SPIN_INIT_NS", exec),
                    env_source("DFCCL_SPIN_MAX_NS", exec), s.spin_min_ns, s.spin_init_ns, s.spin_max_ns));
  s.spin_grow = u32("DFCCL_SPIN_GROW");
  s.min_chan_bytes = u32("DFCCL_MIN_CHAN_BYTES");
  s.idle_ns = get("DFCCL_IDLE_NS");
  s.host_sleep_ns = u64("DFCCL_HOST_SLEEP_NS");
  s.stuck_ns = get("DFCCL_STUCK_NS");
  s.relaunch_ns = get("DFCCL_RELAUNCH_NS");
  s.relaunch_max_ns = get("DFCCL_RELAUNCH_MAX_NS");
  s.probe_spin_ns = u64("DFCCL_PROBE_SPIN_NS");
  s.sync_spin_ns = u64("DFCCL_SYNC_SPIN_NS");
  const int64_t wait_kernel = env_int("DFCCL_WAIT_KERNEL");
  s.wait_kernel = wait_kernel != 0;
  s.wait_standin = wait_kernel == 2;
  s.check_host_order = env_int("DFCCL_CHECK_HOST_ORDER") != 0;
  s.mps_wait_host = env_str("DFCCL_MPS_WAIT") == "host";
  s.host_wait_timeout_ms = env_int("DFCCL_HOST_WAIT_TIMEOUT_MS");
  s.slot_bytes = uint32_t(get("DFCCL_SLOT_BYTES"));
  require_multiple_of_16(env_source("DFCCL_SLOT_BYTES", exec), s.slot_bytes);
  s.slots = uint32_t(get("DFCCL_SLOTS"));
  s.lanes = u32("DFCCL_LANES");
  s.persistent_lanes = u32("DFCCL_PERSISTENT_LANES");
  s.graphs = u32("DFCCL_GRAPHS");
  s.p2p_channels = uint32_t(get("DFCCL_P2P_CHANNELS"));
  s.p2p_arena_bytes = get("DFCCL_P2P_ARENA_BYTES");
  s.stuck_warn_ns = u64("DFCCL_STUCK_WARN_S") * 1000000000ull;
  s.net.threads = int(get("DFCCL_NET_THREADS"));
  s.net.spin_ns = int64_t(get("DFCCL_NET_SPIN_NS"));
  s.net.heartbeat_ms = env_int("DFCCL_NET_HEARTBEAT_MS");
  s.net.timeout_ms = env_int("DFCCL_NET_TIMEOUT_MS");
  return s;
}

LogSettings LogSettings::read() {
  LogSettings s;
  s.level = env_str("DFCCL_DEBUG");
  s.subsys = env_str("DFCCL_DEBUG_SUBSYS");
  s.file = env_str("DFCCL_DEBUG_FILE");
  return s;
}

std::string launch_serialization_setting() {
  const char* clb = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (clb && std::strcmp(clb, "1") == 0) return "CUDA_LAUNCH_BLOCKING=1";
  if (std::getenv("NV_SANITIZER_INJECTION_TRANSPORT_TYPE") || std::getenv("NV_SANITIZER_INJECTION_PORT_BASE"))
    return "compute-sanitizer";
  return {};
}

std::string host_id_setting() { return env_str("DFCCL_HOSTID"); }

std::string socket_ifname_setting() { return env_str("DFCCL_SOCKET_IFNAME"); }

}  // namespace dfccl
