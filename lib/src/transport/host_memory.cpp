// The host memory transport (transport.h): the CUDA executor's path between GPUs without peer access, and its regions
// wherever the network proxy writes them. Regions are POSIX shared memory (shm_region.h) that every GPU of the host
// maps, registered with CUDA (with unified addressing a registered page's host address is its device address): data
// crosses PCIe twice and receivers poll host memory (docs/design.md, "Transport and memory").
#include <cuda_runtime_api.h>

#include <memory>

#include "executor/executor.h"
#include "transport/shm_region.h"
#include "transport/transport.h"
#include "util/error.h"

namespace dfccl {

namespace {

constexpr const char* kWho = "CUDA executor (host path)";

class HostMemory final : public Transport {
 public:
  explicit HostMemory(int device) : device_(device) {}
  dfcclTransport_t kind() const override { return dfcclTransportHostMemory; }
  const char* name() const override { return "shared host memory"; }
  bool in_host_memory() const override { return true; }
  bool can_connect(int) override { return true; }  // every GPU of the host maps host memory
  RegionBlob alloc_region(size_t bytes) override {
    RegionBlob blob = shm_region_create(device_, bytes, kWho);
    blob.transport = dfcclTransportHostMemory;
    register_host(reinterpret_cast<void*>(blob.ptr), bytes);
    return blob;
  }
  void* map_region(const RegionBlob& blob) override {
    void* p = shm_region_map(blob, kWho);
    register_host(p, blob.bytes);
    return p;
  }
  void unmap_region(void* p, const RegionBlob& blob) override {
    cudaSetDevice(device_);
    cudaHostUnregister(p);
    shm_region_unmap(p, blob);
  }
  void free_region(const RegionBlob& blob) override {
    cudaSetDevice(device_);
    cudaHostUnregister(reinterpret_cast<void*>(blob.ptr));
    shm_region_free(blob);
  }
  void mapped_by_all(const RegionBlob& blob) override { shm_region_unlink(blob); }

 private:
  void register_host(void* p, size_t bytes) {
    DFCCL_CUDA(cudaSetDevice(device_));
    DFCCL_CUDA(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  }

  int device_;
};

}  // namespace

std::shared_ptr<Transport> make_host_memory_transport(Executor& ex) {
  return std::make_shared<HostMemory>(ex.device());
}

}  // namespace dfccl
