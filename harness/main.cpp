// dfccl-harness: mpirun -np N dfccl-harness [--workload workloads/<name>.toml] [--section.key value ...] [--out FILE]
// (docs/harness.md). Parses the command line (config/command_line.h) and the workload (without one: an all_reduce
// sweep from the settings' defaults), checks what it will write and that the library can connect the ranks' hosts,
// bootstraps MPI and the groups, collects the run's metadata, runs the campaign (runtime/driver.cpp) and writes the
// console table, the HDF5 file and, with -J, a JSON file.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <thread>
#include <utility>

#include "backends/backend.h"
#include "config/command_line.h"
#include "config/memory_check.h"
#include "config/settings.h"
#include "config/workload.h"
#include "harness_build_info.h"
#include "output/layout_check.h"
#include "output/writer.h"
#include "plan/replay.h"
#include "runtime/driver.h"
#include "runtime/hosts.h"
#include "runtime/mpi_env.h"

#ifdef DFCCL_HARNESS_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef DFCCL_HARNESS_HAVE_DFCCL
#include "dfccl.h"
#include "fault/fault.h"
#endif
#include "runtime/run_info.h"
#include "runtime/run_stop.h"
#include "runtime/signals.h"

using namespace dfccl::harness;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::string resolve_auto_backends(const std::vector<std::string>& backends) {
  std::vector<std::string> out;
  bool gpus = gpu_count() > 0;
  // Each backend once: one that auto adds and that is also named stays where it first comes.
  auto add = [&](const std::string& b) {
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  };
  for (const auto& b : backends) {
    if (b != "auto") {
      add(b);
      continue;
    }
    if (gpus) {
      if (backend_compiled("dfccl")) add("dfccl");
      if (backend_compiled("nccl")) add("nccl");
    }
    if (out.empty()) add("host");
  }
  std::string s;
  for (const auto& b : out) s += (s.empty() ? "" : ",") + b;
  return s;
}

int finish(int rc) {
  // Every rank returns the worst exit code.
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}

using Options = CommandLine;

// What --version prints: the harness's version and git revision, and the dfccl library's version.
std::string version_line() {
  std::string lib = "not built";
#ifdef DFCCL_HARNESS_HAVE_DFCCL
  int v = 0;
  if (dfcclGetVersion(&v) == 0) lib = fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
#endif
  return fmt::format("dfccl-harness {} (git {}), dfccl library {}", DFCCL_HARNESS_VERSION, DFCCL_HARNESS_GIT_REVISION,
                     lib);
}

// Parses the command line. Returns the exit code when the process stops here (--help, --version, a bad option; rank 0
// prints why), else nullopt.
std::optional<int> parse_options(int argc, char** argv, bool root, Options& o) {
  ParseOutcome p = parse_command_line(argc, argv, version_line());
  if (p.exit_code) {
    if (root) {
      fmt::print("{}", p.out);
      if (!p.err.empty()) fmt::print(stderr, "dfccl-harness: {}", p.err);
    }
    return p.exit_code;
  }
  o = std::move(p.options);
  return std::nullopt;
}

// The workload without --workload: an all_reduce sweep from the settings' defaults and the command line.
constexpr const char* kBuiltinWorkload =
    "name = 'sweep'\ndescription = 'all_reduce sweep from the command line (no --workload)'\n";

// The workload with its overrides; run.backend = auto becomes the backends this machine has. Throws WorkloadError.
Workload read_workload(const Options& o) {
  auto load = [&](const Overrides& overrides) {
    if (o.workload_path.empty()) return parse_workload(kBuiltinWorkload, "command line", overrides);
    return load_workload(o.workload_path, overrides);
  };
  Overrides overrides = o.overrides;
  Workload w = load(overrides);
  if (std::find(w.backends.begin(), w.backends.end(), "auto") != w.backends.end()) {
    overrides.emplace_back("run.backend", resolve_auto_backends(w.backends));
    w = load(overrides);
  }
  return w;
}

// NCCL_TESTS_MIN_BW (GB/s), as nccl-tests reads it: -1 when unset. Throws WorkloadError when it is not a number >= 0.
double nccl_tests_min_bw() {
  const char* v = std::getenv("NCCL_TESTS_MIN_BW");
  if (!v || !*v) return -1;
  char* end = nullptr;
  const double bw = std::strtod(v, &end);
  if (*end != '\0' || !(bw >= 0) || !std::isfinite(bw))
    throw WorkloadError(fmt::format("NCCL_TESTS_MIN_BW: '{}' is not a bandwidth in GB/s (a number >= 0)", v));
  return bw;
}

