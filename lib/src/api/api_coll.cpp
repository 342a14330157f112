// The C API's collectives, point-to-point transfers, all-to-alls and persistent collectives: argument checks
// (api/argcheck.h), then the communicator's submission (comm/comm_submit.h). No exception leaves an entry point
// (guard in util/error.h).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "api/argcheck.h"
#include "comm/comm.h"
#include "comm/comm_graph.h"
#include "engine/requests.h"
#include "match/match_board.h"
#include "util/error.h"
#include "util/names.h"

using namespace dfccl;
using namespace dfccl::api;

namespace {

// DFCCL_CHECK_HOST_ORDER=1, a debugging aid: before a host-ordered submission of the CUDA executor, waits for the
// calling thread's default streams (legacy and per-thread), where a pageable cudaMemcpy may still be carrying the
// inputs to the device after it returned. The submission is then a synchronization of those streams.
void settle_host_order(dfcclComm* c, cudaStream_t stream, const char* fn) {
  // The host executor (every CPU collective of the torch backend) takes no engine reference here.
  if (stream != DFCCL_NO_STREAM || c->config.executor != dfcclExecutorCuda) return;
  const std::shared_ptr<Engine> e = engine_ref(c);
  if (!e || !e->check_host_order()) return;
  cudaError_t r = cudaStreamSynchronize(cudaStreamLegacy);
  if (r == cudaSuccess) r = cudaStreamSynchronize(cudaStreamPerThread);
  if (r != cudaSuccess)
    throw Error(dfcclUnhandledCudaError, fmt::format("{}: DFCCL_CHECK_HOST_ORDER=1: synchronizing the default streams "
                                                     "before a host-ordered submission failed: {}",
                                                     fn, cudaGetErrorString(r)));
}

// A queued request's handle into *request (NULL: fire-and-forget).
void hand_out(const std::shared_ptr<RequestState>& st, dfcclRequest_t* request) {
  if (!request) return;
  dfcclRequest_t h = request_handle_new(st);
  {
    // Under the request's lock: the collective is queued, and the progress thread may already be completing it.
    std::lock_guard<std::mutex> lk(st->mu);
    st->handle = h;
  }
  *request = h;
}

dfcclResult_t submit(dfcclComm* c, core::Desc d, int persistent_id, cudaStream_t stream, dfcclRequest_t* request,
                     const char* fn) {
  if (stream_capturing(stream, dfcclExecutor_t(c->config.executor), fn)) {
    if (persistent_id >= 0)
      throw Error(dfcclNotSupported, fmt::format("{}: argument 'stream' is capturing a CUDA graph: a persistent "
                                                 "collective cannot be started in a capture (capture the collective "
                                                 "itself: each replay runs it anew)",
                                                 fn));
    hand_out(comm_capture(c, d, stream, request == nullptr, fn), request);
    return dfcclSuccess;
  }
  settle_host_order(c, stream, fn);
  hand_out(comm_submit(c, d, persistent_id, stream), request);
  return dfcclSuccess;
}

core::Desc make_desc(core::Kind kind, const void* send, void* recv, size_t count, dfcclDataType_t t, dfcclRedOp_t op,
                     int root, int priority) {
  core::Desc d{};
  d.kind = kind;
  d.send = send;
  d.recv = recv;
  d.count = count;
  d.dtype = core::DType(t);
  d.op = core::RedOp(op);
  d.root = root;
  d.priority = priority;
  return d;
}

// Queues point-to-point transfers (one request, or a compound one for several) on `lane`.
dfcclResult_t submit_p2p(dfcclComm* c, std::vector<core::Desc> parts, uint32_t lane, cudaStream_t stream,
                         dfcclRequest_t* request, const char* fn) {
  if (stream_capturing(stream, dfcclExecutor_t(c->config.executor), fn)) {
    hand_out(comm_capture_p2p(c, std::move(parts), lane, stream, request == nullptr, fn), request);
    return dfcclSuccess;
  }
  settle_host_order(c, stream, fn);
  auto reqs = comm_submit_p2p(c, std::move(parts), lane, stream);
  if (request) hand_out(reqs.size() == 1 ? reqs.front() : compound_request(std::move(reqs)), request);
  return dfcclSuccess;
}

// dfcclSend (kind Send, buf the send buffer) and dfcclRecv (kind Recv, buf the receive buffer): one transfer.
dfcclResult_t transfer(core::Kind kind, const void* buf, size_t count, dfcclDataType_t datatype, int peer,
                       dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request) {
  const bool send = kind == core::Kind::Send;
  const char* fn = send ? "dfcclSend" : "dfcclRecv";
  const CommRef held = check_comm(comm, fn);
  dfcclComm* c = held.get();
  check_count(count, "count", fn);
  check_dtype(datatype, fn);
  check_peer(peer, c, fn);
  check_buffer(buf, count, datatype, send ? "sendbuff" : "recvbuff", c, fn);
  void* out = send ? nullptr : const_cast<void*>(buf);
  const core::Desc d = make_desc(kind, send ? buf : nullptr, out, count, datatype, dfcclSum, peer, priority);
  return submit_p2p(c, {d}, kP2pUser, stream, request, fn);
}

struct AllToAllArgs {
  const void* send;
  const size_t *sendcounts, *sdispls;
  void* recv;
  const size_t *recvcounts, *rdispls;
};

// dfcclAllToAll(v): checks every block, then queues a send to and a receive from every rank (itself included) on the
// all-to-all lane, all or none, under one request.
dfcclResult_t all_to_all(const AllToAllArgs& a, dfcclDataType_t t, dfcclComm* c, int priority, cudaStream_t stream,
                         dfcclRequest_t* request, const char* fn) {
  check_dtype(t, fn);
  const int n = c->nranks;
  const uint64_t es = core::dtype_size(core::DType(t));
  const auto [slo, shi] =
      check_blocks({a.send, a.sendcounts, a.sdispls, "sendbuff", "sendcounts", "sdispls"}, n, es, false, fn);
  const auto [rlo, rhi] =
      check_blocks({a.recv, a.recvcounts, a.rdispls, "recvbuff", "recvcounts", "rdispls"}, n, es, true, fn);
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  if (shi > 0) check_buffer(send + slo * es, shi - slo, t, "sendbuff", c, fn);
  if (rhi > 0) check_buffer(recv + rlo * es, rhi - rlo, t, "recvbuff", c, fn);
  if (shi > 0 && rhi > 0 && send + slo * es < recv + rhi * es && recv + rlo * es < send + shi * es)
    bad(fn, "arguments 'sendbuff' and 'recvbuff' overlap: an all-to-all is not in place");
  std::vector<core::Desc> parts;
  parts.reserve(2 * size_t(n));
  for (int s = 0; s < n; ++s) {  // rank r + s receives from r, rank r - s sends to r: pairs in step
    const int to = (c->rank + s) % n, from = (c->rank - s + n) % n;
    parts.push_back(
        make_desc(core::Kind::Send, send + a.sdispls[to] * es, nullptr, a.sendcounts[to], t, dfcclSum, to, priority));
    parts.push_back(make_desc(core::Kind::Recv, nullptr, recv + a.rdispls[from] * es, a.recvcounts[from], t, dfcclSum,
                              from, priority));
  }
  return submit_p2p(c, std::move(parts), kP2pAllToAll, stream, request, fn);
}

dfcclResult_t prepare(core::Kind kind, size_t count, dfcclDataType_t t, dfcclRedOp_t op, int root, dfcclComm_t comm,
                      int id, dfcclPersistent_t* coll, const char* fn) {
  const CommRef held = check_comm(comm, fn);
  dfcclComm* c = held.get();
  if (!coll) bad(fn, "argument 'coll' is NULL");
  check_count(count, "count", fn);
  check_dtype(t, fn);
  check_op(op, fn);
  check_root(root, c, fn);
  const int lanes = int(c->persistent_lanes);
  if (lanes == 0)
    bad(fn, fmt::format("argument 'id' = {}: this communicator takes no persistent collectives "
                        "(DFCCL_PERSISTENT_LANES=0)",
                        id));
  if (id < 0 || id >= lanes)
    bad(fn, fmt::format("argument 'id' = {} is outside 0..{} (DFCCL_PERSISTENT_LANES={}; at most "
                        "DFCCL_MAX_PERSISTENT_IDS={})",
                        id, lanes - 1, lanes, DFCCL_MAX_PERSISTENT_IDS));
  const auto refuse_if_prepared = [&] {  // caller holds c->mu
    if (c->persistent_prepared[id])
      throw Error(dfcclInvalidUsage, fmt::format("{}: id {} is already prepared on this communicator", fn, id));
  };
  {
    std::lock_guard<std::mutex> lk(c->mu);
    refuse_if_prepared();
  }
  comm_prepare(c, id);  // the id's lane, the first time (not under c->mu: it allocates)
  std::lock_guard<std::mutex> lk(c->mu);
  refuse_if_prepared();  // another thread may have prepared it meanwhile
  c->persistent_prepared[id] = true;
  auto* p = new dfcclPersistent;
  p->comm = comm;
  p->desc = make_desc(kind, nullptr, nullptr, count, t, op, root, 0);
  p->id = id;
  *coll = p;
  return dfcclSuccess;
}

}  // namespace

