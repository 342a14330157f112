#include "rank_program.h"

#include <algorithm>
#include <map>
#include <tuple>

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
constexpr uint64_t kTagMix = 0x4D49;       // "MI"
constexpr uint64_t kTagProg = 0x5052;      // "PR"
constexpr uint64_t kP2pRankDraw = 720720;  // a multiple of every group size up to 16: the modulo is uniform

// Appends a submission of `entry` and the disturbances drawn after it.
void append_submission(std::vector<Op>& prog, int entry, const Workload& w, Rng& rng) {
  prog.push_back(Op{OpKind::Submit, entry, {}});
  if (w.compute_us > 0 && rng.bernoulli(w.compute_probability)) prog.push_back(Op{OpKind::Compute, -1, {}});
  if (w.sync_placement == SyncPlacement::Between && rng.bernoulli(w.sync_probability))
    prog.push_back(Op{OpKind::DeviceSync, -1, {}});
  if (rng.bernoulli(w.host_alloc_probability))
    prog.push_back(Op{OpKind::HostAlloc, -1, w.host_alloc_kinds[rng.below(w.host_alloc_kinds.size())]});
  if (rng.bernoulli(w.cuda_free_probability)) prog.push_back(Op{OpKind::CudaFree, -1, {}});
  if (rng.bernoulli(w.lazy_kernel_probability)) prog.push_back(Op{OpKind::LazyKernel, -1, {}});
}

// The submissions in `order`, each with its disturbances, then the synchronization before the waits and WaitAll.
std::vector<Op> program_of(const std::vector<int>& order, const Workload& w, Rng& rng) {
  std::vector<Op> prog;
  for (int entry : order) append_submission(prog, entry, w, rng);
  if (w.sync_placement == SyncPlacement::BeforeWait && rng.bernoulli(w.sync_probability))
    prog.push_back(Op{OpKind::DeviceSync, -1, {}});
  prog.push_back(Op{OpKind::WaitAll, -1, {}});
  return prog;
}

// Whether a step needs the ordering by lanes and dependencies (point-to-point entries, per-rank positions).
bool has_order_constraints(const std::vector<StepEntry>& step) {
  return std::any_of(step.begin(), step.end(), [](const StepEntry& e) {
    return e.coll->pairwise || e.stage >= 0 || e.seq >= 0 || e.seq_dst >= 0 || !e.after.empty();
  });
}

// The lanes of an entry on this rank: operations whose relative order must be the same on every rank for their
// matching (a communicator's collectives; the sends to one peer; the receives from one peer). sendrecv and
// all_to_all are collectives and transfers at once (NCCL matches their transfers with ncclSend / ncclRecv).
using Lane = std::tuple<int, int, int>;  // (communicator slot, 0 collective | 1 send | 2 receive, peer)
std::vector<Lane> lanes_of(const StepEntry& e, const EntryPlan& p) {
  std::vector<Lane> lanes;
  if (!e.coll->pairwise) lanes.emplace_back(p.slot, 0, 0);
  if (e.coll->kind == CollKind::AllToAll)
    for (int q = 0; q < p.group_size; ++q) {
      lanes.emplace_back(p.slot, 1, q);
      lanes.emplace_back(p.slot, 2, q);
    }
  if (p.send_peer >= 0) lanes.emplace_back(p.slot, 1, p.send_peer);
  if (p.recv_peer >= 0) lanes.emplace_back(p.slot, 2, p.recv_peer);
  return lanes;
}

