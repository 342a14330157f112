#include "scenario.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace dfccl::scenario {

Bernoulli::Bernoulli(double p) {
  if (!(p >= 0.0 && p <= 1.0)) throw std::invalid_argument("probability must be in [0, 1], got " + std::to_string(p));
  if (p >= 1.0) {
    always_ = true;
  } else {
    // floor(p * 2^64), exact for the double p (long double has a 64-bit mantissa on x86-64).
    const long double t = std::ldexp(static_cast<long double>(p), 64);
    threshold_ = static_cast<uint64_t>(t);
  }
}

Geometric::Geometric(double p) {
  if (!(p >= 0.0 && p <= 1.0)) throw std::invalid_argument("probability must be in [0, 1], got " + std::to_string(p));
  never_ = p <= 0.0;
  always_ = p >= 1.0;
  if (!never_ && !always_) inv_log_q_ = 1.0 / std::log1p(-p);
}

std::string_view to_string(GroupKind kind) {
  switch (kind) {
    case GroupKind::tp: return "tp";
    case GroupKind::dp: return "dp";
    case GroupKind::pp: return "pp";
    case GroupKind::generic: break;
  }
  return "g";
}

namespace {

[[noreturn]] void bad(std::string_view spec, const std::string& why) {
  throw std::invalid_argument("layout '" + std::string(spec) + "': " + why);
}

int to_int(std::string_view spec, std::string_view s, const char* what) {
  int v = 0;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty()) bad(spec, std::string("bad ") + what + " '" + std::string(s) + "'");
  return v;
}

std::vector<std::string_view> split(std::string_view s, std::string_view seps) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || seps.find(s[i]) != std::string_view::npos) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

}  // namespace

Layout Layout::megatron(int tp, int dp, int pp, int colls_tp, int colls_dp, int colls_pp) {
  if (tp < 1 || dp < 1 || pp < 1) throw std::invalid_argument("megatron: tp, dp and pp must be >= 1");
  Layout l;
  l.spec = "megatron:" + std::to_string(tp) + "x" + std::to_string(dp) + "x" + std::to_string(pp) +
           ":tp=" + std::to_string(colls_tp) + ",dp=" + std::to_string(colls_dp) + ",pp=" + std::to_string(colls_pp);
  l.num_ranks = tp * dp * pp;
  auto rank = [&](int p, int d, int t) { return (p * dp + d) * tp + t; };
  auto add = [&](std::vector<int> members, GroupKind kind, int colls) {
    if (members.size() < 2) return;
    l.groups.push_back(std::move(members));
    l.kinds.push_back(kind);
    l.colls.push_back(colls);
  };
  for (int p = 0; p < pp; ++p) {
    for (int d = 0; d < dp; ++d) {
      std::vector<int> g;
      for (int t = 0; t < tp; ++t) g.push_back(rank(p, d, t));
      add(std::move(g), GroupKind::tp, colls_tp);
    }
    for (int t = 0; t < tp; ++t) {
      std::vector<int> g;
      for (int d = 0; d < dp; ++d) g.push_back(rank(p, d, t));
      add(std::move(g), GroupKind::dp, colls_dp);
    }
  }
  for (int p = 0; p + 1 < pp; ++p)
    for (int d = 0; d < dp; ++d)
      for (int t = 0; t < tp; ++t) add({rank(p, d, t), rank(p + 1, d, t)}, GroupKind::pp, colls_pp);
  l.validate();
  return l;
}

Layout Layout::random_regular(int n, int k, int m, uint64_t layout_seed, int colls) {
  if (n < 2 || k < 2 || m < 1 || k > n || n % k != 0)
    throw std::invalid_argument("random: need N >= 2, 2 <= K <= N, K divides N and M >= 1");
  Layout l;
  l.spec = "random:" + std::to_string(n) + "x" + std::to_string(k) + "x" + std::to_string(m) + "@" +
           std::to_string(layout_seed);
  l.num_ranks = n;
  SplitMix64 rng(derive(mix64(layout_seed), static_cast<uint64_t>(Stream::layout)));
  std::vector<int> perm(n);
  for (int round = 0; round < m; ++round) {
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(static_cast<uint64_t>(i) + 1)]);
    for (int b = 0; b < n / k; ++b) {
      std::vector<int> g(perm.begin() + b * k, perm.begin() + (b + 1) * k);
      std::sort(g.begin(), g.end());
      l.groups.push_back(std::move(g));
      l.kinds.push_back(GroupKind::generic);
      l.colls.push_back(colls);
    }
  }
  l.validate();
  return l;
}