extern "C" {

dfcclResult_t dfcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype,
                             dfcclRedOp_t op, dfcclComm_t comm, int priority, cudaStream_t stream,
                             dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclAllReduce";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    check_count(count, "count", fn);
    check_dtype(datatype, fn);
    check_op(op, fn);
    const core::Desc d = make_desc(core::Kind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, priority);
    check_buffers(d, c, fn);
    return submit(c, d, -1, stream, request, fn);
  });
}

dfcclResult_t dfcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, dfcclDataType_t datatype,
                             dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclAllGather";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    check_count(sendcount, "sendcount", fn);
    check_dtype(datatype, fn);
    const core::Desc d =
        make_desc(core::Kind::AllGather, sendbuff, recvbuff, sendcount, datatype, dfcclSum, 0, priority);
    check_buffers(d, c, fn);
    return submit(c, d, -1, stream, request, fn);
  });
}

dfcclResult_t dfcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, dfcclDataType_t datatype,
                                 dfcclRedOp_t op, dfcclComm_t comm, int priority, cudaStream_t stream,
                                 dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclReduceScatter";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    check_count(recvcount, "recvcount", fn);
    check_dtype(datatype, fn);
    check_op(op, fn);
    const core::Desc d = make_desc(core::Kind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, priority);
    check_buffers(d, c, fn);
    return submit(c, d, -1, stream, request, fn);
  });
}

