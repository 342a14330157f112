#include "env.h"

#include <fmt/format.h>

#include <cstdlib>

#include "error.h"

namespace dfccl {

const std::vector<EnvVar>& env_table() {
  static const std::vector<EnvVar> table = {
      {"DFCCL_EXECUTOR", "cuda", "executor when the config leaves it unset: cuda or host"},
      {"DFCCL_MODE", "preemptive", "scheduling when the config leaves it unset: preemptive or blocking (no preemption)"},
      {"DFCCL_BLOCKS", "128",
       "CUDA executor: daemon thread blocks = channels per collective (1..128; unset: at most what the GPU holds)"},
      {"DFCCL_THREADS", "256", "CUDA executor: threads per daemon block (64..512, multiple of 32)"},
      {"DFCCL_HOST_BLOCKS", "1", "host executor: daemon threads = channels per collective (1..128)"},
      {"DFCCL_SLOT_BYTES", "131072", "CUDA executor: bytes per connection slot (multiple of 16)"},
      {"DFCCL_HOST_SLOT_BYTES", "32768", "host executor: bytes per connection slot (multiple of 16)"},
      {"DFCCL_SLOTS", "4",
       "CUDA executor: slots per lane (2..64): a sender runs up to this many ahead; a ring step streams half"},
      {"DFCCL_HOST_SLOTS", "8", "host executor: slots per lane (2..64)"},
      {"DFCCL_LANES", "4", "sequence lanes per communicator: collectives of one communicator in flight at once"},
      {"DFCCL_PERSISTENT_LANES", "8",
       "persistent collective ids a communicator takes (0..8), a lane each: 64 MiB per lane with the CUDA defaults"},
      {"DFCCL_MIN_CHAN_BYTES", "32768", "CUDA executor: bytes per data channel below which fewer channels carry data"},
      {"DFCCL_SPIN_MIN_NS", "2000", "CUDA executor: lowest spin budget of a primitive"},
      {"DFCCL_SPIN_INIT_NS", "20000", "CUDA executor: spin budget of a new collective"},
      {"DFCCL_SPIN_MAX_NS", "2000000", "CUDA executor: highest spin budget"},
      {"DFCCL_SPIN_GROW", "4", "after a wait of w ns succeeds, the budget becomes at least SPIN_GROW * w"},
      {"DFCCL_IDLE_NS", "500000", "CUDA executor: the daemon exits after this long with nothing to run"},
      {"DFCCL_STUCK_NS", "500000", "CUDA executor: the daemon exits after this long without progress (peers absent)"},
      {"DFCCL_RELAUNCH_NS", "50000", "CUDA executor: first back-off before relaunching a daemon that exited stuck"},
      {"DFCCL_PROBE_SPIN_NS", "100000",
       "dfcclWait: how long to wait for its barrier probe before assuming a device-wide barrier is pending"},
      {"DFCCL_WAIT_KERNEL", "1",
       "CUDA executor: dfcclWait by a polling kernel (1; where DFCCL_BLOCKS + 64 blocks fit) or a stream memory wait (0)"},
      {"DFCCL_SYNC_SPIN_NS", "50000",
       "CUDA executor: dfcclSynchronize polls for the completion this long before the calling thread sleeps"},
      {"DFCCL_RELAUNCH_MAX_NS", "5000000", "CUDA executor: back-off ceiling (doubles after each stuck exit)"},
      {"DFCCL_HOST_SPIN_MIN_NS", "20000", "host executor: lowest spin budget"},
      {"DFCCL_HOST_SPIN_INIT_NS", "200000", "host executor: spin budget of a new collective"},
      {"DFCCL_HOST_SPIN_MAX_NS", "20000000", "host executor: highest spin budget"},
      {"DFCCL_HOST_IDLE_NS", "5000000", "host executor: daemon exits after this long with nothing to run"},
      {"DFCCL_HOST_STUCK_NS", "5000000", "host executor: daemon exits after this long without progress"},
      {"DFCCL_HOST_RELAUNCH_NS", "200000", "host executor: first relaunch back-off"},
      {"DFCCL_HOST_RELAUNCH_MAX_NS", "20000000", "host executor: relaunch back-off ceiling"},
      {"DFCCL_P2P_DISABLE", "0", "1: connection regions in shared host memory even where GPUs reach each other directly"},
      {"DFCCL_INIT_TIMEOUT_MS", "60000", "how long communicator init waits for the other ranks"},
      {"DFCCL_DESTROY_TIMEOUT_MS", "30000", "how long dfcclCommDestroy waits for outstanding collectives and peers"},
      {"DFCCL_ABORT_TIMEOUT_MS", "1000", "how long dfcclCommAbort waits for the daemon to drop the collectives"},
  };
  return table;
}

static const EnvVar& find(const char* name) {
  for (const auto& v : env_table())
    if (std::string(v.name) == name) return v;
  throw Error(dfcclInternalError, fmt::format("unknown environment variable {}", name));
}

std::string env_str(const char* name) {
  const EnvVar& v = find(name);
  const char* s = std::getenv(name);
  return (s && *s) ? std::string(s) : std::string(v.default_value);
}

bool env_is_set(const char* name) {
  find(name);
  const char* s = std::getenv(name);
  return s && *s;
}

int64_t env_int(const char* name) {
  std::string s = env_str(name);
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  if (end == s.c_str() || *end != '\0')
    throw Error(dfcclInvalidArgument, fmt::format("environment variable {}='{}' is not an integer", name, s));
  return v;
}

}  // namespace dfccl
