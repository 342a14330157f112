// Test groups: the ranks of a communicator as communicators of one process (host executor threads, or GPUs), and
// the call of one reference Case on every rank.
#pragma once

#include <string>
#include <vector>

#include "dfccl.h"
#include "reference.h"

namespace dfccl::test {

// Fails the calling test with the library's message.
#define DFCCL_ASSERT_OK(call)                                                                                      \
  do {                                                                                                             \
    const dfcclResult_t r_ = (call);                                                                               \
    ASSERT_EQ(r_, dfcclSuccess) << #call << ": " << dfcclGetErrorString(r_) << ": " << dfcclGetLastError(nullptr); \
  } while (0)

class Group {
 public:
  // n ranks of one communicator in this process (dfcclCommInitAllConfig).
  Group(int n, dfcclExecutor_t executor, dfcclMode_t mode = dfcclModePreemptive);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  int size() const { return int(comms.size()); }
  dfcclComm_t operator[](int r) const { return comms[size_t(r)]; }
  std::vector<dfcclComm_t> comms;
};

// Submits rank's part of the case (buffers from b) on comm. sendbuff/recvbuff follow the case's in-place rule.
dfcclResult_t submit(dfcclComm_t comm, const Case& c, Buffers& b, int rank, dfcclRequest_t* req, int priority = 0,
                     cudaStream_t stream = nullptr);

// Runs the case on every rank of g (host memory buffers: host executor) and returns the wrong elements summed over
// ranks; a failure to submit or to finish within timeout_ms is reported through `error`.
size_t run_case(Group& g, const Case& c, int timeout_ms, std::string* error);

}  // namespace dfccl::test
