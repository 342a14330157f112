// A workload: what the harness runs, resolved from a TOML file plus command-line overrides.
//
// Every knob is a key of the settings table (config/settings.cpp: one row per key with its type, default and
// meaning; `dfccl-harness --list-keys` prints it, docs/harness.md documents it). A knob is set in the workload file
// (`[section] key = value`) and overridden on the command line as `--section.key value` (or a short alias such as
// `--backend`, `--iters`). Unknown keys, values of the wrong type and out-of-range values are errors that name the
// key.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "colls/collective.h"
#include "layout/layout.h"
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
  int sim_group = -1;  // replay: the scenario's group (its communicator); -1 in other workloads
};

enum class HostAllocKind : int { MallocHost = 0, FreeHost = 1, HostRegister = 2 };
std::string_view host_alloc_name(HostAllocKind k);

enum class SyncPlacement : int { Between = 0, BeforeWait = 1 };

struct Workload {
  std::string name, description, source;

  // [run]
  std::vector<std::string> backends;
  int iterations = 20;
  int warmup = 5;
  int trials = 1;
  double timeout_s = 60;
  uint64_t seed = 1;
  bool check = true;
  bool diagnose = false;
  std::string completion = "stream";  // dfccl GPU backend: stream | host
  std::string order = "stream";       // dfccl GPU backend: stream | host (DFCCL_NO_STREAM)
  std::string streams = "single";     // GPU backends: single | per_group
  std::string nccl_comms = "auto";    // nccl backend: auto | blocking | nonblocking
  std::string timing = "iteration";   // iteration (a time per iteration) | batch (nccl-tests': per batch, averaged)
  int batch = 10;                     // timed iterations per batch (batch timing)

  // [layout] (dp = 0: the world size divided by tp * pp)
  int tp = 1, dp = 0, pp = 1;

  // [data]
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  int priority = 0;

  // Exactly one of sweep, mix, step, replay.
  enum class Kind { Sweep, Mix, Step, Replay } kind = Kind::Sweep;

  // [sweep]
  std::vector<const Collective*> sweep_collectives;
  uint64_t begin = 8, end = 8;
  double factor = 2;
  GroupKind sweep_group = GroupKind::World;

  // [mix]
  int mix_count = 0;
  std::vector<std::pair<const Collective*, double>> mix_weights;
  std::vector<GroupKind> mix_groups;
  bool mix_per_trial = true;
  int mix_priority_max = 0;

  // [[step]]
  std::vector<StepEntry> step;

  // [sim]: a replay of the simulator's scenarios (common/scenario.h, docs/simulator.md): rank r of harness trial t runs
  // Scenario::program(r, sim_first_trial + t) of (sim_layout, sim_colls, sim_disorder, sim_sync, sim_seed).
  std::string sim_layout;
  int sim_colls = 10;
  double sim_disorder = 0, sim_sync = 0;
  uint64_t sim_seed = 1;
  uint64_t sim_first_trial = 0;
  const Collective* sim_coll = nullptr;  // every replayed collective (default all_reduce)
  uint64_t sim_bytes = 64;               // its size S

  // [order]
  double order_probability = 0;
  // [sync]
  double sync_probability = 0;
  SyncPlacement sync_placement = SyncPlacement::Between;
  // [host_alloc]
  double host_alloc_probability = 0;
  uint64_t host_alloc_bytes = 1 << 20;
  std::vector<HostAllocKind> host_alloc_kinds;
  // [implicit]
  double cuda_free_probability = 0;
  double lazy_kernel_probability = 0;
  // [compute]
  double compute_us = 0;
  double compute_probability = 1;

  // The sizes of the sweep (begin, begin*factor, ... <= end) or of the mix.
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

// The settings table as text (for --list-keys and the docs).
std::string describe_settings();
// Short aliases accepted on the command line -> their full key.
const std::map<std::string, std::string>& setting_aliases();

}  // namespace dfccl::harness
