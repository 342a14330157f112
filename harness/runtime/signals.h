// SIGINT and SIGTERM (Ctrl-C on mpirun, which Open MPI passes on to the ranks as SIGTERM; a batch system's
// time limit): the handler only records the signal; the main thread's waits (mpi_env.h, watchdog.h) check it and
// throw RunStopped, so that the file is written with status "interrupted (SIGINT)" and the process exits with
// 128 + the signal. The handler is one-shot: a second signal of either kind kills the process at once.
#pragma once

namespace dfccl::harness {

// Installs the handlers (main thread, after MPI_Init, so that they replace none of MPI's).
void install_signal_handlers();
// The signal received, 0 if none.
int received_signal();
// Throws RunStopped ("interrupted (SIGINT)", 128 + signal) once a signal was received.
void throw_if_signalled();

}  // namespace dfccl::harness
