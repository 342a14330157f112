// Many communicators on one GPU and one engine (DESIGN invariant 6): each of 2-8 ranks creates N communicators over
// all the ranks, runs an exact all-reduce on each, and measures with cudaMemGetInfo what the engine and each
// communicator cost. The cost per communicator must match docs/design.md's formula ("Transport and memory") for the
// settings in force, read from the same DFCCL_* variables with the library's defaults.
//   mpirun -np <2-8> [-x DFCCL_BLOCKS=.. -x DFCCL_PERSISTENT_LANES=..] mp_many_comms <communicators>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "mp_test.h"

using namespace dfccl::test::mp;

namespace {

constexpr size_t kCount = 1 << 20;
constexpr double kMiB = 1024.0 * 1024.0;
int g_size = 2;                            // ranks of the run, each in every communicator
constexpr long kDefaultLanes = 1;          // DFCCL_LANES's default (lib/src/settings/env.cpp)
constexpr long kDefaultSlots = 3;          // DFCCL_SLOTS's
constexpr long kDefaultArena = 12l << 20;  // DFCCL_P2P_ARENA_BYTES's

long env_or(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atol(v) : fallback;
}

// The slot count and size in force (the environment, else the defaults).
double slots() { return double(env_or("DFCCL_SLOTS", kDefaultSlots)); }
double slot_bytes() { return double(env_or("DFCCL_SLOT_BYTES", 131072)); }

// docs/design.md: the ring's region nchan x nlanes x (128 + nslots x (slot_bytes + 8)) + nlanes x nslots x 16 KiB
// (LL) + nchan x nlanes x 32 for the sequence lanes (a persistent id's lane, the same with nlanes = 1, comes with its
// first prepare), and the point-to-point arena of a rank of n: max(DFCCL_P2P_ARENA_BYTES, n smallest connections
// of round_up(2 x (128 + nslots x (small + 8)) + 2 x nslots x 16 KiB, 4 KiB), small = slot_bytes halved while at
// least 32 KiB) + n x 2 x nchan x 2 x 32.
double lane_mib(int nchan, double nlanes) {
  const double nslots = slots(), slot = slot_bytes();
  return (nchan * nlanes * (128 + nslots * (slot + 8)) + nlanes * nslots * 16384 + nchan * nlanes * 32) / kMiB;
}
double formula_mib(int nchan, int nranks) {
  const double nlanes = double(env_or("DFCCL_LANES", kDefaultLanes));
  const double nslots = slots(), slot = slot_bytes();
  const double p2p = double(std::min<long>(env_or("DFCCL_P2P_CHANNELS", 8), nchan));
  double small = slot;  // the smallest slots a connection takes: halves of the configured ones, down to 32 KiB
  while (small / 2 >= 32768 && std::fmod(small, 32) == 0) small /= 2;
  const double one_channel = std::ceil((2 * (128 + nslots * (small + 8)) + 2 * nslots * 16384) / 4096) * 4096;
  const double arena = std::max(double(env_or("DFCCL_P2P_ARENA_BYTES", kDefaultArena)), nranks * one_channel);
  const double p2p_bytes = p2p > 0 ? arena + nranks * 2 * nchan * 2 * 32 : 0;
  return lane_mib(nchan, nlanes) + p2p_bytes / kMiB;
}

// Prepares persistent id 0 on c and starts it once (its lane is made then), exactly (rank r contributes r).
void persistent_exact(dfcclComm_t c, float* in, float* out) {
  dfcclPersistent_t p = nullptr;
  ok(dfcclPrepareAllReduce(kCount, dfcclFloat32, dfcclSum, c, 0, &p), "dfcclPrepareAllReduce");
  dfcclRequest_t q = nullptr;
  ok(dfcclStart(p, in, out, 0, DFCCL_NO_STREAM, &q), "dfcclStart");
  ok(dfcclSynchronize(q, 60000), "dfcclSynchronize");
  dfcclRequestFree(q);
  ok(dfcclPersistentFree(p), "dfcclPersistentFree");
  std::vector<float> h(kCount);
  cuda_ok(cudaMemcpy(h.data(), out, kCount * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (size_t i = 0; i < kCount; ++i)
    if (h[i] != float(g_size * (g_size - 1) / 2)) fail("persistent all-reduce: wrong element " + std::to_string(i));
}

size_t free_bytes() {
  size_t free = 0, total = 0;
  cuda_ok(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

// Uploads a rank's input for a host-ordered (DFCCL_NO_STREAM) collective: a cudaMemcpy from pageable memory may return
// before its copy has reached device memory, so the legacy default stream, which carries it, is synchronized before
// the submission (dfccl.h, DFCCL_NO_STREAM).
void upload(float* in, const std::vector<float>& h) {
  cuda_ok(cudaMemcpy(in, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  cuda_ok(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize (after the upload)");
}

// Rank r contributes k + r on communicator k.
void allreduce_exact(dfcclComm_t c, float* in, float* out, int k) {
  dfcclRequest_t q = nullptr;
  ok(dfcclAllReduce(in, out, kCount, dfcclFloat32, dfcclSum, c, 0, DFCCL_NO_STREAM, &q), "dfcclAllReduce");
  ok(dfcclSynchronize(q, 60000), "dfcclSynchronize");
  dfcclRequestFree(q);
  std::vector<float> h(kCount);
  cuda_ok(cudaMemcpy(h.data(), out, kCount * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (size_t i = 0; i < kCount; ++i)
    if (h[i] != float(g_size * k + g_size * (g_size - 1) / 2))
      fail("communicator " + std::to_string(k) + ": wrong element " + std::to_string(i));
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 0;
  if (int rc = start_ranks(&argc, &argv, 2, 8, n >= 2, "mpirun -np <2-8> mp_many_comms <communicators, >= 2>"); rc >= 0)
    return rc;
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  float *in = nullptr, *out = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&in), kCount * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&out), kCount * sizeof(float)), "cudaMalloc");
  std::vector<float> h(kCount);
  const size_t before = free_bytes();
  std::vector<dfcclComm_t> comms;
  std::vector<size_t> after;  // free memory after each communicator
  for (int k = 0; k < n; ++k) {
    comms.push_back(comm_of_world());
    MPI_Barrier(MPI_COMM_WORLD);  // both processes' allocations done: free memory is the GPU's, shared
    after.push_back(free_bytes());
  }
  for (int k = 0; k < n; ++k) {
    std::fill(h.begin(), h.end(), float(k + g_rank));
    upload(in, h);
    allreduce_exact(comms[size_t(k)], in, out, k);
  }
  // The ranks share the GPUs (rank r on GPU r % gpus), so the drop is divided by the processes on this GPU.
  int gpus = 1;
  cudaGetDeviceCount(&gpus);
  const int sharing = (g_size + gpus - 1 - g_rank % gpus) / gpus;
  const double per_comm = double(after[0] - after.back()) / (n - 1) / sharing / kMiB;
  const double first = double(before - after[0]) / sharing / kMiB;
  const int blocks = int(env_or("DFCCL_BLOCKS", 128));  // the default where the GPU holds 128 daemon blocks
  const double expect = formula_mib(blocks, g_size);
  // A persistent collective on the last communicator: its lane comes with it.
  std::fill(h.begin(), h.end(), float(g_rank));
  upload(in, h);
  MPI_Barrier(MPI_COMM_WORLD);  // both ranks measure before either allocates
  const size_t before_lane = free_bytes();
  persistent_exact(comms.back(), in, out);
  MPI_Barrier(MPI_COMM_WORLD);
  const double lane = double(before_lane - free_bytes()) / sharing / kMiB, lane_expect = lane_mib(blocks, 1);
  for (auto c : comms) ok(dfcclCommDestroy(c), "dfcclCommDestroy");
  if (g_rank == 0)
    std::printf("%d communicators of %d ranks, each exact; GPU memory per communicator %.1f MiB (formula %.1f MiB at "
                "%d blocks); the first with the engine %.1f MiB; a persistent id's lane %.1f MiB (formula %.1f)\n",
                n, g_size, per_comm, expect, blocks, first, lane, lane_expect);
  if (std::fabs(per_comm - expect) > 8.0 + 0.02 * expect)
    fail("GPU memory per communicator " + std::to_string(per_comm) + " MiB against the formula's " +
         std::to_string(expect));
  if (std::fabs(lane - lane_expect) > 4.0 + 0.02 * lane_expect)
    fail("GPU memory of a persistent lane " + std::to_string(lane) + " MiB against the formula's " +
         std::to_string(lane_expect));
  if (g_rank == 0) std::printf("PASSED\n");
  MPI_Finalize();
  return 0;
}
