#include "command_line.h"

#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "config/settings.h"

namespace dfccl::harness {
namespace {

const char* type_name(Type t) {
  switch (t) {
    case Type::Int: return "INT";
    case Type::Float: return "NUMBER";
    case Type::Bool: return "[BOOL]";
    case Type::String: return "TEXT";
    case Type::Bytes: return "SIZE";
    case Type::StringList: return "LIST";
    case Type::Weights: return "WEIGHTS";
  }
  return "VALUE";
}

// "--section.key,--alias,-x": the row's option names for CLI11.
std::string option_names(const Setting& s) {
  std::string names = fmt::format("--{}", s.key);
  for (const auto& [alias, key] : setting_aliases())
    if (key == s.key) names += fmt::format(",{}{}", alias.size() == 1 ? "-" : "--", alias);
  return names;
}

// The parser, bound to where it stores what it parses.
struct Parser {
  CLI::App app{
      "dfccl-harness: runs a workload (by default an all_reduce sweep, as nccl-tests) on dfccl, NCCL or "
      "dfccl's host executor under mpirun, prints nccl-tests' table and writes one HDF5 file.\n"
      "  mpirun -np 2 dfccl-harness -b 8 -e 1G -f 2 --backend dfccl,nccl\n"
      "  mpirun -np 4 dfccl-harness --workload workloads/stress.toml --trials 100 --out stress.h5\n"
      "Every workload setting is an option (--section.key VALUE; a workload file sets the same keys as "
      "[section] key = value, and the command line wins). Ranks may span hosts (mpirun --host ...): each uses the GPU "
      "of its rank on its host.",
      "dfccl-harness"};
  CommandLine cl;
  std::vector<std::string> values;  // per settings row: its text, when given
  std::vector<CLI::Option*> opts;   // per settings row
  int ngpus = 1, nthreads = 1, average = 3;
  // nccl-tests' letters whose other values the harness has no meaning for (finish() refuses them).
  int check_count = 1;
  CLI::Option* check_opt = nullptr;  // -c
  int graph_launches = 0, agg_iters = 1, blocking = 0, cputime = 0, local_register = 0, run_cycles = 1;

  Parser() {
    app.get_formatter()->column_width(44);
    add_harness_options();
    add_refused_letters();
    add_settings();
  }

  void add_harness_options() {
    const char* g = "Harness";
    app.add_option("--workload", cl.workload_path,
                   "workload file (workloads/<name>.toml); default: an all_reduce sweep "
                   "from the settings below")
        ->group(g);
    app.add_option(
           "--out", cl.out_path,
           "HDF5 file to write; its folder must exist (default: <workload>-<UTC date-time>.h5 in the current folder)")
        ->group(g);
    app.add_flag("--overwrite", cl.overwrite, "replace an existing --out or -J file (else it is refused)")->group(g);
    app.add_option("-J,--output_file,--json", cl.json_path,
                   "also write the results as JSON (nccl-tests -J); its folder must exist")
        ->group(g);
    app.add_flag("--quiet", cl.quiet, "no per-trial lines and no progress line")->group(g);
    app.add_option("--progress", cl.progress_s,
                   "seconds between progress lines on stderr (case k/N, ETA); 0: after every case")
        ->capture_default_str()
        ->group(g);
    app.add_flag("--list-keys", cl.list_keys, "print every workload key with its default and meaning")->group(g);
    app.add_option("--expect", cl.expectations,
                   "after the run, read the file back and check '[backend:][collective:]counter OP value' "
                   "(counters: trials completed deadlocked failed skipped wrong rows busbw_mean); exit 1 if one "
                   "does not hold. Repeatable")
        ->group(g);
  }

