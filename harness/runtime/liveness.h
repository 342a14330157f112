// Which ranks stopped responding (a process stopped with SIGSTOP, or frozen). Every rank runs a monitor thread that
// increments its heartbeat word in a window of memory shared by the ranks of the host (MPI_Win_allocate_shared)
// every 100 ms and watches the others' words. A rank whose word has not moved for the stall limit is stalled. A rank
// that is only busy (its main thread inside a long call, its worker blocked in a collective) is not: its monitor
// thread still ticks. The main thread's MPI waits (mpi_env.h) ask stalled() and end the run when a rank is stalled,
// because no collective over MPI_COMM_WORLD can complete without it. Ranks on other hosts are not watched.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace dfccl::harness::liveness {

// Starts the monitor (collective over world). stall_limit_s: seconds without a heartbeat that make a rank stalled.
// host: this rank's host (hosts.h: its index among the run's hosts); the ranks that watch each other are those that
// MPI says share memory and that have the same host, so that fake hosts with their own /dev/shm never share a window.
void start(MPI_Comm world, double stall_limit_s, int host);
// Stops the monitor and frees the window (collective; on the normal path only: after a RunStopped the peers may be
// gone, and the window is left to the process's exit).
void stop();
// The world ranks whose heartbeat has not moved for the stall limit, ascending. Empty before start(), and while this
// process itself was stopped or starved within the last second (its own view of the others is then stale).
std::vector<int> stalled();
// Throws RunStopped ("stalled: rank R stopped responding ...", kExitTrialsFailed) when stalled() is not empty.
void throw_if_stalled();
// Steady-clock time (ns since its epoch) when this process last resumed after being stopped for more than 1 s; 0 if
// never. The watchdog does not count a stop of its own process as the backend's silence.
int64_t resumed_ns();

}  // namespace dfccl::harness::liveness
