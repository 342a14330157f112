// A backend runs the collectives of a workload: dfccl (GPU), nccl (GPU baseline), host and host-blocking (dfccl's
// CPU executor). The shared driver (runtime/) owns the workload, the watchdog, timing aggregation and verification;
// a backend only knows how to create communicators, place buffers and execute one rank's program.
//
// Threads: the driver's main thread calls the "main thread" methods (MPI is allowed there, MPI_THREAD_FUNNELED);
// one worker thread per trial calls the "worker" methods. abort_comms() runs on the main thread while the worker may
// be blocked inside the backend: it must release it.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/workload.h"
#include "output/results.h"
#include "plan/entry_plan.h"

namespace dfccl::harness {

// One communicator this rank takes part in.
struct CommSlot {
  MPI_Comm mpi = MPI_COMM_NULL;  // the group's ranks (this rank included), ordered by world rank
  int rank = 0, size = 1;
  std::string name;  // "tp", "dp", ...
};

struct EngineCounters {
  bool valid = false;
  int64_t preemptions = 0, daemon_launches = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendInfo info() const = 0;
  // After create_comms: the engine's effective settings and transport, in words ("" when the library tells none).
  virtual std::string engine_settings() const { return {}; }
  // After create_comms, on the main thread: this rank's ring hop (to its next neighbour) in each of its
  // communicators, as the library reports it, hosts left empty; none when the library tells none.
  virtual std::vector<HopRow> hops() const { return {}; }

  // --- main thread -------------------------------------------------------------------------------------------------
  // Creates one communicator per slot (collective over MPI_COMM_WORLD: every rank calls it with its slots).
  virtual void create_comms(const std::vector<CommSlot>& slots) = 0;
  // Fails everything outstanding and releases a blocked worker; the communicators are gone afterwards.
  virtual void abort_comms() = 0;
  virtual void destroy_comms() = 0;
  // Allocates the buffers of a step and uploads the inputs (send_data[i]: entry i's send buffer, host bytes).
  virtual void prepare(const std::vector<EntryPlan>& plans, const std::vector<std::vector<char>>& send_data) = 0;
  // Copies entry i's receive buffer to host memory (recv_elems * type size bytes).
  virtual void download(int entry, void* dst) = 0;

  // --- worker thread ------------------------------------------------------------------------------------------------
  // Called first by each trial's worker; `cancel` is set by the watchdog (poll it in any wait).
  virtual void worker_begin(const std::atomic<bool>& cancel) = 0;
  // Fills every receive buffer with the poison byte (before the checked iteration).
  virtual void poison_outputs() = 0;
  virtual void start_iteration(int iteration) = 0;
  virtual void submit(int entry) = 0;
  virtual void device_sync() = 0;
  virtual void host_alloc(HostAllocKind kind, size_t bytes) = 0;
  virtual void cuda_free() = 0;
  virtual void lazy_kernel() = 0;
  virtual void compute(double us) = 0;
  // Ends the iteration's program: makes every submitted result usable (may return before the GPU is done).
  virtual void end_iteration() = 0;
  // Waits until every iteration is done and returns their timings (in start order). Returns early, throwing
  // BackendError, once `cancel` is set.
  virtual std::vector<IterationTiming> finish(const std::atomic<bool>& cancel) = 0;
  virtual EngineCounters counters() = 0;
  // The backend's own state, for diagnosing a trial the watchdog stopped (run.diagnose); "" if none. Round 0: what
  // can be read without blocking; round 1: more, which may block (the driver runs round 1 after every rank's round 0).
  virtual std::string diagnostics(int round) {
    (void)round;
    return "";
  }

  // Set by the worker before worker_begin: a backend calls it (on the worker thread) whenever it sees a collective
  // complete while it waits, so that the watchdog counts that as progress (it declares a deadlock after run.timeout
  // seconds without progress on any rank).
  void set_progress_hook(std::function<void()> hook) { progress_hook_ = std::move(hook); }

 protected:
  void report_progress() const {
    if (progress_hook_) progress_hook_();
  }

 private:
  std::function<void()> progress_hook_;
};

struct BackendContext {
  int world_rank = 0, world_size = 1;
  int local_rank = 0, local_size = 1;
  const Workload* workload = nullptr;
};

// Creates a backend by name; throws BackendError with the reason when it is not available here (not built, no GPU).
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendContext& ctx);
// Whether this build has the backend at all (compiled in).
bool backend_compiled(const std::string& name);

}  // namespace dfccl::harness
