// DFCCL_DEBUG, DFCCL_DEBUG_SUBSYS and DFCCL_DEBUG_FILE (lib/src/util/log.cpp). The settings are read once per process,
// so each case runs in a forked child: it sets them, creates a one-rank communicator on the host executor, destroys it,
// and the parent reads the file the child wrote.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "dfccl.h"

namespace {

// What a child with these settings logs into a fresh file (DFCCL_DEBUG_FILE names it with %p).
std::string logged(const char* level, const char* subsys) {
  const std::string pattern = testing::TempDir() + "dfccl-log-test-%p.log";
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("DFCCL_DEBUG", level, 1);
    setenv("DFCCL_DEBUG_SUBSYS", subsys, 1);
    setenv("DFCCL_DEBUG_FILE", pattern.c_str(), 1);
    dfcclUniqueId id;
    dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
    cfg.executor = dfcclExecutorHost;
    dfcclComm_t comm = nullptr;
    if (dfcclGetUniqueId(&id) != dfcclSuccess || dfcclCommInitRankConfig(&comm, 1, id, 0, &cfg) != dfcclSuccess)
      _exit(2);
    _exit(dfcclCommDestroy(comm) == dfcclSuccess ? 0 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed: " << status;
  const std::string path = testing::TempDir() + "dfccl-log-test-" + std::to_string(pid) + ".log";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  unlink(path.c_str());
  return ss.str();
}

TEST(Log, InfoPrintsTheEngineAndCommunicatorBanners) {
  const std::string text = logged("INFO", "ALL");
  const std::string version =
      std::to_string(DFCCL_MAJOR) + "." + std::to_string(DFCCL_MINOR) + "." + std::to_string(DFCCL_PATCH);
  EXPECT_NE(text.find("DFCCL INFO [ENGINE] DFCCL " + version + " engine on device 0: host executor, preemptive mode"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DFCCL INFO [INIT] communicator 0: rank 0 of 1 on device 0"), std::string::npos) << text;
}

TEST(Log, SubsystemsCanBeLeftOut) {
  const std::string text = logged("INFO", "^INIT");
  EXPECT_NE(text.find("[ENGINE]"), std::string::npos) << text;
  EXPECT_EQ(text.find("[INIT]"), std::string::npos) << text;
}

TEST(Log, WarnIsTheDefaultAndPrintsNoBanner) { EXPECT_EQ(logged("WARN", "ALL"), ""); }

}  // namespace
