// The shared memory transport (transport.h): the host executor's. Regions are POSIX shared memory (shm_region.h), so
// that ranks may be threads of one process or separate processes; a rank maps every region, its own included, by
// name: the owner may unmap its region (an abort) while a peer still runs on it.
#include <memory>

#include "executor/executor.h"
#include "transport/shm_region.h"
#include "transport/transport.h"

namespace dfccl {

namespace {

class SharedMemory final : public Transport {
 public:
  explicit SharedMemory(int device) : device_(device) {}
  dfcclTransport_t kind() const override { return dfcclTransportSharedMemory; }
  const char* name() const override { return "shared memory"; }
  bool in_host_memory() const override { return true; }
  bool can_connect(int) override { return true; }  // every rank of the host
  RegionBlob alloc_region(size_t bytes) override {
    RegionBlob blob = shm_region_create(device_, bytes, "host executor");
    blob.transport = dfcclTransportSharedMemory;
    return blob;
  }
  void* map_region(const RegionBlob& blob) override { return shm_region_map(blob, "host executor"); }
  void unmap_region(void* p, const RegionBlob& blob) override { shm_region_unmap(p, blob); }
  void free_region(const RegionBlob& blob) override { shm_region_free(blob); }
  void mapped_by_all(const RegionBlob& blob) override { shm_region_unlink(blob); }

 private:
  int device_;  // names the regions
};

}  // namespace

std::shared_ptr<Transport> make_shared_memory_transport(Executor& ex) {
  return std::make_shared<SharedMemory>(ex.device());
}

}  // namespace dfccl