dfcclResult_t dfcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype, int root,
                             dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclBroadcast";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    check_count(count, "count", fn);
    check_dtype(datatype, fn);
    check_root(root, c, fn);
    const core::Desc d =
        make_desc(core::Kind::Broadcast, sendbuff, recvbuff, count, datatype, dfcclSum, root, priority);
    check_buffers(d, c, fn);
    return submit(c, d, -1, stream, request, fn);
  });
}

dfcclResult_t dfcclReduce(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype, dfcclRedOp_t op,
                          int root, dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclReduce";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    check_count(count, "count", fn);
    check_dtype(datatype, fn);
    check_op(op, fn);
    check_root(root, c, fn);
    const core::Desc d = make_desc(core::Kind::Reduce, sendbuff, recvbuff, count, datatype, op, root, priority);
    check_buffers(d, c, fn);
    return submit(c, d, -1, stream, request, fn);
  });
}

dfcclResult_t dfcclSend(const void* sendbuff, size_t count, dfcclDataType_t datatype, int peer, dfcclComm_t comm,
                        int priority, cudaStream_t stream, dfcclRequest_t* request) {
  return guard(
      [&] { return transfer(core::Kind::Send, sendbuff, count, datatype, peer, comm, priority, stream, request); });
}

dfcclResult_t dfcclRecv(void* recvbuff, size_t count, dfcclDataType_t datatype, int peer, dfcclComm_t comm,
                        int priority, cudaStream_t stream, dfcclRequest_t* request) {
  return guard(
      [&] { return transfer(core::Kind::Recv, recvbuff, count, datatype, peer, comm, priority, stream, request); });
}

