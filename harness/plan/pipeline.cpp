#include "pipeline.h"

#include <fmt/format.h>

#include <map>
#include <tuple>

namespace dfccl::harness::program {
namespace {

class Builder {
 public:
  explicit Builder(const PipelineShape& shape) : s_(shape), pos_(static_cast<size_t>(shape.stages), 0) {}

  std::vector<StepEntry> build() {
    for (int st = 0; st < s_.stages; ++st) build_stage(st);
    return std::move(step_);
  }

 private:
  // Stage st's program: 1F1B, then its dp all-reduces after every backward pass.
  void build_stage(int st) {
    const int m = s_.micro_batches, warmup = std::min(s_.stages - 1 - st, m);
    std::vector<int> fwd_last(static_cast<size_t>(m), -1), bwd_last;
    for (int i = 0; i < warmup; ++i) fwd_last[i] = forward(st, i);
    for (int i = 0; i + warmup < m; ++i) {
      fwd_last[i + warmup] = forward(st, i + warmup);
      bwd_last.push_back(backward(st, i, fwd_last[i]));
    }
    for (int i = m - warmup; i < m; ++i) bwd_last.push_back(backward(st, i, fwd_last[i]));
    for (int b = 0; b < s_.dp_buckets; ++b) {
      const int e = place(collective(GroupKind::Dp, s_.dp_bytes, st, fmt::format("s{} dp bucket {}", st, b)), st, -1);
      for (int last : bwd_last)
        if (last >= 0) step_[e].after.push_back(last);
    }
  }

  // A forward pass: receive, tp all-reduces, send, each after the previous. Returns its last entry (-1: none).
  int forward(int st, int mb) {
    int last = -1;
    if (st > 0) last = place(transfer('A', st - 1, mb), st, last);
    for (int k = 0; k < s_.tp_per_pass; ++k)
      last = place(collective(GroupKind::Tp, s_.tp_bytes, st, fmt::format("s{} mb{} fwd tp {}", st, mb, k)), st, last);
    if (st + 1 < s_.stages) last = place(transfer('A', st, mb), st, last);
    return last;
  }

  // A backward pass, after its micro-batch's forward pass (fwd_last): receive, tp all-reduces, send.
  int backward(int st, int mb, int fwd_last) {
    int last = fwd_last;
    if (st + 1 < s_.stages) last = place(transfer('G', st + 1, mb), st, last);
    for (int k = 0; k < s_.tp_per_pass; ++k)
      last = place(collective(GroupKind::Tp, s_.tp_bytes, st, fmt::format("s{} mb{} bwd tp {}", st, mb, k)), st, last);
    if (st > 0) last = place(transfer('G', st, mb), st, last);
    return last;
  }

  // The p2p entry of a transfer, created on its first use: an activation ('A') from stage `from` to from+1, or a
  // gradient ('G') from `from` to from-1.
  int transfer(char kind, int from, int mb) {
    const auto key = std::make_tuple(kind, from, mb);
    if (auto it = transfers_.find(key); it != transfers_.end()) return it->second;
    StepEntry e = base(&kP2p, GroupKind::Pp, s_.activation_bytes);
    e.src = from;
    e.dst = kind == 'A' ? from + 1 : from - 1;
    e.label = fmt::format("mb{} {} s{}->s{}", mb, kind == 'A' ? "activation" : "gradient", e.src, e.dst);
    step_.push_back(std::move(e));
    return transfers_[key] = static_cast<int>(step_.size()) - 1;
  }

  int collective(GroupKind g, uint64_t bytes, int stage, std::string label) {
    StepEntry e = base(&kAllReduce, g, bytes);
    e.stage = stage;
    e.label = std::move(label);
    step_.push_back(std::move(e));
    return static_cast<int>(step_.size()) - 1;
  }

  StepEntry base(const Collective* c, GroupKind g, uint64_t bytes) const {
    StepEntry e;
    e.coll = c;
    e.group = g;
    e.bytes = bytes;
    e.dtype = s_.dtype;
    e.op = s_.op;
    e.priority = s_.priority;
    return e;
  }

  // Appends an entry to stage st's program (its seq there; seq_dst on a transfer's receiver), after `prev`.
  int place(int entry, int st, int prev) {
    StepEntry& e = step_[static_cast<size_t>(entry)];
    const int pos = pos_[static_cast<size_t>(st)]++;
    if (e.coll->pairwise && e.dst == st) e.seq_dst = pos;
    else e.seq = pos;
    if (prev >= 0) e.after.push_back(prev);
    return entry;
  }

  const PipelineShape& s_;
  std::vector<int> pos_;  // per stage: the next position in its program
  std::vector<StepEntry> step_;
  std::map<std::tuple<char, int, int>, int> transfers_;
};

}  // namespace

std::vector<StepEntry> pipeline_step(const PipelineShape& shape) { return Builder(shape).build(); }

}  // namespace dfccl::harness::program
