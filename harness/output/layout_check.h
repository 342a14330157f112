// Reads a dfccl-harness HDF5 file back: checks its layout against docs/hdf5-layout.md (section dfccl-harness) and
// evaluates expectations such as "deadlocked==0" on its summary. Used by `dfccl-harness --expect`, by the
// dfccl-harness-h5check tool and by the tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dfccl::harness {

inline constexpr const char* kHarnessLayoutVersion = "3";

// Problems found, one line each; empty when the file follows the layout.
std::vector<std::string> check_layout(const std::string& path);

// The /summary table of a file (read_counters): counters per backend, and "*" for their sum over backends; with
// each collective row's (collective, busbw) for the bandwidth expectations.
struct Counters {
  int64_t trials = 0, completed = 0, deadlocked = 0, failed = 0, stalled = 0, skipped = 0, wrong = 0, rows = 0;
  std::vector<std::pair<std::string, double>> busbw;  // per row of /backends/<b>/collectives: coll, busbw_GBs
};
std::map<std::string, Counters> read_counters(const std::string& path);
// The root attribute status: running, complete, interrupted (SIGINT), stalled: ..., error: ...
std::string read_status(const std::string& path);

// Each expectation is "[backend:][collective:]counter OP value" with counter one of trials completed deadlocked
// failed stalled skipped wrong rows (integers) or busbw_mean (GB/s: the mean of busbw over the rows that have one, as
// the console's "Avg bus bandwidth"; a number), OP one of == != >= <= > <. Without a backend it applies to the sum over
// backends (busbw_mean: the mean over every backend's rows); a collective (all_reduce, ...) restricts busbw_mean to
// that collective's rows. Returns one line per expectation that does not hold or cannot be evaluated (busbw_mean of no
// row cannot).
std::vector<std::string> check_expectations(const std::map<std::string, Counters>& counters,
                                            const std::vector<std::string>& expectations);
// Whether `expectation` has the form above (a known counter, an operator, a number; an integer for a counter other
// than busbw_mean, which alone takes a collective; a backend among `backends`), before any file exists: "" when it
// does, else the problem as "--expect '<expectation>': ...". Caller: main, before the run.
std::string expectation_problem(const std::string& expectation, const std::vector<std::string>& backends);

}  // namespace dfccl::harness
