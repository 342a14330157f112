// Point-to-point and all-to-all of ProcessGroupDFCCL: send, recv (not recvAnysource), alltoall_base and alltoall,
// and the rooted ops carried by one all-to-all (gather, scatter), as DFCCL transfers and all-to-alls submitted
// through ProcessGroupDFCCL::run.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "Common.hpp"
#include "ProcessGroupDFCCL.hpp"

namespace dfccl_torch {

namespace {

// t (contiguous) as a flat byte tensor sharing its memory.
at::Tensor byteView(const at::Tensor& t) { return t.reshape({-1}).view(at::kByte); }

// Bytes per row of dim 0 of t (dim >= 1).
size_t rowBytes(const at::Tensor& t) {
  size_t n = size_t(t.element_size());
  for (int64_t d = 1; d < t.dim(); ++d) n *= size_t(t.size(d));
  return n;
}

// Bytes and displacements of one side of alltoall_base: rows of dim 0 per peer from splits, or equal parts when
// splits is empty. Raises naming `side` when they do not fit the tensor.
struct Parts {
  std::vector<size_t> bytes, displs;
};

Parts partsOf(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const std::string& where,
              const std::string& side) {
  if (t.dim() < 1) throwDist(where + ": the " + side + " tensor needs at least one dimension");
  const int64_t rows = t.size(0);
  std::vector<int64_t> r = splits;
  if (r.empty()) {
    if (rows % size != 0)
      throwDist(where + ": the " + side + "'s " + std::to_string(rows) + " rows do not split equally over " +
                std::to_string(size) + " ranks");
    r.assign(size_t(size), rows / size);
  }
  if (int(r.size()) != size)
    throwDist(where + ": " + side + " split sizes has " + std::to_string(r.size()) + " entries, the group " +
              std::to_string(size) + " ranks");
  int64_t sum = 0;
  for (int64_t v : r) {
    if (v < 0) throwDist(where + ": a negative " + side + " split size");
    sum += v;
  }
  if (sum != rows)
    throwDist(where + ": the " + side + " split sizes add up to " + std::to_string(sum) + ", the tensor has " +
              std::to_string(rows) + " rows");
  Parts p;
  size_t at = 0;
  for (int64_t v : r) {
    p.bytes.push_back(size_t(v) * rowBytes(t));
    p.displs.push_back(at);
    at += p.bytes.back();
  }
  return p;
}

bool allEqual(const std::vector<size_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](size_t x) { return x == v.front(); });
}

// One all-to-all of bytes: dfcclAllToAll where every part has the same size on both sides, else dfcclAllToAllv.
// The arrays are copied into the step (DFCCL reads them during the call only).
std::function<dfcclResult_t(dfcclComm_t, cudaStream_t, dfcclRequest_t*)> allToAllSubmit(const at::Tensor& in,
                                                                                        const at::Tensor& out,
                                                                                        Parts send, Parts recv) {
  if (allEqual(send.bytes) && allEqual(recv.bytes) && send.bytes.front() == recv.bytes.front()) {
    const size_t each = send.bytes.front();
    return [in, out, each](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
      return dfcclAllToAll(in.data_ptr(), out.data_ptr(), each, dfcclUint8, c, 0, s, q);
    };
  }
  return [in, out, send, recv](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
    return dfcclAllToAllv(in.data_ptr(), send.bytes.data(), send.displs.data(), out.data_ptr(), recv.bytes.data(),
                          recv.displs.data(), dfcclUint8, c, 0, s, q);
  };
}

}  // namespace

