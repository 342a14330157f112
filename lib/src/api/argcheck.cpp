#include "api/argcheck.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/collectives/collectives.h"
#include "util/error.h"
#include "util/names.h"

namespace dfccl::api {

[[noreturn]] void bad(const char* fn, const std::string& what) {
  throw Error(dfcclInvalidArgument, fmt::format("{}: {}", fn, what));
}

[[noreturn]] void comm_gone(const char* fn) {
  throw Error(dfcclInvalidUsage, fmt::format("{}: argument 'comm' was destroyed or aborted", fn));
}

CommRef check_comm(dfcclComm_t comm, const char* fn) {
  if (!comm) bad(fn, "argument 'comm' is NULL");
  CommLookup l = comm_lookup(comm);
  if (l.ended) comm_gone(fn);
  if (!l.comm) bad(fn, "argument 'comm' is not a communicator");
  const dfcclComm* c = l.comm.get();
  if (!c->alive) {
    const int code = c->fail_code.load(std::memory_order_acquire);
    if (code != dfcclSuccess && !c->user_aborted)
      throw Error(dfcclResult_t(code), fmt::format("{}: {}", fn, c->failure));
    comm_gone(fn);
  }
  return std::move(l.comm);
}

dfcclResult_t finished_status(RequestState& s) {
  const int st = s.status.load(std::memory_order_acquire);
  if (st != dfcclSuccess && st != dfcclInProgress) {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.error.empty()) set_last_error(s.error);
  }
  return dfcclResult_t(st);
}

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

void throw_unless_argument_fault(cudaError_t e, bool argument_fault, const char* name, const char* fn) {
  if (!argument_fault)
    throw Error(dfcclUnhandledCudaError, fmt::format("{}: CUDA error {} ({}) while checking argument '{}'", fn, int(e),
                                                     cudaGetErrorString(e), name));
}

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

namespace {

// The bytes [lo, hi) of `elems` elements of `es` bytes from p (no overflow: kMaxCount times nranks times 8 bytes can
// exceed 64 bits).
struct Span {
  unsigned __int128 lo, hi;
};
Span span_of(const void* p, uint64_t elems, uint64_t es) {
  const auto lo = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(p));
  return {lo, lo + static_cast<unsigned __int128>(elems) * es};
}
bool overlap(const Span& a, const Span& b) { return a.lo < b.hi && b.lo < a.hi; }

const char* in_place_rule(core::Kind kind) {
  switch (kind) {
    case core::Kind::AllGather: return "sendbuff == recvbuff + rank * sendcount";
    case core::Kind::ReduceScatter: return "recvbuff == sendbuff + rank * recvcount";
    default: return "sendbuff == recvbuff";
  }
}

}  // namespace

void check_buffers(const core::Desc& d, const dfcclComm* c, const char* fn) {
  const BufferElems e = buffer_elems(d.kind, d.count, uint64_t(c->nranks), c->rank == d.root);
  check_buffer(d.send, e.send, dfcclDataType_t(d.dtype), "sendbuff", c, fn);
  check_buffer(d.recv, e.recv, dfcclDataType_t(d.dtype), "recvbuff", c, fn);
  // Buffers that overlap other than by the kind's in-place rule (core::in_place, which the programs follow) would
  // have the collective read input that it already overwrote.
  if (e.send == 0 || e.recv == 0 || core::in_place(d, c->rank)) return;
  const uint64_t es = core::dtype_size(d.dtype);
  if (!overlap(span_of(d.send, e.send, es), span_of(d.recv, e.recv, es))) return;
  const auto s = reinterpret_cast<uintptr_t>(d.send), r = reinterpret_cast<uintptr_t>(d.recv);
  const std::string where = s == r ? "at the same address"
                                   : fmt::format("{} starts {} bytes after {}", s > r ? "sendbuff" : "recvbuff",
                                                 s > r ? s - r : r - s, s > r ? "recvbuff" : "sendbuff");
  bad(fn, fmt::format("arguments 'sendbuff' ({}) and 'recvbuff' ({}) overlap ({}), and {} of {} elements is in place "
                      "only with {} on rank {}",
                      d.send, d.recv, where, kKindNames[int(d.kind)], d.count, in_place_rule(d.kind), c->rank));
}

bool stream_capturing(cudaStream_t stream, dfcclExecutor_t executor, const char* fn) {
  if (executor != dfcclExecutorCuda || stream == DFCCL_NO_STREAM) return false;
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
  if (status == cudaStreamCaptureStatusInvalidated)
    throw Error(dfcclInvalidUsage,
                fmt::format("{}: argument 'stream' is in an invalidated CUDA graph capture (end the capture)", fn));
  return status == cudaStreamCaptureStatusActive;
}

void check_peer(int peer, const dfcclComm* c, const char* fn) {
  if (peer < 0 || peer >= c->nranks)
    bad(fn, fmt::format("argument 'peer' = {} is not a rank of the communicator (0..{})", peer, c->nranks - 1));
}

std::pair<uint64_t, uint64_t> check_blocks(const Blocks& b, int n, uint64_t es, bool disjoint, const char* fn) {
  if (!b.counts) bad(fn, fmt::format("argument '{}' is NULL", b.counts_name));
  if (!b.displs) bad(fn, fmt::format("argument '{}' is NULL", b.displs_name));
  const uint64_t base = reinterpret_cast<uintptr_t>(b.buf);
  uint64_t lo = ~uint64_t(0), hi = 0;
  std::vector<int> used;  // the non-empty blocks
  for (int p = 0; p < n; ++p) {
    const std::string at = fmt::format("{}[{}]", b.counts_name, p), dat = fmt::format("{}[{}]", b.displs_name, p);
    check_count(b.counts[p], at.c_str(), fn);
    check_count(b.displs[p], dat.c_str(), fn);
    if (b.counts[p] == 0) continue;
    const uint64_t end = b.displs[p] + b.counts[p];  // at most 2^49: no overflow
    if (end > kMaxCount || end * es > ~base)
      bad(fn, fmt::format("arguments '{}' = {} and '{}' = {} end at element {}, past 2^48 elements or the address "
                          "space from {} ({})",
                          dat, b.displs[p], at, b.counts[p], end, b.buf_name, b.buf));
    lo = std::min<uint64_t>(lo, b.displs[p]);
    hi = std::max<uint64_t>(hi, end);
    used.push_back(p);
  }
  if (disjoint) {  // no element is written twice: sorted by displacement, each block ends before the next begins
    std::sort(used.begin(), used.end(), [&](int x, int y) { return b.displs[x] < b.displs[y]; });
    for (size_t k = 1; k < used.size(); ++k) {
      const int p = used[k - 1], q = used[k];
      if (b.displs[p] + b.counts[p] > b.displs[q])
        bad(fn, fmt::format("the blocks of ranks {} and {} in '{}' overlap: '{}[{}]' = {} with '{}[{}]' = {} reaches "
                            "past '{}[{}]' = {}",
                            p, q, b.buf_name, b.displs_name, p, b.displs[p], b.counts_name, p, b.counts[p],
                            b.displs_name, q, b.displs[q]));
    }
  }
  return {lo, hi};
}

dfcclPersistent* check_persistent(dfcclPersistent_t p, const char* fn) {
  if (!p) bad(fn, "argument 'coll' is NULL");
  if (p->magic != dfcclPersistent::kMagic) bad(fn, "argument 'coll' is not a prepared persistent collective");
  return p;
}

}  // namespace dfccl::api
