// The check of the process environment against the settings table (env.h), which logs what it finds (log.h).
#pragma once

namespace dfccl {

// Once per process: a warning on stderr for each DFCCL_* variable set in the environment that neither the table nor
// the project's scripts know, naming the closest known name.
void env_warn_unknown();

}  // namespace dfccl
