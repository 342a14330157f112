// The collectives of ProcessGroupDFCCL: all-reduce, broadcast, reduce, all-gather, reduce-scatter (with their
// coalesced and base forms), the sparse all-reduce and the barriers, each as DFCCL collectives submitted through
// ProcessGroupDFCCL::run.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "Common.hpp"
#include "ProcessGroupDFCCL.hpp"

namespace dfccl_torch {
namespace {

std::optional<dfcclDataType_t> dtypeOf(at::ScalarType t) {
  switch (t) {
    case at::kChar: return dfcclInt8;
    case at::kByte:
    case at::kBool: return dfcclUint8;
    case at::kInt: return dfcclInt32;
    case at::kUInt32: return dfcclUint32;
    case at::kLong: return dfcclInt64;
    case at::kUInt64: return dfcclUint64;
    case at::kHalf: return dfcclFloat16;
    case at::kFloat: return dfcclFloat32;
    case at::kDouble: return dfcclFloat64;
    case at::kBFloat16: return dfcclBfloat16;
    default: return std::nullopt;
  }
}

// A reduction as DFCCL runs it. PREMUL_SUM is SUM after scaling the input by `factor`.
struct Reduction {
  dfcclDataType_t type;
  dfcclRedOp_t op;
  std::optional<c10::intrusive_ptr<c10d::NCCLPreMulSumSupplement>> premul;
};

Reduction reductionOf(const c10d::ReduceOp& rop, at::ScalarType t, const std::string& where) {
  const auto type = dtypeOf(t);
  if (!type) throwDist(where + ": dtype " + std::string(c10::toString(t)) + " is not supported by dfccl");
  const bool isBool = t == at::kBool;
  const bool isFloat = at::isFloatingType(t);
  switch (rop.op_) {
    case c10d::ReduceOp::SUM: return {*type, isBool ? dfcclMax : dfcclSum, std::nullopt};
    case c10d::ReduceOp::PRODUCT: return {*type, isBool ? dfcclMin : dfcclProd, std::nullopt};
    case c10d::ReduceOp::MIN: return {*type, dfcclMin, std::nullopt};
    case c10d::ReduceOp::MAX: return {*type, dfcclMax, std::nullopt};
    case c10d::ReduceOp::AVG:
      if (isBool) throwDist(where + ": ReduceOp.AVG is not supported for bool tensors");
      return {*type, dfcclAvg, std::nullopt};
    case c10d::ReduceOp::PREMUL_SUM:
      if (!isFloat) throwDist(where + ": ReduceOp.PREMUL_SUM needs a floating-point tensor");
      return {*type, dfcclSum, c10::static_intrusive_pointer_cast<c10d::NCCLPreMulSumSupplement>(rop.supplement_)};
    default: throwDist(where + ": ReduceOp " + std::to_string(int(rop.op_)) + " (BAND/BOR/BXOR) is not supported");
  }
}

// Scales t in place by the PREMUL_SUM factor (on the current stream for CUDA tensors).
void premultiply(at::Tensor& t, const Reduction& r) {
  if (!r.premul) return;
  const auto& s = **r.premul;
  if (s.tensor_factor.defined()) t.mul_(s.tensor_factor.to(t.device()));
  else t.mul_(s.double_factor);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allreduceImpl(std::vector<at::Tensor>& tensors,
                                                                const c10d::ReduceOp& rop, const std::string& name) {
  TORCH_CHECK(!tensors.empty(), "dfccl: ", name, ": no tensors");
  auto work = makeWork(name, c10d::OpType::ALLREDUCE, tensors[0], tensors);
  std::vector<Step> steps;
  for (at::Tensor& t : tensors) {
    checkTensor(t, work->name().str());
    const Reduction r = reductionOf(rop, t.scalar_type(), work->name().str());
    premultiply(t, r);
    work->stash(t);
    if (t.numel() == 0) continue;
    steps.push_back({t,
                     [t, r](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), r.type, r.op, c, 0, s, q);
                     },
                     size_t(t.numel())});
  }
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  if (!tensors.empty() && tensors[0].is_sparse()) return sparseAllreduce(tensors, opts.reduceOp, "allreduce");
  return allreduceImpl(tensors, opts.reduceOp, "allreduce");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                                   const c10d::AllreduceOptions& opts) {
  return sparseAllreduce(tensors, opts.reduceOp, "allreduce_sparse");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::sparseAllreduce(std::vector<at::Tensor>& tensors,
                                                                  const c10d::ReduceOp& rop, const std::string& name) {
  TORCH_CHECK(tensors.size() == 1, "dfccl: ", name, " takes one tensor per process");
  at::Tensor sparse = tensors[0];
  auto work = makeWork(name, c10d::OpType::ALLREDUCE, sparse, tensors);
  if (!sparse.is_sparse()) throwDist(work->name().str() + ": the tensor is not a sparse (COO) tensor");
  at::Tensor dense = sparse.to_dense().contiguous();
  const Reduction r = reductionOf(rop, dense.scalar_type(), work->name().str());
  premultiply(dense, r);
  work->stash(sparse);
  work->stash(dense);
  const int64_t sparseDims = sparse.sparse_dim();
  work->setPost([sparse, dense, sparseDims]() mutable { sparse.copy_(dense.to_sparse(sparseDims).coalesce()); });
  std::vector<Step> steps;
  if (dense.numel() > 0)
    steps.push_back({dense,
                     [dense, r](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclAllReduce(dense.data_ptr(), dense.data_ptr(), size_t(dense.numel()), r.type, r.op, c,
                                             0, s, q);
                     },
                     size_t(dense.numel())});
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  return allreduceImpl(tensors, opts.reduceOp, "allreduce_coalesced");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "dfccl: broadcast takes one tensor per process");
  at::Tensor t = tensors[0];
  auto work = makeWork("broadcast", c10d::OpType::BROADCAST, t, tensors);
  checkTensor(t, work->name().str());
  work->stash(t);
  const int root = int(opts.rootRank);
  std::vector<Step> steps;
  if (t.numel() > 0)
    steps.push_back({t,
                     [t, root](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclBroadcast(t.data_ptr(), t.data_ptr(), bytesOf(t), dfcclUint8, root, c, 0, s, q);
                     },
                     bytesOf(t)});
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "dfccl: reduce takes one tensor per process");
  at::Tensor t = tensors[0];
  auto work = makeWork("reduce", c10d::OpType::REDUCE, t, tensors);
  checkTensor(t, work->name().str());
  const Reduction r = reductionOf(opts.reduceOp, t.scalar_type(), work->name().str());
  premultiply(t, r);
  work->stash(t);
  const int root = int(opts.rootRank);
  std::vector<Step> steps;
  if (t.numel() > 0)
    steps.push_back({t,
                     [t, r, root](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), r.type, r.op, root, c, 0, s,
                                          q);
                     },
                     size_t(t.numel())});
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions&) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "dfccl: allgather takes one tensor list per process");
  const at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = outputs[0];
  auto work = makeWork("allgather", c10d::OpType::ALLGATHER, in, outs);
  checkTensor(in, work->name().str());
  if (int(outs.size()) != getSize())
    throwDist(work->name().str() + ": the output list has " + std::to_string(outs.size()) + " tensors, the group " +
              std::to_string(getSize()) + " ranks");
  for (const at::Tensor& o : outs)
    if (o.numel() != in.numel() || o.scalar_type() != in.scalar_type() || o.device() != in.device())
      throwDist(work->name().str() + ": every output tensor must match the input's numel, dtype and device");
  // Gathered into one flat buffer, then copied out after completion (CPU: on the completion thread; CUDA: on the
  // stream that waits).
  const at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
  work->stash(in);
  work->stash(flat);
  work->setPost([flat, outs]() mutable {
    for (size_t i = 0; i < outs.size(); ++i)
      outs[i].copy_(flat.narrow(0, int64_t(i) * outs[i].numel(), outs[i].numel()).view_as(outs[i]));
  });
  std::vector<Step> steps;
  if (in.numel() > 0)
    steps.push_back({in,
                     [in, flat](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclAllGather(in.data_ptr(), flat.data_ptr(), bytesOf(in), dfcclUint8, c, 0, s, q);
                     },
                     bytesOf(in)});
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allgatherBase(std::vector<at::Tensor>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const std::string& name, c10d::OpType type) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(), "dfccl: ", name, ": inputs and outputs differ");
  auto work = makeWork(name, type, inputs[0], outputs);
  std::vector<Step> steps;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor in = inputs[i], out = outputs[i];
    checkTensor(in, work->name().str());
    checkTensor(out, work->name().str());
    if (out.numel() != in.numel() * getSize() || out.scalar_type() != in.scalar_type())
      throwDist(work->name().str() + ": the output must hold group size x the input's numel, in the input's dtype");
    work->stash(in);
    work->stash(out);
    if (in.numel() == 0) continue;
    steps.push_back({in,
                     [in, out](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclAllGather(in.data_ptr(), out.data_ptr(), bytesOf(in), dfcclUint8, c, 0, s, q);
                     },
                     bytesOf(in)});
  }
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions&) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgatherBase(outs, ins, "_allgather_base", c10d::OpType::_ALLGATHER_BASE);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                                      std::vector<at::Tensor>& inputs,
                                                                      const c10d::AllgatherOptions&) {
  TORCH_CHECK(!inputs.empty(), "dfccl: allgather_coalesced: no tensors");
  std::vector<at::Tensor> outs;
  for (const auto& l : outputLists) outs.insert(outs.end(), l.begin(), l.end());
  auto work = makeWork("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, inputs[0], outs);
  const std::string where = work->name().str();
  if (outputLists.size() != inputs.size())
    throwDist(where + ": " + std::to_string(inputs.size()) + " inputs but " + std::to_string(outputLists.size()) +
              " output lists");
  std::vector<Step> steps;
  std::vector<std::pair<at::Tensor, std::vector<at::Tensor>>> copies;  // (gathered, its output list)
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor in = inputs[i];
    checkTensor(in, where);
    if (int(outputLists[i].size()) != getSize())
      throwDist(where + ": output list " + std::to_string(i) + " has " + std::to_string(outputLists[i].size()) +
                " tensors, the group " + std::to_string(getSize()) + " ranks");
    for (const at::Tensor& o : outputLists[i])
      if (o.numel() != in.numel() || o.scalar_type() != in.scalar_type() || o.device() != in.device())
        throwDist(where + ": every tensor of output list " + std::to_string(i) +
                  " must match its input's numel, dtype and device");
    const at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
    work->stash(in);
    work->stash(flat);
    copies.emplace_back(flat, outputLists[i]);
    if (in.numel() == 0) continue;
    steps.push_back({in,
                     [in, flat](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclAllGather(in.data_ptr(), flat.data_ptr(), bytesOf(in), dfcclUint8, c, 0, s, q);
                     },
                     bytesOf(in)});
  }
  work->setPost([copies]() mutable {
    for (auto& [flat, outs] : copies)
      for (size_t r = 0; r < outs.size(); ++r)
        outs[r].copy_(flat.narrow(0, int64_t(r) * outs[r].numel(), outs[r].numel()).view_as(outs[r]));
  });
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                  std::vector<at::Tensor>& inputs,
                                                                                  const c10d::AllgatherOptions&) {
  return allgatherBase(outputs, inputs, "allgather_into_tensor_coalesced", c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::reduceScatterBase(std::vector<at::Tensor>& outputs,
                                                                    std::vector<at::Tensor>& inputs,
                                                                    const c10d::ReduceOp& rop, const std::string& name,
                                                                    c10d::OpType type) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(), "dfccl: ", name, ": inputs and outputs differ");
  auto work = makeWork(name, type, inputs[0], outputs);
  std::vector<Step> steps;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor in = inputs[i];
    const at::Tensor out = outputs[i];
    checkTensor(in, work->name().str());
    checkTensor(out, work->name().str());
    if (in.numel() != out.numel() * getSize() || out.scalar_type() != in.scalar_type())
      throwDist(work->name().str() + ": the input must hold group size x the output's numel, in the output's dtype");
    const Reduction r = reductionOf(rop, in.scalar_type(), work->name().str());
    if (r.premul) {
      in = in.clone();  // the input is not the caller's to scale
      premultiply(in, r);
    }
    work->stash(in);
    work->stash(out);
    if (out.numel() == 0) continue;
    steps.push_back({in,
                     [in, out, r](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                       return dfcclReduceScatter(in.data_ptr(), out.data_ptr(), size_t(out.numel()), r.type, r.op, c, 0,
                                                 s, q);
                     },
                     size_t(out.numel())});
  }
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduceScatterBase(outs, ins, opts.reduceOp, "_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  return reduceScatterBase(outputs, inputs, opts.reduceOp, "reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1, "dfccl: reduce_scatter takes one tensor list per process");
  const std::string where = "dfccl: group '" + groupId_ + "', op reduce_scatter";
  if (int(inputs[0].size()) != getSize())
    throwDist(where + ": the input list has " + std::to_string(inputs[0].size()) + " tensors, the group " +
              std::to_string(getSize()) + " ranks");
  for (const at::Tensor& t : inputs[0])
    if (t.numel() != outputs[0].numel() || t.scalar_type() != outputs[0].scalar_type())
      throwDist(where + ": every input tensor must match the output's numel and dtype");
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : inputs[0]) flat.push_back(t.reshape({-1}));
  std::vector<at::Tensor> ins{at::cat(flat)};
  return reduceScatterBase(outputs, ins, opts.reduceOp, "reduce_scatter", c10d::OpType::REDUCE_SCATTER);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::barrier(const c10d::BarrierOptions&) {
  // A one-byte all-reduce on the host communicator: the host waits, whatever the tensors' devices.
  std::vector<at::Tensor> t{at::zeros({1}, at::TensorOptions().dtype(at::kByte))};
  return allreduceImpl(t, c10d::ReduceOp(c10d::ReduceOp::MAX), "barrier");
}

}  // namespace dfccl_torch
