// Rank programs: what each rank does in one iteration of a step, drawn deterministically from (workload seed,
// trial, iteration, rank). This is the harness's own generator, driven by the workload's knobs; the simulator's
// scenario model (common/scenario.h) is a different one, which a replay workload runs instead (plan/replay.h).
//
// A program is a list of operations. Submissions keep every group kind's own order (collectives of one communicator
// are matched by submission order, as in NCCL); with probability order.probability a rank interleaves the groups in
// a random order instead of the step's order (each interleaving equally likely). After each submission come, each
// with its probability, a compute kernel, a forced device synchronization (placement "between"), a host allocation,
// a cudaFree, the first launch of a lazily loaded kernel; with placement "before_wait" one synchronization point
// follows the last submission. The program ends with WaitAll: the results are waited for as late as possible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/workload.h"
#include "plan/entry_plan.h"

namespace dfccl::harness::program {

enum class OpKind : int {
  Submit = 0,
  DeviceSync = 1,
  HostAlloc = 2,
  CudaFree = 3,
  LazyKernel = 4,
  Compute = 5,
  WaitAll = 6
};
std::string_view op_kind_name(OpKind k);  // "submit", "device_sync", ... for messages

struct Op {
  OpKind kind = OpKind::Submit;
  int entry = -1;                                   // Submit: index into the step
  HostAllocKind alloc = HostAllocKind::MallocHost;  // HostAlloc
};

// A mix's step for a trial: mix.count entries drawn from (run.seed, trial), the same on every rank (one draw for
// the whole run when mix.per_trial is false).
std::vector<StepEntry> draw_mix(const Workload& w, uint64_t trial);

// Rank `rank`'s program for one iteration of `step`.
std::vector<Op> rank_program(const std::vector<StepEntry>& step, const Workload& w, int rank, uint64_t trial,
                             uint64_t iteration);

// Whether the submissions of a program follow the step's order (no reordering drawn).
bool in_step_order(const std::vector<Op>& program);

// This rank's part in an entry, on a plan made for a collective: none where the entry belongs to another pipeline
// stage (pp_rank: the rank's rank in the pp group); its peers in point-to-point entries (EntryPlan::send_peer,
// recv_peer: sendrecv rank+1 and rank-1; p2p dst on the sender, src on the receiver, p2p's root = src). A p2p sender
// has no receive buffer, its receiver no send buffer, the group's other ranks do not take part (slot -1).
void assign_roles(const StepEntry& e, int pp_rank, EntryPlan& p);

// Rank `rank`'s program for one iteration of `step`, with its plans (plan/entry_plan.h: which entries it takes part
// in, its peers). Steps of collectives only: the program above. Steps with p2p entries, stages, positions or
// dependencies (a pipeline's, a stress mix with p2p): the rank's canonical order (its entries by StepEntry::seq,
// then index), or with probability order.probability a random legal order: each ready entry equally likely, where an
// entry is ready once the entries before it in its lanes (the communicator's collectives, the sends to the same peer,
// the receives from the same peer: what matching needs) and its dependencies (StepEntry::after) are submitted.
// `reordered`: the submissions differ from the canonical order.
struct RankProgram {
  std::vector<Op> ops;
  bool reordered = false;
};
RankProgram rank_program(const std::vector<StepEntry>& step, const std::vector<EntryPlan>& plans, const Workload& w,
                         int rank, uint64_t trial, uint64_t iteration);

// A small deterministic generator (the standard distributions are not portable across libraries).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  static uint64_t mix(uint64_t x);                                 // SplitMix64's output function
  static uint64_t seed_of(std::initializer_list<uint64_t> parts);  // a seed from a tuple (order matters)
  uint64_t next() { return mix(state_ += 0x9E3779B97F4A7C15ull); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  bool bernoulli(double p) { return p > 0 && uniform() < p; }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }

 private:
  uint64_t state_;
};

}  // namespace dfccl::harness::program
