#include "model.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace dfccl::sim {

ModelSpec ModelSpec::parse(std::string_view name, int limit) {
  ModelSpec m;
  if (name == "a" || name == "queue") {
    m.model = Model::queue;
  } else if (name == "b" || name == "stream") {
    m.model = Model::stream;
  } else if (name == "c" || name == "stream-limit") {
    m.model = Model::stream_limit;
    if (limit < 1) throw std::invalid_argument("model c (stream-limit) needs a limit R >= 1");
    m.limit = limit;
  } else if (name == "d" || name == "dfccl") {
    m.model = Model::dfccl;
  } else {
    throw std::invalid_argument("unknown model '" + std::string(name) +
                                "' (a|queue, b|stream, c|stream-limit, d|dfccl)");
  }
  return m;
}

std::string ModelSpec::letter() const {
  switch (model) {
    case Model::queue: return "a";
    case Model::stream: return "b";
    case Model::stream_limit: return "c";
    case Model::dfccl: return "d";
  }
  return "?";
}

std::string ModelSpec::name() const {
  switch (model) {
    case Model::queue: return "queue";
    case Model::stream: return "stream";
    case Model::stream_limit: return "stream-limit(R=" + std::to_string(limit) + ")";
    case Model::dfccl: return "dfccl";
  }
  return "?";
}

std::string_view to_string(WaitKind kind) {
  switch (kind) {
    case WaitKind::queue_head: return "queue head";
    case WaitKind::sync: return "sync";
    case WaitKind::slot: return "slot";
  }
  return "?";
}

std::vector<int> Cycle::ranks() const {
  std::vector<int> r;
  for (const auto& e : edges) r.push_back(e.from);
  return r;
}

std::string Cycle::describe(const Scenario& s, size_t max_hops) const {
  if (edges.empty()) return "";
  std::string out = std::to_string(edges.size()) + " ranks: rank " + std::to_string(edges.front().from);
  size_t shown = 0;
  for (const auto& e : edges) {
    if (shown == max_hops) {
      out += " -> ... (" + std::to_string(edges.size() - shown) + " more hops) -> rank " +
             std::to_string(edges.front().from);
      break;
    }
    out += " -(" + std::string(to_string(e.kind)) + ": " + s.collective_name(e.collective) + " " +
           s.layout().group_name(s.group_of(e.collective)) + ")-> rank " + std::to_string(e.to);
    ++shown;
  }
  return out;
}

Outcome Engine::run(const Programs& p, ModelSpec model, bool want_cycle) {
  const int n = s_.num_ranks();
  if (p.num_ranks() != n) throw std::invalid_argument("programs have a different number of ranks than the layout");
  pc_.assign(p.begin.begin(), p.begin.end() - 1);
  head_ = pc_;
  pending_.assign(n, 0);
  blocked_.assign(n, 0);
  const auto sizes = s_.collective_sizes();
  missing_.assign(sizes.begin(), sizes.end());
  done_.clear();
  ready_.resize(n);
  for (int r = 0; r < n; ++r) ready_[r] = n - 1 - r;  // rank 0 runs first
  completed_ = 0;

  switch (model.model) {
    case Model::queue: run_model<Model::queue>(p, 0); break;
    case Model::stream: run_model<Model::stream>(p, 0); break;
    case Model::stream_limit: run_model<Model::stream_limit>(p, model.limit); break;
    case Model::dfccl: run_model<Model::dfccl>(p, 0); break;
  }

  Outcome o;
  o.completed = completed_;
  for (int r = 0; r < n; ++r) o.stuck_ranks += !finished(p, r, model.model);
  o.deadlock = o.stuck_ranks > 0;
  if (o.deadlock && want_cycle) o.cycle = find_cycle(n, wait_for_graph(p, model));
  return o;
}

bool Engine::finished(const Programs& p, int r, Model m) const {
  if (pc_[r] != p.begin[r + 1]) return false;
  switch (m) {
    case Model::queue: return head_[r] == pc_[r];
    case Model::stream:
    case Model::stream_limit: return pending_[r] == 0;
    case Model::dfccl: return true;
  }
  return true;
}

template <Model M>
void Engine::run_model(const Programs& p, int limit) {
  for (;;) {
    if constexpr (M == Model::queue) {
      if (!done_.empty()) {
        const Step c = done_.back();
        done_.pop_back();
        complete_queue_head(p, c);
        continue;
      }
    }
    if (ready_.empty()) break;
    const int r = ready_.back();
    ready_.pop_back();
    run_host<M>(p, r, limit);
  }
}

