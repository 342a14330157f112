#include "replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace dfccl::harness::replay {
namespace {

scenario::Scenario make_scenario(const Workload& w) {
  try {
    scenario::Layout layout = scenario::Layout::parse(w.sim_layout, w.sim_colls);
    return scenario::Scenario(std::move(layout), scenario::ScenarioParams{w.sim_disorder, w.sim_sync, w.sim_seed});
  } catch (const std::invalid_argument& e) {
    throw WorkloadError(fmt::format("'sim.layout': {}", e.what()));
  }
}

}  // namespace

Replay::Replay(const Workload& w) : w_(w), scenario_(make_scenario(w)), first_trial_(w.sim_first_trial) {
  if (w.kind != Workload::Kind::Replay) throw WorkloadError("'kind': a replay needs kind = 'replay' (a [sim] table)");
}

std::vector<StepEntry> Replay::step() const {
  std::vector<StepEntry> step;
  step.reserve(static_cast<size_t>(scenario_.num_collectives()));
  for (int64_t id = 0; id < scenario_.num_collectives(); ++id) {
    const auto cid = static_cast<scenario::Step>(id);
    StepEntry e;
    e.coll = w_.sim_coll;
    e.group = GroupKind::World;  // not used by a replay: sim_group names the communicator
    e.bytes = w_.sim_bytes;
    e.dtype = w_.dtype;
    e.op = w_.op;
    e.root = w_.root;
    e.priority = w_.priority;
    e.label = scenario_.collective_name(cid);
    e.sim_group = scenario_.group_of(cid);
    step.push_back(std::move(e));
  }
  return step;
}

int Replay::rank_in_group(int g, int world_rank) const {
  auto m = scenario_.members(g);
  auto it = std::find(m.begin(), m.end(), world_rank);
  return it == m.end() ? -1 : static_cast<int>(it - m.begin());
}

std::string Replay::group_kind(int g) const { return std::string(scenario::to_string(scenario_.layout().kinds[g])); }

std::string Replay::group_name(int g) const { return scenario_.layout().group_name(g); }

Replay::Program Replay::program(int rank, uint64_t scenario_trial) const {
  std::vector<scenario::Step> steps;
  scenario_.program(rank, scenario_trial, steps);
  Program p;
  p.ops.reserve(steps.size() + 1);
  auto canonical = scenario_.canonical(rank);
  size_t k = 0;
  for (scenario::Step s : steps) {
    if (s == scenario::kSync) {
      p.ops.push_back(program::Op{program::OpKind::DeviceSync, -1, {}});
      ++p.syncs;
    } else {
      p.ops.push_back(program::Op{program::OpKind::Submit, static_cast<int>(s), {}});
      if (k >= canonical.size() || canonical[k] != s) p.disordered = true;
      ++k;
      ++p.submissions;
    }
  }
  p.steps = static_cast<int64_t>(steps.size());
  p.ops.push_back(program::Op{program::OpKind::WaitAll, -1, {}});
  return p;
}

Replay::TrialStats Replay::trial_stats(uint64_t scenario_trial) const {
  TrialStats t;
  for (int r = 0; r < num_ranks(); ++r) {
    Program p = program(r, scenario_trial);
    t.steps += p.steps;
    t.submissions += p.submissions;
    t.syncs += p.syncs;
    t.disordered_ranks += p.disordered ? 1 : 0;
  }
  return t;
}

ReplayInfo Replay::info() const {
  ReplayInfo r;
  r.present = true;
  r.layout = w_.sim_layout;
  r.layout_spec = scenario_.layout().spec;
  r.ranks = scenario_.num_ranks();
  r.groups = scenario_.num_groups();
  r.colls = w_.sim_colls;
  r.collectives = scenario_.num_collectives();
  r.submissions = scenario_.num_submissions();
  r.p_disorder = w_.sim_disorder;
  r.p_sync = w_.sim_sync;
  r.seed = static_cast<int64_t>(w_.sim_seed);
  r.first_trial = static_cast<int64_t>(first_trial_);
  r.coll = std::string(w_.sim_coll->name);
  r.bytes = static_cast<int64_t>(w_.sim_bytes);
  for (int g = 0; g < num_groups(); ++g) {
    r.group_names.push_back(group_name(g));
    r.group_kinds.push_back(group_kind(g));
    r.group_sizes.push_back(scenario_.group_size(g));
    r.group_colls.push_back(scenario_.layout().colls[g]);
  }
  return r;
}

void check_world(const Workload& w, int world_size) {
  if (w.kind != Workload::Kind::Replay) return;
  Replay r(w);
  if (r.num_ranks() != world_size)
    throw WorkloadError(
        fmt::format("'sim.layout': '{}' has {} ranks, but mpirun started {}", w.sim_layout, r.num_ranks(), world_size));
}

}  // namespace dfccl::harness::replay
