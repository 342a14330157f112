#include "settings/env_warn.h"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <string>

#include "settings/env.h"
#include "util/log.h"

extern char** environ;

namespace dfccl {
namespace {

// Variables that the project's scripts, tests and Python package (python/README.md) read, not the library: known,
// so never warned about.
constexpr const char* kToolVariables[] = {
    "DFCCL_SKIP_DEPS",  "DFCCL_CAMPAIGN",     "DFCCL_SIM",        "DFCCL_PYTHON",
    "DFCCL_S",          "DFCCL_REQUIRE_GPUS", "DFCCL_TORCH_CUDA", "DFCCL_TORCH_PYTHON",
    "DFCCL_TORCH_VENV", "DFCCL_BUILD_DIR",    "DFCCL_PREFIX"};

}  // namespace

void env_warn_unknown() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** e = environ; e && *e; ++e) {
      const std::string entry = *e;
      if (entry.rfind("DFCCL_", 0) != 0) continue;
      const std::string name = entry.substr(0, entry.find('='));
      const bool known =
          std::any_of(env_table().begin(), env_table().end(), [&](const EnvVar& v) { return name == v.name; }) ||
          std::any_of(std::begin(kToolVariables), std::end(kToolVariables), [&](const char* t) { return name == t; });
      if (!known)
        log(LogLevel::Warn, LogSubsys::Env,
            "environment variable {} is not a DFCCL setting (did you mean {}?); it is ignored", name,
            env_closest(name));
    }
  });
}

}  // namespace dfccl
