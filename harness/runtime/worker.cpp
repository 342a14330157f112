#include "worker.h"

#include "plan/rank_program.h"
#include "runtime/thread_name.h"

namespace dfccl::harness {
namespace {

// Executes one operation of a program on b; returns after it, as the backend defines (a submission does not wait).
void execute(Backend& b, WorkerState& sh, const Workload& w, const program::Op& op) {
  switch (op.kind) {
    case program::OpKind::Submit:
      if (sh.plans[op.entry].slot >= 0) b.submit(op.entry);
      break;
    case program::OpKind::DeviceSync:
      ++sh.syncs;
      b.device_sync();
      break;
    case program::OpKind::HostAlloc:
      ++sh.syncs;
      b.host_alloc(op.alloc, w.host_alloc_bytes);
      break;
    case program::OpKind::CudaFree:
      ++sh.syncs;
      b.cuda_free();
      break;
    case program::OpKind::LazyKernel:
      ++sh.syncs;
      b.lazy_kernel();
      break;
    case program::OpKind::Compute: b.compute(w.compute_us); break;
    case program::OpKind::WaitAll: break;
  }
}

// The worker's body: every iteration's program, then the backend's timings. Throws on a backend error or a cancel.
// The progress hook left in the backend holds its own reference to the state.
void run_iterations(Backend& b, const std::shared_ptr<WorkerState>& shared, const WorkerJob& job) {
  WorkerState& sh = *shared;
  const Workload& w = *job.workload;
  auto progress = [shared, t0 = job.t0] {
    shared->last_progress_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  };
  b.set_progress_hook(progress);  // collectives seen complete while the worker waits are progress too
  b.worker_begin(sh.cancel);
  for (int it = 0; it < job.iterations; ++it) {
    if (w.check && it == job.iterations - 1) b.poison_outputs();
    std::vector<program::Op> prog;
    if (job.replayed) {
      prog = job.replayed->ops;
      if (job.replayed->disordered) ++sh.reordered;
    } else {
      program::RankProgram rp =
          program::rank_program(sh.step, sh.plans, w, job.rank, job.trial_key, static_cast<uint64_t>(it));
      prog = std::move(rp.ops);
      if (rp.reordered) ++sh.reordered;
    }
    b.start_iteration(it);
    sh.at_iteration = it;
    for (size_t k = 0; k < prog.size(); ++k) {
      if (sh.cancel.load()) throw BackendError("cancelled by the watchdog");
      sh.at_op = static_cast<int>(k);
      sh.at_kind = static_cast<int>(prog[k].kind);
      execute(b, sh, w, prog[k]);
      sh.executed.fetch_add(1);
      progress();
    }
    sh.at_op = -2;
    b.end_iteration();
    progress();
  }
  sh.at_op = -3;
  auto timings = b.finish(sh.cancel);
  std::lock_guard lock(sh.mu);
  sh.timings = std::move(timings);
}

}  // namespace

std::thread start_worker(Backend& b, std::shared_ptr<WorkerState> sh, WorkerJob job) {
  return std::thread([&b, sh = std::move(sh), job = std::move(job)] {
    name_this_thread("dfccl-worker");
    std::string err;
    try {
      run_iterations(b, sh, job);
    } catch (const std::exception& e) {
      err = e.what();
    }
    std::lock_guard lock(sh->mu);
    sh->error = err;
    sh->done = true;
    sh->cv.notify_all();
  });
}

}  // namespace dfccl::harness
