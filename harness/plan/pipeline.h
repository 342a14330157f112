// The pipeline workload's step (a [pipeline] table): a 1F1B schedule over the pp stages, as Megatron-LM runs it,
// with every transfer an ungrouped p2p entry. Stage s of P runs min(P-1-s, M) forward passes (warm-up), then
// alternates one forward and one backward pass, then the remaining backward passes (cool-down); then its dp
// gradient all-reduces. A forward pass of micro-batch i on stage s: receive the activation from s-1 (s > 0), the tp
// all-reduces, send the activation to s+1 (s < P-1); a backward pass: receive the gradient from s+1, the tp
// all-reduces, send the gradient to s-1. Every entry carries its position in each stage's program (seq, seq_dst)
// and its data dependencies (after): within a pass each operation follows the previous one, a micro-batch's backward
// pass follows its forward pass, the dp all-reduces follow every backward pass.
#pragma once

#include <vector>

#include "config/workload.h"

namespace dfccl::harness::program {

struct PipelineShape {
  int stages = 2, micro_batches = 4;
  int tp_per_pass = 0, dp_buckets = 0;  // tp all-reduces per pass (0 without tensor parallelism), dp all-reduces
  uint64_t activation_bytes = 0, tp_bytes = 0, dp_bytes = 0;
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int priority = 0;
};

// The step: entries labelled "s<stage> mb<i> fwd: ..." etc. Collectives carry their stage; p2p entries run on the pp
// group from stage src to stage dst.
std::vector<StepEntry> pipeline_step(const PipelineShape& shape);

}  // namespace dfccl::harness::program
