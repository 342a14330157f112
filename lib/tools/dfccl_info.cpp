// dfccl-info: the settings DFCCL reads (every DFCCL_* variable: default, accepted values, current value) and the
// build's limits. Without --markdown it checks the environment as communicator init does (values, the rules between
// them, misspelt DFCCL_* names) and exits 1, naming each problem on stderr, where init would refuse or ignore one.
// `dfccl-info --markdown` writes docs/environment.md (a test checks that the committed page is its output).
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
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

// Why the variable's value in the environment (or its deprecated alias's) is refused ("" when it is accepted).
std::string value_error(const dfccl::EnvVar& v) {
  try {
    for (const dfccl::Exec exec : {dfccl::Exec::Cuda, dfccl::Exec::Host}) {
      if (v.choices) dfccl::env_str(v.name, exec);
      else dfccl::env_int(v.name, exec);
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// The variable's default for an executor, or "-" for one that the executor never reads (its effect begins with the
// other executor's name).
std::string default_for(const dfccl::EnvVar& v, dfccl::Exec exec) {
  const std::string_view d = v.description;
  if (d.rfind(exec == dfccl::Exec::Host ? "CUDA executor" : "host executor", 0) == 0) return "-";
  return dfccl::env_default(v, exec);
}

void print_markdown() {
  fmt::print(
      "# Environment variables\n\n"
      "Every `DFCCL_*` variable: its default, the values it accepts and its effect. The table is "
      "`lib/src/settings/env.cpp`\n"
      "(the only place they are defined); this page is `build/bin/dfccl-info --markdown`, and `dfccl-info` prints the\n"
      "same table with the values set in the current environment and checks them as init does (exit status 1, each\n"
      "problem named on stderr). A variable applies to both executors with a default for each (`-`: that executor\n"
      "never reads it). Every value is checked when a communicator is created, also those that only a later call or\n"
      "the other executor uses: integers are decimal, and a value outside its range, or not a number, fails the init\n"
      "with `dfcclInvalidArgument` and a message naming the variable. An engine's settings are read when it is\n"
      "created (by the first communicator of its device), a communicator's (timeouts of init, destroy and abort,\n"
      "network and hierarchy) at its init: abort and destroy use the values read then. A `DFCCL_*` variable that is\n"
      "not in the table is reported once per process on stderr with the closest known name; one that only the CUDA\n"
      "executor reads, once when a host-executor engine is created while it is set. All ranks of a communicator must\n"
      "agree on the transport settings (blocks, slot bytes, slots, lanes, channel size): init checks it and names\n"
      "the mismatch.\n\n"
      "| variable | CUDA executor | host executor | accepted | effect |\n|---|---|---|---|---|\n");
  auto cell = [](const std::string& d) { return d == "-" ? d : fmt::format("`{}`", d); };
  for (const auto& v : dfccl::env_table())
    fmt::print("| `{}` | {} | {} | `{}` | {} |\n", v.name, cell(default_for(v, dfccl::Exec::Cuda)),
               cell(default_for(v, dfccl::Exec::Host)), accepted(v), v.description);
  fmt::print(
      "\nDeprecated names (since 0.2.0), read until 0.3.0 by the host executor where the new name is unset (a warning\n"
      "names the new one; where both are set the old one is ignored):\n\n");
  for (const auto& v : dfccl::env_table())
    if (v.host_alias) fmt::print("- `{}`: `{}`\n", v.host_alias, v.name);
  fmt::print(
      "\nThe harness reads its own settings from workload files and the command line (`docs/harness.md`); it sets\n"
      "`NCCL_NVLS_ENABLE=0` when unset (required on our GPU machines).\n\n"
      "Build options for measurements (pass them in both CMAKE_CUDA_FLAGS and CMAKE_CXX_FLAGS):\n"
      "`-DDFCCL_PROFILE=1` (time per daemon phase in `dfcclStats_t.profileNs`; the graph path's phases, medians\n"
      "printed when an engine ends, with `DFCCL_DEBUG=INFO`), `-DDFCCL_COPY_UNROLL=N` (16-byte loads in flight per\n"
      "thread, default 4), `-DDFCCL_MAX_THREADS=1024` (allows DFCCL_THREADS up to 1024).\n");
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
    const char* old = v.host_alias ? std::getenv(v.host_alias) : nullptr;
    std::string note;
    if (cur || old) {
      const std::string error = value_error(v);
      for (const auto& [name, value] : {std::pair{v.name, cur}, std::pair{v.host_alias, old}})
        if (value)
          note += fmt::format(" [set: {}{}{}]", name == v.name ? "" : std::string(name) + "=", value,
                              error.find(name) != std::string::npos ? ": INVALID" : "");
      if (!error.empty()) problems.push_back(error);
    }
    const std::string cuda = default_for(v, dfccl::Exec::Cuda), host = default_for(v, dfccl::Exec::Host);
    fmt::print("  {:<28} default {:<22} accepts {:<22} {}{}\n", v.name,
               cuda == host ? cuda : fmt::format("{} (host {})", cuda, host), accepted(v), v.description, note);
  }
  dfccl::env_warn_deprecated();  // on stderr; accepted, as init accepts them
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
