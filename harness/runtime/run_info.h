// The run's record for the writers (RunInfo, results.h): build, workload, world, hosts and GPUs, driver, CUDA, NCCL
// and MPI versions, the environment of every rank, and what the dfccl API tells of the engine's settings.
#pragma once

#include <string>

#include "config/workload.h"
#include "output/results.h"
#include "runtime/mpi_env.h"
#include "runtime/version_text.h"

namespace dfccl::harness {

// MPI-collective over MPI_COMM_WORLD; the per-rank lists (gpus, environment) are complete on rank 0 only.
RunInfo collect_run_info(const Workload& w, const MpiWorld& world, const std::string& command_line);

// CUDA devices visible to this process (0 without a driver or device).
int gpu_count();

}  // namespace dfccl::harness
