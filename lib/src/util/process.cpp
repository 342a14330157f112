#include "util/process.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <vector>

#include "util/log.h"

namespace dfccl {

uint64_t pid_namespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

bool process_exited(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

void remove_dev_shm_orphans(const std::function<bool(const std::string& name)>& orphan, const char* what) {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  std::vector<std::string> orphans;
  while (const dirent* e = readdir(dir)) {
    const std::string n = e->d_name;
    if (orphan(n)) orphans.push_back(n);
  }
  closedir(dir);
  for (const std::string& n : orphans)
    if (shm_unlink(("/" + n).c_str()) == 0) log(LogLevel::Info, LogSubsys::Init, "removed /dev/shm/{}, {}", n, what);
}

}  // namespace dfccl
