// dfccl-harness: mpirun -np N dfccl-harness --workload workloads/<name>.toml [--key value ...] --out results/<name>.h5
// (docs/harness.md). Parses the command line and the workload, bootstraps MPI and the groups, collects the run's
// metadata, runs the campaign (runtime/driver.cpp) and writes the console table and the HDF5 file.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <set>

#include "backends/backend.h"
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

using namespace dfccl::harness;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// `--key value`, `--key=value`, `-b value` -> overrides. Throws WorkloadError naming the bad argument.
Overrides parse_extras(const std::vector<std::string>& extras) {
  Overrides out;
  for (size_t i = 0; i < extras.size(); ++i) {
    std::string a = extras[i];
    if (!a.starts_with("-"))
      throw WorkloadError(fmt::format("command line: unexpected argument '{}' (options are --key value)", a));
    std::string key = a.substr(a.starts_with("--") ? 2 : 1);
    std::string value;
    if (size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (i + 1 >= extras.size()) throw WorkloadError(fmt::format("command line: '{}' needs a value", a));
      value = extras[++i];
    }
    out.emplace_back(key, value);
  }
  return out;
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

struct Options {
  std::string workload_path, out_path;
  bool quiet = false, list_keys = false;
  std::vector<std::string> expectations;
  std::vector<std::string> extras;  // --section.key value ...: the workload overrides
};

// Parses the command line. Returns the exit code when the process stops here (--help, a bad option; rank 0 prints
// why), else nullopt.
std::optional<int> parse_options(int argc, char** argv, bool root, Options& o) {
  CLI::App app{"dfccl-harness: runs a workload on dfccl, nccl or dfccl's host executor under mpirun and writes HDF5.\n"
               "Every workload key can be overridden as --section.key value (see --list-keys)."};
  app.add_option("--workload", o.workload_path, "workload file (workloads/<name>.toml)");
  app.add_option("--out", o.out_path, "HDF5 file to write (default: results/<workload>.h5)");
  app.add_flag("--quiet", o.quiet, "no per-trial lines and no progress line");
  app.add_flag("--list-keys", o.list_keys, "print every workload key with its default and meaning");
  app.add_option("--expect", o.expectations,
                 "after the run, read the file back and check '[backend:]counter OP n' (counters: trials completed "
                 "deadlocked failed skipped wrong rows); exit 1 if one does not hold");
  app.allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = root ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    if (!root && e.get_exit_code() != 0) rc = 2;
    return rc == 0 ? 0 : 2;
  }
  o.extras = app.remaining();
  return std::nullopt;
}

// The workload with its overrides; run.backend = auto becomes the backends this machine has. Throws WorkloadError.
Workload read_workload(const Options& o) {
  if (o.workload_path.empty()) throw WorkloadError("--workload: required (a file such as workloads/sweep.toml)");
  Overrides overrides = parse_extras(o.extras);
  Workload w = load_workload(o.workload_path, overrides);
  if (std::find(w.backends.begin(), w.backends.end(), "auto") != w.backends.end()) {
    overrides.emplace_back("run.backend", resolve_auto_backends(w.backends));
    w = load_workload(o.workload_path, overrides);
  }
  return w;
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
  try {
    w = read_workload(o);
    if (o.out_path.empty()) o.out_path = "results/" + w.name + ".h5";
    world = MpiWorld::create(w.tp, w.dp, w.pp);
    replay::check_world(w, world.size);
  } catch (const WorkloadError& e) {
    if (root) fmt::print(stderr, "dfccl-harness: {}\n", e.what());
    return finish(2);
  }

  RunInfo info = collect_run_info(w, world, command_line);
  MultiWriter writer;
  if (root) {
    writer.add(make_console_writer(o.quiet));
    writer.add(make_hdf5_writer(o.out_path));
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
