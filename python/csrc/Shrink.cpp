// ProcessGroupDFCCL's shrink: after a failure the survivors agree on the ranks to leave out (dfcclCommShrink, whose
// agreement makes every survivor exclude the same set) and go on as a smaller group over the same executors
// (python/README.md, "Surviving a dead rank").
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <string>
#include <vector>

#include "Common.hpp"
#include "ProcessGroupDFCCL.hpp"

namespace dfccl_torch {

namespace {

std::string listText(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return "[" + s + "]";
}

// The ranks (of the group being shrunk) of every rank of `made`, the shrunk host communicator, in its order: an
// all-gather of this rank's `rank` on it. Raises naming `where` when it fails.
std::vector<int64_t> gatherParentRanks(dfcclComm_t made, int64_t rank, int timeoutMs, const std::string& where) {
  int n = 0;
  dfcclCommCount(made, &n);
  std::vector<int64_t> mine{rank}, all(size_t(n), -1);
  dfcclRequest_t q = nullptr;
  dfcclResult_t r = dfcclAllGather(mine.data(), all.data(), 1, dfcclInt64, made, 0, DFCCL_NO_STREAM, &q);
  if (r == dfcclSuccess) r = dfcclSynchronize(q, timeoutMs);
  const std::string why = r == dfcclSuccess ? "" : describe(r);
  if (q) dfcclRequestFree(q);
  if (!why.empty())
    throwDist(where + ": the all-gather of the survivors' ranks on the shrunk communicator failed: " + why);
  return all;
}

}  // namespace

std::vector<int64_t> ProcessGroupDFCCL::prepareShrink(const std::vector<int64_t>& exclude) {
  std::lock_guard<std::mutex> lk(submitMutex_);
  const std::string where = "dfccl: group '" + groupId_ + "': shrink";
  if (prepared_) return preparedExcluded_;  // agreed before and not taken yet: the same set
  if (state_->aborted)
    throwDist(where + ": the group was aborted (abort() ends the communicators that a shrink needs; a shrink ends "
                      "them itself)");
  if (shutDown_) throwDist(where + ": the group was shut down");
  std::vector<int> list;
  for (int64_t r : exclude) {
    if (r < 0 || r >= getSize())
      throwDist(where + ": rank " + std::to_string(r) + " to exclude is outside 0.." + std::to_string(getSize() - 1));
    list.push_back(int(r));
  }
  dfcclComm_t host = nullptr, cuda = nullptr;
  dfcclResult_t r = dfcclCommShrink(hostComm_, list.empty() ? nullptr : list.data(), int(list.size()), &host, nullptr);
  if (r != dfcclSuccess) throwDist(where + ": dfcclCommShrink of the CPU communicator failed: " + describe(r));
  if (!host)
    throwDist(where + ": the survivors excluded this rank (rank " + std::to_string(getRank()) +
              "); it must not go on with them");
  const int timeoutMs = int(std::max<int64_t>(timeout_.count(), 1000));
  std::vector<int64_t> parents;
  try {
    parents = gatherParentRanks(host, getRank(), timeoutMs, where);
  } catch (...) {
    dfcclCommDestroy(host);
    throw;
  }
  std::vector<int64_t> excluded;
  for (int64_t q = 0; q < getSize(); ++q)
    if (std::find(parents.begin(), parents.end(), q) == parents.end()) excluded.push_back(q);
  if (excluded.empty()) {  // nothing failed: the group stays as it was (its communicators untouched)
    dfcclCommDestroy(host);
    return excluded;
  }
  if (cudaComm_) {
    std::vector<int> agreed(excluded.begin(), excluded.end());
    c10::cuda::CUDAGuard guard{c10::DeviceIndex(cudaDevice_)};
    r = dfcclCommShrink(cudaComm_, agreed.data(), int(agreed.size()), &cuda, nullptr);
    int n = 0;
    if (r == dfcclSuccess && cuda) dfcclCommCount(cuda, &n);
    if (r != dfcclSuccess || n != int(parents.size())) {
      const std::string why = r != dfcclSuccess ? describe(r) : "another rank failed while it was made";
      if (cuda) dfcclCommDestroy(cuda);
      dfcclCommDestroy(host);
      throwDist(where + ": dfcclCommShrink of the CUDA communicator without " + listText(excluded) + " failed: " + why);
    }
  }
  GroupParams p = params_;
  p.rank = int(std::find(parents.begin(), parents.end(), int64_t(getRank())) - parents.begin());
  p.size = int(parents.size());
  p.timeout = timeout_;
  p.groupId = groupId_ + ".s" + std::to_string(++shrinks_);
  p.globalRanks.clear();
  for (int64_t q : parents) p.globalRanks.push_back(uint64_t(state_->globalRank(int(q))));
  p.hostComm = host;
  p.cudaComm = cuda;
  prepared_ = c10::make_intrusive<ProcessGroupDFCCL>(p);
  prepared_->parentRanks_ = parents;
  preparedExcluded_ = excluded;
  return excluded;
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupDFCCL::shrink(const std::vector<int64_t>& ranks_to_exclude, int,
                                                            const c10::intrusive_ptr<Options>& opts_override) {
  std::vector<int64_t> want = ranks_to_exclude;
  std::sort(want.begin(), want.end());
  const std::vector<int64_t> agreed = prepareShrink(want);
  if (agreed != want)
    throwDist("dfccl: group '" + groupId_ + "': shrink: the survivors agreed to exclude ranks " + listText(agreed) +
              ", not " + listText(want) +
              " (another rank failed too, or they named others): call "
              "dfccl_torch.shrink_group, which takes the agreed set");
  std::lock_guard<std::mutex> lk(submitMutex_);
  c10::intrusive_ptr<ProcessGroupDFCCL> made = std::move(prepared_);
  prepared_.reset();
  if (opts_override) made->setTimeout(opts_override->timeout);
  return made;
}

}  // namespace dfccl_torch