dfcclResult_t dfcclAllToAll(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype,
                            dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclAllToAll";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    check_count(count, "count", fn);
    const std::vector<size_t> counts(size_t(c->nranks), count);
    std::vector<size_t> displs(size_t(c->nranks));
    for (size_t p = 0; p < displs.size(); ++p) displs[p] = p * count;
    const AllToAllArgs a{sendbuff, counts.data(), displs.data(), recvbuff, counts.data(), displs.data()};
    return all_to_all(a, datatype, c, priority, stream, request, fn);
  });
}

dfcclResult_t dfcclAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                             const size_t* recvcounts, const size_t* rdispls, dfcclDataType_t datatype,
                             dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclAllToAllv";
    const CommRef held = check_comm(comm, fn);
    dfcclComm* c = held.get();
    const AllToAllArgs a{sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls};
    return all_to_all(a, datatype, c, priority, stream, request, fn);
  });
}

dfcclResult_t dfcclPrepareAllReduce(size_t count, dfcclDataType_t datatype, dfcclRedOp_t op, dfcclComm_t comm, int id,
                                    dfcclPersistent_t* coll) {
  return guard(
      [&] { return prepare(core::Kind::AllReduce, count, datatype, op, 0, comm, id, coll, "dfcclPrepareAllReduce"); });
}
dfcclResult_t dfcclPrepareAllGather(size_t sendcount, dfcclDataType_t datatype, dfcclComm_t comm, int id,
                                    dfcclPersistent_t* coll) {
  return guard([&] {
    return prepare(core::Kind::AllGather, sendcount, datatype, dfcclSum, 0, comm, id, coll, "dfcclPrepareAllGather");
  });
}
dfcclResult_t dfcclPrepareReduceScatter(size_t recvcount, dfcclDataType_t datatype, dfcclRedOp_t op, dfcclComm_t comm,
                                        int id, dfcclPersistent_t* coll) {
  return guard([&] {
    return prepare(core::Kind::ReduceScatter, recvcount, datatype, op, 0, comm, id, coll, "dfcclPrepareReduceScatter");
  });
}
dfcclResult_t dfcclPrepareBroadcast(size_t count, dfcclDataType_t datatype, int root, dfcclComm_t comm, int id,
                                    dfcclPersistent_t* coll) {
  return guard([&] {
    return prepare(core::Kind::Broadcast, count, datatype, dfcclSum, root, comm, id, coll, "dfcclPrepareBroadcast");
  });
}
dfcclResult_t dfcclPrepareReduce(size_t count, dfcclDataType_t datatype, dfcclRedOp_t op, int root, dfcclComm_t comm,
                                 int id, dfcclPersistent_t* coll) {
  return guard(
      [&] { return prepare(core::Kind::Reduce, count, datatype, op, root, comm, id, coll, "dfcclPrepareReduce"); });
}

dfcclResult_t dfcclStart(dfcclPersistent_t coll, const void* sendbuff, void* recvbuff, int priority,
                         cudaStream_t stream, dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclStart";
    dfcclPersistent* p = check_persistent(coll, fn);
    const CommRef held = check_comm(p->comm, fn);
    dfcclComm* c = held.get();
    core::Desc d = p->desc;
    d.send = sendbuff;
    d.recv = recvbuff;
    d.priority = priority;
    check_buffers(d, c, fn);
    return submit(c, d, p->id, stream, request, fn);
  });
}

dfcclResult_t dfcclPersistentFree(dfcclPersistent_t coll) {
  return guard([&] {
    dfcclPersistent* p = check_persistent(coll, "dfcclPersistentFree");
    if (const CommRef c = comm_lookup(p->comm).comm) {
      std::lock_guard<std::mutex> lk(c->mu);
      c->persistent_prepared[p->id] = false;
    }
    p->magic = 0;
    delete p;
    return dfcclSuccess;
  });
}

}  // extern "C"
