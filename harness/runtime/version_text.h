// Text of the run's record that needs no MPI, CUDA or NCCL (run_info.h uses it; unit-tested).
#pragma once

#include <string>

namespace dfccl::harness {

// The version number in the first line of /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX Open Kernel Module
// for x86_64  580.95.05  Release Build ..." -> "580.95.05"): the first word after "NVRM version:" made of digits and
// dots with at least one dot; "" if there is none.
std::string nvidia_module_version(const std::string& first_line);

// NCCL's version code as text: 22809 -> "2.28.9" (codes from 2.9 on: major * 10000 + minor * 100 + patch), 2804 ->
// "2.8.4" (earlier: major * 1000 + minor * 100 + patch).
std::string nccl_version_text(int code);

// Whether an environment variable belongs in the run's record: DFCCL_*, NCCL_*, CUDA_*, and the launcher's
// (OMPI_COMM_WORLD_*, PMIX_RANK, SLURM_*).
bool recorded_variable(const std::string& name);

}  // namespace dfccl::harness
