// The run record's text (runtime/version_text.h): the NVIDIA kernel module's version from the lines the driver
// really writes, NCCL's version codes before and after 2.9, and which environment variables are recorded.
#include <gtest/gtest.h>

#include "runtime/version_text.h"

using namespace dfccl::harness;

TEST(RunRecord, DriverVersionFromTheOpenKernelModuleLine) {
  EXPECT_EQ(nvidia_module_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
                                  "(dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:52:09 UTC 2025"),
            "580.95.05");
  EXPECT_EQ(nvidia_module_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.154.05  Thu Dec 28 15:37:48 "
                                  "UTC 2023"),
            "535.154.05");
  EXPECT_EQ(nvidia_module_version("NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.54.15  Tue Mar  5 2024"),
            "550.54.15");
  EXPECT_EQ(nvidia_module_version("GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)"), "");
  EXPECT_EQ(nvidia_module_version("NVRM version: no number here"), "");
}

TEST(RunRecord, NcclVersionCodes) {
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(21803), "2.18.3");
  EXPECT_EQ(nccl_version_text(20900), "2.9.0");
  EXPECT_EQ(nccl_version_text(2804), "2.8.4");
}

TEST(RunRecord, RecordedVariables) {
  for (const char* name : {"DFCCL_IDLE_NS", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_RANK", "SLURM_JOB_ID"})
    EXPECT_TRUE(recorded_variable(name)) << name;
  for (const char* name : {"PATH", "HOME", "OMPI_MCA_btl", "PMIX_SERVER_URI2", "XDFCCL_X", "LD_LIBRARY_PATH"})
    EXPECT_FALSE(recorded_variable(name)) << name;
}
