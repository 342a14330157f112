// The command line of dfccl-harness, through CLI11: the harness's own options and one option per row of the settings
// table (`--section.key`, its aliases and nccl-tests' letters), so that `--help` lists every setting. main parses it
// on every rank; only rank 0 prints what parse() returns. Also the checks main runs before anything else: the output
// paths and the one-host limit.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/workload.h"

namespace dfccl::harness {

struct CommandLine {
  std::string workload_path;  // empty: the built-in sweep (the settings' defaults and the command line)
  std::string out_path;       // empty: the default, <workload>-<UTC date and time>.h5 here
  std::string json_path;      // -J: nccl-tests-like JSON; empty: none
  bool overwrite = false, quiet = false, list_keys = false;
  double progress_s = 5;  // seconds between progress lines (0: after every case)
  std::vector<std::string> expectations;
  Overrides overrides;  // the settings given, as (full key, text), in the settings table's order
};

// What parse() decided: go on with `options`, or stop with `exit_code` after rank 0 prints `out` (stdout) and `err`
// (stderr).
struct ParseOutcome {
  std::optional<int> exit_code;  // nullopt: run
  std::string out, err;
  CommandLine options;
};

// Parses argv (argv[0] is the program). version: what --version prints. A bad value of -g, -t or -a,
// a negative --progress or an unknown option (with where the workload keys are listed) stops with exit code 2 and a
// message naming the option.
ParseOutcome parse_command_line(int argc, const char* const* argv, const std::string& version);

// The --help text.
std::string command_line_help();

// "" when `path` can be written by option `option`: its folder exists and is writable, it is not a folder, and it
// does not exist yet unless overwrite; else the problem, naming the option.
std::string output_path_problem(const std::string& option, const std::string& path, bool overwrite);

}  // namespace dfccl::harness
