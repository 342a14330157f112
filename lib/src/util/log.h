// Diagnostics like NCCL's: DFCCL_DEBUG=NONE|WARN|INFO|TRACE (default WARN) picks what is printed,
// DFCCL_DEBUG_SUBSYS (a comma list of INIT, ENGINE, ABORT, ENV, COLL or ALL; a leading ^ excludes) which subsystems,
// DFCCL_DEBUG_FILE where (%h: host name, %p: pid; default stderr). Each line reads
//   <host>:<pid>:<tid> DFCCL <LEVEL> [<SUBSYS>] <message>
// Settings are read once per process, at the first message.
#pragma once

#include <fmt/format.h>

#include <string>

namespace dfccl {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };
enum class LogSubsys : unsigned { Init = 1, Engine = 2, Abort = 4, Env = 8, Coll = 16 };

bool log_enabled(LogLevel level, LogSubsys subsys);
void log_write(LogLevel level, LogSubsys subsys, const std::string& message);

// fmt-style: log(LogLevel::Info, LogSubsys::Init, "rank {} of {}", r, n). The message is formatted only if enabled.
template <class... Args>
void log(LogLevel level, LogSubsys subsys, fmt::format_string<Args...> f, Args&&... args) {
  if (log_enabled(level, subsys)) log_write(level, subsys, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace dfccl
