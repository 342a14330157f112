#include "comm/comm_submit.h"

#include <memory>
#include <string>
#include <vector>

#include "comm/comm_failure.h"
#include "comm/peer_watch.h"
#include "core/collectives/collectives.h"
#include "engine/requests.h"
#include "match/board_mirror.h"
#include "match/match_board.h"
#include "transport/p2p.h"
#include "transport/persistent.h"
#include "util/error.h"

namespace dfccl {

namespace {

// A submission under way, from before its liveness check until it is queued or refused: an abort from another
// thread waits for it (wait_quiet). Announced before the check (both sequentially consistent, as is the abort's store
// of `alive`): either the submission sees the abort, or the abort sees the submission and waits until it has queued.
struct Submitting {
  explicit Submitting(dfcclComm* c) : c(c) {
    c->submitting.fetch_add(1);
    if (!c->alive) {
      c->submitting.fetch_sub(1);
      throw_comm_ended(c);
    }
  }
  ~Submitting() { c->submitting.fetch_sub(1); }
  dfcclComm* c;
};

// Under c->mu: posts `signature` on c's board under key (and to the other hosts' boards) and sets d's channels for c.
// Returns the board's mismatch, or "".
std::string post_locked(dfcclComm* c, const MatchKey& key, const core::Desc& signature, core::Desc& d) {
  std::string mismatch = c->board->post(key, signature);
  if (!mismatch.empty()) return mismatch;
  mirror_post(c, key, signature);
  core::set_channels(d, core::data_channels(d.count * core::dtype_size(d.dtype), c->geometry.nchan,
                                            c->engine->params().min_chan_bytes));
  return {};
}

// Under c->mu: sequence key n of c for d: the lane and turn it names, and the board's key.
MatchKey sequence_key(const dfcclComm* c, core::Desc& d, uint64_t n) {
  const uint32_t lanes = c->engine->transport().seq_lanes;
  d.lane = uint16_t(n % lanes);
  d.turn = n / lanes;
  MatchKey key;
  key.n = n;
  return key;
}

// comm_submit's part under the communicator's lock: the match key, the board's check, the queueing. Returns the
// request, or null with *mismatch set when the peers submitted a different collective under this key.
std::shared_ptr<RequestState> submit_locked(dfcclComm* c, core::Desc d, int persistent_id, const PersistentRef* lane,
                                            cudaStream_t stream, std::string* mismatch) {
  std::lock_guard<std::mutex> lk(c->mu);
  Submitting submitting(c);
  MatchKey key;
  if (persistent_id < 0) {
    key = sequence_key(c, d, c->next_key);
  } else {
    key = {persistent_id, c->persistent_turn[persistent_id]};
    d.lane = uint16_t(lane->lane);
    d.turn = c->persistent_turn[persistent_id];
  }
  *mismatch = post_locked(c, key, d, d);
  if (!mismatch->empty()) return nullptr;
  d.cs = persistent_id < 0 ? c->host_dev.s : lane->cs;
  auto req = c->engine->submit(d, c->index, stream);
  if (persistent_id < 0) c->next_key += 1;  // only once queued: a refused submission must not shift the matching
  else c->persistent_turn[persistent_id] += 1;
  return req;
}

// Throws dfcclInvalidUsage when the communicator was made without point-to-point connections.
void require_p2p_connections(const P2pConnections& p) {
  if (p.nchan == 0)
    throw Error(dfcclInvalidUsage,
                "this communicator has no point-to-point connections (DFCCL_P2P_CHANNELS=0 at its init)");
}

// comm_submit_p2p's part under the lock: each transfer's key on its (lane, direction, peer), the board's check, the
// queueing of all. Empty with *mismatch set when a peer's side of a transfer differs.
std::vector<std::shared_ptr<RequestState>> submit_p2p_locked(dfcclComm* c, std::vector<core::Desc>& parts,
                                                             uint32_t lane, cudaStream_t stream,
                                                             std::string* mismatch) {
  std::lock_guard<std::mutex> lk(c->mu);
  Submitting submitting(c);
  P2pConnections& p = c->p2p;
  require_p2p_connections(p);
  std::vector<int> peers;
  for (const core::Desc& d : parts) peers.push_back(d.root);
  p2p_claim(c, peers);
  std::vector<uint64_t> next = p.next;  // taken only once every part is queued
  const uint32_t min_chan = c->engine->params().min_chan_bytes;
  for (core::Desc& d : parts) {
    const int dir = d.kind == core::Kind::Send ? 0 : 1, peer = d.root;
    d.lane = uint16_t(lane);
    d.turn = next[(size_t(lane) * 2 + size_t(dir)) * size_t(c->nranks) + size_t(peer)]++;
    const P2pKey key{lane, dir == 0 ? c->rank : peer, dir == 0 ? peer : c->rank, d.turn};
    *mismatch = c->board->post_p2p(key, d);
    if (!mismatch->empty()) return {};
    mirror_post_p2p(c, key, d);
    d.cs = p2p_static(c, peer, dir);  // its connection's channels: both sides split the transfer alike
    core::set_channels(d, core::data_channels(d.count * core::dtype_size(d.dtype), d.cs.nchan, min_chan));
  }
  auto reqs = c->engine->submit_many(parts, c->index, stream);
  p.next = std::move(next);
  return reqs;
}

// A submission refused because the peers submitted differently: outside the lock and the submission (the abort waits
// for submissions), and after PeerWatch lets go of c (the abort releases the board and bootstrap its probe reads).
[[noreturn]] void fail_mismatch(dfcclComm* c, const std::string& mismatch) {
  mirror_mismatch(c, mismatch);  // the other hosts' ranks learn it from their proxies
  PeerWatch::remove(c);
  comm_fail_mismatch(c, mismatch);
  throw Error(dfcclInvalidUsage, mismatch);
}

}  // namespace

void comm_prepare(dfcclComm* c, int id) {
  Submitting submitting(c);  // an abort waits for the allocation
  persistent_prepare(c, id);
}

std::shared_ptr<RequestState> comm_submit(dfcclComm* c, core::Desc d, int persistent_id, cudaStream_t stream) {
  if (persistent_id < 0 && hierarchy_routes(c, d)) return hierarchy_submit(c, d, stream);
  std::string mismatch;
  PersistentRef lane{};
  if (persistent_id >= 0) {
    Submitting submitting(c);  // an abort waits for the mapping, which gives up once it sees the abort
    lane = persistent_lane(c, persistent_id);
  }
  auto req = submit_locked(c, d, persistent_id, &lane, stream, &mismatch);
  if (!req) fail_mismatch(c, mismatch);
  return req;
}

void comm_capture_submit(dfcclComm* c, core::Desc d, const CaptureRecord& record) {
  std::string mismatch;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    Submitting submitting(c);
    const MatchKey key{int(core::kGraphLaneId), c->graph_keys};
    d.lane = uint16_t(c->graph_lane);
    d.cs = c->graph_cs;
    mismatch = post_locked(c, key, d, d);
    if (mismatch.empty()) {
      record({{d, &c->dev->graph_turn}});
      c->graph_keys += 1;  // only once recorded: a refused capture must not shift the matching
    }
  }
  if (!mismatch.empty()) fail_mismatch(c, mismatch);
}