// Rank 0, before the run: the default --out (<workload>-<UTC date-time>.h5 in the current folder), then --out
// and -J must be writable and new (or --overwrite). Throws WorkloadError naming the option.
void check_outputs(Options& o, const Workload& w) {
  if (o.out_path.empty()) {
    std::time_t t = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", std::gmtime(&t));
    o.out_path = fmt::format("{}-{}.h5", w.name, stamp);
  }
  if (std::string p = output_path_problem("--out", o.out_path, o.overwrite); !p.empty()) throw WorkloadError(p);
  if (!o.json_path.empty()) {
    if (o.json_path == o.out_path) throw WorkloadError(fmt::format("-J {}: the same file as --out", o.json_path));
    if (std::string p = output_path_problem("-J", o.json_path, o.overwrite); !p.empty()) throw WorkloadError(p);
  }
}

// Whether the dfccl library can connect ranks on different hosts (its network transport). A harness built without
// the library says yes: its dfccl backends are skipped as not built, whatever the hosts.
bool library_spans_hosts() {
#ifdef DFCCL_HARNESS_HAVE_DFCCL
  int features = 0;
  return dfcclGetFeatures(&features) == dfcclSuccess && (features & DFCCL_FEATURE_NETWORK) != 0;
#else
  return true;
#endif
}

int max_over_ranks(int rc) {
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return rc;
}

// Everything refused before anything runs, on every rank alike: NCCL_TESTS_MIN_BW, the workload, the --expect
// expressions, the outputs (rank 0), ranks on several hosts without the library's network transport, the world's
// layout, a sweep larger than a host's memory. Returns 0, or the exit code (rank 0 printed why). Then
// NCCL_TESTS_MIN_BW becomes one --expect per backend.
int prepare_run(Options& o, bool root, Workload& w, MpiWorld& world, double& min_bw) {
  int rc = 0;
  try {
    min_bw = nccl_tests_min_bw();
    w = read_workload(o);
    for (const std::string& e : o.expectations)  // before the run, not after it
      if (std::string problem = expectation_problem(e, w.backends); !problem.empty()) throw WorkloadError(problem);
    if (root) check_outputs(o, w);
  } catch (const WorkloadError& e) {
    if (root) fmt::print(stderr, "dfccl-harness: {}\n", e.what());
    rc = 2;
  }
  if (max_over_ranks(rc) != 0) return 2;
  std::vector<std::string> hosts = rank_hosts();  // the same list on every rank, so the same decision
  if (std::string problem = multi_host_problem(hosts, library_spans_hosts(), w.backends); !problem.empty()) {
    if (root) fmt::print(stderr, "dfccl-harness: {}\n", problem);
    return 2;
  }
  try {
    world = MpiWorld::create(w.tp, w.dp, w.pp, std::move(hosts));
    replay::check_world(w, world.size);
  } catch (const WorkloadError& e) {
    if (root) fmt::print(stderr, "dfccl-harness: {}\n", e.what());
    return 2;
  }
  // Each host's memory (its own ranks), before any buffer is allocated; every rank learns the first host's problem.
  const std::string memory = agree_error(sweep_memory_problem(
      w, world.memberships[static_cast<size_t>(w.sweep_group)].size, world.local_size, host_memory_bytes()));
  if (!memory.empty()) {
    if (root) fmt::print(stderr, "dfccl-harness: {}\n", memory);
    return 2;
  }
  if (min_bw >= 0)  // nccl-tests' gate (bandwidth below 90 % of NCCL_TESTS_MIN_BW fails), per backend
    for (const auto& b : w.backends) o.expectations.push_back(fmt::format("{}:busbw_mean>={}", b, 0.9 * min_bw));
  return 0;
}

// The exit code of a run that went to its end, and its reason in one line ("" for kExitOk); docs/harness.md, "Exit
// codes". Deadlocks count only on preemptive backends: on blocking ones (host-blocking, nccl) they are results.
std::pair<int, std::string> outcome(const DriverResult& r) {
  const int64_t ran = r.completed + r.deadlocked + r.failed + r.stalled;
  if (ran == 0) return {kExitNothingRan, fmt::format("no trial ran ({} skipped)", r.skipped)};
  if (r.wrong > 0) return {kExitWrong, fmt::format("{} wrong elements", r.wrong)};
  if (r.failed + r.stalled + r.deadlocked_preemptive > 0)
    return {kExitTrialsFailed, fmt::format("{} trials failed, {} stalled, {} deadlocked on a preemptive backend",
                                           r.failed, r.stalled, r.deadlocked_preemptive)};
  return {kExitOk, ""};
}

