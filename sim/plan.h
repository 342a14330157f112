// What dfccl-sim runs: sweep blocks (from the command line or a TOML plan file) expanded into settings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model.h"

namespace dfccl::sim {

// One block of a sweep: the cartesian product layouts x colls x (disorder, sync) x models (x limits for model c).
// With zip, disorder[i] goes with sync[i] instead of every pair.
struct SweepBlock {
  std::string name = "cli";
  std::vector<std::string> models{"a", "b", "c", "d"};
  std::vector<int> limits{4};
  std::vector<std::string> layouts{"random:8x2x2"};
  std::vector<int> colls{100};
  std::vector<double> disorder{1e-3};
  std::vector<double> sync{1e-3};
  bool zip = false;
  int64_t trials = 1000;
};

struct Plan {
  uint64_t seed = 1;
  uint64_t first_trial = 0;
  int threads = 0;
  bool per_trial = false;      // write one row per trial to /sim/trials
  bool verify_cycles = false;  // search a cycle in every deadlocked trial
  std::vector<SweepBlock> blocks;

  // Reads a TOML plan (top-level keys seed, first_trial, threads, per_trial, verify_cycles; one [[sweep]] table per
  // block with the keys of SweepBlock). Throws std::runtime_error naming the file and the key.
  static Plan from_toml_file(const std::string& path);
  // The resolved plan as TOML text (stored as the `config` attribute).
  std::string to_toml() const;
};

// One setting: a scenario and a model.
struct Setting {
  std::string block;
  std::string layout;  // as written in the plan
  int colls = 0;
  double p_disorder = 0.0, p_sync = 0.0;
  ModelSpec model;
  int64_t trials = 0;
};

// Expands every block; validates model names, probabilities and layouts (throws std::invalid_argument).
std::vector<Setting> expand(const Plan& plan);

}  // namespace dfccl::sim
