// A workload: what the harness runs, resolved from a TOML file plus command-line overrides.
//
// Every knob is a key of the settings table (config/settings.h: one row per key with its type, default, valid values
// and meaning; `dfccl-harness --list-keys` prints it, docs/harness.md documents it). A knob is set in the workload file
// (`[section] key = value`) and overridden on the command line as `--section.key value` (or a short alias such as
// `--backend`, `--iters`). Unknown keys, values of the wrong type and out-of-range values are errors that name the
// key.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "colls/collective.h"
#include "config/layout.h"
#include "verify/types.h"

namespace dfccl::harness {

// Thrown for every problem in a workload or an override; what() names the key (and the file).
struct WorkloadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One collective of a step: submitted by every rank on its own group of the given kind.
struct StepEntry {
  const Collective* coll = nullptr;
  GroupKind group = GroupKind::World;
  uint64_t bytes = 0;  // nccl-tests' size S
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  int priority = 0;
  std::string label;
  int sim_group = -1;     // replay: the scenario's group (its communicator); -1 in other workloads
  bool in_place = false;  // nccl-tests' in-place variant: one buffer for input and output (EntryPlan's layout)
  // p2p: the sender's and the receiver's rank in the group (each taken modulo the group size, as root).
  int src = 0, dst = 1;
  // Only the ranks of this pipeline stage (their rank in the pp group) take part; -1: every rank.
  int stage = -1;
  // The entry's position in the canonical program of each rank taking part (p2p: seq on the sender, seq_dst on the
  // receiver); -1: its index. Ranks whose programs differ (a pipeline's stages) get them from a generator.
  int seq = -1, seq_dst = -1;
  // Entries (indices) that come before this one in the program of every rank taking part in both: data
  // dependencies, kept when a rank's order is randomized (plan/rank_program.h).
  std::vector<int> after;
};

// Enum-valued settings: each enum's names, in its order, are the choices of its row in the settings table.
enum class Completion : int { Stream, Host, Callback };  // run.completion (dfccl)
inline constexpr const char* kCompletionNames[] = {"stream", "host", "callback"};
enum class SubmitOrder : int { Stream, Host };  // run.order (dfccl on GPUs; host: DFCCL_NO_STREAM)
inline constexpr const char* kSubmitOrderNames[] = {"stream", "host"};
enum class Streams : int { Single, PerGroup };  // run.streams (GPU backends)
inline constexpr const char* kStreamsNames[] = {"single", "per_group"};
enum class NcclComms : int { Auto, Blocking, Nonblocking };  // run.nccl_comms (nccl backend)
inline constexpr const char* kNcclCommsNames[] = {"auto", "blocking", "nonblocking"};
// run.in_place: which of nccl-tests' two measurements each case gets (auto: both for a sweep, off otherwise).
enum class InPlace : int { Auto, Both, Off, Only };
inline constexpr const char* kInPlaceNames[] = {"auto", "both", "off", "only"};
enum class TimingMode : int { Iteration, Batch };  // run.timing
inline constexpr const char* kTimingModeNames[] = {"iteration", "batch"};
enum class SyncPlacement : int { Between, BeforeWait };  // sync.placement
inline constexpr const char* kSyncPlacementNames[] = {"between", "before_wait"};
enum class HostAllocKind : int { MallocHost, FreeHost, HostRegister };  // each of host_alloc.kinds
inline constexpr const char* kHostAllocKindNames[] = {"malloc_host", "free_host", "host_register"};
// Backend names (run.backend; "auto" is resolved by main before the run).
inline constexpr const char* kBackendNames[] = {"dfccl",      "dfccl-blocking", "dfccl-graph",   "nccl",
                                                "nccl-graph", "host",           "host-blocking", "auto"};

// The name of an enum-valued setting's value, from its names above.
template <class E, size_t N>
std::string_view name_of(E value, const char* const (&names)[N]) {
  return names[static_cast<size_t>(value)];
}

// The resolved workload. Members are only value-initialized here: parse_workload sets every one of them, from the
// file, the overrides, or the settings table's defaults.
struct Workload {
  std::string name, description, source;
  enum class Kind : int { Sweep, Mix, Step, Replay, Fault } kind{};  // kind: exactly one of them
  static constexpr const char* kKindNames[] = {"sweep", "mix", "step", "replay", "fault"};

