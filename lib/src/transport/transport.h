// The intra-host transports: where a communicator's connection regions live and how a rank maps a peer's. Each is
// one module behind the interface below, as NCCL's ncclTransport:
//   peer_memory.cpp    CUDA executor: the GPU's memory, which a peer maps through CUDA IPC (another process) or as a
//                      peer pointer (the same process); needs peer access between the GPUs
//   host_memory.cpp    CUDA executor: POSIX shared memory registered with CUDA (data crosses PCIe twice and receivers
//                      poll host memory: the fallback between GPUs without peer access)
//   shared_memory.cpp  host executor: POSIX shared memory
// choose_transport (transport.cpp) is the one place that picks a communicator's transport; every region of the
// communicator (its ring, point-to-point arena, persistent lanes and network shadows) then comes from that one.
// A remote rank (another host: comm/links.h) is reached through the network proxy, which writes into regions in host
// memory; its side of a connection is a shadow that the communicator's transport allocates too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dfccl.h"

namespace dfccl {

class Executor;

// What a rank publishes so that peers can map its region (exchanged through the bootstrap).
struct RegionBlob {
  uint32_t pid;
  int32_t device;
  uint64_t ptr;  // the owner's address (same process: usable directly)
  uint64_t bytes;
  uint32_t transport;  // dfcclTransport_t of the transport that allocated it
  uint32_t pad;
  char handle[96];  // CUDA IPC handle (64 bytes) or shared-memory name
};

// One transport of one executor (its device). Every call may throw Error (a CUDA or system error, named).
class Transport {
 public:
  virtual ~Transport() = default;
  virtual dfcclTransport_t kind() const = 0;  // as dfcclCommGetInfo reports it
  virtual const char* name() const = 0;       // for messages, e.g. "GPU peer memory"
  // Whether the regions are in host memory, where the network proxy can write them.
  virtual bool in_host_memory() const = 0;
  // Whether this rank reaches the regions of a rank of this host whose device is peer_device.
  virtual bool can_connect(int peer_device) = 0;
  // This rank's region of `bytes`, zero-filled, and what a peer needs to map it.
  virtual RegionBlob alloc_region(size_t bytes) = 0;
  // A region allocated by this transport on some rank of this host (this rank's own too), mapped here.
  virtual void* map_region(const RegionBlob& blob) = 0;
  virtual void unmap_region(void* p, const RegionBlob& blob) = 0;
  // Releases this rank's region (alloc_region's); peers' mappings keep shared memory alive until they unmap it.
  virtual void free_region(const RegionBlob& blob) = 0;
  // Every rank that maps `blob` has mapped it (shared memory: its name goes, so that nothing outlives the processes).
  virtual void mapped_by_all(const RegionBlob& blob) = 0;
};

// What a communicator asks of its transport besides reaching its peers.
struct TransportNeeds {
  bool host_memory = false;  // regions in host memory: some rank is remote, and the network proxy writes them
  bool peer_memory = true;   // GPU peer memory allowed (DFCCL_P2P_DISABLE=0)
};

// Caller: comm_init, on every rank of a communicator (one executor kind on all). This rank's offer: bit i set when the
// i-th transport of ex's executor (best first: peer memory, then host memory; the host executor has shared memory
// only) meets `needs` and reaches every device in peer_devices (this host's ranks that this rank connects with).
uint32_t transport_offer(Executor& ex, const std::vector<int>& peer_devices, const TransportNeeds& needs);
// The communicator's transport: the best one that every rank offers (offers: each rank's transport_offer). The last
// transport of an executor reaches every rank of the host; dfcclInternalError if no transport is offered by all.
std::shared_ptr<Transport> choose_transport(Executor& ex, const std::vector<uint32_t>& offers);

// The modules (one file each, named above).
std::shared_ptr<Transport> make_peer_memory_transport(Executor& ex);
std::shared_ptr<Transport> make_host_memory_transport(Executor& ex);
std::shared_ptr<Transport> make_shared_memory_transport(Executor& ex);

}  // namespace dfccl
