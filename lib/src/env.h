// Every DFCCL_* environment variable, with its default and meaning, in one table (printed by `dfccl-info`, listed in
// docs/environment.md). Values are read when an engine or communicator is created.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dfccl {

struct EnvVar {
  const char* name;
  const char* default_value;
  const char* description;
};

const std::vector<EnvVar>& env_table();

// The variable's value (or its default), parsed as an integer; a malformed value is an error naming the variable.
int64_t env_int(const char* name);
std::string env_str(const char* name);
// Whether the user set the variable (to a non-empty value).
bool env_is_set(const char* name);

}  // namespace dfccl
