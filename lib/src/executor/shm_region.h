// Connection regions in POSIX shared memory: the host executor's transport, and the CUDA executor's path between
// GPUs without peer access (the region is then also registered with CUDA). One implementation for both.
#pragma once

#include <cstddef>

#include "executor/executor.h"

namespace dfccl {

// Creates a zero-filled region of `bytes`, named after this process and `device`, its pages reserved (dfcclSystemError
// naming /dev/shm when it has no room); fills blob (pid, device, ptr, bytes, handle = the name). First removes the
// names of regions left by processes of this pid namespace that have exited (killed before their peers mapped them).
RegionBlob shm_region_create(int device, size_t bytes, const char* who);
// Maps a peer's region by name (a mapping of our own, also inside one process).
void* shm_region_map(const RegionBlob& blob, const char* who);
void shm_region_unmap(void* p, const RegionBlob& blob);
// Unmaps the owner's mapping and removes the name.
void shm_region_free(const RegionBlob& blob);
void shm_region_unlink(const RegionBlob& blob);

}  // namespace dfccl
