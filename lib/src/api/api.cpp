// The C API: argument checks (every message names the argument), then the communicator and engine calls. No
// exception crosses this file's functions (guard in error.h).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <cstdio>

#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "comm/comm.h"
#include "comm/links.h"
#include "engine/requests.h"
#include "match/match_board.h"
#include "net/transport.h"
#include "settings/env.h"
#include "transport/p2p.h"
#include "transport/persistent.h"
#include "util/error.h"
#include "util/names.h"
#include "util/thread_name.h"

using namespace dfccl;

namespace {

constexpr uint64_t kMaxCount = uint64_t(1) << 48;

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw Error(dfcclInvalidArgument, fmt::format("{}: {}", fn, what));
}

[[noreturn]] void comm_gone(const char* fn) {
  throw Error(dfcclInvalidUsage, fmt::format("{}: argument 'comm' was destroyed or aborted", fn));
}

// A failure that ended the communicator is reported as such (a peer's: dfcclRemoteError naming the rank; collectives
// that disagree: dfcclInvalidUsage naming the field), unless the application aborted the communicator itself; any
// other end of it as dfcclInvalidUsage.
dfcclComm* check_comm(dfcclComm_t comm, const char* fn) {
  if (!comm) bad(fn, "argument 'comm' is NULL");
  if (comm->magic != dfcclComm::kMagic) bad(fn, "argument 'comm' is not a communicator");
  if (!comm->alive) {
    const int code = comm->fail_code.load(std::memory_order_acquire);
    if (code != dfcclSuccess && !comm->user_aborted)
      throw Error(dfcclResult_t(code), fmt::format("{}: {}", fn, comm->failure));
    comm_gone(fn);
  }
  return comm;
}

// A finished request's status; an error that a peer's failure caused becomes this thread's last error.
dfcclResult_t finished_status(RequestState& s) {
  const int st = s.status.load(std::memory_order_acquire);
  if (st != dfcclSuccess && st != dfcclInProgress) {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.error.empty()) set_last_error(s.error);
  }
  return dfcclResult_t(st);
}

// The engine of a communicator that check_comm found alive, held for the call: another thread may abort the
// communicator meanwhile (the abort is how a blocked device synchronization ends).
std::shared_ptr<Engine> live_engine(dfcclComm* c, const char* fn) {
  std::shared_ptr<Engine> e = engine_ref(c);
  if (!e) comm_gone(fn);
  return e;
}

void check_dtype(dfcclDataType_t t, const char* fn) {
  if (int(t) < 0 || int(t) >= dfcclNumTypes)
    bad(fn, fmt::format("argument 'datatype' = {} is not a dfcclDataType_t (0..{})", int(t), int(dfcclNumTypes) - 1));
}

void check_op(dfcclRedOp_t op, const char* fn) {
  if (int(op) < 0 || int(op) >= dfcclNumOps)
    bad(fn, fmt::format("argument 'op' = {} is not a dfcclRedOp_t (0..{})", int(op), int(dfcclNumOps) - 1));
}

void check_root(int root, const dfcclComm* c, const char* fn) {
  if (root < 0 || root >= c->nranks)
    bad(fn, fmt::format("argument 'root' = {} is not a rank of the communicator (0..{})", root, c->nranks - 1));
}

void check_count(size_t count, const char* name, const char* fn) {
  if (count > kMaxCount)
    bad(fn, fmt::format("argument '{}' = {} is too large (a negative value converted to size_t?)", name, count));
}

// Caller: a check of argument `name` whose CUDA query failed with e (already cleared): throws
// dfcclUnhandledCudaError naming e unless argument_fault (e.g. a context failed by a kernel fault is not the
// argument's); returns when it is, for the caller's own message.
void throw_unless_argument_fault(cudaError_t e, bool argument_fault, const char* name, const char* fn) {
  if (!argument_fault)
    throw Error(dfcclUnhandledCudaError, fmt::format("{}: CUDA error {} ({}) while checking argument '{}'", fn, int(e),
                                                     cudaGetErrorString(e), name));
}

