// The random scenario generator (library dfccl_common), shared by the simulator and the harness's replay workload.
//
// A scenario is, for each rank, an exact program: an ordered list of steps, each either "submit collective k of group
// g" or "sync". It is a pure function of (layout, collectives per group, disorder probability, sync probability,
// seed, trial, rank): the harness process of rank r can generate its own program without generating the others.
// The generative model is specified in docs/simulator.md ("Scenarios"); this header is its implementation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "scenario_rng.h"

namespace dfccl::scenario {

enum class GroupKind : uint8_t { generic, tp, dp, pp };
std::string_view to_string(GroupKind kind);

// Groups of ranks (communicators) and the number of collectives each one runs. A layout specification is one of:
//   megatron:TPxDPxPP[:tp=A,dp=B,pp=C]  Megatron-LM tensor x data x pipeline parallelism; rank = (pp*DP + dp)*TP + tp.
//                                       TP groups (consecutive ranks), DP groups (stride TP inside a stage) and one
//                                       2-rank group per pipeline send/recv pair (stage s, s+1; same dp, tp).
//                                       Groups of one rank are omitted. A/B/C: collectives per TP/DP/PP group
//                                       (default: default_colls).
//   random:NxKxM[@S]                    N ranks; M rounds, each a random permutation of the ranks cut into N/K
//                                       groups of K (so every rank is in exactly M groups); layout seed S (default 1).
//   groups:a,b,c;d,e;...                explicit groups ('-' also separates ranks); N = largest rank + 1.
struct Layout {
  std::string spec;  // normalized specification, e.g. "megatron:4x4x4:tp=100,dp=100,pp=100"
  int num_ranks = 0;
  std::vector<std::vector<int>> groups;  // members of each group, ascending, at least 2, distinct
  std::vector<GroupKind> kinds;          // one per group
  std::vector<int> colls;                // collectives per group, >= 1

  // Parses a specification (above). Throws std::invalid_argument with a message naming the problem.
  static Layout parse(std::string_view spec, int default_colls);
  static Layout megatron(int tp, int dp, int pp, int colls_tp, int colls_dp, int colls_pp);
  static Layout random_regular(int n, int k, int m, uint64_t layout_seed, int colls);
  static Layout explicit_groups(std::vector<std::vector<int>> groups, int colls);

  int num_groups() const { return static_cast<int>(groups.size()); }
  // "g3(tp:0,1,2,3)": for messages. Lists at most 8 members.
  std::string group_name(int g) const;
  void validate() const;  // throws std::invalid_argument
};

// A step: a global collective id (>= 0) or kSync.
using Step = int32_t;
inline constexpr Step kSync = -1;

// All ranks' programs of one trial, stored flat.
struct Programs {
  std::vector<Step> steps;
  std::vector<int64_t> begin;  // num_ranks + 1 offsets into steps
  int num_ranks() const { return static_cast<int>(begin.size()) - 1; }
  std::span<const Step> rank(int r) const {
    return {steps.data() + begin[r], static_cast<size_t>(begin[r + 1] - begin[r])};
  }
  // Hand-built programs (tests): one vector of steps per rank.
  static Programs from(const std::vector<std::vector<Step>>& per_rank);
};

struct ScenarioParams {
  double p_disorder = 0.0;  // probability of passing over each candidate at each submission
  double p_sync = 0.0;      // probability of a sync after each submission
  uint64_t seed = 1;
};

class Scenario {
 public:
  Scenario(Layout layout, ScenarioParams params);

  const Layout& layout() const { return layout_; }
  const ScenarioParams& params() const { return params_; }
  int num_ranks() const { return layout_.num_ranks; }
  int num_groups() const { return layout_.num_groups(); }

  // Collective ids: collective k of group g has id first(g) + k.
  int64_t num_collectives() const { return first_.back(); }
  Step collective_id(int g, int k) const { return static_cast<Step>(first_[g] + k); }
  int group_of(Step cid) const { return group_of_[cid]; }
  int index_in_group(Step cid) const { return cid - static_cast<Step>(first_[group_of_[cid]]); }
  int group_size(int g) const { return static_cast<int>(member_begin_[g + 1] - member_begin_[g]); }
  std::span<const int> members(int g) const {
    return {members_.data() + member_begin_[g], static_cast<size_t>(member_begin_[g + 1] - member_begin_[g])};
  }
  // Group size of every collective (indexed by collective id).
  std::span<const int32_t> collective_sizes() const { return coll_size_; }
  // Sum over groups of size x collectives: the number of submissions in one trial.
  int64_t num_submissions() const { return num_submissions_; }
  // "g3#17" and, with the group's members, "g3#17(tp:0,1,2,3)".
  std::string collective_name(Step cid) const;

  // Groups of a rank (ascending) and its canonical order (the program at p_disorder = p_sync = 0).
  std::span<const int> groups_of(int rank) const;
  std::span<const Step> canonical(int rank) const;

  // The exact program of one rank in one trial (out is overwritten).
  void program(int rank, uint64_t trial, std::vector<Step>& out) const;
  // All ranks' programs of one trial.
  void programs(uint64_t trial, Programs& out) const;

 private:
  Layout layout_;
  ScenarioParams params_;
  Bernoulli disorder_;                 // each further pass-over after the first
  Geometric disorder_gap_, sync_gap_;  // decisions before the next pass-over, submissions before the next sync
  std::vector<int64_t> first_;         // num_groups + 1
  std::vector<int32_t> group_of_;      // per collective id
  std::vector<int32_t> coll_size_;     // per collective id: size of its group
  std::vector<int64_t> member_begin_;  // num_groups + 1 offsets into members_
  std::vector<int> members_;           // members of every group, concatenated
  int64_t num_submissions_ = 0;
  std::vector<int64_t> rank_begin_;    // num_ranks + 1 offsets into canon_ / canon_local_
  std::vector<Step> canon_;            // canonical order of every rank, concatenated
  std::vector<int32_t> canon_local_;   // index of the element's group among the rank's groups
  std::vector<int64_t> rgroup_begin_;  // num_ranks + 1 offsets into rgroups_
  std::vector<int> rgroups_;           // groups of every rank, concatenated
};

}  // namespace dfccl::scenario