  // nccl-tests' letters for what the harness does one way only: accepted with that value, refused otherwise.
  void add_refused_letters() {
    const char* g = "nccl-tests letters the harness accepts with one value (-c: 0 or 1)";
    app.add_option("-g,--ngpus", ngpus, "GPUs per process: 1 only (one rank per GPU: mpirun -np <GPUs>)")
        ->capture_default_str()
        ->group(g);
    app.add_option("-t,--nthreads", nthreads, "threads per process: 1 only (one rank per GPU: mpirun -np <GPUs>)")
        ->capture_default_str()
        ->group(g);
    app.add_option("-a,--average", average,
                   "how ranks' times are combined: 3 only (the slowest rank, MAX over ranks; nccl-tests' 0 rank 0, "
                   "1 mean, 2 min are not implemented)")
        ->capture_default_str()
        ->group(g);
    check_opt =
        app.add_option("-c", check_count,
                       "nccl-tests' check count: 1 checks one untimed iteration per trial (run.check true), 0 none; "
                       "more than 1 is refused")
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
            ->group(g);
    // nccl-tests' options that take one value here (any other is refused by name after parsing).
    const auto one_value = [&](const char* names, int& value, const char* help) {
      app.add_option(names, value, help)
          ->capture_default_str()
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
          ->group(g);
    };
    one_value("-G,--cudagraph", graph_launches,
              "CUDA graph launches per timing span of the graph backends (--backend nccl-graph,dfccl-graph): "
              "N > 0 sets run.graph_replays N; 0, nccl-tests' default, leaves it");
    one_value("-m,--agg_iters", agg_iters, "collectives aggregated per iteration: 1 only");
    one_value("-z,--blocking", blocking, "host wait after each collective: 0 only");
    one_value("-C,--report_cputime", cputime, "report CPU time instead of GPU time: 0 only");
    one_value("-R,--local_register", local_register, "buffer registration: 0 only");
    one_value("-N,--run_cycles", run_cycles, "cycles of the whole run: 1 only (--trials repeats each case)");
  }

  void add_settings() {
    const auto rows = settings();
    values.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const Setting& s = rows[i];
      CLI::Option* o = app.add_option(option_names(s), values[i], fmt::format("{} [{}]", s.help, s.default_toml));
      o->type_name(type_name(s.type))->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      if (s.type == Type::Bool) o->expected(0, 1);  // --run.check alone means true
      o->group("Workload settings ([section] key in a workload file; [default])");
      opts.push_back(o);
    }
  }

  // nccl-tests' letters given a value the harness has no meaning for: the problem, naming the option; else "".
  std::string refused_letter() const {
    if (check_count < 0) return fmt::format("-c {}: a count of checked iterations is 0 or more", check_count);
    if (check_count > 1)
      return fmt::format("-c {}: the harness checks one untimed iteration per trial (-c 1) or none (-c 0); more "
                         "checked iterations are not implemented (--trials repeats the case, each trial checked)",
                         check_count);
    if (graph_launches < 0)
      return fmt::format("-G/--cudagraph {}: graph launches per timing span are 1 or more (0: unchanged)",
                         graph_launches);
    if (agg_iters != 1)
      return fmt::format("-m/--agg_iters {}: each iteration runs one collective per case; aggregating several into one "
                         "NCCL group is not implemented",
                         agg_iters);
    if (blocking != 0)
      return fmt::format("-z/--blocking {}: the harness does not wait on the host after each collective (dfccl: "
                         "--completion host completes each one with dfcclSynchronize)",
                         blocking);
    if (cputime != 0)
      return fmt::format("-C/--report_cputime {}: the table reports GPU (or host executor) time only; the e2e column "
                         "is the host's time from submission to completion",
                         cputime);
    if (local_register != 0)
      return fmt::format("-R/--local_register {}: buffer registration is not implemented", local_register);
    if (run_cycles != 1)
      return fmt::format("-N/--run_cycles {}: the run is one cycle; --trials N repeats each case N times in it",
                         run_cycles);
    return "";
  }

