// The shared driver: expands a workload into cases (a sweep: one per collective and size; a step or a mix: one),
// runs every case's trials on every backend (a worker thread per trial, worker.h, under the watchdog, watchdog.h),
// aggregates and verifies them (aggregate.h) and reports to the writers (rank 0's writers; other ranks pass an empty
// MultiWriter). A worker that stays blocked after an abort leaves its backend unusable: the backend's remaining
// trials are recorded as skipped, and the campaign goes on with the next backend.
#pragma once

#include <string>

#include "backends/backend.h"
#include "config/workload.h"
#include "mpi_env.h"
#include "output/writer.h"

namespace dfccl::harness {

struct DriverResult {
  bool stuck_worker = false;  // a worker thread could not be released: exit without running destructors
  // Trial outcomes summed over backends; deadlocked_preemptive: those on backends of mode preemptive (dfccl, host),
  // which must never deadlock.
  int64_t completed = 0, deadlocked = 0, deadlocked_preemptive = 0, failed = 0, stalled = 0, skipped = 0, wrong = 0;
};

// Adds one backend's trial outcomes to the campaign's; `preemptive`: the backend's mode is preemptive, so its
// deadlocks also count as deadlocked_preemptive.
void add_backend(DriverResult& r, const BackendSummary& s, bool preemptive);

// Runs every backend of the workload in turn (MPI-collective over MPI_COMM_WORLD; every rank calls it), with the
// liveness monitor (liveness.h) running. Returns the counts over all backends. RunStopped (run_stop.h: a signal, a
// stalled rank) propagates after what finished was written (every backend begun has its end_backend); any other
// exception means the run cannot go on (main then aborts the MPI job).
DriverResult run_campaign(const Workload& w, MpiWorld& world, Writer& writer);

}  // namespace dfccl::harness