  // [run]
  std::vector<std::string> backends;
  int iterations{}, warmup{}, trials{};
  double timeout_s{};
  uint64_t seed{};
  bool check{}, diagnose{};
  Completion completion{};
  SubmitOrder order{};
  Streams streams{};
  NcclComms nccl_comms{};
  InPlace in_place{};  // resolved: never Auto
  TimingMode timing{};
  int batch{};          // timed iterations per batch (batch timing)
  int graph_replays{};  // graph backends: launches of each span's graph

  // [layout] (dp = 0: the world size divided by tp * pp)
  int tp{}, dp{}, pp{};

  // [data]
  DataType dtype{};
  RedOp op{};
  int root{}, priority{};

  // [sweep] and [sizes]
  std::vector<const Collective*> sweep_collectives;
  uint64_t begin{}, end{};
  double factor{};        // 1 when step_bytes > 0
  uint64_t step_bytes{};  // sizes.step: additive growth in bytes; 0: by factor
  GroupKind sweep_group{};

  // [mix]
  int mix_count{};
  std::vector<std::pair<const Collective*, double>> mix_weights;
  std::vector<GroupKind> mix_groups;
  bool mix_per_trial{};
  int mix_priority_max{};

  // [[step]]
  std::vector<StepEntry> step;

  // [sim]: a replay of the simulator's scenarios (common/scenario.h, docs/simulator.md): rank r of harness trial t runs
  // Scenario::program(r, sim_first_trial + t) of (sim_layout, sim_colls, sim_disorder, sim_sync, sim_seed).
  std::string sim_layout;
  int sim_colls{};
  double sim_disorder{}, sim_sync{};
  uint64_t sim_seed{}, sim_first_trial{};
  const Collective* sim_coll = nullptr;  // every replayed collective
  uint64_t sim_bytes{};                  // its size S

  // [fault]: a rank killed in each trial, the survivors shrink and go on (fault/fault.h)
  int fault_kill_max_ms{};  // the victim dies 0..kill_max_ms after its first collective
  int fault_after{};        // collectives of the survivors on the shrunk communicator
  int fault_inflight{};     // collectives submitted before their waits

  // [pipeline]: a 1F1B schedule over layout.pp stages, generated into `step` (plan/pipeline.h)
  bool pipeline{};  // pipeline.micro_batches > 0
  int pipeline_micro_batches{}, pipeline_tp_per_pass{}, pipeline_dp_buckets{};
  uint64_t pipeline_activation_bytes{}, pipeline_tp_bytes{}, pipeline_dp_bytes{};

  // [order], [sync], [host_alloc], [implicit], [compute]
  double order_probability{};
  double sync_probability{};
  SyncPlacement sync_placement{};
  double host_alloc_probability{};
  uint64_t host_alloc_bytes{};
  std::vector<HostAllocKind> host_alloc_kinds;
  double cuda_free_probability{}, lazy_kernel_probability{};
  double compute_us{}, compute_probability{};

  // The sizes of the sweep (begin, begin*factor, ... <= end, or begin, begin+step_bytes, ... <= end) or of the mix.
  std::vector<uint64_t> sizes() const;

  std::string resolved_toml;  // the full resolved configuration (every key, defaults included), as TOML text
};

// Overrides from the command line, in order: (key, value text). Keys are `section.key` or aliases.
using Overrides = std::vector<std::pair<std::string, std::string>>;

// Reads a workload file and applies the overrides. Throws WorkloadError.
Workload load_workload(const std::string& path, const Overrides& overrides);
// The same from TOML text (`origin` names it in messages).
Workload parse_workload(const std::string& toml_text, const std::string& origin, const Overrides& overrides);

// "8", "8B", "64K", "64KiB", "1M", "1G", ... (K = 1024). Throws WorkloadError naming `key`.
uint64_t parse_bytes(const std::string& text, const std::string& key);

}  // namespace dfccl::harness
