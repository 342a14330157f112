// Connection regions in POSIX shared memory, for the two transports that keep them there: shared_memory.cpp (the host
// executor) and host_memory.cpp (the CUDA executor, which also registers them with CUDA).
#pragma once

#include <cstddef>

#include "transport/transport.h"

namespace dfccl {

// Creates a zero-filled region of `bytes`, named after this process and `device`, its pages reserved (dfcclSystemError
// naming /dev/shm when it has no room); fills blob (pid, device, ptr, bytes, handle = the name; not transport). First
// removes the names of regions left by processes of this pid namespace that have exited (killed before their peers
// mapped them).
RegionBlob shm_region_create(int device, size_t bytes, const char* who);
// Maps a peer's region by name (a mapping of our own, also inside one process).
void* shm_region_map(const RegionBlob& blob, const char* who);
void shm_region_unmap(void* p, const RegionBlob& blob);
// Unmaps the owner's mapping and removes the name.
void shm_region_free(const RegionBlob& blob);
void shm_region_unlink(const RegionBlob& blob);

}  // namespace dfccl
