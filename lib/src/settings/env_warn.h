// The check of the process environment against the settings table (env.h), which logs what it finds (log.h).
#pragma once

#include <string>
#include <vector>

namespace dfccl {

// Once per process: a warning on stderr for each DFCCL_* variable set in the environment that neither the table nor
// the project's scripts know, naming the closest known name.
void env_warn_unknown();
// The DFCCL_* variables set in the environment that neither the table nor the project's scripts know.
std::vector<std::string> env_unknown_names();
// Caller: the creation of a host-executor engine. A warning, once per process and variable, for each variable set
// that only the CUDA executor reads (its description begins with "CUDA executor"): the host executor ignores it.
void env_warn_ignored_by_host();
// Callers: the creation of a host-executor engine, dfccl-info. A warning, once per process and name, for each
// deprecated DFCCL_HOST_* name set (env.h, host_alias), naming the variable that replaces it (or, where that is set
// too, saying that the old name is ignored).
void env_warn_deprecated();

}  // namespace dfccl