// Rank 0, after the run: names the file, checks it against the --expect expressions, and returns the exit code:
// kExitExpectation when an expectation does not hold, else the run's outcome (a one-line reason on stderr).
int report(const Options& o, const DriverResult& result) {
  fmt::print("# Results: {}\n", o.out_path);
  const auto [code, reason] = outcome(result);
  if (code != kExitOk) fmt::print(stderr, "dfccl-harness: exit {}: {}\n", code, reason);
  if (o.expectations.empty()) return code;
  auto problems = check_layout(o.out_path);
  for (const auto& p : problems) fmt::print(stderr, "dfccl-harness: {}: layout: {}\n", o.out_path, p);
  std::vector<std::string> failures;
  if (problems.empty()) failures = check_expectations(read_counters(o.out_path), o.expectations);
  for (const auto& f : failures) fmt::print(stderr, "dfccl-harness: {}\n", f);
  if (!problems.empty() || !failures.empty()) return kExitExpectation;
  fmt::print("# Expectations hold: {}\n", fmt::join(o.expectations, ", "));
  return code;
}

// A run ended by a signal or a stalled rank (RunStopped): rank 0 writes the file's status; every rank exits with
// the code, without MPI calls (peers may be stopped or gone). Other ranks first give rank 0 up to 5 s to write,
// because their exit makes mpirun end the job; unless rank 0 is the one that stalled.
[[noreturn]] void exit_stopped_run(const RunStopped& e, int rank, Writer& writer, const std::string& out_path) {
  if (rank == 0) {
    try {
      writer.end_run(e.what());
    } catch (const std::exception& e2) {
      fmt::print(stderr, "dfccl-harness: writing {} failed: {}\n", out_path, e2.what());
    }
    fmt::print(stderr, "dfccl-harness: exit {}: {}; {} keeps every finished trial\n", e.exit_code, e.what(), out_path);
  } else {
    fmt::print(stderr, "dfccl-harness: rank {}: {}\n", rank, e.what());
    const auto& stalled = e.stalled_ranks;
    if (std::find(stalled.begin(), stalled.end(), 0) == stalled.end())
      for (int i = 0; i < 100; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fflush(nullptr);
  _exit(e.exit_code);
}

}  // namespace

// A fault workload's campaign (fault/fault.h), else the driver's.
DriverResult run_workload(const Workload& w, MpiWorld& world, Writer& writer) {
  if (w.kind != Workload::Kind::Fault) return run_campaign(w, world, writer);
#ifdef DFCCL_HARNESS_HAVE_DFCCL
  return fault::run_campaign(w, world, writer);
#else
  throw std::runtime_error("a fault workload needs the dfccl library, which this harness was built without");
#endif
}

int main(int argc, char** argv) {
#ifdef DFCCL_HARNESS_HAVE_DFCCL
  // A fault workload's DFCCL rank, started by an MPI rank of the run (no MPI here).
  if (argc >= 2 && std::string(argv[1]) == "--fault-child") return fault::child_main(argc - 2, argv + 2);
#endif
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // required on our GPU machines; never use multicast
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  install_signal_handlers();
  const int rank = world_rank();
  const bool root = rank == 0;

  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);

  Options o;
  if (auto rc = parse_options(argc, argv, root, o)) return finish(*rc);
  if (o.list_keys) {
    if (root)
      fmt::print("Workload keys (file: [section] key = value; command line: --section.key value):\n{}",
                 describe_settings());
    return finish(0);
  }

  Workload w;
  MpiWorld world;
  double min_bw = -1;
  if (int rc = prepare_run(o, root, w, world, min_bw); rc != 0) return finish(rc);

  MultiWriter writer;
  if (root) {
    writer.add(make_console_writer(ConsoleOptions{o.quiet, o.progress_s, w.trials, min_bw}));
    writer.add(make_hdf5_writer(o.out_path));
    if (!o.json_path.empty()) writer.add(make_json_writer(o.json_path, min_bw));
  }

  DriverResult result;
  try {
    writer.begin_run(collect_run_info(w, world, command_line));
    result = run_workload(w, world, writer);
    writer.end_run("complete");
  } catch (const RunStopped& e) {
    exit_stopped_run(e, rank, writer, o.out_path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "dfccl-harness: rank {}: {}\n", rank, e.what());
    try {
      writer.end_run(fmt::format("error: {}", e.what()));
    } catch (const std::exception& e2) {
      fmt::print(stderr, "dfccl-harness: writing {} failed: {}\n", o.out_path, e2.what());
    }
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);  // a rank may be inside an MPI call that can no longer complete
  }

  const int rc = root ? report(o, result) : 0;
  std::fflush(nullptr);
  world.free();
  if (result.stuck_worker) {
    // A worker thread is still blocked inside a backend: skip every destructor (CUDA, NCCL, dfccl teardown could
    // wait for it forever).
    int final_rc = rc;
    MPI_Allreduce(MPI_IN_PLACE, &final_rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    std::fflush(nullptr);
    _exit(final_rc);
  }
  return finish(rc);
}
