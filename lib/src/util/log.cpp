#include "util/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <sstream>

#include "settings/settings.h"

namespace dfccl {
namespace {

constexpr const char* kSubsysNames[] = {"INIT", "ENGINE", "ABORT", "ENV", "COLL"};
constexpr const char* kLevelNames[] = {"NONE", "WARN", "INFO", "TRACE"};

struct Logger {
  LogLevel level = LogLevel::Warn;
  unsigned subsys = ~0u;
  std::FILE* out = stderr;
  std::string host;
  std::mutex mu;

  // Reads the settings; a bad one is reported on stderr and the default kept (logging must not fail a call).
  Logger() {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
    try {
      const LogSettings s = LogSettings::read();
      for (int i = 0; i < 4; ++i)
        if (s.level == kLevelNames[i]) level = LogLevel(i);
      subsys = parse_subsys(s.subsys);
      if (!s.file.empty()) open_file(s.file);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s:%d DFCCL WARN [ENV] %s; logging with the defaults\n", host.c_str(), int(getpid()),
                   e.what());
    }
  }

  static unsigned parse_subsys(const std::string& list) {
    const bool exclude = !list.empty() && list[0] == '^';
    unsigned mask = 0;
    std::stringstream ss(exclude ? list.substr(1) : list);
    for (std::string item; std::getline(ss, item, ',');) {
      if (item == "ALL") mask = ~0u;
      for (unsigned i = 0; i < 5; ++i)
        if (item == kSubsysNames[i]) mask |= 1u << i;
    }
    return exclude ? ~mask : mask;
  }

  void open_file(const std::string& pattern) {
    std::string path;
    for (size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] == '%' && i + 1 < pattern.size() && (pattern[i + 1] == 'h' || pattern[i + 1] == 'p')) {
        path += pattern[i + 1] == 'h' ? host : std::to_string(getpid());
        ++i;
      } else {
        path += pattern[i];
      }
    }
    if (std::FILE* f = std::fopen(path.c_str(), "a")) out = f;
    else
      std::fprintf(stderr, "DFCCL WARN [ENV] DFCCL_DEBUG_FILE=%s: cannot open %s; logging to stderr\n", pattern.c_str(),
                   path.c_str());
  }
};

Logger& logger() {
  static Logger* l = new Logger;  // never destroyed: threads may log during static destruction
  return *l;
}

unsigned subsys_index(LogSubsys s) {
  unsigned v = unsigned(s), i = 0;
  while (v > 1) v >>= 1, ++i;
  return i;
}

}  // namespace

bool log_enabled(LogLevel level, LogSubsys subsys) {
  Logger& l = logger();
  return level != LogLevel::None && int(level) <= int(l.level) && (l.subsys & unsigned(subsys)) != 0;
}

void log_write(LogLevel level, LogSubsys subsys, const std::string& message) {
  Logger& l = logger();
  const std::string line = fmt::format("{}:{}:{} DFCCL {} [{}] {}\n", l.host, getpid(), long(syscall(SYS_gettid)),
                                       kLevelNames[int(level)], kSubsysNames[subsys_index(subsys)], message);
  std::lock_guard<std::mutex> lk(l.mu);
  std::fwrite(line.data(), 1, line.size(), l.out);
  std::fflush(l.out);
}

}  // namespace dfccl
