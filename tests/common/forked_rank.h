// Ranks as forked processes (host or CUDA executor): the child's side of the init, shared by the tests that kill,
// stop or mismatch one of several processes. The parent must not have made a CUDA call before forking.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dfccl.h"
#include "peer_files.h"

namespace dfccl::test {

// The unique id of forked ranks, made after the fork by rank 0's process and handed to the others through a pipe.
// A process must not fork while it runs threads (dfcclGetUniqueId starts the rendezvous root's): the child can
// inherit a lock that one of them held (UCX's memory hooks, for one) and wait for it forever. Make it in the parent
// before forking; call get(rank) in each child; the parent's copy closes with it.
class ForkedId {
 public:
  ForkedId() {
    if (pipe(fd_) != 0) fd_[0] = fd_[1] = -1;
  }
  ~ForkedId() {
    for (int f : fd_)
      if (f >= 0) close(f);
  }
  ForkedId(const ForkedId&) = delete;
  ForkedId& operator=(const ForkedId&) = delete;

  // Caller: the child of `rank` of nranks. Rank 0 makes the id and writes one copy per other rank; the others read
  // one (a write of the id's 128 bytes is atomic). Ends the process with exit status 2 on failure or when no id came
  // within 30 s.
  dfcclUniqueId get(int rank, int nranks) {
    dfcclUniqueId id;
    if (rank == 0) {
      bool ok = fd_[1] >= 0 && dfcclGetUniqueId(&id) == dfcclSuccess;
      for (int i = 1; i < nranks && ok; ++i) ok = write(fd_[1], &id, sizeof(id)) == ssize_t(sizeof(id));
      if (!ok) fail(rank, "could not make or hand out the unique id");
      return id;
    }
    pollfd p{fd_[0], POLLIN, 0};
    if (fd_[0] < 0 || poll(&p, 1, 30000) != 1 || read(fd_[0], &id, sizeof(id)) != ssize_t(sizeof(id)))
      fail(rank, "no unique id from rank 0 within 30 s");
    return id;
  }

 private:
  [[noreturn]] static void fail(int rank, const char* why) {
    std::fprintf(stderr, "rank %d: %s\n", rank, why);
    _exit(2);
  }
  int fd_[2] = {-1, -1};
};

// Caller: a forked child. Returns its communicator (rank of nranks over id), or ends the process with exit status 2
// after printing why.
inline dfcclComm_t init_forked_rank(const dfcclUniqueId& id, int rank, int nranks,
                                    dfcclExecutor_t executor = dfcclExecutorHost) {
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = executor;
  dfcclComm_t comm = nullptr;
  if (dfcclCommInitRankConfig(&comm, nranks, id, rank, &cfg) != dfcclSuccess) {
    std::fprintf(stderr, "rank %d: init: %s\n", rank, dfcclGetLastError(nullptr));
    _exit(2);
  }
  return comm;
}

// Forks nranks processes: each calls setup(rank) (its environment, before init), inits, and exits with
// body(comm, rank); every one must exit 0 (gtest expectations in the parent, naming the rank).
template <class Setup, class Body>
void run_forked_ranks(int nranks, Setup setup, Body body, dfcclExecutor_t executor = dfcclExecutorHost) {
  ForkedId ids;
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nranks; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setup(rank);
      dfcclComm_t comm = init_forked_rank(ids.get(rank, nranks), rank, nranks, executor);
      const int rc = body(comm, rank);
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  for (int rank = 0; rank < nranks; ++rank) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[size_t(rank)], &status, 0), pids[size_t(rank)]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << " failed (status " << status << ")";
  }
}

// Milliseconds since t0 on the steady clock: how long a detection, a release or a destroy took.
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A new, empty folder under the tests' temporary folder (mkdtemp: its name unused so far, whatever an earlier run
// left), removed with what it holds when this goes. path() ends with '/'.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    std::string t = testing::TempDir() + prefix + "-XXXXXX";
    if (mkdtemp(t.data())) path_ = t + "/";
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }  // "" if it could not be made

 private:
  std::string path_;
};

// Caller: a rank of check_stuck_diagnosis. Waits until ranks 0-2 have marked themselves done under dir (10 s at
// most), then aborts comm: no abort fails a rank that is still checking.
inline void abort_when_stuck_checked(dfcclComm_t comm, const std::string& dir) {
  for (int i = 0; i < 100; ++i) {
    bool all = true;
    for (int r = 0; r < 3; ++r) all = all && std::ifstream(dir + "done-" + std::to_string(r)).good();
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  dfcclCommAbort(comm);
}

// The stuck warning in the log file at path, waited for up to 8 s (it comes 1 to 2 s after DFCCL_STUCK_WARN_S=1);
// what the file holds at the end.
inline std::string wait_stuck_warning(const std::string& path) {
  std::string text;
  for (int i = 0; i < 80 && text.find("pending for") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    text = read_file(path, 0);
  }
  return text;
}

// Caller: the body of rank `rank` of 4 forked ranks on the host executor, started with DFCCL_STUCK_WARN_S=1 and
// DFCCL_DEBUG_FILE=<dir>%p.log. Ranks 0-2 all-reduce and rank 3 never calls: each of ranks 0-2 checks that the stuck
// warning, dfcclDebugDump (its host slots) and dfcclRequestGetMissingRanks name rank 3 alone as the rank that has
// not called collective #0, then marks itself done with a file under dir. Every rank then aborts
// (abort_when_stuck_checked). Returns 0 when every check held, else prints what was seen and returns non-zero.
inline int check_stuck_diagnosis(dfcclComm_t comm, int rank, const std::string& dir) {
  if (rank == 3) {  // stays away
    abort_when_stuck_checked(comm, dir);
    return 0;
  }
  // The dump goes to stderr: send it to a file this rank reads back.
  const std::string dump = dir + "dump-" + std::to_string(getpid()) + ".txt";
  if (!std::freopen(dump.c_str(), "w", stderr)) return 4;
  std::vector<int32_t> in(4096, rank), out(4096);
  dfcclRequest_t q = nullptr;
  if (dfcclAllReduce(in.data(), out.data(), in.size(), dfcclInt32, dfcclSum, comm, 0, nullptr, &q) != dfcclSuccess)
    return 2;
  const std::string warning = wait_stuck_warning(dir + std::to_string(getpid()) + ".log");
  dfcclDebugDump(comm, 0);
  std::fflush(stderr);
  const std::string text = read_file(dump, 0);
  int missing[4] = {}, n = 0;
  const bool listed = dfcclRequestGetMissingRanks(q, missing, 4, &n) == dfcclSuccess && n == 1 && missing[0] == 3;
  std::ofstream(dir + "done-" + std::to_string(rank)).put('1');  // also when a check fails: the others go on
  const std::string want = "#0 of its communicator, not called yet by rank 3";
  const bool named_dump = text.find("host slot") != std::string::npos && text.find(want) != std::string::npos;
  const bool named_warning =
      warning.find("pending for") != std::string::npos && warning.find(want + ";") != std::string::npos;
  if (!named_dump || !named_warning || !listed) {
    std::printf("rank %d: the dump, the warning or the missing ranks (%d, the first %d) do not name rank 3 alone:\n"
                "%s\n%s\n",
                rank, n, missing[0], text.c_str(), warning.c_str());
    return 1;
  }
  if (rank == 0) std::printf("[ stuck    ] %s", warning.c_str());
  abort_when_stuck_checked(comm, dir);
  return 0;
}

}  // namespace dfccl::test
