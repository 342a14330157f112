// What the GPU tests under mpirun share: the rank for messages, failing the whole job from any thread (a hung CUDA
// call cannot be recovered, so a failure ends the process and mpirun the others), result checks, and the start:
// MPI, the number of ranks, and the GPU (skipped, or failed under DFCCL_REQUIRE_GPUS: gpu_check.h).
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dfccl.h"
#include "gpu_check.h"

namespace dfccl::test::mp {

inline int g_rank = 0;
using Clock = std::chrono::steady_clock;

[[noreturn]] inline void fail(const std::string& what) {
  // stdout too: a test may have redirected stderr into a pipe that nobody reads once the process ends.
  std::printf("rank %d: FAILED: %s\n", g_rank, what.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);  // mpirun ends the other ranks
}

inline void ok(dfcclResult_t r, const char* what) {
  if (r != dfcclSuccess) fail(std::string(what) + ": " + dfcclGetErrorString(r) + ": " + dfcclGetLastError(nullptr));
}

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A communicator of every rank of MPI_COMM_WORLD on the default executor (rank 0 makes the id, MPI broadcasts it).
inline dfcclComm_t comm_of_world() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dfcclUniqueId id;
  if (g_rank == 0) ok(dfcclGetUniqueId(&id), "dfcclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  dfcclComm_t c = nullptr;
  ok(dfcclCommInitRank(&c, size, id, g_rank), "dfcclCommInitRank");
  return c;
}

// MPI_Init, then checks: between min_ranks and max_ranks ranks and arguments_ok (else the usage on rank 0, exit 2),
// and a GPU (exit 77, or 1 under DFCCL_REQUIRE_GPUS). Returns -1 to go on (rank r then runs on GPU r % n, set
// current), else the exit status for main, after MPI_Finalize.
inline int start_ranks(int* argc, char*** argv, int min_ranks, int max_ranks, bool arguments_ok, const char* usage) {
  MPI_Init(argc, argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = -1;
  if (size < min_ranks || size > max_ranks || !arguments_ok) {
    if (g_rank == 0) std::fprintf(stderr, "usage: %s (got %d ranks)\n", usage, size);
    rc = 2;
  } else if (const int gpus = gpus_or_skip(1, g_rank != 0)) {
    rc = gpus;
  } else {
    int n = 0;
    cudaGetDeviceCount(&n);
    cuda_ok(cudaSetDevice(g_rank % n), "cudaSetDevice");
    return -1;
  }
  MPI_Finalize();
  return rc;
}

// start_ranks for exactly `ranks` ranks.
inline int start(int* argc, char*** argv, int ranks, bool arguments_ok, const char* usage) {
  return start_ranks(argc, argv, ranks, ranks, arguments_ok, usage);
}

}  // namespace dfccl::test::mp
