// Every DFCCL_* environment variable in one table: name, defaults, accepted range or choices, effect. Parsing,
// validation, `dfccl-info` and docs/environment.md (`dfccl-info --markdown`) all come from it. The library reads them
// through the typed settings of settings.h only. A variable may have a default per executor (host_default), and a
// deprecated name that the host executor still reads where the variable is unset (host_alias: the DFCCL_HOST_* name
// it had before both executors shared it; kept for one release, with one warning naming the new name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dfccl {

// The executor a value is read for: it picks the default (and the deprecated alias) of a per-executor variable.
enum class Exec { Cuda, Host };

struct EnvVar {
  const char* name;
  const char* default_value;  // the CUDA executor's default; both executors' where host_default is null
  int64_t lo, hi;       // an integer variable: the accepted range (decimal digits only)
  const char* choices;  // a word variable: the accepted words, '|'-separated ("": any text); null: an integer
  // The effect. One that begins with "CUDA executor" names a variable that the host executor never reads (a host
  // engine warns when one is set: env_warn_ignored_by_host).
  const char* description;
  const char* host_default = nullptr;  // the host executor's default, where it differs
  const char* host_alias = nullptr;    // the deprecated DFCCL_HOST_* name (host executor, where `name` is unset)
};

const std::vector<EnvVar>& env_table();

// The default a variable has for an executor.
const char* env_default(const EnvVar& v, Exec exec);

// The variable's value for the executor (for the host executor: else its deprecated alias's), or its
// default, as a decimal integer within the table's range; anything else (octal-looking "010" is read as ten, a sign,
// letters, overflow, out of range) is a dfcclInvalidArgument naming the variable set, the value and the range.
int64_t env_int(const char* name, Exec exec = Exec::Cuda);
// The same, checked against the table's choices (for a word variable).
std::string env_str(const char* name, Exec exec = Exec::Cuda);
// Whether the user set the variable (to a non-empty value) for the executor: it, or for the host executor its alias.
bool env_is_set(const char* name, Exec exec = Exec::Cuda);
// The name whose value env_int and env_str read for the executor: `name`, or its alias where only that is set (for
// messages about the value).
const char* env_source(const char* name, Exec exec = Exec::Cuda);
// The closest name of the table to `name` (edit distance), for the warning above.
std::string env_closest(const std::string& name);

}  // namespace dfccl
