// Every DFCCL_* environment variable in one table: name, default, accepted range or choices, effect. Parsing,
// validation, `dfccl-info` and docs/environment.md (`dfccl-info --markdown`) all come from it. The library reads them
// through the typed settings of settings.h only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dfccl {

struct EnvVar {
  const char* name;
  const char* default_value;
  int64_t lo, hi;       // an integer variable: the accepted range (decimal digits only)
  const char* choices;  // a word variable: the accepted words, '|'-separated ("": any text); null: an integer
  // The effect. One that begins with "CUDA executor" names a variable that the host executor never reads (a host
  // engine warns when one is set: env_warn_ignored_by_host).
  const char* description;
};

const std::vector<EnvVar>& env_table();

// The variable's value, or its default, as a decimal integer within the table's range; anything else (octal-looking
// "010" is read as ten, a sign, letters, overflow, out of range) is a dfcclInvalidArgument naming the variable, the
// value and the range.
int64_t env_int(const char* name);
// The variable's value, or its default, checked against the table's choices (for a word variable).
std::string env_str(const char* name);
// Whether the user set the variable (to a non-empty value).
bool env_is_set(const char* name);
// The closest name of the table to `name` (edit distance), for the warning above.
std::string env_closest(const std::string& name);

}  // namespace dfccl
