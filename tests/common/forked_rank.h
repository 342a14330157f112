// Ranks as forked processes (host or CUDA executor): the child's side of the init, shared by the tests that kill,
// stop or mismatch one of several processes. The parent must not have made a CUDA call before forking.
#pragma once

#include <unistd.h>

#include <cstdio>

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

}  // namespace dfccl::test