void comm_capture_submit_p2p(dfcclComm* c, std::vector<core::Desc> parts, uint32_t lane, const CaptureRecord& record) {
  std::string mismatch;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    Submitting submitting(c);
    P2pConnections& p = c->p2p;
    require_p2p_connections(p);
    if (!p.graph_turns)
      throw Error(dfcclNotSupported, "argument 'stream' is capturing a CUDA graph, and this communicator's "
                                     "point-to-point connections have no captured lanes: set DFCCL_GRAPHS=1 on every "
                                     "rank before creating it (docs/design.md, \"CUDA graphs\")");
    std::vector<int> peers;
    for (const core::Desc& d : parts) peers.push_back(d.root);
    // Host bookkeeping only: no CUDA call, which a capture would refuse.
    p2p_claim(c, peers);
    std::vector<uint64_t> keys = p.graph_keys;  // taken only once every part is recorded
    std::vector<CaptureStart> starts;
    const uint32_t min_chan = c->engine->params().min_chan_bytes;
    for (core::Desc& d : parts) {
      const int dir = d.kind == core::Kind::Send ? 0 : 1, peer = d.root;
      const size_t at = (size_t(lane) * 2 + size_t(dir)) * size_t(c->nranks) + size_t(peer);
      d.lane = uint16_t(lane + kP2pLanes);
      const P2pKey key{d.lane, dir == 0 ? c->rank : peer, dir == 0 ? peer : c->rank, keys[at]++};
      mismatch = c->board->post_p2p(key, d);
      if (!mismatch.empty()) break;
      d.cs = p2p_static(c, peer, dir);
      core::set_channels(d, core::data_channels(d.count * core::dtype_size(d.dtype), d.cs.nchan, min_chan));
      starts.push_back({d, p.graph_turns + at});
    }
    if (mismatch.empty()) {
      record(starts);
      p.graph_keys = std::move(keys);
    }
  }
  if (!mismatch.empty()) fail_mismatch(c, mismatch);
}

