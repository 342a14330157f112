// The intra-host transports (lib/src/transport/transport.h): which one a communicator takes (each rank's offer, the
// best that every rank offers) and what a region of each does (allocated zero-filled, mapped by a peer onto the same
// memory, its shared-memory name gone once every peer mapped it). The host executor's shared memory here; the CUDA
// executor's peer and host memory where a GPU is present (skipped otherwise).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "gpu_check.h"
#include "transport/transport.h"
#include "util/error.h"

namespace {

using dfccl::RegionBlob;
using dfccl::Transport;

bool in_dev_shm(const RegionBlob& blob) { return access((std::string("/dev/shm") + blob.handle).c_str(), F_OK) == 0; }

// The code of the Error that f throws, or dfcclSuccess.
template <class F>
dfcclResult_t error_of(F f) {
  try {
    f();
  } catch (const dfccl::Error& e) {
    return e.code();
  }
  return dfcclSuccess;
}

// A region of t as its owner and a peer see it: zero-filled, one memory through two mappings.
void expect_one_memory(Transport& t, size_t bytes, bool separate_mapping) {
  const RegionBlob blob = t.alloc_region(bytes);
  EXPECT_EQ(blob.transport, uint32_t(t.kind()));
  EXPECT_EQ(blob.bytes, bytes);
  auto* owner = reinterpret_cast<unsigned char*>(blob.ptr);
  void* mapped = t.map_region(blob);
  ASSERT_NE(mapped, nullptr);
  if (separate_mapping) {
    EXPECT_NE(mapped, static_cast<void*>(owner)) << "a peer maps shared memory by its name";
  }
  if (t.in_host_memory()) {
    std::vector<unsigned char> zeros(bytes, 0);
    EXPECT_EQ(std::memcmp(owner, zeros.data(), bytes), 0) << "a region starts zero-filled";
    static_cast<unsigned char*>(mapped)[bytes - 1] = 0x5a;
    EXPECT_EQ(owner[bytes - 1], 0x5a) << "the peer's mapping is not the owner's memory";
  }
  t.mapped_by_all(blob);
  if (t.in_host_memory()) {
    EXPECT_FALSE(in_dev_shm(blob)) << "the name outlived every peer's mapping: /dev/shm" << blob.handle;
    EXPECT_EQ(owner[bytes - 1], 0x5a) << "removing the name unmapped the region";
  }
  t.unmap_region(mapped, blob);
  t.free_region(blob);
}

TEST(Transport, TheHostExecutorTakesSharedMemory) {
  std::unique_ptr<dfccl::Executor> ex = dfccl::make_host_executor(0);
  EXPECT_EQ(dfccl::transport_offer(*ex, {0, 1, 2}, {}), 1u);
  EXPECT_EQ(dfccl::transport_offer(*ex, {0, 1}, {.host_memory = true, .peer_memory = false}), 1u);
  const std::shared_ptr<Transport> t = dfccl::choose_transport(*ex, {1u, 1u, 1u});
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind(), dfcclTransportSharedMemory);
  EXPECT_TRUE(t->in_host_memory());
  EXPECT_EQ(std::string(t->name()), "shared memory");
  // A rank that offers nothing the others do: no transport, an internal error (every rank offers shared memory).
  EXPECT_EQ(error_of([&] { dfccl::choose_transport(*ex, {1u, 0u}); }), dfcclInternalError);
}

TEST(Transport, ASharedMemoryRegionIsOneMemoryAndItsNameGoes) {
  std::unique_ptr<dfccl::Executor> ex = dfccl::make_host_executor(0);
  const std::shared_ptr<Transport> t = dfccl::make_shared_memory_transport(*ex);
  expect_one_memory(*t, 256 << 10, true);
}

// One GPU: the CUDA executor offers peer memory and host memory, peer memory unless the communicator needs host
// memory or forbids peer memory; a communicator takes host memory when one rank does not offer peer memory.
TEST(Transport, TheCudaExecutorTakesPeerMemoryOnlyWhereEveryRankOffersIt) {
  if (dfccl::test::gpus_or_skip(1) != 0) GTEST_SKIP() << "no GPU";
  std::unique_ptr<dfccl::Executor> ex = dfccl::make_cuda_executor(0, 256);
  EXPECT_EQ(dfccl::transport_offer(*ex, {0}, {}), 3u);
  EXPECT_EQ(dfccl::transport_offer(*ex, {0}, {.peer_memory = false}), 2u);
  EXPECT_EQ(dfccl::transport_offer(*ex, {0}, {.host_memory = true}), 2u);
  const std::shared_ptr<Transport> peer = dfccl::choose_transport(*ex, {3u, 3u});
  EXPECT_EQ(peer->kind(), dfcclTransportPeerMemory);
  EXPECT_FALSE(peer->in_host_memory());
  const std::shared_ptr<Transport> host = dfccl::choose_transport(*ex, {3u, 2u});
  EXPECT_EQ(host->kind(), dfcclTransportHostMemory);
  EXPECT_TRUE(host->in_host_memory());
  expect_one_memory(*peer, 1 << 20, false);  // this process: the owner's address
  expect_one_memory(*host, 1 << 20, true);
}

}  // namespace
