// dfccl-harness: mpirun -np N dfccl-harness [--workload workloads/<name>.toml] [--section.key value ...] [--out FILE]
// (docs/harness.md). Parses the command line (config/command_line.h) and the workload (without one: an all_reduce
// sweep from the settings' defaults), checks what it will write and that the ranks share one host, bootstraps MPI
// and the groups, collects the run's metadata, runs the campaign (runtime/driver.cpp) and writes the console table,
// the HDF5 file and, with -J, a JSON file.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "backends/backend.h"
#include "config/command_line.h"
#include "config/settings.h"
#include "config/workload.h"
#include "harness_build_info.h"
#include "output/layout_check.h"
#include "output/writer.h"
#include "replay/replay.h"
#include "runtime/driver.h"
#include "runtime/mpi_env.h"

#ifdef DFCCL_HARNESS_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef DFCCL_HARNESS_HAVE_DFCCL
#include "dfccl.h"
#endif

using namespace dfccl::harness;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::string version_text(int v) {  // CUDA: 13000 -> 13.0
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string driver_text() {
  int v = 0;
  std::string s = cudaDriverGetVersion(&v) == cudaSuccess && v > 0 ? "CUDA " + version_text(v) : "none";
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (in && std::getline(in, line)) {
    auto pos = line.find("Kernel Module");
    if (pos != std::string::npos) {
      std::string rest = line.substr(pos + 13);
      auto b = rest.find_first_not_of(' ');
      auto e = rest.find(' ', b);
      s += " (kernel module " + rest.substr(b, e - b) + ")";
    }
  }
  return s;
}

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::string date_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

RunInfo collect_run_info(const Workload& w, const MpiWorld& world, const std::string& command_line) {
  RunInfo r;
  r.dfccl_version = DFCCL_HARNESS_VERSION;
  r.git_revision = DFCCL_HARNESS_GIT_REVISION;
  r.date_utc = date_utc();
  r.command_line = command_line;
  r.config_toml = w.resolved_toml;
  r.workload = w.name;
  r.workload_kind = name_of(w.kind, Workload::kKindNames);
  if (w.kind == Workload::Kind::Replay) r.replay = replay::Replay(w).info();
  r.workload_description = w.description;
  r.workload_source = w.source;
  r.nranks = world.size;
  r.layout = fmt::format("tp={} dp={} pp={}", world.layout.tp, world.layout.dp, world.layout.pp);
  r.backends = w.backends;

  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  std::string gpu = "no GPU";
  int n = gpu_count();
  if (n > 0) {
    int dev = world.local_rank % n;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
      gpu = fmt::format("device {} {} ({:04x}:{:02x}:{:02x})", dev, prop.name, prop.pciDomainID, prop.pciBusID,
                        prop.pciDeviceID);
  }
  auto hosts = gather_strings(host, MPI_COMM_WORLD);
  auto gpus = gather_strings(fmt::format("{}: {}", host, gpu), MPI_COMM_WORLD);
  std::set<std::string> unique;
  for (const auto& h : hosts)
    if (unique.insert(h).second) r.hosts.push_back(h);
  r.gpus = gpus;

  r.driver_version = driver_text();
  int rt = 0;
  r.cuda_runtime_version = cudaRuntimeGetVersion(&rt) == cudaSuccess ? version_text(rt) : "unknown";
  r.cuda_toolkit_version = version_text(CUDART_VERSION);
#ifdef DFCCL_HARNESS_HAVE_NCCL
  int nv = 0;
  ncclGetVersion(&nv);
  r.nccl_version = nv >= 20900 ? fmt::format("{}.{}.{}", nv / 10000, (nv % 10000) / 100, nv % 100)
                               : fmt::format("{}.{}.{}", nv / 1000, (nv % 1000) / 100, nv % 100);
#else
  r.nccl_version = "not built";
#endif
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  r.mpi_version = fmt::format("MPI {}.{}", major, minor);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int liblen = 0;
  MPI_Get_library_version(lib, &liblen);
  r.mpi_library = std::string(lib, static_cast<size_t>(liblen));
  while (!r.mpi_library.empty() && (r.mpi_library.back() == '\n' || r.mpi_library.back() == '\0'))
    r.mpi_library.pop_back();
  return r;
}

std::string resolve_auto_backends(const std::vector<std::string>& backends) {
  std::vector<std::string> out;
  bool gpus = gpu_count() > 0;
  for (const auto& b : backends) {
    if (b != "auto") {
      out.push_back(b);
      continue;
    }
    if (gpus) {
      if (backend_compiled("dfccl")) out.push_back("dfccl");
      if (backend_compiled("nccl")) out.push_back("nccl");
    }
    if (out.empty()) out.push_back("host");
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

// Rank 0, before the run: the default --out (results/<workload>-<UTC date-time>.h5, its folder created), then --out
// and -J must be writable and new (or --overwrite). Throws WorkloadError naming the option.
void check_outputs(Options& o, const Workload& w) {
  if (o.out_path.empty()) {
    std::time_t t = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", std::gmtime(&t));
    o.out_path = fmt::format("results/{}-{}.h5", w.name, stamp);
    std::error_code ec;
    std::filesystem::create_directories("results", ec);
  }
  if (std::string p = output_path_problem("--out", o.out_path, o.overwrite); !p.empty()) throw WorkloadError(p);
  if (!o.json_path.empty()) {
    if (o.json_path == o.out_path) throw WorkloadError(fmt::format("-J {}: the same file as --out", o.json_path));
    if (std::string p = output_path_problem("-J", o.json_path, o.overwrite); !p.empty()) throw WorkloadError(p);
  }
}

// The one-host limit, checked on every rank before any communicator exists: "" or the refusal (on every rank).
std::string check_one_host() {
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  return bcast_string(multi_host_problem(gather_strings(host, MPI_COMM_WORLD)), 0, MPI_COMM_WORLD);
}

int max_over_ranks(int rc) {
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return rc;
}

// Everything refused before anything runs, on every rank alike: NCCL_TESTS_MIN_BW, the workload, the outputs (rank
// 0), the one-host limit, the world's layout. Returns 0, or the exit code (rank 0 printed why). Then
// NCCL_TESTS_MIN_BW becomes one --expect per backend.
int prepare_run(Options& o, bool root, Workload& w, MpiWorld& world, double& min_bw) {
  int rc = 0;
  try {
    min_bw = nccl_tests_min_bw();
    w = read_workload(o);
    if (root) check_outputs(o, w);
  } catch (const WorkloadError& e) {
    if (root) fmt::print(stderr, "dfccl-harness: {}\n", e.what());
    rc = 2;
  }
  if (max_over_ranks(rc) != 0) return 2;
  if (std::string problem = check_one_host(); !problem.empty()) {
    if (root) fmt::print(stderr, "dfccl-harness: {}\n", problem);
    return 2;
  }
  try {
    world = MpiWorld::create(w.tp, w.dp, w.pp);
    replay::check_world(w, world.size);
  } catch (const WorkloadError& e) {
    if (root) fmt::print(stderr, "dfccl-harness: {}\n", e.what());
    return 2;
  }
  if (min_bw >= 0)  // nccl-tests' gate (bandwidth below 90 % of NCCL_TESTS_MIN_BW fails), per backend
    for (const auto& b : w.backends) o.expectations.push_back(fmt::format("{}:busbw_mean>={}", b, 0.9 * min_bw));
  return 0;
}

// Rank 0, after the run: names the file and checks it against the --expect expressions. Returns the exit code.
int report(const Options& o, const DriverResult& result) {
  int rc = 0;
  fmt::print("# Results: {}\n", o.out_path);
  if (result.wrong > 0) rc = 3;
  if (o.expectations.empty()) return rc;
  auto problems = check_layout(o.out_path);
  for (const auto& p : problems) fmt::print(stderr, "dfccl-harness: {}: layout: {}\n", o.out_path, p);
  std::vector<std::string> failures;
  if (problems.empty()) failures = check_expectations(read_counters(o.out_path), o.expectations);
  for (const auto& f : failures) fmt::print(stderr, "dfccl-harness: {}\n", f);
  if (!problems.empty() || !failures.empty()) return 1;
  fmt::print("# Expectations hold: {}\n", fmt::join(o.expectations, ", "));
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // required on our GPU machines; never use multicast
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
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

  RunInfo info = collect_run_info(w, world, command_line);
  MultiWriter writer;
  if (root) {
    writer.add(make_console_writer(ConsoleOptions{o.quiet, o.progress_s, w.trials, min_bw}));
    writer.add(make_hdf5_writer(o.out_path));
    if (!o.json_path.empty()) writer.add(make_json_writer(o.json_path, min_bw));
  }

  DriverResult result;
  try {
    writer.begin_run(info);
    result = run_campaign(w, world, writer);
    writer.end_run("complete");
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
