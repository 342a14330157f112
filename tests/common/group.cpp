#include "group.h"

#include <stdexcept>

namespace dfccl::test {

Group::Group(int n, dfcclExecutor_t executor, dfcclMode_t mode) : comms(size_t(n), nullptr) {
  dfcclConfig_t cfg = DFCCL_CONFIG_INITIALIZER;
  cfg.executor = executor;
  cfg.mode = mode;
  const dfcclResult_t r = dfcclCommInitAllConfig(comms.data(), n, nullptr, &cfg);
  if (r != dfcclSuccess) throw std::runtime_error(std::string("dfcclCommInitAllConfig: ") + dfcclGetLastError(nullptr));
}

Group::~Group() {
  for (auto c : comms)
    if (c) dfcclCommDestroy(c);
}

dfcclResult_t submit(dfcclComm_t comm, const Case& c, Buffers& b, int rank, dfcclRequest_t* req, int priority,
                     cudaStream_t stream) {
  switch (c.coll) {
    case Coll::AllReduce:
      return dfcclAllReduce(b.send(rank), b.recv(rank), c.count, c.type, c.op, comm, priority, stream, req);
    case Coll::AllGather:
      return dfcclAllGather(b.send(rank), b.recv(rank), c.count, c.type, comm, priority, stream, req);
    case Coll::ReduceScatter:
      return dfcclReduceScatter(b.send(rank), b.recv(rank), c.count, c.type, c.op, comm, priority, stream, req);
    case Coll::Broadcast:
      return dfcclBroadcast(b.send(rank), b.recv(rank), c.count, c.type, c.root, comm, priority, stream, req);
    case Coll::Reduce:
      return dfcclReduce(b.send(rank), b.recv(rank), c.count, c.type, c.op, c.root, comm, priority, stream, req);
  }
  return dfcclInvalidArgument;
}

size_t run_case(Group& g, const Case& c, int timeout_ms, std::string* error) {
  Buffers b(c, g.size());
  std::vector<dfcclRequest_t> reqs(size_t(g.size()), nullptr);
  for (int r = 0; r < g.size(); ++r) {
    const dfcclResult_t res = submit(g[r], c, b, r, &reqs[size_t(r)]);
    if (res != dfcclSuccess) {
      *error = std::string("submit: ") + dfcclGetLastError(nullptr);
      return 0;
    }
  }
  for (int r = 0; r < g.size(); ++r) {
    const dfcclResult_t res = dfcclSynchronize(reqs[size_t(r)], timeout_ms);
    if (res != dfcclSuccess && error->empty())
      *error = std::string("rank ") + std::to_string(r) + ": " + dfcclGetErrorString(res) + ": " +
               dfcclGetLastError(nullptr);
  }
  for (auto q : reqs) dfcclRequestFree(q);
  if (!error->empty()) return 0;
  size_t wrong = 0;
  for (int r = 0; r < g.size(); ++r) wrong += b.wrong(r);
  return wrong;
}

}  // namespace dfccl::test