template <Model M>
void Engine::run_host(const Programs& p, int r, int limit) {
  const Step* st = p.steps.data();
  int64_t pc = pc_[r];
  const int64_t end = p.begin[r + 1];
  while (pc < end) {
    const Step x = st[pc];
    if (x == kSync) {
      if constexpr (M == Model::dfccl) {
        ++pc;  // the daemon yields: a sync never waits on collectives
      } else if constexpr (M == Model::queue) {
        if (head_[r] < pc) {  // the queue is not empty
          blocked_[r] = 1;
          break;
        }
        head_[r] = ++pc;
      } else {
        if (pending_[r] > 0) {
          blocked_[r] = 1;
          break;
        }
        ++pc;
      }
      continue;
    }
    if constexpr (M == Model::stream_limit) {
      if (pending_[r] >= limit) {
        blocked_[r] = 2;
        break;
      }
    }
    if constexpr (M == Model::queue) {
      const bool was_empty = head_[r] == pc;
      ++pc;
      if (was_empty && --missing_[x] == 0) done_.push_back(x);
    } else {
      ++pc;
      if constexpr (M != Model::dfccl) ++pending_[r];
      if (--missing_[x] == 0) {
        ++completed_;
        if constexpr (M != Model::dfccl) {
          for (int m : s_.members(s_.group_of(x))) {
            const int32_t left = --pending_[m];
            const uint8_t b = blocked_[m];
            if ((b == 1 && left == 0) || (b == 2 && left < limit)) {
              blocked_[m] = 0;
              ready_.push_back(m);
            }
          }
        }
      }
    }
  }
  pc_[r] = pc;
}

void Engine::complete_queue_head(const Programs& p, Step c) {
  ++completed_;
  const Step* st = p.steps.data();
  for (int m : s_.members(s_.group_of(c))) {
    int64_t h = head_[m] + 1;
    const int64_t pcm = pc_[m];
    while (h < pcm && st[h] == kSync) ++h;
    head_[m] = h;
    if (h < pcm) {
      const Step next = st[h];
      if (--missing_[next] == 0) done_.push_back(next);
    } else if (blocked_[m] == 1) {
      blocked_[m] = 0;
      ready_.push_back(m);
    }
  }
}

std::vector<WaitEdge> Engine::wait_for_graph(const Programs& p, ModelSpec model) const {
  std::vector<WaitEdge> edges;
  const int n = s_.num_ranks();
  const Step* st = p.steps.data();
  auto incomplete = [&](Step x) { return missing_[x] > 0; };
  // reached[c]: the members that have reached incomplete collective c (submitted it, or for (a) have it at the head).
  std::unordered_map<Step, std::vector<int>> reached;
  if (model.model == Model::queue) {
    for (int r = 0; r < n; ++r)
      if (head_[r] < pc_[r]) reached[st[head_[r]]].push_back(r);
  } else {
    for (int r = 0; r < n; ++r)
      for (int64_t i = p.begin[r]; i < pc_[r]; ++i)
        if (st[i] != kSync && incomplete(st[i])) reached[st[i]].push_back(r);
  }
  auto add_edges = [&](int r, Step c, WaitKind kind) {
    const auto& have = reached[c];
    for (int m : s_.members(s_.group_of(c)))
      if (std::find(have.begin(), have.end(), m) == have.end()) edges.push_back({r, m, c, kind});
  };
  for (int r = 0; r < n; ++r) {
    if (finished(p, r, model.model)) continue;
    switch (model.model) {
      case Model::queue:
        if (head_[r] < pc_[r]) add_edges(r, st[head_[r]], WaitKind::queue_head);
        break;
      case Model::stream:
      case Model::stream_limit:
        if (blocked_[r] != 0) {
          const WaitKind kind = blocked_[r] == 1 ? WaitKind::sync : WaitKind::slot;
          for (int64_t i = p.begin[r]; i < pc_[r]; ++i)
            if (st[i] != kSync && incomplete(st[i])) add_edges(r, st[i], kind);
        }
        break;
      case Model::dfccl: break;
    }
  }
  return edges;
}

std::optional<Cycle> Engine::find_cycle(int n, const std::vector<WaitEdge>& edges) {
  // Adjacency in CSR form, keeping the edges' order for each rank.
  std::vector<int> start(n + 1, 0);
  for (const auto& e : edges) ++start[e.from + 1];
  for (int r = 0; r < n; ++r) start[r + 1] += start[r];
  std::vector<int> adj(edges.size());
  {
    std::vector<int> fill(start.begin(), start.end() - 1);
    for (size_t i = 0; i < edges.size(); ++i) adj[fill[edges[i].from]++] = static_cast<int>(i);
  }
  enum : uint8_t { white, gray, black };
  std::vector<uint8_t> color(n, white);
  std::vector<int> next(n, 0);  // next adjacency position to explore
  std::vector<int> via;         // edge indices of the current DFS path
  std::vector<int> path;        // ranks of the current DFS path
  for (int root = 0; root < n; ++root) {
    if (color[root] != white || start[root] == start[root + 1]) continue;
    path.assign(1, root);
    via.clear();
    color[root] = gray;
    next[root] = start[root];
    while (!path.empty()) {
      const int u = path.back();
      if (next[u] == start[u + 1]) {
        color[u] = black;
        path.pop_back();
        if (!via.empty()) via.pop_back();
        continue;
      }
      const int ei = adj[next[u]++];
      const int v = edges[ei].to;
      if (color[v] == gray) {  // back edge: the cycle is the path from v to u plus this edge
        Cycle c;
        const auto pos = std::find(path.begin(), path.end(), v) - path.begin();
        for (size_t i = static_cast<size_t>(pos); i < via.size(); ++i) c.edges.push_back(edges[via[i]]);
        c.edges.push_back(edges[ei]);
        return c;
      }
      if (color[v] == white) {
        color[v] = gray;
        next[v] = start[v];
        path.push_back(v);
        via.push_back(ei);
      }
    }
  }
  return std::nullopt;
}

}  // namespace dfccl::sim