Layout Layout::explicit_groups(std::vector<std::vector<int>> groups, int colls) {
  Layout l;
  l.spec = "groups:";
  for (auto& g : groups) {
    std::sort(g.begin(), g.end());
    for (size_t i = 0; i < g.size(); ++i) {
      if (i) l.spec += ',';
      l.spec += std::to_string(g[i]);
    }
    l.spec += ";";
    for (int r : g) l.num_ranks = std::max(l.num_ranks, r + 1);
  }
  if (!groups.empty()) l.spec.pop_back();
  l.groups = std::move(groups);
  l.kinds.assign(l.groups.size(), GroupKind::generic);
  l.colls.assign(l.groups.size(), colls);
  l.validate();
  return l;
}

Layout Layout::parse(std::string_view spec, int default_colls) {
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) bad(spec, "expected megatron:..., random:... or groups:...");
  const std::string_view kind = spec.substr(0, colon);
  std::string_view rest = spec.substr(colon + 1);
  try {
    if (kind == "megatron") {
      std::string_view counts;
      if (auto c2 = rest.find(':'); c2 != std::string_view::npos) {
        counts = rest.substr(c2 + 1);
        rest = rest.substr(0, c2);
      }
      auto dims = split(rest, "x");
      if (dims.size() != 3) bad(spec, "expected megatron:TPxDPxPP");
      int c[3] = {default_colls, default_colls, default_colls};
      if (!counts.empty()) {
        for (auto kv : split(counts, ",")) {
          auto eq = kv.find('=');
          if (eq == std::string_view::npos) bad(spec, "expected tp=A,dp=B,pp=C after the dimensions");
          auto key = kv.substr(0, eq);
          int v = to_int(spec, kv.substr(eq + 1), "collective count");
          if (key == "tp") c[0] = v;
          else if (key == "dp") c[1] = v;
          else if (key == "pp") c[2] = v;
          else bad(spec, "unknown group kind '" + std::string(key) + "' (tp, dp or pp)");
        }
      }
      return megatron(to_int(spec, dims[0], "TP"), to_int(spec, dims[1], "DP"), to_int(spec, dims[2], "PP"), c[0], c[1],
                      c[2]);
    }
    if (kind == "random") {
      uint64_t seed = 1;
      if (auto at = rest.find('@'); at != std::string_view::npos) {
        seed = static_cast<uint64_t>(to_int(spec, rest.substr(at + 1), "layout seed"));
        rest = rest.substr(0, at);
      }
      auto dims = split(rest, "x");
      if (dims.size() != 3) bad(spec, "expected random:NxKxM[@S]");
      return random_regular(to_int(spec, dims[0], "N"), to_int(spec, dims[1], "K"), to_int(spec, dims[2], "M"), seed,
                            default_colls);
    }
    if (kind == "groups") {
      std::vector<std::vector<int>> groups;
      for (auto gs : split(rest, ";")) {
        std::vector<int> g;
        for (auto rs : split(gs, ",-")) g.push_back(to_int(spec, rs, "rank"));
        groups.push_back(std::move(g));
      }
      return explicit_groups(std::move(groups), default_colls);
    }
  } catch (const std::invalid_argument& e) {
    if (std::string_view(e.what()).starts_with("layout '")) throw;
    bad(spec, e.what());
  }
  bad(spec, "unknown layout kind '" + std::string(kind) + "'");
}

