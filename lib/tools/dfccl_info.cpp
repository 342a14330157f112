// dfccl-info: the settings DFCCL reads (every DFCCL_* variable: default, accepted values, current value) and the
// build's limits. `dfccl-info --markdown` writes docs/environment.md (a test checks that the committed page is its
// output).
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/types.h"
#include "dfccl.h"
#include "net/transport.h"
#include "settings/env.h"

namespace {

std::string accepted(const dfccl::EnvVar& v) {
  return v.choices ? std::string(v.choices) : fmt::format("{}..{}", v.lo, v.hi);
}

void print_markdown() {
  fmt::print(
      "# Environment variables\n\n"
      "Every `DFCCL_*` variable: its default, the values it accepts and its effect. The table is "
      "`lib/src/settings/env.cpp`\n"
      "(the only place they are defined); this page is `build/bin/dfccl-info --markdown`, and `dfccl-info` prints the\n"
      "same table with the values set in the current environment. Every value is checked when a communicator is\n"
      "created, also those that only a later call or the other executor uses: integers are decimal, and a value\n"
      "outside its range, or not a number, fails the init with `dfcclInvalidArgument` and a message naming the\n"
      "variable. An engine's settings are read when it is created (by the first communicator of its device), a\n"
      "communicator's (timeouts of init, destroy and abort, network and hierarchy) at its init: abort and destroy\n"
      "use the values read then. A `DFCCL_*` variable that is not in the table is\n"
      "reported once per process on stderr with the closest known name. All ranks of a communicator must agree on the\n"
      "transport settings (blocks, slot bytes, slots, lanes, channel size): init checks it and names the mismatch.\n\n"
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
  for (const auto& v : dfccl::env_table()) {
    const char* cur = std::getenv(v.name);
    fmt::print("  {:<28} default {:<10} accepts {:<22} {}{}\n", v.name, v.default_value, accepted(v), v.description,
               cur ? fmt::format(" [set: {}]", cur) : "");
  }
  fmt::print("\nLimits: {} outstanding collectives per device, {} streams with outstanding collectives per device, "
             "{} daemon blocks, {} communicators per device, {} persistent ids per communicator\n",
             dfccl::core::kMaxSlots, dfccl::core::kMaxRings, dfccl::core::kMaxBlocks, dfccl::core::kMaxComms,
             DFCCL_MAX_PERSISTENT_IDS);
  fmt::print("\nBuild features: network transport {} (docs/net-transport.md)\n", dfccl::net::transport_description());
  return 0;
}
