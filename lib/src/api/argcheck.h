// The C API's argument checks (every message names the argument and the entry point `fn`) and the lookups they make
// (a live communicator, its engine, a persistent collective). Each throws dfccl::Error; the entry points' guard turns
// it into the result code.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "api/comm_handles.h"
#include "comm/comm_state.h"
#include "engine/engine.h"

namespace dfccl::api {

inline constexpr uint64_t kMaxCount = uint64_t(1) << 48;

[[noreturn]] void bad(const char* fn, const std::string& what);

[[noreturn]] void comm_gone(const char* fn);

// The live communicator a handle names, held for the caller's call. A failure that ended the communicator is
// reported as such (a peer's: dfcclRemoteError naming the rank; collectives that disagree: dfcclInvalidUsage naming
// the field); a handle that was destroyed or aborted as dfcclInvalidUsage; anything else as dfcclInvalidArgument.
CommRef check_comm(dfcclComm_t comm, const char* fn);

// A finished request's status; an error that a peer's failure caused becomes this thread's last error.
dfcclResult_t finished_status(RequestState& s);

// The engine of a communicator that check_comm found alive, held for the call: another thread may abort the
// communicator meanwhile (the abort is how a blocked device synchronization ends).
std::shared_ptr<Engine> live_engine(dfcclComm* c, const char* fn);

void check_dtype(dfcclDataType_t t, const char* fn);

void check_op(dfcclRedOp_t op, const char* fn);

void check_root(int root, const dfcclComm* c, const char* fn);

void check_count(size_t count, const char* name, const char* fn);

// Caller: a check of argument `name` whose CUDA query failed with e (already cleared): throws
// dfcclUnhandledCudaError naming e unless argument_fault (e.g. a context failed by a kernel fault is not the
// argument's); returns when it is, for the caller's own message.
void throw_unless_argument_fault(cudaError_t e, bool argument_fault, const char* name, const char* fn);

// A user buffer of `elems` elements: present, aligned to the element size, and memory the executor can reach.
void check_buffer(const void* p, uint64_t elems, dfcclDataType_t t, const char* name, const dfcclComm* c,
                  const char* fn);

// The elements a collective reads from sendbuff and writes to recvbuff on this rank (NCCL's rules; 0: untouched):
// the one home of the per-kind buffer sizes, for the five entry points and dfcclStart.
struct BufferElems {
  uint64_t send, recv;
};

BufferElems buffer_elems(core::Kind kind, uint64_t count, uint64_t nranks, bool root);

// Both buffers of a described collective, sized by buffer_elems.
void check_buffers(const core::Desc& d, const dfcclComm* c, const char* fn);

// Whether a stream of the CUDA executor is capturing a CUDA graph (then the call is captured: comm/comm_graph.h).
// Refused: a stream CUDA does not know, the legacy stream while another stream captures in global mode (CUDA
// invalidates that capture), a stream whose capture was invalidated.
bool stream_capturing(cudaStream_t stream, dfcclExecutor_t executor, const char* fn);

void check_peer(int peer, const dfcclComm* c, const char* fn);

// One side of an all-to-allv: blocks counts[p] elements long at displs[p] elements from buf, and the arguments' names.
struct Blocks {
  const void* buf;
  const size_t *counts, *displs;
  const char *buf_name, *counts_name, *displs_name;
};

// The elements [lo, hi) that the n blocks cover. Checks each block's count and displacement, and that its end stays
// inside the address space from buf (the API has no buffer size: a block past the end of its buffer cannot be
// told); with `disjoint` (receive blocks), that no two non-empty blocks overlap. Messages name the arguments.
std::pair<uint64_t, uint64_t> check_blocks(const Blocks& b, int n, uint64_t es, bool disjoint, const char* fn);

dfcclPersistent* check_persistent(dfcclPersistent_t p, const char* fn);

// An out-struct of dfccl.h (dfcclCommInfo_t, dfcclRequestInfo_t, dfcclStats_t) named `name`, of type `type`: present,
// and its size field the size this library fills (a program built against another dfccl.h is refused, not written
// past its struct's end).
template <typename T>
void check_out_struct(const T* p, const char* name, const char* type, const char* fn) {
  if (!p) bad(fn, fmt::format("argument '{}' is NULL", name));
  if (p->size != sizeof(T))
    bad(fn, fmt::format("argument '{}': {}->size = {}, but this library fills sizeof({}) = {} (initialise it with the "
                        "initializer of its dfccl.h)",
                        name, name, p->size, type, sizeof(T)));
}

// Writes `value` into the out-struct that check_out_struct accepted, keeping its size field.
template <typename T>
void copy_out(T* p, T value) {
  value.size = sizeof(T);
  *p = value;
}

}  // namespace dfccl::api