// This rank's canonical order: the entries it takes part in, by their position in its program (StepEntry::seq, or
// seq_dst where it only receives), then by index.
std::vector<int> canonical_order(const std::vector<StepEntry>& step, const std::vector<EntryPlan>& plans) {
  std::vector<std::pair<int, int>> keyed;
  for (size_t i = 0; i < step.size(); ++i) {
    if (plans[i].slot < 0) continue;
    const StepEntry& e = step[i];
    const bool only_receives = e.coll->pairwise && plans[i].send_peer < 0;
    const int seq = only_receives && e.seq_dst >= 0 ? e.seq_dst : e.seq;
    keyed.emplace_back(seq >= 0 ? seq : static_cast<int>(i), static_cast<int>(i));
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> order;
  for (const auto& [seq, i] : keyed) order.push_back(i);
  return order;
}

// A uniformly drawn ready entry at each step: a random order of `order` that keeps every lane's order and every
// dependency (StepEntry::after) between entries this rank takes part in.
std::vector<int> random_legal_order(const std::vector<int>& order, const std::vector<StepEntry>& step,
                                    const std::vector<EntryPlan>& plans, Rng& rng) {
  const size_t n = order.size();
  std::map<int, size_t> pos;  // entry -> its position in `order`
  for (size_t k = 0; k < n; ++k) pos[order[k]] = k;
  std::vector<std::vector<size_t>> next(n);
  std::vector<int> waiting(n, 0);
  std::map<Lane, size_t> last;
  auto edge = [&](size_t from, size_t to) {
    next[from].push_back(to);
    ++waiting[to];
  };
  for (size_t k = 0; k < n; ++k) {
    const int i = order[k];
    for (const Lane& l : lanes_of(step[i], plans[i])) {
      if (auto it = last.find(l); it != last.end()) edge(it->second, k);
      last[l] = k;
    }
    for (int d : step[i].after)
      if (auto it = pos.find(d); it != pos.end() && it->second < k) edge(it->second, k);
  }
  std::vector<size_t> ready;
  for (size_t k = 0; k < n; ++k)
    if (waiting[k] == 0) ready.push_back(k);
  std::vector<int> out;
  while (!ready.empty()) {
    const size_t pick = rng.below(ready.size());
    const size_t k = ready[pick];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(pick));
    out.push_back(order[k]);
    for (size_t to : next[k])
      if (--waiting[to] == 0) ready.push_back(to);
  }
  return out;
}

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
    if (e.coll->pairwise) {  // any two ranks of the group (modulo its size; the same one: a send to itself)
      e.src = static_cast<int>(rng.below(kP2pRankDraw));
      e.dst = static_cast<int>(rng.below(kP2pRankDraw));
    }
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

  return program_of(order, w, rng);
}

RankProgram rank_program(const std::vector<StepEntry>& step, const std::vector<EntryPlan>& plans, const Workload& w,
                         int rank, uint64_t trial, uint64_t iteration) {
  if (!has_order_constraints(step)) {
    RankProgram p{rank_program(step, w, rank, trial, iteration), false};
    p.reordered = !in_step_order(p.ops);
    return p;
  }
  Rng rng(Rng::seed_of({w.seed, kTagProg, trial, iteration, static_cast<uint64_t>(rank)}));
  const std::vector<int> canonical = canonical_order(step, plans);
  std::vector<int> order = canonical;
  if (rng.bernoulli(w.order_probability)) order = random_legal_order(canonical, step, plans, rng);
  return RankProgram{program_of(order, w, rng), order != canonical};
}

void assign_roles(const StepEntry& e, int pp_rank, EntryPlan& p) {
  if (e.stage >= 0 && pp_rank != e.stage) p.slot = -1;
  const int n = p.group_size;
  if (e.coll->kind == CollKind::SendRecv) {
    p.send_peer = (p.group_rank + 1) % n;
    p.recv_peer = (p.group_rank + n - 1) % n;
  }
  if (!e.coll->pairwise) return;
  const int src = e.src % n, dst = e.dst % n;
  p.root = src;
  p.send_peer = p.group_rank == src ? dst : -1;
  p.recv_peer = p.group_rank == dst ? src : -1;
  if (p.send_peer < 0) p.send_elems = 0;
  if (p.recv_peer < 0) p.recv_elems = 0;
  if (p.send_peer < 0 && p.recv_peer < 0) p.slot = -1;
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
