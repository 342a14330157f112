// Host-ordered inputs (dfccl.h, DFCCL_NO_STREAM): "ready" means visible to the device. Each of 2-8 ranks makes as
// many communicators as ranks and, for `rounds` rounds, writes a new 4 MiB input on the host, uploads it, and runs a
// host-ordered all-reduce on every communicator, checking every element. How the input is uploaded is the mode:
//   synced    cudaMemcpy from pageable memory, then cudaStreamSynchronize of the legacy stream (the contract)
//   pinned    cudaMemcpy from pinned memory (returns once the copy is done)
//   checked   cudaMemcpy from pageable memory alone, with DFCCL_CHECK_HOST_ORDER=1 (set here before the first init)
//   unsynced  cudaMemcpy from pageable memory alone: the hazard; prints how many collectives were wrong, exits 0
// The first three must be exact (exit 1 naming the first wrong element otherwise).
//   mpirun -np <2-8> mp_host_order <synced|pinned|checked|unsynced> [rounds (default 12)]
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp_test.h"

using namespace dfccl::test::mp;

namespace {

constexpr size_t kCount = 1 << 20;  // floats per rank: 4 MiB

// Rank r's element i in round k on communicator c: small integers, exact in float32 when summed over 8 ranks.
float value(int r, int k, int c, size_t i) { return float((r + 3 * k + 5 * c + int(i % 7)) % 64); }

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 12;
  const bool known = mode == "synced" || mode == "pinned" || mode == "checked" || mode == "unsynced";
  if (mode == "checked") setenv("DFCCL_CHECK_HOST_ORDER", "1", 1);
  if (int rc = start_ranks(&argc, &argv, 2, 8, known && rounds > 0,
                           "mpirun -np <2-8> mp_host_order <synced|pinned|checked|unsynced> [rounds > 0]");
      rc >= 0)
    return rc;
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<dfcclComm_t> comms;
  for (int c = 0; c < size; ++c) comms.push_back(comm_of_world());
  std::vector<float*> in(comms.size()), out(comms.size());
  for (size_t c = 0; c < comms.size(); ++c) {
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&in[c]), kCount * sizeof(float)), "cudaMalloc");
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&out[c]), kCount * sizeof(float)), "cudaMalloc");
  }
  std::vector<float> pageable(kCount), result(kCount);
  float* pinned = nullptr;
  if (mode == "pinned")
    cuda_ok(cudaMallocHost(reinterpret_cast<void**>(&pinned), kCount * sizeof(float)), "cudaMallocHost");
  float* host = pinned ? pinned : pageable.data();
  long wrong_collectives = 0;
  for (int k = 0; k < rounds; ++k) {
    std::vector<dfcclRequest_t> reqs(comms.size());
    for (size_t c = 0; c < comms.size(); ++c) {
      for (size_t i = 0; i < kCount; ++i) host[i] = value(g_rank, k, int(c), i);
      cuda_ok(cudaMemcpy(in[c], host, kCount * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
      if (mode == "synced") cuda_ok(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
      ok(dfcclAllReduce(in[c], out[c], kCount, dfcclFloat32, dfcclSum, comms[c], 0, DFCCL_NO_STREAM, &reqs[c]),
         "dfcclAllReduce");
    }
    for (size_t c = 0; c < comms.size(); ++c) {
      ok(dfcclSynchronize(reqs[c], 60000), "dfcclSynchronize");
      dfcclRequestFree(reqs[c]);
      cuda_ok(cudaMemcpy(result.data(), out[c], kCount * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy (download)");
      float expects[7] = {};  // a value depends on i only through i % 7
      for (size_t i = 0; i < 7; ++i)
        for (int r = 0; r < size; ++r) expects[i] += value(r, k, int(c), i);
      for (size_t i = 0; i < kCount; ++i) {
        const float expect = expects[i % 7];
        if (result[i] == expect) continue;
        if (mode != "unsynced")
          fail("round " + std::to_string(k) + ", communicator " + std::to_string(c) + ": wrong element " +
               std::to_string(i) + " (" + std::to_string(result[i]) + " against " + std::to_string(expect) + ")");
        ++wrong_collectives;
        break;
      }
    }
  }
  long total = 0;
  MPI_Reduce(&wrong_collectives, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  for (dfcclComm_t c : comms) ok(dfcclCommDestroy(c), "dfcclCommDestroy");
  for (size_t c = 0; c < comms.size(); ++c) {
    cudaFree(in[c]);
    cudaFree(out[c]);
  }
  if (pinned) cudaFreeHost(pinned);
  if (g_rank == 0)
    std::printf("%s: %d ranks, %zu communicators, %d rounds: %ld of %ld rank-collectives wrong\n%s\n", mode.c_str(),
                size, comms.size(), rounds, total, long(size) * long(comms.size()) * rounds,
                mode == "unsynced" ? "DONE (the hazard: not checked)" : "PASSED");
  MPI_Finalize();
  return 0;
}
