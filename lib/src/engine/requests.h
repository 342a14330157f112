// Request handles. A dfcclRequest_t is a number, never an address: the index of its slot in one process-wide table
// plus the slot's generation, raised when the handle is freed. A handle kept after dfcclRequestFree is therefore
// refused, even once its slot serves a newer request, instead of acting on that request.
#pragma once

#include <memory>

#include "dfccl.h"
#include "engine/engine.h"

namespace dfccl {

// A new handle for the request's state.
dfcclRequest_t request_handle_new(std::shared_ptr<RequestState> state);
// The state behind a live handle; throws dfcclInvalidArgument naming 'request' (in fn) when it is NULL, was never a
// handle or was freed.
std::shared_ptr<RequestState> request_state(dfcclRequest_t handle, const char* fn);
// Frees a live handle (request_state checked it); its later use is refused.
void request_handle_free(dfcclRequest_t handle);

}  // namespace dfccl
