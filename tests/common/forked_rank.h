// Ranks as forked processes (host or CUDA executor): the child's side of the init, shared by the tests that kill,
// stop or mismatch one of several processes. The parent must not have made a CUDA call before forking.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "dfccl.h"

namespace dfccl::test {

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
  dfcclUniqueId id;
  ASSERT_EQ(dfcclGetUniqueId(&id), dfcclSuccess);
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nranks; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setup(rank);
      dfcclComm_t comm = init_forked_rank(id, rank, nranks, executor);
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
