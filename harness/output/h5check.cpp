// dfccl-harness-h5check FILE [EXPECTATION...]: checks that FILE follows the harness's HDF5 layout
// (docs/hdf5-layout.md) and that every expectation ("[backend:]counter OP n") holds; prints the counters and the
// run's status. Exit 0 when all is well.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "output/layout_check.h"

using namespace dfccl::harness;

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: dfccl-harness-h5check FILE [EXPECTATION...]  (e.g. deadlocked==0 host:wrong==0)\n");
    return 2;
  }
  std::string path = argv[1];
  auto problems = check_layout(path);
  for (const auto& p : problems) fmt::print(stderr, "{}: {}\n", path, p);
  if (!problems.empty()) return 1;
  std::vector<std::string> expectations(argv + 2, argv + argc);
  auto counters = read_counters(path);
  fmt::print("{} status: {}\n", path, read_status(path));
  auto failures = check_expectations(counters, expectations);
  for (const auto& f : failures) fmt::print(stderr, "{}: {}\n", path, f);
  for (const auto& [b, c] : counters)
    fmt::print("{} {}: trials {} completed {} deadlocked {} failed {} stalled {} skipped {} wrong {} rows {}\n", path,
               b, c.trials, c.completed, c.deadlocked, c.failed, c.stalled, c.skipped, c.wrong, c.rows);
  return failures.empty() ? 0 : 1;
}
