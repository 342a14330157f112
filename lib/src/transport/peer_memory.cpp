// The peer memory transport (transport.h): the CUDA executor's fast path. A region is the GPU's own memory; a peer in
// another process maps it through a CUDA IPC handle, one in this process uses its address (with peer access enabled
// between the two GPUs). Needs peer access between every two GPUs that connect (can_connect).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "executor/executor.h"
#include "transport/transport.h"
#include "util/error.h"

namespace dfccl {

namespace {

class PeerMemory final : public Transport {
 public:
  explicit PeerMemory(Executor& ex) : ex_(ex), device_(ex.device()) {}
  dfcclTransport_t kind() const override { return dfcclTransportPeerMemory; }
  const char* name() const override { return "GPU peer memory"; }
  bool in_host_memory() const override { return false; }
  bool can_connect(int peer_device) override {
    if (peer_device == device_) return true;
    int can = 0;
    DFCCL_CUDA(cudaDeviceCanAccessPeer(&can, device_, peer_device));
    return can != 0;
  }
  RegionBlob alloc_region(size_t bytes) override {
    RegionBlob blob{};
    void* p = ex_.alloc_device(bytes);  // zero-filled
    cudaIpcMemHandle_t h;
    DFCCL_CUDA(cudaIpcGetMemHandle(&h, p));
    static_assert(sizeof(h) <= sizeof(blob.handle));
    std::memcpy(blob.handle, &h, sizeof(h));
    blob.pid = uint32_t(getpid());
    blob.device = device_;
    blob.ptr = reinterpret_cast<uint64_t>(p);
    blob.bytes = bytes;
    blob.transport = dfcclTransportPeerMemory;
    return blob;
  }
  void* map_region(const RegionBlob& blob) override {
    DFCCL_CUDA(cudaSetDevice(device_));
    if (!can_connect(blob.device))
      throw Error(dfcclInternalError, fmt::format("GPU {} cannot access GPU {}: the communicator should have chosen "
                                                  "another transport than peer memory",
                                                  device_, blob.device));
    if (blob.pid == uint32_t(getpid())) {
      if (blob.device != device_) {
        const cudaError_t e = cudaDeviceEnablePeerAccess(blob.device, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else DFCCL_CUDA(e);
      }
      return reinterpret_cast<void*>(blob.ptr);
    }
    cudaIpcMemHandle_t h;
    std::memcpy(&h, blob.handle, sizeof(h));
    void* p = nullptr;
    DFCCL_CUDA(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    return p;
  }
  void unmap_region(void* p, const RegionBlob& blob) override {
    cudaSetDevice(device_);
    if (blob.pid != uint32_t(getpid())) cudaIpcCloseMemHandle(p);
  }
  void free_region(const RegionBlob& blob) override { ex_.free_device(reinterpret_cast<void*>(blob.ptr)); }
  void mapped_by_all(const RegionBlob&) override {}  // an IPC handle has no name to remove

 private:
  Executor& ex_;  // the engine's, which outlives every holder of this transport (communicators, their leftovers)
  int device_;
};

}  // namespace

std::shared_ptr<Transport> make_peer_memory_transport(Executor& ex) { return std::make_shared<PeerMemory>(ex); }

}  // namespace dfccl
