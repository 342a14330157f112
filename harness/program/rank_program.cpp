#include "rank_program.h"

#include <map>

namespace dfccl::harness::program {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Submit: return "submit";
    case OpKind::DeviceSync: return "device_sync";
    case OpKind::HostAlloc: return "host_alloc";
    case OpKind::CudaFree: return "cuda_free";
    case OpKind::LazyKernel: return "lazy_kernel";
    case OpKind::Compute: return "compute";
    case OpKind::WaitAll: return "wait_all";
  }
  return "?";
}

uint64_t Rng::mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t Rng::seed_of(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x6A09E667F3BCC909ull;
  for (uint64_t p : parts) h = mix(h ^ (p + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2)));
  return h;
}

namespace {
constexpr uint64_t kTagMix = 0x4D49;   // "MI"
constexpr uint64_t kTagProg = 0x5052;  // "PR"
}  // namespace

std::vector<StepEntry> draw_mix(const Workload& w, uint64_t trial) {
  Rng rng(Rng::seed_of({w.seed, kTagMix, w.mix_per_trial ? trial : 0}));
  double total = 0;
  for (const auto& [c, wt] : w.mix_weights) total += wt;
  std::vector<uint64_t> sizes = w.sizes();
  std::vector<StepEntry> step;
  for (int i = 0; i < w.mix_count; ++i) {
    StepEntry e;
    double x = rng.uniform() * total;
    e.coll = w.mix_weights.back().first;
    for (const auto& [c, wt] : w.mix_weights) {
      if (x < wt) {
        e.coll = c;
        break;
      }
      x -= wt;
    }
    e.group = w.mix_groups[rng.below(w.mix_groups.size())];
    e.bytes = sizes[rng.below(sizes.size())];
    e.dtype = w.dtype;
    e.op = w.op;
    e.root = w.root;
    e.priority = w.priority + static_cast<int>(rng.below(static_cast<uint64_t>(w.mix_priority_max) + 1));
    step.push_back(e);
  }
  return step;
}

std::vector<Op> rank_program(const std::vector<StepEntry>& step, const Workload& w, int rank, uint64_t trial,
                             uint64_t iteration) {
  Rng rng(Rng::seed_of({w.seed, kTagProg, trial, iteration, static_cast<uint64_t>(rank)}));

  // Order of submissions.
  std::vector<int> order;
  order.reserve(step.size());
  if (rng.bernoulli(w.order_probability)) {
    std::map<int, std::vector<int>> per_group;  // group kind -> its entries in step order
    for (size_t i = 0; i < step.size(); ++i) per_group[static_cast<int>(step[i].group)].push_back(static_cast<int>(i));
    std::map<int, size_t> next;
    size_t remaining = step.size();
    while (remaining > 0) {
      // Pick a group with probability proportional to its remaining entries: a uniform random interleaving.
      uint64_t pick = rng.below(remaining);
      for (auto& [g, entries] : per_group) {
        size_t left = entries.size() - next[g];
        if (pick < left) {
          order.push_back(entries[next[g]++]);
          break;
        }
        pick -= left;
      }
      --remaining;
    }
  } else {
    for (size_t i = 0; i < step.size(); ++i) order.push_back(static_cast<int>(i));
  }

  std::vector<Op> prog;
  for (int entry : order) {
    prog.push_back(Op{OpKind::Submit, entry, {}});
    if (w.compute_us > 0 && rng.bernoulli(w.compute_probability)) prog.push_back(Op{OpKind::Compute, -1, {}});
    if (w.sync_placement == SyncPlacement::Between && rng.bernoulli(w.sync_probability))
      prog.push_back(Op{OpKind::DeviceSync, -1, {}});
    if (rng.bernoulli(w.host_alloc_probability))
      prog.push_back(Op{OpKind::HostAlloc, -1, w.host_alloc_kinds[rng.below(w.host_alloc_kinds.size())]});
    if (rng.bernoulli(w.cuda_free_probability)) prog.push_back(Op{OpKind::CudaFree, -1, {}});
    if (rng.bernoulli(w.lazy_kernel_probability)) prog.push_back(Op{OpKind::LazyKernel, -1, {}});
  }
  if (w.sync_placement == SyncPlacement::BeforeWait && rng.bernoulli(w.sync_probability))
    prog.push_back(Op{OpKind::DeviceSync, -1, {}});
  prog.push_back(Op{OpKind::WaitAll, -1, {}});
  return prog;
}

bool in_step_order(const std::vector<Op>& program) {
  int last = -1;
  for (const Op& op : program) {
    if (op.kind != OpKind::Submit) continue;
    if (op.entry < last) return false;
    last = op.entry;
  }
  return true;
}

}  // namespace dfccl::harness::program
