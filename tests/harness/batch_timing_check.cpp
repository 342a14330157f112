// harness_batch_timing_check: checks the per-iteration times of a dfccl-harness file written with batch timing
// (run.timing = batch, docs/harness.md "Timing"), for sweeps and steps (every row's entry runs in every trial).
//
//   harness_batch_timing_check FILE.h5 [--batch N]
//
// The run's settings are read back from the file's `config` attribute, which must say run.timing = 'batch' (--batch N
// replaces the batch size and skips that check: the test that the checker notices unequal times runs it on a file
// timed per iteration). For every backend that ran, every row of `collectives` timed by iterations (time_kind
// `iteration` or `step`; `e2e` rows hold per-collective latencies, which batch timing leaves alone) must have
// samples = its /iterations values = (completed trials of its case) x run.iterations; each trial's values, in order,
// are cut into batches of run.batch (the last one shorter), and within a batch all values must be finite, positive
// and equal (the batch's mean; untimed iterations, NaN in the backends, are never stored). The backend's `timing`
// attribute must name the batches. Exit 0 when all holds, 1 otherwise (one line per problem), 2 when the file cannot
// be read.
#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "config/workload.h"
#include "h5_table.h"

using namespace dfccl;

int main(int argc, char** argv) {
  std::string path;
  int forced_batch = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--batch" && i + 1 < argc) forced_batch = std::stoi(argv[++i]);
    else if (path.empty() && !a.starts_with("-")) path = a;
    else {
      fmt::print(stderr, "usage: harness_batch_timing_check FILE.h5 [--batch N]\n");
      return 2;
    }
  }
  std::vector<std::string> problems;
  int64_t batches = 0;
  try {
    auto f = h5::File::open_read(path);
    const harness::Workload w = harness::parse_workload(f.attr_string("/", "config"), path + ":config", {});
    if (!forced_batch && w.timing != harness::TimingMode::Batch)
      problems.push_back(fmt::format("config: run.timing is '{}', not 'batch'",
                                     harness::name_of(w.timing, harness::kTimingModeNames)));
    const int batch = forced_batch ? forced_batch : w.batch;
    for (const auto& backend : f.read_strings("summary", "backend")) {
      const std::string base = "backends/" + backend;
      if (f.attr_int(base, "available") == 0) continue;
      const std::string timing = f.attr_string(base, "timing");
      if (!forced_batch && timing.find(fmt::format("batches of {} iterations", batch)) == std::string::npos)
        problems.push_back(fmt::format("{}: timing '{}' does not name batches of {}", backend, timing, batch));
      // Completed trials per case.
      std::map<int64_t, int64_t> completed;
      const auto trial_case = f.read_ints(base + "/trials", "case");
      const auto status = f.read_strings(base + "/trials", "status");
      for (size_t i = 0; i < trial_case.size(); ++i)
        if (status[i] == "completed") ++completed[trial_case[i]];
      // Per-iteration values per row.
      const auto row_case = f.read_ints(base + "/collectives", "case");
      const auto samples = f.read_ints(base + "/collectives", "samples");
      const auto time_kind = f.read_strings(base + "/collectives", "time_kind");
      std::vector<std::vector<double>> times(row_case.size());
      const auto it_row = f.read_ints(base + "/iterations", "row");
      const auto it_time = f.read_doubles(base + "/iterations", "time_us");
      for (size_t i = 0; i < it_row.size(); ++i) times.at(static_cast<size_t>(it_row[i])).push_back(it_time[i]);
      for (size_t r = 0; r < times.size(); ++r) {
        if (time_kind[r] == "e2e") continue;
        const auto& t = times[r];
        const int64_t want = completed[row_case[r]] * w.iterations;
        if (want == 0 || static_cast<int64_t>(t.size()) != want || samples[r] != want) {
          problems.push_back(fmt::format("{} row {}: {} values, samples {}, expected {} (completed trials x {})",
                                         backend, r, t.size(), samples[r], want, w.iterations));
          continue;
        }
        for (size_t trial_start = 0; trial_start < t.size(); trial_start += static_cast<size_t>(w.iterations))
          for (int first = 0; first < w.iterations; first += batch, ++batches) {
            const int last = std::min(first + batch, w.iterations) - 1;
            const double mean = t[trial_start + static_cast<size_t>(first)];
            for (int i = first; i <= last; ++i) {
              const double v = t[trial_start + static_cast<size_t>(i)];
              if (!std::isfinite(v) || !(v > 0) || v != mean)
                problems.push_back(fmt::format("{} row {} trial {}: iteration {} has {} us, batch {}..{} starts "
                                               "with {} us: not one finite batch mean",
                                               backend, r, trial_start / static_cast<size_t>(w.iterations), i, v, first,
                                               last, mean));
            }
          }
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", path, e.what());
    return 2;
  }
  for (const auto& p : problems) fmt::print(stderr, "{}: {}\n", path, p);
  fmt::print("{}: {} batches checked: {}\n", path, batches, problems.empty() ? "OK" : "FAIL");
  return problems.empty() && batches > 0 ? 0 : 1;
}
