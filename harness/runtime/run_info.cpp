#include "run_info.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mpi.h>

#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "harness_build_info.h"
#include "plan/replay.h"
#include "runtime/hosts.h"

#ifdef DFCCL_HARNESS_HAVE_NCCL
#include <nccl.h>
#endif

extern char** environ;

namespace dfccl::harness {
namespace {

std::string cuda_version_text(int v) {  // CUDA: 13000 -> 13.0
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string date_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// "580.95.05" from /proc/driver/nvidia/version, "none" without the file or a version in it.
std::string kernel_module_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!in || !std::getline(in, line)) return "none";
  std::string v = nvidia_module_version(line);
  return v.empty() ? "none" : v;
}

std::string cuda_driver_version() {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess && v > 0 ? cuda_version_text(v) : "none";
}

std::string nccl_version() {
#ifdef DFCCL_HARNESS_HAVE_NCCL
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  return nccl_version_text(code);
#else
  return "not built";
#endif
}

// This rank's recorded variables as "NAME=value" lines (values with a newline are cut at it).
std::string recorded_environment() {
  std::string out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || !recorded_variable(entry.substr(0, eq))) continue;
    out += entry.substr(0, entry.find('\n')) + "\n";
  }
  return out;
}

// Every rank's recorded variables (rank 0; empty elsewhere), by rank and then name.
std::vector<EnvEntry> gather_environment() {
  std::vector<EnvEntry> out;
  const auto all = gather_strings(recorded_environment(), MPI_COMM_WORLD);
  for (size_t r = 0; r < all.size(); ++r) {
    std::istringstream lines(all[r]);
    std::set<std::pair<std::string, std::string>> sorted;
    for (std::string line; std::getline(lines, line);) {
      const size_t eq = line.find('=');
      sorted.emplace(line.substr(0, eq), line.substr(eq + 1));
    }
    for (const auto& [name, value] : sorted) out.push_back(EnvEntry{static_cast<int64_t>(r), name, value});
  }
  return out;
}

// "host: device N name (pci id)" or "host: no GPU".
std::string gpu_text(const std::string& host, int local_rank) {
  const int n = gpu_count();
  if (n <= 0) return host + ": no GPU";
  const int dev = local_rank % n;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return host + ": no GPU";
  return fmt::format("{}: device {} {} ({:04x}:{:02x}:{:02x})", host, dev, prop.name, prop.pciDomainID, prop.pciBusID,
                     prop.pciDeviceID);
}

void add_world(RunInfo& r, const MpiWorld& world) {
  r.nranks = world.size;
  r.layout = fmt::format("tp={} dp={} pp={}", world.layout.tp, world.layout.dp, world.layout.pp);
  r.rank_hosts = world.hosts;
  r.hosts = unique_hosts(world.hosts);
  r.gpus = gather_strings(gpu_text(world.hosts.at(static_cast<size_t>(world.rank)), world.local_rank), MPI_COMM_WORLD);
}

void add_versions(RunInfo& r) {
  r.driver_version = kernel_module_version();
  r.cuda_driver_version = cuda_driver_version();
  int rt = 0;
  r.cuda_runtime_version = cudaRuntimeGetVersion(&rt) == cudaSuccess ? cuda_version_text(rt) : "unknown";
  r.cuda_toolkit_version = cuda_version_text(CUDART_VERSION);
  r.nccl_version = nccl_version();
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  r.mpi_version = fmt::format("MPI {}.{}", major, minor);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int liblen = 0;
  MPI_Get_library_version(lib, &liblen);
  r.mpi_library = std::string(lib, static_cast<size_t>(liblen));
  while (!r.mpi_library.empty() && (r.mpi_library.back() == '\n' || r.mpi_library.back() == '\0'))
    r.mpi_library.pop_back();
}

}  // namespace

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
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
  r.in_place = name_of(w.in_place, kInPlaceNames);
  if (w.kind == Workload::Kind::Replay) r.replay = replay::Replay(w).info();
  r.workload_description = w.description;
  r.workload_source = w.source;
  r.backends = w.backends;
  add_world(r, world);
  add_versions(r);
  r.environment = gather_environment();
  r.engine_settings =
      "per backend: the attribute engine of /backends/<name> (dfccl backends: dfcclCommGetInfo of rank 0's first "
      "communicator: blocks, threads, slots, lanes, connection memory, transport to its neighbours); every rank's "
      "ring hops and their transports: the table hops of /backends/<name>";
  return r;
}

}  // namespace dfccl::harness
