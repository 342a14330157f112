// Why a run ends before its last trial without an error of its own: a signal (SIGINT, SIGTERM) or a rank that stopped
// responding. Thrown from the main thread's waits (mpi_env.h, watchdog.h) on each rank that notices; the driver
// records what finished, and main writes the status and exits with exit_code, without further MPI calls (the peers
// may be gone or stopped).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace dfccl::harness {

struct RunStopped : std::runtime_error {
  RunStopped(const std::string& status, int exit_code, std::vector<int> stalled_ranks = {})
      : std::runtime_error(status), exit_code(exit_code), stalled_ranks(std::move(stalled_ranks)) {}
  int exit_code;                   // 128 + the signal, or kExitTrialsFailed for a stalled rank
  std::vector<int> stalled_ranks;  // world ranks that stopped responding (empty for a signal)
};

// The process exit codes (docs/harness.md, "Exit codes").
inline constexpr int kExitOk = 0;
inline constexpr int kExitExpectation = 1;   // an --expect expression does not hold, or the file's layout is wrong
inline constexpr int kExitUsage = 2;         // bad command line or workload
inline constexpr int kExitWrong = 3;         // wrong elements
inline constexpr int kExitTrialsFailed = 4;  // trials failed, stalled, or deadlocked on a preemptive backend
inline constexpr int kExitNothingRan = 5;    // no trial ran (every backend skipped, or no case)

}  // namespace dfccl::harness
