// dfccl-info: the settings DFCCL reads (every DFCCL_* variable: default, accepted values, current value) and the
// build's limits. Without --markdown it checks the environment as communicator init does (values, the rules between
// them, misspelt DFCCL_* names) and exits 1, naming each problem on stderr, where init would refuse or ignore one.
// `dfccl-info --markdown` writes docs/environment.md (a test checks that the committed page is its output).
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/types.h"
#include "dfccl.h"
#include "net/transport.h"
#include "settings/env.h"
#include "settings/env_warn.h"
#include "settings/settings.h"

namespace {

std::string accepted(const dfccl::EnvVar& v) {
  return v.choices ? std::string(v.choices) : fmt::format("{}..{}", v.lo, v.hi);
}

// Why the variable's value in the environment is refused ("" when it is accepted).
std::string value_error(const dfccl::EnvVar& v) {
  try {
    if (v.choices) dfccl::env_str(v.name);
    else dfccl::env_int(v.name);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

void print_markdown() {
  fmt::print(
      "# Environment variables\n\n"
      "Every `DFCCL_*` variable: its default, the values it accepts and its effect. The table is "
      "`lib/src/settings/env.cpp`\n"
      "(the only place they are defined); this page is `build/bin/dfccl-info --markdown`, and `dfccl-info` prints the\n"
      "same table with the values set in the current environment and checks them as init does (exit status 1, each\n"
      "problem named on stderr). Every value is checked when a communicator is created, also those that only a later\n"
      "call or the other executor uses: integers are decimal, and a value outside its range, or not a number, fails\n"
      "the init with `dfcclInvalidArgument` and a message naming the variable. An engine's settings are read when it\n"
      "is created (by the first communicator of its device), a communicator's (timeouts of init, destroy and abort,\n"
      "network and hierarchy) at its init: abort and destroy use the values read then. A `DFCCL_*` variable that is\n"
      "not in the table is reported once per process on stderr with the closest known name; one that only the CUDA\n"
      "executor reads (its effect begins with \"CUDA executor\"), once when a host-executor engine is created while "
      "it\n"
      "is set. All ranks of a communicator must agree on the transport settings (blocks, slot bytes, slots, lanes,\n"
      "channel size): init checks it and names the mismatch.\n\n"
      "| variable | default | accepted | effect |\n|---|---|---|---|\n");
  for (const auto& v : dfccl::env_table())
    fmt::print("| `{}` | `{}` | `{}` | {} |\n", v.name, v.default_value, accepted(v), v.description);
  fmt::print(
      "\nThe harness reads its own settings from workload files and the command line (`docs/harness.md`); it sets\n"
      "`NCCL_NVLS_ENABLE=0` when unset (required on our GPU machines).\n\n"
      "Build options for measurements (pass them in both CMAKE_CUDA_FLAGS and CMAKE_CXX_FLAGS):\n"
      "`-DDFCCL_PROFILE=1` (time per daemon phase in `dfcclStats_t.profileNs`), `-DDFCCL_COPY_UNROLL=N` (16-byte\n"
      "loads in flight per thread, default 4), `-DDFCCL_MAX_THREADS=1024` (allows DFCCL_THREADS up to 1024).\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--markdown") == 0) {
    print_markdown();
    return 0;
  }
  if (argc > 1) {
    fmt::print(stderr, "usage: dfccl-info [--markdown]\n");
    return 2;
  }
  fmt::print("DFCCL {}.{}.{}\n\nEnvironment (docs/environment.md):\n", DFCCL_MAJOR, DFCCL_MINOR, DFCCL_PATCH);
  std::vector<std::string> problems;
  for (const auto& v : dfccl::env_table()) {
    const char* cur = std::getenv(v.name);
    std::string note;
    if (cur) {
      const std::string error = value_error(v);
      note = error.empty() ? fmt::format(" [set: {}]", cur) : fmt::format(" [set: {}: INVALID]", cur);
      if (!error.empty()) problems.push_back(error);
    }
    fmt::print("  {:<28} default {:<10} accepts {:<22} {}{}\n", v.name, v.default_value, accepted(v), v.description,
               note);
  }
  for (const std::string& name : dfccl::env_unknown_names())
    problems.push_back(fmt::format("environment variable {} is not a DFCCL setting (did you mean {}?)", name,
                                   dfccl::env_closest(name)));
  if (problems.empty()) {  // the rules between variables, as communicator init checks them
    try {
      dfccl::check_all_settings();
    } catch (const std::exception& e) {
      problems.push_back(e.what());
    }
  }
  fmt::print("\nLimits: {} outstanding collectives per device, {} streams with outstanding collectives per device, "
             "{} daemon blocks, {} communicators per device, {} persistent ids per communicator\n",
             dfccl::core::kMaxSlots, dfccl::core::kMaxRings, dfccl::core::kMaxBlocks, dfccl::core::kMaxComms,
             DFCCL_MAX_PERSISTENT_IDS);
  fmt::print("\nBuild features: network transport {} (docs/net-transport.md)\n", dfccl::net::transport_description());
  if (problems.empty()) return 0;
  fmt::print(stderr, "\ndfccl-info: the environment has settings that communicator init would refuse or ignore:\n");
  for (const std::string& p : problems) fmt::print(stderr, "  {}\n", p);
  return 1;
}