int ProcessGroupDFCCL::checkPeer(int peer, const std::string& where) const {
  if (peer < 0 || peer >= getSize())
    throwDist(where + ": peer rank " + std::to_string(peer) + " is not in the group (size " +
              std::to_string(getSize()) + ")");
  return peer;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::p2p(std::vector<at::Tensor>& tensors, int peer, bool isSend) {
  const std::string op = isSend ? "send" : "recv";
  TORCH_CHECK(tensors.size() == 1, "dfccl: ", op, " takes one tensor");
  const at::Tensor t = tensors[0];
  auto work = makeWork(op, isSend ? c10d::OpType::SEND : c10d::OpType::RECV, t, tensors);
  checkTensor(t, work->name().str());
  checkPeer(peer, work->name().str());
  work->stash(t);
  std::vector<Step> steps;
  if (t.numel() > 0) {
    Submit submit = isSend ? Submit([t, peer](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
      return dfcclSend(t.data_ptr(), bytesOf(t), dfcclUint8, peer, c, 0, s, q);
    })
                           : Submit([t, peer](dfcclComm_t c, cudaStream_t s, dfcclRequest_t* q) {
                               return dfcclRecv(t.data_ptr(), bytesOf(t), dfcclUint8, peer, c, 0, s, q);
                             });
    steps.push_back({t, std::move(submit), bytesOf(t), isSend ? ReqKind::Send : ReqKind::Recv, peer});
  }
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::send(std::vector<at::Tensor>& tensors, int dstRank, int) {
  return p2p(tensors, dstRank, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::recv(std::vector<at::Tensor>& tensors, int srcRank, int) {
  return p2p(tensors, srcRank, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::recvAnysource(std::vector<at::Tensor>&, int) {
  unsupported("recvAnysource",
              "a receive from any source (recv without src) cannot be matched: DFCCL pairs each receive with the "
              "k-th send of one named peer; pass src");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplits,
                                                                std::vector<int64_t>& inputSplits,
                                                                const c10d::AllToAllOptions&) {
  auto work = makeWork("alltoall_base", c10d::OpType::ALLTOALL_BASE, input, {output});
  const std::string where = work->name().str();
  checkTensor(input, where);
  checkTensor(output, where);
  if (input.scalar_type() != output.scalar_type() || input.device() != output.device())
    throwDist(where + ": input and output differ in dtype or device");
  if (input.numel() > 0 && output.numel() > 0 && input.data_ptr() == output.data_ptr())
    throwDist(where + ": input and output are the same memory (all-to-all is not in place)");
  Parts send = partsOf(input, inputSplits, getSize(), where, "input");
  Parts recv = partsOf(output, outputSplits, getSize(), where, "output");
  work->stash(input);
  work->stash(output);
  std::vector<Step> steps{{input, allToAllSubmit(input, output, send, recv), 0, ReqKind::AllToAll}};
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions&) {
  TORCH_CHECK(!inputs.empty(), "dfccl: alltoall: no tensors");
  auto work = makeWork("alltoall", c10d::OpType::ALLTOALL, inputs[0], outputs);
  const std::string where = work->name().str();
  if (int(inputs.size()) != getSize() || int(outputs.size()) != getSize())
    throwDist(where + ": the lists have " + std::to_string(inputs.size()) + " inputs and " +
              std::to_string(outputs.size()) + " outputs, the group " + std::to_string(getSize()) + " ranks");
  Parts send, recv;
  std::vector<at::Tensor> ins;
  for (size_t p = 0; p < inputs.size(); ++p) {
    for (const at::Tensor* t : {&inputs[p], &outputs[p]}) {
      checkTensor(*t, where);
      if (t->device() != inputs[0].device()) throwDist(where + ": the tensors are on different devices");
    }
    send.displs.push_back(send.bytes.empty() ? 0 : send.displs.back() + send.bytes.back());
    send.bytes.push_back(bytesOf(inputs[p]));
    recv.displs.push_back(recv.bytes.empty() ? 0 : recv.displs.back() + recv.bytes.back());
    recv.bytes.push_back(bytesOf(outputs[p]));
    ins.push_back(byteView(inputs[p]));
  }
  // Sent from one packed buffer into another, copied out on completion (CPU) or when the stream waits (CUDA).
  const at::Tensor in = at::cat(ins);
  const at::Tensor out = at::empty({int64_t(recv.displs.back() + recv.bytes.back())}, in.options());
  work->stash(in);
  work->stash(out);
  std::vector<at::Tensor> outs = outputs;
  work->setPost([out, outs, recv]() mutable {
    for (size_t p = 0; p < outs.size(); ++p)
      byteView(outs[p]).copy_(out.narrow(0, int64_t(recv.displs[p]), int64_t(recv.bytes[p])));
  });
  std::vector<Step> steps{{in, allToAllSubmit(in, out, send, recv), 0, ReqKind::AllToAll}};
  return run(work, steps);
}

// The one all-to-all of a rooted op (gather, scatter) in bytes: every other rank sends `each` bytes to the root
// (gather) or the root sends `each` bytes to every other rank (scatter); the other parts are empty, the root's own
// part included (the root copies it itself: a transfer to oneself would wait for its own receive, which a daemon
// without preemption (DFCCL_MODE=blocking) runs only after the send, once it exceeds the connection's buffering).
// `packed`: this side is the root's, laid out in group-rank order.
namespace {
Parts rootedParts(int size, int root, int rank, size_t each, bool packed) {
  Parts p;
  for (int r = 0; r < size; ++r) {
    const bool moves = rank != r && (packed ? rank == root : r == root);
    p.bytes.push_back(moves ? each : 0);
    p.displs.push_back(packed && rank == root ? size_t(r) * each : 0);
  }
  return p;
}
}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "dfccl: gather takes one input tensor per process");
  const at::Tensor in = inputs[0];
  const int root = int(opts.rootRank);
  const bool atRoot = getRank() == root;
  std::vector<at::Tensor> outs = atRoot && !outputs.empty() ? outputs[0] : std::vector<at::Tensor>{};
  auto work = makeWork("gather", c10d::OpType::GATHER, in, outs);
  const std::string where = work->name().str();
  checkTensor(in, where);
  checkPeer(root, where + ": root");
  if (atRoot) {
    if (outputs.size() != 1 || int(outs.size()) != getSize())
      throwDist(where + ": the root's gather list has " + std::to_string(outs.size()) + " tensors, the group " +
                std::to_string(getSize()) + " ranks");
    for (const at::Tensor& o : outs)
      if (o.numel() != in.numel() || o.scalar_type() != in.scalar_type() || o.device() != in.device())
        throwDist(where + ": every tensor of the gather list must match the input's numel, dtype and device");
  } else if (!outputs.empty() && !outputs[0].empty()) {
    throwDist(where + ": a gather list is given on rank " + std::to_string(getRank()) + ", which is not the root (" +
              std::to_string(root) + ")");
  }
  // Every other rank sends its input to the root, which receives them into one packed buffer (its own part copied
  // there on the current stream), copied out on completion.
  const size_t each = bytesOf(in);
  const at::Tensor src = byteView(in);
  const at::Tensor flat = at::empty({int64_t(atRoot ? each * size_t(getSize()) : 0)}, src.options());
  if (atRoot) flat.narrow(0, int64_t(size_t(root) * each), int64_t(each)).copy_(src);
  work->stash(src);
  work->stash(flat);
  if (atRoot)
    work->setPost([flat, outs, each]() mutable {
      for (size_t r = 0; r < outs.size(); ++r)
        byteView(outs[r]).copy_(flat.narrow(0, int64_t(r * each), int64_t(each)));
    });
  std::vector<Step> steps;
  if (each > 0 && getSize() > 1)
    steps.push_back({src,
                     allToAllSubmit(src, flat, rootedParts(getSize(), root, getRank(), each, false),
                                    rootedParts(getSize(), root, getRank(), each, true)),
                     each, ReqKind::AllToAll});
  return run(work, steps);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDFCCL::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "dfccl: scatter takes one output tensor per process");
  const at::Tensor out = outputs[0];
  const int root = int(opts.rootRank);
  const bool atRoot = getRank() == root;
  auto work = makeWork("scatter", c10d::OpType::SCATTER, out, outputs);
  const std::string where = work->name().str();
  checkTensor(out, where);
  checkPeer(root, where + ": root");
  std::vector<at::Tensor> ins;
  if (atRoot) {
    if (inputs.size() != 1 || int(inputs[0].size()) != getSize())
      throwDist(where + ": the root's scatter list has " + std::to_string(inputs.empty() ? 0 : inputs[0].size()) +
                " tensors, the group " + std::to_string(getSize()) + " ranks");
    for (const at::Tensor& t : inputs[0]) {
      checkTensor(t, where);
      if (t.numel() != out.numel() || t.scalar_type() != out.scalar_type() || t.device() != out.device())
        throwDist(where + ": every tensor of the scatter list must match the output's numel, dtype and device");
      ins.push_back(byteView(t));
    }
  } else if (!inputs.empty() && !inputs[0].empty()) {
    throwDist(where + ": a scatter list is given on rank " + std::to_string(getRank()) + ", which is not the root (" +
              std::to_string(root) + ")");
  }
  // The root sends from one packed copy of its list (its own part copied into its output on the current stream);
  // every other rank receives straight into its output.
  const size_t each = bytesOf(out);
  const at::Tensor dst = byteView(out);
  const at::Tensor packed = atRoot ? at::cat(ins) : at::empty({0}, dst.options());
  if (atRoot) dst.copy_(ins[size_t(root)]);
  work->stash(packed);
  work->stash(dst);
  std::vector<Step> steps;
  if (each > 0 && getSize() > 1)
    steps.push_back({dst,
                     allToAllSubmit(packed, dst, rootedParts(getSize(), root, getRank(), each, true),
                                    rootedParts(getSize(), root, getRank(), each, false)),
                     each, ReqKind::AllToAll});
  return run(work, steps);
}

}  // namespace dfccl_torch
