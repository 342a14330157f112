// The shared driver: expands a workload into cases (a sweep: one per collective and size; a step or a mix: one),
// runs every case's trials on every backend under the watchdog, aggregates the timings over ranks, verifies the
// results and reports to the writers (rank 0's writers; other ranks pass an empty MultiWriter).
//
// The watchdog: each trial runs in a worker thread; the main thread waits until run.timeout seconds have passed
// without progress (a program step or a wait returning) on any rank, all ranks agreeing over MPI on the time of the
// latest progress and on whether any rank is still running or failed. If so, every rank aborts its communicators
// (which releases a
// blocked worker), joins the worker, records the trial as deadlocked (or failed) with its time to detect, and builds
// new communicators for the next trial. A worker that stays blocked after the abort leaves the backend unusable:
// its remaining trials are recorded as skipped, and the campaign goes on with the next backend.
#pragma once

#include <string>

#include "backends/backend.h"
#include "config/workload.h"
#include "mpi_env.h"
#include "output/writer.h"

namespace dfccl::harness {

struct DriverResult {
  bool stuck_worker = false;  // a worker thread could not be released: exit without running destructors
  int64_t deadlocked = 0, failed = 0, wrong = 0;
};

DriverResult run_campaign(const Workload& w, MpiWorld& world, Writer& writer);

}  // namespace dfccl::harness
