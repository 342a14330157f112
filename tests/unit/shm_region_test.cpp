// A /dev/shm without room for a connection region is a clear error at creation, never a SIGBUS when the region is
// first written; a region left by a killed process is removed by the next creation. A forked child gets a private mount
// namespace with a 1 MiB /dev/shm (needs root: skipped otherwise), creates a 256 KiB region (works, every page
// writable) and then an 8 MiB one: dfcclSystemError naming /dev/shm and the size. Both run in a private /dev/shm.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "transport/shm_region.h"
#include "util/error.h"

namespace {

// Caller: a forked child. Gives it a private mount namespace with a /dev/shm of its own (tmpfs, `options`), which no
// other process's sweep of dead processes' regions reaches; false, having said why, where none can be made (needs
// root).
bool private_dev_shm(const char* options) {
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("tmpfs", "/dev/shm", "tmpfs", 0, options) != 0) {
    std::printf("skipped: no private /dev/shm (%s; needs root)\n", std::strerror(errno));
    return false;
  }
  return true;
}

// Runs child() in a forked child and returns its exit status (a signal: -1).
int in_child(int (*child)()) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    const int rc = child();
    std::fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// The child's side: 0 when both checks held, 77 when no private /dev/shm could be made, else 1 after printing why.
int small_shm_child() {
  if (!private_dev_shm("size=1m")) return 77;
  dfccl::RegionBlob small = dfccl::shm_region_create(0, 256 << 10, "test");
  std::memset(reinterpret_cast<void*>(small.ptr), 1, small.bytes);
  try {
    dfccl::shm_region_create(0, 8 << 20, "test");
    std::printf("an 8 MiB region was created in a 1 MiB /dev/shm\n");
    return 1;
  } catch (const dfccl::Error& e) {
    const std::string m = e.what();
    std::printf("[ refused  ] %s\n", m.c_str());
    if (e.code() != dfcclSystemError || m.find("/dev/shm") == std::string::npos ||
        m.find("8388608 bytes") == std::string::npos)
      return 1;
  }
  dfccl::shm_region_free(small);
  return 0;
}

}  // namespace

TEST(ShmRegion, ASmallDevShmIsAnErrorNotABusError) {
  const int rc = in_child(small_shm_child);
  if (rc == 77) GTEST_SKIP() << "no private /dev/shm (needs root)";
  EXPECT_EQ(rc, 0);
}

namespace {

bool in_dev_shm(const char* handle) { return access((std::string("/dev/shm") + handle).c_str(), F_OK) == 0; }

// The scenario below, in a private /dev/shm (the sweeps of other tests' processes would remove the killed process's
// region first): 0 when every check held, 77 without a private /dev/shm, else 1 after printing why.
int killed_region_child() {
  if (!private_dev_shm("size=64m")) return 77;
  int fds[2];
  if (pipe(fds) != 0) return 1;
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    dfccl::RegionBlob child = dfccl::shm_region_create(0, 64 << 10, "test");
    (void)!write(fds[1], child.handle, sizeof(child.handle));
    pause();
    _exit(0);
  }
  close(fds[1]);
  char handle[sizeof(dfccl::RegionBlob::handle)] = {};
  if (pid < 0 || read(fds[0], handle, sizeof(handle)) != ssize_t(sizeof(handle))) return 1;
  close(fds[0]);
  int failed = 0;
  auto check = [&](bool ok, const char* what, const char* name) {
    if (!ok) std::printf("%s: /dev/shm%s\n", what, name);
    failed += ok ? 0 : 1;
  };
  dfccl::RegionBlob mine = dfccl::shm_region_create(0, 64 << 10, "test");
  check(in_dev_shm(handle), "a live process's region was removed", handle);
  int status = 0;
  if (kill(pid, SIGKILL) != 0 || waitpid(pid, &status, 0) != pid) return 1;
  check(in_dev_shm(handle), "the killed child's region went before the next creation", handle);
  dfccl::RegionBlob next = dfccl::shm_region_create(0, 64 << 10, "test");
  check(!in_dev_shm(handle), "the killed child's region outlived it", handle);
  check(in_dev_shm(mine.handle), "this process's own region was removed", mine.handle);
  dfccl::shm_region_free(mine);
  dfccl::shm_region_free(next);
  return failed == 0 ? 0 : 1;
}

}  // namespace

// A child creates a region and is killed before anyone maps it (as during an init): the next creation removes the
// child's name and keeps the regions of live processes (its own earlier one).
TEST(ShmRegion, ARegionOfAKilledProcessIsRemovedByTheNextCreate) {
  const int rc = in_child(killed_region_child);
  if (rc == 77) GTEST_SKIP() << "no private /dev/shm (needs root)";
  EXPECT_EQ(rc, 0);
}
