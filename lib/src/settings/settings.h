// The typed settings: the DFCCL_* variables of the table (env.h) as the library uses them, each read by one of the
// functions below, which are the only readers of the environment outside this folder. Each group is read once, by
// the object that keeps it: a communicator at its init, an engine when it is created, the logger at its first
// message. A reader throws dfcclInvalidArgument naming the variable, its value and what it accepts, where the table
// (or a rule between values: multiples of 16, spin budgets in order) refuses a value.
#pragma once

#include <cstdint>
#include <string>

namespace dfccl {

// Parses every variable of the table and throws at the first that its range or choices reject, so that a value no
// call would read yet (an abort's timeout, the other executor's setting) fails communicator init, not a later call.
// Callers: comm_init, comm_split's local check (before its exchange) and dfccl-info.
void check_all_settings();

// What a communicator reads at its init (comm_init keeps it in dfcclComm::settings): abort and destroy use these
// values and never read the environment, so that neither fails because of a setting.
struct CommSettings {
  bool executor_host = false;   // DFCCL_EXECUTOR=host: the executor when the config leaves it unset
  bool mode_blocking = false;   // DFCCL_MODE=blocking: the mode when the config leaves it unset
  int64_t init_timeout_ms = 0;  // DFCCL_INIT_TIMEOUT_MS, when the config leaves it unset
  int64_t destroy_timeout_ms = 0;
  int64_t abort_timeout_ms = 0;
  uint64_t peer_timeout_ns = 0;  // DFCCL_PEER_TIMEOUT_S (0: never)
  bool p2p_disable = false;
  bool net_force = false;
  uint32_t net_channels = 0;
  uint32_t net_slot_bytes = 0;  // a multiple of 16
  bool hierarchy = false;

  static CommSettings read();
};

// What an engine reads when it is created, for its executor: a variable with a default per executor takes this
// executor's (env.h).
struct EngineSettings {
  uint32_t blocks = 0;
  bool blocks_set = false;  // the user set it (a default larger than the device holds shrinks; a set value fails)
  const char* blocks_name = "";  // the variable that set it, for messages (DFCCL_BLOCKS or its deprecated alias)
  uint32_t threads = 0;  // CUDA executor: threads per daemon block (a multiple of 32)
  uint64_t spin_min_ns = 0, spin_init_ns = 0, spin_max_ns = 0;  // min and init <= max
  uint32_t spin_grow = 0;
  uint32_t min_chan_bytes = 0;
  uint64_t idle_ns = 0, stuck_ns = 0, relaunch_ns = 0, relaunch_max_ns = 0;
  uint64_t host_sleep_ns = 0;  // DFCCL_HOST_SLEEP_NS
  uint64_t probe_spin_ns = 0, sync_spin_ns = 0;
  bool wait_kernel = false, wait_standin = false, check_host_order = false;
  bool mps_wait_host = false;  // DFCCL_MPS_WAIT=host
  int64_t host_wait_timeout_ms = 0;
  uint32_t slot_bytes = 0;  // a multiple of 16
  uint32_t slots = 0, lanes = 0, persistent_lanes = 0, p2p_channels = 0;
  uint32_t graphs = 0;  // DFCCL_GRAPHS
  uint64_t p2p_arena_bytes = 0;
  uint64_t stuck_warn_ns = 0;  // DFCCL_STUCK_WARN_S (0: never)
  // The engine's network proxies (net/proxy.h).
  struct Net {
    int threads = 1;
    int64_t spin_ns = 0, heartbeat_ms = 0, timeout_ms = 0;
  } net;

  static EngineSettings read(bool host_executor);
};

// What the logger reads at its first message (util/log.cpp).
struct LogSettings {
  std::string level, subsys, file;
  static LogSettings read();
};

// Other programs' variables that make CUDA run one kernel at a time: "CUDA_LAUNCH_BLOCKING=1", "compute-sanitizer"
// (its NV_SANITIZER_* variables), or "" for neither. Caller: the CUDA executor, for the engine's warning.
std::string launch_serialization_setting();
// DFCCL_HOSTID: this process's host identity ("": derive it). Caller: the bootstrap, at communicator init.
std::string host_id_setting();
// DFCCL_SOCKET_IFNAME: the interfaces a rendezvous root listens on. Caller: dfcclGetUniqueId.
std::string socket_ifname_setting();

}  // namespace dfccl
