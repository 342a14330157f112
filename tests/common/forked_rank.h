// Ranks as forked processes (host or CUDA executor): the child's side of the init, shared by the tests that kill,
// stop or mismatch one of several processes. The parent must not have made a CUDA call before forking.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "dfccl.h"

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

}  // namespace dfccl::test