// A user buffer of `elems` elements: present, aligned to the element size, and memory the executor can reach.
void check_buffer(const void* p, uint64_t elems, dfcclDataType_t t, const char* name, const dfcclComm* c,
                  const char* fn) {
  if (elems == 0) return;
  if (!p) bad(fn, fmt::format("argument '{}' is NULL", name));
  const uint32_t es = core::dtype_size(core::DType(t));
  if (reinterpret_cast<uintptr_t>(p) % es != 0)
    bad(fn, fmt::format("argument '{}' ({}) is not aligned to the {}-byte element size of {}", name, p, es,
                        kTypeNames[int(t)]));
  if (c->config.executor != dfcclExecutorCuda) return;
  cudaPointerAttributes attr{};
  if (const cudaError_t e = cudaPointerGetAttributes(&attr, p); e != cudaSuccess) {
    cudaGetLastError();
    throw_unless_argument_fault(e, e == cudaErrorInvalidValue, name, fn);
    bad(fn, fmt::format("argument '{}' ({}) is not memory CUDA knows", name, p));
  }
  const bool device_ok = attr.type == cudaMemoryTypeDevice && attr.device == c->config.device;
  const bool managed_ok = attr.type == cudaMemoryTypeManaged;
  if (!device_ok && !managed_ok)
    bad(fn, fmt::format("argument '{}' ({}) is not device memory of GPU {}", name, p, c->config.device));
}

// The elements a collective reads from sendbuff and writes to recvbuff on this rank (NCCL's rules; 0: untouched):
// the one home of the per-kind buffer sizes, for the five entry points and dfcclStart.
struct BufferElems {
  uint64_t send, recv;
};
BufferElems buffer_elems(core::Kind kind, uint64_t count, uint64_t nranks, bool root) {
  switch (kind) {
    case core::Kind::AllGather: return {count, count * nranks};
    case core::Kind::ReduceScatter: return {count * nranks, count};
    case core::Kind::Broadcast: return {root ? count : 0, count};
    case core::Kind::Reduce: return {count, root ? count : 0};
    default: break;  // AllReduce (Send and Recv do not come here)
  }
  return {count, count};
}

// Both buffers of a described collective, sized by buffer_elems.
void check_buffers(const core::Desc& d, const dfcclComm* c, const char* fn) {
  const BufferElems e = buffer_elems(d.kind, d.count, uint64_t(c->nranks), c->rank == d.root);
  check_buffer(d.send, e.send, dfcclDataType_t(d.dtype), "sendbuff", c, fn);
  check_buffer(d.recv, e.recv, dfcclDataType_t(d.dtype), "recvbuff", c, fn);
}

// A stream of the CUDA executor must not be capturing a CUDA graph: refused before anything is queued. A submission
// takes its slot, its sequence number and its place in its communicator's order on the host, at the call; a graph
// would hold only its doorbell and dfcclWait's wait, and each replay after the first would skip the collective
// without an error (docs/design.md, "Streams and completion"). A stream CUDA does not know is refused too.
void check_not_capturing(cudaStream_t stream, dfcclExecutor_t executor, const char* fn) {
  if (executor != dfcclExecutorCuda || stream == DFCCL_NO_STREAM) return;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &status);
  if (e == cudaErrorStreamCaptureImplicit) {
    cudaGetLastError();
    throw Error(dfcclNotSupported,
                fmt::format("{}: argument 'stream' is the legacy default stream while a CUDA graph is being captured "
                            "on this device; use another stream, or submit after the capture",
                            fn));
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw_unless_argument_fault(e, e == cudaErrorInvalidResourceHandle || e == cudaErrorInvalidValue, "stream", fn);
    bad(fn, fmt::format("argument 'stream' ({}) is not a stream CUDA knows: {}", static_cast<void*>(stream),
                        cudaGetErrorString(e)));
  }
  if (status != cudaStreamCaptureStatusNone)
    throw Error(dfcclNotSupported,
                fmt::format("{}: argument 'stream' is {} CUDA graph capture: dfccl collectives cannot be captured "
                            "(each would run at the first replay only); submit and wait outside the capture",
                            fn, status == cudaStreamCaptureStatusActive ? "in a" : "in an invalidated"));
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
  check_not_capturing(stream, dfcclExecutor_t(c->config.executor), fn);
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

