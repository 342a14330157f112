// What a run produces, independent of the output format: run metadata, one row per collective and size, one row per
// trial, per-iteration times, one summary per backend. The writers (writer.h) turn these into a console table and
// an HDF5 file (docs/hdf5-layout.md, section dfccl-harness).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace dfccl::harness {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A replay of the simulator's scenarios (workload kind `replay`): the scenario's parameters, for /replay.
struct ReplayInfo {
  bool present = false;
  std::string layout, layout_spec;  // as written in sim.layout; normalized by the simulator's parser
  int64_t ranks = 0, groups = 0, colls = 0, collectives = 0, submissions = 0;  // per trial (all ranks)
  double p_disorder = 0, p_sync = 0;
  int64_t seed = 0, first_trial = 0;                  // seed: the uint64's bit pattern
  std::string coll;                                   // the collective every submission posts
  int64_t bytes = 0;                                  // its size S
  std::vector<std::string> group_names, group_kinds;  // per group: "g3(tp:2,3)", "tp"
  std::vector<int64_t> group_sizes, group_colls;
};

// One environment variable of one rank (/environment).
struct EnvEntry {
  int64_t rank = 0;
  std::string name, value;
};

struct RunInfo {
  std::string dfccl_version, git_revision, date_utc, command_line, config_toml;
  std::string workload, workload_kind, workload_description, workload_source;
  std::string in_place;                 // run.in_place, resolved: both | off | only
  std::vector<std::string> hosts;       // unique host names, in the order of their first rank
  std::vector<std::string> rank_hosts;  // per rank: its host (DFCCL_HOSTID, else the processor name)
  std::vector<std::string> gpus;        // per rank: "host:device name" or "none"
  std::string driver_version;           // the NVIDIA kernel module's version ("580.95.05"), "none" without one
  std::string cuda_driver_version;      // cudaDriverGetVersion ("13.0"), "none" without a driver
  std::string cuda_runtime_version, cuda_toolkit_version, nccl_version, mpi_version, mpi_library;
  std::string engine_settings;        // what the public dfccl API tells of the engine's effective settings
  std::vector<EnvEntry> environment;  // DFCCL_*, NCCL_*, CUDA_* and the launcher's variables, every rank's
  int nranks = 1;
  std::string layout;  // "tp=1 dp=4 pp=1"
  std::vector<std::string> backends;
  ReplayInfo replay;
};

struct BackendInfo {
  std::string name;        // dfccl | nccl | host | host-blocking
  std::string executor;    // cuda | host
  std::string mode;        // preemptive | blocking | nccl
  std::string completion;  // how a result becomes usable, in words
  std::string timing;      // how times are measured, in words
  bool available = true;
  std::string skip_reason;  // why it did not run, when !available
};

// One ring hop of one of a backend's communicators: `rank` sends to its ring neighbour `peer` (world ranks) through
// `transport` (peer_memory, host_memory, shared_memory, network), as the library reports it (dfcclCommGetInfo).
struct HopRow {
  std::string group;  // world, tp, dp, pp, or a replay's group name
  int64_t rank = 0, peer = 0;
  std::string transport;
  std::string host, peer_host;
};

// One collective (or the whole step) at one size, aggregated over iterations and trials (completed trials only).
struct CaseRow {
  int64_t case_index = 0;
  int64_t entry = 0;  // index in the step; -1 for the row of the whole step
  std::string coll;   // all_reduce, ..., or "step"
  std::string group;  // world tp dp pp
  std::string label;
  std::string dtype, op;
  int64_t root = 0, priority = 0;
  int64_t nranks = 0;     // ranks of the group
  int64_t count = 0;      // count argument of the call
  int64_t bytes = 0;      // nccl-tests' size S
  bool in_place = false;  // nccl-tests' in-place measurement (input and output in one buffer), else out-of-place
  std::string time_kind;  // iteration (one collective per iteration) | e2e (its end-to-end latency) | step
  int64_t samples = 0;    // timed iterations that went into the statistics
  double time_min_us = kNaN, time_median_us = kNaN, time_max_us = kNaN, time_mean_us = kNaN, cv = kNaN;
  double algbw_GBs = kNaN, busbw_GBs = kNaN;  // from the median time
  double e2e_median_us = kNaN, core_median_us = kNaN;
  int64_t wrong = 0;             // wrong elements, summed over ranks and checked iterations (-1: not checked)
  int64_t preemptions = 0;       // summed over ranks and iterations
  std::vector<double> times_us;  // per iteration (slowest rank), for the iterations table
};

struct TrialRow {
  int64_t case_index = 0, trial = 0;
  std::string status;                            // completed | deadlocked | failed | stalled | skipped
  std::string ranks;                             // the world ranks the status names ("2", "1,3"): stalled ones
  double elapsed_s = 0;                          // trial start -> finished or declared deadlocked
  double detect_s = kNaN;                        // deadlocked: last progress of any rank -> the watchdog's decision
  int64_t preemptions = 0, daemon_launches = 0;  // engine counters, summed over ranks (-1: not available)
  int64_t wrong = 0;
  int64_t reordered = 0;  // rank-iterations that drew a random order
  int64_t syncs = 0;      // forced and implicit synchronizations executed, summed over ranks
  std::string message;    // first error, if any
  // Replay workloads only (/backends/<b>/replay): the scenario's trial and its programs, summed over ranks.
  int64_t scenario_trial = -1;
  int64_t program_steps = 0, program_submissions = 0, program_syncs = 0;  // in one replay of the trial
  int64_t disordered_ranks = 0;  // ranks whose submissions are not in their canonical order
  int64_t executed_steps = 0;    // steps the worker threads returned from, over all iterations of the trial
  // Fault workloads only (/backends/<b>/faults): the victim (world rank), killed kill_ms after its first collective;
  // from the kill to the last survivor's failure (detect), from there to the last survivor's shrunk communicator
  // (shrink), and from the kill to the first collective completed on it by every survivor (recover); the most
  // collectives that failed on one survivor (lost), the survivors that went on exactly, and the collective they
  // resumed at. Times NaN unless completed.
  int64_t victim = -1;
  double kill_ms = kNaN;
  double fault_detect_s = kNaN, fault_shrink_s = kNaN, fault_recover_s = kNaN;
  int64_t fault_lost = 0, fault_survivors = 0, fault_resumed_at = -1;
};

struct BackendSummary {
  std::string backend, workload;
  int64_t trials = 0, completed = 0, deadlocked = 0, failed = 0, stalled = 0, skipped = 0;
  double deadlock_rate = 0, ci_low = 0, ci_high = 1;  // Wilson 95 % over the trials that ran (all but skipped)
  int64_t wrong = 0;
  double busbw_mean_GBs = kNaN;  // average of busbw over the rows (nccl-tests' "Avg bus bandwidth")
  double wall_s = 0;
  std::string engine;  // the engine's settings and transport as the backend's library reports them ("" if none)
};

}  // namespace dfccl::harness
