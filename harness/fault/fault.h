// The fault workload (workload kind `fault`, docs/harness.md "Fault workload"): in every trial each MPI rank starts a
// DFCCL rank as a child process (this executable, `--fault-child`), the ranks run exact collectives on one
// communicator, one random rank's child is killed with SIGKILL at a random time, and the survivors shrink
// (dfcclCommShrink) and go on. The MPI processes never die; they time the kill, collect the children's reports and
// write one row per trial (FaultRow, /backends/<b>/faults) beside the usual trial row.
#pragma once

#include <time.h>

#include <cstdint>

#include "config/workload.h"
#include "output/writer.h"
#include "runtime/driver.h"
#include "runtime/mpi_env.h"

namespace dfccl::harness::fault {

// CLOCK_MONOTONIC in ns: one clock for every process of the host (the kill and the children's times).
inline int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// splitmix64's finaliser: the trial's draws (victim, kill time, seed) and each collective's kind and size.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What an MPI rank hands its child (one write on a pipe): everything the child's run depends on.
struct Plan {
  uint8_t id[128] = {};  // the trial's dfcclUniqueId
  int32_t rank = 0, nranks = 1;
  int32_t executor = 0, device = 0;  // dfcclExecutor_t; the GPU (CUDA executor)
  int32_t after = 50;                // collectives on the shrunk communicator
  int32_t inflight = 4;              // collectives submitted before the waits
  int32_t timeout_ms = 60000;        // a wait longer than this is a hang (run.timeout)
  uint64_t seed = 1;                 // the trial's: every collective's kind and size
  uint64_t sizes[64] = {};           // the sizes in bytes to draw from (sizes.begin..end)
  int32_t nsizes = 0;
};

// What a child reports at its end (one write on a pipe, after a first byte 'R' once its first collective completed).
// Times: CLOCK_MONOTONIC ns, one clock for the host's processes.
struct Report {
  int32_t ok = 0;             // every check held
  int32_t lost = 0;           // collectives of the old communicator that ended with dfcclRemoteError on this rank
  int32_t completed_old = 0;  // collectives completed exactly on the old communicator
  int32_t completed_new = 0;  // on the shrunk one (its first, the agreement on where to resume, included)
  int32_t new_rank = -1, new_size = 0;
  int32_t resumed_at = -1;  // the first collective (index) the survivors ran again on the shrunk communicator
  int64_t wrong = 0;        // wrong elements over every completed collective
  int64_t detect_ns = 0;    // its first collective that failed ended
  int64_t shrunk_ns = 0;    // dfcclCommShrink returned
  int64_t first_ns = 0;     // its first collective on the shrunk communicator completed
  char message[320] = {};   // why not ok
};

// The child's side: argv after "--fault-child" holds the plan's and the report's file descriptors. Returns its exit
// status.
int child_main(int argc, char** argv);

// Runs the fault workload on every backend of w (MPI-collective over MPI_COMM_WORLD, as run_campaign).
DriverResult run_campaign(const Workload& w, MpiWorld& world, Writer& writer);

}  // namespace dfccl::harness::fault