void Layout::validate() const {
  if (num_ranks < 1) throw std::invalid_argument("layout '" + spec + "': no ranks");
  if (groups.empty()) throw std::invalid_argument("layout '" + spec + "': no groups");
  if (kinds.size() != groups.size() || colls.size() != groups.size())
    throw std::invalid_argument("layout '" + spec + "': kinds/colls do not match groups");
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& m = groups[g];
    if (m.size() < 2)
      throw std::invalid_argument("layout '" + spec + "': group " + std::to_string(g) + " has < 2 ranks");
    for (size_t i = 0; i < m.size(); ++i) {
      if (m[i] < 0 || m[i] >= num_ranks)
        throw std::invalid_argument("layout '" + spec + "': rank out of range in group " + std::to_string(g));
      if (i && m[i] <= m[i - 1])
        throw std::invalid_argument("layout '" + spec + "': group " + std::to_string(g) + " repeats a rank");
    }
    if (colls[g] < 1) throw std::invalid_argument("layout '" + spec + "': collective count must be >= 1");
  }
}

std::string Layout::group_name(int g) const {
  std::string s = "g";
  s += std::to_string(g);
  s += '(';
  s += to_string(kinds[g]);
  s += ':';
  const auto& m = groups[g];
  for (size_t i = 0; i < m.size() && i < 8; ++i) {
    if (i) s += ',';
    s += std::to_string(m[i]);
  }
  if (m.size() > 8) s += ",...";
  s += ')';
  return s;
}

Programs Programs::from(const std::vector<std::vector<Step>>& per_rank) {
  Programs p;
  p.begin.push_back(0);
  for (const auto& v : per_rank) {
    p.steps.insert(p.steps.end(), v.begin(), v.end());
    p.begin.push_back(static_cast<int64_t>(p.steps.size()));
  }
  return p;
}

Scenario::Scenario(Layout layout, ScenarioParams params)
    : layout_(std::move(layout)),
      params_(params),
      disorder_(params.p_disorder),
      disorder_gap_(params.p_disorder),
      sync_gap_(params.p_sync) {
  layout_.validate();
  const int ng = layout_.num_groups(), nr = layout_.num_ranks;
  member_begin_.assign(ng + 1, 0);
  for (int g = 0; g < ng; ++g) {
    member_begin_[g + 1] = member_begin_[g] + static_cast<int64_t>(layout_.groups[g].size());
    members_.insert(members_.end(), layout_.groups[g].begin(), layout_.groups[g].end());
  }
  first_.assign(ng + 1, 0);
  for (int g = 0; g < ng; ++g) {
    first_[g + 1] = first_[g] + layout_.colls[g];
    num_submissions_ += static_cast<int64_t>(layout_.colls[g]) * group_size(g);
  }
  if (first_.back() > std::numeric_limits<Step>::max())
    throw std::invalid_argument("layout '" + layout_.spec + "': more than 2^31 collectives");
  group_of_.resize(first_.back());
  coll_size_.resize(first_.back());
  for (int g = 0; g < ng; ++g) {
    std::fill(group_of_.begin() + first_[g], group_of_.begin() + first_[g + 1], g);
    std::fill(coll_size_.begin() + first_[g], coll_size_.begin() + first_[g + 1], group_size(g));
  }

  // Groups of each rank, ascending.
  std::vector<std::vector<int>> rg(nr);
  for (int g = 0; g < ng; ++g)
    for (int r : layout_.groups[g]) rg[r].push_back(g);
  rgroup_begin_.assign(nr + 1, 0);
  for (int r = 0; r < nr; ++r) {
    rgroup_begin_[r + 1] = rgroup_begin_[r] + static_cast<int64_t>(rg[r].size());
    rgroups_.insert(rgroups_.end(), rg[r].begin(), rg[r].end());
  }

  // Canonical order: a rank's collectives sorted by (2k+1)/(2*C_g), ties by group id (round-robin for equal C).
  rank_begin_.assign(nr + 1, 0);
  canon_.reserve(num_submissions_);
  canon_local_.reserve(num_submissions_);
  struct Item {
    int64_t num, den;  // (2k+1) / (2 C_g)
    int g, local, k;
  };
  std::vector<Item> items;
  for (int r = 0; r < nr; ++r) {
    items.clear();
    for (size_t i = 0; i < rg[r].size(); ++i) {
      const int g = rg[r][i];
      for (int k = 0; k < layout_.colls[g]; ++k)
        items.push_back({2 * int64_t{k} + 1, 2 * int64_t{layout_.colls[g]}, g, static_cast<int>(i), k});
    }
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      const int64_t l = a.num * b.den, rr = b.num * a.den;
      return l != rr ? l < rr : a.g < b.g;
    });
    for (const auto& it : items) {
      canon_.push_back(collective_id(it.g, it.k));
      canon_local_.push_back(it.local);
    }
    rank_begin_[r + 1] = static_cast<int64_t>(canon_.size());
  }
}

