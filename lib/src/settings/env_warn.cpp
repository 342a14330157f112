#include "settings/env_warn.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

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
    "DFCCL_TORCH_VENV", "DFCCL_BUILD_DIR",    "DFCCL_PREFIX",     "DFCCL_STYLE_BASE"};

}  // namespace

std::vector<std::string> env_unknown_names() {
  std::vector<std::string> names;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    if (entry.rfind("DFCCL_", 0) != 0) continue;
    const std::string name = entry.substr(0, entry.find('='));
    const bool known =
        std::any_of(env_table().begin(), env_table().end(),
                    [&](const EnvVar& v) { return name == v.name || (v.host_alias && name == v.host_alias); }) ||
        std::any_of(std::begin(kToolVariables), std::end(kToolVariables), [&](const char* t) { return name == t; });
    if (!known) names.push_back(name);
  }
  return names;
}

void env_warn_unknown() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& name : env_unknown_names())
      log(LogLevel::Warn, LogSubsys::Env,
          "environment variable {} is not a DFCCL setting (did you mean {}?); it is ignored", name, env_closest(name));
  });
}

void env_warn_ignored_by_host() {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lk(mu);
  for (const EnvVar& v : env_table()) {
    if (std::string_view(v.description).rfind("CUDA executor", 0) != 0 || !env_is_set(v.name)) continue;
    if (!warned.insert(v.name).second) continue;
    log(LogLevel::Warn, LogSubsys::Env,
        "environment variable {} is set but only the CUDA executor reads it: the host executor ignores it", v.name);
  }
}

void env_warn_deprecated() {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lk(mu);
  for (const EnvVar& v : env_table()) {
    if (!v.host_alias || !std::getenv(v.host_alias) || !*std::getenv(v.host_alias)) continue;
    if (!warned.insert(v.host_alias).second) continue;
    if (env_is_set(v.name))
      log(LogLevel::Warn, LogSubsys::Env, "environment variable {} is deprecated and ignored: {} is set", v.host_alias,
          v.name);
    else
      log(LogLevel::Warn, LogSubsys::Env,
          "environment variable {} is deprecated: use {} (the host executor reads {} while {} is unset)", v.host_alias,
          v.name, v.host_alias, v.name);
  }
}

}  // namespace dfccl
