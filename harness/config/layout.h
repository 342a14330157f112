// The tp x dp x pp group layout (Megatron order: tp varies fastest, then dp, then pp):
//   world rank = pp_index * (dp * tp) + dp_index * tp + tp_index.
// A rank belongs to exactly one group of each kind. Pure arithmetic: the harness turns a membership into an MPI
// communicator with MPI_Comm_split(color, key = world rank), so the rank in the group is ordered by world rank.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dfccl::harness {

enum class GroupKind : int { World = 0, Tp = 1, Dp = 2, Pp = 3 };
inline constexpr int kNumGroupKinds = 4;

std::string_view group_name(GroupKind g);                     // world tp dp pp
std::optional<GroupKind> parse_group(std::string_view name);  // nullopt if unknown

struct Layout {
  int tp = 1, dp = 1, pp = 1;
  int world() const { return tp * dp * pp; }
};

struct Membership {
  GroupKind kind = GroupKind::World;
  int color = 0;             // identifies the group among those of its kind (MPI_Comm_split color)
  int rank = 0;              // rank inside the group
  int size = 1;              // ranks in the group
  std::vector<int> members;  // world ranks, in group-rank order
};

// The group of `kind` that `world_rank` belongs to.
Membership membership(const Layout& layout, GroupKind kind, int world_rank);
// Number of distinct groups of a kind.
int group_count(const Layout& layout, GroupKind kind);

}  // namespace dfccl::harness