std::string Scenario::collective_name(Step cid) const {
  std::string s = "g";
  s += std::to_string(group_of(cid));
  s += '#';
  s += std::to_string(index_in_group(cid));
  return s;
}

std::span<const int> Scenario::groups_of(int rank) const {
  return {rgroups_.data() + rgroup_begin_[rank], static_cast<size_t>(rgroup_begin_[rank + 1] - rgroup_begin_[rank])};
}

std::span<const Step> Scenario::canonical(int rank) const {
  return {canon_.data() + rank_begin_[rank], static_cast<size_t>(rank_begin_[rank + 1] - rank_begin_[rank])};
}

void Scenario::program(int rank, uint64_t trial, std::vector<Step>& out) const {
  out.clear();
  const auto canon = canonical(rank);
  const int32_t* local = canon_local_.data() + rank_begin_[rank];
  const auto groups = groups_of(rank);
  const size_t n = canon.size();
  if (n == 0) return;

  thread_local std::vector<uint8_t> taken;
  thread_local std::vector<int> next_k;
  taken.assign(n, 0);
  next_k.assign(groups.size(), 0);
  int active = 0;  // groups with collectives left = candidates at each submission
  for (int g : groups) active += layout_.colls[g] > 0;

  const uint64_t tk = trial_key(params_.seed, trial);
  SplitMix64 rd(stream_state(tk, static_cast<uint64_t>(rank), Stream::disorder));
  SplitMix64 rs(stream_state(tk, static_cast<uint64_t>(rank), Stream::sync));
  out.reserve(n + n / 64 + 8);

  // Pass-overs and syncs are Bernoulli processes; they are drawn as the gaps between their events.
  uint64_t dis_gap = disorder_gap_.draw(rd);  // decisions (submissions with >= 2 candidates) before the next pass-over
  uint64_t sync_gap = sync_gap_.draw(rs);     // submissions before the next sync
  size_t cursor = 0;                          // first collective not yet taken, in canonical order
  for (size_t i = 0; i < n; ++i) {
    while (taken[cursor]) ++cursor;
    size_t pick = cursor;
    if (active > 1) {
      if (dis_gap == 0) {
        // Pass over the first candidate, and each further one with probability p_disorder, never past the last.
        int skip = 1;
        while (skip + 1 < active && disorder_.test(rd)) ++skip;
        dis_gap = disorder_gap_.draw(rd);
        // The candidates are the groups' next collectives (their heads), in canonical order.
        int seen = 0;
        for (size_t j = cursor + 1;; ++j) {
          if (taken[j]) continue;
          if (index_in_group(canon[j]) != next_k[local[j]]) continue;  // not its group's head
          if (++seen == skip) {
            pick = j;
            break;
          }
        }
      } else if (dis_gap != Geometric::kNever) {
        --dis_gap;
      }
    }
    taken[pick] = 1;
    const int lg = local[pick];
    if (++next_k[lg] == layout_.colls[groups[lg]]) --active;
    out.push_back(canon[pick]);
    if (sync_gap == 0) {
      out.push_back(kSync);
      sync_gap = sync_gap_.draw(rs);
    } else if (sync_gap != Geometric::kNever) {
      --sync_gap;
    }
  }
}

void Scenario::programs(uint64_t trial, Programs& out) const {
  out.steps.clear();
  out.begin.assign(1, 0);
  thread_local std::vector<Step> one;
  for (int r = 0; r < num_ranks(); ++r) {
    program(r, trial, one);
    out.steps.insert(out.steps.end(), one.begin(), one.end());
    out.begin.push_back(static_cast<int64_t>(out.steps.size()));
  }
}

}  // namespace dfccl::scenario
