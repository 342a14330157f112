// dfccl-info: the settings DFCCL reads (every DFCCL_* variable, its default, its current value) and the limits.
#include <fmt/format.h>

#include <cstdlib>

#include "../../kernels/core/types.h"
#include "dfccl.h"
#include "env.h"

int main() {
  fmt::print("DFCCL {}.{}.{}\n\nEnvironment (docs/environment.md):\n", DFCCL_MAJOR, DFCCL_MINOR, DFCCL_PATCH);
  for (const auto& v : dfccl::env_table()) {
    const char* cur = std::getenv(v.name);
    fmt::print("  {:<28} default {:<10} {}{}\n", v.name, v.default_value, v.description,
               cur ? fmt::format(" [set: {}]", cur) : "");
  }
  fmt::print("\nLimits: {} outstanding collectives per device, {} streams with outstanding collectives per device, "
             "{} daemon blocks, {} communicators per device, {} persistent ids per communicator\n",
             dfccl::core::kMaxSlots, dfccl::core::kMaxRings, dfccl::core::kMaxBlocks, dfccl::core::kMaxComms,
             DFCCL_MAX_PERSISTENT_IDS);
  return 0;
}
