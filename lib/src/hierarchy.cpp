#include "hierarchy.h"

#include <fmt/format.h>

#include <exception>
#include <set>

#include "bootstrap.h"
#include "comm.h"
#include "env.h"
#include "log.h"
#include "match_board.h"
#include "requests.h"

namespace dfccl {

namespace {

// L when hosts holds H >= 2 hosts of L >= 2 ranks each, host after host (each host's ranks consecutive); else 0.
int ranks_per_host(const std::vector<uint64_t>& hosts) {
  const size_t n = hosts.size();
  size_t l = 1;
  while (l < n && hosts[l] == hosts[0]) ++l;
  if (l < 2 || n % l != 0 || n / l < 2) return 0;
  for (size_t r = 0; r < n; ++r) {
    if (hosts[r] != hosts[r - r % l]) return 0;  // a host's ranks are not consecutive
    for (size_t b = 0; b < r - r % l; b += l)
      if (hosts[b] == hosts[r]) return 0;  // a host that came before
  }
  return int(l);
}

}  // namespace

void hierarchy_init(dfcclComm* c, const std::vector<uint64_t>& hosts) {
  if (env_int("DFCCL_HIERARCHY") == 0) return;
  const int l = ranks_per_host(hosts);
  if (l == 0) {
    const bool shared_host = std::set<uint64_t>(hosts.begin(), hosts.end()).size() < hosts.size();
    if (shared_host && hosts.front() != hosts.back() && c->rank == 0)
      log(LogLevel::Info, LogSubsys::Init,
          "DFCCL_HIERARCHY=1: the {} ranks are not hosts of equal rank counts, host after host: all-reduces take the "
          "ring",
          c->nranks);
    return;
  }
  dfcclComm::Hierarchy& h = c->hierarchy;
  h.local_size = l;
  h.local_rank = c->rank % l;
  try {
    h.intra = comm_split(c, c->rank / l, c->rank, nullptr);
    h.inter = comm_split(c, c->rank % l, c->rank, nullptr);
  } catch (...) {
    if (h.intra) comm_abort(h.intra);
    h.intra = h.inter = nullptr;
    h.local_size = 0;
    throw;
  }
  for (int i = 0; i < l; ++i) h.intra->hierarchy.parent_rank.push_back(c->rank - h.local_rank + i);
  for (int i = 0; i < c->nranks / l; ++i) h.inter->hierarchy.parent_rank.push_back(i * l + h.local_rank);
  for (dfcclComm* part : {h.intra, h.inter})
    part->board->set_names({part->hierarchy.parent_rank, c->nranks, uint64_t(l),
                            part == h.intra ? "of the hierarchical all-reduces' stages within the host"
                                            : "of the hierarchical all-reduces' stage across hosts",
                            c->board});
  h.intra->hierarchy.parent.store(c);
  h.inter->hierarchy.parent.store(c);
  c->bootstrap->barrier();  // no rank posts on a stage board (nor mirrors a post into one) before its names are set
  if (c->rank == 0)
    log(LogLevel::Info, LogSubsys::Init, "communicator {}: hierarchical all-reduce over {} hosts of {} ranks", c->index,
        c->nranks / l, l);
}

void hierarchy_destroy(dfcclComm* c) {
  std::exception_ptr failed;
  for (dfcclComm* part : {c->hierarchy.intra, c->hierarchy.inter}) {
    if (!part) continue;
    try {
      comm_destroy(part);
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (!failed) return;
  comm_abort(c);
  std::rethrow_exception(failed);
}

bool hierarchy_routes(const dfcclComm* c, const core::Desc& d) {
  const int l = c->hierarchy.local_size;
  return c->hierarchy.intra && d.kind == core::Kind::AllReduce && d.count > 0 && d.count % uint64_t(l) == 0 &&
         d.op != core::RedOp::Avg;
}

std::shared_ptr<RequestState> hierarchy_submit(dfcclComm* c, const core::Desc& d, cudaStream_t stream) {
  const dfcclComm::Hierarchy& h = c->hierarchy;
  const uint64_t share_count = d.count / uint64_t(h.local_size);
  char* share = static_cast<char*>(d.recv) + uint64_t(h.local_rank) * share_count * core::dtype_size(d.dtype);
  core::Desc marker = d, scatter = d, across = d, gather = d;
  marker.count = 0;
  scatter.kind = core::Kind::ReduceScatter;  // d.send's sum, this rank's share of it into recv
  scatter.count = share_count;
  scatter.recv = share;
  across.count = share_count;  // the share summed over the hosts, in place
  across.send = share;
  across.recv = share;
  across.after = 1;
  gather.kind = core::Kind::AllGather;  // every share of the host into recv, in place
  gather.op = core::RedOp::Sum;
  gather.count = share_count;
  gather.send = share;
  gather.after = 1;
  std::vector<ChainPart> parts{
      {c, marker, 0, d}, {h.intra, scatter, 0, scatter}, {h.inter, across, 0, across}, {h.intra, gather, 1, gather}};
  return compound_request(comm_submit_chain(std::move(parts), stream));
}

}  // namespace dfccl
