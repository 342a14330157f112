#include "settings/env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/types.h"
#include "cuda/daemon.h"
#include "dfccl.h"
#include "util/error.h"

namespace dfccl {
namespace {

constexpr int64_t kNsMax = int64_t(3600) * 1000000000;  // an hour: the bound of every time in nanoseconds
constexpr int64_t kMsMax = int64_t(86400) * 1000;       // a day: the bound of every time in milliseconds

EnvVar words(const char* name, const char* def, const char* choices, const char* description) {
  return {name, def, 0, 0, choices, description};
}
EnvVar integer(const char* name, const char* def, int64_t lo, int64_t hi, const char* description) {
  return {name, def, lo, hi, nullptr, description};
}

// A variable with a default per executor, and the deprecated DFCCL_HOST_* name of its host value.
EnvVar per_executor(const char* name, const char* cuda_def, const char* host_def, int64_t lo, int64_t hi,
                    const char* alias, const char* description) {
  return {name, cuda_def, lo, hi, nullptr, description, host_def, alias};
}

const EnvVar& find(const char* name) {
  for (const auto& v : env_table())
    if (std::strcmp(v.name, name) == 0) return v;
  throw Error(dfcclInternalError, fmt::format("unknown environment variable {}", name));
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

const char* set_value(const char* name) {
  const char* s = std::getenv(name);
  return s && *s ? s : nullptr;
}

// Where an executor's value of a variable comes from: the name that holds it and the value, or {name, null} for
// the default.
struct Lookup {
  const char* name;
  const char* value;
};

Lookup lookup(const EnvVar& v, Exec exec) {
  const char* value = set_value(v.name);
  if (value || exec != Exec::Host || !v.host_alias || !set_value(v.host_alias)) return {v.name, value};
  return {v.host_alias, set_value(v.host_alias)};
}

}  // namespace

const std::vector<EnvVar>& env_table() {
  // Grouped by what reads them: the executor, the daemon, the connections, completion, the network, the
  // communicator, failures, messages.
  static const std::vector<EnvVar> table = {
      words("DFCCL_EXECUTOR", "cuda", "cuda|host", "executor when the config leaves it unset"),
      words("DFCCL_MODE", "preemptive", "preemptive|blocking",
            "scheduling when the config leaves it unset (blocking: no preemption, like NCCL)"),

      per_executor("DFCCL_BLOCKS", "128", "1", 1, core::kMaxBlocks, "DFCCL_HOST_BLOCKS",
                   "daemon blocks (CUDA executor; unset: at most what the GPU holds) or daemon threads (host "
                   "executor) = channels per collective"),
      integer("DFCCL_THREADS", "256", 64, cuda::kDaemonThreads,
              "CUDA executor: threads per daemon block (a multiple of 32)"),
      per_executor("DFCCL_SPIN_MIN_NS", "2000", "20000", 0, kNsMax, "DFCCL_HOST_SPIN_MIN_NS",
                   "lowest spin budget of a primitive"),
      per_executor("DFCCL_SPIN_INIT_NS", "20000", "200000", 0, kNsMax, "DFCCL_HOST_SPIN_INIT_NS",
                   "spin budget of a new collective"),
      per_executor("DFCCL_SPIN_MAX_NS", "2000000", "20000000", 0, kNsMax, "DFCCL_HOST_SPIN_MAX_NS",
                   "highest spin budget"),
      integer("DFCCL_SPIN_GROW", "4", 1, 1000,
              "after a wait of w ns succeeds, the budget becomes at least SPIN_GROW * w"),
      per_executor("DFCCL_IDLE_NS", "500000", "5000000", 0, kNsMax, "DFCCL_HOST_IDLE_NS",
                   "the daemon exits after this long with nothing to run"),
      per_executor("DFCCL_STUCK_NS", "500000", "5000000", 0, kNsMax, "DFCCL_HOST_STUCK_NS",
                   "the daemon exits after this long without progress (peers absent)"),
      per_executor("DFCCL_RELAUNCH_NS", "50000", "200000", 0, kNsMax, "DFCCL_HOST_RELAUNCH_NS",
                   "first back-off before relaunching a daemon that exited stuck"),
      per_executor("DFCCL_RELAUNCH_MAX_NS", "5000000", "20000000", 0, kNsMax, "DFCCL_HOST_RELAUNCH_MAX_NS",
                   "back-off ceiling (doubles after each stuck exit)"),
      integer("DFCCL_HOST_SLEEP_NS", "20000", 0, kNsMax,
              "host executor: spin, then block: a waiting engine thread (the daemon's, the progress thread) yields "
              "the core this long, then sleeps an eighth of its wait so far between looks (at most 200 us; the "
              "progress thread 1 ms), leaving the cores to ranks that have work; larger than every wait: spins"),

      per_executor("DFCCL_SLOT_BYTES", "131072", "32768", 16, 64 << 20, "DFCCL_HOST_SLOT_BYTES",
                   "bytes per connection slot (multiple of 16)"),
      per_executor("DFCCL_SLOTS", "3", "8", 2, 64, "DFCCL_HOST_SLOTS",
                   "slots per lane: a sender runs up to this many ahead; a ring step streams half (rounded up)"),
      integer("DFCCL_LANES", "1", 1, core::kMaxLanes - core::kOwnLanes,
              "sequence lanes per communicator: collectives of one communicator in flight at once"),
      integer("DFCCL_PERSISTENT_LANES", "8", 0, DFCCL_MAX_PERSISTENT_IDS,
              "persistent collective ids a communicator takes; each id's lane (64 MiB with the CUDA defaults) is "
              "allocated by its first prepare"),
      integer("DFCCL_GRAPHS", "0", 0, 1,
              "1: each communicator makes its graph lane at init (one lane more: 48 MiB with the CUDA defaults) and "
              "point-to-point connections of twice the lanes, so that its collectives, transfers and all-to-alls can "
              "be captured into CUDA graphs; every rank must agree; 0: capturing them is refused"),
      integer("DFCCL_MIN_CHAN_BYTES", "32768", 1, 1 << 30,
              "bytes per data channel below which fewer channels carry data"),
      per_executor("DFCCL_P2P_CHANNELS", "8", "1", 0, core::kMaxBlocks, "DFCCL_HOST_P2P_CHANNELS",
                   "channels of each point-to-point connection (send/recv, all-to-all; DFCCL_BLOCKS if fewer); 0: no "
                   "connections, and no point-to-point"),
      per_executor("DFCCL_P2P_ARENA_BYTES", "12582912", "0", 0, int64_t(1) << 40, "DFCCL_HOST_P2P_ARENA_BYTES",
                   "each rank's memory for the point-to-point connections of a communicator, carved on first use (at "
                   "least the smallest connection per rank, which 0 asks for; all at init with network connections)"),
      integer("DFCCL_P2P_DISABLE", "0", 0, 1,
              "1: connection regions in shared host memory even where GPUs reach each other directly"),

      integer("DFCCL_PROBE_SPIN_NS", "100000", 0, kNsMax,
              "dfcclWait: how long to wait for its barrier probe before assuming a device-wide barrier is pending"),
      integer("DFCCL_WAIT_KERNEL", "1", 0, 2,
              "CUDA executor: dfcclWait by a polling kernel (1; where DFCCL_BLOCKS + 64 blocks fit), a stream memory "
              "wait (0), or a kernel of the daemon's shape that runs the scheduler itself while no daemon does (2; "
              "what a collective's first wait is anyway once CUDA graphs are captured on the device)"),
      integer(
          "DFCCL_CHECK_HOST_ORDER", "0", 0, 1,
          "CUDA executor, debugging: 1: a host-ordered submission (DFCCL_NO_STREAM) first synchronizes the calling "
          "thread's default streams, so that inputs still in flight from a pageable cudaMemcpy land first; a result "
          "right with it and wrong without means inputs were submitted before the device could see them"),
      words("DFCCL_MPS_WAIT", "host", "host|stream",
            "CUDA executor on a device shared through MPS: host: dfcclWait blocks the calling thread until its "
            "collective finishes (streams waiting on the GPU can hang MPS clients); stream: the stream waits on the "
            "GPU as without MPS, returning at once (the hazard)"),
      integer("DFCCL_SYNC_SPIN_NS", "50000", 0, kNsMax,
              "CUDA executor: dfcclSynchronize polls for the completion this long before the calling thread sleeps"),
      integer("DFCCL_HOST_WAIT_TIMEOUT_MS", "300000", 1, kMsMax,
              "how long dfcclWait blocks the calling thread where it waits on the host (the host executor; the CUDA "
              "executor under MPS with DFCCL_MPS_WAIT=host) before it returns dfcclTimeout"),

      integer("DFCCL_NET_FORCE", "0", 0, 1,
              "1: every connection between two ranks goes through the network transport and its proxy, also on one "
              "host (a test of the multi-host path; needs a build with UCX)"),
      integer("DFCCL_NET_CHANNELS", "8", 1, core::kMaxBlocks,
              "channels of a communicator with network connections (the daemon's blocks if fewer): its regions and "
              "their shadows are in pinned host memory"),
      integer("DFCCL_NET_SLOT_BYTES", "524288", core::kLLSlotBytes, 64 << 20,
              "bytes per connection slot of a communicator with network connections (multiple of 16): each slot "
              "travels as one network message"),
      per_executor("DFCCL_NET_THREADS", "4", "1", 1, 16, "DFCCL_HOST_NET_THREADS",
                   "net proxies per engine, each a thread with its own network worker; a communicator splits its "
                   "network channels among them (channel c to proxy c mod n, n the smallest value among its ranks)"),
      per_executor("DFCCL_NET_SPIN_NS", "1000000", "0", 0, 1000000000, "DFCCL_HOST_NET_SPIN_NS",
                   "how long a net proxy keeps polling without pause after its last progress before it sleeps between "
                   "turns (each sleep delays the next message it sees by tens of microseconds; the host executor's "
                   "daemon threads need the cores of small machines)"),
      integer("DFCCL_NET_HEARTBEAT_MS", "100", 1, 60000,
              "how often the net proxy sends each peer proxy a heartbeat, whatever the collectives do"),
      integer("DFCCL_NET_TIMEOUT_MS", "20000", 0, kMsMax,
              "a peer proxy not heard from for this long (stopped, hung, cut off) fails the communicators connected "
              "to it with dfcclRemoteError (0: never)"),
      integer("DFCCL_HIERARCHY", "0", 0, 1,
              "1: a communicator of several hosts with the same number (>= 2) of ranks each, host after host, runs "
              "all-reduces (count a multiple of that number, operator not avg) as a reduce-scatter in each host, an "
              "all-reduce between the hosts per local rank and an all-gather in each host; costs two more "
              "communicators' memory"),
      words("DFCCL_HOSTID", "", "",
            "this process's host identity (unset: the host name and boot id); ranks with different ones are on "
            "different hosts and connect through the network transport"),
      words("DFCCL_SOCKET_IFNAME", "", "",
            "interfaces the network rendezvous listens on: name prefixes, comma-separated (=: exact names, ^: all "
            "but these; unset: the first non-loopback IPv4 interface, else loopback)"),

      integer("DFCCL_INIT_TIMEOUT_MS", "60000", 1, kMsMax, "how long communicator init waits for the other ranks"),
      integer("DFCCL_DESTROY_TIMEOUT_MS", "30000", 0, kMsMax,
              "how long dfcclCommDestroy waits for outstanding collectives and peers"),
      integer("DFCCL_ABORT_TIMEOUT_MS", "1000", 0, kMsMax,
              "how long dfcclCommAbort waits for the daemon to drop the collectives"),
      integer("DFCCL_PEER_TIMEOUT_S", "30", 0, 86400,
              "a peer process whose heartbeat has not moved for this long (stopped, hung) fails its communicators "
              "with dfcclRemoteError (0: never)"),
      integer("DFCCL_STUCK_WARN_S", "60", 0, 86400,
              "warn when a collective has been pending this long, naming it (0: never)"),

      words("DFCCL_DEBUG", "WARN", "NONE|WARN|INFO|TRACE",
            "what DFCCL prints: warnings; INFO adds a banner per engine and communicator; TRACE each collective"),
      words("DFCCL_DEBUG_SUBSYS", "ALL", "",
            "comma list of INIT, ENGINE, ABORT, ENV, COLL or ALL that DFCCL_DEBUG applies to (^ in front: all but)"),
      words("DFCCL_DEBUG_FILE", "", "", "write the messages to this file (%h: host name, %p: pid) instead of stderr"),
  };
  return table;
}

const char* env_default(const EnvVar& v, Exec exec) {
  return exec == Exec::Host && v.host_default ? v.host_default : v.default_value;
}

std::string env_str(const char* name, Exec exec) {
  const EnvVar& v = find(name);
  const Lookup l = lookup(v, exec);
  const std::string value = l.value ? std::string(l.value) : std::string(env_default(v, exec));
  if (v.choices && *v.choices) {
    const std::string bar = std::string("|") + v.choices + "|";
    if (bar.find("|" + value + "|") == std::string::npos)
      throw Error(dfcclInvalidArgument,
                  fmt::format("environment variable {}='{}': use one of {}", l.name, value, std::string(v.choices)));
  }
  return value;
}

bool env_is_set(const char* name, Exec exec) { return lookup(find(name), exec).value != nullptr; }

const char* env_source(const char* name, Exec exec) { return lookup(find(name), exec).name; }

int64_t env_int(const char* name, Exec exec) {
  const EnvVar& v = find(name);
  const std::string s = env_str(name, exec);
  const bool digits =
      !s.empty() && s.size() <= 19 && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  errno = 0;
  const long long value = digits ? std::strtoll(s.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE || value < v.lo || value > v.hi)
    throw Error(dfcclInvalidArgument, fmt::format("environment variable {}='{}': expected a decimal integer in {}..{}",
                                                  env_source(name, exec), s, v.lo, v.hi));
  return value;
}

std::string env_closest(const std::string& name) {
  std::string best;
  size_t best_d = ~size_t(0);
  for (const auto& v : env_table()) {
    const size_t d = edit_distance(name, v.name);
    if (d < best_d) {
      best_d = d;
      best = v.name;
    }
  }
  return best;
}

}  // namespace dfccl