std::vector<std::shared_ptr<RequestState>> comm_submit_p2p(dfcclComm* c, std::vector<core::Desc> parts, uint32_t lane,
                                                           cudaStream_t stream) {
  std::string mismatch;
  auto reqs = submit_p2p_locked(c, parts, lane, stream, &mismatch);
  if (!mismatch.empty()) fail_mismatch(c, mismatch);
  return reqs;
}

std::vector<std::shared_ptr<RequestState>> comm_submit_chain(std::vector<ChainPart> parts, cudaStream_t stream) {
  std::vector<dfcclComm*> comms;  // each once, in the order of the parts
  std::vector<uint64_t> keys;     // how many keys each takes: its parts' largest `ahead` + 1
  for (const ChainPart& p : parts) {
    const size_t i = size_t(std::find(comms.begin(), comms.end(), p.comm) - comms.begin());
    if (i == comms.size()) {
      comms.push_back(p.comm);
      keys.push_back(0);
    }
    keys[i] = std::max(keys[i], p.ahead + 1);
  }
  std::string mismatch;
  std::vector<std::shared_ptr<RequestState>> reqs;
  {
    std::vector<std::unique_ptr<Submitting>> submitting;
    std::vector<std::unique_lock<std::mutex>> locks;
    for (dfcclComm* c : comms) {
      locks.emplace_back(c->mu);
      submitting.push_back(std::make_unique<Submitting>(c));
    }
    std::vector<core::Desc> descs;
    std::vector<uint32_t> indices;
    MatchKey called_key;  // the key of the collective the caller called: parts[0]'s
    for (ChainPart& p : parts) {
      const MatchKey key = sequence_key(p.comm, p.d, p.comm->next_key + p.ahead);
      if (&p == &parts.front()) called_key = key;
      else p.comm->board->set_parent_key(key, called_key);
      mismatch = post_locked(p.comm, key, p.signature, p.d);
      if (!mismatch.empty()) break;
      p.d.cs = p.comm->host_dev.s;
      descs.push_back(p.d);
      indices.push_back(p.comm->index);
    }
    if (mismatch.empty()) {
      reqs = parts.front().comm->engine->submit_chain(descs, indices, stream);
      for (size_t i = 0; i < comms.size(); ++i) comms[i]->next_key += keys[i];
    }
  }
  if (!mismatch.empty()) fail_mismatch(parts.front().comm, mismatch);
  return reqs;
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