  // After a successful parse: the harness's own values, the refused letters, then the overrides in table order.
  std::string finish() {
    if (!(cl.progress_s >= 0) || !std::isfinite(cl.progress_s))
      return fmt::format("--progress {}: the seconds between progress lines must be 0 or more", cl.progress_s);
    if (ngpus != 1)
      return fmt::format("-g/--ngpus {}: one GPU per process only; start one rank per GPU (mpirun -np <GPUs>)", ngpus);
    if (nthreads != 1)
      return fmt::format("-t/--nthreads {}: one thread per process only; start one rank per GPU (mpirun -np <GPUs>)",
                         nthreads);
    if (average != 3)
      return fmt::format("-a/--average {}: the harness reports the slowest rank's time (-a 3, MAX over ranks); 0, 1 "
                         "and 2 are not implemented",
                         average);
    if (std::string problem = refused_letter(); !problem.empty()) return problem;
    const auto rows = settings();
    for (size_t i = 0; i < rows.size(); ++i) {
      if (opts[i]->count() == 0) continue;
      std::string v = values[i];
      if (rows[i].type == Type::Bool && v.empty()) v = "true";
      if (v == "all" && (rows[i].key == std::string_view("data.dtype") || rows[i].key == std::string_view("data.op")))
        return rows[i].key == std::string_view("data.dtype")
                   ? "-d/--datatype all: one datatype per run (nccl-tests' 'all' loops over them); run once per "
                     "type (-d float32, -d int32, ...)"
                   : "-o/--op all: one operator per run (nccl-tests' 'all' loops over them); run once per operator "
                     "(-o sum, -o max, ...)";
      cl.overrides.emplace_back(rows[i].key, v);
    }
    if (check_opt->count() > 0) cl.overrides.emplace_back("run.check", check_count == 0 ? "false" : "true");
    // Graphs are backends here (nccl-graph, dfccl-graph); -G gives their launches per span.
    if (graph_launches > 0) cl.overrides.emplace_back("run.graph_replays", std::to_string(graph_launches));
    return "";
  }
};

}  // namespace

ParseOutcome parse_command_line(int argc, const char* const* argv, const std::string& version) {
  Parser p;
  p.app.set_version_flag("--version", version);
  ParseOutcome r;
  std::ostringstream out, err;
  try {
    p.app.parse(argc, argv);
  } catch (const CLI::ExtrasError& e) {
    // An unknown option is most often a misspelt workload key (--section.key): say where the keys are listed.
    std::string unknown;
    for (const std::string& arg : p.app.remaining())
      if (unknown.empty() && arg.size() > 1 && arg[0] == '-') unknown = arg;
    r.exit_code = 2;
    r.err = unknown.empty() ? fmt::format("{} (dfccl-harness --help lists the options)\n", e.what())
                            : fmt::format("unknown option {} (dfccl-harness --list-keys lists the workload keys, "
                                          "--help every option)\n",
                                          unknown);
    return r;
  } catch (const CLI::ParseError& e) {
    const int rc = p.app.exit(e, out, err);
    r.exit_code = rc == 0 ? 0 : 2;
    r.out = out.str();
    r.err = err.str();
    return r;
  }
  if (std::string problem = p.finish(); !problem.empty()) {
    r.exit_code = 2;
    r.err = problem + "\n";
    return r;
  }
  r.options = p.cl;
  return r;
}

std::string command_line_help() {
  Parser p;
  return p.app.help();
}

std::string output_path_problem(const std::string& option, const std::string& path, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) return fmt::format("{} {}: the folder {} does not exist", option, path, dir.string());
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return fmt::format("{} {}: the folder {} is not writable", option, path, dir.string());
  if (fs::is_directory(p, ec)) return fmt::format("{} {}: is a folder, not a file", option, path);
  if (fs::exists(p, ec) && !overwrite)
    return fmt::format("{} {}: the file exists (give --overwrite to replace it, or another {})", option, path, option);
  return "";
}

}  // namespace dfccl::harness
