#include "layout.h"

#include <stdexcept>

namespace dfccl::harness {

std::string_view group_name(GroupKind g) {
  switch (g) {
    case GroupKind::World: return "world";
    case GroupKind::Tp: return "tp";
    case GroupKind::Dp: return "dp";
    case GroupKind::Pp: return "pp";
  }
  return "?";
}

std::optional<GroupKind> parse_group(std::string_view name) {
  for (int i = 0; i < kNumGroupKinds; ++i)
    if (group_name(static_cast<GroupKind>(i)) == name) return static_cast<GroupKind>(i);
  return std::nullopt;
}

int group_count(const Layout& l, GroupKind kind) {
  switch (kind) {
    case GroupKind::World: return 1;
    case GroupKind::Tp: return l.dp * l.pp;
    case GroupKind::Dp: return l.tp * l.pp;
    case GroupKind::Pp: return l.tp * l.dp;
  }
  return 1;
}

Membership membership(const Layout& l, GroupKind kind, int world_rank) {
  if (world_rank < 0 || world_rank >= l.world()) throw std::out_of_range("membership: rank outside the layout");
  int tp_i = world_rank % l.tp;
  int dp_i = (world_rank / l.tp) % l.dp;
  int pp_i = world_rank / (l.tp * l.dp);
  auto rank_of = [&](int t, int d, int p) { return p * l.dp * l.tp + d * l.tp + t; };
  Membership m;
  m.kind = kind;
  switch (kind) {
    case GroupKind::World:
      m.color = 0;
      m.rank = world_rank;
      for (int r = 0; r < l.world(); ++r) m.members.push_back(r);
      break;
    case GroupKind::Tp:
      m.color = pp_i * l.dp + dp_i;
      m.rank = tp_i;
      for (int t = 0; t < l.tp; ++t) m.members.push_back(rank_of(t, dp_i, pp_i));
      break;
    case GroupKind::Dp:
      m.color = pp_i * l.tp + tp_i;
      m.rank = dp_i;
      for (int d = 0; d < l.dp; ++d) m.members.push_back(rank_of(tp_i, d, pp_i));
      break;
    case GroupKind::Pp:
      m.color = dp_i * l.tp + tp_i;
      m.rank = pp_i;
      for (int p = 0; p < l.pp; ++p) m.members.push_back(rank_of(tp_i, dp_i, p));
      break;
  }
  m.size = static_cast<int>(m.members.size());
  return m;
}

}  // namespace dfccl::harness
