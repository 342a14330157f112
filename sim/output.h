// dfccl-sim results: the console table and the HDF5 file (docs/hdf5-layout.md, section "dfccl-sim").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan.h"
#include "run_identity.h"
#include "runner.h"

namespace dfccl::sim {

struct Row {
  Setting setting;
  std::string layout_spec;  // normalized
  int ranks = 0, groups = 0;
  int64_t collectives = 0, submissions = 0;  // per trial
  uint64_t seed = 0, first_trial = 0;
  int64_t batch = 0;  // index of the first setting of the batch that shared this row's generated programs
  SettingResult result;
};

std::string table_header();
std::string table_row(const Row& row);

// Writes the whole file (truncating an existing one). Per-trial rows only when per_trial.
void write_hdf5(const std::string& path, const h5::RunIdentity& meta, const std::vector<Row>& rows, bool per_trial);

}  // namespace dfccl::sim