void check_peer(int peer, const dfcclComm* c, const char* fn) {
  if (peer < 0 || peer >= c->nranks)
    bad(fn, fmt::format("argument 'peer' = {} is not a rank of the communicator (0..{})", peer, c->nranks - 1));
}

// Queues point-to-point transfers (one request, or a compound one for several) on `lane`.
dfcclResult_t submit_p2p(dfcclComm* c, std::vector<core::Desc> parts, uint32_t lane, cudaStream_t stream,
                         dfcclRequest_t* request, const char* fn) {
  check_not_capturing(stream, dfcclExecutor_t(c->config.executor), fn);
  auto reqs = comm_submit_p2p(c, std::move(parts), lane, stream);
  if (request) hand_out(reqs.size() == 1 ? reqs.front() : compound_request(std::move(reqs)), request);
  return dfcclSuccess;
}

// dfcclSend (kind Send, buf the send buffer) and dfcclRecv (kind Recv, buf the receive buffer): one transfer.
dfcclResult_t transfer(core::Kind kind, const void* buf, size_t count, dfcclDataType_t datatype, int peer,
                       dfcclComm_t comm, int priority, cudaStream_t stream, dfcclRequest_t* request) {
  const bool send = kind == core::Kind::Send;
  const char* fn = send ? "dfcclSend" : "dfcclRecv";
  dfcclComm* c = check_comm(comm, fn);
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

// The elements [lo, hi) that the blocks `counts` at `displs` cover; checks each block's count and end (names the
// arrays' arguments).
std::pair<uint64_t, uint64_t> check_blocks(const size_t* counts, const size_t* displs, int n, const char* counts_name,
                                           const char* displs_name, const char* fn) {
  if (!counts) bad(fn, fmt::format("argument '{}' is NULL", counts_name));
  if (!displs) bad(fn, fmt::format("argument '{}' is NULL", displs_name));
  uint64_t lo = ~uint64_t(0), hi = 0;
  for (int p = 0; p < n; ++p) {
    const std::string at = fmt::format("{}[{}]", counts_name, p), dat = fmt::format("{}[{}]", displs_name, p);
    check_count(counts[p], at.c_str(), fn);
    check_count(displs[p], dat.c_str(), fn);
    if (counts[p] == 0) continue;
    lo = std::min<uint64_t>(lo, displs[p]);
    hi = std::max<uint64_t>(hi, displs[p] + counts[p]);
  }
  return {lo, hi};
}

// dfcclAllToAll(v): checks every block, then queues a send to and a receive from every rank (itself included) on the
// all-to-all lane, all or none, under one request.
dfcclResult_t all_to_all(const AllToAllArgs& a, dfcclDataType_t t, dfcclComm* c, int priority, cudaStream_t stream,
                         dfcclRequest_t* request, const char* fn) {
  check_dtype(t, fn);
  const int n = c->nranks;
  const auto [slo, shi] = check_blocks(a.sendcounts, a.sdispls, n, "sendcounts", "sdispls", fn);
  const auto [rlo, rhi] = check_blocks(a.recvcounts, a.rdispls, n, "recvcounts", "rdispls", fn);
  const uint64_t es = core::dtype_size(core::DType(t));
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

dfcclPersistent* check_persistent(dfcclPersistent_t p, const char* fn) {
  if (!p) bad(fn, "argument 'coll' is NULL");
  if (p->magic != dfcclPersistent::kMagic) bad(fn, "argument 'coll' is not a prepared persistent collective");
  return p;
}

dfcclResult_t prepare(core::Kind kind, size_t count, dfcclDataType_t t, dfcclRedOp_t op, int root, dfcclComm_t comm,
                      int id, dfcclPersistent_t* coll, const char* fn) {
  dfcclComm* c = check_comm(comm, fn);
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
  p->comm = c;
  p->desc = make_desc(kind, nullptr, nullptr, count, t, op, root, 0);
  p->id = id;
  *coll = p;
  return dfcclSuccess;
}

}  // namespace

extern "C" {

const char* dfcclGetErrorString(dfcclResult_t r) {
  switch (r) {
    case dfcclSuccess: return "no error";
    case dfcclUnhandledCudaError: return "unhandled CUDA error";
    case dfcclSystemError: return "system error";
    case dfcclInternalError: return "internal error";
    case dfcclInvalidArgument: return "invalid argument";
    case dfcclInvalidUsage: return "invalid usage";
    case dfcclRemoteError: return "remote process exited or there was a network error";
    case dfcclInProgress: return "operation in progress";
    case dfcclTimeout: return "timed out";
    case dfcclAborted: return "aborted";
    case dfcclNoResources: return "limit reached (retry after completions)";
    case dfcclNotSupported: return "not supported here";
    default: return "unknown result code";
  }
}

const char* dfcclGetLastError(dfcclComm_t) { return last_error(); }

dfcclResult_t dfcclGetVersion(int* version) {
  return guard([&] {
    if (!version) bad("dfcclGetVersion", "argument 'version' is NULL");
    *version = DFCCL_VERSION_CODE;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclGetFeatures(int* features) {
  return guard([&] {
    if (!features) bad("dfcclGetFeatures", "argument 'features' is NULL");
    *features = net::transport_available() ? DFCCL_FEATURE_NETWORK : 0;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclGetUniqueId(dfcclUniqueId* id) {
  return guard([&] {
    if (!id) bad("dfcclGetUniqueId", "argument 'uniqueId' is NULL");
    *id = make_unique_id();
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommInitRankConfig(dfcclComm_t* comm, int nranks, dfcclUniqueId commId, int rank,
                                      const dfcclConfig_t* config) {
  return guard([&] {
    const char* fn = "dfcclCommInitRank";
    if (!comm) bad(fn, "argument 'comm' is NULL");
    *comm = nullptr;
    if (nranks < 1) bad(fn, fmt::format("argument 'nranks' = {} must be at least 1", nranks));
    if (rank < 0 || rank >= nranks) bad(fn, fmt::format("argument 'rank' = {} is outside 0..{}", rank, nranks - 1));
    parse_unique_id(commId);
    const dfcclConfig_t cfg = resolve_config(config, rank);
    *comm = comm_init(nranks, commId, rank, cfg);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommInitRank(dfcclComm_t* comm, int nranks, dfcclUniqueId commId, int rank) {
  return dfcclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

dfcclResult_t dfcclCommInitAllConfig(dfcclComm_t* comms, int ndev, const int* devlist, const dfcclConfig_t* config) {
  return guard([&] {
    const char* fn = "dfcclCommInitAll";
    if (!comms) bad(fn, "argument 'comms' is NULL");
    if (ndev < 1) bad(fn, fmt::format("argument 'ndev' = {} must be at least 1", ndev));
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
    const dfcclUniqueId id = make_unique_id();
    std::vector<dfcclConfig_t> cfgs;
    for (int i = 0; i < ndev; ++i) {
      dfcclConfig_t c = resolve_config(config, i);
      if (devlist) {
        if (devlist[i] < 0) bad(fn, fmt::format("argument 'devlist[{}]' = {} is not a device", i, devlist[i]));
        c.device = devlist[i];
      } else if (!config || config->device < 0) {
        c.device = i;
      }
      cfgs.push_back(c);
    }
    std::vector<dfcclResult_t> results(size_t(ndev), dfcclSuccess);
    std::vector<std::string> messages(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        name_this_thread("init", unsigned(i));
        results[size_t(i)] = guard([&] {
          comms[i] = comm_init(ndev, id, i, cfgs[size_t(i)]);
          return dfcclSuccess;
        });
        if (results[size_t(i)] != dfcclSuccess) messages[size_t(i)] = last_error();
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[size_t(i)] != dfcclSuccess) {
        for (int j = 0; j < ndev; ++j)
          if (comms[j]) {
            comm_abort(comms[j]);
            comms[j] = nullptr;
          }
        throw Error(results[size_t(i)], fmt::format("{}: rank {}: {}", fn, i, messages[size_t(i)]));
      }
    }
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommInitAll(dfcclComm_t* comms, int ndev, const int* devlist) {
  return dfcclCommInitAllConfig(comms, ndev, devlist, nullptr);
}

dfcclResult_t dfcclCommSplit(dfcclComm_t comm, int color, int key, dfcclComm_t* newcomm, const dfcclConfig_t* config) {
  return guard([&] {
    const char* fn = "dfcclCommSplit";
    dfcclComm* c = check_comm(comm, fn);
    if (!newcomm) bad(fn, "argument 'newcomm' is NULL");
    if (color < DFCCL_SPLIT_NOCOLOR) bad(fn, fmt::format("argument 'color' = {} is negative", color));
    *newcomm = comm_split(c, color, key, config);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommDestroy(dfcclComm_t comm) {
  return guard([&] {
    // After a failure (a peer's death, a mismatch) the communicator was already aborted and released: nothing is
    // left to wait for.
    if (comm && comm->magic == dfcclComm::kMagic && comm->fail_code.load() != dfcclSuccess && !comm->user_aborted) {
      comm_destroy(comm);
      return dfcclSuccess;
    }
    dfcclComm* c = check_comm(comm, "dfcclCommDestroy");
    comm_destroy(c);  // the handle stays allocated, marked dead, so later use is reported rather than undefined
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommAbort(dfcclComm_t comm) {
  return guard([&] {
    const char* fn = "dfcclCommAbort";
    if (!comm) bad(fn, "argument 'comm' is NULL");
    if (comm->magic != dfcclComm::kMagic) bad(fn, "argument 'comm' is not a communicator");
    comm_abort(comm);  // a second abort, or one after destroy, does nothing
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommGetAsyncError(dfcclComm_t comm, dfcclResult_t* asyncError) {
  return guard([&] {
    const char* fn = "dfcclCommGetAsyncError";
    if (!comm || comm->magic != dfcclComm::kMagic) bad(fn, "argument 'comm' is not a communicator");
    if (!asyncError) bad(fn, "argument 'asyncError' is NULL");
    *asyncError = dfcclResult_t(comm->async_error.load());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommCount(dfcclComm_t comm, int* count) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclCommCount");
    if (!count) bad("dfcclCommCount", "argument 'count' is NULL");
    *count = c->nranks;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommUserRank(dfcclComm_t comm, int* rank) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclCommUserRank");
    if (!rank) bad("dfcclCommUserRank", "argument 'rank' is NULL");
    *rank = c->rank;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclCommDevice(dfcclComm_t comm, int* device) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclCommDevice");
    if (!device) bad("dfcclCommDevice", "argument 'device' is NULL");
    *device = c->config.device;
    return dfcclSuccess;
  });
}

namespace {
// The transport of c's ring hop to or from `peer` (a ring neighbour): the network for a remote rank, else what the
// communicator's regions are (shared memory on the host executor, host memory without peer access, peer memory).
int hop_transport(const dfcclComm* c, int peer) {
  if (size_t(peer) < c->net.remote.size() && c->net.remote[size_t(peer)]) return dfcclTransportNetwork;
  if (c->config.executor == dfcclExecutorHost) return dfcclTransportSharedMemory;
  return c->host_path ? dfcclTransportHostMemory : dfcclTransportPeerMemory;
}
}  // namespace

dfcclResult_t dfcclCommGetInfo(dfcclComm_t comm, dfcclCommInfo_t* info) {
  return guard([&] {
    const char* fn = "dfcclCommGetInfo";
    dfcclComm* c = check_comm(comm, fn);
    if (!info) bad(fn, "argument 'info' is NULL");
    std::shared_ptr<Engine> e = live_engine(c, fn);
    const TransportParams& tp = e->transport();
    const core::CommStatic& s = c->host_dev.s;
    dfcclCommInfo_t out{};
    out.executor = c->config.executor;
    out.mode = c->config.mode;
    out.device = c->config.device;
    out.nranks = c->nranks;
    out.rank = c->rank;
    out.prev = s.prev;
    out.next = s.next;
    out.blocks = int(tp.nchan);
    out.threadsPerBlock = int(e->exec().threads_per_block());
    out.slots = int(tp.nslots);
    out.lanes = int(tp.seq_lanes);
    out.persistentLanes = int(tp.persistent_lanes);
    out.slotBytes = c->geometry.slot_bytes;
    out.connectionBytes =
        c->region.bytes + sizeof(core::LaneState) * tp.nchan * s.nlanes + c->net.shadow_bytes[0] + persistent_bytes(c);
    out.p2pChannels = int(c->p2p.nchan);
    out.p2pConnections = p2p_connections(c);
    out.p2pBytes = c->p2p.region.bytes +
                   (c->p2p.nchan ? sizeof(core::LaneState) * tp.nchan * kP2pLanes * 2 * size_t(c->nranks) : 0) +
                   c->net.shadow_bytes[1];
    out.hierarchyRanksPerHost = c->hierarchy.intra ? c->hierarchy.local_size : 0;
    out.transportPrev = hop_transport(c, s.prev);
    out.transportNext = hop_transport(c, s.next);
    const bool net = out.transportPrev == dfcclTransportNetwork || out.transportNext == dfcclTransportNetwork;
    out.transport = net ? dfcclTransportNetwork : out.transportNext;
    *info = out;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, dfcclDataType_t datatype,
                             dfcclRedOp_t op, dfcclComm_t comm, int priority, cudaStream_t stream,
                             dfcclRequest_t* request) {
  return guard([&] {
    const char* fn = "dfcclAllReduce";
    dfcclComm* c = check_comm(comm, fn);
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
    dfcclComm* c = check_comm(comm, fn);
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
    dfcclComm* c = check_comm(comm, fn);
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
    dfcclComm* c = check_comm(comm, fn);
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
    dfcclComm* c = check_comm(comm, fn);
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
    dfcclComm* c = check_comm(comm, fn);
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
    dfcclComm* c = check_comm(comm, fn);
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
    dfcclComm* c = check_comm(p->comm, fn);
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
    if (p->comm && p->comm->magic == dfcclComm::kMagic) {
      std::lock_guard<std::mutex> lk(p->comm->mu);
      p->comm->persistent_prepared[p->id] = false;
    }
    p->magic = 0;
    delete p;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclWait(dfcclRequest_t request, cudaStream_t stream) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclWait");
    if (stream == DFCCL_NO_STREAM)
      bad("dfcclWait", "argument 'stream' is DFCCL_NO_STREAM: give the stream that must wait for the collective "
                       "(or wait on the host: dfcclSynchronize)");
    std::shared_ptr<Engine> engine = state->engine.lock();
    if (engine) check_not_capturing(stream, engine->executor_kind(), "dfcclWait");
    // The host executor waits for the collective here, and answers with its status (aborted, a peer's failure).
    const bool host = engine ? engine->executor_kind() == dfcclExecutorHost : true;
    if (engine && state->status.load(std::memory_order_acquire) == dfcclInProgress)
      engine->wait_on_stream(state, stream);
    return host ? finished_status(*state) : dfcclSuccess;
  });
}

dfcclResult_t dfcclTest(dfcclRequest_t request, int* done) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclTest");
    if (!done) bad("dfcclTest", "argument 'done' is NULL");
    const int st = state->status.load(std::memory_order_acquire);
    *done = st != dfcclInProgress;
    return *done ? finished_status(*state) : dfcclSuccess;
  });
}

dfcclResult_t dfcclSynchronize(dfcclRequest_t request, int timeoutMs) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclSynchronize");
    if (timeoutMs < 0) bad("dfcclSynchronize", fmt::format("argument 'timeoutMs' = {} must be >= 0", timeoutMs));
    if (!wait_request(*state, timeoutMs))
      throw Error(dfcclTimeout, fmt::format("dfcclSynchronize: the collective did not finish within {} ms", timeoutMs));
    return finished_status(*state);
  });
}

dfcclResult_t dfcclRequestSetCallback(dfcclRequest_t request, dfcclCallback_t fn, void* userArg) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclRequestSetCallback");
    if (!fn) bad("dfcclRequestSetCallback", "argument 'fn' is NULL");
    RequestState& s = *state;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      if (s.status.load() == dfcclInProgress) {
        s.callback = fn;
        s.callback_arg = userArg;
        return dfcclSuccess;
      }
    }
    fn(request, dfcclResult_t(s.status.load()), userArg);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclRequestGetInfo(dfcclRequest_t request, dfcclRequestInfo_t* info) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclRequestGetInfo");
    if (!info) bad("dfcclRequestGetInfo", "argument 'info' is NULL");
    std::lock_guard<std::mutex> lk(state->mu);
    *info = state->info;
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclRequestGetMissingRanks(dfcclRequest_t request, int* ranks, int capacity, int* count) {
  return guard([&] {
    const char* fn = "dfcclRequestGetMissingRanks";
    const std::shared_ptr<RequestState> state = request_state(request, fn);
    if (!count) bad(fn, "argument 'count' is NULL");
    if (capacity < 0) bad(fn, fmt::format("argument 'capacity' = {} is negative", capacity));
    if (capacity > 0 && !ranks) bad(fn, "argument 'ranks' is NULL");
    std::vector<int> missing;
    if (state->status.load(std::memory_order_acquire) == dfcclInProgress)
      if (std::shared_ptr<Engine> e = state->engine.lock()) missing = e->missing_ranks(*state);
    for (size_t i = 0; i < missing.size() && i < size_t(capacity); ++i) ranks[i] = missing[i];
    *count = int(missing.size());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclRequestFree(dfcclRequest_t request) {
  return guard([&] {
    const std::shared_ptr<RequestState> state = request_state(request, "dfcclRequestFree");
    {
      RequestState& s = *state;
      std::unique_lock<std::mutex> lk(s.mu);
      s.callback = nullptr;  // nobody is left to be called back with this handle
      s.handle = nullptr;
      // A callback already taken by the progress thread: wait until it returns, unless this is that callback.
      if (s.callback_thread != std::this_thread::get_id()) s.cv.wait(lk, [&] { return !s.callback_running; });
    }
    request_handle_free(request);
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclGetStats(dfcclComm_t comm, dfcclStats_t* stats) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclGetStats");
    if (!stats) bad("dfcclGetStats", "argument 'stats' is NULL");
    *stats = live_engine(c, "dfcclGetStats")->stats();
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclDebugDump(dfcclComm_t comm, int deviceState) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclDebugDump");
    live_engine(c, "dfcclDebugDump")->debug_dump(stderr, deviceState != 0);
    std::fprintf(stderr, "%s\n", p2p_describe(c).c_str());
    return dfcclSuccess;
  });
}

dfcclResult_t dfcclDeviceSynchronize(dfcclComm_t comm) {
  return guard([&] {
    dfcclComm* c = check_comm(comm, "dfcclDeviceSynchronize");
    live_engine(c, "dfcclDeviceSynchronize")->device_synchronize();  // our reference: an abort may release it meanwhile
    return dfcclSuccess;
  });
}

}  // extern "C"
